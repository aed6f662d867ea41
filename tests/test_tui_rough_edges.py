"""The app's rough edges found at 80×24 (issue 18, item 8; issue 22, item 6), each driven through Pilot at 80×24."""

from __future__ import annotations

import asyncio
import re

import pytest
from textual import events

from tui.app import SpecdecApp
from tui.core.profile.model import load_profile

from snapshot_apps import scenarios
from test_tui_app import STEP_TIMEOUT_S, children, fast_profile_file, isolated, running, wait  # noqa: F401


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
        table = app.screen.query_one("#compare-table")
        heads = [str(c.label) for c in table.ordered_columns[1:]]
        assert len(heads) == 2 and heads[0] != heads[1], heads
        assert "20260101-120000" in heads[0] and "20260102-090000" in heads[1]
        legend = text_of(app.screen.query_one("#compare-legend"))
        assert "20260101-120000-demo" in legend and "20260102-090000-demo" in legend
        await pilot.press("escape")
    # Runs of different profiles keep the short heads.
    c = load_run(tune.write_closed_run(tmp_path / "20260103-100000-tune-demo", tune=True))
    from tui.screens.compare import compare_grid
    heads, _rows = compare_grid([a, c])
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


# ================================================================================================================
# Issue 22, item 6: the rough edges found on the walk of a failed run at 80×24
# ================================================================================================================


def _tp8_env_only(tmp):
    """The fast demo at TP 8, only its environment step: the step fails with the HBM fit, whose fix is a setting."""
    prof = fast_profile_file(tmp, **{"server.tensor_parallel_size": 8})
    return SpecdecApp(load_profile(str(prof)), tmp / "run", steps=["env"])


async def _fail_env_and_open_the_field(app, pilot):
    await pilot.press("n")  # accept the profile
    await pilot.pause()
    await wait(app.step_done.wait(), pilot)
    await pilot.press("n")  # the environment step: it fails
    await pilot.pause()
    await wait(app.step_done.wait(), pilot)
    assert app.failed_step == "env", app.status
    banner = text_of(app.query_one("#pane-env").query_one("FailureBanner"))
    # The banner names the keys that work from where it sends the operator: the field.
    assert "set it to 16, then Enter, then r (ctrl+r in a field) retries with it" in banner, banner
    await pilot.press("p")
    await pilot.pause()
    tp = app.query_one("#knob-server-tensor-parallel-size")
    assert app.focused is tp
    await pilot.press("1", "6")
    await pilot.pause()
    assert tp.value == "16"
    return tp


async def test_ctrl_r_retries_from_the_field_the_fix_names(isolated):  # noqa: F811
    """"set it to 16, then r": r in the focused field is a letter (an integer field drops it), so r alone did
    nothing there. ctrl+r retries from inside the field."""
    app = _tp8_env_only(isolated)
    async with running(app) as pilot:
        tp = await _fail_env_and_open_the_field(app, pilot)
        await pilot.press("r")  # a letter in the field: neither typed into an integer nor a retry
        await pilot.pause()
        assert tp.value == "16" and app.focused is tp and app.status["env"] == "failed" and not app.busy
        await pilot.press("ctrl+r")
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        assert app.status["env"] in ("passed", "warned"), app.status
        assert app.engine.profile.server.tensor_parallel_size == 16
        await pilot.press("ctrl+q")
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    assert children() == []


async def test_enter_leaves_the_field_for_the_step_list_where_r_retries(isolated):  # noqa: F811
    app = _tp8_env_only(isolated)
    async with running(app) as pilot:
        await _fail_env_and_open_the_field(app, pilot)
        await pilot.press("enter")
        await pilot.pause()
        assert app.focused is app.query_one("StepList")
        title = text_of(app.query_one("#pane-profile").query_one(".pane-title"))
        assert "1 setting changed: r retries with it" in title, title
        await pilot.press("r")
        await pilot.pause()
        await wait(app.step_done.wait(), pilot)
        assert app.status["env"] in ("passed", "warned"), app.status
        await pilot.press("ctrl+q")
        await asyncio.wait_for(app.shutdown_done.wait(), STEP_TIMEOUT_S)
    assert children() == []


def _pane_rows(app) -> list[str]:
    """The right-hand pane's rows as shown (the step list's column cut off)."""
    return [line.split("▕", 1)[1] if "▕" in line else "" for line in screen_lines(app)[1:-1]]


async def test_a_failed_server_step_at_80x24_shows_its_log_and_l_gives_the_log_the_pane():
    from snapshot_apps import replay

    app = SpecdecApp(scenarios.demo_profile().with_values({"server.tensor_parallel_size": 8}), scenarios.RUN_DIR,
                     frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, scenarios.tp8_fault())
        app.show_step("baseline")
        await pilot.pause()
        await pilot.pause()
        pane = app.pane("baseline")
        rows = _pane_rows(app)
        assert any("Server failed with a device-memory (HBM)" in r for r in rows), rows  # the diagnosis leads
        assert any("Fix:" in r for r in rows)
        # ...and the log is on screen under it: its toolbar and its error lines.
        log = pane.log_view
        assert log.region.height >= 2 and log.region.bottom <= app.size.height - 1, log.region
        assert any("[v] collapsed" in r for r in rows) and any(r.strip().startswith("✗ Failed to allocate") for r in rows)
        # The problems box does not repeat the banner's diagnosis.
        assert sum("device-memory (HBM)" in r for r in rows) == 1, rows
        await pilot.press("l")
        await pilot.pause()
        await pilot.pause()
        assert app.focused is log and log.region.height >= 12, log.region
        rows = _pane_rows(app)
        assert sum(1 for r in rows if "Server failed with a device-memory" in r) == 1  # the banner: its title row
        assert not any("Fix:" in r for r in rows)
        await pilot.press("escape")  # back to the step list: the diagnosis is whole again
        await pilot.pause()
        await pilot.pause()
        assert any("Fix:" in r for r in _pane_rows(app))


async def test_the_compare_screen_shows_every_column_of_the_headless_table(tmp_path):
    from snapshot_apps import tune
    from tui.core.results.compare import column_title, compare_columns, load_run
    from tui.screens.compare import CompareApp

    a = load_run(tune.write_closed_run(tmp_path / "20260101-120000-demo"))
    t = load_run(tune.write_closed_run(tmp_path / "20260101-130000-tune-demo", tune=True))
    cols = compare_columns([a, t])
    assert len(cols) == 7  # the two-arm run, and k = 1, 2, 3 on sonnet and chat
    app = CompareApp([a, t])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#compare-table")
        assert len(table.ordered_columns) == 1 + len(cols)
        seen: set[str] = set()
        for _ in range(len(cols) + 1):  # → walks the columns; the numbers scroll, the row labels stay
            shown = "\n".join(screen_lines(app))
            assert "Spec tok/s" in shown and "Speedup" in shown
            seen |= {f"{c['spec_tok_s']:.1f}" for c in cols if f"{c['spec_tok_s']:.1f} [" in shown}
            await pilot.press("right")
            await pilot.pause()
        multi = {"20260101-130000-tune-demo": 6}
        assert "k=3 chat" in column_title(cols[-1], multi) and "k=3 chat" in "\n".join(screen_lines(app))
        assert seen == {f"{c['spec_tok_s']:.1f}" for c in cols[1:]}, seen  # every tune column's number was shown


async def test_a_bad_toml_in_the_file_field_says_why_at_once(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[server\nport = 1\n')
    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        field = app.query_one("#profile-file")
        field.focus()
        field.value = str(bad)
        await pilot.press("enter")  # once
        for _ in range(3):
            await pilot.pause()
        errors = text_of(app.query_one("#profile-errors"))
        assert errors.startswith("✗ ") and "bad.toml" in errors, errors
        assert app.profile is None  # the previous profile is not silently kept
        assert any("bad.toml" in line for line in screen_lines(app))
        app.query_one("#profile-select").value = "demo"  # choosing a profile clears it
        await pilot.pause()
        await pilot.pause()
        assert text_of(app.query_one("#profile-errors")).startswith("✓ valid")


async def test_no_color_checkbox_on_and_off_differ_in_glyphs(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        def sweep_row() -> str:
            return next(line for line in screen_lines(app) if "Sweep k" in line)

        off = sweep_row()
        app.query_one("#sweep-toggle").focus()
        await pilot.press("space")
        await pilot.pause()
        await pilot.pause()
        on = sweep_row()
        assert "▐ ▌" in off and "▐X▌" in on, (off, on)


async def test_no_row_ends_inside_a_word_run_dir_phases_and_pane_title():
    from snapshot_apps import replay

    app = SpecdecApp(scenarios.demo_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, scenarios.full_run())
        app.show_step("baseline")
        await pilot.pause()
        await pilot.pause()
        # The sidebar's run directory: broken after a "/", every name whole.
        info = _lines(app.query_one("#run-info"))
        path_rows = [r.strip() for r in info if r.strip() and r.strip() != "Run dir:"]
        assert "".join(path_rows) == scenarios.RUN_DIR and all(r.endswith("/") for r in path_rows[:-1]), info
        # The phase line: a row never splits "✓ weights 3.0s".
        rows = [r for r in _lines(app.query_one("PhaseTimeline")) if r.strip()]
        assert len(rows) > 1, rows
        for r in rows:
            assert not re.search(r"✓ [a-z-]+$", r) or r.endswith("✓ ready"), rows
            assert not re.match(r"^\s*[\d.]+s\b", r), rows
        # A pane title cut to its two rows ends with a whole word and an ellipsis.
        app.show_step("profile")
        prof = app.query_one("#pane-profile")
        prof.set_hint("a hint long enough to need a third row at eighty columns, which the title does not have, "
                      "so its last words leave")
        await pilot.pause()
        title = [r.strip() for r in _lines(prof.query_one(".pane-title")) if r.strip()]
        assert len(title) == 2 and title[-1].endswith("…"), title
        assert " ".join(title)[:-1].split()[-1] in prof.hint.split(), title


@pytest.mark.parametrize("name", ["demo", "tune-load-demo", "gpt-oss-120b-eagle3-trn2", "llama-3.1-8b-eagle3-cuda"])
async def test_the_header_names_whole_words_at_80_columns(name):
    """The header drops what does not fit whole (the models' org, the app's name, the draft) instead of cutting a
    name inside ("gpt-oss-120b-speculator.ea…")."""
    app = SpecdecApp(load_profile(name), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        title = screen_lines(app)[0].replace("SIMULATED", "").strip()  # as drawn
        assert "…" not in title.replace("→ …", ""), title
        prof = app.profile
        assert name in title.split(" · ") and prof.models.target.rsplit("/", 1)[-1] in title, title
        words = [w for w in title.replace("·", " ").replace("→", " ").split() if w != "…"]
        names = {"specdec-tui", name, *(m for x in (prof.models.target, prof.draft_model) for m in (x, x.rsplit("/", 1)[-1]))}
        assert set(words) <= names, (title, words)


async def test_a_key_that_cannot_act_is_named_as_typed():
    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("right_square_bracket")
        await pilot.pause()
        titles = [n.title for n in app._notifications]
        assert titles == ["]: not now"], titles


async def test_c_copies_every_planned_command_and_says_how_many():
    from tui.screens.modals import CommandScreen

    app = SpecdecApp(load_profile("demo"), scenarios.RUN_DIR, frozen=True)
    copied: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CommandScreen) and screen.several
        assert screen.labels == ["Step 1: baseline server", "Step 1: baseline benchmark", "Step 2: EAGLE3 server",
                                 "Step 2: EAGLE3 benchmark"], screen.labels
        await pilot.press("c")
        await pilot.pause()
        assert copied == [screen.serve]
        said = [n.message for n in app._notifications][-1]
        assert said.startswith("all 4 commands copied") and "baseline server" in said and "EAGLE3 server" in said
        assert "serve command copied" not in said


def test_the_apps_own_metrics_polling_folds_into_one_line_of_the_live_log():
    """The bench samples /metrics about once a second; each scrape is an access line in the server log. The
    rank-collapsed view (the live log's default) folds them into one line with a count; the raw view keeps every
    one, and a failed scrape is not folded."""
    from tui.core import events as ev
    from tui.core.serverlog.logwatch import ServeLogWatcher

    got: list = []
    w = ServeLogWatcher(got.append, "eagle3", speculative=True)
    api = "(APIServer pid=7) INFO:     127.0.0.1:{} - \"{} HTTP/1.1\" {}"
    lines = [api.format(40000 + i, "GET /metrics", "200 OK") for i in range(30)]
    lines.insert(10, api.format(50000, "POST /v1/completions", "200 OK"))
    lines.insert(20, api.format(50001, "GET /metrics", "500 Internal Server Error"))
    for n, line in enumerate(lines):
        w.on_line(line, float(n))
    raw = [e for e in got if isinstance(e, ev.LogLine)]
    clean = [e for e in got if isinstance(e, ev.CleanLog)]
    ranks = [e for e in got if isinstance(e, ev.LogRanks)]
    assert len(raw) == 32  # every line, as the saved serve.log keeps them
    assert [c.text.split(" (")[0] for c in clean] == [
        "GET /metrics", '127.0.0.1:50000 - "POST /v1/completions HTTP/1.1" 200 OK',
        '127.0.0.1:50001 - "GET /metrics HTTP/1.1" 500 Internal Server Error']
    assert clean[0].text == "GET /metrics (this app's sampling, folded)"
    assert {r.line_id for r in ranks} == {clean[0].line_id} and ranks[-1].ranks == 30


def test_help_names_a_tune_profiles_arm_ids_and_show_commands_lists_them():
    import subprocess
    import sys

    from tui.cli import build_parser
    from tui.core.plan.arms import arms_of

    text = next(a.help for a in build_parser()._actions if "--steps" in a.option_strings)
    assert "<method>-k<k>" in text and "eagle3-k1" in text and "--show-commands` names" in text, text
    ids = [a.id for a in arms_of(load_profile("tune-demo")) if a.id != "baseline"]
    assert ids == ["eagle3-k1", "eagle3-k2", "eagle3-k3"]
    out = subprocess.run([sys.executable, "-m", "tui", "--profile", "tune-demo", "--show-commands"],
                         capture_output=True, text=True, timeout=120).stdout
    for sid in ids:
        assert f"({sid})" in out, sid


def test_readme_lists_every_bundled_profile_and_every_simulation_key():
    from pathlib import Path

    from tui.core.profile.model import bundled_profiles
    from tui.sim.config import DEFAULTS

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme[readme.index("**Bundled profiles**"):readme.index("The cuda profiles leave")]
    for name in bundled_profiles():
        assert f"`{name}`" in table, name
    row = next(line for line in readme.splitlines() if line.startswith("| `[simulation]` |"))
    for key in DEFAULTS:
        assert f"`{key}`" in row, key


async def test_l_gives_a_benching_arms_log_the_rows_its_live_chart_had():
    """While an arm benches at 80×24 the live chart takes most of the pane and the log keeps a few rows; with the log
    focused (l) the chart steps aside, and comes back when the focus leaves the log."""
    from snapshot_apps import charts as fx, replay, tune

    app = SpecdecApp(tune.tune_profile(), scenarios.RUN_DIR, frozen=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await replay.feed(app, pilot, tune.until_k2_bench() + fx.samples("eagle3-k2", "sonnet r2", 45, 62.0),
                          busy="eagle3-k2")
        app.show_step("eagle3-k2")
        await pilot.pause(0.6)
        pane = app.pane("eagle3-k2")
        assert pane.live_chart.region.height >= 9 and pane.log_view.region.height <= 4, pane.log_view.region
        await pilot.press("l")
        await pilot.pause()
        await pilot.pause()
        assert app.focused is pane.log_view and pane.live_chart.region.height == 0
        assert pane.log_view.region.height >= 10, pane.log_view.region
        await pilot.press("escape")
        await pilot.pause()
        await pilot.pause()
        assert pane.live_chart.region.height >= 9
