"""Checkpoints step: both draft layouts, local directories (safetensors headers, no hub call), the
draft<->target checks each passing and failing, models.prepare, and the bundled profiles' models on the
loopback hub (real huggingface_hub, 127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import sys
from pathlib import Path

import pytest

import ckpt_fixtures as fx
from tui.core.plan.commands import Placeholders
from tui.core.events import Artifact, Diagnosis, Event, Fact, LogLine, Progress
from tui.core.profile.model import profile_from_dict
from tui.core.store.rundir import RunDir
from tui.core.host.safetensors_header import HeaderError, read_dir, read_header, write_file
from tui.core.steps import checkpoints
from tui.core.steps.base import StepContext
from tui.sim.hub import AUTHORIZED_TOKEN


@pytest.fixture(autouse=True)
def roomy_disk(monkeypatch):
    monkeypatch.setattr(checkpoints, "disk_free", lambda path: (10**12, Path(path)))


def _closed_port_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def profile(target: str, draft: str, method: str = "eagle3", command: list[str] | None = None,
            prepare: list[str] | None = None):
    raw: dict = {"models": {"target": target, "draft": draft},
                 # TP 4: the fixtures' 4 attention heads (2 KV heads) split over it, as vLLM requires.
                 "server": {"tensor_parallel_size": 4,
                            "additional_config": {"neuron_config": {  # the default platform's own validation
                     "num_batched_tokens_buckets": [512], "num_seqs_buckets": [1], "kv_segment_size_buckets": [512],
                     "on_device_sampling_config": {"all_greedy": True}}}},
                 "speculative": {"method": method, "model": draft, "num_speculative_tokens": 1}}
    if command:
        raw["server"]["command"] = command
    prof = profile_from_dict(raw)
    if prepare is not None:
        # models.prepare is added to the schema by the profiles work; the step reads it from data.
        prof.data["models"]["prepare"] = prepare
    return prof


class Run:
    def __init__(self, ctx: StepContext, events: list[Event], result):
        self.ctx, self.events, self.result = ctx, events, result

    @property
    def facts(self) -> list[Fact]:
        return [e for e in self.events if isinstance(e, Fact)]

    def fact(self, name: str) -> Fact:
        found = [f for f in self.facts if f.name == name]
        assert len(found) == 1, (name, [(f.name, f.value) for f in self.facts])
        return found[0]

    def has(self, name: str) -> bool:
        return any(f.name == name for f in self.facts)

    @property
    def failed(self) -> list[str]:
        return [f.name for f in self.facts if f.status == "fail"]

    def dump(self) -> list[tuple[str, str, str]]:
        return [(f.name, f.status, f.value) for f in self.facts]


def run_step(tmp_path: Path, prof, environ: dict[str, str] | None = None, shared: dict | None = None,
             name: str = "run", sim_hub: str = "") -> Run:
    events: list[Event] = []
    env = environ if environ is not None else {"HF_ENDPOINT": _closed_port_endpoint(),
                                               "HF_HOME": str(tmp_path / "hf"), "PATH": "/usr/bin:/bin"}
    ctx = StepContext(profile=prof, run=RunDir(tmp_path / name), emit=events.append,
                      ph=Placeholders(sim_hub=sim_hub, cache_dir=str(tmp_path / "cache")), environ=env,
                      shared=shared or {})
    result = asyncio.run(checkpoints.run(ctx, timeout_s=5.0))
    text = json.dumps([f.__dict__ for f in events if isinstance(f, Fact)])
    assert "Traceback" not in text and 'File "' not in text
    return Run(ctx, events, result)


COMPAT = ("draft type", "draft verifier", "hidden size", "vocab size", "vocab mapping", "aux layers")


# -- safetensors headers -----------------------------------------------------------------------------


def test_header_roundtrip_sharded_and_errors(tmp_path):
    p = write_file(tmp_path / "a.safetensors", {"fc.weight": ("BF16", (4, 12)), "d2t": ("I64", (3,))},
                   {"format": "pt"})
    h = read_header(p)
    assert h["fc.weight"].shape == (4, 12) and h["fc.weight"].dtype == "BF16" and h["d2t"].shape == (3,)
    (n,) = struct.unpack("<Q", p.read_bytes()[:8])
    assert p.stat().st_size == 8 + n + 4 * 12 * 2 + 3 * 8 and n % 8 == 0

    shards = tmp_path / "sharded"
    shards.mkdir()
    write_file(shards / "model-00001-of-00002.safetensors", {"a": ("F32", (2,))})
    write_file(shards / "model-00002-of-00002.safetensors", {"b": ("F32", (3,))})
    (shards / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    d = read_dir(shards)
    assert d.shape("a") == (2,) and d.shape("b") == (3,) and len(d.files) == 2 and d.note == ""

    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 10) + b"{not json}")
    with pytest.raises(HeaderError, match="not JSON"):
        read_header(bad)
    bad.write_bytes(struct.pack("<Q", 1 << 40))
    with pytest.raises(HeaderError, match="not a safetensors file"):
        read_header(bad)
    bad.write_bytes(b"abc")
    with pytest.raises(HeaderError, match="shorter"):
        read_header(bad)

    binned = tmp_path / "bin"
    binned.mkdir()
    (binned / "pytorch_model.bin").write_bytes(b"\0" * 16)
    assert not read_dir(binned).read and "pytorch_model.bin" in read_dir(binned).note


# -- local directories in both layouts: every check passes, no hub call --------------------------------


@pytest.mark.parametrize("layout", ["speculators", "eagle3-repo"])
def test_local_eagle3_pair_passes_without_the_hub(tmp_path, layout):
    t = fx.target(tmp_path / "m" / "target")
    make = fx.speculators_draft if layout == "speculators" else fx.eagle3_repo_draft
    d = make(tmp_path / "m" / f"draft-{layout}", aux=[1, 2, 3])
    run = run_step(tmp_path, profile(str(t), str(d)))
    assert run.result.status in ("passed", "warned"), run.dump()
    assert not run.failed, run.dump()
    for name in ("draft type", "hidden size", "vocab size", "vocab mapping", "aux layers"):
        assert run.fact(name).status == "pass", name
    assert run.fact("draft verifier").status == ("pass" if layout == "speculators" else "info")
    assert run.fact("vocab mapping").value == "draft 1000 → target 2000 via d2t"
    assert run.fact("aux layers").value == "(1, 2, 3) of 4 layers"
    lay = run.fact("draft layout")
    assert lay.value.startswith("speculators (Eagle3Speculator)" if layout == "speculators"
                                else "EAGLE3 repo (LlamaForCausalLMEagle3)")
    assert ("midlayer.*" if layout == "eagle3-repo" else "layers.* (1 layer)") in lay.detail
    assert "fc [128, 384]" in lay.detail and "d2t [1000]" in lay.detail
    assert run.fact("disk space").value == "nothing to download"
    assert run.result.facts["draft"]["tensors"]["files"] == ["model.safetensors"]
    art = json.loads((run.ctx.run.path / "checkpoints.json").read_text())
    assert art["draft"]["config"]["layout"] == layout and art["compatible"] is True


def test_local_paths_with_placeholders_are_resolved(tmp_path):
    fx.target(tmp_path / "cache" / "tiny" / "target")
    fx.speculators_draft(tmp_path / "cache" / "tiny" / "draft", aux=[1, 2, 3])
    run = run_step(tmp_path, profile("{cache_dir}/tiny/target", "{cache_dir}/tiny/draft"))
    assert not run.failed, run.dump()
    assert run.result.facts["target"]["path"] == str(tmp_path / "cache" / "tiny" / "target")


def test_eagle1_repo_draft_with_method_eagle_passes(tmp_path):
    t = fx.target(tmp_path / "target")
    d = fx.eagle1_repo_draft(tmp_path / "draft-eagle1")
    run = run_step(tmp_path, profile(str(t), str(d), method="eagle"))
    assert not run.failed, run.dump()
    f = run.fact("draft type")
    assert f.status == "pass" and "fc.weight [128, 256] takes 2 × hidden 128" in f.detail
    assert not run.has("aux layers") and not run.has("vocab mapping")  # EAGLE-1: one hidden state, full vocab
    assert run.fact("draft layout").value.startswith("EAGLE-1 repo")


# -- method compatibility ---------------------------------------------------------------------------------


def test_eagle1_draft_with_method_eagle3_names_both(tmp_path):
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target")), str(fx.eagle1_repo_draft(tmp_path / "d"))))
    assert "draft type" in run.failed
    f = run.fact("draft type")
    assert f.value == "eagle draft, method eagle3"
    assert "EAGLE-1" in f.detail and '"eagle3"' in f.detail
    assert 'speculative.method = "eagle"' in f.remedy
    assert [e.id for e in run.events if isinstance(e, Diagnosis)] == ["draft-target-mismatch"]


@pytest.mark.parametrize("layout", ["speculators", "eagle3-repo"])
def test_eagle3_draft_with_method_eagle_names_both(tmp_path, layout):
    make = fx.speculators_draft if layout == "speculators" else fx.eagle3_repo_draft
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target")), str(make(tmp_path / "d", aux=[1, 2, 3])),
                                     method="eagle"))
    assert run.failed == ["draft type"], run.dump()
    f = run.fact("draft type")
    assert f.value == "eagle3 draft, method eagle" and 'speculative.method = "eagle3"' in f.remedy


# -- hidden size, vocabulary, verifier ------------------------------------------------------------------


def test_hidden_size_mismatch_fails(tmp_path):
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target")),
                                     str(fx.speculators_draft(tmp_path / "d", hidden=256, aux=[1, 2, 3]))))
    assert "hidden size" in run.failed
    assert run.fact("hidden size").value == "draft 256 ≠ target 128"


def test_fc_shape_that_does_not_fit_the_target_fails(tmp_path):
    d = fx.speculators_draft(tmp_path / "d", aux=[1, 2, 3], fc_in=3 * 96)
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target")), str(d)))
    assert run.failed == ["hidden size"], run.dump()
    assert run.fact("hidden size").value == "fc.weight [128, 288] vs target hidden 128"


def test_vocab_size_mismatch_fails(tmp_path):
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target")),
                                     str(fx.speculators_draft(tmp_path / "d", vocab=3000, aux=[1, 2, 3]))))
    assert "vocab size" in run.failed
    assert run.fact("vocab size").value == "draft 3000 ≠ target 2000"


def test_verifier_named_by_the_draft_must_be_the_target(tmp_path):
    t = fx.target(tmp_path / "target")
    ok = run_step(tmp_path, profile(str(t), str(fx.speculators_draft(tmp_path / "d1", verifier="someorg/target",
                                                                     aux=[1, 2, 3]))), name="ok")
    assert ok.fact("draft verifier").status == "pass"
    bad = run_step(tmp_path, profile(str(t), str(fx.speculators_draft(tmp_path / "d2", verifier="meta-llama/Other-8B",
                                                                      aux=[1, 2, 3]))), name="bad")
    assert bad.failed == ["draft verifier"], bad.dump()
    assert bad.fact("draft verifier").value == f"meta-llama/Other-8B ≠ {t}"


# -- vocabulary mapping (draft_vocab_size + d2t) ---------------------------------------------------------


def test_full_vocabulary_needs_no_mapping(tmp_path):
    d = fx.speculators_draft(tmp_path / "d", draft_vocab=None, aux=[1, 2, 3])
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target")), str(d)))
    assert run.fact("vocab mapping").status == "pass" and run.fact("vocab mapping").value == "full vocabulary (2000)"


@pytest.mark.parametrize("kw,value", [
    ({"d2t": False}, "draft 1000 → target 2000: no d2t tensor"),
    ({"d2t": 999}, "draft 1000 → target 2000: d2t has shape [999], not [1000]"),
    ({"lm_rows": 1500}, "draft 1000 → target 2000: lm_head has 1500 rows, not draft_vocab_size 1000"),
])
def test_reduced_vocabulary_needs_a_matching_d2t(tmp_path, kw, value):
    d = fx.speculators_draft(tmp_path / "d", aux=[1, 2, 3], **kw)
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target")), str(d)))
    assert run.failed == ["vocab mapping"], run.dump()
    f = run.fact("vocab mapping")
    assert f.value == value and "d2t" in f.remedy


def test_draft_vocab_larger_than_target_fails(tmp_path):
    d = fx.speculators_draft(tmp_path / "d", draft_vocab=2500, aux=[1, 2, 3], d2t=False, t2d=False)
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target")), str(d)))
    assert "vocab mapping" in run.failed
    assert run.fact("vocab mapping").value == "draft_vocab_size 2500 > target vocab 2000"


# -- aux hidden-state layers ------------------------------------------------------------------------------


def test_vllm_default_aux_layers_collapse_on_a_small_target(tmp_path):
    d = fx.speculators_draft(tmp_path / "d")  # pins no eagle_aux_hidden_state_layer_ids
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target")), str(d)))
    assert run.failed == ["aux layers"], run.dump()
    f = run.fact("aux layers")
    assert f.value == "(2, 2, 1): 2 distinct, draft needs 3"
    assert "(2, L//2, L-3)" in f.detail and "L = 4" in f.detail and "shape" in f.detail
    assert '"eagle_aux_hidden_state_layer_ids": [1, 2, 3]' in f.remedy


def test_pinned_aux_layers_out_of_range_fail(tmp_path):
    d = fx.eagle3_repo_draft(tmp_path / "d", aux=[1, 2, 4])
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target")), str(d)))
    assert run.failed == ["aux layers"], run.dump()
    assert run.fact("aux layers").value == "[4] outside 0..3"


def test_default_aux_layers_pass_on_a_deep_target(tmp_path):
    d = fx.speculators_draft(tmp_path / "d")
    run = run_step(tmp_path, profile(str(fx.target(tmp_path / "target", layers=8)), str(d)))
    assert run.fact("aux layers").status == "pass" and run.fact("aux layers").value == "(2, 4, 5) of 8 layers"


# -- models.prepare -------------------------------------------------------------------------------------------


PREPARE = r'''
import sys, shutil, pathlib
src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
print("preparing tiny models in", out, flush=True)
for i, name in enumerate(["target", "draft"], 1):
    shutil.copytree(src / name, out / name, dirs_exist_ok=True)
    print(f"[{i}/2] wrote {name}", flush=True)
'''


def _templates(tmp_path: Path) -> Path:
    src = tmp_path / "templates"
    fx.target(src / "target")
    fx.speculators_draft(src / "draft", aux=[1, 2, 3])
    return src


def test_prepare_creates_missing_directories_then_checks_them(tmp_path):
    script = tmp_path / "prepare.py"
    script.write_text(PREPARE)
    prof = profile("{cache_dir}/tiny/target", "{cache_dir}/tiny/draft",
                   prepare=["{python}", str(script), str(_templates(tmp_path)), "{cache_dir}/tiny"])
    run = run_step(tmp_path, prof)
    assert not run.failed, run.dump()
    f = run.fact("model prepare")
    assert f.status == "pass" and f.value == "created 2 directories"
    assert str(tmp_path / "cache" / "tiny" / "target") in f.detail
    lines = [e.text for e in run.events if isinstance(e, LogLine)]
    assert "[2/2] wrote draft" in lines and all(e.source == "prepare" for e in run.events if isinstance(e, LogLine))
    prog = [e for e in run.events if isinstance(e, Progress)]
    assert prog[-1].done and any(p.completed == 50.0 for p in prog) and all(p.total == 100.0 for p in prog)
    assert (run.ctx.run.path / checkpoints.PREPARE_LOG).read_text().count("wrote") == 2
    assert any(isinstance(e, Artifact) and e.name == checkpoints.PREPARE_LOG for e in run.events)
    assert all(f.status == "pass" for f in run.facts if f.name in COMPAT)
    assert run.ctx.cleanups == []
    art = json.loads((run.ctx.run.path / "checkpoints.json").read_text())
    assert art["prepare"]["exit_code"] == 0


def test_prepare_is_not_run_when_the_directories_exist(tmp_path):
    src = _templates(tmp_path)
    prof = profile(str(src / "target"), str(src / "draft"), prepare=["{python}", "-c", "raise SystemExit(9)"])
    run = run_step(tmp_path, prof)
    assert not run.has("model prepare") and not run.failed


def test_failing_prepare_names_command_exit_code_and_last_lines(tmp_path):
    code = "import sys; print('loading torch'); print('ModuleNotFoundError: no torch', file=sys.stderr); sys.exit(3)"
    prof = profile("{cache_dir}/tiny/target", "{cache_dir}/tiny/draft", prepare=["{python}", "-c", code])
    run = run_step(tmp_path, prof)
    f = run.fact("model prepare")
    assert f.status == "fail" and f.value == "exit code 3"
    assert "exited with code 3" in f.detail and "ModuleNotFoundError: no torch" in f.detail
    assert sys.executable in f.detail and "models.target" in f.detail
    assert checkpoints.PREPARE_LOG in f.remedy
    assert "\n" not in f.detail
    assert run.result.status == "failed"


def test_prepare_that_raises_shows_the_exception_not_the_traceback(tmp_path):
    code = "def build():\n    raise RuntimeError('tokenizer training failed')\nbuild()\n"
    prof = profile("{cache_dir}/tiny/target", "{cache_dir}/tiny/draft", prepare=["{python}", "-c", code])
    run = run_step(tmp_path, prof)  # run_step asserts that no fact holds a traceback
    f = run.fact("model prepare")
    assert f.value == "exit code 1" and "RuntimeError: tokenizer training failed" in f.detail
    assert "Traceback" in (run.ctx.run.path / checkpoints.PREPARE_LOG).read_text()  # the log keeps everything


def test_prepare_that_creates_nothing_fails(tmp_path):
    prof = profile("{cache_dir}/tiny/target", "{cache_dir}/tiny/draft", prepare=["{python}", "-c", "print('ok')"])
    run = run_step(tmp_path, prof)
    f = run.fact("model prepare")
    assert f.status == "fail" and f.value == "directories still missing" and "ok" in f.detail


def test_prepare_that_cannot_start(tmp_path):
    prof = profile("{cache_dir}/tiny/target", "{cache_dir}/tiny/draft",
                   prepare=[str(tmp_path / "no-such-program"), "--out", "x"])
    run = run_step(tmp_path, prof)
    f = run.fact("model prepare")
    assert f.status == "fail" and f.value == "cannot start" and "no-such-program" in f.detail


def test_prepare_timeout_stops_it(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "PREPARE_TIMEOUT_S", 0.5)
    prof = profile("{cache_dir}/tiny/target", "{cache_dir}/tiny/draft",
                   prepare=["{python}", "-c", "import time; print('working', flush=True); time.sleep(60)"])
    run = run_step(tmp_path, prof)
    f = run.fact("model prepare")
    assert f.status == "fail" and f.value == "timed out" and "working" in f.detail
    assert run.ctx.cleanups == []


def test_prepare_runs_in_the_vllm_interpreter(tmp_path):
    script = tmp_path / "prepare.py"
    script.write_text(PREPARE)
    argv = ["{vllm_python}", str(script), str(_templates(tmp_path)), "{cache_dir}/tiny"]
    # From the env step's shared facts ...
    prof = profile("{cache_dir}/tiny/target", "{cache_dir}/tiny/draft", prepare=argv)
    run = run_step(tmp_path, prof, shared={"env": {"vllm_python": sys.executable}}, name="shared")
    assert run.fact("model prepare").status == "pass", run.dump()
    # ... or found from server.command when the env step did not run.
    import shutil
    shutil.rmtree(tmp_path / "cache" / "tiny")
    prof = profile("{cache_dir}/tiny/target", "{cache_dir}/tiny/draft", prepare=argv,
                   command=["{python}", "-m", "tui.sim"])
    run = run_step(tmp_path, prof, name="found")
    assert run.fact("model prepare").status == "pass", run.dump()
    assert sys.executable in run.fact("model prepare").detail
    if hasattr(run.ctx.ph, "vllm_python"):
        assert run.ctx.ph.vllm_python == sys.executable


def test_prepare_without_a_vllm_interpreter_fails_readably(tmp_path):
    prof = profile("{cache_dir}/tiny/target", "{cache_dir}/tiny/draft", prepare=["{vllm_python}", "x.py"],
                   command=["no-such-vllm-here"])
    run = run_step(tmp_path, prof)
    f = run.fact("model prepare")
    assert f.status == "fail" and "{vllm_python}" in f.value and "no-such-vllm-here" in f.detail


# -- the bundled profiles' models on the loopback hub ---------------------------------------------------------


def hub_env(hub, tmp_path, **extra) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), **extra}


@pytest.mark.parametrize("target,draft,method,layers", [
    ("openai/gpt-oss-120b", "stevenabreu7/gpt-oss-120b-speculator.eagle3", "eagle3", (2, 18, 33)),
    ("openai/gpt-oss-20b", "RedHatAI/gpt-oss-20b-speculator.eagle3", "eagle3", (2, 12, 21)),
    ("meta-llama/Llama-3.1-8B-Instruct", "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "eagle3", (2, 16, 29)),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "eagle3",
     (2, 16, 29)),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "yuhuili/EAGLE-LLaMA3-Instruct-8B", "eagle", None),
])
def test_bundled_pairs_pass_on_the_loopback_hub(hub, tmp_path, target, draft, method, layers):
    env = hub_env(hub, tmp_path, HF_TOKEN=AUTHORIZED_TOKEN)  # the meta-llama targets are gated
    run = run_step(tmp_path, profile(target, draft, method), env)
    bad = [x for x in run.dump() if x[1] == "fail" or (x[1] == "warn" and x[0] not in ("target access",
                                                                                       "quantization override",
                                                                                       "draft verifier"))]
    assert not bad, run.dump()
    assert run.result.facts["compatible"] is True
    if layers:
        assert run.fact("aux layers").value.startswith(str(layers))
        assert run.fact("vocab mapping").status == "info"  # hub: d2t is not downloaded, only announced
    assert "tensors not read" in run.fact("draft layout").detail
    if "Meta-Llama-3" in target and "Llama-3.1" in draft:
        f = run.fact("draft verifier")  # vLLM's docs pair a 3.1 draft with the 3.0 target: warn, not fail
        assert f.status == "warn" and "documented pair" in f.value and "lower acceptance" in f.detail
    elif "yuhuili" in draft:
        f = run.fact("draft verifier")
        assert f.status == "pass" and f.value == "meta-llama/Meta-Llama-3-8B-Instruct (by convention)"
        assert run.fact("draft type").status == "pass" and "EAGLE-LLaMA3-Instruct-8B" in run.fact("draft type").detail
    else:
        assert run.fact("draft verifier").status == "pass"


def test_eagle1_hub_draft_under_eagle3_fails_naming_both(hub, tmp_path):
    env = hub_env(hub, tmp_path, HF_TOKEN=AUTHORIZED_TOKEN)
    run = run_step(tmp_path, profile("meta-llama/Meta-Llama-3-8B-Instruct", "yuhuili/EAGLE-LLaMA3-Instruct-8B"), env)
    assert run.failed == ["draft type"], run.dump()
    assert run.fact("draft type").value == "eagle draft, method eagle3"


def test_eagle1_hub_draft_on_another_target_warns_by_convention(hub, tmp_path):
    env = hub_env(hub, tmp_path, HF_TOKEN=AUTHORIZED_TOKEN)
    run = run_step(tmp_path, profile("meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE-LLaMA3-Instruct-8B",
                                     "eagle"), env)
    f = run.fact("draft verifier")
    assert f.status == "warn" and "(by convention)" in f.value and "Meta-Llama-3-8B-Instruct" in f.remedy


def test_local_draft_on_a_hub_target(hub, tmp_path):
    """A local speculators draft for gpt-oss-120b's shapes, checked against the hub's target config."""
    d = fx.speculators_draft(tmp_path / "gpt-oss-draft", verifier="openai/gpt-oss-120b", hidden=8, vocab=201088,
                             draft_vocab=64000)
    run = run_step(tmp_path, profile("openai/gpt-oss-120b", str(d)), hub_env(hub, tmp_path))
    assert run.fact("hidden size").value == "draft 8 ≠ target 2880"
    assert run.fact("vocab mapping").status == "pass"
    assert run.fact("aux layers").value.startswith("(2, 18, 33)")


@pytest.mark.parametrize("layout", ["speculators", "eagle3-repo"])
def test_tinymodels_shaped_drafts_pass(tmp_path, layout):
    """The shapes tui/tools/tinymodels.py writes: full draft vocabulary (no d2t), target_hidden_size, pinned
    aux layers (the repo layout also in eagle_config), verifier "target" (the target directory's name)."""
    t = fx.target(tmp_path / "tiny" / "target")
    make = fx.speculators_draft if layout == "speculators" else fx.eagle3_repo_draft
    d = make(tmp_path / "tiny" / f"draft-{layout}", draft_vocab=fx.V, aux=[1, 2, 3])
    cfg = json.loads((d / "config.json").read_text())
    cfg["target_hidden_size"] = fx.H
    if layout == "eagle3-repo":
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 2, 3], "use_aux_hidden_state": True}
    else:
        cfg["transformer_layer_config"]["architectures"] = ["LlamaForCausalLM"]
    (d / "config.json").write_text(json.dumps(cfg))
    run = run_step(tmp_path, profile(str(t), str(d)))
    assert not run.failed, run.dump()
    assert run.fact("vocab mapping").value == f"full vocabulary ({fx.V})"
    assert run.fact("aux layers").status == "pass"
