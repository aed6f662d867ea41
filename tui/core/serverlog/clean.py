"""A server log line made readable: ANSI and carriage-return bars removed, process and logger prefixes
stripped (level kept), and the events the log pipeline emits (tui.core.serverlog.logparse describes them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple


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


# uvicorn's access line for a scrape of the server's Prometheus endpoint that succeeded, after the "INFO:" header:
# `127.0.0.1:54321 - "GET /metrics HTTP/1.1" 200 OK`. The engine samples /metrics about once a second while a bench
# runs (the acceptance over time), so the rank-collapsed view folds these into one line with a count
# (METRICS_FOLD_TEXT ×N); the raw view and the saved serve.log keep every one, and a failed scrape is not folded.
_METRICS_GET_match = re.compile(r'\S+:\d+ - "GET /metrics(?:\?[^" ]*)? HTTP/[\d.]+" 200\b').match
METRICS_FOLD_TEXT = "GET /metrics (this app's sampling, folded)"  # short: its ×N fits at 80 columns


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
