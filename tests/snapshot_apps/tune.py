"""Deterministic synthetic events of a tune run (baseline + EAGLE3 k = 1, 2, 3 × 3 repeats, sonnet and chat) and
matrix dicts as tui/core/results/stats.py (build_matrix) shapes them, for snapshot and Pilot tests; and
a finished run directory written from the same numbers, for `--open`.

The numbers follow the tutorial's calibration: on sonnet k = 1 wins and its interval overlaps k = 2's (the
smaller k is preferred); on chat, the workload the RedHatAI draft was trained for, acceptance is higher and
k = 2 wins.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tui.core.plan import arms
from tui.core import events as ev
from tui.core.profile.model import Profile, load_profile

from . import scenarios

ARMS = ("baseline", "eagle3-k1", "eagle3-k2", "eagle3-k3")
DRAFT = "RedHatAI/gpt-oss-120b-speculator.eagle3"


def tune_profile() -> Profile:
    # a fixed matrix (no Race step): the saved runs these apps open were made before issue 29's race, and
    # their snapshots show one step per arm
    return load_profile("tune-demo").with_values({"tune.adaptive": False})


def _tp(mean: float, half: float, values: list[float]) -> dict[str, Any]:
    sd = round(half / 2.484, 2)  # t(0.975, 2) / sqrt(3)
    return {"mean": mean, "sd": sd, "ci95": [round(mean - half, 1), round(mean + half, 1)], "values": values}


def _cell(mean: float, half: float, *, tpot: float, ttft: float, acc: float | None = None, al: float | None = None,
          marg: list[float] | None = None, cond: list[float] | None = None, speedup: tuple[float, float, float] | None = None,
          same: int = 8, diverge: list[int | None] | None = None) -> dict[str, Any]:
    k = len(marg) if marg else 0
    c: dict[str, Any] = {
        "repeats": 3,
        "output_throughput": _tp(mean, half, [round(mean - half / 2, 1), mean, round(mean + half / 2, 1)]),
        "median_tpot_ms": tpot, "p90_tpot_ms": round(tpot * 1.04, 2), "p99_tpot_ms": round(tpot * 1.09, 2),
        "median_ttft_ms": ttft, "p90_ttft_ms": round(ttft * 1.05, 1), "p99_ttft_ms": round(ttft * 1.1, 1),
        "acceptance_rate": acc, "acceptance_length": al,
        "per_position": {"marginal": marg, "conditional": cond} if marg else None,
        "al_check": {"measured": al, "from_marginals": round(1 + sum(marg) / 100, 2), "consistent": True}
        if marg and al is not None else None,
        "predicted_al": {str(i + 1): round(1 + sum(marg[: i + 1]) / 100, 2) for i in range(k)} if marg else None,
        "speedup": {"ratio": speedup[0], "ci95": [speedup[1], speedup[2]]} if speedup else None,
        "lossless": {"prompts": 8, "identical": same, "identical_share": same / 8,
                     "first_divergence": diverge or [None] * 8} if marg else None,
        "per_request": {"n": 8, "mean_acceptance_length": al, "median_acceptance_length": al} if marg else None,
    }
    return c


def _arms_list() -> list[dict[str, Any]]:
    out = [{"id": "baseline", "title": "Baseline server", "kind": "baseline", "method": None, "draft": None,
            "draft_name": None, "num_speculative_tokens": None, "status": "passed"}]
    for k in (1, 2, 3):
        out.append({"id": f"eagle3-k{k}", "title": f"EAGLE3 k={k}", "kind": "speculative", "method": "eagle3",
                    "draft": DRAFT, "draft_name": None, "num_speculative_tokens": k, "status": "passed"})
    return out


def healthy_matrix() -> dict[str, Any]:
    sonnet = {
        "baseline": _cell(112.1, 4.5, tpot=7.0, ttft=252.3),
        "eagle3-k1": _cell(134.5, 3.9, tpot=5.82, ttft=218.2, acc=69.0, al=1.69, marg=[69.0], cond=[69.0],
                           speedup=(1.20, 1.13, 1.27)),
        "eagle3-k2": _cell(131.2, 5.3, tpot=5.95, ttft=220.4, acc=56.9, al=2.14, marg=[68.5, 45.2],
                           cond=[68.5, 66.0], speedup=(1.17, 1.10, 1.24)),
        "eagle3-k3": _cell(121.0, 6.8, tpot=6.45, ttft=224.9, acc=47.6, al=2.43, marg=[68.8, 45.6, 28.4],
                           cond=[68.8, 66.3, 62.3], speedup=(1.08, 1.00, 1.16), same=7,
                           diverge=[None, None, None, None, None, 37, None, None]),
    }
    chat = {
        "baseline": _cell(110.4, 4.1, tpot=7.1, ttft=240.0),
        "eagle3-k1": _cell(140.2, 4.4, tpot=5.61, ttft=214.0, acc=82.0, al=1.82, marg=[82.0], cond=[82.0],
                           speedup=(1.27, 1.20, 1.34)),
        "eagle3-k2": _cell(158.9, 5.8, tpot=4.95, ttft=216.3, acc=73.1, al=2.46, marg=[82.1, 64.0],
                           cond=[82.1, 78.0], speedup=(1.44, 1.36, 1.52)),
        "eagle3-k3": _cell(150.3, 7.3, tpot=5.22, ttft=219.8, acc=64.7, al=2.94, marg=[82.0, 64.1, 47.9],
                           cond=[82.0, 78.2, 74.7], speedup=(1.36, 1.27, 1.45)),
    }
    return {
        "workloads": ["sonnet", "chat"],
        "arms": _arms_list(),
        "cells": {a: {"sonnet": sonnet[a], "chat": chat[a]} for a in ARMS},
        "recommendation": {
            "sonnet": {"arm": "eagle3-k1", "text": "deploy EAGLE3 k=1", "overlap": ["eagle3-k2"], "stop_tuning": False,
                       "reason": "k=1 and k=2 overlap (95 % intervals): the smaller k is preferred"},
            "chat": {"arm": "eagle3-k2", "text": "deploy EAGLE3 k=2", "overlap": ["eagle3-k3"], "stop_tuning": False,
                     "reason": "k=2 and k=3 overlap: the smaller k is preferred"},
        },
        "noise_floor": {"sonnet": {"ratio": 1.01, "ci95": [0.97, 1.05]}, "chat": {"ratio": 0.99, "ci95": [0.95, 1.04]}},
    }


def stop_tuning_matrix() -> dict[str, Any]:
    """A draft that does not fit its target: acceptance below 30 % on every arm, no speedup."""
    sonnet = {
        "baseline": _cell(112.1, 4.5, tpot=7.0, ttft=252.3),
        "eagle3-k1": _cell(104.3, 4.0, tpot=7.61, ttft=259.0, acc=24.1, al=1.24, marg=[24.1], cond=[24.1],
                           speedup=(0.93, 0.87, 0.99)),
        "eagle3-k2": _cell(96.0, 5.1, tpot=8.27, ttft=262.1, acc=14.0, al=1.28, marg=[23.8, 4.2], cond=[23.8, 17.6],
                           speedup=(0.86, 0.80, 0.92)),
        "eagle3-k3": _cell(88.2, 5.9, tpot=9.0, ttft=265.5, acc=9.5, al=1.29, marg=[24.0, 4.1, 0.5],
                           cond=[24.0, 17.1, 12.2], speedup=(0.79, 0.72, 0.85)),
    }
    return {
        "workloads": ["sonnet"],
        "arms": _arms_list(),
        "cells": {a: {"sonnet": sonnet[a]} for a in ARMS},
        "recommendation": {
            "sonnet": {"arm": None, "text": "stop tuning: validate draft and target first", "overlap": [],
                       "stop_tuning": True,
                       "reason": "acceptance is below 30 % on every arm (best 24.1 % at k=1): check that the draft "
                                 "was trained for this target and this workload"},
        },
        "noise_floor": {"sonnet": {"ratio": 1.01, "ci95": [0.97, 1.05]}},
    }


def arm_events(arm: str, profile: Profile, *, finish: bool = True, repeat: int = 3) -> list[ev.Event]:
    """A speculative arm's step: launch (a compile-cache hit after the first arm), smoke, lossless, the bench
    repeats on each workload (ArmProgress), stop."""
    a = arms.arm_by_id(profile, arm)
    assert a is not None
    title = arms.step_title(arm, profile)
    argv = ["python", "-m", "tui.sim", "serve", profile.models.target, "--speculative-config",
            json.dumps({"method": "eagle3", "model": DRAFT, "num_speculative_tokens": a.num_speculative_tokens})]
    out: list[ev.Event] = [ev.StepStarted(arm, title, ts=0.0),
                           ev.Command(arm, "serve", tuple(argv), " ".join(argv)),
                           ev.Notice(arm, "info", f"launched pid 4242; log: {scenarios.RUN_DIR}/{arm}.serve.log")]
    for i, (ph, secs) in enumerate((("config", 0.4), ("workers", 1.1), ("weights", 3.0), ("draft", 1.0),
                                    ("compile", 0.2), ("warmup", 1.0), ("ready", 0.0))):
        out.append(ev.Phase(arm, ph, "started", ts=0.0))
        if ph == "compile":
            out.append(ev.CompileCache(arm, "MODULE_1a2b3c", a.num_speculative_tokens != 1))
        out.append(ev.LogLine(arm, f"(APIServer pid=4242) INFO 01-01 12:00:0{i} [api_server.py:1] phase {ph}", ts=0.0))
        out.append(ev.CleanLog(arm, i, f"phase {ph}", "INFO", False))
        out.append(ev.Phase(arm, ph, "finished", secs, ts=0.0))
    out.append(ev.Fact(arm, "startup", "ready in 6.7s", "pass", "log: Application startup complete."))
    out.append(ev.Fact(arm, "smoke test", "'6 7 8 9 10 '", "pass", "continues the count"))
    out.append(ev.Fact(arm, "lossless check", "same as baseline", "pass", "8 of 8 probe prompts identical"))
    n = profile.benchmark.num_prompts
    for w in arms.workloads_of(profile):
        for r in range(1, 4):
            if not finish and (w, r) == ("sonnet", repeat):
                out.append(ev.ArmProgress(arm, w, r, 3, tuple(arms.workloads_of(profile))))
                out.append(ev.Progress(arm, "requests", n // 2, n, "req", 0.9, 17.0, "vllm bench serve"))
                out.append(ev.Progress(arm, "tokens", (n // 2) * 128, n * 128, "tok", 131.0, None, "generated tokens"))
                return out
            out.append(ev.ArmProgress(arm, w, r, 3, tuple(arms.workloads_of(profile))))
            out.append(ev.Progress(arm, "requests", n, n, "req", None, 0, "vllm bench serve", done=True))
    out.append(ev.Fact(arm, "requests", f"{n} completed, 0 failed", "pass"))
    out.append(ev.Fact(arm, "output throughput", "131.20 tok/s", "pass"))
    out.append(ev.Notice(arm, "info", "stopping the server (SIGINT, then SIGTERM, then SIGKILL)"))
    out.append(ev.StepFinished(arm, "passed", 96.0, f"{len(arms.workloads_of(profile)) * 3} bench runs", ts=0.0))
    return out


def results_events(matrix: dict[str, Any]) -> list[ev.Event]:
    recs = matrix["recommendation"]
    stop = any(r["stop_tuning"] for r in recs.values())
    summary = "; ".join(f"{w}: {r['text']}" for w, r in recs.items())
    out: list[ev.Event] = [ev.StepStarted("results", "Results", ts=0.0), ev.MatrixTable("results", matrix)]
    if stop:
        from tui.core.serverlog import diagnostics as dg

        out.append(dg.make("acceptance-low", "results", ["acceptance rate 24.1% at k=1 (sonnet)"], severity="warning"))
    out.append(ev.StepFinished("results", "failed" if stop else "passed", 0.1, summary, ts=0.0))
    out.append(ev.RunFinished("", 1 if stop else 0, f"{scenarios.RUN_DIR}/report.json", ts=0.0))
    return out


def tune_run(matrix: dict[str, Any] | None = None) -> list[ev.Event]:
    profile = tune_profile()
    steps = tuple(arms.run_steps(profile))
    out: list[ev.Event] = [ev.RunStarted("", profile.name, scenarios.RUN_DIR, steps, True, ts=0.0)]
    out += scenarios.env_events() + scenarios.checkpoint_events() + scenarios.dataset_events()
    out += scenarios.launch_events("baseline", profile)
    for arm in ("eagle3-k1", "eagle3-k2", "eagle3-k3"):
        out += arm_events(arm, profile)
    out += results_events(matrix or healthy_matrix())
    return out


def until_k2_bench(repeat: int = 2) -> list[ev.Event]:
    profile = tune_profile()
    steps = tuple(arms.run_steps(profile))
    out: list[ev.Event] = [ev.RunStarted("", profile.name, scenarios.RUN_DIR, steps, True, ts=0.0)]
    out += scenarios.env_events() + scenarios.checkpoint_events() + scenarios.dataset_events()
    out += scenarios.launch_events("baseline", profile)
    out += arm_events("eagle3-k1", profile)
    out += arm_events("eagle3-k2", profile, finish=False, repeat=repeat)
    return out


# -- a finished run directory (for --open) ---------------------------------------------------------------------
SERVE_LOG = [
    "# 2026-01-01T12:00:00 $ python -m tui.sim serve openai/gpt-oss-120b --tensor-parallel-size 16 --port 8000",
    "12:00:01.000 (APIServer pid=4242) INFO 01-01 12:00:01 [api_server.py:1839] vLLM API server version 0.24.0",
    "12:00:01.100 (APIServer pid=4242) INFO 01-01 12:00:01 [utils.py:233] non-default args: {'model': "
    "'openai/gpt-oss-120b', 'tensor_parallel_size': 16, 'port': 8000}",
    *[f"12:00:02.{r:03d} (EngineCore_DP0 pid=4243) (Worker_TP{r} pid={5000 + r}) INFO 01-01 12:00:02 [model.py:88] "
      "Initializing Neuron worker, visible cores set by the plugin" for r in range(16)],
    "12:00:05.000 (APIServer pid=4242) INFO 01-01 12:00:05 [loader.py:12] Loading weights took 2.90 seconds",
    "12:00:09.000 (APIServer pid=4242) WARNING 01-01 12:00:09 [compile.py:40] compile cache miss; compiling",
    "12:00:11.500 (APIServer pid=4242) INFO 01-01 12:00:11 [launcher.py:46] Application startup complete.",
]
BENCH_LOG = [
    "# 2026-01-01T12:00:12 $ python -m tui.sim bench serve --dataset-name sonnet --num-prompts 30",
    "12:00:12.500 Starting main benchmark run...",
    "12:00:40.000 ============ Serving Benchmark Result ============",
    "12:00:40.000 Successful requests:                     30",
    "12:00:40.000 Output token throughput (tok/s):         112.13",
    "12:00:40.000 ==================================================",
]


def _phases() -> list[dict[str, Any]]:
    return [{"phase": p, "seconds": s, "reported_s": r} for p, s, r in
            (("config", 0.4, None), ("workers", 1.1, None), ("weights", 3.0, 2.9), ("compile", 4.1, None),
             ("warmup", 1.0, None), ("ready", 0.0, None))]


def write_closed_run(root: Path, *, tune: bool = False, matrix: dict[str, Any] | None = None) -> Path:
    """A finished run directory with the files a run writes (report.json, state.json, profile.toml, env.json,
    checkpoints.json, each server step's command and logs), from the scenarios' numbers."""
    d = Path(root)
    d.mkdir(parents=True, exist_ok=True)
    profile = tune_profile() if tune else scenarios.demo_profile()
    steps = arms.run_steps(profile)
    launch = [a.id for a in arms.arms_of(profile)]
    state_steps: dict[str, Any] = {
        "env": {"status": "warned", "seconds": 0.4, "summary": "11 checks, 1 warnings: compile cache", "facts": {}},
        "checkpoints": {"status": "passed", "seconds": 1.2, "summary": "17 checks passed", "facts": {}},
        "dataset": {"status": "passed", "seconds": 0.5, "summary": "4 checks passed",
                    "facts": {"path": f"{d}/sonnet.txt", "sha256": "d58663195ba6780da5f029b920c7ac00cad1e435ee1df7e03b"
                                                                     "f9ec2470f8dea4",
                              "bytes": 22706, "lines": 518, "verified": True,
                              "source": "http://127.0.0.1:8765/datasets/sonnet.txt"}},
    }
    for sid in launch:
        spec = sid != "baseline"
        bench = dict(scenarios.EAGLE_RUN if spec else scenarios.BASE_RUN)
        state_steps[sid] = {"status": "passed", "seconds": 48.2 if spec else 51.7,
                            "summary": f"30 requests, {bench['output_throughput']:.2f} tok/s",
                            "facts": {"startup": {"seconds": 9.6, "phases": _phases()},
                                      "smoke": {"text": "6 7 8 9 10 ", "passed": True,
                                                **({"matches_baseline": True} if spec else {})},
                                      "bench": bench}}
        (d / f"{sid}.command.sh").write_text("#!/bin/sh\npython -m tui.sim serve openai/gpt-oss-120b "
                                             "--tensor-parallel-size 16 --port 8000\n")
        (d / f"{sid}.serve.log").write_text("\n".join(SERVE_LOG) + "\n")
        if tune:
            for w in arms.workloads_of(profile):
                for r in (1, 2, 3):
                    (d / f"{sid}.{w}.r{r}.bench.log").write_text("\n".join(BENCH_LOG) + "\n")
        else:
            (d / f"{sid}.bench.log").write_text("\n".join(BENCH_LOG) + "\n")
    m = matrix or healthy_matrix()
    res_summary = ("; ".join(f"{w}: {r['text']}" for w, r in m["recommendation"].items()) if tune
                   else "EAGLE3 output throughput speedup 1.20x, acceptance 69.0%")
    state_steps["results"] = {"status": "passed", "seconds": 0.1, "summary": res_summary, "facts": {}}
    state = {"profile": profile.name, "profile_source": profile.source, "simulated": True,
             "requested_steps": steps, "started": 0, "owner": {"pid": 1, "started": 0, "host": "elsewhere"},
             "steps": state_steps}
    runs = {"baseline": scenarios.BASE_RUN, "eagle3": scenarios.EAGLE_RUN}
    from tui.core.results.report import comparison

    report: dict[str, Any] = {
        "schema": "specdec-tui/report/1", "profile": profile.name, "simulated": True, "exit_code": 0,
        "run_dir": str(d), "generated": "2026-01-01T12:05:00+0000",
        "verdict": {"ok": True, "text": "EAGLE3 pays: 1.20x output throughput over the baseline, acceptance 69.0%."},
        "models": {"target": profile.models.target, "draft": profile.draft_model},
        "settings": {"num_speculative_tokens": profile.data["speculative"]["num_speculative_tokens"]},
        "requested_steps": steps,
        "steps": [{"id": s, "status": state_steps[s]["status"], "seconds": state_steps[s]["seconds"],
                   "summary": state_steps[s]["summary"]} for s in steps],
        "runs": {} if tune else runs, "comparison": {} if tune else comparison(runs),
        "diagnostics": [{"id": "compile-cache-cold", "severity": "info", "title": "The compile cache was cold",
                         "evidence": ["compile cache: 0 hits, 1 miss"],
                         "remedy": "keep VLLM_CACHE_ROOT on local NVMe so relaunches hit the cache",
                         "step": "baseline"}],
    }
    if tune:
        report["matrix"] = m
    (d / "report.json").write_text(json.dumps(report, indent=2))
    (d / "state.json").write_text(json.dumps(state, indent=2))
    (d / "profile.toml").write_text(profile.to_toml())
    (d / "env.json").write_text(json.dumps({"facts": [
        {"name": n, "value": v, "status": s, "detail": det, "remedy": rem} for n, v, s, det, rem in scenarios.ENV_FACTS]}))
    (d / "checkpoints.json").write_text(json.dumps({"facts": [
        {"name": "target checkpoint", "value": "openai/gpt-oss-120b", "status": "pass", "detail": "reachable"},
        {"name": "draft checkpoint", "value": DRAFT, "status": "pass", "detail": "reachable"},
        {"name": "draft type", "value": "eagle3 = speculative.method", "status": "pass"},
        {"name": "hidden size", "value": "2880 = 2880", "status": "pass"}]}))
    (d / "comparison.txt").write_text("output_throughput    baseline=112.13 eagle3=134.53\n\n"
                                      "EAGLE3 output throughput speedup: 1.20x\n")
    for name in ("report.md", "summary.csv"):
        (d / name).write_text("(written by the run)\n")
    return d
