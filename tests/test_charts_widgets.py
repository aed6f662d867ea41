"""The plotted charts (tui/widgets/charts.py, textual-plotext) and how the app feeds them: the data each chart
draws, read from the real build_matrix output and the contract's "load" shape; the one-line state of a chart with
no data; BenchSample windows arriving fast end up as points on the arm's live chart with bounded repaints; `g`
opens and closes the results' charts view and `[` / `]` move it to another bench key; a run opened with --open
shows its saved load and /metrics windows."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from tui.app import SpecdecApp
from tui.core import events as ev
from tui.core.results.statement import statement
from tui.widgets import charts as ch

from snapshot_apps import charts as fx
from snapshot_apps import replay, scenarios, tune
from test_snapshots import _frozen  # noqa: F401 (autouse: frozen app, no NO_COLOR, a temporary working directory)


# -- the data of each chart ------------------------------------------------------------------------------------
def test_throughput_points_are_the_matrix_cells_with_their_intervals():
    m = fx.matrix()
    pts = ch.throughput_points(m, "sonnet@c4")
    assert [p.label for p in pts] == ["baseline", "k=1", "k=2", "k=3"]
    k1 = m["cells"]["eagle3-k1"]["sonnet@c4"]["output_throughput"]
    assert (pts[1].mean, pts[1].lo, pts[1].hi) == (k1["mean"], k1["ci95"][0], k1["ci95"][1])
    rec = m["recommendation"]["sonnet@c4"]  # the star follows Step 3's pick there (none when not settled)
    assert [p.recommended for p in pts] == [a == rec["arm"] for a in ("baseline", "eagle3-k1", "eagle3-k2", "eagle3-k3")]
    assert ch.throughput_points(m, "chat") == [] and ch.throughput_points(None, "sonnet@c4") == []


def test_speedup_series_per_arm_with_band_and_crossover():
    m = fx.matrix()
    series = ch.speedup_series(fx.load(m), "sonnet")
    assert [(s.arm, s.marker) for s in series] == [("eagle3-k1", "1"), ("eagle3-k2", "2"), ("eagle3-k3", "3")]
    k2 = series[1]
    assert k2.levels == [1, 2, 4, 8]
    assert k2.ratio == [m["cells"]["eagle3-k2"][k]["speedup"]["ratio"] for k in fx.KEYS]
    assert k2.lo[2] == m["cells"]["eagle3-k2"]["sonnet@c4"]["speedup"]["ci95"][0]
    # the markers are the statement's changes: k=2 stops paying between 2 and 4, k=1 between 4 and 8
    load = fx.load(m)
    for s in series:
        st = load["workloads"]["sonnet"]["arms"][s.arm]["statement"]
        assert [(x, k) for x, k, _t in s.marks] == [((c["after"] * c["before"]) ** 0.5, c["kind"])
                                                    for c in st["changes"]]
        assert s.range_text == st["range_text"]
    assert [m_[:2] for m_ in k2.marks] == [(pytest.approx(8 ** 0.5), "stops_paying")]
    assert series[0].range_text == "pays at 1–4, loses at 8"
    assert ch.speedup_series(fx.load(m), "chat") == [] and ch.speedup_series(None, "sonnet") == []


def test_a_non_monotone_arm_is_marked_where_it_stops_and_where_it_pays_again():
    load = fx.load()
    arm = load["workloads"]["sonnet"]["arms"]["eagle3-k2"]
    arm["statement"] = statement([(1, "pays"), (2, "not_proven"), (4, "pays"), (8, "loses")], "k = 2")
    s = next(x for x in ch.speedup_series(load, "sonnet") if x.arm == "eagle3-k2")
    assert [(round(x, 6), k) for x, k, _t in s.marks] == [(round(2 ** 0.5, 6), "stops_paying"),
                                                          (round(8 ** 0.5, 6), "starts_paying"),
                                                          (round(32 ** 0.5, 6), "stops_paying")]
    assert s.range_text == "pays at 1, not proven at 2, pays at 4, loses at 8"


def test_an_unbounded_interval_draws_no_band():
    load = fx.load()
    lev = load["workloads"]["sonnet"]["arms"]["eagle3-k1"]["levels"]["1"]
    lev["speedup"] = {"ratio": 1.4, "ci95": None, "unbounded": True}
    s = ch.speedup_series(load, "sonnet")[0]
    assert (s.lo[0], s.hi[0]) == (None, None) and s.ratio[0] == 1.4


def test_position_series_are_the_marginals_of_each_speculative_arm():
    series = ch.position_series(fx.matrix(), "sonnet@c1")
    assert series == [("k=1", "1", [70.0]), ("k=2", "2", [70.0, 46.0]), ("k=3", "3", [70.0, 46.0, 30.0])]


def test_points_from_windows_are_counter_ratios():
    pts = ch.points_from_windows({"interval_s": 1.0, "windows": [
        {"t0": -1.0, "t1": 0.0, "generation_tokens": 0, "draft_tokens": 0, "accepted_tokens": 0},  # idle: dropped
        {"t0": 0.0, "t1": 2.0, "generation_tokens": 800, "draft_tokens": 400, "accepted_tokens": 300},
        {"t0": 2.0, "t1": 3.0, "generation_tokens": 0, "draft_tokens": None, "accepted_tokens": None},
        {"t0": 3.0, "t1": 4.0, "generation_tokens": 10, "draft_tokens": 0, "accepted_tokens": 0}]})
    assert [(p.t, p.tokens_per_s, p.acceptance, p.partial) for p in pts] == [
        (2.0, 400.0, 75.0, True), (3.0, 0.0, None, False), (4.0, 10.0, None, True)]  # the bench's first and last


def test_legend_wraps_at_the_width():
    t = ch.legend([("1 k=1", "bold"), ("2 k=2", "bold"), ("· 95 % band", "")], 14)
    assert t.plain == "1 k=1  2 k=2\n· 95 % band"


@pytest.mark.parametrize("width", [20, 37, 76, 80])
def test_legends_and_notes_break_between_words_never_inside_one(width):
    items = [("* acceptance %, mean of 3 windows (left)", "bold"), ("· per window", ""),
             ("+ tok/s, mean of 3 (right)", "bold"), ("2 partial windows (bench start/end) left out", "")]
    note = ("drift: acceptance fell from 71.2 % to 63.0 % (first vs last third), beyond the window-to-window "
            "noise of the bench")
    t = ch.notes(ch.legend(items, width), [note], width)
    words = {w for text, _ in items for w in text.split()} | set(note.split())
    for line in t.plain.split("\n"):
        assert len(line) <= width
        assert all(w in words for w in line.split()), line  # every word whole
    assert " ".join(t.plain.split()) == " ".join([w for text, _ in items for w in text.split()] + note.split())


# -- the widgets on their own -----------------------------------------------------------------------------------
class ChartsApp(App):
    def compose(self) -> ComposeResult:
        yield ch.ThroughputVsK(id="a")
        yield ch.SpeedupVsConcurrency(id="b")
        yield ch.PerPositionBars(id="c")
        yield ch.AcceptanceOverTime(id="d")


async def test_every_chart_says_no_data_yet_in_one_plain_line():
    app = ChartsApp()
    async with app.run_test(size=(80, 60)) as pilot:
        await pilot.pause()
        for chart in app.query(ch.PlotChart):
            text = chart.render()
            assert "no data yet" in text.plain and "\n" not in text.plain
            assert chart.builds == 0


async def test_charts_draw_their_data_with_markers_and_a_legend(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = ChartsApp()
    m = fx.matrix()
    async with app.run_test(size=(80, 60)) as pilot:
        app.query_one(ch.ThroughputVsK).set_matrix(m, "sonnet@c2")
        app.query_one(ch.SpeedupVsConcurrency).set_load(fx.load(m), "sonnet")
        app.query_one(ch.PerPositionBars).set_matrix(m, "sonnet@c2")
        await pilot.pause()
        tp = app.query_one(ch.ThroughputVsK).render().plain
        assert "sonnet@c2 · output tok/s vs k" in tp and "●" in tp and "│ 95 % interval" in tp
        assert "\x1b" not in tp
        sp = app.query_one(ch.SpeedupVsConcurrency).render().plain
        assert "X stops paying" in sp and "k=2: pays at 1–2, loses at 4–8" in sp
        plot = sp.split("X stops paying")[0]
        assert "X" in plot.split("speedup vs concurrency")[1]  # the marker is drawn, not only named
        assert all(d in plot for d in "123")
        pp = app.query_one(ch.PerPositionBars).render().plain
        assert "pos 1" in pp and "pos 3" in pp and "pos 0" not in pp  # positions from 1, as in the report
        assert "1 k=1" in pp and "333" in pp


async def test_a_title_too_wide_is_shortened_between_words():
    app = ChartsApp()
    async with app.run_test(size=(34, 60)) as pilot:
        app.query_one(ch.PerPositionBars).set_matrix(fx.matrix(), "sonnet@c2")
        await pilot.pause()
        text = app.query_one(ch.PerPositionBars).render().plain
        title = next(line.strip() for line in text.splitlines() if line.strip().startswith("sonnet@c2"))
        full = "sonnet@c2 · acceptance % per position"
        assert title.endswith("…") and title[:-1] in full and full[len(title) - 1] == " ", title


async def test_a_chart_too_small_to_draw_says_so():
    app = ChartsApp()
    async with app.run_test(size=(18, 40)) as pilot:
        app.query_one(ch.ThroughputVsK).set_matrix(fx.matrix(), "sonnet@c1")
        await pilot.pause()
        assert "too small" in app.query_one(ch.ThroughputVsK).render().plain


# -- the live chart: BenchSample through the pump ---------------------------------------------------------------
def make_app() -> SpecdecApp:
    return SpecdecApp(tune.tune_profile(), scenarios.RUN_DIR, frozen=True)


async def test_fast_bench_samples_become_points_with_bounded_repaints():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, tune.until_k2_bench(), busy="eagle3-k2")
        app.show_step("eagle3-k2")
        await pilot.pause()
        pane = app.query_one("#pane-eagle3-k2")
        chart = pane.live_chart
        assert not chart.display or not chart.has_class("-shown")  # hidden until the first window
        batches, per = 40, 10
        t0 = time.monotonic()
        for b in range(batches):  # 400 windows, in bursts faster than the chart repaints
            for s in fx.samples("eagle3-k2", "sonnet r2", per, 62.0, start=b * per):
                app.sink(s)
            await asyncio.sleep(0.005)
        elapsed = time.monotonic() - t0
        await pilot.pause(ch.LIVE_REPAINT_S * 2)
        await pilot.pause()
        assert chart.has_class("-shown") and chart.display
        assert len(chart.points) == batches * per == chart.samples_in
        assert chart.points[-1].t == float(batches * per)
        # at most one repaint per LIVE_REPAINT_S while the samples arrived, plus the one that drew the last batch
        assert chart.repaints <= elapsed / ch.LIVE_REPAINT_S + 2
        assert chart.repaints < batches
        assert chart.builds <= chart.repaints + 1
        assert "last 900 tok/s, 58.0 %" in chart.render().plain  # the 400th window's (i = 399)
        # the samples are not kept in the app's event list (they are not low-rate events)
        assert not any(isinstance(e, ev.BenchSample) for e in app.events)


async def test_a_new_bench_label_starts_a_new_series_and_a_new_attempt_clears_it():
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await replay.feed(app, pilot, tune.until_k2_bench(), busy="eagle3-k2")
        for s in fx.samples("eagle3-k2", "sonnet r1", 5) + fx.samples("eagle3-k2", "sonnet r2", 3):
            app.sink(s)
        await pilot.pause(ch.LIVE_REPAINT_S * 2)
        chart = app.query_one("#pane-eagle3-k2").live_chart
        assert chart.label == "sonnet r2" and len(chart.points) == 3
        app.sink(ev.StepStarted("eagle3-k2", "EAGLE3 k=2", attempt=2, ts=0.0))
        await pilot.pause()
        assert chart.points == [] and not chart.has_class("-shown")


async def test_samples_of_a_step_without_a_chart_are_ignored():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        for step in ("env", "no-such-step", ""):
            for s in fx.samples(step, "sonnet r1", 3):
                app.sink(s)
        await pilot.pause()
        await pilot.pause()
        assert app.samples_in == 9 and app._samples == {}


# -- the charts view ---------------------------------------------------------------------------------------------
def run_with_load() -> list[ev.Event]:
    """The tune scenario's run with the load fixture's matrix, its LoadTable, and every arm's /metrics windows."""
    m = fx.matrix()
    out: list[ev.Event] = []
    for e in tune.tune_run(m):
        if isinstance(e, ev.MatrixTable):
            for arm in ("baseline", "eagle3-k1", "eagle3-k2", "eagle3-k3"):
                for lv in fx.LEVELS:
                    out += fx.samples(arm, f"sonnet c{lv} r1", 20, None if arm == "baseline" else 72.0 - 4 * lv, lv)
            out += [e, ev.LoadTable("results", fx.load(m))]
        else:
            out.append(e)
    return out


async def test_g_opens_and_closes_the_charts_view_and_brackets_switch_the_key():
    from tui.screens.matrix import MatrixPane

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("g")  # nothing to chart before the results step: the key says why
        await pilot.pause()
        assert not app.results_pane.charts_shown
        assert app.why_not("charts") and "results step has run" in app.why_not("charts")
        await replay.feed(app, pilot, run_with_load())
        app.show_step("baseline")
        await pilot.pause()
        assert app.why_not("charts") is None
        await pilot.press("g")  # from another pane: the Results pane, with its charts
        await pilot.pause()
        pane = app.results_pane
        assert isinstance(pane, MatrixPane) and app.current_pane_id == "results"
        view = pane.query_one(ch.ChartsView)
        assert pane.charts_shown and view.display and not pane.query_one("#matrix-scroll").display
        assert view.key == "sonnet@c1" and app.focused is view
        shown = [c for c in view.query(ch.PlotChart) if c.display]
        assert {type(c) for c in shown} == {ch.ThroughputVsK, ch.SpeedupVsConcurrency, ch.PerPositionBars,
                                            ch.AcceptanceOverTime}
        assert view.query_one(ch.SpeedupVsConcurrency).key == "sonnet"
        await pilot.press("right_square_bracket", "right_square_bracket")
        await pilot.pause()
        assert view.key == "sonnet@c4" and view.query_one(ch.ThroughputVsK).key == "sonnet@c4"
        at = view.query_one(ch.AcceptanceOverTime)
        assert at.label.endswith("sonnet@c4 r1") and len(at.points) == 20
        assert at.points[0].acceptance == pytest.approx(72.0 - 16)
        await pilot.press("g")
        await pilot.pause()
        assert not pane.charts_shown and not view.display and pane.query_one("#matrix-scroll").display


async def test_a_two_arm_run_has_no_charts_view():
    app = SpecdecApp(scenarios.demo_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, scenarios.full_run())
        app.show_step("results")
        await pilot.press("g")
        await pilot.pause()
        assert "tune run" in (app.why_not("charts") or "")
        assert not app.query(ch.ChartsView)


def closed_run_with_load(root: Path) -> Path:
    m = fx.matrix()
    d = tune.write_closed_run(root, tune=True, matrix=m)
    rep = json.loads((d / "report.json").read_text())
    rep["load"] = fx.load(m)
    (d / "report.json").write_text(json.dumps(rep))
    state = json.loads((d / "state.json").read_text())
    for arm, facts in fx.arm_facts().items():
        state["steps"][arm]["facts"]["repeats"] = facts["repeats"]
    (d / "state.json").write_text(json.dumps(state))
    return d


async def test_an_opened_run_shows_its_load_and_saved_windows():
    from tui.browse import open_run, saved_timeseries

    run = open_run(closed_run_with_load(Path(scenarios.RUN_DIR)))
    series = saved_timeseries(run)
    assert len(series[("eagle3-k1", "sonnet@c4")]) == 3
    app = SpecdecApp(browse=run, frozen=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.show_step("results")
        await pilot.press("g")
        await pilot.pause()
        view = app.results_pane.query_one(ch.ChartsView)
        assert view.query_one(ch.SpeedupVsConcurrency).has_data()
        at = view.query_one(ch.AcceptanceOverTime)
        # sonnet@c1's recommended arm (k=2) first repeat: accepted / draft tokens of its windows
        assert at.label == "eagle3-k2 · sonnet@c1 r1" and len(at.points) == 20
        assert at.points[0].acceptance == pytest.approx(100 * round(8 * 58.0) / 800)


async def test_saved_timeseries_prefers_the_reports_own():
    from tui.browse import open_run, saved_timeseries

    d = closed_run_with_load(Path(scenarios.RUN_DIR))
    rep = json.loads((d / "report.json").read_text())
    one = {"repeat": 1, "windows": fx.windows(50.0, 100.0, n=3)}  # report.json's shape (results/report.py)
    rep["timeseries"] = {"eagle3-k1": {"sonnet@c1": [one]}}
    (d / "report.json").write_text(json.dumps(rep))
    assert saved_timeseries(open_run(d)) == {("eagle3-k1", "sonnet@c1"): [one]}
