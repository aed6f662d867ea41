"""Strict profile loading: every bad input gives one clear message naming the key, value and fix."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import pytest

from tui.core.profile.model import (
    ProfileError,
    bundled_profiles,
    load_profile,
    load_profile_text,
    profile_from_dict,
    validate_value,
)

REPO = Path(__file__).resolve().parents[1]
TUTORIAL = REPO / "profiles" / "gpt-oss-120b-eagle3-trn2.toml"


def tutorial_raw() -> dict:
    return tomllib.loads(TUTORIAL.read_text())


def mutate(path: str, value, delete: bool = False) -> dict:
    raw = copy.deepcopy(tutorial_raw())
    node = raw
    parts = path.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    if delete:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    return raw


def test_bundled_profiles_load():
    names = bundled_profiles()
    assert {"gpt-oss-120b-eagle3-trn2", "demo"} <= set(names)
    for name in names:
        prof = load_profile(name)
        assert prof.name == name
    assert load_profile("demo").simulated
    assert not load_profile("gpt-oss-120b-eagle3-trn2").simulated


def test_defaults_and_accessors():
    prof = load_profile("gpt-oss-120b-eagle3-trn2")
    assert prof.server.tensor_parallel_size == 16
    assert prof.server.host == "127.0.0.1"
    assert prof.draft_model == "RedHatAI/gpt-oss-120b-speculator.eagle3"
    assert prof.benchmark.num_prompts == 30
    assert prof.server.stop_grace_s == 30.0  # default filled in


def test_roundtrip_to_toml_replays_exactly(tmp_path):
    prof = load_profile("demo").with_values({"server.port": 8123, "speculative.num_speculative_tokens": 2})
    p = tmp_path / "mine.toml"
    p.write_text(prof.to_toml())
    again = load_profile(str(p))
    assert again.data == prof.data


BAD_CASES = [
    # (mutation, expected fragments)
    (("server.tensor_parallel_size", 0), ["server.tensor_parallel_size", "0", "from 1 to 128"]),
    (("server.tensor_parallel_size", "16"), ["server.tensor_parallel_size", "'16'", "an integer"]),
    (("server.port", 70000), ["server.port", "70000", "1 to 65535"]),
    (("server.port", 0), ["server.port", "1 to 65535"]),
    (("server.prot", 8000), ["unknown key 'server.prot'", "allowed keys", "port"]),
    (("servr", {"port": 1}), ["unknown key 'servr'"]),
    (("server.command", []), ["server.command", "non-empty list"]),
    (("server.command", "vllm"), ["server.command", "a list of strings"]),
    (("server.dtype", "fp8"), ["server.dtype", "'fp8'", "bfloat16"]),
    (("server.enable_prefix_caching", "no"), ["server.enable_prefix_caching", "a boolean"]),
    (("server.env", {"X": 1}), ["server.env", "a table of strings"]),
    (("speculative.num_speculative_tokens", 0), ["speculative.num_speculative_tokens", "from 1 to 16"]),
    (("speculative.method", "medusa"), ["speculative.method", "'medusa'", "eagle3"]),
    (("models.target", None), ["models.target", "missing"]),
    (("dataset.sha256", "abc"), ["dataset.sha256", "64 lowercase hex"]),
    (("dataset.name", "sharegpt"), ["dataset.name", "sonnet"]),
    (("benchmark.num_prompts", -3), ["benchmark.num_prompts", "-3"]),
    (("benchmark.output_len", 700), ["input_len + benchmark.output_len", "max_model_len (768)"]),
    (("benchmark.max_concurrency", 4), ["benchmark.max_concurrency", "max_num_seqs (1)"]),
    (("server.additional_config.neuron_config.num_batched_tokens_buckets", [256]),
     ["num_batched_tokens_buckets", "[256]", "max_num_batched_tokens (512)"]),
    (("server.additional_config.neuron_config.kv_segment_size_buckets", [1024]),
     ["kv_segment_size_buckets", "[1024]"]),
    (("server.additional_config.neuron_config.kv_segment_size_buckets", [500]),
     ["kv_segment_size_buckets", "512, 1024"]),
    (("server.additional_config.neuron_config.num_seqs_buckets", [1, 4]),
     ["num_seqs_buckets", "max_num_seqs (1)"]),
    (("server.additional_config.neuron_config.quantization", "mxfp4"),
     ["quantization = 'mxfp4'", "trn2", "bf16"]),
    (("server.additional_config.neuron_config.on_device_sampling_config", None),
     ["on_device_sampling_config is missing", "speculative decoding"]),
    (("simulation", {"time_scale": 0}), ["simulation.time_scale", "> 0"]),
    (("simulation", {"token_time_scale": 0}), ["simulation.token_time_scale", "> 0"]),
    (("simulation", {"fault": "meteor"}), ["simulation.fault", "'meteor'", "compile-failed"]),
    (("server.startup_timeout_s", float("inf")), ["server.startup_timeout_s", "a number"]),
]


@pytest.mark.parametrize("mutation,fragments", BAD_CASES, ids=[c[0][0] + "=" + repr(c[0][1])[:20] for c in BAD_CASES])
def test_bad_profiles_name_key_value_and_allowed(mutation, fragments):
    path, value = mutation
    raw = mutate(path, value, delete=value is None)
    with pytest.raises(ProfileError) as ei:
        profile_from_dict(raw, "bad.toml")
    msg = str(ei.value)
    assert msg.startswith("profile bad.toml")
    assert "\n" not in msg  # one paragraph
    for frag in fragments:
        assert frag in msg, (frag, msg)


def test_toml_syntax_error_has_line_and_column():
    text = TUTORIAL.read_text().replace("port = 8000", "port = = 8000")
    with pytest.raises(ProfileError) as ei:
        load_profile_text(text, "broken.toml")
    msg = str(ei.value)
    assert "broken.toml" in msg and "line" in msg and "column" in msg


def test_unknown_profile_name_lists_bundled():
    with pytest.raises(ProfileError) as ei:
        load_profile("no-such-profile")
    assert "demo" in str(ei.value) and "--list-profiles" in str(ei.value)


def test_missing_file_path():
    with pytest.raises(ProfileError) as ei:
        load_profile("nowhere/none.toml")
    assert "no such file" in str(ei.value)


def test_validate_value_for_inline_editors():
    assert validate_value("server", "port", 8001) == 8001
    with pytest.raises(ProfileError) as ei:
        validate_value("server", "port", 99999)
    assert "server.port" in str(ei.value)


def test_extends_merges_tables_and_replays(tmp_path):
    child = tmp_path / "child.toml"
    child.write_text('extends = "demo"\nname = "child"\n[server]\nport = 8111\n[simulation]\nfault = "cores-busy"\n')
    prof = load_profile(str(child))
    demo = load_profile("demo")
    assert prof.server.port == 8111 and prof.data["simulation"]["fault"] == "cores-busy"
    assert prof.server.additional_config == demo.server.additional_config  # merged from the base
    assert prof.data["simulation"]["time_scale"] == demo.data["simulation"]["time_scale"]
    saved = tmp_path / "saved.toml"
    saved.write_text(prof.to_toml())
    assert "extends" not in saved.read_text()
    assert load_profile(str(saved)).data == prof.data


def test_extends_errors(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('extends = "b.toml"\n')
    b.write_text('extends = "a.toml"\n')
    with pytest.raises(ProfileError) as ei:
        load_profile(str(a))
    assert "cycle" in str(ei.value)
    c = tmp_path / "c.toml"
    c.write_text('extends = "no-such-base"\n')
    with pytest.raises(ProfileError) as ei:
        load_profile(str(c))
    assert "extends = 'no-such-base' cannot be loaded" in str(ei.value)


@pytest.mark.parametrize("name,key,value", [
    ("demo-tp8", ("server", "tensor_parallel_size"), 8),
    ("demo-zero-acceptance", ("simulation", "fault"), "draft-mismatch"),
    ("demo-cores-busy", ("simulation", "fault"), "cores-busy"),
    ("demo-compile-failure", ("simulation", "fault"), "compile-failed"),
])
def test_bundled_fault_variants(name, key, value):
    prof = load_profile(name)
    assert prof.simulated and prof.data[key[0]][key[1]] == value


@pytest.mark.parametrize("name", ["demo", "demo-tp8", "demo-zero-acceptance", "demo-cores-busy",
                                  "demo-compile-failure"])
def test_demo_scales_startup_but_serves_in_real_time(name):
    """The demo's startup is short, but its bench reads on the tutorial's scale (tokens at real time)."""
    sim = load_profile(name).data["simulation"]
    assert sim["time_scale"] < 1.0 and sim["token_time_scale"] == 1.0


# ---------------------------------------------------------------------------------------------
# Platforms and the keys of issue 8
# ---------------------------------------------------------------------------------------------

CPU = REPO / "profiles" / "cpu.toml"


def cpu_raw() -> dict:
    return tomllib.loads(CPU.read_text())


def mutate_cpu(path: str, value, delete: bool = False) -> dict:
    raw = cpu_raw()
    node = raw
    parts = path.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    if delete:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    return raw


NEW_BAD_CASES = [
    # (base, mutation, expected fragments)
    ("tutorial", ("platform", "rocm"), ["platform = 'rocm'", "'neuron', 'cuda', 'cpu'"]),
    ("tutorial", ("platform", 1), ["platform = 1", "a string"]),
    ("tutorial", ("server.pipeline_parallel_size", 0), ["server.pipeline_parallel_size = 0", "from 1 to 128"]),
    ("tutorial", ("server.pipeline_parallel_size", "2"), ["server.pipeline_parallel_size = '2'", "an integer"]),
    ("tutorial", ("server.enforce_eager", "yes"), ["server.enforce_eager = 'yes'", "a boolean"]),
    ("tutorial", ("server.enforce_eagr", True), ["unknown key 'server.enforce_eagr'", "enforce_eager"]),
    ("tutorial", ("speculative.draft_tensor_parallel_size", -1),
     ["speculative.draft_tensor_parallel_size = -1", "0 (unset"]),
    ("tutorial", ("speculative.draft_tensor_parallel_size", 4),
     ["speculative.draft_tensor_parallel_size = 4", "1, or server.tensor_parallel_size (16)", "Set it to 1 or 16"]),
    ("tutorial", ("speculative.method", "medusa"), ["speculative.method", "'eagle3', 'eagle'"]),
    ("tutorial", ("models.prepare", "make-models"), ["models.prepare = 'make-models'", "a list of strings"]),
    ("tutorial", ("models.prepare", [""]), ["models.prepare = ['']", "argv list"]),
    ("tutorial", ("models.prepare", ["make-models"]),
     ["models.prepare = ['make-models']", "local directory", "remove models.prepare"]),
    ("tutorial", ("stand_in", {}), ["required key 'stand_in.command' is missing", "[stand_in]"]),
    ("tutorial", ("stand_in", {"command": []}), ["stand_in.command = []", "non-empty argv"]),
    ("tutorial", ("stand_in", {"command": ["x"], "cmd": 1}), ["unknown key 'stand_in.cmd'", "command"]),
    ("tutorial", ("stand_in", "x"), ["'stand_in' must be a table"]),
    ("tutorial", ("server.max_model_len", 0), ["server.max_model_len = 0", "platform 'neuron'", "explicitly"]),
    ("tutorial", ("server.max_model_len", 8), ["server.max_model_len = 8", "from 16 to 1048576", "0 (vLLM's default"]),
    ("cpu", ("server.additional_config", {"neuron_config": {"quantization": "bf16"}}),
     ["server.additional_config.neuron_config is not valid on platform 'cpu'",
      "Remove [server.additional_config.neuron_config]", 'platform = "neuron"']),
    ("tutorial", ("platform", "cuda"),
     ["server.additional_config.neuron_config is not valid on platform 'cuda'", "vllm-neuron"]),
    ("cpu", ("environment.min_neuron_sdk", "2.31"),
     ["environment.min_neuron_sdk = '2.31' is not valid on platform 'cpu'", "Remove environment.min_neuron_sdk"]),
    ("cpu", ("speculative.draft_tensor_parallel_size", 2),
     ["speculative.draft_tensor_parallel_size = 2", "server.tensor_parallel_size (1)"]),
    ("cpu", ("models.prepare", 5), ["models.prepare = 5", "a list of strings"]),
    ("cpu", ("server.max_num_seqs", 5000), ["server.max_num_seqs = 5000", "from 1 to 4096"]),
]


@pytest.mark.parametrize("base,mutation,fragments", NEW_BAD_CASES,
                         ids=[f"{b}:{m[0]}={repr(m[1])[:20]}" for b, m, _ in NEW_BAD_CASES])
def test_new_keys_are_strict(base, mutation, fragments):
    path, value = mutation
    raw = (mutate if base == "tutorial" else mutate_cpu)(path, value)
    with pytest.raises(ProfileError) as ei:
        profile_from_dict(raw, "bad.toml")
    msg = str(ei.value)
    assert msg.startswith("profile bad.toml") and "\n" not in msg
    for frag in fragments:
        assert frag in msg, (frag, msg)


def test_platform_defaults():
    tut = load_profile("gpt-oss-120b-eagle3-trn2")
    assert tut.platform == "neuron"
    minimal = {"models": {"target": "a/b", "draft": "c/d"}}
    neuron = profile_from_dict(minimal)
    assert neuron.platform == "neuron"
    assert neuron.server.tensor_parallel_size == 16
    assert neuron.environment.instance_type == "trn2.48xlarge" and neuron.environment.min_neuron_sdk == "2.31"
    for plat in ("cuda", "cpu"):
        p = profile_from_dict({**minimal, "platform": plat})
        assert p.platform == plat
        assert p.server.tensor_parallel_size == 1
        assert p.environment.instance_type == "" and p.environment.min_neuron_sdk == ""
    p = profile_from_dict(minimal)
    assert p.server.pipeline_parallel_size == 1 and p.server.enforce_eager is False
    assert p.speculative.draft_tensor_parallel_size == 0 and p.models.prepare == []
    assert "stand_in" not in p.data and not p.simulated


def test_speculative_profile_on_cpu_without_neuron_config_loads():
    raw = {"platform": "cpu", "models": {"target": "a/b", "draft": "c/d"},
           "speculative": {"method": "eagle3", "num_speculative_tokens": 2}}
    prof = profile_from_dict(raw, "cpu-spec.toml")
    assert prof.platform == "cpu" and prof.speculative.num_speculative_tokens == 2
    # the same on neuron still needs on-device sampling
    with pytest.raises(ProfileError) as ei:
        profile_from_dict({**raw, "platform": "neuron"}, "neuron-spec.toml")
    assert "on_device_sampling_config is missing" in str(ei.value)


def test_neuron_rules_do_not_apply_off_neuron():
    raw = {"platform": "cuda", "models": {"target": "a/b", "draft": "c/d"},
           "server": {"max_num_batched_tokens": 0, "max_model_len": 0, "max_num_seqs": 64},
           "benchmark": {"max_concurrency": 8}}
    prof = profile_from_dict(raw)
    assert prof.server.max_model_len == 0 and prof.server.max_num_batched_tokens == 0


def test_draft_tp_rule_allows_one_and_target_tp():
    for dtp in (0, 1, 16):
        prof = profile_from_dict(mutate("speculative.draft_tensor_parallel_size", dtp))
        assert prof.speculative.draft_tensor_parallel_size == dtp


def test_stand_in_makes_a_profile_simulated():
    raw = mutate("stand_in", {"command": ["{python}", "-m", "tui.sim", "stand-in"]})
    prof = profile_from_dict(raw)
    assert prof.simulated and prof.data["stand_in"]["command"][0] == "{python}"
    assert load_profile("demo").simulated  # [simulation]


def test_local_model_paths():
    from tui.core.profile.model import is_local_model, local_model_keys

    for name in ("/models/x", "./x", "../x", "{cache_dir}/tiny/target", ".", ".."):
        assert is_local_model(name), name
    for name in ("openai/gpt-oss-120b", "RedHatAI/gpt-oss-120b-speculator.eagle3", "gpt2"):
        assert not is_local_model(name), name
    cpu = load_profile("cpu")
    assert local_model_keys(cpu) == {"models.target": "{cache_dir}/tiny-models/v1/target",
                                     "models.draft": "{cache_dir}/tiny-models/v1/draft-eagle3"}
    assert local_model_keys(load_profile("gpt-oss-120b-eagle3-trn2")) == {}


def test_platform_roundtrip_and_with_values(tmp_path):
    cpu = load_profile("cpu")
    assert cpu.platform == "cpu" and cpu.models.prepare[0] == "{vllm_python}"
    p = tmp_path / "mine.toml"
    p.write_text(cpu.to_toml())
    assert load_profile(str(p)).data == cpu.data
    # moving a profile to another platform re-derives the platform defaults
    moved = profile_from_dict({"models": {"target": "a/b", "draft": "c/d"}}).with_values({"platform": "cuda"})
    assert moved.server.tensor_parallel_size == 1


@pytest.mark.parametrize("name,platform", [
    ("gpt-oss-120b-eagle3-trn2", "neuron"), ("gpt-oss-120b-stevenabreu7-trn2", "neuron"),
    ("gpt-oss-120b-stevenabreu7-cuda", "cuda"), ("llama-3.1-8b-eagle3-cuda", "cuda"),
    ("llama-3-8b-eagle-cuda", "cuda"), ("gpt-oss-20b-eagle3-cuda", "cuda"), ("cpu", "cpu"),
    ("demo", "neuron"), ("demo-tp8", "neuron"),
])
def test_bundled_platforms(name, platform):
    prof = load_profile(name)
    assert prof.platform == platform
    assert prof.raw.get("platform") == platform  # every bundled profile says it
