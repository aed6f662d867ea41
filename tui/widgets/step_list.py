"""The step list on the left: one row per step with a status icon and the elapsed time.

The steps are the run's (`tui.core.plan.arms.run_steps`): the tutorial's six for a two-arm profile, one row per
arm for a tune profile. `set_steps` replaces them (another profile chosen before the run starts)."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ..core.events import STEP_IDS, STEP_TITLES
from ..messages import StepSelected
from ..runplan import TITLE_WIDTH  # the labels are made to fit it (tui/runplan.py)
from .common import SPINNER, STEP_ICONS, animations_on, fmt_secs, is_frozen, status_style

ALL_STEPS: tuple[str, ...] = ("profile",) + STEP_IDS
TITLES: dict[str, str] = {"profile": "Profile", **STEP_TITLES}
_STATUS_STYLE = {
    "passed": "bold green", "warned": "bold yellow", "failed": "bold red", "running": "bold cyan",
    "interrupted": "bold magenta", "skipped": "dim", "unavailable": "dim", "excluded": "dim", "pending": "",
}


class StepList(OptionList):
    """Keyboard-navigable list of steps. Moving the cursor shows that step's pane (StepSelected)."""

    DEFAULT_CSS = """
    StepList { height: auto; max-height: 9; border: none; padding: 0; background: $panel; }
    StepList:focus { background-tint: $foreground 5%; }
    """

    def __init__(self, steps: tuple[str, ...] | list[str] | None = None, titles: dict[str, str] | None = None, *,
                 id: str | None = None):
        self.steps: tuple[str, ...] = tuple(steps) if steps else ALL_STEPS
        self.titles: dict[str, str] = dict(titles) if titles else dict(TITLES)
        self.status: dict[str, str] = {s: "pending" for s in self.steps}
        self.seconds: dict[str, float | None] = {s: None for s in self.steps}
        self.started: dict[str, float] = {}
        self.nodes: dict[str, str] = {}  # step → the fleet node it runs on (--ray)
        self._frame = 0
        super().__init__(*[Option(self._prompt(s), id=s) for s in self.steps], id=id)

    def set_steps(self, steps: tuple[str, ...] | list[str], titles: dict[str, str]) -> None:
        """Show these steps instead (status and times of the steps kept are kept); the cursor stays on its step
        when that step is still there, else it goes to the first row."""
        steps = tuple(steps)
        if steps == self.steps and titles == self.titles:
            return
        current = self.steps[self.highlighted] if self.highlighted is not None and self.highlighted < len(self.steps) \
            else None
        self.steps, self.titles = steps, dict(titles)
        self.status = {s: self.status.get(s, "pending") for s in steps}
        self.seconds = {s: self.seconds.get(s) for s in steps}
        self.started = {s: t for s, t in self.started.items() if s in steps}
        self.clear_options()
        self.add_options([Option(self._prompt(s), id=s) for s in steps])
        self.highlighted = steps.index(current) if current in steps else 0

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick_clock)
        self.set_interval(0.125, self._tick_spinner)

    # -- state -------------------------------------------------------------------------------------
    def set_status(self, step: str, status: str, seconds: float | None = None) -> None:
        if step not in self.status:
            return
        self.status[step] = status
        if status == "running":
            self.started[step] = time.monotonic()
            self.seconds[step] = None if not is_frozen(self) else 0.0
        else:
            self.started.pop(step, None)
            if seconds is not None:
                self.seconds[step] = seconds
        self._redraw(step)

    def set_node(self, step: str, node: str) -> None:
        """A fleet run: the node `step` runs on, shown after its title."""
        if step in self.status and node:
            self.nodes[step] = node
            self._redraw(step)

    def _redraw(self, step: str) -> None:
        try:
            self.replace_option_prompt(step, self._prompt(step))
        except Exception:  # not mounted yet / option gone
            pass

    def _prompt(self, step: str) -> Text:
        status = self.status[step]
        icon = STEP_ICONS.get(status, "?")
        if status == "running" and animations_on(self):
            icon = SPINNER[self._frame % len(SPINNER)]
        secs = self.seconds.get(step)
        if status == "running" and step in self.started and not is_frozen(self):
            secs = time.monotonic() - self.started[step]
        elapsed = (fmt_secs(secs) if secs is not None and status not in ("skipped", "excluded") and step != "profile"
                   else "")
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(icon, style=status_style(_STATUS_STYLE.get(status, "")))
        t.append(" ")
        title = self.titles.get(step, step)
        node = self.nodes.get(step)
        if node:  # "EAGLE3 k=2 @n2", the title cut to keep the column
            title = f"{title[:TITLE_WIDTH - len(node) - 2]} @{node}"
        t.append(f"{title:<{TITLE_WIDTH}}", style="dim" if status in ("excluded", "skipped") else "")
        t.append(f"{elapsed:>6}", style="dim")
        return t

    def _tick_clock(self) -> None:
        if is_frozen(self):
            return
        for step in list(self.started):
            self._redraw(step)

    def _tick_spinner(self) -> None:
        if not self.started or not animations_on(self):
            return
        self._frame += 1
        for step in list(self.started):
            self._redraw(step)

    def select_step(self, step: str) -> None:
        """Move the cursor to `step` (shows its pane)."""
        try:
            idx = self.steps.index(step)
        except ValueError:
            return
        self.highlighted = idx

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id:
            self.post_message(StepSelected(event.option.id))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(StepSelected(event.option.id))
