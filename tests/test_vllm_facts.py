"""tui/core/data/vllm_facts.json is what tests/vllm_wheel_facts.py derives from the excerpts of the vLLM wheels
(tests/fixtures/vllm/<version>/, each recording its wheel's sha256 and build date), and the generator reads a
SpeculativeConfig source the way it should (a small handwritten source). The app's plan uses only flags and
--speculative-config keys the release it is built for has."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

import vllm_wheel_facts as gen

from tui.core import vllmfacts
from tui.core.plan.arms import DYNAMIC_SD_SINCE, arms_of
from tui.core.plan.build import build_plan
from tui.core.plan.commands import speculative_config
from tui.core.profile.model import bundled_profiles, load_profile
from tui.core.versions import SERVED, served_problem

VERSIONS = ("0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")


def test_the_data_file_is_what_the_generator_derives_from_the_recorded_excerpts():
    assert gen.DATA.read_text() == gen.render(gen.derive_all())
    assert vllmfacts.known_versions() == VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
def test_each_release_names_its_wheel(version):
    src = json.loads((gen.FIXTURES / version / "SOURCE.json").read_text())
    assert src["version"] == version and src["wheel"].startswith(f"vllm-{version}-")
    assert re.fullmatch(r"[0-9a-f]{64}", src["wheel_sha256"]) and src["wheel_bytes"] > 100_000_000
    assert re.fullmatch(r"2026-\d\d-\d\d", src["built"])
    assert set(src["files_sha256"]) >= {gen.SPECULATIVE, *gen.BENCH_SOURCES}
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in src["files_sha256"].values())
    ws = vllmfacts.source(version)
    assert ws is not None and ws.sha256 == src["wheel_sha256"] and ws.built == src["built"]


SMALL = textwrap.dedent('''
    from dataclasses import field
    from typing import ClassVar, Literal

    InnerTypes = Literal["eagle", "eagle3"]
    SpeculativeMethod = Literal["ngram", InnerTypes, "suffix"]
    RejectionSampleMethod = Literal["standard", "synthetic"]
    DraftSampleMethod = Literal["greedy"]
    NotAnAlias = dict[str, int]


    def helper():
        return 1


    @config
    class SpeculativeConfig:
        """Configuration for speculative decoding."""

        num_speculative_tokens: int = Field(default=None, gt=0)
        """The number of speculative tokens."""
        custom_method: str | None = field(default=None, init=False)
        """Set by vLLM."""
        target_model_config: SkipValidation[ModelConfig] = None
        """Passed from the engine."""
        parallel_drafting: bool | None = None
        """Deprecated and has no effect."""
        registry: ClassVar[dict] = {}
        rejection_sample_method: RejectionSampleMethod = "standard"

        def method_body(self):
            x: int = 3
            return x
''')


def test_the_generator_reads_fields_literals_and_flags_from_a_small_source():
    table = gen.speculative_table(SMALL)
    assert table["fields"] == ["num_speculative_tokens", "target_model_config", "parallel_drafting",
                               "rejection_sample_method"]
    assert table["init_false"] == ["custom_method"] and table["internal"] == ["target_model_config"]
    assert table["deprecated"] == ["parallel_drafting"]
    assert table["methods"] == ["ngram", "eagle", "eagle3", "suffix"]
    assert table["rejection_sample_methods"] == ["standard", "synthetic"]
    assert table["draft_sample_methods"] == ["greedy"]
    assert table["types"]["parallel_drafting"] == "bool | None"
    # the excerpt keeps exactly what the table is made of
    excerpt = gen.speculative_excerpt(SMALL)
    assert gen.speculative_table(excerpt) == table
    assert "def helper" not in excerpt and "method_body" not in excerpt and "NotAnAlias" not in excerpt
    flags = gen.bench_flags(['p.add_argument("--seed", type=int)\ng = p.add_argument_group("x")\n'
                             'g.add_argument("--dataset-name", "-d", choices=["a"])\nprint("--not-a-flag")'])
    assert flags == ["--dataset-name", "--seed"]
    marks = gen.find_markers({"vllm/platforms/cpu.py": 'x = 1\n    raise RuntimeError("vLLM on x86 CPUs requires '
                                                       'Triton (triton-cpu).")\n'})
    assert marks == ['cpu_x86_requires_triton vllm/platforms/cpu.py:2 raise RuntimeError("vLLM on x86 CPUs requires '
                     'Triton (triton-cpu).")']


def test_the_releases_differ_as_their_wheels_say():
    f33, f34 = vllmfacts.speculative_fields("0.33.0"), vllmfacts.speculative_fields("0.34.1")
    assert f33 is not None and f34 is not None and f34.version == "0.34.0"  # a patch release reads X.Y.0
    assert set(f34.fields) - set(f33.fields) == {"draft_decode_context_parallel_size", "speculator_options",
                                                 "suffix_decoding_corpus_tokens"}
    assert set(f33.fields) - set(f34.fields) == {"disable_padded_drafter_batch", "use_heterogeneous_vocab"}
    assert f34.init_false == ("custom_method",) and "custom_class" in f33.methods and "custom_class" not in f34.methods
    assert set(f34.deprecated) == {"parallel_drafting", "suffix_decoding_max_spec_factor",
                                   "suffix_decoding_min_token_prob"}
    f32 = vllmfacts.speculative_fields("0.32.0")
    assert "fly" not in f32.rejection_sample_methods and "fly" in f33.rejection_sample_methods
    assert {"medusa", "mlp_speculator"} <= set(f32.methods) and not {"medusa", "mlp_speculator"} & set(f33.methods)
    assert vllmfacts.speculative_fields("0.24.0") is None and vllmfacts.speculative_fields(None) is None
    assert vllmfacts.has("0.34.0", "model_runner_v1_removed") and not vllmfacts.has("0.33.0", "model_runner_v1_removed")
    assert vllmfacts.has("0.34.0", "cpu_x86_requires_triton") and vllmfacts.has("0.33.0", "cpu_x86_triton_warning")
    assert vllmfacts.has("0.34.0", "bench_stream_error_fails_request")
    assert not vllmfacts.has("0.33.0", "bench_stream_error_fails_request")
    assert vllmfacts.has("0.34.0", "bench_chat_backends_skip_chat_template")
    assert vllmfacts.has("0.24.0", "model_runner_v1_removed") is None
    assert "--sonnet-input-len" in vllmfacts.bench_serve_flags("0.31.0")
    assert "--sonnet-input-len" not in vllmfacts.bench_serve_flags("0.32.0")


def _runs_on(name: str) -> list[str]:
    platform = load_profile(name).platform
    return [v for v in VERSIONS if served_problem(v, platform) is None]


@pytest.mark.parametrize("name", sorted(bundled_profiles()))
def test_the_plan_uses_only_what_each_release_it_runs_on_has(name):
    """Every `vllm bench serve` flag of the plan is declared by that release's bench, and every
    --speculative-config key is a field of its SpeculativeConfig, at every served release of the platform."""
    prof = load_profile(name)
    assert _runs_on(name), name
    for version in _runs_on(name):
        flags = vllmfacts.bench_serve_flags(version)
        fields = vllmfacts.speculative_fields(version)
        plan = build_plan(prof, "/r", version)
        for c in plan.commands:
            if c.role == "bench":
                used = {a for a in c.argv if a.startswith("--")}
                assert used <= flags, (version, sorted(used - flags))
        for arm in arms_of(prof):
            if arm.speculative is not None:
                keys = set(speculative_config(prof, None, arm.speculative))
                assert keys <= set(fields.settable()), (version, sorted(keys - set(fields.settable())))


def test_the_claims_the_app_rests_on_hold_in_every_release():
    """vLLM's configs forbid unknown keys (why an unknown [speculative.extra] key is refused), and the schedule's
    validator is the same file in every served release (why DYNAMIC_SD_SINCE is 0.29)."""
    hashes = {json.loads((gen.FIXTURES / v / "SOURCE.json").read_text())["files_sha256"][
        "vllm/v1/spec_decode/dynamic/utils.py"] for v in VERSIONS}
    assert len(hashes) == 1
    assert DYNAMIC_SD_SINCE == (0, 29)
    for v in VERSIONS:
        assert vllmfacts.marker(v, "config_forbids_unknown_keys").startswith("vllm/config/utils.py:")
        assert "num_speculative_tokens_per_batch_size" in vllmfacts.speculative_fields(v).fields


def test_the_served_rule_is_stated_once_and_matches_the_facts():
    assert SERVED["cuda"] == ((0, 29), (0, 34)) and SERVED["neuron"] == ((0, 29), (0, 33))
    lo, hi = min(v[0] for v in SERVED.values()), max(v[1] for v in SERVED.values())
    minors = [tuple(int(x) for x in v.split(".")[:2]) for v in vllmfacts.known_versions()]
    assert minors[0] == lo and minors[-1] == hi and len(minors) == hi[1] - lo[1] + 1  # a table per served release
