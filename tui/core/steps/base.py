"""What every step gets and returns.

A step is a module in tui/core/steps/ with `async def run(ctx: StepContext) -> StepResult`. It emits
events through `ctx.emit`, writes its artifact through `ctx.run`, and may read facts other steps stored
in `ctx.shared` (e.g. ctx.shared["env"]["vllm_version"]). A step never prints and never exits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tui.core.plan.commands import Placeholders
from tui.core.events import Diagnosis, Fact, FactStatus, Notice, Sink, StepStatus
from tui.core.profile.model import Profile
from tui.core.store.rundir import RunDir


@dataclass
class StepContext:
    profile: Profile
    run: RunDir
    emit: Sink
    ph: Placeholders
    # Facts stored by earlier steps, keyed by step id. Persisted in state.json.
    shared: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The environment child processes and libraries see (os.environ plus run-level additions such as
    # HF_ENDPOINT of the loopback hub in a simulated run).
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    verbose: bool = False
    # Diagnoses raised so far in this run (the report collects them).
    diagnoses: list[Diagnosis] = field(default_factory=list)
    # Child processes (supervisor.ManagedProcess: async stop(), kill_now()) the engine stops on exit;
    # a step registers each one it starts and removes it once it has stopped it itself.
    cleanups: list[Any] = field(default_factory=list)
    # Objects that live across steps for this process only (never persisted), e.g. a tune run's launch pool.
    runtime: dict[str, Any] = field(default_factory=dict)

    def forget(self, proc: Any) -> None:
        if proc in self.cleanups:
            self.cleanups.remove(proc)


@dataclass
class StepResult:
    status: StepStatus
    summary: str
    facts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.status = StepStatus(self.status)  # steps may pass the plain string


class FactRecorder:
    """Collects facts for a step, emits each one, and computes the step status from them."""

    def __init__(self, ctx: StepContext, step: str):
        self.ctx = ctx
        self.step = step
        self.facts: list[Fact] = []

    def add(self, name: str, value: Any, status: FactStatus, detail: str = "", remedy: str = "") -> Fact:
        f = Fact(self.step, name, str(value), status, detail, remedy)
        self.facts.append(f)
        self.ctx.emit(f)
        return f

    def notice(self, level: str, text: str) -> None:
        self.ctx.emit(Notice(self.step, level, text))  # type: ignore[arg-type]

    @property
    def failed(self) -> list[Fact]:
        return [f for f in self.facts if f.status == "fail"]

    @property
    def warned(self) -> list[Fact]:
        return [f for f in self.facts if f.status == "warn"]

    def status(self) -> StepStatus:
        if self.failed:
            return StepStatus.FAILED
        if self.warned:
            return StepStatus.WARNED
        return StepStatus.PASSED

    def summary(self) -> str:
        n = len(self.facts)
        if self.failed:
            return f"{len(self.failed)} of {n} checks failed: " + "; ".join(f.name for f in self.failed)
        if self.warned:
            return f"{n} checks, {len(self.warned)} warnings: " + "; ".join(f.name for f in self.warned)
        return f"{n} checks passed"

    def as_json(self) -> list[dict[str, str]]:
        return [
            {"name": f.name, "value": f.value, "status": f.status, "detail": f.detail, "remedy": f.remedy}
            for f in self.facts
        ]

    def result(self, extra: dict[str, Any] | None = None) -> StepResult:
        return StepResult(self.status(), self.summary(), extra or {})
