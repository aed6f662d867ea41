"""The app's rough edges found at 80×24 (issue 18, item 8), each driven through Pilot at 80×24."""

from __future__ import annotations

import pytest
from textual import events

from tui.app import SpecdecApp
from tui.core.profile import load_profile

from snapshot_apps import scenarios


def text_of(widget) -> str:
    c = widget.content
    return c.plain if hasattr(c, "plain") else str(c)


def burst(app, *keys: str) -> None:
    """Keys as a terminal delivers one fast send (tmux send-keys, key repeat): all queued on the app before
    any is processed, which Pilot.press (it waits after each key) never does."""
    chars = {"backspace": "\x7f", "delete": "\x1b[3~", "left": None, "right": None, "home": None, "end": None}
    for k in keys:
        char = chars.get(k, k) if len(k) > 1 else k
        app.post_message(events.Key(k, char))


# -- fast key bursts and pastes in the Profile pane's number fields ------------------------------------------
@pytest.mark.parametrize("start, keys, want", [
    ("1", ("backspace", "1", "6"), "16"),
    ("11", ("backspace", "backspace", "4", "5"), "45"),
    ("30", ("home", "delete", "7"), "70"),
    ("512", ("left", "backspace", "9"), "592"),
])
async def test_a_burst_of_keys_lands_as_typed(start, keys, want):
    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        field = app.query_one("#knob-speculative-num-speculative-tokens")
        field.value = start
        field.focus()
        field.cursor_position = len(start)
        await pilot.pause()
        burst(app, *keys)
        await pilot.pause()
        await pilot.pause()
        assert field.value == want


@pytest.mark.parametrize("pasted, want", [("16", "16"), ("16\n", "16"), ("  12 \n", "12")])
async def test_a_pasted_number_lands_as_typed(pasted, want):
    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        field = app.query_one("#knob-benchmark-num-prompts")
        field.focus()
        field.action_select_all()
        await pilot.pause()
        app.post_message(events.Paste(pasted))
        await pilot.pause()
        await pilot.pause()
        assert field.value == want
        assert app.query_one("ProfilePane").edits() == {"benchmark.num_prompts": int(want)}
