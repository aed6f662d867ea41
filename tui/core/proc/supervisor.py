"""Child-process supervision shared by `vllm serve` and `vllm bench serve`.

The same code drives the real vLLM on a trn2 and the simulator: it only sees a process, its output and
(for servers) its HTTP port.

- Each child runs in its own process group (new session), stdout+stderr merged, with PR_SET_PDEATHSIG so
  it dies with us, plus a watchdog process that kills the whole group if the app itself is SIGKILLed
  (grandchildren such as vLLM's EngineCore and workers are not covered by PDEATHSIG).
- Every raw line is tee'd with a timestamp to a log file.
- stop(): SIGINT, then SIGTERM after a grace period, then SIGKILL to the whole group; then wait until the
  processes are gone and, for servers, the port is free. The full grace period applies only to a process
  marked ready (mark_ready(): a server that answered): one still starting gets `startup_grace_s` (5 s) after
  SIGINT, because vLLM ignores SIGINT early in startup (measured with vLLM 0.32 on CPU).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

STARTUP_GRACE_S = 5.0  # SIGINT -> SIGTERM for a process not yet ready

import psutil

from tui.core.secrets import redact
from tui.core.store.rundir import open_append
from tui.core.host.sysinfo import not_runnable

_PKG_ROOT = str(Path(__file__).resolve().parents[3])


def _wrapped(argv: list[str]) -> list[str]:
    """argv run through tui.core.proc.pdeathsig (PR_SET_PDEATHSIG, then exec), without a preexec_fn."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [sys.executable, "-m", "tui.core.proc.pdeathsig", *argv]


def _group_pids(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.info["pid"]) == pgid:
                out.append(p.info["pid"])
        except (ProcessLookupError, PermissionError, psutil.Error, OSError):
            continue
    return out


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies still count for killpg(0); look closer.
    for pid in _group_pids(pgid):
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def port_free(host: str, port: int) -> bool:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_holder(port: int) -> tuple[int, str] | None:
    """(pid, command line) of the process listening on `port`, when visible."""
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, PermissionError, OSError):
        return None
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            try:
                cmd = " ".join(psutil.Process(c.pid).cmdline()) or psutil.Process(c.pid).name()
            except psutil.Error:
                cmd = "?"
            return c.pid, cmd
    return None


def start_watchdog(app_pid: int, pgid: int) -> subprocess.Popen[bytes] | None:
    """A tiny process, in its own session, that kills group `pgid` if `app_pid` dies first."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "tui.core.proc.watchdog", str(app_pid), str(pgid)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
            cwd=_PKG_ROOT,
        )
    except OSError:
        return None


class ManagedProcess:
    """A supervised child: spawn, stream lines, tee to a log file, stop the whole group."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path,
                 on_line: Callable[[str, float], None] | None = None, cwd: str | None = None,
                 on_chunk: Callable[[str], None] | None = None, grace_s: float = 30.0,
                 startup_grace_s: float = STARTUP_GRACE_S, on_stop: Callable[[], None] | None = None,
                 stdin_pipe: bool = False):
        """grace_s: SIGINT -> SIGTERM for a ready process; startup_grace_s: the same for one not marked ready.
        on_stop: called once, right before the first stop signal (the log watcher's stopping()).
        stdin_pipe: the child's stdin is a pipe that send() writes (else /dev/null)."""
        self.stdin_pipe = stdin_pipe
        self.argv = argv
        self.grace_s = grace_s
        self.startup_grace_s = startup_grace_s
        self.on_stop = on_stop
        self.ready = False
        self.signals_sent: list[str] = []  # names of the stop signals sent, in order
        self.on_chunk = on_chunk
        self.env = env
        self.log_path = Path(log_path)
        self.on_line = on_line
        self.cwd = cwd
        self.proc: asyncio.subprocess.Process | None = None
        self.pgid: int | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self._reader: asyncio.Task[None] | None = None
        self.started_at = 0.0
        self.lines = 0
        self._log = None
        self.tail: list[str] = []  # last lines, ANSI intact, for diagnoses
        self.tail_max = 400

    async def start(self) -> None:
        """Spawn the child. Raises FileNotFoundError when argv[0] is not an executable on the child's PATH."""
        exe = self.argv[0]
        if shutil.which(exe, path=self.env.get("PATH", os.defpath)) is None:
            raise FileNotFoundError(not_runnable(exe, self.env.get("PATH", os.defpath)) or f"{exe!r} not found on PATH")
        self._open_log(self.log_path, "$ " + " ".join(self.argv))
        self.started_at = time.time()
        # The wrapper runs in this interpreter (so it imports like the app does) and execs argv unchanged,
        # environment included.
        self.proc = await asyncio.create_subprocess_exec(
            *_wrapped(self.argv), stdin=asyncio.subprocess.PIPE if self.stdin_pipe else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=self.env, cwd=self.cwd, start_new_session=True,
        )
        self.pgid = self.proc.pid  # new session: pgid == pid
        self.watchdog = start_watchdog(os.getpid(), self.pgid)
        self._reader = asyncio.create_task(self._read())

    def _open_log(self, path: Path, header: str) -> None:
        self._log = open_append(path)  # through rundir: an unwritable run directory is reported once
        self._log.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%S')} {redact(header)}\n")

    def relog(self, path: Path, header: str) -> None:
        """From the next line on, tee the output to `path` instead, headed by `header` (start() heads its log with
        "$ " and the command)."""
        if self._log is not None:
            try:
                self._log.close()
            except OSError:
                pass
        self.log_path = Path(path)
        self._open_log(self.log_path, header)

    async def send(self, text: str) -> None:
        """Write `text` to the child's stdin (stdin_pipe=True). Raises ConnectionError when the child is gone."""
        if self.proc is None or self.proc.stdin is None:
            raise ConnectionError("the child has no stdin pipe")
        try:
            self.proc.stdin.write(text.encode("utf-8"))
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError, RuntimeError) as exc:
            raise ConnectionError(str(exc) or "the child closed its stdin") from exc

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        stream = self.proc.stdout
        secret = True  # secrets.redact: every known secret and hf_ token, on every line (fast when none match)
        buf = ""
        while True:
            chunk = await stream.read(1 << 16)
            if not chunk:
                break
            text = chunk.decode("utf-8", errors="replace")
            if self.on_chunk is not None:
                self.on_chunk(text)
            buf += text
            if "\n" not in buf:
                if len(buf) > (1 << 20):  # a runaway line without newline: cut it
                    self._line(buf, secret)
                    buf = ""
                continue
            *lines, buf = buf.split("\n")
            for line in lines:
                self._line(line, secret)
            if self._log is not None:
                self._log.flush()  # once per read: the file is complete up to here if we crash
        if buf:
            self._line(buf, secret)
        if self._log is not None:
            self._log.flush()

    def _line(self, line: str, secret: bool) -> None:
        ts = time.time()
        if secret:
            line = redact(line)
        self.lines += 1
        if self._log is not None:
            self._log.write(f"{time.strftime('%H:%M:%S', time.localtime(ts))}.{int(ts * 1000) % 1000:03d} {line}\n")
        self.tail.append(line)
        if len(self.tail) > self.tail_max:
            del self.tail[: len(self.tail) - self.tail_max]
        if self.on_line is not None:
            self.on_line(line, ts)

    def tree(self) -> list[psutil.Process]:
        """The child, every process it started, and every process of its process group (a daemonized one too)."""
        if self.proc is None:
            return []
        out: dict[int, psutil.Process] = {}
        try:
            root = psutil.Process(self.proc.pid)
            out[root.pid] = root
            for p in root.children(recursive=True):
                out[p.pid] = p
        except psutil.Error:
            pass
        if self.pgid is not None:
            for pid in _group_pids(self.pgid):
                if pid not in out:
                    try:
                        out[pid] = psutil.Process(pid)
                    except psutil.Error:
                        continue
        return list(out.values())

    def listens_on(self, port: int) -> bool | None:
        """Does a socket of this child's tree (tree()) listen on TCP `port`? None when it cannot be told (a process
        of the tree whose sockets this user may not read, and none found listening). Blocking: run it in a thread."""
        unknown = False
        for p in self.tree():
            try:
                conns = p.net_connections(kind="inet")
            except psutil.NoSuchProcess:
                continue
            except psutil.Error:
                unknown = True
                continue
            if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns):
                return True
        return None if unknown else False

    def mark_ready(self) -> None:
        """The process reached readiness: stop() gives it the full grace period after SIGINT."""
        self.ready = True

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc else None

    async def wait(self) -> int:
        assert self.proc is not None
        rc = await self.proc.wait()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, timeout=5)
            except asyncio.TimeoutError:
                self._reader.cancel()
        return rc

    async def wait_output_done(self) -> None:
        if self._reader is not None:
            await self._reader

    async def stop(self, grace_s: float | None = None, term_s: float = 10.0) -> int | None:
        """SIGINT → (grace_s) → SIGTERM → (term_s) → SIGKILL to the group; returns the exit code.
        grace_s defaults to the one given at construction when the process is marked ready, else to
        min(that, startup_grace_s)."""
        if self.proc is None or self.pgid is None:
            return None
        if grace_s is None:
            grace_s = self.grace_s if self.ready else min(self.grace_s, self.startup_grace_s)
        if self.on_stop is not None:
            cb, self.on_stop = self.on_stop, None
            try:
                cb()
            except Exception:  # a watcher's bookkeeping must never block the stop
                pass
        pgid = self.pgid
        steps = ((signal.SIGINT, grace_s), (signal.SIGTERM, term_s), (signal.SIGKILL, 10.0))
        for sig, wait_s in steps:
            if self.proc.returncode is not None and not group_alive(pgid):
                break
            _signal_group(pgid, sig)
            self.signals_sent.append(signal.Signals(sig).name)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                if self.proc.returncode is not None and not group_alive(pgid):
                    break
                try:
                    await asyncio.wait_for(asyncio.shield(self.proc.wait()), timeout=0.2)
                except asyncio.TimeoutError:
                    pass
            else:
                continue
            break
        try:
            await asyncio.wait_for(self.proc.wait(), timeout=5)
        except asyncio.TimeoutError:
            pass
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._reader.cancel()
        self._close()
        return self.proc.returncode

    def kill_now(self) -> None:
        """Synchronous last resort: SIGKILL the whole group."""
        if self.pgid is not None:
            _signal_group(self.pgid, signal.SIGKILL)
        self._close()

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except (OSError, RuntimeError):
                pass
        if self.watchdog is not None:
            try:
                self.watchdog.kill()
                self.watchdog.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self.watchdog = None
        if self._log is not None:
            try:
                self._log.close()
            except OSError:
                pass
            self._log = None


async def wait_port_free(host: str, port: int, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if port_free(host, port):
            return True
        await asyncio.sleep(0.2)
    return port_free(host, port)
