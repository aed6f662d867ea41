"""Results charts: acceptance per position and baseline vs EAGLE3 bars drawn with text, and a tune run's
plotted charts (textual-plotext): throughput vs k, speedup vs concurrency, per-position acceptance per arm and
acceptance over time (live while a bench runs), gathered in the results' charts view (ChartsView)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, VerticalScroll
from textual.widget import Widget
from textual.widgets import Static
from textual_plotext import PlotextPlot

from tui.core.plan.arms import split_key
from tui.core.results.drift import rolling_mean

from .chart_series import (  # noqa: F401  (the data functions are importable from here too)
    SMOOTH_WINDOWS, SpeedupSeries, ThroughputPoint, TimePoint, _arm_list, _n, legend, notes, points_from_windows,
    position_series, speedup_series, throughput_points, wrap_words,
)
from .common import bar, fmt_num, no_color


class AcceptanceBars(Widget):
    """Acceptance rate, acceptance length and one bar per draft position (percent)."""

    DEFAULT_CSS = """
    AcceptanceBars { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.rate: float | None = None
        self.length: float | None = None
        self.positions: list[float] = []
        self.num_spec: int | None = None
        self.source: str | None = None

    def set_values(self, rate: float | None, length: float | None, positions: list[float] | None,
                   num_spec: int | None = None, source: str | None = None) -> None:
        self.rate, self.length, self.positions = rate, length, list(positions or [])
        self.num_spec, self.source = num_spec, source
        self.refresh(layout=True)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return (3 if self.source else 2) + max(1, len(self.positions))

    def render(self) -> Text:
        w = max(10, self.size.width - 20)
        t = Text(no_wrap=True, overflow="ellipsis")
        if self.rate is None:
            t.append("Acceptance: waiting for the EAGLE3 benchmark", style="dim")
            return t
        t.append("Acceptance rate ", style="bold")
        t.append(f"{self.rate:.2f}%")
        t.append("   length ", style="bold")
        t.append(fmt_num(self.length))
        if self.num_spec:
            t.append(f" (max {self.num_spec + 1})", style="dim")
        if self.source:
            t.append(f"\nsource: {self.source} ", style="dim")
            t.append("(metrics = the server's /metrics counters over the run; bench = vllm bench serve)",
                     style="dim")
        t.append("\nPer-position acceptance", style="bold")
        for i, p in enumerate(self.positions or [], start=1):  # draft positions numbered from 1, as in the report
            t.append(f"\n pos {i:<2} ")
            t.append(bar(p / 100.0, w))
            t.append(f" {p:5.1f}%")
        if not self.positions:
            t.append("\n (none reported)", style="dim")
        return t


class CompareChart(Widget):
    """Baseline vs EAGLE3 as paired bars per metric (throughput higher is better, latency lower)."""

    DEFAULT_CSS = """
    CompareChart { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    METRICS = (
        ("Output throughput (tok/s)", "output_throughput", True),
        ("Median TPOT (ms)", "median_tpot_ms", False),
    )

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.runs: dict[str, Any] = {}

    def set_runs(self, runs: dict[str, Any]) -> None:
        self.runs = runs or {}
        self.refresh(layout=True)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return 3 * len(self.METRICS) if self.runs else 1

    def render(self) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        b = self.runs.get("baseline") or {}
        e = self.runs.get("eagle3") or {}
        if not b and not e:
            t.append("Chart: waiting for both benchmarks", style="dim")
            return t
        w = max(8, self.size.width - 20)
        first = True
        for label, key, higher_better in self.METRICS:
            bv, ev = b.get(key), e.get(key)
            vals = [v for v in (bv, ev) if isinstance(v, (int, float))]
            top = max(vals) if vals else 0
            if not first:
                t.append("\n")
            first = False
            t.append(label, style="bold")
            t.append("  (higher is better)" if higher_better else "  (lower is better)", style="dim")
            for name, v, style in (("baseline", bv, ""), ("EAGLE3", ev, "bold")):
                t.append(f"\n {name:<9}")
                if isinstance(v, (int, float)) and top > 0:
                    t.append(bar(v / top, w), style=style)
                    t.append(f" {v:8.2f}")
                else:
                    t.append("n/a", style="dim")
        return t


# == Plotted charts (textual-plotext) ==========================================================================
# Four charts of a tune run, drawn by plotext inside Textual (textual-plotext's PlotextPlot): output throughput
# vs k with its 95 % interval, speedup vs concurrency with its interval band and the crossover, per-position
# acceptance per arm, and acceptance (and tokens/s) over time, live from BenchSample events or from a saved run.
# Every series has its own marker character and the legend is a caption line under the plot, so each chart reads
# without colour (NO_COLOR: plotext's colourless "clear" theme) and in tmux; a chart with nothing to draw says so
# in one plain line. The data shapes are the engine's: build_matrix's matrix (tui/core/results/stats.py), report
# .json's "load" (tui/core/results/load.py) and the /metrics windows of a bench's facts ("timeseries").

ARM_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")
LIVE_REPAINT_S = 0.25  # the live chart repaints at most four times a second, however fast samples arrive
LIVE_MAX_POINTS = 3600  # an hour of 1 s windows; older points drop off the left


# -- the widgets -----------------------------------------------------------------------------------------------
class PlotChart(PlotextPlot):
    """A plotext chart with a caption (the legend, in words) under it and a one-line state when it has no
    data. Subclasses say whether they have data (`has_data`), draw (`draw`) and caption (`caption`)."""

    DEFAULT_CSS = """
    PlotChart { height: 14; min-height: 3; width: 1fr; }
    """
    NAME = "chart"
    EMPTY = "no data yet"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.builds = 0  # how many times the plot was built (the live chart's repaints are bounded)
        self.data: list[Any] = []  # what `draw` plots (each chart's own points or series)
        self.key: str | None = None  # the bench key (or workload) they belong to

    def set_data(self, data: list[Any], key: str | None) -> None:
        self.data, self.key = data, key
        self.refresh()

    @property
    def mono(self) -> bool:
        try:
            return bool(self.app.no_color) or no_color()
        except Exception:
            return no_color()

    def has_data(self) -> bool:
        return bool(self.data)

    def draw(self, plt: Any, mono: bool) -> None:  # pragma: no cover - every chart draws
        raise NotImplementedError

    def caption(self, mono: bool, width: int) -> Text:
        return Text()

    def title(self, plt: Any, text: str) -> None:
        """plotext drops a title wider than the plot: shorten it instead, between words."""
        w = max(8, self.size.width - 8)
        if len(text) > w:
            cut = text.rfind(" ", 0, w - 1)
            text = (text[:cut].rstrip(" ·,") if cut > 0 else text[: w - 1]) + "…"
        plt.title(text)

    def empty_text(self) -> Text:
        return Text(f"{self.NAME}: {self.EMPTY}", style="dim", no_wrap=True, overflow="ellipsis")

    def color(self, i: int, mono: bool) -> Any:
        return None if mono else ARM_COLORS[i % len(ARM_COLORS)]

    def render(self) -> Text:
        if not self.has_data():
            return self.empty_text()
        mono = self.mono
        cap = self.caption(mono, self.size.width)
        cap_lines = len(cap.plain.split("\n")) if cap.plain else 0
        w, h = self.size.width, self.size.height - cap_lines
        if w < 20 or h < 5:
            t = Text(f"{self.NAME}: too small to draw (needs 20×{5 + cap_lines})", style="dim", no_wrap=True)
            return t
        plt = self.plt
        plt.clear_figure()
        plt.plotsize(w, h)
        plt._set_size(w, h)
        plt.theme("clear" if mono else self._get_plotext_theme_name(self.app.theme))
        self.draw(plt, mono)
        self.builds += 1
        out = Text.from_ansi(plt.build(), no_wrap=True, overflow="ellipsis")
        out.rstrip()
        if cap_lines:
            out.append("\n")
            out.append_text(cap)
        return out


class ThroughputVsK(PlotChart):
    """Output tokens/s per arm (x: baseline, k=1, k=2, ...) with its 95 % interval as a vertical segment."""

    NAME = "Output tok/s vs k"
    data: list[ThroughputPoint]

    def set_matrix(self, matrix: dict[str, Any] | None, key: str | None) -> None:
        self.set_data(throughput_points(matrix, key), key)

    @property
    def points(self) -> list[ThroughputPoint]:
        return self.data

    def draw(self, plt: Any, mono: bool) -> None:
        xs = list(range(len(self.points)))
        for x, p in zip(xs, self.points):
            if p.lo is not None and p.hi is not None:
                plt.plot([x, x], [p.lo, p.hi], marker="│", color=self.color(0, mono))
        plt.scatter(xs, [p.mean for p in self.points], marker="●")
        star = [x for x, p in zip(xs, self.points) if p.recommended]
        if star:
            plt.scatter(star, [self.points[star[0]].mean], marker="★", color=None if mono else "yellow")
        plt.xticks(xs, [p.label for p in self.points])
        plt.xlim(-0.5, len(xs) - 0.5)
        self.title(plt, f"{self.key} · output tok/s vs k")

    def caption(self, mono: bool, width: int) -> Text:
        items = [("● mean", ""), ("│ 95 % interval (repeats)", "")]
        if any(p.recommended for p in self.points):
            items.append(("★ recommended", ""))
        return legend(items, width)


class SpeedupVsConcurrency(PlotChart):
    """Per speculative arm: speedup over the baseline vs concurrency (log2 axis) with the 95 % band (its lower
    and upper lines, ·), the line y = 1 (no gain), and on it where each arm stops paying (X) or pays again (+),
    between the two levels around the change: the arm's statement's changes, as the report's chart marks them."""

    NAME = "Speedup vs concurrency"
    EMPTY = "no data yet (a tune run with [tune] concurrency draws it)"
    data: list[SpeedupSeries]

    def set_load(self, load: dict[str, Any] | None, workload: str | None) -> None:
        self.set_data(speedup_series(load, workload), workload)

    @property
    def series(self) -> list[SpeedupSeries]:
        return self.data

    def draw(self, plt: Any, mono: bool) -> None:
        levels = sorted({lv for s in self.series for lv in s.levels})
        for i, s in enumerate(self.series):  # the bands first: the ratio lines are drawn over them
            for side in (s.lo, s.hi):
                pts = [(math.log2(lv), v) for lv, v in zip(s.levels, side) if v is not None]
                if len(pts) > 1:
                    plt.plot([p[0] for p in pts], [p[1] for p in pts], marker="·", color=self.color(i, mono))
                elif pts:
                    plt.scatter([pts[0][0]], [pts[0][1]], marker="·", color=self.color(i, mono))
        plt.hline(1.0)
        for i, s in enumerate(self.series):
            plt.plot([math.log2(lv) for lv in s.levels], s.ratio, marker=s.marker, color=self.color(i, mono))
        for kind, mark in (("stops_paying", "X"), ("starts_paying", "+")):
            xs = [math.log2(x) for s in self.series for x, k, _t in s.marks if k == kind]
            if xs:
                plt.scatter(xs, [1.0] * len(xs), marker=mark, color=None if mono else "red")
        xs = [math.log2(lv) for lv in levels]
        plt.xticks(xs, [str(lv) for lv in levels])
        if len(xs) > 1:
            plt.xlim(xs[0] - 0.25, xs[-1] + 0.25)
        plt.xlabel("concurrent requests")
        self.title(plt, f"{self.key} · speedup vs concurrency")

    def caption(self, mono: bool, width: int) -> Text:
        items = [(f"{s.marker} {s.label}", "bold") for s in self.series]
        items += [("· 95 % band", ""), ("─ 1.0 = no gain", ""), ("X stops paying", "")]
        if any(k == "starts_paying" for s in self.series for _x, k, _t in s.marks):
            items.append(("+ pays again", ""))
        return notes(legend(items, width), [f"{s.label}: {s.range_text}" for s in self.series if s.range_text], width)


class PerPositionBars(PlotChart):
    """Per-position acceptance (marginal, percent) of each speculative arm: grouped bars per draft position,
    each arm's bars drawn with its own digit."""

    NAME = "Acceptance per position"
    data: list[tuple[str, str, list[float]]]

    def set_matrix(self, matrix: dict[str, Any] | None, key: str | None) -> None:
        self.set_data(position_series(matrix, key), key)

    @property
    def series(self) -> list[tuple[str, str, list[float]]]:
        return self.data

    def draw(self, plt: Any, mono: bool) -> None:
        n = max(len(v) for _l, _m, v in self.series)
        labels = [f"pos {i}" for i in range(1, n + 1)]  # numbered from 1, as in the report
        ys = [v + [0.0] * (n - len(v)) for _l, _m, v in self.series]
        kwargs: dict[str, Any] = {"marker": [m for _l, m, _v in self.series]}
        if not mono:
            kwargs["color"] = [self.color(i, mono) for i in range(len(self.series))]
        plt.multiple_bar(labels, ys, **kwargs)
        plt.ylim(0, 100)
        self.title(plt, f"{self.key} · acceptance % per position")

    def caption(self, mono: bool, width: int) -> Text:
        return legend([(f"{m} {lab}", "bold") for lab, m, _v in self.series] + [("(each arm's bars: its digit)", "")],
                      width)


class AcceptanceOverTime(PlotChart):
    """Acceptance (%, left axis: · per window, * its rolling mean over SMOOTH_WINDOWS windows) and output tokens/s
    (right axis, +, the same rolling mean) per /metrics window of one bench; partial windows (the bench started or
    ended inside them) are left out of the lines and counted in the legend. Live:
    `add_samples` appends BenchSample events and repaints at most every LIVE_REPAINT_S (samples arriving faster
    are coalesced, toolong-style); a saved run: `set_points`."""

    NAME = "Acceptance over time"
    EMPTY = "no data yet (sampled from /metrics about once a second while a bench runs)"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.points: list[TimePoint] = []
        self.label = ""
        self.samples_in = 0
        self.repaints = 0  # refreshes asked for by add_samples (at most one per LIVE_REPAINT_S)
        self.note = ""
        self._last_paint = 0.0
        self._timer: Any = None

    def clear(self) -> None:
        self.points, self.label, self.note = [], "", ""
        self.refresh()

    def set_points(self, points: list[TimePoint], label: str, note: str = "") -> None:
        self.points, self.label, self.note = list(points)[-LIVE_MAX_POINTS:], label, note
        self.refresh()

    def add_samples(self, samples: list[Any]) -> None:
        """BenchSample events, in order; a new bench (another label) starts a new series."""
        for s in samples:
            if s.label != self.label:
                self.points, self.label = [], s.label
            self.points.append(TimePoint(float(s.t_s), float(s.tokens_per_s), _n(s.acceptance_rate)))
            self.samples_in += 1
        if len(self.points) > LIVE_MAX_POINTS:
            del self.points[: len(self.points) - LIVE_MAX_POINTS]
        self._schedule()

    def _schedule(self) -> None:
        if self._timer is not None:
            return  # a repaint is already due: it will draw these points too
        wait = LIVE_REPAINT_S - (time.monotonic() - self._last_paint)
        if wait <= 0:
            self._paint()
        else:
            self._timer = self.set_timer(wait, self._paint)

    def _paint(self) -> None:
        self._timer = None
        self._last_paint = time.monotonic()
        self.repaints += 1
        self.refresh()

    def has_data(self) -> bool:
        return bool(self.points)

    def draw(self, plt: Any, mono: bool) -> None:
        pts = [p for p in self.points if not p.partial]  # a partial window is left out of the lines
        acc = [(p.t, p.acceptance) for p in pts if p.acceptance is not None]
        if acc:
            plt.scatter([a[0] for a in acc], [a[1] for a in acc], marker="·", color=self.color(0, mono))
            plt.plot([a[0] for a in acc], rolling_mean([a[1] for a in acc], SMOOTH_WINDOWS), marker="*",
                     color=self.color(0, mono))
            plt.ylim(0, 100)
        if pts:
            plt.plot([p.t for p in pts], rolling_mean([p.tokens_per_s for p in pts], SMOOTH_WINDOWS), marker="+",
                     color=self.color(1, mono), yside="right" if acc else "left")
        if not self.compact:
            plt.xlabel("seconds into the bench")
        self.title(plt, f"{self.label} · acceptance, tok/s over time".lstrip(" ·"))

    @property
    def compact(self) -> bool:
        """A short chart (a server pane at 80×24): no axis title, a one-line legend."""
        return self.size.height < 14

    def caption(self, mono: bool, width: int) -> Text:
        full = [p for p in self.points if not p.partial]
        last = full[-1] if full else None
        spec = any(p.acceptance is not None for p in self.points)
        n = SMOOTH_WINDOWS
        if self.compact:
            items = ([(f"* acc. % (mean of {n})", "bold"), ("+ tok/s", "bold")] if spec else
                     [("+ tok/s", "bold"), ("no drafts", "")])
        elif spec:
            items = [(f"* acceptance %, mean of {n} windows (left)", "bold"), ("· per window", ""),
                     (f"+ tok/s, mean of {n} (right)", "bold")]
        else:
            items = [(f"+ tok/s, mean of {n} windows", "bold"), ("no drafts: acceptance n/a", "")]
        if last is not None:
            items.append(((f"t={last.t:.0f}s " if self.compact else f"{len(full)} windows, ")
                          + f"last {last.tokens_per_s:.0f} tok/s"
                          + (f", {last.acceptance:.1f} %" if last.acceptance is not None else ""), ""))
        partial = len(self.points) - len(full)
        if partial and not self.compact:
            items.append((f"{partial} partial window{'s' if partial > 1 else ''} (bench start/end) left out", ""))
        return notes(legend(items, width), [self.note] if self.note else [], width)


# -- the charts view of a tune run's results ---------------------------------------------------------------------
@dataclass
class ChartData:
    """What the charts view draws: the matrix, report.json's load and the saved /metrics windows
    (timeseries[(arm, key)] = one list of points per repeat)."""

    matrix: dict[str, Any] | None = None
    load: dict[str, Any] | None = None
    timeseries: dict[tuple[str, str], list[list[TimePoint]]] = field(default_factory=dict)


def drift_note(load: dict[str, Any] | None, arm: str | None, key: str | None) -> str:
    """The drift verdict of (arm, key) from load["workloads"][wl]["drift"][arm][level], if any."""
    if not load or not arm or not key:
        return ""
    wl, level = split_key(key)
    d = ((((load.get("workloads") or {}).get(wl) or {}).get("drift") or {}).get(arm) or {}).get(str(level)) or {}
    text = d.get("text") if isinstance(d, dict) else None
    if not text:
        return ""
    return ("drift: " if d.get("drift") else "no drift: ") + str(text)


class ChartsView(VerticalScroll):
    """The results' charts for the bench key shown (the matrix pane's `[` / `]`), those with data only: throughput
    vs k, speedup vs concurrency (a concurrency sweep), per-position acceptance and acceptance over time of the
    selected arm (its first repeat). One column at 80 columns, a 2 × 2 grid when wide."""

    DEFAULT_CSS = """
    ChartsView { height: 1fr; }
    ChartsView > #charts-note { height: auto; }
    ChartsView > #charts-grid { layout: vertical; height: auto; }
    ChartsView #chart-throughput, ChartsView #chart-positions { height: 17; }
    ChartsView #chart-speedup { height: 22; }
    ChartsView #chart-time { height: 19; }
    ChartsView.-two > #charts-grid { layout: grid; grid-size: 2; grid-gutter: 0 1; grid-rows: 18; }
    ChartsView.-two PlotChart { height: 100%; }
    ChartsView .hidden { display: none; }
    """
    TWO_COLUMNS = 88  # at this width and wider: a 2 × 2 grid (120 columns leave the pane about 92)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.data = ChartData()
        self.key: str | None = None
        self.arm: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="charts-note", markup=False)
        with Grid(id="charts-grid"):
            yield ThroughputVsK(id="chart-throughput")
            yield SpeedupVsConcurrency(id="chart-speedup")
            yield PerPositionBars(id="chart-positions")
            yield AcceptanceOverTime(id="chart-time")

    def on_resize(self) -> None:
        self.set_class(self.size.width >= self.TWO_COLUMNS, "-two")  # the charts redraw at their new size

    def show(self, data: ChartData, key: str | None, arm: str | None) -> None:
        self.data, self.key, self.arm = data, key, arm
        self.redraw()

    def time_series(self) -> tuple[str | None, list[TimePoint]]:
        """The arm whose first repeat at the key is drawn over time, and its points: the arm selected in the table,
        else the key's recommended arm, else the first speculative arm with windows, else the baseline."""
        d, key = self.data, self.key or ""
        rec = (((d.matrix or {}).get("recommendation") or {}).get(key) or {}).get("arm")
        order = [self.arm, rec] + [a["id"] for a in _arm_list(d.matrix or {}) if a.get("kind") != "baseline"]
        order += [a["id"] for a in _arm_list(d.matrix or {}) if a.get("kind") == "baseline"]
        for arm in order:
            first = next((r for r in d.timeseries.get((arm or "", key)) or [] if r), None)
            if arm and first:
                return arm, first
        return None, []

    def redraw(self) -> None:
        d, key = self.data, self.key
        wl = split_key(key)[0] if key else None
        tp = self.query_one(ThroughputVsK)
        tp.set_matrix(d.matrix, key)
        sp = self.query_one(SpeedupVsConcurrency)
        sp.set_load(d.load, wl)
        pp = self.query_one(PerPositionBars)
        pp.set_matrix(d.matrix, key)
        at = self.query_one(AcceptanceOverTime)
        arm, first = self.time_series()
        if first:
            at.set_points(first, f"{arm} · {key} r1", drift_note(d.load, arm, key))
        else:
            at.clear()
        notes = []
        for chart in (tp, sp, pp, at):
            chart.set_class(not chart.has_data(), "hidden")
            if not chart.has_data():
                notes.append(chart.empty_text().plain)
        text = Text(no_wrap=False)
        text.append(f"Charts · {key or 'no bench key yet'}", style="bold")
        text.append("  g table · [ ] switch", style="dim")
        for n in notes:
            text.append(f"\n{n}", style="dim")
        self.query_one("#charts-note", Static).update(text)
