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


SONNET_BASE_PROMPT = "Pick as many lines as you can from these poem lines:\n"
SONNET_PROBE_LINES = 15


async def _prepare_workload(ctx: StepContext, sr: ServerRun, name: str) -> tuple[Any, str] | None:
    """(Workload, the bench's --dataset-path) for `name`; chat / own get their custom JSONL written into the run
    directory. None after a failed fact."""
    from ..workloads import WorkloadError, bench_rows, resolve_workload

    t = ctx.profile.data.get("tune") or {}
    try:
        w = resolve_workload(name, ctx.ph.resolve(t.get("prompts_file") or ""), sr.dataset_path)
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

    from ..workloads import probe, probe_file_record, probe_inputs

    n = int((ctx.profile.data.get("tune") or {}).get("probe_prompts") or 0)
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
    from ..workloads import serve_flags_for_per_request

    sr.extra_serve_args = serve_flags_for_per_request(sr.vllm_version, arm.speculative)
    repeats = repeats_of(ctx.profile)
    names = tuple(w.name for w, _ in workloads)
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
        for w, dataset_path in workloads:
            ctx.emit(ArmProgress(sid, w.name, 0, repeats, names))
            probe = await _probe(ctx, sr, w, dataset_path)
            if probe is not None:
                probes[w.name] = probe
            elif sr.facts.failed:
                sr.result_facts["probe"] = probes
                return sr.facts.result(sr.result_facts)
            per[w.name] = []
            for r in range(1, repeats + 1):
                ctx.emit(ArmProgress(sid, w.name, r, repeats, names))
                data = await run_benchmark(ctx, sr, result_name(ctx.profile, sid, w.name, r), workload=w,
                                           label=f"{w.name} r{r}", dataset_path=dataset_path)
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
