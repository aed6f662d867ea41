"""Where parallel tune arms run: NeuronCore ranges (NEURON_VISIBLE_DEVICES), ports and a capacity check.

Pure: nothing here runs a process, reads a file or opens a socket; every fact is passed in (the env step's
stored facts, a parsed `neuron-ls -j`, a port predicate, free host RAM).

The rules (shared/reference/neuron.md §1.7 and its 2026-12 update):
- vllm-neuron selects **logical** NeuronCores with NEURON_VISIBLE_DEVICES (`0-15`, `16-31`, ...; unset means
  0..TP-1); NEURON_RT_VISIBLE_CORES must stay unset (the worker sets it per rank).
- The runtime reserves a core for one process until it exits, so concurrent servers need disjoint ranges.
- Ranges are contiguous and aligned to the tensor-parallel size (a server of TP16 gets 0-15, 16-31, 32-47 or
  48-63 on a trn2.48xlarge at LNC=2): one public report saw wrong tokens with TP8 on the non-adjacent range
  12-19 while 16-23 and 16-31 were fine.
- Each server needs its own HTTP port; the worker's collective root port is 61234 + the first core
  (NEURON_RT_ROOT_COMM_ID), so HTTP ports should stay clear of those.

Only launches run side by side; benchmarks still run one server at a time (host CPU and HBM-bandwidth
contention would skew an A/B measured at once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from tui.core.host.sysinfo import GIB, NeuronLs, parse_core_list, parse_neuron_ls, ranges

VAR = "NEURON_VISIBLE_DEVICES"
ROOT_COMM_PORT_BASE = 61234  # NEURON_RT_ROOT_COMM_ID port = base + first core (neuron.md §1.7)
PORT_MAX = 65535
RAM_OVERHEAD_GIB = 8.0  # per server, on top of the weights that pass through host RAM while loading


class PlacementError(ValueError):
    """A value that cannot be placed; the message is one paragraph naming the value and the fix."""


# ---------------------------------------------------------------------------------------------
# formatting and parsing
# ---------------------------------------------------------------------------------------------


def format_range(cores: Iterable[int]) -> str:
    """[16, ..., 31] -> "16-31"; [3] -> "3"; a broken set -> "0-3,8" (what NEURON_VISIBLE_DEVICES takes)."""
    return ranges(cores)


def _aligned(start: int, width: int) -> str:
    return format_range(range(start, start + width))


def _suggest(start: int, tp: int, width: int, total: int | None) -> str:
    """The aligned range(s) nearest to a range starting at `start`, e.g. "8-15 or 16-23"."""
    lo = max(0, (start // tp) * tp)
    cands = [s for s in (lo, lo + tp) if total is None or s + width <= total]
    if not cands and total is not None and total >= width:
        cands = [((total - width) // tp) * tp]
    if not cands:
        cands = [0]
    return " or ".join(_aligned(s, width) for s in dict.fromkeys(cands))


def aligned_ranges(tp: int, pp: int = 1, total_cores: int | None = None, most: int = 4) -> str:
    """The NEURON_VISIBLE_DEVICES values that work for a server of TP x PP cores: "0-15, 16-31, 32-47, 48-63"
    (every one when `total_cores` is known, else the first `most`, then "...")."""
    width = max(int(tp), 1) * max(int(pp), 1)
    n = total_cores // width if total_cores else most
    shown = [_aligned(i * width, width) for i in range(max(n, 0))]
    if not shown:
        return "none (the instance has fewer cores than one server needs)"
    return ", ".join(shown) + ("" if total_cores else ", ...")


def parse_visible_devices(value: str, tp: int | None = None, pp: int = 1,
                          total_cores: int | None = None) -> list[int]:
    """Parse and validate a NEURON_VISIBLE_DEVICES value ("0-15", "0,1,2,3", "16-31") into core ids.

    Checks: the syntax; one contiguous, ascending range without repeats; with `tp`, exactly TP x PP cores
    starting at a multiple of TP; with `total_cores`, cores that exist. Raises PlacementError otherwise."""
    text = str(value).strip()
    shown = f"{VAR}={value!r}"
    cores = parse_core_list(text) if text else None
    if cores is None:
        raise PlacementError(
            f"{shown} is not a list of logical NeuronCores. Write one range such as 0-15 or 16-31, or a comma "
            "list such as 0,1,2,3 (the core ids `neuron-ls` shows), or unset it to use cores 0..TP-1.")
    width = tp * max(int(pp), 1) if tp else len(cores)
    if tp is not None and tp < 1:
        raise PlacementError(f"tensor_parallel_size must be at least 1 to place {shown} (got {tp}).")
    if len(set(cores)) != len(cores) or cores != list(range(cores[0], cores[0] + len(cores))):
        fix = _suggest(cores[0], tp, width, total_cores) if tp else _aligned(min(cores), len(set(cores)))
        rep = sorted({c for c in cores if cores.count(c) > 1})
        raise PlacementError(
            f"{shown} selects cores {format_range(cores)} ({len(cores)} listed"
            + (f"; core{'s' if len(rep) > 1 else ''} {format_range(rep)} repeated" if rep else "")
            + "), which is not one contiguous ascending range without repeats. One report saw wrong tokens on a non-adjacent range, so use a "
            "contiguous range aligned to the tensor-parallel size, "
            f"e.g. {VAR}={fix}.")
    if tp is not None:
        world = f"tensor_parallel_size {tp}" + (f" x pipeline_parallel_size {pp} = {width}" if pp > 1 else "")
        if len(cores) != width:
            raise PlacementError(
                f"{shown} selects {len(cores)} logical cores but the server has {world} ranks: the plugin needs "
                f"exactly one core per rank. Use {VAR}={_suggest(cores[0], tp, width, total_cores)} (or unset it "
                f"for 0-{width - 1}), or change [server] tensor_parallel_size.")
        if cores[0] % tp:
            raise PlacementError(
                f"{shown} starts at core {cores[0]}, which is not a multiple of tensor_parallel_size {tp}. Ranges "
                f"are aligned to TP ({', '.join(_aligned(i * tp, width) for i in range(3))}, ...) because one report "
                "saw wrong tokens with TP8 on the unaligned range 12-19; use "
                f"{VAR}={_suggest(cores[0], tp, width, total_cores)}.")
    if total_cores is not None and cores[-1] >= total_cores:
        last = f"0-{total_cores - 1}" if total_cores > 0 else "none"
        raise PlacementError(
            f"{shown} selects cores up to {cores[-1]}, but this instance has {total_cores} logical cores "
            f"({last}). Choose a range inside it"
            + (f", e.g. {VAR}={_suggest(0, tp, width, total_cores)}." if tp and total_cores >= width else "."))
    return cores


def check_disjoint(assigned: Mapping[str, Sequence[int]]) -> list[str]:
    """One message per pair of arms whose core ranges overlap ({} -> [])."""
    items = [(name, set(c)) for name, c in assigned.items()]
    out: list[str] = []
    for i, (a, ca) in enumerate(items):
        for b, cb in items[i + 1:]:
            both = ca & cb
            if both:
                out.append(f"{a} ({format_range(ca)}) and {b} ({format_range(cb)}) share cores {format_range(both)}: "
                           "the runtime gives a core to one process only, so the later server would fail with "
                           "busy cores; give each arm its own aligned range.")
    return out


# ---------------------------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """Aligned ranges for `n_arms` servers of TP x PP cores each on an instance of `total_logical_cores`."""

    total_logical_cores: int
    tp: int
    pp: int
    n_arms: int
    busy_cores: frozenset[int]
    slots: tuple[tuple[int, ...], ...]    # every aligned range the instance has
    free: tuple[tuple[int, ...], ...]     # the slots without a busy core
    ranges: tuple[tuple[int, ...], ...]   # the slots the arms use: the first min(n_arms, len(free)) free ones
    reasons: tuple[str, ...] = ()         # why fewer than n_arms run at once (empty when all fit)

    @property
    def width(self) -> int:
        return self.tp * self.pp

    @property
    def parallel(self) -> int:
        """How many arms can run at once (0: not even one range is free)."""
        return len(self.ranges)

    def range_for(self, arm_index: int) -> tuple[int, ...]:
        """The cores of arm `arm_index` (0-based, in launch order); arms beyond `parallel` reuse the ranges in
        waves (arm i runs on range i % parallel after the arm before it there has stopped)."""
        if not self.ranges:
            raise PlacementError("no free aligned core range: " + " ".join(self.reasons))
        return self.ranges[arm_index % len(self.ranges)]

    def visible_devices(self, arm_index: int) -> str:
        """NEURON_VISIBLE_DEVICES for arm `arm_index`, e.g. "16-31"."""
        return format_range(self.range_for(arm_index))

    def waves(self) -> list[list[int]]:
        """Arm indices launched together: [[0, 1, 2, 3], [4, 5]] for six arms on four ranges."""
        if not self.ranges:
            return []
        p = len(self.ranges)
        return [list(range(i, min(i + p, self.n_arms))) for i in range(0, self.n_arms, p)]

    def summary(self) -> str:
        shown = ", ".join(format_range(r) for r in self.ranges) or "none"
        return (f"{self.parallel} of {self.n_arms} arm(s) at once on {shown} "
                f"(TP{self.tp}{f' x PP{self.pp}' if self.pp > 1 else ''}, {self.total_logical_cores} logical cores)")


def _holders_text(cores: Iterable[int], holders: Mapping[int, Iterable[int | None]] | None) -> str:
    if not holders:
        return ""
    pids = sorted({p for c in cores for p in holders.get(c, ()) if p is not None})
    return f" by pid {', '.join(map(str, pids))}" if pids else ""


def plan_ranges(total_logical_cores: int, tp: int, n_arms: int, busy_cores: Iterable[int] = (), *, pp: int = 1,
                holders: Mapping[int, Iterable[int | None]] | None = None) -> Placement:
    """Contiguous TP-aligned ranges (0-15, 16-31, ...) for `n_arms` servers, skipping any range that holds a busy
    core. `holders` (core -> pids, optional) only makes the reasons name the processes."""
    tp, pp, n_arms = int(tp), max(int(pp), 1), int(n_arms)
    if tp < 1:
        raise PlacementError(f"tensor_parallel_size must be at least 1 to place servers on NeuronCores (got {tp}).")
    if n_arms < 1:
        raise PlacementError(f"there must be at least one arm to place (got {n_arms}).")
    total = max(int(total_logical_cores or 0), 0)
    width = tp * pp
    busy = frozenset(c for c in busy_cores if 0 <= c < total)
    slots = tuple(tuple(range(s, s + width)) for s in range(0, total - width + 1, width))
    free = tuple(s for s in slots if not busy.intersection(s))
    used = free[:n_arms]
    reasons: list[str] = []
    if len(used) < n_arms:
        if not slots:
            reasons.append(f"not enough cores: a server of TP{tp}" + (f" x PP{pp}" if pp > 1 else "")
                           + f" needs {width} logical cores and the instance has {total}")
        elif len(slots) < n_arms:
            reasons.append(f"not enough cores for {n_arms} arms at once: {total} logical cores hold {len(slots)} "
                           f"aligned range(s) of {width} ({', '.join(format_range(s) for s in slots)})")
        taken = [s for s in slots if busy.intersection(s)]
        if taken:
            held = sorted(busy.intersection(c for s in taken for c in s))
            reasons.append(f"cores {format_range(held)} are held{_holders_text(held, holders)} (another process), so "
                           f"range(s) {', '.join(format_range(s) for s in taken)} are not available")
        if not used:
            reasons.append("no arm can start until cores are freed (`neuron-ls` lists the holders)")
    return Placement(total, tp, pp, n_arms, busy, slots, free, used, tuple(reasons))


# ---------------------------------------------------------------------------------------------
# facts from the env step
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoreFacts:
    """The NeuronCore facts placement needs, from ctx.shared["env"] and (for busy cores) `neuron-ls -j`."""

    total_logical_cores: int | None
    busy_cores: frozenset[int] = frozenset()
    holders: dict[int, tuple[int | None, ...]] = field(default_factory=dict)  # core -> pids holding it
    lnc: int | None = None
    hbm_bytes_per_core: int | None = None
    busy_known: bool = False       # False: no per-device processes were given, busy cores not checked
    notes: tuple[str, ...] = ()

    def plan(self, tp: int, n_arms: int, pp: int = 1) -> Placement:
        """plan_ranges over these facts (no cores known -> a plan with nothing free and the reason)."""
        p = plan_ranges(self.total_logical_cores or 0, tp, n_arms, self.busy_cores, pp=pp, holders=self.holders)
        if self.total_logical_cores is None:
            return Placement(0, p.tp, p.pp, p.n_arms, p.busy_cores, (), (), (),
                             ("the logical core count is unknown (neuron-ls did not run or failed)",))
        return p


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _devices(neuron_ls: Any) -> list[tuple[list[int], list[int | None], int | None]] | None:
    """[(core ids, holder pids, memory_size)] from a NeuronLs, env.json's "neuron_ls" block ({"parsed": ...}),
    NeuronLs.as_dict() ({"devices": [...]}) or raw `neuron-ls -j` output; None when nothing usable."""
    if neuron_ls is None:
        return None
    if isinstance(neuron_ls, NeuronLs):
        return [(list(d.core_ids), [p.pid for p in d.processes], d.memory_size) for d in neuron_ls.devices]
    if isinstance(neuron_ls, dict) and "parsed" in neuron_ls:
        return _devices(neuron_ls.get("parsed"))
    if isinstance(neuron_ls, dict) and isinstance(neuron_ls.get("devices"), list) and all(
            isinstance(d, dict) and "core_ids" in d for d in neuron_ls["devices"]):
        out = []
        for d in neuron_ls["devices"]:
            ids = [c for c in d.get("core_ids") or [] if _int(c) is not None]
            pids = [_int(p.get("pid")) for p in d.get("processes") or [] if isinstance(p, dict)]
            out.append((ids, pids, _int(d.get("memory_size"))))
        return out
    try:
        return _devices(parse_neuron_ls(neuron_ls))
    except ValueError:
        return None


def core_facts(env_facts: Mapping[str, Any] | None, neuron_ls: Any = None) -> CoreFacts:
    """CoreFacts from the env step's stored facts (ctx.shared["env"]: `logical_cores`, `lnc`, and `neuron_ls` if
    the step stores it) plus, optionally, `neuron_ls` given here (a NeuronLs, env.json's "neuron_ls" block,
    NeuronLs.as_dict() or raw `neuron-ls -j`), which is what carries the busy cores and their pids."""
    env = dict(env_facts or {})
    devs = _devices(neuron_ls if neuron_ls is not None else env.get("neuron_ls"))
    total = _int(env.get("logical_cores"))
    notes: list[str] = []
    if devs is None:
        notes.append("busy cores not checked: no neuron-ls device list was given")
        return CoreFacts(total, lnc=_int(env.get("lnc")), busy_known=False, notes=tuple(notes))
    if total is None:
        total = sum(len(ids) for ids, _, _ in devs) or None
    holders: dict[int, tuple[int | None, ...]] = {}
    for ids, pids, _ in devs:
        if pids:
            for c in ids:
                holders[c] = tuple(pids)
    per_core = {mem // len(ids) for ids, _, mem in devs if mem and ids}
    return CoreFacts(total, frozenset(holders), holders, _int(env.get("lnc")),
                     max(per_core) if per_core else None, True, tuple(notes))


# ---------------------------------------------------------------------------------------------
# capacity
# ---------------------------------------------------------------------------------------------


def estimate_ram_per_server_gib(weight_bytes_bf16: float | None) -> float | None:
    """An estimate of one server's peak host RAM: vllm-neuron's BF16 loader dequantizes and shards the
    checkpoint on the host, so assume the BF16 weights pass through host RAM once, plus RAM_OVERHEAD_GIB."""
    if not weight_bytes_bf16:
        return None
    return weight_bytes_bf16 / GIB + RAM_OVERHEAD_GIB


def capacity_check(n_arms: int, tp: int, cores: CoreFacts | Placement, host_ram_gib_free: float | None,
                   ram_per_server_gib: float | None, *, pp: int = 1) -> tuple[int, list[str]]:
    """(how many arms may launch at once, reasons). Limited by free aligned core ranges and by host RAM
    (free / per server, floored at 1 so a lone server is never refused on an estimate). 0 means no range is
    free. The reasons say why fewer than n_arms, and what was not checked."""
    plan = cores if isinstance(cores, Placement) else cores.plan(tp, n_arms, pp=pp)
    reasons = list(plan.reasons) + (list(cores.notes) if isinstance(cores, CoreFacts) else [])
    n = plan.parallel
    if n == 0:
        return 0, reasons
    if host_ram_gib_free is None or not ram_per_server_gib or ram_per_server_gib <= 0:
        if n > 1:
            reasons.append("host RAM not checked (free RAM or RAM per server unknown)")
        return n, reasons
    by_ram = math.floor(host_ram_gib_free / ram_per_server_gib)
    if by_ram < n:
        if by_ram < 1:
            reasons.append(f"host RAM: {host_ram_gib_free:.0f} GiB free, less than the ~{ram_per_server_gib:.0f} GiB "
                           "one server is estimated to need while loading; launching one at a time")
        else:
            reasons.append(f"host RAM: {host_ram_gib_free:.0f} GiB free / ~{ram_per_server_gib:.0f} GiB per server "
                           f"while loading = {by_ram} at once")
        n = max(1, by_ram)
    return n, reasons


# ---------------------------------------------------------------------------------------------
# ports
# ---------------------------------------------------------------------------------------------


def root_comm_port(cores: Sequence[int]) -> int:
    """The collective root port a server's workers use: 61234 + its first core (neuron.md §1.7)."""
    return ROOT_COMM_PORT_BASE + (min(cores) if cores else 0)


def arm_ports(base_port: int, n: int, in_use: Callable[[int], bool] | None = None, *,
              avoid: Iterable[int] = ()) -> list[int]:
    """n HTTP ports counting up from base_port (8000, 8001, ...), skipping each port `in_use(port)` says is taken
    and those in `avoid` (e.g. root_comm_port of each range). Raises PlacementError when the range runs out."""
    base_port, n = int(base_port), int(n)
    if not 1 <= base_port <= PORT_MAX:
        raise PlacementError(f"server.port = {base_port} is not a TCP port: choose one in 1-{PORT_MAX}, e.g. 8000.")
    if n < 0:
        raise PlacementError(f"cannot pick {n} ports")
    skip = set(avoid)
    out: list[int] = []
    port = base_port
    while len(out) < n:
        if port > PORT_MAX:
            raise PlacementError(
                f"only {len(out)} free port(s) from server.port = {base_port} up to {PORT_MAX}, {n} needed: choose a "
                "lower server.port or stop the servers holding these ports.")
        if port not in skip and not (in_use is not None and in_use(port)):
            out.append(port)
        port += 1
    return out


__all__ = [
    "CoreFacts", "Placement", "PlacementError", "VAR", "arm_ports", "capacity_check", "check_disjoint",
    "aligned_ranges", "core_facts", "estimate_ram_per_server_gib", "format_range", "parse_visible_devices", "plan_ranges",
    "root_comm_port",
]
