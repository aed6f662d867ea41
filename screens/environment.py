"""Step 2 — Environment: the facts as a table (✓ ! ✗ ·) and the selected row's detail and remedy."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Static

from tui.core import events as ev
from tui.widgets.facts import FactTable

from .base import StepPane


class EnvironmentPane(StepPane):
    DEFAULT_CSS = """
    EnvironmentPane > .pane-notes { height: auto; max-height: 3; color: $text-muted; }
    """

    def __init__(self) -> None:
        super().__init__("env", "Environment")

    def compose_body(self) -> ComposeResult:
        yield FactTable(id="env-facts", empty="Press n to check the instance, Neuron SDK, vLLM, disks and port.")
        yield Static("", classes="pane-notes", markup=False)

    def reset(self) -> None:
        self.query_one(FactTable).clear()
        self.query_one(".pane-notes", Static).update("")

    def handle(self, event: ev.Event) -> None:
        if isinstance(event, ev.Fact):
            self.query_one(FactTable).add(event)
        elif isinstance(event, ev.Notice):
            self.query_one(".pane-notes", Static).update(f"» {event.text}")
