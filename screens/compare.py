"""Saved runs side by side (`specdec-tui compare RUN_DIR RUN_DIR…` in the app): one column per run, one row per
number: profile, verdict, baseline and speculative output tok/s, speedup, acceptance, TPOT — every column and row of
headless `compare` (tui.core.results.compare); the numbers scroll sideways under fixed row labels.

`CompareScreen(reports)` takes the loaded report dicts (report.json of each run, as `tui.core.results.compare.load_run`
returns them) and works pushed on any app; `CompareApp(reports)` hosts it alone (what `compare` without
--headless runs). A tune run has a column per arm and workload.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tui.core.results.compare import column_title, compare_columns, compare_rows
from tui.widgets.common import status_style


def run_label(report: dict[str, Any], index: int) -> str:
    """The run directory's name (a timestamp and the profile), else #index."""
    rd = report.get("run_dir")
    return Path(str(rd)).name if rd else f"run {index + 1}"


SCREEN_ROWS_LEFT_OUT = ("Verdict", "Target")  # long sentences: in the legend under the table
LABEL_WIDTH = 16  # the row labels' column, fixed while the numbers scroll sideways
CELL_WIDTH = 21  # a number with its interval ("112.1 [107.6, 116.6]") on one row; longer text wraps


def _short_title(title: str) -> str:
    """A run directory's name without its timestamp prefix (20260101-130000-demo → demo)."""
    return re.sub(r"^\d{8}-\d{6}-", "", title)


def short_names(names: list[str]) -> dict[str, str]:
    """Each run's name for a column head: without its timestamp where that leaves it unique, else whole (two
    runs of the same profile, 20260101-130000-demo and 20260102-090000-demo, are not both "demo")."""
    short = {n: _short_title(n) for n in names}
    count: dict[str, int] = {}
    for n in dict.fromkeys(names):
        count[short[n]] = count.get(short[n], 0) + 1
    return {n: (s if count[s] == 1 else n) for n, s in short.items()}


def compare_grid(reports: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, ...]]]:
    """Every column and row of headless `compare` (tui.core.results.compare): the column heads (the run, and its
    arm and workload where it has several) and the rows (label, one cell per column), less the per-run sentences
    the legend carries (SCREEN_ROWS_LEFT_OUT)."""
    cols = compare_columns(reports)
    multi: dict[str, int] = {}
    for c in cols:
        multi[c["run"]] = multi.get(c["run"], 0) + 1
    names = short_names([c["run"] for c in cols])
    heads = [names[c["run"]] + column_title(c, multi)[len(c["run"]):] for c in cols]
    rows = [tuple(r) for r in compare_rows(cols) if r[0] not in SCREEN_ROWS_LEFT_OUT]
    return heads, rows


def verdicts_text(reports: list[dict[str, Any]], labels: list[str], paths: list[str]) -> Text:
    """Each run's verdict (✓/✗ and weight as well as colour) and its directory."""
    t = Text()
    t.append("Runs:", style="bold")
    names = short_names(labels)
    for rep, lab, path in zip(reports, labels, paths):
        v = rep.get("verdict") or {}
        ok = bool(v.get("ok")) if isinstance(v, dict) else False
        t.append(f"\n{'✓' if ok else '✗'} {names[lab]}: ", style=status_style("green") if ok else status_style("bold red"))
        t.append(str((v or {}).get("text") or "no verdict"))
        if path and path != lab:
            t.append(f"\n  {path}", style="dim")
    return t


class CompareScreen(Screen[None]):
    """Runs as columns, every one of them: the numbers scroll sideways (← →, a column at a time) under fixed row
    labels, and up and down; the runs' verdicts and directories are listed under the table. esc / q closes it (in
    CompareApp: quits)."""

    DEFAULT_CSS = """
    CompareScreen { layout: vertical; }
    CompareScreen #compare-title { height: 1; padding: 0 1; background: $panel; text-style: bold;
                                   text-wrap: nowrap; text-overflow: ellipsis; }
    CompareScreen #compare-table { height: 1fr; min-height: 6; margin: 0 1; }
    CompareScreen #compare-legend-scroll { height: auto; max-height: 35%; padding: 0 1; margin: 1 0 0 0; }
    CompareScreen #compare-legend { height: auto; color: $text-muted; }
    """
    BINDINGS = [Binding("escape,q", "close", "Close", id="compare-close")]

    def __init__(self, reports: list[dict[str, Any]], labels: list[str] | None = None,
                 paths: list[str] | None = None) -> None:
        super().__init__()
        self.reports = list(reports)
        self.labels = list(labels) if labels else [run_label(r, i) for i, r in enumerate(self.reports)]
        self.paths = list(paths) if paths else [str(r.get("run_dir") or "") for r in self.reports]
        self.heads, self.rows = compare_grid(self.reports)

    def compose(self) -> ComposeResult:
        n = len(self.heads)
        yield Static(f"specdec-tui · compare {len(self.reports)} runs · {n} column{'s' if n != 1 else ''}"
                     + (" (← → scroll)" if n > 1 else ""), id="compare-title", markup=False)
        table: DataTable = DataTable(id="compare-table", cursor_type="column", fixed_columns=1, header_height=2,
                                     zebra_stripes=False)
        table.add_column("", width=LABEL_WIDTH, key="label")
        for i, head in enumerate(self.heads):
            wide = max(len(line) for line in [*head.split("\n"), *(r[i + 1] for r in self.rows)])
            table.add_column(Text(head), width=min(CELL_WIDTH, max(wide, 6)), key=f"col-{i}")
        for row in self.rows:
            table.add_row(Text(row[0], style="bold"), *(Text(c) for c in row[1:]), height=None, key=row[0])
        yield table
        with VerticalScroll(id="compare-legend-scroll"):
            legend = verdicts_text(self.reports, self.labels, self.paths)
            legend.append("\n`--open RUN_DIR` shows one run's steps, logs and matrix; `compare --json` the numbers "
                          "for machines.", style="dim")
            yield Static(legend, id="compare-legend")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        table = self.query_one("#compare-table", DataTable)
        table.focus()
        if self.heads:
            table.move_cursor(column=1)  # the first run's column, not the row labels

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


__all__ = ["CompareScreen", "CompareApp", "run_compare_app", "compare_grid", "run_label"]
