"""One wait for every child with a deadline: `wait_child` waits for a started ManagedProcess until it exits or
its deadline passes, calling back at an interval while it runs (a progress scrape). It never stops the child:
the caller stops it the way its step needs (a grace period, its partial output set aside) and forgets it."""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Protocol


class Child(Protocol):
    """What wait_child waits for: a ManagedProcess, or a bench in a warm runner (steps/benchrun.BenchChild)."""

    async def wait(self) -> int: ...


async def wait_child(proc: Child, timeout_s: float | None, *, started_at: float | None = None,
                     every_s: float | None = None, on_every: Callable[[], Awaitable[None]] | None = None,
                     ) -> tuple[int | None, bool]:
    """(exit code, False) when the child exits, (None, True) when `timeout_s` (counted from `started_at`, else
    from now) passes first. `on_every` is awaited every `every_s` seconds while the child runs. A cancellation
    cancels the wait and propagates; the child is left to the caller (or to the engine's cleanup)."""
    waiter = asyncio.ensure_future(proc.wait())
    t0 = time.monotonic() if started_at is None else started_at
    deadline = None if timeout_s is None else t0 + timeout_s
    try:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = every_s if on_every is not None else None
            wait_s = left if step is None else (step if left is None else min(step, left))
            done, _ = await asyncio.wait({waiter}, timeout=wait_s)
            if done:
                return waiter.result(), False
            if deadline is not None and time.monotonic() >= deadline:
                return None, True
            if on_every is not None:
                await on_every()
    finally:
        if not waiter.done():
            waiter.cancel()
