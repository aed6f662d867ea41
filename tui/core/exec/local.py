"""The local executor: every step runs in this process, on this host, one at a time (a run as it always ran; the
profile's [stand_in] platform is the engine's, tui/core/exec/standin.py)."""

from __future__ import annotations

from tui.core.exec.base import Executor, implementation
from tui.core.steps.base import StepContext, StepResult
from tui.core.steps.registry import step_for


@implementation("local")
class LocalExecutor(Executor):
    local = True

    async def run_step(self, ctx: StepContext, sid: str) -> StepResult:
        return await step_for(sid, ctx.profile)(ctx, sid)


__all__ = ["LocalExecutor"]
