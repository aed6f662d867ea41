"""The warm bench runner of an arm, seen from the app: one supervised child (tui/tools/warm_bench.py, in the
interpreter that runs the bench command) that imports the bench's code once and then runs benches one at a time,
each from its exact argv.

`WarmRunner.start()` starts it (a ManagedProcess: its own process group, PDEATHSIG and the watchdog, so it never
outlives the app) and hands it the warm-up job (the bench command with `--help`, output kept back); `warmed()`
waits for that. `submit()` hands it one bench: from then on the child's output (already redacted by the supervisor)
goes to that bench's own log and callbacks, until the runner's end-of-job line `[specdec-warm NONCE] ID exit RC`,
which gives the bench's exit status (`WarmJob.wait()`, what proc.child.wait_child awaits) and switches the log back
to the runner's. A child that exits during a job gives that job the child's exit status. `stop()` stops the whole
runner (SIGINT, SIGTERM, SIGKILL to its group): how a hung or interrupted bench is ended; the next bench then needs
a new runner.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

from tui.core.proc.supervisor import ManagedProcess

# The runner's end-of-job mark, in its environment (tui/tools/warm_bench.py takes it out of the benches' view).
NONCE_VAR = "SPECDEC_WARM_NONCE"
MARK_RE = re.compile(r"\[specdec-warm (?P<nonce>[0-9a-f]+)\] (?P<id>\S+) exit (?P<rc>-?\d+)\s*$")
WARM_ID = "warm"


class WarmJob:
    """One job in the runner. `wait()` returns its exit status (the runner's exit status when it ended mid-job)."""

    def __init__(self, jid: str, on_line: Callable[[str, float], None] | None,
                 on_chunk: Callable[[str], None] | None):
        self.id = jid
        self.on_line = on_line
        self.on_chunk = on_chunk
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.ended_by_runner_exit = False  # the runner exited before the job's end-of-job line

    async def wait(self) -> int:
        return await asyncio.shield(self.done)


class WarmRunner:
    """One warm runner process and its current job."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, warm_job: dict[str, Any] | None = None,
                 cwd: str | None = None, grace_s: float = 2.0):
        """argv: the runner's command ([python, *flags, warm_bench.py]); log_path: its own log (the warm-up and anything
        printed between benches); warm_job: the warm-up job (None: none)."""
        self.nonce = os.urandom(6).hex()
        self.argv = list(argv)
        self.env = {**env, NONCE_VAR: self.nonce}
        self.log_path = Path(log_path)
        self.warm_job = warm_job
        self.cwd = cwd
        self.grace_s = grace_s
        self.proc: ManagedProcess | None = None
        self.job: WarmJob | None = None
        self.warm: WarmJob | None = None
        self.exit_code: int | None = None
        self.jobs_run = 0
        self._seq = 0
        self._watch: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and self.exit_code is None

    @property
    def pid(self) -> int | None:
        return self.proc.proc.pid if self.proc is not None and self.proc.proc is not None else None

    async def start(self) -> None:
        """Spawn the runner and hand it the warm-up job. Raises OSError / ValueError when it cannot start."""
        self.proc = ManagedProcess(self.argv, self.env, self.log_path, on_line=self._on_line,
                                   on_chunk=self._on_chunk, cwd=self.cwd, grace_s=self.grace_s, stdin_pipe=True)
        await self.proc.start()
        self._watch = asyncio.create_task(self._watch_exit())
        if self.warm_job is not None:
            self.warm = self.job = WarmJob(WARM_ID, None, None)
            try:
                await self._send({**self.warm_job, "id": WARM_ID, "quiet": True})
            except ConnectionError:
                pass  # the exit watcher ends the job

    async def warmed(self, timeout_s: float | None = None) -> int | None:
        """The warm-up's exit status (0: the bench's code is imported), once it ends; None when `timeout_s` passes
        first (the runner keeps warming)."""
        if self.warm is None:
            return 0
        try:
            return await asyncio.wait_for(self.warm.wait(), timeout_s)
        except asyncio.TimeoutError:
            return None

    async def submit(self, job: dict[str, Any], log_path: Path, argv: list[str],
                     on_line: Callable[[str, float], None] | None = None,
                     on_chunk: Callable[[str], None] | None = None) -> WarmJob:
        """Hand the runner one bench (`job`: kind, target, args); its output goes to `log_path` (headed by `argv`,
        as a bench's own process log is) and the callbacks until it ends. The runner must be alive and idle."""
        if self.proc is None or not self.alive:
            raise ConnectionError("the warm runner is not running")
        if self.job is not None and not self.job.done.done():
            raise RuntimeError("the warm runner is busy")
        self._seq += 1
        self.job = WarmJob(str(self._seq), on_line, on_chunk)
        self.proc.relog(log_path, "$ " + " ".join(argv))
        self.jobs_run += 1
        try:
            await self._send({**job, "id": self.job.id})
        except ConnectionError:
            pass  # the exit watcher gives the job the runner's exit status
        return self.job

    async def _send(self, job: dict[str, Any]) -> None:
        assert self.proc is not None
        await self.proc.send(json.dumps(job) + "\n")

    def _on_chunk(self, text: str) -> None:
        job = self.job
        if job is not None and job.on_chunk is not None and not job.done.done():
            job.on_chunk(text)

    def _on_line(self, line: str, ts: float) -> None:
        job = self.job
        m = MARK_RE.search(line)
        if m is not None and m.group("nonce") == self.nonce:
            head = line[:m.start()]
            if job is not None and job.on_line is not None and head.strip():
                job.on_line(head, ts)
            if job is not None and m.group("id") == job.id and not job.done.done():
                job.done.set_result(int(m.group("rc")))
                if job is not self.warm and self.proc is not None:
                    self.proc.relog(self.log_path, f"(between benches: bench {job.id} exited {job.done.result()})")
            return
        if job is not None and job.on_line is not None and not job.done.done():
            job.on_line(line, ts)

    async def _watch_exit(self) -> None:
        assert self.proc is not None
        rc = await self.proc.wait()
        self.exit_code = rc
        for job in (self.warm, self.job):
            if job is not None and not job.done.done():
                job.ended_by_runner_exit = True
                job.done.set_result(rc)

    async def stop(self, grace_s: float | None = None) -> int | None:
        """Stop the runner and everything it started (the bench in it too)."""
        if self.proc is None:
            return None
        rc = await self.proc.stop(grace_s=self.grace_s if grace_s is None else grace_s)
        if self._watch is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._watch), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        if self.exit_code is None:
            self.exit_code = rc if rc is not None else -1
        return rc

    def kill_now(self) -> None:
        if self.proc is not None:
            self.proc.kill_now()
