"""The verdict first: one compact table per report — per workload (and concurrency level of a load sweep) the
best arm, its speedup over the baseline with the 95 % interval, and the verdict — that report.md and
report.html open with, and the short headline above it (report.json's verdict text).

It reads the report dict only (report["load"]'s best per level and statements, report["matrix"]'s
recommendation and cells, or a two-arm run's runs and comparison); nothing here computes a statistic.
Pure functions, no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from tui.core.plan.arms import split_key
from tui.core.results.statement import where
from tui.core.results.stats import arm_label

COLUMNS = ("workload", "concurrency", "best", "speedup [95 % CI]", "verdict")


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def speedup_text(sp: Any) -> str:
    """ "1.28x [1.21, 1.36]", "1.16x (unbounded)", "1.19x (one run)", "—"."""
    sp = _d(sp)
    r = _num(sp.get("ratio"))
    if r is None:
        return "—"
    ci = sp.get("ci95")
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and _num(ci[0]) is not None and _num(ci[1]) is not None:
        return f"{r:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}]"
    return f"{r:.2f}x " + ("(unbounded)" if sp.get("unbounded") else "(no interval)")


def _best_spec(cells: dict[str, Any], arms: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The speculative arm with the highest mean throughput at `key` (what a non-paying level is judged by)."""
    spec = [a for a in arms if a.get("kind") != "baseline"
            and _num(_d(_d(_d(cells.get(a["id"])).get(key)).get("output_throughput")).get("mean")) is not None]
    return max(spec, key=lambda a: _d(_d(cells[a["id"]]).get(key))["output_throughput"]["mean"], default=None)


def _row(rec: dict[str, Any], cells: dict[str, Any], arms: list[dict[str, Any]], key: str) -> tuple[str, str, str]:
    """(best, speedup, verdict) of one bench key from its Step 3 recommendation."""
    v = rec.get("verdict")
    by_id = {a["id"]: a for a in arms}

    def sp(aid: str | None) -> str:
        return speedup_text(_d(_d(cells.get(aid or "")).get(key)).get("speedup"))

    sel = _d(rec.get("selection"))
    zone = f"{sel['indifference'] * 100:g} %" if _num(sel.get("indifference")) is not None else "δ"
    if v == "pays" and rec.get("arm") in by_id:
        verdict = f"pays: within {zone} of the best (settled)"
        ahead = [a for a in rec.get("ahead") or [] if a.get("arm") in by_id]
        if ahead:
            a = ahead[0]
            verdict += f"; {arm_label(by_id[a['arm']], arms)} +{a['gain'] * 100:.0f} % is within it"
        return arm_label(by_id[rec["arm"]], arms), sp(rec["arm"]), verdict
    if v == "keep_baseline":
        b = _best_spec(cells, arms, key)
        return ("baseline", (f"{arm_label(b, arms)} {sp(b['id'])}" if b else "—"),
                f"keep the baseline: no k is more than {zone} faster (settled)")
    if v == "not_proven":
        cand = rec.get("candidate")
        label = ("baseline" if cand not in by_id or by_id[cand].get("kind") == "baseline"
                 else arm_label(by_id[cand], arms))
        n_in = len(rec.get("contenders") or [])
        return (f"{label} (preferred)" if cand else "—", sp(cand) if label != "baseline" else "—",
                "not settled" + (f": {n_in} configurations still in the race" if n_in > 1 else ""))
    if v == "stop_tuning":
        return "baseline", "—", "stop tuning: acceptance below 30 %"
    if v == "no_baseline":
        return "—", "—", "no baseline numbers"
    return "—", "—", "not measured"


def verdict_rows(report: dict[str, Any]) -> list[list[str]]:
    """The table's rows (COLUMNS): a load sweep per workload and level, a tune run per workload, a two-arm run
    one row. Empty when the report has no comparison at all."""
    rep = _d(report)
    m = _d(rep.get("matrix"))
    arms = [a for a in m.get("arms") or [] if isinstance(a, dict) and a.get("id")]
    cells = _d(m.get("cells"))
    recs = _d(m.get("recommendation"))
    rows: list[list[str]] = []
    if m:
        for key in [k for k in m.get("workloads") or [] if isinstance(k, str)]:
            wl, n = split_key(key)
            best, sp, verdict = _row(_d(recs.get(key)), cells, arms, key)
            rows.append([wl, "—" if n is None else str(n), best, sp, verdict])
        return rows
    runs = _d(rep.get("runs"))
    sp = _num(_d(rep.get("comparison")).get("output_throughput_speedup"))
    if not runs.get("baseline") and not runs.get("eagle3"):
        return rows
    st = _d(rep.get("settings"))
    k = st.get("num_speculative_tokens")
    label = f"EAGLE3 k = {k}" if isinstance(k, int) else "EAGLE3"
    conc = st.get("max_concurrency")
    wl = _d(rep.get("dataset")).get("name") or "sonnet"
    if sp is None:
        rows.append([wl, str(conc or "—"), "—", "—", "not measured: " + ("the baseline" if not runs.get("baseline")
                                                                          else "EAGLE3") + " has no numbers"])
    else:
        rows.append([wl, str(conc or "—"), label if sp > 1.0 else "baseline", f"{sp:.2f}x (one run)",
                     ("faster" if sp > 1.0 else "not faster") + " in one run: no interval (a tune profile's repeats "
                     "give one)"])
    return rows


def guarantee(report: dict[str, Any]) -> str | None:
    """What Step 3's picks claim and what they do not (issue 29), from the recommendation's own settings; None
    without a matrix."""
    m = _d(_d(report).get("matrix"))
    sels = [_d(_d(r).get("selection")) for r in _d(m.get("recommendation")).values()]
    sels = [x for x in sels if _num(x.get("indifference")) is not None and _num(x.get("confidence")) is not None]
    if not sels:
        return None
    d, c = sels[0]["indifference"] * 100, sels[0]["confidence"] * 100
    looks = max(int(x.get("looks") or 1) for x in sels)
    return (f"A pick is settled only when, with {c:g} % confidence for the whole decision, it is the most preferred "
            f"configuration (the baseline, then smaller k, then the profile's own draft) within {d:g} % of the best "
            f"one measured (multiple comparisons with the best, Bonferroni form, {looks} look"
            f"{'s' if looks > 1 else ''}); \"not settled\" names the configurations still in the race. It does not "
            "cover configurations not measured, other traffic or another host.")


def headline(report: dict[str, Any]) -> str | None:
    """A short first sentence for a tune run (report.json's verdict text): per workload the pick, or for a load
    sweep the best arm per run of levels ("sonnet: k = 1 at 1–4, the baseline at 8–16"). None without a matrix."""
    rep = _d(report)
    m = _d(rep.get("matrix"))
    if not m:
        return None
    load = _d(rep.get("load"))
    parts = []
    if load.get("workloads"):
        levels = [n for n in load.get("levels") or [] if isinstance(n, int)]
        for wl, w in _d(load.get("workloads")).items():
            groups: dict[str, list[int]] = {}
            for n in levels:
                b = _d(_d(_d(w).get("best")).get(str(n)))
                v = b.get("verdict")
                lab = _d(_d(_d(w).get("arms")).get(b.get("arm") or "")).get("label")
                what = (lab if v == "pays" and lab else {"keep_baseline": "the baseline", "not_proven": "not settled",
                                                         "no_baseline": "no baseline numbers",
                                                         "stop_tuning": "stop tuning"}.get(v or "", "not measured"))
                groups.setdefault(what, []).append(n)
            parts.append(f"{wl}: " + ", ".join(f"{what} at {where(levels, ns)}" for what, ns in groups.items()))
        return "Best per concurrency level — " + "; ".join(parts) + "."
    for key, row in zip([k for k in m.get("workloads") or [] if isinstance(k, str)], verdict_rows(rep)):
        wl, _, best, sp, verdict = row
        parts.append(f"{key}: {best} {sp}" if verdict.startswith("pays") else f"{key}: {verdict}")
    return ("Recommendation — " + "; ".join(parts) + ".") if parts else None


def verdict_markdown(report: dict[str, Any]) -> str:
    """report.md's "## Verdict" table ("" without rows)."""
    rows = verdict_rows(report)
    if not rows:
        return ""
    cells = [[str(c).replace("|", "\\|") for c in r] for r in rows]
    out = ["## Verdict", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    out += ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join(out) + "\n"
