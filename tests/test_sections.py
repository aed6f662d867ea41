"""The typed profile sections (profile/sections.py) and the arms that carry them."""

from __future__ import annotations

import dataclasses

import pytest

from tui.core.plan.arms import arms_of
from tui.core.plan.commands import serve_argv, speculative_config
from tui.core.profile.model import load_profile
from tui.core.profile.schema import SCHEMA
from tui.core.profile.sections import (BenchmarkSettings, DraftSettings, ServerSettings, SloSettings, SpeculativeSettings,
                                      TuneSettings)
from tui.core.results.stats import ARM_KEYS, arm_k


@pytest.mark.parametrize("cls,table", [(SpeculativeSettings, "speculative"), (ServerSettings, "server")])
def test_a_section_has_exactly_the_schemas_keys(cls, table):
    # [speculative.extra] is held as canonical JSON (extra_json: hashable) and read back as .extra
    names = ["extra" if f.name == "extra_json" else f.name for f in dataclasses.fields(cls)]
    assert names == list(SCHEMA[table])


def test_the_profiles_sections_are_frozen_values_with_the_draft_filled_in():
    prof = load_profile("demo")
    sp = prof.speculative
    assert sp == SpeculativeSettings(prof.data["speculative"]["method"], prof.draft_model,
                                     prof.data["speculative"]["num_speculative_tokens"],
                                     prof.data["speculative"]["draft_tensor_parallel_size"])
    assert sp.model == (prof.data["speculative"]["model"] or prof.data["models"]["draft"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        sp.num_speculative_tokens = 5  # type: ignore[misc]
    prof.server.env["X"] = "1"  # a copy: the profile is unchanged
    assert "X" not in prof.data["server"]["env"]


def test_each_tune_arm_carries_its_own_settings_and_its_argv_is_built_from_them():
    prof = load_profile("tune-demo")
    spec = [a for a in arms_of(prof) if a.speculative is not None]
    assert [a.num_speculative_tokens for a in spec] == prof.data["tune"]["num_speculative_tokens"] * (
        len((prof.data["tune"].get("drafts") or {})) or 1)
    for a in spec:
        assert a.speculative == dataclasses.replace(prof.speculative, method=a.method, model=a.draft,
                                                    num_speculative_tokens=a.num_speculative_tokens)
        assert speculative_config(prof, None, a.speculative)["num_speculative_tokens"] == a.num_speculative_tokens
        assert f'"num_speculative_tokens": {a.num_speculative_tokens}' in " ".join(serve_argv(prof, a.speculative))
        assert set(a.as_dict()) == set(ARM_KEYS) - {"status"} | {"short"}
        assert arm_k(a.as_dict()) == a.num_speculative_tokens
    base = arms_of(prof)[0]
    assert base.speculative is None and "--speculative-config" not in serve_argv(prof, base.speculative)


def test_with_server_changes_one_table_without_loading_the_profile_again():
    prof = load_profile("demo")
    moved = prof.with_server(dataclasses.replace(prof.server, port=prof.server.port + 1))
    assert moved.server.port == prof.server.port + 1 and moved.raw["server"]["port"] == prof.server.port + 1
    assert moved.speculative == prof.speculative and prof.server.port == prof.data["server"]["port"]
    assert serve_argv(moved, False)[-1] == str(prof.server.port + 1)


def test_speculative_extra_is_merged_into_the_config_and_a_tune_arm_takes_its_first_k_rates(tmp_path):
    prof_file = tmp_path / "p.toml"
    # cuda: vLLM's own rejection sampler (vllm-neuron verifies with its own samplers, so neuron refuses synthetic)
    prof_file.write_text('extends = "llama-3.1-8b-eagle3-cuda"\n[tune]\nnum_speculative_tokens = [1, 2, 3]\n'
                         '[speculative.extra]\nrejection_sample_method = "synthetic"\n'
                         'synthetic_acceptance_rates = [0.8, 0.5, 0.3]\ndraft_sample_method = "greedy"\n')
    prof = load_profile(str(prof_file))
    assert prof.speculative.extra["rejection_sample_method"] == "synthetic"
    for arm in (a for a in arms_of(prof) if a.speculative is not None):
        cfg = speculative_config(prof, None, arm.speculative)
        k = arm.num_speculative_tokens
        assert cfg["synthetic_acceptance_rates"] == [0.8, 0.5, 0.3][:k]
        assert cfg["draft_sample_method"] == "greedy" and cfg["num_speculative_tokens"] == k
    assert prof.speculative.as_table()["extra"] == prof.data["speculative"]["extra"]


def test_tune_and_benchmark_are_typed_frozen_sections_with_the_schemas_keys():
    prof = load_profile("tune-load-demo")
    t = prof.tune
    assert isinstance(t, TuneSettings) and load_profile("demo").tune is None
    assert [f.name for f in dataclasses.fields(TuneSettings)] == list(SCHEMA["tune"])
    assert [f.name for f in dataclasses.fields(BenchmarkSettings)] == list(SCHEMA["benchmark"])
    assert t.num_speculative_tokens == tuple(prof.data["tune"]["num_speculative_tokens"])
    assert t.levels == (1, 2, 4, 8, 16) and t.min_waves == prof.data["tune"]["min_waves"]
    assert t.slo == SloSettings(ttft_ms=350.0, tpot_ms=14.0) and t.slo.share == 0.9
    assert t.slo.limits() == {"ttft_ms": 350.0, "tpot_ms": 14.0} and t.slo.as_table() == prof.data["tune"]["slo"]
    assert t.as_table() == {**prof.data["tune"], "drafts": {}}
    assert prof.benchmark.as_table() == prof.data["benchmark"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.repeats = 9  # type: ignore[misc]
    hash(t)  # a value: hashable, tuples all the way


def test_named_drafts_are_typed(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('extends = "tune"\n[tune.drafts.redhat]\nmodel = "RedHatAI/x"\n[tune.drafts.mine]\nmodel = "./d"\n'
                 'method = "eagle"\n')
    prof = load_profile(str(f))
    assert prof.tune.drafts == (DraftSettings("redhat", "RedHatAI/x", None), DraftSettings("mine", "./d", "eagle"))
    assert [a.id for a in arms_of(prof) if a.speculative][:2] == ["eagle3-k1-redhat", "eagle3-k2-redhat"]
