"""Terminal loss: the app runs in a real pseudo-terminal whose master side is closed (what an SSH drop or a
killed tmux does). From the first screen, mid-launch and with the quit dialog open, the app must stop its
children, write its report and exit (the README promises within 5 s; tests/perf measures that figure; the
timeout here is only a safety net)."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import socket
import sys
import time
from pathlib import Path

import psutil
import pytest

from tui.core.profile.model import load_profile

REPO = Path(__file__).resolve().parents[1]
SAFETY_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PtyApp:
    def __init__(self, tmp: Path, args: list[str]):
        env = dict(os.environ, HOME=str(tmp / "home"), XDG_CACHE_HOME=str(tmp / "home" / ".cache"),
                   TERM="xterm-256color", COLUMNS="80", LINES="24", PYTHONPATH=str(REPO))
        env.pop("NO_COLOR", None)
        (tmp / "home").mkdir(exist_ok=True)
        argv = [sys.executable, "-m", "tui", *args]
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the app, with the pty as its controlling terminal
            try:
                os.chdir(tmp)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.screen = b""
        self.closed = False

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not self.closed:
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if r:
                try:
                    self.screen = (self.screen + os.read(self.fd, 65536))[-200_000:]
                except OSError:
                    return

    def wait_for(self, cond, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            self.pump(0.2)
        return cond()

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def hang_up(self) -> None:
        os.close(self.fd)
        self.closed = True

    def wait_exit(self, timeout: float) -> int | None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        return None

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass


def _profile(tmp: Path) -> Path:
    prof = load_profile("demo").with_values({
        "simulation.time_scale": 0.2, "simulation.token_time_scale": 0.2, "benchmark.num_prompts": 4, "server.port": _free_port(),
        "server.env": {"VLLM_CACHE_ROOT": str(tmp / "vllm-cache")}})
    path = tmp / "pty-demo.toml"
    path.write_text(prof.to_toml())
    return path


@pytest.mark.parametrize("where", ["first-screen", "mid-launch", "quit-dialog"])
def test_terminal_loss_stops_children_writes_the_report_and_exits(tmp_path, where):
    run_dir = tmp_path / "run"
    app = PtyApp(tmp_path, ["--profile", str(_profile(tmp_path)), "--run-dir", str(run_dir)])
    kids: list[psutil.Process] = []
    try:
        assert app.wait_for(lambda: b"Profile" in app.screen, 30), "the app never drew its first screen"
        if where != "first-screen":
            app.send(b"a")  # run everything
            log = run_dir / "baseline.serve.log"
            assert app.wait_for(lambda: log.exists() and "Compil" in log.read_text(errors="replace"), SAFETY_S)
            kids = psutil.Process(app.pid).children(recursive=True)
            assert kids, "no server was running"
            if where == "quit-dialog":
                app.send(b"\x11")  # ctrl+q while the server runs: the app asks first
                assert app.wait_for(lambda: b"Quit" in app.screen, 10)
        app.hang_up()
        code = app.wait_exit(SAFETY_S)
        assert code is not None, "the app did not exit after its terminal went away"
    finally:
        app.kill()
    assert psutil.wait_procs(kids, timeout=10)[1] == [], "a child outlived the app"
    if where == "first-screen":
        assert code == 130 and not (run_dir / "report.json").exists()  # nothing had started
    else:
        assert code == 130
        rep = json.loads((run_dir / "report.json").read_text())
        state = json.loads((run_dir / "state.json").read_text())
        assert rep["exit_code"] == 130
        assert state["steps"]["baseline"]["status"] == "interrupted"
