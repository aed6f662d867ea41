"""Every diagnostic rule: evidence that triggers it and evidence that must not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.core.serverlog import diagnostics as dg
from tui.core.events import Fact
from tui.core.serverlog.logparse import LogPipeline

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
        d = dg.make(diag_id, "s", ["ev"], tp=8, fix_key="k", host="h", port=1, name="s", model="m", suggest=16,
                    entry="e/", timeout="1 s", advice="a")
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
        assert "server.tensor_parallel_size = 16" in d.remedy and "at tensor-parallel-size 8" in d.remedy
        assert "Failed to allocate" in d.evidence[0]  # the decisive line comes first


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


# ----------------------------------------------------------- generic vLLM (CPU / CUDA) signatures

def facts(platform="cuda", **kw) -> dg.ServeFacts:
    base = dict(platform=platform, tp=2, max_model_len=131072, max_num_seqs=4, target="meta-llama/Llama-3.1-8B",
                draft="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", method="eagle3", speculative=True)
    base.update(kw)
    return dg.ServeFacts(**base)


KV_NEEDED = ("ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is "
             "needed, which is larger than the available KV cache memory (9.5 GiB). Based on the available memory, "
             "the estimated maximum model length is 77824. Try increasing `gpu_memory_utilization` (which also "
             "controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine.")
NO_BLOCKS = ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
             "initializing the engine (this flag also controls CPU memory reservation on the CPU backend, despite its "
             "name).")
CPU_SPACE = ("ValueError: Available memory on node 0 (3.2/7.34 GiB) on kv cache allocation is less than requested "
             "memory for kv (16.0 GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU "
             "memory used by other processes.")
CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 1.06 GiB is free.")
WRAPPER = ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
           "{'EngineCore_DP0': 1}")


def startup_failure(line: str, serve: dg.ServeFacts, wrapper: bool = True) -> list:
    pipe = LogPipeline(platform=serve.platform)
    raw = ["(EngineCore_DP0 pid=3) ERROR 12-01 10:00:00 [core.py:1100] EngineCore failed to start.",
           "(EngineCore_DP0 pid=3) ERROR 12-01 10:00:00 [core.py:1100] Traceback (most recent call last):",
           "(EngineCore_DP0 pid=3) ERROR 12-01 10:00:00 [core.py:1100] " + line]
    if wrapper:
        raw.append("(APIServer pid=1) " + WRAPPER)
    for i, r in enumerate(raw):
        pipe.feed(r, float(i))
    sigs = [(e.kind, e.line, list(e.context[-3:])) for e in pipe.errors]
    return dg.from_log_signatures("baseline", sigs, pipe.root_cause(), pipe.recent_lines()[-8:], 1, serve.tp,
                                  "127.0.0.1", 8000, serve=serve)


def test_kv_cache_insufficient_cuda_names_values():
    (d,) = startup_failure(KV_NEEDED, facts("cuda"))
    assert d.id == "kv-cache-insufficient" and d.severity == "error"
    assert "server.max_model_len (now 131072)" in d.remedy and "vLLM estimates 77824 fits" in d.remedy
    assert "--gpu-memory-utilization" in d.remedy and "now 2" in d.remedy
    assert any("needed 16.0 GiB" in e and "available 9.5 GiB" in e for e in d.evidence)
    assert KV_NEEDED in d.evidence


def test_kv_cache_insufficient_cpu_names_the_env_value():
    (d,) = startup_failure(NO_BLOCKS, facts("cpu", env=(("VLLM_CPU_KVCACHE_SPACE", "1"),), max_model_len=1024))
    assert d.id == "kv-cache-insufficient"
    assert "VLLM_CPU_KVCACHE_SPACE" in d.remedy and "now 1 GiB" in d.remedy and "(now 1024)" in d.remedy
    assert "--gpu-memory-utilization" not in d.remedy
    (d2,) = startup_failure(NO_BLOCKS, facts("cpu", max_model_len=1024))
    assert "not set" in d2.remedy


def test_kv_cache_insufficient_neuron_remedy():
    (d,) = startup_failure(KV_NEEDED, facts("neuron", tp=8, max_model_len=768))
    assert "server.tensor_parallel_size (now 8)" in d.remedy and "(now 768)" in d.remedy
    assert "VLLM_CPU_KVCACHE_SPACE" not in d.remedy


def test_cpu_kv_cache_space():
    (d,) = startup_failure(CPU_SPACE, facts("cpu", env=(("VLLM_CPU_KVCACHE_SPACE", "16"),)))
    assert d.id == "cpu-kv-cache-space"
    assert "VLLM_CPU_KVCACHE_SPACE = 16" in d.remedy and "3.2 GiB free on NUMA node 0" in d.remedy
    (d2,) = startup_failure(CPU_SPACE, facts("cpu"))
    assert "is not set" in d2.remedy and "3.2 GiB" in d2.remedy


def test_cuda_out_of_memory():
    (d,) = startup_failure(CUDA_OOM, facts("cuda", tp=1, max_num_seqs=256))
    assert d.id == "cuda-out-of-memory"
    assert "tensor_parallel_size 1" in d.remedy and "(now 131072)" in d.remedy and "(now 256)" in d.remedy
    assert CUDA_OOM in d.evidence


def test_module_not_found_names_module_and_interpreter():
    (d,) = startup_failure("ModuleNotFoundError: No module named 'pandas'",
                           facts("cpu", vllm_python="/venvs/vllm/bin/python"), wrapper=False)
    assert d.id == "module-not-found"
    assert "pandas" in d.remedy and "/venvs/vllm/bin/python -m pip install pandas" in d.remedy
    (d2,) = startup_failure("ModuleNotFoundError: No module named 'vllm.entrypoints'", facts("cpu"), wrapper=False)
    assert "vLLM itself is not importable" in d2.remedy


def test_vllm_metadata_missing():
    (d,) = startup_failure("importlib.metadata.PackageNotFoundError: No package metadata was found for vllm",
                           facts("cpu"), wrapper=False)
    assert d.id == "vllm-metadata-missing" and "dist-info" in d.remedy


@pytest.mark.parametrize("line", [
    "Failed to import from vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")",
    "CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 1,024 tokens per request: 1024.00x",
    "Available KV cache memory: 52.3 GiB",
    "Graph capturing finished in 6 secs, took 0.55 GiB",
])
def test_generic_vllm_rules_do_not_trigger(line):
    ds = startup_failure(line, facts("cuda"), wrapper=False)
    assert ids(ds) == ["engine-failed"]  # nothing specific: only the generic "EngineCore failed to start"


def test_generic_wrappers_never_hide_the_root_cause():
    ds = startup_failure(KV_NEEDED, facts("cuda"))
    assert "engine-failed" not in ids(ds) and "engine-dead" not in ids(ds)


# ---------------------------------------------------------------- engine died on the first request

SHAPE = ("RuntimeError: Worker failed with error 'mat1 and mat2 shapes cannot be multiplied (9x256 and 384x128)', "
         "please check the stack trace above for the root cause")
DEAD = ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the "
        "root cause.")


def test_first_request_death_is_a_draft_target_mismatch():
    f = facts("cpu", target="/m/target", draft="/m/draft-eagle3")
    errors = [("tensor-shape-mismatch", SHAPE, []), ("engine-dead", DEAD, [])]
    (d,) = dg.first_request_death("eagle3", f, errors, 500, 1)
    assert d.id == "engine-died-on-first-request" and "mismatch" in d.title and "first request" in d.title
    assert d.evidence[0] == SHAPE and "first request: HTTP 500" in d.evidence
    assert "server exited with code 1" in d.evidence
    assert "'/m/draft-eagle3'" in d.remedy and "'/m/target'" in d.remedy
    assert "eagle_aux_hidden_state_layer_ids" in d.remedy and "9x256 and 384x128" in d.remedy


def test_first_request_death_without_draft_is_not_called_a_mismatch():
    errors = [("tensor-shape-mismatch", SHAPE, []), ("engine-dead", DEAD, [])]
    (d,) = dg.first_request_death("baseline", facts("cpu", speculative=False), errors, 500, 1)
    assert d.id == "engine-died-serving" and "mismatch" not in d.title


def test_first_request_failure_without_a_death_raises_nothing():
    assert dg.first_request_death("eagle3", facts("cpu"), [], 404, None) == []


def test_first_request_death_from_the_real_capture():
    pipe = LogPipeline(speculative=True, platform="cpu")
    with open(LOGS / "real_cpu_0.32_eagle3_bad_aux.log", newline="") as fh:
        for i, raw in enumerate(fh.read().split("\n")):
            pipe.feed(raw, float(i))
    errors = [(e.kind, e.line, list(e.context[-3:])) for e in pipe.errors_after_ready()]
    f = facts("cpu", target="/models/tiny/target", draft="/models/tiny/draft-eagle3-badaux")
    (d,) = dg.first_request_death("eagle3", f, errors, 500, 0, pipe.root_cause())
    assert d.id == "engine-died-on-first-request"
    assert d.evidence[0] == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x256 and 384x128)"
    assert "shapes 4x256 and 384x128" in d.remedy and "draft-eagle3-badaux" in d.remedy


def test_serve_facts_from_profile():
    from tui.core.profile.model import profile_from_dict

    prof = profile_from_dict({"models": {"target": "t/target", "draft": "d/draft"},
                              "server": {"tensor_parallel_size": 4, "max_model_len": 2048}})
    f = dg.ServeFacts.from_profile(prof, True, {"VLLM_CPU_KVCACHE_SPACE": "2", "HOME": "/x"}, "/v/bin/python")
    assert (f.platform, f.tp, f.max_model_len, f.target, f.draft, f.speculative) == (
        "neuron", 4, 2048, "t/target", "d/draft", True)  # platform: "neuron" until the profile says otherwise
    assert f.env == (("VLLM_CPU_KVCACHE_SPACE", "2"),) and f.vllm_python == "/v/bin/python"
    prof.data["platform"] = "cpu"
    assert dg.ServeFacts.from_profile(prof).platform == "cpu"


# ----------------------------------------------------------- remedies name the run's own values

def test_throughput_remedy_follows_k_and_acceptance():
    b = {"output_throughput": 100.0, "median_tpot_ms": 7.0}
    e = {"output_throughput": 60.0, "median_tpot_ms": 15.0, "acceptance_rate": 76.0}
    (d,) = dg.throughput_rule("results", b, e, k=1)
    assert "already 1" in d.remedy and "keep num_speculative_tokens = 1" not in d.remedy
    assert "76.0%" in d.remedy and "validate draft and target" not in d.remedy
    (d,) = dg.throughput_rule("results", b, dict(e, acceptance_rate=12.0), k=3)
    assert "now 3" in d.remedy and "12.0%" in d.remedy and "validate draft and target" in d.remedy
    assert dg.throughput_rule("results", b, dict(e, output_throughput=120.0), k=1) == []


def test_compile_failed_remedy_names_the_cache_entry():
    d = dg.compile_failed("baseline", ["neuronx-cc compilation failed with 1"], "MODULE_abc123",
                          "/cache/neuron/compile_cache")
    assert "/cache/neuron/compile_cache/MODULE_abc123/log-neuron-cc.txt" in d.remedy
    assert "compile-cache key: MODULE_abc123" in d.evidence
    d = dg.compile_failed("baseline", ["x"], None, None)
    assert "<key>" in d.remedy  # unknown: says where to look, without inventing a key


def test_startup_timeout_and_hbm_remedies_name_the_model():
    d = dg.startup_timeout("baseline", ["no readiness"], "meta-llama/Llama-3.1-8B-Instruct", 900.0)
    assert "meta-llama/Llama-3.1-8B-Instruct" in d.remedy and "900 s" in d.remedy and "gpt-oss" not in d.remedy
    d = dg.hbm("baseline", ["Failed to allocate 5GB"], 4, model="openai/gpt-oss-20b")
    assert "openai/gpt-oss-20b" in d.remedy and "GPT-OSS-120B" not in d.remedy
    d = dg.hbm("env", ["HBM fit: 40 GiB per core > 24 GiB"], 8, model="m",
               remedy="set [server] tensor_parallel_size = 16 or higher (TP8 needs 40 GiB of 24 GiB per core)")
    assert d.remedy.startswith("set [server] tensor_parallel_size = 16 or higher (TP8 needs")


# -- the decisive line first (issue 15, item 6) -------------------------------------------------------------

NCC_RUN = [
    "(EngineCore_DP0 pid=40) (Worker_TP0 pid=41) 2026-12-02 02:37:04,295 - INFO - cache.py:163 - Waiting for "
    "shared compilation by process 41 (VLLM::Worker_TP0)",
    "(EngineCore_DP0 pid=40) (Worker_TP0 pid=41) 2026-12-02 02:37:04,295 - INFO - backend.py:240 - Compiling...",
    "2026-12-02T02:37:04Z ERROR 1041 [neuronxcc.driver.CommandDriver]: " + "*" * 63,
    "2026-12-02T02:37:04Z ERROR 1041 [neuronxcc.driver.CommandDriver]:  An Internal Compiler Error has occurred",
    "2026-12-02T02:37:04Z ERROR 1041 [neuronxcc.driver.CommandDriver]: " + "*" * 63,
    "2026-12-02T02:37:04Z ERROR 1041 [neuronxcc.driver.CommandDriver]: [INTERNAL_ERROR] [NCC_ITEN406] Unhandled "
    "exception with message: tensorizer failed to lower operator in target_prefill_512_512 (internal shape check)",
    "(EngineCore_DP0 pid=40) (Worker_TP0 pid=41) 2026-12-02 02:37:04,696 - ERROR - backend.py:322 - Compilation "
    "failed - terminating process for cleanup: neuronx-cc compilation failed with 1. Check compiler logs.",
    "(EngineCore_DP0 pid=40) (Worker_TP0 pid=41) 2026-12-02 02:37:04,696 - ERROR - backend.py:325 - FATAL: "
    "neuronx-cc compilation failed with 1. Check compiler logs.",
    "(EngineCore_DP0 pid=40) (Worker_TP0 pid=41) Traceback (most recent call last):",
    "(EngineCore_DP0 pid=40) (Worker_TP0 pid=41) RuntimeError: neuronx-cc compilation failed with 1. Check "
    "compiler logs.",
    "(EngineCore_DP0 pid=40) ERROR 12-02 02:37:04 [core.py:708] EngineCore failed to start.",
    "(EngineCore_DP0 pid=40) RuntimeError: Worker failed with error 'neuronx-cc compilation failed with 1. Check "
    "compiler logs.', please check the stack trace above for the root cause",
    "(APIServer pid=39) RuntimeError: Engine core initialization failed. See root cause above. Failed core "
    "proc(s): {'EngineCore_DP0': 1}",
]


def _watch(lines):
    from tui.core.serverlog.logwatch import ServeLogWatcher
    events = []
    w = ServeLogWatcher(events.append, "baseline", speculative=False, verbose_lines=False, platform="neuron")
    for i, raw in enumerate(lines):
        w.on_line(raw, 100.0 + i * 0.01)
    return w, events


def test_compile_failure_quotes_the_ncc_line_first_not_the_banner():
    w, _ = _watch(NCC_RUN)
    diags = dg.from_log_signatures("baseline", w.error_signatures(), w.root_cause(), w.last_lines(8), 1, 16,
                                   "127.0.0.1", 8000)
    assert ids(diags) == ["compile-failed"]
    ev = diags[0].evidence
    assert "[NCC_ITEN406]" in ev[0] and "failed to lower operator" in ev[0]
    assert not any(set(x) <= {"*", " "} for x in ev), ev  # a banner of asterisks is never evidence
    # the banner's text and the generic wrappers come after every line that names the cause (or not at all)
    causes = [i for i, x in enumerate(ev) if "NCC_" in x or x.startswith(("FATAL", "RuntimeError: neuronx"))]
    banner = [i for i, x in enumerate(ev) if "Internal Compiler Error" in x]
    assert causes and all(b > max(causes) for b in banner)
    assert len(ev) <= dg.LOG_EVIDENCE_LINES
    assert "NCC_ITEN406" in (w.root_cause() or "")


def test_nrt_and_exception_lines_outrank_boilerplate():
    from tui.core.serverlog.logparse import evidence_rank, rank_evidence
    nrt = "Logical Neuron Core(s) not available - Requested:lnc0-lnc0 Available:0 Logical Core size:2"
    exc = "RuntimeError: The PyTorch Neuron Runtime could not be initialized."
    plain_exc = "ValueError: max_model_len 9000 is greater than the model's 8192"
    wrapper = "RuntimeError: Engine core initialization failed. See root cause above."
    banner = "=" * 80
    assert evidence_rank(nrt) == 0 and evidence_rank(exc) == 0
    assert evidence_rank(plain_exc) == 1
    assert evidence_rank("Traceback (most recent call last):") == 4 and evidence_rank(wrapper) == 4
    assert rank_evidence([banner, wrapper, "Compiling...", plain_exc, nrt, nrt]) == [
        nrt, plain_exc, "Compiling...", wrapper]


def test_hbm_evidence_keeps_the_allocation_line_first():
    d = dg.hbm("baseline", ["An Internal Compiler Error has occurred", "Warming up",
                            "Failed to allocate 4.000GB (alignment: none, usage: tensors) on ND 0:NC 4"], tp=8)
    assert d.evidence[0].startswith("Failed to allocate")
    assert d.evidence[-1] == "An Internal Compiler Error has occurred"


def test_the_failed_phase_is_marked_failed_not_finished():
    from tui.core.events import Phase
    w, events = _watch(["(APIServer pid=39) INFO 12-02 02:37:00 [api_server.py:1] vLLM API server version 0.24.0",
                        *NCC_RUN])
    w.finish(failed=True)
    compile_ev = [(e.phase, e.status) for e in events if isinstance(e, Phase) and e.phase == "compile"]
    assert compile_ev == [("compile", "started"), ("compile", "failed")]
    assert w.failed_phase == "compile"
    assert [p for p in w.summary()["phases"] if p.get("failed")] == [
        next(p for p in w.summary()["phases"] if p["phase"] == "compile")]
    # a clean end of stream (our own stop) still finishes the phase
    w2, events2 = _watch(NCC_RUN[:2])
    w2.finish()
    assert [e.status for e in events2 if isinstance(e, Phase)][-1] == "finished" and w2.failed_phase is None


def test_near_zero_acceptance_points_past_a_verifier_the_checkpoints_step_matched():
    shared = {"target": {"name": "openai/gpt-oss-120b", "commit": "053db7544fa5be570d8de426bcc54f5bbca0da6d"},
              "draft": {"name": "RedHatAI/gpt-oss-120b-speculator.eagle3", "config": {"draft_vocab_size": 64000}},
              "checks": {"draft type": "pass", "draft verifier": "pass", "hidden size": "pass", "vocab size": "pass",
                         "vocab mapping": "info", "aux layers": "pass"}}
    pair = dg.checkpoint_pair(shared)
    assert pair["verifier_matches"] is True
    (d,) = dg.acceptance_rules("results", 0.45, 1.0, pair=pair)
    assert d.id == "acceptance-near-zero"
    assert "verifier is not the cause" in d.remedy and "trained against this exact target" not in d.remedy
    assert "053db7544fa5" in d.remedy and "d2t" in d.remedy and "chat" in d.remedy
    assert any("verifier is openai/gpt-oss-120b" in x for x in d.evidence)
    # a verifier the checkpoints step did not match (or no checkpoints step): the tutorial's remedy
    bad = dict(shared, checks=dict(shared["checks"], **{"draft verifier": "warn"}))
    for p in (dg.checkpoint_pair(bad), dg.checkpoint_pair(None), {}):
        (d,) = dg.acceptance_rules("results", 0.45, 1.0, pair=p)
        assert "speculators_config.verifier" in d.remedy


def test_cores_busy_env_remedy_names_the_holder():
    f = Fact("env", "Neuron cores free", "busy (1 process)", "fail",
             "held: pid 4242 `python3 /x/holder/vllm serve openai/gpt-oss-120b` on devices 0-3 (cores 0-15)",
             "stop that process, e.g. `kill 4242` (TP16 needs cores 0-15), then retry")
    (d,) = dg.from_env_facts("env", [f])
    assert d.id == "neuron-cores-busy"
    assert "pid 4242" in d.remedy and "vllm serve" in d.remedy and "`kill 4242`" in d.remedy
