"""What every step pane shares: a title line with the step's state and a hint for the next key."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tui.core import events as ev
from tui.widgets.common import STEP_ICONS, fmt_secs

STATE_WORDS = {
    "pending": "not run yet",
    "running": "running…",
    "passed": "passed",
    "warned": "passed with warnings",
    "failed": "failed",
    "skipped": "skipped",
    "unavailable": "not available in this version",
    "interrupted": "interrupted",
    "excluded": "not part of this run (--steps)",
}


class StepPane(Vertical):
    """Base pane. Subclasses add their body in `compose_body` and react to events in `handle`."""

    DEFAULT_CSS = """
    StepPane { height: 1fr; padding: 0 1; }
    StepPane > .pane-title { height: auto; max-height: 2; }
    """

    STATE_WORDS: dict[str, str] = {}

    def __init__(self, step: str, title: str, *, id: str | None = None):
        super().__init__(id=id or f"pane-{step}")
        self.step = step
        self.title = title
        self.state = "pending"
        self.seconds: float | None = None
        self.summary = ""
        self.hint = ""

    def compose(self) -> ComposeResult:
        yield Static("", classes="pane-title", markup=False)
        yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.refresh_title()

    # -- state ---------------------------------------------------------------------------------------
    def set_state(self, state: str, seconds: float | None = None, summary: str = "") -> None:
        self.state = state
        if seconds is not None:
            self.seconds = seconds
        if summary or state == "running":
            self.summary = summary
        self.refresh_title()

    def set_hint(self, hint: str) -> None:
        self.hint = hint
        self.refresh_title()

    def refresh_title(self) -> None:
        t = Text(overflow="ellipsis")
        t.append(self.title, style="bold underline")
        icon = STEP_ICONS.get(self.state, "")
        style = {"passed": "green", "warned": "yellow", "failed": "bold red", "interrupted": "magenta",
                 "running": "bold cyan"}.get(self.state, "dim")
        words = self.STATE_WORDS.get(self.state) or STATE_WORDS.get(self.state, self.state)
        t.append(f"  {icon} {words}", style=style)
        if self.seconds is not None and self.state not in ("pending", "running", "excluded"):
            t.append(f" in {fmt_secs(self.seconds)}", style="dim")
        if self.summary:
            t.append(f" — {self.summary}")
        if self.hint and self.state not in ("running",):
            t.append(f"  {self.hint}", style="italic dim")
        try:
            self.query_one(".pane-title", Static).update(t)
        except Exception:
            pass

    # -- events -----------------------------------------------------------------------------------------
    def reset(self) -> None:
        """The step is about to run again (retry): forget the previous attempt."""

    def handle(self, event: ev.Event) -> None:
        """A low-rate engine event for this step."""

    def progress(self, event: ev.Progress) -> None:
        """The latest Progress of a task of this step (coalesced)."""
