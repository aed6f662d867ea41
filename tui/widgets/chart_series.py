"""The data each plotted chart of tui/widgets/charts.py draws, as plain functions tested without an app: output
throughput per arm with its interval, speedup series per arm with their bands and the markers of the arm's
statement, per-position acceptance, and the /metrics windows as time points; plus the legend and note lines the
charts put under their plots, wrapped between words at the width. The data shapes are the engine's: build_matrix's
matrix (tui/core/results/stats.py), report.json's "load" (tui/core/results/load.py) and a bench's "timeseries"."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from tui.core.results import stats
from tui.core.results.drift import classify
from tui.core.results.statement import marker_positions


def _n(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _ci(v: Any) -> tuple[float | None, float | None]:
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return _n(v[0]), _n(v[1])
    return None, None


def _arm_list(matrix: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in (matrix or {}).get("arms") or [] if isinstance(a, dict) and a.get("id")]


def _short_label(arm: dict[str, Any], arms: list[dict[str, Any]]) -> str:
    return stats.arm_label(arm, arms).replace("k = ", "k=")


def _marker(i: int, k: Any) -> str:
    """A series' marker: its k as a digit (1..9), else a letter; readable without colour."""
    if isinstance(k, int) and not isinstance(k, bool) and 0 < k < 10:
        return str(k)
    return "abcdefghij"[i % 10]


# -- the data each chart draws (plain functions: tested without an app) ---------------------------------------
@dataclass
class ThroughputPoint:
    arm: str
    label: str
    mean: float
    lo: float | None
    hi: float | None
    recommended: bool = False


def throughput_points(matrix: dict[str, Any] | None, key: str | None) -> list[ThroughputPoint]:
    """One point per arm with a mean output throughput at `key` (a workload or bench key), in the matrix's
    arm order (baseline first)."""
    if not matrix or not key:
        return []
    arms = _arm_list(matrix)
    rec = ((matrix.get("recommendation") or {}).get(key) or {})
    out = []
    for a in arms:
        ot = (((matrix.get("cells") or {}).get(a["id"]) or {}).get(key) or {}).get("output_throughput") or {}
        m = _n(ot.get("mean"))
        if m is None:
            continue
        lo, hi = _ci(ot.get("ci95"))
        out.append(ThroughputPoint(a["id"], _short_label(a, arms), m, lo, hi,
                                   rec.get("arm") == a["id"] and not rec.get("stop_tuning")))
    return out


@dataclass
class SpeedupSeries:
    arm: str
    label: str
    marker: str
    levels: list[int]
    ratio: list[float]
    lo: list[float | None]
    hi: list[float | None]
    # where the arm stops paying or pays again: (level, fractional on the log2 axis between the two levels around
    # the change, kind "stops_paying" / "starts_paying", words) — the arm's statement's changes, as in the report
    marks: list[tuple[float, str, str]] = field(default_factory=list)
    range_text: str = ""


def speedup_series(load: dict[str, Any] | None, workload: str | None) -> list[SpeedupSeries]:
    """Per speculative arm of `workload` in report.json's "load": the speedup ratio and its 95 % interval at
    each level that has a ratio, the places it stops paying or pays again and the verdict's words — both from
    the arm's statement (tui/core/results/statement.py), the same the report's chart and texts use."""
    if not load or not workload:
        return []
    wl = ((load.get("workloads") or {}).get(workload) or {})
    out = []
    for arm_id, arm in (wl.get("arms") or {}).items():
        if not isinstance(arm, dict):
            continue
        rows = []
        for lv, lev in (arm.get("levels") or {}).items():
            sp = (lev or {}).get("speedup") if isinstance(lev, dict) else None
            r = _n((sp or {}).get("ratio"))
            if not str(lv).isdigit() or r is None:
                continue
            lo, hi = _ci(sp.get("ci95"))
            if sp.get("unbounded"):
                lo = hi = None
            rows.append((int(lv), r, lo, hi))
        if not rows:
            continue
        rows.sort()
        st = arm.get("statement") if isinstance(arm.get("statement"), dict) else {}
        label = str(arm.get("label") or arm_id).replace("k = ", "k=")
        out.append(SpeedupSeries(arm_id, label, _marker(len(out), arm.get("k")), [r[0] for r in rows],
                                 [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
                                 marker_positions(st), str(st.get("range_text") or arm.get("range_text") or "")))
    return out


def position_series(matrix: dict[str, Any] | None, key: str | None) -> list[tuple[str, str, list[float]]]:
    """(arm label, marker, marginal per-position acceptance in percent) of every speculative arm at `key`."""
    if not matrix or not key:
        return []
    arms = _arm_list(matrix)
    out = []
    for a in arms:
        if a.get("kind") == "baseline":
            continue
        c = ((matrix.get("cells") or {}).get(a["id"]) or {}).get(key) or {}
        marg = [_n(x) for x in ((c.get("per_position") or {}).get("marginal") or [])]
        if marg and all(x is not None for x in marg):
            out.append((_short_label(a, arms), _marker(len(out), a.get("num_speculative_tokens")),
                        [float(x) for x in marg]))  # type: ignore[arg-type]
    return out


@dataclass
class TimePoint:
    t: float
    tokens_per_s: float
    acceptance: float | None
    partial: bool = False  # the bench started or ended inside this window (or it is short): not on the lines


def points_from_windows(timeseries: Any) -> list[TimePoint]:
    """A bench's /metrics windows (facts["timeseries"]: counter deltas per window) as points: tokens/s over the
    window and vLLM's acceptance (accepted / draft tokens, percent; None where no draft ran). Idle windows
    (before the bench's first token or after its last) are dropped and partial ones marked, by the drift test's
    own rule (tui/core/results/drift.py classify)."""
    out = []
    for w, kind in classify(timeseries):
        if kind == "idle":
            continue
        t0, t1, gen = _n(w.get("t0")), _n(w.get("t1")), _n(w.get("generation_tokens"))
        span = (t1 - t0) if t0 is not None and t1 is not None else None
        tps = gen / span if gen is not None and span and span > 0 else 0.0
        d, a = _n(w.get("draft_tokens")), _n(w.get("accepted_tokens"))
        out.append(TimePoint(t1 or 0.0, tps, 100.0 * a / d if d and a is not None else None, kind == "partial"))
    return out


SMOOTH_WINDOWS = 3  # the smoothed lines: a centred rolling mean over this many windows (as the report's chart)


def wrap_words(text: str, width: int) -> list[str]:
    """Lines of at most `width` columns, broken between words (a word longer than the line is the only thing
    ever cut): legends and notes are never cut mid-word."""
    return textwrap.wrap(text, width=max(1, width), break_on_hyphens=False) or [""]


def legend(items: list[tuple[str, str]], width: int) -> Text:
    """Legend items ("1 k=1", "· 95 % band", ...) two spaces apart, wrapped onto as many lines as `width` needs,
    between items and, for an item wider than the line, between its words (never mid-word); an empty style draws
    the item dim."""
    t = Text(no_wrap=True, overflow="ellipsis")
    col = 0
    for text, style in items:
        parts = wrap_words(text, width) if len(text) > width else [text]
        for j, part in enumerate(parts):
            if col and (j > 0 or col + 2 + len(part) > width):
                t.append("\n")
                col = 0
            elif col:
                t.append("  ")
                col += 2
            t.append(part, style=style or "dim")
            col += len(part)
    return t


def notes(t: Text, lines: list[str], width: int) -> Text:
    """`lines` appended to `t` under the legend, dim, each wrapped between words at `width`."""
    for line in lines:
        for part in wrap_words(line, width):
            t.append("\n")
            t.append(part, style="dim")
    return t
