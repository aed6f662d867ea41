"""report.json (a contract other tools read), report.md and summary.csv.

report.json keys (documented in the README):
  schema            "specdec-tui/report/1"
  profile           profile name;  simulated: bool;  exit_code: int;  run_dir: str;  generated: ISO time
  steps[]           {id, status, seconds, summary}
  runs.baseline / runs.eagle3
                    output_throughput, request_throughput, total_token_throughput, duration_s,
                    completed, failed, num_prompts, mean/median/p99 _ttft_ms/_tpot_ms/_itl_ms/_e2el_ms,
                    dataset_mode ("sonnet" | "custom-from-sonnet": vLLM >= 0.32, sonnet prompts as custom JSONL),
                    eagle3 also: acceptance_rate (percent), acceptance_length,
                    per_position_acceptance (percent per draft position), acceptance_source
  comparison        output_throughput_speedup, median_tpot_ratio, median_ttft_ratio (eagle3 / baseline)
  diagnostics[]     {id, severity, title, evidence[], remedy, step}
  verdict           {ok, text}: one sentence, the first thing report.md says
  settings          platform, models, TP/PP, speculative method and k, lengths, prompts, concurrency, ...
  versions          vllm, vllm_neuron, neuron_sdk, python (as the environment step found them)
  dataset           name, path, sha256, verified, source
  commands          {step: shell text}: the exact commands the run used (or will use)
  bench_commands    {step: [{workload, repeat, command}]}: every `vllm bench serve` exactly as it ran (seeds
                    included), read from what each benchmark recorded; "tool": the dataset builder where it ran
  host              platform, simulated, instance_type (the DMI product name), facts[] {name, value, detail}: the
                    environment step's host facts (env.json): instance type, CPUs, RAM, SDK, vLLM
  checks            {step: {smoke_passed, smoke_text, matches_baseline, lossless{workload: {identical, prompts}}}}:
                    each server's smoke test and lossless checks, as the arm steps recorded them
  launches[]        {id, title, status, startup_s, cache_hits, cache_misses, placement}: every server launch
  requested_steps   the steps asked for; steps[] lists each of them, "not run" where it never started
  contaminated[]    {arm, bench, repeat, result_file, text, measured_again}: benchmarks another client shared the
                    server with (its /metrics counters counted more than the bench sent); kept on disk, left out of
                    runs, comparison, matrix and load (results/contamination.py); measured_again: a later bench
                    replaced it, and it is kept as result_file
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tui.core.events import STEP_IDS, STEP_TITLES
from tui.core.store.rundir import RunDir, RunDirUnwritable, atomic_write_json, atomic_write_text
from tui.core.plan.arms import (arms_of, bench_keys, is_tune, levels_of, run_steps, schedule_verifiable, split_key,
                                step_title, workloads_of)
from tui.core.results import figures_draw
from tui.core.results.figures import FIGURES_DIR, ChartError
from tui.core.results.report_html import render_html
from tui.core.results import fleet as fleet_mod
from tui.core.results import load as load_mod
from tui.core.results import schedule as schedule_mod
from tui.core.results.gates import gate_metrics
from tui.core.plan.commands import CUSTOM_JSONL, Placeholders, format_command
from tui.core.profile.sections import SloSettings
from tui.core.results.contamination import contaminated_benches, usable_repeats
from tui.core.results.stats import build_matrix, selection_settings
from tui.core.results.report_md import render_markdown
from tui.core.results.report_rows import (  # noqa: F401  (comparison_rows, RUN_KEYS: re-exported for the front ends)
    RUN_KEYS, comparison, comparison_rows, render_csv, run_summary,
)
from tui.core.results.verdict_table import headline
from tui.core.plan.build import build_plan, recorded_vllm_version

SCHEMA_ID = "specdec-tui/report/1"


def _step_facts(sid: str, results: dict[str, Any], ctx: Any) -> dict[str, Any]:
    if sid in results and results[sid].facts:
        return results[sid].facts
    return ctx.shared.get(sid, {}) or {}


def _report_settings(profile: Any) -> dict[str, Any]:
    d = profile.data
    s, sp, b = d["server"], d["speculative"], d["benchmark"]
    return {
        "platform": d.get("platform", "neuron"),
        "target": profile.models.target, "draft": profile.draft_model,
        "method": sp.get("method"), "num_speculative_tokens": sp.get("num_speculative_tokens"),
        "tensor_parallel_size": s.get("tensor_parallel_size"),
        "pipeline_parallel_size": s.get("pipeline_parallel_size", 1),
        "dtype": s.get("dtype"), "max_model_len": s.get("max_model_len"), "max_num_seqs": s.get("max_num_seqs"),
        "max_num_batched_tokens": s.get("max_num_batched_tokens"),
        "enable_prefix_caching": s.get("enable_prefix_caching"),
        "input_len": b.get("input_len"), "output_len": b.get("output_len"), "num_prompts": b.get("num_prompts"),
        "max_concurrency": b.get("max_concurrency"),
        "host": s.get("host"), "port": s.get("port"),
        **({"tune": {k: v for k, v in profile.tune.as_table().items()
                     if k in ("num_speculative_tokens", "repeats", "workloads", "probe_prompts", "parallel", "drafts",
                              "prompts_file")}} if profile.tune is not None else {}),
    }


def _versions(ctx: Any) -> dict[str, Any]:
    env = ctx.shared.get("env") or {}
    return {"vllm": env.get("vllm_version"), "vllm_neuron": env.get("vllm_neuron_version"),
            "neuron_sdk": env.get("neuron_sdk"), "python": env.get("python_version")}


def _dataset(profile: Any, ctx: Any) -> dict[str, Any]:
    ds = ctx.shared.get("dataset") or {}
    d = profile.data["dataset"]
    return {"name": d.get("name"), "path": ds.get("path") or d.get("path") or None,
            "sha256": ds.get("sha256") or d.get("sha256") or None, "verified": ds.get("verified"),
            "source": ds.get("source") or d.get("url")}


def _commands(profile: Any, run: RunDir) -> dict[str, str]:
    """The exact commands: each launched step's own command.sh, else the planned ones (tui.core.plan.build)."""
    out: dict[str, str] = {}
    planned: Any = None
    for arm in arms_of(profile):
        sid = arm.id
        f = run.file(f"{sid}.command.sh")
        try:
            text = f.read_text(encoding="utf-8")
            lines = [ln for ln in text.splitlines() if not ln.startswith("#!")]
            out[sid] = "\n".join(lines).strip()
            continue
        except (OSError, UnicodeDecodeError):
            pass
        try:
            if planned is None:
                planned = build_plan(profile, str(run.path), recorded_vllm_version(run.path),
                                     ph=Placeholders(run_dir=str(run.path)))
            serve = planned.of(sid, "serve")
            if serve:
                out[sid] = "# planned (not launched)\n" + serve[0].text()
        except Exception:  # a report must never fail for want of a planned command
            continue
    return out


def verdict(exit_code: int, steps: list[dict[str, Any]], comp: dict[str, Any], runs: dict[str, Any],
            diags: list[dict[str, Any]]) -> dict[str, Any]:
    """One sentence for the top of the report, from the numbers and the steps' statuses."""
    failed = next((st for st in steps if st["status"] in ("failed", "unavailable")), None)
    sp = comp.get("output_throughput_speedup")
    acc = (runs.get("eagle3") or {}).get("acceptance_rate")
    acc_txt = f", acceptance {acc:.1f}%" if isinstance(acc, (int, float)) else ""
    if failed is not None and failed["id"] != "results":
        lead = next((d for d in diags if d["step"] == failed["id"] and d["severity"] == "error"), None)
        why = lead["title"] if lead else failed.get("summary") or "see the step's summary"
        return {"ok": False, "text": f"Failed at {failed.get('title') or STEP_TITLES.get(failed['id'], failed['id'])}: {why}."}
    if isinstance(sp, (int, float)):  # one run each: the verdict table's "faster / not faster in one run"
        if sp > 1.0:
            return {"ok": exit_code == 0, "text": f"EAGLE3 was faster in one run: {sp:.2f}x output throughput over "
                                                  f"the baseline{acc_txt} (one run each: no interval)."}
        return {"ok": False,
                "text": f"Speculation did not pay here: {sp:.2f}x output throughput{acc_txt} (one run each: no interval)."}
    if exit_code == 130:
        return {"ok": False, "text": "Interrupted before the comparison was complete."}
    if exit_code == 0:
        return {"ok": True, "text": "Every requested step passed."}
    return {"ok": False, "text": "The run did not complete."}


def build_report(profile: Any, run: RunDir, results: dict[str, Any], ctx: Any, exit_code: int) -> dict[str, Any]:
    steps = []
    state_steps = run.state.get("steps", {})
    requested = list(run.state.get("requested_steps") or [])
    order = run_steps(profile)
    order += [sid for sid in STEP_IDS if sid not in order]
    for sid in order:
        st = state_steps.get(sid)
        title = step_title(sid, profile)
        if not st:
            if sid in requested:
                steps.append({"id": sid, "title": title, "status": "not run", "seconds": None, "summary": "not run"})
            continue
        steps.append({"id": sid, "title": title, "status": st.get("status"), "seconds": st.get("seconds"),
                      "summary": st.get("summary", "")})
    tune = is_tune(profile)
    runs: dict[str, Any] = {}
    arms = arms_of(profile)
    for arm in arms:
        facts = _step_facts(arm.id, results, ctx)
        bench = facts.get("bench")
        summ = run_summary(bench, speculative=arm.speculative) if usable_repeats([bench]) else None
        if summ is not None:  # a contaminated bench gives no run and no speedup (rep["contaminated"] names it)
            runs[arm.id] = summ
    matrix = None
    if tune:
        matrix = tune_matrix(profile, {a.id: _step_facts(a.id, results, ctx) for a in arms},
                             {a.id: (state_steps.get(a.id) or {}).get("status") or "not run" for a in arms})
    diags = [
        {"id": d.id, "severity": d.severity, "title": d.title, "evidence": list(d.evidence), "remedy": d.remedy,
         "step": d.step, **({"setting": d.setting, "suggest": d.suggest} if d.setting else {})}
        for d in ctx.diagnoses
    ]
    order = {"error": 0, "warning": 1, "info": 2}
    diags.sort(key=lambda d: order.get(d["severity"], 3))
    comp = comparison(runs)
    rep = {
        "schema": SCHEMA_ID,
        "profile": profile.name,
        "simulated": bool(profile.simulated),
        "exit_code": int(exit_code),
        "run_dir": str(run.path),
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "verdict": verdict(int(exit_code), steps, comp, runs, diags),
        "models": {"target": profile.models.target, "draft": profile.draft_model},
        "settings": _report_settings(profile),
        "versions": _versions(ctx),
        "dataset": _dataset(profile, ctx),
        "commands": _commands(profile, run),
        "step_titles": {st["id"]: st["title"] for st in steps},
        "requested_steps": requested,
        "steps": steps,
        "runs": runs,
        "comparison": comp,
        "diagnostics": diags,
    }
    if matrix is not None:
        rep["matrix"] = matrix
    if isinstance(run.state.get("fleet"), dict):  # a fleet run (tui/core/exec/ray.py): its nodes and their numbers
        rep["fleet"] = fleet_mod.report_section(run.state["fleet"], matrix)
    facts_by_arm = {a.id: _step_facts(a.id, results, ctx) for a in arms}
    statuses = {a.id: (state_steps.get(a.id) or {}).get("status") or "not run" for a in arms}
    rep["contaminated"] = contaminated_benches(profile, facts_by_arm)
    rep["bench_commands"] = bench_commands(profile, run, facts_by_arm)
    rep["host"] = host_facts(run, ctx)
    rep["checks"] = arm_checks(profile, facts_by_arm, matrix)
    rep["launches"] = [dict(id=a.id, title=a.title, status=statuses[a.id], **arm_launch(facts_by_arm[a.id]))
                       for a in arms]

    if tune:
        load = load_report(profile, facts_by_arm, statuses)
        if load is not None:
            rf = _step_facts("results", results, ctx)  # the results step wrote the ready profile
            load["schedule_profile"] = rf.get("schedule_profile")
            load["schedule_profile_note"] = rf.get("schedule_profile_note")
            rep["load"] = load
    if matrix is not None:
        rep["verdict"] = tune_verdict(int(exit_code), steps, rep, diags) or rep["verdict"]
    rep["timeseries"] = timeseries_of(profile, facts_by_arm)
    rep["metrics"] = gate_metrics(rep)
    return rep


def bench_commands(profile: Any, run: RunDir, facts: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every benchmark exactly as it ran, from what each one recorded (its argv, seeds and all), per arm in run
    order; "tool": the sonnet custom-JSONL builder (vLLM >= 0.32) as its meta file records it."""
    import json


    out: dict[str, list[dict[str, Any]]] = {}
    try:
        meta = json.loads(run.file(CUSTOM_JSONL + ".meta.json").read_text(encoding="utf-8"))
        key = meta.get("key") or {}
        argv = list(key.get("python") or []) + list(key.get("argv") or [])
        if argv and all(isinstance(a, str) for a in argv):
            out["tool"] = [{"workload": "sonnet", "repeat": None, "command": format_command(argv)}]
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    for arm in arms_of(profile):
        f = facts.get(arm.id) or {}
        rows: list[dict[str, Any]] = []
        reps = f.get("repeats")
        if isinstance(reps, dict):
            for wl, recs in reps.items():
                for r, rec in enumerate(recs if isinstance(recs, list) else [], start=1):
                    if isinstance(rec, dict) and rec.get("command"):
                        rows.append({"workload": wl, "repeat": r, "command": rec["command"],
                                     "ran": rec.get("ran") or "process"})
        elif isinstance(f.get("bench"), dict) and f["bench"].get("command"):
            rows.append({"workload": f["bench"].get("workload") or "sonnet", "repeat": None,
                         "command": f["bench"]["command"], "ran": f["bench"].get("ran") or "process"})
        if rows:
            out[arm.id] = rows
    return out


HOST_FACTS = ("instance type", "CPUs", "CPU cores", "CPU ISA", "host RAM", "RAM", "GPUs", "CUDA (driver)",
              "Neuron SDK", "vllm-neuron", "vLLM", "vLLM CPU build")


def host_facts(run: RunDir, ctx: Any) -> dict[str, Any]:
    """The machine the run measured, as the environment step found it (env.json's facts and stored values)."""
    import json

    env = ctx.shared.get("env") or {}
    try:
        doc = json.loads(run.file("env.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    stored = doc.get("stored") if isinstance(doc.get("stored"), dict) else {}
    recs = [f for f in (doc.get("facts") or []) if isinstance(f, dict)]
    facts = []
    for name in HOST_FACTS:
        f = next((x for x in recs if x.get("name") == name), None)
        if f is not None:
            facts.append({"name": name, "value": f.get("value"), "detail": f.get("detail") or ""})
    return {"platform": env.get("platform") or stored.get("platform") or doc.get("platform"),
            "simulated": doc.get("simulated", env.get("simulated")),
            "instance_type": env.get("instance_type") or stored.get("instance_type"),
            "facts": facts}


def arm_checks(profile: Any, facts: dict[str, dict[str, Any]], matrix: dict[str, Any] | None) -> dict[str, Any]:
    """Each server's smoke test and lossless checks, as its step recorded them: the smoke reply, whether it passed,
    whether a speculative arm's greedy reply matched the baseline's, and (a tune run) the probe's per-prompt
    lossless check per workload."""
    out: dict[str, Any] = {}
    cells = (matrix or {}).get("cells") or {}
    for arm in arms_of(profile):
        sm = (facts.get(arm.id) or {}).get("smoke")
        if not isinstance(sm, dict):
            continue
        row: dict[str, Any] = {"smoke_passed": sm.get("passed"), "smoke_text": sm.get("text"),
                               "matches_baseline": sm.get("matches_baseline") if arm.speculative else None}
        lossless = {}
        for key, c in (cells.get(arm.id) or {}).items():  # a load sweep probes each workload once: one entry each
            if c and (c.get("lossless") or {}).get("prompts"):
                lossless.setdefault(split_key(key)[0], {"identical": c["lossless"].get("identical"),
                                                        "prompts": c["lossless"].get("prompts")})
        if arm.speculative and lossless:
            row["lossless"] = lossless
        out[arm.id] = row
    return out


def tune_matrix(profile: Any, facts: dict[str, dict[str, Any]], statuses: dict[str, str],
                fixed_only: bool = False) -> dict[str, Any]:
    """The matrix of a tune run (tui.core.results.stats.build_matrix) from each arm's step facts and status: what the
    results step shows and report.json carries. Its "workloads" are the bench keys (plan.arms.bench_keys: each
    workload, or each workload at each concurrency level of a load sweep). `fixed_only`: without the schedule
    arm (the load analysis derives the best k and the schedule from the fixed arms alone)."""

    arms = [a for a in arms_of(profile) if not (fixed_only and a.schedule)]
    rows = [dict(a.as_dict(), status=statuses.get(a.id) or "not run", **arm_launch(facts.get(a.id) or {}))
            for a in arms]
    by_arm = {a.id: facts.get(a.id) or {} for a in arms}
    fv = fleet_mod.view([a.id for a in arms], facts, bench_keys(profile))
    choose = selection_settings(profile.tune)
    if fv is None:
        return build_matrix(rows, by_arm, bench_keys(profile), selection=choose)
    return fleet_mod.matrix(rows, fv, bench_keys(profile), facts, selection=choose)


def load_report(profile: Any, facts: dict[str, dict[str, Any]], statuses: dict[str, str]) -> dict[str, Any] | None:
    """report.json's `load` for a tune run with a concurrency sweep (None otherwise): the analysis of the fixed arms
    (tui/core/results/load.py: per-level speedups and verdicts, the crossover, best k per level, the schedule,
    SLO goodput, drift, the speedup model) and, where a schedule arm ran, its verification against every fixed k."""
    levels = levels_of(profile)
    if not levels:
        return None
    matrix = tune_matrix(profile, facts, statuses, fixed_only=True)
    slo = profile.tune.slo if profile.tune is not None else None
    load = load_mod.analyze(matrix, facts, levels, workloads_of(profile), (slo.limits() or None) if slo else None,
                            attainment=slo.share if slo else SloSettings.DEFAULT_ATTAINMENT)
    sched_arm = next((a for a in arms_of(profile) if a.schedule), None)
    if sched_arm is None:
        load["schedule_verification"] = {"status": "unsupported", "arm": None,
                                         "text": "not run: " + (schedule_verifiable(profile) or "no schedule arm")}
    else:
        ver = schedule_mod.verify(dict(sched_arm.as_dict(), status=statuses.get(sched_arm.id)), matrix["arms"], facts,
                                  bench_keys(profile))
        skipped = (facts.get(sched_arm.id) or {}).get("skipped_because")
        if ver["status"] == "not_run" and skipped:
            ver["text"] = f"not run: {skipped}"
        ver["schedule"] = (facts.get(sched_arm.id) or {}).get("schedule")
        load["schedule_verification"] = ver
    return load


def timeseries_of(profile: Any, facts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """report.json's `timeseries`: {arm: {bench key: [{"repeat": r, "windows": [...]}]}}, the /metrics windows each
    bench recorded (tui/core/steps/bench.py MetricsSeries)."""
    out: dict[str, Any] = {}
    for a in arms_of(profile):
        f = facts.get(a.id) or {}
        reps = f.get("repeats") or ({"sonnet": [f["bench"]]} if isinstance(f.get("bench"), dict) else {})
        per: dict[str, Any] = {}
        for key, rows in reps.items():
            series = [{"repeat": i + 1, "windows": ((r or {}).get("timeseries") or {}).get("windows") or []}
                      for i, r in enumerate(rows or []) if isinstance(r, dict)]
            if any(s["windows"] for s in series):
                per[key] = series
        if per:
            out[a.id] = per
    return out


def arm_launch(facts: dict[str, Any]) -> dict[str, Any]:
    """An arm's launch as the matrix shows it: startup seconds, compile-cache hits and misses (reuse between arms
    is visible here: a later arm with the same graphs hits), its cores and port when launched in parallel, and
    the fleet node it ran on (its `node` object: Ray node id, address, host facts)."""
    su = facts.get("startup") or {}
    out: dict[str, Any] = {"startup_s": su.get("seconds"), "cache_hits": su.get("cache_hits"),
                           "cache_misses": su.get("cache_misses")}
    if facts.get("placement"):
        out["placement"] = facts["placement"]
    if isinstance(facts.get("node"), dict):
        out["node"] = facts["node"]
    return out


def tune_verdict(exit_code: int, steps: list[dict[str, Any]], rep: dict[str, Any],
                 diags: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A tune run's first sentence, short: the pick per workload (a load sweep: the best arm per run of levels,
    verdict_table.headline), or where the run failed. The details are in the verdict table under it."""
    failed = next((st for st in steps if st["status"] in ("failed", "unavailable")), None)
    if failed is not None and failed["id"] != "results":
        lead = next((d for d in diags if d["step"] == failed["id"] and d["severity"] == "error"), None)
        why = lead["title"] if lead else failed.get("summary") or "see the step's summary"
        return {"ok": False, "text": f"Failed at {failed.get('title') or failed['id']}: {why}."}
    text = headline(rep)
    if not text:
        return None
    recs = (rep.get("matrix") or {}).get("recommendation") or {}
    good = exit_code == 0 and all(r.get("arm") and not r.get("stop_tuning") for r in recs.values())
    return {"ok": good, "text": text}


def _charts_unwritable(exc: OSError | RunDirUnwritable, run: RunDir) -> str:
    where = run.path / FIGURES_DIR
    if isinstance(exc, RunDirUnwritable):
        why = f"{exc.reason()}. {exc.remedy()}"
    else:
        why = (f"{exc.strerror or exc} ({type(exc).__name__}). Make {where} a writable directory (move away a "
               "file in its way, or fix its permissions).")
    return (f"the chart files could not be written under {where}: {why} Then write the report again with "
            f"`--steps results --run-dir {run.path}`.")


def write_report(run: RunDir, rep: dict[str, Any]) -> Path:
    """report.json, report.md, summary.csv, the charts (figures/*.png|svg, linked from report.md) and report.html,
    each written atomically.

    A chart that cannot be drawn (matplotlib missing) is noted in report.json (`figures_error`) and never costs the
    report. Chart files that cannot be WRITTEN (figures/ read-only, full, or not a directory) leave the report
    without charts and say so, never a stale report: `not_written` names the files, `figures_error` says why and
    what to do, the exit code becomes 1 where it was 0 (the run's report is incomplete), and report.html is written
    without charts rather than left over from an earlier run. report.json, report.md and summary.csv are written
    either way; a run directory that cannot be written at all raises RunDirUnwritable (nothing saved is replaced)."""
    rep.pop("not_written", None)
    try:
        rep["figures"] = figures_draw.render_figures(rep, run.path)
        rep.pop("figures_error", None)
    except ChartError as exc:  # a chart never costs the report: report.md says why there are none
        rep["figures"] = []
        rep["figures_error"] = str(exc)
    except (OSError, RunDirUnwritable) as exc:  # figures/ is its own directory: the run directory is fine
        rep["figures"] = []
        rep["figures_error"] = _charts_unwritable(exc, run)
        rep["not_written"] = [f"{FIGURES_DIR}/*.png", f"{FIGURES_DIR}/*.svg"]
        if rep.get("exit_code") == 0:
            rep["exit_code"] = 1
            rep["verdict"] = dict(rep.get("verdict") or {}, ok=False)
    path = run.file("report.json")
    atomic_write_json(path, rep)
    atomic_write_text(run.file("report.md"), render_markdown(rep))
    atomic_write_text(run.file("summary.csv"), render_csv(rep))
    atomic_write_text(run.file("report.html"), render_html(rep, rep["figures"], run.path))
    return path


def incomplete(rep: dict[str, Any]) -> str | None:
    """One paragraph for the front ends when the report was written without some of its files (None otherwise)."""
    if not rep.get("not_written"):
        return None
    return (f"report.json, report.md, summary.csv and report.html were written without charts: "
            f"{', '.join(rep['not_written'])} not written — {rep.get('figures_error') or ''} "
            f"(exit code {rep.get('exit_code')})")
