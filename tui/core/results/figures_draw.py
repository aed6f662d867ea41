"""The report's charts drawn with matplotlib (Agg canvas; SVG text as paths, so no font is needed to show it; a
fixed salt and no date in the files, so the same report draws the same bytes) from the pure data of
tui/core/results/figures.py chart_data, into `figures/NAME.png` and `NAME.svg` under the run directory. matplotlib
is imported only here, and only when a report is drawn. Charts read in grayscale: each series has its own marker,
line style or hatch; legends sit beside or under the plot, never on the data.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from tui.core.plan.arms import split_key
from tui.core.results.figures import FIGURES_DIR, ChartError, chart_data
from tui.core.store.rundir import atomic_write_bytes

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
    ax.legend(**OUTSIDE)


PLURAL = {"stops paying": "stop paying", "pays again": "pay again", "starts paying": "start paying"}
OUTSIDE = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}  # a legend beside the plot


def _draw_speedup(fig: Any, c: dict[str, Any]) -> None:
    panels = c["panels"]
    levels = c["levels"]
    arm_ids = list(dict.fromkeys(a["arm"] for p in panels for a in p["arms"]))
    for pi, p in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, pi + 1)
        ax.set_xscale("log", base=2)
        ax.axhline(1.0, color=BASELINE_COLOR, linewidth=1.2, linestyle="-", label="baseline (1.0x)", zorder=1)
        marks: dict[tuple[float, str], list[str]] = {}
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
            for ch in a["changes"]:  # where it stops paying or pays again: between the two levels around it
                x = math.sqrt(ch["after"] * ch["before"])
                ax.axvline(x, color=st["color"], linestyle=st["linestyle"], linewidth=1.0, zorder=2)
                marks.setdefault((x, ch["verb"]), []).append(a["label"])
        at: dict[float, int] = {}
        for (x, verb), names in marks.items():  # one label per line and verb ("k = 2, k = 3 stop paying")
            j = at[x] = at.get(x, -1) + 1  # a second label at the same place goes beside the first
            ax.annotate(f"{', '.join(names)} {verb if len(names) == 1 else PLURAL.get(verb, verb)}", xy=(x, 1.0),
                        xycoords=("data", "axes fraction"), xytext=(3 + 10 * j, -3), textcoords="offset points",
                        rotation=90, va="top", ha="left", fontsize=7.5, color="#000000")
        ax.set_xticks(levels, [str(n) for n in levels])
        ax.minorticks_off()
        ax.set_ylabel("speedup (x)")
        ax.set_title(f"{c['title']} — {p['workload']}" if len(panels) > 1 else f"{c['title']} ({p['workload']})")
        ax.legend(**OUTSIDE)
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
        if pi == len(panels) - 1:
            ax.legend(**OUTSIDE)


def _draw_over_time(fig: Any, c: dict[str, Any]) -> None:
    panels = c["panels"]
    legend: dict[str, Any] = {}
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
        # per segment (a gap between benches is not a measurement): the raw windows as dots (partial ones hollow),
        # the rolling mean of the full windows as a line; one legend entry per quantity, under the charts
        for si, s in enumerate(segs):
            full = [pt for pt in s["points"] if not pt["partial"]]
            part = [pt for pt in s["points"] if pt["partial"]]
            first = si == 0
            tax.plot([pt["t"] for pt in full], [_nan(pt["tokens_per_s"]) for pt in full], linestyle="none",
                     marker=".", markersize=2.5, color="#777777", label="output tokens/s per window" if first else None,
                     zorder=2)
            tax.plot([pt["t"] for pt in full], [_nan(pt.get("tokens_per_s_smooth")) for pt in full], color="#555555",
                     linestyle="--", linewidth=1.1, label=f"output tokens/s, rolling mean of {c['smooth_windows']}"
                     if first else None, zorder=2)
            if has_acc:
                ax.plot([pt["t"] for pt in full], [_nan(pt["acceptance"]) for pt in full], linestyle="none",
                        marker="o", markersize=2.5, color=COLORS[0], label="acceptance % per window" if first else None,
                        zorder=3)
                ax.plot([pt["t"] for pt in full], [_nan(pt.get("acceptance_smooth")) for pt in full], color=COLORS[0],
                        linestyle="-", linewidth=1.5, label=f"acceptance %, rolling mean of {c['smooth_windows']}"
                        if first else None, zorder=3)
                ax.plot([pt["t"] for pt in part], [_nan(pt["acceptance"]) for pt in part], linestyle="none",
                        marker="o", markersize=3.5, markerfacecolor="white", markeredgecolor=COLORS[0],
                        markeredgewidth=0.8, label="partial window (left out of the lines)" if first else None,
                        zorder=3)
            else:
                tax.plot([pt["t"] for pt in part], [_nan(pt["tokens_per_s"]) for pt in part], linestyle="none",
                         marker="o", markersize=3.5, markerfacecolor="white", markeredgecolor="#555555",
                         markeredgewidth=0.8, label="partial window (left out of the lines)" if first else None,
                         zorder=2)
        if has_acc:
            ax.set_ylabel("acceptance (%)")
            ax.set_ylim(0, 105)
            tax.set_ylabel("output tokens/s")
            tax.grid(False)
            tax.set_ylim(bottom=0)
        else:
            ax.set_ylabel("output tokens/s")
            ax.set_ylim(bottom=0)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = tax.get_legend_handles_labels() if tax is not ax else ([], [])
        for h, lab in zip(h1 + h2, l1 + l2):
            legend.setdefault(lab, h)
        ax.set_xlim(segs[0]["t0"], segs[-1]["t1"])
        ax.set_title(p["label"], loc="left", pad=12)
        if pi == len(panels) - 1:
            ax.set_xlabel("bench time (s), the arm's benches end to end (idle windows dropped)")
    fig.legend(list(legend.values()), list(legend), loc="outside lower center", ncols=3, fontsize=7.5)


def _nan(v: Any) -> float:
    return math.nan if v is None else v


DRAW = {"throughput_vs_k": (_draw_throughput_vs_k, lambda c: (7.0, 4.2)),
        "speedup_vs_concurrency": (_draw_speedup, lambda c: (7.0, 3.8 * len(c["panels"]) + 0.4)),
        "per_position_acceptance": (_draw_per_position, lambda c: (max(5.0, 4.2 * len(c["panels"])), 3.8)),
        "acceptance_over_time": (_draw_over_time, lambda c: (9.0, 2.5 * len(c["panels"]) + 1.0))}


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
