"""Loss of the terminal: an SSH drop, a killed tmux, a closed window.

Two ways to notice it: SIGHUP (the app's signal handler calls `terminal_lost`), or EIO/EOF on the tty without a
SIGHUP (`watch_tty` polls the tty from a daemon thread). Either way nobody can answer a dialog any more: the
children are hurried, the report is written, and the process exits even if Textual's own teardown blocks on the
dead terminal: TERMINAL_LOSS_EXIT_S after the loss every child is killed, and the process exits once the engine has
closed the run (report written), at the latest TERMINAL_LOSS_REPORT_S later.

`TerminalLoss` is a mixin of `SpecdecApp` (tui/app/app.py).
"""

from __future__ import annotations

import os
import sys
import termios
import threading
import time
from typing import Any

from ..core.run.engine import EXIT_INTERRUPTED

TERMINAL_LOSS_EXIT_S = 4.0  # the backstop: children are killed this long after the terminal went away
TERMINAL_LOSS_REPORT_S = 20.0  # and the process waits at most this much longer for the report being written
TTY_POLL_S = 0.5


class TerminalLoss:
    """`terminal_lost` and its backstop; the app provides engine, exit_code and _start_shutdown."""

    _terminal_lost = False

    def terminal_lost(self) -> None:
        """The terminal went away (SIGHUP, or EIO/EOF on the tty: an SSH drop, a killed tmux). Nobody can
        answer a dialog any more: stop the children with a short grace, write the report, and exit even if
        Textual's own teardown blocks on the dead terminal (the backstop: children killed after
        TERMINAL_LOSS_EXIT_S, the report waited for at most TERMINAL_LOSS_REPORT_S more)."""
        if self._terminal_lost:
            return
        self._terminal_lost = True
        _detach_from_terminal()
        if self.engine is not None:
            self.engine.hurry()
        threading.Thread(target=self._backstop_exit, name="terminal-loss-backstop", daemon=True).start()
        # A quit dialog may be open: nobody can answer it. A shutdown already under way ends with os._exit.
        self._start_shutdown()

    def _backstop_exit(self) -> None:
        time.sleep(TERMINAL_LOSS_EXIT_S)
        engine = self.engine
        if engine is not None:
            engine.cleanup_sync()  # SIGKILL whatever is left of the children
            # Nothing lost: the engine may still be writing the report (drawing its charts takes seconds on a busy
            # host); exit as soon as it has closed the run, or after TERMINAL_LOSS_REPORT_S whatever blocks.
            end = time.monotonic() + TERMINAL_LOSS_REPORT_S
            while not engine.closed and time.monotonic() < end:
                time.sleep(0.05)
        code = self.exit_code if self.exit_code is not None else getattr(engine, "exit_code", None)
        os._exit(code if code is not None else EXIT_INTERRUPTED)


def _detach_from_terminal() -> None:
    """Point stdin/stdout/stderr at /dev/null: writes to a hung-up tty fail (EIO) or block."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for fd in (0, 1, 2):
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


def _tty_alive(fd: int) -> bool:
    try:
        termios.tcgetattr(fd)
        return True
    except (termios.error, OSError, ValueError):
        return False


def _watch_terminal(app: Any, fd: int, stop: threading.Event) -> None:
    """EIO/EOF on the tty without a SIGHUP (the app ignored it, or was not the session leader)."""
    while not stop.wait(TTY_POLL_S):
        if not _tty_alive(fd):
            try:
                app.call_from_thread(app.terminal_lost)
            except Exception:
                pass
            return


def watch_tty(app: Any) -> threading.Event:
    """Watch the process's stdin tty (when it is one) from a daemon thread; set the returned event to stop."""
    stop = threading.Event()
    try:
        tty_fd = sys.__stdin__.fileno() if sys.__stdin__ is not None else -1
    except (OSError, ValueError):
        tty_fd = -1
    if tty_fd >= 0 and os.isatty(tty_fd):
        threading.Thread(target=_watch_terminal, args=(app, tty_fd, stop), name="tty-watch", daemon=True).start()
    return stop
