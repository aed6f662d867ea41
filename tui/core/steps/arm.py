"""An arm of a tune run (the tutorial's Step 3): one server — the baseline or a speculative configuration —
launched once, smoke-tested (the lossless check against the baseline's reply included), probed per workload
(the per-prompt lossless check and per-request spec-decode metrics, where the vLLM has them), benchmarked
`tune.repeats` times on every workload, then stopped.

Everything an arm records comes from the server's or the bench's own output: the bench result files
(`{arm}.{workload}.r{i}.json`), the /metrics deltas around each bench, and the probe's replies
(`{arm}.{workload}.probe.json`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tui.core.plan.arms import (DYNAMIC_SD_SINCE, arm_by_id, arms_of, fingerprint, level_key, levels_of, repeats_of,
                                result_name, workloads_of)
from tui.core.events import ArmProgress, Diagnosis, Fact, Notice
from tui.core.steps.base import StepContext, StepResult
from tui.core.steps.server import ServerRun
from tui.core.plan.workloads import WorkloadError, bench_rows, probe, probe_file_record, probe_inputs, resolve_workload
from tui.core.host.placement import (PlacementError, arm_ports, capacity_check, core_facts, estimate_ram_per_server_gib,
                                     format_range, root_comm_port)
from tui.core.steps.bench import prepare_bench_dataset, run_benchmark, vllm_version
from tui.core.steps.benchrun import prestart
from tui.core.results.report import load_report
from tui.core.results.schedule import derive
from tui.core.results.contamination import usable_repeats
from tui.core.versions import at_least
from tui.core.proc.supervisor import port_free
from tui.core.host import hostlock
from tui.core.store.rundir import result_file_problem


SONNET_BASE_PROMPT = "Pick as many lines as you can from these poem lines:\n"
SONNET_PROBE_LINES = 15


async def _prepare_workload(ctx: StepContext, sr: ServerRun, name: str) -> tuple[Any, str] | None:
    """(Workload, the bench's --dataset-path) for `name`; chat / own get their custom JSONL written into the run
    directory. None after a failed fact."""
    t = ctx.profile.tune
    try:
        w = resolve_workload(name, ctx.ph.resolve(t.prompts_file if t is not None else ""), sr.dataset_path)
        if name == "sonnet":
            return w, sr.dataset_path
        rows = bench_rows(w)
    except (WorkloadError, OSError) as exc:
        sr.facts.add(f"workload {name}", "unusable", "fail", str(exc),
                     "fix tune.prompts_file (one JSON object per line) or tune.workloads")
        return None
    import json

    path = ctx.run.write_text(w.bench_jsonl, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    sr.facts.add(f"workload {name}", f"{len(rows)} prompts", "pass", f"{w.label}; bench dataset {w.bench_jsonl}")
    return w, str(path)


async def _workloads(ctx: StepContext, sr: ServerRun) -> list[tuple[Any, str]] | None:
    out = []
    for name in workloads_of(ctx.profile):
        w = await _prepare_workload(ctx, sr, name)
        if w is None:
            return None
        out.append(w)
    return out


def _sonnet_probe_prompts(dataset_path: str, n: int) -> list[str]:
    """The sonnet prompts the probe sends: the bench's own (the custom JSONL built from sonnet.txt on vLLM >= 0.32),
    else a fixed sample of sonnet.txt's lines under the sonnet dataset's base prompt."""
    import json
    from pathlib import Path

    p = Path(dataset_path)
    try:
        if p.suffix == ".jsonl":
            out = []
            for line in p.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    out.append(json.loads(line)["prompt"])
                if len(out) >= n:
                    break
            return out
        lines = [ln for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [SONNET_BASE_PROMPT + "\n".join(lines[i * SONNET_PROBE_LINES:(i + 1) * SONNET_PROBE_LINES])
            for i in range(n) if lines[i * SONNET_PROBE_LINES:(i + 1) * SONNET_PROBE_LINES]]


async def _probe(ctx: StepContext, sr: ServerRun, w: Any, dataset_path: str) -> dict[str, Any] | None:
    """The probe: the workload's first tune.probe_prompts prompts sent by the engine, greedy, one at a time; their
    texts (the per-prompt lossless check) and per-request spec-decode metrics (where the server sends them)."""
    import httpx

    n = ctx.profile.tune.probe_prompts if ctx.profile.tune is not None else 0
    if n <= 0:
        return None
    prompts = probe_inputs(w, n, _sonnet_probe_prompts(dataset_path, n) if w.name == "sonnet" else None)
    if not prompts:
        sr.facts.add(f"probe {w.name}", "no prompts", "warn", f"no probe prompts could be read from {dataset_path}")
        return None
    async with httpx.AsyncClient(timeout=httpx.Timeout(float(ctx.profile.benchmark.timeout_s))) as client:
        reqs = await probe(sr.url, sr.served_name, w, prompts, ctx.profile.benchmark.output_len, client)
    ctx.run.write_json(f"{sr.step}.{w.name}.probe.json", probe_file_record(w, reqs))
    errors = [r["error"] for r in reqs if r.get("error")]
    specs = [r.get("spec") for r in reqs]
    have = sum(1 for x in specs if x)
    sr.facts.add(f"probe {w.name}", f"{len(reqs) - len(errors)} of {len(reqs)} replies", "pass" if not errors else "fail",
                 (f"first error: {errors[0]}" if errors else
                  f"per-request spec-decode metrics in {have} of {len(reqs)}" if sr.speculative else
                  "greedy replies kept for the per-prompt lossless check"),
                 f"see {sr.step}.serve.log" if errors else "")
    if errors:
        return None
    return {"texts": [r.get("text") or "" for r in reqs], "per_request": specs, "endpoint": w.path}


class LaunchPool:
    """tune.parallel: the servers of later arms start while earlier arms benchmark, each on its own contiguous,
    TP-aligned NeuronCore range (NEURON_VISIBLE_DEVICES) and port; benchmarks still run one at a time (arms are
    steps, run in order). An arm takes its server when its step starts; when it stops, its range goes to the next
    arm not yet launched. Facts and diagnoses of an early launch are held until the arm's step starts (a step's
    start drops what an earlier attempt said); its log and phases stream at once.

    Registered in ctx.cleanups: the engine's cleanup stops every server it launched, whatever way the run ends."""

    def __init__(self, ctx: StepContext, arms: list[Any], ranges: list[tuple[int, ...]], ports: list[int]):
        self.ctx = ctx
        self.version: str | None = None  # the vLLM the arms run (probed once)
        self.pending = list(arms)  # not launched yet, in run order
        self.free = list(zip(ranges, ports))
        self.launched: dict[str, tuple[ServerRun, Any, list[Any], tuple[tuple[int, ...], int]]] = {}  # early
        self.taken: dict[str, tuple[tuple[int, ...], int]] = {}

    def _launch_next(self) -> None:
        import asyncio

        while self.free and self.pending:
            arm = self.pending.pop(0)
            slot = self.free.pop(0)
            cores, port = slot
            held: list[Any] = []
            sr = self._server(arm, cores, port, held)
            self.ctx.emit(Notice(arm.id, "info", f"{arm.title}: launching early on NeuronCores {format_range(cores)}, "
                                                  f"port {port} (tune.parallel)"))
            task = asyncio.ensure_future(self._start(sr))
            self.launched[arm.id] = (sr, task, held, slot)

    def _server(self, arm: Any, cores: tuple[int, ...], port: int, held: list[Any] | None) -> ServerRun:
        server = self.ctx.profile.server
        env = dict(server.env, NEURON_VISIBLE_DEVICES=format_range(cores))
        prof = self.ctx.profile.with_server(dataclasses.replace(server, port=port, env=env))
        ctx = self.ctx
        if held is not None:  # an early launch: facts and diagnoses wait for the arm's step (take())
            main_emit = self.ctx.emit

            def emit(e: Any) -> None:
                if held and held[0] == "direct" or not isinstance(e, (Fact, Diagnosis)):
                    main_emit(e)
                else:
                    held.append(e)

            ctx = dataclasses.replace(self.ctx, emit=emit)  # the same shared, cleanups and diagnoses objects
        sr = ServerRun(ctx, arm.id, arm.speculative, profile=prof)
        sr.result_facts["placement"] = {"neuron_visible_devices": format_range(cores), "port": port}
        return sr

    async def _start(self, sr: ServerRun) -> bool:
        if self.version is None:
            self.version = await vllm_version(self.ctx)
        sr.vllm_version = self.version  # the plan's serve argv for this version (tui.core.plan.build.serve_argv)
        return await sr.launch() and await sr.wait_ready()

    async def take(self, arm: Any) -> tuple[ServerRun, bool]:
        """(this arm's server, launched and ready?). Launches it now when it was not launched early (a retry)."""
        self._launch_next()
        entry = self.launched.pop(arm.id, None)
        if entry is None:
            if arm in self.pending:
                self.pending.remove(arm)
            if not self.free and self.launched:  # a retry with every range busy: give back the latest early launch
                last_id = list(self.launched)[-1]
                other, task, _, slot = self.launched.pop(last_id)
                task.cancel()
                await other.stop()
                self.pending.insert(0, arm_by_id(self.ctx.profile, last_id))
                self.free.append(slot)
            slot = self.free.pop(0)
            sr = self._server(arm, slot[0], slot[1], None)
            self.taken[arm.id] = slot
            return sr, await self._start(sr)
        sr, task, held, slot = entry
        self.taken[arm.id] = slot
        try:
            ok = await task
        finally:
            for e in held:  # now the arm's step has started: what its launch found is shown and reported
                self.ctx.emit(e)
            held[:] = ["direct"]
        return sr, ok

    def release(self, arm: Any) -> None:
        """The arm's server has stopped: its range and port go to the next arm."""
        slot = self.taken.pop(arm.id, None)
        if slot is not None:
            self.free.append(slot)
        self._launch_next()

    # -- the engine's cleanup --------------------------------------------------------------------------
    async def stop(self) -> None:
        for sr, task, _, _ in list(self.launched.values()):
            task.cancel()
            await sr.stop()
        self.launched.clear()
        self.pending.clear()

    def kill_now(self) -> None:
        for sr, task, _, _ in list(self.launched.values()):
            task.cancel()
            if sr.proc is not None:
                sr.proc.kill_now()


def _pool(ctx: StepContext, arm: Any) -> LaunchPool | None:
    """The run's launch pool when tune.parallel is on and more than one range fits (else None: one at a time,
    with a notice saying why)."""
    if ctx.profile.tune is None or not ctx.profile.tune.parallel:
        return None
    if "pool" in ctx.runtime:
        return ctx.runtime["pool"]

    ctx.runtime["pool"] = None
    s = ctx.profile.server
    if "NEURON_VISIBLE_DEVICES" in s.env:
        ctx.emit(Notice(arm.id, "warning", "tune.parallel is on but server.env sets NEURON_VISIBLE_DEVICES "
                                           f"({s.env['NEURON_VISIBLE_DEVICES']}): every arm would use those cores, so "
                                           "the arms launch one at a time. Remove it to let the app pick ranges."))
        return None
    todo = ctx.runtime.get("todo")  # the engine: the requested arms not kept from an earlier run
    arms = [a for a in arms_of(ctx.profile) if todo is None or a.id in todo]
    arms = arms[[a.id for a in arms].index(arm.id):] if arm in arms else [arm]
    facts = _unlocked(ctx, core_facts(ctx.shared.get("env") or {}))
    tp, pp = int(s.tensor_parallel_size), int(s.pipeline_parallel_size)
    avail = (ctx.shared.get("env") or {}).get("host_ram_available")
    ram_free = avail / (1 << 30) if isinstance(avail, (int, float)) else None

    per_server = estimate_ram_per_server_gib((ctx.shared.get("env") or {}).get("weights_bytes"))
    n, reasons = capacity_check(len(arms), tp, facts, ram_free, per_server, pp=pp)
    if n < 2:
        ctx.emit(Notice(arm.id, "warning", "tune.parallel: the arms launch one at a time: "
                                           + ("; ".join(reasons) or "only one core range is free")))
        return None
    import dataclasses

    whole = facts.plan(tp, len(arms), pp=pp)  # counts every arm still to launch ("2 of 3 arm(s) at once")
    plan = dataclasses.replace(whole, ranges=whole.ranges[:n])
    locks = ctx.runtime.get("host_locks")

    def in_use(p: int) -> bool:  # taken on this host, or held by another specdec-tui run (its server not up yet)
        return not port_free(s.host, p) or (locks is not None and locks.held_elsewhere(
            hostlock.port_claim(s.host, p, ctx.environ)) is not None)

    try:
        ports = arm_ports(int(s.port), plan.parallel, in_use=in_use, avoid=[root_comm_port(r) for r in plan.ranges])
    except PlacementError as exc:
        ctx.emit(Notice(arm.id, "warning", f"tune.parallel: launching one at a time: {exc}"))
        return None
    if locks is not None:  # the extra ports and ranges are this run's until it ends
        claims = [hostlock.port_claim(s.host, p, ctx.environ) for p in ports]
        if hostlock.has_devices("neuron", ctx.environ):
            claims += hostlock.core_claims("neuron", [c for r in plan.ranges for c in r], ctx.environ)
        try:
            refusal = locks.take(claims, "pool")
        except hostlock.LockDirError:
            refusal = None  # the engine warned about the lock directory already
        if refusal is not None:
            ctx.emit(Notice(arm.id, "warning", f"tune.parallel: launching one at a time: {refusal.short()}"))
            return None
    ctx.emit(Notice(arm.id, "info", "tune.parallel: " + plan.summary() + "; benchmarks run one at a time"
                                    + (f" ({'; '.join(reasons)})" if reasons else "")))
    pool = LaunchPool(ctx, arms, list(plan.ranges), ports)
    ctx.runtime["pool"] = pool
    ctx.cleanups.append(pool)
    return pool


def _unlocked(ctx: StepContext, facts: Any) -> Any:
    """CoreFacts with the cores another specdec-tui run holds (host locks) counted busy, their pids as holders."""
    locks = ctx.runtime.get("host_locks")
    total = facts.total_logical_cores
    if locks is None or not total or not hostlock.has_devices("neuron", ctx.environ):
        return facts
    held = {}
    for c in range(total):
        h = locks.held_elsewhere(hostlock.core_claims("neuron", [c], ctx.environ)[0])
        if h is not None:
            held[c] = (h.pid,)
    if not held:
        return facts
    return dataclasses.replace(facts, busy_cores=facts.busy_cores | frozenset(held), holders={**held, **facts.holders},
                               busy_known=True)


async def run(ctx: StepContext, sid: str) -> StepResult:
    arm = arm_by_id(ctx.profile, sid)
    if arm is None:  # the engine only runs the profile's own steps
        return StepResult("failed", f"{sid} is not an arm of profile {ctx.profile.name}")
    return await run_arm(ctx, arm)


async def run_arm(ctx: StepContext, arm: Any) -> StepResult:
    """Run `arm` (a plan.arms.Arm; its id names its files): the arm step for any arm, e.g. a fleet node's own
    baseline (tui/core/exec), which is an arm of no profile."""
    sid = arm.id
    if arm.schedule:
        arm, why = await _schedule_arm(ctx, arm)
        if arm is None:
            ctx.shared[sid] = {"skipped_because": why}
            return StepResult("skipped", f"not run: {why}", {"skipped_because": why})
    placed = ctx.runtime.get("placement")  # whoever placed this arm (a fleet node): its server's port and cores
    pool = None if placed else _pool(ctx, arm)
    sr = ServerRun(ctx, sid, arm.speculative, profile=placed["profile"] if placed else None)
    if placed:
        sr.result_facts["placement"] = dict(placed["facts"])
    sr.vllm_version = await vllm_version(ctx)
    if not await prepare_bench_dataset(ctx, sr):
        return sr.facts.result(sr.result_facts)
    workloads = await _workloads(ctx, sr)
    if workloads is None:
        return sr.facts.result(sr.result_facts)
    if pool is None:
        return await _serve_arm(ctx, sid, arm, sr, workloads, launched=False)
    prepared = sr  # its server may already be up (launched early on its own cores and port)
    try:
        sr, up = await pool.take(arm)
        sr.dataset_path = prepared.dataset_path
        sr.facts.facts[:0] = prepared.facts.facts  # the dataset / workload checks made above
        if not up:
            await sr.stop()
            return sr.facts.result(sr.result_facts)
        return await _serve_arm(ctx, sid, arm, sr, workloads, launched=True)
    finally:
        pool.release(arm)


async def _schedule_arm(ctx: StepContext, arm: Any) -> tuple[Any, str]:
    """The schedule arm with the schedule derived from the fixed arms' numbers in this run (None and why, when there
    is nothing worth running or the vLLM lacks the key)."""
    version = await vllm_version(ctx)
    if at_least(version, DYNAMIC_SD_SINCE) is False:
        return None, (f"vLLM {version} has no num_speculative_tokens_per_batch_size (dynamic speculative decoding "
                      "is read from vLLM 0.32's config); the schedule is reported, not run")
    arms = arms_of(ctx.profile)
    facts = {a.id: ctx.shared.get(a.id) or {} for a in arms}
    statuses = {a.id: "passed" if (facts[a.id].get("repeats")) else "not run" for a in arms}
    load = load_report(ctx.profile, facts, statuses)
    schedule, why, wl = derive(load)
    if schedule is None:
        return None, why
    k = max(e[2] for e in schedule)
    spec = dataclasses.replace(arm.speculative, num_speculative_tokens=k).with_extra(
        num_speculative_tokens_per_batch_size=schedule)
    ctx.emit(Notice(arm.id, "info", f"{arm.title}: running the schedule derived on {wl}: {json.dumps(schedule)}"
                                    + (f" ({why})" if why else "")))
    return dataclasses.replace(arm, speculative=spec), ""


async def _measuring_turn(ctx: StepContext, sid: str) -> None:
    """Measurements on one host run one at a time. Arms run in order here (a parallel launch only overlaps the
    startups), so there is nothing to wait for; where arms run alongside each other (a fleet node, tui/core/exec),
    whoever runs the step puts a `turn` in ctx.runtime that returns once this arm may measure on its host (its
    smoke test, probes and benchmarks), with the facts it is compared against (the host's baseline) in
    ctx.shared."""
    turn = ctx.runtime.get("turn")
    if turn is not None:
        await turn(sid)


def _kept_repeat(ctx: StepContext, sr: ServerRun, workload: str, r: int) -> dict[str, Any] | None:
    """A continued run (the engine's ctx.runtime["resume"]): this repeat's numbers from the earlier run, when its
    result file is still there as state.json recorded it (sha256 and size); None: benchmark it now."""
    earlier = (ctx.runtime.get("resume") or {}).get(sr.step) or {}
    if earlier.get("fingerprint") != sr.result_facts.get("fingerprint"):
        return None  # the arm's settings changed since (a retry with corrected settings)
    rec = ((earlier.get("repeats") or {}).get(workload) or {}).get(r)
    name = result_name(ctx.profile, sr.step, workload, r)
    if not isinstance(rec, dict) or not usable_repeats([rec]) or result_file_problem(ctx.run.path, name, rec):
        return None  # gone, changed, or contaminated (another client shared the server): measured again
    tput = rec.get("output_throughput")
    sr.facts.add(f"{workload} r{r}", f"{tput:.2f} tok/s" if isinstance(tput, (int, float)) else "kept", "pass",
                 f"kept from the earlier run: {name} matches the sha256 recorded in state.json")
    return dict(rec)


async def _serve_arm(ctx: StepContext, sid: str, arm: Any, sr: ServerRun, workloads: list[tuple[Any, str]],
                     launched: bool) -> StepResult:
    repeats = repeats_of(ctx.profile)
    # the race's second round (tui/core/steps/race.py): this arm relaunched to reach more repeats on some keys,
    # its first-round repeats kept (ctx.runtime["resume"]) and its probes reused
    targets = (ctx.runtime.get("targets") or {}).get(sid)
    earlier_probes = (ctx.runtime.get("round_probes") or {}).get(sid) or {}
    levels = levels_of(ctx.profile) or [None]
    names = tuple(level_key(w.name, lv) for w, _ in workloads for lv in levels)
    sr.result_facts["arm"] = arm.as_dict()
    if arm.schedule:
        sr.result_facts["schedule"] = (arm.speculative.extra or {}).get("num_speculative_tokens_per_batch_size")
    sr.result_facts["fingerprint"] = fingerprint(ctx.profile, arm)
    per: dict[str, list[dict[str, Any]]] = {}
    probes: dict[str, Any] = {}
    try:
        if not launched and not await sr.launch():
            return sr.facts.result(sr.result_facts)
        await prestart(ctx, sr)  # the arm's warm bench runner imports the bench's code while the server starts
        if not launched and not await sr.wait_ready():
            return sr.facts.result(sr.result_facts)
        await _measuring_turn(ctx, sid)
        if not await sr.smoke():
            return sr.facts.result(sr.result_facts)
        for w, dataset_path in workloads:
            ctx.emit(ArmProgress(sid, w.name, 0, repeats, names))
            probe = earlier_probes.get(w.name) if targets is not None else None
            probe = probe if probe is not None else await _probe(ctx, sr, w, dataset_path)
            if probe is not None:
                probes[w.name] = probe
            elif sr.facts.failed:
                sr.result_facts["probe"] = probes
                return sr.facts.result(sr.result_facts)
            for level in levels:
                key = level_key(w.name, level)
                per[key] = []
                todo = max(repeats, int((targets or {}).get(key) or 0))
                for r in range(1, todo + 1):
                    ctx.emit(ArmProgress(sid, key, r, todo, names))
                    kept = _kept_repeat(ctx, sr, key, r)
                    if kept is not None:
                        per[key].append(kept)
                        continue
                    label = f"{w.name}" + (f" c{level}" if level is not None else "") + f" r{r}"
                    data = await run_benchmark(ctx, sr, result_name(ctx.profile, sid, key, r), workload=w,
                                               label=label, dataset_path=dataset_path, repeat=r, level=level)
                    if data is None or sr.facts.failed:
                        sr.result_facts["repeats"] = per
                        sr.result_facts["probe"] = probes
                        return sr.facts.result(sr.result_facts)
                    per[key].append(data)
        sr.result_facts["repeats"] = per
        sr.result_facts["probe"] = probes
        first = per.get(names[0])
        if first:
            sr.result_facts["bench"] = first[-1]
        on = ", ".join(w.name for w, _ in workloads) + (f" at concurrency {', '.join(str(lv) for lv in levels)}"
                                                         if levels != [None] else "")
        ctx.emit(Notice(sid, "info", f"{arm.title}: {repeats} repeat(s) on {on} done"))
        return sr.facts.result(sr.result_facts)
    finally:
        await sr.stop()
