"""The engine-core child process (`python -m tui.sim.engine_core`) and its readiness pipe."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


class EngineProc:
    """The engine-core child process and its readiness pipe."""

    def __init__(self, ea: dict[str, Any], environ: dict[str, str]):
        r, w = os.pipe()
        env = dict(environ)
        env["SPECDEC_SIM_ENGINE_ARGS"] = json.dumps(ea)
        env["PYTHONUNBUFFERED"] = "1"
        pkg_root = str(Path(__file__).resolve().parents[3])  # the folder that holds tui/
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tui.sim.engine_core", "--parent-pid", str(os.getpid()), "--ready-fd", str(w)],
                stdin=subprocess.PIPE, pass_fds=(w,), env=env, close_fds=True)
        finally:
            os.close(w)
        self.rfd = r
        self._buf = b""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float) -> tuple[str, dict[str, Any]]:
        """("ready", info) | ("failed", {}) | ("timeout", {})."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", {}
            r, _, _ = select.select([self.rfd], [], [], min(remaining, 0.2))
            if r:
                chunk = os.read(self.rfd, 65536)
                if not chunk:  # the child closed the pipe: it exited
                    self.proc.wait()
                    return "failed", {}
                self._buf += chunk
                if b"\n" in self._buf:
                    line, _, self._buf = self._buf.partition(b"\n")
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        msg = {"status": "failed"}
                    if msg.get("status") == "ready":
                        return "ready", msg
                    self.proc.wait()
                    return "failed", msg
            elif self.proc.poll() is not None:
                return "failed", {}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace_s: float = 2.0) -> None:
        with contextlib.suppress(OSError):
            os.close(self.rfd)
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.terminate()
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    self.proc.kill()
                self.proc.wait()
        if self.proc.stdin:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()


