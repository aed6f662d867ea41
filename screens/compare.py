"""Saved runs side by side (`specdec-tui compare RUN_DIR RUN_DIR…` in the app): one column per run, one row per
number: profile, verdict, baseline and speculative output tok/s, speedup, acceptance, TPOT — the columns and rows of
headless `compare` (tui.core.results.compare).

`CompareScreen(reports)` takes the loaded report dicts (report.json of each run, as `tui.core.results.compare.load_run`
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

from tui.core.results.compare import column_title, compare_columns, compare_rows
from tui.widgets.common import status_style


def run_label(report: dict[str, Any], index: int) -> str:
    """The run directory's name (a timestamp and the profile), else #index."""
    rd = report.get("run_dir")
    return Path(str(rd)).name if rd else f"run {index + 1}"


SCREEN_ROWS_LEFT_OUT = ("Verdict", "Target")  # long sentences: in the legend under the table


def screen_columns(reports: list[dict[str, Any]], width: int) -> list[dict[str, Any]]:
    """headless compare's columns; when they do not fit the width, a tune run keeps only its recommended arm per
    workload (`compare --headless` prints every arm)."""
    cols = compare_columns(reports)
    if len(cols) > max(1, (width - 18) // 15):
        cols = [c for c in cols if c.get("recommended") is not False]
    return cols


def _short_title(title: str) -> str:
    """A run directory's name without its timestamp prefix (20260101-130000-demo → demo)."""
    import re

    return re.sub(r"^\d{8}-\d{6}-", "", title)


def short_names(names: list[str]) -> dict[str, str]:
    """Each run's name for a column head: without its timestamp where that leaves it unique, else whole (two
    runs of the same profile, 20260101-130000-demo and 20260102-090000-demo, are not both "demo")."""
    short = {n: _short_title(n) for n in names}
    count: dict[str, int] = {}
    for n in dict.fromkeys(names):
        count[short[n]] = count.get(short[n], 0) + 1
    return {n: (s if count[s] == 1 else n) for n, s in short.items()}


def compare_table(reports: list[dict[str, Any]], width: int = 200) -> Table:
    """The columns and rows of headless `compare` (tui.core.results.compare), fitted to the width."""
    cols = screen_columns(reports, width)
    multi: dict[str, int] = {}
    for c in cols:
        multi[c["run"]] = multi.get(c["run"], 0) + 1
    table = Table(box=box.SIMPLE_HEAD, expand=True, show_edge=False, pad_edge=False)
    table.add_column("", no_wrap=True, style="bold", min_width=10, max_width=16)
    names = short_names([c["run"] for c in compare_columns(reports)])
    for c in cols:
        title = column_title(c, multi)
        table.add_column(names[c["run"]] + title[len(c["run"]):], ratio=1, overflow="fold")
    for label, *cells in compare_rows(cols):
        if label in SCREEN_ROWS_LEFT_OUT:
            continue
        table.add_row(label, *(Text(c) for c in cells))
    return table


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
            yield Static(compare_table(self.reports, self.app.size.width), id="compare-table")
            legend = verdicts_text(self.reports, self.labels, self.paths)
            legend.append("\nA tune run too wide for the screen shows its recommended arms; `compare --headless` "
                          "prints every arm, `--open RUN_DIR` one run's steps, logs and matrix.", style="dim")
            yield Static(legend, id="compare-legend")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#compare-scroll").focus()

    def on_resize(self) -> None:
        self.query_one("#compare-table", Static).update(compare_table(self.reports, self.size.width))

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


__all__ = ["CompareScreen", "CompareApp", "run_compare_app", "compare_table", "screen_columns", "run_label"]
