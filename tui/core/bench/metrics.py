"""Scraping vLLM's Prometheus `/metrics` and the spec-decode before/after delta.

This is the method `vllm bench serve` (0.14+) uses for its "Speculative Decoding" block, done by
the TUI itself so that acceptance stats are available with every vLLM version (0.11 prints none):

    before = parse_spec_counters(await scrape(url))
    ... run the benchmark ...
    after = parse_spec_counters(await scrape(url))
    stats = spec_delta(before, after)      # None when no draft tokens were produced

Parsing rules (vLLM 0.22+ semantics): only samples whose name ends in `_total` count (the
`_created` timestamps are ignored), values are summed over every label set (several engines or
served model names), and the per-position counter is keyed by its `position` label.

Units: `SpecStats.acceptance_rate` and `SpecStats.per_position` are PERCENT (0-100). vLLM's JSON
stores the per-position rates as fractions; `SpecStats.to_vllm_json()` converts back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

SPEC_PREFIX = "vllm:spec_decode"
DEFAULT_TIMEOUT = 5.0


class MetricsError(ValueError):
    """The /metrics text could not be parsed as Prometheus exposition."""


async def scrape(base_url: str, client: httpx.AsyncClient | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> str:
    """GET `{base_url}/metrics` and return the body. Raises httpx errors (connection, non-2xx).
    Without `client`, a one-off client is used (proxy environment variables are ignored)."""
    url = base_url.rstrip("/") + "/metrics"
    if client is None:
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as own:
            resp = await own.get(url)
    else:
        resp = await client.get(url, timeout=timeout)
    resp.raise_for_status()
    return resp.text


def _families(text: str):
    try:
        return list(text_string_to_metric_families(text))
    except Exception as exc:  # the parser raises ValueError / IndexError etc. on bad input
        raise MetricsError(f"cannot parse /metrics text: {exc}") from exc


@dataclass
class SpecCounters:
    """Cumulative vllm:spec_decode_* counter values (summed over label sets) at one instant."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    per_position: dict[int, int] = field(default_factory=dict)


def parse_spec_counters(text: str) -> SpecCounters | None:
    """The spec-decode counters in a /metrics body, or None when the server exposes none
    (baseline server, or `--disable-log-stats`)."""
    found = False
    out = SpecCounters()
    for fam in _families(text):
        for s in fam.samples:
            name = s.name
            if not name.startswith(SPEC_PREFIX):
                continue
            found = True
            if not name.endswith("_total"):
                continue
            value = int(float(s.value))
            # Same dispatch order as vLLM's bench client (substring match).
            if "num_drafts" in name:
                out.num_drafts += value
            elif "num_draft_tokens" in name:
                out.num_draft_tokens += value
            elif "num_accepted_tokens_per_pos" in name:
                try:
                    pos = int(s.labels.get("position", ""))
                except ValueError:
                    continue
                out.per_position[pos] = out.per_position.get(pos, 0) + value
            elif "num_accepted_tokens" in name:
                out.num_accepted_tokens += value
    return out if found else None


@dataclass
class SpecStats:
    """Spec-decode statistics over a window. Rates are PERCENT (0-100)."""

    acceptance_rate: float          # accepted / draft tokens * 100
    acceptance_length: float        # 1 + accepted / drafts
    num_drafts: int
    draft_tokens: int
    accepted_tokens: int
    per_position: list[float] = field(default_factory=list)  # percent, index = draft position

    def to_vllm_json(self) -> dict[str, Any]:
        """The six `spec_decode_*` keys as `vllm bench serve --save-result` writes them
        (per-position as fractions)."""
        return {
            "spec_decode_acceptance_rate": self.acceptance_rate,
            "spec_decode_acceptance_length": self.acceptance_length,
            "spec_decode_num_drafts": self.num_drafts,
            "spec_decode_draft_tokens": self.draft_tokens,
            "spec_decode_accepted_tokens": self.accepted_tokens,
            "spec_decode_per_position_acceptance_rates": [p / 100.0 for p in self.per_position],
        }


def spec_delta(before: SpecCounters | None, after: SpecCounters | None) -> SpecStats | None:
    """vLLM's delta method. None unless both snapshots exist and the draft-token count grew."""
    if before is None or after is None:
        return None
    d_drafts = after.num_drafts - before.num_drafts
    d_draft_tokens = after.num_draft_tokens - before.num_draft_tokens
    d_accepted = after.num_accepted_tokens - before.num_accepted_tokens
    if d_draft_tokens <= 0:
        return None
    per_pos: list[float] = []
    if d_drafts > 0:
        for pos in sorted(after.per_position):
            d = after.per_position[pos] - before.per_position.get(pos, 0)
            per_pos.append(d / d_drafts * 100.0)
    return SpecStats(
        acceptance_rate=d_accepted / d_draft_tokens * 100.0,
        acceptance_length=(1.0 + d_accepted / d_drafts) if d_drafts > 0 else 0.0,
        num_drafts=d_drafts,
        draft_tokens=d_draft_tokens,
        accepted_tokens=d_accepted,
        per_position=per_pos,
    )


@dataclass
class ServerCounters:
    """Simple request/token counters (summed over label sets; `_total` samples only) and the two load gauges.
    `running` / `waiting` are None when the server exports no such gauge."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    request_success: int = 0
    request_success_by_reason: dict[str, int] = field(default_factory=dict)
    running: int | None = None
    waiting: int | None = None

    @property
    def in_flight(self) -> int:
        """Requests the server holds now (running + waiting; 0 when it exports neither gauge)."""
        return (self.running or 0) + (self.waiting or 0)


_SIMPLE = {
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:request_success_total": "request_success",
}
_GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting"}


def parse_server_counters(text: str) -> ServerCounters:
    """`vllm:prompt_tokens_total`, `vllm:generation_tokens_total`, `vllm:request_success_total`
    (plus the latter split by `finished_reason`; every reason counts, `abort` included), and the gauges
    `vllm:num_requests_running` / `vllm:num_requests_waiting`. Missing counters count as 0."""
    out = ServerCounters()
    for fam in _families(text):
        for s in fam.samples:
            gauge = _GAUGES.get(s.name)
            if gauge is not None:
                setattr(out, gauge, (getattr(out, gauge) or 0) + int(float(s.value)))
                continue
            attr = _SIMPLE.get(s.name)
            if attr is None:
                continue
            value = int(float(s.value))
            setattr(out, attr, getattr(out, attr) + value)
            if attr == "request_success":
                reason = s.labels.get("finished_reason", "")
                out.request_success_by_reason[reason] = out.request_success_by_reason.get(reason, 0) + value
    return out


def isolation(before: ServerCounters | None, after: ServerCounters | None, *, completed: int, failed: int,
              output_tokens: int | None, max_tokens: int | None, extra_requests: int = 0) -> dict[str, Any]:
    """Was the server ours alone during a bench? Its own counters' deltas against what the bench says it sent.

    completed / failed / output_tokens: the bench's result (output_tokens: its total generated tokens);
    extra_requests: requests the bench sends outside its count (the initial test prompt of a ready check);
    max_tokens: the most tokens one request of the bench may generate (the allowance for those and for failed
    requests, which the server may have generated for before they failed; None: no token check when there are any).

    Returns {"checked": False, "why": ...} when the counters cannot tell (no scrape, or counters that did not move
    while the bench completed requests: --disable-log-stats), else {"checked": True, "server_requests",
    "bench_requests", "foreign_requests", "server_tokens", "bench_tokens", "foreign_tokens", "in_flight",
    "contaminated", "text"}: contaminated when the server finished more requests than the bench sent (every
    finished_reason counts), generated more tokens than the bench received (plus the allowance), or still holds
    requests after the bench's own all ended (in_flight: running + waiting)."""
    if before is None or after is None:
        return {"checked": False, "why": "the server's /metrics could not be read before and after the bench"}
    d_req = after.request_success - before.request_success
    d_gen = after.generation_tokens - before.generation_tokens
    if d_req < 0 or d_gen < 0:
        return {"checked": False, "why": "the server's counters went backwards (it restarted during the bench)"}
    if d_req == 0 and d_gen == 0 and completed > 0:
        return {"checked": False, "why": "the server's request counters did not move (stats logging off: "
                                         "--disable-log-stats)"}
    sent = completed + failed + extra_requests
    foreign_req = max(0, d_req - sent)
    allowance = (failed + extra_requests) * max_tokens if max_tokens is not None else None
    foreign_tok = 0
    if output_tokens is not None and (allowance is not None or failed + extra_requests == 0):
        foreign_tok = max(0, d_gen - output_tokens - (allowance or 0))
    in_flight = after.in_flight
    bits = []
    if foreign_req:
        bits.append(f"the server finished {d_req} requests, the bench sent {sent}")
    if foreign_tok:
        bits.append(f"it generated {d_gen} tokens, the bench received {output_tokens}"
                    + (f" (+{allowance} allowed for its failed and test requests)" if allowance else ""))
    if in_flight:
        bits.append(f"{in_flight} request{'s' if in_flight != 1 else ''} still on the server after the bench ended")
    return {"checked": True, "server_requests": d_req, "bench_requests": sent, "foreign_requests": foreign_req,
            "server_tokens": d_gen, "bench_tokens": output_tokens, "foreign_tokens": foreign_tok,
            "in_flight": in_flight, "contaminated": bool(bits), "text": "; ".join(bits)}


class TokenRate:
    """Live generation rate (tokens/s) from cumulative (time, tokens) samples, e.g. the delta of
    `vllm:generation_tokens_total` polled every few seconds during a benchmark.

    The rate counts from the first generated token, never from when polling began (the real bench client
    takes ~30 s to start sending), and over a recent window only, so it follows the current speed:

        r = TokenRate(window_s=15)
        r.add(t, tokens)  -> tokens/s, or None while nothing has been generated yet

    Rules (pure arithmetic, no clock of its own):
    - samples before the first growth are idle; the last idle sample anchors the first estimate (the first
      token came after it), so a rate exists from the first sample that shows tokens;
    - from the second sample with tokens on, the idle anchor is dropped: the rate is
      (newest - oldest) / (t_newest - t_oldest) over the samples with tokens in the last `window_s`
      (the oldest one kept may sit just outside the window, so two samples always span it);
    - a counter that goes backwards (server restart) starts over, with that sample as the idle anchor;
    - samples with a time not after the newest are ignored.
    """

    def __init__(self, window_s: float = 15.0):
        if window_s <= 0:
            raise ValueError("window_s must be > 0")
        self.window_s = float(window_s)
        self._anchor: tuple[float, int] | None = None  # last idle sample before the first token
        self._samples: list[tuple[float, int]] = []     # samples since the first token, oldest first
        self.rate: float | None = None

    def reset(self) -> None:
        self._anchor = None
        self._samples.clear()
        self.rate = None

    @property
    def started(self) -> bool:
        """True once a sample has shown generated tokens."""
        return bool(self._samples)

    def add(self, t: float, tokens: int) -> float | None:
        last = self._samples[-1] if self._samples else self._anchor
        if last is not None:
            if t <= last[0]:
                return self.rate
            if tokens < last[1]:
                self.reset()  # the counter restarted: this sample is the new idle anchor
                self._anchor = (t, tokens)
                return None
        if not self._samples:
            base = self._anchor[1] if self._anchor is not None else 0
            if tokens <= base:
                self._anchor = (t, tokens)
                self.rate = None
                return None
            self._samples.append((t, tokens))
            if self._anchor is None:
                self.rate = None  # no idle sample before it: the start time is unknown
                return None
            t0, n0 = self._anchor
            self.rate = (tokens - n0) / (t - t0)
            return self.rate
        self._samples.append((t, tokens))
        self._anchor = None
        # keep the newest sample at or before the window start, and everything after it
        start = t - self.window_s
        while len(self._samples) > 2 and self._samples[1][0] <= start:
            del self._samples[0]
        t0, n0 = self._samples[0]
        self.rate = (tokens - n0) / (t - t0)
        return self.rate

    def eta(self, total: int) -> float | None:
        """Seconds left to reach `total` tokens at the current rate, or None."""
        if not self._samples or not self.rate or self.rate <= 0:
            return None
        return max(0.0, (total - self._samples[-1][1]) / self.rate)
