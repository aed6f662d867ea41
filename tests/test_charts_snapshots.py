"""Snapshots of the plotted charts (tui/widgets/charts.py): the tune results' charts view (`g`) at 80×24 and
120×40, with colour and with NO_COLOR, and the live acceptance chart of an arm's pane while its bench runs. The
app is frozen and fed deterministic events: the matrix comes from the real build_matrix on synthetic repeat facts,
"load" is the contract's shape written by hand (tests/snapshot_apps/charts.py). Update with
`pytest tests/test_charts_snapshots.py --snapshot-update` after reviewing `snapshot_report.html`."""

from __future__ import annotations

import pytest

from tui.app import SpecdecApp
from tui.widgets.charts import ChartsView, SpeedupVsConcurrency

from snapshot_apps import charts as fx
from snapshot_apps import replay, scenarios, tune
from test_charts_widgets import run_with_load
from test_snapshots import _frozen  # noqa: F401 (autouse: frozen app, no NO_COLOR, a temporary working directory)

SIZES = {"80x24": (80, 24), "120x40": (120, 40)}


def make_app() -> SpecdecApp:
    return SpecdecApp(tune.tune_profile(), scenarios.RUN_DIR, frozen=True)


def charts_view(app: SpecdecApp, key_steps: int = 2, then=None):
    async def run_before(pilot) -> None:
        await replay.feed(app, pilot, run_with_load())
        app.show_step("results")
        await pilot.pause()
        await pilot.press(*["right_square_bracket"] * key_steps, "g")
        await pilot.pause()
        if then is not None:
            await then(pilot)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("color", ["color", "no-color"])
@pytest.mark.parametrize("size", SIZES)
def test_charts_view(snap_compare, monkeypatch, size, color):
    if color == "no-color":
        monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()
    assert snap_compare(app, run_before=charts_view(app), terminal_size=SIZES[size])


def test_charts_view_scrolled_to_the_speedup_at_80x24_no_color(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()

    async def scroll(pilot) -> None:
        view = app.query_one(ChartsView)
        view.scroll_to_widget(view.query_one(SpeedupVsConcurrency), animate=False, top=True)

    assert snap_compare(app, run_before=charts_view(app, 0, scroll), terminal_size=(80, 24))


@pytest.mark.parametrize("size,color", [("80x24", "no-color"), ("120x40", "color")])
def test_live_acceptance_chart_in_the_arms_pane(snap_compare, monkeypatch, size, color):
    if color == "no-color":
        monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()

    async def run_before(pilot) -> None:
        await replay.feed(app, pilot, tune.until_k2_bench() + fx.samples("eagle3-k2", "sonnet r2", 45, 62.0),
                          busy="eagle3-k2")
        app.show_step("eagle3-k2")
        await pilot.pause(0.6)
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=SIZES[size])
