"""tui/core/results/drift.py: acceptance over time. Welch's t (difference, 95 % interval, p-value) checked against
scipy.stats.ttest_ind(equal_var=False) on thirds the test cuts itself; the chart series from the windows."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy import stats as sps

from tui.core.results import drift as dr


def win(t0: float, acc: float | None, draft: int = 200, tokens: int = 400, t1: float | None = None) -> dict:
    """One /metrics window of the contract's timeseries (acc in percent; None: a baseline window)."""
    w = {"t0": t0, "t1": t0 + 1.0 if t1 is None else t1, "generation_tokens": tokens}
    if acc is None:
        w.update(num_drafts=None, draft_tokens=None, accepted_tokens=None)
    else:
        w.update(num_drafts=draft // 2, draft_tokens=draft, accepted_tokens=round(acc / 100.0 * draft))
    return w


def full(windows: list[dict]) -> list[dict]:
    """The windows a whole one of which the bench ran in, in time order (the test's own cut): not before its first
    generated token or after its last (idle), not the first or last with tokens (the bench started or ended in
    them), not shorter than half the median window."""
    ws = sorted(windows, key=lambda w: w["t0"])
    active = [i for i, w in enumerate(ws) if w.get("generation_tokens")]
    spans = sorted(w["t1"] - w["t0"] for w in ws)
    half = spans[len(spans) // 2] / 2
    return [w for i, w in enumerate(ws) if active and active[0] < i < active[-1] and w["t1"] - w["t0"] >= half]


def rates(windows: list[dict]) -> list[float]:
    """Per-window acceptance (percent) of the full windows that drafted, in time order."""
    return [w["accepted_tokens"] / w["draft_tokens"] * 100.0 for w in full(windows) if w.get("draft_tokens")]


def thirds(windows: list[dict]) -> tuple[list[float], list[float]]:
    r = rates(windows)
    n = len(r) // 3
    return r[:n], r[len(r) - n:]


def scipy_drift(repeats: list[list[dict]]):
    first, last = [], []
    for ws in repeats:
        f, la = thirds(ws)
        first += f
        last += la
    res = sps.ttest_ind(last, first, equal_var=False)
    ci = res.confidence_interval(0.95)
    return first, last, res, (ci.low, ci.high)


def noisy(seed: int, n: int, start: float, end: float, sd: float) -> list[dict]:
    rng = random.Random(seed)
    return [win(float(i), min(100.0, max(0.0, start + (end - start) * i / (n - 1) + rng.gauss(0, sd))), draft=1000)
            for i in range(n)]


@pytest.mark.parametrize("seed", range(6))
def test_welch_matches_scipy(seed):
    rng = random.Random(seed)
    a = [rng.gauss(70, 3) for _ in range(rng.randint(3, 12))]
    b = [rng.gauss(68, 6) for _ in range(rng.randint(3, 12))]
    w = dr.welch(a, b)
    res = sps.ttest_ind(b, a, equal_var=False)
    ci = res.confidence_interval(0.95)
    assert w["t"] == pytest.approx(res.statistic, rel=1e-9)
    assert w["p_value"] == pytest.approx(res.pvalue, rel=1e-6, abs=1e-12)
    assert w["ci95"] == pytest.approx([ci.low, ci.high], rel=1e-7)
    assert w["df"] == pytest.approx(res.df, rel=1e-9)


def test_a_falling_acceptance_is_flagged_with_scipys_numbers():
    repeats = [noisy(s, 30, 75.0, 60.0, 2.0) for s in (1, 2, 3)]
    d = dr.drift(repeats)
    first, last, res, ci = scipy_drift(repeats)
    assert d["first_windows"] == len(first) == 27 and d["last_windows"] == len(last) == 27  # 28 full windows a bench
    assert d["diff"] == pytest.approx(sum(last) / len(last) - sum(first) / len(first), abs=1e-4)
    assert d["ci95"] == pytest.approx(list(ci), abs=1e-4)
    assert d["p_value"] == pytest.approx(res.pvalue, rel=1e-6, abs=1e-15)
    assert d["drift"] is bool(ci[1] < 0 or ci[0] > 0) is True
    assert "fell" in d["text"] and d["repeats"] == 3


@pytest.mark.parametrize("seed", range(8))
def test_the_flag_is_scipys_decision_on_steady_and_drifting_benches(seed):
    rng = random.Random(100 + seed)
    end = 70.0 + rng.choice([-6.0, -1.0, 0.0, 0.5, 4.0])
    repeats = [noisy(seed * 10 + r, rng.randint(9, 24), 70.0, end, 3.0) for r in range(2)]
    d = dr.drift(repeats)
    _, _, res, ci = scipy_drift(repeats)
    assert d["drift"] is bool(ci[0] > 0 or ci[1] < 0)
    assert d["drift"] is bool(res.pvalue < 0.05)  # the interval excludes 0 exactly when p < 0.05
    if not d["drift"]:
        assert "steady" in d["text"]


def test_windows_are_ordered_by_time_and_idle_windows_left_out():
    ws = [win(float(i), 80.0 if i < 7 else 50.0) for i in range(20)]
    ws += [win(100.0 + i, None) for i in range(5)]  # windows that drafted nothing: not counted
    ws += [win(-3.0 + i, None, tokens=0) for i in range(3)]  # before the bench's first token (idle): not counted
    shuffled = ws[:]
    random.Random(5).shuffle(shuffled)
    d = dr.drift([shuffled])
    assert d["first"] == pytest.approx(80.0) and d["last"] == pytest.approx(50.0)
    assert d["first_windows"] == d["last_windows"] == 6
    assert d["drift"] is True and d["p_value"] == 0.0  # no spread in either third: the difference is exact


def test_too_few_windows_per_third_gives_none():
    assert dr.drift([[win(float(i), 70.0 + i) for i in range(8)]]) is None  # 2 windows per third
    two = dr.drift([[win(float(i), 70.0 + i) for i in range(8)], [win(float(i), 71.0 - i) for i in range(8)]])
    assert two is not None and two["first_windows"] == 4  # pooled over repeats: 2 + 2
    assert dr.drift([]) is None and dr.drift(None) is None
    assert dr.drift([[win(float(i), None) for i in range(30)]]) is None  # the baseline has no acceptance
    # a timeseries dict is accepted as well as its window list
    assert dr.drift([{"interval_s": 1.0, "windows": [win(float(i), 60.0 + i % 3) for i in range(12)]}]) is not None


def test_series_points():
    ws = [win(2.0, None, tokens=300, t1=2.5), win(0.0, 50.0, tokens=200, t1=1.0), win(1.0, 75.0, tokens=0, t1=2.0),
          win(3.0, 60.0, t1=3.0)]  # the last has no length: left out
    pts = dr.series(ws)
    assert [p[0] for p in pts] == [1.0, 2.0, 2.5]
    assert pts[0] == (1.0, 200.0, 50.0)
    assert pts[1][1] == 0.0 and pts[1][2] == pytest.approx(75.0)
    assert pts[2] == (2.5, 600.0, None)
    assert dr.series(None) == [] and dr.series({"windows": ws}) == pts


def test_windows_are_classified_idle_partial_and_full():
    ws = [win(0.0, None, tokens=0), win(1.0, 70.0, tokens=40)]  # idle, then the bench starts inside a window
    ws += [win(2.0 + i, 70.0) for i in range(4)]
    ws += [win(6.0, 70.0, t1=6.3)]  # a short window (0.3 of the interval): partial
    ws += [win(6.3, 70.0), win(7.3, 70.0, tokens=12), win(8.3, None, tokens=0)]
    kinds = [k for _, k in dr.classify({"interval_s": 1.0, "windows": list(reversed(ws))})]
    assert kinds == ["idle", "partial", "full", "full", "full", "full", "partial", "full", "partial", "idle"]
    assert dr.classify([]) == [] and [k for _, k in dr.classify([win(0.0, None, tokens=0)])] == ["idle"]


def test_rolling_mean_is_numpys_centred_convolution():
    vals = [70.0, 72.0, 60.0, 81.0, 77.0, 64.0]
    got = dr.rolling_mean(vals, 3)
    inner = np.convolve(vals, np.ones(3) / 3, mode="valid")
    assert got[1:-1] == pytest.approx(list(inner))
    assert got[0] == pytest.approx(np.mean(vals[:2])) and got[-1] == pytest.approx(np.mean(vals[-2:]))
    assert dr.rolling_mean([1.0, None, 3.0], 3) == [1.0, None, 3.0]
