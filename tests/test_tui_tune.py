"""The app for tune runs (issue 10), driven by synthetic events and files (nothing is started): one server step
per arm, the matrix results pane, `--open RUN_DIR` (browse a finished run), the compare screen, and the
Profile pane's sweep toggle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tui.core.profile.model import load_profile

from tui.app import CLOSED_RUN, SpecdecApp
from tui.browse import OpenRunError, log_files, open_run
from tui.core.plan import arms
from tui.core import events as ev
from tui.runplan import plan_for
from tui.widgets.step_list import ALL_STEPS, TITLE_WIDTH, StepList

from snapshot_apps import replay, scenarios, tune

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECDEC_TUI_FREEZE", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.chdir(tmp_path)


def text_of(widget) -> str:
    c = widget.content
    return c.plain if hasattr(c, "plain") else str(c)


def notes_of(app) -> list[str]:
    return [n.message for n in app._notifications]


def step_ids(app) -> list[str]:
    sl = app.query_one(StepList)
    return [sl.get_option_at_index(i).id for i in range(sl.option_count)]


# -- 1. arms are steps ---------------------------------------------------------------------------------------
async def test_a_two_arm_profile_keeps_the_tutorials_steps_and_panes():
    app = SpecdecApp(scenarios.demo_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)):
        assert step_ids(app) == list(ALL_STEPS)
        assert app.launch_steps == ("baseline", "eagle3")
        assert type(app.results_pane).__name__ == "ResultsPane"


async def test_a_tune_profile_has_one_server_pane_per_arm_with_compact_labels():
    prof = tune.tune_profile()
    app = SpecdecApp(prof, scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)):
        assert step_ids(app) == ["profile", *arms.run_steps(prof)]
        assert app.launch_steps == ("baseline", "eagle3-k1", "eagle3-k2", "eagle3-k3")
        for sid in app.launch_steps:
            assert type(app.pane(sid)).__name__ == "LaunchPane"
        assert app.plan.titles["eagle3-k2"] == "EAGLE3 k=2"
        assert all(len(t) <= TITLE_WIDTH for t in app.plan.titles.values())
        assert type(app.results_pane).__name__ == "MatrixPane"
        assert app.requested_steps == arms.run_steps(prof)


def test_labels_stay_compact_with_several_drafts():
    prof = tune.tune_profile().with_values({
        "tune.drafts": {"redhat": {"model": "RedHatAI/gpt-oss-120b-speculator.eagle3"},
                        "steven": {"model": "stevenabreu7/gpt-oss-120b-eagle3"}}})
    plan = plan_for(prof)
    spec = [s for s in plan.launch if s != "baseline"]
    assert len(spec) == 6 and all(len(plan.titles[s]) <= TITLE_WIDTH for s in spec)
    assert plan.titles["eagle3-k2-redhat"] == "k=2 redhat"


async def test_arm_events_reach_their_pane_and_arm_progress_names_the_workload_and_repeat():
    prof = tune.tune_profile()
    app = SpecdecApp(prof, scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, tune.until_k2_bench(repeat=2), busy="eagle3-k2")
        k2 = app.pane("eagle3-k2")
        assert k2.arm_progress is not None and (k2.arm_progress.workload, k2.arm_progress.repeat) == ("sonnet", 2)
        assert "sonnet 2/3" in text_of(app.query_one("#eagle3-k2-bench"))
        assert [p["name"] for p in k2.timeline.phases][-1] == "ready"
        assert any("phase ready" in line for line in k2.log_view.lines)
        assert app.status["eagle3-k1"] == "passed" and app.status["eagle3-k3"] == "pending"
        # The arm's own progress, as the engine sends it while the repeat runs.
        app.sink(ev.Progress("eagle3-k2", "requests", 20, 30, "req", 0.9, 11.0, "vllm bench serve"))
        await pilot.pause()
        bench = text_of(app.query_one("#eagle3-k2-bench"))
        assert "sonnet 2/3" in bench and "20/30" in bench
        app.sink(ev.ArmProgress("eagle3-k2", "chat", 1, 3, ("sonnet", "chat")))
        await pilot.pause()
        assert "chat 1/3" in text_of(app.query_one("#eagle3-k2-bench"))
        # n names the arm that runs next; the quit question names its server.
        assert "EAGLE3 k=2" in text_of(app.query_one("#next-hint"))


async def test_choosing_another_profile_changes_the_steps_and_panes():
    app = SpecdecApp(scenarios.demo_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        app.query_one("#profile-select").value = "tune-demo"
        await pilot.pause()
        await pilot.pause()
        assert step_ids(app) == ["profile", *arms.run_steps(load_profile("tune-demo"))]
        assert "race" in step_ids(app)  # the bundled tune-demo races (tune.adaptive): its Race step is listed
        assert type(app.results_pane).__name__ == "MatrixPane"
        assert app.query_one("#pane-eagle3-k3").title == "EAGLE3 k=3 server"
        assert not app.query("#pane-eagle3")
        app.query_one("#profile-select").value = "demo"
        await pilot.pause()
        await pilot.pause()
        assert step_ids(app) == list(ALL_STEPS)
        assert type(app.results_pane).__name__ == "ResultsPane"
        assert not app.query("#pane-eagle3-k1")
        app.query_one(StepList).highlighted = 5  # the step list shows the pane it points at
        await pilot.pause()
        assert app.current_pane_id == "eagle3"


# -- 2. the matrix pane ------------------------------------------------------------------------------------
def _in_view(app, widget) -> bool:
    r, screen = widget.region, app.screen.region
    return r.height > 0 and r.y >= 0 and r.bottom <= screen.bottom - 1  # above the footer


async def test_matrix_pane_puts_the_recommendation_on_top_at_80x24_and_pages_workloads():
    app = SpecdecApp(tune.tune_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, tune.tune_run())
        app.show_step("results")
        await pilot.pause()
        mp = app.results_pane
        rec = app.query_one("#recommendation")
        assert _in_view(app, rec)
        # Fully shown: its content is not cut (every line of both workloads is inside the region).
        lines = rec.render_lines(rec.region.reset_offset)
        assert len(lines) == rec.region.height
        text = text_of(rec)
        assert "sonnet: deploy EAGLE3 k=1" in text and "chat: deploy EAGLE3 k=2" in text
        assert "1.20x [1.13–1.27]" in text and "smaller k" in text
        # The table: every arm for the selected workload; the recommended arm is selected.
        table = app.query_one("#matrix-table")
        assert table.row_count == 4 and mp.workload == "sonnet" and mp.selected_arm == "eagle3-k1"
        assert _in_view(app, table)
        # ] pages the workload: the table, the noise floor and the bars follow.
        assert app.check_action("page_next", ()) is True
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert mp.workload == "chat" and mp.selected_arm in ("eagle3-k1", "eagle3-k2")
        assert "0.99x" in text_of(app.query_one("#matrix-noise"))
        row = table.get_row("eagle3-k2")
        assert str(row[1]).startswith("158.9")
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert mp.workload == "sonnet"
        # The per-position bars follow the arm under the table's cursor.
        table.focus()
        table.move_cursor(row=3)
        await pilot.pause()
        assert mp.selected_arm == "eagle3-k3"
        pos = text_of(app.query_one("#matrix-positions"))
        assert "EAGLE3 k=3" in pos and "pos3" in pos and "pos0" not in pos and "28.4%" in pos and "62.3%" in pos
        assert "k'=3 2.43" in pos and "7/8 prompts identical" in pos and "token 37" in pos
        chart = text_of(app.query_one("#matrix-chart"))
        assert "sonnet" in chart and "chat" in chart and "134.5 [131–138]" in chart


async def test_matrix_pane_says_stop_tuning_when_acceptance_is_below_30_percent():
    app = SpecdecApp(tune.tune_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, tune.tune_run(tune.stop_tuning_matrix()))
        app.show_step("results")
        await pilot.pause()
        rec = app.query_one("#recommendation")
        assert _in_view(app, rec) and rec.has_class("-stop")
        assert "stop tuning: validate draft and target first" in text_of(rec)
        assert "★" not in "".join(str(c) for c in app.query_one("#matrix-table").get_row("eagle3-k1"))
        # One workload: nothing to page through, and the key says so.
        assert "one workload" in app.why_not("page_next")
        # The diagnosis is listed under Diagnostics; the recommendation, not the banner, leads the pane.
        assert [d.id for d in app.results_pane.diagnoses] == ["acceptance-low"]
        assert not app.query_one("#pane-results .failure-banner").has_class("-shown")


def test_matrix_rows_fit_80_columns():
    from tui.screens.matrix import matrix_rows

    cols, rows = matrix_rows(tune.healthy_matrix(), "sonnet", 50)
    widths = [max(len(c), *(len(r[1][i]) for r in rows)) + 2 for i, c in enumerate(cols)]
    assert sum(widths) <= 51, widths
    assert rows[1][1][0] == "★ k=1" and rows[1][1][1] == "134.5±3.9"


# -- 3. --open RUN_DIR ---------------------------------------------------------------------------------------
async def test_open_a_finished_two_arm_run_read_only(tmp_path):
    d = tune.write_closed_run(tmp_path / "run")
    run = open_run(d)
    app = SpecdecApp(browse=run, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.engine is None and app.closed
        assert app.status["env"] == "warned" and app.status["eagle3"] == "passed"
        assert app.pane("env").summary == "11 checks, 1 warnings: compile cache"
        assert len(app.pane("env").query_one("FactTable").facts) == len(scenarios.ENV_FACTS)
        assert app.pane("dataset").query_one("FactTable").facts[2].value == "verified"
        res = app.results_pane
        assert res.payload is not None and res.speedup == pytest.approx(1.2, abs=0.01)
        assert "1.20x" in text_of(app.query_one("#snippet"))
        assert set(res.exports) == {"report.md", "report.json", "summary.csv"}
        assert [d.id for d in res.diagnoses] == ["compile-cache-cold"]
        # The server steps: phases, command, smoke and bench from state.json; the log files page with [ / ].
        base = app.pane("baseline")
        assert [p["name"] for p in base.timeline.phases][-1] == "ready"
        assert base.command_text.startswith("python -m tui.sim serve")
        assert base.smoke is not None and base.smoke.status == "pass"
        assert [p.name for p in base.log_files] == ["baseline.serve.log", "baseline.bench.log"]
        assert any(line.endswith("×16") for line in base.log_view.lines)  # replayed through the log pipeline
        app.show_step("baseline")
        await pilot.pause()
        assert app.check_action("page_next", ()) is True
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert base.log_files[base.log_index].name == "baseline.bench.log"
        assert any("Serving Benchmark Result" in line for line in base.log_view.lines)
        # Nothing runs: n, a, r and s say why.
        for key, action in (("n", "next"), ("a", "run_all"), ("r", "retry"), ("s", "stop_server")):
            assert CLOSED_RUN.split(":")[0].lower() in app.why_not(action).lower()
            await pilot.press(key)
            await pilot.pause()
        assert sum("opened with --open" in n for n in notes_of(app)) == 4
        assert app.engine is None
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.return_value == 0


async def test_open_a_finished_tune_run_shows_the_matrix_and_every_arms_logs(tmp_path):
    d = tune.write_closed_run(tmp_path / "run", tune=True)
    run = open_run(d)
    assert run.tune and run.plan.launch == ("baseline", "eagle3-k1", "eagle3-k2", "eagle3-k3")
    app = SpecdecApp(browse=run, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert type(app.results_pane).__name__ == "MatrixPane"
        assert app.results_pane.matrix == tune.healthy_matrix()
        names = [p.name for p in app.pane("eagle3-k2").log_files]
        assert names[0] == "eagle3-k2.serve.log" and names[1:4] == [f"eagle3-k2.sonnet.r{i}.bench.log" for i in (1, 2, 3)]
        assert names[4:] == [f"eagle3-k2.chat.r{i}.bench.log" for i in (1, 2, 3)]
        app.show_step("results")
        await pilot.pause()
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert app.results_pane.workload == "chat"


async def test_open_a_run_whose_profile_no_longer_loads_takes_its_steps_from_the_report(tmp_path):
    d = tune.write_closed_run(tmp_path / "run", tune=True)
    (d / "profile.toml").write_text("[models\n")
    run = open_run(d)
    assert run.profile is None and any("profile.toml does not load" in n for n in run.notes)
    assert run.plan.steps == ("profile", *arms.run_steps(tune.tune_profile()))
    assert run.plan.titles["eagle3-k2"] == "EAGLE3 k=2" and run.plan.tune
    app = SpecdecApp(browse=run, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert type(app.results_pane).__name__ == "MatrixPane" and app.status["eagle3-k3"] == "passed"
        assert "tune-demo" in text_of(app.query_one("#header-title"))
        assert any("profile.toml does not load" in n for n in notes_of(app))


def test_log_files_of_a_step_do_not_include_another_steps(tmp_path):
    for name in ("eagle3.serve.log", "eagle3.bench.log", "eagle3-k1.serve.log", "eagle3-k1.sonnet.r2.bench.log",
                 "eagle3-k1.sonnet.r10.bench.log", "eagle3-k1.chat.r1.bench.log"):
        (tmp_path / name).write_text("x\n")
    assert [p.name for p in log_files(tmp_path, "eagle3")] == ["eagle3.serve.log", "eagle3.bench.log"]
    assert [p.name for p in log_files(tmp_path, "eagle3-k1")] == [
        "eagle3-k1.serve.log", "eagle3-k1.chat.r1.bench.log", "eagle3-k1.sonnet.r2.bench.log",
        "eagle3-k1.sonnet.r10.bench.log"]


@pytest.mark.parametrize("case,fragment", [
    ("missing", "no such directory"),
    ("file", "is a file, not a run directory"),
    ("empty", "not a specdec-tui run directory"),
    ("unfinished", "never finished"),
    ("foreign", "not a specdec-tui report"),
    ("damaged", "report.json cannot be read"),
])
def test_open_refuses_a_missing_or_foreign_run_dir_in_one_paragraph(tmp_path, case, fragment):
    d = tmp_path / "d"
    if case == "file":
        d.write_text("x")
    elif case != "missing":
        d.mkdir()
    if case == "unfinished":
        (d / "state.json").write_text("{}")
    elif case == "foreign":
        (d / "report.json").write_text(json.dumps({"schema": "someone-else/1", "steps": []}))
    elif case == "damaged":
        (d / "report.json").write_text("{not json")
    with pytest.raises(OpenRunError) as exc:
        open_run(d)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)
    r = subprocess.run([sys.executable, "-m", "tui", "--open", str(d)], capture_output=True, text=True, cwd=REPO,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and fragment in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.startswith("specdec-tui: error:") and r.stderr.count("\n") == 1


def test_open_flag_parsing(tmp_path):
    d = tune.write_closed_run(tmp_path / "run")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, cwd=REPO,
                              timeout=60, stdin=subprocess.DEVNULL)

    r = cli("--open", str(d), "--headless")
    assert r.returncode == 2 and "cannot be combined with --headless" in r.stderr
    r = cli("--open", str(d))  # no terminal here
    assert r.returncode == 2 and "needs a terminal" in r.stderr and "report.md" in r.stderr
    assert "--open RUN_DIR" in cli("--help").stdout


# -- 4. compare ----------------------------------------------------------------------------------------------
async def test_compare_screen_shows_runs_side_by_side(tmp_path):
    from tui.screens.compare import CompareApp, compare_grid
    from tui.core.results.compare import compare_columns, compare_rows

    two = json.loads((tune.write_closed_run(tmp_path / "a") / "report.json").read_text())
    tuned = json.loads((tune.write_closed_run(tmp_path / "b", tune=True) / "report.json").read_text())
    cols = compare_columns([two, tuned])
    rows = {r[0]: r[1:] for r in compare_rows(cols)}
    assert rows["Profile"][0] == "demo (simulated)" and rows["Profile"][-1] == "tune-demo (simulated)"
    heads, grid = compare_grid([two, tuned])
    assert len(heads) == len(cols) and all(len(r) == 1 + len(cols) for r in grid)  # the headless columns, all
    app = CompareApp([two, tuned])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#compare-table")
        assert table.region.height > 0 and len(table.ordered_columns) == 1 + len(cols)
        await pilot.press("escape")
        await pilot.pause()
    assert app.return_value == 0


async def test_compare_screen_pushed_on_the_main_app_closes_back_to_it(tmp_path):
    from tui.screens.compare import CompareScreen

    rep = json.loads((tune.write_closed_run(tmp_path / "a") / "report.json").read_text())
    app = SpecdecApp(scenarios.demo_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(CompareScreen([rep, rep]))
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CompareScreen) and app.is_running


# -- 5. the sweep toggle -----------------------------------------------------------------------------------
async def test_the_profile_screen_turns_a_two_arm_run_into_a_sweep_and_back():
    app = SpecdecApp(scenarios.demo_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        port = app.query_one("#knob-server-port")
        port.value = "8123"  # an edit in progress is kept across the toggle
        await pilot.pause()
        cb = app.query_one("#sweep-toggle")
        assert cb.value is False and "off" in str(cb.label)
        cb.focus()
        await pilot.press("space")
        await pilot.pause()
        await pilot.pause()
        prof = app.query_one("#pane-profile").current_profile()
        assert prof.data["tune"]["num_speculative_tokens"] == [1, 2, 3] and prof.data["tune"]["repeats"] == 3
        assert prof.data["tune"]["workloads"] == ["sonnet"] and prof.server.port == 8123
        assert step_ids(app) == ["profile", *arms.run_steps(prof)]
        assert "eagle3-k3" in step_ids(app) and "ON" in str(cb.label)
        await pilot.press("space")
        await pilot.pause()
        await pilot.pause()
        prof = app.query_one("#pane-profile").current_profile()
        assert "tune" not in prof.data and prof.server.port == 8123
        assert step_ids(app) == list(ALL_STEPS)


async def test_a_tune_profile_loads_with_the_toggle_on_and_it_locks_with_the_run():
    app = SpecdecApp(tune.tune_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        cb = app.query_one("#sweep-toggle")
        assert cb.value is True and "sonnet, chat" in str(cb.label)
        replay.accept_profile(app)
        await pilot.pause()
        assert cb.disabled


async def test_c_on_an_opened_run_shows_the_commands_it_ran_and_its_recorded_version(tmp_path):
    """After a run (here --open), `c` away from a server pane shows what ran (commands.json), not "planned"; without
    a record it plans with the vLLM version of the run's env.json, never "unknown, assuming < 0.32"."""
    from tui.screens.modals import CommandScreen
    from tui.core.store.rundir import RunDir
    from tui.core.plan import build as plan

    d = tune.write_closed_run(tmp_path / "run")
    (d / "env.json").write_text(json.dumps({"stored": {"vllm_version": "0.32.0"}}))
    run = open_run(d)
    app = SpecdecApp(browse=run, frozen=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app.show_step("results")
        await pilot.pause()
        app.action_show_command()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CommandScreen)
        assert "(planned)" in screen.title_text and "vLLM 0.32.0 (recorded in the run's env.json)" in screen.serve
        assert "custom JSONL" in screen.serve and "assuming < 0.32" not in screen.serve
        screen.dismiss()
        await pilot.pause()
        rd = RunDir(d)
        plan.record_command(d, "baseline", "serve", ["vllm", "serve", "m", "--port", "8000"],
                            "vllm serve m \\\n  --port 8000", rd.write_json)
        app.action_show_command()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CommandScreen)
        assert "(ran)" in screen.title_text and "vllm serve m" in screen.serve and "vLLM 0.32.0" in screen.serve
