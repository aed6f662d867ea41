"""Facts as a table (✓ ! ✗ ·) with the selected row's detail and remedy underneath."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ..core.events import Fact
from .common import FACT_ICONS, status_style

_FACT_STYLE = {"pass": "green", "warn": "bold yellow", "fail": "bold red", "info": "blue"}


def facts_text(facts: "list[Any]", icon_style: str | None = None, remedy_always: bool = False) -> Text:
    """Facts as lines `✓ name: value — detail`, with `fix: remedy` under failing or warning ones.
    icon_style overrides the per-status icon colour (e.g. "bold red" for a problems list)."""
    t = Text()
    for i, f in enumerate(facts):
        if i:
            t.append("\n")
        t.append(f"{FACT_ICONS.get(f.status, '?')} {f.name}: ", style=icon_style or "bold")
        t.append(f.value)
        if f.detail:
            t.append(f" — {f.detail}", style="dim")
        if f.remedy and (remedy_always or f.status in ("fail", "warn")):
            t.append(f"\n  fix: {f.remedy}", style="italic")
    return t


def fact_icon(status: str) -> Text:
    return Text(FACT_ICONS.get(status, "?"), style=status_style(_FACT_STYLE.get(status, "")))


class FactTable(Vertical):
    DEFAULT_CSS = """
    FactTable { height: 1fr; }
    FactTable > DataTable { height: 1fr; min-height: 3; }
    FactTable > .fact-detail { height: auto; max-height: 8; border-top: solid $primary 50%; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None, empty: str = "No checks yet."):
        super().__init__(id=id)
        self.facts: list[Fact] = []
        self.empty = empty

    def compose(self) -> ComposeResult:
        table: DataTable = DataTable(cursor_type="row", zebra_stripes=False, show_cursor=True)
        table.add_column("", width=1, key="icon")
        table.add_column("Check", key="name")
        table.add_column("Value", key="value")
        yield table
        yield Static(self.empty, classes="fact-detail", markup=False)

    def clear(self) -> None:
        self.facts.clear()
        self.query_one(DataTable).clear()
        self.query_one(".fact-detail", Static).update(self.empty)

    def add(self, fact: Fact) -> None:
        table = self.query_one(DataTable)
        self.facts.append(fact)
        table.add_row(fact_icon(fact.status), fact.name, fact.value, key=str(len(self.facts) - 1))
        if len(self.facts) == 1:
            self._show(0)

    def counts(self) -> dict[str, int]:
        out = {"pass": 0, "warn": 0, "fail": 0, "info": 0}
        for f in self.facts:
            out[f.status] = out.get(f.status, 0) + 1
        return out

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show(event.cursor_row)

    def _show(self, idx: int) -> None:
        if not (0 <= idx < len(self.facts)):
            return
        f = self.facts[idx]
        t = Text()
        t.append(f"{FACT_ICONS.get(f.status, '?')} {f.name}: ", style="bold")
        t.append(f.value)
        if f.detail:
            t.append("\n")
            t.append(f.detail)
        if f.remedy:
            t.append("\nRemedy: ", style="bold")
            t.append(f.remedy)
        self.query_one(".fact-detail", Static).update(t)
