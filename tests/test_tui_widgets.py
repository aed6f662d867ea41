"""The Textual front end's widgets and panes, driven by synthetic engine events (no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from tui.app import SpecdecApp
from tui.core import events as ev
from tui.core.plan.build import show_commands_text
from tui.core.profile.model import load_profile
from tui.messages import LogsPending, ProgressPending
from tui.widgets.log_view import LogPanel, LogView

from snapshot_apps import replay, scenarios


def text_of(widget) -> str:
    c = widget.content
    return c.plain if hasattr(c, "plain") else str(c)


class LogApp(App):
    def __init__(self, max_lines: int = 100):
        super().__init__()
        self.max_lines = max_lines

    def compose(self) -> ComposeResult:
        yield LogPanel(self.max_lines)


# -- the log -------------------------------------------------------------------------------------------


async def test_collapsed_log_shows_a_line_repeated_by_16_ranks_once_with_x16():
    app = LogApp()
    async with app.run_test(size=(80, 24)) as pilot:
        lv = app.query_one(LogView)
        lv.add_raw([f"(Worker_TP{r} pid={100 + r}) INFO - Initializing worker" for r in range(16)])
        lv.add_clean([(0, "Initializing worker", False, 1)])
        lv.set_ranks({0: 4})
        lv.set_ranks({0: 16})
        await pilot.pause()
        assert lv.mode == "collapsed"
        assert lv.lines == ["  Initializing worker  ×16"]
        await pilot.press("tab")  # focus the filter input, then back: keys go to the app
        lv.toggle_mode()
        await pilot.pause()
        assert len(lv.lines) == 16 and lv.lines[3].endswith("Initializing worker")


async def test_log_is_bounded_by_max_lines():
    app = LogApp(max_lines=100)
    async with app.run_test(size=(80, 24)) as pilot:
        lv = app.query_one(LogView)
        lv.mode = "raw"
        lv.add_raw([f"line {i}" for i in range(250)])
        await pilot.pause()
        assert len(lv.lines) == 100
        assert lv.lines[-1].strip() == "line 249" and lv.lines[0].strip() == "line 150"
        assert lv.total_raw == 250


async def test_errors_are_highlighted_and_the_filter_narrows_the_view():
    app = LogApp()
    async with app.run_test(size=(80, 24)) as pilot:
        lv = app.query_one(LogView)
        lv.mode = "raw"
        lv.add_raw(["\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO starting", "ERROR Failed to allocate 3.6GB on NC 3",
                    "RuntimeError: boom", "INFO loading weights\r50%\r100%"])
        await pilot.pause()
        lines = lv.lines
        assert lines[0] == "  (APIServer pid=1) INFO starting"  # ANSI stripped
        assert lines[1].startswith("✗ ") and lines[2].startswith("✗ ")  # errors marked (survives NO_COLOR)
        assert lines[3] == "  100%"  # carriage-return progress collapsed
        panel = app.query_one(LogPanel)
        panel.action_focus_filter()
        await pilot.press(*"alloc")
        await pilot.pause()
        assert lv.lines == ["✗ ERROR Failed to allocate 3.6GB on NC 3"]
        await pilot.press("escape")  # clears the filter
        await pilot.pause()
        assert len(lv.lines) == 4


async def test_follow_pauses_when_scrolling_up_and_resumes_at_the_end():
    app = LogApp(max_lines=1000)
    async with app.run_test(size=(80, 12)) as pilot:
        lv = app.query_one(LogView)
        lv.mode = "raw"
        lv.add_raw([f"line {i}" for i in range(300)])
        await pilot.pause()
        assert lv.follow and lv.is_vertical_scroll_end
        lv.focus()
        await pilot.press("up")
        assert not lv.follow
        y = lv.scroll_y
        lv.add_raw([f"more {i}" for i in range(50)])
        await pilot.pause()
        assert lv.scroll_y == y  # paused: new lines do not move the view
        await pilot.press("end")
        await pilot.pause()
        assert lv.follow and lv.is_vertical_scroll_end
        status = text_of(app.query_one(".log-status"))
        assert "follow" in status and "350 lines" in status


# -- the app's sink ----------------------------------------------------------------------------------------


async def test_a_log_flood_is_batched_and_progress_is_coalesced():
    app = SpecdecApp(scenarios.demo_profile(), scenarios.RUN_DIR, frozen=True, max_log_lines=1000)
    seen: list = []
    async with app.run_test(size=(80, 24), message_hook=seen.append) as pilot:
        await replay.feed(app, pilot, [ev.StepStarted("baseline", "Baseline server", ts=0.0)], busy="baseline")
        seen.clear()
        for i in range(20_000):
            app.sink(ev.LogLine("baseline", f"(Worker_TP{i % 16} pid=1) INFO line {i}", ts=0.0))
        for i in range(1000):
            app.sink(ev.Progress("baseline", "requests", i, 1000, "req", 1.0, 10.0))
        await pilot.pause()
        app.flush_logs()
        await pilot.pause()
        assert sum(isinstance(m, LogsPending) for m in seen) == 1
        assert sum(isinstance(m, ProgressPending) for m in seen) == 1
        lv = app.query_one("#pane-baseline").log_view
        assert lv.total_raw == 20_000 and len(lv._raw) == 1000
        bench = text_of(app.query_one("#baseline-bench"))
        assert "999/1000 req" in bench


# -- profile pane ------------------------------------------------------------------------------------------


async def test_profile_knobs_are_validated_inline_with_the_loaders_validator(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = SpecdecApp(load_profile("demo"), tmp_path / "run", frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        port = app.query_one("#knob-server-port")
        port.value = "70000"
        await pilot.pause()
        errors = text_of(app.query_one("#profile-errors"))
        assert "server.port = 70000 is not valid" in errors and "1 to 65535" in errors
        assert app.query_one("#knob-server-port-row").has_class("-invalid")
        await pilot.press("n")  # refused: the run does not start with an invalid profile
        await pilot.pause()
        assert app.engine is None and app.cursor == "profile"
        port.value = "8001"
        app.query_one("#knob-benchmark-input-len").value = "700"  # 700 + 128 > max_model_len 768
        await pilot.pause()
        errors = text_of(app.query_one("#profile-errors"))
        assert "max_model_len" in errors
        app.query_one("#knob-benchmark-input-len").value = "512"
        await pilot.pause()
        assert text_of(app.query_one("#profile-errors")).startswith("✓ valid (1 edited value)")
        assert app.profile.server.port == 8001


async def test_save_as_profile_writes_a_toml_that_replays_exactly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = load_profile("demo")
    app = SpecdecApp(base, tmp_path / "run", frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        app.query_one("#knob-benchmark-num-prompts").value = "7"
        app.query_one("#knob-speculative-num-speculative-tokens").value = "2"
        await pilot.pause()
        app.query_one("#steps").focus()
        await pilot.press("w")
        await pilot.pause()
        inp = app.screen.query_one("#save-path")
        assert inp.value == "demo-edited.toml"
        inp.value = str(tmp_path / "mine.toml")
        await pilot.press("enter")
        await pilot.pause()
    saved = load_profile(str(tmp_path / "mine.toml"))
    edited = base.with_values({"benchmark.num_prompts": 7, "speculative.num_speculative_tokens": 2})
    assert saved.name == "mine"
    # The demo's description no longer describes it: the saved one says what was edited and quotes the old.
    desc = saved.data["description"]
    assert desc.startswith("demo, edited: Speculative tokens 1 → 2, Prompts 30 → 7 (was: ")
    assert desc.endswith(f"(was: {base.data['description']})")
    assert saved.data == dict(edited.data, name="mine", description=desc)
    assert show_commands_text(saved, "RUN") == show_commands_text(edited, "RUN")


# -- panes from synthetic events -----------------------------------------------------------------------------


async def test_panes_render_a_whole_run_from_events():
    app = SpecdecApp(scenarios.demo_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, scenarios.full_run())
        assert all(app.status[s] in ("passed", "warned") for s in ev.STEP_IDS)
        env = app.query_one("#env-facts")
        assert len(env.facts) == len(scenarios.ENV_FACTS) and env.counts()["warn"] == 1
        assert app.query_one("#pane-checkpoints").verdict() == "compatible"
        assert "22.7 KB / 22.7 KB" in text_of(app.query_one("#dataset-progress"))
        base = app.query_one("#pane-baseline")
        assert "  Initializing Neuron worker, visible cores set by the plugin  ×16" in base.log_view.lines
        assert [p["name"] for p in base.timeline.phases] == ["config", "workers", "weights", "compile", "warmup",
                                                             "ready"]
        assert "112.13 tok/s" in text_of(app.query_one("#baseline-bench"))
        res = app.query_one("#pane-results")
        assert res.speedup == pytest.approx(1.1998, abs=1e-3)
        assert "112.13 → 134.53 tok/s" in text_of(app.query_one("#headline-text"))
        assert res.exports["report.md"] == Path(scenarios.RUN_DIR) / "report.md"
        assert app.closed and app.exit_code == 0


async def test_the_hbm_fault_shows_a_diagnosis_panel_in_the_launch_and_results_panes():
    app = SpecdecApp(scenarios.demo_profile().with_values({"server.tensor_parallel_size": 8}), scenarios.RUN_DIR,
                     frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, scenarios.tp8_fault())
        assert app.status["baseline"] == "failed" and app.failed_step == "baseline"
        panels = app.query("DiagnosisPanel")
        assert {p.diag.id for p in panels} == {"hbm-allocation-failure"} and len(panels) == 2
        assert all(p.has_class("-error") for p in panels)
        assert "tensor-parallel-size 8" in panels.first().diag.remedy
        assert app.check_action("retry", ()) is True


async def test_without_a_profile_the_app_starts_on_the_profile_pane_and_loads_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = SpecdecApp(None, tmp_path / "run", frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.current_pane_id == "profile"
        await pilot.press("n")  # no profile chosen yet: refused
        await pilot.pause()
        assert app.engine is None
        saved = tmp_path / "p.toml"
        saved.write_text(load_profile("demo").with_values({"server.port": 8123}).to_toml())
        inp = app.query_one("#profile-file")
        inp.focus()
        inp.value = str(saved)
        await pilot.press("enter")
        await pilot.pause()
        assert app.profile is not None and app.profile.server.port == 8123
        assert app.query_one("#knob-server-port").value == "8123"
        app.query_one("#profile-select").value = "demo"
        await pilot.pause()
        assert app.profile.server.port == 8000 and "demo" in text_of(app.query_one("#header-title"))


async def test_no_color_keeps_every_state_readable(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = SpecdecApp(scenarios.demo_profile().with_values({"server.tensor_parallel_size": 8}), scenarios.RUN_DIR,
                     frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, scenarios.tp8_fault())
        assert app.no_color
        lines = app.query_one("#pane-baseline").log_view.lines
        assert any(line.startswith("✗ ") and "Failed to allocate" in line for line in lines)
        steps = app.query_one("#steps")
        assert steps._prompt("baseline").plain.startswith("✗ ") and steps._prompt("dataset").plain.startswith("✓ ")
        assert "✗ ERROR" in str(app.query_one("DiagnosisPanel").border_title)


# ---------------------------------------------------------------------------------------------
# Paths shortened from the middle (tui/widgets/common.py)
# ---------------------------------------------------------------------------------------------

RUN = "/home/op/specdec-runs/gpt-oss-120b-eagle3-trn2-20250101-120000"


def test_shorten_path_keeps_the_start_and_the_file_name():
    from tui.widgets.common import shorten_path

    assert shorten_path(RUN, 200) == RUN
    for width in (60, 50, 45, 44):
        out = shorten_path(RUN, width)
        assert len(out) == width and out.endswith("/gpt-oss-120b-eagle3-trn2-20250101-120000")
        assert out.startswith("/") and RUN.startswith(out.split("…")[0]) and out.count("…") == 1
    assert shorten_path(RUN + "/baseline.serve.log", 20) == "…/baseline.serve.log"
    # A file name that alone does not fit: the path is cut from its middle; degenerate widths stay in bounds.
    out = shorten_path(RUN, 21)
    assert len(out) == 21 and out == "/home/op/s…101-120000"
    assert shorten_path(RUN, 1) == "…" and shorten_path(RUN, 0) == ""


def test_shorten_paths_shortens_only_the_paths_in_a_line():
    from tui.widgets.common import shorten_paths

    line = f"── launched pid 4242; log: {RUN}/baseline.serve.log"
    assert shorten_paths(line, 200) == line
    out = shorten_paths(line, 60)
    assert len(out) == 60 and out.startswith("── launched pid 4242; log: /home/")
    assert out == "── launched pid 4242; log: /home/op/spec…/baseline.serve.log"
    assert shorten_paths(line, 48) == "── launched pid 4242; log: /…/baseline.serve.log"
    assert shorten_paths(line, 47) == "── launched pid 4242; log: …/baseline.serve.log"
    assert shorten_paths(line, 30) == "── launched pid 4242; log: …/baseline.serve.log"  # as short as allowed
    rel = "── launched pid 4242; log: specdec-runs/20260101-120000-demo/eagle3.serve.log"
    assert shorten_paths(rel, 48) == "── launched pid 4242; log: spe…/eagle3.serve.log"
    url = "GET http://127.0.0.1:8000/v1/models/and/a/long/route took a while, a/b is short"
    assert shorten_paths(url, 20) == url  # URLs are left alone, and short paths stay whole
