"""The registry of steps: {step id: step}, every step called the same way, `await step(ctx, sid)`.

The tutorial's steps are named by their id; every arm of a tune run (the baseline included: it too is
benchmarked per workload and repeat) runs through `arm.run`. The engine looks steps up here, never by
module name."""

from __future__ import annotations

from typing import Awaitable, Callable

from tui.core.plan.arms import is_arm_step, is_tune
from tui.core.profile.model import Profile
from tui.core.steps import arm, baseline, checkpoints, dataset, eagle3, env, race, results
from tui.core.steps.base import StepContext, StepResult

Step = Callable[[StepContext, str], Awaitable[StepResult]]


async def _env(ctx: StepContext, sid: str) -> StepResult:
    return await env.run(ctx)


async def _checkpoints(ctx: StepContext, sid: str) -> StepResult:
    return await checkpoints.run(ctx)


async def _dataset(ctx: StepContext, sid: str) -> StepResult:
    return await dataset.run(ctx)


async def _baseline(ctx: StepContext, sid: str) -> StepResult:
    return await baseline.run(ctx)


async def _eagle3(ctx: StepContext, sid: str) -> StepResult:
    return await eagle3.run(ctx)


async def _race(ctx: StepContext, sid: str) -> StepResult:
    return await race.run(ctx, sid)


async def _results(ctx: StepContext, sid: str) -> StepResult:
    return await results.run(ctx)


STEPS: dict[str, Step] = {
    "env": _env,
    "checkpoints": _checkpoints,
    "dataset": _dataset,
    "baseline": _baseline,
    "eagle3": _eagle3,
    "race": _race,
    "results": _results,
}
ARM_STEP: Step = arm.run


def step_for(sid: str, profile: Profile | None = None) -> Step:
    """The step that runs `sid`: its own for the tutorial's steps, the arm step for every arm of a tune run and
    for any other id (a tune arm named by the profile)."""
    if profile is not None and is_tune(profile) and is_arm_step(profile, sid):
        return ARM_STEP
    return STEPS.get(sid, ARM_STEP)
