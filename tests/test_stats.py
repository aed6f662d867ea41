"""tui/core/results/stats.py: the math checked against hand-computed values and against scipy (a test-only dependency:
tui/ never imports it), including the crafted cases of issue 15 where the recommendation was wrong on its own
numbers."""

from __future__ import annotations

import math

import pytest

from tui.core.results import stats as st

from tune_reports import arm, bench, facts, tutorial_matrix
from stats_util import _fieller_scipy, _matrix


# -- Student t --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("p,df,expected", [
    (0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 3, 3.1824), (0.975, 4, 2.7764), (0.975, 5, 2.5706),
    (0.975, 9, 2.2622), (0.975, 10, 2.2281), (0.975, 30, 2.0423), (0.975, 120, 1.9799), (0.95, 5, 2.0150),
    (0.95, 1, 6.3138), (0.995, 3, 5.8409), (0.995, 20, 2.8453), (0.9, 7, 1.4149),
])
def test_t_quantile_table_values(p, df, expected):
    assert st.t_quantile(p, df) == pytest.approx(expected, abs=5e-5)


def test_t_quantile_limits_symmetry_and_fractional_df():
    assert st.t_quantile(0.975, 1e7) == pytest.approx(1.95996, abs=1e-4)  # the normal quantile
    assert st.t_quantile(0.025, 4) == pytest.approx(-2.7764, abs=5e-5)
    assert st.t_quantile(0.5, 3) == 0.0
    # df = 1, 2 closed forms agree with the general CDF inversion
    for df in (1, 2):
        q = st.t_quantile(0.975, df)
        assert st.t_cdf(q, df) == pytest.approx(0.975, abs=1e-12)
    # a fractional df (Welch) lies between its integer neighbours and inverts the CDF
    q = st.t_quantile(0.975, 3.5)
    assert st.t_quantile(0.975, 4) < q < st.t_quantile(0.975, 3)
    assert st.t_cdf(q, 3.5) == pytest.approx(0.975, abs=1e-10)
    with pytest.raises(ValueError):
        st.t_quantile(1.0, 3)
    with pytest.raises(ValueError):
        st.t_quantile(0.9, 0)


def test_betainc_closed_forms():
    for x in (0.1, 0.37, 0.5, 0.9):
        assert st.betainc(1, 1, x) == pytest.approx(x, abs=1e-12)
        assert st.betainc(2, 1, x) == pytest.approx(x * x, abs=1e-12)
        assert st.betainc(0.5, 0.5, x) == pytest.approx(2 / math.pi * math.asin(math.sqrt(x)), abs=1e-10)
    assert st.betainc(3, 4, 0) == 0.0 and st.betainc(3, 4, 1) == 1.0


def test_t_cdf_known_points():
    # df = 1 is Cauchy: F(t) = 1/2 + atan(t)/pi
    assert st.t_cdf(1.0, 1) == pytest.approx(0.75, abs=1e-12)
    assert st.t_cdf(-2.0, 1) == pytest.approx(0.5 + math.atan(-2.0) / math.pi, abs=1e-12)
    # df = 2: F(t) = 1/2 + t / (2 sqrt(2 + t^2))
    assert st.t_cdf(1.5, 2) == pytest.approx(0.5 + 1.5 / (2 * math.sqrt(2 + 2.25)), abs=1e-12)
    assert st.t_cdf(2.7764451, 4) == pytest.approx(0.975, abs=1e-7)


# -- t interval -------------------------------------------------------------------------------------------------

def test_t_interval_hand_computed():
    r = st.t_interval([130, 134, 138])
    # mean 134, sd 4, se 4/sqrt(3) = 2.309401, t(0.975, 2) = 4.302653 -> half 9.936551
    assert r["mean"] == 134 and r["sd"] == pytest.approx(4.0) and r["n"] == 3
    assert r["ci95"] == pytest.approx([124.063449, 143.936551], abs=1e-5)
    assert r["values"] == [130.0, 134.0, 138.0]


def test_t_interval_other_conf_and_small_samples():
    r = st.t_interval([1, 2, 3, 4, 5], conf=0.90)
    # mean 3, sd sqrt(2.5) = 1.581139, se 0.707107, t(0.95, 4) = 2.131847 -> half 1.507443
    assert r["ci95"] == pytest.approx([1.492557, 4.507443], abs=1e-5)
    one = st.t_interval([7.5])
    assert one == {"mean": 7.5, "sd": None, "ci95": None, "values": [7.5], "n": 1}
    assert st.t_interval([]) == {"mean": None, "sd": None, "ci95": None, "values": [], "n": 0}
    # None / NaN / bools are not numbers
    assert st.t_interval([None, float("nan"), True, 2, 4])["values"] == [2.0, 4.0]
    const = st.t_interval([5, 5, 5])
    assert const["sd"] == 0 and const["ci95"] == [5, 5]


# -- ratio interval ---------------------------------------------------------------------------------------------

def test_ratio_interval_constant_denominator_is_the_numerators_interval_scaled():
    r = st.ratio_interval([10, 12, 14], [10, 10, 10])
    # v_y = 0: rho = (12 ± t(0.975, 2) · sqrt(4/3)) / 10 = 1.2 ± 4.302653 · 1.154701 / 10
    assert r["ratio"] == pytest.approx(1.2) and r["method"] == "fieller"
    assert r["ci95"] == pytest.approx([0.703172, 1.696828], abs=1e-5)


def test_ratio_interval_fieller_roots_satisfy_the_pivot():
    xs, ys = [120, 124, 128], [100, 102, 104]
    r = st.ratio_interval(xs, ys)
    xm, ym, vx, vy = 124.0, 102.0, 16 / 3, 4 / 3
    rho = xm / ym
    df = (vx + rho**2 * vy) ** 2 / (vx**2 / 2 + rho**4 * vy**2 / 2)
    assert df == pytest.approx(3.30, abs=0.01)  # Welch–Satterthwaite, by hand: 53.35 / 16.16
    t = st.t_quantile(0.975, df)
    lo, hi = r["ci95"]
    for b in (lo, hi):  # Fieller's bounds: (x̄ − ρȳ)² = t² (v_x + ρ² v_y)
        assert (xm - b * ym) ** 2 == pytest.approx(t * t * (vx + b * b * vy), rel=1e-4)  # bounds rounded to 1e-6
    assert lo < rho < hi
    assert r["ratio"] == pytest.approx(1.215686, abs=1e-6)
    assert [lo, hi] == pytest.approx([1.136912, 1.297315], abs=1e-5)


def test_ratio_interval_unbounded_is_reported_as_unbounded():
    # numerator n = 2 dominates -> Welch df ≈ 1.02, t ≈ 12.4 > ȳ / se_ȳ = 10: Fieller's set is unbounded
    # (the denominator's own n − 1 interval, df 9, would have excluded 0: the old gate gave a delta interval)
    xs, ys = [0, 100], [7, 13] * 5
    r = st.ratio_interval(xs, ys)
    vx, vy, rho = 2500.0, 1.0, 5.0
    df = (vx + rho**2 * vy) ** 2 / (vx**2 / 1 + rho**4 * vy**2 / 9)
    assert df == pytest.approx(1.0201, abs=1e-4)  # 2525² / (2500² + 625 / 9)
    assert r["method"] == "fieller" and r["unbounded"] is True and r["ci95"] is None
    assert r["ratio"] == 5.0 and r["df"] == pytest.approx(df, abs=1e-5)


def test_ratio_interval_none_cases():
    one = st.ratio_interval([10], [5, 6])  # n = 1: the ratio of means, no interval (not "unbounded")
    assert one["ratio"] == pytest.approx(10 / 5.5) and one["ci95"] is None and one["method"] is None
    assert one["unbounded"] is False
    r = st.ratio_interval([10, 11], [-1, 1, 2])  # the denominator is not significantly non-zero: unbounded
    assert r["ci95"] is None and r["unbounded"] is True and r["ratio"] == pytest.approx(10.5 / (2 / 3))
    assert st.ratio_interval([], [1, 2])["ratio"] is None
    assert st.ratio_interval([1, 2], [0, 0])["ratio"] is None
    exact = st.ratio_interval([6, 6], [3, 3])
    assert exact["ratio"] == 2 and exact["ci95"] == [2, 2]


# -- noise floor ------------------------------------------------------------------------------------------------

def test_noise_floor_leave_one_out_hand_computed():
    r = st.noise_floor([100, 102, 104])
    # r_i = 100/103, 102/102, 104/101 = 0.970874, 1, 1.029703; mean 1.000192, sd 0.029415
    ri = [100 / 103, 1.0, 104 / 101]
    mean = sum(ri) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in ri) / 2)
    half = 4.302653 * sd / math.sqrt(3)
    assert r["ratio"] == pytest.approx(1.000192, abs=1e-6) and r["n"] == 3
    assert r["ci95"] == pytest.approx([mean - half, mean + half], abs=1e-5)
    assert r["ci95"] == pytest.approx([0.927121, 1.073263], abs=1e-5)


def test_noise_floor_two_and_one_repeat():
    r = st.noise_floor([100, 110])
    # r = 100/110, 110/100; df 1: t = 12.7062
    ri = [100 / 110, 1.1]
    mean = sum(ri) / 2
    half = 12.706205 * abs(ri[1] - ri[0]) / math.sqrt(2) / math.sqrt(2)
    assert r["ratio"] == pytest.approx(mean, abs=1e-6)
    assert r["ci95"] == pytest.approx([mean - half, mean + half], abs=1e-4)
    assert st.noise_floor([100]) == {"ratio": None, "ci95": None, "n": 1}
    assert st.noise_floor([])["ratio"] is None


# -- acceptance -------------------------------------------------------------------------------------------------

def test_conditional_rates():
    assert st.conditional_rates([80, 60, 30]) == [80, 75, 50]
    assert st.conditional_rates([50, 0, 0]) == [50, 0, None]
    assert st.conditional_rates([]) == [] and st.conditional_rates(None) == []


def test_predicted_al_and_al_check():
    assert st.predicted_al([80, 60, 30], 3) == {"1": 1.8, "2": 2.4, "3": 2.7}
    assert st.predicted_al([80, 60, 30], 2) == {"1": 1.8, "2": 2.4}
    assert st.predicted_al([80, 60, 30], 5) == {"1": 1.8, "2": 2.4, "3": 2.7}
    assert st.predicted_al([80, 60, 30]) == {"1": 1.8, "2": 2.4, "3": 2.7}
    assert st.predicted_al([], 3) is None and st.predicted_al([80, None], 2) is None
    assert st.al_check(2.7, [80, 60, 30]) == {"measured": 2.7, "from_marginals": 2.7, "consistent": True}
    assert st.al_check(2.75, [80, 60, 30])["consistent"] is True     # 1.85 % off: within 2 %
    assert st.al_check(2.8, [80, 60, 30])["consistent"] is False     # 3.7 % off
    assert st.al_check(2.8, [80, 60, 30], tol=0.05)["consistent"] is True
    assert st.al_check(None, [80]) is None and st.al_check(2.0, None) is None


def _rep(nd, dt, acc, pp, rate=None, al=None):
    return {"num_drafts": nd, "draft_tokens": dt, "accepted_tokens": acc, "per_position_acceptance": pp,
            "acceptance_rate": rate if rate is not None else acc / dt * 100, "acceptance_length": al or 1 + acc / nd}


def test_pooled_acceptance_token_weighted():
    reps = [_rep(100, 300, 150, [80, 50, 20]), _rep(300, 900, 630, [90, 70, 50])]
    p = st.pooled_acceptance(reps)
    # rate 780/1200 = 65 %, length 1 + 780/400 = 2.95; per position weighted by drafts 100 : 300
    assert p["method"] == "tokens" and p["repeats"] == 2
    assert p["acceptance_rate"] == pytest.approx(65.0)
    assert p["acceptance_length"] == pytest.approx(2.95)
    assert p["per_position_acceptance"] == pytest.approx([87.5, 65.0, 42.5])
    # the plain mean would have said 60 % and 2.8: pooling differs when the repeats' sizes differ
    assert st.al_check(p["acceptance_length"], p["per_position_acceptance"])["consistent"]


def test_pooled_acceptance_falls_back_to_the_mean_without_counters():
    reps = [_rep(100, 300, 150, [80, 50, 20]), _rep(300, 900, 630, [90, 70, 50])]
    for r in reps:
        del r["num_drafts"], r["draft_tokens"], r["accepted_tokens"]
    p = st.pooled_acceptance(reps)
    assert p["method"] == "mean"
    assert p["acceptance_rate"] == pytest.approx(60.0) and p["acceptance_length"] == pytest.approx(2.8)
    assert p["per_position_acceptance"] == pytest.approx([85.0, 60.0, 35.0])
    # repeats without acceptance are left out; none at all -> None
    assert st.pooled_acceptance([{"acceptance_rate": None}, reps[0]])["acceptance_rate"] == pytest.approx(50.0)
    assert st.pooled_acceptance([{"acceptance_rate": None}]) is None
    assert st.pooled_acceptance([]) is None and st.pooled_acceptance(None) is None


def test_pooled_acceptance_per_position_over_common_positions():
    reps = [_rep(100, 200, 100, [60, 40], rate=50), {"acceptance_rate": 70.0, "acceptance_length": 2.4,
                                                     "per_position_acceptance": [80, 60, 30]}]
    p = st.pooled_acceptance(reps)  # one repeat lacks counters -> mean of both
    assert p["method"] == "mean" and p["per_position_acceptance"] == pytest.approx([70.0, 50.0])
    assert p["acceptance_rate"] == pytest.approx(60.0)


# -- lossless / per request -------------------------------------------------------------------------------------

def test_first_divergence_positions():
    assert st.first_divergence("a b c", "a b c") is None
    assert st.first_divergence("a b c", "a b d") == 2
    assert st.first_divergence("a b c", "x b c") == 0
    assert st.first_divergence("a b", "a b c") == 2          # a prefix: diverges after the shorter's words
    assert st.first_divergence("a bc d", "a bd d") == 1
    assert st.first_divergence("a  b", "a b") == 1          # whitespace after word 0 differs
    assert st.first_divergence("", "x") == 0


def test_lossless_per_prompt():
    r = st.lossless(["a b c", "x y", "same", None], ["a b d", "x y z", "same", "orphan"])
    assert r == {"prompts": 3, "identical": 1, "identical_share": 0.3333, "first_divergence": [2, 2, None]}
    assert st.lossless(["a"], ["a"])["identical_share"] == 1.0
    assert st.lossless([], ["a"]) is None and st.lossless(None, None) is None


def test_per_request_summary():
    r = st.per_request_summary([{"mean_acceptance_length": 2.0}, None, {"mean_acceptance_length": 3.5},
                                {"draft_acceptance_rate": 0.5}, {"mean_acceptance_length": 2.2}])
    assert r == {"n": 3, "mean_acceptance_length": pytest.approx(2.5667, abs=1e-4), "median_acceptance_length": 2.2}
    assert st.per_request_summary([None, None]) is None and st.per_request_summary(None) is None


# -- cell -------------------------------------------------------------------------------------------------------

CELL_KEYS = {"repeats", "output_throughput", "median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms", "median_ttft_ms",
             "p90_ttft_ms", "p99_ttft_ms", "acceptance_rate", "acceptance_length", "per_position", "al_check",
             "predicted_al", "speedup", "lossless", "per_request"}


def test_cell_speculative():
    reps = [bench(t, tpot=tp, acc=55.0, per_pos=[70.0, 40.0], k=2) for t, tp in ((125, 11.0), (126, 11.5), (127, 12.0))]
    base = [bench(t) for t in (112, 113, 114)]
    probe = {"texts": ["a b", "c d e"], "per_request": [{"mean_acceptance_length": 2.0}, {"mean_acceptance_length": 2.2}]}
    bprobe = {"texts": ["a b", "c d f"]}
    c = st.cell(reps, base, probe, bprobe, method="eagle3", k=2)
    assert set(c) == CELL_KEYS
    assert c["repeats"] == 3
    assert set(c["output_throughput"]) == {"mean", "sd", "ci95", "values"}
    assert c["output_throughput"]["mean"] == 126 and c["output_throughput"]["ci95"] == pytest.approx(
        [126 - 2.484138, 126 + 2.484138], abs=1e-5)  # sd 1: t(0.975,2)/sqrt(3)
    assert c["median_tpot_ms"] == pytest.approx(11.5) and c["p99_tpot_ms"] == pytest.approx(11.5 * 1.4)
    assert c["acceptance_rate"] == pytest.approx(55.0) and c["acceptance_length"] == pytest.approx(2.1)
    assert c["per_position"] == {"marginal": [70.0, 40.0], "conditional": [70.0, pytest.approx(57.1429)]}
    assert c["al_check"] == {"measured": 2.1, "from_marginals": 2.1, "consistent": True}
    assert c["predicted_al"] == {"1": 1.7, "2": 2.1}
    assert c["speedup"]["ratio"] == pytest.approx(126 / 113, abs=1e-6)
    lo, hi = c["speedup"]["ci95"]
    assert lo < 126 / 113 < hi
    assert c["lossless"] == {"prompts": 2, "identical": 1, "identical_share": 0.5, "first_divergence": [None, 2]}
    assert c["per_request"] == {"n": 2, "mean_acceptance_length": 2.1, "median_acceptance_length": 2.1}


def test_cell_baseline_and_non_chain_method():
    b = st.cell([bench(112), bench(114)], speculative=False)
    assert set(b) == CELL_KEYS and b["output_throughput"]["mean"] == 113
    assert all(b[k] is None for k in ("acceptance_rate", "per_position", "speedup", "lossless", "predicted_al"))
    ng = st.cell([bench(120, acc=50.0, per_pos=[60.0, 40.0], k=2)], method="ngram", k=2)
    assert ng["predicted_al"] is None and ng["al_check"]["consistent"]  # no prediction for a non-chain method
    assert ng["output_throughput"]["ci95"] is None and ng["speedup"] is None
    empty = st.cell([], [bench(100)])
    assert empty["repeats"] == 0 and empty["output_throughput"]["mean"] is None and empty["speedup"] is None


# -- recommendation ---------------------------------------------------------------------------------------------

def test_recommend_clear_winner_names_the_values():
    arms, af = tutorial_matrix()
    m = st.build_matrix(arms, af, ["sonnet"])
    r = m["recommendation"]["sonnet"]
    assert r["arm"] == "eagle3-k1" and r["stop_tuning"] is False and r["verdict"] == "pays"
    sp = m["cells"]["eagle3-k1"]["sonnet"]["speedup"]
    # 134 ± t(0.975,2)·1/√3 = [131.52, 136.48]; 134 / 113 = 1.19
    assert r["text"].startswith(f"k = 1: 134.0 tok/s [131.5, 136.5], 1.19x baseline [{sp['ci95'][0]:.2f}, "
                                f"{sp['ci95'][1]:.2f}]; with 95 % confidence it is within 5 % of the best configuration "
                                "measured")
    # k = 3 (0.89x of k = 1) is shown more than 5 % below; k = 2 (0.94x) is not, yet k = 1 is the preferred one
    assert "k = 3 is out: more than 5 % below k = 1" in r["reason"] and "acceptance 70.0% per token" in r["reason"]
    assert "baseline is out" in r["reason"] and r["contenders"] == ["eagle3-k1", "eagle3-k2"]
    assert r["ahead"] == [] and r["repeats_needed"] is None
    assert r["selection"]["settled"] is True and r["selection"]["pick"] == "eagle3-k1"


def test_recommend_overlap_prefers_the_smaller_k():
    arms, af = _matrix({"baseline": [112, 113, 114], "eagle3-k1": [130, 134, 138], "eagle3-k2": [132, 136, 140],
                        "eagle3-k3": [100, 101, 102]})
    r = st.build_matrix(arms, af, ["sonnet"])["recommendation"]["sonnet"]
    # k = 2 has the higher mean (136 vs 134) but neither is shown within 5 % of the other at this spread: not
    # settled, and the preferred configuration still in the race is the smaller k, never the noisier larger one
    assert r["verdict"] == "not_proven" and r["arm"] is None and r["candidate"] == "eagle3-k1"
    assert r["contenders"] == ["eagle3-k1", "eagle3-k2"] and r["overlap"] == ["eagle3-k2"]
    assert r["text"] == ("not settled on sonnet: k = 1, k = 2 are still in the race (within 5 % of the best is not "
                         "shown for the preferred one while a more preferred one is not shown more than 5 % below it); "
                         "the preferred among them is k = 1 (" + r["text"].split("k = 1 (")[1])
    assert "k = 3 is out" in r["reason"] and "baseline is out" in r["reason"]
    assert r["repeats_needed"] is None and "repeats would" not in r["text"]


def test_recommend_overlap_when_the_winner_has_the_smallest_k():
    arms, af = _matrix({"baseline": [112, 113, 114], "eagle3-k1": [132, 136, 140], "eagle3-k2": [130, 134, 138]})
    r = st.build_matrix(arms, af, ["sonnet"])["recommendation"]["sonnet"]
    assert r["arm"] == "eagle3-k1" and r["overlap"] == ["eagle3-k2"] and r["ahead"] == []
    assert r["text"].startswith("k = 1: 136.0 tok/s [126.1, 145.9], 1.20x baseline [")
    assert "prefer" not in r["text"]  # the pick is also the fastest: nothing is left on the table


def test_recommend_stop_tuning_below_30_percent():
    arms, af = _matrix({"baseline": [112, 113, 114], "eagle3-k1": [115, 116, 117], "eagle3-k2": [110, 111, 112]},
                       accs={"eagle3-k1": 22.0, "eagle3-k2": 18.0})
    r = st.build_matrix(arms, af, ["sonnet"])["recommendation"]["sonnet"]
    assert r["stop_tuning"] is True and r["arm"] is None
    assert r["text"] == "stop tuning: validate draft and target first"
    assert "k = 1: 22.0%" in r["reason"] and "k = 2: 18.0%" in r["reason"] and "below 30%" in r["reason"]
    # one arm at or above 30 % -> tuning goes on
    arms, af = _matrix({"baseline": [112, 113, 114], "eagle3-k1": [115, 116, 117], "eagle3-k2": [110, 111, 112]},
                       accs={"eagle3-k1": 31.0, "eagle3-k2": 18.0})
    assert st.build_matrix(arms, af, ["sonnet"])["recommendation"]["sonnet"]["stop_tuning"] is False


def test_recommend_keep_the_baseline():
    arms, af = _matrix({"baseline": [130, 131, 132], "eagle3-k1": [110, 111, 112], "eagle3-k2": [100, 101, 102]})
    r = st.build_matrix(arms, af, ["sonnet"])["recommendation"]["sonnet"]
    assert r["arm"] == "baseline" and r["stop_tuning"] is False and r["verdict"] == "keep_baseline"
    assert r["text"].startswith("keep the baseline on sonnet: with 95 % confidence it is within 5 % of the best "
                                "configuration measured")
    assert "(best k = 1: 0.85x [" in r["text"]


def test_recommend_speedup_interval_including_one_is_not_proven():
    arms, af = _matrix({"baseline": [100, 110, 120], "eagle3-k1": [104, 112, 120]})
    m = st.build_matrix(arms, af, ["sonnet"])
    r = m["recommendation"]["sonnet"]
    ci = m["cells"]["eagle3-k1"]["sonnet"]["speedup"]["ci95"]
    assert ci[0] < 1.0 < ci[1]
    # neither is shown more than 5 % below the other: the baseline stays the preferred configuration in the race
    assert r["verdict"] == "not_proven" and r["arm"] is None and r["candidate"] == "baseline"
    assert r["contenders"] == ["baseline", "eagle3-k1"]
    assert r["text"].startswith("not settled on sonnet: baseline, k = 1 are still in the race")
    assert r["text"].endswith("the preferred among them is baseline")
    assert r["repeats_needed"] is None


def test_recommend_single_repeat_and_no_data():
    arms, af = _matrix({"baseline": [113], "eagle3-k1": [134], "eagle3-k2": [126]})
    r = st.build_matrix(arms, af, ["sonnet"])["recommendation"]["sonnet"]
    # one repeat: no spread, so nothing can be decided; the preferred configuration is the baseline
    assert r["verdict"] == "not_proven" and r["arm"] is None and r["candidate"] == "baseline"
    assert r["text"] == "not settled on sonnet: one repeat each: no spread to decide with; run tune.repeats = 2 or more"
    assert r["repeats_needed"] is None
    r = st.recommend([arm("baseline", "baseline"), arm("eagle3-k1", k=1)], {}, "chat")
    assert r["arm"] is None and r["verdict"] == "none" and "no speculative arm was measured on chat" in r["text"]


def test_recommend_names_drafts_when_they_differ():
    arms = [arm("baseline", "baseline"), arm("eagle3-k1-redhat", k=1, draft_name="RedHatAI"),
            arm("eagle3-k1-steven", k=1, draft_name="stevenabreu7")]
    af = {"baseline": facts({"sonnet": [bench(t) for t in (99, 100, 101)]}),
          "eagle3-k1-redhat": facts({"sonnet": [bench(t, acc=70.0) for t in (129, 130, 131)]}),
          "eagle3-k1-steven": facts({"sonnet": [bench(t, acc=60.0) for t in (119, 120, 121)]})}
    r = st.build_matrix(arms, af, ["sonnet"])["recommendation"]["sonnet"]
    assert r["arm"] == "eagle3-k1-redhat" and r["text"].startswith("k = 1 (RedHatAI): 130.0 tok/s")
    assert "k = 1 (stevenabreu7) is out: more than 5 % below k = 1 (RedHatAI)" in r["reason"]


# -- matrix -----------------------------------------------------------------------------------------------------

def test_build_matrix_shape_and_per_workload():
    arms, af = tutorial_matrix()
    # a chat workload where k = 1 and k = 2 tie
    af["baseline"]["repeats"]["chat"] = [bench(t) for t in (90, 91, 92)]
    af["eagle3-k1"]["repeats"]["chat"] = [bench(t, acc=40.0) for t in (100, 104, 108)]
    af["eagle3-k2"]["repeats"]["chat"] = [bench(t, acc=30.0, k=2) for t in (101, 105, 109)]
    m = st.build_matrix(arms, af, ["sonnet", "chat"])
    assert set(m) == {"workloads", "arms", "cells", "recommendation", "noise_floor", "coverage", "notes"}
    assert m["notes"] == {}  # one vLLM throughout: nothing to flag
    assert m["workloads"] == ["sonnet", "chat"]
    assert [a["id"] for a in m["arms"]] == ["baseline", "eagle3-k1", "eagle3-k2", "eagle3-k3"]
    assert set(m["arms"][0]) == set(st.ARM_KEYS)
    for aid in ("baseline", "eagle3-k1", "eagle3-k2", "eagle3-k3"):
        assert set(m["cells"][aid]) == {"sonnet", "chat"}
        for wl in ("sonnet", "chat"):
            assert set(m["cells"][aid][wl]) == CELL_KEYS
    assert m["cells"]["eagle3-k3"]["chat"]["repeats"] == 0  # not run on chat: an empty cell
    assert m["cells"]["eagle3-k1"]["sonnet"]["lossless"]["first_divergence"] == [None, 4, None]
    assert m["cells"]["eagle3-k1"]["sonnet"]["per_request"]["n"] == 2
    assert m["cells"]["eagle3-k3"]["sonnet"]["predicted_al"] == {"1": 1.7, "2": 2.1, "3": 2.35}
    # k = 1 and k = 2 tie on chat: not settled at this spread, and the smaller k is the preferred one in the race
    assert m["recommendation"]["chat"]["candidate"] == "eagle3-k1"
    assert m["recommendation"]["chat"]["contenders"] == ["eagle3-k1", "eagle3-k2"]
    nf = m["noise_floor"]["sonnet"]
    assert set(nf) == {"ratio", "ci95"} and nf["ratio"] == pytest.approx(st.noise_floor([112, 113, 114])["ratio"])


def test_build_matrix_two_arm_facts_back_compat():
    arms = [arm("baseline", "baseline"), arm("eagle3", k=1)]
    m = st.build_matrix(arms, {"baseline": {"bench": bench(100)}, "eagle3": {"bench": bench(130, acc=70.0)}},
                        ["sonnet"])
    c = m["cells"]["eagle3"]["sonnet"]
    assert c["repeats"] == 1 and c["speedup"] == {"ratio": 1.3, "ci95": None, "unbounded": False}
    assert m["recommendation"]["sonnet"]["verdict"] == "not_proven"
    assert m["recommendation"]["sonnet"]["candidate"] == "baseline"  # one run each: nothing decided
    assert m["noise_floor"]["sonnet"] == {"ratio": None, "ci95": None}
    # an arm that never ran (no facts) has empty cells
    m = st.build_matrix(arms, {"baseline": {"bench": bench(100)}}, ["sonnet"])
    assert m["cells"]["eagle3"]["sonnet"]["repeats"] == 0 and m["recommendation"]["sonnet"]["arm"] is None


def test_matrix_is_json_serialisable():
    import json

    arms, af = tutorial_matrix()
    m = st.build_matrix(arms, af, ["sonnet"])
    assert json.loads(json.dumps(m)) == m


# -- rows -------------------------------------------------------------------------------------------------------

def test_matrix_rows_narrow_fit_80_columns():
    arms, af = tutorial_matrix()
    m = st.build_matrix(arms, af, ["sonnet"])
    cols = st.matrix_columns(m, 80)
    assert cols == ["baseline", "k=1", "k=2", "k=3"]
    rows = st.matrix_rows(m, "sonnet", 80)
    by = {r[0]: r[1:] for r in rows}
    assert all(len(r) == 5 for r in rows)
    assert all(len(r[0]) <= 12 for r in rows)
    assert all(len(v) <= 12 for r in rows for v in r[1:])
    assert by["Output tok/s"] == ("113.0 ±2.5", "134.0 ±2.5", "126.0 ±2.5", "119.0 ±2.5")
    assert by["Speedup"][0] == "1.00x" and by["Speedup"][1] == "1.19x"
    ci = m["cells"]["eagle3-k1"]["sonnet"]["speedup"]["ci95"]
    assert by["Speedup 95%"][1] == f"[{ci[0]:.2f},{ci[1]:.2f}]"
    nf = m["noise_floor"]["sonnet"]["ci95"]
    assert by["Speedup 95%"][0] == f"[{nf[0]:.2f},{nf[1]:.2f}]"  # the baseline's column: the noise floor
    assert by["Accept %"] == ("—", "70.0", "55.0", "45.0")
    assert by["AL meas/pred"] == ("—", "1.70/1.70", "2.10/2.10", "2.35/2.35")
    assert by["TPOT med ms"] == ("14.0", "11.0", "11.5", "12.5")
    assert by["TTFT p99 ms"][0] == "120.0"
    assert by["Identical"] == ("—", "2/3", "3/3", "3/3")
    assert by["Req. AL med"][1] == "1.70"
    # the whole table fits 80 columns with rich's default box (3 chars per column + 1)
    widths = [max(len(r[i]) for r in rows + [("",) + tuple(cols)]) for i in range(5)]
    assert sum(widths) + 3 * 5 + 1 <= 80


def test_matrix_rows_wide_labels_and_missing_data():
    arms, af = tutorial_matrix()
    del af["eagle3-k3"]
    m = st.build_matrix(arms, af, ["sonnet"])
    rows = st.matrix_rows(m, "sonnet", 140)
    by = {r[0]: r[1:] for r in rows}
    assert "Output throughput (tok/s)" in by and "Speedup vs baseline" in by
    ci = m["cells"]["eagle3-k1"]["sonnet"]["speedup"]["ci95"]
    assert by["Speedup vs baseline"][1] == f"1.19x [{ci[0]:.2f},{ci[1]:.2f}]"
    assert by["Speedup vs baseline"][0].startswith("noise [")
    assert by["Output throughput (tok/s)"][3] == "n/a" and by["Speedup vs baseline"][3] == "n/a"
    assert by["Lossless: identical"][1] == "2/3 (67%)"
    assert by["Repeats"] == ("3", "3", "3", "0")


def test_matrix_rows_predicted_al_comes_from_the_largest_k():
    arms, af = tutorial_matrix()
    # k = 3 measured position 0 at 80 %, k = 1 measured 70 %: k = 1's predicted AL is 1.80 (from k = 3)
    af["eagle3-k3"]["repeats"]["sonnet"] = [bench(t, acc=50.0, per_pos=[80.0, 45.0, 25.0], k=3)
                                            for t in (118, 119, 120)]
    m = st.build_matrix(arms, af, ["sonnet"])
    by = {r[0]: r[1:] for r in st.matrix_rows(m, "sonnet", 80)}
    assert by["AL meas/pred"] == ("—", "1.70/1.80", "2.10/2.25", "2.50/2.50")


def test_recommend_fastest_arm_below_the_baseline_is_not_recommended_for_a_wide_interval_elsewhere():
    # k = 1 is clearly below the baseline; k = 2's repeats spread 60-140: Bartlett's test says the spreads differ,
    # so the largest variance stands for all (no configuration earns certainty from k = 1's steadiness): nothing
    # is settled, and the preferred configuration in the race is the baseline, never k = 2 (the old rule's k = 1)
    arms, af = _matrix({"baseline": [120, 121, 122], "eagle3-k1": [114, 115, 116], "eagle3-k2": [60, 100, 140]})
    m = st.build_matrix(arms, af, ["sonnet"])
    assert m["cells"]["eagle3-k2"]["sonnet"]["speedup"]["ci95"][1] > 1.0
    r = m["recommendation"]["sonnet"]
    assert r["verdict"] == "not_proven" and r["arm"] is None and r["candidate"] == "baseline"
    assert r["selection"]["variance_model"] == "largest" and "Bartlett p = " in r["reason"]
