"""Saved runs side by side (`specdec-tui compare RUN_DIR RUN_DIR…` in the app): one column per run, one row per
number: profile, verdict, baseline and speculative output tok/s, speedup, acceptance, TPOT — the columns and rows of
headless `compare` (tui.core.compare).

`CompareScreen(reports)` takes the loaded report dicts (report.json of each run, as `tui.core.compare.load_run`
returns them) and works pushed on any app; `CompareApp(reports)` hosts it alone (what `compare` without
--headless runs). A tune run has a column per arm and workload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from tui.core.compare import column_title, compare_columns, compare_rows
from tui.widgets.common import status_style


def run_label(report: dict[str, Any], index: int) -> str:
    """The run directory's name (a timestamp and the profile), else #index."""
    rd = report.get("run_dir")
    return Path(str(rd)).name if rd else f"run {index + 1}"


def compare_table(reports: list[dict[str, Any]]) -> Table:
    """The same columns and rows as headless `compare` (tui.core.compare): one column per run (a tune run: per
    arm and workload), the verdict styled by glyph and weight as well as colour."""
    cols = compare_columns(reports)
    multi: dict[str, int] = {}
    for c in cols:
        multi[c["run"]] = multi.get(c["run"], 0) + 1
    table = Table(box=box.SIMPLE_HEAD, expand=True, show_edge=False, pad_edge=False)
    table.add_column("", no_wrap=True, style="bold", min_width=10, max_width=16)
    for c in cols:
        table.add_column(column_title(c, multi), ratio=1, overflow="fold")
    for label, *cells in compare_rows(cols):
        styled = []
        for c in cells:
            if label == "Verdict" and c[:1] in ("✓", "✗"):
                styled.append(Text(c, style=status_style("green") if c.startswith("✓") else status_style("bold red")))
            else:
                styled.append(Text(c))
        table.add_row(label, *styled)
    return table


class CompareScreen(Screen[None]):
    """Runs as columns. esc / q closes it (in CompareApp: quits)."""

    DEFAULT_CSS = """
    CompareScreen { layout: vertical; }
    CompareScreen #compare-title { height: 1; padding: 0 1; background: $panel; text-style: bold; }
    CompareScreen #compare-scroll { height: 1fr; padding: 0 1; }
    CompareScreen #compare-table { height: auto; }
    CompareScreen #compare-legend { height: auto; color: $text-muted; margin: 1 0 0 0; }
    """
    BINDINGS = [Binding("escape,q", "close", "Close", id="compare-close")]

    def __init__(self, reports: list[dict[str, Any]], labels: list[str] | None = None,
                 paths: list[str] | None = None) -> None:
        super().__init__()
        self.reports = list(reports)
        self.labels = list(labels) if labels else [run_label(r, i) for i, r in enumerate(self.reports)]
        self.paths = list(paths) if paths else [str(r.get("run_dir") or "") for r in self.reports]

    def compose(self) -> ComposeResult:
        yield Static(f"specdec-tui · compare {len(self.reports)} runs", id="compare-title", markup=False)
        with VerticalScroll(id="compare-scroll"):
            yield Static(compare_table(self.reports), id="compare-table")
            legend = Text()
            legend.append("Runs: ", style="bold")
            for lab, path in zip(self.labels, self.paths):
                legend.append(f"\n {lab}")
                if path and path != lab:
                    legend.append(f"  {path}", style="dim")
            legend.append("\nspecdec-tui --open RUN_DIR shows one run's steps, logs and matrix.", style="dim")
            yield Static(legend, id="compare-legend")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#compare-scroll").focus()

    def action_close(self) -> None:
        if len(self.app.screen_stack) > 2 or not isinstance(self.app, CompareApp):
            self.app.pop_screen()
        else:
            self.app.exit(0)


class CompareApp(App[int]):
    """`specdec-tui compare RUN_DIR RUN_DIR…` with a terminal: the CompareScreen alone."""

    TITLE = "specdec-tui compare"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", id="quit", priority=True)]

    def __init__(self, reports: list[dict[str, Any]], labels: list[str] | None = None,
                 paths: list[str] | None = None) -> None:
        super().__init__()
        self.reports, self.labels, self.paths = reports, labels, paths

    def on_mount(self) -> None:
        self.push_screen(CompareScreen(self.reports, self.labels, self.paths))

    def action_quit(self) -> None:  # type: ignore[override]
        self.exit(0)


def run_compare_app(reports: list[dict[str, Any]], labels: list[str] | None = None,
                    paths: list[str] | None = None) -> int:
    result = CompareApp(reports, labels, paths).run()
    return 0 if result is None else int(result)


__all__ = ["CompareScreen", "CompareApp", "run_compare_app", "compare_table", "run_label"]
