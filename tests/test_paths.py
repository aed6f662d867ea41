"""Paths resolved once: the run directory and every relative path of a profile become absolute at start, so a
child gets absolute paths whatever its working directory (the sonnet builder and the bench run in the run
directory). The reported failure: from a fresh working directory with the default run directory, a vLLM >= 0.32
run wrote its custom JSONL to `specdec-runs/<ts>/specdec-runs/<ts>/sonnet.custom.jsonl` and the baseline failed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from e2e_util import demo_variant, run_cli

from tui.core.profile.model import load_profile, with_absolute_paths


def test_relative_profile_paths_become_absolute(tmp_path: Path) -> None:
    prof = load_profile("tune-demo").with_values({
        "dataset.path": "data/sonnet.txt",
        "models.target": "./models/target",
        "speculative.model": "../drafts/eagle",
        "models.prepare": ["{python}", "./make_models.py", "--out", "./models", "plain"],
        "server.command": ["./bin/vllm"],
        "tune.workloads": ["sonnet", "own"],
        "tune.prompts_file": "prompts.jsonl",
    })
    cwd = str(tmp_path / "work")
    out = with_absolute_paths(prof, cwd)
    assert out.data["dataset"]["path"] == os.path.join(cwd, "data/sonnet.txt")
    assert out.data["models"]["target"] == os.path.join(cwd, "models/target")
    assert out.data["speculative"]["model"] == str(tmp_path / "drafts" / "eagle")
    assert out.data["models"]["prepare"] == ["{python}", os.path.join(cwd, "make_models.py"), "--out",
                                             os.path.join(cwd, "models"), "plain"]
    assert out.data["server"]["command"] == [os.path.join(cwd, "bin/vllm")]
    assert out.data["tune"]["prompts_file"] == os.path.join(cwd, "prompts.jsonl")
    # repo ids, placeholders and absolute paths are kept; a second pass changes nothing
    assert out.data["models"]["draft"] == prof.data["models"]["draft"]
    assert with_absolute_paths(out, str(tmp_path / "elsewhere")).data == out.data
    cpu = load_profile("cpu")
    assert with_absolute_paths(cpu, cwd) is cpu  # only placeholders there


def test_default_run_dir_from_fresh_cwd_on_vllm_032(tmp_path: Path) -> None:
    """The demo playing vLLM 0.32 (custom JSONL built from sonnet) from a fresh working directory, without
    --run-dir: the run completes and its files are where the output says."""
    work = tmp_path / "fresh"
    work.mkdir()
    prof = demo_variant(tmp_path, name="demo032", **{"simulation.vllm_version": "0.32.0",
                                                      "benchmark.num_prompts": 4})
    cp = run_cli(work, "--profile", str(prof), "--headless", timeout=300)
    # exit 1 only for the results step's verdict, which follows the wall clock (checked against the files below)
    assert cp.returncode in (0, 1), cp.stdout[-3000:] + cp.stderr[-2000:]
    runs = list((work / "specdec-runs").iterdir())
    assert len(runs) == 1
    run = runs[0]
    assert not (run / "specdec-runs").exists()  # nothing nested under the run directory
    assert (run / "sonnet.custom.jsonl").is_file()
    said = "".join((cp.stdout + cp.stderr).split())  # rich wraps long paths
    assert str(run / "report.json") in said  # the report named in the output, absolute
    report = json.loads((run / "report.json").read_text())
    statuses = {s["id"]: s["status"] for s in report["steps"]}
    assert statuses["baseline"] == "passed" and statuses["eagle3"] == "passed", statuses
    for name in ("baseline.json", "eagle3.json"):
        assert json.loads((run / name).read_text())["completed"] == 4
    ratio = (json.loads((run / "eagle3.json").read_text())["output_throughput"]
             / json.loads((run / "baseline.json").read_text())["output_throughput"])
    assert report["exit_code"] == cp.returncode == (0 if ratio > 1.0 else 1)
    assert all(st in ("passed", "warned") for sid, st in statuses.items() if sid != "results"), statuses
