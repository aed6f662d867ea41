"""Every diagnostic rule: evidence that triggers it and evidence that must not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.core import diagnostics as dg
from tui.core.events import Fact
from tui.core.logparse import LogPipeline

LOGS = Path(__file__).parent / "fixtures" / "logs"


def ids(diags) -> list[str]:
    return [d.id for d in diags]


def test_catalogue_entries_are_complete():
    required = {
        "acceptance-near-zero", "acceptance-low", "hbm-allocation-failure", "bf16-checkpoint-not-needed",
        "throughput-regressed", "greedy-output-mismatch", "draft-target-mismatch", "compile-failed",
        "compile-oom-killed", "neuron-cores-busy", "engine-startup-timeout", "port-in-use",
        "neuron-rt-visible-cores-set", "placeholder-vllm-neuron", "sdk-too-old", "sonnet-removed-in-vllm",
        "bench-requests-failed", "acceptance-stats-disagree", "server-exposed",
    }
    assert required <= set(dg.CATALOG)
    for diag_id, e in dg.CATALOG.items():
        assert e.severity in ("error", "warning", "info") and e.title and e.remedy, diag_id
        d = dg.make(diag_id, "s", ["ev"], tp=8, fix_key="k", host="h", port=1, name="s")
        assert d.id == diag_id and d.evidence == ("ev",) and "{" not in d.remedy.replace("{\"", "").replace("{}", "")


@pytest.mark.parametrize("rate,expected", [(0.0, ["acceptance-near-zero"]), (4.9, ["acceptance-near-zero"]),
                                           (5.0, ["acceptance-low"]), (29.9, ["acceptance-low"]),
                                           (30.0, []), (69.0, []), (None, [])])
def test_acceptance_rules(rate, expected):
    diags = dg.acceptance_rules("results", rate, None if rate is None else 1 + rate / 100, [rate or 0.0])
    assert ids(diags) == expected
    if diags:
        assert any(f"{rate:.2f}%" in ev for ev in diags[0].evidence)


def test_throughput_rule():
    b = {"output_throughput": 112.13, "median_tpot_ms": 7.0}
    regressed = dg.throughput_rule("results", b, {"output_throughput": 100.0, "median_tpot_ms": 8.0,
                                                  "acceptance_rate": 3.0})
    assert ids(regressed) == ["throughput-regressed"]
    assert any("acceptance rate 3.00%" in ev for ev in regressed[0].evidence)
    assert ids(dg.throughput_rule("results", b, {"output_throughput": 112.13})) == ["throughput-regressed"]  # equal
    assert dg.throughput_rule("results", b, {"output_throughput": 134.53}) == []
    assert dg.throughput_rule("results", None, {"output_throughput": 1.0}) == []
    assert dg.throughput_rule("results", {"output_throughput": float("nan")}, {"output_throughput": 1.0}) == []


def test_failed_requests_rule():
    # Any failed request is an error (the numbers are not comparable); the bench's exit code plays no part.
    some = dg.failed_requests_rule("baseline", {"failed": 2, "completed": 28})
    assert ids(some) == ["bench-requests-failed"] and some[0].severity == "error"
    allf = dg.failed_requests_rule("eagle3", {"failed": 10, "completed": 0,
                                              "first_error": "ClientConnectorError: Cannot connect to host"})
    assert allf[0].severity == "error"
    assert allf[0].evidence[:2] == ("0 completed, 10 failed (of 10 requests)",
                                    "first error: ClientConnectorError: Cannot connect to host")
    assert "eagle3.serve.log" in allf[0].remedy
    assert dg.failed_requests_rule("baseline", {"failed": 0, "completed": 30}) == []


def test_agreement_rule():
    assert ids(dg.agreement_rule("eagle3", 69.0, 55.0)) == ["acceptance-stats-disagree"]
    assert dg.agreement_rule("eagle3", 69.0, 69.4) == []
    assert dg.agreement_rule("eagle3", None, 69.0) == []


def test_greedy_rule():
    assert ids(dg.greedy_rule("eagle3", "6 7 8 9 10 ", "6 7 8 9 11 ")) == ["greedy-output-mismatch"]
    assert dg.greedy_rule("eagle3", "6 7 8 9 10 ", "6 7 8 9 10 ") == []
    assert dg.greedy_rule("eagle3", None, "x") == []


def test_server_exposed_rule():
    assert ids(dg.server_exposed_rule("env", "0.0.0.0")) == ["server-exposed"]
    assert ids(dg.server_exposed_rule("env", "::")) == ["server-exposed"]
    assert dg.server_exposed_rule("env", "127.0.0.1") == []


def test_bf16_rule():
    cleared = {"quantization_config": {}}
    assert ids(dg.bf16_rule("checkpoints", "unsloth/gpt-oss-120b-BF16", cleared, False)) == \
        ["bf16-checkpoint-not-needed"]
    assert ids(dg.bf16_rule("checkpoints", "openai/gpt-oss-120b", {}, True)) == ["bf16-checkpoint-not-needed"]
    assert dg.bf16_rule("checkpoints", "openai/gpt-oss-120b", cleared, True) == []
    assert dg.bf16_rule("checkpoints", "openai/gpt-oss-120b", {}, False) == []


def fact(name, value, status, detail=""):
    return Fact("env", name, value, status, detail, "")


@pytest.mark.parametrize("f,expected", [
    (fact("vllm-neuron", "0.1.0 (placeholder)", "fail", "WRONG PACKAGE placeholder from PyPI"),
     "placeholder-vllm-neuron"),
    (fact("Neuron SDK", "2.28", "fail", "the profile needs 2.31"), "sdk-too-old"),
    (fact("sonnet dataset", "removed", "fail"), "sonnet-removed-in-vllm"),
    (fact("NEURON_RT_VISIBLE_CORES", "0-15", "fail"), "neuron-rt-visible-cores-set"),
    (fact("server port", "127.0.0.1:8000 in use", "fail"), "port-in-use"),
    (fact("Neuron cores free", "busy", "fail", "pid 42 holds cores 0-3"), "neuron-cores-busy"),
    (fact("bind address", "0.0.0.0", "warn"), "server-exposed"),
])
def test_env_facts_trigger(f, expected):
    assert ids(dg.from_env_facts("env", [f], host="127.0.0.1", port=8000)) == [expected]


@pytest.mark.parametrize("f", [
    fact("vllm-neuron", "0.24.0.1.1.0", "pass"),
    fact("vllm-neuron", "not installed", "fail", "no vllm-neuron distribution"),  # missing, not the placeholder
    fact("Neuron SDK", "unknown", "warn"),
    fact("Neuron SDK", "2.32", "pass"),
    fact("sonnet dataset", "available", "pass"),
    fact("NEURON_RT_VISIBLE_CORES", "unset", "pass"),
    fact("server port", "free", "pass"),
    fact("bind address", "127.0.0.1", "pass"),
    fact("host RAM", "2048 GiB", "info"),
])
def test_env_facts_do_not_trigger(f):
    assert dg.from_env_facts("env", [f]) == []


def signatures_of(fixture: str) -> tuple[list, str | None, list[str]]:
    pipe = LogPipeline(speculative=True)
    with open(LOGS / fixture, newline="") as fh:
        for i, raw in enumerate(fh.read().split("\n")):
            pipe.feed(raw, float(i) * 0.01)
    sigs, seen = [], set()
    for e in pipe.errors:
        if e.kind not in seen:
            seen.add(e.kind)
            sigs.append((e.kind, e.line, list(e.context[-3:])))
    return sigs, pipe.root_cause(), pipe.recent_lines()[-8:]


def fixture_named(part: str) -> str:
    names = sorted(p.name for p in LOGS.glob("*.log") if part in p.name)
    assert names, part
    return names[0]


@pytest.mark.parametrize("part,expected", [
    ("hbm", "hbm-allocation-failure"),
    ("oom", "compile-oom-killed"),
    ("busy", "neuron-cores-busy"),
    ("timeout", "engine-startup-timeout"),
])
def test_log_signatures_to_diagnoses(part, expected):
    sigs, root, last = signatures_of(fixture_named(part))
    diags = dg.from_log_signatures("baseline", sigs, root, last, 1, 8, "127.0.0.1", 8000)
    assert expected in ids(diags)
    assert "engine-failed" not in ids(diags)  # the generic wrapper never hides the root cause
    if expected == "hbm-allocation-failure":
        d = diags[ids(diags).index(expected)]
        assert "tensor-parallel-size 16" in d.remedy and any("Failed to allocate" in ev for ev in d.evidence)


def test_clean_startup_log_has_no_error_diagnoses():
    sigs, root, last = signatures_of(fixture_named("cold"))
    assert sigs == []


def test_generic_engine_failure_quotes_root_cause():
    sigs = [("engine-failed", "RuntimeError: Engine core initialization failed. See root cause above.", [])]
    d = dg.from_log_signatures("eagle3", sigs, "ValueError: bad bucket", ["x"], 1, 16, "127.0.0.1", 8000)
    assert ids(d) == ["engine-failed"] and d[0].evidence == ("ValueError: bad bucket",)
    d = dg.from_log_signatures("eagle3", [], None, ["last line"], 3, 16, "127.0.0.1", 8000)
    assert ids(d) == ["server-exited"] and "exit code 3" in d[0].evidence


@pytest.mark.parametrize("line,expected", [
    ("OSError: [Errno 98] Address already in use", "port-in-use"),
    ("RuntimeError: NEURON_RT_VISIBLE_CORES cannot be used with multi-processing execution on vLLM. Set "
     "NEURON_VISIBLE_DEVICES to control device visibility.", "neuron-rt-visible-cores-set"),
    ("ImportError: WRONG PACKAGE. Please install the package from Neuron Repository - "
     "pip.repos.neuron.amazonaws.com", "placeholder-vllm-neuron"),
    ("RuntimeError: neuronx-cc compilation failed with 1. Check compiler logs.", "compile-failed"),
])
def test_single_line_signatures(line, expected):
    pipe = LogPipeline()
    pipe.feed(line, 0.0)
    sigs = [(e.kind, e.line, list(e.context)) for e in pipe.errors]
    assert ids(dg.from_log_signatures("baseline", sigs, None, [], 1, 16, "127.0.0.1", 8000)) == [expected]


def test_hbm_remedy_at_tp16_does_not_recommend_tp16():
    d = dg.hbm("baseline", ["Failed to allocate 4.000GB on ND 0:NC 4"], 16)
    assert "tensor-parallel-size 16 or higher" not in d.remedy
