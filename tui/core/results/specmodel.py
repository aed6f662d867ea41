"""The speculative-decoding speedup model of Leviathan et al. 2023 ("Fast Inference from Transformers via
Speculative Decoding"), fitted to a concurrency sweep's measurements (issue 17).

With α the probability that a drafted token is accepted given the ones before it were (a chain draft), a step
with k drafted tokens yields on average E(α, k) = (1 − α^(k+1)) / (1 − α) = 1 + α + … + α^k tokens, and the
marginal acceptance of position i (0-based) is α^(i+1). If a speculative step costs 1 + k·c plain steps, the
speedup over plain decoding is E(α, k) / (1 + k·c).

- α is fitted by least squares to the measured per-position marginals of the speculative arms of one draft
  (pooled over its arms, per level and over all levels); without per-position counters, to the measured
  acceptance lengths (AL = E(α, k)).
- A speculative step's cost relative to a plain one is measured per arm and level as
  step_cost = (median TPOT × AL) / (baseline median TPOT): TPOT is time per output token, so TPOT × AL is the
  time of one speculative step. c is fitted per level by least squares of step_cost − 1 = k·c over its arms.

Fitted is not predicted: c is fitted from the same TPOT the speedup is measured with, so a row's in-sample
value ("fitted") cannot be wrong by much and says nothing about the model. The model is judged on data it was
not fitted to (held_out): leave one arm out — for each arm at each level, α is fitted to the OTHER arms' per-position
acceptance (of its draft) and c to the OTHER arms' step cost at that level, and the arm's speedup is predicted
from them; the error of those predictions against the measured speedups is the model's held-out error. Only
the held-out values and the untried k are called predictions.

vLLM's "acceptance rate" is accepted / drafted tokens = (AL − 1) / k, which falls with k by construction; it
is not the paper's α. Pure functions, standard library only; tests/test_specmodel.py checks the fit against
scipy.optimize. Units: per-position acceptance in PERCENT in the inputs, α a probability.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from tui.core.plan.arms import level_key
from tui.core.results.intervals import _numbers
from tui.core.results.stats import arm_k, arm_label

NOTE = ("vLLM's acceptance rate is accepted/draft tokens = (AL − 1)/k, not the paper's α (the chance that a "
        "drafted token is accepted given the ones before it were)")

UNTRIED_BEYOND = 2  # predict k up to the largest tried k + 2


def tokens_per_step(alpha: float, k: int) -> float:
    """E(α, k) = 1 + α + … + α^k: expected tokens per speculative step (α = 1 gives k + 1, no division)."""
    return sum(alpha ** i for i in range(k + 1))


def predicted_speedup(alpha: float, k: int, c: float) -> float | None:
    """(1 − α^(k+1)) / ((1 − α)(1 + k·c)); None where the step cost 1 + k·c is not positive."""
    cost = 1.0 + k * c
    return tokens_per_step(alpha, k) / cost if cost > 0 else None


def _minimize(f: Any, lo: float = 0.0, hi: float = 1.0, grid: int = 400) -> float:
    """The argmin of f on [lo, hi]: a grid scan (the objective need not be unimodal), then golden-section
    search on the bracket around the best grid point, to ~1e-10."""
    xs = [lo + (hi - lo) * i / grid for i in range(grid + 1)]
    vals = [f(x) for x in xs]
    i = min(range(len(xs)), key=vals.__getitem__)
    a, b = xs[max(i - 1, 0)], xs[min(i + 1, grid)]
    g = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(200):
        if b - a < 1e-12:
            break
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    best = (a + b) / 2.0
    return min((best, xs[i]), key=f)


def fit_alpha_marginals(marginals: Sequence[Sequence[Any]]) -> float | None:
    """α minimizing Σ (m_i − α^(i+1))² over every arm's per-position marginals (percent lists, position i
    0-based), α in [0, 1]. None without any marginal."""
    pts = [(i, m / 100.0) for ms in marginals for i, m in enumerate(_numbers(ms))]
    if not pts:
        return None
    return _minimize(lambda a: sum((m - a ** (i + 1)) ** 2 for i, m in pts))


def fit_alpha_lengths(lengths: Sequence[tuple[int, Any]]) -> float | None:
    """α minimizing Σ (AL − E(α, k))² over (k, measured acceptance length) pairs, α in [0, 1] (AL = E(α, k)
    solved exactly for one pair inside [1, k + 1]). None without any pair."""
    pts = [(int(k), float(al)) for k, al in lengths
           if isinstance(k, int) and k >= 1 and _numbers([al])]
    if not pts:
        return None
    return _minimize(lambda a: sum((al - tokens_per_step(a, k)) ** 2 for k, al in pts))


def fit_cost(points: Sequence[tuple[int, float]]) -> float | None:
    """c of step_cost − 1 = k·c by least squares through the origin over (k, step_cost) pairs:
    c = Σ k (s − 1) / Σ k². None without a pair."""
    pts = [(k, s) for k, s in points if k and s is not None]
    if not pts:
        return None
    return sum(k * (s - 1.0) for k, s in pts) / sum(k * k for k, _ in pts)


def _f(v: Any) -> float | None:
    nums = _numbers([v])
    return nums[0] if nums else None


def draft_group(arm: dict[str, Any]) -> tuple[Any, Any]:
    """(method, draft name or draft): the arms of one draft, whose acceptance one α describes."""
    return (arm.get("method"), arm.get("draft_name") or arm.get("draft"))


def _r(v: float | None, nd: int = 4) -> float | None:
    return None if v is None else round(v, nd)


def _alpha(cells: list[tuple[int, dict[str, Any]]]) -> tuple[float | None, str | None]:
    """(α, source) from (k, cell) pairs: the marginals where any arm has them, else the acceptance lengths."""
    margs = [((c.get("per_position") or {}).get("marginal") or []) for _, c in cells]
    margs = [m for m in margs if _numbers(m)]
    if margs:
        return fit_alpha_marginals(margs), "fitted to per-position marginals (a_i = α^(i+1), i from 0)"
    als = [(k, c.get("acceptance_length")) for k, c in cells if _f(c.get("acceptance_length")) is not None]
    if als:
        return fit_alpha_lengths(als), "fitted to acceptance lengths (AL = (1 − α^(k+1))/(1 − α)): no per-position data"
    return None, None


def step_cost(spec_tpot: Any, al: Any, base_tpot: Any) -> float | None:
    """(spec median TPOT × AL) / baseline median TPOT: one speculative step's time over one plain step's."""
    t, a, b = _f(spec_tpot), _f(al), _f(base_tpot)
    if t is None or a is None or b is None or b <= 0 or t <= 0 or a <= 0:
        return None
    return t * a / b


def _pct(v: float) -> str:
    return f"{abs(v) * 100:.0f} % {'more' if v >= 0 else 'less'}"


def _why(level: int, winner: dict[str, Any] | None, verdict: str | None, measured: list[dict[str, Any]]) -> str | None:
    """One sentence: why the winner wins at this level (vs the next smaller tried k), or why no k pays."""
    by_k = {r["k"]: r for r in measured if r.get("k") is not None}
    if not by_k:
        return None
    if verdict == "pays" and winner is not None and winner.get("k") in by_k:
        w = by_k[winner["k"]]
        if w.get("acceptance_length") is None:
            return None
        smaller = [k for k in by_k if k < w["k"] and by_k[k].get("acceptance_length") is not None]
        if smaller:
            p = by_k[max(smaller)]
            s = f"k={w['k']} adds {w['acceptance_length'] - p['acceptance_length']:.2f} accepted tokens per step"
            if w.get("step_cost") and p.get("step_cost"):
                s += f" and costs {_pct(w['step_cost'] / p['step_cost'] - 1.0)} per step than k={p['k']}"
            else:
                s += f" over k={p['k']} (no step cost: no baseline TPOT)"
        else:
            s = f"k={w['k']} yields {w['acceptance_length']:.2f} tokens per step"
            if w.get("step_cost"):
                s += f" for a step that costs {_pct(w['step_cost'] - 1.0)} than a plain one"
        bigger = [k for k in by_k if k > w["k"] and by_k[k].get("acceptance_length") is not None]
        if bigger and w.get("step_cost") and by_k[min(bigger)].get("step_cost"):
            b = by_k[min(bigger)]
            s += (f"; k={b['k']} would add {b['acceptance_length'] - w['acceptance_length']:.2f} more at "
                  f"{_pct(b['step_cost'] / w['step_cost'] - 1.0)} per step")
        return s
    # no k pays: the candidate with the best measured speedup (or the first) vs a plain step
    cands = [r for r in measured if r.get("acceptance_length") is not None]
    if not cands:
        return None
    best = max(cands, key=lambda r: (r.get("measured") or 0.0, -r["k"]))
    s = f"no k is shown to pay at {level} concurrent requests: k={best['k']} yields {best['acceptance_length']:.2f} tokens per step"
    if best.get("step_cost"):
        s += f" but a step costs {_pct(best['step_cost'] - 1.0)} than a plain one"
    return s


HELD_OUT_METHOD = ("leave one arm out: each arm's speedup at each level predicted from α fitted to the other arms' "
                   "per-position acceptance (same draft, same level; else their other levels) and c fitted to the "
                   "other arms' step cost at that level, then compared with the measured speedup")


def _held_out(row: dict[str, Any], others: list[dict[str, Any]], other_cells: list[tuple[int, dict[str, Any]]],
              cell: Any) -> dict[str, Any]:
    """The arm of `row` predicted from the others: {held_out, held_out_error} (error = predicted / measured − 1;
    None where the others cannot fit α or c: a level with one arm of this draft has nothing to predict from)."""
    none = {"held_out": None, "held_out_error": None}
    pts = [(q["k"], q["step_cost"]) for q in others if q["step_cost"] is not None]
    c = fit_cost(pts)
    same_level = [(q["k"], q["cell"]) for q in others]
    alpha = _alpha(same_level)[0] if same_level else None
    if alpha is None:
        alpha = _alpha(other_cells)[0] if other_cells else None
    if c is None or alpha is None:
        return none
    pred = predicted_speedup(alpha, row["k"], c)
    meas = _f(row.get("measured"))
    if pred is None or meas is None or meas <= 0:
        return {"held_out": _r(pred), "held_out_error": None}
    return {"held_out": _r(pred), "held_out_error": _r(pred / meas - 1.0)}


def held_out_summary(rows: list[dict[str, Any]], arms: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The model's held-out error over every row that has one: {method, n, median_abs_error, max_abs_error,
    worst {arm, level, error}, within_ci (predictions inside the measured speedup's 95 % interval), with_ci, text}."""
    errs = [r for r in rows if r.get("held_out_error") is not None]
    out: dict[str, Any] = {"method": HELD_OUT_METHOD, "n": len(errs), "median_abs_error": None,
                           "max_abs_error": None, "worst": None, "within_ci": 0, "with_ci": 0}
    if not errs:
        out["text"] = ("not judged on held-out data: no level has two or more arms of one draft with a step cost "
                       "(baseline TPOT) to predict one from the others, so the fitted values below are in-sample "
                       "only")
        return out
    abs_e = sorted(abs(r["held_out_error"]) for r in errs)
    mid = len(abs_e) // 2
    med = abs_e[mid] if len(abs_e) % 2 else (abs_e[mid - 1] + abs_e[mid]) / 2
    worst = max(errs, key=lambda r: abs(r["held_out_error"]))
    with_ci = [r for r in errs if r.get("measured_ci95")]
    inside = [r for r in with_ci if r["measured_ci95"][0] <= r["held_out"] <= r["measured_ci95"][1]]
    by_id = {a.get("id"): a for a in arms or []}
    lab = arm_label(by_id[worst["arm"]], list(arms or [])) if worst["arm"] in by_id else worst["arm"]
    out.update(median_abs_error=_r(med), max_abs_error=_r(abs(worst["held_out_error"])),
               worst={"arm": worst["arm"], "level": worst["level"], "error": worst["held_out_error"]},
               within_ci=len(inside), with_ci=len(with_ci))
    out["text"] = (f"leave one arm out (α from the other arms' per-position acceptance, c from their step cost at "
                   f"the level): median error {med * 100:.1f} % over {len(errs)} predictions, largest "
                   f"{worst['held_out_error'] * 100:+.1f} % ({lab} at {worst['level']})"
                   + (f"; {len(inside)} of {len(with_ci)} inside the measured speedup's 95 % interval" if with_ci
                      else "") + ".")
    return out


def fit(matrix: dict[str, Any], workload: str, levels: Sequence[int],
        best: dict[str, dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """The contract's MODEL for one workload of a concurrency sweep, from the matrix's cells (per-position
    marginals, acceptance length, median TPOT, the measured speedup) at each level's bench key. Each row holds the
    in-sample "fitted" speedup and the "held_out" prediction (_held_out) with its error; "held_out" of the result
    summarizes that error (held_out_summary); "untried" predicts the k no arm ran.

    best: {str(level): {"arm", "k", "verdict"}} (load.analyze's "best") for the "why" sentences. Speculative
    arms are grouped by draft (method, draft); the headline α is the group of the arm recommended at the most
    levels (else the first group), each row uses its own group's α at its level (pooled over levels where a
    level has no data). Returns None when no speculative arm has acceptance data."""
    arms = matrix.get("arms") or []
    cells = matrix.get("cells") or {}
    spec = [a for a in arms if a.get("kind") != "baseline" and isinstance(arm_k(a), int)]
    base = next((a for a in arms if a.get("kind") == "baseline"), None)
    if not spec:
        return None
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for a in spec:
        groups.setdefault(draft_group(a), []).append(a)

    def cell(aid: str, n: int) -> dict[str, Any]:
        c = (cells.get(aid) or {}).get(level_key(workload, n)) or {}
        return c if c.get("repeats") else {}

    alpha_lv: dict[tuple[Any, Any], dict[int, float | None]] = {}
    alpha_all: dict[tuple[Any, Any], tuple[float | None, str | None]] = {}
    for g, members in groups.items():
        alpha_lv[g] = {n: _alpha([(arm_k(a), cell(a["id"], n)) for a in members if cell(a["id"], n)])[0]
                       for n in levels}
        alpha_all[g] = _alpha([(arm_k(a), cell(a["id"], n)) for a in members for n in levels if cell(a["id"], n)])
    if all(v[0] is None for v in alpha_all.values()):
        return None
    wins = [((best or {}).get(str(n)) or {}).get("arm") for n in levels]
    by_id = {a["id"]: a for a in spec}
    counts = {g: sum(1 for w in wins if w in by_id and draft_group(by_id[w]) == g) for g in groups}
    head = max(groups, key=lambda g: (counts[g], alpha_all[g][0] is not None, -list(groups).index(g)))

    cost: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    untried: list[dict[str, Any]] = []
    why: dict[str, str] = {}
    for n in levels:
        base_tpot = cell(base["id"], n).get("median_tpot_ms") if base else None
        measured = []
        for a in spec:
            c = cell(a["id"], n)
            if not c:
                continue
            k = arm_k(a)
            sc = step_cost(c.get("median_tpot_ms"), c.get("acceptance_length"), base_tpot)
            measured.append({"arm": a["id"], "label": arm_label(a, arms), "k": k, "level": n, "group": draft_group(a),
                             "measured": (c.get("speedup") or {}).get("ratio"),
                             "measured_ci95": (c.get("speedup") or {}).get("ci95"), "cell": c,
                             "acceptance_length": _f(c.get("acceptance_length")), "step_cost": sc})
        cs: dict[tuple[Any, Any], float | None] = {}
        for g in groups:
            pts = [(r["k"], r["step_cost"]) for r in measured if r["group"] == g and r["step_cost"] is not None]
            cs[g] = fit_cost(pts)
            if g == head and cs[g] is not None:
                cost[str(n)] = {"c": _r(cs[g]), "base": 1.0, "arms": len(pts)}
        for r in measured:
            g = r["group"]
            alpha = alpha_lv[g].get(n)
            alpha = alpha if alpha is not None else alpha_all[g][0]
            c = cs[g]
            fitted = predicted_speedup(alpha, r["k"], c) if alpha is not None and c is not None else None
            ho = _held_out(r, [q for q in measured if q["group"] == g and q is not r],
                           [(arm_k(a), cell(a["id"], m)) for a in groups[g] if a["id"] != r["arm"]
                            for m in levels if cell(a["id"], m)], cell)
            rows.append({"arm": r["arm"], "k": r["k"], "level": n, "measured": r["measured"],
                         "measured_ci95": r["measured_ci95"], "fitted": _r(fitted), "alpha": _r(alpha),
                         "tokens_per_step": _r(tokens_per_step(alpha, r["k"])) if alpha is not None else None,
                         "acceptance_length": r["acceptance_length"], "step_cost": _r(r["step_cost"]),
                         "fitted_step_cost": _r(1.0 + r["k"] * c) if c is not None else None, **ho})
        ha = alpha_lv[head].get(n)
        ha = ha if ha is not None else alpha_all[head][0]
        tried = {r["k"] for r in measured if r["group"] == head}
        if ha is not None and cs[head] is not None and tried:
            for k in range(1, max(tried) + UNTRIED_BEYOND + 1):
                if k not in tried:
                    p = predicted_speedup(ha, k, cs[head])
                    untried.append({"k": k, "level": n, "predicted": _r(p),
                                    "tokens_per_step": _r(tokens_per_step(ha, k))})
        b = (best or {}).get(str(n)) or {}
        winner = by_id.get(b.get("arm")) if b.get("arm") in by_id else None
        w = {"k": arm_k(winner)} if winner else None
        sentence = _why(n, w, b.get("verdict"), [r for r in measured if r["group"] == (draft_group(winner) if winner else head)])
        if sentence:
            why[str(n)] = sentence
    alpha, source = alpha_all[head]
    out = {"alpha": _r(alpha), "alpha_source": source, "held_out": held_out_summary(rows, arms),
           "alpha_by_level": {str(n): _r(alpha_lv[head].get(n)) for n in levels},
           "cost": cost, "rows": rows, "untried": untried, "why": why, "note": NOTE}
    if len(groups) > 1:
        out["draft"] = {"method": head[0], "draft": head[1]}
        out["alpha_by_draft"] = [{"method": g[0], "draft": g[1], "alpha": _r(alpha_all[g][0])} for g in groups]
    return out
