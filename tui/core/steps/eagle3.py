"""Step `eagle3`: the EAGLE3 speculative server (tutorial Step 2)."""

from __future__ import annotations

from tui.core.steps.base import StepContext, StepResult
from tui.core.steps.server import run_server_step


async def run(ctx: StepContext) -> StepResult:
    return await run_server_step(ctx, "eagle3", speculative=True)
