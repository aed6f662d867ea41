"""The README's load sweep on the simulator, verbatim, from a fresh working directory (no --run-dir):
`specdec-tui --profile tune-load-demo --headless`. Every conclusion the run states — the per-level verdicts, the
crossover, the best k per level, the schedule, the SLO goodput, the acceptance time series, the speedup model —
is checked against the run's own result files, and its report.html is opened offline in headless chromium.
Nothing asserts a simulated speedup or a duration: which levels pay is whatever the files say."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from test_report_html import assert_charts_render, need_chromium

from tui.core.plan.commands import level_prompts
from tui.core.profile.model import load_profile
from tui.core.results.figures import chart_data
from tui.widgets.charts import speedup_series

from .conftest import Session, assert_named_files_exist, load, user_env

RUN_TIMEOUT_S = 1500
LEVELS = (1, 2, 4, 8, 16)
ARMS = ("baseline", "eagle3-k1", "eagle3-k2", "eagle3-k3")
REPEATS = 3
PROFILE = load_profile("tune-load-demo")


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Session:
    root = tmp_path_factory.mktemp("journey-load")
    s = Session(root, user_env(root))
    yield s
    s.reap()


@pytest.fixture(scope="module")
def load_run(session):
    return session.run_saving("tune-load-demo", RUN_TIMEOUT_S)


def _files(run_dir: Path, arm: str, n: int) -> list[dict]:
    return [load(run_dir / f"{arm}.sonnet.c{n}.r{i}.json") for i in range(1, REPEATS + 1)]


def test_the_load_sweep_runs_from_a_fresh_directory(session, load_run):
    r, run_dir = load_run
    assert "Traceback" not in r.stderr, r.why()
    rep = load(run_dir / "report.json")
    assert r.rc == rep["exit_code"], r.why()
    assert run_dir.parent == session.cwd / "specdec-runs" and run_dir.name.endswith("-tune-load-demo")
    assert_named_files_exist(r, session.cwd)
    st = {s["id"]: s["status"] for s in rep["steps"]}
    assert list(st) == ["env", "checkpoints", "dataset", *ARMS, "results"]  # neuron: no schedule arm
    assert all(st[a] in ("passed", "warned") for a in ARMS), st
    assert "Load: where speculation stops paying" in r.stderr + r.stdout
    session.assert_nothing_left()


def test_one_launch_per_arm_and_one_bench_per_level_and_repeat(load_run):
    _, run_dir = load_run
    rep = load(run_dir / "report.json")
    cmds = load(run_dir / "commands.json")["commands"]
    for arm in ARMS:
        serves = [c for c in cmds if c["step"] == arm and c["role"] == "serve"]
        assert len(serves) == 1
        argv = serves[0]["argv"]
        assert argv[argv.index("--max-num-seqs") + 1] == str(max(LEVELS))
        for n in LEVELS:
            files = _files(run_dir, arm, n)
            for f in files:
                assert f["max_concurrency"] == n and f["completed"] == f["num_prompts"] == level_prompts(PROFILE, n)
                assert f["failed"] == 0 and f["request_goodput"] is not None
            cell = rep["matrix"]["cells"][arm][f"sonnet@c{n}"]
            assert cell["output_throughput"]["values"] == pytest.approx([f["output_throughput"] for f in files])


def test_verdicts_crossover_best_k_and_schedule_follow_the_intervals(load_run):
    _, run_dir = load_run
    rep = load(run_dir / "report.json")
    entry = rep["load"]["workloads"]["sonnet"]
    rec = rep["matrix"]["recommendation"]
    for arm in ARMS[1:]:
        a = entry["arms"][arm]
        verdicts = {}
        for n in LEVELS:
            lv = a["levels"][str(n)]
            files, base = _files(run_dir, arm, n), _files(run_dir, "baseline", n)
            ratio = statistics.mean(f["output_throughput"] for f in files) / statistics.mean(
                f["output_throughput"] for f in base)
            assert lv["speedup"]["ratio"] == pytest.approx(ratio, rel=1e-3)
            ci = lv["speedup"].get("ci95")
            verdicts[n] = "pays" if ci and ci[0] > 1 else "loses" if ci and ci[1] < 1 else "not_proven"
            assert lv["verdict"] == verdicts[n], (arm, n, lv)
        assert a["pays"] == [n for n in LEVELS if verdicts[n] == "pays"]
        assert a["loses"] == [n for n in LEVELS if verdicts[n] == "loses"]
        assert a["range_text"]
    sched = entry["schedule"]
    ks = {a["id"]: a["num_speculative_tokens"] for a in rep["matrix"]["arms"]}
    # issue 29: settled on an arm → its k, on the baseline → 0; not settled → the nearest settled level's k (the
    # lower one first), never 0 for being undecided; no settled level → no schedule
    own = {}
    for n in LEVELS:
        r = rec[f"sonnet@c{n}"]
        assert entry["best"][str(n)]["verdict"] == r["verdict"]
        own[n] = ks[r["arm"]] if r["verdict"] == "pays" else 0 if r["verdict"] == "keep_baseline" else None
    if all(v is None for v in own.values()):
        assert sched == []
    else:
        assert sched[0][0] == 1 and sched[-1][1] == max(LEVELS)
        assert all(sched[i][1] + 1 == sched[i + 1][0] for i in range(len(sched) - 1))
        lv = list(LEVELS)
        for i, n in enumerate(lv):
            near = [m for m in reversed(lv[:i]) if own[m] is not None] + [m for m in lv[i + 1:] if own[m] is not None]
            k_at = next(e[2] for e in sched if e[0] <= n <= e[1])
            assert k_at == (own[n] if own[n] is not None else own[near[0]]), (n, sched, own)
    # neuron: the schedule is reported, not run, and not written as a profile vllm-neuron would refuse
    assert rep["load"]["schedule_verification"]["status"] == "unsupported"
    assert "vllm-neuron" in rep["load"]["schedule_verification"]["text"]
    assert not (run_dir / "schedule.toml").exists()


def test_slo_goodput_and_the_sustained_load_follow_the_files(load_run):
    _, run_dir = load_run
    rep = load(run_dir / "report.json")
    entry = rep["load"]["workloads"]["sonnet"]
    att = 0.9
    for arm in ARMS:
        a = entry["arms"][arm]
        meets = {}
        for n in LEVELS:
            files = _files(run_dir, arm, n)
            g = a["levels"][str(n)]["goodput"]
            assert g["mean"] == pytest.approx(statistics.mean(f["request_goodput"] for f in files), abs=1e-6)  # rounded to 6 places
            meets[n] = (statistics.mean(f["request_goodput"] for f in files)
                        >= att * statistics.mean(f["request_throughput"] for f in files))
            assert a["levels"][str(n)]["meets_slo"] == meets[n]
        top = None
        for n in LEVELS:
            if not meets[n]:
                break
            top = n
        assert a["sustains_slo_up_to"] == top
    assert entry["slo_text"]


def test_time_series_add_up_to_each_bench_and_drift_is_judged(load_run):
    _, run_dir = load_run
    rep = load(run_dir / "report.json")
    for arm in ARMS:
        for n in LEVELS:
            for rec, f in zip(rep["timeseries"][arm][f"sonnet@c{n}"], _files(run_dir, arm, n)):
                wins = rec["windows"]
                assert wins and sum(w["generation_tokens"] for w in wins) == f["total_output_tokens"]
                if arm != "baseline":
                    assert sum(w["accepted_tokens"] for w in wins) == f["spec_decode_accepted_tokens"]
    drift = rep["load"]["workloads"]["sonnet"]["drift"]
    for arm in ARMS[1:]:
        for n in LEVELS:
            d = drift[arm].get(str(n))
            if d is not None:
                assert d["drift"] == (d["ci95"][0] > 0 or d["ci95"][1] < 0)


def test_the_model_is_fitted_to_the_measurements_and_explains_the_winner(load_run):
    _, run_dir = load_run
    rep = load(run_dir / "report.json")
    model = rep["load"]["workloads"]["sonnet"]["model"]
    cells = rep["matrix"]["cells"]
    rows = {(r["arm"], r["level"]): r for r in model["rows"]}
    for arm in ARMS[1:]:
        for n in LEVELS:
            r = rows[(arm, n)]
            assert r["measured"] == pytest.approx(cells[arm][f"sonnet@c{n}"]["speedup"]["ratio"])
            assert r["fitted"] > 0 and r["held_out"] > 0  # three arms a level: each predicted from the other two
            assert r["held_out_error"] == pytest.approx(r["held_out"] / r["measured"] - 1, abs=1e-3)
    ho = model["held_out"]
    errs = sorted(abs(r["held_out_error"]) for r in model["rows"])
    assert ho["n"] == len(errs) == len(LEVELS) * 3 and ho["max_abs_error"] == pytest.approx(errs[-1], abs=1e-4)
    md = (run_dir / "report.md").read_text()
    assert ho["text"] in md and "not a prediction" in md  # the held-out error is shown; in-sample is not called one
    assert model["untried"] and all(u["k"] not in (1, 2, 3) for u in model["untried"])
    assert 0 < model["alpha"] < 1 and "not the paper's" in model["note"]
    assert set(model["why"]) >= {str(n) for n in LEVELS}


def test_the_report_links_its_charts_and_report_html_renders_offline(load_run, tmp_path):
    _, run_dir = load_run
    rep = load(run_dir / "report.json")
    names = [f["name"] for f in rep["figures"]]
    assert names == ["throughput_vs_k", "speedup_vs_concurrency", "per_position_acceptance", "acceptance_over_time"]
    md = (run_dir / "report.md").read_text()
    assert "## Load: where speculation stops paying" in md
    for f in rep["figures"]:
        assert (run_dir / f["png"]).is_file() and (run_dir / f["svg"]).is_file()
        assert f"]({f['png']})" in md
    assert_charts_render(need_chromium(), run_dir, rep["figures"], tmp_path)


def test_the_app_opens_the_sweep_and_draws_its_charts(session, load_run):
    """The README's `--open` block on the sweep just saved: `g` on the Results pane draws the charts from the
    saved report (throughput vs k, speedup vs concurrency with its band and crossover, per-position acceptance,
    acceptance over time), legible in an 80×24 pseudo-terminal."""
    _, run_dir = load_run
    assert session.run_dirs()[-1] == run_dir
    term = session.pty("open")
    try:
        assert term.wait_for("Opened read-only", 60), term.text()
        term.send("g")  # from any pane: jumps to Results with the charts open
        assert term.wait_for("output tok/s vs k", 30), term.text()
        assert term.wait_for("speedup vs concurrency", 10), term.text()
        term.send("\x11")  # ctrl+q
        code = term.wait_exit(60)
    finally:
        term.close()
    assert code == 0
    session.assert_nothing_left()


# -- one statement per arm: the summary, the check line, the table and both charts' markers agree ----------------

def _verdicts_from_files(run_dir: Path, rep: dict) -> dict[str, list[tuple[int, str]]]:
    """The test's own per-level verdicts: the speedup interval in report.json (checked against the files above)
    read by the rule — above 1 pays, below 1 loses, else not proven."""
    out = {}
    for arm in ARMS[1:]:
        seq = []
        for n in LEVELS:
            ci = rep["matrix"]["cells"][arm][f"sonnet@c{n}"]["speedup"].get("ci95")
            seq.append((n, "pays" if ci and ci[0] > 1 else "loses" if ci and ci[1] < 1 else "not_proven"))
        out[arm] = seq
    return out


WORDS = {"pays": "pays", "not_proven": "not proven", "loses": "loses"}
CODES = {"pays": "P", "not_proven": "?", "loses": "L"}


def _runs_text(seq: list[tuple[int, str]]) -> str:
    runs: list[list] = []
    for n, v in seq:
        if runs and runs[-1][0] == v:
            runs[-1][2] = n
        else:
            runs.append([v, n, n])
    return ", ".join(f"{WORDS[v]} at {a if a == b else f'{a}–{b}'}" for v, a, b in runs)


def _changes(seq: list[tuple[int, str]]) -> list[tuple[int, int, str]]:
    return [(a, b, "stops_paying" if va == "pays" else "starts_paying")
            for (a, va), (b, vb) in zip(seq, seq[1:]) if (va == "pays") != (vb == "pays")]


def test_summary_check_line_table_and_chart_markers_agree_for_every_arm(load_run):
    r, run_dir = load_run
    rep = load(run_dir / "report.json")
    entry = rep["load"]["workloads"]["sonnet"]
    md_lines = (run_dir / "report.md").read_text().splitlines()
    load_rows = {}
    start = md_lines.index("### sonnet")
    head = [c.strip() for c in md_lines[start + 2].strip("|").split("|")]
    for line in md_lines[start + 4: start + 4 + len(LEVELS)]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        load_rows[int(cells[0])] = dict(zip(head, cells))
    err = r.stderr.splitlines()
    top = next(i for i, ln in enumerate(err) if "Load: where speculation stops paying" in ln and ln.startswith("╭"))
    bottom = next(i for i in range(top, len(err)) if err[i].startswith("╰"))
    panel = [ln.strip("│ ").rstrip() for ln in err[top + 1:bottom]]  # the headless Load panel
    chart = next(c for c in chart_data(rep) if c["name"] == "speedup_vs_concurrency")
    app_marks = {s.arm: s.marks for s in speedup_series(rep["load"], "sonnet")}
    for arm, seq in _verdicts_from_files(run_dir, rep).items():
        a = entry["arms"][arm]
        label, text = a["label"], _runs_text(seq)
        assert a["statement"]["range_text"] == text
        # the check line (the results step's fact on stderr) and the headless panel
        assert f"load {label} (sonnet): {text}" in r.stderr, (arm, text)
        assert f"{label}: {text}" in " ".join(panel), (arm, text)
        col = [h for h in head if h == label][0]
        for n, v in seq:
            assert load_rows[n][col].endswith(WORDS[v]), (arm, n, load_rows[n][col])  # the report.md table
            row = next(ln for ln in panel if ln.split()[:1] == [str(n)] and "x" in ln)
            assert row.split()[2 + 2 * ARMS[1:].index(arm)] == CODES[v], (arm, n, row)  # the panel's table
        # both charts' markers: report.html's matplotlib chart and the app's plotext chart
        want = _changes(seq)
        drawn = next(x for x in chart["panels"][0]["arms"] if x["arm"] == arm)["changes"]
        assert [(c["after"], c["before"], c["kind"]) for c in drawn] == want, arm
        assert [(k, round(x * x)) for x, k, _t in app_marks[arm]] == [(k, a_ * b) for a_, b, k in want], arm
        assert a["statement"]["text"] in chart["caption"]


def test_the_verdict_table_opens_report_md_and_every_warning_is_named(load_run):
    r, run_dir = load_run
    rep = load(run_dir / "report.json")
    md = (run_dir / "report.md").read_text().splitlines()
    top = md[:40]
    assert "## Verdict" in top
    rows = [ln for ln in top if ln.startswith("| sonnet |")]
    assert [int(ln.split("|")[2]) for ln in rows] == list(LEVELS)
    for ln in rows:  # each row names the best arm and its verdict, as the level's recommendation says
        n = int(ln.split("|")[2])
        v = rep["matrix"]["recommendation"][f"sonnet@c{n}"]["verdict"]
        assert ln.split("|")[5].strip().startswith({"pays": "pays", "keep_baseline": "keep the baseline",
                                                    "not_proven": "not settled"}[v]), ln
    assert md.index("## Verdict") < md.index("## Charts") < md.index("## Load: where speculation stops paying") \
        < md.index("## Appendix") < md.index("### Commands")
    assert len(rep["verdict"]["text"]) < 200  # the headline is a sentence, the table says the rest
    # "warned" always names what it warned about: the step line, the summary table and report.md
    for st in rep["steps"]:
        if st["status"] == "warned":
            assert re.search(r"warnings?( — |: )\S", st["summary"]), st  # "2 warnings — name: what, ..."
            assert "warned in" in r.stderr and st["summary"].split(" · ")[0] in r.stderr.replace("\n", " ")
            assert any(ln.startswith(f"- {st['title']} warned — ") for ln in md), st
    for ln in r.stderr.splitlines():
        if "warned in" in ln:
            assert ln.split(" — ", 1)[1].strip(), ln
