"""The Textual front end, one job per module: app.py (the App class and its layout), pump.py (engine events →
widgets), keygate.py (the bindings and which can act now) over availability.py (the pure rules), runcontrol.py
(the keys that run, retry, stop and quit), actions.py (the keys that show or edit a pane) and terminal.py (loss of
the tty). `from tui.app import SpecdecApp, run_app` is the public face."""

from .app import LAUNCH_STEPS, SpecdecApp, run_app
from .availability import CLOSED_RUN, KeyState, why_not
from .pump import LOG_FLUSH_S
from .terminal import TERMINAL_LOSS_EXIT_S, TTY_POLL_S

__all__ = ["CLOSED_RUN", "KeyState", "LAUNCH_STEPS", "LOG_FLUSH_S", "SpecdecApp", "TERMINAL_LOSS_EXIT_S",
           "TTY_POLL_S", "run_app", "why_not"]
