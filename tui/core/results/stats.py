"""Statistics for a tune run (issue 10): intervals over repeats, speedup ratios, acceptance pooling, the
lossless check per prompt, the matrix of arms × workloads and the tutorial's Step 3 recommendation.

The intervals live in tui/core/results/intervals.py and the acceptance math in tui/core/results/acceptance.py;
their names are importable from here too. Pure functions, no I/O; the standard library only (no scipy at run time: the Student t quantile is computed
here by inverting the t CDF through the regularized incomplete beta function; tests/test_stats*.py check the
functions against scipy).

Units: acceptance rates and per-position acceptance are PERCENT (0-100), as in the bench facts
(tui/core/steps/bench.py); acceptance length is tokens per draft step (1 + accepted / drafts).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Sequence

from tui.core.plan.arms import split_key
from tui.core.results.contamination import usable_repeats
from tui.core.results import selection as sel
from tui.core.versions import at_least
from tui.core.results.intervals import (  # noqa: F401  (some names re-exported for stats.*)
    _numbers, betainc, noise_floor, ratio_interval, repeats_to_settle, t_cdf, t_interval, t_quantile,
    welch_difference, welch_df,
)
from tui.core.results.acceptance import (  # noqa: F401  (some names re-exported for stats.*)
    al_check, conditional_rates, first_divergence, lossless, per_request_summary, pooled_acceptance,
    predicted_al,
)


CHAIN_METHODS = ("eagle", "eagle3")  # each draft position is conditioned on the previous one being accepted


STOP_TUNING_ACCEPTANCE = 30.0        # percent: the tutorial's "check acceptance is above ~30 % before tuning"


LATENCY_KEYS = ("median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")


def _throughputs(repeats: Sequence[dict[str, Any] | None] | None) -> list[float]:
    return _numbers(r.get("output_throughput") for r in usable_repeats(repeats))


def cell(repeats: Sequence[dict[str, Any] | None] | None, baseline_repeats: Sequence[dict[str, Any] | None] | None = None,
         probe: dict[str, Any] | None = None, baseline_probe: dict[str, Any] | None = None,
         method: str | None = "eagle3", k: int | None = None, speculative: bool = True) -> dict[str, Any]:
    """One arm on one workload (the contract's Cell). repeats: the arm's bench facts, one per repeat;
    baseline_repeats: the baseline arm's on the same workload (for the speedup); probe / baseline_probe:
    {"texts": [...], "per_request": [...]} (for the lossless check and per-request metrics). A baseline
    cell (speculative False) has no acceptance, speedup or lossless entries."""
    reps = usable_repeats(repeats)
    ti = t_interval(_throughputs(reps))
    out: dict[str, Any] = {
        "repeats": len(reps),
        "output_throughput": {"mean": ti["mean"], "sd": ti["sd"], "ci95": ti["ci95"], "values": ti["values"]},
    }
    for key in LATENCY_KEYS:
        vals = _numbers(r.get(key) for r in reps)
        out[key] = round(statistics.fmean(vals), 4) if vals else None
    out.update(acceptance_rate=None, acceptance_length=None, per_position=None, al_check=None, predicted_al=None,
               speedup=None, lossless=None, per_request=None)
    if speculative:
        pooled = pooled_acceptance(reps)
        if pooled:
            out["acceptance_rate"] = pooled["acceptance_rate"]
            out["acceptance_length"] = pooled["acceptance_length"]
            marg = pooled["per_position_acceptance"]
            if marg:
                out["per_position"] = {"marginal": marg, "conditional": conditional_rates(marg)}
                out["al_check"] = al_check(pooled["acceptance_length"], marg)
                if (method or "").lower() in CHAIN_METHODS:
                    out["predicted_al"] = predicted_al(marg, k)
        if baseline_repeats is not None:
            ri = ratio_interval(ti["values"], _throughputs(baseline_repeats))
            if ri["ratio"] is not None:
                out["speedup"] = {"ratio": ri["ratio"], "ci95": ri["ci95"], "unbounded": ri["unbounded"]}
        if probe and baseline_probe:
            out["lossless"] = lossless(baseline_probe.get("texts"), probe.get("texts"))
        if probe:
            out["per_request"] = per_request_summary(probe.get("per_request"))
    return out


def _fmt_ci(ci: Sequence[float] | None, nd: int = 1) -> str:
    return f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]" if ci else "(no interval)"


def arm_k(arm: dict[str, Any] | None) -> int | None:
    """An arm's k: its `num_speculative_tokens` as report.json's `arms` carry it (Arm.as_dict, ARM_KEYS), or,
    for a two-arm report's settings, the profile's. The one place the stats, the comparison and the panes
    read k from; None for the baseline."""
    return (arm or {}).get("num_speculative_tokens")


def arm_label(arm: dict[str, Any], arms: Sequence[dict[str, Any]]) -> str:
    """How texts name an arm: "baseline", "k = 2", or with the draft / method where the spec arms differ in
    them ("k = 2 (stevenabreu7)", "eagle k = 1")."""
    if arm.get("kind") == "baseline":
        return "baseline"
    spec = [a for a in arms if a.get("kind") != "baseline"]
    k = arm_k(arm)
    base = f"k = {k}" if k is not None else str(arm.get("title") or arm.get("id"))
    if len({a.get("method") for a in spec}) > 1 and arm.get("method"):
        base = f"{arm['method']} {base}"
    if len({a.get("draft_name") or a.get("draft") for a in spec}) > 1:
        base += f" ({arm.get('draft_name') or arm.get('draft')})"
    return base


def _r4(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def _k(arm: dict[str, Any]) -> float:
    k = arm_k(arm)
    return float(k) if isinstance(k, (int, float)) and not isinstance(k, bool) else math.inf


STOP_RULE = (f"the {STOP_TUNING_ACCEPTANCE:.0f} % \"stop tuning\" rule reads the first-position acceptance (the share "
             "of draft steps whose first drafted token is accepted), which does not fall with k; vLLM's per-token "
             "acceptance rate falls with k by construction and is not used for it")


def first_position_acceptance(c: dict[str, Any] | None, k: Any = None) -> tuple[float | None, str | None]:
    """The quantity of the 30 % rule for one cell (percent), and where it comes from: the first per-position
    marginal ("first-position acceptance"); without per-position counters, at k = 1 the acceptance rate (the
    same thing); otherwise (acceptance length − 1) · 100, the mean accepted tokens per draft step, which is
    ≥ the first-position acceptance (so it never fires the rule where the first position would not).
    (None, None) without acceptance."""
    c = c or {}
    marg = (c.get("per_position") or {}).get("marginal") or []
    if marg and isinstance(marg[0], (int, float)) and not isinstance(marg[0], bool):
        return float(marg[0]), "first-position acceptance"
    rate, al = c.get("acceptance_rate"), c.get("acceptance_length")
    if k == 1 and isinstance(rate, (int, float)) and not isinstance(rate, bool):
        return float(rate), "first-position acceptance"
    if isinstance(al, (int, float)) and not isinstance(al, bool):
        return (float(al) - 1.0) * 100.0, "accepted tokens per draft step (acceptance length − 1)"
    return None, None


def pays(speedup: dict[str, Any] | None) -> bool:
    """An arm pays only when the lower bound of its speedup interval is above 1.0x (no interval: it does not)."""
    ci = (speedup or {}).get("ci95")
    return bool(ci) and ci[0] > 1.0


def interval_coverage(repeats: int | None, seeds: Iterable[Any] | None = None, conf: float = 0.95) -> str:
    """What the intervals of a matrix cover, in one sentence (report.md, the headless table and the pane share
    it). repeats: bench runs per arm; seeds: the bench --seed of each repeat as recorded (None entries or no
    list: one seed, vLLM's default — every repeat then sends the same prompts)."""
    pct = f"{conf * 100:g} %"
    distinct = sorted({s for s in (seeds or []) if s is not None and not isinstance(s, bool)}, key=str)
    if not repeats or repeats < 2:
        return (f"One repeat per arm: no {pct} intervals, so no arm can be shown to pay; set tune.repeats to 2 "
                "or more.")
    head = (f"{pct} Student-t intervals over {repeats} repeats (the speedup's by Fieller's method on the ratio of "
            "means, Welch–Satterthwaite degrees of freedom)")
    if len(distinct) > 1:
        shown = ", ".join(str(s) for s in distinct[:8]) + (", …" if len(distinct) > 8 else "")
        return f"{head}; they cover timing noise and prompt sampling (a different --seed per repeat: {shown})."
    one = f" {distinct[0]}" if distinct else ""
    return f"{head}; they cover timing noise only (one seed{one}: every repeat sends the same prompts)."


def preference(arm: dict[str, Any], own_draft: Any = None) -> tuple[Any, ...]:
    """Step 3's order of preference (issue 29): the baseline, then smaller k, then the profile's own draft (the
    first draft of the matrix), then the arm's id. Smaller sorts first."""
    if arm.get("kind") == "baseline":
        return (0, 0.0, 0, "")
    draft = arm.get("draft_name") or arm.get("draft")
    return (1, _k(arm), 0 if own_draft is None or draft == own_draft else 1, str(arm.get("id")))


def _pct(v: float) -> str:
    return f"{v * 100:g} %"


def _race(arms: list[dict[str, Any]], tput: Any, settings: dict[str, Any] | None) -> sel.Race:
    """The race of the configurations `arms` (preference order) as the run ran it: with an adaptive run's two
    rounds, the first look decides on each configuration's first `rounds[0]` repeats and its eliminations stand;
    the second decides on all of them. A fixed matrix is one look."""
    st = settings or {}
    delta = float(st.get("indifference", sel.INDIFFERENCE))
    conf = float(st.get("confidence", sel.CONFIDENCE))
    rounds = [int(n) for n in st.get("rounds") or [] if isinstance(n, int) and not isinstance(n, bool)] or [0]
    order = [a["id"] for a in arms]
    values = {a["id"]: list(tput(a).get("values") or []) for a in arms}
    looks = len(rounds)
    configs = sum(1 for i in order if values[i])
    if looks > 1:
        first = sel.decide({i: v[:rounds[0]] for i, v in values.items()}, order, delta, conf, looks=looks,
                           configs=configs)
        if not first.settled and sel.next_round(first, rounds, 1) and any(len(v) > rounds[0] for v in values.values()):
            return sel.decide(values, order, delta, conf, looks=looks, configs=configs, eliminated=first.eliminated)
        return first
    return sel.decide(values, order, delta, conf, looks=1, configs=configs)


def recommend(arms: Sequence[dict[str, Any]], cells: dict[str, dict[str, dict[str, Any]]],
              workload: str, selection: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tutorial's Step 3 on one workload, as one decision with a stated error rate (issue 29,
    tui/core/results/selection.py): {verdict, arm, candidate, text, reason, overlap, stop_tuning, repeats_needed
    (always None: no sample-size promise is made), ahead, contenders, selection}. selection: the run's
    {indifference, confidence, rounds} ([tune]; defaults δ 5 %, 95 %, one look). verdict is one of:

    - "stop_tuning": the first-position acceptance (first_position_acceptance; not the per-token rate, which
      falls with k) is below 30 % on every measured speculative arm → "stop tuning: validate draft and target
      first", arm None.
    - "pays": settled on a speculative arm: with the stated confidence it is the most preferred configuration
      (the baseline, then smaller k, then the profile's own draft) within δ of the best configuration measured,
      and the baseline is more than δ below the best. ahead: configurations with a higher mean than the pick
      (within δ of it by the same decision).
    - "keep_baseline": settled on the baseline: it is within δ of the best configuration measured.
    - "not_proven": not settled: candidate the preferred configuration still in the race (the baseline's id
      possible), contenders all of them; the text names them.
    - "no_baseline": the baseline has no numbers on this workload, so no speedup can be computed.
    - "none": no speculative arm was measured on this workload."""
    def c(aid: str) -> dict[str, Any] | None:
        return (cells.get(aid) or {}).get(workload)

    spec = [a for a in arms if a.get("kind") != "baseline" and not a.get("schedule")
            and (c(a["id"]) or {}).get("output_throughput", {}).get("mean") is not None]
    base_arm = next((a for a in arms if a.get("kind") == "baseline"), None)
    res: dict[str, Any] = {"verdict": "none", "arm": None, "candidate": None, "text": "", "reason": "",
                           "overlap": [], "stop_tuning": False, "repeats_needed": None, "ahead": [],
                           "contenders": []}
    if not spec:
        res["text"] = f"no speculative arm was measured on {workload}: nothing to recommend"
        res["reason"] = "no speculative arm has an output throughput on this workload"
        return res

    def lab(a: dict[str, Any]) -> str:
        return arm_label(a, arms)

    def tput(a: dict[str, Any]) -> dict[str, Any]:
        return (c(a["id"]) or {}).get("output_throughput") or {}

    def sp_text(a: dict[str, Any]) -> str:
        sp = (c(a["id"]) or {}).get("speedup") or {}
        if sp.get("ratio") is None:
            return "no speedup (no baseline)"
        if sp.get("ci95"):
            return f"{sp['ratio']:.2f}x {_fmt_ci(sp['ci95'], 2)}"
        if sp.get("unbounded"):
            return f"{sp['ratio']:.2f}x (interval unbounded)"
        return f"{sp['ratio']:.2f}x (one repeat: no interval)"

    fpa = {a["id"]: first_position_acceptance(c(a["id"]), arm_k(a)) for a in spec}
    measured = [a for a in spec if fpa[a["id"]][0] is not None]
    if measured and len(measured) == len(spec) and all(fpa[a["id"]][0] < STOP_TUNING_ACCEPTANCE for a in measured):
        accs = ", ".join(f"{lab(a)}: {fpa[a['id']][0]:.1f}%" for a in measured)
        sources = sorted({fpa[a["id"]][1] for a in measured})
        res.update(verdict="stop_tuning", stop_tuning=True, text="stop tuning: validate draft and target first",
                   reason=f"{' / '.join(sources)} on {workload} is below {STOP_TUNING_ACCEPTANCE:.0f}% on every "
                          f"speculative arm ({accs}); tuning k cannot fix a draft that disagrees with the target "
                          "(wrong draft, chat template or tokenizer); the rule reads a quantity that does not "
                          "fall with k, not vLLM's per-token acceptance rate")
        return res

    if base_arm is None or tput(base_arm).get("mean") is None:
        res.update(verdict="no_baseline",
                   text=f"no baseline numbers on {workload}: no speedup can be computed, so nothing is recommended",
                   reason="the baseline arm has no output throughput on this workload (not run, failed, or its "
                          "result files are missing); a speculative arm pays only against the baseline")
        return res

    own = next((a.get("draft_name") or a.get("draft") for a in spec), None)
    configs = sorted([base_arm, *spec], key=lambda a: preference(a, own))
    by_id = {a["id"]: a for a in configs}
    race = _race(configs, tput, selection)
    res["selection"] = race.as_dict()
    delta, conf = _pct(race.delta), _pct(race.confidence)
    reasons = []
    for j, by in race.eliminated.items():
        r, lo, hi = race.ratio(j, by)
        reasons.append(f"{lab(by_id[j])} is out: more than {delta} below {lab(by_id[by])} "
                       f"({r:.2f}x [{lo:.2f}, {hi:.2f}] of it)")
    guarantee = (f"the rule: with {conf} confidence for the whole decision ({sel.METHOD}; α split over "
                 f"{race.configs - 1} comparisons with the best, both sides, and {race.looks} look"
                 f"{'s' if race.looks > 1 else ''}), a settled pick is the most preferred configuration — the "
                 f"baseline, then smaller k, then the profile's own draft — within {delta} of the best one measured; "
                 "it does not cover configurations not measured, other traffic or another host, and it assumes "
                 "repeats that vary by a common share (log-normal, one coefficient of variation)")
    if race.model == "largest":
        reasons.insert(0, f"the repeats' spreads differ between configurations (Bartlett p = {race.bartlett_p:.3g}): "
                       "the largest one's variance is used, not the pooled one")
    if race.critical is None:
        why = "one repeat each: no spread to decide with" if race.df == 0 else "only one configuration measured"
        res.update(verdict="not_proven", candidate=race.preferred,
                   contenders=list(race.contenders), overlap=[i for i in race.contenders if i != race.preferred],
                   text=f"not settled on {workload}: {why}; run tune.repeats = 2 or more",
                   reason="; ".join([*reasons, guarantee]))
        return res
    if not race.settled:
        pref = by_id[race.preferred]
        names = ", ".join(lab(by_id[i]) for i in race.contenders)
        rounds = [n for n in (selection or {}).get("rounds") or [] if isinstance(n, int)]
        top = max(race.n.values())
        if len(rounds) > 1 and top < rounds[-1]:
            more = (f"the race stopped after its first round: at this spread even tune.max_repeats = {rounds[-1]} "
                    "repeats would not settle it (a larger tune.max_repeats or tune.indifference would)")
        elif len(rounds) > 1:
            more = f"the race ran to tune.max_repeats = {rounds[-1]} repeats"
        else:
            more = (f"a fixed matrix of {top} repeats decided once; tune.adaptive = true gives the configurations "
                    "still in the race more repeats")
        res.update(verdict="not_proven", candidate=pref["id"], contenders=list(race.contenders),
                   overlap=[i for i in race.contenders if i != pref["id"]],
                   text=f"not settled on {workload}: {names} {'are' if len(race.contenders) > 1 else 'is'} still in "
                        f"the race (within {delta} of the best is not shown for the preferred one while a more "
                        f"preferred one is not shown more than {delta} below it); the preferred among them is "
                        f"{lab(pref)}" + (f" ({sp_text(pref)})" if pref is not base_arm else ""),
                   reason="; ".join([more, *reasons, guarantee]))
        return res
    pick = by_id[race.pick]
    ahead = sorted((i for i in race.contenders if i != pick["id"] and race.mean[i] > race.mean[pick["id"]]),
                   key=lambda i: -race.mean[i])
    res["ahead"] = [{"arm": i, "gain": _r4(race.ratio(i, pick["id"])[0] - 1.0),
                     "ci95": [_r4(race.ratio(i, pick["id"])[1]), _r4(race.ratio(i, pick["id"])[2])],
                     "repeats_needed": None} for i in ahead]
    res["contenders"] = list(race.contenders)
    res["overlap"] = [i for i in race.contenders if i != pick["id"]]
    lo, hi = race.vs_best[pick["id"]]
    sure = (f"with {conf} confidence it is within {delta} of the best configuration measured "
            f"(its throughput is {lo:.2f}–{hi:.2f}x the best of the others)")
    bits = [f"{lab(by_id[i])} is {(race.ratio(i, pick['id'])[0] - 1) * 100:.1f} % faster on average, within the "
            f"{delta} zone: the {'baseline' if pick is base_arm else 'smaller k'} is preferred" for i in ahead]
    if pick is base_arm:
        best = max(spec, key=lambda a: tput(a)["mean"])
        res.update(verdict="keep_baseline", arm=pick["id"], candidate=pick["id"],
                   text=f"keep the baseline on {workload}: {sure}; no arm is shown faster by more than {delta} "
                        f"(best {lab(best)}: {sp_text(best)})",
                   reason="; ".join([*reasons, *bits, guarantee]))
        return res
    pt = tput(pick)
    csp = (c(pick["id"]) or {}).get("speedup") or {}
    acc, al = (c(pick["id"]) or {}).get("acceptance_rate"), (c(pick["id"]) or {}).get("acceptance_length")
    acc_bit = []
    if isinstance(acc, (int, float)):
        fp, src = fpa[pick["id"]]
        acc_bit = [f"acceptance {acc:.1f}% per token" + (f", length {al:.2f}" if isinstance(al, (int, float)) else "")
                   + (f", first position {fp:.1f}%" if fp is not None and src == "first-position acceptance" else "")]
    res.update(verdict="pays", arm=pick["id"], candidate=pick["id"],
               text=f"{lab(pick)}: {pt['mean']:.1f} tok/s {_fmt_ci(pt.get('ci95'))}, "
                    f"{csp.get('ratio') or 0:.2f}x baseline {_fmt_ci(csp.get('ci95'), 2)}; {sure}",
               reason="; ".join(["pays: the baseline is shown more than " + delta + " below the best",
                                 *reasons, *bits, *acc_bit, guarantee]))
    return res


ARM_KEYS = ("id", "title", "kind", "method", "draft", "draft_name", "num_speculative_tokens", "schedule", "status")


LAUNCH_KEYS = ("startup_s", "cache_hits", "cache_misses", "placement", "node")  # kept when the caller gives them


def _arm_repeats(facts: dict[str, Any], workload: str, first: bool) -> list[dict[str, Any]]:
    reps = (facts.get("repeats") or {}).get(workload)
    if reps:
        return usable_repeats(reps)
    if first and not facts.get("repeats") and isinstance(facts.get("bench"), dict):
        return usable_repeats([facts["bench"]])  # a two-arm step's facts: its one bench is the first repeat
    return []


def _probe_of(facts: dict[str, Any], key: str) -> dict[str, Any] | None:
    """An arm's probe on the workload of bench key `key` (a load sweep probes each workload once, at no load)."""
    probes = facts.get("probe") or {}
    return probes.get(key) or probes.get(split_key(key)[0])


# vLLM 0.34's `vllm bench serve` stopped applying the chat template client-side on chat backends
# (vllm/benchmarks/datasets/datasets.py CHAT_TEMPLATE_BACKENDS; docs/vllm-versions.md): acceptance over chat measured
# on <= 0.33 and on >= 0.34 is not the same quantity unless the bench passed --skip-chat-template.
CHAT_TEMPLATE_CHANGED_IN = (0, 34)
CHAT_BACKENDS = ("openai-chat", "vllm-chat", "openai-responses")


def chat_template_mix(benches: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """Chat benches (their recorded command names a chat backend) measured on both sides of vLLM 0.34's chat
    template change: {"older", "newer" (the versions on each side), "skipped" (every one passed
    --skip-chat-template: the same prompts on both sides)}; None when they are all on one side."""
    sides: dict[bool, set[str]] = {False: set(), True: set()}
    cmds: list[str] = []
    for b in benches:
        cmd = str(b.get("command") or "") if isinstance(b, dict) else ""
        newer = at_least(b.get("vllm_version"), CHAT_TEMPLATE_CHANGED_IN) if isinstance(b, dict) else None
        if newer is not None and any(c in cmd for c in CHAT_BACKENDS):
            sides[newer].add(str(b.get("vllm_version")))
            cmds.append(cmd)
    if not (sides[False] and sides[True]):
        return None
    return {"older": sorted(sides[False]), "newer": sorted(sides[True]),
            "skipped": all("--skip-chat-template" in c for c in cmds)}


def chat_template_text(mix: dict[str, Any]) -> str:
    head = (f"Acceptance over chat is compared across vLLM {', '.join(mix['older'])} and {', '.join(mix['newer'])}: "
            "from 0.34 `vllm bench serve` no longer applies the chat template client-side on chat backends")
    if mix["skipped"]:
        return head + "; every chat bench here passed --skip-chat-template, so both sides sent the same prompts."
    return (head + f"; a chat bench here ran without --skip-chat-template, so on {', '.join(mix['older'])} its prompts "
                   "were templated twice: its acceptance is not the same quantity as on 0.34.")


def selection_settings(tune: Any) -> dict[str, Any]:
    """recommend's `selection` from a profile's typed [tune] (TuneSettings; None: the defaults, one look)."""
    if tune is None:
        return {"indifference": sel.INDIFFERENCE, "confidence": sel.CONFIDENCE, "rounds": []}
    return {"indifference": tune.indifference, "confidence": tune.confidence, "rounds": list(tune.rounds)}


def build_matrix(arms: Sequence[dict[str, Any]], arm_facts: dict[str, dict[str, Any] | None],
                 workloads: Sequence[str], baselines: dict[str, dict[str, Any]] | None = None,
                 selection: dict[str, Any] | None = None) -> dict[str, Any]:
    """The contract's matrix: {workloads, arms, cells: {arm: {workload: Cell}}, recommendation: {workload: ...},
    noise_floor: {workload: ...}, coverage: {workload: interval_coverage sentence}}. Each repeat's bench facts
    may carry the bench's "seed" (the coverage sentence says whether the seeds varied). Every arm gets a cell
    on every workload (an empty one, repeats 0, where it has no facts: not run yet, failed); speedups are
    against the first baseline arm's cell, or, for an arm in `baselines` (a fleet: results/fleet.py), against the
    baseline facts given there (the baseline of the node the arm ran on)."""
    arms_out = [{**{k: a.get(k) for k in ARM_KEYS}, **{k: a[k] for k in LAUNCH_KEYS if k in a}} for a in arms]
    base = next((a for a in arms_out if a.get("kind") == "baseline"), None)
    cells: dict[str, dict[str, Any]] = {}
    base_facts = (arm_facts.get(base["id"]) or {}) if base else {}
    for a in arms_out:
        facts = arm_facts.get(a["id"]) or {}
        spec = a.get("kind") != "baseline"
        cells[a["id"]] = {}
        for i, wl in enumerate(workloads):
            reps = _arm_repeats(facts, wl, i == 0)
            paired = (baselines or {}).get(a["id"]) or base_facts
            base_reps = _arm_repeats(paired, wl, i == 0) if base else None
            cells[a["id"]][wl] = cell(
                reps, baseline_repeats=base_reps if spec and base_reps else None,
                probe=_probe_of(facts, wl), baseline_probe=_probe_of(paired, wl),
                method=a.get("method"), k=arm_k(a), speculative=spec)
    rec = {wl: recommend(arms_out, cells, wl, selection) for wl in workloads}
    nf = {}
    coverage = {}
    notes: dict[str, list[str]] = {}
    for i, wl in enumerate(workloads):
        n = noise_floor(_throughputs(_arm_repeats(base_facts, wl, i == 0))) if base else {"ratio": None, "ci95": None}
        nf[wl] = {"ratio": n["ratio"], "ci95": n["ci95"]}
        per_arm = [_arm_repeats(arm_facts.get(a["id"]) or {}, wl, i == 0) for a in arms_out]
        seeds = max(([r.get("seed") for r in reps] for reps in per_arm),
                    key=lambda ss: len({s for s in ss if s is not None}), default=[])
        coverage[wl] = interval_coverage(max((len(r) for r in per_arm), default=0), seeds)
        mix = chat_template_mix(r for reps in per_arm for r in reps)  # a continued run on another vLLM
        if mix is not None:
            notes[wl] = [chat_template_text(mix)]
    return {"workloads": list(workloads), "arms": arms_out, "cells": cells, "recommendation": rec, "noise_floor": nf,
            "coverage": coverage, "notes": notes}


NA = "n/a"


DASH = "—"


def _num(v: Any, nd: int = 1, suffix: str = "") -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return NA
    return f"{v:.{nd}f}{suffix}"


def matrix_columns(matrix: dict[str, Any], width: int = 120) -> list[str]:
    """Column titles, one per arm in matrix order ("baseline", "k=1", with the draft where drafts differ, and
    "@n2" for the node of a fleet run); at width <= 80 at most 12 characters each."""
    arms = matrix.get("arms") or []
    out = []
    for a in arms:
        t = arm_label(a, arms).replace("k = ", "k=")
        node = (a.get("node") or {}).get("key")
        if node:  # a fleet run: the node the arm ran on (its speedup is against that node's baseline)
            t = f"{t[:12 - len(node) - 1] if width <= 80 else t}@{node}"
        if width <= 80 and len(t) > 12:
            t = t[:11] + "…"
        out.append(t)
    return out


def matrix_rows(matrix: dict[str, Any], workload: str, width: int = 120) -> list[tuple[str, ...]]:
    """Rows of the arms × metrics table on one workload: (label, value for each arm in matrix order).

    Output tok/s "134.2 ±3.1" (mean ± the 95 % half-width), speedup "1.19x [1.15,1.23]", TPOT median / P90 /
    P99, TTFT median / P99, acceptance %, acceptance length measured / predicted (for chain methods from the
    marginals of the arm with the same draft and the largest k, so k = 1 and 2 are checked against k = 3's
    per-position rates; otherwise 1 + Σ its own marginals), the lossless identical share. The baseline
    column's speedup interval is the baseline-vs-baseline noise floor.
    At width <= 80 the labels stay within 12 characters and the speedup interval gets its own row, so a
    baseline + 3-arm table fits 80 columns."""
    narrow = width <= 80
    arms = matrix.get("arms") or []
    cells = matrix.get("cells") or {}
    nf = (matrix.get("noise_floor") or {}).get(workload) or {}

    def cl(a: dict[str, Any]) -> dict[str, Any]:
        return (cells.get(a["id"]) or {}).get(workload) or {}

    def spec(a: dict[str, Any]) -> bool:
        return a.get("kind") != "baseline"

    def tput(a: dict[str, Any]) -> str:
        t = cl(a).get("output_throughput") or {}
        if t.get("mean") is None:
            return NA
        if t.get("ci95"):
            return f"{t['mean']:.1f} ±{(t['ci95'][1] - t['ci95'][0]) / 2:.1f}"
        return f"{t['mean']:.1f}"

    def sp_ratio(a: dict[str, Any]) -> str:
        if not spec(a):
            return "1.00x" if cl(a).get("repeats") else NA
        sp = cl(a).get("speedup")
        return f"{sp['ratio']:.2f}x" if sp and sp.get("ratio") is not None else NA

    def sp_ci(a: dict[str, Any]) -> str:
        ci = (cl(a).get("speedup") or {}).get("ci95") if spec(a) else nf.get("ci95")
        if not ci and spec(a) and (cl(a).get("speedup") or {}).get("unbounded"):
            return "unbounded"
        return f"[{ci[0]:.2f},{ci[1]:.2f}]" if ci else DASH

    def speedup(a: dict[str, Any]) -> str:
        r, ci = sp_ratio(a), sp_ci(a)
        if r == NA:
            return NA
        if not spec(a):
            return f"noise {ci}" if ci != DASH else r
        return f"{r} {ci}" if ci != DASH else r

    def acc(a: dict[str, Any]) -> str:
        return _num(cl(a).get("acceptance_rate")) if spec(a) else DASH

    def predictor(a: dict[str, Any]) -> dict[str, Any] | None:
        """The arm of the same method and draft with the largest k that predicts this arm's k."""
        k = arm_k(a)
        same = [b for b in arms if spec(b) and b.get("method") == a.get("method") and b.get("draft") == a.get("draft")
                and str(k) in (cl(b).get("predicted_al") or {})]
        return max(same, key=_k, default=None)

    def al(a: dict[str, Any]) -> str:
        if not spec(a):
            return DASH
        c = cl(a)
        meas = _num(c.get("acceptance_length"), 2)
        src = predictor(a)
        p = (cl(src).get("predicted_al") or {}).get(str(arm_k(a))) if src else None
        if p is None:
            p = (c.get("al_check") or {}).get("from_marginals")
        return f"{meas}/{_num(p, 2)}" if p is not None else meas

    def ident(a: dict[str, Any]) -> str:
        if not spec(a):
            return DASH
        ll = cl(a).get("lossless")
        if not ll:
            return NA
        share = f"{ll['identical_share'] * 100:.0f}%"
        return f"{ll['identical']}/{ll['prompts']}" if narrow else f"{ll['identical']}/{ll['prompts']} ({share})"

    def lat(key: str):
        return lambda a: _num(cl(a).get(key))

    def reps(a: dict[str, Any]) -> str:
        return str(cl(a).get("repeats") or 0)

    if narrow:
        spec_rows: list[tuple[str, Any]] = [("Speedup", sp_ratio), ("Speedup 95%", sp_ci)]
    else:
        spec_rows = [("Speedup vs baseline", speedup)]
    rows_def: list[tuple[str, Any]] = [
        ("Repeats", reps),
        ("Output tok/s" if narrow else "Output throughput (tok/s)", tput),
        *spec_rows,
        ("TPOT med ms" if narrow else "Median TPOT (ms)", lat("median_tpot_ms")),
        ("TPOT p90 ms" if narrow else "P90 TPOT (ms)", lat("p90_tpot_ms")),
        ("TPOT p99 ms" if narrow else "P99 TPOT (ms)", lat("p99_tpot_ms")),
        ("TTFT med ms" if narrow else "Median TTFT (ms)", lat("median_ttft_ms")),
        ("TTFT p99 ms" if narrow else "P99 TTFT (ms)", lat("p99_ttft_ms")),
        ("Accept %" if narrow else "Acceptance rate (%)", acc),
        ("AL meas/pred" if narrow else "Acceptance length (meas./pred.)", al),
        ("Identical" if narrow else "Lossless: identical", ident),
    ]
    if any((cl(a).get("per_request") or {}).get("n") for a in arms):
        rows_def.append(("Req. AL med" if narrow else "Per-request AL (median)",
                         lambda a: _num((cl(a).get("per_request") or {}).get("median_acceptance_length"), 2)
                         if spec(a) else DASH))
    return [(label, *(fn(a) for a in arms)) for label, fn in rows_def]


__all__ = [
    "t_cdf", "t_quantile", "betainc", "t_interval", "welch_df", "ratio_interval", "repeats_to_settle",
    "noise_floor", "first_position_acceptance", "pays", "interval_coverage", "STOP_RULE", "conditional_rates",
    "predicted_al", "al_check", "pooled_acceptance", "first_divergence", "lossless", "per_request_summary", "cell",
    "arm_label", "recommend", "build_matrix", "matrix_columns", "matrix_rows", "CHAIN_METHODS",
    "STOP_TUNING_ACCEPTANCE",
]
