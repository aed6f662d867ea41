"""A profile's schema: every table and key, its type, default and allowed values, per platform where they
differ. profile/model.py loads and checks a profile against it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from tui.core.versions import DEMO_VLLM, served_text

# ---------------------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------------------

_MISSING = object()


PLATFORMS = ("neuron", "cuda", "cpu")


@dataclass(frozen=True)
class PerPlatform:
    """A default that depends on the profile's platform."""

    neuron: Any
    cuda: Any
    cpu: Any

    def get(self, platform: str) -> Any:
        return getattr(self, platform)


@dataclass(frozen=True)
class Spec:
    kind: str  # str | int | float | bool | list[str] | list[int] | table | strmap
    default: Any = _MISSING
    check: Callable[[Any], bool] | None = None
    allowed: str = ""  # human text for what is allowed

    @property
    def required(self) -> bool:
        return self.default is _MISSING

    def default_for(self, platform: str) -> Any:
        d = self.default
        return d.get(platform) if isinstance(d, PerPlatform) else d


def _rng(lo: float, hi: float) -> Callable[[Any], bool]:
    return lambda v: lo <= v <= hi


def _choice(*options: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in options), "one of " + ", ".join(repr(o) for o in options)


def _nonempty(v: Any) -> bool:
    return bool(str(v).strip()) if not isinstance(v, list) else len(v) > 0


def _zero_or(lo: int, hi: int) -> Callable[[Any], bool]:
    return lambda v: v == 0 or lo <= v <= hi


def _argv_ok(v: list[str]) -> bool:
    return len(v) == 0 or bool(v[0].strip())


SIM_FAULTS = (
    "none",
    "compile-failed",
    "compile-oom",
    "cores-busy",
    "engine-timeout",
    "draft-mismatch",
    "lossless-broken",
)

_method_check, _method_allowed = _choice("eagle3", "eagle")
_fault_check, _fault_allowed = _choice(*SIM_FAULTS)
_warm_check, _warm_allowed = _choice("auto", "off")
_dataset_check, _dataset_allowed = _choice("sonnet")
_platform_check, _platform_allowed = _choice(*PLATFORMS)
_NOT_SENT = "0 (vLLM's default: the flag is not sent)"

SCHEMA: dict[str, dict[str, Spec]] = {
    "": {
        "name": Spec("str", "", None, "a short profile name"),
        "description": Spec("str", "", None, "free text"),
        "extends": Spec("str", "", None, "a bundled profile name or a path (resolved when the file is loaded)"),
        "platform": Spec("str", "neuron", _platform_check, _platform_allowed),
    },
    "models": {
        "target": Spec("str", _MISSING, _nonempty, "a Hugging Face repo id or local path"),
        "draft": Spec("str", _MISSING, _nonempty, "a Hugging Face repo id or local path"),
        "prepare": Spec("list[str]", [], _argv_ok,
                        'an argv list run when a local model directory is missing, e.g. '
                        '["{vllm_python}", "{specdec_tools}/tinymodels.py", "--out", "DIR"], or [] for none'),
    },
    "server": {
        "command": Spec("list[str]", ["vllm"], _nonempty,
                        'a non-empty list of strings, e.g. ["vllm"] or ["{python}", "-m", "tui.sim"]'),
        "host": Spec("str", "127.0.0.1", _nonempty, "an interface address such as 127.0.0.1"),
        "port": Spec("int", 8000, _rng(1, 65535), "an integer from 1 to 65535"),
        "dtype": Spec("str", "bfloat16", *_choice("auto", "bfloat16", "float16", "float32")),
        "tensor_parallel_size": Spec("int", PerPlatform(neuron=16, cuda=1, cpu=1), _rng(1, 128),
                                     "an integer from 1 to 128"),
        "pipeline_parallel_size": Spec("int", 1, _rng(1, 128), "an integer from 1 to 128 (1: the flag is not sent)"),
        "max_num_seqs": Spec("int", 1, _zero_or(1, 4096), f"an integer from 1 to 4096, or {_NOT_SENT}"),
        "max_model_len": Spec("int", 768, _zero_or(16, 1_048_576), f"an integer from 16 to 1048576, or {_NOT_SENT}"),
        "max_num_batched_tokens": Spec("int", 512, _zero_or(1, 1_048_576),
                                       f"an integer from 1 to 1048576, or {_NOT_SENT}"),
        "enable_prefix_caching": Spec("bool", False, None, "true or false"),
        "enforce_eager": Spec("bool", False, None, "true or false (true sends --enforce-eager)"),
        "hf_overrides": Spec("table", {}, None, "a table (sent as JSON to --hf-overrides)"),
        "additional_config": Spec("table", {}, None, "a table (sent as JSON to --additional-config)"),
        "startup_timeout_s": Spec("float", 3600.0, _rng(1, 86400), "seconds, from 1 to 86400"),
        "stop_grace_s": Spec("float", 30.0, _rng(0, 600), "seconds, from 0 to 600"),
        "env": Spec("strmap", {}, None, "a table of string values"),
    },
    "speculative": {
        "method": Spec("str", "eagle3", _method_check, _method_allowed),
        "model": Spec("str", "", None, "a repo id or path (default: models.draft)"),
        "num_speculative_tokens": Spec("int", 1, _rng(1, 16), "an integer from 1 to 16"),
        "draft_tensor_parallel_size": Spec("int", 0, _rng(0, 128),
                                           "0 (unset: vLLM uses the target's TP), or an integer from 1 to 128"),
        "extra": Spec("table", {}, None,
                      "a table of further --speculative-config keys merged in as JSON, e.g. [speculative.extra] "
                      'rejection_sample_method = "synthetic", synthetic_acceptance_rates = [0.7, 0.4]'),
    },
    "dataset": {
        "name": Spec("str", "sonnet", _dataset_check, _dataset_allowed),
        "url": Spec("str", "https://raw.githubusercontent.com/vllm-project/vllm/main/benchmarks/sonnet.txt",
                    _nonempty, "an http(s) URL"),
        "sha256": Spec("str", "", lambda v: v == "" or (len(v) == 64 and all(c in "0123456789abcdef" for c in v)),
                       "64 lowercase hex digits, or empty to skip the check"),
        "path": Spec("str", "", None, "a local file path; when set the download is skipped"),
    },
    "benchmark": {
        "input_len": Spec("int", 512, _rng(1, 1_048_576), "an integer ≥ 1"),
        "output_len": Spec("int", 128, _rng(1, 1_048_576), "an integer ≥ 1"),
        "num_prompts": Spec("int", 30, _rng(1, 100_000), "an integer from 1 to 100000"),
        "max_concurrency": Spec("int", 1, _rng(1, 4096), "an integer from 1 to 4096"),
        "timeout_s": Spec("float", 7200.0, _rng(1, 86400), "seconds, from 1 to 86400"),
        # "auto": an arm's benches run in one warm process where the bench command is a Python program
        # (tui/core/plan/benchmode.py); "off": one process per bench
        "warm": Spec("str", "auto", _warm_check, _warm_allowed),
    },
    "smoke": {
        "prompt": Spec("str", "I am gonna keep counting forever, 1 2 3 4 5 ", _nonempty, "a non-empty prompt"),
        "max_tokens": Spec("int", 10, _rng(1, 4096), "an integer from 1 to 4096"),
    },
    "environment": {
        "instance_type": Spec("str", PerPlatform(neuron="trn2.48xlarge", cuda="", cpu=""), None,
                              "an EC2 instance type, or empty to skip the check"),
        "min_neuron_sdk": Spec("str", PerPlatform(neuron="2.31", cuda="", cpu=""), None,
                               'a release such as "2.31" (neuron only)'),
    },
    "stand_in": {
        "command": Spec("list[str]", _MISSING, lambda v: len(v) > 0 and bool(v[0].strip()),
                        'a non-empty argv list, e.g. ["{python}", "-m", "tui.sim", "stand-in", "--profile", '
                        '"{run_dir}/profile.toml"]'),
    },
    "simulation": {
        "time_scale": Spec("float", 1.0, lambda v: 0 < v <= 100, "a number > 0 and ≤ 100 (1.0 = real time)"),
        "token_time_scale": Spec("float", 1.0, lambda v: 0 < v <= 100,
                                 "a number > 0 and ≤ 100 (1.0 = real time; TTFT and decode steps)"),
        "hub": Spec("bool", True, None, "true or false (start the loopback hub and dataset mirror)"),
        "vllm_version": Spec("str", DEMO_VLLM, _nonempty,
                             f'a vLLM version such as "{DEMO_VLLM}" (the release the simulator plays; the app serves '
                             f'{served_text()}, on neuron {served_text("neuron")})'),
        "weights_s": Spec("float", 4.0, _rng(0, 36000), "seconds ≥ 0"),
        "draft_s": Spec("float", 1.0, _rng(0, 36000), "seconds ≥ 0"),
        "hlo_s": Spec("float", 1.0, _rng(0, 36000), "seconds ≥ 0"),
        "compile_s": Spec("float", 6.0, _rng(0, 36000), "seconds ≥ 0 (cold compile; a cache hit is ~free)"),
        "warmup_s": Spec("float", 1.0, _rng(0, 36000), "seconds ≥ 0"),
        "acceptance": Spec("float", 0.69, _rng(0, 1), "a fraction from 0 to 1 (position-0 acceptance)"),
        "acceptance_decay": Spec("float", 0.7, _rng(0, 1), "a fraction from 0 to 1 (per extra position)"),
        "chat_acceptance": Spec("float", 0.78, _rng(0, 1),
                                "a fraction from 0 to 1 (position-0 acceptance on /v1/chat/completions)"),
        "acceptance_spread": Spec("float", 0.0, _rng(0, 0.5),
                                  "a number from 0 to 0.5 (standard deviation of a prompt's own acceptance)"),
        "ttft_ms": Spec("float", 252.0, _rng(0, 600000), "milliseconds ≥ 0 at 512 prompt tokens"),
        "tpot_ms": Spec("float", 7.0, _rng(0, 600000), "milliseconds ≥ 0 per baseline decode step"),
        "draft_prefill_cost": Spec("float", 0.05, _rng(0, 10),
                                   "a number from 0 to 10 (a draft forward as a fraction of a target forward)"),
        "run_spread": Spec("float", 0.0, _rng(0, 1),
                           "a number from 0 to 1 (standard deviation of the log of the host's speed; 0: none)"),
        "batch_cost": Spec("float", 0.0, _rng(0, 1),
                           "a number from 0 to 1 (the added cost of each further token verified in one batched "
                           "engine step, relative to a one-token step; sets the concurrency where speculation "
                           "stops paying; 0: batching is free)"),
        "batch_knee": Spec("int", 1, _rng(1, 65536),
                           "an integer from 1 to 65536 (tokens verified in one engine step that cost no more than "
                           "one, the memory-bound region; batch_cost applies to each token past it)"),
        "draft_step_cost": Spec("float", 0.4, _rng(0, 10),
                                "a number from 0 to 10 (extra cost of an EAGLE3 decode step per draft token, "
                                "relative to a plain step at batch 1; 0.4 fits the tutorial's MoE pairing)"),
        "acceptance_drift": Spec("float", 0.0, _rng(-1, 1),
                                 "a number from -1 to 1 (change of position-0 acceptance per 1000 generated tokens; "
                                 "0: no drift)"),
        "fault": Spec("str", "none", _fault_check, _fault_allowed),
        "hbm_gib_per_core": Spec("float", 24.0, _rng(1, 1024), "GiB per logical core"),
    },
    "tune": {
        "num_speculative_tokens": Spec("list[int]", [1, 2, 3], lambda v: 0 < len(v) <= 8 and all(1 <= x <= 16 for x in v)
                                       and len(set(v)) == len(v),
                                       "a list of 1 to 8 distinct integers (at most 8 k values: 8 arms per draft), "
                                       "each from 1 to 16, e.g. [1, 2, 3]"),
        "repeats": Spec("int", 3, _rng(1, 20), "an integer from 1 to 20 (bench runs per arm and workload; with "
                        "tune.adaptive the first round's)"),
        "adaptive": Spec("bool", True, None,
                         "true or false (true: after the first round of tune.repeats, the configurations still in "
                         "the race get more repeats, up to tune.max_repeats; false: the fixed matrix, decided once)"),
        "max_repeats": Spec("int", 12, _rng(1, 50),
                            "an integer from 1 to 50 (the most bench runs an adaptive race gives one configuration "
                            "on one workload; at or below tune.repeats there is one round)"),
        "indifference": Spec("float", 0.05, _rng(0.005, 0.5),
                             "a fraction from 0.005 to 0.5 (δ: a configuration within this share of the best "
                             "throughput counts as good as the best, and the smaller k is preferred)"),
        "confidence": Spec("float", 0.95, _rng(0.5, 0.999),
                           "a number from 0.5 to 0.999 (1 − α: the family-level confidence of Step 3's decision)"),
        "workloads": Spec("list[str]", ["sonnet"], lambda v: 0 < len(v) <= 3 and len(set(v)) == len(v)
                          and all(x in TUNE_WORKLOADS for x in v),
                          "a list of 1 to 3 distinct names from " + ", ".join(repr(w) for w in ("sonnet", "chat", "own"))),
        "prompts_file": Spec("str", "", None, 'a JSONL file of your own prompts (workload "own"), or empty'),
        "probe_prompts": Spec("int", 8, _rng(0, 256),
                              "an integer from 0 to 256 (prompts sent per arm and workload for the per-prompt lossless "
                              "check and per-request metrics; 0: none)"),
        "seed": Spec("int", 0, _rng(0, 2**31 - 1),
                     "an integer from 0 to 2147483647 (the bench --seed of repeat 1; repeat r gets seed + r - 1)"),
        "vary_seed": Spec("bool", True, None,
                          "true or false (true: each repeat draws its prompts with its own --seed; false: every "
                          "repeat uses tune.seed and the same prompts)"),
        "parallel": Spec("bool", False, None, "true or false (launch arms at once on disjoint cores: neuron only)"),
        "concurrency": Spec("list[int]", [], lambda v: len(v) <= 12 and len(set(v)) == len(v)
                            and all(1 <= x <= 4096 for x in v),
                            "a list of up to 12 distinct concurrency levels from 1 to 4096, e.g. [1, 2, 4, 8, 16, 32] "
                            "(each arm's server is launched once with max_num_seqs = the largest; [] for none)"),
        "min_waves": Spec("int", 4, _rng(1, 100),
                          "an integer from 1 to 100 (each concurrency level N sends at least min_waves × N prompts, "
                          "at least benchmark.num_prompts)"),
        "slo": Spec("table", {}, None,
                    "a table such as {ttft_ms = 500.0, tpot_ms = 12.0, attainment = 0.9} (SLO goodput per "
                    "concurrency level; attainment: the share of requests that must meet it)"),
        "verify_schedule": Spec("bool", True, None,
                                "true or false (benchmark an extra arm that runs the derived "
                                "num_speculative_tokens_per_batch_size schedule, where the platform's vLLM has it)"),
        "drafts": Spec("table", {}, None,
                       'a table of named drafts, e.g. [tune.drafts.redhat] model = "RedHatAI/..." method = "eagle3"'),
    },
    "fleet": {
        "address": Spec("str", "", None,
                        'a Ray cluster address such as "10.0.0.5:6379" or "auto" (the arms run on that cluster: '
                        'tui/core/exec/ray.py), or "" to run on this host'),
        "nodes": Spec("list[str]", [], lambda v: len(v) <= 256 and all(x.strip() for x in v),
                      "a list of Ray nodes the arms may run on, each a node id (or its first 6+ hex digits), an "
                      "address or a host name; [] for every node with room"),
        "cpus_per_arm": Spec("float", 1.0, _rng(0.01, 1024),
                             "CPUs an arm reserves on a cpu-platform node, from 0.01 to 1024 (neuron and cuda arms "
                             "reserve their NeuronCores or GPUs instead)"),
    },
}
TUNE_WORKLOADS = ("sonnet", "chat", "own")

# Tables that exist only when the profile has them (no defaults filled in otherwise).
OPTIONAL_TABLES = ("stand_in", "simulation", "tune", "fleet")

_TABLE_TITLES = {k: f"[{k}]" for k in SCHEMA if k}
_TABLE_TITLES[""] = "the top level"


def _type_ok(kind: str, v: Any) -> bool:
    if kind == "str":
        return isinstance(v, str)
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "float":
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "list[str]":
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if kind == "list[int]":
        return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    if kind == "table":
        return isinstance(v, dict)
    if kind == "strmap":
        return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
    raise AssertionError(kind)


_KIND_WORDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean (true/false)",
    "list[str]": "a list of strings",
    "list[int]": "a list of integers",
    "table": "a table",
    "strmap": "a table of strings",
}


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, dict):
        return "a table"
    return repr(v)
