"""`python -m tui.core.proc.watchdog APP_PID PGID`: kill process group PGID if APP_PID dies first.

Started by the supervisor in its own session next to every child it launches, so that a server (and its
EngineCore / worker grandchildren) never outlives the app, even when the app is SIGKILLed. Exits by
itself as soon as the group is gone.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie parent counts as dead
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().split(b")")[-1].split()[0] != b"Z"
    except OSError:
        return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def main(argv: list[str]) -> int:
    app_pid, pgid = int(argv[0]), int(argv[1])
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        if not _group_alive(pgid):
            return 0
        if not _alive(app_pid):
            for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    return 0
                end = time.monotonic() + wait
                while time.monotonic() < end and _group_alive(pgid):
                    time.sleep(0.1)
            return 0
        time.sleep(0.25)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
