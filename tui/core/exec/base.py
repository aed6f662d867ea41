"""Where a run's steps run: the executors, one floor between the steps and the run loop.

The shape of vLLM's own `vllm/v1/executor/`: an abstract `Executor` whose `get_class(config)` picks the
implementation — `LocalExecutor` (exec/local.py: every step in this process, on this host, as a run always ran)
or `RayExecutor` (exec/ray.py: a tune run's arms as Ray actors on a cluster's nodes, each node's checks on that
node) — with `check_health`, `register_failure_callback` and `shutdown`. Steps do not know where they run: the
run loop (run/engine.py) hands each step to its executor. Ray is imported in exec/ray.py only, and only when a run
asks for a cluster.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol

from tui.core.events import Sink
from tui.core.profile.model import Profile
from tui.core.steps.base import StepContext, StepResult
from tui.core.store.rundir import RunDir


class ExecutorError(Exception):
    """The executor cannot run this profile (the cluster is unreachable, its Ray differs, no node has room for an
    arm, Ray is not installed). str() is one paragraph naming the address, the versions or the resources; the run
    exits 2 before anything runs."""


@dataclass(frozen=True)
class ExecConfig:
    """Where to run: `address` of a Ray cluster ("" runs on this host), the nodes the arms may use (node ids or
    their first hex digits, addresses or host names; () for every node with room), and the CPUs an arm reserves
    on a cpu-platform node. From the profile's [fleet] table, with --ray ADDRESS taking precedence."""

    address: str = ""
    nodes: tuple[str, ...] = ()
    cpus_per_arm: float = 1.0

    @classmethod
    def of(cls, profile: Profile, address: str | None = None) -> "ExecConfig":
        fleet = profile.data.get("fleet") or {}
        return cls(address=(address if address is not None else str(fleet.get("address") or "")).strip(),
                   nodes=tuple(str(n).strip() for n in fleet.get("nodes") or ()),
                   cpus_per_arm=float(fleet.get("cpus_per_arm") or 1.0))


class ArmHooks(Protocol):
    """What the run loop does when an arm that runs alongside others starts and ends (run/fleet.py): the same
    bookkeeping as a step it runs itself (StepStarted, state.json, StepFinished)."""

    def started(self, sid: str, node: dict[str, Any] | None) -> None: ...

    def finished(self, sid: str, result: StepResult) -> None: ...


FailureCallback = Callable[[str], None]

_IMPLEMENTATIONS: dict[str, type["Executor"]] = {}


def implementation(kind: str) -> Callable[[type["Executor"]], type["Executor"]]:
    """Class decorator: register an executor under `kind` ("local", "ray") for Executor.get_class."""
    def register(cls: type["Executor"]) -> type["Executor"]:
        _IMPLEMENTATIONS[kind] = cls
        return cls
    return register


class Executor(ABC):
    """Runs the steps of one run. `local`: every step runs in this process (the run's platform, a [stand_in], is
    started by the engine); otherwise the executor starts each node's platform itself (`open`) and may run arms
    alongside each other (`batched` / `start_batch`)."""

    local: ClassVar[bool] = True

    def __init__(self, config: ExecConfig | None = None):
        self.config = config or ExecConfig()
        self._failure_callbacks: list[FailureCallback] = []

    @staticmethod
    def get_class(config: ExecConfig) -> type["Executor"]:
        """The executor for `config`: Ray's when it names a cluster address, else the local one."""
        return _IMPLEMENTATIONS["ray" if config.address else "local"]

    # -- before anything runs ------------------------------------------------------------------------------
    def connect(self, profile: Profile) -> None:
        """Check that this executor can run `profile` (ExecutorError: one paragraph, exit 2). Nothing is written."""

    async def open(self, ctx: StepContext, run: RunDir, emit: Sink) -> str:
        """Bring up where the steps will run (a fleet: every node's agent and platform). Returns "" or why the
        platform could not be brought up (every step then fails on it)."""
        return ""

    def describe(self) -> dict[str, Any] | None:
        """What state.json records of where the run ran (None: this host)."""
        return None

    # -- running ---------------------------------------------------------------------------------------
    @abstractmethod
    async def run_step(self, ctx: StepContext, sid: str) -> StepResult:
        """Run step `sid` to its end (the run loop does the bookkeeping around it)."""

    def batched(self, sid: str) -> bool:
        """Does `sid` run alongside other steps (start_batch), rather than through run_step one at a time?"""
        return False

    def start_batch(self, ctx: StepContext, sids: list[str], hooks: ArmHooks) -> dict[str, asyncio.Future[StepResult]]:
        """Start the steps `sids` together; each future resolves to its step's result (after hooks.finished)."""
        raise NotImplementedError

    # -- health and teardown --------------------------------------------------------------------------
    def check_health(self) -> list[str]:
        """What is wrong with where the run runs now (a lost node, ...); [] when healthy."""
        return []

    def register_failure_callback(self, callback: FailureCallback) -> None:
        """`callback(text)` is called when part of where the run runs fails (a node is lost mid-run)."""
        self._failure_callbacks.append(callback)

    def _failed(self, text: str) -> None:
        for cb in list(self._failure_callbacks):
            try:
                cb(text)
            except Exception:
                pass

    async def shutdown(self) -> None:
        """Stop everything this executor started (servers first, platforms last). Idempotent."""

    def kill_now(self) -> None:
        """Last resort, synchronous: kill whatever this executor started."""


__all__ = ["ArmHooks", "ExecConfig", "Executor", "ExecutorError", "implementation"]
