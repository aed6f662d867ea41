"""An arm of a tune run (the tutorial's Step 3): one server — the baseline or a speculative configuration —
launched once, smoke-tested (the lossless check against the baseline's reply included), probed per workload
(the per-prompt lossless check and per-request spec-decode metrics, where the vLLM has them), benchmarked
`tune.repeats` times on every workload, then stopped.

Everything an arm records comes from the server's or the bench's own output: the bench result files
(`{arm}.{workload}.r{i}.json`), the /metrics deltas around each bench, and the probe's replies
(`{arm}.{workload}.probe.json`).
"""

from __future__ import annotations

from typing import Any

from ..arms import arm_by_id, arm_profile, fingerprint, repeats_of, result_name, workloads_of
from ..events import ArmProgress, Notice
from .base import StepContext, StepResult
from .server import ServerRun


async def _workloads(ctx: StepContext, sr: ServerRun) -> list[Any] | None:
    """The Workload objects of this run (their datasets prepared), or None after a failed fact."""
    from ..workloads import prepare_workload

    out = []
    for name in workloads_of(ctx.profile):
        w = await prepare_workload(ctx, sr, name)
        if w is None:
            return None
        out.append(w)
    return out


async def _probe(ctx: StepContext, sr: ServerRun, w: Any) -> dict[str, Any] | None:
    from ..workloads import run_probe

    n = int((ctx.profile.data.get("tune") or {}).get("probe_prompts") or 0)
    if n <= 0:
        return None
    return await run_probe(ctx, sr, w, n)


async def run(ctx: StepContext, sid: str) -> StepResult:
    from .bench import prepare_bench_dataset, run_benchmark, vllm_version

    arm = arm_by_id(ctx.profile, sid)
    if arm is None:  # the engine only runs the profile's own steps
        return StepResult("failed", f"{sid} is not an arm of profile {ctx.profile.name}")
    sr = ServerRun(ctx, sid, arm.speculative, profile=arm_profile(ctx.profile, arm))
    sr.vllm_version = await vllm_version(ctx)
    if not await prepare_bench_dataset(ctx, sr):
        return sr.facts.result(sr.result_facts)
    workloads = await _workloads(ctx, sr)
    if workloads is None:
        return sr.facts.result(sr.result_facts)
    repeats = repeats_of(ctx.profile)
    names = tuple(w.name for w in workloads)
    sr.result_facts["arm"] = arm.as_dict()
    sr.result_facts["fingerprint"] = fingerprint(ctx.profile, arm)
    per: dict[str, list[dict[str, Any]]] = {}
    probes: dict[str, Any] = {}
    try:
        if not await sr.launch():
            return sr.facts.result(sr.result_facts)
        if not await sr.wait_ready():
            return sr.facts.result(sr.result_facts)
        if not await sr.smoke():
            return sr.facts.result(sr.result_facts)
        for w in workloads:
            ctx.emit(ArmProgress(sid, w.name, 0, repeats, names))
            probe = await _probe(ctx, sr, w)
            if probe is not None:
                probes[w.name] = probe
            per[w.name] = []
            for r in range(1, repeats + 1):
                ctx.emit(ArmProgress(sid, w.name, r, repeats, names))
                data = await run_benchmark(ctx, sr, result_name(ctx.profile, sid, w.name, r), workload=w,
                                           label=f"{w.name} r{r}")
                if data is None or sr.facts.failed:
                    sr.result_facts["repeats"] = per
                    sr.result_facts["probe"] = probes
                    return sr.facts.result(sr.result_facts)
                per[w.name].append(data)
        sr.result_facts["repeats"] = per
        sr.result_facts["probe"] = probes
        first = per[names[0]]
        if first:
            sr.result_facts["bench"] = first[-1]
        ctx.emit(Notice(sid, "info", f"{arm.title}: {repeats} repeat(s) on {', '.join(names)} done"))
        return sr.facts.result(sr.result_facts)
    finally:
        await sr.stop()
