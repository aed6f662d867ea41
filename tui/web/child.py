"""`python -m tui.web.child [wizard options]`: one browser session's app, started by `specdec-tui serve-web`.

The wizard's own command line (tui/cli.py) with `web=True`: textual-serve's WebDriver draws it through the
browser (TEXTUAL_DRIVER is set by the server), so no terminal is needed. Before anything else it asks Linux for
SIGHUP when its parent (serve-web) dies, even by SIGKILL: the app takes SIGHUP as a terminal loss (stop the
servers, write the report, exit; tui/app/terminal.py), so no server outlives a dead serve-web.
"""

from __future__ import annotations

import signal
import sys

from ..cli import main
from ..core.proc.pdeathsig import die_with_parent
from ..core.run.engine import EXIT_INTERRUPTED

def hang_up_with_parent() -> bool:
    """SIGHUP when serve-web dies (PR_SET_PDEATHSIG); False when it is already gone."""
    return die_with_parent(signal.SIGHUP)


def run(argv: list[str]) -> int:
    if not hang_up_with_parent():
        return EXIT_INTERRUPTED  # serve-web died before the app started
    return main(argv, web=True)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
