"""The fleet (`--ray`, tui/core/exec/ray.py) on a real local Ray cluster: `ray.cluster_utils.Cluster` runs several
real Ray nodes (raylets) on this machine, each declaring 32 `neuron_cores`, so a node holds its own baseline and
one TP16 arm at a time and two arms land one per node. Each node's simulated trn2 is the profile's [stand_in],
started on that node by its agent. Every address is 127.0.0.1 (CI runs this in a loopback-only namespace).

One cluster for the module (bringing one up costs seconds); the test that kills a node adds its own node first and
runs last. The numbers come from the simulator's servers and benches; what is checked is where they ran, that
every file landed in the driver's run directory, that each speedup is against its own node's baseline, and that
nothing is left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from e2e_util import FAST_SIM, child_env, free_port, run_cli, wait_for, wait_gone
from tui.core.profile.model import load_profile
from tui.core.results.intervals import ratio_interval

ray = pytest.importorskip("ray")

NODE_CORES = 32  # a node holds its baseline and one TP16 arm at once
SAFETY_S = 60.0  # a safety net only (the README's teardown figure is measured by tests/perf/bench_fleet.py)
TUNE = dict(FAST_SIM, **{"benchmark.num_prompts": 5, "benchmark.output_len": 24, "tune.num_speculative_tokens": [1, 2],
                         "tune.repeats": 2, "tune.workloads": ["sonnet"], "tune.probe_prompts": 2})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """Two Ray nodes on 127.0.0.1 (the head is one of them); the workers' caches live in a temporary directory."""
    from ray.cluster_utils import Cluster

    home = tmp_path_factory.mktemp("fleet-home")
    saved = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME", "RAY_ADDRESS")}
    os.environ["XDG_CACHE_HOME"] = str(home / "cache")  # the nodes' {cache_dir}: their simulated compile cache
    os.environ.pop("RAY_ADDRESS", None)
    node = {"num_cpus": 1, "resources": {"neuron_cores": float(NODE_CORES)}, "node_ip_address": "127.0.0.1",
            "object_store_memory": 80 * 1024 * 1024}
    c = Cluster(initialize_head=True, head_node_args=dict(node, include_dashboard=False))
    c.add_node(**node)
    c.wait_for_nodes()
    try:
        yield c
    finally:
        c.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def tune_profile(tmp_path: Path, name: str = "fleet-tune", **updates: Any) -> tuple[Path, int]:
    port = free_port()
    values: dict[str, Any] = dict(TUNE, **{"server.port": port, "name": name})
    values.update({k.replace("__", "."): v for k, v in updates.items()})
    path = tmp_path / f"{name}.toml"
    path.write_text(load_profile("tune-demo").with_values(values).to_toml())
    return path, port


def servers_on(port: int) -> list[psutil.Process]:
    """The simulated servers of a run whose server.port is `port` (each arm takes a port from there up)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if "tui.sim" not in cmd or "serve" not in cmd or "--port" not in cmd:
            continue
        try:
            got = int(cmd[cmd.index("--port") + 1])
        except (ValueError, IndexError):
            continue
        if port <= got < port + 200:
            out.append(p)
    return out


def state(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / "state.json").read_text())
    except (OSError, ValueError):
        return {}


# a driver on the loopback cluster, dialled as the app dials it (exec/cluster.py: Ray would rewrite 127.0.0.1)
RAY_INIT = """import json, ray
from tui.core.exec.cluster import loopback_as_given
with loopback_as_given():
    ray.init(address=%r, _node_ip_address="127.0.0.1", log_to_driver=False, logging_level="ERROR")
"""


def ray_nodes(address: str) -> list[dict[str, Any]]:
    """The cluster's nodes as Ray lists them (from a child process: this test process stays off the cluster)."""
    code = (RAY_INIT % address + "print(json.dumps([{k: n[k] for k in ('NodeID', 'Alive', 'Resources')} "
            "for n in ray.nodes()]))\nray.shutdown()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def free_neuron_cores(address: str) -> float:
    code = RAY_INIT % address + "print(ray.available_resources().get('neuron_cores', 0))\nray.shutdown()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return float(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else -1.0


# -- before anything runs: exit 2, one paragraph ---------------------------------------------------------------

def test_unreachable_cluster_exits_2_naming_the_address(tmp_path: Path):
    prof, _ = tune_profile(tmp_path)
    addr = f"127.0.0.1:{free_port()}"
    out = run_cli(tmp_path, "--profile", str(prof), "--ray", addr, "--headless", "--run-dir", "run")
    assert out.returncode == 2, out.stderr
    assert f"cannot reach the Ray cluster at {addr}" in out.stderr and "ray start --head" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "run").exists()


def test_two_arm_profile_is_refused_with_the_way_out(tmp_path: Path):
    out = run_cli(tmp_path, "--profile", "demo", "--ray", "127.0.0.1:1", "--headless")
    assert out.returncode == 2
    assert "has no [tune] table" in out.stderr and "tune-demo" in out.stderr


def test_without_ray_the_paragraph_names_the_extra(tmp_path: Path):
    prof, _ = tune_profile(tmp_path)
    code = ("import sys; sys.modules['ray'] = None; from tui.cli import main; "
            f"sys.exit(main(['--profile', {str(prof)!r}, '--ray', '127.0.0.1:6379', '--headless']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env=child_env(tmp_path), timeout=120)
    assert out.returncode == 2, out.stderr
    assert "pip install 'specdec-tui[fleet]'" in out.stderr and "Traceback" not in out.stderr


def test_no_node_with_room_names_the_largest_node(tmp_path: Path, cluster):
    prof, _ = tune_profile(tmp_path, **{"server.tensor_parallel_size": 64})
    out = run_cli(tmp_path, "--profile", str(prof), "--ray", cluster.address, "--headless", "--run-dir", "run")
    assert out.returncode == 2, out.stderr
    assert "neuron_cores 64" in out.stderr and f"neuron_cores {NODE_CORES}" in out.stderr
    assert "the largest" in out.stderr and not (tmp_path / "run").exists()


def test_ray_version_mismatch_exits_2_naming_both(tmp_path: Path, cluster):
    """The cluster's recorded Ray version (what `ray.init` checks) says 2.59.0: refused, both versions named."""
    from ray._common.usage import usage_constants
    from ray._private import ray_constants
    from ray._raylet import GcsClient

    gcs = GcsClient(address=cluster.address)
    key, ns = usage_constants.CLUSTER_METADATA_KEY, ray_constants.KV_NAMESPACE_CLUSTER
    saved = gcs.internal_kv_get(key, namespace=ns)
    meta = json.loads(saved)
    gcs.internal_kv_put(key, json.dumps(dict(meta, ray_version="2.59.0")).encode(), True, namespace=ns)
    try:
        prof, _ = tune_profile(tmp_path)
        out = run_cli(tmp_path, "--profile", str(prof), "--ray", cluster.address, "--headless")
    finally:
        gcs.internal_kv_put(key, saved, True, namespace=ns)
    assert out.returncode == 2, out.stderr
    assert "Ray: 2.59.0" in out.stderr and f"Ray {ray.__version__}" in out.stderr


def test_show_commands_gives_the_plan_per_node_group(tmp_path: Path, cluster):
    prof, port = tune_profile(tmp_path)
    out = run_cli(tmp_path, "--profile", str(prof), "--ray", cluster.address, "--show-commands")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "node group n1" in text and "node group n2" in text
    assert "baseline-n2.sonnet.r1.json" in text and "eagle3-k2.sonnet.r2.json" in text
    assert "reserves neuron_cores 16" in text and "Ray places each" in text


# -- a run on two nodes ----------------------------------------------------------------------------------------

RUN: dict[str, Any] = {}


def test_a_tune_run_on_two_nodes_is_as_if_local(tmp_path: Path, cluster):
    prof, port = tune_profile(tmp_path)
    run_dir = tmp_path / "run"
    out = run_cli(tmp_path, "--profile", str(prof), "--ray", cluster.address, "--headless", "--run-dir", str(run_dir),
                  timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    st = state(run_dir)
    nodes = st["fleet"]["nodes"]
    assert set(nodes) == {"n1", "n2"} and all(n["address"] == "127.0.0.1" for n in nodes.values())
    assert {nodes[k]["id"] for k in nodes} == {n["NodeID"] for n in ray_nodes(cluster.address)}
    # the arms ran on both nodes, each with the node object in state.json and in report.json
    arm_nodes = {sid: st["steps"][sid]["facts"]["node"]["key"] for sid in ("eagle3-k1", "eagle3-k2")}
    assert set(arm_nodes.values()) == {"n1", "n2"}
    rep = json.loads((run_dir / "report.json").read_text())
    by_id = {a["id"]: a for a in rep["matrix"]["arms"]}
    for sid, key in arm_nodes.items():
        assert by_id[sid]["node"]["key"] == key and by_id[sid]["node"]["id"] == nodes[key]["id"]
        assert by_id[sid]["node"]["host"]["instance_type"] == "trn2.48xlarge"
        assert by_id[sid]["placement"]["neuron_visible_devices"] in ("0-15", "16-31")
    # a baseline on each node, under its own names; the first node's keep the single-host names
    base = st["steps"]["baseline"]["facts"]["nodes"]
    assert set(base) == {"n1", "n2"}
    for arm in ("baseline", "baseline-n2", "eagle3-k1", "eagle3-k2"):
        for name in (f"{arm}.command.sh", f"{arm}.serve.log", f"{arm}.smoke.json", f"{arm}.sonnet.probe.json",
                     f"{arm}.sonnet.r1.json", f"{arm}.sonnet.r2.json", f"{arm}.sonnet.r1.bench.log"):
            assert (run_dir / name).is_file(), name
    assert "Application startup complete" in (run_dir / "eagle3-k2.serve.log").read_text()
    for name in ("env.json", "env.n2.json", "checkpoints.json", "checkpoints.n2.json", "sonnet.txt", "stand-in.log",
                 "stand-in.n2.log", "commands.json", "report.md", "report.json", "summary.csv"):
        assert (run_dir / name).is_file(), name
    assert not list(run_dir.glob("*specdec-*")) and "/tmp/specdec-" not in (run_dir / "report.json").read_text()
    # every speedup against the baseline of the arm's own node (Fieller's ratio of the two nodes' own numbers)
    for sid, key in arm_nodes.items():
        nb = "baseline" if key == "n1" else "baseline-n2"
        arm_v = [json.loads((run_dir / f"{sid}.sonnet.r{r}.json").read_text())["output_throughput"] for r in (1, 2)]
        base_v = [json.loads((run_dir / f"{nb}.sonnet.r{r}.json").read_text())["output_throughput"] for r in (1, 2)]
        want = ratio_interval(arm_v, base_v)
        got = rep["matrix"]["cells"][sid]["sonnet"]["speedup"]
        assert got["ratio"] == pytest.approx(want["ratio"], rel=1e-6)
        assert rep["fleet"]["pairing"][sid] == [key]
    spread = rep["fleet"]["spread"]["sonnet"]
    assert set(spread["nodes"]) == {"n1", "n2"} and spread["ratio"] is not None
    assert len(rep["fleet"]["classes"]) == 1 and rep["fleet"]["classes"][0]["nodes"] == ["n1", "n2"]
    assert "## Fleet" in (run_dir / "report.md").read_text()
    # headless printed the node with each arm; nothing is left running, every NeuronCore is free again
    assert "on n1" in out.stderr and "on n2" in out.stderr
    assert servers_on(port) == []
    assert wait_for(lambda: free_neuron_cores(cluster.address) == 2 * NODE_CORES, timeout=60, interval=2)
    RUN.update(run_dir=run_dir, profile=prof, port=port, tmp=tmp_path)


def test_continuing_reruns_only_the_missing_repeat(cluster):
    if not RUN:
        pytest.skip("needs the two-node run")
    run_dir, tmp = RUN["run_dir"], RUN["tmp"]
    (run_dir / "eagle3-k2.sonnet.r2.json").unlink()
    cmds = json.loads((run_dir / "commands.json").read_text())["commands"]
    out = run_cli(tmp, "--profile", str(RUN["profile"]), "--ray", cluster.address, "--headless", "--run-dir",
                  str(run_dir), timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    new = json.loads((run_dir / "commands.json").read_text())["commands"][len(cmds):]
    benches = [(c["step"], c["argv"][c["argv"].index("--result-filename") + 1]) for c in new if c["role"] == "bench"]
    assert [(s, Path(f).name) for s, f in benches] == [("eagle3-k2", "eagle3-k2.sonnet.r2.json")], benches
    assert (run_dir / "eagle3-k2.sonnet.r2.json").is_file()
    assert "eagle3-k1" in out.stderr and "kept from the earlier run" in out.stderr
    st = state(run_dir)
    assert st["steps"]["eagle3-k2"]["status"] == "passed"
    reps = st["steps"]["eagle3-k2"]["facts"]["repeats"]["sonnet"]
    assert all(r.get("node") in ("n1", "n2") for r in reps)


def test_interrupt_stops_every_remote_server(tmp_path: Path, cluster):
    prof, port = tune_profile(tmp_path, "fleet-stop", **{"benchmark.num_prompts": 40, "benchmark.output_len": 64})
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "tui", "--profile", str(prof), "--ray", cluster.address,
                             "--headless", "--run-dir", str(run_dir)], cwd=tmp_path, env=child_env(tmp_path),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: len(servers_on(port)) >= 2, timeout=300, interval=0.5), "no servers came up"
        servers = servers_on(port)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=SAFETY_S)
        assert proc.returncode == 130, err[-3000:]
        assert wait_gone(servers, timeout=SAFETY_S) == [] and servers_on(port) == []
        print(f"every remote server gone {time.monotonic() - t0:.1f}s after SIGINT")
    finally:
        if proc.poll() is None:
            proc.kill()
    st = state(run_dir)
    assert "interrupted" in {s.get("status") for s in st["steps"].values()}
    assert wait_for(lambda: free_neuron_cores(cluster.address) == 2 * NODE_CORES, timeout=60, interval=2)


def test_a_node_lost_mid_arm_reruns_the_arm_on_another_node(tmp_path: Path, cluster):
    """A third node joins; the run may use it and the head only ([fleet] nodes). Its raylet is killed while an arm
    runs there: the arm is named failed on that node and runs again on the head, and what it had sent stays."""
    victim = cluster.add_node(num_cpus=1, resources={"neuron_cores": float(NODE_CORES)}, node_ip_address="127.0.0.1",
                              object_store_memory=80 * 1024 * 1024)
    cluster.wait_for_nodes()
    head_id = cluster.head_node.node_id
    prof, port = tune_profile(tmp_path, "fleet-lost", **{"fleet.nodes": [head_id[:12], victim.node_id[:12]],
                                                        "benchmark.num_prompts": 8})
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "tui", "--profile", str(prof), "--ray", cluster.address,
                             "--headless", "--run-dir", str(run_dir)], cwd=tmp_path, env=child_env(tmp_path),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def arm_on_victim() -> str | None:
        st = state(run_dir)
        for sid in ("eagle3-k1", "eagle3-k2"):
            s = (st.get("steps") or {}).get(sid) or {}
            if s.get("status") == "running" and (s.get("node") or {}).get("id") == victim.node_id \
                    and (run_dir / f"{sid}.serve.log").is_file():
                return sid
        return None

    try:
        assert wait_for(lambda: arm_on_victim() is not None, timeout=400, interval=0.5), "no arm ran on the node"
        sid = arm_on_victim()
        assert sid is not None
        cluster.remove_node(victim, allow_graceful=False)
        _, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-4000:]
    st = state(run_dir)
    keys = {v["id"]: k for k, v in st["fleet"]["nodes"].items()}
    lost, head = keys[victim.node_id], keys[head_id]
    facts = st["steps"][sid]["facts"]
    assert facts["node"]["key"] == head and facts["attempts"][0]["node"] == lost
    assert "node lost" in facts["attempts"][0]["failed"] and st["fleet"]["nodes"][lost].get("lost")
    assert f"failed on {lost}" in err and "once more on another node" in err
    assert (run_dir / f"{sid}.command.sh").is_file() and (run_dir / f"{sid}.sonnet.r2.json").is_file()
    rep = json.loads((run_dir / "report.json").read_text())
    assert rep["fleet"]["pairing"][sid] == [head]  # its speedup is against the head's baseline
    assert servers_on(port) == []
