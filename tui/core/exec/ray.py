"""The Ray executor: a tune run's arms on the nodes of a Ray cluster, as if local.

`--ray ADDRESS` (or the profile's [fleet] address) connects to the cluster (`connect`: exit 2 before anything runs
when it is unreachable, runs another Ray or Python, or has no node with the resources an arm needs). Then:

- Each node that may take an arm (every alive node with room, or those [fleet] nodes names) becomes a *node group*
  `n1`, `n2`, ... (a node keeps its key when a run is continued) with a node agent (exec/node.py) pinned to it: it
  brings up the node's platform (a [stand_in] is node-local) and runs the node's own checks: `env` and
  `checkpoints` on every node, `dataset` on the first, whose file is shipped to the others and checked by sha256
  there. Each node's facts are recorded per node (state.json's `fleet`, the steps' `nodes`).
- Every node group runs its own baseline (one composite `baseline` step: the first node's files keep their names,
  the others' are `baseline-n2.*`, ...), pinned to its node. Every speculative arm is an actor that asks Ray for
  exactly what it needs — `neuron_cores` = TP × PP on neuron, GPUs on cuda, [fleet] cpus_per_arm CPUs on cpu — and
  Ray places it (SPREAD over the admitted nodes); the product never picks a host or a core. On its node the arm
  launches at once, and measures (smoke test, probes, benchmarks) when the node's baseline has measured and no
  other arm measures there: one at a time per node, nodes at once. Its speedup is against that node's baseline.
- Events stream back tagged with their node; files are written into the driver's run directory under the same
  names (exec/node.py Outbox). A node lost mid-arm (its raylet gone, the actor dead): the arm is named failed on
  that node and run once more on another node with room; what it had sent stays.
- Teardown: Ctrl+C, `s` or a lost terminal stop every arm (its server gets at most STOP_GRACE_S), then Ray kills
  what is left (the supervisor's watchdog and PR_SET_PDEATHSIG take the servers down with their worker), all
  within STOP_WAIT_S + a few seconds.

Ray is imported here only, and only when a run asks for a cluster (`import_ray`); without it, --ray says which
extra to install.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

from tui.core.events import Fact, Notice, StepStatus
from tui.core.exec.base import ArmHooks, ExecConfig, Executor, implementation
from tui.core.exec.cluster import Connect, NodeGroup, fmt_resources, import_ray, merge, node_baseline
from tui.core.exec.node import ArmRunner, NodeAgent
from tui.core.exec.standin import STAND_IN_TIMEOUT_S
from tui.core.plan.arms import Arm, arm_by_id, arms_of, fingerprint, is_arm_step, result_name
from tui.core.profile.model import Profile
from tui.core.steps.base import StepContext, StepResult
from tui.core.steps.registry import step_for
from tui.core.store.rundir import AppendLog, RunDir, RunDirUnwritable

AGENT_OPEN_TIMEOUT_S = STAND_IN_TIMEOUT_S + 90.0
STOP_GRACE_S = 3.0  # a stopping arm's server: SIGINT, at most this long, then SIGTERM
STOP_WAIT_S = 8.0  # then Ray kills what is left (the watchdog SIGTERMs, then SIGKILLs, the servers' groups)
PLACE_POLL_S = 2.0
NODE_DEATH_S = 45.0  # after a failed remote call: how long to wait for Ray to say whether the node is gone
NODE_STEPS = ("env", "checkpoints")  # run on every node


class _AgentActor(NodeAgent):
    """NodeAgent as a Ray actor (every method a coroutine: one event loop per actor)."""

    async def open(self) -> dict[str, Any]:  # type: ignore[override]
        return await NodeAgent.open(self)

    async def dataset(self) -> dict[str, Any]:  # type: ignore[override]
        return NodeAgent.dataset(self)


class _ArmActor:
    """ArmRunner as a Ray actor: it learns its node and the accelerators Ray gave it."""

    def __init__(self, profile: Profile, driver_run_dir: str):
        ray = import_ray()
        rc = ray.get_runtime_context()
        accel = {k: [str(x) for x in v] for k, v in (rc.get_accelerator_ids() or {}).items() if v}
        self.runner = ArmRunner(profile, driver_run_dir, rc.get_node_id(), accel)

    async def where(self) -> dict[str, Any]:
        return self.runner.where()

    async def run(self, arm: Arm, node: dict[str, Any]) -> Any:
        async for msg in self.runner.run(arm, node):
            yield msg

    async def grant(self, shared: dict[str, Any]) -> None:
        self.runner.grant(shared)

    async def stop(self, grace_s: float) -> None:
        await self.runner.stop(grace_s)


async def _get(ref: Any) -> Any:
    return await ref


@implementation("ray")
class RayExecutor(Connect, Executor):
    local = False

    def __init__(self, config: ExecConfig | None = None):
        super().__init__(config)
        self.ray: Any = None
        self.profile: Profile | None = None
        self.need: dict[str, float] = {}
        self.candidates: list[dict[str, Any]] = []
        self.groups: list[NodeGroup] = []
        self.run: RunDir | None = None
        self.emit: Any = None
        self.grace_s = 30.0
        self.notices: list[Notice] = []
        self._agent_cls: Any = None
        self._arm_cls: Any = None
        self._actors: dict[str, Any] = {}
        self._tasks: list[asyncio.Future[Any]] = []
        self._logs: dict[str, AppendLog] = {}
        self._stopping = False
        self._closed = False
        self.ray_version = ""
        self.address = self.config.address

    # -- opening: node groups, agents, platforms ------------------------------------------------------------
    async def open(self, ctx: StepContext, run: RunDir, emit: Any) -> str:
        assert self.ray is not None, "connect() first"
        self.run, self.emit, self.profile = run, emit, ctx.profile
        ray = self.ray
        recorded = (run.state.get("fleet") or {}).get("nodes") or {}
        by_id = {v.get("id"): k for k, v in recorded.items() if isinstance(v, dict)}
        used = [int(k[1:]) for k in recorded if isinstance(k, str) and k[1:].isdigit()]
        nxt = max(used, default=0) + 1
        for n in self.candidates:
            key = by_id.get(n["NodeID"])
            if key is None:
                key, nxt = f"n{nxt}", nxt + 1
            self.groups.append(NodeGroup(key, n["NodeID"], str(n.get("NodeManagerAddress") or ""),
                                         str(n.get("NodeManagerHostname") or ""), dict(n.get("Resources") or {})))
        self.groups.sort(key=lambda g: int(g.key[1:]))
        sched = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
        self._agent_cls = ray.remote(_AgentActor)
        self._arm_cls = ray.remote(_ArmActor)
        for g in self.groups:
            g.agent = self._agent_cls.options(num_cpus=0, max_restarts=0,
                                              scheduling_strategy=sched(g.node_id, soft=False)).remote(
                ctx.profile, g.key, str(run.path))
        try:
            infos = await asyncio.wait_for(asyncio.gather(*(_get(g.agent.open.remote()) for g in self.groups),
                                                          return_exceptions=True), AGENT_OPEN_TIMEOUT_S)
        except asyncio.TimeoutError:
            return (f"the fleet's node agents did not come up within {AGENT_OPEN_TIMEOUT_S:.0f} s on "
                    f"{', '.join(g.key for g in self.groups)}")
        errors = []
        for g, info in zip(self.groups, infos):
            if isinstance(info, BaseException):
                errors.append(f"{g.key}: its agent failed ({type(info).__name__}: {str(info).splitlines()[0]})")
                continue
            g.info = info
            self._deliver(g, {"files": info.get("files") or [], "events": info.get("events") or []}, agent=True)
            if info.get("platform_error"):
                errors.append(f"{g.key}: {info['platform_error']}")
            notice = f"node {g.key}: Ray node {g.node_id[:8]} at {g.address} ({info.get('hostname')}), " \
                     f"{fmt_resources(g.resources)}" + (f"; {info['notice']}" if info.get("notice") else "")
            self.notices.append(Notice("", "info", notice, node=g.key))
        return "; ".join(errors)

    def describe(self) -> dict[str, Any] | None:
        return {"address": self.address, "ray_version": self.ray_version,
                "arm_resources": dict(self.need), "nodes": {g.key: g.public() for g in self.groups}}

    def summary(self) -> str:
        return (f"fleet: {len(self.groups)} node group(s) on the Ray cluster at {self.address} (Ray "
                f"{self.ray_version}); each arm reserves {fmt_resources(self.need)}")

    # -- files and events from the nodes -------------------------------------------------------------------
    def _live(self) -> list[NodeGroup]:
        return [g for g in self.groups if not g.lost]

    def _node_name(self, g: NodeGroup, name: str) -> str:
        """A node agent's file: the first node's keeps its name, another's gets its key (env.json -> env.n2.json)."""
        if g is self.groups[0]:
            return name
        stem, dot, ext = name.rpartition(".")
        return f"{stem}.{g.key}.{ext}" if dot and stem else f"{name}.{g.key}"

    def _deliver(self, g: NodeGroup, msg: dict[str, Any], agent: bool = False, step: str | None = None) -> None:
        assert self.run is not None
        for op, name, data in msg.get("files") or []:
            if not name or "/" in name or name in (".", ".."):
                continue
            name = self._node_name(g, name) if agent else name
            try:
                if op == "put":
                    self.run.write_bytes(name, data)
                else:
                    log = self._logs.get(name)
                    if log is None:
                        log = self._logs[name] = self.run.open_log(name)
                    log.write(data.decode("utf-8", errors="replace"))
                    log.flush()
            except (RunDirUnwritable, OSError):
                pass  # the engine hears of an unwritable run directory from the RunDir itself
        for e in msg.get("events") or []:
            if step is not None and e.step != "":
                e = dataclasses.replace(e, step=step)
            self.emit(dataclasses.replace(e, node=g.key))

    # -- the node steps: env and checkpoints everywhere, the dataset on the first node ---------------------
    def batched(self, sid: str) -> bool:
        return self.profile is not None and is_arm_step(self.profile, sid)

    async def run_step(self, ctx: StepContext, sid: str) -> StepResult:
        self.profile = ctx.profile  # a retry may bring corrected settings (Engine.set_profile)
        if sid in NODE_STEPS:
            return await self._everywhere(ctx, sid)
        if sid == "dataset":
            return await self._dataset(ctx)
        if sid == "race":  # a second round would launch servers on the driver: the fleet decides on round one
            return StepResult("skipped", "not run on a fleet: the race's second round runs on one host; the "
                                         "decision takes the first round's repeats with the same two looks")
        return await step_for(sid, ctx.profile)(ctx, sid)  # results: on the driver, from the facts

    async def _agent_step(self, g: NodeGroup, sid: str, shared: dict[str, Any]) -> StepResult:
        res: dict[str, Any] | None = None
        try:
            gen = g.agent.run_step.options(num_returns="streaming").remote(sid, shared, self.profile)
            async for ref in gen:
                msg = await ref
                self._deliver(g, msg, agent=True)
                if "result" in msg:
                    res = msg["result"]
        except asyncio.CancelledError:
            g.agent.stop.remote(1.0)
            raise
        except Exception as exc:
            why = await self._lost_why(exc, g)
            return StepResult("failed", f"{g.key}: {why}")
        if res is None:
            return StepResult("failed", f"{g.key}: the step ended without a result")
        return StepResult(res["status"], res["summary"], res["facts"])

    def _prior(self, ctx: StepContext, g: NodeGroup, upto: str) -> dict[str, Any]:
        """The facts of this node's earlier checks (a continued run: from state.json's per-node facts)."""
        out: dict[str, Any] = {}
        for sid in ("env", "checkpoints"):
            if sid == upto:
                break
            mine = g.env if sid == "env" else g.checkpoints
            if mine is None:
                mine = ((ctx.shared.get(sid) or {}).get("nodes") or {}).get(g.key)
            if mine:
                out[sid] = mine
        return out

    async def _everywhere(self, ctx: StepContext, sid: str) -> StepResult:
        """`sid` on every node: env at once (it only reads); checkpoints one node after another, since nodes may
        share a model cache (a ParallelCluster /home, an FSx mount): the first node downloads or prepares, the next
        finds the files in place, and no two write the same directory at once."""
        live = self._live()
        if sid == "env":
            results = list(await asyncio.gather(*(self._agent_step(g, sid, self._prior(ctx, g, sid)) for g in live)))
        else:
            results = [await self._agent_step(g, sid, self._prior(ctx, g, sid)) for g in live]
        for g, r in zip(live, results):
            if r.status.ok:
                if sid == "env":
                    g.env = r.facts
                else:
                    g.checkpoints = r.facts
        return merge(sid, live, list(results))

    async def _dataset(self, ctx: StepContext) -> StepResult:
        live = self._live()
        first = live[0]
        res = await self._agent_step(first, "dataset", self._prior(ctx, first, "dataset"))
        if not res.status.ok:
            return res
        ds = await _get(first.agent.dataset.remote())
        sha = str(res.facts.get("sha256") or ds.get("sha256") or "")
        if not ds.get("data") or ds.get("sha256") != sha:
            self.emit(Fact("dataset", f"copy for the fleet ({first.key})", "unreadable", "fail",
                           f"{ds.get('path')}: sha256 {ds.get('sha256') or 'none'}, expected {sha or 'none'}",
                           "run the dataset step again", node=first.key))
            return StepResult("failed", f"the dataset on {first.key} cannot be shipped to the other nodes", res.facts)
        first.dataset_path = ds["path"]
        name = Path(ds["path"]).name
        bad = []
        for g in live[1:]:
            try:
                got = await _get(g.agent.put_file.remote(name, ds["data"], sha))
            except Exception as exc:
                got = {"ok": False, "sha256": await self._lost_why(exc, g)}
            if got.get("ok"):
                g.dataset_path = got["path"]
                self.emit(Fact("dataset", f"copy on {g.key}", f"{len(ds['data'])} bytes", "pass",
                               f"shipped from {first.key}; sha256 {sha[:16]}… checked on the node", node=g.key))
            else:
                bad.append(g.key)
                self.emit(Fact("dataset", f"copy on {g.key}", "sha256 differs", "fail",
                               f"the node read sha256 {got.get('sha256')}, expected {sha}",
                               "check the node's disk, then run the dataset step again", node=g.key))
        facts = dict(res.facts, nodes={g.key: {"copied": g.dataset_path is not None} for g in live})
        if bad:
            return StepResult("failed", f"the dataset could not be shipped to {', '.join(bad)}", facts)
        return StepResult(res.status, f"{res.summary}; shipped to {len(live) - 1} more node(s), sha256 checked",
                          facts)

    # -- the arms -------------------------------------------------------------------------------------------
    def start_batch(self, ctx: StepContext, sids: list[str], hooks: ArmHooks) -> dict[str, asyncio.Future[StepResult]]:
        self.profile = ctx.profile
        if self not in ctx.cleanups:
            ctx.cleanups.append(self)  # the engine's cleanup stops the arms, whatever way the run ends
        self._stopping = False
        placed = asyncio.Event()
        futs: dict[str, asyncio.Future[StepResult]] = {}
        if "baseline" in sids:
            futs["baseline"] = asyncio.ensure_future(self._baselines(ctx, hooks, placed))
        else:
            self._adopt_baselines(ctx)
            placed.set()
        fixed = [f for s, f in futs.items()]
        for sid in sids:
            if sid == "baseline":
                continue
            arm = arm_by_id(ctx.profile, sid)
            fut = asyncio.ensure_future(self._speculative(ctx, sid, hooks, placed, list(fixed) if arm and arm.schedule
                                                          else []))
            futs[sid] = fut
            if arm is not None and not arm.schedule:
                fixed.append(fut)
        self._tasks = [t for t in self._tasks if not t.done()] + list(futs.values())
        return futs

    def _adopt_baselines(self, ctx: StepContext) -> None:
        nodes = (ctx.shared.get("baseline") or {}).get("nodes") or {}
        loop = asyncio.get_running_loop()
        for g in self._live():
            if g.baseline is None and isinstance(nodes.get(g.key), dict):
                g.baseline = nodes[g.key]
            if g.baseline_done is None or (g.baseline_done.done() and not g.baseline_done.result()):
                g.baseline_done = loop.create_future()
                if g.baseline is not None:
                    g.baseline_done.set_result(True)

    async def _baselines(self, ctx: StepContext, hooks: ArmHooks, placed: asyncio.Event) -> StepResult:
        hooks.started("baseline", None)
        loop = asyncio.get_running_loop()
        earlier = dict((ctx.shared.get("baseline") or {}).get("nodes") or {})  # verified by the run loop (resume)
        live = self._live()
        tasks: dict[str, asyncio.Future[Any]] = {}
        waits: list[asyncio.Event] = []
        for g in live:
            g.baseline_done = loop.create_future()
            if isinstance(earlier.get(g.key), dict):
                g.baseline = earlier[g.key]
                g.baseline_done.set_result(True)
                self.emit(Notice("baseline", "info", f"baseline on {g.key}: kept from the earlier run (its result "
                                                     "files match state.json)", node=g.key))
                continue
            ev = asyncio.Event()
            waits.append(ev)
            arm = node_baseline(g.key)
            tasks[g.key] = asyncio.ensure_future(self._remote(ctx, arm, "baseline", pin=g, placed=ev))

        async def all_placed() -> None:
            await asyncio.gather(*(e.wait() for e in waits))
            placed.set()

        watcher = asyncio.ensure_future(all_placed())
        try:
            if tasks:
                await asyncio.wait(list(tasks.values()))
        except asyncio.CancelledError:
            for t in tasks.values():
                t.cancel()
            await asyncio.wait(list(tasks.values()), timeout=STOP_WAIT_S)
        finally:
            placed.set()
            watcher.cancel()
        nodes = dict(earlier)
        failed, lost = [], []
        outcomes = {key: _outcome(t) for key, t in tasks.items()}
        for key, (res, _, why) in outcomes.items():
            g = next(x for x in self.groups if x.key == key)
            if res.status.ok:
                g.baseline = res.facts
                nodes[key] = res.facts
            elif why:
                lost.append(f"{key} ({why})")
            else:
                failed.append(f"{key}: {res.summary}")
            if g.baseline_done is not None and not g.baseline_done.done():
                g.baseline_done.set_result(res.status.ok)
        have = [g for g in self.groups if g.key in nodes]
        top = dict(nodes[have[0].key]) if have else {}
        top["nodes"] = nodes
        if have:
            plain = arm_by_id(ctx.profile, "baseline") or node_baseline("n1")
            top["fingerprint"] = fingerprint(ctx.profile, plain)
            top["arm"] = plain.as_dict()
        interrupted = any(res.status == StepStatus.INTERRUPTED for res, _, _ in outcomes.values())
        done_keys = ", ".join(k for k in nodes if k in {g.key for g in live})
        if interrupted:
            res = StepResult("interrupted", "interrupted: the run stopped it", top)
        elif failed or not have:
            res = StepResult("failed", "baseline failed on " + "; ".join(failed + lost) if failed or lost
                             else "no node measured a baseline", top)
        elif lost:
            res = StepResult("warned", f"baselines on {done_keys}; lost: {'; '.join(lost)} (no arm runs there)", top)
        else:
            res = StepResult("passed", f"a baseline on each node group: {done_keys}", top)
        hooks.finished("baseline", res)
        return res

    async def _speculative(self, ctx: StepContext, sid: str, hooks: ArmHooks, placed: asyncio.Event,
                           after: list[asyncio.Future[Any]]) -> StepResult:
        arm = arm_by_id(ctx.profile, sid)
        started: list[bool] = []

        def on_placed(g: NodeGroup) -> None:
            if not started:
                started.append(True)
                hooks.started(sid, g.public())

        try:
            await placed.wait()
            if after:  # the schedule arm: derived from the fixed arms' numbers
                await asyncio.wait(after)
            if arm is None:
                res = StepResult("failed", f"{sid} is not an arm of profile {ctx.profile.name}")
            else:
                res, g, why = await self._remote(ctx, arm, sid, on_placed=on_placed)
                if why and not self._stopping:
                    where = g.key if g is not None else "its node"
                    self.emit(Notice(sid, "warning", f"{arm.title} failed on {where}: {why}. Running it once more on "
                                                     "another node with room (its files so far stay).",
                                     node=g.key if g else ""))
                    res2, g2, why2 = await self._remote(ctx, arm, sid, on_placed=on_placed,
                                                        exclude={g.node_id} if g is not None else set())
                    if why2:
                        res = StepResult("failed", f"failed on {where} ({why}) and again on "
                                                   f"{g2.key if g2 else 'another node'} ({why2})")
                    else:
                        res = res2
                        res.facts["attempts"] = [{"node": where, "failed": why}]
        except asyncio.CancelledError:
            res = StepResult("interrupted", "interrupted: the run stopped it")
        if not started:
            started.append(True)
            hooks.started(sid, None)
        hooks.finished(sid, res)
        return res

    def _arm_options(self, pin: NodeGroup | None, exclude: set[str]) -> dict[str, Any]:
        sched = self.ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
        opts: dict[str, Any] = {"num_cpus": 0, "max_restarts": 0, "max_concurrency": 64}
        need = self.need
        if "neuron_cores" in need:
            opts["resources"] = {"neuron_cores": need["neuron_cores"]}
        elif "GPU" in need:
            opts["num_gpus"] = need["GPU"]
        else:
            opts["num_cpus"] = need.get("CPU", 1.0)
        if pin is not None:
            opts["scheduling_strategy"] = sched(pin.node_id, soft=False)
        else:  # Ray places it among the admitted nodes, spread out
            ids = [g.node_id for g in self._live() if g.node_id not in exclude]
            opts["label_selector"] = {"ray.io/node-id": "in(" + ",".join(ids) + ")"}
            opts["scheduling_strategy"] = "SPREAD"
        return opts

    def _group_of(self, node_id: str) -> NodeGroup | None:
        return next((g for g in self.groups if g.node_id == node_id), None)

    def _node_alive(self, node_id: str) -> bool:
        try:
            return any(n.get("NodeID") == node_id and n.get("Alive") for n in self.ray.nodes())
        except Exception:
            return False

    async def _lost_why(self, exc: BaseException, g: NodeGroup | None) -> str:
        """Why a remote call failed: the node is gone (Ray's GCS notices a dead raylet within its health-check
        period: waited for up to NODE_DEATH_S), or the actor's worker died on a node that lives."""
        deadline = time.monotonic() + NODE_DEATH_S
        while g is not None and self._node_alive(g.node_id) and time.monotonic() < deadline and not self._stopping:
            await asyncio.sleep(1.0)
        if g is not None and not self._node_alive(g.node_id):
            why = f"node lost (Ray node {g.node_id[:8]} at {g.address} is gone)"
            if not g.lost:
                g.lost = why
                self._failed(f"{g.key}: {why}")
            return why
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"its Ray worker died ({type(exc).__name__}: {first[:200]})"

    def _node_context(self, ctx: StepContext, g: NodeGroup, arm: Arm) -> dict[str, Any]:
        shared = self._prior(ctx, g, "dataset")
        ds = ctx.shared.get("dataset")
        if isinstance(ds, dict) and g.dataset_path:
            shared["dataset"] = dict(ds, path=g.dataset_path)
        if arm.schedule:
            shared.update({a.id: ctx.shared.get(a.id) or {} for a in arms_of(ctx.profile) if not a.schedule})
        elif arm.kind != "baseline" and ctx.shared.get("baseline"):
            shared["baseline"] = ctx.shared["baseline"]
        node: dict[str, Any] = {"key": g.key, "stand_in": g.info.get("stand_in") or {}, "node_dir": g.info.get("dir"),
                                "shared": shared}
        resume = (ctx.runtime.get("resume") or {}).get(arm.id)
        if resume:
            files: dict[str, bytes] = {}
            for wl, recs in (resume.get("repeats") or {}).items():
                for r in recs:
                    name = result_name(ctx.profile, arm.id, str(wl), int(r))
                    try:
                        files[name] = ctx.run.file(name).read_bytes()
                    except OSError:
                        pass
            node["resume"] = resume
            node["files"] = files
        return node

    async def _place(self, actor: Any) -> dict[str, Any]:
        """Wait for Ray to place `actor`; fails when no admitted node is left alive."""
        fut = asyncio.ensure_future(_get(actor.where.remote()))
        while True:
            done, _ = await asyncio.wait({fut}, timeout=PLACE_POLL_S)
            if done:
                return fut.result()
            if self._stopping:
                fut.cancel()
                raise asyncio.CancelledError
            alive = [g for g in self._live() if self._node_alive(g.node_id)]
            if not alive:
                fut.cancel()
                raise RuntimeError("no node of the fleet is left alive")

    async def _remote(self, ctx: StepContext, arm: Arm, step: str, pin: NodeGroup | None = None,
                      exclude: set[str] | None = None, placed: asyncio.Event | None = None,
                      on_placed: Any = None) -> tuple[StepResult, NodeGroup | None, str]:
        """Run `arm` in an actor Ray places (or pinned to `pin`); (result, its node group, why the node or worker
        was lost: "" when it was not)."""
        g: NodeGroup | None = None
        held: list[bool] = []
        turn: asyncio.Future[Any] | None = None
        submitted = time.time()
        actor = self._arm_cls.options(**self._arm_options(pin, exclude or set())).remote(ctx.profile,
                                                                                         str(self.run.path))
        self._actors[arm.id] = actor
        try:
            try:
                where = await self._place(actor)
            finally:
                if placed is not None:
                    placed.set()
            placed_at = time.time()
            g = self._group_of(where["node_id"])
            if g is None:
                raise RuntimeError(f"Ray placed {arm.id} on node {where['node_id'][:8]}, outside the fleet")
            if on_placed is not None:
                on_placed(g)
            gen = actor.run.options(num_returns="streaming").remote(arm, self._node_context(ctx, g, arm))
            result: dict[str, Any] | None = None
            async for ref in gen:
                msg = await ref
                self._deliver(g, msg, step=step)
                if msg.get("turn") and turn is None:
                    turn = asyncio.ensure_future(self._turn(g, actor, arm, held))
                if "result" in msg:
                    result = msg["result"]
            if result is None:
                raise RuntimeError(f"{arm.id} ended without a result")
            facts = dict(result["facts"])
            facts["node"] = g.public()
            facts["ray_timing"] = dict(facts.get("ray_timing") or {}, submitted=submitted, placed=placed_at)
            for recs in (facts.get("repeats") or {}).values():
                for rec in recs if isinstance(recs, list) else []:
                    if isinstance(rec, dict):
                        rec.setdefault("node", g.key)
            return StepResult(result["status"], result["summary"], facts), g, ""
        except asyncio.CancelledError:
            if self._stopping:
                return StepResult("interrupted", "interrupted: the run stopped it"), g, ""
            raise
        except Exception as exc:
            if self._stopping:
                return StepResult("interrupted", "interrupted: the run stopped it"), g, ""
            rx = self.ray.exceptions
            lost = isinstance(exc, (rx.RayActorError, rx.WorkerCrashedError, rx.NodeDiedError, rx.ObjectLostError))
            if lost:
                why = await self._lost_why(exc, g)
            else:  # an error of the arm's own (a RayTaskError carries it): named, not run again
                cause = getattr(exc, "cause", None) or exc
                first = (str(cause).strip().splitlines() or [type(cause).__name__])[-1]
                why = f"{type(cause).__name__}: {first[:300]}"
            where = f"on {g.key}: " if g is not None else ""
            return StepResult("failed", where + why), g, why if lost else ""
        finally:
            if turn is not None and not turn.done():
                turn.cancel()
            if held and g is not None:
                g.lock.release()
            self._actors.pop(arm.id, None)
            try:
                self.ray.kill(actor, no_restart=True)  # its server is stopped; free its resources now
            except Exception:
                pass

    async def _turn(self, g: NodeGroup, actor: Any, arm: Arm, held: list[bool]) -> None:
        """The arm may measure on node g: after g's baseline (a speculative arm), when no other arm measures there."""
        if arm.kind != "baseline":
            if g.baseline_done is None:
                g.baseline_done = asyncio.get_running_loop().create_future()
            if not await g.baseline_done:
                return  # g has no baseline: the run stops on the baseline step's failure
        await g.lock.acquire()
        held.append(True)
        shared = {} if arm.kind == "baseline" else {"baseline": dict(g.baseline or {})}
        await _get(actor.grant.remote(shared))

    # -- health and teardown --------------------------------------------------------------------------------
    def check_health(self) -> list[str]:
        out = []
        for g in self.groups:
            if not g.lost and self.ray is not None and not self._node_alive(g.node_id):
                g.lost = f"node lost (Ray node {g.node_id[:8]} at {g.address} is gone)"
            if g.lost:
                out.append(f"{g.key}: {g.lost}")
        return out

    async def stop(self) -> None:
        """Stop every running arm: a short grace for its server, then Ray kills what is left."""
        self._stopping = True
        grace = min(self.grace_s, STOP_GRACE_S)
        for actor in list(self._actors.values()):
            try:
                actor.stop.remote(grace)
            except Exception:
                pass
        for g in self.groups:
            if g.agent is not None:
                try:
                    g.agent.stop.remote(grace)
                except Exception:
                    pass
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=STOP_WAIT_S)
        self.kill_arms()
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=5.0)
        for t in pending:
            if not t.done():
                t.cancel()

    def kill_arms(self) -> None:
        for actor in list(self._actors.values()):
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:
                pass

    def kill_now(self) -> None:
        if self.ray is None:
            return
        self._stopping = True
        self.kill_arms()
        for g in self.groups:
            if g.agent is not None:
                try:
                    self.ray.kill(g.agent, no_restart=True)
                except Exception:
                    pass

    async def shutdown(self) -> None:
        if self._closed or self.ray is None:
            return
        self._closed = True
        await self.stop()
        closing = [asyncio.ensure_future(_get(g.agent.close.remote())) for g in self.groups if g.agent is not None]
        if closing:
            await asyncio.wait(closing, timeout=10.0)
        self.kill_now()
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        self._disconnect()


def _outcome(task: asyncio.Future[Any]) -> tuple[StepResult, NodeGroup | None, str]:
    """A finished _remote task's (result, group, why lost); a cancelled one is interrupted."""
    if task.cancelled() or not task.done():
        return StepResult("interrupted", "interrupted: the run stopped it"), None, ""
    if task.exception() is not None:
        exc = task.exception()
        return StepResult("failed", f"internal error: {type(exc).__name__}: {exc}"), None, ""
    return task.result()


