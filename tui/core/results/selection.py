"""Step 3 as one decision with a stated error rate (issue 29): which configuration to deploy — the baseline or
a speculative arm — chosen by multiple comparisons with the best, with an indifference zone δ.

The model. Each repeat of configuration i gives an output throughput X; its log is Normal(θ_i, σ²) with one σ
for every configuration (a common coefficient of variation: run-to-run noise is relative, and a server's speed
drifts by a share, not by tokens/s). θ_i is the log of the configuration's typical throughput; "within δ of the
best" means θ_i ≥ max_j θ_j + log(1 − δ), i.e. at least (1 − δ) × the best throughput. σ² is estimated from the
repeats of every configuration together (the pooled within-configuration variance, Σ(n_i − 1) degrees of
freedom): a noisy configuration widens every interval, it never earns a configuration more degrees of freedom
(Welch–Satterthwaite did: a noisier arm could "pay" where an equal, steadier one did not). Where Bartlett's test
says the spreads differ (p < 0.01), the largest configuration's variance is used instead, with its own
degrees of freedom: conservative, and said in the report.

The procedure (Hsu's multiple comparisons with the best, in its Bonferroni form). Let b be the truly best
configuration and E the event that, for every j ≠ b, the interval θ̂_b − θ̂_j ± w_bj covers θ_b − θ_j, with
w_ij = c · s · √(1/n_i + 1/n_j) and c = t_{1 − α / (2 (K − 1) L), df} (K configurations, L planned looks:
Bonferroni over the K − 1 comparisons with the best, both sides, and over the looks). P(E) ≥ 1 − α. On E:
- b is in C, the configurations not shown below another (θ̂_l − θ̂_m + w_lm ≥ 0 for every m);
- a configuration j is *eliminated* (shown more than δ below the best) when θ̂_j − θ̂_l + w_jl < log(1 − δ) for
  every other l in C: then θ_j < θ_b + log(1 − δ) (b is one of those l), and b itself is never eliminated;
- a configuration i is *shown within δ of the best* when θ̂_i − θ̂_l − w_il > log(1 − δ) for every other l in C.
The pick is the most preferred configuration still in the race (preference: the baseline, then smaller k, then
the profile's own draft), and it is *settled* only when that configuration is shown within δ of the best. On E
every more preferred configuration was shown more than δ below the best and the pick is within δ of it, so
with probability ≥ 1 − α a settled pick IS the most preferred configuration within δ of the best: no wrong
claim, no needlessly larger k, no false "pays" (a pick other than the baseline while the baseline is within δ).
When it is not settled the answer says so, names the configurations still in the race and the preferred one
among them — never a guess dressed as a decision.

Adaptive runs look at the data after each round (tui/core/results/race.py plans the rounds); the α split over
the planned looks keeps the guarantee under that optional stopping (a Bonferroni union over looks), and an
eliminated configuration stays eliminated. tests/perf/selection_study.py checks the error rates by simulation
with the engine's own code; tests/test_selection*.py check the constants against scipy.

Pure functions, standard library only. Throughputs in tokens/s; δ and α as fractions.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from tui.core.results.intervals import t_quantile

INDIFFERENCE = 0.05   # δ: configurations within 5 % of the best are "as good" (the smaller k is then preferred)
CONFIDENCE = 0.95     # 1 − α: the family-level confidence of the whole decision
HETERO_P = 0.01       # Bartlett's p below which the spreads are taken as different (largest variance used)

METHOD = ("multiple comparisons with the best (Hsu), Bonferroni form, on log throughput with a pooled "
          "within-configuration variance")


FLOOR_TPUT = 1e-6  # tok/s: a repeat that produced nothing counts as this (the worst result, never dropped)


def log_values(values: Sequence[Any] | None) -> list[float]:
    """The logs of the finite numbers among `values`; a throughput of 0 (or less) counts as FLOOR_TPUT, so a
    repeat that produced nothing weighs as the worst result instead of vanishing."""
    out = []
    for v in values or ():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        f = float(v)
        if math.isfinite(f):
            out.append(math.log(max(f, FLOOR_TPUT)))
    return out


def _gammq(a: float, x: float) -> float:
    """The regularized upper incomplete gamma Q(a, x) (series below a + 1, continued fraction above)."""
    if x <= 0:
        return 1.0
    gln = math.lgamma(a)
    if x < a + 1.0:
        ap, total, delta = a, 1.0 / a, 1.0 / a
        for _ in range(1000):
            ap += 1.0
            delta *= x / ap
            total += delta
            if abs(delta) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-x + a * math.log(x) - gln))
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - gln) * h


def chi2_sf(x: float, k: float) -> float:
    """P(χ²_k > x)."""
    return _gammq(k / 2.0, x / 2.0)


def bartlett(groups: Sequence[Sequence[float]]) -> float | None:
    """Bartlett's test of equal variances (scipy.stats.bartlett's statistic): its p-value, over the groups with at
    least 2 values; None with fewer than 2 such groups or a group without spread."""
    gs = [list(g) for g in groups if len(g) >= 2]
    if len(gs) < 2:
        return None
    ns = [len(g) for g in gs]
    vs = [statistics.variance(g) for g in gs]
    if any(v <= 0 for v in vs):
        return None
    n, k = sum(ns), len(gs)
    sp = sum((ni - 1) * v for ni, v in zip(ns, vs)) / (n - k)
    num = (n - k) * math.log(sp) - sum((ni - 1) * math.log(v) for ni, v in zip(ns, vs))
    den = 1.0 + (sum(1.0 / (ni - 1) for ni in ns) - 1.0 / (n - k)) / (3.0 * (k - 1))
    return chi2_sf(num / den, k - 1)


def spread(groups: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The σ² of the model from the log throughputs of each configuration: {s2, df, model ("pooled" or
    "largest"), bartlett_p}; s2 None (df 0) when no configuration has two repeats."""
    gs = [list(g) for g in groups]
    df = sum(len(g) - 1 for g in gs if len(g) >= 1)
    out: dict[str, Any] = {"s2": None, "df": 0, "model": "pooled", "bartlett_p": None}
    if df <= 0:
        return out
    ss = sum(sum((y - statistics.fmean(g)) ** 2 for y in g) for g in gs if g)
    out.update(s2=ss / df, df=df)
    p = bartlett(gs)
    out["bartlett_p"] = p
    if p is not None and p < HETERO_P:
        wide = max((g for g in gs if len(g) >= 2), key=statistics.variance)
        out.update(s2=statistics.variance(wide), df=len(wide) - 1, model="largest")
    return out


def critical_value(confidence: float, configs: int, looks: int, df: float) -> float:
    """c = t_{1 − α/(2 (K − 1) L), df}: Bonferroni over the K − 1 comparisons with the best, both sides, and the
    L planned looks."""
    alpha = 1.0 - confidence
    m = 2 * max(configs - 1, 1) * max(looks, 1)
    return t_quantile(1.0 - alpha / m, df)


@dataclass(frozen=True)
class Race:
    """One look at the race: what is decided and what is not (see the module's docstring for the rule)."""

    order: tuple[str, ...]                 # configuration ids, most preferred first
    n: dict[str, int]                      # usable repeats per configuration
    mean: dict[str, float]                 # mean log throughput
    delta: float
    confidence: float
    looks: int
    configs: int
    df: int
    s: float | None                        # the model's σ (log scale)
    model: str
    bartlett_p: float | None
    critical: float | None
    best_set: tuple[str, ...] = ()         # C: not shown below any other configuration
    eliminated: dict[str, str] = field(default_factory=dict)   # id -> the id it was shown more than δ below
    good: tuple[str, ...] = ()             # shown within δ of the best
    contenders: tuple[str, ...] = ()       # still in the race, in preference order
    unmeasured: tuple[str, ...] = ()       # no usable repeat: not in the race
    vs_best: dict[str, tuple[float, float]] = field(default_factory=dict)  # ratio bounds of i / max of the others

    @property
    def preferred(self) -> str | None:
        return self.contenders[0] if self.contenders else None

    @property
    def settled(self) -> bool:
        return self.preferred is not None and self.preferred in self.good

    @property
    def pick(self) -> str | None:
        return self.preferred if self.settled else None

    def width(self, i: str, j: str) -> float:
        """w_ij on the log scale (inf without a spread estimate)."""
        if self.s is None or self.critical is None:
            return math.inf
        return self.critical * self.s * math.sqrt(1.0 / self.n[i] + 1.0 / self.n[j])

    def ratio(self, i: str, j: str) -> tuple[float, float, float]:
        """(ratio, lower, upper) of configuration i's throughput over j's, at the decision's family confidence."""
        d = self.mean[i] - self.mean[j]
        w = self.width(i, j)
        return math.exp(d), math.exp(d - w) if math.isfinite(w) else 0.0, math.exp(d + w) if math.isfinite(w) else math.inf

    def as_dict(self) -> dict[str, Any]:
        """report.json's "selection" of a recommendation."""
        def r(v: float | None, nd: int = 6) -> float | None:
            return None if v is None or not math.isfinite(v) else round(v, nd)

        return {"method": METHOD, "indifference": self.delta, "confidence": self.confidence, "looks": self.looks,
                "configs": self.configs, "df": self.df, "sd_log": r(self.s), "variance_model": self.model,
                "bartlett_p": r(self.bartlett_p), "critical": r(self.critical), "order": list(self.order),
                "repeats": dict(self.n), "best_set": list(self.best_set), "eliminated": dict(self.eliminated),
                "good": list(self.good), "contenders": list(self.contenders), "unmeasured": list(self.unmeasured),
                "preferred": self.preferred, "settled": self.settled, "pick": self.pick,
                "vs_best": {k: [r(lo, 4), r(hi, 4)] for k, (lo, hi) in self.vs_best.items()}}


def decide(samples: Mapping[str, Sequence[Any]], order: Sequence[str], delta: float = INDIFFERENCE,
           confidence: float = CONFIDENCE, looks: int = 1, configs: int | None = None,
           eliminated: Mapping[str, str] | None = None) -> Race:
    """One look: samples {config id: throughputs (tok/s)}; order the ids, most preferred first; looks the number of
    looks the run planned (1: a fixed matrix decided once); configs K for the critical value (default: the
    configurations measured); eliminated those an earlier look of the same race eliminated (they stay out)."""
    logs = {i: log_values(samples.get(i)) for i in order}
    measured = [i for i in order if logs[i]]
    unmeasured = tuple(i for i in order if not logs[i])
    n = {i: len(logs[i]) for i in measured}
    mean = {i: statistics.fmean(logs[i]) for i in measured}
    sp = spread([logs[i] for i in measured])
    k = configs if configs is not None else len(measured)
    s = math.sqrt(sp["s2"]) if sp["s2"] is not None else None
    crit = critical_value(confidence, k, looks, sp["df"]) if s is not None and len(measured) >= 2 else None
    race = Race(order=tuple(order), n=n, mean=mean, delta=delta, confidence=confidence, looks=looks, configs=k,
                df=sp["df"], s=s, model=sp["model"], bartlett_p=sp["bartlett_p"], critical=crit,
                unmeasured=unmeasured)
    floor = math.log(1.0 - delta)
    if crit is None:  # nothing can be decided yet: every measured configuration is still in the race
        gone = {i: b for i, b in (eliminated or {}).items() if i in n}
        return replace(race, best_set=tuple(measured), eliminated=gone, good=(),
                     contenders=tuple(i for i in measured if i not in gone), vs_best={})
    w = race.width
    best_set = tuple(i for i in measured if all(mean[i] - mean[m] + w(i, m) >= 0 for m in measured if m != i))
    gone = {i: b for i, b in (eliminated or {}).items() if i in n}
    for j in measured:
        if j in gone:
            continue
        others = [l for l in best_set if l != j]
        if others and all(mean[j] - mean[l] + w(j, l) < floor for l in others):
            gone[j] = max(others, key=lambda l: mean[l])
    good = tuple(i for i in measured if all(mean[i] - mean[l] - w(i, l) > floor for l in best_set if l != i))
    vs_best = {}
    for i in measured:
        rest = [l for l in measured if l != i]
        lo = min(0.0, min(mean[i] - mean[l] - w(i, l) for l in rest))
        hi = max(0.0, min(mean[i] - mean[l] + w(i, l) for l in rest))
        vs_best[i] = (math.exp(lo), math.exp(hi))
    return replace(race, best_set=best_set, eliminated=gone, good=good,
                 contenders=tuple(i for i in measured if i not in gone), vs_best=vs_best)


def can_settle(race: Race, cap: int) -> bool:
    """Whether more repeats (every contender up to `cap`) could settle the race if the observed means and spread
    held: some contender would then be shown within δ of every other contender while each more preferred one is
    shown more than δ below the best. False: more repeats are futile at this spread (stopping early only ever
    turns a possible decision into "not settled"; it makes no claim)."""
    if race.settled:
        return True
    if race.s is None or len(race.contenders) < 1:
        return bool(race.contenders)
    cs = race.contenders
    crit = critical_value(race.confidence, race.configs,
                          race.looks, race.df + sum(cap - race.n[i] for i in cs))
    wcap = crit * race.s * math.sqrt(2.0 / cap)
    floor = math.log(1.0 - race.delta)
    top = max(race.mean[i] for i in cs)
    for q in cs:
        ahead = cs[:cs.index(q)]
        if all(race.mean[j] - top + wcap < floor for j in ahead) and \
                all(race.mean[q] - race.mean[l] - wcap > floor for l in cs if l != q):
            return True
    return False


def round_sizes(first: int, cap: int) -> list[int]:
    """The repeats each configuration still in the race has after each round: `first` ([tune] repeats), then
    `cap` ([tune] max_repeats) for those still in contention — two looks. Each look costs the procedure power
    (α is split over the looks) and each round a relaunch, so more looks bought less: the study measured two looks
    settling more often than three at lower device time (tests/perf/selection_study.py)."""
    first, cap = max(1, int(first)), max(1, int(cap))
    return [first] if cap <= first else [first, cap]


def next_round(race: Race, sizes: Sequence[int], look: int) -> dict[str, int]:
    """After look number `look` (1-based) of a race planned with round_sizes `sizes`: {config id: repeats it
    should reach in the next round}; {} when the race stops (settled, at the cap, or futile: can_settle)."""
    if race.settled or look >= len(sizes) or not can_settle(race, sizes[-1]):
        return {}
    target = sizes[look]
    return {i: target for i in race.contenders if race.n.get(i, 0) < target}
