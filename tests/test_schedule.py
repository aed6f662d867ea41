"""tui/core/results/schedule.py: which schedule the schedule arm runs (derive) and how it is judged against every
fixed k (verify: Fieller's interval on the ratio of mean throughputs, the same interval as every speedup, which
tests/test_stats.py checks against scipy)."""

from __future__ import annotations

import pytest

from tui.core.results.intervals import ratio_interval
from tui.core.results.schedule import derive, verify


def _load(schedule, text="k=2 up to 2"):
    return {"workloads": {"sonnet": {"schedule": schedule, "schedule_text": text}}}


@pytest.mark.parametrize("load,why", [
    (None, "no results"),
    (_load([]), "no schedule"),
    (_load([[1, 16, 0]]), "pays at no measured level"),
    (_load([[1, 16, 2]]), "fixed k=2 arm already measured"),
])
def test_nothing_worth_running_is_said_not_run(load, why):
    sched, text, _ = derive(load)
    assert sched is None and why in text


def test_a_schedule_with_more_than_one_k_is_run_on_the_first_workload():
    sched, text, wl = derive(_load([[1, 2, 2], [3, 4, 1], [5, 16, 0]]))
    assert sched == [[1, 2, 2], [3, 4, 1], [5, 16, 0]] and wl == "sonnet" and text == "k=2 up to 2"


def _facts(values_by_key):
    return {"repeats": {k: [{"output_throughput": v} for v in vals] for k, vals in values_by_key.items()}}


ARMS = [{"id": "baseline", "kind": "baseline"}, {"id": "eagle3-k1", "kind": "speculative", "num_speculative_tokens": 1},
        {"id": "eagle3-k2", "kind": "speculative", "num_speculative_tokens": 2}]
SCHED = {"id": "eagle3-schedule", "kind": "speculative", "num_speculative_tokens": 2, "schedule": True}


def test_verify_follows_fieller_level_by_level():
    keys = ["sonnet@c1", "sonnet@c8"]
    facts = {
        "baseline": _facts({"sonnet@c1": [100, 101, 99], "sonnet@c8": [500, 505, 495]}),
        "eagle3-k1": _facts({"sonnet@c1": [130, 131, 129], "sonnet@c8": [420, 425, 415]}),
        "eagle3-k2": _facts({"sonnet@c1": [150, 152, 148], "sonnet@c8": [350, 355, 345]}),
        # the schedule: k=2 alone (as fast as the k=2 arm), no speculation at 8 (as fast as the baseline)
        "eagle3-schedule": _facts({"sonnet@c1": [149, 151, 150], "sonnet@c8": [498, 503, 500]}),
    }
    out = verify(SCHED, ARMS, facts, keys)
    for key in keys:
        for a in ARMS:
            row = out["levels"][key]["vs"][a["id"]]
            ci = ratio_interval([r["output_throughput"] for r in facts["eagle3-schedule"]["repeats"][key]],
                                [r["output_throughput"] for r in facts[a["id"]]["repeats"][key]])["ci95"]
            want = "beats" if ci[0] > 1 else "loses" if ci[1] < 1 else "not distinguishable"
            assert row["verdict"] == want and row["ci95"] == ci
    assert out["levels"]["sonnet@c1"]["vs"]["eagle3-k2"]["verdict"] == "not distinguishable"
    assert out["levels"]["sonnet@c8"]["beats"] == ["eagle3-k1", "eagle3-k2"]
    assert out["status"] == "verified" and not any(r["loses"] for r in out["levels"].values())


def test_a_schedule_beaten_somewhere_is_mixed_and_says_where():
    facts = {"baseline": _facts({"sonnet@c8": [500, 505, 495]}),
             "eagle3-k1": _facts({"sonnet@c8": [420, 425, 415]}),
             "eagle3-schedule": _facts({"sonnet@c8": [400, 402, 398]})}
    out = verify(SCHED, ARMS[:2], facts, ["sonnet@c8"])
    assert out["status"] == "mixed" and "sonnet at 8" in out["text"] and "baseline" in out["text"]


def test_a_schedule_arm_without_numbers_is_not_run():
    assert verify(SCHED, ARMS, {}, ["sonnet@c1"])["status"] == "not_run"
