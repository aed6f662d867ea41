"""Helpers for the stats tests (test_stats*.py): a small tuning matrix, and scipy's reference values for Welch's df
and the Fieller set (scipy's t-test and root-finding on the pivot), never from the product."""

from __future__ import annotations

import numpy as np
from scipy import optimize
from scipy import stats as sps

from tune_reports import arm, bench, facts


def _welch_df_scipy(xs, ys) -> float:
    """Welch–Satterthwaite df of x̄ − ρ̂ȳ: scipy's Welch t-test of xs against ρ̂·ys."""
    rho = np.mean(xs) / np.mean(ys)
    return float(sps.ttest_ind(np.asarray(xs, float), rho * np.asarray(ys, float), equal_var=False).df)


def _fieller_scipy(xs, ys, conf=0.95):
    """(bounded, [lo, hi] | None): the set {ρ : (x̄ − ρȳ)² ≤ t² (v_x + ρ² v_y)} at the Welch df, from its pivot.
    It is bounded iff the pivot's limit at ρ → ±∞, ȳ² / v_y, exceeds t²; the bounds are the pivot's roots."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    xm, ym = xs.mean(), ys.mean()
    vx, vy = xs.var(ddof=1) / len(xs), ys.var(ddof=1) / len(ys)
    t = sps.t.ppf((1 + conf) / 2, _welch_df_scipy(xs, ys))
    if vy > 0 and ym * ym / vy <= t * t:
        return False, None

    def f(r):
        return (xm - r * ym) ** 2 - t * t * (vx + r * r * vy)

    rho, span = xm / ym, 1.0
    while f(rho + span) <= 0 or f(rho - span) <= 0:
        span *= 2
    return True, [optimize.brentq(f, rho - span, rho, xtol=1e-13), optimize.brentq(f, rho, rho + span, xtol=1e-13)]


def _matrix(tputs: dict[str, list[float]], accs: dict[str, float] | None = None, workloads=("sonnet",)):
    arms = [arm("baseline", "baseline")] + [arm(f"eagle3-k{k}", k=k) for k in range(1, len(tputs))]
    af = {}
    for a in arms:
        vals = tputs[a["id"]]
        if a["kind"] == "baseline":
            reps = [bench(t) for t in vals]
        else:
            k = a["num_speculative_tokens"]
            reps = [bench(t, acc=(accs or {}).get(a["id"], 60.0), k=k) for t in vals]
        af[a["id"]] = facts({wl: reps for wl in workloads})
    return arms, af
