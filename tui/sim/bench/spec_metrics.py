"""The bench's /metrics reader (fetch_spec_decode_metrics: line based, as vLLM's bench does it) and its
Speculative Decoding block."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class _SpecSnapshot:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: dict[int, int] = field(default_factory=dict)


async def fetch_spec_metrics(client: httpx.AsyncClient, base_url: str,
                             vt: tuple[int, ...]) -> _SpecSnapshot | None:
    try:
        resp = await client.get(base_url + "/metrics")
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    snap, found = _SpecSnapshot(), False
    for line in resp.text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or not line.startswith("vllm:spec_decode"):
            continue
        found = True
        name = line.split(None, 1)[0].split("{")[0]
        if vt >= (0, 22) and not name.endswith("_total"):
            continue
        try:
            value = int(float(line.split()[-1]))
        except ValueError:
            continue
        if "num_drafts" in name:
            snap.drafts += value
        elif "num_draft_tokens" in name:
            snap.draft_tokens += value
        elif "num_accepted_tokens_per_pos" in name:
            marker = 'position="'
            i = line.find(marker)
            if i >= 0:
                j = line.find('"', i + len(marker))
                try:
                    pos = int(line[i + len(marker):j])
                except ValueError:
                    continue
                snap.per_pos[pos] = snap.per_pos.get(pos, 0) + value
        elif "num_accepted_tokens" in name:
            snap.accepted += value
    return snap if found else None


# This stand-in for `vllm bench serve` computes its Speculative Decoding block on its own, the way vLLM's
# line-based parser does, on purpose: the engine cross-checks it against tui.core.bench.metrics (prometheus_client's
# parser), so sharing that code would make the agreement check test nothing.
def spec_stats(before: _SpecSnapshot | None, after: _SpecSnapshot | None) -> dict[str, Any] | None:
    if before is None or after is None:
        return None
    d_drafts = after.drafts - before.drafts
    d_tokens = after.draft_tokens - before.draft_tokens
    d_acc = after.accepted - before.accepted
    if d_tokens <= 0:
        return None
    per_pos: list[float] = []
    if d_drafts > 0:
        per_pos = [(after.per_pos[k] - before.per_pos.get(k, 0)) / d_drafts for k in sorted(after.per_pos)]
    return {
        "acceptance_rate": d_acc / d_tokens * 100,
        "acceptance_length": 1 + d_acc / d_drafts if d_drafts > 0 else 0.0,
        "num_drafts": d_drafts,
        "draft_tokens": d_tokens,
        "accepted_tokens": d_acc,
        "per_position_acceptance_rates": per_pos,
    }
