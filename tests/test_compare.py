"""`specdec-tui compare RUN_DIR…` (tui/core/results/compare.py + tui/cli.py): saved runs side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tui.cli import main
from tui.core.results import compare as cmp

from tune_reports import matrix_report, two_arm_report

REPO = Path(__file__).resolve().parents[1]


def write_run(path: Path, rep: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "report.json").write_text(json.dumps(rep), encoding="utf-8")
    (path / "state.json").write_text("{}", encoding="utf-8")
    return path


# -- load_run ---------------------------------------------------------------------------------------------------

def test_load_run_reads_a_dir_or_its_report(tmp_path):
    d = write_run(tmp_path / "r1", two_arm_report("/elsewhere/r1"))
    rep = cmp.load_run(d)
    assert rep["profile"] == "demo" and rep["compare_path"] == str(d)
    assert cmp.load_run(d / "report.json")["compare_path"] == str(d)


@pytest.mark.parametrize("case,fragment", [
    ("missing", "does not exist"),
    ("empty_dir", "not a specdec-tui run directory"),
    ("unfinished", "never reached its report"),
    ("damaged", "is not valid JSON"),
    ("foreign", "is not a specdec-tui report (schema 'other/1'"),
    ("no_schema", "is not a specdec-tui report (schema None"),
    ("list", "is not a specdec-tui report"),
    ("file", "is not a run directory"),
])
def test_load_run_errors_are_one_paragraph(tmp_path, case, fragment):
    d = tmp_path / case
    if case == "empty_dir":
        d.mkdir()
    elif case == "unfinished":
        d.mkdir()
        (d / "state.json").write_text("{}")
    elif case == "damaged":
        d.mkdir()
        (d / "report.json").write_text('{"schema": "specdec-tui/report/1", "runs": {')
    elif case == "foreign":
        write_run(d, {"schema": "other/1"})
    elif case == "no_schema":
        write_run(d, {"runs": {}})
    elif case == "list":
        d.mkdir()
        (d / "report.json").write_text("[]")
    elif case == "file":
        d.write_text("x")
    with pytest.raises(cmp.CompareError) as ei:
        cmp.load_run(d)
    assert fragment in str(ei.value) and "\n" not in str(ei.value)


# -- columns / rows ---------------------------------------------------------------------------------------------

def test_columns_two_arm_and_matrix(tmp_path):
    a = cmp.load_run(write_run(tmp_path / "a", two_arm_report()))
    m = cmp.load_run(write_run(tmp_path / "tune", matrix_report()))
    cols = cmp.compare_columns([a, m])
    assert [c["run"] for c in cols] == ["a", "tune", "tune", "tune"]
    assert [c["k"] for c in cols] == [1, 1, 2, 3]
    assert cols[0]["speedup"] == 1.2952 and cols[0]["recommended"] is None
    assert cols[1]["recommended"] is True and cols[2]["recommended"] is False
    assert cols[1]["spec_tok_s"] == 134 and cols[1]["baseline_tok_s"] == 113
    assert cols[1]["speedup_ci95"] == m["matrix"]["cells"]["eagle3-k1"]["sonnet"]["speedup"]["ci95"]
    assert cols[3]["acceptance"] == pytest.approx(45.0)
    rows = {r[0]: r[1:] for r in cmp.compare_rows(cols)}
    assert list(rows) == list(cmp.ROWS)
    assert rows["Speedup"][0] == "1.30x"
    lo, hi = cols[1]["speedup_ci95"]
    assert rows["Speedup"][1] == f"1.19x [{lo:.2f}, {hi:.2f}]"
    assert rows["Baseline tok/s"][0] == "217.7"
    assert rows["Spec tok/s"][1] == "134.0 [131.5, 136.5]"
    assert rows["Median TPOT ms"][0] == "0.04 (0.64x)"
    assert rows["Median TPOT ms"][1] == "11.00 (0.79x)"
    assert rows["Acceptance %"] == ("67.1", "70.0", "55.0", "45.0")
    assert rows["Method, k"][0] == "eagle3, 1"
    assert rows["Profile"] == ("demo (simulated)",) + ("tune-demo (simulated)",) * 3
    assert rows["Verdict"][0].startswith("✓ EAGLE3 was faster in one run: 1.30x")
    assert rows["Recommended"] == ("n/a", "✓", "", "")
    assert rows["Workload"] == ("sonnet",) * 4


def test_columns_old_reports_and_failed_runs(tmp_path):
    """Older report.json (no verdict/settings) and a run whose servers never benchmarked."""
    old = two_arm_report()
    del old["verdict"], old["settings"]
    failed = two_arm_report()
    failed["runs"] = {}
    failed["comparison"] = {"output_throughput_speedup": None, "median_tpot_ratio": None, "median_ttft_ratio": None}
    failed["verdict"] = {"ok": False, "text": "Failed at Baseline server: out of device memory."}
    cols = cmp.compare_columns([old, failed])
    rows = {r[0]: r[1:] for r in cmp.compare_rows(cols)}
    assert rows["Speedup"] == ("1.30x", "n/a")
    assert rows["Platform"] == ("n/a", "neuron") and rows["Method, k"] == ("n/a, n/a", "eagle3, 1")
    assert rows["Verdict"] == ("n/a", "✗ Failed at Baseline server: out of device memory.")
    assert rows["Workload"] == ("sonnet", "n/a")
    assert "Recommended" not in rows


def test_same_named_runs_are_told_apart(tmp_path):
    a = cmp.load_run(write_run(tmp_path / "x" / "run", two_arm_report()))
    b = cmp.load_run(write_run(tmp_path / "y" / "run", two_arm_report(speedup=1.1)))
    assert [c["run"] for c in cmp.compare_columns([a, b])] == ["run", "run#2"]


def test_column_title_and_multi_workload_matrix():
    rep = matrix_report()
    mx = rep["matrix"]
    mx["workloads"] = ["sonnet", "chat"]
    for aid in mx["cells"]:
        mx["cells"][aid]["chat"] = mx["cells"][aid]["sonnet"]
    mx["recommendation"]["chat"] = mx["recommendation"]["sonnet"]
    cols = cmp.compare_columns([rep])
    assert len(cols) == 6 and [c["workload"] for c in cols] == ["sonnet"] * 3 + ["chat"] * 3
    assert cmp.column_title(cols[4], {cols[0]["run"]: 6}) == "tune\nk=2 chat"


# -- the CLI ----------------------------------------------------------------------------------------------------

def test_cli_compare_table(tmp_path, capsys):
    a = write_run(tmp_path / "20261201-demo", two_arm_report())
    t = write_run(tmp_path / "20261202-tune", matrix_report())
    assert main(["compare", str(a), str(t)]) == 0
    out = capsys.readouterr().out
    for text in ("specdec-tui compare", "20261201-demo", "20261202-tune", "Speedup", "1.30x", "1.19x",
                 "Acceptance %", "67.1", "Recommended", "k = 1: 134.0 tok/s [131.5, 136.5], 1.19x baseline"):
        assert text in out, text


def test_cli_compare_json(tmp_path, capsys):
    a = write_run(tmp_path / "a", two_arm_report())
    t = write_run(tmp_path / "t", matrix_report())
    assert main(["compare", "--json", str(a), str(t)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "specdec-tui/compare/1" and doc["runs"] == [str(a), str(t)]
    assert len(doc["columns"]) == 4 and doc["columns"][1]["recommended"] is True
    assert doc["columns"][0]["speedup"] == 1.2952


def test_cli_compare_errors_exit_2(tmp_path, capsys):
    a = write_run(tmp_path / "a", two_arm_report())
    assert main(["compare", str(a), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specdec-tui: error: ") and "does not exist" in err and err.count("\n") == 1
    assert main(["compare"]) == 2
    assert "RUN_DIR" in capsys.readouterr().err
    assert main(["compare", str(a), "--frobnicate"]) == 2
    assert "specdec-tui compare --help" in capsys.readouterr().err


def test_cli_compare_subprocess_no_traceback(tmp_path):
    """The real entry point: a foreign report.json → one paragraph, exit 2, no traceback."""
    a = write_run(tmp_path / "a", two_arm_report())
    f = write_run(tmp_path / "f", {"schema": "someone-else/2"})
    r = subprocess.run([sys.executable, "-m", "tui", "compare", str(a), str(f)], capture_output=True, text=True,
                       cwd=REPO, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("specdec-tui: error:") and r.stderr.count("\n") == 1
    assert "not a specdec-tui report" in r.stderr
    r = subprocess.run([sys.executable, "-m", "tui", "compare", str(a), str(a)], capture_output=True, text=True,
                       cwd=REPO, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and "a#2" in r.stdout and max(len(ln) for ln in r.stdout.splitlines()) <= 250


def test_existing_flags_unchanged(capsys):
    """`compare` is dispatched on the first word only; the run flags parse as before."""
    assert main(["--frobnicate"]) == 2
    assert "unrecognized arguments: --frobnicate" in capsys.readouterr().err
    assert main(["--profile", "compare", "--show-commands"]) == 2  # a profile named compare is still a profile
    assert "compare" in capsys.readouterr().err


# -- chat acceptance across vLLM 0.34's chat-template change ---------------------------------------------------

def _chat_run(version: str, skip: bool) -> dict:
    rep = matrix_report(f"/runs/{version}")
    rep["versions"] = {"vllm": version}
    flags = " --skip-chat-template" if skip else ""
    rep["bench_commands"] = {"eagle3-k1": [
        {"workload": "chat", "repeat": 1, "command": "vllm bench serve --backend openai-chat --endpoint "
                                                      f"/v1/chat/completions --dataset-name custom{flags}"},
        {"workload": "sonnet", "repeat": 1, "command": "vllm bench serve --dataset-name custom --skip-chat-template"}]}
    return rep


def test_chat_acceptance_across_the_034_template_change_is_flagged(tmp_path):
    """vLLM 0.34's bench stopped applying the chat template client-side on chat backends
    (vllm/benchmarks/datasets/datasets.py CHAT_TEMPLATE_BACKENDS): a chat bench without --skip-chat-template
    measured other prompts on 0.33 than on 0.34; the app's own (with the flag) sent the same ones."""
    same = [_chat_run("0.33.0", True), _chat_run("0.34.0", True)]
    note = cmp.chat_template_note(same)
    assert note["severity"] == "info" and "0.33.0 and 0.34.0" in note["text"] and "same prompts" in note["text"]
    mixed = [_chat_run("0.33.0", False), _chat_run("0.34.0", True)]
    note = cmp.chat_template_note(mixed)
    assert note["severity"] == "warning" and "templated twice" in note["text"] and "not the same quantity" in note["text"]
    assert cmp.chat_template_note([_chat_run("0.33.0", False), _chat_run("0.32.0", False)]) is None  # one side only
    assert cmp.chat_template_note([matrix_report(), _chat_run("0.34.0", False)]) is None  # no version on one side
    doc = cmp.compare_json(mixed)
    assert doc["notes"] == [cmp.chat_template_note(mixed)]
    a, b = write_run(tmp_path / "a", mixed[0]), write_run(tmp_path / "b", mixed[1])
    r = subprocess.run([sys.executable, "-m", "tui", "compare", "--headless", str(a), str(b)], capture_output=True,
                       text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0 and "warning: Acceptance over chat is compared across vLLM 0.33.0 and 0.34.0" in \
        " ".join(r.stdout.split()), r.stdout[-2000:]


def test_the_matrix_flags_chat_acceptance_mixed_across_the_034_template_change():
    """A continued run whose chat repeats ran on vLLM 0.33 and then 0.34 (the same rule as compare's note): the matrix
    carries the note for the chat workload only, as a warning where a bench ran without --skip-chat-template."""
    from tui.core.results import stats as st

    def rep(t, version, chat, skip=True):
        cmd = ("vllm bench serve --backend openai-chat --endpoint /v1/chat/completions" if chat else
               "vllm bench serve --backend vllm") + (" --skip-chat-template" if skip else "")
        return {"output_throughput": t, "vllm_version": version, "command": cmd}

    arms = [{"id": "baseline", "kind": "baseline", "title": "Baseline"},
            {"id": "eagle3-k1", "kind": "eagle3", "title": "EAGLE3 k=1", "num_speculative_tokens": 1,
             "method": "eagle3"}]

    def facts(skip):
        return {a["id"]: {"repeats": {"chat": [rep(100.0, "0.33.0", True, skip), rep(101.0, "0.34.0", True, skip)],
                                      "sonnet": [rep(100.0, "0.33.0", False), rep(99.0, "0.34.0", False)]}}
                for a in arms}

    m = st.build_matrix(arms, facts(True), ["chat", "sonnet"])
    assert list(m["notes"]) == ["chat"] and "0.33.0 and 0.34.0" in m["notes"]["chat"][0]
    assert "same prompts" in m["notes"]["chat"][0]
    m = st.build_matrix(arms, facts(False), ["chat", "sonnet"])
    assert "templated twice" in m["notes"]["chat"][0]
    one_side = {a["id"]: {"repeats": {"chat": [rep(100.0, "0.34.0", True), rep(101.0, "0.34.1", True)]}} for a in arms}
    assert st.build_matrix(arms, one_side, ["chat"])["notes"] == {}
