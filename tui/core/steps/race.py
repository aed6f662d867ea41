"""The race's second round (issue 29, [tune] adaptive): after the fixed arms' first round of tune.repeats, the
configurations still in the race on some bench key are relaunched, one at a time, and benchmarked up to
tune.max_repeats there; the others are not run again. Which ones, and why, is tui/core/results/race.plan — the
same decision code the results step and tests/perf/selection_study.py use.

A relaunched arm keeps its first-round repeats (their result files, checked against state.json's sha256) and its
probes; its smoke test runs again on the new server. Its new facts replace the arm step's in state.json, so a
continued run (--run-dir again) sees the second round as done and plans nothing more. A relaunch that fails
keeps the arm's first-round numbers and warns.
"""

from __future__ import annotations

import time
from typing import Any

from tui.core.events import Fact, Notice
from tui.core.plan.arms import arms_of, bench_keys, fingerprint
from tui.core.results import race as race_mod
from tui.core.results.contamination import usable_repeats
from tui.core.results.stats import arm_label, selection_settings
from tui.core.steps.arm import run_arm
from tui.core.steps.base import StepContext, StepResult


def _resume_record(profile: Any, arm: Any, facts: dict[str, Any]) -> dict[str, Any]:
    """The kept repeats of a relaunched arm, in the shape of a continued run's (tui/core/run/resume.py)."""
    return {"fingerprint": fingerprint(profile, arm),
            "repeats": {str(key): {r: rec for r, rec in enumerate(recs, start=1) if isinstance(rec, dict)}
                        for key, recs in (facts.get("repeats") or {}).items() if isinstance(recs, list)}}


async def run(ctx: StepContext, sid: str) -> StepResult:
    t = ctx.profile.tune
    if t is None or len(t.rounds) < 2:
        return StepResult("skipped", "not run: tune.adaptive is off (a fixed matrix, decided once)")
    arms = [a for a in arms_of(ctx.profile) if not a.schedule]
    rows = [a.as_dict() for a in arms]
    labels = {r["id"]: arm_label(r, rows) for r in rows}
    facts = {a.id: ctx.shared.get(a.id) or {} for a in arms}
    settings = selection_settings(t)
    planned = race_mod.plan(rows, facts, bench_keys(ctx.profile), settings)
    out: dict[str, Any] = {"rounds": list(t.rounds), "keys": planned["keys"], "relaunched": [], "failed": [],
                           "bench_s": 0.0, "launch_s": 0.0}
    lines = []
    for key, k in planned["keys"].items():
        lines.append(f"{key}: {k['why']}")
        ctx.emit(Fact(sid, f"race {key}", k["why"], "pass", " · ".join(k.get("lines") or [])))
    todo = [a for a in arms if a.id in planned["targets"]]
    if not todo:
        summary = "no second round: " + "; ".join(lines)
        ctx.emit(Notice(sid, "info", summary))
        return StepResult("passed", summary, out)
    left = [race_mod.estimate_s(facts[a.id], planned["targets"][a.id]) for a in todo]
    spent = 0.0
    for i, arm in enumerate(todo, start=1):
        before = facts[arm.id]
        if not before.get("repeats"):
            continue
        have = {key: len(usable_repeats(recs)) for key, recs in (before.get("repeats") or {}).items()}
        want = {key: n for key, n in planned["targets"][arm.id].items() if have.get(key, 0) < n}
        if not want:  # a continued run: this arm's second round is already in state.json
            out["relaunched"].append(arm.id)
            continue
        rest = [x for x in left[i - 1:] if x is not None]
        eta = f"; about {sum(rest) / 60:.1f} min of device time left" if rest else ""
        ctx.emit(Notice(sid, "info", f"race: relaunching {labels[arm.id]} ({i} of {len(todo)}) for "
                                     + ", ".join(f"{key} up to {n} repeats" for key, n in want.items())
                                     + f" ({spent / 60:.1f} min spent{eta})"))
        ctx.runtime["resume"] = {**(ctx.runtime.get("resume") or {}), arm.id: _resume_record(ctx.profile, arm, before)}
        ctx.runtime["targets"] = {arm.id: want}
        ctx.runtime["round_probes"] = {arm.id: before.get("probe") or {}}
        t0 = time.monotonic()
        try:
            res = await run_arm(ctx, arm)
        finally:
            ctx.runtime.pop("targets", None)
            ctx.runtime.pop("round_probes", None)
            (ctx.runtime.get("resume") or {}).pop(arm.id, None)
        took = time.monotonic() - t0
        spent += took
        if res.status in ("passed", "warned") and res.facts.get("repeats"):
            # both launches stay on record (device time: tests/perf/adaptive_vs_fixed.py)
            res.facts["launches"] = [*(before.get("launches") or [before.get("startup") or {}]),
                                     res.facts.get("startup") or {}]
            ctx.shared[arm.id] = res.facts
            ctx.run.update_step(arm.id, facts=res.facts, summary=f"{res.summary} (race: second round)")
            out["relaunched"].append(arm.id)
            start = float((res.facts.get("startup") or {}).get("seconds") or 0.0)
            out["launch_s"] += start
            out["bench_s"] += max(0.0, took - start)
        else:
            out["failed"].append(arm.id)
            ctx.emit(Notice(sid, "warning", f"race: {labels[arm.id]}'s relaunch did not finish ({res.summary}); its "
                                            "first-round numbers stand"))
    status = "warned" if out["failed"] else "passed"
    summary = (f"second round: {len(out['relaunched'])} of {len(arms)} configurations relaunched "
               f"({', '.join(labels[a] for a in out['relaunched']) or 'none'}); "
               + "; ".join(lines))
    return StepResult(status, summary, out)
