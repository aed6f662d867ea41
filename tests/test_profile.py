"""Strict profile loading: every bad input gives one clear message naming the key, value and fix."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import pytest

from tui.core.profile import (
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


def test_at_least_fifteen_bad_profiles():
    assert len(BAD_CASES) >= 15


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
