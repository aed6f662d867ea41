"""The simulated server's batched engine clock: every sequence in flight shares one engine step.

One loop (an asyncio task, started with the first request) runs vLLM's scheduler in miniature:

- admission: waiting requests enter the batch in arrival order while fewer than --max-num-seqs run; the rest
  wait for a slot (their queue time, and so their TTFT, grows with the load);
- one step: the sequences already decoding verify k drafts each, k being num_speculative_tokens or, with a
  num_speculative_tokens_per_batch_size schedule, the dense lookup at the number of requests in the step (0: a
  plain step); the step costs model.step_ms(tpot, k, decoding, batch_cost), plus, for every request admitted
  into it, its prefill (model.ttft_ms: chunked prefill rides in the same step), all times the host speed
  (the mean factor of the running requests, HostNoise);
- at the step's end each sequence receives what it emitted (model.Decoder: its first token after the
  prefill, then 1 + accepted drafts), and finished or abandoned sequences leave the batch.

The loop keeps an absolute clock (due times in loop.time()), so a late wake-up shortens the next sleep.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from ..model import VERIFY_COST_PER_DRAFT, Decoder, Step, step_ms


@dataclass(eq=False)
class Seq:
    """One request in the engine: its decoder, its prefill cost and the queue its steps arrive on."""

    decoder: Decoder
    prefill_ms: float
    speed: float = 1.0
    out: asyncio.Queue = field(default_factory=asyncio.Queue)
    started: bool = False  # prefill done
    cancelled: bool = False
    admitted_at: float | None = None  # loop.time() when it entered the batch


@dataclass
class StepOut:
    """What one step gave one sequence: the model step and whether it was the sequence's last."""

    step: Step
    last: bool


class BatchEngine:
    def __init__(self, *, tpot_ms: float, batch_cost: float, k: int, max_num_seqs: int, scale: float,
                 draft_cost: float = VERIFY_COST_PER_DRAFT, knee: int = 1, lookup: list[int] | None = None,
                 acceptance_shift: Callable[[], float] | None = None):
        self.tpot_ms = float(tpot_ms)
        self.batch_cost = float(batch_cost)
        self.draft_cost = float(draft_cost)
        self.knee = int(knee)
        self.k = int(k)
        self.max_num_seqs = max(int(max_num_seqs), 1)
        self.scale = float(scale)
        self.lookup = lookup
        self.shift = acceptance_shift or (lambda: 0.0)
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self.steps = 0

    def k_for(self, batch: int) -> int:
        """k of a step with `batch` requests (vLLM's dense schedule lookup, else the fixed k)."""
        if self.k <= 0:
            return 0
        if self.lookup is None or batch <= 0:
            return self.k
        return self.lookup[min(batch, len(self.lookup) - 1)]

    def step_cost_ms(self, decoding: int, k: int, prefills: list[float]) -> float:
        """Simulated ms of one step over `decoding` sequences with k drafts plus the admitted prefills."""
        cost = step_ms(self.tpot_ms, k, decoding, self.batch_cost, self.draft_cost, self.knee) if decoding else 0.0
        return cost + sum(prefills)

    def submit(self, seq: Seq) -> None:
        self.waiting.append(seq)
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wake is not None
        due = loop.time()
        while True:
            self.running = [s for s in self.running if not s.cancelled]
            if not self.running and not any(not s.cancelled for s in self.waiting):
                self.waiting.clear()
                self._wake.clear()
                await self._wake.wait()
                due = loop.time()
                continue
            new: list[Seq] = []
            while self.waiting and len(self.running) < self.max_num_seqs:
                s = self.waiting.popleft()
                if s.cancelled:
                    continue
                s.admitted_at = loop.time()
                self.running.append(s)
                new.append(s)
            decoding = [s for s in self.running if s.started]
            k = self.k_for(len(decoding) + len(new))
            speed = sum(s.speed for s in self.running) / len(self.running)
            due = max(due, loop.time() - 1.0)  # never run more than a second of steps back to back
            due += self.step_cost_ms(len(decoding), k, [s.prefill_ms for s in new]) * speed * self.scale / 1000.0
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.steps += 1
            shift = self.shift()
            for s in decoding:
                if s.cancelled:
                    continue
                st = s.decoder.step(k, shift=shift)
                s.out.put_nowait(StepOut(st, s.decoder.done))
            for s in new:
                if s.cancelled:
                    continue
                s.started = True
                s.out.put_nowait(StepOut(s.decoder.first(), s.decoder.done))
            self.running = [s for s in self.running if not s.cancelled and not s.decoder.done]
