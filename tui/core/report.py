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
"""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path
from typing import Any

from .events import STEP_IDS, STEP_TITLES
from .rundir import RunDir, atomic_write_json, atomic_write_text

SCHEMA_ID = "specdec-tui/report/1"

RUN_KEYS = (
    "output_throughput", "request_throughput", "total_token_throughput", "duration_s",
    "completed", "failed", "num_prompts",
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
    "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms",
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


def build_report(profile: Any, run: RunDir, results: dict[str, Any], ctx: Any, exit_code: int) -> dict[str, Any]:
    steps = []
    state_steps = run.state.get("steps", {})
    for sid in STEP_IDS:
        st = state_steps.get(sid)
        if not st:
            continue
        steps.append({"id": sid, "status": st.get("status"), "seconds": st.get("seconds"),
                      "summary": st.get("summary", "")})
    runs: dict[str, Any] = {}
    for sid in ("baseline", "eagle3"):
        facts = _step_facts(sid, results, ctx)
        summ = run_summary(facts.get("bench"), speculative=(sid == "eagle3"))
        if summ is not None:
            runs[sid] = summ
    diags = [
        {"id": d.id, "severity": d.severity, "title": d.title, "evidence": list(d.evidence), "remedy": d.remedy,
         "step": d.step}
        for d in ctx.diagnoses
    ]
    order = {"error": 0, "warning": 1, "info": 2}
    diags.sort(key=lambda d: order.get(d["severity"], 3))
    return {
        "schema": SCHEMA_ID,
        "profile": profile.name,
        "simulated": bool(profile.simulated),
        "exit_code": exit_code,
        "run_dir": str(run.path),
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "models": {"target": profile.models.target, "draft": profile.draft_model},
        "steps": steps,
        "runs": runs,
        "comparison": comparison(runs),
        "diagnostics": diags,
    }


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


def comparison_rows(rep: dict[str, Any]) -> list[tuple[str, str, str]]:
    b = rep["runs"].get("baseline") or {}
    e = rep["runs"].get("eagle3") or {}
    rows = []
    for label, key in COMPARE_ROWS:
        if key is None:
            rows.append((label, f"{_fmt(b.get('completed'))} / {_fmt(b.get('failed'))}",
                         f"{_fmt(e.get('completed'))} / {_fmt(e.get('failed'))}"))
        else:
            rows.append((label, _fmt(b.get(key)), _fmt(e.get(key))))
    rows.append(("Acceptance rate (%)", "n/a", _fmt(e.get("acceptance_rate"))))
    rows.append(("Acceptance length", "n/a", _fmt(e.get("acceptance_length"))))
    rows.append(("Per-position acceptance (%)", "n/a", _fmt(e.get("per_position_acceptance"))))
    return rows


def render_markdown(rep: dict[str, Any]) -> str:
    out = io.StringIO()
    w = out.write
    w(f"# specdec-tui report — {rep['profile']}{' (SIMULATED)' if rep['simulated'] else ''}\n\n")
    w(f"Target `{rep['models']['target']}`, draft `{rep['models']['draft']}`. Generated {rep['generated']}, "
      f"exit code {rep['exit_code']}.\n\n## Steps\n\n| Step | Status | Seconds | Summary |\n|---|---|---|---|\n")
    for st in rep["steps"]:
        summary = str(st["summary"]).replace("|", "\\|")
        w(f"| {STEP_TITLES.get(st['id'], st['id'])} | {st['status']} | {_fmt(st['seconds'], 1)} | {summary} |\n")
    if rep["runs"]:
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
    w("\n## Diagnostics\n\n")
    if not rep["diagnostics"]:
        w("No issues found.\n")
    for d in rep["diagnostics"]:
        w(f"### [{d['severity']}] {d['title']} (`{d['id']}`)\n\n")
        for ev in d["evidence"]:
            w(f"- `{ev}`\n" if len(ev) < 300 else f"- {ev[:300]}…\n")
        w(f"\n**Remedy:** {d['remedy']}\n\n")
    return out.getvalue()


CSV_COLUMNS = ("run",) + RUN_KEYS + ("acceptance_rate", "acceptance_length", "per_position_acceptance")


def render_csv(rep: dict[str, Any]) -> str:
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(CSV_COLUMNS)
    for name in ("baseline", "eagle3"):
        r = rep["runs"].get(name)
        if not r:
            continue
        row = [name]
        for k in CSV_COLUMNS[1:]:
            v = r.get(k)
            if isinstance(v, list):
                v = ";".join(f"{x:.2f}" for x in v)
            row.append("" if v is None else v)
        wr.writerow(row)
    return buf.getvalue()


def write_report(run: RunDir, rep: dict[str, Any]) -> Path:
    path = run.file("report.json")
    atomic_write_json(path, rep)
    atomic_write_text(run.file("report.md"), render_markdown(rep))
    atomic_write_text(run.file("summary.csv"), render_csv(rep))
    return path
