"""tui/core/host/livecheck.py: the Profile pane's as-you-type checks against the environment step's facts."""

from __future__ import annotations

from tui.core.host.livecheck import ERROR, WARN, check_edits
from tui.core.profile.model import load_profile

GIB = 1024**3
# What the env step stores on a trn2.48xlarge for GPT-OSS-120B + its EAGLE3 draft in BF16.
TRN2 = {"platform": "neuron", "logical_cores": 64, "hbm_per_core": 24 * GIB,
        "weights_bytes": int(116.8e9 * 2) + int(0.855e9 * 2), "busy_cores": []}


def keys(issues):
    return [(k, level) for k, level, _ in issues]


def test_tp_against_hbm_per_core_names_the_smallest_tp_that_fits():
    demo = load_profile("demo")
    (issue,) = check_edits(demo, TRN2, {"server.tensor_parallel_size": 8})
    key, level, msg = issue
    assert (key, level) == ("server.tensor_parallel_size", ERROR)
    assert "TP 8 needs 28.0 GiB HBM per logical core" in msg and "24.0 GiB" in msg and "TP 16 or higher" in msg
    assert check_edits(demo, TRN2, {"server.tensor_parallel_size": 16}) == []
    assert check_edits(demo, TRN2, {"server.tensor_parallel_size": 32}) == []


def test_tp_against_the_logical_cores():
    issues = check_edits(load_profile("demo"), TRN2, {"server.tensor_parallel_size": 128})
    assert keys(issues) == [("server.tensor_parallel_size", ERROR)]
    assert "TP 128 needs 128 logical cores; this instance has 64" in issues[0][2]


def test_a_model_too_large_for_every_tp_says_so():
    facts = dict(TRN2, weights_bytes=4000 * GIB)
    (_, _, msg), = check_edits(load_profile("demo"), facts, {"server.tensor_parallel_size": 64})
    assert "fit at no TP on this instance" in msg


def test_unknown_facts_are_not_checked():
    demo = load_profile("demo")
    facts = {"platform": "neuron", "logical_cores": None, "hbm_per_core": 24 * GIB, "weights_bytes": None}
    assert check_edits(demo, facts, {"server.tensor_parallel_size": 2}) == []
    assert check_edits(demo, {}, {"server.tensor_parallel_size": 2}) == []  # env not run yet
    assert check_edits(demo, None) == []


def test_busy_cores_warn_only_where_the_tp_uses_them():
    demo = load_profile("demo")
    facts = dict(TRN2, busy_cores=list(range(16, 20)))
    assert check_edits(demo, facts, {"server.tensor_parallel_size": 16}) == []
    issues = check_edits(demo, facts, {"server.tensor_parallel_size": 32})
    assert keys(issues) == [("server.tensor_parallel_size", WARN)] and "cores 16-19" in issues[0][2]


def test_the_port_is_probed_with_the_edited_host_and_port():
    asked = []

    def free(host, port):  # port 8124 is taken
        asked.append((host, port))
        return port != 8124

    demo = load_profile("demo")
    issues = check_edits(demo, TRN2, {"server.port": 8124}, port_free=free)
    assert keys(issues) == [("server.port", WARN)] and "port 8124 on 127.0.0.1 is in use" in issues[0][2]
    assert check_edits(demo, TRN2, {"server.port": 8123}, port_free=free) == []
    assert asked == [("127.0.0.1", 8124), ("127.0.0.1", 8123)]
    assert check_edits(demo, TRN2, {"server.port": 8124}) == []  # no probe given: not checked


def test_lengths_against_max_model_len_mark_both_lengths():
    issues = check_edits(load_profile("demo"), {}, {"benchmark.input_len": 700})
    assert keys(issues) == [("benchmark.input_len", ERROR), ("benchmark.output_len", ERROR)]
    assert "700 + 128 = 828 > server.max_model_len 768" in issues[0][2]
    assert check_edits(load_profile("demo"), {}, {"benchmark.input_len": 640}) == []


def test_cuda_tp_times_pp_against_the_visible_gpus():
    facts = {"platform": "cuda", "visible_gpus": [0, 1, 2, 3]}
    prof = load_profile("llama-3.1-8b-eagle3-cuda")
    issues = check_edits(prof, facts, {"server.tensor_parallel_size": 8})
    assert keys(issues) == [("server.tensor_parallel_size", ERROR)] and "needs 8 GPUs; 4 visible" in issues[0][2]
    assert check_edits(prof, facts, {"server.tensor_parallel_size": 4}) == []


# The checkpoints step's record of the models' shape (its StepResult facts "model_shape"), as the app merges it
# into the facts once that step has read the config.json files.
GPT_SHAPE = {"target": {"name": "openai/gpt-oss-120b", "heads": 64, "kv_heads": 8, "layers": 36, "max_len": 131072,
                        "max_len_source": "max_position_embeddings = 131072"},
             "draft": {"name": "RedHatAI/gpt-oss-120b-speculator.eagle3", "heads": 64, "kv_heads": 8, "layers": 1,
                       "max_len": 131072, "max_len_source": "max_position_embeddings = 131072"},
             "allow_long": False}


def test_tp_against_the_models_heads_once_the_config_is_known():
    demo = load_profile("demo")
    facts = dict(TRN2, model_shape=GPT_SHAPE)
    issues = check_edits(demo, facts, {"server.tensor_parallel_size": 15})
    assert keys(issues)[0] == ("server.tensor_parallel_size", ERROR)
    assert "TP 15 does not divide the 64 attention heads of openai/gpt-oss-120b" in issues[0][2]
    assert "use 16, 32 or 64" in issues[0][2]  # within the 64 cores, from the TP whose weights fit the HBM
    assert check_edits(demo, facts, {"server.tensor_parallel_size": 32}) == []
    # Without the environment's facts the heads still decide (all TPs that divide them).
    (first, *_) = check_edits(demo, {"model_shape": GPT_SHAPE}, {"server.tensor_parallel_size": 15})
    assert "use 1, 2, 4, 8, 16, 32 or 64" in first[2]
    # Not known yet (the checkpoints step has not read the configs): not checked.
    assert check_edits(demo, {}, {"server.tensor_parallel_size": 15}) == []


def test_max_model_len_and_pp_against_the_models_positions_and_layers():
    prof = load_profile("demo").with_values({"server.max_model_len": 200000, "server.pipeline_parallel_size": 40})
    issues = check_edits(prof, {"model_shape": GPT_SHAPE})
    assert ("server.max_model_len", ERROR) in keys(issues) and ("server.pipeline_parallel_size", ERROR) in keys(issues)
    allowed = dict(GPT_SHAPE, allow_long=True)
    assert ("server.max_model_len", WARN) in keys(check_edits(prof, {"model_shape": allowed}))
