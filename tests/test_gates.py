"""tui/core/results/gates.py: --expect parsing, the flat gate metrics from report.json, evaluation, apply_gates."""

from __future__ import annotations

import json

import pytest

from tui.core.results import gates as g

from tune_reports import matrix_report, tutorial_matrix, two_arm_report


@pytest.mark.parametrize("text,expected", [
    ("speedup>=1.15", ("speedup", ">=", 1.15)),
    ("  acceptance >= 60 ", ("acceptance", ">=", 60.0)),
    ("acceptance>=60%", ("acceptance", ">=", 60.0)),
    ("tpot_ratio<0.9", ("tpot_ratio", "<", 0.9)),
    ("ttft_ratio<=1.1", ("ttft_ratio", "<=", 1.1)),
    ("spec_tok_s>100", ("spec_tok_s", ">", 100.0)),
    ("acceptance_length==1.5", ("acceptance_length", "==", 1.5)),
    ("baseline_tok_s>=1e2", ("baseline_tok_s", ">=", 100.0)),
    ("comparison.median_tpot_ratio<.8", ("comparison.median_tpot_ratio", "<", 0.8)),
    ("matrix.cells.eagle3-k1.sonnet.output_throughput.mean>=130",
     ("matrix.cells.eagle3-k1.sonnet.output_throughput.mean", ">=", 130.0)),
    ("speedup>-1", ("speedup", ">", -1.0)),
])
def test_parse_expect(text, expected):
    e = g.parse_expect(text)
    assert (e.name, e.op, e.value) == expected


@pytest.mark.parametrize("text,fragment", [
    ("speedup", "is not an expectation"),
    ("speedup=>1.1", "is not an expectation"),
    ("speedup>=fast", "is not an expectation"),
    ("speedup!=1", "is not an expectation"),
    ("", "is not an expectation"),
    ("speedpu>=1.1", "unknown name 'speedpu'"),
    ("runs..eagle3>1", "is not a dotted path"),
    ("runs.>1", "is not a dotted path"),
])
def test_parse_expect_errors_name_the_text_and_the_choices(text, fragment):
    with pytest.raises(ValueError) as ei:
        g.parse_expect(text)
    msg = str(ei.value)
    assert fragment in msg and repr(text) in msg
    assert "speedup, speedup_lo, acceptance" in msg and ">=, >, <=, <, ==" in msg
    assert "\n" not in msg


def test_expectation_text():
    assert g.parse_expect("speedup >= 1.150").text == "speedup>=1.15"


def test_gate_metrics_two_arm_run():
    rep = two_arm_report()
    m = g.gate_metrics(rep)
    assert set(m) == set(g.GATE_METRICS)
    assert m == {"speedup": 1.2952, "speedup_lo": None, "acceptance": 67.1053, "acceptance_length": pytest.approx(1.671053),
                 "tpot_ratio": 0.6374, "ttft_ratio": 1.034, "baseline_tok_s": pytest.approx(217.6668044236798),
                 "spec_tok_s": pytest.approx(217.6668044236798 * 1.2952)}
    empty = g.gate_metrics({"schema": "specdec-tui/report/1", "runs": {}, "comparison": {}})
    assert all(v is None for v in empty.values())


def test_gate_metrics_matrix_uses_the_recommended_arm_on_the_first_workload():
    rep = matrix_report()
    m = g.gate_metrics(rep)
    cells = rep["matrix"]["cells"]
    k1, base = cells["eagle3-k1"]["sonnet"], cells["baseline"]["sonnet"]
    assert m["speedup"] == k1["speedup"]["ratio"] == pytest.approx(134 / 113, abs=1e-6)
    assert m["speedup_lo"] == k1["speedup"]["ci95"][0]
    assert m["acceptance"] == pytest.approx(70.0) and m["acceptance_length"] == pytest.approx(1.7)
    assert m["tpot_ratio"] == pytest.approx(11.0 / 14.0, abs=1e-4)
    assert m["ttft_ratio"] == 1.0
    assert m["baseline_tok_s"] == base["output_throughput"]["mean"] == 113 and m["spec_tok_s"] == 134


def test_gate_metrics_matrix_keep_baseline_reads_the_best_spec_arm():
    rep = matrix_report()
    mx = rep["matrix"]
    mx["recommendation"]["sonnet"] = {"arm": "baseline", "text": "keep the baseline", "reason": "", "overlap": [],
                                      "stop_tuning": False}
    m = g.gate_metrics(rep)
    assert m["spec_tok_s"] == 134 and m["speedup"] == mx["cells"]["eagle3-k1"]["sonnet"]["speedup"]["ratio"]
    mx["recommendation"]["sonnet"]["arm"] = None  # stop tuning
    assert g.gate_metrics(rep)["spec_tok_s"] == 134


def test_lookup_path():
    rep = two_arm_report()
    assert g.lookup_path(rep, "comparison.median_tpot_ratio") == 0.6374
    assert g.lookup_path(rep, "runs.eagle3.per_position_acceptance.0") == 67.1053
    assert g.lookup_path(rep, "runs.eagle3.per_position_acceptance.-1") == 67.1053
    assert g.lookup_path(rep, "runs.eagle3.per_position_acceptance.5") is g._MISSING
    assert g.lookup_path(rep, "runs.nope") is g._MISSING
    assert g.lookup_path(rep, "profile.x") is g._MISSING
    assert g.lookup_path({"a.b": {"c": 1}}, "a.b.c") == 1


def test_evaluate_pass_fail_missing_and_non_numbers():
    rep = two_arm_report()
    exps = [g.parse_expect(t) for t in ("speedup>=1.15", "acceptance>=70", "speedup_lo>1", "comparison.median_tpot_ratio<1",
                                        "runs.chat.output_throughput>1", "verdict.text==1", "acceptance_length==1.671053")]
    res = g.evaluate(exps, rep)
    assert [r.ok for r in res] == [True, False, False, True, False, False, True]
    assert res[0].actual == 1.2952 and res[0].message == "✓ speedup>=1.15: speedup = 1.295"
    assert res[1].message == "✗ acceptance>=70: acceptance = 67.11 — expectation failed"
    assert res[2].actual is None and "no value for 'speedup_lo'" in res[2].message
    assert res[4].message == "✗ runs.chat.output_throughput>1: report.json has no 'runs.chat.output_throughput'"
    assert "'verdict.text' in report.json is \"EAGLE3 was faster in one run: 1.30x" in res[5].message
    assert res[5].message.endswith("not a number")


def test_evaluate_falls_back_to_the_stored_metrics():
    rep = {"schema": "specdec-tui/report/1", "runs": {}, "comparison": {}, "metrics": {"speedup": 1.3}}
    (r,) = g.evaluate([g.parse_expect("speedup>1.2")], rep)
    assert r.ok and r.actual == 1.3


def test_evaluate_matrix_dotted_path():
    rep = matrix_report()
    (r,) = g.evaluate([g.parse_expect("matrix.cells.eagle3-k2.sonnet.output_throughput.mean>=126")], rep)
    assert r.ok and r.actual == 126


def test_apply_gates(tmp_path):
    p = tmp_path / "report.json"
    p.write_text(json.dumps(two_arm_report()))
    ok, lines = g.apply_gates(p, ["speedup>=1.15", "acceptance>=60"])
    assert ok and lines == ["✓ speedup>=1.15: speedup = 1.295", "✓ acceptance>=60: acceptance = 67.11"]
    ok, lines = g.apply_gates(str(p), ["speedup>=1.5", "acceptance>=60"])
    assert not ok and lines[0].startswith("✗ speedup>=1.5") and lines[1].startswith("✓")
    assert g.apply_gates(p, []) == (True, [])
    with pytest.raises(ValueError):
        g.apply_gates(p, ["speedup=1"])
    ok, lines = g.apply_gates(tmp_path / "none.json", ["speedup>=1"])
    assert not ok and len(lines) == 1 and "unreadable" in lines[0] and "speedup>=1" in lines[0]
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert g.apply_gates(bad, ["speedup>=1"])[0] is False


def test_parse_all_accepts_parsed_expectations():
    e = g.parse_expect("speedup>=1")
    assert g.parse_all([e, "acceptance>1"]) == [e, g.Expectation("acceptance", ">", 1.0)]


def test_matrix_metrics_without_a_baseline():
    arms, af = tutorial_matrix()
    from tui.core.results import stats

    arms = arms[1:]
    del af["baseline"]
    rep = {"schema": "specdec-tui/report/1", "matrix": stats.build_matrix(arms, af, ["sonnet"])}
    m = g.gate_metrics(rep)
    assert m["spec_tok_s"] == 134 and m["speedup"] is None and m["baseline_tok_s"] is None


def test_speedup_lo_gate_says_why_a_matrix_has_no_lower_bound():
    from tui.core.results import stats
    from tune_reports import arm, bench, facts

    arms = [arm("baseline", "baseline"), arm("eagle3-k1", k=1)]

    def report(base, spec):
        af = {"baseline": facts({"sonnet": [bench(t) for t in base]}),
              "eagle3-k1": facts({"sonnet": [bench(t, acc=60.0) for t in spec]})}
        return {"schema": "specdec-tui/report/1", "matrix": stats.build_matrix(arms, af, ["sonnet"])}

    # not proven (one repeat): the flat metrics describe the candidate, and speedup_lo's absence is explained
    (r,) = g.evaluate([g.parse_expect("speedup_lo>1")], report([100], [130]))
    assert not r.ok and r.actual is None and "one repeat: the speedup has no interval" in r.message
    (r,) = g.evaluate([g.parse_expect("speedup_lo>1")], report([7, 13] * 5, [0, 100]))
    assert not r.ok and "interval is unbounded" in r.message
    # a paying arm: its Fieller lower bound, above 1
    rep = report([100, 101, 102], [130, 131, 132])
    (r,) = g.evaluate([g.parse_expect("speedup_lo>1")], rep)
    assert r.ok and r.actual == rep["matrix"]["cells"]["eagle3-k1"]["sonnet"]["speedup"]["ci95"][0]
