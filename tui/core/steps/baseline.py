"""Step `baseline`: the non-speculative server (tutorial Step 1)."""

from __future__ import annotations

from tui.core.steps.base import StepContext, StepResult
from tui.core.steps.server import run_server_step


async def run(ctx: StepContext) -> StepResult:
    return await run_server_step(ctx, "baseline", speculative=False)
