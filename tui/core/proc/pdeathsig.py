"""`python -m tui.core.proc.pdeathsig CMD [ARGS...]`: exec CMD so that it is SIGKILLed if our parent dies.

Sets PR_SET_PDEATHSIG (Linux), clears the blocked-signal mask, and then execs the real command in place, so
the supervisor gets these guarantees without a preexec_fn (which is unsafe in a process that runs threads).
Both survive execve. Elsewhere it just execs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask Linux to send this process `sig` when its parent dies (PR_SET_PDEATHSIG; elsewhere a no-op). False when
    the parent was already gone before that took effect."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        except OSError:
            pass
    return os.getppid() == parent


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tui.core.proc.pdeathsig CMD [ARGS...]", file=sys.stderr)
        return 2
    if not die_with_parent(signal.SIGKILL):  # the parent died before prctl took effect
        return 1
    try:  # the command starts with no signal blocked, whatever thread started us: a mask is inherited across
        # exec, and some parents block SIGINT in the thread that spawns (a Ray actor's event loop does), which
        # would leave a server deaf to the SIGINT of a graceful stop
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
    except (AttributeError, OSError, ValueError):
        pass
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"cannot execute {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
