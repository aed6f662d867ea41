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

    def _render_text(self) -> None:
        t = Text()
        t.append("Phases ", style="bold")
        if not self.phases:
            t.append("waiting for the server log…", style="dim")
        frozen = is_frozen(self)
        for i, p in enumerate(self.phases):
            if i:
                t.append(" › ", style="dim")
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
        if self.cache_hits or self.cache_misses:
            t.append("   cache ", style="bold")
            t.append(f"{self.cache_hits} hit{'s' if self.cache_hits != 1 else ''}, "
                     f"{self.cache_misses} miss{'es' if self.cache_misses != 1 else ''}")
        self.update(t)
