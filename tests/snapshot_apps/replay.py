"""Put a SpecdecApp into a state by feeding it synthetic events (nothing started).

The app asks its engine what runs next and what failed; a real Engine is attached (never opened, so no
process starts) and records each fed StepFinished / RunFinished as the engine's own run loop would."""

from __future__ import annotations

from typing import Iterable

from tui.core import events as ev


def accept_profile(app) -> None:
    """Mark the profile accepted, as pressing n on the Profile pane does (without opening a run)."""
    from tui.screens.profile import ProfilePane

    app.query_one(ProfilePane).lock_profile()
    app.set_step_status("profile", "passed", 0.0, app.profile.name if app.profile else "")


def attach_engine(app) -> None:
    from tui.core.run.engine import Engine

    if app.engine is None:
        app.engine = Engine(app.profile, app.run_dir, app.sink, steps=app.requested_steps)


def record(app, e: ev.Event) -> None:
    """What the engine's run loop records for the events it emits itself."""
    from tui.core.steps.base import StepResult

    eng = app.engine
    if isinstance(e, ev.StepFinished) and e.step in eng.steps:
        eng.results[e.step] = StepResult(e.status, e.summary)
    elif isinstance(e, ev.StepStarted) and e.step in eng.steps:
        eng.results.pop(e.step, None)
    elif isinstance(e, ev.RunFinished):
        eng.exit_code = e.exit_code


async def feed(app, pilot, events: Iterable[ev.Event], busy: str | None = None) -> None:
    accept_profile(app)
    attach_engine(app)
    app.busy = busy
    for e in events:
        record(app, e)
        app.sink(e)
    await pilot.pause()
    app.flush_logs()
    await pilot.pause()
    app._update_header()
    app._update_hint()
    app.refresh_bindings()
    await pilot.pause()
