"""tui/core/host/placement.py: NEURON_VISIBLE_DEVICES ranges for parallel arms, ports, the capacity check."""

from __future__ import annotations

import pytest

from tui.core.host.placement import (
    CoreFacts,
    PlacementError,
    arm_ports,
    capacity_check,
    check_disjoint,
    core_facts,
    estimate_ram_per_server_gib,
    format_range,
    parse_visible_devices,
    plan_ranges,
    root_comm_port,
)
from tui.core.host.sysinfo import GIB, parse_neuron_ls
from tui.sim.standin import neuron_ls_devices


def r(a: int, b: int) -> tuple[int, ...]:
    return tuple(range(a, b + 1))


# --- plan_ranges ---------------------------------------------------------------------------------

def test_four_tp16_arms_fill_a_trn2_48xlarge():
    p = plan_ranges(64, 16, 4, set())
    assert p.parallel == 4 and p.reasons == ()
    assert [format_range(x) for x in p.ranges] == ["0-15", "16-31", "32-47", "48-63"]
    assert [p.visible_devices(i) for i in range(4)] == ["0-15", "16-31", "32-47", "48-63"]
    assert p.waves() == [[0, 1, 2, 3]]
    assert "4 of 4 arm(s) at once" in p.summary()


def test_fewer_arms_than_ranges_use_the_lowest_ranges():
    p = plan_ranges(64, 16, 2, set())
    assert p.ranges == (r(0, 15), r(16, 31)) and p.reasons == () and len(p.free) == 4


def test_ranges_are_aligned_to_tp():
    p = plan_ranges(64, 8, 3, {12})  # core 12 is held: range 8-15 is out, never 12-19
    assert [format_range(x) for x in p.ranges] == ["0-7", "16-23", "24-31"]
    assert all(x[0] % 8 == 0 and x == tuple(range(x[0], x[0] + 8)) for x in p.slots)


def test_busy_cores_remove_their_range_and_say_who_holds_them():
    p = plan_ranges(64, 16, 4, {0, 1, 2, 3}, holders={0: (4242,), 1: (4242,), 2: (4242,), 3: (4242,)})
    assert p.parallel == 3 and [format_range(x) for x in p.ranges] == ["16-31", "32-47", "48-63"]
    assert len(p.reasons) == 1
    assert "cores 0-3 are held by pid 4242" in p.reasons[0] and "0-15" in p.reasons[0]
    assert p.waves() == [[0, 1, 2], [3]]
    assert p.range_for(3) == r(16, 31)  # the fourth arm reuses the first range, after the first arm stopped


def test_not_enough_cores():
    p = plan_ranges(64, 16, 6, set())
    assert p.parallel == 4 and "not enough cores" in p.reasons[0] and "4 aligned range(s) of 16" in p.reasons[0]
    assert p.waves() == [[0, 1, 2, 3], [4, 5]]
    tiny = plan_ranges(8, 16, 2, set())
    assert tiny.parallel == 0 and "needs 16 logical cores and the instance has 8" in tiny.reasons[0]
    assert "no arm can start" in tiny.reasons[-1]
    with pytest.raises(PlacementError, match="no free aligned core range"):
        tiny.range_for(0)
    assert tiny.waves() == []


def test_all_busy_and_not_enough_at_once():
    p = plan_ranges(32, 16, 3, set(range(32)))
    assert p.parallel == 0
    assert any("not enough cores" in x for x in p.reasons) and any("cores 0-31 are held" in x for x in p.reasons)


def test_pipeline_parallel_widens_the_range_and_busy_outside_is_ignored():
    p = plan_ranges(64, 8, 2, {99, -1}, pp=2)
    assert p.ranges == (r(0, 15), r(16, 31)) and p.busy_cores == frozenset() and p.width == 16


def test_leftover_cores_that_do_not_make_a_range_are_unused():
    p = plan_ranges(40, 16, 3, set())
    assert p.ranges == (r(0, 15), r(16, 31)) and "2 aligned range(s)" in p.reasons[0]


@pytest.mark.parametrize("args", [(64, 0, 1), (64, 16, 0)])
def test_plan_rejects_nonsense(args):
    with pytest.raises(PlacementError):
        plan_ranges(*args, set())


# --- parse_visible_devices / format_range ---------------------------------------------------------

@pytest.mark.parametrize("value,tp,expect", [
    ("0-15", 16, list(range(16))),
    ("16-31", 16, list(range(16, 32))),
    (" 48-63 ", 16, list(range(48, 64))),
    ("0,1,2,3", 4, [0, 1, 2, 3]),
    ("4-5,6-7", 4, [4, 5, 6, 7]),
    ("7", 1, [7]),
    ("0-15", None, list(range(16))),
])
def test_parse_valid(value, tp, expect):
    assert parse_visible_devices(value, tp, total_cores=64) == expect


@pytest.mark.parametrize("value,tp,needles", [
    ("", 16, ["NEURON_VISIBLE_DEVICES=''", "not a list of logical NeuronCores", "0-15"]),
    ("a-b", 16, ["'a-b'", "0-15 or 16-31"]),
    ("15-0", 16, ["not a list"]),
    ("0-7,16-23", 16, ["not one contiguous", "0-7,16-23", "wrong tokens", "NEURON_VISIBLE_DEVICES=0-15"]),
    ("3,2,1,0", 4, ["not one contiguous ascending", "NEURON_VISIBLE_DEVICES=0-3"]),
    ("0,0,1,2", 4, ["without repeats"]),
    ("0-7", 16, ["selects 8 logical cores", "tensor_parallel_size 16 ranks", "NEURON_VISIBLE_DEVICES=0-15",
                 "unset it for 0-15"]),
    ("12-19", 8, ["starts at core 12", "not a multiple of tensor_parallel_size 8", "0-7, 8-15, 16-23",
                  "NEURON_VISIBLE_DEVICES=8-15 or 16-23"]),
    ("56-71", 16, ["starts at core 56"]),
    ("64-79", 16, ["cores up to 79", "64 logical cores (0-63", "NEURON_VISIBLE_DEVICES=0-15"]),
])
def test_parse_errors_name_the_value_and_the_fix(value, tp, needles):
    with pytest.raises(PlacementError) as ei:
        parse_visible_devices(value, tp, total_cores=64)
    msg = str(ei.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, (n, msg)


def test_parse_counts_pipeline_parallel():
    assert parse_visible_devices("16-31", 8, pp=2) == list(range(16, 32))
    with pytest.raises(PlacementError, match=r"x pipeline_parallel_size 2 = 16"):
        parse_visible_devices("0-7", 8, pp=2)


def test_format_range():
    assert format_range(range(16, 32)) == "16-31"
    assert format_range([3]) == "3"
    assert format_range([8, 0, 1, 2, 3]) == "0-3,8"
    assert format_range([]) == ""


def test_check_disjoint():
    assert check_disjoint({"baseline": range(0, 16), "eagle3-k1": range(16, 32)}) == []
    msgs = check_disjoint({"baseline": range(0, 16), "eagle3-k1": range(8, 24), "eagle3-k2": range(32, 48)})
    assert len(msgs) == 1 and "baseline (0-15) and eagle3-k1 (8-23) share cores 8-15" in msgs[0]


# --- facts from the env step -------------------------------------------------------------------------

def busy_neuron_ls(pid: int = 4242):
    return neuron_ls_devices("2.32", [{"devices": [0, 1, 2, 3], "pid": pid, "command": "vllm serve",
                                       "neuron_runtime_version": "2.34.10"}])


@pytest.mark.parametrize("form", ["parsed", "as_dict", "env_json_block", "raw", "in_env_facts"])
def test_core_facts_from_every_neuron_ls_form(form):
    raw = busy_neuron_ls()
    parsed = parse_neuron_ls(raw)
    env = {"platform": "neuron", "logical_cores": 64, "lnc": 2}
    given = {"parsed": parsed, "as_dict": parsed.as_dict(), "raw": raw,
             "env_json_block": {"found": True, "path": "/x/neuron-ls", "returncode": 0, "parsed": parsed.as_dict()},
             "in_env_facts": None}[form]
    if form == "in_env_facts":
        env["neuron_ls"] = parsed.as_dict()
    f = core_facts(env, given)
    assert f.total_logical_cores == 64 and f.lnc == 2 and f.busy_known
    assert f.busy_cores == frozenset(range(16)) and f.holders[5] == (4242,)
    assert f.hbm_bytes_per_core == 103079215104 // 4
    p = f.plan(16, 4)
    assert [format_range(x) for x in p.ranges] == ["16-31", "32-47", "48-63"] and "pid 4242" in p.reasons[0]


def test_core_facts_without_neuron_ls_devices():
    f = core_facts({"logical_cores": 64, "lnc": 2})
    assert f.total_logical_cores == 64 and not f.busy_known and f.busy_cores == frozenset()
    assert "busy cores not checked" in f.notes[0]
    n, reasons = capacity_check(4, 16, f, 1500.0, 240.0)
    assert n == 4 and any("busy cores not checked" in x for x in reasons)
    unknown = core_facts({"platform": "neuron"})
    assert unknown.total_logical_cores is None
    p = unknown.plan(16, 2)
    assert p.parallel == 0 and "core count is unknown" in p.reasons[0]
    assert capacity_check(2, 16, unknown, 1500.0, 240.0)[0] == 0
    assert core_facts(None).total_logical_cores is None
    assert core_facts({}, {"garbage": 1}).busy_known is False


# --- capacity --------------------------------------------------------------------------------------

def test_capacity_limited_by_cores_then_ram():
    facts = core_facts({"logical_cores": 64}, busy_neuron_ls())
    assert capacity_check(4, 16, facts, 2000.0, 240.0) == (3, [
        "cores 0-15 are held by pid 4242 (another process), so range(s) 0-15 are not available"])
    n, reasons = capacity_check(4, 16, facts, 500.0, 240.0)
    assert n == 2 and "host RAM: 500 GiB free / ~240 GiB per server while loading = 2 at once" in reasons[-1]
    n, reasons = capacity_check(4, 16, facts, 100.0, 240.0)
    assert n == 1 and "launching one at a time" in reasons[-1]
    n, reasons = capacity_check(4, 16, facts, None, 240.0)
    assert n == 3 and "host RAM not checked" in reasons[-1]
    assert capacity_check(1, 16, CoreFacts(64, busy_known=True), 10.0, 240.0)[0] == 1
    assert capacity_check(2, 16, plan_ranges(64, 16, 2, set()), 2000.0, 240.0) == (2, [])


def test_ram_estimate():
    assert estimate_ram_per_server_gib(None) is None
    assert estimate_ram_per_server_gib(234 * GIB) == pytest.approx(242.0)


# --- ports -----------------------------------------------------------------------------------------

def test_arm_ports_skip_ports_in_use_and_avoided():
    assert arm_ports(8000, 4) == [8000, 8001, 8002, 8003]
    taken = {8001, 8003}
    assert arm_ports(8000, 3, lambda p: p in taken) == [8000, 8002, 8004]
    assert arm_ports(61233, 3, avoid=[root_comm_port(range(0, 16)), root_comm_port(range(16, 32))]) == \
        [61233, 61235, 61236]
    assert arm_ports(8000, 0) == []
    assert root_comm_port([16, 17]) == 61250


def test_arm_ports_errors():
    with pytest.raises(PlacementError, match="only 1 free port"):
        arm_ports(65534, 3, lambda p: p == 65535)
    with pytest.raises(PlacementError, match="not a TCP port"):
        arm_ports(0, 1)
    with pytest.raises(PlacementError):
        arm_ports(8000, -1)
