"""A load sweep's analysis (tui/core/results/load.py, report.json's "load") in words: report.md's section "Load:
where speculation stops paying" and the compact plain-text panel of the headless front end. Where an arm pays,
is not proven or loses is read from its statement (tui/core/results/statement.py) — the same words the results
step's check line and the charts' markers use. Pure functions, no I/O.
"""

from __future__ import annotations

import json
import math
import textwrap
from typing import Any

from tui.core.results.statement import WORDS

SHORT = {"pays": "P", "not_proven": "?", "loses": "L", "no_baseline": "B", "not_measured": "-", None: " "}
SLO_MARKS = {"meets": "meets", "misses": "misses", "not_measured": "not measured", "no_goodput": "no goodput",
             None: ""}


def _n(v: Any, nd: int = 2, suffix: str = "") -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return "n/a"
    return f"{v:.{nd}f}{suffix}"


def _ci(ci: Any, nd: int = 2) -> str:
    return f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]" if ci else ""


def kind_at(arm: dict[str, Any], n: Any) -> str | None:
    """An arm's verdict at level n as its statement says it (None for the baseline)."""
    st = arm.get("statement") or {}
    return (st.get("by_level") or {}).get(str(n)) if st else None


def _speedup_md(lv: dict[str, Any], kind: str | None) -> str:
    if kind in ("not_measured", "no_baseline"):
        return WORDS[kind]
    sp = (lv or {}).get("speedup")
    if not sp or sp.get("ratio") is None:
        return f"no speedup ({WORDS.get(kind or '', '')})"
    if sp.get("ci95"):
        iv = _ci(sp["ci95"])
    elif sp.get("unbounded"):
        iv = "(unbounded)"
    else:
        iv = "(no interval)"
    return f"{sp['ratio']:.2f}x {iv} {WORDS.get(kind or '', '')}".strip()


def best_words(b: dict[str, Any], arms: dict[str, Any]) -> str:
    v = b.get("verdict")
    if v == "pays":
        return f"{arms.get(b['arm'], {}).get('label', b['arm'])} (pays)"
    if v == "keep_baseline":
        return "baseline (no k beats it)"
    if v == "not_proven":
        return f"not proven (candidate {b.get('candidate_label') or b.get('candidate')})"
    if v == "stop_tuning":
        return "stop tuning: validate draft and target first"
    if v == "no_baseline":
        return "no baseline numbers"
    return "not measured"


def _model_markdown(m: dict[str, Any], arms: dict[str, Any]) -> list[str]:
    ho = m.get("held_out") or {}
    out = ["**Model** (Leviathan et al. 2023: speedup = (1 − α^(k+1)) / ((1 − α)(1 + k·c))): "
           f"α = {_n(m.get('alpha'), 3)}, {m.get('alpha_source')}; c per level from the measured step cost (median "
           f"TPOT × acceptance length over the baseline's median TPOT). Note: {m.get('note')}.", "",
           f"**Held-out error** (the model judged on data it was not fitted to): {ho.get('text') or 'n/a'} The "
           "\"fitted\" column is in-sample (c is fitted to these very arms' TPOT) and is not a prediction.", "",
           "| arm | concurrency | measured [95 %] | held out (error) | fitted, in-sample | tokens/step (model) | "
           "AL (measured) | step cost |", "|---|---|---|---|---|---|---|---|"]
    for r in m.get("rows") or []:
        lab = arms.get(r["arm"], {}).get("label", r["arm"])
        err = r.get("held_out_error")
        held = (f"{_n(r.get('held_out'))}x ({err * 100:+.1f} %)" if err is not None else
                f"{_n(r.get('held_out'))}x" if r.get("held_out") is not None else "—")
        out.append(f"| {lab} | {r['level']} | {_n(r.get('measured'))}x {_ci(r.get('measured_ci95'))} | {held} | "
                   f"{_n(r.get('fitted'))}x | {_n(r.get('tokens_per_step'))} | {_n(r.get('acceptance_length'))} | "
                   f"{_n(r.get('step_cost'))} |")
    if m.get("untried"):
        out += ["", "Predicted for k not tried (extrapolated from the fit; the held-out error above is the model's "
                "track record): " + "; ".join(f"k={u['k']} at {u['level']}: {_n(u.get('predicted'))}x"
                                             for u in m["untried"]) + "."]
    if m.get("why"):
        out += ["", "Why:", ""] + [f"- at {n}: {s}" for n, s in m["why"].items()]
    out.append("")
    return out


def _slo_markdown(load: dict[str, Any], w: dict[str, Any], arms: dict[str, Any], levels: list[Any]) -> list[str]:
    slo = load["slo"]
    bits = ", ".join(f"{k.replace('_ms', '').upper()} ≤ {v:g} ms" for k, v in slo.items())
    att = load.get("attainment", 0.9)
    out = [f"**SLO** ({bits}; a level meets it when at least {att * 100:g} % of the requests meet every SLO; a "
           f"level without numbers is not measured, never a miss): {w.get('slo_text') or 'n/a'}.", "",
           "| concurrency | " + " | ".join(a["label"] for a in arms.values()) + " |", "|" + "---|" * (len(arms) + 1)]
    for n in levels:
        cells = []
        for a in arms.values():
            lv = a["levels"][str(n)]
            g = lv.get("goodput")
            mark = SLO_MARKS.get(lv.get("slo_status"), "")
            cells.append(f"{_n(g['mean'])} req/s {_ci(g.get('ci95'))} {mark}".replace("  ", " ").strip()
                         if g else mark or "—")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    out.append("")
    return out


def load_markdown(load: dict[str, Any] | None) -> str:
    """The report.md section "## Load: where speculation stops paying" ("" without a load analysis)."""
    if not load:
        return ""
    levels = load.get("levels") or []
    out = ["## Load: where speculation stops paying", ""]
    out.append(f"Concurrency levels: {', '.join(str(n) for n in levels)}. A level pays when the speedup's 95 % "
               "interval lies above 1.0x, loses when it lies below, and is not proven otherwise; a level without "
               "the arm's numbers is not measured, one without the baseline's has no speedup. "
               f"{load.get('coverage') or ''}".rstrip())
    out.append("")
    for wl, w in (load.get("workloads") or {}).items():
        arms = w.get("arms") or {}
        spec = [aid for aid, a in arms.items() if a.get("k") is not None]
        base = next((aid for aid, a in arms.items() if a.get("k") is None), None)
        out += [f"### {wl}", ""]
        head = ["concurrency"] + ([f"{arms[base]['label']} tok/s"] if base else []) + [arms[a]["label"] for a in spec] + ["best"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for n in levels:
            row = [str(n)]
            if base:
                t = arms[base]["levels"][str(n)]["throughput"]
                row.append(f"{_n(t.get('mean'), 1)} {_ci(t.get('ci95'), 1)}".strip() if t.get("mean") is not None
                           else "not measured")
            row += [_speedup_md(arms[a]["levels"][str(n)], kind_at(arms[a], n)) for a in spec]
            row.append(best_words((w.get("best") or {}).get(str(n)) or {}, arms))
            out.append("| " + " | ".join(row) + " |")
        out += ["", "**Where each k pays** (the table's verdicts in one sentence per arm; the charts mark where "
                "paying stops or starts):", ""]
        for a in spec:
            st = arms[a].get("statement") or {}
            marks = "; ".join(f"{c['text']} between {c['after']} and {c['before']}" for c in st.get("changes") or [])
            out.append(f"- {st.get('text') or arms[a].get('range_text')}" + (f" — {marks}" if marks else ""))
        out += ["", "**Best k per level.**", ""]
        for n in levels:
            b = (w.get("best") or {}).get(str(n)) or {}
            out.append(f"- {n}: {best_words(b, arms)}" + (f" — {b['text']}" if b.get("text") else ""))
        basis = w.get("schedule_basis") or {}
        out += ["", "**Schedule** (vLLM's `num_speculative_tokens_per_batch_size`, `[start, end, k]`, inclusive "
                "batch-size ranges; k = 0 is no speculation):", "",
                "```json", json.dumps(w.get("schedule")), "```", "", w.get("schedule_text") or "", ""]
        if basis.get("text"):
            out += [basis["text"], ""]
        if w.get("schedule_draft"):
            sd = w["schedule_draft"]
            out += [f"The schedule uses one draft ({sd.get('method')} {sd.get('draft')}): vLLM runs one draft per "
                    "server.", ""]
        if load.get("slo"):
            out += _slo_markdown(load, w, arms, levels)
        dr = w.get("drift") or {}
        flagged = [(aid, n, d) for aid, per in dr.items() for n, d in per.items() if d.get("drift")]
        out.append("**Acceptance over time** (per-window acceptance of the full windows, first vs last third of each "
                   "bench, Welch's t):")
        out.append("")
        if not dr:
            out.append("- no bench had enough full sampled windows to test for drift (3 or more per third)")
        elif not flagged:
            out.append(f"- no drift: every tested bench ({sum(len(p) for p in dr.values())}) kept its acceptance "
                       "within the window-to-window noise")
        for aid, n, d in flagged:
            out.append(f"- {arms.get(aid, {}).get('label', aid)} at {n}: {d['text']} (difference {d['diff']:+.1f} "
                       f"points, 95 % CI {_ci(d['ci95'], 1)}, p = {d['p_value']:.3g}, {d['windows']} windows)")
        out.append("")
        if w.get("model"):
            out += _model_markdown(w["model"], arms)
    sv = load.get("schedule_verification")
    if sv:
        out += [f"**Schedule verification** ({sv.get('status')}): {sv.get('text') or ''}", ""]
    if load.get("schedule_profile"):
        out += [f"A ready profile that serves the schedule: `{load['schedule_profile']}`.", ""]
    return "\n".join(out).rstrip() + "\n"


def _wrap(s: str, width: int, indent: str = "  ") -> list[str]:
    """Wrapped at word boundaries (a word longer than the line is broken, nothing else)."""
    return textwrap.wrap(s, width=max(width, 20), initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False) or [indent]


def load_lines(load: dict[str, Any] | None, width: int = 80) -> list[str]:
    """A compact plain-text summary of the load analysis for the headless front end, each line ≤ width
    columns: per workload a level × arm speedup table (P pays, ? not proven, L loses, B no baseline numbers,
    - not measured), where each arm pays (its statement's range_text), the schedule, the SLO line, drift flags,
    the model's held-out error and why sentences."""
    if not load:
        return []
    levels = load.get("levels") or []
    lines = [f"Load sweep: concurrency {', '.join(str(n) for n in levels)}"]
    lines += _wrap("speedup: P pays (95 % CI above 1x), ? not proven, L loses (below 1x), B no baseline numbers, "
                   "- not measured", width)
    for wl, w in (load.get("workloads") or {}).items():
        arms = w.get("arms") or {}
        spec = [aid for aid, a in arms.items() if a.get("k") is not None]
        lines.append(f"{wl}:")
        cols = [arms[a]["label"].replace("k = ", "k=")[:8] for a in spec]
        lines.append("  " + f"{'conc':>5} " + "".join(f"{c:>9}" for c in cols) + "  best")
        for n in levels:
            vals = []
            for a in spec:
                sp = arms[a]["levels"][str(n)].get("speedup") or {}
                vals.append(f"{_n(sp.get('ratio')) + 'x' if sp.get('ratio') is not None else '—'} "
                            f"{SHORT.get(kind_at(arms[a], n), ' ')}")
            b = (w.get("best") or {}).get(str(n)) or {}
            bt = {"pays": f"k={b.get('k')}", "keep_baseline": "baseline", "not_proven": "not settled",
                  "stop_tuning": "stop tuning", "no_baseline": "no baseline"}.get(b.get("verdict"), "not measured")
            lines.append("  " + f"{n:>5} " + "".join(f"{v:>9}" for v in vals) + f"  {bt}")
        for a in spec:
            lines += _wrap(f"{arms[a]['label']}: {arms[a].get('range_text')}", width)
        lines += _wrap(f"schedule {json.dumps(w.get('schedule'))}: {w.get('schedule_text')}", width)
        if w.get("slo_text"):
            lines += _wrap(f"SLO: {w['slo_text']}", width)
        for aid, per in (w.get("drift") or {}).items():
            for n, d in per.items():
                if d.get("drift"):
                    lines += _wrap(f"drift {arms.get(aid, {}).get('label', aid)} at {n}: {d['text']}", width)
        m = w.get("model")
        if m and m.get("alpha") is not None:
            ho = m.get("held_out") or {}
            held = (f"held-out error {ho['median_abs_error'] * 100:.1f} % median over {ho['n']} predictions"
                    if ho.get("median_abs_error") is not None else "not judged on held-out data")
            lines += _wrap(f"model: α {m['alpha']:.3f} "
                           f"({'per-position' if 'marginal' in (m.get('alpha_source') or '') else 'from AL'}), {held}"
                           + "".join(f"; at {n}: {s}" for n, s in list((m.get("why") or {}).items())[:2]), width)
    return [s if len(s) <= width else s[: max(width - 1, 0)] + "…" for s in lines]
