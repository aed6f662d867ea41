"""A label and a path that always fits: the path is broken after a "/" (never inside a name) and, when it still does
not fit, whole components leave its middle, to the widget's width (and again when it is resized), so the start and
the file name stay visible at 80×24."""

from __future__ import annotations

from textual.events import Resize
from textual.widgets import Static

from .common import wrap_path


class PathText(Static):
    """`label` then `path` on `lines` lines at most (a label ending in a newline puts the path below it)."""

    def __init__(self, label: str = "", path: str = "", *, lines: int = 1, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__("", id=id, classes=classes, markup=False)
        self.label = label
        self.path = path
        self.lines = max(1, lines)

    def set_path(self, label: str, path: str) -> None:
        self.label, self.path = label, path
        self._draw()

    def on_mount(self) -> None:
        self._draw()

    def on_resize(self, _event: Resize) -> None:
        self._draw()

    def _draw(self) -> None:
        if not self.path:
            self.update("" if not self.label.strip() else self.label)
            return
        width = self.content_size.width
        if width <= 0:  # not laid out yet (a hidden pane): drawn again when it is
            self.update(self.label + self.path)
            return
        first = self.label.rsplit("\n", 1)[-1]
        rows = wrap_path(self.path, width, self.lines, first=max(width - len(first), 1))
        self.update(self.label + "\n".join(rows))
