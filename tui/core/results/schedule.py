"""The load sweep's schedule and its verification: vLLM's dynamic speculative decoding
(`num_speculative_tokens_per_batch_size`, inclusive `[start, end, k]` batch-size ranges) derived from the best k
per concurrency level of the fixed-k arms (tui/core/results/load.py), and the schedule arm's numbers against each
fixed k at every level.

The schedule arm (tui/core/plan/arms.py, `Arm.schedule`) runs after the fixed arms; `derive` gives it the schedule
from their numbers. The fixed arms alone decide the best k and the schedule (the schedule arm is left out of that
matrix, so it cannot recommend itself), and `verify` then compares the schedule arm with each fixed arm level by
level: the ratio of mean output throughputs with Fieller's 95 % interval over the repeats (the same interval as
every speedup in the report). It "beats" a fixed arm where that interval's lower bound is above 1, "loses" where
its upper bound is below 1, and is "not distinguishable" otherwise.
"""

from __future__ import annotations

from typing import Any, Sequence

from tui.core.plan.arms import split_key
from tui.core.results.intervals import ratio_interval
from tui.core.results.contamination import usable_repeats
from tui.core.results.statement import where
from tui.core.results.stats import arm_label

RULE = ("each measured level N covers the batch sizes above the previous measured level up to N, so a batch size "
        "between two measured levels takes the k of the next measured level above it: the heavier load, where "
        "speculation pays less, so an unmeasured batch size gets the more cautious k. Every range is written out, "
        "so vLLM's own rule for a gap (it inherits the previous range's k) never applies; above the last range "
        "vLLM carries that range's k forward (its tail rule)")
K0_NOTE = ("k = 0 is not the baseline: vLLM still runs the drafter's forward pass in a k = 0 range (vLLM issue "
           "#49548 measured a K = 0 schedule at +6.6 % and +21.6 % TPOT over no speculation), so the baseline's "
           "numbers at those levels are better than what the schedule's k = 0 ranges will give; where speculation "
           "pays at no level, serve the baseline without a draft")
WHY = {"pays": "the best k there", "keep_baseline": "no k beats the baseline there",
       "not_proven": "not settled there", "no_baseline": "no baseline numbers there",
       "none": "not measured there", "stop_tuning": "acceptance too low there"}


def basis(levels: Sequence[int], ks: Sequence[int], best: dict[str, dict[str, Any]],
          schedule: Sequence[Sequence[int]]) -> dict[str, Any]:
    """Which batch sizes of a derived schedule were measured and which are inferred, and by what rule:
    {"measured": [{level, k, verdict}], "inferred": [{start, end, k, from}], "tail": {above, k}, "rule",
    "k0_note" (where a k = 0 range sits beside a k > 0 one, else None), "text"}. levels and ks: one k per measured
    level (load._schedule_ks); best: load.analyze's best per level (its verdict says why the level got its k)."""
    levels = list(levels)
    if not levels or not ks:
        return {"measured": [], "inferred": [], "tail": None, "rule": RULE, "k0_note": None,
                "text": "no level was measured" if not levels else "no level is settled: no k was written"}
    measured = [{"level": n, "k": int(k), "verdict": ((best or {}).get(str(n)) or {}).get("verdict") or "none"}
                for n, k in zip(levels, ks)]
    undecided = []
    for m in measured:
        inh = ((best or {}).get(str(m["level"])) or {}).get("inherit")
        if isinstance(inh, dict):
            m["from"] = inh.get("from")
            undecided.append(f"{m['level']} " + (f"kept k={m['k']} from the settled level {inh['from']}"
                                                  if inh.get("from") is not None else
                                                  f"took its preferred configuration's k={m['k']} (no level settled)"))
    inferred = []
    prev = 0
    for n, k in zip(levels, ks):
        if n - prev > 1:
            inferred.append({"start": prev + 1, "end": n - 1, "k": int(k), "from": n})
        prev = n
    tail = {"above": levels[-1], "k": int(ks[-1])}
    groups: dict[tuple[int, str], list[int]] = {}
    for m in measured:
        groups.setdefault((m["k"], m["verdict"]), []).append(m["level"])
    said = "; ".join(f"k={k} at {where(levels, ns)} ({WHY.get(v, v)})" for (k, v), ns in groups.items())
    text = f"Measured: {said}."
    if inferred:
        text += " Inferred: " + ", ".join(
            f"{e['start'] if e['start'] == e['end'] else str(e['start']) + '–' + str(e['end'])} from {e['from']} "
            f"(k={e['k']})" for e in inferred) + "."
    if undecided:
        text += (" Not settled, so never turned off for being undecided: " + "; ".join(undecided) + ".")
    text += f" Above {tail['above']}: k={tail['k']}, vLLM's tail rule. Rule: {RULE}."
    k0 = K0_NOTE if any(e[2] == 0 for e in schedule) and any(e[2] > 0 for e in schedule) else None
    if k0:
        text += f" Note: {k0}."
    return {"measured": measured, "inferred": inferred, "tail": tail, "rule": RULE, "k0_note": k0, "text": text}


def _tputs(facts: dict[str, Any] | None, key: str) -> list[float]:
    reps = ((facts or {}).get("repeats") or {}).get(key) or []
    return [float(r["output_throughput"]) for r in usable_repeats(reps)
            if isinstance(r.get("output_throughput"), (int, float)) and not isinstance(r.get("output_throughput"), bool)]


def derive(load: dict[str, Any] | None) -> tuple[list[list[int]] | None, str, str | None]:
    """(schedule, why, workload): the schedule of the sweep's first workload, or None with the reason it is not
    worth running (no sweep, speculation pays at no level, or one k at every level: that fixed arm already ran)."""
    wls = (load or {}).get("workloads") or {}
    if not wls:
        return None, "the load sweep has no results to derive a schedule from", None
    wl, entry = next(iter(wls.items()))
    sched = entry.get("schedule") or []
    if not sched:
        return None, f"no schedule could be derived on {wl}", wl
    ks = {int(e[2]) for e in sched}
    if ks == {0}:
        return None, f"speculation pays at no measured level on {wl}: the schedule is no speculation at all", wl
    if len(sched) == 1:
        return None, (f"the schedule is k={sched[0][2]} at every level on {wl}, which the fixed k={sched[0][2]} arm "
                      "already measured"), wl
    return [list(map(int, e)) for e in sched], entry.get("schedule_text") or "", wl


def verify(schedule_arm: dict[str, Any], fixed_arms: Sequence[dict[str, Any]], arm_facts: dict[str, dict[str, Any]],
           keys: Sequence[str], all_arms: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The schedule arm against every fixed arm (baseline included) at every bench key of its workload(s):
    {"arm", "status", "levels": {key: {"vs": {arm_id: {ratio, ci95, unbounded, verdict}}, "beats": [...],
    "loses": [...]}}, "text"}. status: "verified" (at every level it is not beaten by any fixed arm and beats or
    ties the best one), "mixed" (some fixed arm beats it somewhere), "not_run" (no numbers)."""
    sid = schedule_arm["id"]
    facts = arm_facts.get(sid) or {}
    names = all_arms or [*fixed_arms, schedule_arm]
    out: dict[str, Any] = {"arm": sid, "status": "not_run", "levels": {}, "text": ""}
    if not facts.get("repeats"):
        out["text"] = "the schedule arm was not benchmarked"
        return out
    beaten_at: list[str] = []
    for key in keys:
        mine = _tputs(facts, key)
        if not mine:
            continue
        row: dict[str, Any] = {"vs": {}, "beats": [], "loses": []}
        for fa in fixed_arms:
            theirs = _tputs(arm_facts.get(fa["id"]), key)
            if not theirs:
                continue
            ri = ratio_interval(mine, theirs)
            ci = ri.get("ci95")
            verdict = ("beats" if ci and ci[0] > 1.0 else "loses" if ci and ci[1] < 1.0 else "not distinguishable")
            row["vs"][fa["id"]] = {"ratio": ri.get("ratio"), "ci95": ci, "unbounded": ri.get("unbounded"),
                                   "verdict": verdict}
            if verdict == "beats":
                row["beats"].append(fa["id"])
            elif verdict == "loses":
                row["loses"].append(fa["id"])
        if row["loses"]:
            wl, lv = split_key(key)
            beaten_at.append(f"{wl}" + (f" at {lv}" if lv is not None else "") + " by "
                             + ", ".join(arm_label(a, names) for a in fixed_arms if a["id"] in row["loses"]))
        out["levels"][key] = row
    if not out["levels"]:
        out["text"] = "the schedule arm has no numbers at the sweep's levels"
        return out
    if beaten_at:
        out["status"] = "mixed"
        out["text"] = ("the schedule is beaten (95 % interval of the throughput ratio below 1) " + "; ".join(beaten_at))
    else:
        out["status"] = "verified"
        out["text"] = ("no fixed k beats the schedule at any measured level (95 % Fieller intervals of the "
                       "throughput ratio); it is clearly ahead where it beats a fixed k")
    return out
