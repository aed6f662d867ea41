"""Statistics for a tune run (issue 10): intervals over repeats, speedup ratios, acceptance pooling, the
lossless check per prompt, the matrix of arms × workloads and the tutorial's Step 3 recommendation.

Pure functions, no I/O; the standard library only (no scipy at run time: the Student t quantile is computed
here by inverting the t CDF through the regularized incomplete beta function; tests/test_stats.py checks the
functions against scipy).

Units: acceptance rates and per-position acceptance are PERCENT (0-100), as in the bench facts
(tui/core/steps/bench.py); acceptance length is tokens per draft step (1 + accepted / drafts).
"""

from __future__ import annotations

import math
import re
import statistics
from functools import lru_cache
from typing import Any, Iterable, Sequence

CHAIN_METHODS = ("eagle", "eagle3")  # each draft position is conditioned on the previous one being accepted
STOP_TUNING_ACCEPTANCE = 30.0        # percent: the tutorial's "check acceptance is above ~30 % before tuning"
LATENCY_KEYS = ("median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")


# -- Student t ------------------------------------------------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < tiny:
        d = tiny
    d = 1.0 / d
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b), a, b > 0, 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom (df > 0, need not be an integer)."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if t == 0:
        return 0.5
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@lru_cache(maxsize=512)
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with df degrees of freedom: the t with t_cdf(t, df) = p.

    Closed forms for df = 1 and 2; otherwise bisection on the CDF (monotone, so it always converges) to
    ~1e-12 relative. t_quantile(0.975, 2) = 4.3027, t_quantile(0.975, 4) = 2.7764."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    lo, hi = 0.0, 2.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


# -- intervals ------------------------------------------------------------------------------------------------

def _numbers(values: Iterable[Any] | None) -> list[float]:
    out: list[float] = []
    for v in (() if values is None else values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        f = float(v)
        if math.isfinite(f):
            out.append(f)
    return out


def _r(v: float | None, nd: int = 6) -> float | None:
    return None if v is None else round(v, nd)


def t_interval(values: Iterable[Any], conf: float = 0.95) -> dict[str, Any]:
    """Mean with a two-sided Student t interval: mean ± t_{(1+conf)/2, n-1} · sd / √n.

    Non-numbers (None, NaN) are dropped. Returns {mean, sd, ci95: [lo, hi] | None, values, n}; n < 2 gives
    sd None and ci95 None (n = 0 also mean None). The key is "ci95" whatever conf is (the contract's name)."""
    vals = _numbers(values)
    n = len(vals)
    if n == 0:
        return {"mean": None, "sd": None, "ci95": None, "values": [], "n": 0}
    mean = statistics.fmean(vals)
    if n < 2:
        return {"mean": _r(mean), "sd": None, "ci95": None, "values": vals, "n": n}
    sd = statistics.stdev(vals)
    half = t_quantile((1.0 + conf) / 2.0, n - 1) * sd / math.sqrt(n)
    return {"mean": _r(mean), "sd": _r(sd), "ci95": [_r(mean - half), _r(mean + half)], "values": vals, "n": n}


def _mean_var(vals: list[float]) -> tuple[float, float]:
    """(mean, variance of the mean)."""
    return statistics.fmean(vals), statistics.variance(vals) / len(vals)


def welch_df(var_means: Sequence[float], ns: Sequence[int]) -> float | None:
    """Welch–Satterthwaite degrees of freedom of a sum of independent variances of means v_i (each from n_i
    values): (Σ v_i)² / Σ (v_i² / (n_i − 1)). None when every v_i is 0 (no spread: the sum is exact) or an
    n_i < 2."""
    if any(n < 2 for n in ns):
        return None
    den = sum(v * v / (n - 1) for v, n in zip(var_means, ns))
    if den == 0:
        return None
    return sum(var_means) ** 2 / den


def ratio_interval(num_values: Iterable[Any], den_values: Iterable[Any], conf: float = 0.95) -> dict[str, Any]:
    """Interval on mean(num) / mean(den) for two independent samples (e.g. arm vs baseline throughput).

    Fieller's method: with x̄, ȳ the means and v_x = s_x²/n_x, v_y = s_y²/n_y the variances of the means
    (covariance 0: independent samples), the confidence set is the ρ with (x̄ − ρȳ)² ≤ t² (v_x + ρ² v_y),
    i.e. a ρ² − 2 x̄ ȳ ρ + c ≤ 0 with a = ȳ² − t² v_y and c = x̄² − t² v_x.

    One degrees-of-freedom rule for everything: t is the Student quantile at the Welch–Satterthwaite degrees
    of freedom of x̄ − ρ̂ȳ at ρ̂ = x̄/ȳ, df = (v_x + ρ̂² v_y)² / (v_x² / (n_x − 1) + ρ̂⁴ v_y² / (n_y − 1)), and
    the same t decides whether the set is bounded: it is a bounded interval exactly when a > 0 (ȳ is
    significantly non-zero at that t; then the discriminant t² (x̄² v_y + a v_x) is positive too). Otherwise
    the set is unbounded (two half-lines or the whole line) and is reported as such — no finite stand-in.

    Returns {ratio, ci95: [lo, hi] | None, method, unbounded, df}: ratio None when a sample is empty or
    mean(den) is 0; ci95 None when a sample has n < 2 (method None: no interval, one repeat) or the set is
    unbounded (method "fieller", unbounded True); df None where no quantile was needed."""
    xs, ys = _numbers(num_values), _numbers(den_values)
    out: dict[str, Any] = {"ratio": None, "ci95": None, "method": None, "unbounded": False, "df": None}
    if not xs or not ys:
        return out
    xm, ym = statistics.fmean(xs), statistics.fmean(ys)
    if ym == 0:
        return out
    ratio = xm / ym
    out["ratio"] = _r(ratio)
    if len(xs) < 2 or len(ys) < 2:
        return out
    _, vx = _mean_var(xs)
    _, vy = _mean_var(ys)
    df = welch_df([vx, ratio * ratio * vy], [len(xs), len(ys)])
    if df is None:  # both samples constant: the ratio is exact
        out.update(ci95=[_r(ratio), _r(ratio)], method="fieller")
        return out
    t = t_quantile((1.0 + conf) / 2.0, df)
    a = ym * ym - t * t * vy
    b = xm * ym
    c = xm * xm - t * t * vx
    out.update(method="fieller", df=_r(df))
    if a > 0:
        root = math.sqrt(max(b * b - a * c, 0.0))
        out["ci95"] = [_r((b - root) / a), _r((b + root) / a)]
    else:
        out["unbounded"] = True
    return out


def repeats_to_settle(num_values: Iterable[Any], den_values: Iterable[Any], conf: float = 0.95,
                      power: float = 0.8, cap: int = 100) -> int | None:
    """How many repeats of each (arm and baseline) would likely show a speedup above 1.0x, from the observed
    spread: the smallest n with (t_{(1+conf)/2, df} + t_{power, df}) · √((s_x² + ρ̂² s_y²) / n) / ȳ ≤ ρ̂ − 1,
    df the Welch–Satterthwaite degrees of freedom at n per sample (the rule of ratio_interval). That is the
    usual sample size for the interval's lower bound to clear 1.0x with probability `power` if the true
    means and spreads are the observed ones (normal approximation of the ratio, as in the delta method).

    None when it cannot be sized (n < 2 in a sample: no spread observed; ratio ≤ 1: nothing to prove) or
    needs more than cap repeats."""
    xs, ys = _numbers(num_values), _numbers(den_values)
    if len(xs) < 2 or len(ys) < 2:
        return None
    xm, ym = statistics.fmean(xs), statistics.fmean(ys)
    if ym <= 0:
        return None
    ratio = xm / ym
    if ratio <= 1.0:
        return None
    sx2, sy2 = statistics.variance(xs), statistics.variance(ys) * ratio * ratio
    if sx2 + sy2 == 0:
        return 2
    for n in range(2, cap + 1):
        df = welch_df([sx2 / n, sy2 / n], [n, n])
        se = math.sqrt((sx2 + sy2) / n) / ym
        if (t_quantile((1.0 + conf) / 2.0, df) + t_quantile(power, df)) * se <= ratio - 1.0:
            return n
    return None


def noise_floor(baseline_values: Iterable[Any], conf: float = 0.95) -> dict[str, Any]:
    """Baseline vs baseline: how large a "speedup" the repeat-to-repeat noise alone produces.

    Choice: leave-one-out. Each repeat is divided by the mean of the other repeats, r_i = x_i / mean(x_j, j≠i),
    and the result is the mean of the r_i with a t interval over them (df n − 1). This works from n = 2
    (splitting into halves would leave n = 1 per half, hence no interval, at the default 3 repeats). The r_i
    are not independent (they share values), so the interval is an indication of the noise, not a test; a
    speedup inside it is indistinguishable from running the baseline again.

    Returns {ratio, ci95: [lo, hi] | None, n}; n < 2 (or a zero mean among the others) gives ratio None."""
    vals = _numbers(baseline_values)
    n = len(vals)
    if n < 2:
        return {"ratio": None, "ci95": None, "n": n}
    total = sum(vals)
    ratios = []
    for v in vals:
        others = (total - v) / (n - 1)
        if others == 0:
            return {"ratio": None, "ci95": None, "n": n}
        ratios.append(v / others)
    ti = t_interval(ratios, conf)
    return {"ratio": ti["mean"], "ci95": ti["ci95"], "n": n}


# -- acceptance -----------------------------------------------------------------------------------------------

def conditional_rates(marginals: Sequence[Any] | None) -> list[float | None]:
    """Per-position conditional acceptance from the marginals (percent): c_0 = a_0, c_i = a_i / a_{i−1} · 100.

    For chain methods a_i is P(positions 0..i all accepted), so c_i is P(position i accepted | position i−1
    was). None where a_{i−1} is 0 (or a marginal is missing)."""
    ms = list(marginals or [])
    out: list[float | None] = []
    for i, a in enumerate(ms):
        if not isinstance(a, (int, float)) or isinstance(a, bool):
            out.append(None)
            continue
        if i == 0:
            out.append(_r(float(a), 4))
            continue
        prev = ms[i - 1]
        if not isinstance(prev, (int, float)) or isinstance(prev, bool) or prev == 0:
            out.append(None)
        else:
            out.append(_r(float(a) / float(prev) * 100.0, 4))
    return out


def predicted_al(marginals: Sequence[Any] | None, k: int | None = None) -> dict[str, float] | None:
    """Acceptance length predicted for every k' ≤ k from the marginals (percent) measured at k:
    AL(k') = 1 + Σ_{i<k'} a_i / 100, as {"1": 1 + a_0, "2": 1 + a_0 + a_1, ...}. For chain methods the
    acceptance at position i does not depend on positions after it, so the marginals measured with k drafts
    predict a run with k' < k. k None: every measured position. None without marginals."""
    ms = _numbers(marginals)
    if not ms or len(ms) != len(list(marginals or [])):
        return None
    upto = len(ms) if k is None else min(int(k), len(ms))
    if upto < 1:
        return None
    out: dict[str, float] = {}
    acc = 1.0
    for i in range(upto):
        acc += ms[i] / 100.0
        out[str(i + 1)] = round(acc, 4)
    return out


def al_check(measured_al: Any, marginals: Sequence[Any] | None, tol: float = 0.02) -> dict[str, Any] | None:
    """Consistency check AL = 1 + Σ marginals: {measured, from_marginals, consistent} with consistent when
    |measured − from_marginals| ≤ tol · from_marginals (relative). None without both inputs."""
    ms = _numbers(marginals)
    if not isinstance(measured_al, (int, float)) or isinstance(measured_al, bool) or not ms:
        return None
    from_m = 1.0 + sum(ms) / 100.0
    return {"measured": _r(float(measured_al), 4), "from_marginals": round(from_m, 4),
            "consistent": abs(float(measured_al) - from_m) <= tol * from_m}


def _count(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def pooled_acceptance(repeats: Sequence[dict[str, Any] | None] | None) -> dict[str, Any] | None:
    """Acceptance pooled over repeats: {acceptance_rate (%), acceptance_length, per_position_acceptance (%),
    method: "tokens" | "mean", repeats: n used}.

    Token-weighted from the counters when every repeat with acceptance carries num_drafts, draft_tokens and
    accepted_tokens: rate = Σ accepted / Σ draft_tokens · 100, length = 1 + Σ accepted / Σ num_drafts,
    per position p_i = Σ_r p_{r,i} · num_drafts_r / Σ_r num_drafts_r (each repeat's p is accepted_i / drafts).
    Otherwise ("mean") the plain mean of the repeats' own figures; per position over the positions every
    repeat has. Repeats without acceptance are left out; None when none has any."""
    reps = [r for r in (repeats or []) if isinstance(r, dict)
            and (isinstance(r.get("acceptance_rate"), (int, float)) or _count(r.get("draft_tokens")))]
    if not reps:
        return None
    counted = all(_count(r.get("num_drafts")) and _count(r.get("draft_tokens")) is not None
                  and _count(r.get("accepted_tokens")) is not None for r in reps)
    pp_lists = [r.get("per_position_acceptance") for r in reps]
    have_pp = all(isinstance(p, list) and p and len(_numbers(p)) == len(p) for p in pp_lists)
    npos = min(len(p) for p in pp_lists) if have_pp else 0
    if counted and sum(float(r["draft_tokens"]) for r in reps) > 0:
        drafts = sum(float(r["num_drafts"]) for r in reps)
        dtok = sum(float(r["draft_tokens"]) for r in reps)
        acc = sum(float(r["accepted_tokens"]) for r in reps)
        per_pos = None
        if have_pp:
            per_pos = [round(sum(float(r["per_position_acceptance"][i]) * float(r["num_drafts"]) for r in reps)
                             / drafts, 4) for i in range(npos)]
        return {"acceptance_rate": round(acc / dtok * 100.0, 4), "acceptance_length": round(1.0 + acc / drafts, 4),
                "per_position_acceptance": per_pos, "method": "tokens", "repeats": len(reps)}
    rates = _numbers(r.get("acceptance_rate") for r in reps)
    lengths = _numbers(r.get("acceptance_length") for r in reps)
    per_pos = None
    if have_pp:
        per_pos = [round(statistics.fmean(float(p[i]) for p in pp_lists), 4) for i in range(npos)]
    return {"acceptance_rate": round(statistics.fmean(rates), 4) if rates else None,
            "acceptance_length": round(statistics.fmean(lengths), 4) if lengths else None,
            "per_position_acceptance": per_pos, "method": "mean", "repeats": len(reps)}


# -- lossless -------------------------------------------------------------------------------------------------

_PIECES = re.compile(r"\S+|\s+")


def first_divergence(a: str, b: str) -> int | None:
    """Index of the first whitespace-separated word where a and b differ (None when a == b). A difference in
    the whitespace after word i counts as a divergence at word i + 1; a text that is a prefix of the other
    diverges at the shorter one's word count."""
    if a == b:
        return None
    pa, pb = _PIECES.findall(a), _PIECES.findall(b)
    words = 0
    for x, y in zip(pa, pb):
        if x != y:
            return words
        if not x.isspace():
            words += 1
    return words


def lossless(baseline_texts: Sequence[Any] | None, arm_texts: Sequence[Any] | None) -> dict[str, Any] | None:
    """Per-prompt lossless check of an arm against the baseline (same prompts, greedy decoding):
    {prompts, identical, identical_share, first_divergence: [word index | None per prompt]}.

    Prompts are paired by position; a pair where either text is missing (not a string: the request failed)
    is left out, so prompts counts the compared pairs. None when nothing could be compared."""
    pairs = [(b, a) for b, a in zip(baseline_texts or [], arm_texts or []) if isinstance(b, str) and isinstance(a, str)]
    if not pairs:
        return None
    div = [first_divergence(b, a) for b, a in pairs]
    same = sum(1 for d in div if d is None)
    return {"prompts": len(pairs), "identical": same, "identical_share": round(same / len(pairs), 4),
            "first_divergence": div}


def per_request_summary(specs: Sequence[dict[str, Any] | None] | None) -> dict[str, Any] | None:
    """Per-request spec-decode metrics (vLLM 0.29+, speculative servers): {n, mean_acceptance_length,
    median_acceptance_length} over the requests that report a mean_acceptance_length. None when none does."""
    vals = _numbers(s.get("mean_acceptance_length") for s in (specs or []) if isinstance(s, dict))
    if not vals:
        return None
    return {"n": len(vals), "mean_acceptance_length": round(statistics.fmean(vals), 4),
            "median_acceptance_length": round(statistics.median(vals), 4)}


# -- a cell of the matrix -------------------------------------------------------------------------------------

def _throughputs(repeats: Sequence[dict[str, Any] | None] | None) -> list[float]:
    return _numbers((r or {}).get("output_throughput") for r in (repeats or []) if isinstance(r, dict))


def cell(repeats: Sequence[dict[str, Any] | None] | None, baseline_repeats: Sequence[dict[str, Any] | None] | None = None,
         probe: dict[str, Any] | None = None, baseline_probe: dict[str, Any] | None = None,
         method: str | None = "eagle3", k: int | None = None, speculative: bool = True) -> dict[str, Any]:
    """One arm on one workload (the contract's Cell). repeats: the arm's bench facts, one per repeat;
    baseline_repeats: the baseline arm's on the same workload (for the speedup); probe / baseline_probe:
    {"texts": [...], "per_request": [...]} (for the lossless check and per-request metrics). A baseline
    cell (speculative False) has no acceptance, speedup or lossless entries."""
    reps = [r for r in (repeats or []) if isinstance(r, dict)]
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


# -- recommendation -------------------------------------------------------------------------------------------

def _fmt_ci(ci: Sequence[float] | None, nd: int = 1) -> str:
    return f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]" if ci else "(no interval)"


def arm_label(arm: dict[str, Any], arms: Sequence[dict[str, Any]]) -> str:
    """How texts name an arm: "baseline", "k = 2", or with the draft / method where the spec arms differ in
    them ("k = 2 (stevenabreu7)", "eagle k = 1")."""
    if arm.get("kind") == "baseline":
        return "baseline"
    spec = [a for a in arms if a.get("kind") != "baseline"]
    k = arm.get("num_speculative_tokens")
    base = f"k = {k}" if k is not None else str(arm.get("title") or arm.get("id"))
    if len({a.get("method") for a in spec}) > 1 and arm.get("method"):
        base = f"{arm['method']} {base}"
    if len({a.get("draft_name") or a.get("draft") for a in spec}) > 1:
        base += f" ({arm.get('draft_name') or arm.get('draft')})"
    return base


def _overlaps(a: Sequence[float] | None, b: Sequence[float] | None) -> bool:
    return bool(a and b and a[0] <= b[1] and b[0] <= a[1])


def _k(arm: dict[str, Any]) -> float:
    k = arm.get("num_speculative_tokens")
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


def recommend(arms: Sequence[dict[str, Any]], cells: dict[str, dict[str, dict[str, Any]]],
              workload: str) -> dict[str, Any]:
    """The tutorial's Step 3 on one workload: {verdict, arm, candidate, text, reason, overlap, stop_tuning,
    repeats_needed}. verdict is one of:

    - "stop_tuning": the first-position acceptance (first_position_acceptance; not the per-token rate, which
      falls with k) is below 30 % on every measured speculative arm → "stop tuning: validate draft and target
      first", arm None.
    - "pays": an arm pays when the LOWER bound of its speedup interval is above 1.0x. The paying arm with the
      highest mean output throughput is the best; among the paying arms whose 95 % throughput intervals
      overlap the best's, the smallest k is recommended (overlap lists the others). An arm without an
      interval (one repeat) never pays and is never "clear of" another.
    - "not_proven": no arm pays but the best mean is above the baseline's (its interval includes 1.0x, is
      unbounded, or it has one repeat): arm None, candidate that arm, repeats_needed the repeats of each
      (arm and baseline) that would likely settle it (repeats_to_settle; None where it cannot be sized).
    - "keep_baseline": the best mean is at or below the baseline's → arm = the baseline's id.
    - "none": no speculative arm was measured on this workload."""
    def c(aid: str) -> dict[str, Any] | None:
        return (cells.get(aid) or {}).get(workload)

    spec = [a for a in arms if a.get("kind") != "baseline"
            and (c(a["id"]) or {}).get("output_throughput", {}).get("mean") is not None]
    base_arm = next((a for a in arms if a.get("kind") == "baseline"), None)
    res: dict[str, Any] = {"verdict": "none", "arm": None, "candidate": None, "text": "", "reason": "",
                           "overlap": [], "stop_tuning": False, "repeats_needed": None}
    if not spec:
        res["text"] = f"no speculative arm was measured on {workload}: nothing to recommend"
        res["reason"] = "no speculative arm has an output throughput on this workload"
        return res

    def lab(a: dict[str, Any]) -> str:
        return arm_label(a, arms)

    def tput(a: dict[str, Any]) -> dict[str, Any]:
        return c(a["id"])["output_throughput"]

    def speedup(a: dict[str, Any]) -> dict[str, Any]:
        return c(a["id"]).get("speedup") or {}

    def sp_text(a: dict[str, Any]) -> str:
        sp = speedup(a)
        if sp.get("ratio") is None:
            return "no speedup (no baseline)"
        if sp.get("ci95"):
            return f"{sp['ratio']:.2f}x {_fmt_ci(sp['ci95'], 2)}"
        if sp.get("unbounded"):
            return f"{sp['ratio']:.2f}x (interval unbounded)"
        return f"{sp['ratio']:.2f}x (one repeat: no interval)"

    fpa = {a["id"]: first_position_acceptance(c(a["id"]), a.get("num_speculative_tokens")) for a in spec}
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

    def by_mean(a: dict[str, Any]) -> tuple[float, float]:
        return (tput(a)["mean"], -_k(a))

    def acceptance_bit(a: dict[str, Any]) -> str | None:
        acc, al = c(a["id"]).get("acceptance_rate"), c(a["id"]).get("acceptance_length")
        if not isinstance(acc, (int, float)):
            return None
        fp, src = fpa[a["id"]]
        bit = f"acceptance {acc:.1f}% per token" + (f", length {al:.2f}" if isinstance(al, (int, float)) else "")
        if fp is not None and src == "first-position acceptance":
            bit += f", first position {fp:.1f}%"
        return bit

    paying = [a for a in spec if pays(speedup(a))]
    if not paying:
        best = max(spec, key=by_mean)
        sp = speedup(best)
        if sp.get("ratio") is not None and sp["ratio"] > 1.0:
            base_vals = (c(base_arm["id"]) or {}).get("output_throughput", {}).get("values") if base_arm else None
            need = repeats_to_settle(tput(best).get("values") or [], base_vals or [])
            if not sp.get("ci95") and not sp.get("unbounded"):
                why, how = "it has one repeat, so no interval", ("run 2 or more repeats (3 or more to size the "
                                                                 "next run from the spread)")
            elif sp.get("unbounded"):
                why, how = "its interval is unbounded (the baseline's spread is too large for a ratio)", None
            else:
                why, how = f"its interval {_fmt_ci(sp['ci95'], 2)} includes 1.0x", None
            if how is None:
                how = (f"about {need} repeats of each (baseline and arm) would likely settle it" if need
                       else "more than 100 repeats would be needed at this spread: the difference is within the noise")
            res.update(verdict="not_proven", candidate=best["id"], repeats_needed=need,
                       text=f"not proven: {lab(best)} is {sp['ratio']:.2f}x the baseline on {workload} but {why}; "
                            f"{how}",
                       reason=("no speculative arm's speedup interval lies above 1.0x (an arm pays only when its "
                               "lower bound does); repeats estimated for a 95% interval to clear 1.0x with 80% "
                               "probability if the observed means and spreads hold (Welch–Satterthwaite degrees "
                               "of freedom)" if need else
                               "no speculative arm's speedup interval lies above 1.0x (an arm pays only when its "
                               "lower bound does)"))
            return res
        res.update(verdict="keep_baseline", arm=base_arm["id"] if base_arm else None,
                   text=f"keep the baseline: no speculative arm beats it on {workload} (best {lab(best)}: "
                        f"{sp_text(best)})",
                   reason="no speculative arm has a mean output throughput above the baseline's")
        return res

    best = max(paying, key=by_mean)
    best_ci = tput(best)["ci95"]
    group = [best] + [a for a in paying if a is not best and _overlaps(best_ci, tput(a)["ci95"])]
    chosen = min(group, key=lambda a: (_k(a), -tput(a)["mean"]))
    others = [a for a in group if a is not chosen]
    ct = tput(chosen)
    csp = speedup(chosen)
    text = (f"{lab(chosen)}: {ct['mean']:.1f} tok/s {_fmt_ci(ct['ci95'])}, {csp['ratio']:.2f}x baseline "
            f"{_fmt_ci(csp['ci95'], 2)}")
    lo = csp["ci95"][0]
    reason_bits = [f"pays: its speedup's lower bound {lo:.2f} is above 1.0x"]
    if others:
        verb = "overlaps" if len(others) == 1 else "overlap"
        names = ", ".join(lab(a) if a is not best else f"{lab(a)} ({tput(a)['mean']:.1f} tok/s {_fmt_ci(tput(a)['ci95'])})"
                          for a in others)
        text += f"; {names} {verb}: prefer the smaller k"
        tied_names = ", ".join(lab(a) for a in sorted(group, key=_k))
        reason_bits.append(f"the 95% throughput intervals of {tied_names} overlap, so they are "
                           f"not distinguishable over {c(chosen['id'])['repeats']} repeats; the tutorial prefers the "
                           "smaller k (less draft work, lower latency when it does not pay)")
    clear = [a for a in paying if a not in group]
    if clear:
        reason_bits.append(f"its 95% throughput interval is clear of {', '.join(lab(a) for a in clear)}")
    for a in spec:
        if a in paying:
            continue
        sp = speedup(a)
        if not sp.get("ci95") and not sp.get("unbounded") and sp.get("ratio") is not None:
            higher = ", a higher single value" if tput(a)["mean"] > ct["mean"] else ""
            reason_bits.append(f"{lab(a)} has one repeat (no interval{higher}): it can neither pay nor be told apart")
        else:
            more = " and a higher mean" if tput(a)["mean"] > ct["mean"] else ""
            reason_bits.append(f"{lab(a)} does not pay ({sp_text(a)}{more})")
    acc = acceptance_bit(chosen)
    if acc:
        reason_bits.append(acc)
    res.update(verdict="pays", arm=chosen["id"], candidate=chosen["id"], text=text, reason="; ".join(reason_bits),
               overlap=[a["id"] for a in others])
    return res


# -- the matrix -----------------------------------------------------------------------------------------------

ARM_KEYS = ("id", "title", "kind", "method", "draft", "draft_name", "num_speculative_tokens", "status")
LAUNCH_KEYS = ("startup_s", "cache_hits", "cache_misses", "placement")  # kept when the caller gives them


def _arm_repeats(facts: dict[str, Any], workload: str, first: bool) -> list[dict[str, Any]]:
    reps = (facts.get("repeats") or {}).get(workload)
    if reps:
        return [r for r in reps if isinstance(r, dict)]
    if first and not facts.get("repeats") and isinstance(facts.get("bench"), dict):
        return [facts["bench"]]  # a two-arm step's facts: its one bench counts as the first workload's repeat
    return []


def build_matrix(arms: Sequence[dict[str, Any]], arm_facts: dict[str, dict[str, Any] | None],
                 workloads: Sequence[str]) -> dict[str, Any]:
    """The contract's matrix: {workloads, arms, cells: {arm: {workload: Cell}}, recommendation: {workload: ...},
    noise_floor: {workload: ...}, coverage: {workload: interval_coverage sentence}}. Each repeat's bench facts
    may carry the bench's "seed" (the coverage sentence says whether the seeds varied). Every arm gets a cell
    on every workload (an empty one, repeats 0, where it has no facts: not run yet, failed); speedups are
    against the first baseline arm's cell."""
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
            base_reps = _arm_repeats(base_facts, wl, i == 0) if base else None
            cells[a["id"]][wl] = cell(
                reps, baseline_repeats=base_reps if spec and base_reps else None,
                probe=(facts.get("probe") or {}).get(wl), baseline_probe=(base_facts.get("probe") or {}).get(wl),
                method=a.get("method"), k=a.get("num_speculative_tokens"), speculative=spec)
    rec = {wl: recommend(arms_out, cells, wl) for wl in workloads}
    nf = {}
    coverage = {}
    for i, wl in enumerate(workloads):
        n = noise_floor(_throughputs(_arm_repeats(base_facts, wl, i == 0))) if base else {"ratio": None, "ci95": None}
        nf[wl] = {"ratio": n["ratio"], "ci95": n["ci95"]}
        per_arm = [_arm_repeats(arm_facts.get(a["id"]) or {}, wl, i == 0) for a in arms_out]
        seeds = max(([r.get("seed") for r in reps] for reps in per_arm),
                    key=lambda ss: len({s for s in ss if s is not None}), default=[])
        coverage[wl] = interval_coverage(max((len(r) for r in per_arm), default=0), seeds)
    return {"workloads": list(workloads), "arms": arms_out, "cells": cells, "recommendation": rec, "noise_floor": nf,
            "coverage": coverage}


# -- table rows for the front ends ----------------------------------------------------------------------------

NA = "n/a"
DASH = "—"


def _num(v: Any, nd: int = 1, suffix: str = "") -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return NA
    return f"{v:.{nd}f}{suffix}"


def matrix_columns(matrix: dict[str, Any], width: int = 120) -> list[str]:
    """Column titles, one per arm in matrix order ("baseline", "k=1", with the draft where drafts differ);
    at width <= 80 at most 12 characters each."""
    arms = matrix.get("arms") or []
    out = []
    for a in arms:
        t = arm_label(a, arms).replace("k = ", "k=")
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
        k = a.get("num_speculative_tokens")
        same = [b for b in arms if spec(b) and b.get("method") == a.get("method") and b.get("draft") == a.get("draft")
                and str(k) in (cl(b).get("predicted_al") or {})]
        return max(same, key=_k, default=None)

    def al(a: dict[str, Any]) -> str:
        if not spec(a):
            return DASH
        c = cl(a)
        meas = _num(c.get("acceptance_length"), 2)
        src = predictor(a)
        p = (cl(src).get("predicted_al") or {}).get(str(a.get("num_speculative_tokens"))) if src else None
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
