"""Which keys can act now (tui/app/availability.py): the pure rules, without a Textual app."""

from __future__ import annotations

import dataclasses

import pytest

from tui.app.availability import CLOSED_RUN, PAGE_GENERAL, KeyState, MatrixView, why_not

LAUNCH = ("baseline", "eagle3")
RUN_KEYS = ("next", "run_all")
ALL_ACTIONS = ("next", "run_all", "retry", "focus_log", "follow", "log_mode", "log_filter", "stop_server",
               "export", "edit_setting", "save_profile", "page_next", "page_prev", "help", "quit")


def state(**kw) -> KeyState:
    base = dict(pane="profile", pane_title="Profile", launch_steps=LAUNCH)
    base.update(kw)
    return KeyState(**base)


def test_fresh_app_runs_and_saves_but_has_nothing_to_stop_export_or_retry():
    s = state()
    for action in RUN_KEYS + ("save_profile", "help", "quit"):
        assert why_not(s, action) is None, action
    assert why_not(s, "retry") == "Nothing has failed: n runs the next step."
    assert why_not(s, "stop_server") == "No server is running."
    assert why_not(s, "export") == "Nothing has run yet: n starts the run."
    assert "Profile pane" in why_not(s, "edit_setting")
    assert "server steps" in why_not(s, "focus_log")
    assert why_not(s, "page_next") == PAGE_GENERAL


def test_a_running_server_step_names_itself_for_every_key_it_blocks():
    s = state(pane="baseline", pane_title="Baseline", busy="baseline", busy_title="Baseline", started=True,
              cursor="baseline")
    for action in RUN_KEYS + ("retry", "edit_setting"):
        assert why_not(s, action) == "Baseline is running: wait for it, or press s to stop its server.", action
    assert why_not(s, "export") == "Baseline is running: export when it ends (or stop it with s)."
    for action in ("stop_server", "focus_log", "follow", "log_mode", "log_filter"):
        assert why_not(s, action) is None, action
    assert why_not(s, "save_profile") == "w saves the profile from the Profile pane: select it first."


def test_a_step_that_is_not_a_server_cannot_be_stopped():
    s = state(pane="env", busy="env", busy_title="Environment", started=True, cursor="env")
    assert why_not(s, "stop_server") == "No server is running."


def test_a_failed_step_offers_retry_and_the_setting_only_when_its_fix_is_one():
    s = state(started=True, cursor="eagle3", failed="eagle3", failed_title="EAGLE3", failed_status="failed")
    assert why_not(s, "next") == "EAGLE3 failed: r retries it (edit the settings on the Profile pane first)."
    assert why_not(s, "retry") is None
    assert why_not(s, "edit_setting") is not None
    assert why_not(dataclasses.replace(s, setting_fix=True), "edit_setting") is None
    assert why_not(s, "export") is None


def test_finished_and_done():
    closed = state(started=True, closed=True, cursor=None)
    assert why_not(closed, "next") == "The run has finished: e exports the report, ctrl+q quits."
    assert why_not(closed, "export") is None
    done = state(started=True, cursor=None)
    assert why_not(done, "run_all") == "Every step is done: e exports the report."


@pytest.mark.parametrize("action", ["next", "run_all", "retry", "stop_server"])
def test_an_opened_run_never_runs_and_says_how_to_run_it_again(action):
    s = state(browse=True, run_dir="runs/r1", cursor=None, closed=True, started=False)
    reason = why_not(s, action)
    assert reason is not None and CLOSED_RUN.split(":")[0].lower() in reason.lower()
    assert reason.endswith("specdec-tui --profile runs/r1/profile.toml")
    assert why_not(s, "export") is None  # its report is already written: e shows where


def test_paging_a_matrix_needs_two_workloads():
    s = state(pane="results", pane_title="Results", tune=True)
    assert why_not(dataclasses.replace(s, matrix=MatrixView(False, 0, "")), "page_next").startswith(
        "The matrix appears when the results step has run")
    one = dataclasses.replace(s, matrix=MatrixView(True, 1, "sonnet"))
    assert why_not(one, "page_prev") == "This run has one workload (sonnet): nothing to page through."
    assert why_not(dataclasses.replace(s, matrix=MatrixView(True, 2, "sonnet")), "page_next") is None
    assert why_not(s, "page_next") == PAGE_GENERAL  # a two-arm run's results pane is not a matrix


def test_paging_log_files_only_on_an_opened_runs_server_pane():
    s = state(pane="eagle3", pane_title="EAGLE3", browse=True, log_files=1)
    assert why_not(s, "page_next") == "EAGLE3 has one log file or none: nothing to page through."
    assert why_not(dataclasses.replace(s, log_files=3), "page_next") is None
    assert why_not(dataclasses.replace(s, browse=False, log_files=3), "page_next") == PAGE_GENERAL


def test_tune_runs_name_their_arms_for_the_log_keys():
    assert "one of the EAGLE3 arms" in why_not(state(tune=True), "follow")
    assert "EAGLE3 server." in why_not(state(), "follow")


def test_every_action_gets_none_or_one_sentence():
    for s in (state(), state(busy="eagle3", busy_title="EAGLE3", started=True), state(browse=True, closed=True)):
        for action in ALL_ACTIONS:
            reason = why_not(s, action)
            assert reason is None or (reason and "\n" not in reason), (action, reason)


def test_the_rules_import_nothing_of_the_front_end():
    """availability.py is pure: it imports no Textual, no screens and no widget (only the standard library)."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "tui" / "app" / "availability.py"
    names = set()
    for node in ast.walk(ast.parse(src.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    assert names == {"__future__", "dataclasses"}
