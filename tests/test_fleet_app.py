"""The app during a fleet run (`--ray`), driven by the typed events a fleet streams (nothing is started): two arms
run at once on two nodes, their events interleaved and tagged with their node; the step list names the node of
each arm, each pane gets its own arm's events, and the headless renderer says which node each line comes from."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from tui.app import SpecdecApp
from tui.core import events as ev
from tui.headless import HeadlessRenderer
from tui.widgets.step_list import StepList

from snapshot_apps import replay, scenarios, tune


@pytest.fixture(autouse=True)
def _quiet(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECDEC_TUI_FREEZE", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.chdir(tmp_path)


def interleaved(prof) -> list[ev.Event]:
    """k=1 on n2 and k=2 on n1, their events alternating as two nodes' streams arrive."""
    a = [dataclasses.replace(e, node="n2") for e in tune.arm_events("eagle3-k1", prof)]
    b = [dataclasses.replace(e, node="n1") for e in tune.arm_events("eagle3-k2", prof, finish=False, repeat=2)]
    out: list[ev.Event] = []
    for i in range(max(len(a), len(b))):
        out += a[i:i + 1] + b[i:i + 1]
    return out


async def test_the_step_list_names_each_arms_node_and_panes_get_their_own_events():
    prof = tune.tune_profile()
    app = SpecdecApp(prof, scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, interleaved(prof), busy="eagle3-k1")
        sl = app.query_one(StepList)
        assert sl.nodes == {"eagle3-k1": "n2", "eagle3-k2": "n1"}
        assert "@n2" in sl._prompt("eagle3-k1").plain and "@n1" in sl._prompt("eagle3-k2").plain
        assert "@" not in sl._prompt("eagle3-k3").plain  # not started: no node yet
        assert app.status["eagle3-k1"] == "passed" and app.status["eagle3-k2"] == "running"
        k2 = app.pane("eagle3-k2")
        assert k2.arm_progress is not None and (k2.arm_progress.workload, k2.arm_progress.repeat) == ("sonnet", 2)
        assert not any("eagle3-k1" in line for line in k2.log_view.lines)


def test_headless_names_the_node_whenever_the_lines_turn_to_another_arm():
    prof = tune.tune_profile()
    buf = io.StringIO()
    r = HeadlessRenderer(Console(file=buf, width=100, force_terminal=False, no_color=True))
    for e in interleaved(prof):
        r(e)
    out = buf.getvalue()
    assert "EAGLE3 k=1 (eagle3-k1) on n2" in out and "EAGLE3 k=2 (eagle3-k2) on n1" in out
    assert out.count("▌ EAGLE3 k=") >= 4  # the streams alternate: each turn names its arm and node
    r(ev.RunFinished("", 0, None))
    assert "Node" in buf.getvalue()  # the summary has a node column
