"""The one version type (tui.core.versions) of the engine and the simulator."""

from __future__ import annotations

import pytest

from tui.core import versions
from tui.core.plan.commands import dataset_mode
from tui.core.plan.workloads import serve_flags_for_per_request
from tui.core.profile.model import load_profile
from tui.sim.config import sim_config


@pytest.mark.parametrize("text, rel", [
    ("0.11.1rc5", (0, 11, 1)),  # the old commands parser gave (0, 11, 15)
    ("0.32.0+cpu", (0, 32, 0)),
    ("0.33.0.dev12+g1234", (0, 33, 0)),
    ("0.24.0.1.1.0", (0, 24, 0, 1, 1, 0)),
    ("2.27.5334.0+f702b353", (2, 27, 5334, 0)),
    ("1:2.32.28.0-1", (2, 32, 28, 0)),  # dpkg epoch and revision
    ("12.4", (12, 4)),
    ("2.x-beta", (2,)),
    ("", None),
    (None, None),
    ("unknown", None),
])
def test_release(text, rel):
    assert versions.release(text) == rel


def test_ordering_is_pep440():
    assert versions.parse("0.11.1rc5") < versions.parse("0.11.1") < versions.parse("0.11.2")
    assert versions.parse("0.33.0.dev12+g1234") < versions.parse("0.33.0")
    assert versions.parse("0.32.0+cpu") > versions.parse("0.31.9")


@pytest.mark.parametrize("text, minimum, want", [
    ("0.32.0rc1", (0, 32), True),  # an rc of 0.32 carries 0.32's flags
    ("0.31.2", (0, 32), False),
    ("0.32", (0, 32, 0), True),
    ("0.11.1rc5", (0, 11, 2), False),
    (None, (0, 32), None),
])
def test_at_least(text, minimum, want):
    assert versions.at_least(text, minimum) is want


def test_engine_and_simulator_share_it():
    import tui.core.host.sysinfo as sysinfo
    import tui.sim.bench.args as sim_bench_args
    import tui.sim.serve as sim_serve
    import tui.sim.serve.args as sim_serve_args
    import tui.sim.standin as standin

    assert sysinfo.version_tuple is versions.release
    assert sim_bench_args.release is versions.release and sim_serve_args.release is versions.release
    assert standin.release is versions.release
    assert dataset_mode("0.33.0.dev12+g1234") == "custom-from-sonnet"
    assert dataset_mode("0.31.0rc2") == "sonnet"
    assert serve_flags_for_per_request("0.29.0rc1", True) == ["--per-request-spec-decode-metrics", "summary"]
    assert serve_flags_for_per_request("0.28.9", True) == []
    # the simulated serve parser has the per-request flag from 0.29 on, whatever the suffix
    assert "--per-request-spec-decode-metrics" in sim_serve.build_parser("0.29.0+sim").format_help()
    assert "--per-request-spec-decode-metrics" not in sim_serve.build_parser("0.28.1").format_help()


@pytest.mark.parametrize("version,platform,served", [
    ("0.29.0", "neuron", True), ("0.33.9", "neuron", True), ("0.34.0", "neuron", False), ("0.28.9", "cuda", False),
    ("0.34.0", "cuda", True), ("0.34.2rc1", "cpu", True), ("0.35.0", "cuda", False), ("0.34.0", None, True),
    ("1.0", None, False), ("0.32.0+cpu", "cpu", True),
])
def test_one_served_rule(version, platform, served):
    problem = versions.served_problem(version, platform)
    assert (problem is None) == served, problem
    if not served:
        assert f"vLLM {version} is outside the releases specdec-tui serves" in problem
        assert versions.served_text(platform) in problem


def test_the_neuron_limit_says_why_and_the_demo_plays_a_served_release():
    assert "vllm.v1.spec_decode.metadata" in versions.served_problem("0.34.0", "neuron")
    assert "vllm.v1.spec_decode.metadata" not in versions.served_problem("0.35.0", "neuron")  # past every platform
    assert versions.served_problem(versions.DEMO_VLLM, "neuron") is None
    assert versions.served_text() == "0.29 to 0.34" and versions.served_text("neuron") == "0.29 to 0.33"
    assert load_profile("demo").declared_vllm_version == versions.DEMO_VLLM == sim_config({})["vllm_version"]
