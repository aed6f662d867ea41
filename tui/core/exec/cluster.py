"""The Ray cluster a fleet run uses: connecting to it and checking it before anything runs, its node groups, and
the plan per node group (--show-commands --ray). The one place Ray is imported (`import_ray`, when a run asks
for a cluster); the executor that runs the arms there is exec/ray.py.

Before anything runs (exit 2, one paragraph): an address nothing listens on, a cluster that runs another Ray or
Python, a [fleet] nodes filter that matches no node, no node with the resources one arm needs (its largest node's
resources named). An address on 127.0.0.1 is dialled as given, and pins this driver's node address too: Ray itself
would rewrite a loopback address to this host's routable one (the address a UDP connect towards a public resolver
gets) and then miss a cluster whose nodes listen on 127.0.0.1 only (`ray start --node-ip-address 127.0.0.1`,
`specdec-tui fleet-local`), waiting minutes before it fails (ray-project/ray#59110).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import socket
import sys
from typing import Any, Iterator, Sequence

from tui.core.events import StepStatus
from tui.core.exec.base import ExecConfig, ExecutorError
from tui.core.plan.arms import Arm, is_arm_step, is_tune
from tui.core.plan.build import build_plan, show_commands_text
from tui.core.profile.model import Profile
from tui.core.steps.base import StepResult

RAY_EXTRA = "specdec-tui[fleet]"
RAY_PIN = "ray==2.60.*"
NAMESPACE = "specdec-tui"
CONNECT_TIMEOUT_S = 5.0
HOST_KEYS = ("platform", "instance_type", "neuron_sdk", "vllm_version", "vllm_neuron_version", "driver_version",
             "cuda_version", "gpus", "cpu_isa", "cpu_cores", "python_version")


def import_ray() -> Any:
    """Ray, or ExecutorError naming the extra that brings it."""
    try:
        import ray  # the only import of Ray in specdec-tui
    except ImportError as exc:
        raise ExecutorError(
            f"--ray runs the arms on a Ray cluster, but Ray is not installed in this Python ({sys.executable}: "
            f"{exc}). Install the fleet extra: pip install '{RAY_EXTRA}' (it brings {RAY_PIN}); every node of the "
            "cluster needs the same Ray, Python and specdec-tui.") from None
    return ray


def node_baseline_id(key: str) -> str:
    """The step id of a node group's baseline: n1's is `baseline` (its files keep the names of a run on one host),
    the others' `baseline-n2`, ... (their files: baseline-n2.sonnet.r1.json, ...). Keys stay with their nodes
    when a run is continued, and a new node gets a new key, so no two baselines ever share file names."""
    return "baseline" if key == "n1" else f"baseline-{key}"


def node_baseline(key: str) -> Arm:
    sid = node_baseline_id(key)
    return Arm(sid, f"Baseline server ({key})", f"baseline {key}", "baseline")


def arm_resources(profile: Profile, config: ExecConfig) -> dict[str, float]:
    """What one arm reserves on its node, in Ray's resource names."""
    s = profile.server
    n = int(s.tensor_parallel_size) * int(s.pipeline_parallel_size)
    if profile.platform == "neuron":
        return {"neuron_cores": float(n)}
    if profile.platform == "cuda":
        return {"GPU": float(n)}
    return {"CPU": float(config.cpus_per_arm)}


def fmt_resources(res: dict[str, Any]) -> str:
    keys = [k for k in ("neuron_cores", "GPU", "CPU") if k in res] or []
    out = [f"{k} {res[k]:g}" for k in keys]
    if "memory" in res:
        out.append(f"memory {res['memory'] / (1 << 30):.0f} GiB")
    return ", ".join(out) or "no CPUs, GPUs or NeuronCores"


@dataclasses.dataclass
class NodeGroup:
    """A node and the arms Ray placed on it."""

    key: str
    node_id: str
    address: str
    hostname: str
    resources: dict[str, float]
    agent: Any = None
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    env: dict[str, Any] | None = None
    checkpoints: dict[str, Any] | None = None
    dataset_path: str | None = None
    baseline: dict[str, Any] | None = None
    baseline_done: asyncio.Future[bool] | None = None
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    lost: str = ""

    def host(self) -> dict[str, Any]:
        """The facts that make nodes comparable (node class): instance, SDK / driver, vLLM and plugin, CPU, models."""
        env = self.env or {}
        out: dict[str, Any] = {k: env.get(k) for k in HOST_KEYS if env.get(k) is not None}
        if self.info.get("cpu_model"):
            out["cpu_model"] = self.info["cpu_model"]
        ck = self.checkpoints or {}
        models = {}
        for role in ("target", "draft"):
            m = ck.get(role) if isinstance(ck.get(role), dict) else None
            if m:
                models[role] = {k: m.get(k) for k in ("repo", "commit", "size_bytes") if m.get(k) is not None}
        if models:
            out["models"] = models
        return out

    def public(self) -> dict[str, Any]:
        """The `node` object state.json and report.json carry."""
        return {"key": self.key, "id": self.node_id, "address": self.address, "hostname": self.hostname,
                "resources": {k: v for k, v in self.resources.items() if k in ("neuron_cores", "GPU", "CPU")},
                "host": self.host(), **({"lost": self.lost} if self.lost else {})}


class Connect:
    """RayExecutor methods (exec/ray.py inherits them): `connect` and what it checks. `self` has config, profile,
    ray, ray_version, address, need and candidates."""

    # -- connecting (before anything runs) -----------------------------------------------------------------
    def connect(self, profile: Profile) -> None:
        if not is_tune(profile):
            raise ExecutorError(
                f"--ray runs the arms of a tune run on a Ray cluster, and profile {profile.name} has no [tune] table "
                "(a two-arm run compares two servers on one host). Run it without --ray, or use a tune profile "
                "(e.g. --profile tune-demo, or add [tune] num_speculative_tokens = [1, 2, 3]).")
        ray = import_ray()
        self.profile = profile
        address = self.address
        if address == "auto" and os.environ.get("RAY_ADDRESS", "").strip():
            address = os.environ["RAY_ADDRESS"].strip()  # as Ray reads it: the cluster this shell was given
        self.address = address
        host = self._check_reachable(address)
        kwargs: dict[str, Any] = {"address": address, "namespace": NAMESPACE, "log_to_driver": False,
                                  "logging_level": "ERROR", "configure_logging": True}
        local = host is not None and _loopback(host)
        if local:
            kwargs["_node_ip_address"] = "127.0.0.1"  # a local cluster: no lookup of this host's address
        try:
            with loopback_as_given(local):
                ray.init(**kwargs)
        except Exception as exc:  # ConnectionError, RuntimeError("Version mismatch: ..."), ...
            raise ExecutorError(self._init_problem(exc)) from None
        self.ray = ray
        self.ray_version = ray.__version__
        try:
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            admitted = [n for n in nodes if self._admitted(n)]
            if self.config.nodes and not admitted:
                seen = "; ".join(f"{n['NodeID'][:8]} {n.get('NodeManagerAddress')} {n.get('NodeManagerHostname')}"
                                 for n in nodes) or "none"
                raise ExecutorError(
                    f"[fleet] nodes = {list(self.config.nodes)} matches no alive node of the Ray cluster at {address} "
                    f"(its nodes: {seen}). Name nodes by id (6+ hex digits), address or host name, or set nodes = [] "
                    "to use every node with room.")
            self.need = arm_resources(profile, self.config)
            fit = [n for n in admitted if _fits(n.get("Resources") or {}, self.need)]
            if not fit:
                big = max(admitted, key=lambda n: _amount(n.get("Resources") or {}, self.need), default=None)
                what = (f"the largest, node {big['NodeID'][:8]} at {big.get('NodeManagerAddress')}, has "
                        f"{fmt_resources(big.get('Resources') or {})}") if big else "it has no alive node"
                raise ExecutorError(
                    f"no node of the Ray cluster at {address} has the resources an arm of profile {profile.name} "
                    f"needs ({fmt_resources(self.need)}: {self._need_why(profile)}); {what}. Add a node with room, "
                    "or lower server.tensor_parallel_size" + (" or [fleet] cpus_per_arm" if "CPU" in self.need else "")
                    + ".")
            self.candidates = sorted(fit, key=lambda n: (str(n.get("NodeManagerAddress")), n["NodeID"]))
        except Exception:
            self._disconnect()
            raise

    def _need_why(self, profile: Profile) -> str:
        s = profile.server
        if profile.platform == "neuron":
            return f"TP {s.tensor_parallel_size} × PP {s.pipeline_parallel_size} NeuronCores"
        if profile.platform == "cuda":
            return f"TP {s.tensor_parallel_size} × PP {s.pipeline_parallel_size} GPUs"
        return "[fleet] cpus_per_arm"

    def _check_reachable(self, address: str) -> str | None:
        """The host of `address` (None for "auto" and ray:// addresses); ExecutorError when nothing listens."""
        if address == "auto" or "://" in address:
            return None
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ExecutorError(f"--ray {address!r} is not a Ray address; give HOST:PORT of the cluster's head "
                                "(the address `ray start --head` prints, e.g. 10.0.0.5:6379), or auto.")
        bare = host.strip("[]")
        err = _dial_error(bare, int(port))
        if err is not None:
            there = _routable_address(bare, int(port))
            if there is not None:
                raise ExecutorError(
                    f"nothing listens on {address} ({err}), but a server answers at {there}, this host's own "
                    f"address: a Ray head started without --node-ip-address 127.0.0.1 listens there only. Use --ray "
                    f"{there} (the address `ray start --head` printed) or --ray auto.")
            raise ExecutorError(
                f"cannot reach the Ray cluster at {address}: {err}. Start it first (`ray start --head "
                f"--port {port}` on {host}, then `ray start --address {address}` on each other node), or fix --ray / "
                "[fleet] address.")
        return bare

    def _init_problem(self, exc: BaseException) -> str:
        text = str(exc)
        py = ".".join(str(x) for x in sys.version_info[:3])
        here = import_ray().__version__
        if "Version mismatch" in text:
            lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(("Ray:", "Python:"))]
            cluster = ", ".join(lines[:2]) or "other versions"
            return (f"the Ray cluster at {self.address} runs another Ray or Python ({cluster}) than this "
                    f"specdec-tui (Ray {here}, Python {py}); Ray needs the same on the driver and every node. Install "
                    f"the cluster's versions here, or start the cluster with Ray {here} on Python {py} "
                    f"(pip install '{RAY_EXTRA}').")
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return f"cannot connect to the Ray cluster at {self.address}: {first}. Check --ray / [fleet] address."

    def _admitted(self, node: dict[str, Any]) -> bool:
        if not self.config.nodes:
            return True
        nid = str(node.get("NodeID") or "").lower()
        for f in self.config.nodes:
            if f in (node.get("NodeManagerAddress"), node.get("NodeManagerHostname")):
                return True
            if len(f) >= 6 and nid.startswith(f.lower()):
                return True
        return False

    def _disconnect(self) -> None:
        if self.ray is not None:
            try:
                self.ray.shutdown()
            except Exception:
                pass
        self.ray = None


def _dial_error(host: str, port: int) -> str | None:
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return None
    except OSError as exc:
        return str(exc.strerror or exc)


def _routable_address(host: str, port: int, node_ip: Any = None) -> str | None:
    """For a loopback `host` nothing listens on: this host's routable address with `port` when something listens
    there (where Ray itself would have dialled), else None. `node_ip`: how Ray finds that address (its UDP
    connect towards a public resolver: no packet is sent)."""
    if not _loopback(host):
        return None
    if node_ip is None:
        try:
            from ray._private.services import get_node_ip_address as node_ip
        except ImportError:
            return None
    try:
        ip = str(node_ip())
    except Exception:
        return None
    if not ip or ip == host or _dial_error(ip, port) is not None:
        return None
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


@contextlib.contextmanager
def loopback_as_given(on: bool = True) -> Iterator[None]:
    """While `ray.init` runs: a loopback host (the cluster address, the driver's node address) stays loopback.
    Ray's ray._private.services.resolve_ip_for_localhost turns 127.0.0.1 into this host's routable address; where
    that function is gone (another Ray), Ray's own behaviour stands and a refusal names the address it tried."""
    try:
        from ray._private import services
    except ImportError:
        services = None
    saved = getattr(services, "resolve_ip_for_localhost", None)
    if not on or saved is None:
        yield
        return

    def as_given(host: str) -> Any:
        return host if _loopback(host) else saved(host)

    services.resolve_ip_for_localhost = as_given
    try:
        yield
    finally:
        services.resolve_ip_for_localhost = saved


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def _amount(res: dict[str, Any], need: dict[str, float]) -> float:
    return sum(float(res.get(k, 0.0)) for k in need)


def _fits(res: dict[str, Any], need: dict[str, float]) -> bool:
    return all(float(res.get(k, 0.0)) >= v for k, v in need.items())


_RANK = {StepStatus.FAILED: 0, StepStatus.UNAVAILABLE: 1, StepStatus.INTERRUPTED: 2, StepStatus.WARNED: 3,
         StepStatus.PASSED: 4, StepStatus.SKIPPED: 5}


def merge(sid: str, groups: list[NodeGroup], results: list[StepResult]) -> StepResult:
    """One step's result from its run on every node: the worst status, each node's summary, the first passing
    node's facts (what later steps and the report read on one host) plus every node's under `nodes`."""
    if not results:
        return StepResult("failed", "no node of the fleet is alive")
    worst = min(results, key=lambda r: _RANK.get(r.status, 0)).status
    first = next((r for r in results if r.status.ok), results[0])
    facts = dict(first.facts)
    facts["nodes"] = {g.key: r.facts for g, r in zip(groups, results)}
    summary = "; ".join(f"{g.key}: {r.summary}" for g, r in zip(groups, results))
    return StepResult(worst, summary, facts)


def fleet_commands_text(executor: Any, profile: Profile, run_dir: str, vllm_version: str | None,
                        source: str, vllm_python: list[str] | None = None, notes: Sequence[str] = ()) -> str:
    """--show-commands --ray: the plan per node group of the cluster `executor` is connected to (before any run,
    so the node groups are numbered as a fresh run numbers them)."""
    plan = build_plan(profile, run_dir, vllm_version, vllm_python=vllm_python)
    head = show_commands_text(profile, run_dir, vllm_version, source, vllm_python=vllm_python,
                              notes=notes).split("\n\n", 1)[0]
    out = [head, f"# Fleet: the Ray cluster at {executor.address} (Ray {executor.ray_version}); every arm "
                 f"reserves {fmt_resources(executor.need)} on its node.",
           "# On every node group: env and checkpoints; dataset on the first, shipped to the others (sha256 checked).",
           "# Each server takes the first free port from server.port up on its node"
           + (", and the NeuronCores Ray gives it as NEURON_VISIBLE_DEVICES." if profile.platform == "neuron" else "."),
           ""]
    shared = [c for c in plan.commands if not is_arm_step(profile, c.step)]
    for c in shared:
        out += [f"# {c.title} (on each node that needs it)", c.text(), ""]
    for i, n in enumerate(executor.candidates, start=1):
        key, first = f"n{i}", i == 1
        sid = node_baseline_id(key)
        out.append(f"# ── node group {key}: Ray node {n['NodeID'][:8]} at {n.get('NodeManagerAddress')} "
                   f"({n.get('NodeManagerHostname')}), {fmt_resources(n.get('Resources') or {})} ──")
        for c in plan.of("baseline"):
            text = c.text() if first else re.sub(r"(?<=[/'\s])baseline\.", f"{sid}.", c.text())
            out += [f"# {c.title}" + ("" if first else f" ({key})"), text, ""]
    spec = [c for c in plan.commands if is_arm_step(profile, c.step) and c.step != "baseline"]
    if spec:
        out.append("# ── speculative arms: Ray places each on a node group with room (SPREAD); it measures there after "
                   "that node's baseline, one arm at a time per node, and its speedup is against that baseline ──")
        for c in spec:
            out += [f"# {c.title}", c.text(), ""]
    return "\n".join(out).rstrip("\n") + "\n"


__all__ = ["Connect", "NodeGroup", "arm_resources", "fleet_commands_text", "fmt_resources", "import_ray",
           "loopback_as_given", "merge",
           "node_baseline", "node_baseline_id"]
