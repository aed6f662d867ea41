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
  contaminated[]    {arm, bench, repeat, result_file, text}: benchmarks another client shared the server with
                    (its /metrics counters counted more than the bench sent); kept on disk, left out of runs,
                    comparison, matrix and load (results/contamination.py)
"""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path
from typing import Any

from tui.core.events import STEP_IDS, STEP_TITLES
from tui.core.store.rundir import RunDir, atomic_write_json, atomic_write_text
from tui.core.plan.arms import (arms_of, bench_keys, is_tune, levels_of, run_steps, schedule_verifiable, split_key,
                                step_title, workloads_of)
from tui.core.results import figures as figures_mod
from tui.core.results import load as load_mod
from tui.core.results import schedule as schedule_mod
from tui.core.results.gates import gate_metrics
from tui.core.plan.commands import CUSTOM_JSONL, Placeholders, format_command
from tui.core.results.contamination import contaminated_benches, contamination_markdown, usable_repeats
from tui.core.results.stats import STOP_RULE, build_matrix, matrix_columns, matrix_rows
from tui.core.plan.build import build_plan, recorded_vllm_version

SCHEMA_ID = "specdec-tui/report/1"

RUN_KEYS = (
    "output_throughput", "request_throughput", "total_token_throughput", "duration_s",
    "completed", "failed", "num_prompts",
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
    "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms",
    "p90_ttft_ms", "p90_tpot_ms", "p90_itl_ms", "p90_e2el_ms",
    "dataset_mode",
)
SPEC_KEYS = ("acceptance_rate", "acceptance_length", "per_position_acceptance", "acceptance_source")


def _ratio(a: Any, b: Any) -> float | None:
    try:
        a = float(a)
        b = float(b)
    except (TypeError, ValueError):
        return None
    if b == 0 or a != a or b != b:
        return None
    return round(a / b, 4)


def run_summary(bench: dict[str, Any] | None, speculative: bool) -> dict[str, Any] | None:
    if not bench:
        return None
    out = {k: bench.get(k) for k in RUN_KEYS}
    if speculative:
        out.update({k: bench.get(k) for k in SPEC_KEYS})
    return out


def comparison(runs: dict[str, Any]) -> dict[str, Any]:
    b, e = runs.get("baseline"), runs.get("eagle3")
    if not b or not e:
        return {"output_throughput_speedup": None, "median_tpot_ratio": None, "median_ttft_ratio": None}
    return {
        "output_throughput_speedup": _ratio(e.get("output_throughput"), b.get("output_throughput")),
        "median_tpot_ratio": _ratio(e.get("median_tpot_ms"), b.get("median_tpot_ms")),
        "median_ttft_ratio": _ratio(e.get("median_ttft_ms"), b.get("median_ttft_ms")),
    }


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
        **({"tune": {k: d["tune"].get(k) for k in ("num_speculative_tokens", "repeats", "workloads", "probe_prompts",
                                                   "parallel", "drafts", "prompts_file")}} if d.get("tune") else {}),
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
    if isinstance(sp, (int, float)):
        if sp > 1.0:
            return {"ok": exit_code == 0,
                    "text": f"EAGLE3 pays: {sp:.2f}x output throughput over the baseline{acc_txt}."}
        return {"ok": False, "text": f"Speculation did not pay here: {sp:.2f}x output throughput{acc_txt}."}
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
        rep["verdict"] = tune_verdict(int(exit_code), steps, matrix, diags) or rep["verdict"]
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
    return build_matrix(rows, {a.id: facts.get(a.id) or {} for a in arms}, bench_keys(profile))


def load_report(profile: Any, facts: dict[str, dict[str, Any]], statuses: dict[str, str]) -> dict[str, Any] | None:
    """report.json's `load` for a tune run with a concurrency sweep (None otherwise): the analysis of the fixed arms
    (tui/core/results/load.py: per-level speedups and verdicts, the crossover, best k per level, the schedule,
    SLO goodput, drift, the speedup model) and, where a schedule arm ran, its verification against every fixed k."""
    levels = levels_of(profile)
    if not levels:
        return None
    matrix = tune_matrix(profile, facts, statuses, fixed_only=True)
    slo = dict((profile.data.get("tune") or {}).get("slo") or {})
    attainment = float(slo.pop("attainment", 0.9))
    load = load_mod.analyze(matrix, facts, levels, workloads_of(profile), slo or None, attainment=attainment)
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
    is visible here: a later arm with the same graphs hits), and its cores and port when launched in parallel."""
    su = facts.get("startup") or {}
    out: dict[str, Any] = {"startup_s": su.get("seconds"), "cache_hits": su.get("cache_hits"),
                           "cache_misses": su.get("cache_misses")}
    if facts.get("placement"):
        out["placement"] = facts["placement"]
    return out


def tune_verdict(exit_code: int, steps: list[dict[str, Any]], matrix: dict[str, Any],
                 diags: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A tune run's first sentence: the recommendation of every workload, or where the run failed."""
    failed = next((st for st in steps if st["status"] in ("failed", "unavailable")), None)
    if failed is not None and failed["id"] != "results":
        lead = next((d for d in diags if d["step"] == failed["id"] and d["severity"] == "error"), None)
        why = lead["title"] if lead else failed.get("summary") or "see the step's summary"
        return {"ok": False, "text": f"Failed at {failed.get('title') or failed['id']}: {why}."}
    recs = matrix.get("recommendation") or {}
    texts = [f"{w}: {r.get('text')}" for w, r in recs.items() if r and r.get("text")]
    if not texts:
        return None
    good = exit_code == 0 and all(r.get("arm") and not r.get("stop_tuning") for r in recs.values())
    return {"ok": good, "text": "Recommendation — " + "; ".join(texts)}


def _fmt(v: Any, nd: int = 2) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    if isinstance(v, list):
        return ", ".join(_fmt(x, 1) for x in v) or "n/a"
    return str(v)


COMPARE_ROWS = (
    ("Output throughput (tok/s)", "output_throughput"),
    ("Request throughput (req/s)", "request_throughput"),
    ("Mean TTFT (ms)", "mean_ttft_ms"),
    ("Median TTFT (ms)", "median_ttft_ms"),
    ("P99 TTFT (ms)", "p99_ttft_ms"),
    ("Mean TPOT (ms)", "mean_tpot_ms"),
    ("Median TPOT (ms)", "median_tpot_ms"),
    ("P99 TPOT (ms)", "p99_tpot_ms"),
    ("Mean ITL, per chunk (ms)", "mean_itl_ms"),
    ("Median ITL, per chunk (ms)", "median_itl_ms"),
    ("P99 ITL, per chunk (ms)", "p99_itl_ms"),
    ("Mean E2EL (ms)", "mean_e2el_ms"),
    ("Median E2EL (ms)", "median_e2el_ms"),
    ("P99 E2EL (ms)", "p99_e2el_ms"),
    ("Completed / failed", None),
)


P90_ROWS = {  # shown after the median row of each metric, where the bench collected P90
    "median_ttft_ms": ("P90 TTFT (ms)", "p90_ttft_ms"),
    "median_tpot_ms": ("P90 TPOT (ms)", "p90_tpot_ms"),
    "median_itl_ms": ("P90 ITL, per chunk (ms)", "p90_itl_ms"),
    "median_e2el_ms": ("P90 E2EL (ms)", "p90_e2el_ms"),
}


def comparison_rows(rep: dict[str, Any]) -> list[tuple[str, str, str]]:
    b = rep["runs"].get("baseline") or {}
    e = rep["runs"].get("eagle3") or {}
    rows = []
    table: list[tuple[str, str | None]] = []
    for label, key in COMPARE_ROWS:
        table.append((label, key))
        extra = P90_ROWS.get(key or "")
        if extra and (b.get(extra[1]) is not None or e.get(extra[1]) is not None):
            table.append(extra)
    for label, key in table:
        if key is None:
            rows.append((label, f"{_fmt(b.get('completed'))} / {_fmt(b.get('failed'))}",
                         f"{_fmt(e.get('completed'))} / {_fmt(e.get('failed'))}"))
        else:
            rows.append((label, _fmt(b.get(key)), _fmt(e.get(key))))
    rows.append(("Acceptance rate (%)", "n/a", _fmt(e.get("acceptance_rate"))))
    rows.append(("Acceptance length", "n/a", _fmt(e.get("acceptance_length"))))
    rows.append(("Per-position acceptance (%)", "n/a", _fmt(e.get("per_position_acceptance"))))
    return rows


def _md_cell(v: Any) -> str:
    return _fmt(v).replace("|", "\\|")


def render_markdown(rep: dict[str, Any]) -> str:
    """report.md: stands alone in a ticket — verdict, settings, versions, commands, dataset, steps,
    comparison, diagnoses."""
    out = io.StringIO()
    w = out.write
    w(f"# specdec-tui report — {rep['profile']}{' (SIMULATED)' if rep['simulated'] else ''}\n\n")
    v = rep.get("verdict") or {}
    if v:
        w(f"**{'✓' if v.get('ok') else '✗'} {v.get('text', '')}**\n\n")
    w(f"Target `{rep['models']['target']}`, draft `{rep['models']['draft']}`. Generated {rep['generated']}, "
      f"exit code {rep['exit_code']}, run directory `{rep['run_dir']}`.\n\n")
    st = rep.get("settings") or {}
    if st:
        w("## Settings\n\n| Setting | Value |\n|---|---|\n")
        pairs = [
            ("Platform", st.get("platform")),
            ("Speculative method, tokens (k)", f"{st.get('method')}, {st.get('num_speculative_tokens')}"),
            ("Tensor / pipeline parallel", f"{st.get('tensor_parallel_size')} / {st.get('pipeline_parallel_size')}"),
            ("dtype, max model len, max seqs", f"{st.get('dtype')}, {st.get('max_model_len')}, {st.get('max_num_seqs')}"),
            ("Max batched tokens, prefix caching",
             f"{st.get('max_num_batched_tokens')}, {'on' if st.get('enable_prefix_caching') else 'off'}"),
            ("Input / output length", f"{st.get('input_len')} / {st.get('output_len')}"),
            ("Prompts, max concurrency", f"{st.get('num_prompts')}, {st.get('max_concurrency')}"),
            ("Server", f"{st.get('host')}:{st.get('port')}"),
        ]
        t = st.get("tune")
        if t:
            pairs[1] = ("Speculative method, tokens (k)",
                        f"{st.get('method')}, k = {', '.join(str(k) for k in t.get('num_speculative_tokens') or [])}")
            pairs.append(("Step 3: repeats, workloads, probe prompts",
                          f"{t.get('repeats')}, {', '.join(t.get('workloads') or [])}, {t.get('probe_prompts')}"))
            drafts = t.get("drafts") or {}
            if drafts:
                pairs.append(("Step 3: drafts", ", ".join(f"{n}: {d.get('model')}" for n, d in drafts.items())))
            pairs.append(("Step 3: parallel launches", "on" if t.get("parallel") else "off (one server at a time)"))
        for k, val in pairs:
            w(f"| {k} | {_md_cell(val)} |\n")
    vers = rep.get("versions") or {}
    if vers:
        w("\n## Versions\n\n" + ", ".join(f"{k} `{_fmt(val)}`" for k, val in vers.items()) + "\n")
    ds = rep.get("dataset") or {}
    if ds:
        w(f"\n## Dataset\n\n{ds.get('name')} at `{_fmt(ds.get('path'))}`, sha256 `{_fmt(ds.get('sha256'))}`"
          f" ({'verified' if ds.get('verified') else 'not verified'}; source {_fmt(ds.get('source'))}).\n")
    _host_markdown(rep, w)
    cmds = rep.get("commands") or {}
    if cmds:
        w("\n## Commands\n")
        for sid, text in cmds.items():
            w(f"\n{(rep.get('step_titles') or {}).get(sid) or STEP_TITLES.get(sid, sid)}:\n\n```bash\n{text}\n```\n")
    _bench_commands_markdown(rep, w)
    w("\n## Steps\n\n| Step | Status | Seconds | Summary |\n|---|---|---|---|\n")
    for step in rep["steps"]:
        summary = str(step["summary"]).replace("|", "\\|")
        w(f"| {step.get('title') or STEP_TITLES.get(step['id'], step['id'])} | {step['status']} | {_fmt(step['seconds'], 1)} | {summary} |\n")
    if rep.get("figures"):
        w("\n" + figures_mod.figures_markdown(rep["figures"]).rstrip("\n") + "\n")
    elif rep.get("figures_error"):
        w(f"\nCharts could not be drawn: {rep['figures_error']}\n")
    if rep.get("matrix"):
        _matrix_markdown(rep["matrix"], w)
    if rep.get("load"):
        w("\n" + load_mod.load_markdown(rep["load"]).rstrip("\n") + "\n")
    elif rep["runs"]:
        w("\n## Baseline vs EAGLE3\n\n| Metric | Baseline | EAGLE3 |\n|---|---|---|\n")
        for label, bv, ev in comparison_rows(rep):
            w(f"| {label} | {bv} | {ev} |\n")
        sp = rep["comparison"].get("output_throughput_speedup")
        if sp is not None:
            w(f"\n**EAGLE3 output throughput speedup: {sp:.2f}x**\n")
        w("\nITL is measured per streamed chunk; under speculative decoding a chunk carries several tokens, "
          "so compare the runs by TPOT and throughput.\n")
        if any((r or {}).get("dataset_mode") == "custom-from-sonnet" for r in rep["runs"].values()):
            w("\nDataset: sonnet (built as custom JSONL: vLLM >= 0.32 has no sonnet dataset); the same prompts as "
              "`--dataset-name sonnet`, sent with `--dataset-name custom --skip-chat-template`.\n")
    w(contamination_markdown(rep.get("contaminated") or []))
    _checks_markdown(rep, w)
    if not rep.get("matrix"):
        _launches_markdown(rep.get("launches") or [], w)
    w("\n## Diagnostics\n\n")
    if not rep["diagnostics"]:
        w("No issues found.\n")
    for d in rep["diagnostics"]:
        w(f"### [{d['severity']}] {d['title']} (`{d['id']}`)\n\n")
        for ev in d["evidence"]:
            w(f"- `{ev}`\n" if len(ev) < 300 else f"- {ev[:300]}…\n")
        w(f"\n**Remedy:** {d['remedy']}\n\n")
    return out.getvalue()


def _host_markdown(rep: dict[str, Any], w: Any) -> None:
    host = rep.get("host") or {}
    if not host or not (host.get("facts") or host.get("instance_type")):
        return
    w("\n## Host\n\n| Fact | Value | Detail |\n|---|---|---|\n")
    w(f"| Platform | {_md_cell(host.get('platform'))}{' (simulated)' if host.get('simulated') else ''} | |\n")
    names = {f.get("name") for f in host.get("facts") or []}
    if "instance type" not in names:
        w(f"| Instance type | {_md_cell(host.get('instance_type'))} | DMI product name |\n")
    for f in host.get("facts") or []:
        w(f"| {_md_cell(f.get('name'))} | {_md_cell(f.get('value'))} | {_md_cell(f.get('detail') or '')} |\n")


def _bench_commands_markdown(rep: dict[str, Any], w: Any) -> None:
    """Every benchmark as it ran, one bash block per arm (a comment names the workload and repeat)."""
    bc = rep.get("bench_commands") or {}
    if not bc:
        return
    titles = rep.get("step_titles") or {}
    w("\n## Benchmark commands (as run)\n")
    ran = [row.get("ran") for sid, rows in bc.items() if sid != "tool" for row in rows]
    if ran and all(r == "warm" for r in ran):
        w("\nEach arm's benches ran in one warm process (the bench command's own code, imported once; each bench "
          "from exactly the argv below).\n")
    elif "warm" in ran:
        w(f"\n{ran.count('warm')} of these ran in their arm's warm process (the bench command's own code, imported "
          f"once), {len(ran) - ran.count('warm')} as a process of their own; each from exactly the argv below.\n")
    elif ran:
        w("\nEach bench ran as a process of its own.\n")
    for sid, rows in bc.items():
        title = "Sonnet custom-JSONL builder (vLLM >= 0.32)" if sid == "tool" else titles.get(sid) or STEP_TITLES.get(sid, sid)
        w(f"\n{title}:\n\n```bash\n")
        for i, row in enumerate(rows):
            if row.get("repeat") is not None:
                w(f"# {row.get('workload')} repeat {row['repeat']}\n")
            w(row["command"] + "\n" + ("\n" if i < len(rows) - 1 else ""))
        w("```\n")


def _checks_markdown(rep: dict[str, Any], w: Any) -> None:
    """The smoke test and lossless checks of every server, as the steps recorded them."""
    checks = rep.get("checks") or {}
    if not checks:
        return
    titles = rep.get("step_titles") or {}
    w("\n## Smoke and lossless checks\n\n| Server | Smoke test | Reply | Greedy reply vs baseline | "
      "Probe prompts identical to the baseline |\n|---|---|---|---|---|\n")
    for sid, c in checks.items():
        smoke = "passed" if c.get("smoke_passed") else "failed" if c.get("smoke_passed") is False else "n/a"
        mb = c.get("matches_baseline")
        same = "same" if mb is True else "differs" if mb is False else "—"
        lossless = ", ".join(f"{wl}: {v.get('identical')} of {v.get('prompts')}"
                             for wl, v in (c.get("lossless") or {}).items()) or "—"
        w(f"| {_md_cell(titles.get(sid) or sid)} | {smoke} | `{_md_cell(repr(c.get('smoke_text') or ''))}` | {same} | "
          f"{_md_cell(lossless)} |\n")


def _launches_markdown(launches: list[dict[str, Any]], w: Any) -> None:
    if not any(a.get("startup_s") is not None for a in launches):
        return
    w("\n## Launches\n\n| Server | Status | Startup (s) | Compile cache hits / misses |\n|---|---|---|---|\n")
    for a in launches:
        w(f"| {a.get('title') or a.get('id')} | {a.get('status')} | {_fmt(a.get('startup_s'), 1)} | "
          f"{_fmt(a.get('cache_hits'))} / {_fmt(a.get('cache_misses'))} |\n")


def _matrix_markdown(matrix: dict[str, Any], w: Any) -> None:
    """The tune matrix: the recommendation per workload, then arms × metrics with intervals, the noise floor."""
    w("\n## Step 3: tuning matrix\n")
    for wl in matrix.get("workloads") or []:
        rec = (matrix.get("recommendation") or {}).get(wl) or {}
        w(f"\n### Workload `{wl}`\n\n**Recommendation:** {rec.get('text') or 'n/a'}\n")
        if rec.get("reason"):
            w(f"\n{rec['reason']}\n")
        body = matrix_rows(matrix, wl, 200)
        if body:
            head = ["Metric", *matrix_columns(matrix, 200)]
            w("\n| " + " | ".join(_md_cell(c) for c in head) + " |\n|" + "---|" * len(head) + "\n")
            for r in body:
                w("| " + " | ".join(_md_cell(c) for c in r) + " |\n")
        nf = (matrix.get("noise_floor") or {}).get(wl) or {}
        if nf.get("ratio") is not None:
            ci = nf.get("ci95")
            w(f"\nNoise floor (baseline vs baseline): {nf['ratio']:.3f}x"
              + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "") + "\n")
    arms = matrix.get("arms") or []
    if any(a.get("startup_s") is not None for a in arms):
        w("\n### Launches\n\n| Arm | Status | Startup (s) | Compile cache hits / misses | Cores, port |\n|---|---|---|---|---|\n")
        for a in arms:
            pl = a.get("placement") or {}
            where = f"{pl.get('neuron_visible_devices')}, {pl.get('port')}" if pl else "—"
            w(f"| {a.get('title') or a.get('id')} | {a.get('status')} | {_fmt(a.get('startup_s'), 1)} | "
              f"{_fmt(a.get('cache_hits'))} / {_fmt(a.get('cache_misses'))} | {where} |\n")

    covs = list(dict.fromkeys((matrix.get("coverage") or {}).values()))
    w("\n" + (" ".join(covs) if covs else "Intervals are 95 % Student-t intervals over the repeats.")
      + " An arm pays only when its speedup interval's lower bound is above 1.0x. "
      "Acceptance is pooled over the repeats from the servers' /metrics counters; " + STOP_RULE + ".\n")


CSV_COLUMNS = (("step", "status", "seconds") + RUN_KEYS
               + ("acceptance_rate", "acceptance_length", "per_position_acceptance")
               + ("workload", "repeats", "output_throughput_ci95_lo", "output_throughput_ci95_hi",
                  "speedup", "speedup_ci95_lo", "speedup_ci95_hi"))
_CELL_KEYS = ("median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
              "acceptance_rate", "acceptance_length")


def _cell_row(cell: dict[str, Any]) -> dict[str, Any]:
    """A matrix cell as a summary.csv row: means over the repeats, the intervals, the speedup."""
    ot = cell.get("output_throughput") or {}
    sp = cell.get("speedup") or {}
    out: dict[str, Any] = {k: cell.get(k) for k in _CELL_KEYS}
    out["output_throughput"] = ot.get("mean")
    pp = cell.get("per_position") or {}
    out["per_position_acceptance"] = pp.get("marginal")
    out["repeats"] = cell.get("repeats")
    ci = ot.get("ci95") or [None, None]
    out["output_throughput_ci95_lo"], out["output_throughput_ci95_hi"] = ci[0], ci[1]
    out["speedup"] = sp.get("ratio")
    sci = sp.get("ci95") or [None, None]
    out["speedup_ci95_lo"], out["speedup_ci95_hi"] = sci[0], sci[1]
    return out


def render_csv(rep: dict[str, Any]) -> str:
    """A row per step (also on failure, and for steps not run); the server steps carry their numbers."""
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(CSV_COLUMNS)
    cells = (rep.get("matrix") or {}).get("cells") or {}
    for step in rep["steps"]:
        head = [step["id"], step["status"], "" if step["seconds"] is None else step["seconds"]]
        per_workload = cells.get(step["id"]) or {}
        sources = ([dict(_cell_row(c), workload=wl) for wl, c in per_workload.items() if c]
                   or [rep["runs"].get(step["id"]) or {}])
        for r in sources:  # a tune run's arm: one row per workload
            row: list[Any] = list(head)
            for k in CSV_COLUMNS[3:]:
                v = r.get(k)
                if isinstance(v, list):
                    v = ";".join(f"{x:.2f}" for x in v)
                row.append("" if v is None else v)
            wr.writerow(row)
    return buf.getvalue()


def write_report(run: RunDir, rep: dict[str, Any]) -> Path:
    """report.json, report.md, summary.csv; the charts (figures/*.png|svg, linked from report.md) and report.html.
    Each file is written atomically; a chart that cannot be drawn is noted in report.json (`figures_error`) and
    never costs the report."""
    try:
        rep["figures"] = figures_mod.render_figures(rep, run.path)
        rep.pop("figures_error", None)
    except figures_mod.ChartError as exc:  # a chart never costs the report: report.md says why there are none
        rep["figures"] = []
        rep["figures_error"] = str(exc)
    path = run.file("report.json")
    atomic_write_json(path, rep)
    atomic_write_text(run.file("report.md"), render_markdown(rep))
    atomic_write_text(run.file("summary.csv"), render_csv(rep))
    if rep["figures"]:  # report.md links report.html only when there are charts
        atomic_write_text(run.file("report.html"), figures_mod.render_html(rep, rep["figures"], run.path))
    return path
