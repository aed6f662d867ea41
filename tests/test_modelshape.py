"""tui/core/host/modelshape.py: what vLLM refuses at startup for a model's shape, from config.json alone."""

from __future__ import annotations

import pytest

from tui.core.host import modelshape as ms
from tui.sim.hub import GPT_OSS_120B_CONFIG, LLAMA_31_8B_CONFIG, speculators_config

GPT = ms.shape_of(GPT_OSS_120B_CONFIG, "openai/gpt-oss-120b")
DRAFT = ms.shape_of(speculators_config(), "RedHatAI/gpt-oss-120b-speculator.eagle3", "draft")


def cfg(**kw):
    base = {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32}
    base.update(kw)
    return base


# (config, derived max length) — vLLM's _get_and_verify_max_len / derive_max_model_len_and_key.
MAX_LEN_TABLE = [
    pytest.param(GPT_OSS_120B_CONFIG, 131072, id="gpt-oss yarn: max_position_embeddings already scaled"),
    pytest.param(LLAMA_31_8B_CONFIG, 131072, id="llama3 rope: factor not applied"),
    pytest.param(cfg(max_position_embeddings=4096, rope_scaling={"type": "linear", "factor": 4.0}), 16384,
                 id="linear rope ('type' key): × factor"),
    pytest.param(cfg(max_position_embeddings=4096, rope_parameters={"rope_type": "dynamic", "factor": 2.0}), 8192,
                 id="dynamic rope in transformers 5's rope_parameters: × factor"),
    pytest.param(cfg(max_position_embeddings=8192, rope_scaling={"rope_type": "default"}), 8192,
                 id="default rope has no factor"),
    pytest.param(cfg(max_position_embeddings=8192, rope_scaling={"rope_type": "linear", "factor": None}), 8192,
                 id="null factor falls back to 1"),
    pytest.param(cfg(max_position_embeddings=4096, rope_scaling={"rope_type": "longrope", "factor": 32.0}), 4096,
                 id="longrope: already scaled"),
    pytest.param(cfg(model_type="gemma3_text", max_position_embeddings=131072,
                     rope_scaling={"rope_type": "linear", "factor": 8.0}), 131072, id="gemma3 skips the factor"),
    pytest.param(cfg(max_position_embeddings=32768,
                     rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
                 131072, id="yarn read either way: the larger (original × factor before vLLM's realignment)"),
    pytest.param(cfg(max_position_embeddings=4096,
                     rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0},
                                      "sliding_attention": {"rope_type": "default"}}), 8192,
                 id="rope parameters per layer type"),
    pytest.param(cfg(n_positions=1024, max_position_embeddings=2048), 1024, id="the smallest of the length keys"),
    pytest.param(cfg(max_position_embeddings=8192, model_max_length=131072), 131072, id="model_max_length wins"),
    pytest.param({"model_type": "llava", "text_config": cfg(max_position_embeddings=4096)}, 4096,
                 id="a multimodal model's text_config"),
    pytest.param(cfg(), None, id="no length key: not checked (vLLM accepts any max_model_len)"),
]


def test_yarn_by_vllm_version():
    qwen = cfg(max_position_embeddings=32768,
               rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    assert ms.shape_of(qwen, "m", yarn_realigned=ms.yarn_realigned((0, 32, 0)))["max_len"] == 32768  # as vLLM 0.32
    assert ms.shape_of(qwen, "m", yarn_realigned=False)["max_len"] == 131072
    assert ms.yarn_realigned((0, 29, 0)) is None and ms.yarn_realigned(None) is None


@pytest.mark.parametrize("config,expected", MAX_LEN_TABLE)
def test_derived_max_len_follows_vllm(config, expected):
    assert ms.shape_of(config, "m")["max_len"] == expected


def test_shape_of_reads_heads_kv_heads_layers_and_the_drafts_transformer_layer_config():
    assert (GPT["heads"], GPT["kv_heads"], GPT["layers"], GPT["max_len"]) == (64, 8, 36, 131072)
    assert (DRAFT["heads"], DRAFT["kv_heads"], DRAFT["layers"]) == (64, 8, 1)
    mha = ms.shape_of({"num_attention_heads": 12, "num_hidden_layers": 12, "n_positions": 1024}, "gpt2")
    assert mha["kv_heads"] == 12  # no KV-head key: every head has its own KV head
    falcon = ms.shape_of({"num_attention_heads": 64, "n_head_kv": 4, "num_hidden_layers": 4}, "falcon")
    assert falcon["kv_heads"] == 4
    assert ms.shape_of(None, "x") is None


# (heads, kv heads, tp, vLLM accepts it)
TP_TABLE = [
    (64, 8, 16, True), (64, 8, 15, False), (64, 8, 64, True), (64, 8, 128, False),
    (32, 8, 16, True),   # 16 % 8 == 0: KV heads replicated
    (48, 8, 12, False),  # 48 % 12 == 0, but 8 % 12 and 12 % 8 are not
    (48, 8, 24, True), (40, 40, 8, True), (40, 40, 3, False), (4, 2, 4, True), (4, 2, 3, False),
]


@pytest.mark.parametrize("heads,kv,tp,ok", TP_TABLE)
def test_tp_against_attention_and_kv_heads(heads, kv, tp, ok):
    assert ms.tp_ok(tp, heads, kv) is ok
    shape = {"name": "m", "heads": heads, "kv_heads": kv}
    issues = ms.check({"target": shape}, {"tensor_parallel_size": tp}, {})
    assert (issues == []) is ok


def test_tp15_for_gpt_oss_names_the_head_count_and_the_valid_tps():
    (issue,) = ms.check({"target": GPT}, {"tensor_parallel_size": 15}, {})
    key, level, msg = issue
    assert (key, level) == (ms.TP_KEY, ms.ERROR)
    assert "TP 15 does not divide the 64 attention heads of openai/gpt-oss-120b" in msg
    assert "use 1, 2, 4, 8, 16, 32 or 64" in msg


def test_kv_head_refusal_names_the_kv_heads():
    (issue,) = ms.check({"target": {"name": "m", "heads": 48, "kv_heads": 8}}, {"tensor_parallel_size": 12}, {})
    assert "8 KV heads" in issue[2] and "use 1, 2, 4, 8, 16, 24 or 48" in issue[2]


def test_valid_tps_stay_within_the_cores_and_start_where_the_weights_fit():
    (issue,) = ms.check({"target": GPT}, {"tensor_parallel_size": 15}, {}, tp_limit=32,
                        tp_limit_why="within the 32 logical cores", tp_at_least=16)
    assert "use 16 or 32 (within the 32 logical cores; TP 16 or more for the HBM)" in issue[2]
    assert ms.suggest_tp(15, 64, 8, 64, 16) == 16
    assert ms.suggest_tp(3, 64, 8, 64, 16) == 16
    assert ms.suggest_tp(100, 64, 8, 64) == 64  # nothing valid above: the largest that is


def test_the_draft_is_checked_at_its_own_tp():
    small = {"name": "d", "heads": 32, "kv_heads": 8}
    target = {"name": "t", "heads": 64, "kv_heads": 8}
    (issue,) = ms.check({"target": target, "draft": small}, {"tensor_parallel_size": 64}, {})
    assert issue[0] == ms.TP_KEY and "of the draft d" in issue[2] and "draft_tensor_parallel_size = 1" in issue[2]
    assert ms.check({"target": target, "draft": small}, {"tensor_parallel_size": 64},
                    {"draft_tensor_parallel_size": 1}) == []
    both = ms.check({"target": GPT, "draft": DRAFT}, {"tensor_parallel_size": 15}, {})
    assert [k for k, _, _ in both] == [ms.TP_KEY, ms.TP_KEY]


def test_max_model_len_against_the_positions_and_the_override():
    issues = ms.check({"target": GPT}, {"tensor_parallel_size": 16, "max_model_len": 131073}, {})
    assert [(k, lvl) for k, lvl, _ in issues] == [(ms.LEN_KEY, ms.ERROR)]
    assert "131073 exceeds the 131072 positions of openai/gpt-oss-120b" in issues[0][2]
    assert ms.check({"target": GPT}, {"tensor_parallel_size": 16, "max_model_len": 131072}, {}) == []
    assert ms.check({"target": GPT}, {"tensor_parallel_size": 16, "max_model_len": 0}, {}) == []  # not sent
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN: vLLM accepts it, so a warning, not a refusal (from the profile or the caller).
    env = {"tensor_parallel_size": 16, "max_model_len": 200000, "env": {ms.ALLOW_LONG: "1"}}
    assert [lvl for _, lvl, _ in ms.check({"target": GPT}, env, {})] == [ms.WARN]
    assert [lvl for _, lvl, _ in ms.check({"target": GPT}, {"max_model_len": 200000}, {}, allow_long=True)] == \
        [ms.WARN]


def test_pipeline_stages_against_the_layers():
    (issue,) = ms.check({"target": GPT}, {"tensor_parallel_size": 1, "pipeline_parallel_size": 40}, {})
    assert issue[0] == ms.PP_KEY and "36 layers" in issue[2] and "at most 36" in issue[2]
    assert ms.check({"target": GPT}, {"tensor_parallel_size": 1, "pipeline_parallel_size": 36}, {}) == []


def test_unknown_shapes_are_not_checked():
    assert ms.check(None, {"tensor_parallel_size": 15}, {}) == []
    assert ms.check({"target": {"name": "m", "heads": None, "kv_heads": None}}, {"tensor_parallel_size": 15}, {}) == []


def test_machine_limits_from_the_environment_facts():
    gib = 1024**3
    trn2 = {"logical_cores": 64, "hbm_per_core": 24 * gib, "weights_bytes": int(234e9)}
    limit, why, at_least = ms.machine_limits(trn2, "neuron")
    assert (limit, at_least) == (64, 16) and "64 logical cores" in why
    assert ms.machine_limits({"visible_gpus": [0, 1, 2, 3]}, "cuda", pp=2)[0] == 2
    assert ms.machine_limits({}, "cpu") == (None, "", 1)
