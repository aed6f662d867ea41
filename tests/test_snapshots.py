"""Snapshot tests of every screen at 80×24 and at a wide size, in healthy and failed states
(pytest-textual-snapshot; Textual is pinned exactly).

The app runs frozen (no clocks, gauges, spinners, animations or cursor blink) and is put into each
state with deterministic synthetic engine events (tests/snapshot_apps/scenarios.py), so the SVGs only
change when the UI does. Update with `pytest tests/test_snapshots.py --snapshot-update` after
reviewing `snapshot_report.html`.
"""

from __future__ import annotations

import pytest

from tui.app import SpecdecApp

from snapshot_apps import replay, scenarios, tune

SIZES = {"80x24": (80, 24), "wide": (140, 40)}


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


def tp8():
    return scenarios.demo_profile().with_values({"server.tensor_parallel_size": 8})


# (name, profile factory, events factory or None, pane shown, busy step)
HEALTHY = [
    ("environment", None, scenarios.full_run, "env", None),
    ("checkpoints", None, scenarios.full_run, "checkpoints", None),
    ("dataset", None, scenarios.full_run, "dataset", None),
    ("launch-compiling", None, scenarios.until_baseline_compile, "baseline", "baseline"),
    ("launch-after-bench", None, scenarios.full_run, "eagle3", None),
    ("results", None, scenarios.full_run, "results", None),
]
FAILED = [
    ("environment-tp8-fails-before-launch", tp8, scenarios.env_tp8_fault, "env", None),
    ("launch-hbm-fault", tp8, scenarios.tp8_fault, "baseline", None),
    ("results-throughput-regressed", None, scenarios.regressed_run, "results", None),
]


@pytest.mark.parametrize("size", SIZES)
def test_profile_screen(snap_compare, size):
    assert snap_compare(make_app(), terminal_size=SIZES[size])


@pytest.mark.parametrize("size", SIZES)
def test_profile_inline_validation(snap_compare, size):
    app = make_app()

    async def run_before(pilot) -> None:
        app.query_one("#knob-server-port").value = "70000"
        app.query_one("#knob-benchmark-num-prompts").value = "0"
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=SIZES[size])


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name,profile,events,show,busy", HEALTHY + FAILED, ids=[c[0] for c in HEALTHY + FAILED])
def test_pane(snap_compare, size, name, profile, events, show, busy):
    app = make_app(profile() if profile else None)
    assert snap_compare(app, run_before=fed(app, events(), show, busy=busy), terminal_size=SIZES[size])


def test_environment_pane_with_the_selected_rows_remedy(snap_compare):
    app = make_app()

    async def select_warning(pilot) -> None:
        table = app.query_one("#env-facts DataTable")
        table.focus()
        table.move_cursor(row=9)

    assert snap_compare(app, run_before=fed(app, scenarios.full_run(), "env", then=select_warning))


@pytest.mark.parametrize("size", SIZES)
def test_quit_confirmation_names_the_servers_phase(snap_compare, size):
    app = make_app()

    async def quit_(pilot) -> None:
        await pilot.press("ctrl+q")

    assert snap_compare(app, run_before=fed(app, scenarios.until_baseline_compile(), "baseline", busy="baseline",
                                            then=quit_), terminal_size=SIZES[size])


def test_help_screen(snap_compare):
    app = make_app()

    async def help_(pilot) -> None:
        await pilot.press("question_mark")

    assert snap_compare(app, run_before=help_)


def test_planned_commands_from_the_first_screen(snap_compare):
    # The tutorial's profile: its commands hold no path of this machine (the demo's name the interpreter).
    from tui.core.profile.model import load_profile

    app = make_app(load_profile("gpt-oss-120b-eagle3-trn2"))

    async def cmd(pilot) -> None:
        app.query_one("#steps").focus()
        await pilot.press("c")

    assert snap_compare(app, run_before=cmd)


def test_no_color_failed_step(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(tp8())
    assert snap_compare(app, run_before=fed(app, scenarios.env_tp8_fault(), "env"))


# -- tune runs (issue 10): the matrix pane, browsing a finished run, the compare screen ------------------------
MATRICES = {"healthy": tune.healthy_matrix, "stop-tuning": tune.stop_tuning_matrix}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("state", MATRICES)
def test_matrix_pane(snap_compare, size, state):
    app = make_app(tune.tune_profile())
    assert snap_compare(app, run_before=fed(app, tune.tune_run(MATRICES[state]()), "results"),
                        terminal_size=SIZES[size])


def test_no_color_matrix_pane(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(tune.tune_profile())
    assert snap_compare(app, run_before=fed(app, tune.tune_run(tune.stop_tuning_matrix()), "results"))


def test_tune_arm_pane_while_its_bench_repeats(snap_compare):
    app = make_app(tune.tune_profile())

    async def progress(pilot) -> None:  # the repeat's own progress, after the step started
        app.sink(tune.ev.Progress("eagle3-k2", "requests", 15, 30, "req", 0.9, 17.0, "vllm bench serve"))
        app.sink(tune.ev.Progress("eagle3-k2", "tokens", 1920, 3840, "tok", 131.0, None, "generated tokens"))

    assert snap_compare(app, run_before=fed(app, tune.until_k2_bench(), "eagle3-k2", busy="eagle3-k2",
                                            then=progress))


@pytest.mark.parametrize("show", ["baseline", "results"])
def test_browse_a_finished_run(snap_compare, show):
    from pathlib import Path

    from tui.browse import open_run

    app = SpecdecApp(browse=open_run(tune.write_closed_run(Path(scenarios.RUN_DIR))), frozen=True)

    async def run_before(pilot) -> None:
        app.show_step(show)
        await pilot.pause()

    assert snap_compare(app, run_before=run_before)


def test_compare_screen(snap_compare):
    import json
    from pathlib import Path

    from tui.screens.compare import CompareApp

    dirs = [tune.write_closed_run(Path(scenarios.RUN_DIR)),
            tune.write_closed_run(Path("specdec-runs/20260101-130000-tune-demo"), tune=True)]
    assert snap_compare(CompareApp([json.loads((d / "report.json").read_text()) for d in dirs]))
