"""Child-process supervision: log tee, token redaction, stop escalation, whole-group teardown."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import textwrap
import time

import psutil
import pytest

from tui.core.proc.supervisor import ManagedProcess, group_alive, port_free


def script(tmp_path, body: str) -> list[str]:
    p = tmp_path / "child.py"
    p.write_text(textwrap.dedent(body))
    return [sys.executable, str(p)]


async def test_lines_are_teed_with_timestamps_and_tokens_redacted(tmp_path, monkeypatch):
    token = "hf_" + "A" * 34
    monkeypatch.setenv("HF_TOKEN", token)
    argv = script(tmp_path, """
        import os, sys
        print("token is", os.environ["HF_TOKEN"], flush=True)
        sys.stdout.write("partial"); sys.stdout.flush()
        sys.stdout.write(" line\\nbar 1\\rbar 2\\rbar 3\\n"); sys.stdout.flush()
        print("to stderr", file=sys.stderr, flush=True)
    """)
    seen: list[str] = []
    chunks: list[str] = []
    proc = ManagedProcess(argv, dict(os.environ), tmp_path / "x.log", on_line=lambda line, ts: seen.append(line),
                          on_chunk=chunks.append)
    await proc.start()
    assert await proc.wait() == 0
    await proc.stop(grace_s=1)
    # Redacted either as the value of a secret-named variable (***) or by the token pattern (hf_***): the
    # redactor re-reads the environment at most once a second, so which one applies depends on timing.
    assert seen[0] in ("token is ***", "token is hf_***") and token not in seen[0]
    assert seen[1:] == ["partial line", "bar 1\rbar 2\rbar 3", "to stderr"]
    log = (tmp_path / "x.log").read_bytes().decode()  # keep the \r of progress bars
    assert token not in log and seen[0] in log
    body = [ln for ln in log.split("\n") if ln and not ln.startswith("#")]
    assert all(len(ln) > 13 and ln[2] == ":" and ln[8] == "." for ln in body), body  # HH:MM:SS.mmm prefix
    assert "".join(chunks).count("bar") == 3  # raw chunks (tqdm progress) reach on_chunk too


async def test_stop_escalates_and_kills_the_whole_group(tmp_path):
    # The child ignores SIGINT and SIGTERM and starts a grandchild that does the same.
    argv = script(tmp_path, """
        import signal, subprocess, sys, time
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kid = subprocess.Popen([sys.executable, "-c",
            "import signal,time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('grandchild', flush=True); time.sleep(600)"])
        print("child", kid.pid, flush=True)
        time.sleep(600)
    """)
    lines: list[str] = []
    proc = ManagedProcess(argv, dict(os.environ), tmp_path / "x.log", on_line=lambda line, ts: lines.append(line))
    await proc.start()
    for _ in range(200):
        if "grandchild" in lines:
            break
        await asyncio.sleep(0.05)
    assert "grandchild" in lines
    grandchild = int(next(ln for ln in lines if ln.startswith("child")).split()[1])
    pgid = proc.pgid
    assert pgid is not None and group_alive(pgid)
    rc = await proc.stop(grace_s=0.3, term_s=0.3)
    assert rc is not None and rc < 0  # killed by a signal (SIGKILL after SIGINT and SIGTERM were ignored)
    assert not group_alive(pgid)
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


async def test_missing_executable_raises_before_spawning(tmp_path):
    proc = ManagedProcess(["definitely-not-a-real-binary-xyz"], {"PATH": str(tmp_path)}, tmp_path / "x.log")
    with pytest.raises(FileNotFoundError):
        await proc.start()
    assert not (tmp_path / "x.log").exists()


async def test_watchdog_kills_the_group_when_the_app_dies(tmp_path):
    """The app is SIGKILLed: PR_SET_PDEATHSIG takes the direct child, the watchdog the rest of the group."""
    app = script(tmp_path, """
        import asyncio, os, sys
        sys.path.insert(0, %r)
        from tui.core.proc.supervisor import ManagedProcess
        async def main():
            p = ManagedProcess([sys.executable, "-c",
                "import subprocess,sys,time; subprocess.Popen([sys.executable,'-c','import time; time.sleep(600)']); "
                "print('up', flush=True); time.sleep(600)"], dict(os.environ), %r)
            await p.start()
            print("pgid", p.pgid, flush=True)
            await asyncio.sleep(600)
        asyncio.run(main())
    """ % (os.getcwd(), str(tmp_path / "inner.log")))
    outer = await asyncio.create_subprocess_exec(*app, stdout=asyncio.subprocess.PIPE)
    assert outer.stdout is not None
    line = (await asyncio.wait_for(outer.stdout.readline(), 30)).decode()
    pgid = int(line.split()[1])
    log = tmp_path / "inner.log"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (log.exists() and "up" in log.read_text()):
        await asyncio.sleep(0.05)
    members = [p for p in psutil.process_iter() if _pgid(p.pid) == pgid]
    assert len(members) >= 2  # the child and its own child
    outer.kill()
    await outer.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and group_alive(pgid):
        await asyncio.sleep(0.1)
    assert not group_alive(pgid)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def test_port_free():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert not port_free("127.0.0.1", port)
    assert port_free("127.0.0.1", port)


# A fake server that reports every stop signal it receives. SIGINT: "ignore" it (vLLM early in startup), or
# "shutdown": take a while to shut down, then exit 0. SIGTERM: exit at once.
SIGNAL_LOGGER = """
    import signal, sys, time
    MODE = {mode!r}
    def on_int(signum, frame):
        print("got SIGINT", flush=True)
        if MODE == "shutdown":
            time.sleep(1.5)
            print("clean exit", flush=True)
            sys.exit(0)
    def on_term(signum, frame):
        print("got SIGTERM", flush=True)
        sys.exit(143)
    signal.signal(signal.SIGINT, on_int)
    signal.signal(signal.SIGTERM, on_term)
    print("armed", flush=True)
    while True:
        time.sleep(0.05)
"""


async def _armed(tmp_path, mode: str, **kw) -> tuple[ManagedProcess, list[str]]:
    lines: list[str] = []
    proc = ManagedProcess(script(tmp_path, SIGNAL_LOGGER.format(mode=mode)), dict(os.environ), tmp_path / "x.log",
                          on_line=lambda line, ts: lines.append(line), **kw)
    await proc.start()
    for _ in range(600):
        if "armed" in lines:
            break
        await asyncio.sleep(0.05)
    assert "armed" in lines
    return proc, lines


def got(lines: list[str]) -> list[str]:
    return [ln.split()[1] for ln in lines if ln.startswith("got ")]


async def test_starting_server_that_ignores_sigint_is_escalated(tmp_path):
    calls: list[int] = []
    proc, lines = await _armed(tmp_path, "ignore", grace_s=3600.0, startup_grace_s=0.2,
                               on_stop=lambda: calls.append(len(proc.signals_sent)))
    assert not proc.ready
    # Not ready: the full grace (3600 s) does not apply; the wait_for only guards against a hang.
    rc = await asyncio.wait_for(proc.stop(), timeout=300)
    assert got(lines) == ["SIGINT", "SIGTERM"]
    assert proc.signals_sent == ["SIGINT", "SIGTERM"] and rc == 143
    assert calls == [0]  # on_stop ran once, before the first signal


async def test_ready_server_gets_the_full_grace_after_sigint(tmp_path):
    proc, lines = await _armed(tmp_path, "shutdown", grace_s=120.0, startup_grace_s=0.05)
    proc.mark_ready()
    rc = await asyncio.wait_for(proc.stop(), timeout=300)
    assert got(lines) == ["SIGINT"] and "clean exit" in lines
    assert proc.signals_sent == ["SIGINT"] and rc == 0


async def test_starting_server_gets_only_the_startup_grace(tmp_path):
    # The same slow-to-shut-down server, not marked ready: SIGTERM follows after startup_grace_s.
    proc, lines = await _armed(tmp_path, "shutdown", grace_s=120.0, startup_grace_s=0.05)
    rc = await asyncio.wait_for(proc.stop(), timeout=300)
    assert got(lines)[:2] == ["SIGINT", "SIGTERM"] and proc.signals_sent[:2] == ["SIGINT", "SIGTERM"]
    assert rc != 0 and "clean exit" not in lines
