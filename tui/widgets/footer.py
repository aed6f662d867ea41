"""The footer: Textual's Footer, recomposed only when the keys it shows change.

Textual's Footer rebuilds all its key widgets (and restyles them) on every bindings update, which the app asks
for after most state changes; at 80×24 on a slow host that rebuild was most of a key press's time to paint.
This one compares what it would show (key, label, enabled) with what it shows and skips the rebuild when
they are the same.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Footer


class StableFooter(Footer):
    _shown: tuple[Any, ...] | None = None

    def _signature(self, screen: Any) -> tuple[Any, ...]:
        return tuple((b.key, b.description, b.action, enabled, tooltip)
                     for (_node, b, enabled, tooltip) in screen.active_bindings.values() if b.show)

    def bindings_changed(self, screen: Any) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus or not (self.is_attached and screen is self.screen):
            return
        sig = self._signature(screen)
        if sig == self._shown:
            return
        self._shown = sig
        self.call_after_refresh(self.recompose)
