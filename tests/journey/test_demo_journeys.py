"""The README's first session on the simulator, verbatim, in one fresh working directory (no --run-dir): the
demo headless and in a real pseudo-terminal, the demo playing vLLM 0.32, `--show-commands`, `compare` and
`--open`. Each test checks what the user looks at (exit code, the verdict and the numbers on screen or on
stderr, the files the output names) against the files the run wrote. Nothing asserts a duration; timeouts
are safety nets."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from .conftest import Session, assert_named_files_exist, expected_rc, load, two_arm_ratio, user_env

RUN_TIMEOUT_S = 900
CTRL_Q = b"\x11"
DOWN = b"\x1b[B"
STEPS = ["env", "checkpoints", "dataset", "baseline", "eagle3", "results"]


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Session:
    root = tmp_path_factory.mktemp("journey-demo")
    s = Session(root, user_env(root))
    yield s
    s.reap()


def check_two_arm_run(run_dir: Path, stderr: str | None = None) -> float:
    """A finished two-arm run: every step before results passed, the speedup everywhere is the ratio of the
    result files, and the results step's verdict (and so the exit code) follows that ratio (a simulated speedup
    follows the wall clock of a shared machine: never asserted on its own)."""
    rep = load(run_dir / "report.json")
    st = {s["id"]: s["status"] for s in rep["steps"]}
    assert list(st) == STEPS
    assert all(st[s] in ("passed", "warned") for s in STEPS[:-1]), st
    for name in ("baseline.json", "eagle3.json"):
        f = load(run_dir / name)
        assert f["completed"] == f["num_prompts"] and f["failed"] == 0, name
    ratio = two_arm_ratio(run_dir)
    assert (st["results"] in ("passed", "warned")) == (ratio > 1.0), (ratio, st)
    assert rep["exit_code"] == expected_rc(run_dir), (ratio, rep["exit_code"])
    assert rep["comparison"]["output_throughput_speedup"] == pytest.approx(ratio, abs=1e-3)
    shown = f"{ratio:.2f}x"
    assert shown in rep["verdict"]["text"], (shown, rep["verdict"])
    head = "\n".join((run_dir / "report.md").read_text().splitlines()[:4])
    assert rep["verdict"]["text"] in head, head  # the verdict heads report.md
    assert (run_dir / "comparison.txt").read_text().count(shown) >= 1
    diags = {d["id"] for d in rep["diagnostics"]}
    assert ("throughput-regressed" in diags) == (ratio < 1.0), (ratio, diags)
    if stderr is not None:
        assert re.search(rf"output throughput speedup:? {re.escape(shown)}", stderr), stderr[-4000:]
    return ratio


# ---------------------------------------------------------------------------------------------------------
# The runs (module fixtures: later journeys look at the runs the earlier ones saved, as a user would)


@pytest.fixture(scope="module")
def demo_032(session):
    return session.run_saving("demo-vllm-0.32", RUN_TIMEOUT_S)


@pytest.fixture(scope="module")
def demo_headless(session, demo_032):
    return session.run_saving("demo-headless", RUN_TIMEOUT_S)


@pytest.fixture(scope="module")
def demo_wizard(session, demo_headless):
    before = session.run_dirs()
    term = session.pty("demo")
    seen: dict[str, str] = {}
    try:
        assert term.wait_for("Profile", 60), "the wizard never drew its first screen:\n" + term.text()
        term.send("a")  # the README: `a` runs every step
        run_dir: list[Path] = []

        def finished() -> bool:
            new = [p for p in session.run_dirs() if p not in before]
            if len(new) != 1 or not (new[0] / "report.json").is_file():
                return False
            run_dir[:] = new
            st = load(new[0] / "state.json")["steps"]
            return st.get("results", {}).get("status") in ("passed", "warned", "failed")

        assert term.wait_for(finished, RUN_TIMEOUT_S), "the run never finished:\n" + term.text()
        ratio = two_arm_ratio(run_dir[0])
        b = load(run_dir[0] / "baseline.json")["output_throughput"]
        e = load(run_dir[0] / "eagle3.json")["output_throughput"]
        headline = f"{b:.2f} → {e:.2f} tok/s"
        # The Results pane comes up on its own at the end of "run everything".
        term.wait_for(lambda: headline in term.text() and f"speedup {ratio:.2f}x" in term.pane_text(), 30)
        seen["results"] = term.text()
        seen["pane"] = term.pane_text()
        term.send(CTRL_Q)
        code = term.wait_exit(60)
        seen["after"] = term.text()
    finally:
        term.close()
    return code, run_dir[0], seen, headline, ratio


# ---------------------------------------------------------------------------------------------------------


def test_demo_playing_vllm_032_completes_from_a_fresh_directory(session, demo_032):
    """vLLM >= 0.32 has no sonnet dataset: the prompts are built into sonnet.custom.jsonl in the run
    directory, whatever the user's working directory is (issue 15: it was written to a doubled path)."""
    r, run_dir = demo_032
    assert "Traceback" not in r.stderr, r.why()
    assert r.rc == expected_rc(run_dir), r.why()
    assert run_dir.parent == session.cwd / "specdec-runs"
    assert_named_files_exist(r, session.cwd)
    assert (run_dir / "sonnet.custom.jsonl").is_file() and (run_dir / "sonnet.custom.jsonl.meta.json").is_file()
    assert not (run_dir / "specdec-runs").exists(), "a path was resolved against the run directory twice"
    rep = load(run_dir / "report.json")
    assert rep["runs"]["baseline"]["dataset_mode"] == "custom-from-sonnet"
    check_two_arm_run(run_dir, r.stderr)
    session.assert_nothing_left()


def test_demo_headless_from_a_fresh_directory(session, demo_headless):
    r, run_dir = demo_headless
    assert "Traceback" not in r.stderr, r.why()
    assert r.rc == expected_rc(run_dir), r.why()
    assert run_dir.parent == session.cwd / "specdec-runs" and run_dir.name.endswith("-demo")
    named = assert_named_files_exist(r, session.cwd)
    report = f"specdec-runs/{run_dir.name}/report.json"
    assert report in named, f"the output does not name {report}: {named}"
    check_two_arm_run(run_dir, r.stderr)
    for name in ("state.json", "report.md", "summary.csv", "baseline.command.sh", "eagle3.command.sh",
                 "baseline.serve.log", "eagle3.serve.log", "sonnet.txt"):
        assert (run_dir / name).is_file(), name
    session.assert_nothing_left()


def test_demo_wizard_in_a_pseudo_terminal(session, demo_wizard):
    code, run_dir, seen, headline, ratio = demo_wizard
    assert run_dir.parent == session.cwd / "specdec-runs"
    screen = seen["results"]
    assert headline in screen, f"the Results pane does not show {headline!r}:\n{screen}"
    assert f"speedup {ratio:.2f}x" in seen["pane"], screen
    assert code == expected_rc(run_dir), f"ctrl+q after the run exits {code}:\n{seen['after']}"
    check_two_arm_run(run_dir)
    session.assert_nothing_left()


def _shown_blocks(text: str) -> list[str]:
    return [c.strip() for c in text.strip().split("\n\n") if c.strip()]


def _argv(text: str) -> list[str]:
    """The argv of a shown or recorded command, run-directory paths written RUN/<file> (the shown commands
    are planned before the run directory's name exists)."""
    toks = shlex.split(text.replace("\\\n", " "), comments=False)
    return [re.sub(r"^(?:.*/)?specdec-runs/[^/]+/", "RUN/", t) for t in toks]


def test_show_commands_are_the_commands_the_demo_ran(session, demo_headless):
    _, run_dir = demo_headless
    r = session.run("show-commands", 120)
    assert r.rc == 0, r.why()
    blocks = _shown_blocks(r.stdout)
    bodies = ["\n".join(ln for ln in b.splitlines() if not ln.startswith("#")) for b in blocks]
    servers = sorted(run_dir.glob("*.command.sh"))
    assert {p.name for p in servers} == {"baseline.command.sh", "eagle3.command.sh"}
    for p in servers:  # every server the run launched, exactly as shown
        body = "\n".join(ln for ln in p.read_text().splitlines() if not ln.startswith("#!")).strip()
        assert body in bodies, f"{p.name} is not among the shown commands:\n{body}\n--- shown ---\n{r.stdout}"
    shown_argv = [_argv(b) for b in bodies if b.strip()]
    for log in sorted(run_dir.glob("*.bench.log")):  # every bench the run ran (its first line: "# <time> $ argv")
        first = log.read_text().splitlines()[0]
        assert " $ " in first, (log.name, first)
        ran = _argv(first.split(" $ ", 1)[1])
        assert ran in shown_argv, f"{log.name}: the bench that ran is not among the shown commands:\n{ran}"


def test_compare_shows_every_saved_run_with_its_files_numbers(session, demo_032, demo_headless, demo_wizard):
    r = session.run("compare", 120)
    assert r.rc == 0, r.why()
    runs = session.run_dirs()  # the glob's order: the columns' order
    assert len(runs) == 3
    row = next((ln for ln in r.stdout.splitlines() if ln.strip("│ ").startswith("Speedup")), None)
    assert row is not None, r.stdout
    cells = [c.strip() for c in row.strip().strip("│").split("│")][1:]
    want = [f"{two_arm_ratio(d):.2f}x" if (d / "eagle3.json").is_file() else "n/a" for d in runs]
    assert cells == want, (cells, want, r.stdout)


def test_open_browses_the_latest_run(session, demo_032, demo_headless, demo_wizard):
    latest = session.run_dirs()[-1]
    assert latest == demo_wizard[1]
    ratio = two_arm_ratio(latest)
    b = load(latest / "baseline.json")["output_throughput"]
    e = load(latest / "eagle3.json")["output_throughput"]
    term = session.pty("open")
    try:
        assert term.wait_for("Opened read-only", 60), term.text()
        assert term.wait_for(latest.name[:15], 10), term.text()  # the run directory it opened
        term.send("n")  # nothing starts: it says why
        assert term.wait_for(lambda: "nothing runs" in term.pane_text(), 10), term.text()
        for _ in range(len(STEPS)):  # down the step list to Results
            term.send(DOWN)
            term.pump(0.3)
        assert term.wait_for(f"{b:.2f} → {e:.2f} tok/s", 20), term.text()
        assert f"speedup {ratio:.2f}x" in term.pane_text(), term.text()
        term.send(CTRL_Q)
        code = term.wait_exit(60)
    finally:
        term.close()
    assert code == 0
    assert not (latest / "report.json.tmp").exists()
    session.assert_nothing_left()
