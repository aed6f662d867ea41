"""The benchmark inside steps `baseline` and `eagle3`: `vllm bench serve` against the running server.

Version-aware argv (commands.bench_argv), live progress from bench's tqdm bar, the result JSON left
untouched as `<run>/baseline.json` / `<run>/eagle3.json` (the tutorial's file names), acceptance from a
/metrics scrape right before and right after the run (vLLM's delta method, every vLLM version), and a
cross-check against bench's own Speculative Decoding block where it printed one.

Dataset (prepare_bench_dataset, before the server launches): vLLM < 0.32 benchmarks sonnet.txt with
`--dataset-name sonnet`; vLLM >= 0.32 has no sonnet dataset, so the same prompts (vLLM's SonnetDataset
sampling, the target's tokenizer) are built once per run into `<run>/sonnet.custom.jsonl` by
tui/tools/sonnet_custom.py running in the vLLM interpreter, and the bench runs `--dataset-name custom`.
The run is judged by the result file, never by the bench's exit code (vLLM 0.32 exits 0 when every
request failed).

Isolation: the server's own counters around the bench (requests finished, tokens generated, requests still held
after it) are compared with what the bench sent (metrics.isolation, settled for up to SETTLE_S). A bench another
client shared the server with is *contaminated*: its facts carry `contaminated`, its result file stays, the
statistics leave it out (tui/core/results/contamination.py) and a fact plus the bench-contaminated diagnosis name it
(a warning for a tune repeat; a failure for a two-arm run's bench, which would otherwise give the speedup).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import httpx

from tui.core.serverlog import diagnostics as dg
from tui.core.bench import metrics as mx
from tui.core.bench.benchparse import (BenchParseError, BenchResult, TqdmProgressParser, first_request_error, parse_result_json,
                          parse_stdout_blocks)
from tui.core.plan import build as plan
from tui.core.plan.arms import level_key
from tui.core.plan.commands import CUSTOM_JSONL, DATASET_MODE_LABELS, dataset_mode, format_command, level_prompts
from tui.core.events import Artifact, BenchSample, Command, Notice, Progress
from tui.core.proc.child import wait_child
from tui.core.proc.supervisor import ManagedProcess
from tui.core.steps.base import FactRecorder, StepContext
from tui.core.steps.benchrun import BenchChild, bench_env
from tui.core.host.interpreter import find_server_interpreter, probe_vllm_version, server_launch_env
from tui.core.steps import dataset as dataset_step
from tui.core.store.rundir import atomic_write_json, file_digest

METRICS_POLL_S = 1.0  # /metrics is sampled about once a second during a bench (the time series)
SETTLE_S = 3.0        # after a bench: how long the isolation check waits for the server's counters to settle
SETTLE_POLL_S = 0.25
CONTAMINATED_SUFFIX = ".contaminated"  # a contaminated result file set aside before its repeat is measured again
TEST_RUN_DONE = "Initial test run completed"  # the bench's ready check sent one request outside its count


async def vllm_version(ctx: StepContext) -> str | None:
    """The vLLM version the profile runs: from the env step, or a fresh probe of the interpreter that owns
    `vllm` in the run's environment (on a stand-in platform, its stub `vllm`; run in a thread: it starts a
    subprocess)."""
    env = ctx.shared.get("env") or {}
    if env.get("vllm_version"):
        return str(env["vllm_version"])

    try:
        return await asyncio.to_thread(probe_vllm_version, ctx.profile, ctx.ph, ctx.environ)
    except Exception:  # an unknown version only disables the version-aware flags
        return None


BUILD_TIMEOUT_S = 600.0  # loading a hub tokenizer and tokenizing a few hundred prompts


def sonnet_removed(version: str | None) -> bool:
    return dataset_mode(version) == "custom-from-sonnet"


async def ensure_dataset(ctx: StepContext, facts: FactRecorder) -> str | None:
    """Path of the verified dataset for this run, fetching it first when the dataset step has not run."""
    ds = ctx.shared.get("dataset") or {}
    if ds.get("path") and Path(ds["path"]).is_file():
        return str(ds["path"])

    ctx.emit(Notice(facts.step, "info", "the dataset is not prepared in this run directory: fetching it first"))
    res = await dataset_step.run(ctx)
    if res.status in ("passed", "warned") and res.facts.get("path"):
        ctx.shared["dataset"] = res.facts
        return str(res.facts["path"])
    facts.add("dataset", "unavailable", "fail", res.summary, "run the dataset step (--steps dataset) first")
    return None


def _vllm_python(ctx: StepContext) -> tuple[list[str] | None, str]:
    """(argv prefix of the interpreter that owns the profile's `vllm`, error): the env step's finding, else
    a fresh look at server.command[0]."""
    env = ctx.shared.get("env") or {}
    if env.get("vllm_python"):
        return [str(env["vllm_python"])], ""
    cmd0 = ctx.ph.resolve(ctx.profile.server.command[0])
    interp = find_server_interpreter(cmd0, server_launch_env(ctx.profile, ctx.ph, ctx.environ))
    if not interp.python:
        return None, interp.error or f"cannot tell which Python runs {cmd0}"
    return interp.argv, ""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


async def ensure_custom_jsonl(ctx: StepContext, facts: FactRecorder, sonnet_path: str) -> str | None:
    """vLLM >= 0.32: `<run>/sonnet.custom.jsonl`, the sonnet prompts built by tui/tools/sonnet_custom.py in the
    vLLM interpreter (once per run: reused while its inputs are unchanged). None after a failed fact."""
    step = facts.step
    env_facts = ctx.shared.get("env") or {}
    python, err = _vllm_python(ctx)
    where = python[0] if python else "the interpreter that runs vllm"
    if python is None:
        facts.add("bench dataset", "no vLLM interpreter", "fail", err,
                  "check server.command: the custom JSONL is built with the Python that runs vllm")
        return None
    for pkg, key, why in (("pandas", "bench_has_pandas", "`vllm bench serve --dataset-name custom` reads the JSONL "
                           "with pandas (vLLM's [bench] extra)"),
                          ("transformers", "bench_has_transformers", "the sonnet prompts are built with the "
                           "target's tokenizer")):
        if env_facts.get(key) is False:
            facts.add(pkg, f"not installed in {where}", "fail", why,
                      f"`{where} -m pip install {pkg}` (or `pip install 'vllm[bench]'` in that environment)")
            return None
    out = ctx.run.file(CUSTOM_JSONL)
    meta_file = ctx.run.file(CUSTOM_JSONL + ".meta.json")
    argv = plan.custom_builder_argv(ctx.profile, python, sonnet_path, str(out), ctx.ph)
    sonnet_sha = (ctx.shared.get("dataset") or {}).get("sha256") or await asyncio.to_thread(_sha256, Path(sonnet_path))
    key = {"argv": argv[len(python):], "python": python, "sonnet_sha256": sonnet_sha}
    label = DATASET_MODE_LABELS["custom-from-sonnet"]
    if out.is_file() and meta_file.is_file():
        try:
            meta = json.loads(meta_file.read_text())
        except (OSError, ValueError):
            meta = {}
        if meta.get("key") == key and isinstance(meta.get("summary"), dict):
            sm = meta["summary"]
            facts.add("bench dataset", label, "pass",
                      f"reused {out.name}: {sm.get('num_prompts')} prompts, mean {sm.get('mean_prompt_tokens')} tokens")
            ctx.emit(Artifact(step, out.name, str(out)))
            return str(out)
    text = format_command(argv)
    ctx.emit(Notice(step, "info", f"vLLM >= 0.32 has no sonnet dataset: building the sonnet prompts as {out.name}"))
    ctx.emit(Command(step, "tool", tuple(argv), text))
    lines: list[str] = []
    log = ctx.run.file(CUSTOM_JSONL.replace(".jsonl", ".log"))
    proc = ManagedProcess(argv, server_launch_env(ctx.profile, ctx.ph, ctx.environ), log,
                          on_line=lambda line, ts: lines.append(line), cwd=str(ctx.run.path), grace_s=2.0)
    try:
        await proc.start()
    except (OSError, ValueError) as exc:
        facts.add("bench dataset", "cannot start the builder", "fail", str(exc), "check server.command in the profile")
        return None
    ctx.cleanups.append(proc)
    rc, _ = await wait_child(proc, BUILD_TIMEOUT_S)  # a cancellation: the engine stops it
    await proc.stop(grace_s=1)
    ctx.forget(proc)
    summary: dict | None = None
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                summary = json.loads(line)
            except ValueError:
                summary = None
            break
    if rc != 0 or summary is None or not out.is_file():
        errs = [ln for ln in lines if ln.startswith("sonnet_custom: error:")] or [ln for ln in lines if ln.strip()]
        detail = errs[-1] if errs else (f"exit status {rc}" if rc is not None
                                        else f"did not finish within {BUILD_TIMEOUT_S:.0f} s")
        if "transformers is not importable" in detail or "No module named 'transformers'" in detail:
            remedy = f"`{where} -m pip install transformers` (the interpreter that runs vllm)"
        elif "cannot load the tokenizer" in detail:
            remedy = ("make the target's tokenizer loadable there (HF_TOKEN / HF_HUB_OFFLINE with a filled cache, or "
                      "a local models.target directory)")
        else:
            remedy = f"see {log.name} in the run directory"
        facts.add("bench dataset", "building the custom JSONL failed", "fail", detail, remedy)
        return None
    try:
        atomic_write_json(meta_file, {"key": key, "summary": summary})
    except (OSError, TypeError, ValueError):
        pass
    facts.add("bench dataset", label, "pass",
              f"{summary.get('num_prompts')} prompts, mean {summary.get('mean_prompt_tokens')} tokens, built with "
              f"{ctx.ph.resolve(ctx.profile.models.target)}'s tokenizer in {where}")
    ctx.emit(Artifact(step, out.name, str(out)))
    return str(out)


async def prepare_bench_dataset(ctx: StepContext, sr: Any) -> bool:
    """Before the launch: the verified sonnet.txt and, on vLLM >= 0.32, the custom JSONL built from it.
    Sets sr.dataset_path (what the bench's --dataset-path gets). False after a failed fact."""
    sonnet = await ensure_dataset(ctx, sr.facts)
    if sonnet is None:
        return False
    if dataset_mode(sr.vllm_version) == "sonnet":
        sr.dataset_path = sonnet
        return True
    built = await ensure_custom_jsonl(ctx, sr.facts, sonnet)
    if built is None:
        return False
    sr.dataset_path = built
    return True


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


def _result_facts(facts: FactRecorder, res: BenchResult, result_file: Path, first_error: str | None,
                  spec: mx.SpecStats | None, source: str | None, speculative: bool, where: str) -> None:
    """The facts of a two-arm run's benchmark: requests, throughput, TPOT / TTFT, acceptance."""
    facts.add("requests", f"{res.completed} completed, {res.failed} failed", "pass" if res.failed == 0 else "fail",
              f"{res.duration:.1f}s benchmark duration (from {result_file.name})"
              + (f"; first error: {first_error}" if first_error else ""),
              "" if res.failed == 0 else where)
    if res.output_throughput is not None:
        facts.add("output throughput", f"{res.output_throughput:.2f} tok/s", "pass",
                  f"request throughput {res.request_throughput or 0:.2f} req/s")
    if res.tpot is not None and res.tpot.median is not None:
        ttft = res.ttft.median if res.ttft and res.ttft.median is not None else float("nan")
        facts.add("median TPOT / TTFT", f"{res.tpot.median:.2f} ms / {ttft:.2f} ms", "pass")
    if speculative:
        if spec is not None:
            facts.add("acceptance", f"{spec.acceptance_rate:.2f}% "
                                    f"(length {spec.acceptance_length:.2f})", "pass",
                      f"from the {'/metrics delta' if source == 'metrics' else 'bench output'}; per position "
                      + ", ".join(f"{p:.1f}%" for p in spec.per_position))
        else:
            facts.add("acceptance", "unknown", "warn", "no vllm:spec_decode counters moved during the run",
                      "check that the server runs with --speculative-config and without --disable-log-stats")


PARTIAL_SUFFIX = ".partial"


def set_aside(ctx: StepContext, step: str, result_file: Path) -> Path | None:
    """A bench that did not finish (interrupted, timed out) or wrote no readable result: move what it left under
    the result's name to `<name>.partial`, a name no reader takes for a result (replacing an older one), and note
    it in ctx.runtime["partial"][step] for the step's summary. Returns the new path, None when nothing was there."""
    if not result_file.exists():
        return None
    partial = result_file.with_name(result_file.name + PARTIAL_SUFFIX)
    try:
        result_file.replace(partial)
    except OSError:
        try:  # it must not stay under the result's name
            result_file.unlink()
        except OSError:
            pass
        return None
    ctx.runtime.setdefault("partial", {}).setdefault(step, []).append(partial.name)
    return partial


def _recorded_contamination(ctx: StepContext, step: str, result_file: Path) -> dict[str, Any] | None:
    """What state.json records of `result_file` as a contaminated bench of `step` (its facts' bench or a repeat):
    the record's `contaminated` (its text and counts), None when it is not recorded as one."""
    facts = ((ctx.run.state.get("steps") or {}).get(step) or {}).get("facts")
    if not isinstance(facts, dict):
        return None
    recs = [facts.get("bench")] + [r for rs in (facts.get("repeats") or {}).values() if isinstance(rs, list)
                                   for r in rs]
    for r in recs:
        if isinstance(r, dict) and isinstance(r.get("contaminated"), dict) and r.get("result_file") == str(result_file):
            return r["contaminated"]
    return None


def _set_aside_contaminated(ctx: StepContext, step: str, result_file: Path) -> dict[str, Any] | None:
    """Before a bench is measured again: a result that state.json records as contaminated is kept as evidence under
    `<name>.contaminated` (a name no reader takes for a result) and said live; any other old result is removed.
    Returns {kept_as, text} for the new measurement's record (the report names the earlier one), or None."""
    if not result_file.exists():
        return None
    old = _recorded_contamination(ctx, step, result_file)
    if old is None:
        result_file.unlink()
        return None
    kept = result_file.with_name(result_file.name + CONTAMINATED_SUFFIX)
    result_file.replace(kept)
    text = str(old.get("text") or "another client used the server")
    ctx.emit(Notice(step, "warning", f"{result_file.name} was contaminated ({text}): kept as {kept.name}, "
                                     "left out of every statistic, and measured again"))
    return {"kept_as": kept.name, "text": text}


async def _isolation(url: str, before: mx.ServerCounters | None, after: mx.ServerCounters | None, res: BenchResult,
                     max_tokens: int | None, test_runs: int) -> dict[str, Any]:
    """mx.isolation for this bench, from the counters right after it and, while they have not settled (requests
    still on the server, or fewer finished than the bench sent), from fresh scrapes up to SETTLE_S later: a foreign
    request still running when the bench ended is seen when it finishes or by the gauges, never missed."""

    def check(a: mx.ServerCounters | None) -> dict[str, Any]:
        return mx.isolation(before, a, completed=res.completed, failed=res.failed,
                            output_tokens=res.total_output_tokens, max_tokens=max_tokens, extra_requests=test_runs)

    iso = check(after)
    deadline = time.monotonic() + SETTLE_S
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0)) as client:
        while (iso.get("checked") and (iso["in_flight"] or iso["server_requests"] < iso["bench_requests"])
               and time.monotonic() < deadline):
            await asyncio.sleep(SETTLE_POLL_S)
            _, now = await _scrape_spec(client, url)
            if now is None:
                break
            iso = check(now)
    return iso


def _contaminated_facts(ctx: StepContext, sr: Any, label: str, result_file: Path, iso: dict[str, Any],
                        tune: bool) -> None:
    """A bench another client shared the server with: one fact naming it (warn for a tune run's repeat, which the
    statistics leave out; fail for a two-arm run's bench, which would otherwise give the speedup) and the
    bench-contaminated diagnosis."""
    s = sr.prof.server
    kept = f"kept in {result_file.name}, left out of every statistic"
    if tune:
        sr.facts.add(f"contaminated {label}", iso["text"], "warn", kept,
                     f"find the other client of {s.host}:{s.port} and continue this run with the same --run-dir: "
                     "the repeat is benchmarked again")
    else:
        sr.facts.add("contaminated bench", iso["text"], "fail", kept + ": no speedup from it",
                     f"find the other client of {s.host}:{s.port}, stop it, then retry this step")
    ctx.emit(dg.make("bench-contaminated", sr.step, [f"{label}: {iso['text']}"],
                     severity="warning" if tune else "error", host=s.host, port=s.port))


class MetricsSeries:
    """The server's /metrics during one bench, one window per scrape (about a second): counter deltas of generated
    tokens and of the spec-decode counters, emitted live as BenchSample events and kept for the result facts
    (`timeseries`). Every number is a delta of the server's own counters."""

    def __init__(self, ctx: StepContext, step: str, label: str, key: str, level: int | None, t0: float,
                 spec: mx.SpecCounters | None, srv: mx.ServerCounters | None):
        self.ctx, self.step, self.label, self.key, self.level, self.t0 = ctx, step, label, key, level, t0
        self.last_t = t0
        self.last_spec, self.last_srv = spec, srv
        self.windows: list[dict[str, Any]] = []

    def add(self, now: float, spec: mx.SpecCounters | None, srv: mx.ServerCounters | None) -> None:
        if srv is None or self.last_srv is None:
            self.last_t, self.last_spec, self.last_srv = now, spec, srv
            return
        dt = max(now - self.last_t, 1e-6)
        gen = max(srv.generation_tokens - self.last_srv.generation_tokens, 0)
        win: dict[str, Any] = {"t0": round(self.last_t - self.t0, 3), "t1": round(now - self.t0, 3),
                               "generation_tokens": gen, "num_drafts": None, "draft_tokens": None,
                               "accepted_tokens": None, "per_position": None}
        st = mx.spec_delta(self.last_spec, spec)  # vLLM's delta method over the window (None: nothing drafted)
        if st is not None:
            win.update(num_drafts=st.num_drafts, draft_tokens=st.draft_tokens, accepted_tokens=st.accepted_tokens,
                       per_position=[round(p, 2) for p in st.per_position])
        elif spec is not None and self.last_spec is not None:  # a speculative server that drafted nothing here
            win.update(num_drafts=0, draft_tokens=0, accepted_tokens=0, per_position=[])
        self.windows.append(win)
        self.ctx.emit(BenchSample(self.step, self.label, round(now - self.t0, 3), round(dt, 3), gen,
                                  round(gen / dt, 2), None if st is None else round(st.acceptance_rate, 2),
                                  None if st is None else round(st.acceptance_length, 3),
                                  tuple(win["per_position"] or ()), self.level, self.key))
        self.last_t, self.last_spec, self.last_srv = now, spec, srv

    def record(self) -> dict[str, Any]:
        return {"interval_s": METRICS_POLL_S, "windows": self.windows}


async def run_benchmark(ctx: StepContext, sr: Any, result_name: str | None = None, workload: Any = None,
                        label: str = "", dataset_path: str | None = None, repeat: int = 1,
                        level: int | None = None) -> dict[str, Any] | None:
    """Run the benchmark for ServerRun `sr` (its server is up and smoke-tested). Adds facts to sr.facts and
    the parsed numbers to sr.result_facts["bench"]; returns them (None when the bench gave no result).

    A tune run's arm calls it once per workload and repeat: `result_name` is the repeat's result file,
    `workload` a tui.core.plan.workloads.Workload (None: the tutorial's sonnet) and `label` ("sonnet r2") makes the
    facts one compact line per repeat."""
    step = sr.step
    facts: FactRecorder = sr.facts
    prof = sr.prof
    version = sr.vllm_version
    dataset_path = dataset_path or sr.dataset_path
    stem = (result_name or f"{step}.json")[:-len(".json")]
    result_file = ctx.run.file(f"{stem}.json")
    replaced = _set_aside_contaminated(ctx, step, result_file)
    argv = plan.bench_argv(prof, str(result_file), dataset_path, version, ctx.ph, workload=workload, repeat=repeat,
                           level=level)
    env = bench_env(ctx)
    total = level_prompts(prof, level)
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
        key = level_key(workload.name if workload is not None else "sonnet", level)
        series = MetricsSeries(ctx, step, label, key, level, time.monotonic(), before, before_srv)

        def announce(how: str) -> None:  # the bench itself starts: its command, as it runs
            ctx.emit(Command(step, "bench", tuple(argv), format_command(argv), how=how))
            ctx.emit(Progress(step, "requests", 0, total, "req", None, None, "vllm bench serve"))

        proc = BenchChild(ctx, sr, argv, env, ctx.run.file(f"{stem}.bench.log"), on_line, on_chunk, announce)
        try:
            await proc.start()
        except (OSError, ValueError) as exc:
            facts.add("benchmark", "cannot start", "fail", str(exc), "check server.command in the profile")
            return None

        async def tokens_so_far() -> None:  # tokens generated so far (real, from the server's own counter)
            spec_now, srv = await _scrape_spec(client, sr.url)
            series.add(time.monotonic(), spec_now, srv)
            if srv is not None and before_srv is not None:
                gen = srv.generation_tokens - before_srv.generation_tokens
                rate = tok_rate.add(time.monotonic(), gen)  # from the first token, over a recent window
                ctx.emit(Progress(step, "tokens", gen, out_tokens_target, "tok", rate,
                                  None, "generated tokens"))

        try:
            rc, timed_out = await wait_child(proc, float(prof.benchmark.timeout_s), started_at=t0,
                                             every_s=METRICS_POLL_S, on_every=tokens_so_far)
        except asyncio.CancelledError:
            try:  # the bench goes first, so that nothing it writes while stopping lands under the result's name
                await asyncio.shield(proc.stop(grace_s=2))
            finally:  # (else the engine's cleanup stops it: it is registered in ctx.cleanups)
                set_aside(ctx, step, result_file)
            raise
        if timed_out:
            await proc.stop(grace_s=5)  # a warm bench: its whole runner (the next bench starts a new one)
            kept = set_aside(ctx, step, result_file)
            facts.add("benchmark", f"timed out after {prof.benchmark.timeout_s:.0f}s", "fail",
                      f"its partial output is kept as {kept.name} (not a result)" if kept else "",
                      "raise benchmark.timeout_s or lower benchmark.num_prompts")
            return None
        await proc.finish()
        after, after_srv = await _scrape_spec(client, sr.url)
        series.add(time.monotonic(), after, after_srv)
    ctx.emit(Progress(step, "requests", total if rc == 0 else 0, total, "req", None, 0, "vllm bench serve",
                      done=True))
    bench_secs = time.monotonic() - t0
    if rc != 0 and not result_file.exists():
        tail = [ln for ln in stdout_lines[-6:] if ln.strip()]
        remedy = f"see {stem}.bench.log in the run directory"
        if any("No module named 'pandas'" in ln for ln in tail):
            python, _ = _vllm_python(ctx)
            where = python[0] if python else "the interpreter that runs vllm"
            remedy = (f"`{where} -m pip install pandas` (vLLM's [bench] extra): `--dataset-name custom` reads the "
                      "JSONL with pandas")
        facts.add("benchmark" + (f" {label}" if label else ""), f"vllm bench serve exited with code {rc}", "fail",
                  tail[-1] if tail else "", remedy)
        return None
    try:
        res = parse_result_json(result_file)
    except (OSError, BenchParseError) as exc:
        kept = set_aside(ctx, step, result_file)
        facts.add("benchmark result", "unreadable", "fail", str(exc) + (f" (kept as {kept.name})" if kept else ""),
                  f"see {stem}.bench.log")
        return None
    if rc != 0:
        facts.add("benchmark", f"vllm bench serve exited with code {rc}", "warn",
                  "it still wrote its result file; judged by that file", f"see {stem}.bench.log")
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
    try:  # state.json records the file's sha256 and size: a continued run checks the file before reusing it

        data.update(file_digest(result_file))
    except OSError:
        pass
    data["argv"] = list(argv)  # the bench exactly as run (report.md prints it)
    data["command"] = format_command(argv)
    data["ran"] = "warm" if proc.how else "process"  # in the arm's warm runner, or as its own process
    data["bench_seconds"] = round(bench_secs, 2)
    data["vllm_version"] = version
    data["dataset_mode"] = dataset_mode(version) if workload is None or workload.name == "sonnet" else workload.name
    data["dataset_path"] = dataset_path
    data["seed"] = plan.bench_seed(prof, repeat)  # the repeat's --seed (None: the bench's default, 0)
    data["concurrency"] = level if level is not None else prof.benchmark.max_concurrency
    data["num_prompts"] = total
    data["request_goodput"] = res.request_goodput
    slo = prof.tune.slo.limits() if prof.tune is not None and prof.tune.slo is not None else {}
    data["goodput_slo"] = slo if level is not None and slo else None
    data["timeseries"] = series.record()
    iso = await _isolation(sr.url, before_srv, after_srv, res, prof.benchmark.output_len,
                           sum(1 for ln in stdout_lines if TEST_RUN_DONE in ln))
    data["isolation"] = iso
    if iso.get("contaminated"):
        data["contaminated"] = {k: iso[k] for k in ("text", "foreign_requests", "foreign_tokens", "in_flight",
                                                    "server_requests", "bench_requests")}
    if replaced is not None:
        data["replaces_contaminated"] = replaced
    if workload is not None:
        data["workload"] = workload.name
    if bench_spec is not None:
        data["bench_acceptance_rate"] = bench_spec.acceptance_rate
    sr.result_facts["bench"] = data

    # Facts.
    first_error = first_request_error("\n".join(stdout_lines)) if res.failed else None
    if first_error:
        data["first_error"] = first_error
    where = f"see {step}.serve.log (the server) and {stem}.bench.log (the bench)"
    if label:  # one line per repeat of a tune run's arm
        parts = [f"{res.completed} completed, {res.failed} failed"]
        if res.output_throughput is not None:
            parts.append(f"{res.output_throughput:.2f} tok/s")
        if res.tpot is not None and res.tpot.median is not None:
            parts.append(f"TPOT {res.tpot.median:.2f} ms")
        if spec_for_report is not None and sr.speculative:
            parts.append(f"acceptance {spec_for_report.acceptance_rate:.1f}%")
        facts.add(label, ", ".join(parts[1:]) or parts[0], "pass" if res.failed == 0 else "fail",
                  f"{parts[0]} ({result_file.name})",
                  "" if res.failed == 0 else where)
    else:
        _result_facts(facts, res, result_file, first_error, spec_for_report, source, sr.speculative, where)
    if iso.get("contaminated"):
        _contaminated_facts(ctx, sr, label or result_file.name, result_file, iso, tune=bool(label))
    # Cross-checks.
    for d in dg.failed_requests_rule(step, {"failed": res.failed, "completed": res.completed,
                                            "first_error": first_error}):
        ctx.emit(d)
    if ours is not None and bench_spec is not None:
        for d in dg.agreement_rule(step, bench_spec.acceptance_rate, ours.acceptance_rate):
            ctx.emit(d)
    printed = (stdout_blocks.get("serving") or {}).get("Output token throughput (tok/s)")
    if printed is not None and res.output_throughput is not None and abs(printed - res.output_throughput) > 0.006:
        facts.add("stdout vs JSON", f"{printed} vs {res.output_throughput:.2f}", "warn",
                  "the printed block and the result file disagree")
    return data
