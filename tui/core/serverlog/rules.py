"""The rule tables of the server log: error signatures, phase markers per route (native, legacy, vLLM),
cache and timing patterns, and the keyword gate in front of them (`classify_error`, `_phase_of`)."""

from __future__ import annotations

import re
from typing import NamedTuple


class _ErrRule(NamedTuple):
    kind: str
    keys: tuple[str, ...]  # any of these substrings ...
    confirm: re.Pattern[str] | None  # ... and, if set, this regex must match


# Order matters: the first matching rule wins (compile-oom-killed before compile-failed for -9,
# hbm-allocation-failure before compile-failed for [NCC_EVRF009], engine-failed last).
_ERROR_RULES: tuple[_ErrRule, ...] = (
    _ErrRule("placeholder-vllm-neuron", ("WRONG PACKAGE",), None),
    _ErrRule("neuron-rt-visible-cores-set", ("NEURON_RT_VISIBLE_CORES cannot be used",), None),
    _ErrRule("port-in-use", ("Address already in use", "Errno 98"), None),
    _ErrRule("engine-startup-timeout", ("Timed out waiting for engine core processes",), None),
    _ErrRule(
        "compile-oom-killed",
        ("SIG_KILL", "Out Of Memory (OOM) killer", "OOM killer", "oom-kill", "Out of memory: Killed process",
         "failed with -9"),
        re.compile(r"SIG_KILL|OOM killer|oom-kill|Out of memory: Killed process|failed with -9\b"),
    ),
    _ErrRule(
        "hbm-allocation-failure",
        ("Failed to allocate", "nrt_tensor_allocate status=4", "Allocation Failure",
         "KV cache budget is below minimum", "NCC_EVRF009", "mc_alloc: device mempool"),
        re.compile(r"Failed to allocate .*? on ND ?\d+ ?: ?NC ?\d+|nrt_tensor_allocate status=4|Allocation Failure"
                   r"|KV cache budget is below minimum|NCC_EVRF009|mc_alloc: device mempool"),
    ),
    _ErrRule(
        "compile-failed",
        ("neuronx-cc compilation failed", "neuronx-cc failed with", "Internal Compiler Error", "[NCC_"),
        re.compile(r"neuronx-cc compilation failed|neuronx-cc failed with|Internal Compiler Error|\[NCC_[A-Z0-9]+\]"),
    ),
    _ErrRule(
        "neuron-cores-busy",
        ("Core(s) not available", "cores busy", "NC_BUSY"),
        re.compile(r"(?:Logical )?Neuron ?Core\(s\) not available|cores busy|NRT_EXEC_NC_BUSY"),
    ),
    # generic vLLM (CPU / CUDA), wording of vLLM 0.32 (kv_cache_utils.py, cpu_worker.py, gpu_model_runner.py)
    _ErrRule(
        "cuda-out-of-memory",
        ("CUDA out of memory", "OutOfMemoryError", "not enough GPU memory"),
        re.compile(r"CUDA out of memory|OutOfMemoryError\b|Failed to load model - not enough GPU memory"),
    ),
    _ErrRule("cpu-kv-cache-space", ("on kv cache allocation is less than requested memory for kv",), None),
    _ErrRule(
        "kv-cache-insufficient",
        ("No available memory for the cache blocks", "larger than the available KV cache memory"),
        None,
    ),
    _ErrRule("vllm-metadata-missing", ("No package metadata was found for vllm",),
             re.compile(r"No package metadata was found for vllm\s*$")),
    _ErrRule("module-not-found", ("ModuleNotFoundError: No module named",),
             re.compile(r"^(?:[\w.]+: )?ModuleNotFoundError: No module named ")),
    _ErrRule("tensor-shape-mismatch", ("shapes cannot be multiplied",),
             re.compile(r"mat1 and mat2 shapes cannot be multiplied")),
    _ErrRule("engine-dead",
             ("EngineDeadError", "EngineCore encountered an issue", "EngineCore encountered a fatal error"), None),
    _ErrRule("engine-failed", ("EngineCore failed to start", "Engine core initialization failed"), None),
)


# Phase markers (substring match on the clean message); first matching phase in this order wins.
_PHASE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ready", ("Application startup complete",)),
    ("api", ("Starting vLLM API server", "Starting vLLM server", "Available routes", "Route: ",
             "Started server process", "Waiting for application startup", "Supported_tasks", "Supported tasks")),
    ("engine", ("Model warmup completed", "init engine (profile, create kv cache, warmup model) took")),
    ("warmup", ("Warming up", "EAGLE3 warmup")),
    ("compile", ("Compilation cache key", "Local cache hit", "Local cache miss", "Remote cache hit",
                 "Remote cache miss", "Compiling...", "Acquired compilation lock", "Waiting for shared compilation",
                 "Compilation complete in", "Shared compilation completed", "finish compilation",
                 # legacy NxDI
                 "priority HLO", "NEURON_CC_WRAPPER", "Starting compilation for all HLOs",
                 "Compilation Successfully Completed", "Using a cached neff", "pre-compiled model artifacts",
                 "Finished Compilation for all HLOs", "Finished building model")),
    ("graphs", ("Extracting ", "Capturing EAGLE3", "EAGLE3 graph capture", "finish graph extraction",
                # legacy NxDI
                "Generating HLOs", "hlos for key", "Finished generating HLO", "Generated all HLOs")),
    ("hbm", ("Neuron HBM:", "KV cache size", "Maximum concurrency for")),
    ("draft", ("Spec decode enabled. Loading draft model",)),
    ("weights", ("Loading weights from", "Loading model on NeuronWorker", "Starting NeuronModel loading",
                 "Weight loading completed",
                 # legacy NxDI
                 "Sharding weights", "Finished weights loading")),
    ("workers", ("Initialized NeuronWorker", "CCOM bootstrap")),
    ("config", ("vLLM API server version", "vLLM server version", "non-default args", "Neuron Platform only supports",
                "Defaulting optimization level", "Using NEURON custom attention backend",
                "Initializing a V1 LLM engine")),
)


# Phase markers of the generic vLLM route (vLLM 0.32 wording, plus the older forms of the torch.compile lines).
_VLLM_PHASE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ready", ("Application startup complete",)),
    ("api", ("Starting vLLM API server", "Starting vLLM server", "Available routes", "Route: ",
             "Started server process", "Waiting for application startup", "Supported_tasks", "Supported tasks")),
    ("engine", ("init engine (profile, create kv cache, warmup model) took",)),
    ("cuda-graphs", ("Capturing CUDA graphs", "Capturing CUDA graph", "Graph capturing finished")),
    ("kv-cache", ("KV cache size:", "Available KV cache memory", "Maximum concurrency for",
                  "GiB for KV cache on node")),
    ("compile", ("Starting torch.compile", "torch.compile took", "torch.compile takes",
                 "torch.compile and initial profiling", "Dynamo bytecode transform time",
                 "Compiling a graph for", "Directly load the compiled graph", "Directly load AOT compilation",
                 "saved AOT compiled function", "Compiling model again due to a load failure", "Cache the graph of",
                 "for vLLM's torch.compile", "vLLM's torch.compile cache is disabled",
                 "Warming up model for the compilation", "Initial profiling/warmup run took")),
    ("draft", ("Loading drafter model", "Spec decode enabled. Loading draft model")),
    ("weights", ("Starting to load model", "Loading weights took", "Model loading took",
                 "Loading safetensors checkpoint shards")),
    ("config", ("vLLM API server version", "vLLM server version", "non-default args", "Initializing a V1 LLM engine",
                "Automatically detected platform")),
)


# Markers that only vLLM's own (CPU / CUDA) model runner and compiler print, never vllm-neuron: seeing one
# before any Neuron-only phase switches the phase order to VLLM_PHASES.
_VLLM_MARKERS: tuple[str, ...] = (
    "Automatically detected platform cpu", "Automatically detected platform cuda",
    "Automatically detected platform rocm", "Starting to load model", "Loading weights took", "Model loading took",
    "Loading drafter model", "Starting torch.compile", "torch.compile took", "torch.compile takes",
    "torch.compile and initial profiling", "Dynamo bytecode transform time", "Compiling a graph for",
    "Directly load the compiled graph", "Directly load AOT compilation", "saved AOT compiled function",
    "Compiling model again due to a load failure", "Warming up model for the compilation", "Available KV cache memory",
    "GiB for KV cache on node", "Capturing CUDA graphs", "Graph capturing finished",
)


# Markers that only the legacy NxDI route prints: seeing one switches the phase order to LEGACY_PHASES.
_LEGACY_MARKERS: tuple[str, ...] = (
    "Generating HLOs", "hlos for key", "Generated all HLOs", "priority HLO", "NEURON_CC_WRAPPER",
    "Sharding weights on load", "precompiled artifacts", "pre-compiled model artifacts", "Finished building model",
)


_F = r"([\d.]+)"


# (gate substring, regex, timing name, phase whose reported_s it sets, accumulate?)
_TIMING_RULES: tuple[tuple[str, re.Pattern[str], str, str | tuple[str, ...] | None, bool], ...] = (
    ("Weight loading completed in", re.compile(r"Weight loading completed in " + _F), "weights", "weights", False),
    ("Compilation complete in", re.compile(r"Compilation complete in " + _F), "compile", "compile", True),
    ("init engine (", re.compile(r"init engine \(profile, create kv cache, warmup model\) took " + _F),
     "init_engine", "engine", False),
    ("Finished weights loading in", re.compile(r"Finished weights loading in " + _F), "weights", "weights", False),
    ("Done Sharding weights in", re.compile(r"Done Sharding weights in " + _F), "sharding", None, False),
    ("Generated all HLOs in", re.compile(r"Generated all HLOs in " + _F), "graphs", "graphs", False),
    ("Done compilation for the priority HLO in", re.compile(r"priority HLO in " + _F), "priority_compile",
     "compile", True),
    ("Finished Compilation for all HLOs in", re.compile(r"Compilation for all HLOs in " + _F), "compile", "compile",
     True),
    ("Finished building model in", re.compile(r"Finished building model in " + _F), "build", None, False),
    ("Warmup completed in", re.compile(r"Warmup completed in " + _F), "warmup", "warmup", False),
    # generic vLLM; a tuple of phases: the current phase when it is one of them, else the first
    ("Loading weights took", re.compile(r"Loading weights took " + _F), "weights", ("weights", "draft"), False),
    ("Model loading took", re.compile(r"Model loading took \S+ GiB(?: memory)? and " + _F), "model_load", None,
     False),
    ("s in total", re.compile(r"torch\.compile (?:took|takes|and initial profiling/warmup run together took) "
                              + _F + r" ?s in total"), "compile", "compile", True),
    ("Dynamo bytecode transform time", re.compile(r"Dynamo bytecode transform time: " + _F), "dynamo", None, False),
    ("Compiling a graph for", re.compile(r"Compiling a graph for .*? takes " + _F), "graph_compile", None, False),
    ("Directly load the compiled graph", re.compile(r"from the cache, took " + _F), "graph_load", None, False),
    ("Graph capturing finished in", re.compile(r"Graph capturing finished in " + _F), "cuda_graphs", "cuda-graphs",
     False),
    ("Initial profiling/warmup run took", re.compile(r"Initial profiling/warmup run took " + _F), "profile_run", None,
     False),
)


_CACHE_RE = re.compile(r"\b(Local|Remote|local compile) cache (hit|miss) for key:? ?([0-9A-Za-z_]+)")


_CACHE_KEY_RE = re.compile(r"Compilation cache key: ?([0-9A-Za-z_]+)")


_LEGACY_HIT_RE = re.compile(r"Using a cached neff at (\S+)|Successfully loaded pre-compiled model artifacts from (\S+)")


_LEGACY_MISS_RE = re.compile(r"Unable to find precompiled artifacts from (\S+?)\.? Recompiling")


_MODULE_RE = re.compile(r"MODULE_[\w+]+")


# vLLM's torch.compile cache: "[prefix] Directly load the compiled graph(s) for compile range (1, 512) from the
# cache" is a hit, "[prefix] Compiling a graph for compile range (1, 512) takes 12.3 s" a miss (older vLLM:
# "for dynamic shape"). The key is the optional [prefix] plus the range.
_TC_HIT_RE = re.compile(r"^(\[[^\]]*\] )?Directly load the compiled graph\(s\) for (.*?) from the cache")


_TC_MISS_RE = re.compile(r"^(\[[^\]]*\] )?Compiling a graph for (.*?) takes ")


# AOT compile (vLLM 0.32): "[backbone] saved AOT compiled function to <dir>/torch_aot_compile/<hash>/rank_0_0/model"
# (a miss) and "[backbone] Directly load AOT compilation from path <same>" (a hit); key: prefix + "AOT " + hash.
_TC_AOT_RE = re.compile(r"^(\[[^\]]*\] )?(?:Directly load AOT compilation from path|saved AOT compiled function to) "
                        r"(\S+)")


_AOT_HASH_RE = re.compile(r"torch_aot_compile/([0-9a-f]{8,})")


_READY = "Application startup complete"


def _gate_pattern() -> re.Pattern[str]:
    keys: set[str] = set()
    for r in _ERROR_RULES:
        keys.update(r.keys)
    for _, ks in _PHASE_RULES + _VLLM_PHASE_RULES:
        keys.update(ks)
    keys.update(k for k, *_ in _TIMING_RULES)
    keys.update(("cache hit for key", "cache miss for key", "Compilation cache key", "Using a cached neff",
                 "precompiled artifacts", "pre-compiled model artifacts", _READY))
    keys.update(_LEGACY_MARKERS)
    keys.update(_VLLM_MARKERS)
    # longest first so the alternation is unambiguous (only presence matters for the gate)
    return re.compile("|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True)))


_GATE_search = _gate_pattern().search


def classify_error(message: str) -> str | None:
    """The error-signature kind of one clean message (see ERROR_KINDS), or None."""
    for rule in _ERROR_RULES:
        for k in rule.keys:
            if k in message:
                if rule.confirm is None or rule.confirm.search(message):
                    return rule.kind
                break
    return None


def _phase_of(message: str, rules: tuple[tuple[str, tuple[str, ...]], ...] = _PHASE_RULES) -> str | None:
    for phase, keys in rules:
        for k in keys:
            if k in message:
                return phase
    return None


_WRAPPERS: tuple[str, ...] = (
    "Engine core initialization failed",
    "EngineCore failed to start",
    "WorkerProc initialization failed",
    "WorkerProc failed to start",
    "See root cause above",
    "See stack trace for root cause",
    "died unexpectedly, shutting down executor",
    "EngineCore encountered an issue",
    "EngineCore encountered a fatal error",
    "WorkerProc hit an exception",
)


_PROCESS_BANNER = re.compile(r"Process [\w-]+:$")
