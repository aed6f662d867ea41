"""tui/core/results/specmodel.py: the Leviathan et al. 2023 speedup model fitted to a concurrency sweep. The α fits
are checked against scipy.optimize, the cost fit against numpy's least squares, and the whole fit against a
sweep generated from the model itself (so the fit must recover the α and c it was made from)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy import optimize

from tui.core.results import specmodel as sm
from tui.core.results import stats

from tune_reports import arm, bench


def test_alpha_fit_to_marginals_matches_scipy():
    rng = random.Random(3)
    margs = [[100 * (0.72 ** (i + 1)) + rng.gauss(0, 2) for i in range(k)] for k in (1, 2, 3, 3)]
    got = sm.fit_alpha_marginals(margs)
    pts = [(i, m / 100) for ms in margs for i, m in enumerate(ms)]
    res = optimize.minimize_scalar(lambda a: sum((m - a ** (i + 1)) ** 2 for i, m in pts), bounds=(0, 1),
                                   method="bounded", options={"xatol": 1e-12})
    assert got == pytest.approx(res.x, abs=1e-7)
    lsq = optimize.least_squares(lambda a: [m - a[0] ** (i + 1) for i, m in pts], x0=[0.5], bounds=(0, 1))
    assert got == pytest.approx(lsq.x[0], abs=1e-6)
    assert sm.fit_alpha_marginals([]) is None and sm.fit_alpha_marginals([[None]]) is None


def test_alpha_from_acceptance_lengths_solves_the_paper_formula():
    # one (k, AL) pair: AL = (1 − α^(k+1)) / (1 − α) solved exactly (scipy's root finder as the reference)
    for k, al in ((1, 1.6), (2, 2.1), (3, 2.4), (4, 1.2)):
        root = optimize.brentq(lambda a: (1 - a ** (k + 1)) / (1 - a) - al, 1e-9, 1 - 1e-9)
        assert sm.fit_alpha_lengths([(k, al)]) == pytest.approx(root, abs=1e-7)
    pairs = [(1, 1.62), (2, 2.05), (3, 2.31)]
    res = optimize.minimize_scalar(lambda a: sum((al - sum(a ** i for i in range(k + 1))) ** 2 for k, al in pairs),
                                   bounds=(0, 1), method="bounded", options={"xatol": 1e-12})
    assert sm.fit_alpha_lengths(pairs) == pytest.approx(res.x, abs=1e-7)
    assert sm.fit_alpha_lengths([(2, 3.0)]) == pytest.approx(1.0)  # every draft accepted: α = 1, no division


def test_cost_fit_is_least_squares_through_the_origin():
    pts = [(1, 1.31), (2, 1.52), (3, 1.80)]
    k = np.array([[p[0]] for p in pts], float)
    y = np.array([p[1] - 1 for p in pts])
    assert sm.fit_cost(pts) == pytest.approx(np.linalg.lstsq(k, y, rcond=None)[0][0], rel=1e-12)
    assert sm.fit_cost([(2, 1.5)]) == pytest.approx(0.25)  # one arm: exact
    assert sm.fit_cost([]) is None


def test_predicted_speedup_is_the_paper_formula():
    for a, k, c in ((0.7, 1, 0.2), (0.5, 3, 0.05), (0.9, 5, 0.3)):
        assert sm.predicted_speedup(a, k, c) == pytest.approx((1 - a ** (k + 1)) / ((1 - a) * (1 + k * c)))
    assert sm.predicted_speedup(1.0, 3, 0.5) == pytest.approx(4 / 2.5)  # α = 1: k + 1 tokens a step
    assert sm.predicted_speedup(0.7, 2, -0.6) is None  # a non-positive step cost is no model


ALPHA = 0.7
COST = {1: 0.1, 4: 0.45}  # c per level used to generate the sweep


def sweep(alpha: float = ALPHA, ks=(1, 2, 3), per_position: bool = True, base_tpot: float | None = 20.0,
          cost_power: float = 1.0):
    """Arms and facts of a sweep generated from the model: marginals α^(i+1), AL = E(α, k), spec TPOT from the
    step cost 1 + k·c, throughput ∝ 1/TPOT (so the measured speedup is the model's). cost_power ≠ 1 makes the
    step cost 1 + c·k^p instead, a world the model (linear in k) does not describe."""
    arms = [arm("baseline", "baseline")] + [arm(f"eagle3-k{k}", k=k) for k in ks]
    af = {a["id"]: {"repeats": {}} for a in arms}
    keys = []
    for n, c in COST.items():
        key = f"sonnet@c{n}"
        keys.append(key)
        bt = 100.0 * n
        af["baseline"]["repeats"][key] = [bench(bt * f, tpot=base_tpot or 20.0) for f in (0.995, 1.0, 1.005)]
        if base_tpot is None:
            for r in af["baseline"]["repeats"][key]:
                r["median_tpot_ms"] = None
        for k in ks:
            marg = [100 * alpha ** (i + 1) for i in range(k)]
            al = sum(alpha ** i for i in range(k + 1))
            speed = al / (1 + c * k ** cost_power)
            reps = []
            for f in (0.995, 1.0, 1.005):
                b = bench(bt * speed * f, tpot=(base_tpot or 20.0) / speed, acc=sum(marg) / k,
                          per_pos=marg if per_position else None, k=k, num_drafts=100000)
                if not per_position:
                    b["per_position_acceptance"] = None
                reps.append(b)
            af[f"eagle3-k{k}"]["repeats"][key] = reps
    return arms, af, keys


def test_the_fit_recovers_the_model_it_was_generated_from():
    arms, af, keys = sweep()
    m = stats.build_matrix(arms, af, keys)
    model = sm.fit(m, "sonnet", [1, 4])
    assert model["alpha"] == pytest.approx(ALPHA, abs=1e-3)
    for n, c in COST.items():
        assert model["cost"][str(n)]["c"] == pytest.approx(c, abs=2e-3)
    assert len(model["rows"]) == 6
    for r in model["rows"]:
        assert r["fitted"] == pytest.approx(r["measured"], rel=5e-3)
        # the model is right here, so a prediction from the OTHER arms alone recovers the measured speedup too
        assert r["held_out"] == pytest.approx(r["measured"], rel=5e-3) and abs(r["held_out_error"]) < 5e-3
        assert r["tokens_per_step"] == pytest.approx(r["acceptance_length"], abs=2e-3)
    assert model["held_out"]["n"] == 6 and model["held_out"]["median_abs_error"] < 5e-3
    # untried: 4 and 5 at both levels (1..max tried + 2), each the formula at the fitted α, c
    assert sorted((u["level"], u["k"]) for u in model["untried"]) == [(1, 4), (1, 5), (4, 4), (4, 5)]
    for u in model["untried"]:
        c = model["cost"][str(u["level"])]["c"]
        assert u["predicted"] == pytest.approx(sm.predicted_speedup(model["alpha"], u["k"], c), abs=1e-4)
    assert "(AL − 1)/k" in model["note"]


def test_why_names_the_gain_and_the_cost_of_the_winner_over_the_next_smaller_k():
    arms, af, keys = sweep()
    m = stats.build_matrix(arms, af, keys)
    best = {"1": {"arm": "eagle3-k2", "k": 2, "verdict": "pays"}, "4": {"arm": None, "k": None, "verdict": "keep_baseline"}}
    model = sm.fit(m, "sonnet", [1, 4], best)
    c1, c2 = m["cells"]["eagle3-k1"]["sonnet@c1"], m["cells"]["eagle3-k2"]["sonnet@c1"]
    base = m["cells"]["baseline"]["sonnet@c1"]["median_tpot_ms"]
    gain = c2["acceptance_length"] - c1["acceptance_length"]
    cost = (c2["median_tpot_ms"] * c2["acceptance_length"]) / (c1["median_tpot_ms"] * c1["acceptance_length"]) - 1
    assert base > 0 and cost > 0
    assert model["why"]["1"].startswith(f"k=2 adds {gain:.2f} accepted tokens per step and costs {cost * 100:.0f} % "
                                        "more per step than k=1")
    assert model["why"]["4"].startswith("no k is shown to pay at 4")


def test_acceptance_lengths_stand_in_without_per_position_counters():
    arms, af, keys = sweep(per_position=False)
    model = sm.fit(stats.build_matrix(arms, af, keys), "sonnet", [1, 4])
    assert "acceptance lengths" in model["alpha_source"]
    assert model["alpha"] == pytest.approx(ALPHA, abs=2e-3)


def test_degenerate_inputs_do_not_break_the_model():
    # every draft accepted: α = 1
    arms, af, keys = sweep(alpha=1.0)
    model = sm.fit(stats.build_matrix(arms, af, keys), "sonnet", [1, 4])
    assert model["alpha"] == pytest.approx(1.0)
    assert all(r["fitted"] == pytest.approx(r["measured"], rel=5e-3) for r in model["rows"])
    # no baseline TPOT: no step cost, so no prediction, but α and the rows are still there
    arms, af, keys = sweep(base_tpot=None)
    model = sm.fit(stats.build_matrix(arms, af, keys), "sonnet", [1, 4])
    assert model["cost"] == {} and all(r["fitted"] is None and r["step_cost"] is None for r in model["rows"])
    assert all(r["held_out"] is None for r in model["rows"]) and model["held_out"]["n"] == 0
    assert "not judged on held-out data" in model["held_out"]["text"]
    assert model["untried"] == []
    # one arm: c is exact from its one step cost
    arms, af, keys = sweep(ks=(2,))
    model = sm.fit(stats.build_matrix(arms, af, keys), "sonnet", [1, 4])
    assert model["cost"]["1"]["c"] == pytest.approx(COST[1], abs=2e-3) and model["cost"]["1"]["arms"] == 1
    assert model["held_out"]["n"] == 0  # one arm per level: nothing to predict it from
    # no speculative arm, or no acceptance anywhere: no model
    m = stats.build_matrix([arm("baseline", "baseline")], {"baseline": af["baseline"]}, keys)
    assert sm.fit(m, "sonnet", [1, 4]) is None
    # a level nobody measured is skipped, not a crash
    assert sm.fit(stats.build_matrix(*sweep()[:2], keys), "sonnet", [1, 4, 64])["alpha_by_level"]["64"] is None


def test_held_out_predictions_are_what_the_other_arms_alone_predict_and_expose_a_wrong_model():
    """The step cost grows as k^1.6, not linearly: the in-sample fit absorbs that (c is fitted to these very
    arms), the leave-one-arm-out prediction does not. Each held-out value is recomputed here from the other arms
    alone, α by scipy's bounded minimizer and c by numpy's least squares, then compared."""
    arms, af, keys = sweep(cost_power=1.6)
    m = stats.build_matrix(arms, af, keys)
    model = sm.fit(m, "sonnet", [1, 4])
    rows = {(r["arm"], r["level"]): r for r in model["rows"]}
    base = {n: m["cells"]["baseline"][f"sonnet@c{n}"]["median_tpot_ms"] for n in COST}
    for (aid, n), r in rows.items():
        others = [a["id"] for a in arms if a["kind"] != "baseline" and a["id"] != aid]
        cells = [m["cells"][o][f"sonnet@c{n}"] for o in others]
        pts = [(i, x / 100) for c in cells for i, x in enumerate(c["per_position"]["marginal"])]
        alpha = optimize.minimize_scalar(lambda a: sum((x - a ** (i + 1)) ** 2 for i, x in pts), bounds=(0, 1),
                                         method="bounded", options={"xatol": 1e-12}).x
        ks = np.array([[a["num_speculative_tokens"]] for a in arms if a["id"] in others], float)
        cost = np.array([c["median_tpot_ms"] * c["acceptance_length"] / base[n] - 1 for c in cells])
        c_fit = np.linalg.lstsq(ks, cost, rcond=None)[0][0]
        k = r["k"]
        want = (1 - alpha ** (k + 1)) / ((1 - alpha) * (1 + k * c_fit))
        assert r["held_out"] == pytest.approx(want, rel=1e-4)
        assert r["held_out_error"] == pytest.approx(want / r["measured"] - 1, abs=2e-4)
    ho = model["held_out"]
    errs = sorted(abs(r["held_out_error"]) for r in model["rows"])
    assert ho["n"] == 6 and ho["median_abs_error"] == pytest.approx((errs[2] + errs[3]) / 2, abs=1e-4)
    assert ho["max_abs_error"] == pytest.approx(errs[-1], abs=1e-4)
    fitted_err = max(abs(r["fitted"] / r["measured"] - 1) for r in model["rows"])
    assert ho["max_abs_error"] > fitted_err  # in-sample looks better than the model is
    assert ho["max_abs_error"] > 0.02 and "median error" in ho["text"] and "leave one arm out" in ho["method"]
