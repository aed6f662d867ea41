"""Snapshot tests of every pane at 80×24 (pytest-textual-snapshot; Textual is pinned exactly).

The app runs frozen (no clocks, gauges, spinners, animations or cursor blink) and is put into each
state with deterministic synthetic engine events (tests/snapshot_apps/scenarios.py), so the SVGs only
change when the UI does. Update with `pytest tests/test_snapshots.py --snapshot-update` after
reviewing `snapshot_report.html`.
"""

from __future__ import annotations

import pytest

from tui.app import SpecdecApp

from snapshot_apps import replay, scenarios


@pytest.fixture(autouse=True)
def _frozen(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECDEC_TUI_FREEZE", "1")
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.chdir(tmp_path)


def make_app(profile=None) -> SpecdecApp:
    return SpecdecApp(profile or scenarios.demo_profile(), scenarios.RUN_DIR, frozen=True)


def fed(app: SpecdecApp, events, show: str, busy: str | None = None, then=None):
    async def run_before(pilot) -> None:
        await replay.feed(app, pilot, events, busy=busy)
        app.show_step(show)
        await pilot.pause()
        if then is not None:
            await then(pilot)
            await pilot.pause()

    return run_before


def test_profile_screen(snap_compare):
    assert snap_compare(make_app())


def test_profile_inline_validation(snap_compare):
    app = make_app()

    async def run_before(pilot) -> None:
        app.query_one("#knob-server-port").value = "70000"
        app.query_one("#knob-benchmark-num-prompts").value = "0"
        await pilot.pause()

    assert snap_compare(app, run_before=run_before)


def test_environment_pane_with_the_selected_rows_remedy(snap_compare):
    app = make_app()

    async def select_warning(pilot) -> None:
        table = app.query_one("#env-facts DataTable")
        table.focus()
        table.move_cursor(row=6)

    assert snap_compare(app, run_before=fed(app, scenarios.full_run(), "env", then=select_warning))


def test_checkpoints_pane(snap_compare):
    app = make_app()
    assert snap_compare(app, run_before=fed(app, scenarios.full_run(), "checkpoints"))


def test_dataset_pane(snap_compare):
    app = make_app()
    assert snap_compare(app, run_before=fed(app, scenarios.full_run(), "dataset"))


def test_launch_pane_while_compiling(snap_compare):
    app = make_app()
    assert snap_compare(app, run_before=fed(app, scenarios.until_baseline_compile(), "baseline", busy="baseline"))


def test_launch_pane_after_the_eagle3_benchmark(snap_compare):
    app = make_app()
    assert snap_compare(app, run_before=fed(app, scenarios.full_run(), "eagle3"))


def test_results_pane(snap_compare):
    app = make_app()
    assert snap_compare(app, run_before=fed(app, scenarios.full_run(), "results"))


def test_results_pane_wide(snap_compare):
    app = make_app()
    assert snap_compare(app, run_before=fed(app, scenarios.full_run(), "results"), terminal_size=(120, 40))


def test_hbm_fault_diagnosis_panel(snap_compare):
    app = make_app(scenarios.demo_profile().with_values({"server.tensor_parallel_size": 8}))
    assert snap_compare(app, run_before=fed(app, scenarios.tp8_fault(), "baseline"))


def test_quit_confirmation_while_a_server_runs(snap_compare):
    app = make_app()

    async def quit_(pilot) -> None:
        await pilot.press("ctrl+q")

    assert snap_compare(app, run_before=fed(app, scenarios.until_baseline_compile(), "baseline", busy="baseline",
                                            then=quit_))
