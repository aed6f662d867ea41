"""The engine: runs the requested steps of a profile in order and emits events to a sink.

Both front ends (headless and Textual) drive this class and nothing else. It owns the run directory
(state.json after every step, report at the end), the profile's stand-in platform (a `[stand_in]` command
started like a server, whose one JSON line of environment and placeholders the run then uses), and the
cleanup of every child process, whatever way the run ends.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import time
import traceback
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
)
from .profile import Profile
from .rundir import RunDir, atomic_write_text, redact
from .steps.base import StepContext, StepResult
from .supervisor import ManagedProcess

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

STAND_IN_TIMEOUT_S = 60.0
STAND_IN_GRACE_S = 5.0

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
        self.platform_error = ""  # set when the profile's stand-in platform could not be started
        self.stand_in_notice = ""
        self._opened: asyncio.Event | None = None  # set once open() has applied the stand-in platform
        self._open_task: asyncio.Future[None] | None = None
        self._stand_in: ManagedProcess | None = None
        self.ctx = StepContext(profile=profile, run=self.run, emit=self._emit,
                               ph=Placeholders(run_dir=str(self.run.path)), verbose=verbose)
        # Facts from an earlier run in the same directory (e.g. --steps baseline after --steps dataset).
        for sid, st in self.run.state.get("steps", {}).items():
            if isinstance(st, dict) and isinstance(st.get("facts"), dict) and st.get("status") in ("passed", "warned"):
                self.ctx.shared[sid] = st["facts"]
        self.exit_code: int | None = None

    # -- events -------------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        if isinstance(event, Diagnosis):
            if not any(d.id == event.id and d.step == event.step for d in self.ctx.diagnoses):
                self.ctx.diagnoses.append(event)
        try:
            self.sink(event)
        except Exception:  # a broken front end must not kill the run
            pass

    # -- stand-in platform ---------------------------------------------------------------------
    async def _start_stand_in(self) -> None:
        """Start the profile's [stand_in] command (a supervised child like a server), read its one JSON line
        {"env": {...}, "unset": [...], "placeholders": {...}, "notice": "..."} and apply it to the run."""
        spec = self.profile.raw.get("stand_in")
        cmd = spec.get("command") if isinstance(spec, dict) else None
        if not cmd:
            if self.profile.simulated:
                self.stand_in_notice = ("this profile has a [simulation] table but no [stand_in] command, so nothing "
                                        "stands in for the platform: the steps check this machine as it is. Add "
                                        '[stand_in] command = ["{python}", "-m", "tui.sim", "stand-in", "--profile", '
                                        '"{run_dir}/profile.toml"] (or extends = "demo") to run on the simulator.')
            return
        argv = [self.ctx.ph.resolve(str(x)) for x in cmd]
        loop = asyncio.get_running_loop()
        first: asyncio.Future[dict[str, Any]] = loop.create_future()
        seen: list[str] = []

        def on_line(line: str, ts: float) -> None:
            if first.done():
                return
            text = line.strip()
            if text.startswith("{"):
                try:
                    msg = json.loads(text)
                except ValueError:
                    msg = None
                if isinstance(msg, dict):
                    first.set_result(msg)
                    return
            if text:
                seen.append(text)

        proc = ManagedProcess(argv, env=dict(self.ctx.environ), log_path=self.run.file("stand-in.log"),
                              on_line=on_line, cwd=str(self.run.path), grace_s=STAND_IN_GRACE_S)
        shown = " ".join(argv)
        try:
            await proc.start()
        except asyncio.CancelledError:
            proc.kill_now()
            raise
        except (FileNotFoundError, OSError) as exc:
            self.platform_error = (f"the profile's [stand_in] command could not be started ({exc}): `{shown}`. "
                                   "Fix [stand_in] command in the profile (the simulator's is "
                                   '["{python}", "-m", "tui.sim", "stand-in", "--profile", "{run_dir}/profile.toml"]).')
            return
        self.ctx.cleanups.append(proc)
        self._stand_in = proc
        waiter = asyncio.ensure_future(proc.wait())
        try:
            done, _ = await asyncio.wait({first, waiter}, timeout=STAND_IN_TIMEOUT_S,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not waiter.done():
                waiter.cancel()
        if first.done():
            self._apply_stand_in(first.result())
            return
        why = (f"exited with status {proc.returncode}" if proc.returncode is not None
               else f"printed no JSON line within {STAND_IN_TIMEOUT_S:.0f} s")
        last = redact(seen[-1][:300]) if seen else "no output"
        self.platform_error = (f"the stand-in platform `{shown}` {why} (last output: {last}); its log is "
                               f"{self.run.file('stand-in.log')}. Fix the [stand_in] command or the cause shown, "
                               "then rerun.")

    def _apply_stand_in(self, msg: dict[str, Any]) -> None:
        env = self.ctx.environ
        for var in msg.get("unset") or []:
            env.pop(str(var), None)
        for k, v in (msg.get("env") or {}).items():
            env[str(k)] = str(v)
        for k, v in (msg.get("placeholders") or {}).items():
            if hasattr(self.ctx.ph, str(k)):
                setattr(self.ctx.ph, str(k), str(v))
        if msg.get("notice"):
            self.stand_in_notice = str(msg["notice"])

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

    def cleanup_sync(self) -> None:
        """Last-resort synchronous cleanup (e.g. from an atexit hook)."""
        for proc in list(self.ctx.cleanups):
            try:
                proc.kill_now()
            except OSError:
                pass

    # -- running -----------------------------------------------------------------------------------
    async def run_step(self, sid: str) -> StepResult:
        await self.ready()  # a front end may ask for a step while open() still starts the stand-in
        title = STEP_TITLES[sid]
        self._emit(StepStarted(sid, title))
        t0 = time.monotonic()
        self.run.update_step(sid, status="running", started=time.time())
        if self.platform_error:
            res = StepResult("failed", self.platform_error)
        elif not step_available(sid):
            res = StepResult("unavailable", "not available in this version")
        else:
            mod = importlib.import_module(STEP_MODULES[sid])
            try:
                res = await mod.run(self.ctx)
            except asyncio.CancelledError:
                secs = time.monotonic() - t0
                self.run.update_step(sid, status="interrupted", seconds=round(secs, 3), summary="interrupted")
                self._emit(StepFinished(sid, "interrupted", secs, "interrupted"))
                raise
            except Exception as exc:  # a bug or an unexpected environment: report, keep the trace on disk
                tb = traceback.format_exc()
                atomic_write_text(self.run.file(f"{sid}.error.log"), tb)
                res = StepResult("failed", f"internal error: {type(exc).__name__}: {redact(str(exc))} "
                                           f"(traceback in {sid}.error.log)")
        secs = time.monotonic() - t0
        self.results[sid] = res
        if res.status in ("passed", "warned"):
            self.ctx.shared[sid] = res.facts
        self.run.update_step(sid, status=res.status, seconds=round(secs, 3), summary=res.summary,
                             facts=res.facts, finished=time.time())
        self._emit(StepFinished(sid, res.status, secs, res.summary))
        return res

    async def open(self) -> None:
        """Start a run: state.json, profile.toml, then (in the background) the profile's stand-in platform and
        RunStarted. Returns at once; run_step waits until the platform is up, so a front end that asks for a
        step right away gets it on the platform, and RunStarted always comes before the first step."""
        prof = self.profile
        self._opened = asyncio.Event()
        self.run.state.update({"profile": prof.name, "profile_source": prof.source, "simulated": prof.simulated,
                               "requested_steps": self.steps, "started": time.time()})
        self.run.save_state()
        self.run.write_text("profile.toml", prof.to_toml())
        self._open_task = asyncio.ensure_future(self._finish_open())

    async def ready(self) -> None:
        """Wait until open() has brought the run's platform up (or failed to)."""
        if self._opened is not None:
            await self._opened.wait()

    async def _finish_open(self) -> None:
        prof = self.profile
        try:
            try:
                await self._start_stand_in()  # before RunStarted, so {sim_hub} and friends resolve from then on
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug or an odd environment: the run reports it, every step fails on it
                atomic_write_text(self.run.file("stand-in.error.log"), traceback.format_exc())
                self.platform_error = (f"the stand-in platform could not be started: {type(exc).__name__}: "
                                       f"{redact(str(exc))} (traceback in stand-in.error.log)")
            self._emit(RunStarted("", prof.name, str(self.run.path), tuple(self.steps), prof.simulated))
            if self.stand_in_notice:
                self._emit(Notice("", "info", self.stand_in_notice))
            if self.platform_error:
                self._emit(Notice("", "error", self.platform_error))
        finally:
            self._opened.set()  # type: ignore[union-attr]

    async def stop_children(self) -> None:
        """Stop every server / bench process this run started (SIGINT → SIGTERM → SIGKILL); the stand-in
        platform stays up until close()."""
        await self._cleanup(keep_platform=True)

    async def close(self, code: int | None = None) -> int:
        """End a run: stop children (the stand-in platform last), write the report; emits RunFinished."""
        if code is None:
            code = EXIT_OK
            for res in self.results.values():
                if res.status not in ("passed", "warned"):
                    code = EXIT_FAILED
        task, self._open_task = self._open_task, None
        if task is not None and not task.done() and code == EXIT_INTERRUPTED:
            task.cancel()  # otherwise let the platform come up (bounded by STAND_IN_TIMEOUT_S) and stop it
        if task is not None:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        await self._cleanup()
        report_path = self._write_report(code)
        self.exit_code = code
        self._emit(RunFinished("", code, str(report_path) if report_path else None))
        return code

    async def run_all(self) -> int:
        code = EXIT_OK
        try:
            await self.open()
            failed_at: str | None = None
            for sid in self.steps:
                if failed_at is not None:
                    self.skip_step(sid, f"skipped: step '{failed_at}' failed")
                    continue
                res = await self.run_step(sid)
                if res.status not in ("passed", "warned"):
                    failed_at = sid
                    code = EXIT_FAILED
        except (asyncio.CancelledError, KeyboardInterrupt):
            code = EXIT_INTERRUPTED
            self._emit(Notice("", "warning", "interrupted: stopping child processes"))
        finally:
            await self.close(code)
        return code

    def skip_step(self, sid: str, summary: str) -> None:
        self.results[sid] = StepResult("skipped", summary)
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


__all__ = ["Engine", "parse_steps", "run_engine_blocking", "step_available", "EXIT_OK", "EXIT_FAILED",
           "EXIT_USAGE", "EXIT_INTERRUPTED"]
