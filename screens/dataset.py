"""Step 4 — Dataset: download progress with bytes/s, then the verified hash, size and lines."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Static

from tui.core import events as ev
from rich.text import Text

from tui.widgets.facts import FactTable, fact_icon
from tui.widgets.progress import ProgressLine

from .base import StepPane


class DatasetPane(StepPane):
    DEFAULT_CSS = """
    DatasetPane > ProgressLine { margin: 1 0 0 0; }
    DatasetPane > #dataset-hash { height: auto; margin: 0 0 1 0; }
    DatasetPane > .pane-notes { height: auto; max-height: 3; color: $text-muted; }
    """

    def __init__(self, url: str = "") -> None:
        super().__init__("dataset", "Dataset")
        self.url = url

    def compose_body(self) -> ComposeResult:
        yield ProgressLine("Fetch", id="dataset-progress", bar_width=16, idle_text=self.url or "not started")
        yield Static("", id="dataset-hash", markup=False)
        yield FactTable(id="dataset-facts", empty="Press n to fetch the sonnet dataset and verify its sha256.")
        yield Static("", classes="pane-notes", markup=False)

    def set_url(self, url: str) -> None:
        self.url = url
        line = self.query_one(ProgressLine)
        if not line.text:
            line.set_text(url or "not started")

    def reset(self) -> None:
        self.query_one(FactTable).clear()
        self.query_one(ProgressLine).set_text(self.url or "starting")
        self.query_one(".pane-notes", Static).update("")
        self.query_one("#dataset-hash", Static).update("")

    def handle(self, event: ev.Event) -> None:
        if isinstance(event, ev.Fact):
            self.query_one(FactTable).add(event)
            if event.name == "sha256":
                t = Text()
                t.append("sha256 ", style="bold")
                t.append_text(fact_icon(event.status))
                t.append(f" {event.value}")
                if len(event.detail) == 64 or " " in event.detail:
                    t.append(f"  {event.detail}", style="dim")
                self.query_one("#dataset-hash", Static).update(t)
        elif isinstance(event, ev.Notice):
            self.query_one(".pane-notes", Static).update(f"» {event.text}")

    def progress(self, event: ev.Progress) -> None:
        self.query_one(ProgressLine).set(event.completed, event.total, event.unit, event.rate,
                                         None if event.done else event.eta_s,
                                         extra="done" if event.done else "")
