"""Put a SpecdecApp into a state by feeding it synthetic events (no engine, nothing started)."""

from __future__ import annotations

from typing import Iterable

from tui.core import events as ev


def accept_profile(app) -> None:
    """Mark the profile accepted, as pressing n on the Profile pane does (without opening a run)."""
    from screens.profile import ProfilePane

    app.query_one(ProfilePane).lock_profile()
    app.set_step_status("profile", "passed", 0.0, app.profile.name if app.profile else "")


async def feed(app, pilot, events: Iterable[ev.Event], busy: str | None = None) -> None:
    accept_profile(app)
    app.busy = busy
    for e in events:
        app.sink(e)
    await pilot.pause()
    app.flush_logs()
    await pilot.pause()
    app._update_header()
    app._update_hint()
    app.refresh_bindings()
    await pilot.pause()
