"""A tune run with a concurrency sweep for the chart tests: the matrix built by the real
tui.core.results.stats.build_matrix from synthetic repeat facts (baseline + EAGLE3 k = 1, 2, 3 on sonnet at 1, 2,
4 and 8 concurrent requests, three repeats each, with /metrics windows), and report.json's "load" written by hand
in the contract's shape, each arm's statement made by tui/core/results/statement.py (the numbers agree with the
matrix's: speedup falls with concurrency, k = 2 crosses 1 between 2 and 4, k = 1 between 4 and 8)."""

from __future__ import annotations

from typing import Any

from tui.core import events as ev
from tui.core.plan.arms import level_key
from tui.core.results.statement import statement
from tui.core.results.stats import build_matrix

LEVELS = (1, 2, 4, 8)
KEYS = tuple(f"sonnet@c{n}" for n in LEVELS)
MARGINALS = (70.0, 46.0, 30.0)  # per-position acceptance (percent), k = 3's; k uses the first k

# output tok/s per (arm, level): the baseline scales with the batch, speculation gains less as it grows
MEANS = {
    "baseline": {1: 110.0, 2: 205.0, 4: 380.0, 8: 690.0},
    "eagle3-k1": {1: 150.0, 2: 262.0, 4: 405.0, 8: 640.0},
    "eagle3-k2": {1: 172.0, 2: 250.0, 4: 352.0, 8: 560.0},
    "eagle3-k3": {1: 165.0, 2: 226.0, 4: 318.0, 8: 505.0},
}
SPREAD = (-0.015, 0.0, 0.015)  # each repeat's offset from the mean (fraction)


def arms() -> list[dict[str, Any]]:
    out = [{"id": "baseline", "title": "Baseline server", "kind": "baseline", "method": None, "draft": None,
            "draft_name": None, "num_speculative_tokens": None, "status": "passed"}]
    for k in (1, 2, 3):
        out.append({"id": f"eagle3-k{k}", "title": f"EAGLE3 k={k}", "kind": "speculative", "method": "eagle3",
                    "draft": "org/draft", "draft_name": None, "num_speculative_tokens": k, "status": "passed"})
    return out


def windows(acc: float | None, tps: float, n: int = 20, drift: float = 0.0) -> list[dict[str, Any]]:
    """n one-second /metrics windows: generation tokens at `tps`, acceptance `acc` percent (falling by `drift`
    percentage points over the bench), no drafts on the baseline."""
    out = []
    for i in range(n):
        a = None if acc is None else acc - drift * i / max(1, n - 1)
        gen = int(round(tps * (1.0 + 0.04 * ((i * 7) % 5 - 2) / 2)))
        w: dict[str, Any] = {"t0": float(i), "t1": float(i + 1), "generation_tokens": gen}
        if a is not None:
            w.update({"num_drafts": 400, "draft_tokens": 800, "accepted_tokens": int(round(8 * a)),
                      "per_position": [75.0, 57.5]})
        else:
            w.update({"num_drafts": None, "draft_tokens": None, "accepted_tokens": None, "per_position": None})
        out.append(w)
    return out


def repeat_facts(arm: str, level: int, r: int) -> dict[str, Any]:
    k = None if arm == "baseline" else int(arm[-1])
    tp = round(MEANS[arm][level] * (1.0 + SPREAD[r]), 2)
    f: dict[str, Any] = {
        "output_throughput": tp, "request_throughput": round(tp / 128, 3),
        "median_ttft_ms": 200.0 + 10 * level, "p90_ttft_ms": 220.0 + 10 * level, "p99_ttft_ms": 240.0 + 10 * level,
        "median_tpot_ms": round(1000.0 * level / tp, 2), "p90_tpot_ms": round(1100.0 * level / tp, 2),
        "p99_tpot_ms": round(1200.0 * level / tp, 2), "seed": r, "workload": f"sonnet@c{level}",
        "concurrency": level, "num_prompts": max(30, 4 * level),
    }
    if k is not None:
        marg = list(MARGINALS[:k])
        f.update({"acceptance_rate": round(sum(marg) / k, 2), "acceptance_length": round(1 + sum(marg) / 100, 2),
                  "per_position_acceptance": marg, "num_drafts": 1000, "draft_tokens": 1000 * k,
                  "accepted_tokens": int(10 * sum(marg))})
    f["timeseries"] = {"interval_s": 1.0,
                       "windows": windows(None if k is None else f.get("acceptance_rate"), tp,
                                          drift=8.0 if (arm, level) == ("eagle3-k1", 4) else 0.0)}
    return f


def arm_facts() -> dict[str, dict[str, Any]]:
    return {a["id"]: {"repeats": {f"sonnet@c{n}": [repeat_facts(a["id"], n, r) for r in range(3)] for n in LEVELS}}
            for a in arms()}


def matrix() -> dict[str, Any]:
    return build_matrix(arms(), arm_facts(), list(KEYS))


def _level(m: dict[str, Any], arm: str, n: int) -> dict[str, Any]:
    c = m["cells"][arm][f"sonnet@c{n}"]
    sp = c.get("speedup") or None
    lo, hi = (sp or {}).get("ci95") or (None, None)
    verdict = None
    if sp:
        verdict = "pays" if lo is not None and lo > 1 else "loses" if hi is not None and hi < 1 else "not_proven"
    return {"key": f"sonnet@c{n}", "repeats": c["repeats"], "throughput": c["output_throughput"],
            "speedup": {"ratio": sp["ratio"], "ci95": sp.get("ci95"), "unbounded": False} if sp else None,
            "verdict": verdict, "median_ttft_ms": c.get("median_ttft_ms"), "median_tpot_ms": c.get("median_tpot_ms"),
            "acceptance_rate": c.get("acceptance_rate"), "acceptance_length": c.get("acceptance_length"),
            "per_position": (c.get("per_position") or {}).get("marginal"), "goodput": None, "meets_slo": None}


def load(m: dict[str, Any] | None = None) -> dict[str, Any]:
    """report.json's "load" for the matrix (the contract's shape; its speedups and intervals are the matrix's)."""
    m = m or matrix()
    arms_out: dict[str, Any] = {}
    for a in arms():
        levels = {str(n): _level(m, a["id"], n) for n in LEVELS}
        entry: dict[str, Any] = {"label": "baseline" if a["kind"] == "baseline" else f"k = {a['num_speculative_tokens']}",
                                 "k": a["num_speculative_tokens"], "levels": levels, "sustains_slo_up_to": None}
        if a["kind"] != "baseline":
            st = statement([(n, levels[str(n)]["verdict"]) for n in LEVELS], entry["label"])
            entry.update({**st["levels"], "statement": st, "range_text": st["range_text"]})
        arms_out[a["id"]] = entry
    return {
        "levels": list(LEVELS), "slo": None,
        "workloads": {"sonnet": {
            "arms": arms_out,
            "best": {},
            "schedule": [[1, 2, 1], [3, 4, 1], [5, 8, 0]],
            "schedule_text": "k=1 up to 4 concurrent requests, no speculation from 5",
            "slo_text": "",
            "drift": {"eagle3-k1": {"4": {"first": 69.0, "last": 63.0, "diff": -6.0, "ci95": [-7.5, -4.5],
                                          "p_value": 0.001, "drift": True, "windows": 20,
                                          "text": "acceptance fell from 69.0 % to 63.0 % (first vs last third)"}}},
        }},
        "schedule_verification": None, "schedule_profile": None, "coverage": "",
    }


def samples(step: str, label: str, n: int, acc: float | None = 60.0, concurrency: int | None = 4,
            start: int = 0) -> list[ev.BenchSample]:
    """n BenchSample events of one bench, one per second (the i-th from `start`)."""
    return [ev.BenchSample(step, label, float(i + 1), 1.0, 900 + (i % 7) * 10, 900.0 + (i % 7) * 10,
                           None if acc is None else acc - (i % 5), None if acc is None else 2.1,
                           () if acc is None else (70.0, 50.0), concurrency,
                           level_key((label.split() or [""])[0], concurrency))
            for i in range(start, start + n)]
