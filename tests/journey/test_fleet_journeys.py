"""The README's fleet journeys, verbatim, each in a fresh working directory with the default run directory:
`specdec-tui fleet-local --nodes 2 -- specdec-tui --profile tune-demo --ray auto --headless` (the demo's tune
matrix on a local Ray cluster of two simulated trn2 nodes) and the real vLLM's small cpu tune on two local
Ray nodes of one CPU each. What is checked is where each arm ran, that each node measured its own baseline and
every speedup is against it, that every file landed in the run directory, and that nothing outlived the
command. Nothing asserts a duration; timeouts are safety nets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import Session, assert_named_files_exist, load, user_env

RUN_TIMEOUT_S = 1800


def _check_fleet_run(run_dir: Path, spec_arms: list[str], workloads: list[str], repeats: int) -> dict:
    st = load(run_dir / "state.json")
    rep = load(run_dir / "report.json")
    nodes = st["fleet"]["nodes"]
    assert set(nodes) == {"n1", "n2"} and all(n["address"] == "127.0.0.1" for n in nodes.values())
    assert set(st["steps"]["baseline"]["facts"]["nodes"]) == {"n1", "n2"}  # a baseline on each node
    for arm in ("baseline", "baseline-n2", *spec_arms):
        for wl in workloads:
            for r in range(1, repeats + 1):
                assert (run_dir / f"{arm}.{wl}.r{r}.json").is_file(), (arm, wl, r)
        assert (run_dir / f"{arm}.serve.log").is_file() and (run_dir / f"{arm}.command.sh").is_file()
    for name in ("env.json", "env.n2.json", "checkpoints.json", "checkpoints.n2.json", "report.md", "summary.csv"):
        assert (run_dir / name).is_file(), name
    on = {}
    for sid in spec_arms:
        key = st["steps"][sid]["facts"]["node"]["key"]
        on[sid] = key
        assert rep["fleet"]["pairing"][sid] == [key]  # its speedup is against its own node's baseline
        assert next(a for a in rep["matrix"]["arms"] if a["id"] == sid)["node"]["id"] == nodes[key]["id"]
    assert rep["fleet"]["spread"][workloads[0]]["nodes"].keys() == {"n1", "n2"}
    return on


@pytest.fixture(scope="module")
def sim_session(tmp_path_factory) -> Session:
    root = tmp_path_factory.mktemp("journey-fleet")
    s = Session(root, user_env(root))
    yield s
    s.reap()


def test_the_demo_tune_matrix_on_two_simulated_trn2_nodes(sim_session):
    r, run_dir = sim_session.run_saving("fleet-demo", RUN_TIMEOUT_S)
    assert "Traceback" not in r.stderr, r.why()
    rep = load(run_dir / "report.json")
    assert r.rc == rep["exit_code"], r.why()
    assert run_dir.name.endswith("-tune-demo") and rep["simulated"] is True
    assert_named_files_exist(r, sim_session.cwd)
    on = _check_fleet_run(run_dir, ["eagle3-k1", "eagle3-k2", "eagle3-k3"], ["sonnet", "chat"], 3)
    assert set(on.values()) == {"n1", "n2"}, on  # Ray spread the arms over both nodes
    for sid, key in on.items():
        assert f"({sid}) on {key}" in r.stderr  # headless named the node with the arm
    sim_session.assert_nothing_left()


@pytest.mark.realvllm
def test_a_small_real_vllm_tune_on_two_local_ray_nodes(real_vllm, tmp_path_factory):
    root = tmp_path_factory.mktemp("journey-fleet-real")
    base = real_vllm.env()
    base["PATH"] = os.environ.get("PATH", "")
    base["VLLM_CACHE_ROOT"] = base.get("VLLM_CACHE_ROOT") or str(Path.home() / ".cache" / "vllm")
    env = user_env(root, base)
    env["VLLM_PY"] = str(real_vllm.python)
    session = Session(root, env)
    try:
        r, run_dir = session.run_saving("cpu-fleet", RUN_TIMEOUT_S)
        assert "Traceback" not in r.stderr, r.why()
        rep = load(run_dir / "report.json")
        assert r.rc == rep["exit_code"], r.why()
        assert rep["simulated"] is False and rep["versions"]["vllm"].startswith("0.32.0")
        st = {s["id"]: s["status"] for s in rep["steps"]}
        assert all(st[s] in ("passed", "warned") for s in ("env", "checkpoints", "dataset", "baseline",
                                                            "eagle3-k1")), st
        _check_fleet_run(run_dir, ["eagle3-k1"], ["sonnet"], 1)
        for key, node in load(run_dir / "state.json")["fleet"]["nodes"].items():
            assert node["resources"]["CPU"] == 1.0 and node["host"]["platform"] == "cpu", (key, node)
        session.assert_nothing_left()
    finally:
        session.reap()
