"""The HTTP port of a server that runs on a fleet node: chosen on that node, free there, held until the arm ends.

Ray places an arm; it cannot know which ports are free on the node it picked, and several arms may start on one
node at once (a trn2.48xlarge takes four TP16 servers). So the arm itself, on its node, takes the first port from
server.port up that is free there and that no other arm of any run on that node holds: a lock file per port
(`fcntl.flock`, released by the kernel when the holder exits, so a killed arm never leaves a port taken). This is
the one function that picks a fleet server's port; a host-wide port lock (tui/core/host) can replace the lock here.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from tui.core.proc.supervisor import port_free

PORT_SPAN = 200  # ports tried above server.port
PORT_LOCKS = "specdec-tui-ports"  # under the node's temporary directory


class PortLock:
    """A held port: `port`, released by `release()` or when the holding process exits."""

    def __init__(self, port: int, fd: int | None):
        self.port = port
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)  # closing the descriptor drops the flock
            except OSError:
                pass


def _lock_dir() -> Path:
    d = Path(tempfile.gettempdir()) / PORT_LOCKS
    d.mkdir(parents=True, exist_ok=True)
    return d


def _try_lock(port: int) -> int | None:
    try:
        fd = os.open(_lock_dir() / f"{port}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def node_port(host: str, base: int, avoid: Iterable[int] = (), free: Callable[[str, int], bool] = port_free) -> PortLock:
    """The first port from `base` up that is free on this node and held by no other arm here (skipping `avoid`,
    e.g. a Neuron server's collective root port). Raises OSError when none of PORT_SPAN ports is."""
    skip = set(avoid)
    for port in range(base, min(base + PORT_SPAN, 65536)):
        if port in skip:
            continue
        fd = _try_lock(port)
        if fd is None:
            continue
        if free(host, port):
            return PortLock(port, fd)
        os.close(fd)
    raise OSError(f"no free port on this node from {base} to {min(base + PORT_SPAN, 65536) - 1} (host {host})")


__all__ = ["PortLock", "node_port"]
