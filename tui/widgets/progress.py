"""A one-line progress readout: bar, n/total, rate and ETA (bytes, requests or tokens)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .common import bar, fmt_bytes, fmt_secs


def describe(completed: float, total: float | None, unit: str, rate: float | None, eta: float | None,
             extra: str = "") -> str:
    if unit == "B":
        s = fmt_bytes(completed) + (f" / {fmt_bytes(total)}" if total else "")
        if rate:
            s += f" · {fmt_bytes(rate)}/s"
    else:
        s = f"{completed:.0f}" + (f"/{total:.0f}" if total else "") + (f" {unit}" if unit else "")
        if rate:
            s += f" · {rate:.2f} {unit}/s" if unit else f" · {rate:.2f}/s"
    if extra:
        s += f" · {extra}"
    if eta is not None and eta > 0:
        s += f" · ETA {fmt_secs(eta)}"
    return s


class ProgressLine(Static):
    DEFAULT_CSS = """
    ProgressLine { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, label: str, *, id: str | None = None, bar_width: int = 14, idle_text: str = "—"):
        super().__init__("", id=id, markup=False)
        self.label = label
        self.bar_width = bar_width
        self.text = ""
        self.fraction: float | None = None
        self.idle_text = idle_text
        self.idle_dim = True
        self.prefix = ""  # e.g. "sonnet 2/3": which workload and repeat of a tune arm runs
        self.choices: list[str] = []  # set_choices: the forms of a final summary, widest first

    def set_prefix(self, prefix: str) -> None:
        if prefix != self.prefix:
            self.prefix = prefix
            self._draw()

    def on_resize(self) -> None:
        self._draw()  # the bar's width and the summary's form follow the width

    def on_mount(self) -> None:
        self._draw()

    def set(self, completed: float, total: float | None, unit: str = "", rate: float | None = None,
            eta: float | None = None, extra: str = "") -> None:
        self.fraction = (completed / total) if total else None
        self.text = describe(completed, total, unit, rate, eta, extra)
        self._draw()

    def set_text(self, text: str, dim: bool = True) -> None:
        """No bar: just `text` (dim for an idle hint, plain for a final summary)."""
        self.set_choices([text], dim)

    def set_choices(self, choices: list[str], dim: bool = False) -> None:
        """No bar: the first of `choices` whose every line fits the width (continuation lines are indented
        under the first); the last one when none does. Redrawn on resize."""
        self.choices = list(choices) or [""]
        self.idle_dim = dim
        self.fraction = None
        self.text = ""
        self._draw()

    def _pick(self) -> str:
        room = self.size.width - 7
        if room <= 0:
            return self.choices[0]
        first_room = room - (len(self.prefix) + 3 if self.prefix else 0)  # "sonnet 2/3 · " leads the first line
        for c in self.choices:
            lines = c.split("\n")
            if len(lines[0]) <= first_room and all(len(line) <= room for line in lines[1:]):
                return c
        return self.choices[-1]

    def _draw(self) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f"{self.label:<7}", style="bold")
        if self.prefix:
            t.append(self.prefix, style="bold")
            t.append(" · ")
        if not self.text:
            text = self._pick() if self.choices else self.idle_text
            t.append(text.replace("\n", "\n" + " " * 7), style="dim" if self.idle_dim else "")
            lines = text.count("\n") + 1
            if self.styles.height is None or self.styles.height.value != lines:
                self.styles.height = lines
        else:
            if self.styles.height is not None and self.styles.height.value != 1:
                self.styles.height = 1
            if self.fraction is not None:
                # Narrow panes (80 columns) get a shorter bar so the counts and the ETA are never cut.
                width = self.bar_width if self.size.width == 0 or self.size.width >= 60 else max(4, self.bar_width // 2)
                t.append(bar(self.fraction, width))
                t.append("▏ ")
            t.append(self.text)
        self.update(t)
