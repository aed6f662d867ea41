"""The HTTP port (and the cores) of a server that runs on a fleet node: chosen on that node, free there, held until
the arm ends.

Ray places an arm; it cannot know which ports are free on the node it picked, and several arms may start on one
node at once (a trn2.48xlarge takes four TP16 servers). So the arm itself, on its node, takes the first port from
server.port up that is free there and that no other run on that node holds — the host-wide locks every run takes
(tui/core/host/hostlock.py: a flock per port and per core, released by the kernel when the holder exits, so a
killed arm never leaves a port taken), which a run that is not on Ray sees too. The cores Ray assigned are locked
the same way, so another run on that host that picked them by hand is named instead of sharing them. This is the
one function that picks a fleet server's port.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

from tui.core.host.hostlock import HostLocks, core_claims, port_claim
from tui.core.proc.supervisor import port_free

PORT_SPAN = 200  # ports tried above server.port


class PortLock:
    """A held port (`port`) and the node's locks that hold it; `release()` (or the holding process's end) frees
    them."""

    def __init__(self, port: int, locks: HostLocks):
        self.port = port
        self._locks = locks

    def release(self) -> None:
        self._locks.release()


def node_port(host: str, base: int, locks: HostLocks, avoid: Iterable[int] = (), platform: str = "cpu",
              cores: Sequence[int] = (), environ: Mapping[str, str] | None = None,
              free: Callable[[str, int], bool] = port_free) -> PortLock:
    """The first port from `base` up that is free on this node and held by no other run here (skipping `avoid`,
    e.g. a Neuron server's collective root port), with `cores` locked too. Raises OSError naming the holder when
    another run holds the cores, or when none of PORT_SPAN ports is free."""
    if cores:
        refusal = locks.take(core_claims(platform, cores, environ), "fleet")
        if refusal is not None:
            raise OSError(refusal.text("leave those cores out of this node's Ray resources (ray start "
                                       "--resources) while that run uses them"))
    skip = set(avoid)
    for port in range(base, min(base + PORT_SPAN, 65536)):
        if port in skip:
            continue
        if locks.take([port_claim(host, port, environ)], f"port-{port}") is not None:
            continue  # another run on this node holds it
        if free(host, port):
            return PortLock(port, locks)
        locks.release(f"port-{port}")
    locks.release()
    raise OSError(f"no free port on this node from {base} to {min(base + PORT_SPAN, 65536) - 1} (host {host})")


__all__ = ["PortLock", "node_port"]
