"""`--expect` gates for automation: `--expect 'speedup>=1.15' --expect 'acceptance>=60'`.

An expectation is NAME OP NUMBER. NAME is one of the flat gate metrics (GATE_METRICS, computed from
report.json by gate_metrics and stored there by the run as "metrics"), a flat metric at one bench key of a tune
run (`speedup@sonnet`, `speedup@sonnet@c4`: METRIC@KEY, a load sweep's keys being WORKLOAD@cN), or a dotted path
into report.json (`comparison.median_tpot_ratio`, `matrix.cells.eagle3-k1.sonnet.output_throughput.mean`, a load
sweep's `matrix.cells.eagle3-k1.sonnet@c4.speedup.ratio` and `load.workloads.sonnet.arms.eagle3-k1.levels.4.speedup.ratio`;
list items by index, `runs.eagle3.per_position_acceptance.0`). OP is one of >=, >, <=, <, ==. A metric the
report does not have fails its gate, with a message naming it. Before the run (check_producible) a name the run
cannot produce is refused, naming what it can: an arm, workload, bench key or level the profile does not have (a
plain workload where a load sweep files its numbers under WORKLOAD@cN), a tune-only key on a two-arm run.

For a matrix (tune) run the flat metrics describe the recommended arm on the first bench key (METRIC@KEY: on that
key); where the
recommendation is no speculative arm (keep the baseline, not proven, stop tuning) they describe the speculative
arm with the highest mean output throughput there, so `speedup>=1.15` still compares a real speedup.
`speedup_lo` is the lower bound of that arm's Fieller interval: an arm pays only when it is above 1
(`--expect 'speedup_lo>1'`); with one repeat, or where the interval is unbounded, there is none and the gate
fails saying why.
"""

from __future__ import annotations

import json
import math
import operator
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable
from tui.core.plan.arms import arms_of, bench_keys, is_tune, levels_of, repeats_of, workloads_of

GATE_METRICS: dict[str, str] = {
    "speedup": "output throughput speedup over the baseline (x)",
    "speedup_lo": "lower end of the speedup's 95% interval (tune runs with repeats)",
    "acceptance": "acceptance rate (percent)",
    "acceptance_length": "acceptance length (tokens per draft step)",
    "tpot_ratio": "median TPOT, speculative / baseline",
    "ttft_ratio": "median TTFT, speculative / baseline",
    "baseline_tok_s": "baseline output throughput (tok/s)",
    "spec_tok_s": "speculative output throughput (tok/s)",
}

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt,
    "==": lambda a, b: math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12),
}

_EXPR = re.compile(r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_.@\-]*)\s*(?P<op>>=|<=|==|>|<)\s*"
                   r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*%?\s*$")


@dataclass(frozen=True)
class Expectation:
    name: str
    op: str
    value: float

    @property
    def text(self) -> str:
        return f"{self.name}{self.op}{self.value:g}"

    @property
    def flat(self) -> tuple[str, str | None] | None:
        """(metric, bench key or None) for a flat name (`speedup`, `speedup@sonnet@c4`); None for a dotted path."""
        if "." in self.name:
            return None
        metric, _, key = self.name.partition("@")
        return metric, (key or None)


@dataclass(frozen=True)
class GateResult:
    expectation: Expectation
    actual: float | None
    ok: bool
    message: str


def _allowed() -> str:
    return (f"names: {', '.join(GATE_METRICS)} (a tune run's at one bench key: NAME@KEY, e.g. speedup@sonnet@c4), "
            "or a dotted path into report.json such as comparison.median_tpot_ratio or "
            f"matrix.cells.eagle3-k1.sonnet@c4.speedup.ratio; operators: {', '.join(OPS)}")


def parse_expect(text: str) -> Expectation:
    """'speedup>=1.15' → Expectation('speedup', '>=', 1.15). ValueError (one paragraph naming the text and the
    allowed names and operators) for anything else."""
    m = _EXPR.match(text or "")
    if not m:
        raise ValueError(f"--expect {text!r} is not an expectation; write NAME OP NUMBER, e.g. 'speedup>=1.15' "
                         f"or 'acceptance>=60' ({_allowed()}).")
    name = m.group("name")
    metric, at, key = name.partition("@")
    if "." not in name and metric not in GATE_METRICS:
        raise ValueError(f"--expect {text!r}: unknown name {metric!r} ({_allowed()}).")
    if "." not in name and at and not re.fullmatch(r"[A-Za-z0-9_\-]+(@c\d+)?", key):
        raise ValueError(f"--expect {text!r}: {key!r} is not a bench key; write METRIC@WORKLOAD or "
                         f"METRIC@WORKLOAD@cN ({_allowed()}).")
    if name.startswith(".") or name.endswith(".") or ".." in name:
        raise ValueError(f"--expect {text!r}: {name!r} is not a dotted path ({_allowed()}).")
    value = float(m.group("value"))
    if not math.isfinite(value):
        raise ValueError(f"--expect {text!r}: the value must be a finite number ({_allowed()}).")
    return Expectation(name, m.group("op"), value)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _ratio(a: Any, b: Any) -> float | None:
    a, b = _num(a), _num(b)
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 4)


def _matrix_arm_cell(matrix: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    """The cell the flat metrics of a matrix describe at bench key `key` (None: the first; see the module
    docstring); {} where none."""
    wls = [key] if key else (matrix.get("workloads") or [])
    if not wls:
        return {}
    cells = matrix.get("cells") or {}
    spec = [a for a in matrix.get("arms") or [] if a.get("kind") != "baseline"]
    rec = ((matrix.get("recommendation") or {}).get(wls[0]) or {}).get("arm")
    arm = next((a for a in spec if a.get("id") == rec), None)
    if arm is None:
        means = {a.get("id"): _num((((cells.get(a.get("id")) or {}).get(wls[0]) or {}).get("output_throughput") or {})
                                   .get("mean")) for a in spec}
        arm = max((a for a in spec if means[a.get("id")] is not None), key=lambda a: means[a["id"]], default=None)
    return ((cells.get(arm["id"]) or {}).get(wls[0]) or {}) if arm else {}


def _why_missing(report: dict[str, Any], name: str, key: str | None = None) -> str:
    """Why a flat metric has no value: the speedup interval's lower bound of a one-repeat or unbounded interval."""
    matrix = report.get("matrix")
    if name == "speedup_lo" and isinstance(matrix, dict) and matrix.get("cells"):
        sp = _matrix_arm_cell(matrix, key).get("speedup") or {}
        if sp.get("unbounded"):
            return "the speedup interval is unbounded (the baseline's spread is too large for a ratio)"
        if sp.get("ratio") is not None and not sp.get("ci95"):
            return "one repeat: the speedup has no interval"
    return "the run did not measure it"


def _matrix_metrics(matrix: dict[str, Any], key: str | None = None) -> dict[str, float | None]:
    wls = [key] if key else (matrix.get("workloads") or [])
    arms = matrix.get("arms") or []
    cells = matrix.get("cells") or {}
    out: dict[str, float | None] = {k: None for k in GATE_METRICS}
    if not wls:
        return out
    wl = wls[0]

    def cl(aid: str | None) -> dict[str, Any]:
        return ((cells.get(aid) or {}).get(wl) or {}) if aid else {}

    base = next((a for a in arms if a.get("kind") == "baseline"), None)
    bc = cl(base.get("id")) if base else {}
    ac = _matrix_arm_cell(matrix, key)
    sp = ac.get("speedup") or {}
    out.update(
        speedup=_num(sp.get("ratio")),
        speedup_lo=_num((sp.get("ci95") or [None])[0]),
        acceptance=_num(ac.get("acceptance_rate")),
        acceptance_length=_num(ac.get("acceptance_length")),
        tpot_ratio=_ratio(ac.get("median_tpot_ms"), bc.get("median_tpot_ms")),
        ttft_ratio=_ratio(ac.get("median_ttft_ms"), bc.get("median_ttft_ms")),
        baseline_tok_s=_num((bc.get("output_throughput") or {}).get("mean")),
        spec_tok_s=_num((ac.get("output_throughput") or {}).get("mean")),
    )
    return out


def gate_metrics(report: dict[str, Any], key: str | None = None) -> dict[str, float | None]:
    """The flat gate names (GATE_METRICS) from a report.json dict; None where the report has no value. A
    report with a non-empty "matrix" (tune run) is read from it (at bench key `key`, None: the first), a two-arm
    run from runs / comparison (it has no bench keys: a key gives no values)."""
    matrix = report.get("matrix")
    if isinstance(matrix, dict) and matrix.get("cells"):
        return _matrix_metrics(matrix, key)
    if key is not None:
        return {k: None for k in GATE_METRICS}
    runs = report.get("runs") or {}
    comp = report.get("comparison") or {}
    b = runs.get("baseline") or {}
    e = runs.get("eagle3") or {}
    return {
        "speedup": _num(comp.get("output_throughput_speedup")),
        "speedup_lo": None,
        "acceptance": _num(e.get("acceptance_rate")),
        "acceptance_length": _num(e.get("acceptance_length")),
        "tpot_ratio": _num(comp.get("median_tpot_ratio")),
        "ttft_ratio": _num(comp.get("median_ttft_ratio")),
        "baseline_tok_s": _num(b.get("output_throughput")),
        "spec_tok_s": _num(e.get("output_throughput")),
    }


_MISSING = object()


def lookup_path(report: Any, path: str) -> Any:
    """report["a"]["b"][0]... for 'a.b.0'; _MISSING where a part is absent. Keys containing dots (none in the
    contract) are matched greedily: 'a.b.c' tries key 'a.b' when 'a' is not there."""
    parts = path.split(".")
    cur = report
    i = 0
    while i < len(parts):
        if isinstance(cur, dict):
            for j in range(len(parts), i, -1):  # longest key first
                key = ".".join(parts[i:j])
                if key in cur:
                    cur, i = cur[key], j
                    break
            else:
                return _MISSING
        elif isinstance(cur, list) and re.fullmatch(r"-?\d+", parts[i]):
            idx = int(parts[i])
            if not -len(cur) <= idx < len(cur):
                return _MISSING
            cur, i = cur[idx], i + 1
        else:
            return _MISSING
    return cur


def _fmt(v: float) -> str:
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.1f}"


def evaluate(expectations: Iterable[Expectation], report: dict[str, Any]) -> list[GateResult]:
    """Each expectation against the report: a flat name from gate_metrics(report) (or the report's own
    "metrics" where it carries a name gate_metrics has no value for), a dotted path otherwise."""
    stored = report.get("metrics") if isinstance(report.get("metrics"), dict) else {}
    results = []
    for ex in expectations:
        if ex.flat is not None:
            metric, key = ex.flat
            actual = gate_metrics(report, key).get(metric)
            if actual is None and key is None:
                actual = _num(stored.get(metric))
            if actual is None:
                at = f" at {key}" if key else ""
                results.append(GateResult(ex, None, False, f"✗ {ex.text}: report.json has no value for "
                                          f"'{metric}'{at} ({GATE_METRICS[metric]}): "
                                          f"{_why_missing(report, metric, key)}"))
                continue
        else:
            raw = lookup_path(report, ex.name)
            if raw is _MISSING:
                results.append(GateResult(ex, None, False, f"✗ {ex.text}: report.json has no '{ex.name}'"))
                continue
            actual = _num(raw)
            if actual is None:
                shown = json.dumps(raw)[:60] if raw is not None else "null"
                results.append(GateResult(ex, None, False, f"✗ {ex.text}: '{ex.name}' in report.json is {shown}, "
                                          "not a number"))
                continue
        ok = OPS[ex.op](actual, ex.value)
        results.append(GateResult(ex, actual, ok, f"{'✓' if ok else '✗'} {ex.text}: {ex.name} = {_fmt(actual)}"
                                  + ("" if ok else " — expectation failed")))
    return results


REPORT_KEYS = ("schema", "profile", "simulated", "exit_code", "run_dir", "generated", "verdict", "models", "settings",
               "versions", "dataset", "commands", "step_titles", "requested_steps", "steps", "runs", "comparison",
               "diagnostics", "matrix", "bench_commands", "host", "checks", "launches", "metrics", "load",
               "timeseries", "figures")
COMPARISON_KEYS = ("output_throughput_speedup", "median_tpot_ratio", "median_ttft_ratio")


def _unproducible(ex: Expectation, profile: Any) -> str | None:
    """Why a run of `profile` cannot produce the value `ex` names (None when it can, or cannot tell)."""
    tune = is_tune(profile)
    arms = [a.id for a in arms_of(profile)]
    wls = workloads_of(profile)
    levels = levels_of(profile) or []
    keys = bench_keys(profile) if tune else []
    kind = "a load sweep" if levels else "a tune run" if tune else "a two-arm run"

    def flat(name: str) -> str | None:
        if name == "speedup_lo" and not tune:
            return ("speedup_lo is the lower end of a tune run's speedup interval over repeats; this profile is a "
                    "two-arm run (one bench per arm, no interval): gate on 'speedup' instead, or add a [tune] table")
        if name == "speedup_lo" and repeats_of(profile) < 2:
            return "speedup_lo needs an interval, and tune.repeats = 1 gives none: set tune.repeats to 2 or more"
        return None

    def bench_key(key: str, where: str) -> str | None:
        if key in keys:
            return None
        if levels and key in wls:
            return (f"{where} '{key}' is a workload, and {kind} files its numbers per level: its bench keys are "
                    f"{', '.join(keys)}")
        return f"{where} '{key}' is not a bench key of this profile (its bench keys: {', '.join(keys)})"

    if ex.flat is not None:
        metric, key = ex.flat
        if key is not None:
            if not tune:
                return (f"{metric}@{key} names a bench key, and this profile is a two-arm run (no matrix): gate on "
                        f"'{metric}' instead")
            why = bench_key(key, "bench key")
            if why:
                return why
        return flat(metric)
    parts = ex.name.split(".")
    top = parts[0]
    if top not in REPORT_KEYS:
        return f"report.json has no '{top}' (its keys: {', '.join(REPORT_KEYS)})"

    def arm_at(i: int, where: str) -> str | None:
        if len(parts) > i and parts[i] not in arms:
            return f"{where} '{parts[i]}' is not an arm of this profile (its arms: {', '.join(arms)})"
        return None

    if top == "metrics" and len(parts) > 1:
        if parts[1] not in GATE_METRICS:
            return f"metrics has no '{parts[1]}' (its names: {', '.join(GATE_METRICS)})"
        return flat(parts[1])
    if top in ("matrix", "timeseries") and not tune:
        return f"'{top}' is written by tune runs only; this profile is {kind}: use runs.* or comparison.*"
    if top == "matrix":
        if len(parts) > 1 and parts[1] == "cells":
            why = arm_at(2, "arm")
            if why:
                return why
            if len(parts) > 3:
                return bench_key(parts[3], "bench key")
        if len(parts) > 2 and parts[1] in ("recommendation", "noise_floor"):
            return bench_key(parts[2], "bench key")
        return None
    if top == "timeseries":
        return arm_at(1, "arm") or (bench_key(parts[2], "bench key") if len(parts) > 2 else None)
    if top == "load":
        if not levels:
            return (f"'load' is written by a load sweep ([tune] concurrency) only; this profile is {kind}: use "
                    "matrix.* or the flat names")
        if len(parts) > 1 and parts[1] == "workloads" and len(parts) > 2:
            if parts[2] not in wls:
                return (f"load.workloads has workloads, not bench keys: '{parts[2]}' is not one of this profile's "
                        f"({', '.join(wls)})")
            if len(parts) > 4 and parts[3] in ("arms", "drift"):
                why = arm_at(4, "arm")
                if why:
                    return why
                lv = parts[6] if parts[3] == "arms" and len(parts) > 6 and parts[5] == "levels" else (
                    parts[5] if parts[3] == "drift" and len(parts) > 5 else None)
                if lv is not None and lv not in [str(n) for n in levels]:
                    return f"level '{lv}' is not one of this sweep's levels ({', '.join(str(n) for n in levels)})"
            if len(parts) > 4 and parts[3] == "best" and parts[4] not in [str(n) for n in levels]:
                return f"level '{parts[4]}' is not one of this sweep's levels ({', '.join(str(n) for n in levels)})"
        return None
    if top in ("runs", "checks"):
        return arm_at(1, "arm")
    if top == "comparison":
        if tune:
            return ("'comparison' (baseline vs eagle3) is filled by two-arm runs only; this profile is a tune run: "
                    "use matrix.cells.<arm>.<bench key>.speedup.ratio or the flat name 'speedup'")
        if len(parts) > 1 and parts[1] not in COMPARISON_KEYS:
            return f"comparison has no '{parts[1]}' (its keys: {', '.join(COMPARISON_KEYS)})"
    return None


def check_producible(expectations: Iterable[Expectation], profile: Any) -> None:
    """Refuse (ValueError, one paragraph) an expectation naming a value a run of `profile` cannot produce: a tune-only
    metric on a two-arm run, an arm id or workload the profile does not have, a key report.json never has. Called
    before anything runs, so a gate that could only fail never costs a run."""
    for ex in expectations:
        why = _unproducible(ex, profile)
        if why:
            raise ValueError(f"--expect {ex.text!r} can never pass for profile {profile.name!r}: {why}. Nothing was "
                             "run.")


def parse_all(expect_texts: Iterable[str | Expectation]) -> list[Expectation]:
    """Parse every --expect text up front (a bad one raises ValueError before anything runs)."""
    return [t if isinstance(t, Expectation) else parse_expect(t) for t in expect_texts]


def apply_gates(report_path: str | Path, expect_texts: Iterable[str | Expectation]) -> tuple[bool, list[str]]:
    """Read report.json and check the expectations: (all passed, one line per expectation). A report that
    cannot be read fails every gate with one line saying why. Bad expression text raises ValueError (call
    parse_all before the run to report it as a usage error)."""
    exps = parse_all(expect_texts)
    if not exps:
        return True, []
    try:
        report = json.loads(Path(report_path).read_text(encoding="utf-8"))
        if not isinstance(report, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        return False, [f"✗ cannot check {', '.join(e.text for e in exps)}: {report_path} is unreadable ({why})"]
    results = evaluate(exps, report)
    return all(r.ok for r in results), [r.message for r in results]


__all__ = ["Expectation", "GateResult", "GATE_METRICS", "OPS", "parse_expect", "parse_all", "check_producible", "gate_metrics",
           "lookup_path", "evaluate", "apply_gates"]
