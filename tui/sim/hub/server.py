"""Running the hub: `start_hub` serves `HubApp` with uvicorn in a background thread; `HubHandle` stops it and
gives tests its request log and faults."""

from __future__ import annotations

import fnmatch
import socket
import threading
import time
from typing import Any, Iterable, Mapping

from .repos import AUTHORIZED_TOKEN, SimRepo
from .routes import DATASET_PATH, HubApp, RequestRecord


class HubHandle:
    """A running hub. `url` (no trailing slash), `stop()`, context manager, plus test helpers."""

    def __init__(self, hub: HubApp, server: Any, thread: threading.Thread, host: str, port: int):
        self.hub = hub
        self._server = server
        self._thread = thread
        self.host = host
        self.port = port
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}"

    @property
    def dataset_url(self) -> str:
        return self.url + DATASET_PATH

    @property
    def requests(self) -> list[RequestRecord]:
        with self.hub._lock:
            return list(self.hub.requests)

    def requests_to(self, path_pattern: str) -> list[RequestRecord]:
        return [r for r in self.requests if fnmatch.fnmatchcase(r.path, path_pattern)]

    def clear_requests(self) -> None:
        with self.hub._lock:
            self.hub.requests.clear()

    def set_fault(self, pattern: str, spec: str) -> None:
        self.hub.set_fault(pattern, spec)

    def clear_faults(self) -> None:
        self.hub.clear_faults()

    @property
    def repos(self) -> dict[str, SimRepo]:
        return self.hub.repos

    def stop(self, timeout: float = 5.0) -> None:
        if not self._thread.is_alive():
            return
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)

    def __enter__(self) -> "HubHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_hub(host: str = "127.0.0.1", port: int = 0, *, delay: float = 0.0,
              faults: Mapping[str, str] | None = None, repos: Mapping[str, SimRepo] | None = None,
              tokens: Iterable[str] = (AUTHORIZED_TOKEN,), dataset: bytes | None = None,
              log_level: str = "warning", startup_timeout: float = 10.0) -> HubHandle:
    """Start the hub in a background thread and return once it accepts connections."""
    import uvicorn

    hub = HubApp(repos=repos, delay=delay, faults=faults, tokens=tokens, dataset=dataset)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(hub.app, log_level=log_level, access_log=False, lifespan="off", http="h11",
                            loop="asyncio", ws="none", timeout_graceful_shutdown=1, timeout_keep_alive=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"sim-hub-{bound_port}",
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"the loopback hub did not start on {host}:{bound_port}")
        time.sleep(0.01)
    return HubHandle(hub, server, thread, host, bound_port)
