"""Step `checkpoints` end to end against the loopback hub (real huggingface_hub, 127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from tui.core.plan.commands import Placeholders
from tui.core.events import Artifact, Diagnosis, Event, Fact
from tui.core.profile.model import profile_from_dict
from tui.core.store.rundir import RunDir
from tui.core.steps import checkpoints
from tui.core.steps.base import StepContext
from tui.sim.hub import GPT_OSS_120B_CONFIG, commit_for, start_hub

TARGET = "openai/gpt-oss-120b"
DRAFT = "RedHatAI/gpt-oss-120b-speculator.eagle3"


def tutorial_profile(draft: str = DRAFT, target: str = TARGET, method: str = "eagle3", overrides: bool = True,
                     simulated: bool = False):
    raw = {
        "models": {"target": target, "draft": draft},
        "server": {
            "hf_overrides": {"quantization_config": {}} if overrides else {},
            "additional_config": {"neuron_config": {
                "quantization": "bf16", "num_batched_tokens_buckets": [512], "num_seqs_buckets": [1],
                "kv_segment_size_buckets": [512], "on_device_sampling_config": {"all_greedy": True}}},
        },
        "speculative": {"method": method, "model": draft, "num_speculative_tokens": 1},
    }
    if simulated:
        raw["simulation"] = {}
    return profile_from_dict(raw)


class Run:
    def __init__(self, ctx: StepContext, events: list[Event], result):
        self.ctx, self.events, self.result = ctx, events, result

    @property
    def facts(self) -> list[Fact]:
        return [e for e in self.events if isinstance(e, Fact)]

    def fact(self, name: str) -> Fact:
        found = [f for f in self.facts if f.name == name]
        assert len(found) == 1, (name, [f.name for f in self.facts])
        return found[0]

    @property
    def failed(self) -> list[Fact]:
        return [f for f in self.facts if f.status == "fail"]

    @property
    def artifact(self) -> dict:
        return json.loads((self.ctx.run.path / "checkpoints.json").read_text())


def run_step(tmp_path: Path, profile, environ: dict[str, str], sim_hub: str = "", timeout_s: float | None = 5.0,
             name: str = "run") -> Run:
    events: list[Event] = []
    ctx = StepContext(profile=profile, run=RunDir(tmp_path / name), emit=events.append,
                      ph=Placeholders(sim_hub=sim_hub, cache_dir=str(tmp_path / "cache")), environ=environ)
    result = asyncio.run(checkpoints.run(ctx, timeout_s=timeout_s))
    return Run(ctx, events, result)


@pytest.fixture(autouse=True)
def roomy_disk(monkeypatch):
    """The disk check must not depend on this machine's free space (1 TB unless a test says otherwise)."""
    monkeypatch.setattr(checkpoints, "disk_free", lambda path: (10**12, Path(path)))


def env_for(hub, tmp_path, **extra) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), **extra}


def assert_readable(run: Run) -> None:
    text = json.dumps([f.__dict__ for f in run.facts])
    assert "Traceback" not in text and 'File "' not in text


# -- the tutorial pair ---------------------------------------------------------------------------------


def test_tutorial_pair_passes_and_is_compatible(hub, tmp_path):
    run = run_step(tmp_path, tutorial_profile(), env_for(hub, tmp_path), hub.url)
    assert run.result.status == "passed", [(f.name, f.status, f.value) for f in run.facts]
    assert run.result.facts["compatible"] is True
    for name in ("target checkpoint", "draft checkpoint", "draft type", "draft verifier", "hidden size",
                 "vocab size", "disk space", "target access", "draft access", "quantization override"):
        assert run.fact(name).status == "pass", name
    assert run.fact("target commit").value == commit_for(TARGET)
    assert run.fact("target quantization").value == "mxfp4"
    t = run.result.facts["target"]
    assert t["commit"] == commit_for(TARGET) and t["gated"] is False and t["private"] is False
    assert 60e9 < t["size_bytes"] < 70e9
    assert t["config"]["hidden_size"] == 2880 and t["config"]["vocab_size"] == 201088
    d = run.result.facts["draft"]
    assert d["config"]["draft_type"] == "eagle3" and d["config"]["verifier"] == TARGET
    assert 1.5e9 < d["size_bytes"] < 1.9e9
    art = run.artifact
    assert art["compatible"] is True and art["target"]["commit"] == commit_for(TARGET)
    assert [f["name"] for f in art["facts"]] == [f.name for f in run.facts]
    assert any(isinstance(e, Artifact) and e.name == "checkpoints.json" for e in run.events)
    assert not any(isinstance(e, Diagnosis) for e in run.events)


def test_offline_uses_the_warm_cache_without_requests(hub, tmp_path):
    env = env_for(hub, tmp_path)
    assert run_step(tmp_path, tutorial_profile(), env, name="online").result.status == "passed"
    hub.clear_requests()
    run = run_step(tmp_path, tutorial_profile(), dict(env, HF_HUB_OFFLINE="1"), name="offline")
    assert not run.failed, [(f.name, f.value) for f in run.failed]
    assert run.result.facts["compatible"] is True
    assert run.fact("hub lookups").status == "info"
    assert hub.requests == []


def test_simulated_run_uses_sim_hub_and_checks_the_disk_like_any_run(hub, tmp_path, monkeypatch):
    # No simulated special case: the stand-in's hub is the endpoint ({sim_hub} when HF_ENDPOINT is unset) and
    # the disk check is the real one (the stand-in pre-fills its own HF cache with sparse placeholders instead).
    monkeypatch.setattr(checkpoints, "disk_free", lambda path: (10**9, Path(path)))
    run = run_step(tmp_path, tutorial_profile(simulated=True), {"HF_HOME": str(tmp_path / "hf")}, hub.url)
    assert run.result.facts["endpoint"] == hub.url
    assert run.fact("disk space").status == "fail"


# -- draft/target compatibility ------------------------------------------------------------------------


def test_eagle1_draft_under_eagle3_fails(hub, tmp_path):
    run = run_step(tmp_path, tutorial_profile("specdec-sim/gpt-oss-120b-speculator.eagle"), env_for(hub, tmp_path))
    assert [f.name for f in run.failed] == ["draft type"]
    f = run.fact("draft type")
    assert "eagle draft" in f.value and "eagle3" in f.value
    assert "acceptance length ≈ 1.0" in f.detail and f.remedy
    assert run.result.facts["compatible"] is False and run.result.status == "failed"
    diags = [e for e in run.events if isinstance(e, Diagnosis)]
    assert [d.id for d in diags] == ["draft-target-mismatch"]
    assert any("draft type" in ev for ev in diags[0].evidence)


def test_eagle3_draft_under_method_eagle_fails(hub, tmp_path):
    run = run_step(tmp_path, tutorial_profile(method="eagle"), env_for(hub, tmp_path))
    assert [f.name for f in run.failed] == ["draft type"]


def test_draft_for_another_verifier_fails(hub, tmp_path):
    run = run_step(tmp_path, tutorial_profile("specdec-sim/gpt-oss-20b-speculator.eagle3"), env_for(hub, tmp_path))
    assert [f.name for f in run.failed] == ["draft verifier"]
    assert "openai/gpt-oss-20b" in run.fact("draft verifier").value
    assert "acceptance" in run.fact("draft verifier").detail


def test_hidden_size_mismatch_fails(hub, tmp_path):
    run = run_step(tmp_path, tutorial_profile("specdec-sim/gpt-oss-120b-speculator.eagle3-h4096"),
                   env_for(hub, tmp_path))
    assert [f.name for f in run.failed] == ["hidden size"]
    assert run.fact("hidden size").value == "draft 4096 ≠ target 2880"


def test_vocab_size_mismatch_fails(hub, tmp_path):
    run = run_step(tmp_path, tutorial_profile("specdec-sim/gpt-oss-120b-speculator.eagle3-vocab128k"),
                   env_for(hub, tmp_path))
    assert [f.name for f in run.failed] == ["vocab size"]
    assert run.fact("vocab size").value == "draft 128256 ≠ target 201088"


def test_llama_draft_fails_verifier_hidden_and_vocab(hub, tmp_path):
    run = run_step(tmp_path, tutorial_profile("specdec-sim/Llama-3.1-8B-Instruct-speculator.eagle3"),
                   env_for(hub, tmp_path))
    assert sorted(f.name for f in run.failed) == ["draft verifier", "hidden size", "vocab size"]
    assert "meta-llama/Llama-3.1-8B-Instruct" in run.fact("draft verifier").value


def test_missing_quantization_override_warns(hub, tmp_path):
    run = run_step(tmp_path, tutorial_profile(overrides=False), env_for(hub, tmp_path))
    f = run.fact("quantization override")
    assert f.status == "warn" and "--hf-overrides" in f.remedy and "quantization_config" in f.remedy
    assert run.result.status == "warned" and not run.failed
    assert [e.id for e in run.events if isinstance(e, Diagnosis)] == ["bf16-checkpoint-not-needed"]


def test_local_target_directory_counts_as_the_verifier(hub, tmp_path):
    local = tmp_path / "models" / "gpt-oss-120b"
    local.mkdir(parents=True)
    (local / "config.json").write_text(json.dumps(GPT_OSS_120B_CONFIG))
    run = run_step(tmp_path, tutorial_profile(target=str(local)), env_for(hub, tmp_path))
    assert run.result.status == "passed", [(f.name, f.value) for f in run.facts if f.status != "pass"]
    assert run.fact("target checkpoint").detail.startswith("local directory")
    assert run.result.facts["target"]["source"] == "local"


def test_verifier_match_rules():
    vm = checkpoints.verifier_match
    assert vm("openai/gpt-oss-120b", "openai/gpt-oss-120b") == "same"
    assert vm("openai/gpt-oss-120b", "/data/models/gpt-oss-120b/") == "same"
    assert vm("/ckpt/gpt-oss-120b", "openai/gpt-oss-120b") == "same"
    assert vm("openai/gpt-oss-120b", "/hf/hub/models--openai--gpt-oss-120b/snapshots/abc") == "same"
    assert vm("openai/gpt-oss-120b", "someone/gpt-oss-120b") == "same-name"
    assert vm("openai/gpt-oss-20b", "openai/gpt-oss-120b") == "different"


# -- hub failures: one readable failing fact each ------------------------------------------------------


def test_unknown_target_repo(hub, tmp_path):
    run = run_step(tmp_path, tutorial_profile(target="openai/gpt-oss-999b"), env_for(hub, tmp_path))
    assert [f.name for f in run.failed] == ["target checkpoint"]
    f = run.failed[0]
    assert "repository not found" in f.value and "openai/gpt-oss-999b" in f.remedy
    assert run.fact("compatibility").status == "info"
    assert_readable(run)


def test_gated_draft(hub, tmp_path):
    profile = tutorial_profile("specdec-sim/gated-speculator.eagle3")
    run = run_step(tmp_path, profile, env_for(hub, tmp_path))
    assert [f.name for f in run.failed] == ["draft checkpoint"]
    f = run.failed[0]
    assert "gated" in f.value and "license" in f.remedy and "HF_TOKEN" in f.remedy
    assert_readable(run)


def test_token_is_used_but_never_written(tmp_path):
    token = "sekrit-Token-Value-4242"  # deliberately not hf_-shaped: must be scrubbed by value
    with start_hub(tokens=[token]) as h:
        profile = tutorial_profile("specdec-sim/gated-speculator.eagle3")
        run = run_step(tmp_path, profile, env_for(h, tmp_path, HF_TOKEN=token))
        assert not run.failed, [(f.name, f.value, f.detail) for f in run.failed]
        assert run.fact("draft access").status == "warn"  # gated: warn with the remedy, but reachable
        assert any(r.authorized for r in h.requests_to("/specdec-sim/gated-speculator.eagle3/resolve/*"))
    written = "\n".join(p.read_text() for p in (tmp_path / "run").iterdir() if p.is_file())
    assert token not in written
    assert token not in repr(run.events) and token not in repr(run.result)
    assert run.artifact["token"] == "set (HF_TOKEN)"


def test_unreachable_endpoint(tmp_path):
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HOME": str(tmp_path / "hf")}
    run = run_step(tmp_path, tutorial_profile(), env)
    assert [f.name for f in run.failed] == ["hub"]
    f = run.failed[0]
    assert "connection refused" in f.value and "HF_ENDPOINT" in f.remedy
    assert_readable(run)


def test_slow_hub_times_out(tmp_path):
    with start_hub(delay=0.5) as slow:
        run = run_step(tmp_path, tutorial_profile(), env_for(slow, tmp_path), timeout_s=0.05)
    assert [f.name for f in run.failed] == ["hub"]
    assert "no answer within 0.05 s" in run.failed[0].value


def test_offline_with_empty_cache(hub, tmp_path):
    run = run_step(tmp_path, tutorial_profile(), env_for(hub, tmp_path, HF_HUB_OFFLINE="1"))
    assert [f.name for f in run.failed] == ["hub"]
    f = run.failed[0]
    assert "offline" in f.value and "HF_HUB_OFFLINE" in f.remedy
    assert hub.requests == []
    assert_readable(run)


def test_not_enough_disk_fails_with_numbers(hub, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "disk_free", lambda path: (20 * 10**9, Path(path)))
    run = run_step(tmp_path, tutorial_profile(), env_for(hub, tmp_path))
    assert [f.name for f in run.failed] == ["disk space"]
    f = run.failed[0]
    assert f.value == "20.0 GB free, 67.0 GB to download"
    assert "HF_HOME" in f.remedy


def test_the_environment_step_words_the_disk_as_this_step_does(hub, tmp_path, monkeypatch):
    """One computation, one unit, the path named: both steps measure the HF cache with sysinfo.free_bytes and word
    it with sysinfo.free_space, so the environment step's "disk (HF cache)" and this step's "disk space" show the
    same figure for the same place, and the environment step (which has no hub sizes) states no download figure
    of its own that this step's exact one would contradict."""
    from env_util import make_ctx, run_env
    from tui.core.steps import env as env_step

    def measured(path):
        return 123_400_000_000, Path(path)

    monkeypatch.setattr(checkpoints, "disk_free", measured)
    monkeypatch.setattr(env_step, "free_bytes", measured)
    environ = env_for(hub, tmp_path)
    run = run_step(tmp_path, tutorial_profile(), environ, hub.url)
    (tmp_path / "envstep").mkdir()
    ctx, events = make_ctx(tmp_path / "envstep", tutorial_profile(), extra_env={"HF_HOME": environ["HF_HOME"]})
    _, facts = asyncio.run(run_env(ctx, events))
    env_fact, ck = facts["disk (HF cache)"], run.fact("disk space")
    assert env_fact.value == "123.4 GB free" and ck.value.startswith("123.4 GB free, "), (env_fact, ck)
    cache = f"HF cache {Path(environ['HF_HOME']) / 'hub'}"
    assert cache in env_fact.detail and cache in ck.detail, (env_fact.detail, ck.detail)
    assert env_fact.status == "pass" and "more" not in env_fact.detail and "to download" in ck.value


def test_only_the_runs_endpoint_is_contacted(hub, tmp_path):
    """huggingface_hub's import-time HF_ENDPOINT (here: a second hub) must not be contacted when the run's
    environ names another endpoint (e.g. its User-Agent decoration fetches /api/agent-harnesses)."""
    import os
    import subprocess
    import sys

    code = (
        "import asyncio, os, sys\n"
        "from tests.test_checkpoints import run_step, tutorial_profile\n"
        "from pathlib import Path\n"
        "from tui.core.steps import checkpoints\n"
        "checkpoints.disk_free = lambda p: (10**12, Path(p))\n"
        "tmp = Path(sys.argv[2])\n"
        "r = run_step(tmp, tutorial_profile(), {'HF_ENDPOINT': sys.argv[1], 'HF_HOME': str(tmp / 'hf')})\n"
        "print(r.result.status)\n"
    )
    repo = Path(__file__).resolve().parents[1]
    with start_hub() as other:
        env = dict(os.environ, HF_ENDPOINT=other.url, HF_HOME=str(tmp_path / "import-time-home"),
                   PYTHONPATH=str(repo))
        env.pop("HF_HUB_DISABLE_TELEMETRY", None)
        out = subprocess.run([sys.executable, "-c", code, hub.url, str(tmp_path)], cwd=repo, env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().endswith("passed")
        assert other.requests == []
    assert hub.requests_to("/api/models/*")


# -- settings vLLM refuses for the models' shape (tui/core/host/modelshape.py) --------------------------------------


def shaped_profile(**server):
    prof = tutorial_profile()
    return prof.with_values({f"server.{k}": v for k, v in server.items()})


def test_tutorial_pair_records_the_shape_and_passes_at_tp16(hub, tmp_path):
    run = run_step(tmp_path, shaped_profile(tensor_parallel_size=16), env_for(hub, tmp_path), hub.url)
    assert run.fact("TP vs heads").status == "pass" and "64 attention heads, 8 KV heads" in run.fact("TP vs heads").value
    assert run.fact("draft TP vs heads").status == "pass"
    assert run.fact("max_model_len").status == "pass"
    shape = run.result.facts["model_shape"]
    assert (shape["target"]["heads"], shape["target"]["kv_heads"], shape["target"]["layers"],
            shape["target"]["max_len"]) == (64, 8, 36, 131072)
    assert run.artifact["model_shape"] == shape


def test_tp15_is_refused_before_launch_naming_the_head_count(hub, tmp_path):
    # With the environment step's facts of a trn2.48xlarge: the valid TPs stop at its 64 logical cores.
    profile = shaped_profile(tensor_parallel_size=15)
    events: list[Event] = []
    ctx = StepContext(profile=profile, run=RunDir(tmp_path / "run"), emit=events.append,
                      ph=Placeholders(sim_hub=hub.url, cache_dir=str(tmp_path / "cache")),
                      environ=env_for(hub, tmp_path))
    ctx.shared["env"] = {"platform": "neuron", "logical_cores": 64}
    result = asyncio.run(checkpoints.run(ctx, timeout_s=5.0))
    run = Run(ctx, events, result)
    assert run.result.status == "failed"
    fact = run.fact("TP vs heads")
    assert fact.status == "fail"
    assert "TP 15 does not divide the 64 attention heads of openai/gpt-oss-120b" in fact.detail
    assert "use 1, 2, 4, 8, 16, 32 or 64 (within the 64 logical cores)" in fact.detail
    assert "server.tensor_parallel_size to 16" in fact.remedy
    assert run.fact("draft TP vs heads").status == "fail"  # the draft runs at the target's TP: 64 heads too
    (diag,) = [e for e in run.events if isinstance(e, Diagnosis)]
    assert diag.id == "settings-refused-by-vllm" and diag.severity == "error"
    assert any("64 attention heads" in ev for ev in diag.evidence)
    assert diag.remedy.count("server.tensor_parallel_size to 16") == 1
    # one fix, a setting the Profile pane edits: the app names its field and key from these (screens/base.py)
    assert (diag.setting, diag.suggest) == ("server.tensor_parallel_size", "16")
    assert_readable(run)


def test_max_model_len_beyond_the_positions_and_pp_beyond_the_layers_are_refused(hub, tmp_path):
    run = run_step(tmp_path, shaped_profile(tensor_parallel_size=16, max_model_len=262144, pipeline_parallel_size=40),
                   env_for(hub, tmp_path), hub.url)
    assert run.result.status == "failed"
    mml = run.fact("max_model_len")
    assert mml.status == "fail" and "262144 exceeds the 131072 positions" in mml.detail and "131072" in mml.remedy
    pp = run.fact("pipeline stages")
    assert pp.status == "fail" and "36 layers" in pp.detail


def test_vllm_allow_long_max_model_len_turns_the_refusal_into_a_warning(hub, tmp_path):
    env = env_for(hub, tmp_path, VLLM_ALLOW_LONG_MAX_MODEL_LEN="1")
    run = run_step(tmp_path, shaped_profile(tensor_parallel_size=16, max_model_len=262144), env, hub.url)
    assert run.fact("max_model_len").status == "warn"
    assert run.result.status == "warned"
    assert run.result.facts["model_shape"]["allow_long"] is True
