"""The app's rough edges found at 80×24 (issue 18, item 8), each driven through Pilot at 80×24."""

from __future__ import annotations

import pytest
from textual import events

from tui.app import SpecdecApp
from tui.core.profile.model import load_profile

from snapshot_apps import scenarios


def text_of(widget) -> str:
    c = widget.content
    return c.plain if hasattr(c, "plain") else str(c)


def burst(app, *keys: str) -> None:
    """Keys as a terminal delivers one fast send (tmux send-keys, key repeat): all queued on the app before
    any is processed, which Pilot.press (it waits after each key) never does."""
    chars = {"backspace": "\x7f", "delete": "\x1b[3~", "left": None, "right": None, "home": None, "end": None}
    for k in keys:
        char = chars.get(k, k) if len(k) > 1 else k
        app.post_message(events.Key(k, char))


# -- fast key bursts and pastes in the Profile pane's number fields ------------------------------------------
@pytest.mark.parametrize("start, keys, want", [
    ("1", ("backspace", "1", "6"), "16"),
    ("11", ("backspace", "backspace", "4", "5"), "45"),
    ("30", ("home", "delete", "7"), "70"),
    ("512", ("left", "backspace", "9"), "592"),
])
async def test_a_burst_of_keys_lands_as_typed(start, keys, want):
    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        field = app.query_one("#knob-speculative-num-speculative-tokens")
        field.value = start
        field.focus()
        field.cursor_position = len(start)
        await pilot.pause()
        burst(app, *keys)
        await pilot.pause()
        await pilot.pause()
        assert field.value == want


@pytest.mark.parametrize("pasted, want", [("16", "16"), ("16\n", "16"), ("  12 \n", "12")])
async def test_a_pasted_number_lands_as_typed(pasted, want):
    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        field = app.query_one("#knob-benchmark-num-prompts")
        field.focus()
        field.action_select_all()
        await pilot.pause()
        app.post_message(events.Paste(pasted))
        await pilot.pause()
        await pilot.pause()
        assert field.value == want
        assert app.query_one("ProfilePane").edits() == {"benchmark.num_prompts": int(want)}


# -- q quits (as ctrl+q), except where it is a letter ----------------------------------------------------------
async def test_q_quits_from_the_step_list():
    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.focused is app.query_one("StepList")
        await pilot.press("q")
        await pilot.pause()
    assert app.return_value == 130  # nothing ran: the run is recorded as interrupted, like ctrl+q


async def test_q_asks_first_while_a_step_runs_types_in_a_field_and_does_nothing_in_a_dialog():
    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        host = app.query_one("#knob-server-host")
        host.focus()
        host.cursor_position = len(host.value)
        await pilot.press("q")
        await pilot.pause()
        assert host.value == "127.0.0.1q" and app.return_value is None and app.screen is app.screen_stack[0]
        app.busy = "env"  # a step runs: q asks first, the same question as ctrl+q
        app.query_one("StepList").focus()
        await pilot.press("q")
        await pilot.pause()
        assert type(app.screen).__name__ == "QuitScreen"
        await pilot.press("q")  # inside the dialog q is not a second question
        await pilot.pause()
        assert type(app.screen).__name__ == "QuitScreen" and len(app.screen_stack) == 2
        await pilot.press("n")
        await pilot.pause()
        assert app.screen is app.screen_stack[0] and app.return_value is None
        app.busy = None
        await pilot.press("question_mark")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("q")  # closes the help, does not quit
        await pilot.pause()
        assert app.screen is app.screen_stack[0] and app.return_value is None


# -- the help screen wraps like prose and keeps a wrapped key description in its column ----------------------
def _lines(widget) -> list[str]:
    return ["".join(seg.text for seg in strip).rstrip() for strip in widget.render_lines(widget.region.reset_offset)]


def screen_lines(app) -> list[str]:
    """The screen as the terminal shows it, one string per row."""
    return ["".join(seg.text for seg in strip).rstrip() for strip in app.screen._compositor.render_strips()]


async def test_help_screen_wraps_paragraphs_and_indents_wrapped_key_descriptions():
    from tui.keys import KEY_TABLE

    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        keys = app.screen.query_one("#help-keys")
        lines = _lines(keys)
        first = lines[0]
        col = len(first) - len(first.lstrip()) + len("n")
        col = col + len(first[col:]) - len(first[col:].lstrip())  # where the descriptions start
        assert first[col:].startswith("next: run the next step")
        # Every line is either a key row or a wrapped description that starts in the description column.
        for line in lines:
            if line.strip():
                assert line[:col].strip() == "" and line[col] != " " or line[:col].strip() != "", line
        wrapped = [line for line in lines if line.strip() and not line[:col].strip()]
        assert wrapped, "at 80×24 some descriptions wrap"
        # Each key's whole description is there, words in order, whatever the wrapping.
        text = " ".join(line[col:].strip() for line in lines)
        for _k, action in KEY_TABLE:
            assert action.replace("`", "") in text
        # A paragraph is filled to the width: no line ends where the next word would still have fitted.
        intro = app.screen.query("VerticalScroll > Static").first()
        plines = [line for line in _lines(intro) if line]
        width = intro.content_region.width
        assert len(plines) >= 3
        for a, b in zip(plines, plines[1:]):
            assert len(a) + 1 + len(b.split()[0]) > width, (a, b)


# -- a profile saved after a fix says it was edited -----------------------------------------------------------
async def test_a_profile_saved_after_a_fix_does_not_keep_the_old_description(tmp_path, monkeypatch):
    from tui.core.profile.model import load_profile as load

    monkeypatch.chdir(tmp_path)
    base = load("demo-tp8")
    assert "TP 8" in base.data["description"]
    app = SpecdecApp(base, tmp_path / "run", frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        tp = app.query_one("#knob-server-tensor-parallel-size")
        tp.value = "16"
        await pilot.pause()
        about = text_of(app.query_one("#profile-about"))
        assert "edited: Tensor parallel (TP) 8 → 16" in about  # the pane says so before it is saved
        app.query_one("#steps").focus()
        await pilot.press("w")
        await pilot.pause()
        app.screen.query_one("#save-path").value = str(tmp_path / "fixed.toml")
        await pilot.press("enter")
        await pilot.pause()
    saved = load(str(tmp_path / "fixed.toml"))
    assert saved.server.tensor_parallel_size == 16
    assert saved.data["description"].startswith("demo-tp8, edited: Tensor parallel (TP) 8 → 16 (was: ")


# -- --open: no empty "Bundled profile: choose…" selector -------------------------------------------------------
async def test_open_shows_the_runs_profile_not_an_empty_chooser(tmp_path):
    from tui.browse import open_run
    from snapshot_apps import tune

    app = SpecdecApp(browse=open_run(tune.write_closed_run(tmp_path / "run")), frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        app.show_step("profile")
        await pilot.pause()
        assert not app.query_one("#profile-choose-row").display and not app.query_one("#profile-file-row").display
        shown = "\n".join(screen_lines(app))
        assert "choose…" not in shown and "Bundled profile" not in shown and "TOML file" not in shown
        assert "demo" in shown and "profile.toml" in shown


# -- the sweep sets k: "Speculative tokens" is disabled and says why ---------------------------------------------
async def test_speculative_tokens_is_disabled_while_the_sweep_sets_k():
    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        field = app.query_one("#knob-speculative-num-speculative-tokens")
        assert not field.disabled
        cb = app.query_one("#sweep-toggle")
        cb.focus()
        await pilot.press("space")
        await pilot.pause()
        await pilot.pause()
        assert field.disabled
        status = text_of(app.query_one("#profile-errors"))
        assert "Speculative tokens: not used, the sweep sets k = 1, 2, 3" in status
        # Visible at 80×24 without scrolling.
        assert any("not used, the sweep sets" in line for line in screen_lines(app)), screen_lines(app)
        await pilot.press("space")  # the sweep off again: the field is back
        await pilot.pause()
        await pilot.pause()
        assert not field.disabled and "sweep sets" not in text_of(app.query_one("#profile-errors"))


# -- the tune results table survives a resize ----------------------------------------------------------------
def _table_lines(app) -> list[str]:
    table = app.query_one("#matrix-table")
    return [line for line in _lines(table) if line.strip()]


async def test_the_tune_results_table_is_whole_after_a_resize_and_back():
    from snapshot_apps import replay, tune

    app = SpecdecApp(tune.tune_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, tune.tune_run())
        app.show_step("results")
        await pilot.pause()
        before = _table_lines(app)
        assert any(line.split()[:2] == ["★", "k=1"] and "1.69" in line for line in before), before
        for size in ((120, 40), (80, 24)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            await pilot.pause()
            lines = _table_lines(app)
            table = app.query_one("#matrix-table")
            # Every cell whole: the arm names and the numbers as in the matrix, nothing cut, no sideways scroll.
            assert any(line.lstrip().startswith("baseline") for line in lines), lines
            assert any("134.5" in line and "1.69" in line and "69.0" in line for line in lines), lines
            assert table.virtual_size.width <= table.size.width, (table.virtual_size, table.size)
        assert _table_lines(app) == before


# -- compare: two runs of the same profile are told apart; a tune run's headless table fits -----------------
async def test_compare_heads_two_runs_of_one_profile_apart(tmp_path):
    from tui.screens.compare import CompareApp
    from snapshot_apps import tune
    from tui.core.results.compare import load_run

    a = load_run(tune.write_closed_run(tmp_path / "20260101-120000-demo"))
    b = load_run(tune.write_closed_run(tmp_path / "20260102-090000-demo"))
    app = CompareApp([a, b])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#compare-table").content
        heads = [str(c.header) for c in table.columns[1:]]
        assert len(heads) == 2 and heads[0] != heads[1], heads
        assert "20260101-120000" in heads[0] and "20260102-090000" in heads[1]
        legend = text_of(app.screen.query_one("#compare-legend"))
        assert "20260101-120000-demo" in legend and "20260102-090000-demo" in legend
        await pilot.press("escape")
    # Runs of different profiles keep the short heads.
    c = load_run(tune.write_closed_run(tmp_path / "20260103-100000-tune-demo", tune=True))
    from tui.screens.compare import compare_table
    heads = [str(col.header) for col in compare_table([a, c], 200).columns[1:]]
    assert heads[0] == "demo" and heads[1].startswith("tune-demo\n")


def test_headless_compare_of_a_tune_run_fits_120_columns_and_says_each_recommendation_once(tmp_path):
    import io

    from rich.cells import cell_len
    from rich.console import Console

    from snapshot_apps import tune
    from tui.core.results.compare import compare_columns, load_run, render_compare

    a = load_run(tune.write_closed_run(tmp_path / "20260101-120000-demo"))
    t = load_run(tune.write_closed_run(tmp_path / "20260101-130000-tune-demo", tune=True))
    buf = io.StringIO()
    render_compare([a, t], Console(file=buf, width=250, color_system=None))
    out = buf.getvalue()
    assert max(cell_len(line) for line in out.splitlines()) <= 120
    rec = t["matrix"]["recommendation"]
    for wl in ("sonnet", "chat"):
        assert out.count(rec[wl]["text"]) == 1, wl
    # Each run's verdict once (the fixture's two runs share its text), not once per column of the tune run.
    assert a["verdict"]["text"] == t["verdict"]["text"] and out.count(t["verdict"]["text"]) == 2
    # Every column's numbers are there (stacked in groups), the interval with them.
    for c in compare_columns([a, t]):
        assert f"{c['spec_tok_s']:.1f}" in out
    assert "134.5 [130.6, 138.4]" in out and out.count("Recommended") >= 2


# -- --open: a tune arm's pane says which workload and repeat its Bench line shows, and pages through them ---
async def test_open_tune_arm_pane_labels_its_bench_and_pages_through_every_repeat(tmp_path):
    import json

    from tui.browse import open_run
    from snapshot_apps import tune

    d = tune.write_closed_run(tmp_path / "run", tune=True)
    # Each repeat its own numbers (state.json facts.repeats, as the arm step records them).
    state = json.loads((d / "state.json").read_text())
    facts = state["steps"]["eagle3-k2"]["facts"]
    facts["repeats"] = {w: [dict(facts["bench"], output_throughput=100.0 + 10 * i + r) for r in (1, 2, 3)]
                        for i, w in enumerate(("sonnet", "chat"))}
    (d / "state.json").write_text(json.dumps(state))
    app = SpecdecApp(browse=open_run(d), frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        app.show_step("eagle3-k2")
        await pilot.pause()
        pane = app.pane("eagle3-k2")

        def bench_line() -> str:  # the Bench line as shown (it takes two or three rows at 80×24)
            rows = screen_lines(app)
            i = next(i for i, line in enumerate(rows) if "Bench" in line)
            return " ".join(line.split("▕", 1)[-1].strip() for line in rows[i:i + 3])

        assert "sonnet 1/3" in bench_line() and "101.00 tok/s" in bench_line(), bench_line()
        assert any("6 bench runs on sonnet, chat" in line for line in pane.log_view.lines)
        seen = []
        for _ in range(len(pane.log_files) - 1):
            await pilot.press("right_square_bracket")
            await pilot.pause()
            seen.append((pane.log_files[pane.log_index].name, bench_line()))
        for name, line in seen:
            wl, r = name.split(".")[1], int(name.split(".")[2][1:])
            want = 100.0 + 10 * ("sonnet", "chat").index(wl) + r
            assert f"{wl} {r}/3" in line and f"{want:.2f} tok/s" in line, (name, line)
        assert len(seen) == 6
