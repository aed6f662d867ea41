"""The Profile pane refuses, as you type, what vLLM would refuse for the models' shape — once the checkpoints
step has read their config.json (Pilot, the real engine and the simulator's stand-in hub)."""

from __future__ import annotations

import asyncio

from test_tui_app import STEP_TIMEOUT_S, children, fast_profile_file, isolated, running, text_of, wait  # noqa: F401
from tui.app import SpecdecApp
from tui.core.profile.model import load_profile


async def test_tp15_refused_by_the_checkpoints_step_then_checked_as_you_type(isolated):  # noqa: F811
    tmp = isolated
    prof_path = fast_profile_file(tmp, **{"server.tensor_parallel_size": 15})
    app = SpecdecApp(load_profile(str(prof_path)), tmp / "run")
    async with running(app) as pilot:
        await pilot.press("a")
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        assert app.status["env"] in ("passed", "warned") and app.failed_step == "checkpoints", app.status
        assert "settings-refused-by-vllm" in [d.id for d in app.query_one("#pane-results").diagnoses]
        assert app.status["baseline"] == "pending"  # nothing was launched
        tp = app.query_one("#knob-server-tensor-parallel-size")
        assert not tp.disabled
        app.show_step("profile")
        tp.focus()
        await pilot.pause()
        errors = text_of(app.query_one("#profile-errors"))
        assert "TP 15 does not divide the 64 attention heads of openai/gpt-oss-120b" in errors, errors
        assert "use 16, 32 or 64" in errors, errors  # the stand-in's 64 logical cores, from TP 16 for the HBM
        assert app.query_one("#knob-server-tensor-parallel-size-row").has_class("-invalid")
        tp.value = ""
        for key in "12":  # TP 1 on the way fits the heads but not the HBM; 12 divides neither 64 nor 8
            await pilot.press(key)
        await pilot.pause()
        assert "TP 12 does not divide the 64 attention heads" in text_of(app.query_one("#profile-errors"))
        tp.value = ""
        for key in "32":
            await pilot.press(key)
        await pilot.pause()
        errors = text_of(app.query_one("#profile-errors"))
        assert errors.startswith("✓ valid (1 edited value)") and "heads" not in errors, errors
        assert not app.query_one("#knob-server-tensor-parallel-size-row").has_class("-invalid")
        assert app.query_one("#pane-profile").retry_edits() == {"server.tensor_parallel_size": 32}
        await pilot.press("ctrl+q")
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    assert children() == []
