"""Continuing a run checks the files (state.json records each result file's sha256 and size), and report.md is a
record a reviewer can trust alone: every benchmark command as it ran, the host, the smoke and lossless checks,
every launch.

End to end on the simulator (a subprocess, real uvicorn servers, the stand-in platform). Every number checked is
read back from the files the run wrote; nothing depends on how fast the machine is."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import Any

from e2e_util import demo_variant, load_report, run_cli
from test_tune import tune_variant
from tui.core.store.rundir import file_digest, result_file_problem


def _state(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "state.json").read_text())


def _launched_argv(log: Path) -> list[str]:
    """The argv the supervisor launched, from the header it writes first in the process's log."""
    head = log.read_text().splitlines()[0]
    return head.split(" $ ", 1)[1].split()


def _argv_of(command: str) -> list[str]:
    return shlex.split(command.replace("\\\n", " "))


def _check_bench_commands(run_dir: Path, rep: dict[str, Any], md: str, recorded: dict[str, list[dict[str, Any]]]):
    """report.md prints every benchmark exactly as recorded, and that is what the supervisor launched."""
    assert "## Benchmark commands (as run)" in md
    n = 0
    for sid, recs in recorded.items():
        got = [row["command"] for row in rep["bench_commands"][sid]]
        assert got == [r["command"] for r in recs], sid
        for rec in recs:
            assert rec["command"] in md
            assert _argv_of(rec["command"]) == rec["argv"]
            stem = Path(rec["result_file"]).name[:-len(".json")]
            assert _launched_argv(run_dir / f"{stem}.bench.log") == rec["argv"]
            n += 1
    assert n > 0


def _check_host_and_checks(run_dir: Path, rep: dict[str, Any], md: str, arms: list[str]):
    env = json.loads((run_dir / "env.json").read_text())
    instance = env["stored"]["instance_type"]
    assert instance == "trn2.48xlarge"  # the stand-in platform's DMI product name
    assert rep["host"]["instance_type"] == instance
    assert "## Host" in md and f"| instance type | {instance} |" in md
    assert rep["host"]["platform"] == "neuron" and rep["host"]["simulated"] is True
    names = {f["name"] for f in rep["host"]["facts"]}
    assert {"instance type", "Neuron SDK", "vLLM"} <= names
    sdk = next(f for f in env["facts"] if f["name"] == "Neuron SDK")["value"]
    assert f"| Neuron SDK | {sdk} |" in md
    assert "## Smoke and lossless checks" in md
    for sid in arms:
        smoke = json.loads((run_dir / f"{sid}.smoke.json").read_text())
        c = rep["checks"][sid]
        assert c["smoke_passed"] == smoke["passed"] and c["smoke_text"] == smoke["text"]
        if sid != "baseline":
            base = json.loads((run_dir / "baseline.smoke.json").read_text())["text"]
            assert c["matches_baseline"] == (smoke["text"] == base)
            section = md.split("## Smoke and lossless checks", 1)[1]
            row = next(ln for ln in section.splitlines() if ln.startswith(f"| {rep['step_titles'][sid]} |"))
            assert ("| same |" if c["matches_baseline"] else "| differs |") in row
    launches = {a["id"]: a for a in rep["launches"]}
    for sid in arms:
        startup = _state(run_dir)["steps"][sid]["facts"]["startup"]
        assert launches[sid]["startup_s"] == startup["seconds"]


def test_result_file_problem(tmp_path: Path):
    f = tmp_path / "a.json"
    f.write_text('{"output_throughput": 10.0}')
    rec = file_digest(f)
    assert rec == {"result_sha256": hashlib.sha256(f.read_bytes()).hexdigest(), "result_bytes": f.stat().st_size}
    assert result_file_problem(tmp_path, "a.json", rec) is None
    assert result_file_problem(tmp_path, "b.json", rec) == "is missing"
    assert "no checksum" in result_file_problem(tmp_path, "a.json", {"output_throughput": 10.0})
    f.write_text('{"output_throughput": 11.0}')  # same size, other bytes
    assert "sha256 differs" in result_file_problem(tmp_path, "a.json", rec)
    f.write_text('{"output_')
    assert "changed" in result_file_problem(tmp_path, "a.json", rec) and "bytes" in result_file_problem(
        tmp_path, "a.json", rec)


def test_continued_tune_run_reruns_missing_and_changed_result_files(tmp_path: Path):
    prof = tune_variant(tmp_path, name="tune-files", **{"tune.workloads": ["sonnet"], "tune.repeats": 2,
                                                       "tune.probe_prompts": 2})
    run_dir = tmp_path / "run"
    first = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run_dir), timeout=900)
    assert first.returncode in (0, 1), first.stderr[-3000:]
    arms = ["baseline", "eagle3-k1", "eagle3-k2"]
    state = _state(run_dir)
    for sid in arms:  # state.json records every result file's sha256 and size
        for r, rec in enumerate(state["steps"][sid]["facts"]["repeats"]["sonnet"], start=1):
            f = run_dir / f"{sid}.sonnet.r{r}.json"
            assert rec["result_sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
            assert rec["result_bytes"] == f.stat().st_size
    (run_dir / "eagle3-k2.sonnet.r2.json").unlink()
    truncated = run_dir / "eagle3-k1.sonnet.r1.json"
    truncated.write_bytes(truncated.read_bytes()[:40])
    kept_file = run_dir / "eagle3-k1.sonnet.r2.json"
    kept_mtime = kept_file.stat().st_mtime_ns
    base_log = run_dir / "baseline.serve.log"
    base_mtime = base_log.stat().st_mtime_ns

    second = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run_dir), timeout=900)
    assert second.returncode in (0, 1), second.stderr[-3000:]
    err = re.sub(r"\s+", " ", second.stderr)
    assert "eagle3-k2: sonnet repeat 2 result file eagle3-k2.sonnet.r2.json is missing → running it again" in err
    assert ("eagle3-k1: sonnet repeat 1 result file eagle3-k1.sonnet.r1.json was changed since the run recorded it"
            in err)
    assert "baseline finished there earlier with the same settings and are kept" in err
    assert "numbers are read back from state.json" not in err
    assert base_log.stat().st_mtime_ns == base_mtime  # the baseline was not launched again
    assert kept_file.stat().st_mtime_ns == kept_mtime  # only the bad repeats were benchmarked again
    assert (run_dir / "eagle3-k2.sonnet.r2.json").is_file()
    # The report follows the files as they are now, and state.json records them again.
    rep = load_report(run_dir)
    state = _state(run_dir)
    for sid in arms:
        values = [json.loads((run_dir / f"{sid}.sonnet.r{r}.json").read_text())["output_throughput"] for r in (1, 2)]
        assert rep["matrix"]["cells"][sid]["sonnet"]["output_throughput"]["values"] == values
        for r, rec in enumerate(state["steps"][sid]["facts"]["repeats"]["sonnet"], start=1):
            assert result_file_problem(run_dir, f"{sid}.sonnet.r{r}.json", rec) is None
    # report.md: the benchmarks as run (the kept repeat's from the first run, its log untouched), host, checks.
    md = (run_dir / "report.md").read_text()
    recorded = {sid: state["steps"][sid]["facts"]["repeats"]["sonnet"] for sid in arms}
    _check_bench_commands(run_dir, rep, md, recorded)
    _check_host_and_checks(run_dir, rep, md, arms)
    for sid in ("eagle3-k1", "eagle3-k2"):
        probe = json.loads((run_dir / f"{sid}.sonnet.probe.json").read_text())
        bprobe = json.loads((run_dir / "baseline.sonnet.probe.json").read_text())
        same = sum(a["text"] == b["text"] for a, b in zip(probe["requests"], bprobe["requests"]))
        assert rep["checks"][sid]["lossless"]["sonnet"] == {"identical": same, "prompts": 2}


def test_two_arm_report_and_results_step_check_files(tmp_path: Path):
    secret = "s3cr3t-" + "x" * 12
    prof = demo_variant(tmp_path, "files2", benchmark__num_prompts=4, **{"server.env": {"DEMO_API_KEY": secret}})
    run_dir = tmp_path / "run"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run_dir))
    assert r.returncode in (0, 1), r.stderr[-3000:]
    rep = load_report(run_dir)
    md = (run_dir / "report.md").read_text()
    state = _state(run_dir)
    recorded = {sid: [state["steps"][sid]["facts"]["bench"]] for sid in ("baseline", "eagle3")}
    _check_bench_commands(run_dir, rep, md, recorded)
    _check_host_and_checks(run_dir, rep, md, ["baseline", "eagle3"])
    assert "## Launches" in md
    for name in ("report.md", "report.json", "state.json", "baseline.command.sh"):
        assert secret not in (run_dir / name).read_text(), name

    # The results step alone, after baseline.json went missing: named, and the baseline is run again.
    (run_dir / "baseline.json").unlink()
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run_dir), "--steps", "results")
    assert r.returncode in (0, 1), r.stderr[-3000:]
    err = re.sub(r"\s+", " ", r.stderr)
    assert "baseline: result file baseline.json is missing → running the step again" in err
    rep = load_report(run_dir)
    assert rep["requested_steps"] == ["baseline", "results"]
    bj = json.loads((run_dir / "baseline.json").read_text())
    assert rep["runs"]["baseline"]["output_throughput"] == bj["output_throughput"]
    ej = json.loads((run_dir / "eagle3.json").read_text())
    assert rep["runs"]["eagle3"]["output_throughput"] == ej["output_throughput"]
