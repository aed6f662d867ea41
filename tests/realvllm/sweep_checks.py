"""Checks of a real load sweep's run directory against its own result files, shared by the README's cpu-tune
journey (tests/journey/test_real_journeys.py: the real draft) and the synthetic-acceptance sweep
(tests/realvllm/test_real_synthetic.py): every number the report gives (matrix cells, per-level verdicts, best k,
the schedule, goodput, the /metrics time series) is recomputed here from the bench's own JSON files."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Sweep:
    run_dir: Path
    ks: tuple[int, ...]
    levels: tuple[int, ...]
    repeats: int
    num_prompts: int  # [benchmark] num_prompts
    min_waves: int = 4
    workload: str = "sonnet"

    @property
    def arms(self) -> tuple[str, ...]:
        return ("baseline", *(f"eagle3-k{k}" for k in self.ks))

    def files(self, arm: str, level: int) -> list[dict]:
        return [load(self.run_dir / f"{arm}.{self.workload}.c{level}.r{i}.json") for i in range(1, self.repeats + 1)]

    def prompts(self, level: int) -> int:
        return max(self.num_prompts, self.min_waves * level)

    @property
    def report(self) -> dict:
        return load(self.run_dir / "report.json")


def assert_one_launch_per_arm_and_the_matrix_follows_the_files(sw: Sweep) -> None:
    rep = sw.report
    m = rep["matrix"]
    assert m["workloads"] == [f"{sw.workload}@c{n}" for n in sw.levels]
    launched = [c for c in load(sw.run_dir / "commands.json")["commands"] if c["role"] == "serve"]
    assert [c["step"] for c in launched][:len(sw.arms)] == list(sw.arms)  # one launch per arm
    for c in launched:
        assert c["argv"][c["argv"].index("--max-num-seqs") + 1] == str(max(sw.levels))
    for arm in sw.arms:
        for n in sw.levels:
            files = sw.files(arm, n)
            for f in files:
                assert f["completed"] == f["num_prompts"] == sw.prompts(n) and f["failed"] == 0
                assert f["max_concurrency"] == n
                assert f["request_goodput"] is not None  # --goodput from [tune] slo
            cell = m["cells"][arm][f"{sw.workload}@c{n}"]
            assert cell["output_throughput"]["values"] == pytest.approx([f["output_throughput"] for f in files])
            if arm != "baseline":
                # pooled acceptance: the token-weighted mean of the bench's own blocks (same /metrics deltas)
                acc = (sum(f["spec_decode_accepted_tokens"] for f in files)
                       / sum(f["spec_decode_draft_tokens"] for f in files) * 100)
                assert cell["acceptance_rate"] == pytest.approx(acc, abs=0.05)
                base = [g["output_throughput"] for g in sw.files("baseline", n)]
                ratio = statistics.mean(f["output_throughput"] for f in files) / statistics.mean(base)
                assert cell["speedup"]["ratio"] == pytest.approx(ratio, rel=1e-3)


def assert_time_series_add_up_to_the_bench_counts(sw: Sweep, arms: tuple[str, ...] | None = None) -> None:
    """The ~1 s /metrics windows of every bench add up to what the bench itself counted (nothing else ran on the
    server during a bench, so the server's counter deltas are the bench's tokens)."""
    ts = sw.report["timeseries"]
    for arm in arms or sw.arms:
        for n in sw.levels:
            series = ts[arm][f"{sw.workload}@c{n}"]
            files = sw.files(arm, n)
            assert len(series) == len(files)
            for rec, f in zip(series, files):
                wins = rec["windows"]
                assert len(wins) >= 2 and all(w["t1"] > w["t0"] for w in wins)
                assert sum(w["generation_tokens"] for w in wins) == f["total_output_tokens"]
                if arm != "baseline":
                    # vLLM's bench writes no spec_decode_* keys when the server drafted nothing during it (a
                    # schedule's k = 0 at a level whose batch never fell to the sizes that draft): that is 0
                    drafted = f.get("spec_decode_draft_tokens", 0)
                    assert sum(w["draft_tokens"] for w in wins) == drafted
                    assert sum(w["accepted_tokens"] for w in wins) == f.get("spec_decode_accepted_tokens", 0)
                    assert ("spec_decode_accepted_tokens" in f) == (drafted > 0)


def assert_verdicts_best_k_schedule_and_goodput_follow_the_numbers(sw: Sweep) -> list[list[int]]:
    """Per k and level the verdict is the Fieller interval's (pays above 1, loses below 1, else not proven); the
    best k and the schedule's k at each level are the recommendation's (issue 29's rule for a level that is not
    settled); goodput is the mean
    of the files' own request_goodput; the schedule arm ran exactly when the schedule is worth running. Returns
    the schedule."""
    rep = sw.report
    load_ = rep["load"]["workloads"][sw.workload]
    rec = rep["matrix"]["recommendation"]
    for k in sw.ks:
        arm = load_["arms"][f"eagle3-k{k}"]
        for n in sw.levels:
            lv = arm["levels"][str(n)]
            ci = (lv["speedup"] or {}).get("ci95")
            want = "pays" if ci and ci[0] > 1 else "loses" if ci and ci[1] < 1 else "not_proven"
            assert lv["verdict"] == want, (k, n, lv)
    sched = load_["schedule"]
    # issue 29: a level settled on an arm gets its k, one settled on the baseline 0; a level that is not settled
    # keeps the nearest settled level's k (the lower one first); with no settled level there is no schedule
    own = {}
    for n in sw.levels:
        r = rec[f"{sw.workload}@c{n}"]
        assert load_["best"][str(n)]["verdict"] == r["verdict"]
        own[n] = (next(a["num_speculative_tokens"] for a in rep["matrix"]["arms"] if a["id"] == r["arm"])
                  if r["verdict"] == "pays" else 0 if r["verdict"] == "keep_baseline" else None)
    if all(v is None for v in own.values()):
        assert sched == [], sched
    else:
        assert sched[0][0] == 1 and sched[-1][1] == max(sw.levels)
        levels = list(sw.levels)
        for i, n in enumerate(levels):
            near = [m for m in reversed(levels[:i]) if own[m] is not None] + \
                [m for m in levels[i + 1:] if own[m] is not None]
            want = own[n] if own[n] is not None else own[near[0]]
            k_at = next(e[2] for e in sched if e[0] <= n <= e[1])
            assert k_at == want, (n, sched, own)
    for arm in sw.arms:  # goodput: the mean of the files' own request_goodput
        for n in sw.levels:
            g = load_["arms"][arm]["levels"][str(n)]["goodput"]
            assert g["mean"] == pytest.approx(statistics.mean(f["request_goodput"] for f in sw.files(arm, n)),
                                              abs=1e-6)  # the report rounds to 6 places
    ver = rep["load"]["schedule_verification"]
    sched_step = next(s for s in rep["steps"] if s["id"] == "eagle3-schedule")
    if not sched or all(e[2] == 0 for e in sched) or len(sched) == 1:  # nothing worth running (results/schedule.py)
        assert sched_step["status"] == "skipped"
        assert ver["status"] == "not_run" and ver["text"].startswith("not run:")
    else:
        assert sched_step["status"] in ("passed", "warned"), sched_step
        assert ver["status"] in ("verified", "mixed") and ver["schedule"] == sched
    return sched
