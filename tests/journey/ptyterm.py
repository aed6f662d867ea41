"""A real pseudo-terminal for the journey tier: a command runs as a user's shell would run it, with the pty as
its controlling terminal (80x24, xterm-256color), and pyte keeps the screen the user would see."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import termios
import time
from pathlib import Path
from typing import Callable

import pyte

COLS, ROWS = 80, 24


class PtyTerminal:
    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], cols: int = COLS, rows: int = ROWS):
        env = dict(env, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = b""
        self.exit_code: int | None = None
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)

    # -- reading -------------------------------------------------------------------------------------------
    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if not r:
                self._reap()
                if self.exit_code is not None:
                    return
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the child side is gone
                self._reap(block=True)
                return
            if not data:
                self._reap(block=True)
                return
            self.raw = (self.raw + data)[-400_000:]
            self.stream.feed(data)

    def text(self) -> str:
        """The screen as the user sees it now, one line per row."""
        return "\n".join(line.rstrip() for line in self.screen.display)

    def pane_text(self) -> str:
        """The right-hand pane (right of the step list's divider) as one line of words: wrapping moves words
        between rows at other widths, this does not."""
        parts = [line.split("\u2595", 1)[1] if "\u2595" in line else line for line in self.screen.display]
        return " ".join(" ".join(parts).split())

    def wait_for(self, cond: Callable[[], bool] | str, timeout: float) -> bool:
        check = (lambda: cond in self.text()) if isinstance(cond, str) else cond
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if check():
                return True
            if self.exit_code is not None:
                return check()
            self.pump(0.2)
        return check()

    # -- writing -------------------------------------------------------------------------------------------
    def send(self, keys: bytes | str) -> None:
        os.write(self.fd, keys.encode() if isinstance(keys, str) else keys)

    # -- the process ---------------------------------------------------------------------------------------
    def _reap(self, block: bool = False) -> None:
        if self.exit_code is not None:
            return
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            self.exit_code = os.waitstatus_to_exitcode(status)

    def wait_exit(self, timeout: float) -> int | None:
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.exit_code is None:
            self.pump(0.2)
        self._reap()
        return self.exit_code

    def close(self) -> None:
        """Last resort (a test that failed half-way): hang up and kill what is left of the command."""
        if self.exit_code is None:
            try:
                os.kill(self.pid, signal.SIGHUP)
            except OSError:
                pass
            if self.wait_exit(20) is None:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
                self._reap(block=True)
        try:
            os.close(self.fd)
        except OSError:
            pass
