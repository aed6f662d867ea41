"""The shapes of the files a run saves, checked when they are read back: report.json (compare, --open),
state.json (continuation, --steps results, --open) and the bench result files (continuation).

A file that parses but does not have the shape its readers rely on is *damaged*: the check returns one
sentence naming the first wrong key and what it holds ("matrix.arms[1] is text 'x', expected an object"), and
the caller refuses with one paragraph naming the file (exit 2, nothing written). Keys a reader does not use
are not checked, and a key that is absent or null is accepted wherever the readers already allow it (a report
from a run that stopped early lacks many), so every report and state this version writes passes.

The specs are plain data (Obj / Arr / Map / scalars), hand-written here next to what reads them; `problem(spec,
value)` walks one and returns the first mismatch or None.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from tui.core.bench.benchparse import BenchParseError, parse_result_json

# ---------------------------------------------------------------------------------------------------------
# The spec language
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scalar:
    kind: str  # "string", "number", "integer", "boolean", "any"
    nullable: bool = True
    choices: tuple[str, ...] = ()  # a string: one of these


@dataclass(frozen=True)
class Arr:
    items: Any
    nullable: bool = True
    length: int | None = None  # exactly this many items (an interval: 2)


@dataclass(frozen=True)
class Map:
    """An object with arbitrary keys (arm ids, workloads), each value of one shape."""
    values: Any
    nullable: bool = True


@dataclass(frozen=True)
class Obj:
    fields: Mapping[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    nullable: bool = True


STR = Scalar("string")
NUM = Scalar("number")
INT = Scalar("integer")
BOOL = Scalar("boolean")
ANY = Scalar("any")
REQ_STR = Scalar("string", nullable=False)

_EXPECTED = {"string": "text", "number": "a number", "integer": "a whole number", "boolean": "true or false"}


def describe(value: Any) -> str:
    """What a JSON value is, in words (one line, short)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:39] + "…"
        return f"text {shown!r}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}$")


def _key_path(path: str, key: str) -> str:
    if not _PLAIN_KEY.match(key):
        return f"{path}[{key[:40]!r}]"
    return f"{path}.{key}" if path else key


def _scalar_ok(kind: str, v: Any) -> bool:
    if kind == "any":
        return True
    if kind == "string":
        return isinstance(v, str)
    if kind == "boolean":
        return isinstance(v, bool)
    if isinstance(v, bool):
        return False
    if kind == "integer":
        return isinstance(v, int) or (isinstance(v, float) and v.is_integer())
    return isinstance(v, (int, float))


def problem(spec: Any, value: Any, path: str = "") -> str | None:
    """The first place where `value` does not have the shape `spec`, as one sentence; None when it does."""
    where = path or "the file"
    if value is None:
        return None if spec.nullable else f"{where} is null, expected {_expected(spec)}"
    if isinstance(spec, Scalar):
        if not _scalar_ok(spec.kind, value):
            return f"{where} is {describe(value)}, expected {_EXPECTED[spec.kind]}"
        if spec.choices and value not in spec.choices:
            return f"{where} is {describe(value)}, expected one of {', '.join(spec.choices)}"
        return None
    if isinstance(spec, Arr):
        if not isinstance(value, list):
            return f"{where} is {describe(value)}, expected a list"
        if spec.length is not None and len(value) != spec.length:
            return f"{where} has {len(value)} items, expected {spec.length}"
        for i, item in enumerate(value):
            p = problem(spec.items, item, f"{path}[{i}]")
            if p:
                return p
        return None
    if not isinstance(value, dict):
        return f"{where} is {describe(value)}, expected an object"
    if isinstance(spec, Map):
        for k, v in value.items():
            p = problem(spec.values, v, _key_path(path, str(k)))
            if p:
                return p
        return None
    for k in spec.required:
        if k not in value:
            return f"{_key_path(path, k)} is missing"
    for k, sub in spec.fields.items():
        if k in value:
            p = problem(sub, value[k], _key_path(path, k))
            if p:
                return p
    return None


def _expected(spec: Any) -> str:
    if isinstance(spec, Scalar):
        return _EXPECTED.get(spec.kind, "a value")
    return "a list" if isinstance(spec, Arr) else "an object"


# ---------------------------------------------------------------------------------------------------------
# report.json (tui/core/results/report.py build_report; read by compare, --open and the gates)
# ---------------------------------------------------------------------------------------------------------

NUMS = Arr(NUM)
CI95 = Arr(NUM, length=2)
STAT = Obj({"mean": NUM, "sd": NUM, "ci95": CI95, "values": NUMS, "n": INT})
SPEEDUP = Obj({"ratio": NUM, "ci95": CI95, "unbounded": BOOL})

RUN_NUMBERS = ("output_throughput", "request_throughput", "total_token_throughput", "duration_s",
               *(f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "median", "p90", "p99")),
               "acceptance_rate", "acceptance_length")
BENCH = Obj({**{k: NUM for k in RUN_NUMBERS}, "completed": INT, "failed": INT, "num_prompts": INT,
             "per_position_acceptance": NUMS, "acceptance_source": STR, "num_drafts": INT, "draft_tokens": INT,
             "accepted_tokens": INT, "dataset_mode": STR, "workload": STR, "result_file": STR,
             "result_sha256": STR, "result_bytes": INT, "command": STR, "argv": Arr(STR),
             "concurrency": INT, "request_goodput": NUM, "goodput_slo": Obj(),
             "timeseries": Obj({"interval_s": NUM, "windows": Arr(Obj({"t0": NUM, "t1": NUM,
                                                                      "generation_tokens": INT}))})})

CELL = Obj({
    "repeats": INT, "output_throughput": STAT, "speedup": SPEEDUP,
    **{k: NUM for k in ("median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms", "median_ttft_ms", "p90_ttft_ms",
                        "p99_ttft_ms", "acceptance_rate", "acceptance_length")},
    "per_position": Obj({"marginal": NUMS, "conditional": NUMS}),
    "al_check": Obj({"consistent": BOOL, "from_marginals": NUM}),
    "predicted_al": Obj(),
    "lossless": Obj({"prompts": INT, "identical": INT, "identical_share": NUM, "first_divergence": Arr(ANY)}),
})
ARM = Obj({"id": REQ_STR, "title": STR, "kind": STR, "method": STR, "draft": STR, "draft_name": STR,
           "num_speculative_tokens": INT, "schedule": BOOL, "status": STR, "startup_s": NUM, "cache_hits": INT,
           "cache_misses": INT},
          required=("id",), nullable=False)
SELECTION = Obj({"method": STR, "indifference": NUM, "confidence": NUM, "looks": INT, "configs": INT, "df": INT,
                 "sd_log": NUM, "variance_model": STR, "bartlett_p": NUM, "critical": NUM, "order": Arr(STR),
                 "repeats": Map(INT), "best_set": Arr(STR), "eliminated": Map(STR), "good": Arr(STR),
                 "contenders": Arr(STR), "unmeasured": Arr(STR), "preferred": STR, "settled": BOOL, "pick": STR,
                 "vs_best": Map(Arr(NUM))})
RECOMMENDATION = Obj({"verdict": STR, "arm": STR, "candidate": STR, "text": STR, "reason": STR, "overlap": Arr(ANY),
                      "stop_tuning": BOOL, "repeats_needed": INT, "contenders": Arr(STR), "selection": SELECTION})
MATRIX = Obj({"workloads": Arr(Scalar("string", nullable=False)), "arms": Arr(ARM), "cells": Map(Map(CELL)),
              "recommendation": Map(RECOMMENDATION), "noise_floor": Obj(), "coverage": Obj(),
              "notes": Map(Arr(STR))})

# report.json's "load" (a load sweep: tui/core/results/load.py analyze, plus the results step's schedule
# verification and ready profile), read by report.md, the figures, the charts view and --expect. Every key a reader
# walks is typed, so a damaged sweep is refused when the report is read back instead of failing in a chart.
INTERVAL = Obj({"mean": NUM, "ci95": CI95})
VERDICT = Scalar("string", choices=("pays", "not_proven", "loses", "no_baseline", "not_measured"))
LEVELS = Arr(Scalar("integer", nullable=False))
# tui/core/results/statement.py: where an arm pays, is not proven and loses (every text and chart marker reads it)
STATEMENT = Obj({"label": STR, "by_level": Map(VERDICT), "levels": Map(LEVELS),
                 "runs": Arr(Obj({"verdict": VERDICT, "levels": LEVELS}, nullable=False)),
                 "changes": Arr(Obj({"after": Scalar("number", nullable=False), "before": Scalar("number", nullable=False),
                                     "kind": STR, "verb": STR, "text": STR}, required=("after", "before"),
                                    nullable=False)),
                 "monotone": BOOL, "note": STR, "range_text": STR, "text": STR, "last_pays": INT, "first_loses": INT})
SLO_STATUS = Scalar("string", choices=("meets", "misses", "not_measured", "no_goodput"))
SCHEDULE_BASIS = Obj({"measured": Arr(Obj({"level": INT, "k": INT, "verdict": STR, "from": INT}, nullable=False)),
                      "inferred": Arr(Obj({"start": INT, "end": INT, "k": INT, "from": INT}, nullable=False)),
                      "tail": Obj({"above": INT, "k": INT}), "rule": STR, "k0_note": STR, "text": STR})
LOAD_LEVEL = Obj({"key": STR, "repeats": INT, "measured": BOOL, "throughput": INTERVAL, "speedup": SPEEDUP,
                  "verdict": VERDICT, "slo_status": SLO_STATUS,
                  **{f"{s}_{m}_ms": NUM for m in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "median", "p90",
                                                                                          "p99")},
                  "acceptance_rate": NUM, "acceptance_length": NUM, "per_position": NUMS, "goodput": INTERVAL,
                  "meets_slo": BOOL}, nullable=True)
LOAD_ARM = Obj({"label": STR, "title": STR, "k": INT, "levels": Map(LOAD_LEVEL), "pays": Arr(INT),
                "not_proven": Arr(INT), "loses": Arr(INT), "range_text": STR,
                "crossover": Obj({"last_pays": INT, "first_loses": INT, "text": STR,
                                  "transitions": Arr(Obj({"after": NUM, "before": NUM, "kind": STR, "verb": STR,
                                                          "text": STR}, nullable=False))}),
                "sustains_slo_up_to": INT,
                "statement": STATEMENT, "slo_stop": Obj({"level": INT, "status": SLO_STATUS})})
LOAD_BEST = Obj({"arm": STR, "k": INT, "verdict": STR, "candidate": STR, "text": STR, "label": STR,
                 "inherit": Obj({"from": INT, "k": INT}),
                 "candidate_label": STR,
                 "ahead": Arr(Obj({"arm": STR, "label": STR, "gain": NUM, "ci95": CI95, "repeats_needed": INT},
                                  nullable=False))})
DRIFT = Obj({"drift": BOOL, "text": STR})
LOAD_WORKLOAD = Obj({"arms": Map(LOAD_ARM), "best": Map(LOAD_BEST), "schedule": Arr(Arr(INT, length=3)),
                     "schedule_text": STR, "schedule_basis": SCHEDULE_BASIS, "max_k": INT, "slo_text": STR,
                     "model": Obj(), "drift": Map(Map(DRIFT)),
                     "schedule_draft": Obj({"method": STR, "draft": STR})})
LOAD = Obj({"levels": Arr(Scalar("integer", nullable=False)), "slo": Obj(), "attainment": NUM,
            "workloads": Map(LOAD_WORKLOAD), "coverage": STR,
            "schedule_verification": Obj({"status": STR, "text": STR, "arm": STR,
                                          "schedule": Arr(Arr(INT, length=3))}),
            "schedule_profile": STR, "schedule_profile_note": STR})
# report.json's "timeseries": {arm: {bench key: [{"repeat": r, "windows": [/metrics counter deltas]}]}}
WINDOW = Obj({"t0": NUM, "t1": NUM, "generation_tokens": NUM, "draft_tokens": NUM, "accepted_tokens": NUM,
              "num_drafts": NUM, "per_position": NUMS}, nullable=False)
TIMESERIES = Map(Map(Arr(Obj({"repeat": INT, "windows": Arr(WINDOW)}, nullable=False))))

REPORT = Obj({
    "schema": REQ_STR,
    "profile": STR,
    "simulated": BOOL,
    "exit_code": INT,
    "run_dir": STR,
    "verdict": Obj({"ok": BOOL, "text": STR}),
    "models": Obj({"target": STR, "draft": STR}),
    "settings": Obj({"platform": STR, "target": STR, "draft": STR, "method": STR, "num_speculative_tokens": INT}),
    "requested_steps": Arr(STR),
    "steps": Arr(Obj({"id": REQ_STR, "title": STR, "status": STR, "seconds": NUM, "summary": STR},
                     required=("id",), nullable=False)),
    "runs": Map(BENCH),
    "comparison": Map(NUM),
    "diagnostics": Arr(Obj({"id": STR, "severity": Scalar("string", choices=("error", "warning", "info")),
                            "title": STR, "evidence": Arr(STR), "remedy": STR, "step": STR, "setting": STR,
                            "suggest": STR})),
    "matrix": MATRIX,
    "load": LOAD,
    "timeseries": TIMESERIES,
    "figures": Arr(Obj({"name": STR, "png": STR, "svg": STR})),
    "metrics": Map(NUM),
}, required=("schema",), nullable=False)


def report_problem(report: Any) -> str | None:
    """Why a parsed report.json cannot be read back (one sentence), or None."""
    return problem(REPORT, report)


# ---------------------------------------------------------------------------------------------------------
# state.json: the facts each step saved (tui/core/store/rundir.py checks the frame: profile, steps, statuses, owner)
# ---------------------------------------------------------------------------------------------------------

PHASE = Obj({"phase": STR, "seconds": NUM, "reported_s": NUM, "failed": BOOL})
STEP_FACTS = Obj({
    "bench": BENCH,
    "repeats": Map(Arr(BENCH)),
    "startup": Obj({"seconds": NUM, "phases": Arr(PHASE), "cache_hits": INT, "cache_misses": INT}),
    "smoke": Obj({"text": STR, "passed": BOOL, "matches_baseline": BOOL, "why": STR}),
    "placement": Obj({"port": INT, "neuron_visible_devices": STR}),
    "probe": Map(Obj({"texts": Arr(ANY), "per_request": Arr(ANY), "endpoint": STR})),
    # the dataset step's facts
    "path": STR, "sha256": STR, "bytes": INT, "lines": INT, "verified": BOOL, "source": STR,
})


def state_facts_problem(state: Mapping[str, Any]) -> str | None:
    """Why the saved facts of a state.json (already checked by rundir for its frame) cannot be read back."""
    for sid, st in (state.get("steps") or {}).items():
        if isinstance(st, dict) and isinstance(st.get("facts"), dict):
            p = problem(STEP_FACTS, st["facts"], f"steps.{sid}.facts")
            if p:
                return p
    return None


# ---------------------------------------------------------------------------------------------------------
# Bench result files (`vllm bench serve --save-result`, read by tui/core/bench/benchparse.py)
# ---------------------------------------------------------------------------------------------------------


def result_problem(path: Path) -> str | None:
    """Why a bench result file cannot stand for a benchmark (not JSON, not the shape bench writes), or None."""

    try:
        parse_result_json(Path(path))
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    except BenchParseError as exc:
        why = str(getattr(exc, "problem", None) or exc)
        return why if len(why) <= 200 else why[:199] + "…"
    except (ValueError, TypeError) as exc:
        return f"is not a bench result ({exc})"
    return None


def load_json(path: Path) -> tuple[Any, str | None]:
    """(parsed JSON, None) or (None, why it cannot be parsed: unreadable, not UTF-8, not JSON, empty)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
    if not text.strip():
        return None, "is empty"
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, f"is not valid JSON ({exc})"


__all__ = ["Obj", "Arr", "Map", "Scalar", "problem", "describe", "report_problem", "state_facts_problem",
           "result_problem", "load_json", "REPORT", "STEP_FACTS", "BENCH", "MATRIX", "LOAD", "TIMESERIES"]
