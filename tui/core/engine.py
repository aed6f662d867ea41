"""The engine: runs the requested steps of a profile in order and emits events to a sink.

Both front ends (headless and Textual) drive this class and nothing else, through one run loop:
`open()`, then `run_next()` (the next requested step; after a failure that is the failed step again),
`retry(step, profile=...)` (run a failed step again, optionally with corrected settings), `interim_report()`
and `finish()`. The engine alone decides what runs next, what a retry resets, which diagnoses belong to the
report (those of each step's latest attempt) and the exit code. It owns the run directory (state.json
after every step, report at the end), the loopback hub of simulated runs, and the cleanup of every child
process, whatever way the run ends.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import time
import traceback
from enum import IntEnum
from pathlib import Path
from typing import Any, Callable

from . import report as report_mod
from .commands import Placeholders
from .events import (
    STEP_IDS,
    STEP_TITLES,
    Diagnosis,
    Event,
    Notice,
    RunFinished,
    RunStarted,
    Sink,
    StepFinished,
    StepStarted,
    StepStatus,
)
from .profile import Profile
from .rundir import RunDir, atomic_write_text, redact
from .steps.base import StepContext, StepResult


class ExitCode(IntEnum):
    """The process exit codes of a run (headless and interactive alike)."""

    OK = 0  # every requested step passed (warnings allowed)
    FAILED = 1  # a step failed; the steps after it are reported as skipped
    USAGE = 2  # bad command line, profile or run directory
    INTERRUPTED = 130  # stopped by a signal or the operator before the run was complete


EXIT_OK = ExitCode.OK
EXIT_FAILED = ExitCode.FAILED
EXIT_USAGE = ExitCode.USAGE
EXIT_INTERRUPTED = ExitCode.INTERRUPTED

STEP_MODULES = {sid: f"tui.core.steps.{sid}" for sid in STEP_IDS}


def step_available(step: str) -> bool:
    return importlib.util.find_spec(STEP_MODULES[step]) is not None


def parse_steps(spec: str | None) -> list[str]:
    """'env,checkpoints' -> ['env', 'checkpoints'] in canonical order; ValueError names a bad id."""
    if not spec:
        return list(STEP_IDS)
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    bad = [s for s in wanted if s not in STEP_IDS]
    if bad:
        raise ValueError(
            f"unknown step id(s) {', '.join(repr(b) for b in bad)} in --steps; allowed: {', '.join(STEP_IDS)} "
            "(comma-separated, e.g. --steps env,checkpoints)."
        )
    if not wanted:
        raise ValueError(f"--steps is empty; allowed: {', '.join(STEP_IDS)}.")
    return [s for s in STEP_IDS if s in wanted]


class Engine:
    def __init__(self, profile: Profile, run_dir: Path, sink: Sink, steps: list[str] | None = None,
                 verbose: bool = False):
        self.profile = profile
        self.steps = steps or list(STEP_IDS)
        self.sink = sink
        self.run = RunDir(run_dir)
        self.verbose = verbose
        self.results: dict[str, StepResult] = {}
        self._hub: Any = None
        self.ctx = StepContext(profile=profile, run=self.run, emit=self._emit,
                               ph=Placeholders(run_dir=str(self.run.path)), verbose=verbose)
        # Facts from an earlier run in the same directory (e.g. --steps baseline after --steps dataset).
        for sid, st in self.run.state.get("steps", {}).items():
            if isinstance(st, dict) and isinstance(st.get("facts"), dict) and st.get("status") in ("passed", "warned"):
                self.ctx.shared[sid] = st["facts"]
        self.exit_code: int | None = None
        self.attempts: dict[str, int] = {}
        self.opened = False

    # -- events -------------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        if isinstance(event, Diagnosis):
            if not any(d.id == event.id and d.step == event.step for d in self.ctx.diagnoses):
                self.ctx.diagnoses.append(event)
        try:
            self.sink(event)
        except Exception:  # a broken front end must not kill the run
            pass

    # -- simulated backend ----------------------------------------------------------------------
    def _start_simulation(self) -> None:
        if not self.profile.simulated:
            return
        sim = self.profile.data["simulation"]
        self.ctx.environ["SPECDEC_SIM"] = json.dumps(sim)
        if sim.get("hub", True):
            from tui.sim.hub import start_hub  # the loopback hub + dataset mirror

            self._hub = start_hub(host="127.0.0.1", port=0)
            self.ctx.ph.sim_hub = self._hub.url
            env = self.ctx.environ
            env["HF_ENDPOINT"] = self._hub.url
            # Stand-in configs must never land in the operator's real Hugging Face cache (a fake
            # refs/main there would mislead a later real run), and no token goes to the stand-in hub.
            env["HF_HOME"] = str(Path(self.ctx.ph.cache_dir) / "sim-hf-home")
            for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
                env.pop(var, None)

    def _stop_simulation(self) -> None:
        if self._hub is not None:
            try:
                self._hub.stop()
            finally:
                self._hub = None

    # -- cleanup ---------------------------------------------------------------------------------
    async def _cleanup(self) -> None:
        while self.ctx.cleanups:
            proc = self.ctx.cleanups.pop()
            try:
                await asyncio.shield(proc.stop())
            except Exception:
                proc.kill_now()

    def hurry(self, grace_s: float = 1.0) -> None:
        """Nobody is watching any more (the terminal went away): from now on every child is stopped with a
        short SIGINT grace before SIGTERM, so the whole shutdown fits in a few seconds."""
        for proc in self.ctx.cleanups:
            if getattr(proc, "grace_s", 0.0) > grace_s:
                proc.grace_s = grace_s

    def cleanup_sync(self) -> None:
        """Last-resort synchronous cleanup (e.g. from an atexit hook)."""
        for proc in list(self.ctx.cleanups):
            try:
                proc.kill_now()
            except OSError:
                pass
        self._stop_simulation()

    # -- running -----------------------------------------------------------------------------------
    async def run_step(self, sid: str) -> StepResult:
        """Run one step (a first attempt or a retry). Diagnoses of the step's earlier attempt are dropped."""
        title = STEP_TITLES[sid]
        self.attempts[sid] = self.attempts.get(sid, 0) + 1
        self.ctx.diagnoses[:] = [d for d in self.ctx.diagnoses if d.step != sid]
        self.results.pop(sid, None)
        self._emit(StepStarted(sid, title, attempt=self.attempts[sid]))
        t0 = time.monotonic()
        self.run.update_step(sid, status="running", started=time.time())
        if not step_available(sid):
            res = StepResult("unavailable", "not available in this version")
        else:
            mod = importlib.import_module(STEP_MODULES[sid])
            try:
                res = await mod.run(self.ctx)
            except asyncio.CancelledError:
                secs = time.monotonic() - t0
                self.results[sid] = StepResult(StepStatus.INTERRUPTED, "interrupted")
                self.run.update_step(sid, status="interrupted", seconds=round(secs, 3), summary="interrupted")
                self._emit(StepFinished(sid, StepStatus.INTERRUPTED, secs, "interrupted"))
                raise
            except Exception as exc:  # a bug or an unexpected environment: report, keep the trace on disk
                tb = traceback.format_exc()
                atomic_write_text(self.run.file(f"{sid}.error.log"), tb)
                res = StepResult("failed", f"internal error: {type(exc).__name__}: {redact(str(exc))} "
                                           f"(traceback in {sid}.error.log)")
        secs = time.monotonic() - t0
        res.status = StepStatus(res.status)
        self.results[sid] = res
        if res.status.ok:
            self.ctx.shared[sid] = res.facts
        else:
            self.ctx.shared.pop(sid, None)
        self.run.update_step(sid, status=res.status, seconds=round(secs, 3), summary=res.summary,
                             facts=res.facts, finished=time.time())
        self._emit(StepFinished(sid, res.status, secs, res.summary))
        return res

    async def open(self) -> None:
        """Start a run: state.json, profile.toml, the simulated backend; emits RunStarted."""
        prof = self.profile
        self.run.state.update({"profile": prof.name, "profile_source": prof.source, "simulated": prof.simulated,
                               "requested_steps": self.steps, "started": time.time()})
        self.run.save_state()
        self.run.write_text("profile.toml", prof.to_toml())
        self._start_simulation()  # before RunStarted, so placeholders such as {sim_hub} resolve from then on
        self.opened = True
        self._emit(RunStarted("", prof.name, str(self.run.path), tuple(self.steps), prof.simulated))
        if self._hub is not None:
            self._emit(Notice("", "info", f"simulated backend: loopback hub and dataset mirror at {self._hub.url}"))

    async def stop_children(self) -> None:
        """Stop every server / bench process this run started (SIGINT → SIGTERM → SIGKILL)."""
        await self._cleanup()

    async def close(self, code: int | None = None) -> int:
        """End a run: stop children, stop the simulated backend, write the report; emits RunFinished.
        Front ends call `finish()`, which decides the code; `close` takes it as given."""
        if code is None:
            code = self.current_exit_code()
        await self._cleanup()
        self._stop_simulation()
        report_path = self._write_report(code)
        self.exit_code = int(code)
        self._emit(RunFinished("", int(code), str(report_path) if report_path else None))
        return int(code)

    # -- the run loop (both front ends) --------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self.exit_code is not None

    def status_of(self, sid: str) -> StepStatus | None:
        res = self.results.get(sid)
        return res.status if res is not None else None

    @property
    def failed_step(self) -> str | None:
        """The first requested step whose latest attempt failed (the run stops there). An interrupted
        step is not failed: it is simply run again next."""
        for sid in self.steps:
            st = self.status_of(sid)
            if st in (StepStatus.FAILED, StepStatus.UNAVAILABLE):
                return sid
        return None

    def next_step(self) -> str | None:
        """The step `run_next` runs: the first requested step that is not settled (a failed one again)."""
        if self.closed:
            return None
        for sid in self.steps:
            st = self.status_of(sid)
            if st is None or not st.settled:
                return sid
        return None

    def complete(self) -> bool:
        """Nothing is left to run: every requested step is settled, or the one that failed is the results
        step, whose failure is the verdict of the numbers (a retry would read the same files)."""
        if self.closed:
            return True
        sid = self.next_step()
        return sid is None or (sid == "results" and sid == self.steps[-1] and self.failed_step == "results")

    def remaining_steps(self) -> list[str]:
        """The requested steps not yet run to an end, in order (interrupted ones included)."""
        return [sid for sid in self.steps
                if self.status_of(sid) in (None, StepStatus.INTERRUPTED)]

    def current_exit_code(self) -> ExitCode:
        """The exit code the run would end with now: FAILED after a failure, OK when every requested step
        is settled, INTERRUPTED when steps are still to run."""
        if self.failed_step is not None:
            return ExitCode.FAILED
        if all((st := self.status_of(sid)) is not None and st.settled for sid in self.steps):
            return ExitCode.OK
        return ExitCode.INTERRUPTED

    async def run_next(self) -> StepResult | None:
        """Run the next step (opening the run first if needed). None when nothing is left to run."""
        if not self.opened:
            await self.open()
        sid = self.next_step()
        if sid is None:
            return None
        return await self.run_step(sid)

    def set_profile(self, profile: Profile) -> None:
        """Use corrected settings from now on (a fix in place before a retry). The report and profile.toml
        describe the profile the run ends with."""
        self.profile = profile
        self.ctx.profile = profile
        self.run.state.update({"profile": profile.name, "profile_source": profile.source})
        self.run.save_state()
        self.run.write_text("profile.toml", profile.to_toml())

    async def retry(self, sid: str, profile: Profile | None = None) -> StepResult:
        """Run `sid` again, optionally with a corrected profile. The steps after it that had run are reset
        (they depend on it): their results, facts and diagnoses are dropped."""
        if sid not in self.steps:
            raise ValueError(f"step {sid!r} is not part of this run ({', '.join(self.steps)})")
        if not self.opened:
            await self.open()
        if profile is not None:
            self.set_profile(profile)
        later = self.steps[self.steps.index(sid) + 1:]
        for other in later:
            if other in self.results:
                self.results.pop(other)
                self.ctx.shared.pop(other, None)
                self.ctx.diagnoses[:] = [d for d in self.ctx.diagnoses if d.step != other]
                self.run.update_step(other, status="pending", summary="reset by a retry of " + sid)
        return await self.run_step(sid)

    async def run_until_failure(self) -> int:
        """Run the remaining steps in order until one fails, then finish. Returns the exit code."""
        try:
            if not self.opened:
                await self.open()
            while self.failed_step is None and (sid := self.next_step()) is not None:
                await self.run_step(sid)
        except (asyncio.CancelledError, KeyboardInterrupt):
            self._emit(Notice("", "warning", "interrupted: stopping child processes"))
            return await self.finish(interrupted=True)
        return await self.finish()

    async def finish(self, interrupted: bool = False) -> int:
        """End the run: the steps after a failed one are recorded as skipped, then the report. Idempotent."""
        if self.closed:
            return int(self.exit_code or 0)
        if not self.opened:
            await self.open()
        failed = self.failed_step
        if interrupted:
            code = ExitCode.INTERRUPTED
        elif failed is not None:
            for sid in self.remaining_steps():
                self.skip_step(sid, f"skipped: step '{failed}' failed")
            code = ExitCode.FAILED
        else:
            code = self.current_exit_code()
        return await self.close(code)

    def interim_report(self) -> Path | None:
        """Write report.md/json/summary.csv for the run so far (the run stays open)."""
        return self._write_report(self.current_exit_code())

    async def run_all(self) -> int:
        return await self.run_until_failure()

    def skip_step(self, sid: str, summary: str) -> None:
        self.ctx.diagnoses[:] = [d for d in self.ctx.diagnoses if d.step != sid]
        self.results[sid] = StepResult(StepStatus.SKIPPED, summary)
        self.run.update_step(sid, status="skipped", seconds=0.0, summary=summary)
        self._emit(StepStarted(sid, STEP_TITLES[sid]))
        self._emit(StepFinished(sid, "skipped", 0.0, summary))

    def _write_report(self, code: int) -> Path | None:
        try:
            rep = report_mod.build_report(self.profile, self.run, self.results, self.ctx, code)
            return report_mod.write_report(self.run, rep)
        except Exception:
            atomic_write_text(self.run.file("report.error.log"), traceback.format_exc())
            return None


def run_engine_blocking(engine: Engine, on_signal: Callable[[], None] | None = None) -> int:
    """Run the engine on a fresh event loop, turning SIGINT/SIGTERM/SIGHUP into a clean interruption."""
    import signal

    async def main() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        received: list[int] = []

        def handler(signum: int) -> None:
            if received:  # a second signal while cleaning up: kill the children now
                engine.cleanup_sync()
                return
            received.append(signum)
            if on_signal:
                on_signal()
            task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                loop.add_signal_handler(sig, handler, sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        try:
            return await engine.run_all()
        except asyncio.CancelledError:
            return EXIT_INTERRUPTED

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        engine.cleanup_sync()
        return EXIT_INTERRUPTED


__all__ = ["Engine", "ExitCode", "parse_steps", "run_engine_blocking", "step_available", "EXIT_OK", "EXIT_FAILED",
           "EXIT_USAGE", "EXIT_INTERRUPTED"]
