"""The live server log: a bounded line store rendered with the line API, raw or rank-collapsed.

`LogView` keeps two stores, each capped at `max_lines`:
- raw: every line the server printed (`LogLine`), ANSI stripped, `\\r` progress bars collapsed;
- collapsed: one entry per message (`CleanLog`) with the ×N rank count kept up to date (`LogRanks`),
  so a line that 16 workers print shows once with "×16".
Lines arrive in batches (the app flushes its buffer every ~100 ms) and only the visible rows are
rendered, so a flood costs an append per line. Errors are highlighted (style and a ✗ gutter, which
survives NO_COLOR); a case-insensitive text filter narrows either view; `follow` keeps the view on
the newest line and turns itself off when the operator scrolls up.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Iterable

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input, Static

from .common import clean_text, shorten_paths
from .fields import Field

_ERR_RE = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b|Traceback \(most recent|\b[A-Za-z]+(?:Error|Exception):")
_WARN_RE = re.compile(r"\bWARN(?:ING)?\b")
MAX_WIDTH = 4000


class LogEntry:
    """One display line. `error` is None until first needed (raw lines are classified lazily)."""

    __slots__ = ("text", "error", "ranks", "line_id", "kind", "warn")

    def __init__(self, text: str, error: bool | None = None, ranks: int = 1, line_id: int = -1,
                 kind: str = "line", warn: bool | None = None):
        self.text = text
        self.error = error
        self.ranks = ranks
        self.line_id = line_id
        self.kind = kind  # line | info | warning | error (engine notices)
        self.warn = warn

    def is_error(self) -> bool:
        if self.error is None:
            self.error = bool(_ERR_RE.search(self.text))
        return self.error

    def is_warn(self) -> bool:
        if self.warn is None:
            self.warn = bool(_WARN_RE.search(self.text))
        return self.warn


class LogView(ScrollView, can_focus=True):
    """A bounded, filterable log with a raw and a rank-collapsed mode."""

    COMPONENT_CLASSES = {"logview--error", "logview--warning", "logview--notice", "logview--count",
                         "logview--gutter"}

    DEFAULT_CSS = """
    LogView {
        background: $surface;
        color: $text;
        overflow-y: scroll;
        overflow-x: auto;
        &:focus { background-tint: $foreground 5%; }
        & > .logview--error { color: $text-error; text-style: bold; }
        & > .logview--warning { color: $text-warning; }
        & > .logview--notice { color: $text-accent; text-style: italic; }
        & > .logview--count { color: $text-accent; text-style: bold reverse; }
        & > .logview--gutter { color: $text-muted; }
    }
    """

    BINDINGS = [
        Binding("end", "scroll_end", "End", show=False),
        Binding("home", "scroll_home", "Home", show=False),
    ]

    follow: var[bool] = var(True)
    mode: var[str] = var("collapsed")
    filter_text: var[str] = var("")

    class StateChanged(Message):
        """follow, mode, filter or the line count changed (for the toolbar)."""

        def __init__(self, log: "LogView") -> None:
            super().__init__()
            self.log = log

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LogView.StateChanged) and message.log is self.log

    def __init__(self, max_lines: int = 10_000, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.max_lines = max_lines
        self._raw: deque[LogEntry] = deque(maxlen=max_lines)
        self._clean: deque[LogEntry] = deque(maxlen=max_lines)
        self._by_id: dict[int, LogEntry] = {}
        self._view: deque[LogEntry] = self._clean
        self._needle = ""
        self._width = 0
        self._styles: dict[str, Style] | None = None
        self.total_raw = 0
        self.total_clean = 0
        self.errors = 0

    # -- public API -------------------------------------------------------------------------------
    @property
    def lines(self) -> list[str]:
        """The displayed lines (current mode and filter), as plain text with the ×N suffix."""
        return [self._display_text(e) for e in self._view]

    def add_raw(self, texts: Iterable[str]) -> None:
        store = self._raw
        watching = self.mode == "raw"
        needle = self._needle
        view = self._view
        width = self._width
        n = 0
        for t in texts:
            t = clean_text(t)
            e = LogEntry(t)
            store.append(e)
            n += 1
            lt = len(t)
            if lt > width:
                width = lt
            if watching and needle and needle in t.lower():
                view.append(e)
        self.total_raw += n
        self._width = min(width, MAX_WIDTH)
        if watching:
            self._changed()

    def add_clean(self, items: Iterable[tuple[int, str, bool, int]]) -> None:
        """items: (line_id, text, is_error, ranks)."""
        store = self._clean
        by_id = self._by_id
        watching = self.mode == "collapsed"
        needle = self._needle
        view = self._view
        width = self._width
        n = 0
        for line_id, text, is_error, ranks in items:
            text = clean_text(text)
            e = LogEntry(text, bool(is_error), ranks, line_id)
            store.append(e)
            by_id[line_id] = e
            n += 1
            if is_error:
                self.errors += 1
            lt = len(text) + 6
            if lt > width:
                width = lt
            if watching and needle and needle in text.lower():
                view.append(e)
        self.total_clean += n
        self._width = min(width, MAX_WIDTH)
        if len(by_id) > 2 * self.max_lines:
            self._by_id = {e.line_id: e for e in store if e.line_id >= 0}
        if watching:
            self._changed()

    def set_ranks(self, updates: dict[int, int]) -> None:
        changed = False
        for line_id, ranks in updates.items():
            e = self._by_id.get(line_id)
            if e is not None and ranks > e.ranks:
                e.ranks = ranks
                changed = True
        if changed and self.mode == "collapsed" and self.region.area:
            self.refresh()

    def add_notice(self, level: str, text: str) -> None:
        """An engine notice, shown in both modes (styled, so it stands out from server output)."""
        e = LogEntry(f"── {clean_text(text)}", error=(level == "error"), kind=level)
        for store, mode in ((self._raw, "raw"), (self._clean, "collapsed")):
            store.append(e)
            if self.mode == mode and self._needle and self._needle in e.text.lower():
                self._view.append(e)
        self._width = min(max(self._width, len(e.text)), MAX_WIDTH)
        self._changed()

    def clear(self) -> None:
        self._raw.clear()
        self._clean.clear()
        self._by_id.clear()
        self._rebuild()

    def toggle_mode(self) -> None:
        self.mode = "raw" if self.mode == "collapsed" else "collapsed"

    # -- reactive state -----------------------------------------------------------------------------
    def watch_mode(self, _old: str, _new: str) -> None:
        self._rebuild()

    def watch_filter_text(self, _old: str, new: str) -> None:
        self._needle = new.strip().lower()
        self._rebuild()

    def watch_follow(self, _old: bool, new: bool) -> None:
        if new:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.post_message(self.StateChanged(self))

    def _rebuild(self) -> None:
        store = self._raw if self.mode == "raw" else self._clean
        if self._needle:
            n = self._needle
            self._view = deque((e for e in store if n in e.text.lower()), maxlen=self.max_lines)
        else:
            self._view = store
        self._changed()

    _stale = False  # lines arrived while the log was not shown: sized and drawn when it is

    def _changed(self) -> None:
        if not self.region.area and self.is_mounted:
            # Not on screen (another step's pane): a new virtual size would cost the whole screen a layout pass
            # per flush (with several servers streaming, that was most of a key press's time to paint).
            self._stale = True
            return
        self._stale = False
        size = Size(self._width + 2, len(self._view))
        old = self.virtual_size
        if size != old:
            if size.width == old.width and self.is_mounted:
                # Only more (or fewer) lines: the vertical scrollbar is always there (overflow-y: scroll) and the
                # horizontal one depends on the width alone, so nothing outside this widget moves. Assigning
                # virtual_size would lay out the whole screen (a Reactive with layout=True) on every flush, which
                # was the largest cost of a key press's paint while a flood streams (bench_tui_flood.py).
                self.set_reactive(LogView.virtual_size, size)
                self._scroll_update(size)
            else:
                self.virtual_size = size
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()
        self.post_message(self.StateChanged(self))

    def on_resize(self) -> None:
        if self._stale:  # shown again (its pane selected): catch up once
            self.call_later(self._changed)

    # -- follow: scrolling up pauses, reaching the end resumes ----------------------------------------
    def _pause(self) -> None:
        if self.follow:
            self.follow = False

    def action_scroll_up(self) -> None:
        self._pause()
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self._pause()
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self._pause()
        super().action_scroll_home()

    def action_scroll_end(self) -> None:
        self.follow = True
        super().action_scroll_end()

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._pause()

    # -- rendering -----------------------------------------------------------------------------------
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None

    def _style(self, name: str) -> Style:
        if self._styles is None:
            self._styles = {c: self.get_component_rich_style(c, partial=True) for c in self.COMPONENT_CLASSES}
        return self._styles[name]

    def _display_text(self, e: LogEntry) -> str:
        gutter = "✗ " if e.is_error() else ("! " if e.is_warn() and e.kind == "line" else "  ")
        suffix = f"  ×{e.ranks}" if e.ranks > 1 else ""
        return gutter + e.text + suffix

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        idx = scroll_y + y
        width = self.size.width
        base = self.rich_style
        view = self._view
        if idx >= len(view) or idx < 0:
            return Strip.blank(width, base)
        e = view[idx]
        if e.is_error():
            gutter, style = "✗ ", base + self._style("logview--error")
        elif e.kind != "line":
            gutter, style = "» ", base + self._style("logview--notice" if e.kind == "info" else "logview--warning")
        elif e.is_warn():
            gutter, style = "! ", base + self._style("logview--warning")
        else:
            gutter, style = "  ", base
        text = e.text
        shown = self.scrollable_content_region.width  # without the vertical scrollbar
        if e.kind != "line" and scroll_x == 0 and len(text) + 2 > shown:
            text = shorten_paths(text, shown - 2)  # an engine notice: its paths shortened from the middle
        segs = [Segment(gutter, base + self._style("logview--gutter")), Segment(text, style)]
        if e.ranks > 1 and self.mode == "collapsed":
            segs.append(Segment("  ", base))
            segs.append(Segment(f"×{e.ranks}", base + self._style("logview--count")))
        strip = Strip(segs)
        return strip.crop_extend(scroll_x, scroll_x + width, base)


class LogPanel(Vertical):
    """The log with its toolbar: mode (collapsed / raw), follow state, line counts and a filter."""

    DEFAULT_CSS = """
    LogPanel { height: 1fr; min-height: 5; }
    LogPanel > .log-toolbar { height: 1; }
    LogPanel .log-status { width: 1fr; height: 1; color: $text-muted; }
    LogPanel Input.log-filter {
        width: 22; height: 1; border: none; padding: 0 1; background: $boost;
        &:focus { border: none; background: $primary 20%; }
    }
    """

    def __init__(self, max_lines: int = 10_000, *, id: str | None = None):
        super().__init__(id=id)
        self.max_lines = max_lines

    def compose(self) -> ComposeResult:
        with Horizontal(classes="log-toolbar"):
            yield Static("", classes="log-status", markup=False)
            yield Field(placeholder="/ filter", classes="log-filter", compact=True)
        yield LogView(self.max_lines)

    @property
    def log_view(self) -> LogView:
        return self.query_one(LogView)

    _status_text = ""

    def on_mount(self) -> None:
        self._update_status()

    def on_log_view_state_changed(self, event: LogView.StateChanged) -> None:
        event.stop()
        self._update_status()

    def _update_status(self) -> None:
        lv = self.log_view
        mode = "collapsed ×N" if lv.mode == "collapsed" else "raw"
        follow = "● follow" if lv.follow else "‖ paused"
        shown = len(lv._view)
        total = lv.total_clean if lv.mode == "collapsed" else lv.total_raw
        count = f"{shown}/{total}" if lv.filter_text else f"{total}"
        err = f" · ✗{lv.errors}" if lv.errors else ""
        text = f"[v] {mode} · [f] {follow} · {count} lines{err}"
        if text != self._status_text:  # one fixed row: no layout pass (it ran for every flush of every pane)
            self._status_text = text
            self.query_one(".log-status", Static).update(text, layout=False)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.log_view.filter_text = event.value

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.log_view.focus()

    def action_toggle_mode(self) -> None:
        self.log_view.toggle_mode()

    def action_focus_filter(self) -> None:
        self.query_one(Input).focus()

    def key_escape(self, event: events.Key) -> None:
        inp = self.query_one(Input)
        if inp.has_focus:
            event.stop()
            if inp.value:
                inp.value = ""
            else:
                self.log_view.focus()
