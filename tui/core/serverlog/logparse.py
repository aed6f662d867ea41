"""Server-log pipeline for `vllm serve` output (vLLM + vllm-neuron on trn2, and vLLM's own CPU / CUDA runner).

The engine feeds every raw output line of the server through one `LogPipeline`:

    pipe = LogPipeline(speculative=True)
    for raw in lines:                      # one line each, "\\n" optional, may hold "\\r" and ANSI codes
        for ev in pipe.feed(raw, ts=time.time()):
            ...                            # CleanLine / RankCount / PhaseChange / Timing / CacheResult /
                                           # ErrorSignature / Ready
    pipe.close(ts)                         # end of stream: closes the open phase

Per line the pipeline
1. strips ANSI escape sequences (CSI such as `\\x1b[1;36m`, OSC, two-byte escapes);
2. collapses carriage-return progress bars: only the last non-empty `\\r` segment is kept, with the
   process prefix of the first segment put back in front of it (tqdm bars of huggingface_hub);
3. strips the prefixes and keeps the level: `(APIServer pid=N) `, `(EngineCore_DP0 pid=N) `,
   `(Worker_TPk pid=M) `, `(Worker pid=N) `, `(VllmWorker rank=k pid=N) `, then one of the headers
   vLLM `LEVEL MM-DD HH:MM:SS [file.py:N] `, plugin `YYYY-mm-dd HH:MM:SS,mmm - LEVEL - file.py:N - `,
   uvicorn `INFO:     `, python-logging `INFO:Neuron:`, NRT
   `YYYY-Mon-DD HH:MM:SS.ffffff PID:TID LEVEL  MODULE:function   `, torch-neuronx
   `YYYY-mm-dd HH:MM:SS.ffffff:  PID  LEVEL `;
4. merges per-rank repeats: a worker line whose message equals (after masking digit runs, so
   `rank 3` and `neuron:3` match `rank 0`) a line first seen from another rank less than
   `dedup_window_s` ago is not emitted again; a `RankCount` update is emitted instead. A repeat from a
   rank already counted starts a new line (the banner printed twice per rank gives two lines x16).
   Only worker lines (a `Worker...` prefix) are merged; identity is the TP rank, else the worker pid.
5. classifies each first occurrence against rule tables (a cheap keyword gate first) into an error
   signature, a phase marker, a cache result, a timing, or readiness.

Events (slotted dataclasses deriving from `LogEvent`; frozen except the two per-line hot-path ones,
CleanLine and RankCount, which consumers must treat as immutable all the same):
- `CleanLine(line_id, text, level, process, rank, is_error, ts, ranks=1)`: a new message, prefix
  stripped. `line_id` counts emitted lines from 0. `level` is the log level or None (traceback lines).
- `RankCount(line_id, ranks, rank, ts)`: the line `line_id` has now been seen from `ranks` distinct
  ranks (show "x16"). Emitted once per repeat, so the last one carries the final count.
- `PhaseChange(phase, prev_phase, prev_elapsed_s, ts, detail)`: phase ids are those of the route
  (`ROUTES[pipe.route]`); phase None means end of stream (from `close()`); prev_* are None for the first
  phase. `detail` = marker text.
- `Timing(name, seconds, ts)`: a duration the log reports. Names: `weights` (Weight loading completed /
  legacy Finished weights loading / vLLM Loading weights took: the target's, then the draft's), `compile`
  (per graph: Compilation complete in; legacy Finished Compilation for all HLOs; vLLM torch.compile took
  X s in total, per compiled module), `init_engine`, legacy `graphs`, `priority_compile`, `build`,
  `sharding`, `warmup`, and vLLM `model_load` (Model loading took), `dynamo` (Dynamo bytecode transform
  time), `graph_compile` / `graph_load` (one compile range compiled / loaded from the cache),
  `profile_run` (Initial profiling/warmup run took), `cuda_graphs` (Graph capturing finished in).
- `CacheResult(key, hit, source, ts)`: a compile-cache lookup; source is `local`, `remote`, `legacy`
  (NxDI pre-compiled artifacts / cached neff) or `torch-compile` (vLLM's torch.compile cache: a compile
  range loaded from the cache or compiled, an AOT function loaded or saved).
- `ErrorSignature(kind, line, context, ts, line_id)`: `kind` is one of `ERROR_KINDS`; `line` is the
  clean message; `context` the clean messages just before it (oldest first).
- `Ready(ts, startup_s)`: `Application startup complete.` seen; startup_s counts from the first fed line.

Phases move forward only, in the order of the detected route (`pipe.route`, `ROUTES`):
- "native", `PHASES`: the >=0.21 vllm-neuron plugin (the default);
- "legacy", `LEGACY_PHASES`: once a legacy NxDI marker (Generating HLOs, NEURON_CC_WRAPPER, ...) is seen,
  because NxDI compiles before it shards the weights;
- "vllm", `VLLM_PHASES` (config, weights, draft, compile, kv-cache, cuda-graphs, engine, api, ready):
  vLLM's own CPU / CUDA model runner, once one of its markers (Starting to load model, Loading weights
  took, torch.compile, Warming up model for the compilation, Capturing CUDA graphs, ...) is seen before any
  Neuron-only phase, or from the start when the pipeline is built with platform "cpu" / "cuda".
A marker of an earlier phase never moves the phase back.

Our own stop: `stopping(ts)` tells the pipeline that the engine is about to signal the server. Lines fed
after it are still emitted as CleanLine, but never classified: no ErrorSignature, `is_error` False, no
phase change (vLLM 0.32 answers SIGINT with `AsyncLLM output_handler failed.`, a traceback and
EngineDeadError). `errors_after_ready()` lists the signatures raised after readiness and before the stop
(an engine that died serving its first request).

This module is pure stdlib and must not import textual.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from itertools import islice
from typing import Iterable, NamedTuple

__all__ = [
    "PHASES",
    "LEGACY_PHASES",
    "VLLM_PHASES",
    "ROUTES",
    "ERROR_KINDS",
    "LogEvent",
    "CleanLine",
    "RankCount",
    "PhaseChange",
    "Timing",
    "CacheResult",
    "ErrorSignature",
    "Ready",
    "PhaseRecord",
    "LinePrefix",
    "LogPipeline",
    "strip_ansi",
    "collapse_cr",
    "clean_line",
    "classify_error",
    "root_cause",
    "evidence_rank",
    "rank_evidence",
]

PHASES: tuple[str, ...] = (
    "config", "workers", "weights", "draft", "hbm", "graphs", "compile", "warmup", "engine", "api", "ready",
)
# NxDI (vllm-neuron <=0.3): HLOs are generated and compiled before the weights are sharded and loaded;
# the warmup runs inside the model load, and vLLM's KV-cache sizing follows it.
LEGACY_PHASES: tuple[str, ...] = (
    "config", "workers", "draft", "graphs", "compile", "weights", "warmup", "hbm", "engine", "api", "ready",
)
# Generic vLLM (the CPU and CUDA platforms, vLLM's own model runner): the weights load, torch.compile runs
# during the memory-profiling run (CPU: "Warming up model for the compilation..."), the KV cache is sized
# from what is left, CUDA graphs are captured (CUDA only), then the engine reports its init time.
VLLM_PHASES: tuple[str, ...] = (
    "config", "weights", "draft", "compile", "kv-cache", "cuda-graphs", "engine", "api", "ready",
)
# route -> phase order. "native": vllm-neuron >= 0.21; "legacy": NxDI; "vllm": vLLM's own CPU/CUDA runner.
ROUTES: dict[str, tuple[str, ...]] = {"native": PHASES, "legacy": LEGACY_PHASES, "vllm": VLLM_PHASES}
ERROR_KINDS: tuple[str, ...] = (
    "hbm-allocation-failure",
    "compile-oom-killed",
    "compile-failed",
    "neuron-cores-busy",
    "engine-startup-timeout",
    "neuron-rt-visible-cores-set",
    "placeholder-vllm-neuron",
    "port-in-use",
    "cuda-out-of-memory",
    "kv-cache-insufficient",
    "cpu-kv-cache-space",
    "vllm-metadata-missing",
    "module-not-found",
    "tensor-shape-mismatch",
    "engine-dead",
    "engine-failed",
)


# --------------------------------------------------------------------------------------------- events

class LogEvent:
    """Base of every event `LogPipeline` returns."""

    __slots__ = ()


# CleanLine and RankCount are the per-line hot path: plain slotted dataclasses (3x cheaper to build than
# frozen ones). Treat them as immutable all the same.
@dataclass(slots=True)
class CleanLine(LogEvent):
    line_id: int
    text: str
    level: str | None
    process: str | None  # outermost process name, e.g. "APIServer", "EngineCore_DP0"
    rank: int | None  # worker rank (Worker_TPk), None for non-worker lines
    is_error: bool
    ts: float
    ranks: int = 1


@dataclass(slots=True)
class RankCount(LogEvent):
    line_id: int
    ranks: int
    rank: int | None
    ts: float


@dataclass(frozen=True, slots=True)
class PhaseChange(LogEvent):
    phase: str | None
    prev_phase: str | None
    prev_elapsed_s: float | None
    ts: float
    detail: str


@dataclass(frozen=True, slots=True)
class Timing(LogEvent):
    name: str
    seconds: float
    ts: float


@dataclass(frozen=True, slots=True)
class CacheResult(LogEvent):
    key: str
    hit: bool
    source: str
    ts: float


@dataclass(frozen=True, slots=True)
class ErrorSignature(LogEvent):
    kind: str
    line: str
    context: tuple[str, ...]
    ts: float
    line_id: int


@dataclass(frozen=True, slots=True)
class Ready(LogEvent):
    ts: float
    startup_s: float


@dataclass(slots=True)
class PhaseRecord:
    """One phase the log went through. end_ts is None while the phase is open.

    reported_s is the duration the log itself states for the phase, when it does (weights: Weight
    loading completed in X; compile: sum of Compilation complete in X; engine: init engine ... took X).
    """

    name: str
    start_ts: float
    end_ts: float | None = None
    detail: str = ""
    reported_s: float | None = None

    @property
    def elapsed_s(self) -> float | None:
        return None if self.end_ts is None else self.end_ts - self.start_ts

    def elapsed_at(self, now: float) -> float:
        return (self.end_ts if self.end_ts is not None else now) - self.start_ts


class LinePrefix(NamedTuple):
    process: str | None  # outermost "(NAME pid=N)"
    pid: int | None
    worker: str | None  # worker process name when the line comes from a worker
    worker_pid: int | None
    rank: int | None
    level: str | None
    source: str | None  # NRT "MODULE:function" or python logger name, when the header has one


# --------------------------------------------------------------------------------------- line cleaning

_ANSI = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_ANSI_sub = _ANSI.sub

_LEVELS = r"DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL"
_PROC1 = r"\(([A-Za-z][\w.\-]*)(?: rank=(\d+))? pid=(\d+)\) ?"
# one or two "(NAME pid=N) " prefixes: outer process, then the worker
_PROCS = re.compile("(?:" + _PROC1 + ")(?:" + _PROC1 + ")?")
_PROCS_match = _PROCS.match
_PROCS_fullmatch = _PROCS.fullmatch
# headers that start with a letter: vLLM `INFO 03-14 09:12:01 [api_server.py:1896] `, uvicorn
# `INFO:     `, python logging `INFO:Neuron:`
_LHEAD_match = re.compile(
    r"(?:(" + _LEVELS + r") \d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \[[^\]]*\] ?"
    r"|(" + _LEVELS + r"):(?: +|([\w.]+):))"
).match
# headers that start with a digit: plugin `2026-01-06 18:45:40,349 - INFO - file.py:575 - `, torch-neuronx
# `2025-05-15 20:58:33.000123:  41207  INFO `, NRT `2025-May-15 20:58:33.897479 224822:224822 ERROR  MOD:fn   `
_DHEAD_match = re.compile(
    r"\d{4}-(?:\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+ - ([A-Z]+) - [\w.\-]+:\d+ - |\.\d+: +\d+ +([A-Z]+) +)"
    r"|[A-Z][a-z]{2}-\d\d \d\d:\d\d:\d\d\.\d+ +\d+:\d+ +([A-Z]+) +(\S+) *"
    # neuronx-cc `2026-05-17T10:00:00Z ERROR 42759 [neuronxcc.driver.CommandDriver]: `
    r"|\d\d-\d\dT\d\d:\d\d:\d\dZ ([A-Z]+) \d+ \[([^\]]+)\]: ?)"
).match
_TP_RANK = re.compile(r"(?:TP|rank)_?(\d+)")
_NUM_sub = re.compile(r"\d+").sub

_ERROR_LEVELS = frozenset(("ERROR", "CRITICAL", "FATAL"))
_EXC = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)(?::|$)|FATAL:|Traceback \(most recent")


def strip_ansi(s: str) -> str:
    """Remove ANSI escape sequences (CSI incl. `\\x1b[1;36m` / `\\x1b[0;0m`, OSC, two-byte escapes)."""
    return _ANSI_sub("", s) if "\x1b" in s else s


def collapse_cr(s: str) -> str:
    """Keep only the last non-empty carriage-return segment (progress-bar redraws).

    The `(Process pid=N)` prefixes written once at the start of the physical line are kept.
    Expects ANSI codes already stripped when prefixes must be recognised.
    """
    if "\r" not in s:
        return s
    segs = s.split("\r")
    last = ""
    for seg in reversed(segs):
        if seg.strip():
            last = seg
            break
    if last is segs[0]:
        return last
    m = _PROCS_match(segs[0])
    if m and not _PROCS_match(last):
        return m.group(0) + last
    return last


def _rank_of(name: str, rank_attr: str | None) -> int | None:
    if rank_attr is not None:
        return int(rank_attr)
    m = _TP_RANK.search(name)
    return int(m.group(1)) if m else None


def _is_worker(name: str) -> bool:
    return name.startswith("Worker") or name.startswith("VllmWorker")


def _header(s: str, k: int) -> tuple[int, str | None, str | None]:
    """Match a log header at s[k:]; return (message start, level, source)."""
    c = s[k:k + 1]
    if "0" <= c <= "9":
        m = _DHEAD_match(s, k)
        if m is not None:
            g = m.groups()
            return m.end(), g[0] or g[1] or g[2] or g[4], g[3] or g[5]
    elif "A" <= c <= "Z":
        m = _LHEAD_match(s, k)
        if m is not None:
            g = m.groups()
            return m.end(), g[0] or g[1], g[2]
    return k, None, None


def clean_line(s: str) -> tuple[str, LinePrefix]:
    """ANSI-strip, collapse `\\r`, strip process prefixes and the log header of one raw line.

    Returns (message, prefix info). The message keeps its leading indentation (traceback frames)
    and loses trailing whitespace.
    """
    if "\x1b" in s:
        s = _ANSI_sub("", s)
    if "\r" in s:
        s = collapse_cr(s)
    p1 = pid1 = worker = wpid = rank = None
    k = 0
    m = _PROCS_match(s)
    if m is not None:
        p1, r1, pid1, p2, r2, pid2 = m.groups()
        k = m.end()
        if p2 is not None:
            worker, wpid, rank = p2, int(pid2), _rank_of(p2, r2)
        elif _is_worker(p1):
            worker, wpid, rank = p1, int(pid1), _rank_of(p1, r1)
    k, level, source = _header(s, k)
    if level == "WARN":
        level = "WARNING"
    info = LinePrefix(
        process=p1,
        pid=int(pid1) if pid1 is not None else None,
        worker=worker,
        worker_pid=wpid,
        rank=rank,
        level=level,
        source=source,
    )
    return s[k:].rstrip(), info


# ------------------------------------------------------------------------------------------ rule tables

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


# ------------------------------------------------------------------------------------------ root cause

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
# Kinds that wrap the real cause rather than name it.
_GENERIC_KINDS = frozenset(("engine-failed", "engine-dead"))


def _is_wrapper(msg: str) -> bool:
    for w in _WRAPPERS:
        if w in msg:
            return True
    return bool(_PROCESS_BANNER.match(msg))


def _root_cause_clean(msgs: list[str], max_scan: int = 400, run_gap: int = 50) -> str | None:
    n = len(msgs)
    start = n
    for i in range(n - 1, -1, -1):
        if "Engine core initialization failed" in msgs[i] or "EngineCore failed to start" in msgs[i]:
            start = i
            break
    fallback: str | None = None
    found: str | None = None
    found_kind: str | None = None
    found_at = 0
    for i in range(start - 1, max(-1, start - 1 - max_scan), -1):
        if found is not None and found_at - i > run_gap:
            break
        m = msgs[i]
        s = m.strip()
        if not s or _is_wrapper(s):
            continue
        kind = classify_error(s)
        if kind is not None and kind not in _GENERIC_KINDS:
            if found is None:
                found, found_kind, found_at = s, kind, i
            elif kind == found_kind:
                # the earliest of the run, unless a later copy carries more (an NCC code over a banner)
                if evidence_rank(s) <= evidence_rank(found):
                    found = s
                found_at = i
            continue
        if found is None and fallback is None and not m[:1].isspace() and _EXC.match(s) \
                and not s.startswith("Traceback"):
            fallback = s
    return found if found is not None else fallback


# -------------------------------------------------------------------------------------- evidence rank

_NCC_CODE = re.compile(r"\bNCC_[A-Z]{2,6}\d{2,4}\b")
_NRT_ERR = re.compile(r"\bNRT(?:_[A-Z_]+|:\w+)|\bnrt_\w+ status=|\bTDRV:|Failed to allocate .*? on ND ?\d"
                      r"|(?:Logical )?Neuron ?Core\(s\) not available|Neuron runtime cannot be initialized"
                      r"|Runtime could not be initialized")
# Lines that announce a failure without saying what failed: banners' text, wrappers, traceback headers.
_BOILERPLATE: tuple[str, ...] = (
    "An Internal Compiler Error has occurred", "Please contact Neuron support", "Traceback (most recent call",
    "please check the stack trace above", "Check the stack trace", "Internal details:", "Version information:",
)


def evidence_rank(msg: str) -> int:
    """How decisive one clean log message is as evidence of a failure, lower first:
    0 a compiler error code (`[NCC_…]`) or a Neuron runtime (NRT) error; 1 a Python exception line
    (`SomeError: …`, `FATAL: …`) that names a cause; 2 another line of a known error signature or with an
    error word; 3 any other line; 4 boilerplate (the "An Internal Compiler Error has occurred" banner text,
    the engine's generic wrappers, traceback headers); 9 a line without a letter or digit (a banner of
    asterisks): never evidence."""
    s = msg.strip()
    if not s or not any(c.isalnum() for c in s):
        return 9
    if _NCC_CODE.search(s) or _NRT_ERR.search(s):
        return 0
    if _is_wrapper(s) or any(b in s for b in _BOILERPLATE):
        return 4
    if _EXC.match(s) is not None or s.startswith("FATAL"):
        return 1
    kind = classify_error(s)
    if kind is not None and kind not in _GENERIC_KINDS:
        return 2
    low = s.lower()
    if "error" in low or "failed" in low or "exception" in low:
        return 2
    return 3


def rank_evidence(lines: Iterable[str], limit: int | None = None) -> list[str]:
    """Log lines as evidence: the decisive ones first (evidence_rank; ties keep the log's order), banners
    dropped, duplicates dropped, at most `limit` lines."""
    seen: set[str] = set()
    keyed: list[tuple[int, int, str]] = []
    for i, x in enumerate(lines):
        s = str(x).strip() if x is not None else ""
        if not s or s in seen:
            continue
        seen.add(s)
        r = evidence_rank(s)
        if r < 9:
            keyed.append((r, i, s))
    keyed.sort()
    out = [s for _, _, s in keyed]
    return out if limit is None else out[:limit]


def root_cause(lines: Iterable[str], max_scan: int = 400, run_gap: int = 50) -> str | None:
    """The real cause above the generic engine-failure wrapper, as a clean message.

    Finds the last `Engine core initialization failed` / `EngineCore failed to start` line (or the end
    of the input if there is none) and scans up to `max_scan` lines backwards, skipping other wrappers
    (WorkerProc initialization failed, See root cause above, ...), blanks and traceback frames. Returns
    the nearest line matching a specific error signature (any kind but engine-failed); failing that
    the nearest exception line (`SomeError: ...`, `FATAL: ...`); else None. Of a run of lines with the
    same signature (less than `run_gap` lines apart; e.g. every rank's copy, or SIG_KILL -> "failed with
    -9" -> FATAL) the earliest is returned, which is the most explanatory. `lines` may be raw.
    """
    return _root_cause_clean([clean_line(x)[0] for x in lines], max_scan, run_gap)


# ------------------------------------------------------------------------------------------- pipeline

class LogPipeline:
    """Stateful per-server-process log pipeline. Not thread-safe; feed lines in order.

    Public state (read-only for consumers):
      phases        list[PhaseRecord] in the order entered
      phase         current phase id or None
      route         "native" (>=0.21 plugin) or "legacy" (NxDI)
      cache_hits    dict key -> hit lines (rank repeats merged); cache_misses likewise
      cache_keys    dict key -> None, every `Compilation cache key:` in order
      ranks_seen    set of worker ranks seen
      errors        list[ErrorSignature] in order
      timings       list[Timing] in order
      ready_ts      ts of `Application startup complete.` or None
      lines_fed / lines_emitted   counters
    """

    def __init__(self, speculative: bool = False, dedup_window_s: float = 30.0, context_lines: int = 6,
                 history: int = 2000, platform: str | None = None):
        """speculative: an EAGLE3 run (the draft phase is expected). dedup_window_s: how long after a
        line's first copy other ranks' copies are still merged into it. context_lines: lines of context
        an ErrorSignature carries. history: clean lines kept for root_cause()/recent_lines().
        platform: the profile's platform, a hint for the starting route ("cpu" / "cuda": the generic vLLM
        route; anything else: the Neuron route). The lines themselves switch the route either way."""
        self.speculative = speculative
        self.platform = platform
        self.dedup_window_s = dedup_window_s
        self.context_lines = context_lines
        self.phases: list[PhaseRecord] = []
        self.phase: str | None = None
        self.route = "vllm" if platform in ("cpu", "cuda", "rocm") else "native"
        self.stop_ts: float | None = None  # set by stopping(): our own stop began here
        self.lines_after_stop = 0
        self.errors_after_stop = 0  # error lines seen after stopping() (not reported as errors)
        self.cache_hits: dict[str, int] = {}
        self.cache_misses: dict[str, int] = {}
        self.cache_keys: dict[str, None] = {}
        self.ranks_seen: set[int] = set()
        self.errors: list[ErrorSignature] = []
        self.timings: list[Timing] = []
        self.ready_ts: float | None = None
        self._ready_line_id = -1
        self.first_ts: float | None = None
        self.closed = False
        self.lines_fed = 0
        self.lines_emitted = 0
        self._order = {p: i for i, p in enumerate(ROUTES[self.route])}
        self._idx = -1
        self._records: dict[str, PhaseRecord] = {}
        # masked message -> recent groups [line_id, set(rank ids), first_ts], oldest first
        self._groups: dict[str, list[list]] = {}
        self._exact: dict[str, list[list]] = {}
        self._max_groups = 8192
        self._full_group = 1  # largest rank count reached by a merged line so far (the TP degree, once known)
        self._recent: deque[str] = deque(maxlen=max(history, context_lines))
        self._prefix_cache: dict[str, tuple | bool] = {}

    # -- derived ---------------------------------------------------------------------------------
    @property
    def expected_phases(self) -> tuple[str, ...]:
        order = ROUTES[self.route]
        return order if self.speculative else tuple(p for p in order if p != "draft")

    @property
    def stopping_requested(self) -> bool:
        return self.stop_ts is not None

    @property
    def ready(self) -> bool:
        return self.ready_ts is not None

    @property
    def cache_hit_count(self) -> int:
        return sum(self.cache_hits.values())

    @property
    def cache_miss_count(self) -> int:
        return sum(self.cache_misses.values())

    @property
    def primary_error(self) -> ErrorSignature | None:
        """The first specific error signature, else the first engine-failed one, else None."""
        for e in self.errors:
            if e.kind not in _GENERIC_KINDS:
                return e
        return self.errors[0] if self.errors else None

    def errors_after_ready(self) -> list[ErrorSignature]:
        """Error signatures raised after `Application startup complete.` (and before our stop)."""
        if self.ready_ts is None:
            return []
        return [e for e in self.errors if e.line_id > self._ready_line_id]

    def stopping(self, ts: float) -> None:
        """Our own stop (SIGINT) is about to begin. From here on lines are still cleaned and emitted, but never
        classified: vLLM 0.32 answers a SIGINT with `AsyncLLM output_handler failed.`, a traceback and
        EngineDeadError, which is its normal shutdown, not a failure. Idempotent (the first call counts)."""
        if self.stop_ts is None:
            self.stop_ts = ts

    def phase_record(self, name: str) -> PhaseRecord | None:
        return self._records.get(name)

    def recent_lines(self) -> list[str]:
        """The last `history` clean messages (rank repeats merged), oldest first."""
        return list(self._recent)

    def root_cause(self) -> str | None:
        """root_cause() over the pipeline's own recent history."""
        return _root_cause_clean(list(self._recent))

    # -- feeding ---------------------------------------------------------------------------------
    def feed(self, raw: str, ts: float) -> list[LogEvent]:
        """Process one raw line (trailing newline optional); return the events it produced (maybe none)."""
        self.lines_fed += 1
        if self.first_ts is None:
            self.first_ts = ts
        # Fast path: the "(Proc pid=N) " prefixes (ANSI colours included) are looked up in a cache keyed
        # by their raw text; the header is matched in place; ANSI is stripped from the message only.
        info = None
        k = 0
        if "\r" not in raw:
            c0 = c = raw[:1]
            if c == "(" or c == "\x1b":
                j = raw.find(")", 1)
                sp = raw.find(" ", j) if j > 0 else -1
                if sp > 0:
                    k1 = sp + 1
                    c = raw[k1:k1 + 1]
                    if c == "(" or c == "\x1b":
                        j = raw.find(")", k1)
                        sp = raw.find(" ", j) if j > 0 else -1
                        if sp > 0:
                            cand = raw[:sp + 1]
                            info = self._prefix_cache.get(cand)
                            if info is None:
                                info = self._learn_prefix(cand)
                            if info is not False:
                                k = sp + 1
                    if k == 0:
                        cand = raw[:k1]
                        info = self._prefix_cache.get(cand)
                        if info is None:
                            info = self._learn_prefix(cand)
                        if info is not False:
                            k = k1
            if k == 0:
                if c0 == "(" or c0 == "\x1b":
                    return self._feed_slow(raw, ts)
                info = None
            c = raw[k:k + 1]
            level = None
            if "0" <= c <= "9":
                m = _DHEAD_match(raw, k)
                if m is not None:
                    g = m.groups()
                    level = g[0] or g[1] or g[2] or g[4]
                    k = m.end()
            elif "A" <= c <= "Z":
                m = _LHEAD_match(raw, k)
                if m is not None:
                    level = m.group(1) or m.group(2)
                    k = m.end()
            elif c == "\x1b":
                return self._feed_slow(raw, ts)
            msg = raw[k:] if k else raw
            if "\x1b" in msg:
                msg = _ANSI_sub("", msg)
            msg = msg.rstrip()
        else:
            return self._feed_slow(raw, ts)
        return self._emit(msg, level, info, ts)

    def _feed_slow(self, raw: str, ts: float) -> list[LogEvent]:
        s = collapse_cr(_ANSI_sub("", raw) if "\x1b" in raw else raw)
        m = _PROCS_match(s)
        info = None
        k = 0
        if m is not None:
            k = m.end()
            pre = s[:k]
            info = self._prefix_cache.get(pre)
            if info is None:
                info = self._learn_prefix(pre)
            if info is False:  # cannot happen for a regex-matched prefix; be safe
                info, k = None, 0
        k, level, _ = _header(s, k)
        return self._emit(s[k:].rstrip(), level, info, ts)

    def _learn_prefix(self, cand: str):
        """Parse a raw prefix candidate; cache (process, rank identity or None, rank) or False."""
        cache = self._prefix_cache
        if len(cache) >= 4096:
            cache.clear()
        m = _PROCS_fullmatch(_ANSI_sub("", cand) if "\x1b" in cand else cand)
        if m is None:
            cache[cand] = False
            return False
        p1, r1, pid1, p2, r2, pid2 = m.groups()
        if p2 is not None:
            wname, rattr, wpid = p2, r2, pid2
        elif _is_worker(p1):
            wname, rattr, wpid = p1, r1, pid1
        else:
            info = cache[cand] = (p1, None, None)
            return info
        rank = _rank_of(wname, rattr)
        if rank is not None:
            self.ranks_seen.add(rank)
        info = cache[cand] = (p1, rank if rank is not None else "pid" + wpid, rank)
        return info

    def _emit(self, msg: str, level: str | None, info, ts: float) -> list[LogEvent]:
        if not msg:
            return []
        if level == "WARN":
            level = "WARNING"
        if info is not None:
            process, ident, rank = info
        else:
            process = ident = rank = None
        if ident is not None:
            # worker line: merge per-rank repeats. _exact memoises message -> group list of its masked key.
            lst = self._exact.get(msg)
            if lst is None:
                key = _NUM_sub("#", msg)
                groups = self._groups
                lst = groups.get(key)
                if lst is None:
                    if len(groups) >= self._max_groups:
                        self._prune(ts)
                        groups = self._groups
                    lst = groups[key] = []
                exact = self._exact
                if len(exact) >= 4 * self._max_groups:
                    exact.clear()
                exact[msg] = lst
            window = self.dedup_window_s
            for g in lst:
                members = g[1]
                if ident not in members and ts - g[2] <= window:
                    members.add(ident)
                    n = len(members)
                    if n > self._full_group:
                        self._full_group = n
                    elif n == self._full_group:
                        lst.remove(g)  # every rank has printed it: no more repeats expected
                    return [RankCount(g[0], n, rank, ts)]
            line_id = self.lines_emitted
            lst.append([line_id, {ident}, ts])
            if len(lst) > 4:
                del lst[0]
        else:
            line_id = self.lines_emitted
        self.lines_emitted = line_id + 1

        out: list[LogEvent] = [None]  # type: ignore[list-item]  # slot for the CleanLine
        kind = None
        if self.stop_ts is not None:
            # After our own stop: shutdown noise (tracebacks, EngineDeadError) is neither an error nor a phase.
            self.lines_after_stop += 1
            if level in _ERROR_LEVELS or classify_error(msg) is not None or _EXC.match(msg) is not None:
                self.errors_after_stop += 1
            out[0] = CleanLine(line_id, msg, level, process, rank, False, ts)
            self._recent.append(msg)
            return out
        if _GATE_search(msg) is not None:
            kind = self._classify(msg, ts, line_id, out)
        is_error = (
            kind is not None
            or level in _ERROR_LEVELS
            or (level is None and ("Error" in msg or "Exception" in msg or "FATAL" in msg or "Traceback" in msg)
                and _EXC.match(msg) is not None)
        )
        out[0] = CleanLine(line_id, msg, level, process, rank, is_error, ts)
        self._recent.append(msg)
        return out

    def close(self, ts: float) -> list[LogEvent]:
        """End of stream: close the open phase. Idempotent."""
        if self.closed:
            return []
        self.closed = True
        if self.phase is None:
            return []
        rec = self._records[self.phase]
        rec.end_ts = ts
        return [PhaseChange(None, self.phase, ts - rec.start_ts, ts, "end of stream")]

    # -- internals -------------------------------------------------------------------------------
    def _prune(self, ts: float) -> None:
        w = self.dedup_window_s
        kept = {k: lst for k, lst in self._groups.items() if lst and ts - lst[-1][2] <= w}
        if len(kept) > self._max_groups // 2:
            kept = dict(islice(kept.items(), len(kept) - self._max_groups // 4, None))
        self._groups = kept
        self._exact.clear()

    def _switch_route(self, route: str) -> None:
        self.route = route
        self._order = {p: i for i, p in enumerate(ROUTES[route])}
        if self.phase is not None:
            self._idx = self._order[self.phase]

    def _classify(self, msg: str, ts: float, line_id: int, out: list[LogEvent]) -> str | None:
        kind = classify_error(msg)
        if kind is not None:
            ctx = tuple(reversed(list(islice(reversed(self._recent), self.context_lines))))
            err = ErrorSignature(kind, msg, ctx, ts, line_id)
            self.errors.append(err)
            out.append(err)
            return kind

        if self.route == "native":
            for k in _LEGACY_MARKERS:
                if k in msg:
                    self._switch_route("legacy")
                    break
            else:
                # Generic vLLM (CPU / CUDA) only before any Neuron-only phase was seen.
                if self.phase in (None, "config"):
                    for k in _VLLM_MARKERS:
                        if k in msg:
                            self._switch_route("vllm")
                            break

        phase = _phase_of(msg, _VLLM_PHASE_RULES if self.route == "vllm" else _PHASE_RULES)
        if phase is not None:
            idx = self._order[phase]
            if idx > self._idx:
                prev = self.phase
                prev_elapsed = None
                if prev is not None:
                    rec = self._records[prev]
                    rec.end_ts = ts
                    prev_elapsed = ts - rec.start_ts
                rec = PhaseRecord(phase, ts, None, msg)
                self.phases.append(rec)
                self._records[phase] = rec
                self.phase = phase
                self._idx = idx
                out.append(PhaseChange(phase, prev, prev_elapsed, ts, msg))

        if "cache hit" in msg or "cache miss" in msg:
            m = _CACHE_RE.search(msg)
            if m is not None:
                src, what, key = m.groups()
                hit = what == "hit"
                table = self.cache_hits if hit else self.cache_misses
                table[key] = table.get(key, 0) + 1
                out.append(CacheResult(key, hit, "remote" if src == "Remote" else "local", ts))
        elif "Compilation cache key" in msg:
            m = _CACHE_KEY_RE.search(msg)
            if m is not None:
                self.cache_keys[m.group(1)] = None
        elif "Directly load" in msg or "Compiling a graph for" in msg or "saved AOT compiled" in msg:
            key = None
            m = _TC_HIT_RE.search(msg)
            if m is not None:
                hit, key = True, (m.group(1) or "") + m.group(2)
            elif (m := _TC_MISS_RE.search(msg)) is not None:
                hit, key = False, (m.group(1) or "") + m.group(2)
            elif (m := _TC_AOT_RE.search(msg)) is not None:
                hit = msg[len(m.group(1) or ""):].startswith("Directly")
                h = _AOT_HASH_RE.search(m.group(2))
                key = (m.group(1) or "") + "AOT " + (h.group(1)[:16] if h else m.group(2))
            if key is not None:
                table = self.cache_hits if hit else self.cache_misses
                table[key] = table.get(key, 0) + 1
                out.append(CacheResult(key, hit, "torch-compile", ts))
        elif "artifacts" in msg or "cached neff" in msg:
            m = _LEGACY_HIT_RE.search(msg)
            hit = m is not None
            if m is None:
                m = _LEGACY_MISS_RE.search(msg)
            if m is not None:
                path = next(x for x in m.groups() if x)
                mm = _MODULE_RE.search(path)
                key = mm.group(0) if mm else path.rstrip(".")
                table = self.cache_hits if hit else self.cache_misses
                table[key] = table.get(key, 0) + 1
                out.append(CacheResult(key, hit, "legacy", ts))

        for gate, rx, name, rphase, acc in _TIMING_RULES:
            if gate in msg:
                m = rx.search(msg)
                if m is not None:
                    try:
                        secs = float(m.group(1).rstrip("."))
                    except ValueError:
                        continue
                    t = Timing(name, secs, ts)
                    self.timings.append(t)
                    out.append(t)
                    if isinstance(rphase, tuple):
                        rphase = self.phase if self.phase in rphase else rphase[0]
                    rec = self._records.get(rphase) if rphase else None
                    if rec is not None:
                        rec.reported_s = (rec.reported_s or 0.0) + secs if acc else secs
                break

        if _READY in msg and self.ready_ts is None:
            self.ready_ts = ts
            self._ready_line_id = line_id
            out.append(Ready(ts, ts - (self.first_ts if self.first_ts is not None else ts)))
        return None
