"""Acceptance over time (issue 17): the /metrics windows a bench sampled (~1 s counter deltas, the repeat facts'
`timeseries.windows`) as a series for the charts, and the drift test — is the acceptance of the last third of
a bench different from the first third's beyond the window-to-window noise?

Pure functions, standard library only (Welch's t from tui/core/results/intervals.py; tests/test_drift.py checks
it against scipy.stats.ttest_ind). Units: acceptance in PERCENT (0-100), time in seconds since the bench began.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Sequence

from tui.core.results.intervals import welch_difference

MIN_WINDOWS = 3  # per third, pooled over repeats: fewer and there is no drift test


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _windows(obj: Any) -> list[dict[str, Any]]:
    """A repeat's windows: a list of window dicts, or a `timeseries` dict holding them under "windows"."""
    if isinstance(obj, dict):
        obj = obj.get("windows")
    return [w for w in (obj or []) if isinstance(w, dict)]


def _t0(w: dict[str, Any]) -> float:
    t = _num(w.get("t0"))
    return t if t is not None else math.inf


def window_acceptance(w: dict[str, Any]) -> float | None:
    """A window's acceptance rate in percent (accepted / draft tokens · 100); None without draft tokens."""
    d, a = _num(w.get("draft_tokens")), _num(w.get("accepted_tokens"))
    if d is None or a is None or d <= 0:
        return None
    return a / d * 100.0


PARTIAL_SHARE = 0.5  # a window shorter than this share of the sampling interval holds too little to stand alone
WINDOW_KINDS = ("full", "partial", "idle")


def classify(windows: Any, interval_s: Any = None) -> list[tuple[dict[str, Any], str]]:
    """One repeat's windows in time order, each with its kind:

    - "idle": before the bench's first generated token or after its last (the bench was not running yet, or
      any more: a zero there is not a measurement of the server under load);
    - "partial": the first and the last window with tokens (the bench started or ended inside them, so they
      hold less than a window's work), and any window shorter than PARTIAL_SHARE of the sampling interval
      (`interval_s`, the timeseries' own; else the median window length);
    - "full": every other window, the ones a chart line, a smoothed line and the drift test use.
    Windows without a positive length are left out."""
    if isinstance(windows, dict) and interval_s is None:
        interval_s = windows.get("interval_s")
    wins = []
    for w in sorted(_windows(windows), key=_t0):
        t0, t1 = _num(w.get("t0")), _num(w.get("t1"))
        if t0 is not None and t1 is not None and t1 > t0:
            wins.append(w)
    if not wins:
        return []
    spans = sorted(_num(w["t1"]) - _num(w["t0"]) for w in wins)  # type: ignore[operator]
    step = _num(interval_s) or spans[len(spans) // 2]
    active = [i for i, w in enumerate(wins) if (_num(w.get("generation_tokens")) or 0.0) > 0]
    out = []
    for i, w in enumerate(wins):
        if not active or i < active[0] or i > active[-1]:
            kind = "idle"
        elif i in (active[0], active[-1]) or (_num(w["t1"]) - _num(w["t0"])) < PARTIAL_SHARE * step:  # type: ignore[operator]
            kind = "partial"
        else:
            kind = "full"
        out.append((w, kind))
    return out


def series(windows: Any) -> list[tuple[float, float, float | None]]:
    """One repeat's windows as chart points, ordered by time: (t, tokens_per_s, acceptance_pct | None), t the
    end of the window (t1, seconds since the bench began), tokens_per_s its generation_tokens over its length,
    acceptance None where the window drafted nothing (the baseline, an idle window). Windows without a
    positive length are left out."""
    out = []
    for w in sorted(_windows(windows), key=_t0):
        t0, t1 = _num(w.get("t0")), _num(w.get("t1"))
        if t0 is None or t1 is None or t1 <= t0:
            continue
        toks = _num(w.get("generation_tokens")) or 0.0
        out.append((round(t1, 4), round(toks / (t1 - t0), 4), window_acceptance(w)))
    return out


def rolling_mean(values: Sequence[float | None], n: int = 3) -> list[float | None]:
    """The centred rolling mean over n values (n odd; the ends use the values there are); None stays None and
    is left out of its neighbours' means."""
    half = max(n, 1) // 2
    out: list[float | None] = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        near = [x for x in values[max(0, i - half): i + half + 1] if x is not None]
        out.append(statistics.fmean(near))
    return out


def welch(first: Sequence[float], last: Sequence[float], conf: float = 0.95) -> dict[str, Any]:
    """Welch's two-sample t on mean(last) − mean(first): {diff, ci95, p_value, t, df} (intervals.welch_difference).
    Both samples need ≥ 2 values. No spread in either: the difference is exact (ci95 [diff, diff], p 0 when it
    is non-zero, else 1)."""
    out = welch_difference(last, first, conf)
    if out is None:
        raise ValueError(f"Welch's t needs two values in each sample, got {len(first)} and {len(last)}")
    return out


def _thirds(windows: Any) -> tuple[list[float], list[float]]:
    rates = [r for r in (window_acceptance(w) for w, kind in classify(windows) if kind == "full") if r is not None]
    third = len(rates) // 3
    if third == 0:
        return [], []
    return rates[:third], rates[-third:]


def drift(windows_per_repeat: Iterable[Any] | None) -> dict[str, Any] | None:
    """Acceptance drift over a bench, pooled over its repeats (the contract's DRIFT).

    Per repeat the windows are ordered by time and only the full ones (classify: not idle, not partial) with
    draft tokens are kept; the first third and
    the last third of them (⌊n/3⌋ each) give one acceptance rate per window (percent). The first thirds of all
    repeats are pooled against the last thirds, and Welch's t gives the difference last − first with its 95 %
    interval and two-sided p-value; drift is True when the interval excludes 0. Each repeat contributes its
    own thirds, so a repeat's warm-up is compared with its own end, not with another repeat's.

    Returns {first, last, diff, ci95, p_value, drift, windows, first_windows, last_windows, repeats, text};
    None when either pooled third has fewer than 3 windows (too short a bench to tell, or no speculation)."""
    first: list[float] = []
    last: list[float] = []
    used = 0
    for wins in windows_per_repeat or []:
        f, la = _thirds(wins)
        if f:
            used += 1
            first += f
            last += la
    if len(first) < MIN_WINDOWS or len(last) < MIN_WINDOWS:
        return None
    w = welch(first, last)
    mf, ml = statistics.fmean(first), statistics.fmean(last)
    lo, hi = w["ci95"]
    moved = lo > 0 or hi < 0
    if moved:
        verb = "fell" if w["diff"] < 0 else "rose"
        text = f"acceptance {verb} from {mf:.1f} % to {ml:.1f} % (first vs last third)"
    else:
        text = (f"acceptance steady: {mf:.1f} % in the first third, {ml:.1f} % in the last (the difference is "
                "within the window-to-window noise)")
    return {"first": round(mf, 4), "last": round(ml, 4), "diff": round(w["diff"], 4),
            "ci95": [round(lo, 4), round(hi, 4)], "p_value": w["p_value"], "drift": moved,
            "windows": len(first) + len(last), "first_windows": len(first), "last_windows": len(last),
            "repeats": used, "text": text}
