"""How one bench runs: in the arm's warm runner, or as a process of its own (tui/core/plan/benchmode.py decides
which, from what the bench command is).

`BenchChild` is what steps/bench.py starts, waits for (proc.child.wait_child: its `wait()`) and stops, either way:

- warm: the arm's WarmRunner (tui/core/proc/warm.py), started right after the arm's server is launched (`prestart`,
  so that its warm-up overlaps the server's start) or else for the arm's first bench, and kept on the ServerRun
  (`sr.bench_runner`) for the next; registered in ctx.cleanups, stopped with the arm's server (`stop_runner`). Its
  warm-up (the bench command's `bench serve --help`) is waited for inside `wait()`, so the bench's timeout covers
  what is left of it. The bench then runs from exactly its argv; its output goes to its own `<result>.bench.log`,
  as a process's would.
- a process of its own (a ManagedProcess), as before, where the mode says so or where the warm runner could not be
  used in this arm (it could not start, its warm-up failed, it exited by itself during a bench): the rest of the
  arm's benches then run one process each, and a notice says why (`sr.bench_warm_off`).

Stopping a warm bench (a timeout, Ctrl+C) stops the whole runner: the next bench starts a new one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from tui.core.events import Command, Notice
from tui.core.plan.benchmode import BenchMode, bench_mode
from tui.core.plan.commands import format_command, server_prefix
from tui.core.proc.supervisor import ManagedProcess
from tui.core.proc.warm import WarmRunner
from tui.core.steps.base import StepContext

RUNNER_GRACE_S = 2.0


def mode_of(ctx: StepContext, env: dict[str, str]) -> BenchMode:
    """The run's bench mode, decided once (the bench's environment does not change during a run)."""
    mode = ctx.runtime.get("bench_mode")
    if not isinstance(mode, BenchMode):
        mode = bench_mode(ctx.profile, env, ctx.ph)
        ctx.runtime["bench_mode"] = mode
    return mode


def runner_log(sr: Any) -> str:
    return f"{sr.step}.bench-runner.log"


def bench_env(ctx: StepContext) -> dict[str, str]:
    """The environment every bench runs with (its own process or the warm runner)."""
    env = dict(ctx.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def warm_off(ctx: StepContext, sr: Any, why: str) -> None:
    sr.bench_warm_off = why
    ctx.emit(Notice(sr.step, "warning", f"{why}: this arm's remaining benches run one process each"))


async def ensure_runner(ctx: StepContext, sr: Any, mode: BenchMode, env: dict[str, str],
                        argv: list[str]) -> WarmRunner | None:
    """The arm's warm runner: the one it has while that runs, else a new one (registered in ctx.cleanups, its command
    recorded; its warm-up under way). `argv`: a bench argv of the arm (the warm-up runs its command's `--help`).
    None when it cannot start (then the arm's benches run one process each, and a notice says why)."""
    runner = sr.bench_runner
    if runner is not None and runner.alive:
        return runner
    if runner is not None:
        await runner.stop(grace_s=RUNNER_GRACE_S)
        ctx.forget(runner)
        sr.bench_runner = None
    runner = WarmRunner(mode.runner_argv(), env, ctx.run.file(runner_log(sr)), mode.warm_up_job(argv),
                        grace_s=RUNNER_GRACE_S)
    ctx.emit(Notice(sr.step, "info", f"{mode.text()}: starting it ({runner_log(sr)})"))
    try:
        await runner.start()
    except (OSError, ValueError) as exc:
        warm_off(ctx, sr, f"the warm bench runner could not start: {exc}")
        return None
    ctx.cleanups.append(runner)
    sr.bench_runner = runner
    ctx.emit(Command(sr.step, "tool", tuple(runner.argv), format_command(runner.argv),
                     how="the arm's warm bench runner"))
    return runner


async def prestart(ctx: StepContext, sr: Any) -> None:
    """Start the arm's warm runner now (its server launched, not yet up), so that importing the bench's code overlaps
    the server's start instead of delaying the first bench. Nothing when the arm's benches run one process each."""
    env = bench_env(ctx)
    mode = mode_of(ctx, env)
    if mode.warm and not sr.bench_warm_off:
        await ensure_runner(ctx, sr, mode, env, [*server_prefix(sr.prof, ctx.ph), "bench", "serve"])


class BenchChild:
    """One bench, run warm or as its own process. `announce(how)` is called once, when the bench itself starts
    (how: "" for its own process, else where it runs), so that the recorded command says how it ran."""

    def __init__(self, ctx: StepContext, sr: Any, argv: list[str], env: dict[str, str], log: Path,
                 on_line: Callable[[str, float], None], on_chunk: Callable[[str], None],
                 announce: Callable[[str], None]):
        self.ctx, self.sr, self.argv, self.env, self.log = ctx, sr, argv, env, log
        self.on_line, self.on_chunk, self.announce = on_line, on_chunk, announce
        self.mode = mode_of(ctx, env)
        self.proc: ManagedProcess | None = None
        self.runner: WarmRunner | None = None
        self.how = ""

    async def start(self) -> None:
        """Start the bench (or the arm's runner, which starts it in wait()). Raises OSError / ValueError when its
        own process cannot start."""
        if self.mode.warm and not self.sr.bench_warm_off:
            self.runner = await ensure_runner(self.ctx, self.sr, self.mode, self.env, self.argv)
            if self.runner is not None:
                return
        await self._own_process()

    def _warm_off(self, why: str) -> None:
        warm_off(self.ctx, self.sr, why)

    async def _own_process(self) -> None:
        self.runner = None
        self.proc = ManagedProcess(self.argv, self.env, self.log, on_line=self.on_line, on_chunk=self.on_chunk,
                                   grace_s=2.0)
        await self.proc.start()
        self.ctx.cleanups.append(self.proc)
        self.how = ""
        self.announce("")

    async def wait(self) -> int:
        """The bench's exit status (what proc.child.wait_child awaits)."""
        runner = self.runner
        if runner is None:
            assert self.proc is not None
            return await self.proc.wait()
        rc = await runner.warmed()
        if rc != 0 or not runner.alive:
            warm_up = " ".join(self.mode.warm_up_argv(self.argv))
            return await self._instead(f"the warm runner's start-up (`{warm_up}` in its interpreter) ended with exit "
                                       f"status {rc} (see {runner_log(self.sr)})" if rc != 0 else
                                       f"the warm runner exited after its start-up (see {runner_log(self.sr)})")
        try:
            job = await runner.submit(self.mode.job(self.argv), self.log, self.argv, self.on_line, self.on_chunk)
        except (ConnectionError, RuntimeError) as exc:
            return await self._instead(f"the warm runner took no bench: {exc}")
        self.how = f"in the arm's warm runner (pid {runner.pid})"
        self.announce(self.how)
        rc = await job.wait()
        if job.ended_by_runner_exit:
            await self._drop_runner()
            self._warm_off(f"the warm runner exited by itself during this bench (exit status {rc}; see "
                           f"{self.log.name})")
        return rc

    async def _instead(self, why: str) -> int:
        """The warm runner cannot take this bench: it runs as its own process, and so do the arm's next ones."""
        await self._drop_runner()
        self._warm_off(why)
        try:
            await self._own_process()
        except (OSError, ValueError) as exc:
            self.on_line(f"cannot start the bench: {exc}", 0.0)
            return 127
        assert self.proc is not None
        return await self.proc.wait()

    async def _drop_runner(self) -> None:
        runner, self.runner = self.runner, None
        if runner is not None:
            await runner.stop(grace_s=RUNNER_GRACE_S)
            self.ctx.forget(runner)
            if self.sr.bench_runner is runner:
                self.sr.bench_runner = None

    async def stop(self, grace_s: float) -> None:
        """End the bench now (a timeout, Ctrl+C): its own process, or the whole warm runner with it."""
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.stop(grace_s=grace_s)
            self.ctx.forget(runner)
            if self.sr.bench_runner is runner:
                self.sr.bench_runner = None
        if self.proc is not None:
            await self.proc.stop(grace_s=grace_s)
            self.ctx.forget(self.proc)

    async def finish(self) -> None:
        """After the bench exited by itself: its own process is reaped; a warm runner stays for the next bench."""
        if self.proc is not None:
            await self.proc.stop(grace_s=1)
            self.ctx.forget(self.proc)


async def stop_runner(ctx: StepContext, sr: Any) -> None:
    """The arm is done: stop its warm runner (if any)."""
    runner = sr.bench_runner
    sr.bench_runner = None
    if runner is not None:
        await asyncio.shield(runner.stop(grace_s=RUNNER_GRACE_S))
        ctx.forget(runner)
