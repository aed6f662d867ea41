"""Results of a tune run (the tutorial's Step 3 as a matrix), fed by `MatrixTable(matrix)`.

Top to bottom: the recommendation per workload (fixed above the scroll: visible at 80×24 without scrolling),
the workload shown (`[` / `]` switch; in a concurrency sweep each workload at each level), arms × metrics for
that workload (a DataTable: the row under the cursor is the arm whose per-position acceptance is drawn), the
baseline-vs-baseline noise floor, output throughput vs k per workload with its 95 % interval, per-position acceptance (marginal and conditional) of the selected
arm with the acceptance length predicted for every k' ≤ k, then the checks, diagnostics and exported files.

`g` swaps all of it for the charts view (tui/widgets/charts.py ChartsView) of the same bench key: throughput vs
k, speedup vs concurrency (from `LoadTable`, report.json's "load"), per-position acceptance and the selected arm's
acceptance over time (its /metrics windows: BenchSample events as the arms bench, or a saved run's timeseries).

The matrix dict is report.json's `matrix` (its shape: tui/core/results/stats.py, build_matrix): workloads, arms, cells[arm][workload],
recommendation[workload], noise_floor[workload].
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from tui.core import events as ev
from tui.core.plan.arms import split_key
from tui.core.results import stats
from tui.widgets.charts import ChartData, ChartsView, TimePoint, points_from_windows
from tui.widgets.common import bar, status_style

from .base import FailureBanner
from .results import ResultsBase

NARROW_WIDTH = 70  # below this the table keeps its six essential columns
STOP_TUNING_BELOW = stats.STOP_TUNING_ACCEPTANCE  # percent first-position acceptance (stats.first_position_acceptance)


# -- numbers -------------------------------------------------------------------------------------------------
def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _f(v: Any, nd: int = 1, dash: str = "–") -> str:
    x = _num(v)
    return dash if x is None else f"{x:.{nd}f}"


def _interval(ci: Any, nd: int = 1) -> str:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or _num(ci[0]) is None or _num(ci[1]) is None:
        return ""
    return f"[{ci[0]:.{nd}f}–{ci[1]:.{nd}f}]"


def _half_width(ci: Any, mean: Any) -> float | None:
    m = _num(mean)
    if m is None or not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return None
    lo, hi = _num(ci[0]), _num(ci[1])
    if lo is None or hi is None:
        return None
    return max(hi - m, m - lo)


def arm_label(arm: dict[str, Any], arms: list[dict[str, Any]], wide: bool = False) -> str:
    """'baseline', 'k=2', 'k=2 (redhat)' where drafts differ (tui.core.results.stats.arm_label, compact), or the arm's title
    (wide)."""
    if wide and arm.get("kind") != "baseline" and arm.get("title"):
        return str(arm["title"])
    return stats.arm_label(arm, arms).replace("k = ", "k=")


def _arms(matrix: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in matrix.get("arms") or [] if isinstance(a, dict) and a.get("id")]


def cell_of(matrix: dict[str, Any], arm_id: str, workload: str) -> dict[str, Any]:
    return ((matrix.get("cells") or {}).get(arm_id) or {}).get(workload) or {}


# -- the pane's table --------------------------------------------------------------------------------------------
# Arms as rows (the cursor row picks the arm whose per-position bars are shown), a few metrics as columns so that
# four arms fit 80x24; every value is read from the engine's matrix dict (tui.core.results.stats computed it). The
# headless table and report.md use tui.core.results.stats.matrix_rows (metrics as rows, every metric). Returns
# (column headings, [(arm id, [cell text per column])]); the first column is the arm, numbers are right-aligned.
def matrix_rows(matrix: dict[str, Any], workload: str, width: int) -> tuple[list[str], list[tuple[str, list[str]]]]:
    wide = width >= NARROW_WIDTH
    rec = ((matrix.get("recommendation") or {}).get(workload) or {})
    if wide:
        cols = ["Arm", "tok/s", "95% CI", "n", "Speedup", "Acc %", "AL", "TPOT ms", "P99 TPOT", "TTFT ms", "Same"]
    else:
        cols = ["Arm", "tok/s ±95%", "×base", "Acc%", "AL", "TPOT"]
    rows: list[tuple[str, list[str]]] = []
    arms = _arms(matrix)
    for arm in arms:
        c = cell_of(matrix, arm["id"], workload)
        ot = c.get("output_throughput") or {}
        sp = c.get("speedup") or {}
        star = "★ " if rec.get("arm") == arm["id"] and not rec.get("stop_tuning") else ""
        label = star + arm_label(arm, arms, wide)
        speed = f"{_f(sp.get('ratio'), 2)}x" if _num(sp.get("ratio")) is not None else "–"
        if arm.get("kind") == "baseline":
            speed = "1.00x" if _num(ot.get("mean")) is not None else "–"
        acc = _f(c.get("acceptance_rate")) if arm.get("kind") != "baseline" else "–"
        al = _f(c.get("acceptance_length"), 2) if arm.get("kind") != "baseline" else "–"
        if wide:
            ll = c.get("lossless") or {}
            same = f"{ll.get('identical')}/{ll.get('prompts')}" if ll.get("prompts") else "–"
            ci = _interval(sp.get("ci95"), 2) or ("unbounded" if sp.get("unbounded") else "")
            rows.append((arm["id"], [label, _f(ot.get("mean")), _interval(ot.get("ci95")) or "–",
                                     str(c.get("repeats") or "–"), f"{speed} {ci}".strip(), acc, al,
                                     _f(c.get("median_tpot_ms"), 2), _f(c.get("p99_tpot_ms"), 2),
                                     _f(c.get("median_ttft_ms")), same]))
        else:
            hw = _half_width(ot.get("ci95"), ot.get("mean"))
            tok = _f(ot.get("mean")) + (f"±{hw:.1f}" if hw is not None else "")
            rows.append((arm["id"], [label, tok, speed, acc, al, _f(c.get("median_tpot_ms"), 2)]))
    return cols, rows
# ----------------------------------------------------------------------------------------------------------------


def _table_width(cols: list[str], rows: list[tuple[str, list[str]]]) -> int:
    """The DataTable's width for these texts: each column its widest text plus one cell of padding each side."""
    return sum(max([cell_len(c)] + [cell_len(cells[i]) for _a, cells in rows]) + 2 for i, c in enumerate(cols))


def interval_bar(mean: float, lo: float | None, hi: float | None, top: float, width: int) -> str:
    """A bar from 0 to the mean; the 95 % interval drawn as ▓ (lower bound → mean) and ░ (mean → upper bound)."""
    if top <= 0:
        return " " * width
    if lo is None or hi is None:
        return bar(mean / top, width)

    def cell(v: float) -> float:
        return max(0.0, min(float(width), v / top * width))

    lo_c, m_c, hi_c = cell(lo), cell(mean), cell(hi)
    out = []
    for i in range(width):
        mid = i + 0.5
        if mid <= lo_c:
            out.append("█")
        elif mid <= m_c:
            out.append("▓")
        elif mid <= hi_c:
            out.append("░")
        else:
            out.append(" ")
    return "".join(out)


def throughput_chart(matrix: dict[str, Any], width: int, selected: str | None = None) -> Text:
    """Output tok/s vs k, one block per workload (bars from 0, scaled per workload)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    arms = _arms(matrix)
    labels = {a["id"]: arm_label(a, arms) for a in arms}
    lw = max([len(v) for v in labels.values()] + [4])
    first = True
    for w in matrix.get("workloads") or []:
        cells = [(a, cell_of(matrix, a["id"], w).get("output_throughput") or {}) for a in arms]
        tops = [_num((ot.get("ci95") or [None, None])[1]) or _num(ot.get("mean")) or 0.0 for _, ot in cells]
        top = max(tops + [0.0])
        if not first:
            t.append("\n")
        first = False
        t.append(("▸ " if w == selected else "  ") + w, style="bold")
        t.append("  output tok/s", style="dim")
        values = {a["id"]: f"{_f(ot.get('mean'))} {_interval(ot.get('ci95'), 0)}".rstrip() for a, ot in cells}
        vw = max([len(v) for v in values.values()] + [5])
        bw = min(60, max(6, width - lw - vw - 4))
        for a, ot in cells:
            t.append(f"\n {labels[a['id']]:<{lw}} ")
            m = _num(ot.get("mean"))
            if m is None:
                t.append("n/a", style="dim")
                continue
            ci = ot.get("ci95") if isinstance(ot.get("ci95"), (list, tuple)) else [None, None]
            style = "" if a.get("kind") == "baseline" else "bold"
            t.append(interval_bar(m, _num(ci[0]), _num(ci[1]), top, bw), style=style)
            t.append(f" {values[a['id']]}")
    if not first:
        t.append("\n")
        t.append(" █ mean  ▓░ 95 % interval (from the repeats)", style="dim")
    return t


def positions_text(matrix: dict[str, Any], arm_id: str | None, workload: str, width: int) -> Text:
    """Per-position acceptance of one arm: marginal (share of drafts accepted up to this position) and
    conditional (accepted here given the previous one was), the AL check and the predicted AL per k' ≤ k."""
    t = Text(no_wrap=True, overflow="ellipsis")
    arm = next((a for a in _arms(matrix) if a["id"] == arm_id), None)
    if arm is None or arm.get("kind") == "baseline":
        t.append("Per-position acceptance: select a speculative arm in the table (↑ ↓)", style="dim")
        return t
    c = cell_of(matrix, arm["id"], workload)
    t.append(f"{arm.get('title') or arm['id']}", style="bold")
    t.append(f" · {workload}", style="dim")
    acc, al = _num(c.get("acceptance_rate")), _num(c.get("acceptance_length"))
    t.append("\n acceptance ")
    fp, _src = stats.first_position_acceptance(c, stats.arm_k(arm))
    t.append(f"{_f(acc)} %", style=status_style("bold red") if fp is not None and fp < STOP_TUNING_BELOW else "")
    t.append("  length ")
    t.append(_f(al, 2))
    chk = c.get("al_check") or {}
    if _num(chk.get("from_marginals")) is not None:
        ok = bool(chk.get("consistent"))
        t.append(f"  (1 + Σ marginals = {chk['from_marginals']:.2f} {'✓' if ok else '✗'})",
                 style="dim" if ok else status_style("bold yellow"))
    pp = c.get("per_position") or {}
    marg = [x for x in pp.get("marginal") or [] if _num(x) is not None]
    cond = list(pp.get("conditional") or [])
    if not marg:
        t.append("\n (no per-position counters for this arm)", style="dim")
    else:
        side = width >= 44
        bw = min(24, max(6, (width - 24) // 2)) if side else min(40, max(6, width - 20))
        if side:
            t.append("\n " + "pos".ljust(5) + "marginal".ljust(bw + 9) + "conditional", style="dim")
        for i, m in enumerate(marg):
            cv = _num(cond[i]) if i < len(cond) else None
            if side:
                t.append(f"\n pos{i + 1:<2}")  # draft positions numbered from 1, as in the report
                t.append(bar(m / 100.0, bw))
                t.append(f" {m:5.1f}%  ")
                if cv is None:
                    t.append("–")
                else:
                    t.append(bar(cv / 100.0, bw))
                    t.append(f" {cv:5.1f}%")
            else:
                t.append(f"\n pos{i + 1:<2} marg ")
                t.append(bar(m / 100.0, bw))
                t.append(f" {m:5.1f}%")
                t.append("\n       cond ")
                t.append(bar((cv or 0.0) / 100.0, bw) if cv is not None else "–")
                t.append(f" {cv:5.1f}%" if cv is not None else "")
    pred = c.get("predicted_al") or {}
    if pred:
        items = sorted(((int(k), v) for k, v in pred.items() if str(k).isdigit() and _num(v) is not None))
        t.append("\n predicted AL ", style="bold")
        t.append(" · ".join(f"k'={k} {v:.2f}" for k, v in items))
        if al is not None:
            t.append(f" (measured {al:.2f})", style="dim")
    ll = c.get("lossless") or {}
    if ll.get("prompts"):
        same, n = ll.get("identical"), ll.get("prompts")
        t.append("\n lossless ", style="bold")
        t.append(f"{same}/{n} prompts identical to the baseline",
                 style="" if same == n else status_style("bold yellow"))
        firsts = [(i, p) for i, p in enumerate(ll.get("first_divergence") or []) if isinstance(p, int)]
        if firsts:
            t.append("; first divergence " + ", ".join(f"prompt {i} at token {p}" for i, p in firsts[:3]))
    pr = c.get("per_request") or {}
    if pr.get("n"):
        t.append(f"\n per request (n={pr['n']}): mean AL {_f(pr.get('mean_acceptance_length'), 2)}, "
                 f"median {_f(pr.get('median_acceptance_length'), 2)}", style="dim")
    return t


def recommendation_text(matrix: dict[str, Any]) -> Text:
    """One block per workload: the verdict, its numbers, and why."""
    t = Text()
    recs = matrix.get("recommendation") or {}
    arms = {a["id"]: a for a in _arms(matrix)}
    first = True
    for w in matrix.get("workloads") or []:
        rec = recs.get(w) or {}
        if not first:
            t.append("\n")
        first = False
        stop = bool(rec.get("stop_tuning"))
        arm_id = rec.get("arm")
        icon = "✗" if stop else ("?" if rec.get("verdict") == "not_proven" else "★" if arm_id else "·")
        t.append(f"{icon} {w}: ", style=status_style("bold red") if stop else "bold")
        t.append(str(rec.get("text") or "no recommendation"), style=status_style("bold red") if stop else "bold")
        if arm_id in arms and not stop and "x baseline" not in str(rec.get("text") or ""):
            sp = cell_of(matrix, arm_id, w).get("speedup") or {}
            if _num(sp.get("ratio")) is not None:
                t.append(f" · {sp['ratio']:.2f}x {_interval(sp.get('ci95'), 2)}".rstrip())
        reason = str(rec.get("reason") or "").split(";")[0].strip()  # its first clause: 80x24 holds two workloads
        if reason:
            t.append(f"\n  {reason}", style="dim" if not stop else "")
    if first:
        t.append("no workloads in the matrix", style="dim")
    return t


class MatrixPane(ResultsBase):
    DEFAULT_CSS = """
    MatrixPane #recommendation { height: auto; display: none; border-left: thick $success; padding: 0 0 0 1;
                                 margin: 0 0 0 0; }
    MatrixPane #recommendation.-shown { display: block; }
    MatrixPane #recommendation.-stop { border-left: thick $error; }
    MatrixPane #matrix-scroll { height: 1fr; }
    MatrixPane .hidden { display: none; }
    MatrixPane #matrix-placeholder { height: auto; color: $text-muted; padding: 1 0; }
    MatrixPane #matrix-workload { height: 1; margin: 1 0 0 0; }
    MatrixPane #matrix-table { height: auto; max-height: 14; }
    MatrixPane #matrix-noise { height: auto; color: $text-muted; }
    MatrixPane .section { height: auto; border: round $primary 50%; padding: 0 1; }
    MatrixPane #diagnostics { height: auto; border: none; padding: 0; }
    MatrixPane #diagnostics-title { height: 1; text-style: bold; }
    MatrixPane #results-checks { height: auto; }
    MatrixPane.-charts #recommendation, MatrixPane.-charts #matrix-scroll { display: none; }
    MatrixPane #matrix-charts { display: none; }
    MatrixPane.-charts #matrix-charts { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.matrix: dict[str, Any] | None = None
        self.workload_index = 0
        self.selected_arm: str | None = None
        self._table_width = 0
        self.load: dict[str, Any] | None = None  # report.json's "load" (LoadTable), a concurrency sweep only
        # /metrics windows per (arm, bench key): one list of points per repeat (BenchSample events, or a saved run)
        self.timeseries: dict[tuple[str, str], list[list[TimePoint]]] = {}
        self._sample_bench: dict[str, tuple[str, str]] = {}  # arm → (its bench label, key) being sampled now
        self.charts_shown = False

    def compose_body(self) -> ComposeResult:
        yield Static("", id="recommendation", markup=False)
        with VerticalScroll(id="matrix-scroll"):
            yield Static("Press n (or a) to run the steps; every arm on every workload, with 95 % intervals and "
                         "the tutorial's recommendation, appears here.", id="matrix-placeholder", markup=False)
            yield Static("", id="matrix-workload", classes="hidden", markup=False)
            yield DataTable(id="matrix-table", classes="hidden", cursor_type="row", zebra_stripes=False)
            yield Static("", id="matrix-noise", classes="hidden", markup=False)
            yield Static("", id="matrix-chart", classes="section hidden", markup=False)
            yield Static("", id="matrix-positions", classes="section hidden", markup=False)
            yield Static("", id="results-checks", classes="hidden", markup=False)
            yield from self.compose_tail()
            yield Static("", id="exports", classes="section hidden", markup=False)
        yield ChartsView(id="matrix-charts")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#matrix-chart").border_title = "Output throughput vs k"
        self.query_one("#matrix-positions").border_title = "Acceptance per position"
        self.query_one("#exports").border_title = "Export"

    def _draw_banner(self) -> None:
        """Once the matrix is shown, its recommendation leads the pane (a failed results step's diagnosis, e.g.
        acceptance below 30 %, is what the recommendation says; its panel stays under Diagnostics)."""
        if self.matrix is not None:
            try:
                self.query_one(FailureBanner).set_class(False, "-shown")
            except Exception:
                pass
            return
        super()._draw_banner()

    # -- events ------------------------------------------------------------------------------------------
    def handle(self, event: ev.Event) -> None:
        if isinstance(event, ev.MatrixTable):
            self.set_matrix(event.matrix)
        elif isinstance(event, ev.LoadTable):
            self.set_load(event.load)
        else:
            super().handle(event)

    @property
    def workloads(self) -> list[str]:
        return list((self.matrix or {}).get("workloads") or [])

    @property
    def workload(self) -> str | None:
        w = self.workloads
        return w[self.workload_index % len(w)] if w else None

    def set_matrix(self, matrix: dict[str, Any]) -> None:
        self.matrix = matrix
        if self.workload_index >= len(self.workloads):
            self.workload_index = 0
        self.selected_arm = self._default_arm()
        self._draw_banner()
        self._show("#matrix-placeholder", False)
        for sel in ("#matrix-workload", "#matrix-table", "#matrix-noise", "#matrix-chart", "#matrix-positions"):
            self._show(sel)
        self._draw()

    def set_load(self, load: dict[str, Any]) -> None:
        self.load = load if isinstance(load, dict) else None
        self._draw_charts()

    def set_timeseries(self, series: dict[tuple[str, str], list[Any]]) -> None:
        """A saved run's /metrics windows: {(arm, bench key): [each repeat's facts["timeseries"]]}."""
        self.timeseries = {k: [points_from_windows(ts) for ts in reps] for k, reps in series.items()}
        self._draw_charts()

    def add_samples(self, arm: str, samples: list[ev.BenchSample]) -> None:
        """Live BenchSample events of an arm's benches, filed under their bench key (the event's `key`, e.g.
        "sonnet@c4"; a new repeat each time the label changes)."""
        for s in samples:
            cur = self._sample_bench.get(arm)
            if cur is None or cur[0] != s.label:
                self._sample_bench[arm] = cur = (s.label, s.key)
                self.timeseries.setdefault((arm, s.key), []).append([])
            self.timeseries[(arm, cur[1])][-1].append(
                TimePoint(float(s.t_s), float(s.tokens_per_s),
                          float(s.acceptance_rate) if s.acceptance_rate is not None else None))

    def toggle_charts(self, shown: bool | None = None) -> bool:
        """`g`: the charts view of the bench key shown, or back to the table."""
        self.charts_shown = (not self.charts_shown) if shown is None else shown
        self.set_class(self.charts_shown, "-charts")
        self._draw_charts()
        return self.charts_shown

    def cycle_workload(self, delta: int = 1) -> str | None:
        """`]` / `[`: the next (previous) workload; the table, the bars, the noise floor and the charts follow."""
        if not self.workloads:
            return None
        self.workload_index = (self.workload_index + delta) % len(self.workloads)
        self._draw()
        return self.workload

    def select_arm(self, arm_id: str) -> None:
        self.selected_arm = arm_id
        table = self.query_one(DataTable)
        try:
            idx = table.get_row_index(arm_id)
        except Exception:
            idx = None
        if idx is not None and table.cursor_row != idx:
            table.move_cursor(row=idx)
        self._draw_positions()

    def _default_arm(self) -> str | None:
        m = self.matrix or {}
        rec = (m.get("recommendation") or {}).get(self.workload or "") or {}
        if rec.get("arm"):
            return rec["arm"]
        spec = [a["id"] for a in _arms(m) if a.get("kind") != "baseline"]
        return spec[0] if spec else None

    # -- drawing -------------------------------------------------------------------------------------------
    def _content_width(self) -> int:
        w = self.query_one("#matrix-scroll").size.width or max(20, self.size.width - 2)
        return max(20, w - 1)

    def on_resize(self) -> None:
        if self.matrix is not None:
            self._draw()

    def _draw(self) -> None:
        m = self.matrix
        if m is None:
            return
        recs = m.get("recommendation") or {}
        rec_box = self.query_one("#recommendation", Static)
        rec_box.update(recommendation_text(m))
        rec_box.set_class(True, "-shown")
        rec_box.set_class(any((r or {}).get("stop_tuning") for r in recs.values()), "-stop")
        w = self.workload or ""
        sel = Text(no_wrap=True, overflow="ellipsis")
        sel.append("Workload ", style="bold")
        for i, name in enumerate(self.workloads):
            if i:
                sel.append(" ")
            sel.append(f" {name} ", style="bold reverse" if name == w else "dim")
        if len(self.workloads) > 1:
            sel.append("  [ ] switch", style="dim")
        self.query_one("#matrix-workload", Static).update(sel)
        self._draw_table()
        self._draw_noise()
        self.query_one("#matrix-chart", Static).update(throughput_chart(m, self._content_width() - 4, w))
        self._draw_positions()
        self._draw_charts()

    def _draw_charts(self) -> None:
        if not self.charts_shown:
            return
        self.query_one(ChartsView).show(ChartData(self.matrix, self.load, self._series_by_key()), self.workload,
                                        self.selected_arm)

    def _series_by_key(self) -> dict[tuple[str, str], list[list[TimePoint]]]:
        """The /metrics series filed under the matrix's keys: a live bench's "sonnet@c1" is the matrix's "sonnet"
        in a run without a concurrency sweep (its benches still report their --max-concurrency)."""
        keys = set(self.workloads)
        out: dict[tuple[str, str], list[list[TimePoint]]] = {}
        for (arm, key), reps in self.timeseries.items():
            k = key if key in keys else split_key(key)[0]
            if k in keys:
                out.setdefault((arm, k), []).extend(reps)
        return out

    def _draw_table(self) -> None:
        m = self.matrix or {}
        width = self._content_width()
        cols, rows = matrix_rows(m, self.workload or "", width)
        if _table_width(cols, rows) > width:  # the wide columns do not fit: the six essential ones
            cols, rows = matrix_rows(m, self.workload or "", min(width, NARROW_WIDTH - 1))
        table = self.query_one(DataTable)
        table.clear(columns=True)
        # Each column's width from its own texts: the DataTable's auto widths, recomputed on idle, were lost when
        # a resize redrew the table (80x24 -> 120x40 and back left "bas" for "baseline", "1." for "1.69").
        for i, c in enumerate(cols):
            width = max([cell_len(c)] + [cell_len(cells[i]) for _arm, cells in rows])
            table.add_column(Text(c, justify="left" if i == 0 else "right"), key=f"c{i}", width=width)
        for arm_id, cells in rows:
            rendered = [Text(cells[0], style="bold" if cells[0].startswith("★") else "")]
            rendered += [Text(v, justify="right") for v in cells[1:]]
            table.add_row(*rendered, key=arm_id)
        if self.selected_arm is not None:
            try:
                table.move_cursor(row=table.get_row_index(self.selected_arm), animate=False)
            except Exception:
                pass

    def _draw_noise(self) -> None:
        m = self.matrix or {}
        nf = (m.get("noise_floor") or {}).get(self.workload or "") or {}
        t = Text()
        t.append("Noise floor ", style="bold")
        if _num(nf.get("ratio")) is None:
            t.append("n/a: it needs two or more baseline repeats")
        else:
            t.append(f"{nf['ratio']:.2f}x {_interval(nf.get('ci95'), 2)}".rstrip())
            t.append(" baseline vs baseline: a speedup inside it is noise")
        cov = (m.get("coverage") or {}).get(self.workload or "")
        if cov:
            t.append(f"\n{cov}")
        for note in (m.get("notes") or {}).get(self.workload or "") or []:
            t.append(f"\nNote: {note}")
        self.query_one("#matrix-noise", Static).update(t)

    def _draw_positions(self) -> None:
        if self.matrix is None:
            return
        self.query_one("#matrix-positions", Static).update(
            positions_text(self.matrix, self.selected_arm, self.workload or "", self._content_width() - 4))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        key = event.row_key.value if event.row_key is not None else None
        if key and key != self.selected_arm:
            self.selected_arm = key
            self._draw_positions()


def matrix_summary(matrix: dict[str, Any]) -> str:
    """A one-line summary (the browse mode's results title when the report has no step summary)."""
    recs = matrix.get("recommendation") or {}
    parts = []
    for w in matrix.get("workloads") or []:
        r = recs.get(w) or {}
        parts.append(f"{w}: {r.get('text') or 'n/a'}")
    return "; ".join(parts)


__all__ = ["MatrixPane", "matrix_rows", "throughput_chart", "positions_text", "recommendation_text",
           "interval_bar", "matrix_summary"]
