"""Speculative acceptance over repeats (conditional rates, the predicted acceptance length, pooling) and the
lossless check per prompt. Acceptance rates are PERCENT (0-100), as in the bench facts."""

from __future__ import annotations

import math
import re
import statistics
from typing import Any, Sequence

from tui.core.results.intervals import _numbers, _r


def conditional_rates(marginals: Sequence[Any] | None) -> list[float | None]:
    """Per-position conditional acceptance from the marginals (percent): c_0 = a_0, c_i = a_i / a_{i−1} · 100.

    For chain methods a_i is P(positions 0..i all accepted), so c_i is P(position i accepted | position i−1
    was). None where a_{i−1} is 0 (or a marginal is missing)."""
    ms = list(marginals or [])
    out: list[float | None] = []
    for i, a in enumerate(ms):
        if not isinstance(a, (int, float)) or isinstance(a, bool):
            out.append(None)
            continue
        if i == 0:
            out.append(_r(float(a), 4))
            continue
        prev = ms[i - 1]
        if not isinstance(prev, (int, float)) or isinstance(prev, bool) or prev == 0:
            out.append(None)
        else:
            out.append(_r(float(a) / float(prev) * 100.0, 4))
    return out


def predicted_al(marginals: Sequence[Any] | None, k: int | None = None) -> dict[str, float] | None:
    """Acceptance length predicted for every k' ≤ k from the marginals (percent) measured at k:
    AL(k') = 1 + Σ_{i<k'} a_i / 100, as {"1": 1 + a_0, "2": 1 + a_0 + a_1, ...}. For chain methods the
    acceptance at position i does not depend on positions after it, so the marginals measured with k drafts
    predict a run with k' < k. k None: every measured position. None without marginals."""
    ms = _numbers(marginals)
    if not ms or len(ms) != len(list(marginals or [])):
        return None
    upto = len(ms) if k is None else min(int(k), len(ms))
    if upto < 1:
        return None
    out: dict[str, float] = {}
    acc = 1.0
    for i in range(upto):
        acc += ms[i] / 100.0
        out[str(i + 1)] = round(acc, 4)
    return out


def al_check(measured_al: Any, marginals: Sequence[Any] | None, tol: float = 0.02) -> dict[str, Any] | None:
    """Consistency check AL = 1 + Σ marginals: {measured, from_marginals, consistent} with consistent when
    |measured − from_marginals| ≤ tol · from_marginals (relative). None without both inputs."""
    ms = _numbers(marginals)
    if not isinstance(measured_al, (int, float)) or isinstance(measured_al, bool) or not ms:
        return None
    from_m = 1.0 + sum(ms) / 100.0
    return {"measured": _r(float(measured_al), 4), "from_marginals": round(from_m, 4),
            "consistent": abs(float(measured_al) - from_m) <= tol * from_m}


def _count(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def pooled_acceptance(repeats: Sequence[dict[str, Any] | None] | None) -> dict[str, Any] | None:
    """Acceptance pooled over repeats: {acceptance_rate (%), acceptance_length, per_position_acceptance (%),
    method: "tokens" | "mean", repeats: n used}.

    Token-weighted from the counters when every repeat with acceptance carries num_drafts, draft_tokens and
    accepted_tokens: rate = Σ accepted / Σ draft_tokens · 100, length = 1 + Σ accepted / Σ num_drafts,
    per position p_i = Σ_r p_{r,i} · num_drafts_r / Σ_r num_drafts_r (each repeat's p is accepted_i / drafts).
    Otherwise ("mean") the plain mean of the repeats' own figures; per position over the positions every
    repeat has. Repeats without acceptance are left out; None when none has any."""
    reps = [r for r in (repeats or []) if isinstance(r, dict)
            and (isinstance(r.get("acceptance_rate"), (int, float)) or _count(r.get("draft_tokens")))]
    if not reps:
        return None
    counted = all(_count(r.get("num_drafts")) and _count(r.get("draft_tokens")) is not None
                  and _count(r.get("accepted_tokens")) is not None for r in reps)
    pp_lists = [r.get("per_position_acceptance") for r in reps]
    have_pp = all(isinstance(p, list) and p and len(_numbers(p)) == len(p) for p in pp_lists)
    npos = min(len(p) for p in pp_lists) if have_pp else 0
    if counted and sum(float(r["draft_tokens"]) for r in reps) > 0:
        drafts = sum(float(r["num_drafts"]) for r in reps)
        dtok = sum(float(r["draft_tokens"]) for r in reps)
        acc = sum(float(r["accepted_tokens"]) for r in reps)
        per_pos = None
        if have_pp:
            per_pos = [round(sum(float(r["per_position_acceptance"][i]) * float(r["num_drafts"]) for r in reps)
                             / drafts, 4) for i in range(npos)]
        return {"acceptance_rate": round(acc / dtok * 100.0, 4), "acceptance_length": round(1.0 + acc / drafts, 4),
                "per_position_acceptance": per_pos, "method": "tokens", "repeats": len(reps)}
    rates = _numbers(r.get("acceptance_rate") for r in reps)
    lengths = _numbers(r.get("acceptance_length") for r in reps)
    per_pos = None
    if have_pp:
        per_pos = [round(statistics.fmean(float(p[i]) for p in pp_lists), 4) for i in range(npos)]
    return {"acceptance_rate": round(statistics.fmean(rates), 4) if rates else None,
            "acceptance_length": round(statistics.fmean(lengths), 4) if lengths else None,
            "per_position_acceptance": per_pos, "method": "mean", "repeats": len(reps)}


_PIECES = re.compile(r"\S+|\s+")


def first_divergence(a: str, b: str) -> int | None:
    """Index of the first whitespace-separated word where a and b differ (None when a == b). A difference in
    the whitespace after word i counts as a divergence at word i + 1; a text that is a prefix of the other
    diverges at the shorter one's word count."""
    if a == b:
        return None
    pa, pb = _PIECES.findall(a), _PIECES.findall(b)
    words = 0
    for x, y in zip(pa, pb):
        if x != y:
            return words
        if not x.isspace():
            words += 1
    return words


def lossless(baseline_texts: Sequence[Any] | None, arm_texts: Sequence[Any] | None) -> dict[str, Any] | None:
    """Per-prompt lossless check of an arm against the baseline (same prompts, greedy decoding):
    {prompts, identical, identical_share, first_divergence: [word index | None per prompt]}.

    Prompts are paired by position; a pair where either text is missing (not a string: the request failed)
    is left out, so prompts counts the compared pairs. None when nothing could be compared."""
    pairs = [(b, a) for b, a in zip(baseline_texts or [], arm_texts or []) if isinstance(b, str) and isinstance(a, str)]
    if not pairs:
        return None
    div = [first_divergence(b, a) for b, a in pairs]
    same = sum(1 for d in div if d is None)
    return {"prompts": len(pairs), "identical": same, "identical_share": round(same / len(pairs), 4),
            "first_divergence": div}


def per_request_summary(specs: Sequence[dict[str, Any] | None] | None) -> dict[str, Any] | None:
    """Per-request spec-decode metrics (vLLM 0.29+, speculative servers): {n, mean_acceptance_length,
    median_acceptance_length} over the requests that report a mean_acceptance_length. None when none does."""
    vals = _numbers(s.get("mean_acceptance_length") for s in (specs or []) if isinstance(s, dict))
    if not vals:
        return None
    return {"n": len(vals), "mean_acceptance_length": round(statistics.fmean(vals), 4),
            "median_acceptance_length": round(statistics.median(vals), 4)}
