"""tui.core.serverlog.logparse on generic vLLM (CPU / CUDA) logs: real captures and vLLM's format strings, our own stop,
the generic error signatures. The Neuron route is test_logparse.py."""
from __future__ import annotations

import re

import pytest

from tui.core.serverlog.logparse import (
    ERROR_KINDS,
    VLLM_PHASES,
    CacheResult,
    CleanLine,
    ErrorSignature,
    LogPipeline,
    PhaseChange,
    Ready,
    Timing,
    classify_error,
    clean_line,
)


from logparse_util import COLD, WARM, HBM, OOM, BUSY, TIMEOUT, TQDM, ts_of, read, run


# ------------------------------------------------------------------- generic vLLM (CPU / CUDA) route

REAL_CPU = "real_cpu_0.32_baseline.log"  # a real vLLM 0.32 CPU capture (see fixtures/logs/README.md)
CUDA = "cuda_0.32_eagle3_from_source.log"  # hand-written from vLLM 0.32's format strings
STOP_MARK = "[shutdown] API server: shutdown triggered"  # the first line vLLM prints after our SIGINT


def test_real_cpu_log_phases_timings_and_cache():
    r = run(REAL_CPU, False)
    assert r.pipe.route == "vllm"
    assert [p.name for p in r.pipe.phases] == ["config", "weights", "compile", "kv-cache", "engine", "api", "ready"]
    assert [p.name for p in r.pipe.phases] == [p for p in VLLM_PHASES if p not in ("draft", "cuda-graphs")]
    starts = {p.name: p.detail for p in r.pipe.phases}
    assert starts["weights"].startswith("Starting to load model ")
    assert starts["compile"] == "Warming up model for the compilation..."
    assert starts["kv-cache"].startswith("Explicitly set (1.0/") and "GiB for KV cache on node 0" in starts["kv-cache"]
    assert starts["engine"].startswith("init engine (profile, create kv cache, warmup model) took")
    assert starts["api"] == "Supported tasks: ['generate']"
    names = {t.name: t.seconds for t in r.of(Timing)}
    assert names["weights"] == 0.02 and names["init_engine"] == 61.95 and names["profile_run"] == 0.46
    assert r.pipe.phase_record("weights").reported_s == 0.02
    assert r.pipe.phase_record("engine").reported_s == 61.95
    (cache,) = r.of(CacheResult)  # the AOT-compiled backbone was saved: a torch.compile cache miss
    assert not cache.hit and cache.source == "torch-compile" and cache.key.startswith("[backbone] AOT ")
    assert r.pipe.ready and len(r.of(Ready)) == 1


def test_real_cpu_log_has_no_errors():
    r = run(REAL_CPU, False)
    assert r.pipe.errors == []
    assert not [c.text for c in r.of(CleanLine) if c.is_error]


def test_cuda_log_phases_timings_and_cache():
    r = run(CUDA, True)
    assert r.pipe.route == "vllm"
    assert [p.name for p in r.pipe.phases] == list(VLLM_PHASES)
    assert r.pipe.phase_record("weights").reported_s == 3.71  # the target's own load
    assert r.pipe.phase_record("draft").reported_s == 0.21  # the drafter's "Loading weights took"
    assert r.pipe.phase_record("compile").reported_s == pytest.approx(29.10 + 3.85)  # backbone + eagle_head
    assert r.pipe.phase_record("cuda-graphs").reported_s == 6.0
    assert r.pipe.phase_record("engine").reported_s == 50.12
    assert r.pipe.phase_record("cuda-graphs").detail.startswith("Capturing CUDA graphs (mixed prefill-decode")
    names = [t.name for t in r.of(Timing)]
    assert names == ["weights", "weights", "model_load", "dynamo", "graph_compile", "compile", "dynamo",
                     "graph_compile", "compile", "profile_run", "cuda_graphs", "init_engine"]
    misses = r.of(CacheResult)
    assert [(c.key, c.hit) for c in misses] == [("[backbone] compile range (1, 8192)", False),
                                                ("[eagle_head] compile range (1, 8192)", False)]
    assert r.pipe.errors == [] and not [c for c in r.of(CleanLine) if c.is_error]


@pytest.mark.parametrize("line,hit,key", [
    ("[backbone] Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 3.112 s",
     True, "[backbone] compile range (1, 8192)"),
    ("Directly load the compiled graph(s) for dynamic shape from the cache, took 4.021 s", True, "dynamic shape"),
    ("Compiling a graph for dynamic shape takes 21.07 s", False, "dynamic shape"),
    ("[backbone] Directly load AOT compilation from path /c/torch_compile_cache/torch_aot_compile/"
     "eddac78cc7aa7ad2194439ed0de0b21d/rank_0_0/model", True, "[backbone] AOT eddac78cc7aa7ad2"),
])
def test_torch_compile_cache_lines(line, hit, key):
    p = LogPipeline(platform="cuda")
    ev = p.feed("(EngineCore_DP0 pid=2) INFO 12-01 10:00:00 [backends.py:296] " + line, 1.0)
    (c,) = [e for e in ev if isinstance(e, CacheResult)]
    assert (c.hit, c.key, c.source) == (hit, key, "torch-compile")
    assert p.phase == "compile"


def test_older_torch_compile_wording_is_a_compile_timing():
    p = LogPipeline(platform="cuda")
    ev = p.feed("(EngineCore_DP0 pid=2) INFO 03-14 09:00:00 [monitor.py:34] torch.compile takes 28.51 s in total", 1.0)
    assert [t.seconds for t in ev if isinstance(t, Timing) and t.name == "compile"] == [28.51]


def test_platform_hint_and_line_based_route():
    assert LogPipeline(platform="cpu").route == "vllm" and LogPipeline(platform="cuda").route == "vllm"
    assert LogPipeline(platform="neuron").route == "native" and LogPipeline().route == "native"
    assert LogPipeline(platform="cpu", speculative=False).expected_phases == tuple(
        p for p in VLLM_PHASES if p != "draft")
    # no hint: a generic-vLLM marker after config switches the route ...
    p = LogPipeline()
    p.feed("(APIServer pid=1) INFO 12-01 16:36:06 [api_utils.py:286] non-default args: {}", 1.0)
    p.feed("(Worker pid=3) INFO 12-01 16:36:56 [cpu_model_runner.py:68] Starting to load model /m...", 2.0)
    assert p.route == "vllm" and p.phase == "weights"
    # ... but not once a Neuron-only phase was seen (the Neuron phases stay as they are)
    q = LogPipeline()
    q.feed("(EngineCore_DP0 pid=2) (Worker_TP0 pid=3) 2026-01-06 18:45:40,349 - INFO - neuron_worker.py:1 - "
           "Initialized NeuronWorker with rank 0, local_rank 0", 1.0)
    q.feed("(EngineCore_DP0 pid=2) INFO 12-01 16:36:56 [default_loader.py:501] Loading weights took 1.00 seconds", 2.0)
    assert q.route == "native" and q.phase == "workers"


@pytest.mark.parametrize("name", [COLD, WARM, TQDM, HBM, OOM, BUSY, TIMEOUT])
def test_neuron_logs_stay_on_the_neuron_route(name):
    assert run(name).pipe.route == "native"


# ------------------------------------------------------------------------------- our own stop

SHUTDOWN_0_32 = [  # what vLLM 0.32 prints after our SIGINT (real-vllm-cpu.md), prefixes as recorded
    "(APIServer pid=9573) INFO 12-01 16:38:39 [launcher.py:254] [shutdown] API server: shutdown triggered",
    "(APIServer pid=9573) ERROR 12-01 16:38:39 [async_llm.py:906] AsyncLLM output_handler failed.",
    "(APIServer pid=9573) ERROR 12-01 16:38:39 [async_llm.py:906] Traceback (most recent call last):",
    '(APIServer pid=9573) ERROR 12-01 16:38:39 [async_llm.py:906]   File "/x/vllm/v1/engine/async_llm.py", '
    "line 862, in output_handler",
    "(APIServer pid=9573) ERROR 12-01 16:38:39 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: "
    "EngineCore encountered an issue. See stack trace (above) for the root cause.",
    "Traceback (most recent call last):",
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the "
    "root cause.",
    "INFO:     Application shutdown complete.",
]


def test_lines_after_stopping_are_not_errors():
    p = LogPipeline(platform="cpu")
    for i, raw in enumerate(read(REAL_CPU)):
        if STOP_MARK in raw:
            break
        p.feed(raw, float(i))
    assert p.ready and p.errors == []
    p.stopping(500.0)
    p.stopping(600.0)  # idempotent: the first call counts
    assert p.stop_ts == 500.0 and p.stopping_requested
    evs = [e for i, raw in enumerate(SHUTDOWN_0_32) for e in p.feed(raw, 501.0 + i)]
    lines = [e for e in evs if isinstance(e, CleanLine)]
    assert len(lines) == len(SHUTDOWN_0_32) and not [c for c in lines if c.is_error]
    assert not [e for e in evs if isinstance(e, (ErrorSignature, PhaseChange))]
    assert p.errors == [] and p.errors_after_ready() == [] and p.errors_after_stop >= 4


def test_the_same_lines_without_stopping_are_errors():
    p = LogPipeline(platform="cpu")
    evs = [e for i, raw in enumerate(SHUTDOWN_0_32) for e in p.feed(raw, float(i))]
    assert [e.kind for e in evs if isinstance(e, ErrorSignature)] == ["engine-dead", "engine-dead"]
    assert sum(1 for e in evs if isinstance(e, CleanLine) and e.is_error) >= 4


def test_real_cpu_shutdown_after_stopping_is_quiet():
    p = LogPipeline(platform="cpu")
    evs = []
    for i, raw in enumerate(read(REAL_CPU)):
        if STOP_MARK in raw:
            p.stopping(float(i))
        evs.extend(p.feed(raw, float(i)))
    assert p.lines_after_stop > 20 and not [e for e in evs if isinstance(e, CleanLine) and e.is_error]


# ------------------------------------------------------------------- generic vLLM error signatures

@pytest.mark.parametrize("line,kind", [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 "
     "GiB of which 1.06 GiB is free.", "cuda-out-of-memory"),
    ("RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests. Please try lowering "
     "`max_num_seqs` or `gpu_memory_utilization` when initializing the engine.", "cuda-out-of-memory"),
    ("Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free memory for weights, "
     "increasing --tensor-parallel-size, or using --quantization.", "cuda-out-of-memory"),
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
     "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name).",
     "kv-cache-insufficient"),
    ("ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is needed, "
     "which is larger than the available KV cache memory (9.5 GiB). Based on the available memory, the estimated "
     "maximum model length is 77824. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the "
     "CPU backend) or decreasing `max_model_len` when initializing the engine.", "kv-cache-insufficient"),
    ("ValueError: Available memory on node 0 (3.2/7.34 GiB) on kv cache allocation is less than requested memory for "
     "kv (16.0 GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other "
     "processes.", "cpu-kv-cache-space"),
    ("ModuleNotFoundError: No module named 'pandas'", "module-not-found"),
    ("importlib.metadata.PackageNotFoundError: No package metadata was found for vllm", "vllm-metadata-missing"),
    ("RuntimeError: Worker failed with error 'mat1 and mat2 shapes cannot be multiplied (9x256 and 384x128)', please "
     "check the stack trace above for the root cause", "tensor-shape-mismatch"),
    ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root "
     "cause.", "engine-dead"),
    # must not trigger
    ("CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 1,024 tokens per request: 1024.00x", None),
    ("Available KV cache memory: 52.3 GiB", None),
    ("Explicitly set (1.0/7.34) GiB for KV cache on node 0.", None),
    ("Failed to import from vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")", None),
    ("Failed to create oneDNN linear, fallback to torch linear. Exception: could not create a primitive descriptor "
     "for the matmul primitive.", None),
    ("Model loading took 15.83 GiB memory and 4.512345 seconds", None),
])
def test_classify_generic_vllm_errors(line, kind):
    assert classify_error(line) == kind
    assert kind is None or kind in ERROR_KINDS


def test_errors_after_ready_are_the_serving_failures_only():
    p = LogPipeline(platform="cpu")
    p.feed("ValueError: something before readiness", 0.0)
    p.feed("INFO:     Application startup complete.", 1.0)
    assert p.errors_after_ready() == []
    p.feed("(EngineCore pid=5) ERROR 12-01 16:50:01 [core.py:1100] RuntimeError: mat1 and mat2 shapes cannot be "
           "multiplied (9x256 and 384x128)", 2.0)
    p.feed("(APIServer pid=4) ERROR 12-01 16:50:01 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: "
           "EngineCore encountered an issue. See stack trace (above) for the root cause.", 3.0)
    assert [e.kind for e in p.errors_after_ready()] == ["tensor-shape-mismatch", "engine-dead"]
    assert p.primary_error.kind == "tensor-shape-mismatch"
    assert "shapes cannot be multiplied" in p.root_cause()


REAL_CPU_EAGLE3 = "real_cpu_0.32_eagle3.log"  # real capture, EAGLE3 draft (speculators layout)


def test_real_cpu_eagle3_log_phases_and_cache():
    r = run(REAL_CPU_EAGLE3, True)
    assert r.pipe.route == "vllm"
    assert [p.name for p in r.pipe.phases] == ["config", "weights", "draft", "compile", "kv-cache", "engine", "api",
                                               "ready"]
    assert r.pipe.phase_record("draft").detail == "Loading drafter model..."
    # each model's own "Loading weights took" (target, then drafter), as recorded
    weights = [float(x) for x in re.findall(r"Loading weights took ([\d.]+) seconds", "\n".join(r.lines))]
    assert len(weights) == 2
    assert r.pipe.phase_record("weights").reported_s == weights[0]
    assert r.pipe.phase_record("draft").reported_s == weights[1]
    init = float(re.search(r"warmup model\) took ([\d.]+) s", "\n".join(r.lines)).group(1))
    assert r.pipe.phase_record("engine").reported_s == init
    caches = r.of(CacheResult)  # backbone and draft head both compiled (AOT saved): two misses
    assert [(c.key.split(" AOT ")[0], c.hit) for c in caches] == [("[backbone]", False), ("[eagle_head]", False)]
    assert r.pipe.errors == [] and not [c.text for c in r.of(CleanLine) if c.is_error]
    assert any("SpecDecoding metrics:" in c.text for c in r.of(CleanLine))


def test_aot_load_failure_is_a_compile_marker_not_a_hit():
    p = LogPipeline(platform="cpu")
    pre = "(Worker pid=7) WARNING 12-01 16:50:00 [decorators.py:333] "
    ev = p.feed(pre + "[backbone] Compiling model again due to a load failure from /c/torch_aot_compile/"
                      "84a8fb3082973e97/rank_0_0/model, reason: source changed", 1.0)
    assert p.phase == "compile" and not [e for e in ev if isinstance(e, CacheResult)]
    ev = p.feed("(Worker pid=7) INFO 12-01 16:50:30 [decorators.py:743] [backbone] saved AOT compiled function to "
                "/c/torch_aot_compile/84a8fb3082973e97/rank_0_0/model", 2.0)
    assert [(c.hit, c.key) for c in ev if isinstance(c, CacheResult)] == [(False, "[backbone] AOT 84a8fb3082973e97")]
    assert p.errors == []


REAL_CPU_BAD_AUX = "real_cpu_0.32_eagle3_bad_aux.log"  # real capture: clean start, the first request kills it


def test_real_cpu_bad_aux_clean_start_then_death_on_first_request():
    r = run(REAL_CPU_BAD_AUX, True)
    assert r.pipe.route == "vllm" and r.pipe.ready
    # --enforce-eager: no torch.compile phase
    assert [p.name for p in r.pipe.phases] == ["config", "weights", "draft", "kv-cache", "engine", "api", "ready"]
    ready_i = r.first_index("Application startup complete.")
    before = [e for e in r.pipe.errors if e.ts < ts_of(ready_i)]
    assert before == []  # the start was clean
    after = r.pipe.errors_after_ready()
    assert after == r.pipe.errors
    kinds = [e.kind for e in after]
    assert kinds[0] == "tensor-shape-mismatch" and "engine-dead" in kinds
    assert after[0].line == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x256 and 384x128)"
    assert any("EngineDeadError" in e.line for e in after if e.kind == "engine-dead")
    assert r.pipe.primary_error.kind == "tensor-shape-mismatch"


def test_neuronx_cc_header_stripped_with_its_level():
    msg, info = clean_line("2026-12-02T02:37:04Z ERROR 7485 [neuronxcc.driver.CommandDriver]: [INTERNAL_ERROR] "
                           "[NCC_ITEN406] Unhandled exception with message: x")
    assert msg == "[INTERNAL_ERROR] [NCC_ITEN406] Unhandled exception with message: x"
    assert info.level == "ERROR" and info.source == "neuronxcc.driver.CommandDriver"
    pipe = LogPipeline()
    (line, *_rest) = pipe.feed("2026-12-02T02:37:04Z ERROR 7485 [neuronxcc.driver.CommandDriver]: " + "*" * 20, 1.0)
    assert line.text == "*" * 20 and line.level == "ERROR" and line.is_error
