"""The report's plain rows: a run's numbers as report.json's runs carry them (run_summary), the two-arm comparison
(comparison, comparison_rows: what the results step, the wizard and report.md show side by side) and summary.csv.
Pure functions, no I/O."""

from __future__ import annotations

import csv
import io
from typing import Any

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
