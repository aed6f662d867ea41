"""The Step 3 matrix's wall time on the simulator: one node one server at a time, one node with `[tune] parallel`,
and two and three local Ray nodes (`--ray`, each node a simulated trn2.48xlarge: a real raylet of
ray.cluster_utils.Cluster declaring 64 neuron_cores), side by side in one invocation. Also Ray's own cost per arm:
from the arm's actor starting to its server's launch, against the same arm step's own time to launch on one host.

    python tests/perf/bench_fleet.py                  # baseline + k = 1..6, one repeat of 10 sonnet prompts
    python tests/perf/bench_fleet.py --ks 1 2 3 --repeats 2

Prints each mode's wall time (the run itself; a cluster's startup is printed apart), the ratios to the one-node
parallel run, and checks that every mode produced the full matrix. Not collected by pytest.

Every node group runs its own baseline (a speedup is always against the baseline of the arm's own node), so
N nodes run N baselines: the fleet pays off as the matrix grows beyond a few arms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
from e2e_util import free_port  # noqa: E402

from tui.core.profile.model import load_profile  # noqa: E402
from tui.sim.fleet import start_cluster  # noqa: E402


def profile(tmp: Path, name: str, args: argparse.Namespace, parallel: bool = False) -> Path:
    values = {"name": name, "server.port": free_port(), "tune.parallel": parallel, "tune.repeats": args.repeats,
              "tune.workloads": ["sonnet"], "tune.probe_prompts": 0, "tune.num_speculative_tokens": args.ks,
              "benchmark.num_prompts": args.prompts, "simulation.time_scale": args.time_scale}
    path = tmp / f"{name}.toml"
    path.write_text(load_profile("tune-demo").with_values(values).to_toml())
    return path


def run(tmp: Path, name: str, prof: Path, extra: list[str], env: dict[str, str]) -> tuple[float, dict, Path]:
    run_dir = tmp / name
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--json", "--run-dir",
                        str(run_dir), *extra], capture_output=True, text=True, cwd=tmp, env=env,
                       stdin=subprocess.DEVNULL, timeout=5400)
    wall = time.monotonic() - t0
    rep = json.loads(p.stdout) if p.stdout.strip().startswith("{") else {}
    if p.returncode not in (0, 1) or "matrix" not in rep:
        sys.exit(f"{name}: exit {p.returncode}\n{p.stderr[-3000:]}")
    return wall, rep, run_dir


def launch_delays(run_dir: Path, local: bool) -> list[float]:
    """Per arm: seconds from its step's start (one host) or its actor's start (a fleet) to its server's launch."""
    st = json.loads((run_dir / "state.json").read_text())
    out = []
    for sid, s in st["steps"].items():
        f = s.get("facts") or {}
        if local:
            cmd = next((c for c in json.loads((run_dir / "commands.json").read_text())["commands"]
                        if c["step"] == sid and c["role"] == "serve"), None)
            su = (f.get("startup") or {}).get("seconds")
            if cmd is not None and isinstance(s.get("started"), (int, float)) and su is not None:
                # the serve.log's first line is stamped when the server starts
                first = (run_dir / f"{sid}.serve.log").read_text().splitlines()[0]
                stamp = time.mktime(time.strptime(first[2:21], "%Y-%m-%dT%H:%M:%S"))
                out.append(max(0.0, stamp - s["started"]))
            continue
        rt = f.get("ray_timing") or {}
        for node in ((f.get("nodes") or {}).values() if sid == "baseline" else [f]):
            rt = (node or {}).get("ray_timing") or {}
            if rt.get("launched") and rt.get("actor_started"):
                out.append(rt["launched"] - rt["actor_started"])
                STARTS.append(rt["actor_started"] - rt.get("submitted", rt["actor_started"]))
    return out


STARTS: list[float] = []  # per arm: Ray creating its actor (a new worker process) after the driver asked


def ray_mode(tmp: Path, nodes: int, prof: Path, args: argparse.Namespace) -> tuple[float, float, dict, Path]:
    cache = tmp / f"cache-ray{nodes}"
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)  # the nodes compile cold, like each one-node mode
    t0 = time.monotonic()
    cluster, _, address = start_cluster(nodes, "neuron", 64, temp_dir=tempfile.mkdtemp(prefix="sdr-", dir="/tmp"))
    up = time.monotonic() - t0
    try:
        env = dict(os.environ)
        wall, rep, run_dir = run(tmp, f"ray{nodes}", prof, ["--ray", address], env)
    finally:
        cluster.shutdown()
        if saved is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = saved
    return wall, up, rep, run_dir


def flood(n: int = 100_000) -> float:
    """Events per second through a node's outbox and back (remap, coalesce, pickle as Ray ships it, unpickle):
    the remote path's own cost per event, to hold against the flood rates of tests/perf/bench_tui_flood.py."""
    import pickle

    from tui.core import events as ev
    from tui.core.exec.node import Outbox, Remap

    with tempfile.TemporaryDirectory() as d:
        out = Outbox(Path(d), Remap([(d, "/driver/run")]))
        line = "(EngineCore_DP0 pid=4242) INFO 01-01 12:00:00 [core.py:1] Avg prompt throughput: 0.0 tokens/s, " * 2
        t0 = time.perf_counter()
        sent = 0
        for i in range(n):
            out.emit(ev.LogLine("eagle3-k2", line))
            if i % 2000 == 1999:  # about one message per FLUSH_S at 20,000 lines/s
                msg = pickle.loads(pickle.dumps(out.drain()))
                sent += len(msg["events"])
        sent += len(pickle.loads(pickle.dumps(out.drain()))["events"])
        assert sent == n
        return n / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--time-scale", type=float, default=0.25)
    ap.add_argument("--nodes", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--flood-only", action="store_true", help="only the outbox's events per second")
    args = ap.parse_args()
    print(f"a node's outbox: {flood():,.0f} log events/s through remap, batching and pickling")
    if args.flood_only:
        return 0
    results: dict[str, tuple[float, dict, Path]] = {}
    with tempfile.TemporaryDirectory(prefix="specdec-fleet-perf-") as d:
        tmp = Path(d)
        for name, parallel in (("seq", False), ("par", True)):
            env = dict(os.environ, XDG_CACHE_HOME=str(tmp / f"cache-{name}"))
            results[name] = run(tmp, name, profile(tmp, f"fleet-{name}", args, parallel), [], env)
        ups = {}
        for n in args.nodes:
            wall, up, rep, run_dir = ray_mode(tmp, n, profile(tmp, f"fleet-ray{n}", args), args)
            results[f"ray{n}"] = (wall, rep, run_dir)
            ups[n] = up
        arms = [a["id"] for a in results["seq"][1]["matrix"]["arms"]]
        for name, (_, rep, _) in results.items():
            assert [a["id"] for a in rep["matrix"]["arms"]] == arms, name
            assert all(rep["matrix"]["cells"][a]["sonnet"]["repeats"] == args.repeats for a in arms), name
        print(f"matrix: {', '.join(arms)}; {args.repeats} repeat(s) of {args.prompts} sonnet prompts; "
              f"time_scale {args.time_scale}")
        par = results["par"][0]
        for name, (wall, rep, run_dir) in results.items():
            label = {"seq": "one node, one server at a time", "par": "one node, [tune] parallel"}.get(
                name, f"{name[3:]} Ray nodes (cluster up in {ups.get(int(name[3:]) if name[3:].isdigit() else 0, 0):.1f} s)")
            placed = ""
            if name.startswith("ray"):
                on = sorted({(a.get("node") or {}).get("key") for a in rep["matrix"]["arms"] if a.get("node")})
                placed = f"; arms on {', '.join(on)}"
            print(f"{label:<44} {wall:7.1f} s   {wall / par:5.2f}x of one-node parallel{placed}")
        local = launch_delays(results["seq"][2], True)
        for n in args.nodes:
            fl = launch_delays(results[f"ray{n}"][2], False)
            if fl:
                print(f"{n} nodes: actor start -> server launch per arm: median {statistics.median(fl):.2f} s, "
                      f"max {max(fl):.2f} s (n={len(fl)}); actor requested -> started: median "
                      f"{statistics.median(STARTS):.2f} s, max {max(STARTS):.2f} s")
                STARTS.clear()
        if local:
            print(f"one host: step start -> server launch per arm: median {statistics.median(local):.2f} s "
                  "(the arm step's own pre-launch work; second-resolution stamps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
