"""A load sweep's plan and profile (issue 17): [tune] concurrency / min_waves / slo / verify_schedule and the
[speculative.extra] passthrough, as the plan builds them into argv and the profile checks refuse them."""

from __future__ import annotations

import json
import shlex

import pytest

from tui.core.plan.arms import SCHEDULE_PENDING, arms_of, bench_keys, result_name, schedule_verifiable, split_key
from tui.core.plan.build import build_plan
from tui.core.plan.commands import format_command, level_prompts, server_settings
from tui.core.profile.errors import ProfileError
from tui.core.profile.model import load_profile


def _prof(tmp_path, body: str, extends: str = "tune-load-demo"):
    f = tmp_path / "p.toml"
    f.write_text(f'extends = "{extends}"\n' + body)
    return load_profile(str(f))


CUDA_SWEEP = '[tune]\nnum_speculative_tokens = [1, 2, 3]\nconcurrency = [1, 2, 4, 8]\n'


def _cuda(tmp_path, body: str = ""):
    """A cuda profile (its vLLM has dynamic speculative decoding) with a load sweep."""
    return _prof(tmp_path, CUDA_SWEEP + body, extends="gpt-oss-20b-eagle3-cuda")


def _flag(argv, flag):
    return argv[list(argv).index(flag) + 1]


def test_each_arm_is_launched_once_with_room_for_the_largest_level_and_benched_at_every_level():
    prof = load_profile("tune-load-demo")
    levels = prof.data["tune"]["concurrency"]
    plan = build_plan(prof, "/r", "0.29.0")
    for arm in arms_of(prof):
        serves = plan.of(arm.id, "serve")
        assert len(serves) == 1
        argv = serves[0].argv
        assert _flag(argv, "--max-num-seqs") == str(max(levels))
        nc = json.loads(_flag(argv, "--additional-config"))["neuron_config"]
        assert nc["num_seqs_buckets"] == sorted(levels)  # vllm-neuron: the largest bucket equals max_num_seqs
        benches = plan.of(arm.id, "bench")
        assert [b.workload for b in benches] == [k for k in bench_keys(prof)
                                                 for _ in range(prof.data["tune"]["repeats"])]
        for b in benches:
            wl, n = split_key(b.workload)
            assert _flag(b.argv, "--max-concurrency") == str(n)
            assert int(_flag(b.argv, "--num-prompts")) == max(prof.benchmark.num_prompts,
                                                              prof.data["tune"]["min_waves"] * n) == level_prompts(prof, n)
            assert _flag(b.argv, "--result-filename") == f"/r/{result_name(prof, arm.id, b.workload, b.repeat)}"
            assert _flag(b.argv, "--result-filename").endswith(f".{wl}.c{n}.r{b.repeat}.json")
            g = list(b.argv)[list(b.argv).index("--goodput") + 1:][:2]
            slo = prof.data["tune"]["slo"]
            assert g == [f"ttft:{slo['ttft_ms']:g}", f"tpot:{slo['tpot_ms']:g}"]


def test_a_sweep_on_neuron_has_no_schedule_arm_and_says_why(tmp_path):
    prof = load_profile("tune-load-demo")
    assert not any(a.schedule for a in arms_of(prof))
    assert "vllm-neuron" in schedule_verifiable(prof)


def test_a_sweep_where_vllm_has_dynamic_speculation_gets_a_schedule_arm_shown_as_pending(tmp_path):
    prof = _cuda(tmp_path)
    arms = arms_of(prof)
    sched = [a for a in arms if a.schedule]
    assert len(sched) == 1 and arms[-1] is sched[0] and sched[0].num_speculative_tokens == 3
    serve = build_plan(prof, "/r", "0.32.0").of(sched[0].id, "serve")[0].argv
    cfg = json.loads(_flag(serve, "--speculative-config"))
    assert cfg["num_speculative_tokens_per_batch_size"] == SCHEDULE_PENDING
    off = _cuda(tmp_path, "verify_schedule = false\n")
    assert not any(a.schedule for a in arms_of(off)) and schedule_verifiable(off) == "tune.verify_schedule = false"


def test_server_settings_without_a_sweep_are_the_profiles():
    prof = load_profile("tune-demo")
    assert server_settings(prof) == prof.server and bench_keys(prof) == prof.data["tune"]["workloads"]


@pytest.mark.parametrize("body,names", [
    ('[speculative.extra]\nnum_speculative_tokens = 2\n', "speculative.extra.num_speculative_tokens"),
    ('[speculative.extra]\nrejection_sample_method = "magic"\n', "speculative.extra.rejection_sample_method"),
    ('[speculative.extra]\nrejection_sample_method = "synthetic"\nsynthetic_acceptance_rates = [0.7, 0.5]\n',
     "speculative.extra.synthetic_acceptance_rates"),
    ('[speculative.extra]\nrejection_sample_method = "synthetic"\nsynthetic_acceptance_rates = [0.5, 0.6, 0.4]\n',
     "speculative.extra.synthetic_acceptance_rates"),
    ('[speculative.extra]\nsynthetic_acceptance_rates = [0.7, 0.5, 0.3]\n', "speculative.extra.synthetic_acceptance_rates"),
    ('[speculative.extra]\nrejection_sample_method = "synthetic"\n', "synthetic_acceptance_rates"),
    ('[speculative.extra]\nrejection_sample_method = "synthetic"\nsynthetic_acceptance_length = 3.5\n',
     "speculative.extra.synthetic_acceptance_length"),
    ('[speculative.extra]\ndraft_sample_method = "beam"\n', "speculative.extra.draft_sample_method"),
    ('[speculative.extra]\nparallel_drafting = "yes"\n', "speculative.extra.parallel_drafting"),
    ('[speculative.extra]\nnum_speculative_tokens_per_batch_size = [[1, 4, 2]]\n',
     "num_speculative_tokens_per_batch_size"),  # neuron: no dynamic speculative decoding
    ('[tune]\nslo = {ttft_ms = 100, p99 = 3}\n', "tune.slo.p99"),
    ('[tune]\nslo = {ttft_ms = -1}\n', "tune.slo.ttft_ms"),
    ('[tune]\nslo = {attainment = 0.9}\n', "tune.slo"),
    ('[tune]\nconcurrency = [1, 1]\n', "tune.concurrency"),
    ('[tune]\nslo = {ttft_ms = 100.0}\n', "tune.concurrency"),  # an SLO is judged per level
])
def test_bad_load_and_passthrough_settings_are_refused_naming_the_key(tmp_path, body, names):
    with pytest.raises(ProfileError) as err:
        _prof(tmp_path, body, extends="tune-demo")
    msg = str(err.value)
    assert names in msg and "\n" not in msg and "Traceback" not in msg


@pytest.mark.parametrize("sched,ok", [
    ([[1, 2, 1], [3, 16, 0]], True),
    ([[1, 16, 1]], True),
    ([[1, 2, 2], [3, 16, 0]], False),  # k = 2 above the arm with k = 1: vLLM would cap it silently
    ([[2, 16, 1]], False),  # must start at 1
    ([[1, 4, 2], [4, 16, 1]], False),  # overlapping
    ([[1, 4, -1]], False),
    ([[1, 4]], False),
    ([], False),
])
def test_a_schedule_follows_vllms_rules(tmp_path, sched, ok):
    body = f"[speculative.extra]\nnum_speculative_tokens_per_batch_size = {json.dumps(sched)}\n"
    if ok:
        prof = _cuda(tmp_path, body)
        assert all(a.schedule is False for a in arms_of(prof))  # the profile's own schedule: nothing to derive
    else:
        with pytest.raises(ProfileError, match="num_speculative_tokens_per_batch_size"):
            _cuda(tmp_path, body)


def test_a_flag_with_several_values_stays_on_one_line_and_round_trips():
    argv = ["vllm", "bench", "serve", "--goodput", "ttft:500", "tpot:12", "--seed", "3", "--save-result"]
    text = format_command(argv)
    assert "  --goodput ttft:500 tpot:12 \\" in text.splitlines()
    assert shlex.split(text.replace("\\\n", " ")) == argv
