"""The arms of a run: the baseline server plus one speculative server per configuration.

A two-arm run (every profile without [tune]) has the steps of the tutorial, env → checkpoints → dataset →
baseline → eagle3 → results, and its files keep the tutorial's names (baseline.json, eagle3.json). A profile
with a [tune] table runs the tutorial's Step 3 as a matrix: the baseline arm, then one speculative arm per
named draft × `num_speculative_tokens` (ids such as `eagle3-k2`, or `eagle3-k2-redhat` when several drafts are
named), each benchmarked `repeats` times on every workload, then the results step compares them all.

Arms are steps: the engine runs, retries, resumes and reports each like any other step, and a front end
shows one pane per arm. This module only plans them. A speculative arm carries its own `SpeculativeSettings`
(`Arm.speculative`: the profile's [speculative] table with the arm's method, draft and k), which its server
argv is built from together with the profile (`commands.serve_argv(profile, arm.speculative)`); no arm needs a
profile of its own.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from tui.core.plan.commands import serve_argv
from tui.core.events import STEP_IDS, STEP_TITLES
from tui.core.profile.model import Profile
from tui.core.profile.sections import SpeculativeSettings

METHOD_TITLES = {"eagle3": "EAGLE3", "eagle": "EAGLE"}
PRE_STEPS = ("env", "checkpoints", "dataset")


@dataclass(frozen=True)
class Arm:
    id: str  # the step id, the prefix of the arm's files
    title: str  # "EAGLE3 k=2 (redhat)"
    short: str  # "k=2 redhat": a column heading that fits 80 columns
    kind: str  # "baseline" | "speculative"
    speculative: SpeculativeSettings | None = None  # the arm's --speculative-config; None for the baseline
    draft_name: str | None = None  # the [tune.drafts] name, None for the profile's own draft
    schedule: bool = False  # runs the load sweep's derived num_speculative_tokens_per_batch_size (schedule_arm)

    @property
    def method(self) -> str | None:
        return self.speculative.method if self.speculative else None

    @property
    def draft(self) -> str | None:
        """The draft model (repo id or path)."""
        return self.speculative.model if self.speculative else None

    @property
    def num_speculative_tokens(self) -> int | None:
        return self.speculative.num_speculative_tokens if self.speculative else None

    def as_dict(self) -> dict[str, Any]:
        """The arm as report.json and the run's facts write it (keys unchanged: report.json's `arms`)."""
        return {"id": self.id, "title": self.title, "short": self.short, "kind": self.kind, "method": self.method,
                "draft": self.draft, "draft_name": self.draft_name,
                "num_speculative_tokens": self.num_speculative_tokens, "schedule": self.schedule}


def is_tune(profile: Profile) -> bool:
    return profile.tune is not None


def _drafts(profile: Profile) -> list[tuple[str | None, str, str]]:
    """[(name, model, method)]: the [tune.drafts] tables, else the profile's own draft."""
    sp = profile.speculative
    named = profile.tune.drafts if profile.tune is not None else ()
    if not named:
        return [(None, sp.model, sp.method)]
    return [(d.name, d.model, d.method or sp.method) for d in named]


def arms_of(profile: Profile) -> list[Arm]:
    """The arms of a run, baseline first."""
    base = Arm("baseline", STEP_TITLES["baseline"], "baseline", "baseline")
    sp = profile.speculative
    if not is_tune(profile):
        return [base, Arm("eagle3", STEP_TITLES["eagle3"], "eagle3", "speculative", sp)]
    drafts = _drafts(profile)
    out = [base]
    for name, model, method in drafts:
        for k in profile.tune.num_speculative_tokens:  # type: ignore[union-attr]  (is_tune)
            sid = f"{method}-k{k}" + (f"-{name}" if name and len(drafts) > 1 else "")
            mt = METHOD_TITLES.get(method, method)
            suffix = f" ({name})" if name and len(drafts) > 1 else ""
            out.append(Arm(sid, f"{mt} k={k}{suffix}", f"k={k}" + (f" {name}" if suffix else ""), "speculative",
                           replace(sp, method=method, model=model, num_speculative_tokens=k), name))
    if schedule_verifiable(profile) is None:
        name, model, method = drafts[0]
        ks = profile.tune.num_speculative_tokens  # type: ignore[union-attr]
        out.append(Arm(f"{method}-schedule", f"{METHOD_TITLES.get(method, method)} schedule", "schedule",
                       "speculative", replace(sp, method=method, model=model, num_speculative_tokens=max(ks))
                       .with_extra(num_speculative_tokens_per_batch_size=SCHEDULE_PENDING), name, schedule=True))
    return out


SCHEDULE_PENDING = "<derived from the sweep's best k per level>"  # the plan's stand-in until the arm starts
# num_speculative_tokens_per_batch_size: a SpeculativeConfig field in every served release, 0.29 to 0.34, with its
# validator (vllm/v1/spec_decode/dynamic/utils.py) the same file in each (tui/core/data/vllm_facts.json)
DYNAMIC_SD_SINCE = (0, 29)


def schedule_verifiable(profile: Profile) -> str | None:
    """Why a tune run has no schedule arm (None: it has one). The arm benchmarks the sweep's derived
    num_speculative_tokens_per_batch_size at every level, against each fixed k: only with a concurrency sweep,
    tune.verify_schedule, one draft, and a platform whose vLLM has dynamic speculative decoding (vllm-neuron
    compiles its graphs for one fixed k). The vLLM version (>= 0.32) is checked when the arm starts."""
    t = profile.tune
    if t is None or len(t.concurrency) < 2:
        return "no concurrency sweep"
    if not t.verify_schedule:
        return "tune.verify_schedule = false"
    if profile.platform == "neuron":
        return ("vllm-neuron compiles its draft and verification graphs for one fixed k, so it has no dynamic "
                "speculative decoding (num_speculative_tokens_per_batch_size): the schedule is reported, not run")
    if len(_drafts(profile)) > 1:
        return "several drafts are tuned: a schedule names one draft, so it is reported per draft, not run"
    if (profile.speculative.extra or {}).get("num_speculative_tokens_per_batch_size") is not None:
        return "[speculative.extra] already sets num_speculative_tokens_per_batch_size"
    return None


def run_steps(profile: Profile) -> list[str]:
    """Every step of a run of this profile, in order."""
    if not is_tune(profile):
        return list(STEP_IDS)
    arms = arms_of(profile)
    fixed = [a.id for a in arms if not a.schedule]
    race = ["race"] if profile.tune is not None and len(profile.tune.rounds) > 1 else []
    return [*PRE_STEPS, *fixed, *race, *(a.id for a in arms if a.schedule), "results"]


def arm_by_id(profile: Profile, sid: str) -> Arm | None:
    return next((a for a in arms_of(profile) if a.id == sid), None)


def step_title(sid: str, profile: Profile | None = None) -> str:
    """A step's title: the tutorial's, or a tune run's speculative arm's ("EAGLE3 k=2")."""
    arm = arm_by_id(profile, sid) if profile is not None and is_tune(profile) else None
    if arm is not None and arm.speculative:
        return arm.title
    return STEP_TITLES.get(sid, sid)


def workloads_of(profile: Profile) -> list[str]:
    """The workloads each arm is benchmarked on: the tutorial's sonnet unless [tune] names others."""
    return list(profile.tune.workloads) if profile.tune is not None else ["sonnet"]


def repeats_of(profile: Profile) -> int:
    return profile.tune.repeats if profile.tune is not None else 1


LEVEL_SEP = "@c"  # a bench key of a concurrency sweep: "sonnet@c4" (workload sonnet at 4 concurrent requests)


def levels_of(profile: Profile) -> list[int] | None:
    """The concurrency levels of a tune run's load sweep ([tune] concurrency, ascending), None when the profile
    has none (every bench then runs at benchmark.max_concurrency, as before)."""
    levels = profile.tune.levels if profile.tune is not None else ()
    return list(levels) if levels else None


def level_key(workload: str, level: int | None) -> str:
    """The key a bench's numbers are filed under: the workload, or "workload@cN" in a concurrency sweep."""
    return workload if level is None else f"{workload}{LEVEL_SEP}{int(level)}"


def split_key(key: str) -> tuple[str, int | None]:
    """(workload, level) of a bench key ("sonnet@c4" -> ("sonnet", 4); "sonnet" -> ("sonnet", None))."""
    wl, sep, n = key.rpartition(LEVEL_SEP)
    if sep and wl and n.isdigit():
        return wl, int(n)
    return key, None


def bench_keys(profile: Profile) -> list[str]:
    """Every bench key of a run, workload-major: the workloads, or each workload at each concurrency level."""
    levels = levels_of(profile)
    return [level_key(wl, n) for wl in workloads_of(profile) for n in (levels or [None])]


def result_name(profile: Profile, arm_id: str, workload: str, repeat: int) -> str:
    """The bench result file of one repeat: `baseline.json` in a two-arm run (the tutorial's name), else
    `{arm}.{workload}.r{repeat}.json`, or `{arm}.{workload}.c{N}.r{repeat}.json` for a bench key of a
    concurrency sweep (`workload` may be a bench key, level_key)."""
    if not is_tune(profile):
        return f"{arm_id}.json"
    wl, level = split_key(workload)
    if level is not None:
        return f"{arm_id}.{wl}.c{level}.r{repeat}.json"
    return f"{arm_id}.{workload}.r{repeat}.json"


def is_arm_step(profile: Profile, sid: str) -> bool:
    return arm_by_id(profile, sid) is not None


def fingerprint(profile: Profile, arm: Arm) -> str:
    """What an arm's numbers depend on: its server argv, the benchmark settings, workloads and repeats. A run
    directory continued later keeps an arm that finished only while this is unchanged."""
    t = profile.tune
    tune: dict[str, Any] = {}
    if t is not None:  # the keys a two-arm run hashes as null (kept: a continued run's fingerprints stay equal)
        tune = {"workloads": list(t.workloads), "repeats": t.repeats, "probe_prompts": t.probe_prompts,
                "prompts_file": t.prompts_file, "seeds": [t.seed, t.vary_seed],
                "load": [list(t.concurrency), t.min_waves, t.slo.as_table() if t.slo else {}]}
    payload = {"serve": serve_argv(profile, arm.speculative), "benchmark": profile.data["benchmark"],
               "smoke": profile.data["smoke"], "workloads": tune.get("workloads"), "repeats": tune.get("repeats"),
               "probe_prompts": tune.get("probe_prompts"), "prompts_file": tune.get("prompts_file"),
               "arm": arm.as_dict(),
               "seeds": tune.get("seeds", [0, True]),  # the bench --seed of each repeat
               "load": tune.get("load", [[], None, {}])}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]
