"""The keys the README and the help screen document are the app's bindings, and the two texts agree."""

from __future__ import annotations

from pathlib import Path

from textual.binding import Binding

from tui.app import SpecdecApp
from tui.keys import DOCUMENTED_KEYS, KEY_TABLE, help_lines, markdown_table
from tui.screens.modals import HELP_TEXT

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_key_table_is_the_apps():
    assert markdown_table() in README.read_text()


def test_help_screen_shows_the_same_table():
    assert help_lines() in HELP_TEXT


def test_every_binding_is_documented_and_every_documented_key_is_bound():
    bound = {k.strip() for b in SpecdecApp.BINDINGS if isinstance(b, Binding) for k in b.key.split(",")}
    assert bound == set(DOCUMENTED_KEYS), bound ^ set(DOCUMENTED_KEYS)
    table_keys = {k for k, _ in KEY_TABLE}
    assert set(DOCUMENTED_KEYS.values()) <= table_keys
