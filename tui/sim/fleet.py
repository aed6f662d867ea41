"""`specdec-tui fleet-local --nodes N [-- COMMAND ...]` (or `python -m tui.sim.fleet`): a local Ray cluster of N simulated nodes, to try
`specdec-tui --ray` without hardware (a simulator-side tool; the engine never imports it).

Each node is a real Ray node (its own raylet: `ray.cluster_utils.Cluster`, Ray's own multi-node-on-one-machine
harness) that declares what a trn2.48xlarge declares to Ray, `neuron_cores` = 64 (`--platform neuron`, the
default), or a number of CPUs (`--platform cpu`). The simulated trn2 itself comes from the profile's [stand_in],
which specdec-tui's fleet starts on every node; every node listens on 127.0.0.1 only (a real fleet's nodes have
their own addresses; here their servers get different ports).

With a COMMAND, the cluster is brought up, COMMAND runs with RAY_ADDRESS set to the cluster (so `--ray auto`
finds it; `{address}` in COMMAND is replaced by it too), and the cluster is shut down when COMMAND ends: the exit
code is COMMAND's. Without one, it prints the address and serves until Ctrl+C.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

TRN2_NEURON_CORES = 64  # logical NeuronCores of a trn2.48xlarge at LNC=2 (the simulator's neuron-ls)
OBJECT_STORE_BYTES = 96 * 1024 * 1024


def start_cluster(nodes: int, platform: str = "neuron", neuron_cores: int = TRN2_NEURON_CORES, cpus: float = 1.0,
                  temp_dir: str | None = None) -> tuple[Any, list[Any], str]:
    """(cluster, its nodes, address): `nodes` Ray nodes on 127.0.0.1, the first the head."""
    from ray.cluster_utils import Cluster

    logging.getLogger("ray").setLevel(logging.WARNING)  # not Ray's notes on its own address file
    res = {"neuron_cores": float(neuron_cores)} if platform == "neuron" else {}
    ncpu = 1 if platform == "neuron" else cpus
    head: dict[str, Any] = {"num_cpus": ncpu, "resources": res, "node_ip_address": "127.0.0.1",
                            "include_dashboard": False, "object_store_memory": OBJECT_STORE_BYTES}
    if temp_dir:
        head["temp_dir"] = temp_dir
    cluster = Cluster(initialize_head=True, head_node_args=head)
    members = [cluster.head_node]
    for _ in range(nodes - 1):
        members.append(cluster.add_node(num_cpus=ncpu, resources=res, node_ip_address="127.0.0.1",
                                        object_store_memory=OBJECT_STORE_BYTES))
    cluster.wait_for_nodes()
    return cluster, members, cluster.address


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="specdec-tui fleet-local",
                                description="A local Ray cluster of simulated nodes for specdec-tui --ray.")
    p.add_argument("--nodes", type=int, default=2, help="how many nodes (default 2)")
    p.add_argument("--platform", choices=("neuron", "cpu"), default="neuron",
                   help="what each node declares to Ray: neuron_cores (a simulated trn2) or CPUs (default neuron)")
    p.add_argument("--neuron-cores", type=int, default=TRN2_NEURON_CORES, help="neuron_cores per node (default 64)")
    p.add_argument("--cpus", type=float, default=1.0, help="CPUs per node with --platform cpu (default 1)")
    args = p.parse_args(argv)
    if not 1 <= args.nodes <= 8:
        p.error("--nodes takes 1 to 8")
    if importlib.util.find_spec("ray") is None:
        print("specdec-tui fleet-local: Ray is not installed in this Python; pip install 'specdec-tui[fleet]'",
              file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="sdray-", dir="/tmp")  # short: Ray's socket paths have a length limit
    cluster = None
    try:
        t0 = time.monotonic()
        cluster, _, address = start_cluster(args.nodes, args.platform, args.neuron_cores, args.cpus, tmp)
        what = (f"neuron_cores {args.neuron_cores}" if args.platform == "neuron" else f"CPU {args.cpus:g}")
        print(f"fleet: {args.nodes} simulated node(s) ({what} each) up at {address} in "
              f"{time.monotonic() - t0:.1f}s", file=sys.stderr, flush=True)
        if not command:
            print(address, flush=True)
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, lambda *_: stop.set())
            stop.wait()
            return 0
        env = dict(os.environ, RAY_ADDRESS=address)
        cmd = [a.replace("{address}", address) for a in command]
        proc = subprocess.Popen(cmd, env=env)
        try:
            return proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            return proc.wait()
    finally:
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
