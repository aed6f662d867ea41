"""Builders of realistic bench facts, arm facts and report.json dicts for the stats / gates / compare tests
(shapes as in tui/core/steps/bench.py bench_facts and tui/core/results/stats.py)."""

from __future__ import annotations

import copy
from typing import Any

from tui.core.results import stats


def bench(tput: float, tpot: float = 10.0, ttft: float = 60.0, acc: float | None = None,
          per_pos: list[float] | None = None, num_drafts: int | None = None, k: int = 1) -> dict[str, Any]:
    """One bench_facts dict. With acc: acceptance counters consistent with it (draft_tokens = k · drafts)."""
    out: dict[str, Any] = {
        "output_throughput": tput, "request_throughput": tput / 128.0, "total_token_throughput": tput * 17,
        "duration_s": 40.0, "completed": 32, "failed": 0, "num_prompts": 32,
        "mean_ttft_ms": ttft * 1.1, "median_ttft_ms": ttft, "p90_ttft_ms": ttft * 1.5, "p99_ttft_ms": ttft * 2,
        "mean_tpot_ms": tpot * 1.05, "median_tpot_ms": tpot, "p90_tpot_ms": tpot * 1.2, "p99_tpot_ms": tpot * 1.4,
        "mean_itl_ms": tpot, "median_itl_ms": tpot, "p90_itl_ms": tpot, "p99_itl_ms": tpot,
        "mean_e2el_ms": 1000.0, "median_e2el_ms": 1000.0, "p90_e2el_ms": 1100.0, "p99_e2el_ms": 1200.0,
        "acceptance_rate": None, "acceptance_length": None, "per_position_acceptance": None,
        "acceptance_source": None,
    }
    if acc is not None:
        per_pos = per_pos if per_pos is not None else [acc] * k
        drafts = num_drafts or 1000
        accepted = round(sum(per_pos) / 100.0 * drafts)
        out.update(acceptance_rate=accepted / (k * drafts) * 100.0, acceptance_length=1 + accepted / drafts,
                   per_position_acceptance=per_pos, num_drafts=drafts, draft_tokens=k * drafts,
                   accepted_tokens=accepted, acceptance_source="metrics")
    return out


def arm(aid: str, kind: str = "speculative", k: int | None = None, draft_name: str | None = "RedHatAI",
        method: str | None = "eagle3") -> dict[str, Any]:
    if kind == "baseline":
        return {"id": aid, "title": "Baseline", "kind": "baseline", "method": None, "draft": None,
                "draft_name": None, "num_speculative_tokens": None, "status": "passed"}
    return {"id": aid, "title": f"EAGLE3 k={k}", "kind": kind, "method": method,
            "draft": f"{draft_name}/gpt-oss-120b-speculator.eagle3", "draft_name": draft_name,
            "num_speculative_tokens": k, "status": "passed"}


TEXTS = ["the quick brown fox", "jumps over the lazy dog", "and runs away"]


def facts(repeats: dict[str, list[dict[str, Any]]], texts: list[str] | None = None,
          per_request: list[Any] | None = None) -> dict[str, Any]:
    wl0 = next(iter(repeats))
    probe = {wl: {"texts": list(texts or TEXTS), "per_request": list(per_request or [None] * len(texts or TEXTS)),
                  "endpoint": "/v1/completions"} for wl in repeats}
    return {"bench": repeats[wl0][-1], "repeats": repeats, "probe": probe, "startup": {}, "smoke": {}}


def tutorial_matrix() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Baseline + k = 1, 2, 3 on sonnet, 3 repeats each; k = 1 clearly wins (the tutorial's outcome)."""
    arms = [arm("baseline", "baseline"), arm("eagle3-k1", k=1), arm("eagle3-k2", k=2), arm("eagle3-k3", k=3)]
    af = {
        "baseline": facts({"sonnet": [bench(t, tpot=14.0) for t in (112, 113, 114)]}),
        "eagle3-k1": facts({"sonnet": [bench(t, tpot=11.0, acc=70.0, k=1) for t in (133, 134, 135)]},
                           texts=["the quick brown fox", "jumps over the lazy cat", "and runs away"],
                           per_request=[{"mean_acceptance_length": 1.6}, {"mean_acceptance_length": 1.8}, None]),
        "eagle3-k2": facts({"sonnet": [bench(t, tpot=11.5, acc=55.0, per_pos=[70.0, 40.0], k=2)
                                       for t in (125, 126, 127)]}),
        "eagle3-k3": facts({"sonnet": [bench(t, tpot=12.5, acc=45.0, per_pos=[70.0, 40.0, 25.0], k=3)
                                       for t in (118, 119, 120)]}),
    }
    return arms, af


def two_arm_report(run_dir: str = "/runs/a", speedup: float = 1.2952, acc: float = 67.1053) -> dict[str, Any]:
    """report.json of a two-arm run, copied from a real demo run's report (numbers as written)."""
    b = {"output_throughput": 217.6668044236798, "request_throughput": 6.80, "total_token_throughput": 3659.5,
         "duration_s": 0.588, "completed": 4, "failed": 0, "num_prompts": 4, "mean_ttft_ms": 134.7,
         "median_ttft_ms": 62.72466800010079, "p99_ttft_ms": 347.5, "mean_tpot_ms": 0.1427,
         "median_tpot_ms": 0.05594574193148747, "p99_tpot_ms": 0.3996, "dataset_mode": "custom-from-sonnet"}
    e = dict(b, output_throughput=217.6668044236798 * speedup, median_tpot_ms=0.03566140322809295,
             median_ttft_ms=64.85940700008541, acceptance_rate=acc, acceptance_length=1 + acc / 100,
             per_position_acceptance=[acc], acceptance_source="metrics")
    return {
        "schema": "specdec-tui/report/1", "profile": "demo", "simulated": True, "exit_code": 0, "run_dir": run_dir,
        "generated": "2026-12-01T10:00:00+0000",
        "verdict": {"ok": True, "text": f"EAGLE3 was faster in one run: {speedup:.2f}x output throughput over the "
                                        "baseline (one run each: no interval)."},
        "models": {"target": "openai/gpt-oss-120b", "draft": "RedHatAI/gpt-oss-120b-speculator.eagle3"},
        "settings": {"platform": "neuron", "target": "openai/gpt-oss-120b",
                     "draft": "RedHatAI/gpt-oss-120b-speculator.eagle3", "method": "eagle3",
                     "num_speculative_tokens": 1},
        "steps": [], "runs": {"baseline": b, "eagle3": e},
        "comparison": {"output_throughput_speedup": speedup, "median_tpot_ratio": 0.6374, "median_ttft_ratio": 1.034},
        "diagnostics": [],
    }


def matrix_report(run_dir: str = "/runs/tune") -> dict[str, Any]:
    arms, af = tutorial_matrix()
    m = stats.build_matrix(arms, af, ["sonnet"])
    rep = two_arm_report(run_dir)
    rep["profile"] = "tune-demo"
    rep["verdict"] = {"ok": True, "text": m["recommendation"]["sonnet"]["text"]}
    rep["matrix"] = copy.deepcopy(m)
    return rep
