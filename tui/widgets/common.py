"""Small helpers shared by the widgets: freezing, formatting, icons, spinner frames, ANSI stripping."""

from __future__ import annotations

import os
import re
from typing import Any

from rich.text import Text

FREEZE_ENV = "SPECDEC_TUI_FREEZE"

# Step and fact icons. Every state has a distinct glyph so the UI reads without colour (NO_COLOR).
STEP_ICONS = {
    "pending": "○",
    "running": "▶",
    "passed": "✓",
    "warned": "!",
    "failed": "✗",
    "skipped": "–",
    "unavailable": "–",
    "interrupted": "■",
    "excluded": "·",
}
FACT_ICONS = {"pass": "✓", "warn": "!", "fail": "✗", "info": "·"}

# With NO_COLOR, Textual maps colours to greys: red becomes dark grey on near-black. Status must then be
# carried by glyph and weight: failures reversed, warnings underlined, the rest bold.
_MONO_STYLES = {
    "bold red": "bold reverse", "red": "bold reverse",
    "bold magenta": "bold reverse", "magenta": "bold reverse",
    "bold yellow": "bold underline", "yellow": "bold underline",
    "bold green": "bold", "green": "bold", "bold cyan": "bold", "cyan": "bold", "blue": "",
}


def no_color() -> bool:
    """NO_COLOR set to any non-empty value (no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


def status_style(style: str) -> str:
    """A status style that stays legible without colour."""
    return _MONO_STYLES.get(style, style) if no_color() else style
SEVERITY_ICONS = {"error": "✗", "warning": "!", "info": "i"}
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_CTRL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def env_frozen() -> bool:
    """SPECDEC_TUI_FREEZE=1: clocks, gauges and spinners stand still (snapshot tests, screenshots)."""
    return os.environ.get(FREEZE_ENV, "") not in ("", "0")


def is_frozen(node: Any) -> bool:
    """Is the app that owns `node` frozen?"""
    try:
        app = node.app
    except Exception:
        return env_frozen()
    return bool(getattr(app, "frozen", False)) or env_frozen()


def animations_on(node: Any) -> bool:
    if is_frozen(node):
        return False
    try:
        return node.app.animation_level != "none"
    except Exception:
        return False


def clean_text(text: str) -> str:
    """One display line: ANSI removed, carriage-return progress collapsed, tabs expanded, controls dropped."""
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    if "\r" in text:
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    if "\t" in text:
        text = text.expandtabs(4)
    if _CTRL_RE.search(text):
        text = _CTRL_RE.sub("", text)
    return text


def fmt_secs(s: float | None) -> str:
    """12.3s, 4m05s, 1h02m."""
    if s is None:
        return ""
    if s < 0:
        s = 0.0
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    n = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"  # pragma: no cover


def fmt_num(v: Any, nd: int = 2) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def bar(fraction: float, width: int) -> str:
    """A text bar with eighth blocks: fraction in [0, 1]."""
    width = max(1, width)
    fraction = 0.0 if fraction != fraction else max(0.0, min(1.0, fraction))
    eighths = int(round(fraction * width * 8))
    full, rem = divmod(eighths, 8)
    s = "█" * full
    if rem and full < width:
        s += " ▏▎▍▌▋▊▉"[rem]
    return s + " " * (width - len(s))


def shorten(text: str, width: int) -> str:
    if width <= 1:
        return text[:width]
    return text if len(text) <= width else text[: width - 1] + "…"


def shorten_path(path: str, width: int) -> str:
    """`path` in at most `width` columns, shortened from the middle: the start and the file name stay, an
    ellipsis replaces what lies between ("/home/me/specdec-…/report.md", or "…/report.md" at the least). When
    not even that fits, the whole path is cut from its middle (its start, the end of the name)."""
    if width <= 0:
        return ""
    if len(path) <= width:
        return path
    if width == 1:
        return "…"
    cut = path.rstrip("/").rfind("/")
    tail = path[cut:] if cut > 0 else ""
    room = width - 1 - len(tail)
    if tail and room >= 0:
        return path[:room] + "…" + tail
    left = (width - 1 + 1) // 2
    right = width - 1 - left
    return path[:left] + "…" + (path[-right:] if right else "")


# A file system path in running text: a word with a "/" in it (absolute, ~/, ./ or relative), not a URL.
_PATH_RE = re.compile(r"(?<![\w:/.~-])[\w.~-]*/[^\s;,'\"()\[\]]+")


def shorten_paths(text: str, width: int, min_path: int = 12) -> str:
    """`text` with its paths shortened from the middle (longest first) until it fits `width` columns; a path
    keeps at least `min_path` columns and its file name ("…/name"). Text without paths, or that still does not
    fit, is returned with the paths as short as allowed."""
    over = len(text) - width
    if over <= 0:
        return text
    spans = sorted(((m.start(), m.end()) for m in _PATH_RE.finditer(text)), key=lambda s: s[0] - s[1])
    new = {}
    for start, end in spans:
        if over <= 0:
            break
        path = text[start:end]
        name = len(path) - max(path.rstrip("/").rfind("/"), 0)
        target = max(len(path) - over, min(min_path, len(path)), min(name + 1, len(path)))
        if target < len(path):
            new[start] = (end, shorten_path(path, target))
            over -= len(path) - target
    if not new:
        return text
    out, pos = [], 0
    for start in sorted(new):
        end, short = new[start]
        out.append(text[pos:start])
        out.append(short)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _fill_rows(parts: list[str], first: int, width: int) -> list[str]:
    """`parts` (path components, each with its "/") laid out greedily: `first` columns on the first row, `width`
    on the others; a component wider than a row is cut at the row's end."""
    rows = [""]
    room = first
    for part in parts:
        while part:
            if len(rows[-1]) + len(part) <= room:
                rows[-1] += part
                part = ""
            elif rows[-1]:
                rows.append("")
                room = width
            else:  # alone on its row and still too wide: cut it there
                rows[-1], part = part[:room], part[room:]
                rows.append("")
                room = width
    return [r for r in rows if r] or [""]


def wrap_path(path: str, width: int, lines: int, first: int | None = None) -> list[str]:
    """`path` on at most `lines` rows of `width` columns (`first` columns on the first row, the rest of a line
    after a label), broken after a "/" and never inside a name. When it does not fit, whole components are left out
    of its middle ("specdec-runs/…/report.md"); only a name wider than a row is cut."""
    first = width if first is None else first
    if width <= 0 or lines <= 0:
        return [""]
    parts = re.findall(r"[^/]*/|[^/]+$", path) or [path]
    rows = _fill_rows(parts, first, width)
    if len(rows) <= lines:
        return rows
    # Drop components from just before the last one (the name) until the rest fits, keeping the start.
    for keep in range(len(parts) - 2, -1, -1):
        rows = _fill_rows(parts[:keep] + ["…/"] + parts[-1:], first, width)
        if len(rows) <= lines:
            return rows
    flat = shorten_path(path, first + width * (lines - 1))
    return [flat[:first]] + [flat[first + i * width: first + (i + 1) * width] for i in range(lines - 1)
                             if flat[first + i * width:]]


def fit_lines(text: "Text", width: int, lines: int, console: Any) -> "Text":
    """`text` wrapped at `width` in at most `lines` rows: when it needs more, whole words leave its end and an
    ellipsis says so ("… then r retries" → "… then r…"), so no row ends inside a word that the next row lacks."""
    if width <= 0 or len(text.wrap(console, width)) <= lines:
        return text
    plain = text.plain
    cut = len(plain)
    while cut > 0:
        cut = plain.rfind(" ", 0, cut)
        if cut <= 0:
            break
        head = text[:cut]
        head.rstrip()
        head.append("…")
        if len(head.wrap(console, width)) <= lines:
            return head
    return text
