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

    @staticmethod
    def _title(app_name: bool, pair: str, name: str | None) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        parts: list[tuple[str, str]] = ([("specdec-tui", "bold")] if app_name else []) + \
            ([(name, "bold")] if name else []) + ([(pair, "")] if pair else [])
        for i, (text, style) in enumerate(parts):
            if i:
                t.append(" · ")
            t.append(text, style=style)
        return t

    def set_profile(self, name: str | None, target: str | None, draft: str | None, simulated: bool,
                    state: str = "") -> None:
        self.set_class(simulated, "-simulated")
        width = max(20, (self.size.width or 80) - (13 if simulated else 2))
        # The most that fits whole, never a name cut inside: the models' full names, else their repo names, else
        # those without the app's name (the terminal's title has it), else the target alone.
        pairs = [f"{target} → {draft}", f"{_short(target)} → {_short(draft or '')}"] if target else [""]
        last = [f"{_short(target)} → …"] if target else []
        tries = [(True, p) for p in pairs] + [(False, p) for p in pairs] + [(a, p) for a in (True, False) for p in last]
        t = self._title(*tries[0], name=name)
        for app_name, pair in tries:
            t = self._title(app_name, pair, name=name)
            if t.cell_len <= width:
                break
        if state and t.cell_len + 3 + len(state) <= width:
            t.append(" · ")
            t.append(state, style="italic")
        self.query_one("#header-title", Static).update(t)
