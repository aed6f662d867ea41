"""The report's pictures (issue 17, item 6): PNG and SVG files under the run directory's `figures/`, and one
self-contained `report.html` that inlines the SVGs (no script, no CDN, no font or file from anywhere else).

Drawn with matplotlib (Agg canvas; SVG text as paths, so no font is needed to show it; a fixed salt and no date
in the files, so the same report draws the same bytes). Four charts, each drawn only where the report has its
data:

  throughput_vs_k           output tokens/s against k with the 95 % interval per workload (the lowest load
                            level of a sweep), from report["matrix"]
  speedup_vs_concurrency    speedup over the baseline against concurrency per k with its 95 % band, the 1.0x
                            line and each arm's crossover, from report["load"]
  per_position_acceptance   per-position (marginal) acceptance bars per speculative arm, from the matrix's
                            cells (per_position.marginal) or a two-arm run's runs.eagle3
  acceptance_over_time      acceptance (%) and output tokens/s per /metrics window per arm, benches laid end
                            to end, drift shaded where report["load"] flags it, from report["timeseries"]

Every number drawn is read from the report dict (which holds the servers' and benches' own numbers); nothing
here computes a statistic. Charts read in grayscale: each series has its own marker, line style or hatch.
"""

from __future__ import annotations

import html
import io
import math
import re
from pathlib import Path
from typing import Any

from tui.core.plan.arms import split_key
from tui.core.results.stats import arm_label
from tui.core.store.rundir import atomic_write_bytes

FIGURES_DIR = "figures"

# Okabe-Ito (colour-blind safe); the markers, line styles and hatches carry the distinction in grayscale.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7F7F7F")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (3, 1, 1, 1)), (0, (1, 2)))
HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "++")
BASELINE_COLOR = "#000000"

STYLE: dict[str, Any] = {
    "svg.hashsalt": "specdec-tui",      # ids in the SVG from a fixed salt, not a random one
    "svg.fonttype": "path",             # text drawn as paths: the SVG needs no font
    "font.family": ["DejaVu Sans"],     # ships with matplotlib
    "font.size": 9.0, "axes.titlesize": 10.0, "axes.labelsize": 9.0, "legend.fontsize": 8.0,
    "xtick.labelsize": 8.0, "ytick.labelsize": 8.0,
    "axes.grid": True, "grid.color": "#d0d0d0", "grid.linewidth": 0.5, "axes.axisbelow": True,
    "axes.spines.top": False, "lines.linewidth": 1.6, "lines.markersize": 6.0, "errorbar.capsize": 3.0,
    "hatch.linewidth": 0.8, "legend.frameon": False,
    "figure.facecolor": "white", "savefig.facecolor": "white", "axes.facecolor": "white",
    "savefig.dpi": 110, "savefig.bbox": "tight", "savefig.pad_inches": 0.1,
    "path.simplify": True,
}
PNG_META = {"Software": None}
SVG_META = {"Date": None, "Creator": None, "Format": None, "Type": None}


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
                arms.append({"arm": aid, "label": str(a.get("label") or aid), "points": pts,
                             "crossover": _dict(a.get("crossover")), "range_text": a.get("range_text")})
        if arms:
            panels.append({"workload": wl, "arms": arms})
    if not panels:
        return None
    texts = [f"{p['workload']}, {a['label']}: {a['range_text']}" for p in panels for a in p["arms"]
             if a.get("range_text")]
    return {"name": "speedup_vs_concurrency", "title": "Speedup over the baseline vs concurrency",
            "caption": "Output-throughput speedup per k with its 95 % interval (Fieller; shaded band, none where "
                       "unbounded); the solid horizontal line is 1.0x (no gain); a vertical line marks where an "
                       "arm stops paying (between its last paying level and the next)."
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


def _over_time(report: dict[str, Any], labels: dict[str, str]) -> dict[str, Any] | None:
    ts = _dict(report.get("timeseries"))
    m = _dict(report.get("matrix"))
    order = [a.get("id") for a in _list(m.get("arms")) if isinstance(a, dict)]
    key_order = [k for k in _list(m.get("workloads")) if isinstance(k, str)]
    load_wls = _dict(_dict(report.get("load")).get("workloads"))
    panels = []
    drift_texts = []
    for aid in sorted(ts, key=lambda a: order.index(a) if a in order else len(order)):
        per_key = _dict(ts.get(aid))
        keys = sorted(per_key, key=lambda k: key_order.index(k) if k in key_order else len(key_order))
        segments, offset = [], 0.0
        for key in keys:
            wl, n = split_key(key)
            drift = _dict(_dict(_dict(_dict(load_wls.get(wl)).get("drift")).get(aid)).get(str(n)))
            for rec in _list(per_key.get(key)):
                pts = []
                end = offset
                for w in _list(_dict(rec).get("windows")):
                    w = _dict(w)
                    t0, t1 = _num(w.get("t0")), _num(w.get("t1"))
                    if t0 is None or t1 is None or t1 <= t0:
                        continue
                    gen, dtok, acc = _num(w.get("generation_tokens")), _num(w.get("draft_tokens")), _num(w.get("accepted_tokens"))
                    pts.append({"t": offset + (t0 + t1) / 2,
                                "tokens_per_s": gen / (t1 - t0) if gen is not None else None,
                                "acceptance": acc / dtok * 100.0 if acc is not None and dtok else None})
                    end = max(end, offset + t1)
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
            "caption": "Per /metrics window (about 1 s): acceptance % (solid, left axis) and output tokens/s "
                       "(dashed, right axis); each arm's benches laid end to end in the order they ran, a "
                       "vertical line between benches. Hatched: drift flagged (first vs last third)."
                       + (" Drift: " + "; ".join(drift_texts) + "." if drift_texts else " No drift flagged."),
            "alt": "Acceptance and output tokens/s per window over time for "
                   + ", ".join(p["label"] for p in panels) + "; "
                   + ("drift flagged: " + "; ".join(drift_texts) if drift_texts else "no drift flagged") + ".",
            "panels": panels}


# -- drawing ----------------------------------------------------------------------------------------------------

def _matplotlib() -> Any:
    """matplotlib, imported here and not at module level: report.py (and so the engine) imports this module at
    start-up, and importing matplotlib costs about 0.3 s that only a finished run's report needs."""
    try:
        import matplotlib  # start-up: lazy on purpose (see the docstring)
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # start-up: the Agg canvas, no GUI backend
        from matplotlib.figure import Figure  # start-up: no pyplot, so no global figure state
    except ImportError as e:  # pragma: no cover - matplotlib is a declared dependency
        raise ChartError(f"The report's charts need matplotlib, which could not be imported ({e}). Install the "
                         "project's dependencies again (pip install -e .) or matplotlib itself "
                         "(pip install 'matplotlib>=3.8'); report.json and report.md do not need it.") from e
    return matplotlib, Figure, FigureCanvasAgg


def _style(i: int) -> dict[str, Any]:
    return {"color": COLORS[i % len(COLORS)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def _draw_throughput_vs_k(fig: Any, c: dict[str, Any]) -> None:
    ax = fig.add_subplot(1, 1, 1)
    ks: set[int] = set()
    for i, s in enumerate(c["series"]):
        st = _style(i)
        xs = [p["k"] for p in s["points"]]
        ys = [p["mean"] for p in s["points"]]
        lo = [p["mean"] - p["ci95"][0] if p["ci95"] else 0.0 for p in s["points"]]
        hi = [p["ci95"][1] - p["mean"] if p["ci95"] else 0.0 for p in s["points"]]
        ax.errorbar(xs, ys, yerr=[lo, hi], label=s["label"], color=st["color"], marker=st["marker"],
                    linestyle=st["linestyle"], markerfacecolor="white", markeredgewidth=1.4, elinewidth=1.0)
        ks.update(xs)
    ax.set_xticks(sorted(ks), [("baseline" if k == 0 else f"k = {k}") for k in sorted(ks)])
    ax.set_xlabel("num_speculative_tokens (k)")
    ax.set_ylabel("output tokens/s")
    ax.set_title(c["title"])
    ax.legend(loc="best")


def _draw_speedup(fig: Any, c: dict[str, Any]) -> None:
    panels = c["panels"]
    levels = c["levels"]
    arm_ids = list(dict.fromkeys(a["arm"] for p in panels for a in p["arms"]))
    for pi, p in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, pi + 1)
        ax.set_xscale("log", base=2)
        ax.axhline(1.0, color=BASELINE_COLOR, linewidth=1.2, linestyle="-", label="baseline (1.0x)", zorder=1)
        stops: dict[float, list[str]] = {}
        for a in p["arms"]:
            st = _style(arm_ids.index(a["arm"]))
            xs = [pt["level"] for pt in a["points"]]
            ys = [pt["ratio"] for pt in a["points"]]
            ax.plot(xs, ys, label=a["label"], color=st["color"], marker=st["marker"], linestyle=st["linestyle"],
                    markerfacecolor="white", markeredgewidth=1.4, zorder=3)
            run: list[dict[str, Any]] = []
            for pt in a["points"] + [None]:  # bands over consecutive bounded levels
                if pt is not None and pt["ci95"]:
                    run.append(pt)
                    continue
                if run:
                    rx = [q["level"] for q in run]
                    ax.fill_between(rx, [q["ci95"][0] for q in run], [q["ci95"][1] for q in run],
                                    color=st["color"], alpha=0.14, linewidth=0, zorder=2)
                    for b in (0, 1):
                        ax.plot(rx, [q["ci95"][b] for q in run], color=st["color"], linestyle=st["linestyle"],
                                linewidth=0.6, zorder=2)
                    run = []
            last = _level(a["crossover"].get("last_pays"))
            after = [n for n in levels if last is not None and n > last]
            if last is not None and after:  # stops paying between its last paying level and the next
                x = math.sqrt(last * after[0])
                ax.axvline(x, color=st["color"], linestyle=st["linestyle"], linewidth=1.0, zorder=2)
                stops.setdefault(x, []).append(a["label"])
        for x, names in stops.items():  # one label per line position ("k = 2, k = 3 stop paying")
            ax.annotate(f"{', '.join(names)} stop{'s' if len(names) == 1 else ''} paying", xy=(x, 1.0),
                        xycoords=("data", "axes fraction"), xytext=(3, -3), textcoords="offset points",
                        rotation=90, va="top", ha="left", fontsize=7.5, color="#000000")
        ax.set_xticks(levels, [str(n) for n in levels])
        ax.minorticks_off()
        ax.set_ylabel("speedup (x)")
        ax.set_title(f"{c['title']} — {p['workload']}" if len(panels) > 1 else f"{c['title']} ({p['workload']})")
        ax.legend(loc="best")
        if pi == len(panels) - 1:
            ax.set_xlabel("concurrent requests (--max-concurrency)")


def _draw_per_position(fig: Any, c: dict[str, Any]) -> None:
    panels = c["panels"]
    arm_ids = list(dict.fromkeys(b["arm"] for p in panels for b in p["bars"]))
    for pi, p in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), pi + 1)
        npos = max(len(b["values"]) for b in p["bars"])
        width = 0.8 / len(p["bars"])
        for bi, b in enumerate(p["bars"]):
            j = arm_ids.index(b["arm"])
            xs = [i + 1 - 0.4 + width * (bi + 0.5) for i in range(len(b["values"]))]
            bars = ax.bar(xs, b["values"], width=width * 0.95, label=b["label"], color=COLORS[j % len(COLORS)],
                          alpha=0.85, hatch=HATCHES[j % len(HATCHES)], edgecolor="#000000", linewidth=0.6)
            ax.bar_label(bars, labels=[f"{v:.0f}" for v in b["values"]], fontsize=7, padding=1)
        ax.set_xticks(range(1, npos + 1), [str(i) for i in range(1, npos + 1)])
        ax.set_ylim(0, 105)
        ax.set_xlabel("draft position")
        if pi == 0:
            ax.set_ylabel("accepted (%)")
        ax.set_title(c["title"] if len(panels) == 1 else f"{c['title']} — {p['title']}")
        ax.grid(axis="x", visible=False)
        ax.legend(loc="upper right")


def _draw_over_time(fig: Any, c: dict[str, Any]) -> None:
    panels = c["panels"]
    for pi, p in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, pi + 1)
        segs = p["segments"]
        has_acc = any(pt["acceptance"] is not None for s in segs for pt in s["points"])
        tax = ax.twinx() if has_acc else ax
        prev_key = None
        for s in segs:
            if s is not segs[0]:
                ax.axvline(s["t0"], color="#000000" if s["key"] != prev_key else "#9a9a9a",
                           linewidth=0.8 if s["key"] != prev_key else 0.5,
                           linestyle="-" if s["key"] != prev_key else ":", zorder=1)
            if s["key"] != prev_key:
                _, n = split_key(s["key"])
                ax.annotate(s["key"] if n is None or len({split_key(x['key'])[0] for x in segs}) > 1 else f"c{n}",
                            xy=(s["t0"], 1.0), xycoords=("data", "axes fraction"), xytext=(2, 2),
                            textcoords="offset points", fontsize=7, va="bottom", ha="left")
            if s["drift"]:
                ax.axvspan(s["t0"], s["t1"], facecolor="#f2f2f2", hatch="//", edgecolor="#c0c0c0", linewidth=0,
                           zorder=0)
                if s["key"] != prev_key:
                    ax.annotate("drift", xy=(s["t0"], 0.0), xycoords=("data", "axes fraction"), xytext=(3, 3),
                                textcoords="offset points", fontsize=7.5, fontweight="bold", va="bottom")
            prev_key = s["key"]
        # one line per segment (a gap between benches is not a measurement), one legend entry per quantity
        for si, s in enumerate(segs):
            ts = [pt["t"] for pt in s["points"]]
            tps = [pt["tokens_per_s"] if pt["tokens_per_s"] is not None else math.nan for pt in s["points"]]
            tax.plot(ts, tps, color="#555555", linestyle="--", linewidth=1.0,
                     label="output tokens/s" if si == 0 else None, zorder=2)
            if has_acc:
                acc = [pt["acceptance"] if pt["acceptance"] is not None else math.nan for pt in s["points"]]
                ax.plot(ts, acc, color=COLORS[0], linestyle="-", marker="o", markersize=2.5, linewidth=1.4,
                        label="acceptance %" if si == 0 else None, zorder=3)
        if has_acc:
            ax.set_ylabel("acceptance (%)")
            ax.set_ylim(0, 105)
            tax.set_ylabel("output tokens/s")
            tax.grid(False)
            tax.set_ylim(bottom=0)
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = tax.get_legend_handles_labels()
            ax.legend(h1 + h2, l1 + l2, loc="lower left", fontsize=7)
        else:
            ax.set_ylabel("output tokens/s")
            ax.set_ylim(bottom=0)
            ax.legend(loc="lower left", fontsize=7)
        ax.set_xlim(segs[0]["t0"], segs[-1]["t1"])
        ax.set_title(p["label"], loc="left", pad=12)
        if pi == len(panels) - 1:
            ax.set_xlabel("bench time (s), the arm's benches end to end")


DRAW = {"throughput_vs_k": (_draw_throughput_vs_k, lambda c: (7.0, 4.2)),
        "speedup_vs_concurrency": (_draw_speedup, lambda c: (7.0, 3.8 * len(c["panels"]) + 0.4)),
        "per_position_acceptance": (_draw_per_position, lambda c: (max(5.0, 4.2 * len(c["panels"])), 3.8)),
        "acceptance_over_time": (_draw_over_time, lambda c: (9.0, 2.5 * len(c["panels"]) + 0.6))}


def render_figures(report: dict[str, Any], out_dir: Path) -> list[dict[str, Any]]:
    """Draw every chart the report has data for into `out_dir/figures/NAME.png` and `NAME.svg` (each written
    atomically) and return [{"name", "title", "caption", "alt", "png", "svg"}], the paths relative to out_dir
    (the run directory). The same report draws byte-identical files. Raises ChartError when matplotlib is
    missing."""
    out_dir = Path(out_dir)
    specs = chart_data(report)
    if not specs:
        return []
    mpl, Figure, FigureCanvasAgg = _matplotlib()
    out = []
    with mpl.rc_context():  # nothing leaks into the process's rcParams
        mpl.rcdefaults()    # a user's matplotlibrc does not change the report
        mpl.rcParams.update(STYLE)
        for c in specs:
            draw, size = DRAW[c["name"]]
            fig = Figure(figsize=size(c), layout="constrained")
            FigureCanvasAgg(fig)  # the Agg canvas, whatever backend the process chose
            draw(fig, c)
            files = {}
            for fmt, meta in (("png", PNG_META), ("svg", SVG_META)):
                buf = io.BytesIO()
                fig.savefig(buf, format=fmt, metadata=meta)
                rel = f"{FIGURES_DIR}/{c['name']}.{fmt}"
                atomic_write_bytes(out_dir / rel, buf.getvalue())
                files[fmt] = rel
            out.append({"name": c["name"], "title": c["title"], "caption": c["caption"], "alt": c["alt"],
                        "png": files["png"], "svg": files["svg"]})
    return out


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


# -- report.html ------------------------------------------------------------------------------------------------

CSS = """
body { font-family: "DejaVu Sans", Verdana, Arial, sans-serif; color: #111; background: #fff; margin: 1.5em auto;
       max-width: 1100px; padding: 0 1em; line-height: 1.4; }
h1 { font-size: 1.45em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.0em; margin-bottom: 0.3em; }
.verdict { font-weight: bold; padding: 0.5em 0.7em; border-left: 5px solid #555; background: #f3f3f3; }
.verdict.ok { border-left-color: #009E73; } .verdict.bad { border-left-color: #D55E00; }
.meta { color: #444; font-size: 0.9em; }
figure { margin: 1.2em 0; padding: 0.6em; border: 1px solid #ddd; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { font-size: 0.88em; color: #333; margin-top: 0.4em; }
figcaption b { color: #111; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f0f0f0; } td.l, th.l { text-align: left; }
code { font-size: 0.95em; }
"""


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _inline_svg(svg: str, name: str, alt: str) -> str:
    """The SVG file as an element of the page: no XML prolog or doctype, no namespace URLs (the HTML parser
    needs none), every id prefixed with the chart's name (several charts in one document), sized by CSS."""
    start = svg.find("<svg")
    if start < 0:
        raise ChartError(f"The chart file for {name} holds no <svg> element; draw the charts again "
                         "(render_figures) before writing report.html.")
    s = svg[start:]
    s = re.sub(r'\s+xmlns(?::\w+)?="[^"]*"', "", s)
    s = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{name}-{m.group(1)}"', s)
    s = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{name}-{m.group(1)}"', s)
    s = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{name}-{m.group(1)})", s)
    s = re.sub(r'^<svg([^>]*?)\s+width="[^"]*"\s+height="[^"]*"', r"<svg\1", s, count=1)
    s = s.replace("<svg", f'<svg role="img" aria-label="{_e(alt)}"', 1)
    return s.rstrip() + "\n"


def _table(head: list[str], rows: list[list[Any]], left: int = 1, text_last: bool = False) -> str:
    """A compact table: the first `left` columns (and the last, a sentence, with text_last) left-aligned."""
    def cells(r: list[Any], tag: str) -> str:
        cls = ' class="l"'
        return "".join(f"<{tag}{cls if i < left or (text_last and i == len(r) - 1) else ''}>{_e(v)}</{tag}>"
                       for i, v in enumerate(r))
    return ("<table><thead><tr>" + cells(head, "th") + "</tr></thead><tbody>"
            + "".join("<tr>" + cells(r, "td") + "</tr>" for r in rows) + "</tbody></table>\n")


def _load_html(load: dict[str, Any], labels: dict[str, str]) -> str:
    out = ["<h2>Load: where speculation pays</h2>\n"]
    for wl, w in _dict(load.get("workloads")).items():
        w = _dict(w)
        out.append(f"<h3>Workload {_e(wl)}</h3>\n")
        best = _dict(w.get("best"))
        arms = _dict(w.get("arms"))
        levels = sorted({n for a in arms.values() for lv in _dict(_dict(a).get("levels")) if (n := _level(lv))})
        rows = []
        for n in levels:
            b = _dict(best.get(str(n)))
            row: list[Any] = [n]
            for aid, a in arms.items():
                rec = _dict(_dict(_dict(a).get("levels")).get(str(n)))
                sp = _dict(rec.get("speedup"))
                tp = _dict(rec.get("throughput"))
                if _dict(a).get("k") is None:
                    row.append(_fmt(tp.get("mean")))
                else:
                    row.append(f"{_fmt(sp.get('ratio'), 2, 'x')} {'(unbounded)' if sp.get('unbounded') else _fmt_ci(sp.get('ci95'), 2)}"
                               + (f" {rec['verdict'].replace('_', ' ')}" if isinstance(rec.get("verdict"), str) else ""))
            row.append(b.get("text") or (f"k = {b.get('k')}" if b.get("k") is not None else "—"))
            rows.append(row)
        if rows:
            head = ["concurrency"] + [("baseline tok/s" if _dict(a).get("k") is None
                                       else f"{_dict(a).get('label') or labels.get(aid, aid)} speedup [95 %]")
                                      for aid, a in arms.items()] + ["best"]
            out.append(_table(head, rows, left=0, text_last=True))
        facts = [(_dict(a).get("label") or aid, _dict(a).get("range_text")) for aid, a in arms.items()
                 if _dict(a).get("range_text")]
        items = [f"<li>{_e(lbl)}: {_e(t)}</li>" for lbl, t in facts]
        for key, name in (("schedule_text", "vLLM schedule"), ("slo_text", "SLO")):
            if w.get(key):
                items.append(f"<li>{name}: {_e(w[key])}</li>")
        if w.get("schedule"):
            items.append(f"<li><code>num_speculative_tokens_per_batch_size = {_e(w['schedule'])}</code></li>")
        why = _dict(_dict(w.get("model")).get("why"))
        for lv, t in why.items():
            items.append(f"<li>why at concurrency {_e(lv)}: {_e(t)}</li>")
        if items:
            out.append("<ul>" + "".join(items) + "</ul>\n")
    sv = _dict(load.get("schedule_verification"))
    if sv.get("text"):
        out.append(f"<p>Schedule verification ({_e(sv.get('status'))}): {_e(sv['text'])}</p>\n")
    if load.get("coverage"):
        out.append(f'<p class="meta">{_e(load["coverage"])}</p>\n')
    return "".join(out)


def _matrix_html(m: dict[str, Any], labels: dict[str, str]) -> str:
    arms = [a for a in _list(m.get("arms")) if isinstance(a, dict) and a.get("id")]
    cells = _dict(m.get("cells"))
    rows = []
    for key in [k for k in _list(m.get("workloads")) if isinstance(k, str)]:
        for a in arms:
            c = _dict(_dict(cells.get(a["id"])).get(key))
            if not c.get("repeats"):
                continue
            ot, sp = _dict(c.get("output_throughput")), _dict(c.get("speedup"))
            rows.append([key, labels.get(a["id"], a["id"]), c.get("repeats"), _fmt(ot.get("mean")), _fmt_ci(ot.get("ci95")),
                         _fmt(sp.get("ratio"), 2, "x") if sp else "—",
                         ("unbounded" if sp.get("unbounded") else _fmt_ci(sp.get("ci95"), 2)) if sp else "—",
                         _fmt(c.get("acceptance_rate")), _fmt(c.get("acceptance_length"), 2), _fmt(c.get("median_tpot_ms"), 2)])
    if not rows:
        return ""
    recs = [(wl, _dict(r).get("text")) for wl, r in _dict(m.get("recommendation")).items() if _dict(r).get("text")]
    return ("<h2>Tuning matrix</h2>\n"
            + ("<ul>" + "".join(f"<li>{_e(wl)}: {_e(t)}</li>" for wl, t in recs) + "</ul>\n" if recs else "")
            + _table(["bench", "arm", "repeats", "output tok/s", "95 %", "speedup", "95 %", "acceptance %",
                      "acceptance length", "median TPOT ms"], rows, left=2))


def _runs_html(report: dict[str, Any]) -> str:
    runs = _dict(report.get("runs"))
    b, e = _dict(runs.get("baseline")), _dict(runs.get("eagle3"))
    if not b and not e:
        return ""
    rows = [[label, _fmt(b.get(k), 2), _fmt(e.get(k), 2)] for label, k in (
        ("output tokens/s", "output_throughput"), ("median TPOT ms", "median_tpot_ms"),
        ("median TTFT ms", "median_ttft_ms"), ("P99 TPOT ms", "p99_tpot_ms"))]
    rows.append(["acceptance %", "n/a", _fmt(e.get("acceptance_rate"))])
    rows.append(["acceptance length", "n/a", _fmt(e.get("acceptance_length"), 2)])
    sp = _dict(report.get("comparison")).get("output_throughput_speedup")
    return ("<h2>Baseline vs EAGLE3</h2>\n" + _table(["metric", "baseline", "EAGLE3"], rows)
            + (f"<p>Output throughput speedup: <b>{_fmt(sp, 2, 'x')}</b></p>\n" if _num(sp) is not None else ""))


def render_html(report: dict[str, Any], figures: list[dict[str, Any]], out_dir: Path) -> str:
    """report.html: one self-contained document (inline CSS, the charts' SVGs inline, no script and no URL to
    anything outside it) with the verdict, each chart in a <figure data-chart="NAME"> with its caption, and
    compact tables of the key numbers. `figures` is what render_figures returned; their SVG files are read from
    out_dir (the run directory)."""
    report = _dict(report)
    labels = _arm_labels(report)
    v = _dict(report.get("verdict"))
    models = _dict(report.get("models"))
    title = f"specdec-tui report — {report.get('profile') or 'run'}" + (" (SIMULATED)" if report.get("simulated") else "")
    parts = ["<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
             f"<title>{_e(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
             f"<h1>{_e(title)}</h1>\n"]
    if v.get("text"):
        parts.append(f'<p class="verdict {"ok" if v.get("ok") else "bad"}">{"✓" if v.get("ok") else "✗"} '
                     f"{_e(v['text'])}</p>\n")
    meta = [f"profile <b>{_e(report.get('profile'))}</b>"]
    if models.get("target"):
        meta.append(f"target <code>{_e(models['target'])}</code>")
    if models.get("draft"):
        meta.append(f"draft <code>{_e(models['draft'])}</code>")
    if report.get("generated"):
        meta.append(f"generated {_e(report['generated'])}")
    if report.get("exit_code") is not None:
        meta.append(f"exit code {_e(report['exit_code'])}")
    parts.append(f'<p class="meta">{", ".join(meta)}.</p>\n')
    if figures:
        parts.append("<h2>Charts</h2>\n")
    for f in figures:
        try:
            svg = (Path(out_dir) / f["svg"]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ChartError(f"report.html inlines each chart's SVG, and {f['svg']} under {out_dir} could not be "
                             f"read ({e}). Pass render_html the list render_figures returned for the same run "
                             "directory, after it has written the files.") from e
        parts.append(f'<figure data-chart="{_e(f["name"])}" id="chart-{_e(f["name"])}">\n'
                     + _inline_svg(svg, f["name"], f.get("alt") or f["title"])
                     + f"<figcaption><b>{_e(f['title'])}.</b> {_e(f.get('caption') or '')} "
                     f"(files: {_e(f['png'])}, {_e(f['svg'])})</figcaption>\n</figure>\n")
    if report.get("load"):
        parts.append(_load_html(_dict(report["load"]), labels))
    if report.get("matrix"):
        parts.append(_matrix_html(_dict(report["matrix"]), labels))
    else:
        parts.append(_runs_html(report))
    parts.append('<p class="meta">Every number here is read from this run\'s report.json, which holds the '
                 "servers' and benchmarks' own output; the charts are drawn with matplotlib. This page loads "
                 "nothing from anywhere else.</p>\n</body>\n</html>\n")
    return "".join(parts)
