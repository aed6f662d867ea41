"""A text field that keeps a fast burst of keys (or a paste) in the order it was typed.

Textual's Input inserts a printable key as soon as its own message queue reaches it, but an editing key
(backspace, delete, the arrows, home/end) is a *binding*: the key bubbles from the field up through every
container to the App, which only then runs the field's action. Keys sent in one burst (tmux send-keys
`BSpace 1 6`, a terminal's key repeat, a pasted sequence) are therefore applied out of order: on "1",
`BSpace 1 6` types "1" and "6" first and deletes the "6" last ("11"). This field runs its own editing
bindings as the key arrives, so each key applies in order; every other key bubbles as before.

A paste into an integer field drops the whitespace around the number (a copied "16\n" lands as 16).

`Tick` is a checkbox whose state shows in its glyph ("X" on, blank off), not only in its colour: Textual's draws
"X" either way, so under NO_COLOR (or on a monochrome terminal) on and off looked the same.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Checkbox, Input


class Field(Input):
    """An Input whose own editing keys act in the order they arrive (see the module docstring)."""

    async def _on_key(self, event: events.Key) -> None:
        # Textual then calls Input._on_key (printable keys) unless this handler prevented the default.
        if event.is_printable:
            return
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            if not binding.priority and await self.app.run_action(binding.action, self):
                event.stop()
                event.prevent_default()
                return

    def _on_paste(self, event: events.Paste) -> None:
        # Textual then calls Input._on_paste with the text as pasted unless this handler prevented it.
        if event.text and self.type in ("integer", "number"):
            lines = event.text.strip().splitlines()
            super()._on_paste(events.Paste(lines[0].strip() if lines else ""))
            event.stop()
            event.prevent_default()


class Tick(Checkbox):
    """A Checkbox whose inner glyph says its state: ▐X▌ on, ▐ ▌ off (legible without colour)."""

    @property
    def BUTTON_INNER(self) -> str:  # type: ignore[override]  # read by ToggleButton._button on every render
        return "X" if self.value else " "
