"""Step `results`: baseline vs EAGLE3 side by side, the tutorial's comparison snippet, and the number rules
of the Common-issues diagnostics."""

from __future__ import annotations

import copy
import json
from typing import Any

import tomli_w

from tui.core.serverlog import diagnostics as dg
from tui.core.bench.benchparse import parse_result_json
from tui.core.events import ComparisonTable, LoadTable, MatrixTable, Snippet
from tui.core.results.contamination import usable_repeats
from tui.core.results.report import comparison, comparison_rows, load_report, run_summary, tune_matrix
from tui.core.profile.errors import ProfileError
from tui.core.profile.model import profile_from_dict
from tui.core.steps.base import FactRecorder, StepContext, StepResult
from tui.core.steps.server import synthetic_sampling
from tui.core.plan.arms import arm_by_id, arms_of, is_tune
from tui.core.results.statement import where
from tui.core.results.stats import arm_label

SNIPPET_KEYS = ("output_throughput", "median_tpot_ms", "median_ttft_ms")


def tutorial_snippet(baseline: dict[str, Any], eagle3: dict[str, Any]) -> str:
    """The tutorial's comparison script, reproduced from the two bench JSON files (same keys, same format)."""
    lines = [f"{k:20s} baseline={baseline[k]:.2f} eagle3={eagle3[k]:.2f}" for k in SNIPPET_KEYS]
    lines.append("")
    lines.append(f"EAGLE3 output throughput speedup: {eagle3['output_throughput'] / baseline['output_throughput']:.2f}x")
    return "\n".join(lines)


def _bench(ctx: StepContext, sid: str) -> dict[str, Any] | None:
    facts = ctx.shared.get(sid) or {}
    return facts.get("bench")


async def run_matrix(ctx: StepContext) -> StepResult:
    """A tune run: every arm on every workload, the intervals, the recommendation per workload (the tutorial's
    Step 3 rules, tui/core/results/stats.py recommend: an arm pays when its speedup's lower bound is above 1.0x;
    first-position acceptance < 30 % → stop tuning)."""

    fr = FactRecorder(ctx, "results")
    arms = arms_of(ctx.profile)
    missing = [a.id for a in arms if not (ctx.shared.get(a.id) or {}).get("repeats")]
    if "baseline" in missing or len(missing) == len(arms):
        fr.add("benchmarks", "missing: " + ", ".join(missing), "fail",
               "the results step compares the arms benchmarked in this run directory (the baseline first)",
               f"run the missing arms first (--steps {','.join(missing)},results with the same --run-dir)")
        return fr.result()

    statuses = {a.id: "passed" if a.id not in missing else "not run" for a in arms}
    facts = {a.id: ctx.shared.get(a.id) or {} for a in arms}
    matrix = tune_matrix(ctx.profile, facts, statuses)
    ctx.emit(MatrixTable("results", matrix))
    load = load_report(ctx.profile, facts, statuses)
    if load is not None:
        ready, why = _schedule_profile(ctx, load)
        load["schedule_profile"] = ready
        load["schedule_profile_note"] = why
        ctx.emit(LoadTable("results", load))
        _load_facts(fr, load)
    missing = [m for m in missing if not (arm_by_id(ctx.profile, m) or arms[0]).schedule]  # said by _load_facts
    if missing:
        fr.add("arms", f"{len(arms) - len(missing)} of {len(arms)} benchmarked", "warn",
               "not benchmarked: " + ", ".join(missing), f"run them with --steps {','.join(missing)},results")
    for a in arms:
        if not a.speculative or a.id in missing:
            continue
        for wl, cell in (matrix["cells"].get(a.id) or {}).items():
            if not cell:
                continue
            pp = cell.get("per_position") or {}
            for d in dg.acceptance_rules(a.id, cell.get("acceptance_rate"), cell.get("acceptance_length"),
                                         pp.get("marginal"), pair=dg.checkpoint_pair(ctx.shared.get("checkpoints"))):
                ctx.emit(d)
            lossless = cell.get("lossless") or {}
            if lossless.get("prompts") and lossless.get("identical_share", 1.0) < 1.0 and \
                    not synthetic_sampling(a.speculative):  # synthetic: not lossless by design (its smoke says so)
                firsts = [p for p in lossless.get("first_divergence") or [] if p is not None]
                fr.add(f"lossless {a.short} ({wl})", f"{lossless['identical']} of {lossless['prompts']} identical",
                       "warn", "first divergence at word " + ", ".join(str(p) for p in firsts[:8]),
                       "greedy speculative decoding should reproduce the baseline: check the draft/target pair "
                       "and dtype; small numeric drift can also diverge late in long outputs")
    failed, shorts = recommendation_facts(fr, matrix)
    res = fr.result({"matrix": matrix, **({"schedule_profile": load.get("schedule_profile"),
                                          "schedule_profile_note": load.get("schedule_profile_note")} if load else {})})
    if failed:
        res.status = "failed"
    res.summary = matrix_summary(matrix, load, fr, shorts)
    return res


def recommendation_facts(fr: FactRecorder, matrix: dict[str, Any]) -> tuple[bool, dict[str, str]]:
    """One fact per workload (or bench key) with its Step 3 recommendation: pass where an arm pays and nothing is
    left on the table, warn where the numbers cannot decide yet (not settled, no baseline numbers), fail on stop tuning or where no speculative arm was measured. (whether the step fails, {fact name: what the warning
    or failure is about in a few words})."""
    failed = False
    shorts: dict[str, str] = {}  # what a warning is about, in a few words, for the step's summary
    labels = {a.get("id"): arm_label(a, matrix.get("arms") or []) for a in matrix.get("arms") or []}
    for wl, rec in (matrix.get("recommendation") or {}).items():
        if not rec:
            continue
        status = "pass"
        v = rec.get("verdict")
        name = f"recommendation ({wl})"
        if v == "stop_tuning":
            status, failed = "fail", True
            shorts[name] = "first-position acceptance below 30 %"
        elif v in ("not_proven", "no_baseline"):
            # the run worked; its numbers cannot decide yet (the text names the configurations still in the race)
            status = "warn"
            pref = labels.get(rec.get("candidate"), rec.get("candidate"))
            shorts[name] = ("no baseline numbers" if v == "no_baseline" else
                            f"not settled ({pref} preferred)" if pref else "not settled")
        elif not rec.get("arm"):  # no speculative arm measured here
            status, failed = "fail", True
            shorts[name] = "no speculative arm measured"
        fr.add(name, rec.get("text") or "n/a", status, rec.get("reason") or "")
    return failed, shorts


WARN_NAMES_SHOWN = 4  # a summary names this many warnings, then "and N more"


def _few_words(text: str, width: int = 48) -> str:
    """The text cut at a word boundary before `width` (with "…")."""
    if len(text) <= width:
        return text
    cut = text.rfind(" ", 0, width)
    return (text[:cut].rstrip(",;:") if cut > 0 else text[:width]) + "…"


def named(facts: list[Any], word: str, shorts: dict[str, str] | None = None) -> str:
    """ "2 warnings — recommendation (sonnet@c1): k = 2 +3.8 % not proven; drift k = 1 at c8 (sonnet): acceptance
    fell…": each fact's name and what it is about in a few words, the first few."""
    names = [f"{f.name}: {(shorts or {}).get(f.name) or _few_words(f.value)}" for f in facts]
    shown = "; ".join(names[:WARN_NAMES_SHOWN]) + (f"; and {len(names) - WARN_NAMES_SHOWN} more"
                                                   if len(names) > WARN_NAMES_SHOWN else "")
    return f"{len(names)} {word}{'' if len(names) == 1 else 's'} — {shown}"


def _best_short(b: dict[str, Any]) -> str:
    v = b.get("verdict")
    return {"pays": f"k={b.get('k')}", "keep_baseline": "baseline", "not_proven": "not settled",
            "no_baseline": "no baseline numbers", "stop_tuning": "stop tuning"}.get(v or "", "not measured")


def matrix_summary(matrix: dict[str, Any], load: dict[str, Any] | None, fr: FactRecorder,
                   shorts: dict[str, str] | None = None) -> str:
    """The results step's one-line summary of a tune run: the failures and warnings by name first (a "warned" or
    "failed" status always names what it is about), then the pick per workload — for a load sweep the best k per
    level, grouped ("sonnet: k=1 at 1–4, baseline at 8–16")."""
    head = []
    if fr.failed:
        head.append(named(fr.failed, "failure", shorts))
    if fr.warned:  # the recommendations first: they are what the run decides
        head.append(named(sorted(fr.warned, key=lambda f: not f.name.startswith("recommendation")), "warning",
                          shorts))
    picks = []
    if load and load.get("workloads"):
        levels = load.get("levels") or []
        for wl, w in load["workloads"].items():
            best = w.get("best") or {}
            groups: dict[str, list[int]] = {}
            for n in levels:
                groups.setdefault(_best_short(best.get(str(n)) or {}), []).append(n)
            picks.append(f"{wl}: " + ", ".join(f"{what} at {where(levels, ns)}" for what, ns in groups.items()))
    else:
        for wl, r in (matrix.get("recommendation") or {}).items():
            if not r:
                continue
            arm = next((a for a in matrix.get("arms") or [] if a.get("id") == r.get("arm")), None)
            sp = (((matrix.get("cells") or {}).get(r.get("arm") or "") or {}).get(wl) or {}).get("speedup") or {}
            if r.get("verdict") == "pays" and arm is not None and sp.get("ratio") is not None:
                ci = sp.get("ci95")
                picks.append(f"{wl}: {arm_label(arm, matrix.get('arms') or [])} {sp['ratio']:.2f}x"
                             + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""))
            else:
                picks.append(f"{wl}: " + {"keep_baseline": "keep the baseline", "not_proven": "not settled",
                                          "no_baseline": "no baseline numbers", "stop_tuning": "stop tuning",
                                          }.get(r.get("verdict") or "", "nothing measured"))
    return " · ".join(head + ([("best — " if head else "") + "; ".join(picks)] if picks else [])) or fr.summary()


SCHEDULE_PROFILE = "schedule.toml"  # the sweep's schedule as a ready profile in the run directory


def _schedule_profile(ctx: StepContext, load: dict[str, Any]) -> tuple[str | None, str]:
    """Write the first workload's schedule as a complete, checked profile (the run's profile without [tune], with
    [speculative] num_speculative_tokens = the schedule's largest k, [speculative.extra]
    num_speculative_tokens_per_batch_size = the schedule and max_num_seqs = the largest level). (file name, "") when
    written, else (None, why not)."""
    wl, entry = next(iter((load.get("workloads") or {}).items()), (None, {}))
    sched = entry.get("schedule") or []
    if not sched or max(int(e[2]) for e in sched) <= 0:
        return None, f"no ready profile: speculation pays at no measured level{f' on {wl}' if wl else ''}"
    raw = copy.deepcopy(ctx.profile.raw)
    raw.pop("tune", None)
    raw.pop("extends", None)
    raw["name"] = f"{ctx.profile.name}-schedule"
    raw["description"] = f"{ctx.profile.name}'s measured per-batch-size k schedule on {wl} (report.md, Load)"
    sp = raw.setdefault("speculative", {})
    sp["num_speculative_tokens"] = max(int(e[2]) for e in sched)
    sp.setdefault("extra", {})["num_speculative_tokens_per_batch_size"] = [[int(x) for x in e] for e in sched]
    raw.setdefault("server", {})["max_num_seqs"] = int(sched[-1][1])
    try:
        profile_from_dict(raw, SCHEDULE_PROFILE)  # it must load as it is written
    except ProfileError as err:
        return None, f"no ready profile: {err}"
    ctx.run.write_text(SCHEDULE_PROFILE, "# Written by specdec-tui from a load sweep; run it with "
                       f"`specdec-tui --profile {SCHEDULE_PROFILE}`.\n" + tomli_w.dumps(raw))
    return SCHEDULE_PROFILE, ""


def _load_facts(fr: FactRecorder, load: dict[str, Any]) -> None:
    """A load sweep's conclusions as facts: per workload where each k pays, the best k per level, the schedule, the
    SLO, drift; then the schedule arm's verification."""
    for wl, entry in (load.get("workloads") or {}).items():
        for aid, a in (entry.get("arms") or {}).items():
            if a.get("k") is None or not a.get("range_text"):
                continue
            st = a.get("statement") or {}
            # where an arm stops paying is a finding, not a fault: only a level without numbers is a warning
            missing = (st.get("levels") or {}).get("not_measured") or (st.get("levels") or {}).get("no_baseline")
            status = "warn" if missing else "pass" if a.get("pays") else "info"
            marks = "; ".join(f"{c['verb']} between {c['after']} and {c['before']}" for c in st.get("changes") or [])
            detail = "; ".join(x for x in (marks, st.get("note") or "") if x)
            fr.add(f"load {a.get('label') or aid} ({wl})", a["range_text"], status, detail)
        best = entry.get("best") or {}
        if best:
            fr.add(f"best k per level ({wl})", ", ".join(f"{lv}: {_best_short(b)}" for lv, b in best.items()),
                   "info", "")
        if entry.get("schedule"):
            basis = (entry.get("schedule_basis") or {}).get("text") or ""
            fr.add(f"schedule ({wl})", json.dumps(entry["schedule"]), "info",
                   " ".join(x for x in (entry.get("schedule_text"), basis) if x),
                   f"ready profile: {load['schedule_profile']}" if load.get("schedule_profile") else
                   load.get("schedule_profile_note") or "")
        if entry.get("slo_text"):
            fr.add(f"SLO ({wl})", entry["slo_text"], "info", "")
        for aid, per in (entry.get("drift") or {}).items():
            for lv, d in (per or {}).items():
                if d and d.get("drift"):
                    lab = ((entry.get("arms") or {}).get(aid) or {}).get("label") or aid
                    fr.add(f"drift {lab} at c{lv} ({wl})", d.get("text") or "acceptance drifted", "warn",
                           "acceptance in the first and last thirds of the bench differ beyond their noise (95 % "
                           "Welch interval of the difference excludes 0)")
    ver = load.get("schedule_verification") or {}
    if ver:
        st = {"verified": "pass", "mixed": "warn"}.get(ver.get("status") or "", "info")
        fr.add("schedule arm", ver.get("status") or "not run", st, ver.get("text") or "")


async def run(ctx: StepContext) -> StepResult:
    if is_tune(ctx.profile):
        return await run_matrix(ctx)
    fr = FactRecorder(ctx, "results")
    b, e = _bench(ctx, "baseline"), _bench(ctx, "eagle3")
    missing = [sid for sid, v in (("baseline", b), ("eagle3", e)) if not v]
    if missing:
        fr.add("benchmarks", "missing: " + ", ".join(missing), "fail",
               "the results step compares the baseline and EAGLE3 benchmarks of this run directory",
               "run the missing steps first (e.g. --steps baseline,eagle3,results with the same --run-dir)")
        return fr.result()
    shared = [sid for sid, v in (("baseline", b), ("eagle3", e)) if not usable_repeats([v])]
    if shared:  # another client used its server during the bench: its numbers give no speedup
        fr.add("benchmarks", "contaminated: " + ", ".join(shared), "fail",
               "another client used the server during the bench (" + "; ".join(
                   str(((b if sid == "baseline" else e) or {}).get("contaminated", {}).get("text")) for sid in shared)
               + "): no speedup is computed from it", f"run {', '.join(shared)} again (--steps {','.join(shared)},results)")
        return fr.result()
    runs = {"baseline": run_summary(b, False), "eagle3": run_summary(e, True)}
    comp = comparison(runs)
    rows = comparison_rows({"runs": runs})
    notes = ["ITL is measured per streamed chunk: under EAGLE3 a chunk carries several tokens, so compare the runs "
             "by TPOT and output throughput."]
    ctx.emit(ComparisonTable("results", tuple(tuple(r) for r in rows), comp, tuple(notes), runs))

    # The tutorial's own snippet, from the two JSON files exactly as bench wrote them.
    snippet = None
    try:
        bj = parse_result_json(ctx.run.file("baseline.json")).raw
        ej = parse_result_json(ctx.run.file("eagle3.json")).raw
        snippet = tutorial_snippet(bj, ej)
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as exc:
        fr.add("tutorial snippet", "unavailable", "warn", f"cannot read baseline.json / eagle3.json: {exc}")
    if snippet is not None:
        ctx.run.write_text("comparison.txt", snippet + "\n")
        ctx.emit(Snippet("results", snippet))

    speedup = comp.get("output_throughput_speedup")
    diags = []
    diags += dg.acceptance_rules("results", e.get("acceptance_rate"), e.get("acceptance_length"),
                                 e.get("per_position_acceptance"),
                                 pair=dg.checkpoint_pair(ctx.shared.get("checkpoints")))
    diags += dg.throughput_rule("results", b, e, k=ctx.profile.speculative.num_speculative_tokens)
    for d in diags:
        ctx.emit(d)

    if speedup is not None:
        fr.add("output throughput speedup", f"{speedup:.2f}x", "pass" if speedup > 1.0 else "fail",
               f"baseline {b['output_throughput']:.2f} → EAGLE3 {e['output_throughput']:.2f} tok/s")
    tpot_ratio = comp.get("median_tpot_ratio")
    if tpot_ratio is not None:
        fr.add("median TPOT", f"{b['median_tpot_ms']:.2f} → {e['median_tpot_ms']:.2f} ms",
               "pass" if tpot_ratio < 1.0 else "warn", f"ratio {tpot_ratio:.2f}")
    if e.get("acceptance_rate") is not None:
        ar = e["acceptance_rate"]
        status = "fail" if ar < 5 else ("warn" if ar < 30 else "pass")
        fr.add("acceptance rate", f"{ar:.2f}%", status,
               f"acceptance length {e.get('acceptance_length') or 0:.2f} (source: {e.get('acceptance_source')})")
    else:
        fr.add("acceptance rate", "unknown", "warn", "no spec-decode counters were found on /metrics")
    errors = [d for d in diags if d.severity == "error"]
    res = fr.result({"comparison": comp})
    if errors and res.status != "failed":
        res.status = "failed"
    if speedup is not None:
        res.summary = (f"EAGLE3 output throughput speedup {speedup:.2f}x"
                       + (f", acceptance {e['acceptance_rate']:.1f}%" if e.get("acceptance_rate") is not None else "")
                       + (f"; {len(diags)} {'diagnosis' if len(diags) == 1 else 'diagnoses'}" if diags else ""))
    return res
