"""Step 6 — Results: the speedup headline, the side-by-side table, the acceptance panel, a chart of
throughput and TPOT, the diagnostics as panels (one per diagnosis, coloured by severity, with evidence
and remedy), the tutorial's comparison snippet and the exported files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Digits, Static

from tui.core import events as ev
from tui.widgets.facts import facts_text
from tui.widgets.charts import AcceptanceBars, CompareChart
from tui.widgets.common import fmt_num, shorten_path
from tui.widgets.diagnosis import DiagnosisPanel

from .base import StepPane

_SEV_ORDER = {"error": 0, "warning": 1, "info": 2}


def export_paths(report_json: str | Path) -> dict[str, Path]:
    d = Path(report_json).parent
    return {"report.md": d / "report.md", "report.json": d / "report.json", "summary.csv": d / "summary.csv"}

# At 80 columns the pane is about 52 wide: labels are shortened on purpose, never cut mid-unit.
NARROW_WIDTH = 64
SHORT_LABELS = {
    "Output throughput (tok/s)": "Output tok/s",
    "Request throughput (req/s)": "Requests/s",
    "Mean ITL, per chunk (ms)": "Mean ITL/chunk (ms)",
    "Median ITL, per chunk (ms)": "Med. ITL/chunk (ms)",
    "P90 ITL, per chunk (ms)": "P90 ITL/chunk (ms)",
    "P99 ITL, per chunk (ms)": "P99 ITL/chunk (ms)",
    "Per-position acceptance (%)": "Accept. per pos. (%)",
    "Acceptance rate (%)": "Acceptance (%)",
    "Acceptance length": "Accept. length",
}


class ResultsBase(StepPane):
    """What both results panes share (the two-arm comparison and the tune matrix): the checks that need
    attention, the diagnostics as panels (errors first) and the exported files."""

    def __init__(self) -> None:
        super().__init__("results", "Results")
        self.diagnoses: list[ev.Diagnosis] = []
        self.checks: list[ev.Fact] = []
        self.exports: dict[str, Path] = {}
        self.exports_final = False

    def _show(self, selector: str, shown: bool = True) -> None:
        self.query_one(selector).set_class(not shown, "hidden")

    def compose_tail(self) -> ComposeResult:
        with Vertical(id="diagnostics", classes="hidden"):
            yield Static("", id="diagnostics-title", markup=False)

    def reset(self) -> None:
        self.checks.clear()
        self._draw_checks()

    def handle(self, event: ev.Event) -> None:
        if isinstance(event, ev.Diagnosis):
            self.add_diagnosis(event)
        elif isinstance(event, ev.Fact):
            self.checks.append(event)
            self._draw_checks()
        elif isinstance(event, ev.RunFinished) and event.report_path:
            self.set_exports(export_paths(event.report_path), final=True)

    def drop_diagnoses(self, step: str) -> None:
        """A step is retried: its earlier attempt's diagnoses no longer apply."""
        self.diagnoses = [d for d in self.diagnoses if d.step != step]
        for panel in list(self.query_one("#diagnostics", Vertical).query(DiagnosisPanel)):
            if panel.diag.step == step:
                panel.remove()
        self._draw_diagnostics_title()

    def _draw_diagnostics_title(self) -> None:
        n = len(self.diagnoses)
        errs = sum(1 for d in self.diagnoses if d.severity == "error")
        self.query_one("#diagnostics-title", Static).update(
            f"Diagnostics: {n} issue{'s' if n != 1 else ''}" + (f", {errs} error{'s' if errs != 1 else ''}" if errs else ""))
        self._show("#diagnostics", n > 0)

    def add_diagnosis(self, diag: ev.Diagnosis) -> None:
        if any(d.id == diag.id and d.step == diag.step for d in self.diagnoses):
            return
        self.diagnoses.append(diag)
        box_ = self.query_one("#diagnostics", Vertical)
        panels = list(box_.query(DiagnosisPanel))
        # Keep the panels ordered by severity (errors first), then by arrival.
        before = next((p for p in panels if _SEV_ORDER.get(p.diag.severity, 3) > _SEV_ORDER.get(diag.severity, 3)),
                      None)
        panel = DiagnosisPanel(diag)
        if before is not None:
            box_.mount(panel, before=before)
        else:
            box_.mount(panel)
        self._draw_diagnostics_title()

    def _draw_checks(self) -> None:
        # The passing checks repeat the headline; show only what needs attention.
        shown = [f for f in self.checks if f.status in ("fail", "warn")]
        t = facts_text(shown)
        self.query_one("#results-checks", Static).update(t)
        self._show("#results-checks", bool(shown))

    def set_exports(self, paths: dict[str, Path], final: bool) -> None:
        self.exports = dict(paths)
        self.exports_final = final
        self._draw_exports()
        self._show("#exports")

    def _draw_exports(self) -> None:
        """The exported files, their paths shortened from the middle to the pane's width."""
        box = self.query_one("#exports", Static)
        width = box.content_size.width  # 0 while the pane is hidden: drawn again on its resize
        t = Text()
        t.append("Report written" if self.exports_final else "Interim report written (the run is still open)",
                 style="bold")
        for name, p in self.exports.items():
            t.append(f"\n{name:<12} ", style="bold")
            t.append(shorten_path(str(p), width - 13) if width > 13 else str(p))
        box.update(t)


class ResultsPane(ResultsBase):
    DEFAULT_CSS = """
    ResultsPane #results-scroll { height: 1fr; }
    ResultsPane .section { height: auto; border: round $primary 50%; padding: 0 1; margin: 0 0 0 0; }
    ResultsPane .hidden { display: none; }
    ResultsPane #headline { height: auto; }
    ResultsPane #headline Digits { width: auto; margin: 0 1 0 0; }
    ResultsPane #headline-text { width: 1fr; height: auto; }
    ResultsPane #results-placeholder { height: auto; color: $text-muted; padding: 1 0; }
    ResultsPane #diagnostics { height: auto; border: none; padding: 0; }
    ResultsPane #diagnostics-title { height: 1; text-style: bold; }
    ResultsPane #results-checks { height: auto; }
    """

    def __init__(self, num_spec: int | None = None) -> None:
        super().__init__()
        self.num_spec = num_spec
        self.payload: dict[str, Any] | None = None
        self.snippet = ""
        self.speedup: float | None = None

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="results-scroll"):
            yield Static("Press n (or a) to run the steps; the comparison of the baseline and EAGLE3 "
                         "benchmarks appears here.", id="results-placeholder", markup=False)
            with Horizontal(id="headline", classes="hidden"):
                yield Digits("", id="speedup-digits")
                yield Static("", id="headline-text", markup=False)
            yield Static("", id="results-checks", classes="hidden", markup=False)
            yield Static("", id="comparison", classes="section hidden", markup=False)
            yield AcceptanceBars(id="acceptance", classes="section hidden")
            yield CompareChart(id="chart", classes="section hidden")
            yield from self.compose_tail()
            yield Static("", id="snippet", classes="section hidden", markup=False)
            yield Static("", id="exports", classes="section hidden", markup=False)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#acceptance").border_title = "Acceptance (EAGLE3)"
        self.query_one("#chart").border_title = "Throughput and TPOT"
        self.query_one("#comparison").border_title = "Baseline vs EAGLE3"
        self.query_one("#snippet").border_title = "Tutorial comparison (comparison.txt)"
        self.query_one("#exports").border_title = "Export"

    # -- events ------------------------------------------------------------------------------------------
    def handle(self, event: ev.Event) -> None:
        if isinstance(event, ev.ComparisonTable):
            self.set_comparison({"rows": [list(r) for r in event.rows], "comparison": event.comparison,
                                 "notes": list(event.notes), "runs": event.runs})
        elif isinstance(event, ev.Snippet):
            self.snippet = event.text
            self.query_one("#snippet", Static).update(self.snippet)
            self._show("#snippet")
        else:
            super().handle(event)

    def set_comparison(self, payload: dict[str, Any]) -> None:
        self.payload = payload
        self._show("#results-placeholder", False)
        comp = payload.get("comparison") or {}
        runs = payload.get("runs") or {}
        b, e = runs.get("baseline") or {}, runs.get("eagle3") or {}
        sp = comp.get("output_throughput_speedup")
        self.speedup = sp
        self.query_one("#speedup-digits", Digits).update(f"{sp:.2f}x" if isinstance(sp, (int, float)) else "-")
        t = Text()
        if isinstance(sp, (int, float)):
            t.append("EAGLE3 output throughput speedup\n", style="bold")
            t.append(f"{fmt_num(b.get('output_throughput'))} → {fmt_num(e.get('output_throughput'))} tok/s")
            t.append(f"\nmedian TPOT {fmt_num(b.get('median_tpot_ms'))} → {fmt_num(e.get('median_tpot_ms'))} ms",
                     style="dim")
        else:
            t.append("speedup unavailable", style="bold")
        self.query_one("#headline-text", Static).update(t)
        self._show("#headline")

        self._draw_table()
        acc = self.query_one(AcceptanceBars)
        acc.set_values(e.get("acceptance_rate"), e.get("acceptance_length"), e.get("per_position_acceptance"),
                       self.num_spec, e.get("acceptance_source"))
        self._show("#acceptance")
        self.query_one(CompareChart).set_runs(runs)
        self._show("#chart")

    def on_resize(self) -> None:
        if self.payload is not None:
            self._draw_table()
        if self.exports:
            self._draw_exports()

    def _draw_table(self) -> None:
        """The comparison table; below NARROW_WIDTH columns the labels are abbreviated on purpose (values
        and units are never cut)."""
        payload = self.payload or {}
        narrow = 0 < self.size.width < NARROW_WIDTH
        table = Table(box=box.SIMPLE_HEAD, expand=True, show_edge=False, pad_edge=False)
        table.add_column("Metric", ratio=1, no_wrap=True, overflow="ellipsis")
        table.add_column("Baseline", justify="right", min_width=8, no_wrap=True)
        table.add_column("EAGLE3", justify="right", min_width=8, no_wrap=True)
        for label, bv, xv in payload.get("rows") or []:
            label = str(label)
            table.add_row(SHORT_LABELS.get(label, label) if narrow else label, str(bv), str(xv))
        cmp_static = self.query_one("#comparison", Static)
        notes = payload.get("notes") or []
        if notes:
            from rich.console import Group

            cmp_static.update(Group(table, Text("\n".join(notes), style="dim italic")))
        else:
            cmp_static.update(table)
        self._show("#comparison")
