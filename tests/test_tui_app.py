"""The Textual front end end to end: Pilot drives the real engine and the simulator (demo profile).

Every test runs a fast variant of the demo (time_scale and token_time_scale 0.05, 4 prompts, a free port,
caches under tmp_path) and leaves no process behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import psutil
import pytest

from tui.app import SpecdecApp
from tui.core import events as ev
from tui.core.profile.model import load_profile

REPO = Path(__file__).resolve().parents[1]
STEP_TIMEOUT_S = 120  # a safety net for a hung step, not a performance assertion


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """HOME, XDG caches and the simulator's compile cache inside tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fast_profile_file(tmp: Path, **extra) -> Path:
    """The demo, fast, written to a TOML file (the TUI and the headless runner load the same file)."""
    values = {"simulation.time_scale": 0.05, "simulation.token_time_scale": 0.05, "benchmark.num_prompts": 4,
              "server.port": free_port(),
              "server.env": {"VLLM_CACHE_ROOT": str(tmp / "vllm-cache")}}
    values.update(extra)
    prof = load_profile("demo").with_values(values)
    path = tmp / "fast-demo.toml"
    path.write_text(prof.to_toml())
    return path


def children() -> list[psutil.Process]:
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def run_children() -> list[psutil.Process]:
    """children() without the run's stand-in platform (and its watchdog), which lives until the run closes."""
    procs = children()
    platform: set[int] = set()
    for p in procs:
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if "stand-in" in cmd and "tui.sim" in cmd:
            platform.add(p.pid)
    out = []
    for p in procs:
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if p.pid in platform or ("tui.core.proc.watchdog" in cmd and cmd and cmd[-1].isdigit() and int(cmd[-1]) in platform):
            continue
        out.append(p)
    return out


@asynccontextmanager
async def running(app: SpecdecApp, messages: list | None = None):
    """app.run_test at 80×24; whatever happens, the run's processes are gone afterwards."""
    try:
        async with app.run_test(size=(80, 24), message_hook=messages.append if messages is not None else None) as pilot:
            yield pilot
    finally:
        if app.engine is not None and not app.closed:
            app.engine.cleanup_sync()


async def wait(awaitable, pilot) -> None:
    await asyncio.wait_for(awaitable, STEP_TIMEOUT_S)
    await pilot.pause()


def text_of(widget) -> str:
    c = widget.content
    return c.plain if hasattr(c, "plain") else str(c)


def normalized(report: dict) -> dict:
    """report.json without what legitimately differs between two runs: timestamps, the run directory,
    durations and the latency/throughput numbers the simulator measures on the wall clock."""
    r = json.loads(json.dumps(report))
    r.pop("generated")
    r.pop("run_dir")
    r.pop("verdict")  # from the numbers, checked by assert_verdict_follows_the_numbers
    r.pop("metrics")  # the gate names' numbers: the same wall-clock measurements as runs below
    r["dataset"].pop("path")  # inside each run directory
    r["dataset"].pop("source")  # the stand-in hub's port
    r["commands"] = sorted(r["commands"])  # the text names each run directory
    # /metrics windows are the wall clock: compare which benches have a series, not its windows
    r["timeseries"] = {arm: sorted(keys) for arm, keys in (r.get("timeseries") or {}).items()}
    r["figures"] = [f["name"] for f in r.get("figures") or []]  # the same charts (their pixels follow the numbers)
    # bench commands as run name each run directory: compare which ran (arm, workload, repeat), not the paths
    r["bench_commands"] = {arm: [(c["workload"], c["repeat"]) for c in cmds]
                           for arm, cmds in (r.get("bench_commands") or {}).items()}
    for la in r.get("launches") or []:  # startup seconds are the wall clock
        for k in list(la):
            if k not in ("id", "title", "status"):
                la[k] = type(la[k]).__name__
    for st in r["steps"]:
        st.pop("seconds")
        st["summary"] = re.sub(r"\d+\.\d+x", "<x>", st["summary"])
    stable = {"completed", "failed", "num_prompts", "acceptance_rate", "acceptance_length", "per_position_acceptance",
              "acceptance_source"}
    for run in r["runs"].values():
        for k in list(run):
            if k not in stable:
                run[k] = type(run[k]).__name__
    r["comparison"] = {k: type(v).__name__ for k, v in r["comparison"].items()}
    # The verdict on a simulated run follows the wall clock of a shared machine (a loaded machine can make
    # EAGLE3 slower): compare everything else, and check the verdict against the numbers separately.
    r.pop("exit_code", None)
    # (the results summary counts its diagnoses, the throughput one included: the list below is compared)
    r["steps"] = [dict(st, status="<verdict>", summary=re.sub(r"; \d+ diagnos[ie]s$", "", st["summary"]))
                  if st["id"] == "results" else st for st in r["steps"]]
    r["diagnostics"] = [d for d in r["diagnostics"] if d["id"] != "throughput-regressed"]
    for d in r["diagnostics"]:
        d["evidence"] = len(d["evidence"])
    return r


def assert_verdict_follows_the_numbers(run_dir) -> None:
    rep = json.loads((run_dir / "report.json").read_text())
    bj = json.loads((run_dir / "baseline.json").read_text())
    ej = json.loads((run_dir / "eagle3.json").read_text())
    speedup = rep["comparison"]["output_throughput_speedup"]
    assert speedup == pytest.approx(ej["output_throughput"] / bj["output_throughput"], abs=1e-4)  # report rounds to 4 places
    ids = [d["id"] for d in rep["diagnostics"]]
    if speedup > 1.0:
        assert rep["exit_code"] == 0 and "throughput-regressed" not in ids
    else:
        assert rep["exit_code"] == 1 and "throughput-regressed" in ids


async def test_keyboard_walkthrough_from_profile_to_results_matches_the_headless_report(isolated):
    tmp = isolated
    prof_path = fast_profile_file(tmp)
    app = SpecdecApp(load_profile(str(prof_path)), tmp / "tui-run")
    messages: list = []
    async with running(app, messages) as pilot:
        assert app.current_pane_id == "profile"
        await pilot.press("n")  # accept the profile: the run opens, Environment is next
        await pilot.pause()
        assert app.engine is not None and app.cursor == "env"
        for sid in ev.STEP_IDS:
            assert app.cursor == sid
            await pilot.press("n")
            await wait(app.step_done.wait(), pilot)
            if sid != "results":  # the verdict follows the numbers: see assert_verdict_follows_the_numbers
                assert app.status[sid] in ("passed", "warned"), (sid, app.status[sid])
        await wait(app.run_finished.wait(), pilot)
        # The screen: the results pane with the speedup headline, the table and the export paths.
        assert app.current_pane_id == "results"
        res = app.query_one("#pane-results")
        assert res.speedup is not None
        assert "EAGLE3 output throughput speedup" in text_of(app.query_one("#headline-text"))
        assert res.payload is not None and res.payload["rows"][0][0] == "Output throughput (tok/s)"
        assert set(res.exports) == {"report.md", "report.json", "summary.csv"}
        assert all(p.is_file() for p in res.exports.values())
        # The launch panes: phases, the rank-collapsed log and the smoke test.
        base = app.query_one("#pane-baseline")
        assert [p["name"] for p in base.timeline.phases][-1] == "ready"
        assert any(line.endswith("×16") for line in base.log_view.lines)
        assert base.smoke is not None and base.smoke.status == "pass"
        assert "tok/s" in text_of(app.query_one("#eagle3-bench"))
        # The engine's events, as the app received them.
        finished = [e for e in app.events if isinstance(e, ev.StepFinished)]
        assert [e.step for e in finished] == list(ev.STEP_IDS)
        assert any(isinstance(e, ev.ComparisonTable) for e in app.events)
        engine_msgs = [m for m in messages if type(m).__name__ == "EngineEvent"]
        finished_runs = [m.event for m in engine_msgs if isinstance(m.event, ev.RunFinished)]
        assert len(finished_runs) == 1 and finished_runs[0].exit_code == (0 if res.speedup > 1.0 else 1)
        await pilot.press("ctrl+q")
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    assert app.return_value == (0 if res.speedup > 1.0 else 1)
    assert children() == []
    assert_verdict_follows_the_numbers(tmp / "tui-run")

    # The headless runner on the same profile file writes the same report (apart from timings).
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof_path), "--headless", "--run-dir",
                          str(tmp / "headless-run")], capture_output=True, text=True, env=env, cwd=tmp, timeout=300)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    assert_verdict_follows_the_numbers(tmp / "headless-run")
    tui_report = json.loads((tmp / "tui-run" / "report.json").read_text())
    headless_report = json.loads((tmp / "headless-run" / "report.json").read_text())
    assert normalized(tui_report) == normalized(headless_report)
    assert children() == []


async def test_tp8_fault_demo_fails_in_the_environment_step_first(isolated):
    tmp = isolated
    prof_path = fast_profile_file(tmp, **{"server.tensor_parallel_size": 8})
    app = SpecdecApp(load_profile(str(prof_path)), tmp / "run")
    async with running(app) as pilot:
        await pilot.press("a")
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        assert app.status["env"] == "failed" and app.failed_step == "env"
        results = app.query_one("#pane-results")
        assert [d.id for d in results.diagnoses] == ["hbm-allocation-failure"]
        assert "tensor_parallel_size = 16" in results.diagnoses[0].remedy and "TP8" in results.diagnoses[0].remedy
        assert app.status["baseline"] == "pending"  # nothing was launched
    assert children() == []


async def test_tp8_fault_demo_shows_the_hbm_diagnosis_panel(isolated):
    # Launched anyway (the environment step not requested), the server fails in warmup the same way.
    tmp = isolated
    prof_path = fast_profile_file(tmp, **{"server.tensor_parallel_size": 8})
    app = SpecdecApp(load_profile(str(prof_path)), tmp / "run", steps=["baseline", "eagle3", "results"])
    async with running(app) as pilot:
        await pilot.press("a")  # accept the profile and run everything unattended
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        assert app.status["baseline"] == "failed" and app.failed_step == "baseline"
        assert app.current_pane_id == "baseline"
        panels = app.query_one("#pane-baseline").query("DiagnosisPanel")
        assert [p.diag.id for p in panels] == ["hbm-allocation-failure"]
        panel = panels.first()
        banner = app.query_one("#pane-baseline").query_one("FailureBanner")
        assert panel.has_class("-error") and panel.has_class("-lead")  # the banner above shows it: not twice
        assert banner.region.height > 0 and panel.diag.title in text_of(banner)  # on screen at 80×24
        assert "tensor-parallel-size 8" in panel.diag.remedy
        assert any("allocate" in line.lower() for line in panel.diag.evidence)
        results = app.query_one("#pane-results")
        assert [d.id for d in results.diagnoses] == ["hbm-allocation-failure"]
        assert app.status["eagle3"] == "pending"  # run all stopped at the failure
        # The fix is a setting (TP): r with nothing changed says so instead of failing the same way again.
        assert panel.diag.setting == "server.tensor_parallel_size"
        await pilot.press("r")
        await pilot.pause()
        assert app.status["baseline"] == "failed" and not app.busy
        assert not any("attempt 2" in line for line in app.query_one("#pane-baseline").log_view.lines)
        assert any("still 8" in n.message for n in app._notifications)
        assert run_children() == []
        # Export writes an interim report while the run is still open.
        await pilot.press("e")
        await pilot.pause()
        assert app.current_pane_id == "results"
        exports = app.query_one("#pane-results").exports
        assert exports["report.json"].is_file() and "Interim" in text_of(app.query_one("#exports"))
        await pilot.press("ctrl+q")
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    assert app.return_value == 1
    report = json.loads((tmp / "run" / "report.json").read_text())
    assert [s["status"] for s in report["steps"]] == ["failed", "skipped", "skipped"]  # baseline, eagle3, results
    assert report["diagnostics"][0]["id"] == "hbm-allocation-failure"
    assert children() == []


def on_baseline_weights(app: SpecdecApp) -> asyncio.Event:
    """An event set when the baseline server reaches its weights phase (the app's sink is wrapped)."""
    launched = asyncio.Event()
    sink = app.sink

    def spy(e: ev.Event) -> None:
        sink(e)
        if isinstance(e, ev.Phase) and e.step == "baseline" and e.phase == "weights" and e.status == "started":
            launched.set()

    app.sink = spy  # type: ignore[method-assign]
    return launched


async def test_quitting_mid_launch_asks_then_stops_the_server_and_leaves_no_process(isolated):
    tmp = isolated
    prof_path = fast_profile_file(tmp, **{"simulation.time_scale": 0.5})  # a slow launch: quit during it
    prof = load_profile(str(prof_path))
    app = SpecdecApp(prof, tmp / "run")
    launched = on_baseline_weights(app)
    async with running(app) as pilot:
        await pilot.press("a")
        await wait(launched.wait(), pilot)
        server_pids = [p.pid for p in run_children()]
        assert server_pids, "the simulated server should be running"
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert type(app.screen).__name__ == "QuitScreen"
        await pilot.press("n")  # keep running
        await pilot.pause()
        assert type(app.screen).__name__ != "QuitScreen" and app.busy == "baseline"
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("y")  # stop and quit: the server is stopped, the report written, then the app exits
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    assert app.return_value == 130
    assert children() == []
    assert all(not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
               for pid in server_pids)
    assert port_free(prof.server.port)
    report = json.loads((tmp / "run" / "report.json").read_text())
    assert report["exit_code"] == 130
    assert {s["id"]: s["status"] for s in report["steps"]}["baseline"] == "interrupted"


async def test_stop_server_interrupts_the_launch_and_retry_is_offered(isolated):
    tmp = isolated
    prof_path = fast_profile_file(tmp, **{"simulation.time_scale": 0.5})
    app = SpecdecApp(load_profile(str(prof_path)), tmp / "run")
    launched = on_baseline_weights(app)
    async with running(app) as pilot:
        await pilot.press("a")
        await wait(launched.wait(), pilot)
        assert app.check_action("stop_server", ()) is True
        await pilot.press("s")
        await wait(app.step_done.wait(), pilot)
        assert app.status["baseline"] == "interrupted" and app.failed_step == "baseline"
        assert app.check_action("retry", ()) is True
        assert run_children() == []
        # The Profile pane says the step was stopped (not that it failed); the "Stopping…" toast goes once the
        # server has stopped, and a toast says so.
        hint = app.query_one("ProfilePane").hint
        assert "stopped" in hint and "failed" not in hint
        for _ in range(50):
            notes = [n.message for n in app._notifications]
            if not any(m.startswith("Stopping") for m in notes):
                break
            await pilot.pause(0.1)
        assert not any(m.startswith("Stopping") for m in notes), notes
        assert any("has stopped" in m for m in notes), notes
        await pilot.press("ctrl+q")  # nothing runs: no question asked
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    assert app.return_value == 130
    assert children() == []


async def test_a_steps_subset_runs_only_those_steps(isolated):
    tmp = isolated
    prof_path = fast_profile_file(tmp)
    app = SpecdecApp(load_profile(str(prof_path)), tmp / "run", steps=["env"])
    async with running(app) as pilot:
        assert app.status["baseline"] == "excluded"
        await pilot.press("a")
        await pilot.pause()
        await wait(app.run_finished.wait(), pilot)
        assert app.status["env"] in ("passed", "warned") and app.closed and app.exit_code == 0
        assert app.check_action("next", ()) is False
        await pilot.press("ctrl+q")
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    assert app.return_value == 0
    report = json.loads((tmp / "run" / "report.json").read_text())
    assert [s["id"] for s in report["steps"]] == ["env"]
    assert children() == []


async def test_fix_in_place_tp8_fails_edit_to_16_retry_and_the_report_is_clean(isolated):
    """The operator loop of the README: TP 8 fails with the HBM diagnosis; the settings become editable
    again; TP 16 typed into the form, `r` retries with it, the run completes, and neither the panes nor the
    report keep the failed attempt's diagnosis."""
    tmp = isolated
    prof_path = fast_profile_file(tmp, **{"server.tensor_parallel_size": 8})
    app = SpecdecApp(load_profile(str(prof_path)), tmp / "run")
    async with running(app) as pilot:
        await pilot.press("a")
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        failed = app.failed_step
        assert failed is not None and app.status[failed] == "failed"
        assert "hbm-allocation-failure" in [d.id for d in app.query_one("#pane-results").diagnoses]
        # The form is editable again (only the knobs: choosing another profile would be a new run).
        tp = app.query_one("#knob-server-tensor-parallel-size")
        assert not tp.disabled and app.query_one("#profile-select").disabled
        app.show_step("profile")
        tp.focus()
        await pilot.pause()
        # Validated against the environment step's facts as you type: TP 8 (and 1 on the way to 16) does not
        # fit the HBM of a logical core; 16 does.
        errors = text_of(app.query_one("#profile-errors"))
        assert "TP 8 needs" in errors and "HBM per logical core" in errors and "TP 16 or higher" in errors, errors
        assert app.query_one("#knob-server-tensor-parallel-size-row").has_class("-invalid")
        tp.value = ""
        await pilot.press("1")
        await pilot.pause()
        assert "TP 1 needs" in text_of(app.query_one("#profile-errors"))
        await pilot.press("6")
        await pilot.pause()
        errors = text_of(app.query_one("#profile-errors"))
        assert errors.startswith("✓ valid (1 edited value)") and "HBM" not in errors, errors
        assert not app.query_one("#knob-server-tensor-parallel-size-row").has_class("-invalid")
        await pilot.press("escape")  # back to the step list, where r means retry
        await pilot.pause()
        assert app.query_one("#pane-profile").retry_edits() == {"server.tensor_parallel_size": 16}
        await pilot.press("r")
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        assert app.status[failed] in ("passed", "warned"), app.status
        assert app.engine.profile.data["server"]["tensor_parallel_size"] == 16
        later_failed = app.failed_step is not None or any(
            app.status[s] in ("failed", "unavailable", "interrupted") for s in app.status if s != failed)
        assert tp.disabled or later_failed, app.status  # locked again unless a later step failed (a simulated
        # results step can fail on a slow machine: the verdict follows the wall clock, checked below)
        assert "hbm-allocation-failure" not in [d.id for d in app.query_one("#pane-results").diagnoses]
        if not app.closed:
            await pilot.press("a")
            await pilot.pause()
            await wait(app.run_finished.wait(), pilot)
        await pilot.press("ctrl+q")
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    run = tmp / "run"
    report = json.loads((run / "report.json").read_text())
    assert [d["id"] for d in report["diagnostics"] if d["id"] == "hbm-allocation-failure"] == []
    assert all(s["status"] in ("passed", "warned") for s in report["steps"] if s["id"] != "results")
    assert_verdict_follows_the_numbers(run)
    assert "tensor_parallel_size = 16" in (run / "profile.toml").read_text()
    assert "hbm" not in (run / "report.md").read_text().lower()
    assert children() == []


def notes(app: SpecdecApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_r_unchanged_after_tp8_says_so_p_opens_the_setting_and_a_passed_retry_runs_to_the_end(isolated):
    """Retry is honest: after the TP 8 failure (fix: a setting), r with nothing changed says TP is still 8 and
    runs nothing; the banner and p lead to the field; once TP 16 is typed, r retries, and because the run was
    started with a (run everything) it goes on to the end without a second a."""
    tmp = isolated
    prof_path = fast_profile_file(tmp, **{"server.tensor_parallel_size": 8})
    app = SpecdecApp(load_profile(str(prof_path)), tmp / "run")
    async with running(app) as pilot:
        await pilot.press("a")
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        assert app.failed_step == "env"
        banner = text_of(app.query_one("#pane-env").query_one("FailureBanner"))
        assert "tensor_parallel_size = 16" in banner  # the profile key (what headless and the report say)
        assert ("In the app: press p (Profile pane, field Tensor parallel (TP)), set it to 16, then Enter, then r "
                "(ctrl+r in a field) retries with it") in banner
        assert "p fix setting" in text_of(app.query_one("#next-hint"))
        await pilot.press("r")
        await pilot.pause()
        assert not app.busy and app.status["env"] == "failed"
        said = [m for m in notes(app) if "still 8" in m]
        assert said and "Tensor parallel (TP) is still 8" in said[0] and "press p" in said[0], notes(app)
        await pilot.press("p")
        await pilot.pause()
        tp = app.query_one("#knob-server-tensor-parallel-size")
        assert app.current_pane_id == "profile" and app.focused is tp
        await pilot.press("1", "6")  # the field's text was selected: typing replaces it
        await pilot.pause()
        assert tp.value == "16"
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        await wait(app.run_finished.wait(), pilot)  # no second a: the retried step passed and the run went on
        assert app.closed and app.status["env"] in ("passed", "warned")
        assert all(app.status[s] not in ("pending", "failed") for s in ("checkpoints", "dataset", "baseline",
                                                                         "eagle3")), app.status
        await pilot.press("ctrl+q")
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    assert children() == []


async def test_a_retry_started_with_n_stops_after_the_step(isolated):
    """Only a run started with a goes on after a passed retry; one driven step by step with n stays put."""
    tmp = isolated
    prof_path = fast_profile_file(tmp, **{"server.tensor_parallel_size": 8})
    app = SpecdecApp(load_profile(str(prof_path)), tmp / "run")
    async with running(app) as pilot:
        await pilot.press("n")  # accept the profile
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        await pilot.press("n")  # the environment step
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        assert app.failed_step == "env"
        app.action_edit_setting()
        await pilot.pause()
        await pilot.press("1", "6", "escape")
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        assert app.status["env"] in ("passed", "warned") and app.status["checkpoints"] == "pending"
        assert not app.closed
        await pilot.press("ctrl+q")
        await pilot.pause()
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    assert children() == []
