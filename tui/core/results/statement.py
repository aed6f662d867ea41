"""Where an arm pays, is not proven and loses over a load sweep's levels: one statement, from the per-level
verdicts, that every text and chart takes its words and markers from (the summary, the results step's check line,
report.md / report.html's tables and both charts' markers), so they cannot disagree — whatever the pattern,
a non-monotone one (pays at 1, not proven at 2, pays at 4) included.

A level's verdict (tui/core/results/load.py level_verdict) is one of
  "pays"          the 95 % Fieller interval of the speedup over the baseline lies above 1,
  "not_proven"    it holds 1, is unbounded, or there is one repeat (no interval),
  "loses"         it lies below 1,
  "no_baseline"   the arm has numbers at that level but the baseline has none, so there is no speedup,
  "not_measured"  the arm has no numbers at that level (not run, failed, or its facts are missing).
Only the first three are judgements; the other two say why there is none.

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any, Sequence

KINDS = ("pays", "not_proven", "loses", "no_baseline", "not_measured")
JUDGED = ("pays", "not_proven", "loses")
WORDS = {"pays": "pays", "not_proven": "not proven", "loses": "loses", "no_baseline": "no baseline numbers",
         "not_measured": "not measured"}
# how the sentence words each kind: "k = 2 pays at 1 and 4, is not proven at 2, loses at 8–16, ..."
VERBS = {"pays": "pays at", "not_proven": "is not proven at", "loses": "loses at",
         "no_baseline": "has no baseline numbers at", "not_measured": "was not measured at"}
RANK = {"pays": 2, "not_proven": 1, "loses": 0}  # monotone in load: the rank never rises with the level


def _kind(v: Any) -> str:
    return v if v in KINDS else "not_measured"


def span(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}–{b}"


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def spans(levels: Sequence[int], chosen: Sequence[int]) -> list[tuple[int, int]]:
    """The chosen levels as runs of neighbours in `levels` ([1, 2, 4, 8, 16], {2, 4, 16} → [(2, 4), (16, 16)])."""
    out: list[list[int]] = []
    pick = set(chosen)
    prev_in = False
    for n in levels:
        if n in pick:
            if prev_in:
                out[-1][1] = n
            else:
                out.append([n, n])
        prev_in = n in pick
    return [(a, b) for a, b in out]


def where(levels: Sequence[int], chosen: Sequence[int]) -> str:
    """ "1 and 4", "8–16", "1, 4 and 16–32": the chosen levels in words."""
    return _join([span(a, b) for a, b in spans(levels, chosen)]) if chosen else ""


def statement(by_level: Sequence[tuple[int, Any]], label: str) -> dict[str, Any]:
    """The statement of one arm from its (level, verdict) pairs in ascending level order (a verdict outside KINDS,
    None included, is "not_measured"):

      by_level     {str(level): kind}, what a table cell shows
      levels       {kind: [levels]} for every kind
      runs         [{"verdict", "levels"}]: neighbouring levels with one verdict, in level order
      changes      [{"after", "before", "kind", "verb", "text"}]: between two neighbouring judged levels (pays /
                   not proven / loses) where paying starts or stops: kind "stops_paying" or "starts_paying", verb
                   "stops paying", "pays again" or "starts paying", text "k = 2 stops paying" — the charts'
                   markers, drawn between those two levels
      monotone     whether the judged verdicts never improve as the load rises (pays ≥ not proven ≥ loses)
      note         where they first improve ("not monotone in load: it pays at 4 but not at 2"), else ""
      range_text   "pays at 1, not proven at 2, pays at 4, loses at 8–16": the runs in level order
      text         "k = 2 pays at 1 and 4, is not proven at 2, loses at 8–16 (not monotone in load: it pays at 4
                   but not at 2)": each kind with its levels, the kinds in the order they first occur
      last_pays, first_loses   the highest paying level and the lowest losing one (None when there is none)."""
    pairs = [(int(n), _kind(v)) for n, v in by_level]
    levels = [n for n, _ in pairs]
    out_levels = {k: [n for n, v in pairs if v == k] for k in KINDS}
    runs: list[dict[str, Any]] = []
    for n, v in pairs:
        if runs and runs[-1]["verdict"] == v:
            runs[-1]["levels"].append(n)
        else:
            runs.append({"verdict": v, "levels": [n]})
    judged = [(n, v) for n, v in pairs if v in JUDGED]
    changes = []
    for (a, va), (b, vb) in zip(judged, judged[1:]):
        if (va == "pays") != (vb == "pays"):
            if va == "pays":
                kind, verb = "stops_paying", "stops paying"
            else:
                kind, verb = "starts_paying", ("pays again" if any(n < a for n in out_levels["pays"]) else
                                               "starts paying")
            changes.append({"after": a, "before": b, "kind": kind, "verb": verb, "text": f"{label} {verb}"})
    monotone = all(RANK[va] >= RANK[vb] for (_, va), (_, vb) in zip(judged, judged[1:]))
    range_text = ", ".join(f"{WORDS[r['verdict']]} at {span(r['levels'][0], r['levels'][-1])}" for r in runs)
    if not judged:
        why = where(levels, out_levels["no_baseline"])
        text = (f"{label} has no verdict at any level: " + "; ".join(
            p for p in (f"no baseline numbers at {why}" if why else "",
                        f"not measured at {where(levels, out_levels['not_measured'])}"
                        if out_levels["not_measured"] else "") if p)) if levels else f"{label} was not measured"
    elif all(v == "pays" for _, v in judged) and len(judged) == len(pairs):
        text = f"{label} pays at every measured level ({span(levels[0], levels[-1])})"
    else:
        order = list(dict.fromkeys(v for _, v in pairs))  # each kind where it first occurs, in level order
        text = f"{label} " + ", ".join(f"{VERBS[k]} {where(levels, out_levels[k])}" for k in order)
    rise = next(((a, va, b, vb) for (a, va), (b, vb) in zip(judged, judged[1:]) if RANK[vb] > RANK[va]), None)
    note = ""
    if rise is not None:
        a, va, b, vb = rise
        note = (f"not monotone in load: it pays at {b} but not at {a}" if vb == "pays" else
                f"not monotone in load: it loses at {a} but not at {b}")
        text += f" ({note})"
    return {"label": label, "by_level": {str(n): v for n, v in pairs}, "levels": out_levels, "runs": runs,
            "changes": changes, "monotone": monotone, "note": note, "range_text": range_text or "not measured",
            "text": text, "last_pays": max(out_levels["pays"], default=None), "first_loses": min(out_levels["loses"], default=None)}


def marker_positions(statement_: dict[str, Any]) -> list[tuple[float, str, str]]:
    """(x, kind, text) for each change of a statement, x the geometric mean of the two levels it lies between
    (the middle on a log axis): where a chart draws its marker."""
    return [((c["after"] * c["before"]) ** 0.5, c["kind"], c["text"]) for c in statement_.get("changes") or []]
