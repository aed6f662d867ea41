"""`python -m tui.web.child [wizard options]`: one browser session's app, started by `specdec-tui serve-web`.

The wizard's own command line (tui/cli.py) with `web=True`: textual-serve's WebDriver draws it through the
browser (TEXTUAL_DRIVER is set by the server), so no terminal is needed. Before anything else it asks Linux for
SIGHUP when its parent (serve-web) dies, even by SIGKILL: the app takes SIGHUP as a terminal loss (stop the
servers, write the report, exit; tui/app/terminal.py), so no server outlives a dead serve-web.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

from ..cli import main
from ..core.run.engine import EXIT_INTERRUPTED

_PR_SET_PDEATHSIG = 1


def hang_up_with_parent() -> bool:
    """PR_SET_PDEATHSIG(SIGHUP) on Linux; False when the parent is already gone (elsewhere: True, no-op)."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGHUP, 0, 0, 0)
        except OSError:
            pass
    return os.getppid() == parent


def run(argv: list[str]) -> int:
    if not hang_up_with_parent():
        return EXIT_INTERRUPTED  # serve-web died before the app started
    return main(argv, web=True)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
