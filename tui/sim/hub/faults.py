"""The hub's faults: the `Fault` spec (parsed from `404,delay=2,drop=1,...`) and the response that drops its
connection half-way."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response


@dataclass
class Fault:
    status: int | None = None
    error_code: str | None = None
    delay: float = 0.0
    drop: int = 0  # -1: always; N > 0: the next N responses with a body
    corrupt: bool = False
    no_range: bool = False

    @classmethod
    def parse(cls, spec: str) -> "Fault":
        f = cls()
        for raw in spec.split(","):
            tok = raw.strip().lower()
            if not tok or tok == "none":
                continue
            if tok.isdigit():
                f.status = int(tok)
            elif tok == "gated":
                f.status, f.error_code = 403, "GatedRepo"
            elif tok == "entry-404":
                f.status, f.error_code = 404, "EntryNotFound"
            elif tok == "revision-404":
                f.status, f.error_code = 404, "RevisionNotFound"
            elif tok.startswith("delay="):
                f.delay = float(tok.split("=", 1)[1])
            elif tok == "drop":
                f.drop = -1
            elif tok.startswith("drop="):
                f.drop = int(tok.split("=", 1)[1])
            elif tok == "corrupt":
                f.corrupt = True
            elif tok == "no-range":
                f.no_range = True
            else:
                raise ValueError(f"unknown hub fault {tok!r}; allowed: 404, 401, 403, 500, 503, gated, entry-404, "
                                 "revision-404, delay=S, drop, drop=N, corrupt, no-range")
        return f


class _DropConnection(Exception):
    """Raised after half a body was sent: uvicorn then closes the connection mid-response."""


class _QuietDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _DropConnection)


logging.getLogger("uvicorn.error").addFilter(_QuietDrops())


class DroppingResponse(Response):
    """Sends the headers and half of the body, then raises so uvicorn drops the connection."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body[: max(1, len(self.body) // 2)],
                    "more_body": True})
        await asyncio.sleep(0.05)  # let the half reach the socket before the connection drops
        raise _DropConnection("simulated connection drop")
