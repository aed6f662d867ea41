"""The report's pictures (issue 17, item 6): what each chart shows, as pure data (chart_data), and report.md's
Charts section. tui/core/results/figures_draw.py draws them with matplotlib into PNG and SVG files under the run
directory's `figures/`; tui/core/results/report_html.py inlines the SVGs into one self-contained `report.html`.
Four charts, each drawn only where the report has its data:

  throughput_vs_k           output tokens/s against k with the 95 % interval per workload (the lowest load
                            level of a sweep), from report["matrix"]
  speedup_vs_concurrency    speedup over the baseline against concurrency per k with its 95 % band, the 1.0x
                            line and each arm's crossover, from report["load"]
  per_position_acceptance   per-position (marginal) acceptance bars per speculative arm, from the matrix's
                            cells (per_position.marginal) or a two-arm run's runs.eagle3
  acceptance_over_time      acceptance (%) and output tokens/s per /metrics window per arm, benches laid end
                            to end, drift shaded where report["load"] flags it, from report["timeseries"]

Every number drawn is read from the report dict (which holds the servers' and benches' own numbers); nothing
here computes a statistic but the display smoothing of the acceptance-over-time lines (a rolling mean over
SMOOTH_WINDOWS windows), and the windows a bench was idle or partly running in are told apart by
tui/core/results/drift.py classify, the drift test's own rule. Charts read in grayscale: each series has its own
marker, line style or hatch.
"""

from __future__ import annotations

import math
from typing import Any

from tui.core.plan.arms import split_key
from tui.core.results.drift import classify, rolling_mean
from tui.core.results.stats import arm_label

FIGURES_DIR = "figures"



class ChartError(RuntimeError):
    """The charts cannot be drawn (matplotlib missing or broken); the message is one paragraph with the fix."""


# -- small readers --------------------------------------------------------------------------------------------

def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _ci(v: Any) -> tuple[float, float] | None:
    if isinstance(v, (list, tuple)) and len(v) == 2:
        lo, hi = _num(v[0]), _num(v[1])
        if lo is not None and hi is not None:
            return lo, hi
    return None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _level(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _fmt(v: Any, nd: int = 1, suffix: str = "") -> str:
    n = _num(v)
    return "n/a" if n is None else f"{n:.{nd}f}{suffix}"


def _fmt_ci(ci: Any, nd: int = 1) -> str:
    c = _ci(ci)
    return f"[{c[0]:.{nd}f}, {c[1]:.{nd}f}]" if c else "—"


def _arm_labels(report: dict[str, Any]) -> dict[str, str]:
    """How the charts name each arm: the matrix's labels ("baseline", "k = 2"), the load section's, or, for a
    two-arm run, "baseline" and "EAGLE3"."""
    m = _dict(report.get("matrix"))
    arms = [a for a in _list(m.get("arms")) if isinstance(a, dict) and a.get("id")]
    out = {a["id"]: arm_label(a, arms) for a in arms}
    for w in _dict(_dict(report.get("load")).get("workloads")).values():
        for aid, a in _dict(_dict(w).get("arms")).items():
            if isinstance(a, dict) and a.get("label"):
                out.setdefault(aid, str(a["label"]))
    out.setdefault("baseline", "baseline")
    k = _dict(report.get("settings")).get("num_speculative_tokens")
    out.setdefault("eagle3", f"EAGLE3 k = {k}" if isinstance(k, int) else "EAGLE3")
    return out


def _lowest_level_keys(keys: list[str]) -> list[str]:
    """Per workload, its key at the lowest concurrency (the key itself for a run without levels)."""
    best: dict[str, tuple[int, str]] = {}
    for key in keys:
        wl, n = split_key(key)
        rank = -1 if n is None else n
        if wl not in best or rank < best[wl][0]:
            best[wl] = (rank, key)
    return [k for _, k in best.values()]


def _key_label(key: str) -> str:
    wl, n = split_key(key)
    return wl if n is None else f"{wl}, concurrency {n}"


# -- what each chart shows (pure data, no matplotlib) ---------------------------------------------------------

def chart_data(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The charts this report has data for, in order, each {"name", "title", "caption", "alt", ...its data}.
    Pure: the figures and report.html draw from exactly this."""
    report = _dict(report)
    labels = _arm_labels(report)
    out = [c for c in (_throughput_vs_k(report, labels), _speedup_vs_concurrency(report),
                       _per_position(report, labels), _over_time(report, labels)) if c]
    return out


def _throughput_vs_k(report: dict[str, Any], labels: dict[str, str]) -> dict[str, Any] | None:
    m = _dict(report.get("matrix"))
    arms = [a for a in _list(m.get("arms")) if isinstance(a, dict) and a.get("id")]
    cells = _dict(m.get("cells"))
    keys = [k for k in _list(m.get("workloads")) if isinstance(k, str)]
    drafts = list(dict.fromkeys(a.get("draft_name") or a.get("draft") for a in arms if a.get("kind") != "baseline"))
    series = []
    for key in _lowest_level_keys(keys):
        for draft in drafts:
            pts = []
            for a in arms:
                spec = a.get("kind") != "baseline"
                if spec and (a.get("draft_name") or a.get("draft")) != draft:
                    continue
                k = 0 if not spec else a.get("num_speculative_tokens")
                if not isinstance(k, int) or isinstance(k, bool):
                    continue
                ot = _dict(_dict(_dict(cells.get(a["id"])).get(key)).get("output_throughput"))
                mean = _num(ot.get("mean"))
                if mean is not None:
                    pts.append({"k": k, "arm": a["id"], "mean": mean, "ci95": _ci(ot.get("ci95"))})
            pts.sort(key=lambda p: p["k"])
            if any(p["k"] > 0 for p in pts):
                name = _key_label(key) + (f" ({draft})" if len(drafts) > 1 and draft else "")
                series.append({"label": name, "key": key, "points": pts})
    if not series:
        return None
    levels = {split_key(s["key"])[1] for s in series}
    at = f" at concurrency {levels.pop()}" if len(levels) == 1 and None not in levels else ""
    best = max((p for s in series for p in s["points"]), key=lambda p: p["mean"])
    best_name = "the baseline" if best["k"] == 0 else f"k = {best['k']}"
    return {"name": "throughput_vs_k", "title": f"Output throughput vs k{at}",
            "caption": "Mean output tokens/s over the repeats with its 95 % interval (error bars); k = 0 is the "
                       "baseline.",
            "alt": f"Output tokens/s against k{at} for {', '.join(s['label'] for s in series)}; the highest mean "
                   f"is {best_name} at {best['mean']:.1f} tokens/s.",
            "series": series}


def _speedup_vs_concurrency(report: dict[str, Any]) -> dict[str, Any] | None:
    load = _dict(report.get("load"))
    panels = []
    for wl, w in _dict(load.get("workloads")).items():
        arms = []
        for aid, a in _dict(_dict(w).get("arms")).items():
            a = _dict(a)
            if a.get("k") is None:
                continue
            pts = []
            for lv, rec in _dict(a.get("levels")).items():
                n, sp = _level(lv), _dict(_dict(rec).get("speedup"))
                ratio = _num(sp.get("ratio"))
                if n is not None and ratio is not None:
                    pts.append({"level": n, "ratio": ratio, "ci95": None if sp.get("unbounded") else _ci(sp.get("ci95")),
                                "verdict": _dict(rec).get("verdict")})
            pts.sort(key=lambda p: p["level"])
            if pts:
                st = _dict(a.get("statement"))
                arms.append({"arm": aid, "label": str(a.get("label") or aid), "points": pts,
                             "changes": [c for c in _list(st.get("changes")) if isinstance(c, dict)],
                             "text": st.get("text") or a.get("range_text"), "range_text": a.get("range_text")})
        if arms:
            panels.append({"workload": wl, "arms": arms})
    if not panels:
        return None
    texts = [(f"{p['workload']}: " if len(panels) > 1 else "") + a["text"] for p in panels for a in p["arms"]
             if a.get("text")]
    return {"name": "speedup_vs_concurrency", "title": "Speedup over the baseline vs concurrency",
            "caption": "Output-throughput speedup per k with its 95 % interval (Fieller; shaded band, none where "
                       "unbounded); the solid horizontal line is 1.0x (no gain); a vertical line marks each place an "
                       "arm stops paying or pays again (between the two levels on either side)."
                       + (" " + "; ".join(texts) + "." if texts else ""),
            "alt": "Speedup against concurrency for " + "; ".join(
                f"{p['workload']}: " + ", ".join(f"{a['label']} from {a['points'][0]['ratio']:.2f}x at "
                                                 f"{a['points'][0]['level']} to {a['points'][-1]['ratio']:.2f}x at "
                                                 f"{a['points'][-1]['level']}" for a in p["arms"])
                for p in panels) + ".",
            "levels": sorted({n for lv in _list(load.get("levels")) if (n := _level(lv)) is not None}
                             | {pt["level"] for p in panels for a in p["arms"] for pt in a["points"]}),
            "panels": panels}


def _per_position(report: dict[str, Any], labels: dict[str, str]) -> dict[str, Any] | None:
    m = _dict(report.get("matrix"))
    panels = []
    if m:
        arms = [a for a in _list(m.get("arms")) if isinstance(a, dict) and a.get("id") and a.get("kind") != "baseline"]
        cells = _dict(m.get("cells"))
        for key in _lowest_level_keys([k for k in _list(m.get("workloads")) if isinstance(k, str)]):
            bars = []
            for a in arms:
                marg = _list(_dict(_dict(_dict(cells.get(a["id"])).get(key)).get("per_position")).get("marginal"))
                vals = [_num(v) for v in marg]
                if vals and all(v is not None for v in vals):
                    bars.append({"arm": a["id"], "label": labels.get(a["id"], a["id"]), "values": vals})
            if bars:
                panels.append({"title": _key_label(key), "bars": bars})
    else:
        e = _dict(_dict(report.get("runs")).get("eagle3"))
        vals = [_num(v) for v in _list(e.get("per_position_acceptance"))]
        if vals and all(v is not None for v in vals):
            panels.append({"title": "EAGLE3", "bars": [{"arm": "eagle3", "label": labels["eagle3"], "values": vals}]})
    if not panels:
        return None
    first = panels[0]["bars"][0]
    return {"name": "per_position_acceptance", "title": "Per-position acceptance",
            "caption": "Share of draft steps whose i-th drafted token was accepted (marginal, %), pooled over the "
                       "repeats from the servers' /metrics counters.",
            "alt": "Per-position acceptance bars; " + f"{first['label']}: "
                   + ", ".join(f"position {i + 1} {v:.1f} %" for i, v in enumerate(first["values"])) + ".",
            "panels": panels}


SMOOTH_WINDOWS = 3  # the smoothed line: a centred rolling mean over this many full windows


def _segment_points(windows: Any, offset: float) -> tuple[list[dict[str, Any]], float, int]:
    """One bench's windows as chart points (drift.classify: idle windows dropped, partial ones kept and marked),
    the bench laid from `offset` on (its first kept window starts there); (points, end, idle windows dropped)."""
    kinds = classify(windows)
    kept = [(w, k) for w, k in kinds if k != "idle"]
    if not kept:
        return [], offset, len(kinds)
    start = _num(kept[0][0].get("t0")) or 0.0
    pts, end = [], offset
    for w, kind in kept:
        t0, t1 = _num(w.get("t0")), _num(w.get("t1"))
        gen, dtok, acc = _num(w.get("generation_tokens")), _num(w.get("draft_tokens")), _num(w.get("accepted_tokens"))
        pts.append({"t": offset + (t0 + t1) / 2 - start, "partial": kind == "partial",  # type: ignore[operator]
                    "tokens_per_s": gen / (t1 - t0) if gen is not None else None,  # type: ignore[operator]
                    "acceptance": acc / dtok * 100.0 if acc is not None and dtok else None})
        end = max(end, offset + t1 - start)  # type: ignore[operator]
    full = [p for p in pts if not p["partial"]]
    for q, a, t in zip(full, rolling_mean([p["acceptance"] for p in full], SMOOTH_WINDOWS),
                       rolling_mean([p["tokens_per_s"] for p in full], SMOOTH_WINDOWS)):
        q["acceptance_smooth"], q["tokens_per_s_smooth"] = a, t
    return pts, end, len(kinds) - len(kept)


def _over_time(report: dict[str, Any], labels: dict[str, str]) -> dict[str, Any] | None:
    ts = _dict(report.get("timeseries"))
    m = _dict(report.get("matrix"))
    order = [a.get("id") for a in _list(m.get("arms")) if isinstance(a, dict)]
    key_order = [k for k in _list(m.get("workloads")) if isinstance(k, str)]
    load_wls = _dict(_dict(report.get("load")).get("workloads"))
    panels = []
    drift_texts = []
    idle = partial = 0
    for aid in sorted(ts, key=lambda a: order.index(a) if a in order else len(order)):
        per_key = _dict(ts.get(aid))
        keys = sorted(per_key, key=lambda k: key_order.index(k) if k in key_order else len(key_order))
        segments, offset = [], 0.0
        for key in keys:
            wl, n = split_key(key)
            drift = _dict(_dict(_dict(_dict(load_wls.get(wl)).get("drift")).get(aid)).get(str(n)))
            for rec in _list(per_key.get(key)):
                pts, end, dropped = _segment_points(_dict(rec).get("windows"), offset)
                idle += dropped
                partial += sum(1 for p in pts if p["partial"])
                if pts:
                    segments.append({"key": key, "repeat": _dict(rec).get("repeat"), "t0": offset, "t1": end,
                                     "points": pts, "drift": drift if drift.get("drift") else None})
                    offset = end
        if segments:
            panels.append({"arm": aid, "label": labels.get(aid, aid), "segments": segments})
            for s in segments:
                if s["drift"] and s["drift"].get("text"):
                    t = f"{labels.get(aid, aid)} at {_key_label(s['key'])}: {s['drift']['text']}"
                    if t not in drift_texts:
                        drift_texts.append(t)
    if not panels:
        return None
    return {"name": "acceptance_over_time", "title": "Acceptance and output throughput over time",
            "caption": "Per /metrics window (about 1 s): acceptance % (dots, left axis) with its rolling mean over "
                       f"{SMOOTH_WINDOWS} windows (solid line), and output tokens/s (dashed line, the same rolling "
                       "mean, right axis); each arm's benches laid end to end in the order they ran, a vertical line "
                       f"between benches. Partial windows ({partial}: the first and last of each bench, where it "
                       "started or ended inside the window, or shorter than half the interval) are hollow and left "
                       f"out of the lines; idle windows before or after a bench ({idle}) are dropped. Hatched: drift "
                       "flagged (first vs last third)."
                       + (" Drift: " + "; ".join(drift_texts) + "." if drift_texts else " No drift flagged."),
            "alt": "Acceptance and output tokens/s per window over time for "
                   + ", ".join(p["label"] for p in panels) + "; "
                   + ("drift flagged: " + "; ".join(drift_texts) if drift_texts else "no drift flagged") + ".",
            "smooth_windows": SMOOTH_WINDOWS, "partial_windows": partial, "idle_windows": idle,
            "panels": panels}


def figures_markdown(figures: list[dict[str, Any]]) -> str:
    """report.md's "Charts" section: each PNG inline with a link to its SVG, and a link to report.html."""
    if not figures:
        return ""
    lines = ["", "## Charts", ""]
    for f in figures:
        lines += [f"![{_md(f['title'])}]({f['png']})", "",
                  f"{_md(f.get('caption') or f['title'])} ([SVG]({f['svg']}))", ""]
    lines.append("All charts with the key numbers in one offline page: [report.html](report.html).")
    return "\n".join(lines) + "\n"


def _md(s: str) -> str:
    return str(s).replace("[", "\\[").replace("]", "\\]")
