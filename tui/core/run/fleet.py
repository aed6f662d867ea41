"""A run whose arms run alongside each other (a fleet: tui/core/exec/ray.py): the run loop's side of it. A part
of the Engine (run/engine.py), kept apart for its size.

The run loop still runs the requested steps in order and stops at the first failure; what changes is that when
it reaches the first arm, its executor starts every arm still to run at once (Ray places them; each node measures
one arm at a time), and each arm's start and end are recorded as they happen (StepStarted, state.json,
StepFinished), not when the loop gets to it. The loop then awaits each arm in order. Stopping the run (a failed
step, Ctrl+C, `s`, a lost terminal) stops every arm still running.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tui.core.events import Notice, StepFinished, StepStarted
from tui.core.exec.cluster import node_baseline
from tui.core.plan.arms import fingerprint, result_name, run_steps, step_title
from tui.core.steps.base import StepResult
from tui.core.store.rundir import RunDirUnwritable, result_file_problem


class _Hooks:
    def __init__(self, engine: Any):
        self.engine = engine

    def started(self, sid: str, node: dict[str, Any] | None) -> None:
        self.engine._arm_started(sid, node)

    def finished(self, sid: str, result: StepResult) -> None:
        self.engine._arm_finished(sid, result)


class Fleet:
    """Engine methods (the Engine inherits them; `self` is the Engine)."""

    def _fleet_init(self) -> None:
        self._batch: dict[str, asyncio.Future[StepResult]] = {}
        self._batch_t0: dict[str, float] = {}
        self._batch_node: dict[str, str] = {}

    # -- opening ----------------------------------------------------------------------------------------
    async def _open_fleet(self) -> None:
        """The executor's nodes and their platforms, in place of the one [stand_in] of a run on this host."""
        ex = self.executor
        ex.register_failure_callback(lambda text: self._emit(Notice("", "warning", f"fleet: {text}")))
        err = await ex.open(self.ctx, self.run, self._emit)
        if err:
            self.platform_error = f"the fleet could not be brought up: {err}"
        self.stand_in_notice = ex.summary()
        self.run.state["fleet"] = ex.describe()
        self._cover_baselines()

    def _fleet_notices(self) -> list[Notice]:
        return list(getattr(self.executor, "notices", []))

    def _cover_baselines(self) -> None:
        """A continued fleet run keeps each node's baseline whose result files are intact; a node group of this
        cluster without one gets its baseline run (the `baseline` step runs again for those nodes only)."""
        base = self.ctx.shared.get("baseline")
        nodes = base.get("nodes") if isinstance(base, dict) else None
        if isinstance(nodes, dict):
            sound = {k: v for k, v in nodes.items() if isinstance(v, dict) and self._node_sound(k, v)}
            base["nodes"] = sound
        groups = [g.key for g in getattr(self.executor, "groups", []) if not g.lost]
        have = set((base or {}).get("nodes") or {}) if isinstance(base, dict) else set()
        missing = [k for k in groups if k not in have]
        if not missing:
            return
        if "baseline" in self._kept:
            self._kept.remove("baseline")
            self.results.pop("baseline", None)
            self._file_notices.append(f"baseline: no baseline was measured on {', '.join(missing)} of this cluster: "
                                      "running it there (the other nodes' baselines are kept)")
        if "baseline" not in self.steps and any(self.executor.batched(s) for s in self.steps):
            wanted = set(self.steps) | {"baseline"}
            self.steps = [s for s in run_steps(self.profile) if s in wanted]

    def _node_sound(self, key: str, facts: dict[str, Any]) -> bool:
        """A node's earlier baseline may be kept: measured with these settings and its result files intact."""
        nid = (facts.get("arm") or {}).get("id") or "baseline"
        if facts.get("fingerprint") != fingerprint(self.profile, node_baseline(key)):
            return False
        for wl, recs in (facts.get("repeats") or {}).items():
            for r, rec in enumerate(recs if isinstance(recs, list) else [], start=1):
                name = result_name(self.profile, nid, str(wl), r)
                if result_file_problem(self.run.path, name, rec if isinstance(rec, dict) else None):
                    return False
        return bool(facts.get("repeats"))

    def _result_problems(self, sid: str, facts: dict[str, Any]) -> list[tuple[str, str, str, str | None, int]]:
        """A fleet's `baseline` holds a baseline per node (`nodes`), each under its own step id: every node's
        files are checked (its top-level numbers are a copy of one node's)."""
        nodes = facts.get("nodes") if sid == "baseline" else None
        if not isinstance(nodes, dict):
            return super()._result_problems(sid, facts)  # type: ignore[misc]
        out: list[tuple[str, str, str, str | None, int]] = []
        for key, nf in nodes.items():
            if not isinstance(nf, dict):
                continue
            nid = (nf.get("arm") or {}).get("id") or sid
            for wl, recs in (nf.get("repeats") or {}).items():
                for r, rec in enumerate(recs if isinstance(recs, list) else [], start=1):
                    name = result_name(self.profile, nid, str(wl), r)
                    why = result_file_problem(self.run.path, name, rec if isinstance(rec, dict) else None)
                    if why:
                        out.append((f"node {key} {wl} repeat {r} ", name, why, None, r))
        return out

    # -- the arms ----------------------------------------------------------------------------------------
    async def _batched_step(self, sid: str) -> StepResult:
        """Run arm `sid` as part of a batch: start one (every arm still to run, from `sid` on) unless `sid` is
        already running in one, then wait for `sid` to end."""
        fut = self._batch.get(sid)
        if fut is None or fut.done():
            for problem in self.executor.check_health():  # a node lost earlier takes no new arm
                self._emit(Notice(sid, "warning", f"fleet: {problem}; the arms run on the other nodes"))
            running = {s for s, f in self._batch.items() if not f.done()}
            todo = [s for s in self.steps if self.executor.batched(s) and s not in running
                    and (s == sid or self.status_of(s) is None)]
            self._batch.update(self.executor.start_batch(self.ctx, todo, _Hooks(self)))
            fut = self._batch[sid]
        res = await asyncio.shield(fut)
        return self.results.get(sid, res)

    def _arm_started(self, sid: str, node: dict[str, Any] | None) -> None:
        self.attempts[sid] = self.attempts.get(sid, 0) + 1
        self.ctx.diagnoses[:] = [d for d in self.ctx.diagnoses if d.step != sid]
        self.results.pop(sid, None)
        key = (node or {}).get("key") or ""
        self._batch_node[sid] = key
        self._batch_t0[sid] = time.monotonic()
        self._emit(StepStarted(sid, step_title(sid, self.profile), attempt=self.attempts[sid], node=key))
        self._opened_steps = True
        try:
            self.run.update_step(sid, status="running", started=time.time(), **({"node": node} if node else {}))
        except RunDirUnwritable as err:
            self._unwritable_seen(err)

    def _arm_finished(self, sid: str, res: StepResult) -> None:
        secs = time.monotonic() - self._batch_t0.get(sid, time.monotonic())
        try:
            self._record_result(sid, res, secs)
        except RunDirUnwritable as err:
            self._unwritable_seen(err)
        self._emit(StepFinished(sid, res.status, secs, res.summary, node=self._batch_node.get(sid, "")))

    async def _stop_batch(self) -> None:
        """Stop every arm still running (a failed step ends the run; the arms still running are recorded as
        interrupted, their files kept)."""
        if any(not f.done() for f in self._batch.values()):
            await self.executor.stop()
