"""The tutorial's Step 3 as a matrix, end to end on the simulator (a subprocess, real uvicorn servers, the stand-in
platform): arms as steps, repeats per workload, the report's matrix against the result files it was computed
from, continuing an interrupted run, --expect gates and parallel launches on disjoint NeuronCore ranges.

No assertion depends on how fast the machine is: every number checked is recomputed here from the files the
benchmarks wrote (the recommendation follows them, whatever they are)."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from tui.core.results import selection as sel

from e2e_util import FAST_SIM, free_port, load_report, run_cli
from tui.core.run.engine import parse_steps
from tui.core.profile.model import ProfileError, load_profile

TUNE_FAST = dict(FAST_SIM, **{"benchmark.num_prompts": 6, "benchmark.output_len": 32})


def tune_variant(tmp_path: Path, name: str = "tune-fast", **updates: Any) -> Path:
    values: dict[str, Any] = dict(TUNE_FAST)
    values.update({"server.port": free_port(), "name": name, "tune.num_speculative_tokens": [1, 2],
                   "tune.repeats": 2, "tune.workloads": ["sonnet", "chat"], "tune.probe_prompts": 3,
                   "tune.adaptive": False})  # a fixed matrix unless a test races (test_adaptive_race_*)
    values.update({k.replace("__", "."): v for k, v in updates.items()})
    prof = load_profile("tune-demo").with_values(values)
    path = tmp_path / f"{name}.toml"
    path.write_text(prof.to_toml())
    return path


def result(run_dir: Path, arm: str, workload: str, r: int) -> dict[str, Any]:
    return json.loads((run_dir / f"{arm}.{workload}.r{r}.json").read_text())


def test_tune_profiles_plan_a_step_per_arm():
    prof = load_profile("tune-demo")
    assert parse_steps(None, prof) == ["env", "checkpoints", "dataset", "baseline", "eagle3-k1", "eagle3-k2",
                                       "eagle3-k3", "race", "results"]  # race: tune.adaptive's second round
    fixed = prof.with_values({"tune.adaptive": False})
    assert "race" not in parse_steps(None, fixed)
    assert parse_steps("eagle3-k2,baseline", prof) == ["baseline", "eagle3-k2"]
    with pytest.raises(ValueError, match="eagle3-k9"):
        parse_steps("eagle3-k9", prof)
    # The tutorial profile keeps its two arms.
    assert parse_steps(None, load_profile("gpt-oss-120b-eagle3-trn2"))[3:5] == ["baseline", "eagle3"]


@pytest.mark.parametrize("snippet, needle", [
    ('[tune]\nnum_speculative_tokens = [1, 1]\n', "tune.num_speculative_tokens"),
    ('[tune]\nworkloads = ["poems"]\n', "tune.workloads"),
    ('[tune]\nworkloads = ["own"]\n', "tune.prompts_file is empty"),
    ('[tune]\nrepeats = 0\n', "tune.repeats"),
    ('[tune.drafts.Bad-Name]\nmodel = "x/y"\n', "tune.drafts.Bad-Name"),
    ('[tune.drafts.other]\nmodel = "x/y"\nmethod = "medusa"\n', "tune.drafts.other.method"),
])
def test_bad_tune_tables_name_the_key(tmp_path: Path, snippet: str, needle: str):
    path = tmp_path / "t.toml"
    path.write_text('extends = "demo"\nname = "t"\n' + snippet)
    with pytest.raises(ProfileError) as exc:
        load_profile(str(path))
    assert needle in str(exc.value)


def test_tune_matrix_end_to_end(tmp_path: Path):
    prof = tune_variant(tmp_path)
    run_dir = tmp_path / "run"
    out = run_cli(tmp_path, "--profile", str(prof), "--headless", "--json", "--run-dir", str(run_dir), timeout=600)
    rep = json.loads(out.stdout)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    m = rep["matrix"]
    arms = [a["id"] for a in m["arms"]]
    assert arms == ["baseline", "eagle3-k1", "eagle3-k2"]
    assert m["workloads"] == ["sonnet", "chat"]
    for arm in arms:
        for wl in ("sonnet", "chat"):
            cell = m["cells"][arm][wl]
            files = [result(run_dir, arm, wl, r) for r in (1, 2)]
            values = [f["output_throughput"] for f in files]
            assert cell["repeats"] == 2
            assert cell["output_throughput"]["values"] == pytest.approx(values)
            assert cell["output_throughput"]["mean"] == pytest.approx(statistics.mean(values))
            lo, hi = cell["output_throughput"]["ci95"]
            assert lo <= statistics.mean(values) <= hi
            assert cell["median_tpot_ms"] == pytest.approx(statistics.mean(f["median_tpot_ms"] for f in files), abs=1e-3)
            if arm == "baseline":
                continue
            base = [result(run_dir, "baseline", wl, r)["output_throughput"] for r in (1, 2)]
            assert cell["speedup"]["ratio"] == pytest.approx(statistics.mean(values) / statistics.mean(base), rel=1e-3)
            # Acceptance is the servers' own (pooled /metrics deltas; the per-position marginals add up to AL).
            assert 0 <= cell["acceptance_rate"] <= 100
            assert cell["al_check"]["consistent"] is True
            # The probe: the same 3 prompts on the baseline and this arm, compared prompt by prompt.
            probe = json.loads((run_dir / f"{arm}.{wl}.probe.json").read_text())
            bprobe = json.loads((run_dir / f"baseline.{wl}.probe.json").read_text())
            same = sum(a["text"] == b["text"] for a, b in zip(probe["requests"], bprobe["requests"]))
            assert cell["lossless"]["prompts"] == 3 and cell["lossless"]["identical"] == same
            # Per-request spec-decode metrics (the simulator plays vLLM 0.29, which has them): the probe's own.
            specs = [r["spec"] for r in probe["requests"]]
            assert all(x is not None for x in specs) and cell["per_request"]["n"] == 3
            assert cell["per_request"]["mean_acceptance_length"] == pytest.approx(
                statistics.mean(x["mean_acceptance_length"] for x in specs), abs=1e-3)
            assert all(r["spec"] is None for r in bprobe["requests"])  # never on the baseline
            assert probe["endpoint"] == ("/v1/chat/completions" if wl == "chat" else "/v1/completions")
    # Repeats draw different prompts (issue 15): each repeat's bench ran with its own --seed, and the files of
    # the repeats differ in throughput and, on the speculative arms, in acceptance.
    benches = [c["argv"] for c in json.loads((run_dir / "commands.json").read_text())["commands"]
               if c["role"] == "bench"]
    for arm in arms:
        for wl in ("sonnet", "chat"):
            mine = [a for a in benches if any(x.endswith(f"{arm}.{wl}.r1.json") or x.endswith(f"{arm}.{wl}.r2.json")
                                              for x in a)]
            assert len(mine) == 2, (arm, wl, mine)
            assert len({a[a.index("--seed") + 1] for a in mine}) == 2, (arm, wl)
            files = [result(run_dir, arm, wl, r) for r in (1, 2)]
            assert files[0]["output_throughput"] != files[1]["output_throughput"], (arm, wl)
            if arm != "baseline":
                assert files[0]["spec_decode_acceptance_rate"] != files[1]["spec_decode_acceptance_rate"], (arm, wl)
    assert all("prompt sampling" in m["coverage"][wl] for wl in ("sonnet", "chat")), m["coverage"]
    # k = 2's acceptance length predicted for k' = 1 from its own per-position marginals.
    k2 = m["cells"]["eagle3-k2"]["sonnet"]
    marg = k2["per_position"]["marginal"]
    assert k2["predicted_al"]["1"] == pytest.approx(1 + marg[0] / 100, abs=1e-3)
    # The recommendation follows the numbers in the files (issue 29): the family-level decision over every
    # configuration's repeats, recomputed here from the result files with the engine's selection.decide; first-
    # position acceptance < 30 % on every arm: stop tuning.
    for wl in ("sonnet", "chat"):
        rec = m["recommendation"][wl]
        spec = ("eagle3-k1", "eagle3-k2")
        if rec["stop_tuning"]:
            assert rec["verdict"] == "stop_tuning"
            assert all(m["cells"][a][wl]["per_position"]["marginal"][0] < 30 for a in spec)
            continue
        order = ["baseline", *spec]
        race = sel.decide({a: [result(run_dir, a, wl, r)["output_throughput"] for r in (1, 2)] for a in order}, order)
        assert rec["selection"]["contenders"] == list(race.contenders)
        if race.settled:
            assert rec["verdict"] == ("keep_baseline" if race.pick == "baseline" else "pays") and rec["arm"] == race.pick
        else:
            assert rec["verdict"] == "not_proven" and rec["arm"] is None and rec["candidate"] == race.preferred
    # Every arm in report.md and summary.csv (one row per arm and workload).
    md = (run_dir / "report.md").read_text()
    assert md.index("## Verdict") < md.index("## Step 3: recommendation per workload") < md.index("### Full matrix")
    rows = list(csv.DictReader((run_dir / "summary.csv").open()))
    got = {(r["step"], r["workload"]) for r in rows if r["workload"]}
    assert got == {(a, w) for a in arms for w in ("sonnet", "chat")}
    assert rep["metrics"]["baseline_tok_s"] is not None
    # The chat workload went through the chat endpoint: the bench commands say so.
    assert "--backend openai-chat" in out.stderr and "--endpoint /v1/chat/completions" in out.stderr


def test_adaptive_race_relaunches_only_the_configurations_still_in_it_and_a_continued_run_keeps_it(tmp_path: Path):
    """tune.adaptive: after the first round (2 repeats), the race step relaunches the configurations still in the
    race on some key up to tune.max_repeats (3) and no other; the report decides over both rounds with two looks;
    the same --run-dir again plans nothing new and launches nothing."""
    prof = tune_variant(tmp_path, name="tune-race", **{"tune.workloads": ["sonnet"], "tune.probe_prompts": 0,
                                                       "tune.adaptive": True, "tune.max_repeats": 3, "tune.confidence": 0.6,
                                                       # the tutorial's token timing and a steady host: arms close
                                                       # enough to race (FAST_SIM's 10x tokens make the baseline win
                                                       # at the first look)
                                                       "simulation.token_time_scale": 1.0,
                                                       "simulation.run_spread": 0.03})
    run_dir = tmp_path / "run"
    out = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run_dir), timeout=900)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    state = json.loads((run_dir / "state.json").read_text())
    race_facts = state["steps"]["race"]["facts"]
    plan = race_facts["keys"]["sonnet"]
    more = set(plan["more"])
    assert set(race_facts["relaunched"]) == more
    for arm in ("baseline", "eagle3-k1", "eagle3-k2"):
        assert (run_dir / f"{arm}.sonnet.r3.json").is_file() == (arm in more), arm
        n = len(state["steps"][arm]["facts"]["repeats"]["sonnet"])
        assert n == (3 if arm in more else 2), arm
    rep = load_report(run_dir)
    s = rep["matrix"]["recommendation"]["sonnet"]["selection"]
    assert s["looks"] == 2 and {a: s["repeats"][a] for a in s["repeats"]} == {
        a: (3 if a in more else 2) for a in ("baseline", "eagle3-k1", "eagle3-k2")}
    assert set(plan["race"]["eliminated"]) <= set(s["eliminated"])  # the first look's eliminations stand
    logs = {a: (run_dir / f"{a}.serve.log").stat().st_mtime_ns for a in ("baseline", "eagle3-k1", "eagle3-k2")}
    again = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run_dir), timeout=600)
    assert again.returncode in (0, 1), again.stderr[-3000:]
    assert {a: (run_dir / f"{a}.serve.log").stat().st_mtime_ns for a in logs} == logs  # nothing launched again
    assert load_report(run_dir)["matrix"]["recommendation"]["sonnet"]["selection"]["repeats"] == s["repeats"]


def test_tune_run_continues_where_it_stopped(tmp_path: Path):
    prof = tune_variant(tmp_path, name="tune-resume", **{"tune.workloads": ["sonnet"], "tune.repeats": 1,
                                                        "tune.probe_prompts": 0})
    run_dir = tmp_path / "run"
    first = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run_dir),
                    "--steps", "env,checkpoints,dataset,baseline,eagle3-k1", timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    log = run_dir / "eagle3-k1.serve.log"
    before = log.stat().st_mtime_ns
    second = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run_dir), timeout=600)
    assert second.returncode in (0, 1), second.stderr[-3000:]
    assert "baseline, eagle3-k1 finished there earlier with the same settings and are kept" in second.stderr
    assert log.stat().st_mtime_ns == before  # not launched again
    rep = load_report(run_dir)
    assert [a["id"] for a in rep["matrix"]["arms"]] == ["baseline", "eagle3-k1", "eagle3-k2"]
    assert rep["matrix"]["cells"]["eagle3-k1"]["sonnet"]["repeats"] == 1
    assert (run_dir / "eagle3-k2.sonnet.r1.json").is_file()


def test_expect_gates(tmp_path: Path):
    prof = tmp_path / "d.toml"
    prof.write_text(load_profile("demo").with_values(dict(FAST_SIM, **{"server.port": free_port(), "name": "d"})).to_toml())
    run_dir = tmp_path / "run"
    bad = run_cli(tmp_path, "--profile", str(prof), "--headless", "--expect", "speedup>>1")
    assert bad.returncode == 2 and "speedup>>1" in bad.stderr and "Traceback" not in bad.stderr
    out = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run_dir),
                  "--expect", "acceptance>=0", "--expect", "acceptance>=101")
    assert out.returncode == 1
    assert "acceptance>=101" in out.stderr and "expectation failed" in out.stderr
    rep = load_report(run_dir)
    assert rep["metrics"]["acceptance"] == pytest.approx(rep["runs"]["eagle3"]["acceptance_rate"])


def test_parallel_arms_launch_on_disjoint_core_ranges(tmp_path: Path):
    prof = tune_variant(tmp_path, name="tune-par", **{"tune.workloads": ["sonnet"], "tune.repeats": 1,
                                                     "tune.probe_prompts": 0, "tune.parallel": True})
    run_dir = tmp_path / "run"
    out = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run_dir), timeout=600)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    assert "tune.parallel: 3 of 3 arm(s) at once" in out.stderr
    state = json.loads((run_dir / "state.json").read_text())
    placed = {sid: state["steps"][sid]["facts"]["placement"] for sid in ("baseline", "eagle3-k1", "eagle3-k2")}
    ranges = [p["neuron_visible_devices"] for p in placed.values()]
    ports = [p["port"] for p in placed.values()]
    assert ranges == ["0-15", "16-31", "32-47"] and len(set(ports)) == 3
    for sid, p in placed.items():
        cmd = (run_dir / f"{sid}.command.sh").read_text()
        assert f"NEURON_VISIBLE_DEVICES={p['neuron_visible_devices']}" in cmd and f"--port {p['port']}" in cmd
    rep = load_report(run_dir)
    assert all(rep["matrix"]["cells"][a]["sonnet"]["repeats"] == 1 for a in placed)


def test_own_prompts_workload(tmp_path: Path):
    """tune.prompts_file: the operator's own prompts, benchmarked and probed like the bundled ones; a bad line
    stops the arm with the file, the line and the fix."""
    own = tmp_path / "mine.jsonl"
    own.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"Explain item {i} briefly."}]}) + "\n"
                           for i in range(6)))
    prof = tune_variant(tmp_path, name="tune-own", **{"tune.workloads": ["own"], "tune.repeats": 1,
                                                     "tune.num_speculative_tokens": [1], "tune.probe_prompts": 2,
                                                     "tune.prompts_file": str(own)})
    run_dir = tmp_path / "run"
    out = run_cli(tmp_path, "--profile", str(prof), "--headless", "--json", "--run-dir", str(run_dir), timeout=600)
    rep = json.loads(out.stdout)
    assert rep["matrix"]["workloads"] == ["own"], out.stderr[-3000:]
    probe = json.loads((run_dir / "eagle3-k1.own.probe.json").read_text())
    assert probe["endpoint"] == "/v1/chat/completions" and len(probe["requests"]) == 2
    rows = [json.loads(x) for x in (run_dir / "own.custom.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and "Explain item 0 briefly." in rows[0]["prompt"]
    assert rep["matrix"]["cells"]["eagle3-k1"]["own"]["repeats"] == 1
    own.write_text('{"messages": [{"role": "user", "content": "ok"}]}\n{"prompt": 3}\n')
    bad = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(tmp_path / "run2"), timeout=600)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "mine.jsonl" in bad.stderr and "line 2" in bad.stderr
