"""The engine: runs the requested steps of a profile in order and emits events to a sink.

Both front ends (headless and Textual) drive this class and nothing else, through one run loop:
`open()`, then `run_next()` (the next requested step; after a failure that is the failed step again),
`retry(step, profile=...)` (run a failed step again, optionally with corrected settings), `interim_report()`
and `finish()`. The engine alone decides what runs next, what a retry resets, which diagnoses belong to the
report (those of each step's latest attempt) and the exit code. It owns the run directory (state.json
after every step, report at the end), the profile's stand-in platform (a `[stand_in]` command started
like a server, whose one JSON line of environment and placeholders the run then uses), and the cleanup of
every child process, whatever way the run ends.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import time
import traceback
from enum import IntEnum
from pathlib import Path
from typing import Any, Callable

from tui.core.results import report as report_mod
from tui.core.plan.commands import Placeholders
from tui.core.events import (
    STEP_IDS,
    Command,
    Diagnosis,
    Event,
    Fact,
    Notice,
    RunFinished,
    RunStarted,
    Sink,
    StepFinished,
    StepStarted,
    StepStatus,
)
from tui.core.plan.arms import is_tune, run_steps, step_title
from tui.core.plan.build import record_command
from tui.core.profile.model import Profile, with_absolute_paths
from tui.core.store.rundir import (
    RunDir,
    RunDirStateError,
    RunDirUnwritable,
    as_unwritable,
    atomic_write_text,
    stale_running_steps,
)
from tui.core.run.resume import Resume
from tui.core.run.reuse import check_reuse
from tui.core.exec import ExecConfig, Executor
from tui.core.exec.standin import StandIn
from tui.core.run.fleet import Fleet
from tui.core.secrets import add_secrets, add_secrets_from_env, redact, redact_event
from tui.core.steps.base import StepContext, StepResult
from tui.core.proc.supervisor import ManagedProcess
from tui.core.host.hub import hub_settings
from tui.core.host import hostlock


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
# A run directory that cannot be written (RunDirUnwritable): exit 2 when nothing could be written at all
# (the run never started: like a bad --run-dir), exit 1 when it happens once steps have run (the run failed).

# Steps that launch nothing and check no port: they run without the host locks (see _lock_host).
LOCKLESS_STEPS = frozenset({"checkpoints", "dataset", "results"})


def command_line() -> str:
    """This process's command as an operator typed it ("specdec-tui --demo --headless"; "python -m tui ..."),
    redacted: what a lock file shows another run."""
    head = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "specdec-tui"
    if head == "__main__.py":
        head = "python -m tui"
    return redact(" ".join([head, *(shlex.quote(a) for a in sys.argv[1:])]))


def parse_steps(spec: str | None, profile: Profile | None = None) -> list[str]:
    """'env,checkpoints' -> ['env', 'checkpoints'] in run order; ValueError names a bad id. The allowed ids
    are the profile's steps (a tune profile has one per arm), else the tutorial's."""
    allowed = run_steps(profile) if profile is not None else list(STEP_IDS)
    if not spec:
        return allowed
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    bad = [s for s in wanted if s not in allowed]
    if bad:
        raise ValueError(
            f"unknown step id(s) {', '.join(repr(b) for b in bad)} in --steps; allowed: {', '.join(allowed)} "
            "(comma-separated, e.g. --steps env,checkpoints)."
        )
    if not wanted:
        raise ValueError(f"--steps is empty; allowed: {', '.join(allowed)}.")
    return [s for s in allowed if s in wanted]


class Engine(StandIn, Fleet, Resume):
    def __init__(self, profile: Profile, run_dir: Path, sink: Sink, steps: list[str] | None = None,
                 verbose: bool = False, executor: Executor | None = None):
        # Paths resolved once: the run directory and the profile's paths are absolute from here on, so every
        # child gets absolute paths whatever its working directory (some run in the run directory).
        run_dir = Path(os.path.abspath(run_dir))
        profile = with_absolute_paths(profile)
        self.profile = profile
        self.steps = steps or run_steps(profile)
        self.sink = sink
        self.run = RunDir(run_dir)
        self.verbose = verbose
        self.results: dict[str, StepResult] = {}
        self.platform_error = ""  # set when the profile's stand-in platform could not be started
        self.stand_in_notice = ""
        self._opened: asyncio.Event | None = None  # set once open() has applied the stand-in platform
        self._open_task: asyncio.Future[None] | None = None
        self._stand_in: ManagedProcess | None = None
        self.ctx = StepContext(profile=profile, run=self.run, emit=self._emit,
                               ph=Placeholders(run_dir=str(self.run.path)), verbose=verbose)
        # Secrets of this run (the profile's server.env, the run's environment) are redacted on every channel.
        add_secrets_from_env(profile.data.get("server", {}).get("env", {}))
        add_secrets_from_env(self.ctx.environ)
        try:  # a Hugging Face token from the token file too

            token = hub_settings(self.ctx.environ).token
            if token:
                add_secrets([token])
        except Exception:
            pass
        # Facts from an earlier run in the same directory (e.g. --steps baseline after --steps dataset).
        self._restore_facts()
        self.exit_code: int | None = None
        self.report_code: int | None = None  # the exit code the last report was written with (write_report may raise it)
        self.attempts: dict[str, int] = {}
        self.opened = False  # open() has been called (it runs once)
        self._stale: tuple[list[str], str, str] | None = None
        self._kept: list[str] = []
        self._file_notices: list[str] = []  # result files a continued run found missing or changed
        self.unwritable: RunDirUnwritable | None = None
        self.refused: RunDirStateError | None = None
        self._opened_steps = False
        self._step_task: asyncio.Future[Any] | None = None
        self.run.on_unwritable(self._unwritable_seen)
        # The host-wide locks on the port and cores this run's servers use (tui/core/host/hostlock.py): taken before
        # the first step that checks or launches a server, released when the run closes (or by the kernel).
        self.host_locks = hostlock.HostLocks.this_run(str(self.run.path), command_line(), profile.name)
        self.ctx.runtime["host_locks"] = self.host_locks
        self._lock_warned = False
        # Where the steps run (tui/core/exec): this process, or a Ray cluster's nodes (connected by the caller).
        self.executor = executor if executor is not None else Executor.get_class(ExecConfig())()
        self._fleet_init()

    # -- an unwritable run directory: handled once ------------------------------------------------
    def _unwritable_seen(self, err: RunDirUnwritable) -> None:
        """A write failed (possibly a child's log, from the reader task): stop the running step now."""
        if self.unwritable is None:
            self.unwritable = err
            self._emit(Notice("", "error", str(err)))
        task = self._step_task
        if task is not None and not task.done():
            task.cancel()

    # -- events -------------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        event = redact_event(event)  # the one redaction source, for every front end
        if isinstance(event, Diagnosis):
            if not any(d.id == event.id and d.step == event.step for d in self.ctx.diagnoses):
                self.ctx.diagnoses.append(event)
        elif isinstance(event, Command):  # the commands that ran, for `c` after the run and --open
            try:
                record_command(self.run.path, event.step, event.role, event.argv, event.text, self.run.write_json,
                               event.how)
            except RunDirUnwritable as err:
                self._unwritable_seen(err)
            except OSError:
                pass
        try:
            self.sink(event)
        except Exception:  # a broken front end must not kill the run
            pass

    # -- cleanup ---------------------------------------------------------------------------------
    async def _cleanup(self, keep_platform: bool = False) -> None:
        """Stop registered children, last registered first (so the stand-in platform goes last)."""
        kept = [p for p in self.ctx.cleanups if keep_platform and p is self._stand_in]
        while [p for p in self.ctx.cleanups if p not in kept]:
            proc = next(p for p in reversed(self.ctx.cleanups) if p not in kept)
            self.ctx.cleanups.remove(proc)
            try:
                await asyncio.shield(proc.stop())
            except Exception:
                proc.kill_now()
        if not keep_platform:
            self._stand_in = None

    def hurry(self, grace_s: float = 1.0) -> None:
        """Nobody is watching any more (the terminal went away): from now on every child is stopped with a
        short SIGINT grace before SIGTERM, so the whole shutdown fits in a few seconds."""
        for proc in [*self.ctx.cleanups, self.executor]:
            if getattr(proc, "grace_s", 0.0) > grace_s:
                proc.grace_s = grace_s

    def cleanup_sync(self) -> None:
        """Last-resort synchronous cleanup (e.g. from an atexit hook)."""
        for proc in list(self.ctx.cleanups):
            try:
                proc.kill_now()
            except OSError:
                pass
        try:
            self.executor.kill_now()
        except Exception:
            pass

    # -- running -----------------------------------------------------------------------------------
    async def run_step(self, sid: str) -> StepResult:
        """Run one step (a first attempt or a retry). Diagnoses of the step's earlier attempt are dropped."""
        await self.ready()  # a front end may ask for a step while open() still starts the stand-in
        title = step_title(sid, self.profile)
        if self.refused is not None or self.unwritable is not None:
            why = "not run: the run directory cannot be used (see above)"
            res = StepResult("failed", why)
            self.results[sid] = res
            self._emit(StepStarted(sid, title))
            self._emit(StepFinished(sid, "failed", 0.0, why))
            return res
        if self.executor.batched(sid) and not self.platform_error:
            return await self._batched_step(sid)  # run/fleet.py: it runs alongside the other arms
        self.attempts[sid] = self.attempts.get(sid, 0) + 1
        self.ctx.diagnoses[:] = [d for d in self.ctx.diagnoses if d.step != sid]
        self.results.pop(sid, None)
        self._emit(StepStarted(sid, title, attempt=self.attempts[sid]))
        t0 = time.monotonic()
        try:
            self.run.update_step(sid, status="running", started=time.time())
            self._opened_steps = True
            refused = None if self.platform_error else self._lock_host(sid)
            if self.platform_error:
                res = StepResult("failed", self.platform_error)
            elif refused is not None:
                res = refused
            else:
                self._step_task = asyncio.ensure_future(self.executor.run_step(self.ctx, sid))
                try:
                    res = await self._step_task
                except asyncio.CancelledError:
                    if self.unwritable is None or not self._step_task.cancelled():
                        raise
                    raise self.unwritable from None  # cancelled by _unwritable_seen
                except RunDirUnwritable:
                    raise
                except Exception as exc:  # a bug or an unexpected environment: report, keep the trace on disk
                    err = as_unwritable(exc, self.run.path)  # a step's own write into the run directory
                    if err is not None:
                        raise err from None
                    tb = traceback.format_exc()
                    try:
                        atomic_write_text(self.run.file(f"{sid}.error.log"), tb)
                    except RunDirUnwritable:
                        raise
                    res = StepResult("failed", f"internal error: {type(exc).__name__}: {redact(str(exc))} "
                                               f"(traceback in {sid}.error.log)")
                finally:
                    self._step_task = None
            secs = time.monotonic() - t0
            self._record_result(sid, res, secs)
        except asyncio.CancelledError:
            secs = time.monotonic() - t0
            why = "interrupted"
            partial = (self.ctx.runtime.get("partial") or {}).pop(sid, None)
            if partial:  # a bench stopped mid-run: what it wrote is set aside, not taken for a result
                why = (f"interrupted during the benchmark; its partial output is kept as {', '.join(partial)} "
                       "(not a result)")
            try:
                self.run.update_step(sid, status="interrupted", seconds=round(secs, 3), summary=why)
            except RunDirUnwritable as err:
                self._unwritable_seen(err)
            self.results[sid] = StepResult(StepStatus.INTERRUPTED, why)
            self._emit(StepFinished(sid, StepStatus.INTERRUPTED, secs, why))
            raise
        except RunDirUnwritable as err:
            self._unwritable_seen(err)
            await self._cleanup()  # nothing more this run can record: stop its children now
            secs = time.monotonic() - t0
            res = StepResult("failed", f"the run directory cannot be written ({err.reason()})")
            self.results[sid] = res
        self._emit(StepFinished(sid, res.status, secs, res.summary))
        return res

    def _record_result(self, sid: str, res: StepResult, secs: float) -> None:
        """A step's attempt has ended: its result is the step's latest, its facts are shared with the steps after
        it when it passed, and state.json records it (with the fleet node it ran on, if any). Raises
        RunDirUnwritable when state.json cannot be written."""
        res.status = StepStatus(res.status)
        self.results[sid] = res
        if res.status.ok:
            self.ctx.shared[sid] = res.facts
        else:
            self.ctx.shared.pop(sid, None)
        node = res.facts.get("node") if isinstance(res.facts, dict) else None
        self.run.update_step(sid, status=res.status, seconds=round(secs, 3), summary=res.summary, facts=res.facts,
                             finished=time.time(), **({"node": node} if isinstance(node, dict) else {}))

    def _lock_host(self, sid: str) -> StepResult | None:
        """Take the host locks of the profile's port and cores before a step that checks or launches a server.
        None when held (or when the lock directory cannot be used: a warning, once); a failed StepResult naming the
        run that holds them otherwise: nothing is launched. Corrected settings (a retry) move the locks with them.
        A fleet's servers run on its nodes, not here: each arm locks its port and cores on its node
        (tui/core/exec/ports.py)."""
        if sid in LOCKLESS_STEPS or not self.executor.local:
            return None
        s = self.profile.server
        claims = hostlock.server_claims(self.profile.platform, s.host, int(s.port),
                                        int(s.tensor_parallel_size) * int(s.pipeline_parallel_size), s.env,
                                        self.ctx.environ)
        if any(c not in claims for c in self.host_locks.held("profile")):
            self.host_locks.release("profile")
        try:
            refusal = self.host_locks.take(claims, "profile")
        except hostlock.LockDirError as exc:
            if not self._lock_warned:
                self._lock_warned = True
                self._emit(Notice(sid, "warning", f"host locks not taken: {exc}. A second specdec-tui run on this "
                                                  "host would not see this one."))
            return None
        if refusal is None:
            return None
        ports = any(c.kind == "port" for c, _ in refusal.held)
        fix = ("set server.port to a free port" if ports else
               "give [server.env] a free range (NEURON_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES)")
        pid = next((h.pid for h in refusal.holders() if h.pid is not None), None)
        self._emit(Fact(sid, "host lock", refusal.short(), "fail", "",
                        f"wait for it to finish, stop it{f' (`kill {pid}`)' if pid else ''}, or {fix}"))
        return StepResult("failed", refusal.text(fix))

    async def open(self) -> None:
        """Start a run: state.json, profile.toml, then (in the background) the profile's stand-in platform and
        RunStarted. Returns at once; run_step waits until the platform is up, so a front end that asks for a
        step right away gets it on the platform, and RunStarted always comes before the first step. Once only."""
        if self.opened:
            return
        self.opened = True
        prof = self.profile
        self._opened = asyncio.Event()
        # A reused run directory: its state must be sound, this profile's, and not in use (else refused, untouched).
        try:
            if self.run.state_error is not None:
                raise self.run.state_error
            check_reuse(self.run.path, prof)
        except RunDirStateError as exc:
            self.refused = exc
            self._emit(Notice("", "error", str(exc)))
            self._opened.set()
            return
        stale = stale_running_steps(self.run.state)
        if stale:
            owner = self.run.state.get("owner") or {}
            who = f"pid {owner.get('pid')}" if isinstance(owner, dict) and owner.get("pid") else "an earlier app"
            why = f"interrupted: the app running it ({who}) stopped without finishing it"
            self.run.mark_interrupted(stale, why)
        self._kept = self._plan_continuation()
        self.run.claim()
        self.run.state.update({"profile": prof.name, "profile_source": prof.source, "simulated": prof.simulated,
                               "tune": is_tune(prof), "requested_steps": self.steps, "started": time.time()})
        try:
            if self.run.setup_error is not None:
                raise self.run.setup_error
            self.run.save_state()
            self.run.write_text("profile.toml", prof.to_toml())
        except RunDirUnwritable as err:
            self._unwritable_seen(err)
            self._opened.set()
            return
        self._stale = (stale, who, why) if stale else None
        self._open_task = asyncio.ensure_future(self._finish_open())

    async def ready(self) -> None:
        """Wait until open() has brought the run's platform up (or failed to)."""
        if self._opened is not None:
            await self._opened.wait()

    async def _finish_open(self) -> None:
        prof = self.profile
        try:
            try:
                if self.executor.local:
                    await self._start_stand_in()  # before RunStarted, so {sim_hub} and friends resolve from then on
                else:
                    await self._open_fleet()  # run/fleet.py: each node's agent starts that node's platform
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug or an odd environment: the run reports it, every step fails on it
                atomic_write_text(self.run.file("stand-in.error.log"), traceback.format_exc())
                self.platform_error = (f"the stand-in platform could not be started: {type(exc).__name__}: "
                                       f"{redact(str(exc))} (traceback in stand-in.error.log)")
            self._emit(RunStarted("", prof.name, str(self.run.path), tuple(self.steps), prof.simulated))
            if self.stand_in_notice:
                self._emit(Notice("", "info", self.stand_in_notice))
            for notice in self._fleet_notices():
                self._emit(notice)
            if self.platform_error:
                self._emit(Notice("", "error", self.platform_error))
            for text in self._file_notices:
                self._emit(Notice("", "warning", text))
            if self._kept:
                self._emit(Notice("", "info", f"continuing {self.run.path}: {', '.join(self._kept)} finished there "
                                              "earlier with the same settings and are kept (their result files match "
                                              "the sha256 recorded in state.json; they are not launched again)"))
                for sid in self._kept:
                    res = self.results[sid]
                    self._emit(StepStarted(sid, step_title(sid, self.profile)))
                    self._emit(StepFinished(sid, res.status, 0.0, f"kept from the earlier run: {res.summary}"))
            if self._stale:
                stale, who, why = self._stale
                self._emit(Notice("", "warning", f"{', '.join(stale)} was left running by {who}, which is gone: "
                                                 f"shown as interrupted. Continue it with --run-dir {self.run.path} "
                                                 f"--steps {','.join(stale)} (or the steps you need)."))
                for sid in stale:  # front ends show it as interrupted (the wizard offers a retry)
                    if sid not in self.steps:
                        self._emit(StepFinished(sid, "interrupted", 0.0, why))
        finally:
            self._opened.set()  # type: ignore[union-attr]

    async def stop_children(self) -> None:
        """Stop every server / bench process this run started (SIGINT → SIGTERM → SIGKILL); the stand-in
        platform stays up until close()."""
        await self._cleanup(keep_platform=True)

    async def close(self, code: int | None = None) -> int:
        """End a run: stop children (the stand-in platform last), write the report; emits RunFinished.
        Front ends call `finish()`, which decides the code; `close` takes it as given."""
        if code is None:
            code = self.current_exit_code()
        task, self._open_task = self._open_task, None
        if task is not None and not task.done() and code == EXIT_INTERRUPTED:
            task.cancel()  # otherwise let the platform come up (bounded by STAND_IN_TIMEOUT_S) and stop it
        if task is not None:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        await self._cleanup()
        self.host_locks.release()  # its servers are stopped: another run may have the port and cores now
        await self.executor.shutdown()  # a fleet: its nodes' agents and platforms, then the cluster connection
        if not self.executor.local:
            self.run.state["fleet"] = self.executor.describe()
        if self.refused is not None:
            code = EXIT_USAGE
        elif self.unwritable is not None:
            code = EXIT_FAILED if self._opened_steps else EXIT_USAGE
        report_path = None
        if self.refused is None and self.unwritable is None:
            self.run.release()
            try:
                self.run.save_state()
            except RunDirUnwritable as err:
                self._unwritable_seen(err)
            else:
                report_path = self._write_report(code)
                if code == ExitCode.OK and self.report_code:  # the report is incomplete: the run did not succeed
                    code = self.report_code
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
        profile = with_absolute_paths(profile)
        self.profile = profile
        self.ctx.profile = profile
        self.run.state.update({"profile": profile.name, "profile_source": profile.source})
        try:
            self.run.save_state()
            self.run.write_text("profile.toml", profile.to_toml())
        except RunDirUnwritable as err:
            self._unwritable_seen(err)

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
                try:
                    self.run.update_step(other, status="pending", summary="reset by a retry of " + sid)
                except RunDirUnwritable as err:
                    self._unwritable_seen(err)
        return await self.run_step(sid)

    async def run_until_failure(self) -> int:
        """Run the remaining steps in order until one fails, then finish. Returns the exit code."""
        try:
            if not self.opened:
                await self.open()
            while self.failed_step is None and (sid := self.next_step()) is not None:
                if self.refused is not None or self.unwritable is not None:
                    break
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
        await self._stop_batch()  # a fleet's arms still running stop with the run
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
        try:
            self.run.update_step(sid, status="skipped", seconds=0.0, summary=summary)
        except RunDirUnwritable as err:
            self._unwritable_seen(err)
        self._emit(StepStarted(sid, step_title(sid, self.profile)))
        self._emit(StepFinished(sid, "skipped", 0.0, summary))

    def _write_report(self, code: int) -> Path | None:
        try:
            rep = report_mod.build_report(self.profile, self.run, self.results, self.ctx, code)
            path = report_mod.write_report(self.run, rep)
            self.report_code = int(rep.get("exit_code", code))  # 1 where the report was written without its charts
            why = report_mod.incomplete(rep)
            if why:
                self._emit(Notice("", "error", why))
            return path
        except RunDirUnwritable as err:
            self._unwritable_seen(err)
            return None
        except Exception:
            try:
                atomic_write_text(self.run.file("report.error.log"), traceback.format_exc())
            except RunDirUnwritable as err:
                self._unwritable_seen(err)
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


__all__ = ["Engine", "ExitCode", "parse_steps", "run_engine_blocking", "EXIT_OK", "EXIT_FAILED",
           "EXIT_USAGE", "EXIT_INTERRUPTED"]
