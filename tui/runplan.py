"""What the front end shows for a profile: its steps (`tui.core.plan.arms.run_steps`), the sidebar label and the pane
title of each, which of them are server (launch) steps, and which are requested.

A two-arm profile gives exactly the tutorial's steps and titles; a profile with a [tune] table gives one server
step per arm (`eagle3-k1`, `eagle3-k2`, ...) with compact sidebar labels ("EAGLE3 k=2") that fit 80 columns.
"""

from __future__ import annotations

from dataclasses import dataclass

from .core.plan import arms
from .core.events import STEP_IDS
from .core.profile.model import Profile

PROFILE_STEP = "profile"
TITLE_WIDTH = 15  # the step list's label column (tui/widgets/step_list.py); this module stays free of Textual


@dataclass(frozen=True)
class StepPlan:
    steps: tuple[str, ...]  # "profile" first, then the run's steps
    titles: dict[str, str]  # sidebar labels (≤ TITLE_WIDTH characters)
    pane_titles: dict[str, str]
    launch: tuple[str, ...]  # the server steps (one LaunchPane each): baseline and every speculative arm
    requested: tuple[str, ...]  # the run's steps the engine runs (the rest are shown as excluded)
    tune: bool

    @property
    def run_steps(self) -> tuple[str, ...]:
        return self.steps[1:]


def _compact(text: str, width: int = TITLE_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _spec_arm(sid: str, profile: Profile | None) -> arms.Arm | None:
    """The speculative arm `sid` of a tune profile, else None (the tutorial's steps keep their titles)."""
    if profile is None or not arms.is_tune(profile):
        return None
    arm = arms.arm_by_id(profile, sid)
    return arm if arm is not None and arm.speculative else None


def sidebar_title(sid: str, profile: Profile | None) -> str:
    """The step list's label: the tutorial's titles, "EAGLE3 k=2" for an arm, "k=2 redhat" when drafts differ."""
    if sid == PROFILE_STEP:
        return "Profile"
    arm = _spec_arm(sid, profile)
    if arm is None:
        return arms.step_title(sid, profile)
    return _compact(arm.title if len(arm.title) <= TITLE_WIDTH else arm.short)


def pane_title(sid: str, profile: Profile | None) -> str:
    if sid == PROFILE_STEP:
        return "Profile"
    arm = _spec_arm(sid, profile)
    return f"{arm.title} server" if arm is not None else arms.step_title(sid, profile)


def requested_steps(profile: Profile | None, given: list[str] | None, run: list[str]) -> tuple[str, ...]:
    """The steps to run: every step of the run, or those `given` (--steps). `eagle3` given for a tune profile
    means every speculative arm."""
    if not given:
        return tuple(run)
    wanted = set(given)
    tune = profile is not None and arms.is_tune(profile)
    out = []
    for sid in run:
        if sid in wanted:
            out.append(sid)
        elif tune and "eagle3" in wanted and profile is not None and arms.is_arm_step(profile, sid) \
                and sid != "baseline":
            out.append(sid)
    return tuple(out)


def plan_for(profile: Profile | None, given: list[str] | None = None) -> StepPlan:
    run = arms.run_steps(profile) if profile is not None else list(STEP_IDS)
    steps = (PROFILE_STEP, *run)
    launch = tuple(a.id for a in arms.arms_of(profile)) if profile is not None else ("baseline", "eagle3")
    return StepPlan(
        steps=steps,
        titles={s: sidebar_title(s, profile) for s in steps},
        pane_titles={s: pane_title(s, profile) for s in steps},
        launch=launch,
        requested=requested_steps(profile, given, run),
        tune=profile is not None and arms.is_tune(profile),
    )
