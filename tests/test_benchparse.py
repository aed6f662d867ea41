"""tui.core.bench.benchparse on every `vllm bench serve` output shape (fixtures in tests/fixtures/bench)."""

from __future__ import annotations

import io
import math
import random
from pathlib import Path

import pytest
from tqdm import tqdm

from tui.core.bench.benchparse import (BenchParseError, Progress, TqdmProgressParser, parse_result_json,
                                 parse_stdout_blocks, parse_tqdm_line)

FIX = Path(__file__).parent / "fixtures" / "bench"
SHAPES = ["v0_11_baseline", "v0_11_eagle3", "v0_14_baseline", "v0_14_eagle3", "v0_31_baseline", "v0_31_eagle3",
          "v0_33_eagle3"]


# --------------------------------------------------------------------------------------------- JSON

def test_v0_11_shape_derives_failed_and_has_no_spec():
    res = parse_result_json(FIX / "v0_11_baseline.json")
    assert res.completed == 29 and res.num_prompts == 30
    assert res.failed == 1 and res.failed_reported is False
    assert res.spec is None and res.latencies is None and res.queue_times is None
    assert res.request_rate == math.inf and res.max_concurrency == 1
    assert res.model_id == "openai/gpt-oss-120b"
    assert res.ttft.median == pytest.approx(252.33)
    assert res.ttft.p50 == pytest.approx(252.33) and res.ttft.p90 == pytest.approx(268.33)
    assert res.ttft.p99 == pytest.approx(272.33)
    assert res.e2el is not None and res.e2el.median == pytest.approx(1141.3)
    assert res.duration == pytest.approx(34.25)
    assert res.output_throughput == pytest.approx(29 * 128 / 34.25)
    assert res.raw["num_prompts"] == 30
    # vLLM 0.11 cannot report acceptance even against a spec server.
    assert parse_result_json(FIX / "v0_11_eagle3.json").spec is None


def test_v0_14_shape_spec_keys_in_percent():
    base = parse_result_json(FIX / "v0_14_baseline.json")
    assert base.failed == 0 and base.failed_reported is True
    assert base.spec is None
    assert base.e2el is None  # default --percentile-metrics has no e2el
    assert base.tpot.p50 is None and base.tpot.p99 == pytest.approx(7.4)
    spec = parse_result_json(str(FIX / "v0_14_eagle3.json")).spec
    assert spec is not None
    assert spec.acceptance_rate == pytest.approx(1566 / 2270 * 100)
    assert spec.acceptance_length == pytest.approx(1 + 1566 / 2270)
    assert (spec.num_drafts, spec.draft_tokens, spec.accepted_tokens) == (2270, 2270, 1566)
    assert spec.per_position == [pytest.approx(1566 / 2270 * 100)]  # fractions in the file, percent here
    assert spec.to_vllm_json()["spec_decode_per_position_acceptance_rates"] == [pytest.approx(1566 / 2270)]


def test_v0_31_and_v0_33_shapes():
    res = parse_result_json(FIX / "v0_31_eagle3.json")
    assert len(res.latencies) == 30 and len(res.queue_times) == 30
    assert res.queue_times[0] == 0.0
    assert res.spec is not None and res.tpot.median == pytest.approx(5.82)
    new = parse_result_json(FIX / "v0_33_eagle3.json")
    assert new.label == "eagle3"
    assert new.raw["run"] == "2" and new.raw["profile"] == "demo"  # --metadata keys
    assert new.ttft.percentiles["99.9"] == pytest.approx(218.21 + 22.0)
    assert set(new.ttft.percentiles) == {"50", "90", "99", "99.9"}
    assert new.spec.acceptance_rate == pytest.approx(68.986, abs=1e-3)


def test_text_input_and_nan_values():
    res = parse_result_json((FIX / "nan_all_failed.json").read_text())
    assert res.source == "<string>"
    assert res.completed == 0 and res.failed == 30
    assert math.isnan(res.ttft.mean) and math.isnan(res.tpot.p99) and math.isnan(res.e2el.median)
    assert res.output_throughput == 0.0


def test_append_result_file_takes_last_object():
    text = (FIX / "append.json").read_text()
    assert len(text.splitlines()) == 2
    res = parse_result_json(FIX / "append.json")
    assert res.completed == 28 and res.failed == 2
    assert res.spec is not None


def test_indented_sweep_file():
    res = parse_result_json(FIX / "sweep_indented.json")
    assert res.raw["run_number"] == 0 and res.spec is not None


def test_minimal_and_missing_keys():
    res = parse_result_json('{"completed": 3, "duration": 1.5, "num_prompts": 4}')
    assert res.failed == 1 and res.failed_reported is False
    assert res.ttft is None and res.spec is None and res.output_throughput is None
    assert res.request_rate is None
    res = parse_result_json('{"completed": 3, "duration": 1.5, "request_rate": 2.5}')
    assert res.failed == 0 and res.num_prompts is None and res.request_rate == 2.5


def test_malformed_file_names_file_and_problem(tmp_path):
    with pytest.raises(BenchParseError) as ei:
        parse_result_json(FIX / "malformed.json")
    assert "malformed.json" in str(ei.value) and "invalid JSON" in str(ei.value)
    p = tmp_path / "empty.json"
    p.write_text("  \n")
    with pytest.raises(BenchParseError, match="empty.json: empty file"):
        parse_result_json(p)
    p = tmp_path / "list.json"
    p.write_text("[1, 2]")
    with pytest.raises(BenchParseError, match="list.json: expected a JSON object"):
        parse_result_json(p)
    p = tmp_path / "other.json"
    p.write_text('{"hello": 1}')
    with pytest.raises(BenchParseError, match=r"other.json: missing key 'completed'"):
        parse_result_json(p)
    with pytest.raises(BenchParseError, match="'completed' is not a number"):
        parse_result_json('{"completed": "x", "duration": 1}')
    with pytest.raises(BenchParseError, match="'latencies' is not a list"):
        parse_result_json('{"completed": 1, "duration": 1, "latencies": 3}')
    with pytest.raises(FileNotFoundError):
        parse_result_json(tmp_path / "missing.json")
    assert isinstance(BenchParseError("f", "p"), ValueError)


# --------------------------------------------------------------------------------------------- stdout

@pytest.mark.parametrize("name", SHAPES)
def test_stdout_block_agrees_with_json(name):
    res = parse_result_json(FIX / f"{name}.json")
    blocks = parse_stdout_blocks((FIX / f"{name}.txt").read_text())
    s = blocks["serving"]
    assert s["Successful requests"] == res.completed
    if res.failed_reported:
        assert s["Failed requests"] == res.failed
    else:
        assert "Failed requests" not in s
    assert s["Benchmark duration (s)"] == round(res.duration, 2)
    assert s["Total input tokens"] == res.total_input_tokens
    assert s["Output token throughput (tok/s)"] == round(res.output_throughput, 2)
    assert s["Total token throughput (tok/s)"] == round(res.total_token_throughput, 2)  # both capitalisations
    assert s["Peak concurrent requests"] == 1.0
    for metric, short in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL")):
        st = res.latency(metric)
        if st is None:
            assert f"Mean {short} (ms)" not in s
            continue
        assert s[f"Mean {short} (ms)"] == round(st.mean, 2)
        assert s[f"Median {short} (ms)"] == round(st.median, 2)
        for p, v in st.percentiles.items():
            assert s[f"P{p} {short} (ms)"] == round(v, 2)
    if res.spec is None:
        assert blocks["spec"] is None and blocks["per_position"] == []
    else:
        sp = blocks["spec"]
        assert sp["Acceptance rate (%)"] == round(res.spec.acceptance_rate, 2)
        assert sp["Acceptance length"] == round(res.spec.acceptance_length, 2)
        assert sp["Drafts"] == res.spec.num_drafts
        assert sp["Draft tokens"] == res.spec.draft_tokens
        assert sp["Accepted tokens"] == res.spec.accepted_tokens
        assert blocks["per_position"] == [round(p, 2) for p in res.spec.per_position]


def test_stdout_trailing_spaces_tqdm_noise_and_several_positions():
    text = (
        "Starting main benchmark run...\n"
        "  0%|          | 0/3 [00:00<?, ?it/s]\r100%|##########| 3/3 [00:01<00:00,  2.00it/s]"
        "============ Serving Benchmark Result ============\n"
        "Successful requests:                     3         \n"
        "Total Token throughput (tok/s):          12.50     \n"
        "---------------Time to First Token----------------\n"
        "Mean TTFT (ms):                          10.00     \n"
        "---------------Speculative Decoding---------------\n"
        "Acceptance rate (%):                     50.00     \n"
        "Acceptance length:                       2.50      \n"
        "Drafts:                                  10        \n"
        "Draft tokens:                            30        \n"
        "Accepted tokens:                         15        \n"
        "Per-position acceptance (%):\n"
        "  Position 0:                            80.00     \n"
        "  Position 1:                            50.00     \n"
        "  Position 2:                            20.00     \n"
        "==================================================\n"
        "some later line: 5\n"
    )
    b = parse_stdout_blocks(text)
    assert b["serving"] == {"Successful requests": 3.0, "Total token throughput (tok/s)": 12.5, "Mean TTFT (ms)": 10.0}
    assert b["spec"] == {"Acceptance rate (%)": 50.0, "Acceptance length": 2.5, "Drafts": 10.0,
                         "Draft tokens": 30.0, "Accepted tokens": 15.0}
    assert b["per_position"] == [80.0, 50.0, 20.0]


def test_stdout_without_block_and_last_block_wins():
    assert parse_stdout_blocks("Starting main benchmark run...\n") == {"serving": {}, "spec": None, "per_position": []}
    one = (FIX / "v0_14_baseline.txt").read_text()
    two = (FIX / "v0_14_eagle3.txt").read_text()
    b = parse_stdout_blocks(one + two)
    assert b["spec"] is not None
    assert b["serving"]["Mean TPOT (ms)"] == round(parse_result_json(FIX / "v0_14_eagle3.json").tpot.mean, 2)


# --------------------------------------------------------------------------------------------- tqdm

def _real_tqdm_output(total: int, **kw) -> str:
    sio = io.StringIO()
    bar = tqdm(total=total, file=sio, mininterval=0, miniters=1, **kw)
    for _ in range(total):
        bar.update(1)
    bar.close()
    return sio.getvalue()


@pytest.mark.parametrize("ascii_bar", [True, False])
def test_tqdm_parser_on_real_tqdm_output(ascii_bar):
    out = _real_tqdm_output(30, ascii=ascii_bar)
    assert "\r" in out and "30/30" in out
    rng = random.Random(7)
    parser = TqdmProgressParser()
    seen: list[Progress] = []
    i = 0
    while i < len(out):  # arbitrary chunk boundaries, as read from a pipe
        j = i + rng.randint(1, 40)
        p = parser.feed(out[i:j].encode())
        if p is not None:
            seen.append(p)
        i = j
    ns = [p.n for p in seen]
    assert ns == sorted(ns) and ns[-1] == 30 and ns[0] <= 1
    assert all(p.total == 30 for p in seen)
    last = parser.last
    assert last.n == 30 and last.percent == 100.0 and last.eta == 0.0 and last.elapsed is not None
    assert last.rate is not None and last.rate > 0


def test_tqdm_parser_each_update_once_per_segment():
    out = _real_tqdm_output(5)
    segments = [s for s in out.replace("\n", "\r").split("\r") if s]
    parser = TqdmProgressParser()
    results = [parser.feed(seg + "\r") for seg in segments]
    assert all(r is not None for r in results)
    ns = [r.n for r in results]
    # tqdm redraws the final state on close(): one result per segment, never merged or skipped.
    assert len(ns) == len(segments) and sorted(set(ns)) == list(range(0, 6)) and ns == sorted(ns)


def test_tqdm_format_variants():
    start = parse_tqdm_line(tqdm.format_meter(n=0, total=30, elapsed=0))
    assert (start.n, start.total, start.rate, start.eta, start.percent) == (0, 30, None, None, 0.0)
    slow = parse_tqdm_line(tqdm.format_meter(n=1, total=30, elapsed=5.0))  # "5.00s/it"
    assert "s/it" in tqdm.format_meter(n=1, total=30, elapsed=5.0)
    assert slow.rate == pytest.approx(0.2) and slow.elapsed == 5.0 and slow.eta == pytest.approx(145.0)
    fast = parse_tqdm_line(tqdm.format_meter(n=12, total=30, elapsed=5.0))
    assert fast.rate == pytest.approx(2.4) and fast.percent == 40.0
    long = parse_tqdm_line(tqdm.format_meter(n=5, total=30, elapsed=3725.0))
    assert long.elapsed == 3725.0
    unknown = parse_tqdm_line(tqdm.format_meter(n=12, total=None, elapsed=5.0))
    assert (unknown.n, unknown.total, unknown.percent) == (12, None, None)
    assert unknown.rate == pytest.approx(2.4)
    desc = parse_tqdm_line(tqdm.format_meter(n=3, total=4, elapsed=1.0, prefix="Requests"))
    assert (desc.n, desc.total) == (3, 4)
    assert parse_tqdm_line("Starting main benchmark run...") is None
    assert TqdmProgressParser().feed("no bar here\n") is None


def test_e2el_percentiles_parsed():
    """Metric names with digits (e2el) keep their percentile keys (p99_e2el_ms)."""
    from tui.core.bench.benchparse import parse_result_json as _parse

    text = ('{"completed": 2, "failed": 0, "num_prompts": 2, "duration": 1.0, "output_throughput": 1.0, '
            '"mean_e2el_ms": 10.0, "median_e2el_ms": 9.0, "p50_e2el_ms": 9.0, "p99_e2el_ms": 12.5}')
    r = _parse(text)
    assert r.e2el is not None and r.e2el.p99 == 12.5 and r.e2el.p50 == 9.0
