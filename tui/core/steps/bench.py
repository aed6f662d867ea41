"""The benchmark inside steps `baseline` and `eagle3`: `vllm bench serve` against the running server.

Version-aware argv (commands.bench_argv), live progress from bench's tqdm bar, the result JSON left
untouched as `<run>/baseline.json` / `<run>/eagle3.json` (the tutorial's file names), acceptance from a
/metrics scrape right before and right after the run (vLLM's delta method, every vLLM version), and a
cross-check against bench's own Speculative Decoding block where it printed one.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from .. import diagnostics as dg
from .. import metrics as mx
from ..benchparse import BenchParseError, BenchResult, TqdmProgressParser, parse_result_json, parse_stdout_blocks
from ..commands import _version_tuple, bench_argv, format_command
from ..events import Data, Notice, Progress
from ..supervisor import ManagedProcess
from .base import FactRecorder, StepContext

METRICS_POLL_S = 2.0


async def vllm_version(ctx: StepContext) -> str | None:
    """The vLLM version the profile runs: from the env step, the simulation table, or a fresh probe of the
    interpreter that owns `vllm` (run in a thread: it starts a subprocess)."""
    env = ctx.shared.get("env") or {}
    if env.get("vllm_version"):
        return str(env["vllm_version"])
    if ctx.profile.simulated:
        return str(ctx.profile.data["simulation"]["vllm_version"])
    from ..probe import probe_vllm_version

    try:
        return await asyncio.to_thread(probe_vllm_version, ctx.profile, ctx.ph, ctx.environ)
    except Exception:  # an unknown version only disables the version-aware flags
        return None


def sonnet_removed(version: str | None) -> bool:
    vt = _version_tuple(version)
    return vt is not None and vt >= (0, 32)


async def ensure_dataset(ctx: StepContext, facts: FactRecorder) -> str | None:
    """Path of the verified dataset for this run, fetching it first when the dataset step has not run."""
    ds = ctx.shared.get("dataset") or {}
    if ds.get("path") and Path(ds["path"]).is_file():
        return str(ds["path"])
    from . import dataset as dataset_step

    ctx.emit(Notice(facts.step, "info", "the dataset is not prepared in this run directory: fetching it first"))
    res = await dataset_step.run(ctx)
    if res.status in ("passed", "warned") and res.facts.get("path"):
        ctx.shared["dataset"] = res.facts
        return str(res.facts["path"])
    facts.add("dataset", "unavailable", "fail", res.summary, "run the dataset step (--steps dataset) first")
    return None


def bench_facts(res: BenchResult, spec: mx.SpecStats | None, source: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "output_throughput": res.output_throughput,
        "request_throughput": res.request_throughput,
        "total_token_throughput": res.total_token_throughput,
        "duration_s": res.duration,
        "completed": res.completed,
        "failed": res.failed,
        "num_prompts": res.num_prompts,
    }
    for metric in ("ttft", "tpot", "itl", "e2el"):
        st = res.latency(metric)
        out[f"mean_{metric}_ms"] = st.mean if st else None
        out[f"median_{metric}_ms"] = st.median if st else None
        out[f"p99_{metric}_ms"] = st.p99 if st else None
        out[f"p90_{metric}_ms"] = st.p90 if st else None
    if spec is not None:
        out["acceptance_rate"] = round(spec.acceptance_rate, 4)
        out["acceptance_length"] = round(spec.acceptance_length, 4)
        out["per_position_acceptance"] = [round(p, 4) for p in spec.per_position]
        out["num_drafts"] = spec.num_drafts
        out["draft_tokens"] = spec.draft_tokens
        out["accepted_tokens"] = spec.accepted_tokens
    else:
        out["acceptance_rate"] = None
        out["acceptance_length"] = None
        out["per_position_acceptance"] = None
    out["acceptance_source"] = source
    return out


async def _scrape_spec(client: httpx.AsyncClient, url: str) -> tuple[mx.SpecCounters | None, mx.ServerCounters | None]:
    try:
        text = await mx.scrape(url, client)
        return mx.parse_spec_counters(text), mx.parse_server_counters(text)
    except (httpx.HTTPError, mx.MetricsError):
        return None, None


async def run_benchmark(ctx: StepContext, sr: Any) -> None:
    """Run the benchmark for ServerRun `sr` (its server is up and smoke-tested). Adds facts to sr.facts and
    the parsed numbers to sr.result_facts["bench"]."""
    step = sr.step
    facts: FactRecorder = sr.facts
    prof = ctx.profile
    dataset_path = sr.dataset_path
    version = sr.vllm_version
    result_file = ctx.run.file(f"{step}.json")
    if result_file.exists():
        result_file.unlink()
    argv = bench_argv(prof, str(result_file), dataset_path, version, ctx.ph)
    ctx.emit(Data(step, "bench_command", {"argv": argv, "text": format_command(argv)}))
    env = dict(ctx.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    total = prof.benchmark.num_prompts
    out_tokens_target = total * prof.benchmark.output_len
    tqdm = TqdmProgressParser()
    tok_rate = mx.TokenRate(window_s=15.0)
    stdout_lines: list[str] = []
    t0 = time.monotonic()

    def on_chunk(text: str) -> None:
        p = tqdm.feed(text)
        if p is not None and p.total:
            ctx.emit(Progress(step, "requests", p.n, p.total, "req", p.rate, p.eta, "vllm bench serve",
                              done=False))

    def on_line(line: str, ts: float) -> None:
        stdout_lines.append(line)

    async with httpx.AsyncClient(timeout=httpx.Timeout(10.0)) as client:
        before, before_srv = await _scrape_spec(client, sr.url)
        proc = ManagedProcess(argv, env, ctx.run.file(f"{step}.bench.log"), on_line=on_line, on_chunk=on_chunk,
                              grace_s=2.0)
        try:
            await proc.start()
        except (OSError, ValueError) as exc:
            facts.add("benchmark", "cannot start", "fail", str(exc), "check server.command in the profile")
            return
        ctx.cleanups.append(proc)
        ctx.emit(Progress(step, "requests", 0, total, "req", None, None, "vllm bench serve"))
        waiter = asyncio.ensure_future(proc.wait())
        deadline = t0 + float(prof.benchmark.timeout_s)
        timed_out = False
        try:
            while True:
                done, _ = await asyncio.wait({waiter}, timeout=METRICS_POLL_S)
                if done:
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                # Tokens generated so far (real, from the server's own counter).
                _, srv = await _scrape_spec(client, sr.url)
                if srv is not None and before_srv is not None:
                    gen = srv.generation_tokens - before_srv.generation_tokens
                    rate = tok_rate.add(time.monotonic(), gen)  # from the first token, over a recent window
                    ctx.emit(Progress(step, "tokens", gen, out_tokens_target, "tok", rate,
                                      None, "generated tokens"))
        except asyncio.CancelledError:
            waiter.cancel()
            raise  # the engine's cleanup stops the bench process (registered above)
        if timed_out:
            waiter.cancel()
            await proc.stop(grace_s=5)
            ctx.forget(proc)
            facts.add("benchmark", f"timed out after {prof.benchmark.timeout_s:.0f}s", "fail", "",
                      "raise benchmark.timeout_s or lower benchmark.num_prompts")
            return
        rc = waiter.result()
        await proc.stop(grace_s=1)
        ctx.forget(proc)
        after, _ = await _scrape_spec(client, sr.url)
    ctx.emit(Progress(step, "requests", total if rc == 0 else 0, total, "req", None, 0, "vllm bench serve",
                      done=True))
    bench_secs = time.monotonic() - t0
    if rc != 0:
        tail = [ln for ln in stdout_lines[-6:] if ln.strip()]
        facts.add("benchmark", f"vllm bench serve exited with code {rc}", "fail",
                  tail[-1] if tail else "", f"see {step}.bench.log in the run directory")
        return
    try:
        res = parse_result_json(result_file)
    except (OSError, BenchParseError) as exc:
        facts.add("benchmark result", "unreadable", "fail", str(exc), f"see {step}.bench.log")
        return
    ours = mx.spec_delta(before, after)
    stdout_blocks: dict[str, Any] = {}
    try:
        stdout_blocks = parse_stdout_blocks("\n".join(stdout_lines))
    except Exception:
        stdout_blocks = {}
    bench_spec = res.spec
    if ours is not None:
        source = "metrics"
    elif bench_spec is not None:
        source = "bench"
    else:
        source = None
    spec_for_report = ours
    if spec_for_report is None and bench_spec is not None:
        spec_for_report = mx.SpecStats(bench_spec.acceptance_rate, bench_spec.acceptance_length,
                                       bench_spec.num_drafts, bench_spec.draft_tokens, bench_spec.accepted_tokens,
                                       list(bench_spec.per_position))
    data = bench_facts(res, spec_for_report, source)
    data["result_file"] = str(result_file)
    data["bench_seconds"] = round(bench_secs, 2)
    data["vllm_version"] = version
    if bench_spec is not None:
        data["bench_acceptance_rate"] = bench_spec.acceptance_rate
    sr.result_facts["bench"] = data

    # Facts.
    ok_status = "pass" if res.failed == 0 else ("fail" if res.completed == 0 else "warn")
    facts.add("requests", f"{res.completed} completed, {res.failed} failed", ok_status,
              f"{res.duration:.1f}s benchmark duration")
    if res.output_throughput is not None:
        facts.add("output throughput", f"{res.output_throughput:.2f} tok/s", "pass",
                  f"request throughput {res.request_throughput or 0:.2f} req/s")
    if res.tpot is not None and res.tpot.median is not None:
        ttft = res.ttft.median if res.ttft and res.ttft.median is not None else float("nan")
        facts.add("median TPOT / TTFT", f"{res.tpot.median:.2f} ms / {ttft:.2f} ms", "pass")
    if sr.speculative:
        if spec_for_report is not None:
            facts.add("acceptance", f"{spec_for_report.acceptance_rate:.2f}% "
                                    f"(length {spec_for_report.acceptance_length:.2f})", "pass",
                      f"from the {'/metrics delta' if source == 'metrics' else 'bench output'}; per position "
                      + ", ".join(f"{p:.1f}%" for p in spec_for_report.per_position))
        else:
            facts.add("acceptance", "unknown", "warn", "no vllm:spec_decode counters moved during the run",
                      "check that the server runs with --speculative-config and without --disable-log-stats")
    # Cross-checks.
    for d in dg.failed_requests_rule(step, {"failed": res.failed, "completed": res.completed}):
        ctx.emit(d)
    if ours is not None and bench_spec is not None:
        for d in dg.agreement_rule(step, bench_spec.acceptance_rate, ours.acceptance_rate):
            ctx.emit(d)
    printed = (stdout_blocks.get("serving") or {}).get("Output token throughput (tok/s)")
    if printed is not None and res.output_throughput is not None and abs(printed - res.output_throughput) > 0.006:
        facts.add("stdout vs JSON", f"{printed} vs {res.output_throughput:.2f}", "warn",
                  "the printed block and the result file disagree")
