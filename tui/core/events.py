"""Typed events the engine emits. Every front end (headless, Textual) renders these and nothing else.

Events are frozen dataclasses. `step` is the step id (`env`, `checkpoints`, ...) or "" for run-level
events; `node` names the fleet node an event comes from ("" on this host). Front ends must treat unknown event types as ignorable so the engine can grow.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Literal, Protocol

FactStatus = Literal["pass", "warn", "fail", "info"]
Severity = Literal["error", "warning", "info"]


class StepStatus(StrEnum):
    """How a step ended. A StrEnum: members compare equal to their strings and serialise as them."""

    PASSED = "passed"
    WARNED = "warned"
    FAILED = "failed"
    SKIPPED = "skipped"
    UNAVAILABLE = "unavailable"
    INTERRUPTED = "interrupted"

    @property
    def ok(self) -> bool:
        return self in (StepStatus.PASSED, StepStatus.WARNED)

    @property
    def settled(self) -> bool:
        """Nothing is left to do for the step: it passed, warned or was skipped."""
        return self in (StepStatus.PASSED, StepStatus.WARNED, StepStatus.SKIPPED)

STEP_IDS: tuple[str, ...] = ("env", "checkpoints", "dataset", "baseline", "eagle3", "results")
STEP_TITLES: dict[str, str] = {
    "env": "Environment",
    "checkpoints": "Checkpoints",
    "dataset": "Dataset",
    "baseline": "Baseline server",
    "eagle3": "EAGLE3 server",
    "results": "Results",
    "race": "Race: more repeats",
}


def _now() -> float:
    return time.time()


@dataclass(frozen=True)
class Event:
    step: str
    # The fleet node the event comes from (a Ray node group's key, "n1", "n2", ...; tui/core/exec/ray.py tags remote
    # events with it), "" for a run on this host. Keyword-only, so every event keeps its positional fields.
    node: str = field(default="", kw_only=True)


@dataclass(frozen=True)
class RunStarted(Event):
    profile: str
    run_dir: str
    steps: tuple[str, ...]
    simulated: bool
    ts: float = field(default_factory=_now)


@dataclass(frozen=True)
class RunFinished(Event):
    exit_code: int
    report_path: str | None
    ts: float = field(default_factory=_now)


@dataclass(frozen=True)
class StepStarted(Event):
    """A step (re)starts. attempt > 1 is a retry: front ends drop what they showed of the earlier attempt,
    its diagnoses included (the engine drops them from the report too)."""

    title: str
    ts: float = field(default_factory=_now)
    attempt: int = 1


@dataclass(frozen=True)
class StepFinished(Event):
    status: StepStatus
    seconds: float
    summary: str
    ts: float = field(default_factory=_now)


@dataclass(frozen=True)
class Fact(Event):
    """One checked fact: name, value, pass/warn/fail/info, a detail line and a one-line remedy."""

    name: str
    value: str
    status: FactStatus
    detail: str = ""
    remedy: str = ""


@dataclass(frozen=True)
class Progress(Event):
    """Progress of a long task. total=None means unknown. unit: 'B' (bytes), 'req', 'tok' ..."""

    task: str
    completed: float
    total: float | None
    unit: str = ""
    rate: float | None = None  # units per second
    eta_s: float | None = None
    description: str = ""
    done: bool = False


@dataclass(frozen=True)
class LogLine(Event):
    """One raw line of a child process' output (already timestamp-free, ANSI intact)."""

    text: str
    source: str = "serve"  # serve | bench
    ts: float = field(default_factory=_now)


@dataclass(frozen=True)
class CleanLog(Event):
    """A server log message with prefixes stripped; per-rank repeats arrive once (see LogRanks)."""

    line_id: int
    text: str
    level: str | None
    is_error: bool
    ranks: int = 1


@dataclass(frozen=True)
class LogRanks(Event):
    """CleanLog `line_id` has now been seen from `ranks` worker ranks (show ×N)."""

    line_id: int
    ranks: int


@dataclass(frozen=True)
class Phase(Event):
    """A startup phase changed. status: started | finished | failed (the server exited, or timed out, during
    this phase). elapsed_s is the phase's own duration."""

    phase: str
    status: Literal["started", "finished", "failed"]
    elapsed_s: float = 0.0
    detail: str = ""
    ts: float = field(default_factory=_now)


@dataclass(frozen=True)
class CompileCache(Event):
    key: str
    hit: bool


@dataclass(frozen=True)
class Diagnosis(Event):
    id: str
    severity: Severity
    title: str
    evidence: tuple[str, ...]
    remedy: str
    # The fix is this setting (a dotted profile key, e.g. "server.tensor_parallel_size"), changed to `suggest`
    # when known: a front end names its own way to change it; "" when the fix is not a setting.
    setting: str = ""
    suggest: str = ""


@dataclass(frozen=True)
class Notice(Event):
    """A free-form message for the operator (level: info | warning | error)."""

    level: Literal["info", "warning", "error"]
    text: str


@dataclass(frozen=True)
class Artifact(Event):
    name: str
    path: str


@dataclass(frozen=True)
class Command(Event):
    """The exact command a step runs: role "serve" (a server launch), "bench" (`vllm bench serve`) or
    "tool" (a helper such as the custom-dataset builder). `text` is its shell form (env assignments first)."""

    role: Literal["serve", "bench", "tool"]
    argv: tuple[str, ...]
    text: str
    how: str = ""  # how it runs where that is not a process of its own: "in the arm's warm runner (pid N)"


@dataclass(frozen=True)
class ComparisonTable(Event):
    """Baseline vs EAGLE3: the table rows (label, baseline, eagle3), the comparison ratios, notes, and
    the two runs' numbers (report.json's `runs`)."""

    rows: tuple[tuple[str, str, str], ...]
    comparison: dict[str, Any]
    notes: tuple[str, ...]
    runs: dict[str, Any]


@dataclass(frozen=True)
class MatrixTable(Event):
    """A tune run's results: every arm on every workload (report.json's `matrix`: arms, cells with intervals,
    the recommendation per workload, the baseline noise floor). See tui/core/results/stats.py for its shape."""

    matrix: dict[str, Any]


@dataclass(frozen=True)
class ArmProgress(Event):
    """Where an arm's step is: which workload and repeat its bench is on (repeat 0: the probe), of how many."""

    workload: str
    repeat: int
    repeats: int
    workloads: tuple[str, ...]


@dataclass(frozen=True)
class BenchSample(Event):
    """One window of the server's /metrics while a bench runs (about a second): counter deltas over the
    window, so acceptance and throughput can be drawn over time. `label` names the bench ("sonnet c4 r2",
    or "" for a two-arm run's one bench) and `key` is its bench key ("sonnet@c4", tui/core/plan/arms.py
    level_key); `t_s` is the window's end in seconds since the bench started.
    acceptance_rate is vLLM's (accepted / draft tokens, percent), None when no draft ran in the window or the
    server is not speculative; per_position holds the window's per-position acceptance (percent)."""

    label: str
    t_s: float
    window_s: float
    generation_tokens: int
    tokens_per_s: float
    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    per_position: tuple[float, ...] = ()
    concurrency: int | None = None
    key: str = ""


@dataclass(frozen=True)
class LoadTable(Event):
    """A tune run with a concurrency sweep: report.json's `load` (per-level speedups with intervals, the
    crossover, the best k per level, the schedule, SLO goodput, drift and the speedup model); see
    tui/core/results/load.py for its shape."""

    load: dict[str, Any]


@dataclass(frozen=True)
class Snippet(Event):
    """The tutorial's own comparison output, reproduced from the two bench JSON files."""

    text: str


Sink = Callable[[Event], None]


class FactRecording(Protocol):
    """What a host check needs to record facts (tui.core.steps.base.FactRecorder is the one implementation);
    a Protocol here so the host floor does not import the steps above it."""

    def add(self, name: str, value: Any, status: FactStatus, detail: str = "", remedy: str = "") -> Fact: ...

    def notice(self, level: str, text: str) -> None: ...
