"""The startup phase timeline of a server launch: each phase's elapsed time, the current one animated,
and the compile-cache hits and misses."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from .common import SPINNER, animations_on, fmt_secs, is_frozen, status_style


class PhaseTimeline(Static):
    DEFAULT_CSS = """
    PhaseTimeline { height: auto; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__("", id=id, markup=False)
        self.phases: list[dict] = []  # {name, status, elapsed, t0, detail}
        self.cache_hits = 0
        self.cache_misses = 0
        self._frame = 0
        self.ended = False
        self.max_rows: int | None = None  # set: the earliest phases give way ("… ›") to fit these rows

    def on_mount(self) -> None:
        self.set_interval(0.125, self._tick)
        self._render_text()

    def reset(self) -> None:
        self.phases.clear()
        self.cache_hits = self.cache_misses = 0
        self.ended = False
        self._render_text()

    @property
    def current(self) -> str | None:
        for p in reversed(self.phases):
            if p["status"] == "running":
                return p["name"]
        return None

    def phase(self, name: str, status: str, elapsed: float = 0.0, detail: str = "") -> None:
        rec = next((p for p in self.phases if p["name"] == name), None)
        if status == "started":
            if rec is None:
                rec = {"name": name, "status": "running", "elapsed": None, "t0": time.monotonic(), "detail": detail}
                self.phases.append(rec)
            else:
                rec.update(status="running", t0=time.monotonic())
        else:
            done = "failed" if status == "failed" else "done"
            if rec is None:
                rec = {"name": name, "status": done, "elapsed": elapsed, "t0": 0.0, "detail": detail}
                self.phases.append(rec)
            rec.update(status=done, elapsed=elapsed, detail=detail or rec.get("detail", ""))
        self._render_text()

    def cache(self, hit: bool) -> None:
        if hit:
            self.cache_hits += 1
        else:
            self.cache_misses += 1
        self._render_text()

    def end(self) -> None:
        """The step ended: a phase still open is shown as stopped."""
        self.ended = True
        for p in self.phases:
            if p["status"] == "running":
                p["status"] = "stopped"
                if not is_frozen(self):
                    p["elapsed"] = time.monotonic() - p["t0"]
        self._render_text()

    def _tick(self) -> None:
        if self.current is None or is_frozen(self):
            return
        self._frame += 1
        if animations_on(self) or self._frame % 8 == 0:
            self._render_text()

    def on_resize(self) -> None:
        self._render_text()

    def set_max_rows(self, rows: int | None) -> None:
        """At most `rows` rows (a failed launch's pane at 80×24 needs its rows for the diagnosis and the log):
        the latest phases, where it stopped, stay; the earlier ones are summed up as "…"."""
        if rows != self.max_rows:
            self.max_rows = rows
            self._render_text()

    def _items(self) -> list[Text]:
        """One Text per phase ("✓ weights 3.2s"), then the cache counts: the units a line never breaks inside."""
        frozen = is_frozen(self)
        items: list[Text] = []
        for p in self.phases:
            t = Text()
            if p["status"] == "running":
                icon = SPINNER[self._frame % len(SPINNER)] if animations_on(self) else "▶"
                el = None if frozen else time.monotonic() - p["t0"]
                t.append(f"{icon} {p['name']}", style="bold reverse")
                if el is not None:
                    t.append(f" {fmt_secs(el)}", style="bold")
            elif p["status"] == "failed":
                t.append(f"✗ {p['name']} failed", style=status_style("bold red"))
                if p["elapsed"] is not None:
                    t.append(f" {fmt_secs(p['elapsed'])}", style="dim")
            elif p["status"] == "stopped":
                t.append(f"■ {p['name']}", style=status_style("bold red"))
                if p["elapsed"] is not None:
                    t.append(f" {fmt_secs(p['elapsed'])}", style="dim")
            else:
                t.append(f"✓ {p['name']}")
                if p["name"] != "ready":
                    t.append(f" {fmt_secs(p['elapsed'])}", style="dim")
            items.append(t)
        if self.cache_hits or self.cache_misses:
            t = Text()
            t.append("cache ", style="bold")
            t.append(f"{self.cache_hits} hit{'s' if self.cache_hits != 1 else ''}, "
                     f"{self.cache_misses} miss{'es' if self.cache_misses != 1 else ''}")
            items.append(t)
        return items

    def _render_text(self) -> None:
        """The phases in order, broken between phases (never inside "✓ weights 3.2s") to the widget's width; a
        line that continues the sequence starts with its "› ". With max_rows, the earliest phases leave first."""
        head = "Phases "
        items = self._items()
        if not items:
            t = Text()
            t.append(head, style="bold")
            t.append("waiting for the server log…", style="dim")
            self.update(t)
            return
        width = self.content_size.width or 10_000  # not laid out yet: one line, drawn again on resize
        n_phases = len(self.phases)
        t, rows = self._layout(head, items, n_phases, width, 0)
        if self.max_rows is not None and rows > self.max_rows:
            # The latest phases first, then the cache counts: the fewest phases left out that fit.
            for first in range(n_phases):
                fits = [self._layout(head, its, n_phases, width, first) for its in (items, items[:n_phases])]
                fit = next((f for f in fits if f[1] <= self.max_rows), None)
                if fit is not None:
                    t = fit[0]
                    break
            else:
                t = fits[-1][0]
        self.update(t)

    @staticmethod
    def _layout(head: str, items: list[Text], n_phases: int, width: int, first: int) -> tuple[Text, int]:
        """The line from phase `first` on (the ones before it as "…"), and how many rows it takes."""
        t = Text()
        t.append(head, style="bold")
        col = len(head)
        rows = 1
        if first:
            t.append("…", style="dim")
            col += 1
        for i in range(first, len(items)):
            item = items[i]
            sep = "" if i == 0 else (" › " if i < n_phases else "   ")
            if i > first or first:
                if col + len(sep) + item.cell_len > width:
                    t.append("\n")
                    rows += 1
                    sep = sep.lstrip()
                    col = 0
            else:
                sep = ""
            if sep:
                t.append(sep, style="dim")
            t.append_text(item)
            col += len(sep) + item.cell_len
        return t, rows
