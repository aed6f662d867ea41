"""Benchmarks another client shared the server with ("contaminated": tui/core/bench/metrics.py isolation compares
the server's own /metrics counters with what the bench sent): the one rule that leaves them out of the statistics,
and how the report names them. Their numbers stay on disk (result files, state.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from tui.core.plan.arms import arms_of


def usable_repeats(repeats: Iterable[Any] | None) -> list[dict[str, Any]]:
    """The benches that count: every repeat's facts (a dict) except those marked `contaminated` (another client
    used the server during it: tui/core/bench/metrics.py isolation). The one place a bench is left out of the
    statistics; every reader of repeats (cells, the matrix, the load sweep, the schedule, the two-arm comparison)
    goes through it. The contaminated ones stay on disk and in state.json, and the report names them."""
    return [r for r in (repeats or []) if isinstance(r, dict) and not r.get("contaminated")]


def contaminated_benches(profile: Any, facts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """report.json's `contaminated`: every benchmark another client shared the server with, in run order: {arm,
    bench, repeat (None: a two-arm run's one bench), result_file, text, measured_again}. Those whose facts carry
    `contaminated` (tui/core/steps/bench.py) are the run's own numbers, left out of the statistics
    (usable_repeats); those a later measurement replaced (its facts carry `replaces_contaminated`) are named with
    the file they are kept in and `measured_again` true. All stay on disk."""
    out: list[dict[str, Any]] = []
    for arm in arms_of(profile):
        f = facts.get(arm.id) or {}
        reps = f.get("repeats")
        if isinstance(reps, dict):
            items = [(str(key), i, r) for key, rs in reps.items() if isinstance(rs, list)
                     for i, r in enumerate(rs, start=1)]
        elif isinstance(f.get("bench"), dict):
            items = [(str(f["bench"].get("workload") or "sonnet"), None, f["bench"])]
        else:
            items = []
        for key, i, r in items:
            if not isinstance(r, dict):
                continue
            old = r.get("replaces_contaminated")
            if isinstance(old, dict):
                out.append({"arm": arm.id, "bench": key, "repeat": i, "result_file": str(old.get("kept_as") or ""),
                            "text": str(old.get("text") or ""), "measured_again": True})
            c = r.get("contaminated")
            if isinstance(c, dict):
                out.append({"arm": arm.id, "bench": key, "repeat": i, "measured_again": False,
                            "result_file": Path(str(r.get("result_file") or "")).name, "text": str(c.get("text") or "")})
    return out


def contamination_markdown(items: list[dict[str, Any]]) -> str:
    """report.md's section on contaminated benchmarks ("" when there are none): self-contained, placed anywhere."""
    if not items:
        return ""
    lines = ["", "## Contaminated benchmarks", "",
             "Another client used the server during these benchmarks (the server's own /metrics counters counted work "
             "that was not theirs). Their numbers are kept in the files named here and left out of every statistic "
             "and speedup in this report; a continued run (same `--run-dir`) measures them again. Those marked "
             "\"measured again\" were: the report uses the new measurement.", ""]
    for c in items:
        rep = f" r{c['repeat']}" if c.get("repeat") else ""
        again = ", measured again" if c.get("measured_again") else ""
        lines.append(f"- {c['arm']} {c['bench']}{rep} (`{c['result_file']}`{again}): {c['text']}")
    return "\n".join(lines) + "\n"
