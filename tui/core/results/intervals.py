"""Intervals over repeats, standard library only: the Student t distribution (its quantile by inverting the
CDF through the regularized incomplete beta function), t intervals, Welch's degrees of freedom, speedup ratio
intervals, repeats to settle and the noise floor. tests/test_stats_scipy.py checks them against scipy."""

from __future__ import annotations

import math
import statistics
from functools import lru_cache
from typing import Any, Iterable, Sequence


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


def welch_difference(x_values: Iterable[Any], y_values: Iterable[Any], conf: float = 0.95) -> dict[str, Any] | None:
    """Welch's two-sample t on mean(x) − mean(y): {diff, ci95, p_value, t, df} (p two-sided). None unless both
    samples have ≥ 2 values. No spread in either: the difference is exact (ci95 [diff, diff], p 0 when it is
    non-zero, else 1; t and df None)."""
    xs, ys = _numbers(x_values), _numbers(y_values)
    if len(xs) < 2 or len(ys) < 2:
        return None
    (mx, vx), (my, vy) = _mean_var(xs), _mean_var(ys)
    diff = mx - my
    df = welch_df([vx, vy], [len(xs), len(ys)])
    if df is None:
        return {"diff": diff, "ci95": [diff, diff], "p_value": 0.0 if diff != 0 else 1.0, "t": None, "df": None}
    se = math.sqrt(vx + vy)
    t = diff / se
    half = t_quantile((1.0 + conf) / 2.0, df) * se
    return {"diff": diff, "ci95": [diff - half, diff + half], "p_value": min(1.0, 2.0 * t_cdf(-abs(t), df)),
            "t": t, "df": df}


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
