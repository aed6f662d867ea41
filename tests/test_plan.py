"""tui.core.plan.build: seeds per repeat, the custom-dataset pool, the per-request flag, and the record of what ran."""

from __future__ import annotations

import json

import pytest

from tui.core.plan import build as plan
from tui.core.plan.commands import Placeholders
from tui.core.profile.model import ProfileError, load_profile, load_profile_text


def _tune(**values):
    return load_profile("tune").with_values(values)


def _flag(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_repeats_get_their_own_seed_by_default():
    prof = _tune()
    assert [plan.bench_seed(prof, r) for r in (1, 2, 3)] == [0, 1, 2]
    ph = Placeholders(run_dir="RUN")
    argvs = [c.argv for c in plan.build_plan(prof, "RUN", "0.29.0", ph=ph).commands
             if c.role == "bench" and not c.title.startswith("Race")]
    assert len(argvs) == 4 * 3  # baseline + k=1,2,3, three repeats each (the race's repeats come after them)
    assert [_flag(a, "--seed") for a in argvs[:3]] == ["0", "1", "2"]
    race = [c.argv for c in plan.build_plan(prof, "RUN", "0.29.0", ph=ph).commands
            if c.role == "bench" and c.title.startswith("Race")]
    n = prof.tune.max_repeats - 3
    assert len(race) == 4 * n and [_flag(a, "--seed") for a in race[:n]] == [str(r - 1) for r in range(4, 4 + n)]


def test_a_profile_key_keeps_one_seed():
    prof = _tune(**{"tune.vary_seed": False, "tune.seed": 7})
    assert [plan.bench_seed(prof, r) for r in (1, 2, 3)] == [7, 7, 7]
    ph = Placeholders(run_dir="RUN")
    benches = [c.argv for c in plan.build_plan(prof, "RUN", "0.32.0", ph=ph, vllm_python=["py"]).commands
               if c.role == "bench"]
    assert {_flag(a, "--seed") for a in benches} == {"7"}
    assert all("--disable-shuffle" in a for a in benches)  # the file's order, as before


def test_varying_seeds_shuffle_a_larger_custom_pool():
    """vLLM >= 0.32 (sonnet as a custom JSONL): the JSONL holds num_prompts × repeats prompts and the bench
    shuffles it with its seed (no --disable-shuffle), so each repeat samples different prompts."""
    prof = _tune()
    ph = Placeholders(run_dir="RUN")
    p = plan.build_plan(prof, "RUN", "0.32.0", ph=ph, vllm_python=["py"])
    build = next(c for c in p.commands if c.role == "tool")
    assert _flag(list(build.argv), "--num-prompts") == str(prof.benchmark.num_prompts * 3)
    benches = [list(c.argv) for c in p.commands if c.role == "bench"]
    assert all("--disable-shuffle" not in a for a in benches)
    assert all(_flag(a, "--num-prompts") == str(prof.benchmark.num_prompts) for a in benches)


def test_two_arm_runs_keep_the_tutorials_bench():
    prof = load_profile("gpt-oss-120b-eagle3-trn2")
    assert plan.bench_seed(prof, 1) is None and plan.custom_pool_size(prof) == prof.benchmark.num_prompts
    ph = Placeholders(run_dir="RUN")
    benches = [list(c.argv) for c in plan.build_plan(prof, "RUN", "0.32.0", ph=ph, vllm_python=["py"]).commands
               if c.role == "bench"]
    assert len(benches) == 2 and all("--seed" not in a and "--disable-shuffle" in a for a in benches)


@pytest.mark.parametrize("version, has", [("0.28.0", False), ("0.29.0", True), ("0.33.0rc1", True), (None, False)])
def test_per_request_metrics_on_tune_arms_only(version, has):
    ph = Placeholders(run_dir="RUN")
    p = plan.build_plan(_tune(), "RUN", version, ph=ph, vllm_python=["py"])
    for c in p.of("baseline", "serve") + p.of("eagle3-k2", "serve"):
        want = has and c.step != "baseline"
        assert ("--per-request-spec-decode-metrics" in c.argv) is want, (c.step, version)
    two = plan.build_plan(load_profile("gpt-oss-120b-eagle3-trn2"), "RUN", version, ph=ph, vllm_python=["py"])
    assert all("--per-request-spec-decode-metrics" not in c.argv for c in two.commands)


@pytest.mark.parametrize("bad, what", [("seed = -1", "tune.seed"), ('vary_seed = "no"', "tune.vary_seed")])
def test_seed_keys_are_validated(bad, what):
    text = load_profile("tune").to_toml().replace("[tune]\n", f"[tune]\n{bad}\n", 1)
    with pytest.raises(ProfileError, match=what.replace(".", r"\.")):
        load_profile_text(text, "t.toml")


def test_recorded_commands_and_version(tmp_path):
    from tui.core.store.rundir import RunDir

    run = RunDir(tmp_path)
    plan.record_command(tmp_path, "baseline", "serve", ["vllm", "serve", "m"], "vllm serve m", run.write_json)
    plan.record_command(tmp_path, "baseline", "bench", ["vllm", "bench", "serve"], "vllm bench serve", run.write_json)
    assert [r["role"] for r in plan.recorded_commands(tmp_path)] == ["serve", "bench"]
    assert plan.recorded_vllm_version(tmp_path) is None
    (tmp_path / "env.json").write_text(json.dumps({"stored": {"vllm_version": "0.32.0"}}))
    assert plan.recorded_vllm_version(tmp_path) == "0.32.0"
    text = plan.recorded_text(tmp_path)
    assert "vLLM 0.32.0" in text and "vllm serve m" in text and "planned" not in text
    assert plan.recorded_text(tmp_path / "nothing") is None
