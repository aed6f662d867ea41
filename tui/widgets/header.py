"""The one-line header: app, profile, target → draft, run state, and a SIMULATED badge in demo mode."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static


def _short(repo: str) -> str:
    return repo.rsplit("/", 1)[-1] if "/" in repo else repo


class HeaderBar(Horizontal):
    DEFAULT_CSS = """
    HeaderBar { height: 1; dock: top; background: $panel; }
    HeaderBar > #header-title { width: 1fr; height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    HeaderBar > #header-badge { width: auto; height: 1; padding: 0 1; display: none;
                                background: $warning; color: $background; text-style: bold reverse; }
    HeaderBar.-simulated > #header-badge { display: block; }
    """

    def compose(self) -> ComposeResult:
        yield Static("specdec-tui", id="header-title", markup=False)
        yield Static("SIMULATED", id="header-badge", markup=False)

    def set_profile(self, name: str | None, target: str | None, draft: str | None, simulated: bool,
                    state: str = "") -> None:
        self.set_class(simulated, "-simulated")
        width = max(20, (self.size.width or 80) - (13 if simulated else 2))
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("specdec-tui", style="bold")
        if name:
            t.append(" · ")
            t.append(name, style="bold")
        if target:
            full = f"{target} → {draft}"
            short = f"{_short(target)} → {_short(draft or '')}"
            pair = full if len(t.plain) + 3 + len(full) <= width else short
            t.append(" · ")
            t.append(pair)
        if state and len(t.plain) + 3 + len(state) <= width:
            t.append(" · ")
            t.append(state, style="italic")
        self.query_one("#header-title", Static).update(t)
