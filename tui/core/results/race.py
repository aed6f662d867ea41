"""The adaptive race's plan (issue 29, [tune] adaptive): after every fixed arm has run its first round
(tune.repeats per bench key), which configurations get more repeats, and how many.

Per bench key (a workload, or a workload at one concurrency level) the first look decides on each
configuration's first-round repeats (tui/core/results/selection.decide, α split over the two planned looks);
the configurations still in the race get repeats up to tune.max_repeats (selection.next_round), unless the race is
settled there or more repeats could not settle it at the observed spread (selection.can_settle: stopping then
only turns a possible decision into "not settled"). An arm is relaunched once for all its keys that need more.

The results step decides again on everything with the same two looks (stats.recommend); what this module plans
is what the engine's race step runs (tui/core/steps/race.py). Pure functions, no I/O.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from tui.core.results import selection as sel
from tui.core.results.contamination import usable_repeats
from tui.core.results.stats import arm_label, preference


def _values(facts: dict[str, Any] | None, key: str, first: int | None = None) -> list[float]:
    reps = usable_repeats(((facts or {}).get("repeats") or {}).get(key))
    out = [float(r["output_throughput"]) for r in reps
           if isinstance(r.get("output_throughput"), (int, float)) and not isinstance(r.get("output_throughput"), bool)]
    return out if first is None else out[:first]


def look(arms: Sequence[dict[str, Any]], facts: dict[str, dict[str, Any] | None], key: str,
         settings: dict[str, Any], first_round_only: bool = True) -> sel.Race | None:
    """The race on one bench key at the first look (first_round_only) or on every repeat so far; None without a
    baseline and one speculative configuration measured there. arms: the matrix's arm dicts (kind, id, k, draft)."""
    rounds = list(settings.get("rounds") or [])
    spec = [a for a in arms if a.get("kind") != "baseline" and not a.get("schedule")]
    base = next((a for a in arms if a.get("kind") == "baseline"), None)
    if base is None or not spec:
        return None
    own = next((a.get("draft_name") or a.get("draft") for a in spec), None)
    configs = sorted([base, *spec], key=lambda a: preference(a, own))
    first = rounds[0] if first_round_only and rounds else None
    values = {a["id"]: _values(facts.get(a["id"]), key, first) for a in configs}
    if not values[base["id"]] or not any(values[a["id"]] for a in spec):
        return None
    order = [a["id"] for a in configs]
    return sel.decide(values, order, float(settings.get("indifference", sel.INDIFFERENCE)),
                      float(settings.get("confidence", sel.CONFIDENCE)), looks=max(1, len(rounds)),
                      configs=sum(1 for i in order if values[i]))


def plan(arms: Sequence[dict[str, Any]], facts: dict[str, dict[str, Any] | None], keys: Sequence[str],
         settings: dict[str, Any]) -> dict[str, Any]:
    """{"targets": {arm id: {key: repeats to reach}}, "keys": {key: {"race": Race.as_dict() of the first look,
    "more": [arm ids], "why": one sentence, "lines": race_lines}}} — the second round of an adaptive run (nothing to run when targets
    is empty)."""
    rounds = list(settings.get("rounds") or [])
    out: dict[str, Any] = {"targets": {}, "keys": {}}
    if len(rounds) < 2:
        return out
    labels = {a["id"]: arm_label(a, list(arms)) for a in arms}
    for key in keys:
        race = look(arms, facts, key, settings)
        if race is None:
            out["keys"][key] = {"race": None, "more": [], "why": "no baseline and speculative numbers to race",
                                "lines": []}
            continue
        more = sel.next_round(race, rounds, 1)
        if race.settled:
            why = f"settled on {labels.get(race.pick, race.pick)} at the first look"
        elif not more:
            why = (f"not settled, and {rounds[-1]} repeats would not settle it at this spread: no second round "
                   f"(preferred: {labels.get(race.preferred, race.preferred)})")
        else:
            why = (f"{', '.join(labels.get(i, i) for i in more)} still in the race: up to {rounds[-1]} repeats each"
                   + (f"; out: {', '.join(labels.get(i, i) for i in race.eliminated)}" if race.eliminated else ""))
        out["keys"][key] = {"race": race.as_dict(), "more": list(more), "why": why, "lines": race_lines(race, labels)}
        for aid, n in more.items():
            out["targets"].setdefault(aid, {})[key] = n
    return out


def race_lines(race: sel.Race, labels: dict[str, str]) -> list[str]:
    """The race as the wizard and the headless log show it: one line per configuration, in preference order —
    its throughput against the best of the others (the family interval), or why it is out."""
    out = []
    for i in race.order:
        name = labels.get(i, i)
        if i in race.unmeasured:
            out.append(f"{name}: not measured")
        elif i in race.eliminated:
            r, lo, hi = race.ratio(i, race.eliminated[i])
            out.append(f"{name}: out — more than {race.delta * 100:g} % below {labels.get(race.eliminated[i])} "
                       f"({r:.2f}x [{lo:.2f}, {hi:.2f}])")
        else:
            lo, hi = race.vs_best.get(i, (0.0, math.inf))
            mark = " ★ settled" if race.pick == i else " (preferred)" if race.preferred == i else ""
            out.append(f"{name}: {lo:.2f}–{hi:.2f}x the best of the others, n = {race.n.get(i, 0)}{mark}")
    return out


def estimate_s(facts: dict[str, Any] | None, want: dict[str, int]) -> float | None:
    """Seconds a relaunch for `want` ({key: repeats to reach}) should take, from the arm's first round: its
    startup plus the mean bench duration times the repeats to add; None when the facts do not say."""
    f = facts or {}
    start = (f.get("startup") or {}).get("seconds")
    durs = [r.get("duration_s") for recs in (f.get("repeats") or {}).values() if isinstance(recs, list)
            for r in recs if isinstance(r, dict) and isinstance(r.get("duration_s"), (int, float))]
    if not isinstance(start, (int, float)) or not durs:
        return None
    have = {key: len(usable_repeats(recs)) for key, recs in (f.get("repeats") or {}).items()}
    return float(start) + sum(durs) / len(durs) * sum(max(0, n - have.get(key, 0)) for key, n in want.items())
