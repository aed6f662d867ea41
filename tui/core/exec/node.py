"""What runs on a fleet node, inside a Ray actor (exec/ray.py makes actors of these classes; nothing here imports
Ray, so the steps run here exactly as they run on the driver's host).

- `NodeAgent`: one per node for the whole run. It brings up the node's platform (the profile's [stand_in], like
  the engine does on its own host: a platform is node-local), runs the checks that belong to the node (env,
  checkpoints, the dataset on the first node) and keeps the node's copy of the dataset, shipped to it with its
  sha256 checked.
- `ArmRunner`: one per arm. Ray has placed it on a node with the arm's resources (its NeuronCores, GPUs or CPUs);
  it runs the engine's own arm step (tui.core.steps.arm.run_arm) there, on the node's platform, with a port chosen
  on the node (exec/ports.py) and, on neuron, the NeuronCores Ray gave it as the server's NEURON_VISIBLE_DEVICES
  (vllm-neuron refuses NEURON_RT_VISIBLE_CORES, which Ray sets, and sets it per rank itself).

Both run a step with a StepContext whose run directory is a node-local staging directory (not shared with the
driver) and whose `emit` collects the typed events. `Outbox` sends them to the driver in messages (every
FLUSH_S; progress coalesced to the latest value), together with the files: logs as they grow (whole lines), every
other file once it is finished (after the fact that reports it, and at the end). The driver writes them into its
run directory under the same names, so a node lost mid-arm loses nothing that was already sent. Paths of the
staging directory in events and facts are rewritten to the driver's run directory: the run reads as if local.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import shutil
import socket
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable

from tui.core.events import Artifact, Command, Event, Fact, Progress, StepFinished
from tui.core.exec.ports import PORT_SPAN, PortLock, node_port
from tui.core.host.hostlock import HostLocks
from tui.core.exec.standin import StandIn
from tui.core.host.hub import hub_settings
from tui.core.host.placement import format_range, root_comm_port
from tui.core.plan.commands import Placeholders
from tui.core.profile.model import Profile
from tui.core.secrets import add_secrets, add_secrets_from_env
from tui.core.steps.arm import run_arm
from tui.core.steps.base import StepContext, StepResult
from tui.core.steps.registry import step_for
from tui.core.store.rundir import RunDir, atomic_write_bytes

FLUSH_S = 0.1  # how often a remote step's events and grown logs go to the driver
LOG_CHUNK = 4 << 20  # at most this much of one log per message
SYNC_EVENTS = (Fact, StepFinished, Artifact, Command)  # a file they name is finished: ship it now
NOT_SHIPPED = {"state.json", "profile.toml"}  # the node's own bookkeeping
RT_VISIBLE = "NEURON_RT_VISIBLE_CORES"


def register_secrets(profile: Profile, environ: dict[str, str]) -> None:
    """What the engine registers on its host, registered on the node too: every channel redacts the same."""
    add_secrets_from_env(profile.data.get("server", {}).get("env", {}))
    add_secrets_from_env(environ)
    try:
        token = hub_settings(environ).token
        if token:
            add_secrets([token])
    except Exception:
        pass


class Remap:
    """Rewrites node-local paths (the staging directory, the node's directory) to the driver's run directory in
    strings, dicts, lists, tuples and events."""

    def __init__(self, pairs: list[tuple[str, str]]):
        self.pairs = [(a, b) for a, b in pairs if a and a != b]
        self._fields: dict[type, tuple[str, ...]] = {}

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            for a, b in self.pairs:
                if a in v:
                    v = v.replace(a, b)
            return v
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, tuple):
            return tuple(self.value(x) for x in v)
        return v

    def event(self, e: Event) -> Event:
        names = self._fields.get(type(e))
        if names is None:
            names = self._fields[type(e)] = tuple(f.name for f in dataclasses.fields(e)
                                                  if f.name not in ("step", "node", "source"))
        changes: dict[str, Any] = {}
        for name in names:
            v = getattr(e, name)
            if isinstance(v, (str, dict, list, tuple)):
                nv = self.value(v)
                if nv != v:
                    changes[name] = nv
        return dataclasses.replace(e, **changes) if changes else e


def coalesce(events: list[Event]) -> list[Event]:
    """The events of one message, with each progress bar's intermediate values dropped (its latest stays, and
    every final one): a flood of progress costs one event per bar per message."""
    last: dict[tuple[str, str], int] = {}
    for i, e in enumerate(events):
        if isinstance(e, Progress) and not e.done:
            last[(e.step, e.task)] = i
    return [e for i, e in enumerate(events)
            if not (isinstance(e, Progress) and not e.done and last.get((e.step, e.task)) != i)]


class Outbox:
    """A remote step's way to the driver: its events, and the files of its staging directory."""

    def __init__(self, staging: Path, remap: Remap):
        self.staging = Path(staging)
        self.remap = remap
        self.events: list[Event] = []
        self.want_sync = False
        self.turn_asked = False
        self._sent: dict[str, tuple[int, int]] = {}  # finished files: (size, mtime_ns) as last sent
        self._log_at: dict[str, int] = {}  # logs: bytes sent
        self.launched_at: float | None = None  # when the step launched its server (the fleet's own cost per arm)

    def emit(self, e: Event) -> None:
        self.events.append(e)
        if isinstance(e, SYNC_EVENTS):
            self.want_sync = True
            if self.launched_at is None and isinstance(e, Command) and e.role == "serve":
                self.launched_at = time.time()

    def seed(self, names: list[str]) -> None:
        """Files put into the staging directory from the driver (kept results): never sent back."""
        for name in names:
            try:
                st = (self.staging / name).stat()
            except OSError:
                continue
            self._sent[name] = (st.st_size, st.st_mtime_ns)

    def _files(self, final: bool) -> list[tuple[str, str, bytes]]:
        out: list[tuple[str, str, bytes]] = []
        sync = final or self.want_sync
        try:
            entries = sorted(os.scandir(self.staging), key=lambda d: d.name)
        except OSError:
            return out
        for ent in entries:
            name = ent.name
            if name.startswith(".") or name in NOT_SHIPPED or not ent.is_file(follow_symlinks=False):
                continue
            try:
                st = ent.stat(follow_symlinks=False)
                if name.endswith(".log"):
                    at = self._log_at.get(name, 0)
                    if st.st_size < at:  # replaced: send it whole again
                        at = 0
                        self._log_at[name] = 0
                    if st.st_size > at:
                        with open(ent.path, "rb") as f:
                            f.seek(at)
                            data = f.read(min(st.st_size - at, LOG_CHUNK))
                        if not final:  # whole lines only (a character is never cut in two)
                            cut = data.rfind(b"\n")
                            data = data[:cut + 1] if cut >= 0 else b""
                        if data:
                            self._log_at[name] = at + len(data)
                            out.append(("append", name, data))
                    continue
                if not sync:
                    continue
                key = (st.st_size, st.st_mtime_ns)
                if self._sent.get(name) == key:
                    continue
                data = Path(ent.path).read_bytes()
                self._sent[name] = key
                out.append(("put", name, data))
            except OSError:
                continue
        if sync:
            self.want_sync = False
        return out

    def drain(self, final: bool = False) -> dict[str, Any]:
        files = self._files(final)
        events = coalesce([self.remap.event(e) for e in self.events])
        self.events = []
        msg: dict[str, Any] = {"files": files, "events": events}
        if self.turn_asked:
            msg["turn"] = True
            self.turn_asked = False
        return msg


async def _stop_children(ctx: StepContext, keep: Any = None) -> None:
    for proc in list(reversed(ctx.cleanups)):
        if proc is keep:
            continue
        ctx.forget(proc)
        try:
            await asyncio.shield(proc.stop())
        except Exception:
            try:
                proc.kill_now()
            except Exception:
                pass


async def drive(ctx: StepContext, out: Outbox, sid: str, step: Awaitable[StepResult],
                task_holder: list[asyncio.Future[Any]], keep: Any = None,
                results: list[StepResult] | None = None) -> AsyncIterator[dict[str, Any]]:
    """Run `step`, yielding the driver's messages every FLUSH_S while it runs and a last one with its result
    ({"status", "summary", "facts"}; facts with node paths rewritten). A step that raises is failed with its
    traceback in `{sid}.error.log`, as on the driver's host; a cancelled one (the driver stopped it) is
    interrupted. Children it left are stopped (`keep`: the node's platform stays)."""
    task = asyncio.ensure_future(step)
    task_holder.append(task)
    while not task.done():
        await asyncio.wait([task], timeout=FLUSH_S)
        msg = out.drain()
        if msg["files"] or msg["events"] or msg.get("turn"):
            yield msg
    if task.cancelled():
        res = StepResult("interrupted", "interrupted: the run stopped it")
    elif task.exception() is not None:
        exc = task.exception()
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        try:
            ctx.run.write_text(f"{sid}.error.log", tb)
        except OSError:
            pass
        res = StepResult("failed", f"internal error: {type(exc).__name__}: {exc} (traceback in {sid}.error.log)")
    else:
        res = task.result()
    await _stop_children(ctx, keep)
    if results is not None:
        results.append(res)  # as the node sees it (node paths)
    msg = out.drain(final=True)
    msg["result"] = {"status": str(res.status), "summary": out.remap.value(res.summary),
                     "facts": out.remap.value(res.facts)}
    yield msg


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


class NodeAgent(StandIn):
    """One node's agent for the whole run: its platform, its checks, its copy of the dataset."""

    def __init__(self, profile: Profile, key: str, driver_run_dir: str):
        environ = dict(os.environ)
        environ.pop(RT_VISIBLE, None)  # Ray's, for this actor's (no) NeuronCores: not the servers'
        register_secrets(profile, environ)
        self.key = key
        self.dir = Path(tempfile.mkdtemp(prefix=f"specdec-node-{key}-"))
        self.profile = profile
        self.run = RunDir(self.dir)
        self.out = Outbox(self.dir, Remap([(str(self.dir), driver_run_dir)]))
        self.ctx = StepContext(profile=profile, run=self.run, emit=self.out.emit,
                               ph=Placeholders(run_dir=str(self.dir)), environ=environ)
        self.ctx.runtime["node_port_span"] = PORT_SPAN  # env: each server here takes a free port from server.port up
        self.platform_error = ""
        self.stand_in_notice = ""
        self.stand_in_message: dict[str, Any] = {}
        self._stand_in: Any = None
        self._tasks: list[asyncio.Future[Any]] = []

    async def open(self) -> dict[str, Any]:
        """Bring the node's platform up; what the driver needs to know of the node."""
        self.run.write_text("profile.toml", self.profile.to_toml())  # the stand-in reads {run_dir}/profile.toml
        try:
            await self._start_stand_in()
        except Exception as exc:
            self.platform_error = f"the stand-in platform could not be started on {self.key}: {type(exc).__name__}: {exc}"
        msg = self.out.drain(final=True)
        return {"platform_error": self.platform_error, "notice": self.stand_in_notice,
                "stand_in": self.stand_in_message, "hostname": socket.gethostname(), "pid": os.getpid(),
                "cpu_model": _cpu_model(), "dir": str(self.dir), "files": msg["files"], "events": msg["events"]}

    async def run_step(self, sid: str, shared: dict[str, Any],
                       profile: Profile | None = None) -> AsyncIterator[dict[str, Any]]:
        """Run the engine's step `sid` on this node (env, checkpoints, dataset), streaming its messages. `shared`:
        the run's facts of earlier steps on this node, for those this agent has not found itself (a continued run);
        `profile`: the run's profile now (a retry may bring corrected settings)."""
        if profile is not None:
            self.profile = self.ctx.profile = profile
        for k, v in shared.items():
            self.ctx.shared.setdefault(k, v)
        step = step_for(sid, self.profile)(self.ctx, sid)
        done: list[StepResult] = []
        async for msg in drive(self.ctx, self.out, sid, step, self._tasks, keep=self._stand_in, results=done):
            if done:
                res = done[-1]
                if StepResult(res.status, "").status.ok:
                    self.ctx.shared[sid] = dict(res.facts)  # later steps on this node read them (node paths)
                else:
                    self.ctx.shared.pop(sid, None)
            yield msg

    def dataset(self) -> dict[str, Any]:
        """The dataset the dataset step prepared on this node: {"path" (node-local), "data", "sha256"}."""
        ds = self.ctx.shared.get("dataset") or {}
        path = Path(str(ds.get("path") or ""))
        data = path.read_bytes() if path.is_file() else b""
        return {"path": str(path), "data": data, "sha256": hashlib.sha256(data).hexdigest() if data else ""}

    async def put_file(self, name: str, data: bytes, sha256: str) -> dict[str, Any]:
        """Store a file the driver ships (the dataset) in this node's directory, checked against its sha256."""
        got = hashlib.sha256(data).hexdigest()
        if got != sha256:
            return {"ok": False, "path": "", "sha256": got}
        path = self.dir / name
        atomic_write_bytes(path, data)
        if hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
            return {"ok": False, "path": str(path), "sha256": "changed on disk"}
        return {"ok": True, "path": str(path), "sha256": got}

    async def stop(self, grace_s: float) -> None:
        for task in self._tasks:
            if not task.done():
                task.cancel()

    async def close(self) -> None:
        await self.stop(1.0)
        await _stop_children(self.ctx)
        shutil.rmtree(self.dir, ignore_errors=True)


def node_profile(profile: Profile, port: int, cores: list[int] | None) -> Profile:
    """The profile an arm's server runs with on its node: its own port and its NeuronCores (from Ray) as
    NEURON_VISIBLE_DEVICES. The step itself keeps the run's profile (the arm's fingerprint is the run's)."""
    server = profile.server
    env = dict(server.env)
    if cores:
        env["NEURON_VISIBLE_DEVICES"] = format_range(cores)
    return profile.with_server(dataclasses.replace(server, port=port, env=env))


class ArmRunner:
    """One arm on the node Ray placed it on."""

    def __init__(self, profile: Profile, driver_run_dir: str, node_id: str, accelerators: dict[str, list[str]]):
        self.profile = profile
        self.driver_run_dir = driver_run_dir
        self.node_id = node_id
        self.accelerators = accelerators
        self.ctx: StepContext | None = None
        self.out: Outbox | None = None
        self._granted = asyncio.Event()
        self._tasks: list[asyncio.Future[Any]] = []
        self._port: PortLock | None = None
        self.staging: Path | None = None
        self.created = time.time()  # the actor's process is up and this arm's runner made

    def where(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "pid": os.getpid(), "hostname": socket.gethostname(),
                "accelerators": self.accelerators}

    def _cores(self) -> list[int] | None:
        if self.profile.platform != "neuron":
            return None
        ids = self.accelerators.get("neuron_cores") or []
        try:
            return sorted(int(x) for x in ids) or None
        except ValueError:
            return None

    async def run(self, arm: Any, node: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Run `arm` here. `node`: what the driver knows of this node — its platform ("stand_in": the agent's
        env / unset / placeholders), its checks' facts ("shared"), the node's directory ("node_dir"), and for a
        continued run the arm's kept repeats ("resume") with their files ("files": {name: bytes})."""
        self.staging = Path(tempfile.mkdtemp(prefix=f"specdec-{arm.id}-"))
        stand_in = node.get("stand_in") or {}
        environ = dict(os.environ)
        for var in stand_in.get("unset") or []:
            environ.pop(str(var), None)
        for k, v in (stand_in.get("env") or {}).items():
            environ[str(k)] = str(v)
        environ.pop(RT_VISIBLE, None)  # Ray's assignment travels as NEURON_VISIBLE_DEVICES (node_profile)
        register_secrets(self.profile, environ)
        cores = self._cores()
        server = self.profile.server
        locks = HostLocks.this_run(self.driver_run_dir, f"specdec-tui --ray (arm {arm.id} on Ray node {self.node_id[:12]})",
                                   self.profile.name)
        self._port = node_port(server.host, int(server.port), locks, avoid=[root_comm_port(cores)] if cores else (),
                               platform=self.profile.platform, cores=cores or (), environ=environ)
        placement: dict[str, Any] = {"port": self._port.port, "node": node.get("key")}
        if cores:
            placement["neuron_visible_devices"] = format_range(cores)
        ph = Placeholders(run_dir=str(self.staging))
        for k, v in (stand_in.get("placeholders") or {}).items():
            if hasattr(ph, str(k)):
                setattr(ph, str(k), str(v))
        pairs = [(str(self.staging), self.driver_run_dir)]
        if node.get("node_dir"):
            pairs.append((str(node["node_dir"]), self.driver_run_dir))
        self.out = Outbox(self.staging, Remap(pairs))
        ctx = StepContext(profile=self.profile, run=RunDir(self.staging), emit=self.out.emit, ph=ph,
                          shared=dict(node.get("shared") or {}), environ=environ)
        ctx.runtime["turn"] = self._turn
        ctx.runtime["placement"] = {"profile": node_profile(self.profile, self._port.port, cores), "facts": placement}
        ctx.runtime["todo"] = [arm.id]
        files = node.get("files") or {}
        for name, data in files.items():
            atomic_write_bytes(self.staging / name, data)
        self.out.seed(list(files))
        if node.get("resume"):
            ctx.runtime["resume"] = {arm.id: node["resume"]}
        self.ctx = ctx
        started = time.monotonic()
        try:
            async for msg in drive(ctx, self.out, arm.id, run_arm(ctx, arm), self._tasks):
                if "result" in msg:
                    msg["result"]["facts"]["node_seconds"] = round(time.monotonic() - started, 3)
                    msg["result"]["facts"]["ray_timing"] = {"actor_started": self.created,
                                                            "launched": self.out.launched_at}
                yield msg
        finally:
            if self._port is not None:
                self._port.release()
            shutil.rmtree(self.staging, ignore_errors=True)

    async def _turn(self, sid: str) -> None:
        assert self.out is not None
        self.out.turn_asked = True
        await self._granted.wait()

    def grant(self, shared: dict[str, Any]) -> None:
        """The driver's answer to `turn`: this arm may measure now, against these facts (the node's baseline)."""
        if self.ctx is not None:
            self.ctx.shared.update(shared)
        self._granted.set()

    async def stop(self, grace_s: float) -> None:
        """Stop the arm now: its server gets at most `grace_s` after SIGINT."""
        if self.ctx is not None:
            for proc in self.ctx.cleanups:
                if getattr(proc, "grace_s", 0.0) > grace_s:
                    proc.grace_s = grace_s
        for task in self._tasks:
            if not task.done():
                task.cancel()


__all__ = ["ArmRunner", "NodeAgent", "Outbox", "Remap", "coalesce", "drive", "node_profile", "register_secrets"]
