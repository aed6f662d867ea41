"""The wizard's keys, in one place: the help screen renders this table and the README carries the same one
(tests/test_keys.py keeps the two equal and checks every key against the app's bindings)."""

from __future__ import annotations

from textual.keys import format_key

KEY_TABLE: tuple[tuple[str, str], ...] = (
    ("`n`", "next: run the next step (on Profile: accept the profile and open the run)"),
    ("`a`", "run all remaining steps unattended (stops at a failure; once its retry passes, goes on)"),
    ("`r` / `ctrl+r`", "retry the failed step, with the settings edited on the Profile pane (from inside one of its "
                       "fields: Enter or esc, then r; or ctrl+r)"),
    ("`p`", "after a failure whose fix is a setting: open that field on the Profile pane"),
    ("`s`", "stop the running server"),
    ("`e`", "export report.md, report.json, summary.csv (an interim report while the run is open)"),
    ("`l` / `f` / `v` / `/`", "server steps: focus the log / follow on-off / raw or collapsed (×N) / filter"),
    ("`c`", "show (and copy) the exact commands: the planned ones before the first launch"),
    ("`w`", "save the profile, with your edits, as TOML that `--headless` replays"),
    ("`[` / `]`", "tune results: previous / next workload; a run opened with `--open`: a server step's log files"),
    ("`g`", "tune results: the charts (throughput vs k, speedup vs concurrency, acceptance per position and over "
            "time) of the workload shown, or back to the table"),
    ("`↑` `↓`", "move in the focused list or log (in the step list: show that step's pane)"),
    ("`tab` / `shift+tab`", "move between widgets"),
    ("`esc`", "back to the step list (in the log filter: clear it, then back to the log)"),
    ("`?` / `ctrl+p` / `q` or `ctrl+q`", "help / command palette / quit (asks first while a server runs, then stops it)"),
)

# Every binding of the main screen, by key, and where KEY_TABLE documents it.
DOCUMENTED_KEYS = {
    "n": "`n`", "a": "`a`", "r": "`r` / `ctrl+r`", "ctrl+r": "`r` / `ctrl+r`", "p": "`p`", "s": "`s`", "e": "`e`", "l": "`l` / `f` / `v` / `/`",
    "f": "`l` / `f` / `v` / `/`", "v": "`l` / `f` / `v` / `/`", "slash": "`l` / `f` / `v` / `/`", "c": "`c`",
    "w": "`w`", "left_square_bracket": "`[` / `]`", "right_square_bracket": "`[` / `]`", "g": "`g`", "escape": "`esc`", "question_mark": "`?` / `ctrl+p` / `q` or `ctrl+q`",
    "ctrl+q": "`?` / `ctrl+p` / `q` or `ctrl+q`", "q": "`?` / `ctrl+p` / `q` or `ctrl+q`",
}


def key_label(key: str) -> str:
    """A key as the operator types it, for messages: "]" for Textual's "right_square_bracket", "?" for
    "question_mark", "esc" for "escape"; a combination stays as it is ("ctrl+r")."""
    return format_key(key)


def help_lines() -> str:
    """KEY_TABLE as plain text for the help screen."""
    width = max(len(k.replace("`", "")) for k, _ in KEY_TABLE)
    return "\n".join(f"  {k.replace('`', ''):<{width}}  {d.replace('`', '')}" for k, d in KEY_TABLE)


def markdown_table() -> str:
    """KEY_TABLE as the README's markdown table."""
    rows = ["| key | action |", "|---|---|"] + [f"| {k} | {d} |" for k, d in KEY_TABLE]
    return "\n".join(rows)
