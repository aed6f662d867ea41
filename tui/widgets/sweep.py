"""The Profile pane's "sweep k" toggle: turn a two-arm run into the tutorial's Step 3 matrix, and back.

Checked, the profile gets a [tune] table with the defaults (k = 1, 2, 3, three repeats, the sonnet workload);
unchecked, the [tune] table goes again. The step list follows (one server step per arm).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Checkbox, Label

from ..core.plan.arms import is_tune, repeats_of, workloads_of
from ..core.profile.model import Profile, profile_from_dict
from .fields import Tick

SWEEP_DEFAULTS = {"tune.num_speculative_tokens": [1, 2, 3], "tune.repeats": 3, "tune.workloads": ["sonnet"]}


def with_sweep(profile: Profile) -> Profile:
    """The profile with a [tune] table of the defaults (kept as it is when it already has one)."""
    return profile if is_tune(profile) else profile.with_values(SWEEP_DEFAULTS)


def without_sweep(profile: Profile) -> Profile:
    """The profile without its [tune] table: the tutorial's two arms."""
    if not is_tune(profile):
        return profile
    raw = {k: v for k, v in profile.raw.items() if k != "tune"}
    return profile_from_dict(raw, profile.source, name=profile.name)


def sweep_label(profile: Profile | None) -> str:
    """The toggle's label, its state in words (legible without colour) and what the sweep runs:
    "off · k=1,2,3 ×3: sonnet" (the defaults while there is no [tune] table)."""
    if profile is None or not is_tune(profile):
        ks, reps, wls = SWEEP_DEFAULTS["tune.num_speculative_tokens"], SWEEP_DEFAULTS["tune.repeats"], \
            SWEEP_DEFAULTS["tune.workloads"]
    else:
        ks, reps, wls = profile.tune.num_speculative_tokens, repeats_of(profile), workloads_of(profile)
    state = "ON" if profile is not None and is_tune(profile) else "off"
    return f"{state} · k={','.join(str(k) for k in ks)} ×{reps}: {', '.join(wls)}"


class SweepToggle(Horizontal):
    """A form row: "Sweep k (Step 3)" and a checkbox. Posts Toggled when the operator flips it."""

    DEFAULT_CSS = """
    SweepToggle { height: 1; }
    SweepToggle > Label { width: 21; height: 1; }
    SweepToggle > Checkbox { width: 1fr; height: 1; border: none; padding: 0; }
    """

    class Toggled(Message):
        def __init__(self, on: bool) -> None:
            super().__init__()
            self.on = on

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._quiet = False

    def compose(self) -> ComposeResult:
        yield Label("Sweep k (Step 3)")
        yield Tick(sweep_label(None), id="sweep-toggle", compact=True)

    @property
    def checkbox(self) -> Checkbox:
        return self.query_one(Checkbox)

    def show(self, profile: Profile | None) -> None:
        """Reflect `profile` (checked when it has a [tune] table) without posting Toggled."""
        cb = self.checkbox
        on = profile is not None and is_tune(profile)
        cb.label = sweep_label(profile)
        if cb.value != on:
            self._quiet = True
            cb.value = on

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        if self._quiet:
            self._quiet = False
            return
        self.post_message(self.Toggled(event.value))
