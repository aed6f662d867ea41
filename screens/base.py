"""What every step pane shares: a title line with the step's state and a hint for the next key, and a
failure banner right under it: when the step fails, the pane starts with the diagnosis (title, the
decisive evidence, the remedy), visible without scrolling at 80×24."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tui.core import events as ev
from tui.core.serverlog.diagnostics import decisive_first
from tui.widgets.common import STEP_ICONS, fit_lines, fmt_secs, status_style

from .knobs import setting_hint

FAILED_STATES = ("failed", "unavailable")
EVIDENCE_LINES = 2
EVIDENCE_CHARS = 220
TITLE_ROWS = 2  # a pane's title line: its title, state, summary and hint


def decisive_evidence(evidence: tuple[str, ...] | list[str], n: int = EVIDENCE_LINES) -> list[str]:
    """The evidence lines that carry the failure (an error signature) first, then the rest, at most n."""
    return decisive_first(evidence)[:n]


def _clip(text: str, limit: int = EVIDENCE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class FailureBanner(Static):
    """The lead problem of a failed step: a diagnosis (errors first) or else the first failed check."""

    DEFAULT_CSS = """
    FailureBanner { height: auto; display: none; border-left: thick $error; padding: 0 0 0 1; margin: 0 0 1 0; }
    FailureBanner.-shown { display: block; }
    """

    def __init__(self, *args, compact: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # compact: each evidence line on one row, cut at the banner's width (a server step's pane, where the log
        # right under the banner shows those lines whole); the title and the fix always wrap.
        self.compact = compact
        self._problem: tuple[ev.Diagnosis | None, ev.Fact | None] = (None, None)

    def on_resize(self) -> None:
        if self.compact and self.has_class("-shown"):
            self.show_problem(*self._problem)

    def _limit(self) -> int:
        width = self.content_size.width
        return max(24, width - 2) if self.compact and width > 0 else EVIDENCE_CHARS

    def show_problem(self, diag: ev.Diagnosis | None, fact: ev.Fact | None) -> None:
        self._problem = (diag, fact)
        t = Text()
        if diag is not None:
            t.append(f"✗ {diag.title}", style="bold")
            t.append(f"  ({diag.id})", style="dim")
            for line in decisive_evidence(diag.evidence):
                t.append("\n  ")
                t.append(_clip(line, self._limit()), style="italic")
            t.append("\nFix: ", style="bold")
            t.append(diag.remedy)
            hint = setting_hint(diag)
            if hint:
                t.append("\nIn the app: ", style="bold")
                t.append(hint)
        elif fact is not None:
            t.append(f"✗ {fact.name}: {fact.value}", style="bold")
            if fact.detail:
                t.append("\n  ")
                t.append(_clip(fact.detail, self._limit()), style="italic")
            if fact.remedy:
                t.append("\nFix: ", style="bold")
                t.append(fact.remedy)
        else:
            self.set_class(False, "-shown")
            return
        self.update(t)
        self.set_class(True, "-shown")

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
    StepPane > .pane-title { height: auto; max-height: 2; }  /* TITLE_ROWS */
    """

    STATE_WORDS: dict[str, str] = {}
    SHOW_SECONDS = True  # the title says how long the step took
    COMPACT_BANNER = False  # FailureBanner.compact: evidence on one row each (a pane whose log shows them whole)

    def __init__(self, step: str, title: str, *, id: str | None = None):
        super().__init__(id=id or f"pane-{step}")
        self.step = step
        self.title = title
        self.state = "pending"
        self.seconds: float | None = None
        self.summary = ""
        self.hint = ""
        self.problem_diagnoses: list[ev.Diagnosis] = []
        self.problem_facts: list[ev.Fact] = []

    def compose(self) -> ComposeResult:
        yield Static("", classes="pane-title", markup=False)
        yield FailureBanner("", classes="failure-banner", markup=False, compact=self.COMPACT_BANNER)
        yield from self.compose_body()

    # -- the failure banner ------------------------------------------------------------------------------
    def note_problem(self, event: ev.Event) -> None:
        """Every diagnosis and failed check of this step's current attempt (the app forwards them)."""
        if isinstance(event, ev.Diagnosis):
            self.problem_diagnoses.append(event)
        elif isinstance(event, ev.Fact) and event.status == "fail":
            self.problem_facts.append(event)
        if self.state in FAILED_STATES:
            self._draw_banner()

    def lead_problem(self) -> tuple[ev.Diagnosis | None, ev.Fact | None]:
        order = {"error": 0, "warning": 1, "info": 2}
        diags = sorted(self.problem_diagnoses, key=lambda d: order.get(d.severity, 3))
        return (diags[0] if diags else None), (self.problem_facts[0] if self.problem_facts else None)

    def _draw_banner(self) -> None:
        try:
            banner = self.query_one(FailureBanner)
        except Exception:
            return
        if self.state in FAILED_STATES:
            banner.show_problem(*self.lead_problem())
        else:
            banner.set_class(False, "-shown")

    def clear_problems(self) -> None:
        self.problem_diagnoses.clear()
        self.problem_facts.clear()
        self._draw_banner()

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
        if state == "running":
            self.clear_problems()
        self.refresh_title()
        self._draw_banner()

    def set_hint(self, hint: str) -> None:
        self.hint = hint
        self.refresh_title()

    def refresh_title(self) -> None:
        t = Text(overflow="ellipsis")
        t.append(self.title, style="bold underline")
        icon = STEP_ICONS.get(self.state, "")
        style = {"passed": "green", "warned": "yellow", "failed": "bold red", "interrupted": "magenta",
                 "running": "bold cyan"}.get(self.state, "dim")
        style = status_style(style)
        words = self.STATE_WORDS.get(self.state) or STATE_WORDS.get(self.state, self.state)
        t.append(f"  {icon} {words}", style=style)
        if self.SHOW_SECONDS and self.seconds is not None and self.state not in ("pending", "running", "excluded"):
            t.append(f" in {fmt_secs(self.seconds)}", style="dim")
        if self.summary:
            t.append(f" — {self.summary}")
        if self.hint and self.state not in ("running",):
            t.append(f"  {self.hint}", style="italic dim")
        try:
            line = self.query_one(".pane-title", Static)
        except Exception:
            return
        # Two rows at most (the CSS's max-height): what does not fit leaves by whole words, with an ellipsis.
        line.update(fit_lines(t, line.content_size.width, TITLE_ROWS, self.app.console))

    def on_resize(self) -> None:
        self.refresh_title()

    # -- events -----------------------------------------------------------------------------------------
    def reset(self) -> None:
        """The step is about to run again (retry): forget the previous attempt."""

    def handle(self, event: ev.Event) -> None:
        """A low-rate engine event for this step."""

    def progress(self, event: ev.Progress) -> None:
        """The latest Progress of a task of this step (coalesced)."""
