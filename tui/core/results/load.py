"""Where speculation stops paying (issue 17): the analysis of a tune run's concurrency sweep, report.json's
"load" (the shared contract's shape), its report.md section and a compact text for the headless front end.

Input: the matrix that tui/core/results/stats.build_matrix builds over the run's bench keys ("sonnet@c4",
tui/core/plan/arms.level_key), so each level already has its cells (throughput and Fieller speedup intervals,
latency, acceptance) and its Step 3 recommendation; plus the arms' raw repeat facts (goodput under the SLO and
the /metrics time series, which the cells do not carry).

Rules (each checked against scipy or vLLM's own code in tests/test_load.py):
- a level's verdict for an arm: "pays" when its speedup interval's lower bound is above 1 (stats.pays),
  "loses" when its upper bound is below 1, otherwise "not_proven" (no interval, unbounded, or it straddles 1);
  "no_baseline" where the arm has numbers but the baseline has none (no speedup), "not_measured" where the arm
  has none (not run, failed, or its per-level facts are missing from state.json);
- what an arm does over the sweep: tui/core/results/statement.py, one statement from those verdicts (where it
  pays, is not proven, loses, has no baseline numbers, was not measured; the changes between levels that the
  charts mark), for any pattern, non-monotone ones included — every text and chart takes it from there;
- the best k per level: the level's Step 3 recommendation (stats.recommend);
- vLLM's `num_speculative_tokens_per_batch_size`: measured level n_i covers the batch sizes (n_{i-1}, n_i]
  (the first [1, n_1]) with the best k where the level's recommendation pays, else 0 (no speculation: it was
  not shown to pay there); adjacent ranges with the same k merge. Which batch sizes were measured and which
  are inferred, and by which rule, is said alongside (tui/core/results/schedule.py basis); The result is what vLLM 0.32's
  validate_and_normalize_dynamic_sd_schedule accepts: inclusive [start, end, k] ranges, the first starting at
  1, sorted, non-overlapping, k ≥ 0; vLLM caps each k at num_speculative_tokens and carries the last range's k
  past its end;
- goodput: the mean and t interval over repeats of the bench's request goodput; a level meets the SLO when mean
  goodput ≥ attainment × mean request throughput (by default at least 90 % of the requests meet every SLO);
  an arm sustains the SLO up to the highest level n such that every level ≤ n meets it; a level with no
  numbers is "not measured" there (slo_status), never read as a miss.

Pure functions, no I/O. Units: acceptance in PERCENT (0-100), throughput in tokens/s, goodput in requests/s.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from tui.core.plan.arms import level_key
from tui.core.results.drift import drift as acceptance_drift
from tui.core.results.intervals import _numbers, t_interval
from tui.core.results.schedule import basis as schedule_basis
from tui.core.results.specmodel import draft_group as _group, fit as fit_model
from tui.core.results.contamination import usable_repeats
from tui.core.results.statement import JUDGED, KINDS, WORDS, span as _span, statement
from tui.core.results.stats import LATENCY_KEYS, arm_k, arm_label, pays

VERDICTS = JUDGED  # the judgements; KINDS adds "no_baseline" and "not_measured"
VERDICT_WORDS = WORDS
SLO_KEYS = ("ttft_ms", "tpot_ms")


def _fail(what: str, value: Any, fix: str) -> ValueError:
    return ValueError(f"load analysis: {what} = {value!r} cannot be analyzed. {fix}")


def _check(matrix: Any, levels: Any, workloads: Any, slo: Any, attainment: Any) -> None:
    if not isinstance(matrix, dict) or not isinstance(matrix.get("cells"), dict) or not isinstance(matrix.get("arms"), list):
        raise _fail("matrix", type(matrix).__name__, "Pass the matrix of stats.build_matrix(arms, arm_facts, "
                    "bench_keys(profile)): a dict with \"arms\", \"cells\" and \"recommendation\".")
    if (not isinstance(levels, (list, tuple)) or not levels
            or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in levels)
            or list(levels) != sorted(set(levels))):
        raise _fail("levels", levels, "Pass the run's [tune] concurrency levels as plan.arms.levels_of(profile) "
                    "returns them: distinct positive integers in ascending order, e.g. [1, 2, 4, 8].")
    if not isinstance(workloads, (list, tuple)) or not workloads or not all(isinstance(w, str) and w for w in workloads):
        raise _fail("workloads", workloads, "Pass the run's workload names (plan.arms.workloads_of(profile)), "
                    "without the \"@cN\" level suffix, e.g. [\"sonnet\"].")
    if slo is not None and (not isinstance(slo, dict) or not set(slo) <= set(SLO_KEYS)
                            or any(isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0
                                   for v in slo.values())):
        raise _fail("slo", slo, "Pass [tune] slo as a table with ttft_ms and/or tpot_ms, each a positive number "
                    "of milliseconds (e.g. {ttft_ms = 500.0, tpot_ms = 12.0}), or None when the profile has none.")
    if isinstance(attainment, bool) or not isinstance(attainment, (int, float)) or not 0 < attainment <= 1:
        raise _fail("attainment", attainment, "Pass the share of requests that must meet the SLO as a number in "
                    "(0, 1], e.g. 0.9.")


def level_verdict(speedup: dict[str, Any] | None) -> str:
    """"pays" (the interval's lower bound > 1), "loses" (its upper bound < 1) or "not_proven" (no interval,
    an unbounded one, or one that contains 1)."""
    if pays(speedup):
        return "pays"
    ci = (speedup or {}).get("ci95")
    if ci and not (speedup or {}).get("unbounded") and ci[1] < 1.0:
        return "loses"
    return "not_proven"


def _reqs(n: int) -> str:
    return f"{n} concurrent request" + ("" if n == 1 else "s")


def _mean(vals: list[float]) -> float | None:
    return statistics.fmean(vals) if vals else None


def _level(key: str, c: dict[str, Any], reps: list[dict[str, Any]], speculative: bool,
           slo: dict[str, Any] | None, attainment: float, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """One arm at one level. base: the baseline's cell at the same key (a speculative level without a speedup
    says "no_baseline" when the baseline has no numbers there)."""
    tp = c.get("output_throughput") or {}
    sp = c.get("speedup") if speculative else None
    measured = bool(c.get("repeats")) and tp.get("mean") is not None
    if not speculative:
        verdict = None
    elif not measured:
        verdict = "not_measured"
    elif (not sp or sp.get("ratio") is None) and ((base or {}).get("output_throughput") or {}).get("mean") is None:
        verdict = "no_baseline"
    else:
        verdict = level_verdict(sp)
    out: dict[str, Any] = {
        "key": key, "repeats": c.get("repeats") or 0, "measured": measured,
        "throughput": {"mean": tp.get("mean"), "ci95": tp.get("ci95")},
        "speedup": ({"ratio": sp.get("ratio"), "ci95": sp.get("ci95"), "unbounded": bool(sp.get("unbounded"))}
                    if sp else None),
        "verdict": verdict,
    }
    for k in LATENCY_KEYS:
        out[k] = c.get(k)
    out["acceptance_rate"] = c.get("acceptance_rate")
    out["acceptance_length"] = c.get("acceptance_length")
    out["per_position"] = (c.get("per_position") or {}).get("marginal")
    gp = _numbers(r.get("request_goodput") for r in reps)
    if gp:
        ti = t_interval(gp)
        out["goodput"] = {"mean": ti["mean"], "ci95": ti["ci95"]}
    else:
        out["goodput"] = None
    rt = _mean(_numbers(r.get("request_throughput") for r in reps))
    out["meets_slo"] = (bool(_mean(gp) >= attainment * rt) if slo and gp and rt is not None else None)
    out["slo_status"] = (None if not slo else "not_measured" if not measured else
                         "no_goodput" if out["meets_slo"] is None else "meets" if out["meets_slo"] else "misses")
    return out


def sustains_up_to(levels: Sequence[int], meets: dict[int, bool | None]) -> int | None:
    """The highest level n with every level ≤ n meeting the SLO; None when the lowest does not (or is
    unknown)."""
    top = None
    for n in levels:
        if meets.get(n) is not True:
            break
        top = n
    return top


def slo_stop(levels: Sequence[int], status: dict[int, str | None]) -> dict[str, Any] | None:
    """Where an arm's run of levels that meet the SLO ends and why: {"level", "status"} with status "misses",
    "not_measured" (no numbers there) or "no_goodput" (numbers, but the bench recorded no goodput); None when
    every level meets it."""
    for n in levels:
        if status.get(n) != "meets":
            return {"level": n, "status": status.get(n) or "not_measured"}
    return None


def build_schedule(levels: Sequence[int], ks: Sequence[int]) -> list[list[int]]:
    """vLLM's num_speculative_tokens_per_batch_size from one k per measured level: level n_i covers batch sizes
    (n_{i-1}, n_i] (the first [1, n_1]); adjacent ranges with the same k are merged."""
    out: list[list[int]] = []
    prev = 0
    for n, k in zip(levels, ks):
        if out and out[-1][2] == k:
            out[-1][1] = n
        else:
            out.append([prev + 1, n, int(k)])
        prev = n
    return out


def validate_schedule(schedule: Any) -> list[str]:
    """What vLLM 0.32 (vllm/v1/spec_decode/dynamic/utils.py, validate_and_normalize_dynamic_sd_schedule)
    would reject in a schedule, as messages ([] when it accepts it): a non-empty list of 3-item [start, end, k]
    entries of integers, start and end ≥ 1, start ≤ end, k ≥ 0; sorted by start the ranges must not overlap
    and the first must start at 1. (vLLM sorts the entries itself; so does this check.)"""
    if not isinstance(schedule, list) or not schedule:
        return ["the schedule must be a non-empty list of [start, end, k] entries"]
    errors: list[str] = []
    parsed = []
    for e in schedule:
        if not isinstance(e, (list, tuple)) or len(e) != 3:
            errors.append(f"entry {e!r} is not a 3-item [start, end, k]")
            continue
        try:
            s, t, k = (int(x) for x in e)
        except (TypeError, ValueError):
            errors.append(f"entry {e!r} holds a value that is not an integer")
            continue
        if s <= 0 or t <= 0:
            errors.append(f"range ({s}, {t}) must be positive")
        elif s > t:
            errors.append(f"range start must be <= end in ({s}, {t}, {k})")
        elif k < 0:
            errors.append(f"k must be >= 0 in ({s}, {t}, {k})")
        else:
            parsed.append((s, t, k))
    if errors:
        return errors
    parsed.sort(key=lambda e: e[0])
    prev = 0
    for s, t, _ in parsed:
        if s <= prev:
            return ["ranges must be non-overlapping and sorted"]
        prev = t
    if parsed[0][0] != 1:
        return ["the first range must start at 1"]
    return []


def schedule_text(schedule: Sequence[Sequence[int]], settled_any: bool = True) -> str:
    """ "k=2 up to 2 concurrent requests, k=1 at 3–4, no speculation from 5"."""
    if not schedule:
        return ("no schedule: no level was measured" if settled_any else
                "no schedule: Step 3 is settled at no level, so no k can be written for any batch size")
    if all(k == 0 for _, _, k in schedule):
        return (f"no speculation at any measured level (1–{schedule[-1][1]}): speculation was not shown to pay "
                "anywhere, so there is no schedule to deploy; keep the baseline")
    parts = []
    for i, (s, e, k) in enumerate(schedule):
        what = f"k={k}" if k else "no speculation"
        if len(schedule) == 1:
            where = f"at every measured level (1–{e}, and above, as vLLM carries the last range forward)"
        elif i == 0:
            where = f"up to {_reqs(e)}"
        elif i == len(schedule) - 1:
            where = f"from {s}"
        else:
            where = f"at {_span(s, e)}"
        parts.append(f"{what} {where}")
    text = ", ".join(parts)
    if any(k == 0 for _, _, k in schedule):
        text += (" (k=0 where the baseline is the pick there; a level that is merely not settled keeps a "
                 "neighbouring settled level's k)")
    return text


def _best(rec: dict[str, Any] | None, arms_by_id: dict[str, dict[str, Any]], arms: list[dict[str, Any]]) -> dict[str, Any]:
    rec = rec or {}
    v = rec.get("verdict") or "none"
    arm, k = None, None
    if v == "pays" and rec.get("arm") in arms_by_id:
        arm, k = rec["arm"], arm_k(arms_by_id[rec["arm"]])
    elif v == "keep_baseline":
        arm, k = rec.get("arm") or "baseline", 0
    cand = rec.get("candidate")
    out = {"arm": arm, "k": k, "verdict": v, "candidate": cand, "text": rec.get("text") or ""}
    if v == "not_proven" and cand in arms_by_id:
        out["candidate_label"] = arm_label(arms_by_id[cand], arms)
    elif v == "not_proven" and cand:
        out["candidate_label"] = "baseline"
    if v == "pays" and rec.get("ahead"):
        out["ahead"] = [dict(a, label=arm_label(arms_by_id[a["arm"]], arms)) for a in rec["ahead"]
                        if a.get("arm") in arms_by_id]
    return out


def _schedule_ks(levels: Sequence[int], best: dict[str, dict[str, Any]], arms_out: dict[str, dict[str, Any]],
                 arms_by_id: dict[str, dict[str, Any]]) -> tuple[list[int], tuple[Any, Any] | None]:
    """One k per level for the schedule. vLLM runs one draft: the schedule follows the draft recommended at the
    most paying levels; where another draft's arm is recommended, that draft's own best paying arm (highest
    mean throughput) gives k, else 0. A settled baseline gives 0. A level whose race is not settled never gets 0
    for being undecided: it takes the k of the nearest settled level (the lower one first; `inherit` records it).
    With no settled level at all there is no schedule ([])."""
    won = [arms_by_id[best[str(n)]["arm"]] for n in levels
           if best[str(n)]["verdict"] == "pays" and best[str(n)]["arm"] in arms_by_id]
    groups = [_group(a) for a in won]
    head = max(dict.fromkeys(groups), key=groups.count) if won else None
    own: dict[int, int | None] = {}
    for n in levels:
        b = best[str(n)]
        if b["verdict"] == "keep_baseline":
            own[n] = 0
        elif b["verdict"] != "pays" or b["arm"] not in arms_by_id:
            own[n] = None  # undecided (or no numbers): inherits below
        elif _group(arms_by_id[b["arm"]]) == head:
            own[n] = int(b["k"])
        else:
            alt = [(lv["throughput"]["mean"] or 0.0, -arm_k(arms_by_id[aid]), arm_k(arms_by_id[aid]))
                   for aid, a in arms_out.items() if aid in arms_by_id and _group(arms_by_id[aid]) == head
                   for lv in [a["levels"][str(n)]] if lv["verdict"] == "pays"]
            own[n] = max(alt)[2] if alt else 0
    if all(v is None for v in own.values()):
        return [], head  # no level settled: no schedule (an undecided level is never turned off for it)
    ks = []
    for i, n in enumerate(levels):
        if own[n] is not None:
            ks.append(own[n])
            continue
        lower = [m for m in reversed(levels[:i]) if own[m] is not None]
        upper = [m for m in levels[i + 1:] if own[m] is not None]
        src = (lower or upper or [None])[0]
        if src is not None:
            ks.append(int(own[src]))
            best[str(n)]["inherit"] = {"from": src, "k": int(own[src])}
    return ks, head


def _slo_text(arms_out: dict[str, dict[str, Any]], arms: list[dict[str, Any]], slo: dict[str, Any] | None,
              levels: Sequence[int]) -> str | None:
    if not slo:
        return None
    if not any(lv.get("meets_slo") is not None for a in arms_out.values() for lv in a["levels"].values()):
        return ("no goodput was measured: the bench recorded no request goodput under the SLO (vLLM's "
                "--goodput), so no level can be said to meet it")
    titles = {a["id"]: ("the baseline" if a.get("kind") == "baseline" else (a.get("title") or arm_label(a, arms)))
              for a in arms}
    order = sorted(arms_out, key=lambda aid: (arms_out[aid]["k"] is None, -(arms_out[aid]["sustains_slo_up_to"] or 0)))
    parts = []
    for i, aid in enumerate(order):
        n = arms_out[aid]["sustains_slo_up_to"]
        stop = arms_out[aid].get("slo_stop")
        why = ""
        if stop and stop["status"] == "not_measured":
            why = f" (not measured at {stop['level']})"
        elif stop and stop["status"] == "no_goodput":
            why = f" (no goodput recorded at {stop['level']})"
        if n is None:
            where = (f"not measured at {_reqs(levels[0])}" if stop and stop["status"] == "not_measured" else
                     f"no goodput recorded at {_reqs(levels[0])}" if stop and stop["status"] == "no_goodput" else
                     f"not at {_reqs(levels[0])}")
            why = ""
        elif n == levels[-1]:
            where = f"at every measured level (up to {_reqs(n)})"
        else:
            where = f"up to {_reqs(n)}" if i == 0 else f"up to {n}"
        parts.append(f"{titles[aid]} holds the SLO {where}{why}" if i == 0 else f"{titles[aid]} {where}{why}")
    return ", ".join(parts)


def _coverage(matrix: dict[str, Any], keys: list[str]) -> str:
    cov = matrix.get("coverage") or {}
    seen = list(dict.fromkeys(cov[k] for k in keys if cov.get(k)))
    if not seen:
        return "no intervals: no level was measured"
    if len(seen) == 1:
        return seen[0]
    return "The levels differ in what their intervals cover: " + " ".join(seen)


def analyze(matrix: dict[str, Any], arm_facts: dict[str, dict[str, Any] | None], levels: Sequence[int],
            workloads: Sequence[str], slo: dict[str, Any] | None, attainment: float = 0.9) -> dict[str, Any]:
    """report.json's "load" (the contract's shape) for a concurrency sweep.

    matrix: stats.build_matrix(arms, arm_facts, bench_keys(profile)); arm_facts: {arm id: the arm step's facts}
    ({"repeats": {bench key: [repeat facts]}}: request_goodput, request_throughput, timeseries); levels: the
    ascending concurrency levels; workloads: the workload names (no "@cN"); slo: [tune] slo or None;
    attainment: the share of requests that must meet the SLO for a level to meet it.

    "schedule_verification" and "schedule_profile" are left None for the caller (the results step) to fill.
    Raises ValueError (one paragraph naming the input and the fix) on malformed input."""
    _check(matrix, levels, workloads, slo, attainment)
    levels = list(levels)
    arms = matrix["arms"]
    arms_by_id = {a["id"]: a for a in arms if a.get("kind") != "baseline"}
    base_id = next((a["id"] for a in arms if a.get("kind") == "baseline"), None)
    all_keys = [level_key(wl, n) for wl in workloads for n in levels]
    out: dict[str, Any] = {"levels": levels, "slo": dict(slo) if slo else None, "attainment": attainment,
                           "workloads": {}, "schedule_verification": None, "schedule_profile": None,
                           "coverage": _coverage(matrix, all_keys)}
    for wl in workloads:
        keys = {n: level_key(wl, n) for n in levels}
        arms_out: dict[str, dict[str, Any]] = {}
        drift_out: dict[str, dict[str, Any]] = {}
        for a in arms:
            aid = a["id"]
            spec = a.get("kind") != "baseline"
            reps_by_key = ((arm_facts.get(aid) or {}).get("repeats") or {})
            lv: dict[str, Any] = {}
            for n, key in keys.items():
                reps = usable_repeats(reps_by_key.get(key))
                base_cell = (matrix["cells"].get(base_id) or {}).get(key) if base_id else None
                lv[str(n)] = _level(key, ((matrix["cells"].get(aid) or {}).get(key) or {}), reps, spec, slo,
                                    attainment, base_cell)
                if spec:
                    d = acceptance_drift([r.get("timeseries") for r in reps])
                    if d is not None:
                        drift_out.setdefault(aid, {})[str(n)] = d
            entry: dict[str, Any] = {"label": arm_label(a, arms), "title": a.get("title"), "k": arm_k(a), "levels": lv}
            if spec:
                st = statement([(n, lv[str(n)]["verdict"]) for n in levels], entry["label"])
                entry["statement"] = st
                for v in KINDS:
                    entry[v] = st["levels"][v]
                entry["range_text"] = st["range_text"]
                # a crossover is the list of changes between neighbouring levels (any pattern); the single
                # last-pays / first-loses pair is given only where the sweep is monotone (else it could read
                # "first loses at 2, last pays at 4")
                mono = bool(st.get("monotone"))
                entry["crossover"] = {"last_pays": st["last_pays"] if mono else None,
                                      "first_loses": st["first_loses"] if mono else None,
                                      "transitions": [dict(c) for c in st.get("changes") or []],
                                      "text": st["text"]}
            if slo:
                entry["sustains_slo_up_to"] = sustains_up_to(levels, {n: lv[str(n)]["meets_slo"] for n in levels})
                entry["slo_stop"] = slo_stop(levels, {n: lv[str(n)]["slo_status"] for n in levels})
            else:
                entry["sustains_slo_up_to"] = None
            arms_out[aid] = entry
        recs = matrix.get("recommendation") or {}
        best = {str(n): _best(recs.get(key), arms_by_id, arms) for n, key in keys.items()}
        ks, head = _schedule_ks(levels, best, arms_out, arms_by_id)
        sched = build_schedule(levels, ks)
        settled_any = any(b["verdict"] in ("pays", "keep_baseline") for b in best.values()) or not any(
            b["verdict"] == "not_proven" for b in best.values())
        w: dict[str, Any] = {"arms": arms_out, "best": best, "schedule": sched,
                             "schedule_text": schedule_text(sched, settled_any),
                             "schedule_basis": schedule_basis(levels, ks, best, sched),
                             "max_k": max(ks) if ks else 0,
                             "slo_text": _slo_text(arms_out, arms, slo, levels),
                             "model": fit_model(matrix, wl, levels, best), "drift": drift_out}
        if head is not None and len({_group(a) for a in arms_by_id.values()}) > 1:
            w["schedule_draft"] = {"method": head[0], "draft": head[1]}
        out["workloads"][wl] = w
    return out
