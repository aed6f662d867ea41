"""The exact commands a profile runs: `vllm serve` (baseline and EAGLE3) and `vllm bench serve`.

Argv order follows the tutorial flag for flag. Intended differences from the tutorial (each covered by
the golden test): `--host` is passed (servers bind 127.0.0.1 unless the profile says otherwise) and the
bench `--base-url` follows it; `--dataset-path` and `--result-filename` point into the run directory;
and the version-aware bench flags added by `bench_argv` (see its docstring).

Flags the tutorial does not use appear only when the profile asks for them: `--pipeline-parallel-size`
(when > 1), `--enforce-eager` (when true), `draft_tensor_parallel_size` in the speculative config (when
> 0). Flags equal to vLLM's defaults are omitted: `--dtype` for "auto", `--tensor-parallel-size` for 1,
and `--max-num-seqs` / `--max-model-len` / `--max-num-batched-tokens` for 0. Placeholders are resolved in
every string that reaches argv or env, model names included (inside JSON values too, before encoding).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.core.profile.model import Profile
from tui.core.profile.sections import ServerSettings, SpeculativeSettings
from tui.core.versions import at_least

# Environment defaults the engine adds when the profile does not set them: a cold gpt-oss-120b +
# EAGLE3 compile exceeds vLLM's 600 s engine-ready budget and the plugin's 600 s compile wait.
COMPILE_TIMEOUT_VARS = (
    "VLLM_NEURON_COMPILATION_TIMEOUT",
    "NEURON_LIBTORCH_COMPILATION_TIMEOUT",
    "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS",
)
# Of those, the ones vLLM itself reads (set on every platform).
GENERIC_TIMEOUT_VARS = ("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS",)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specdec-tui"


def specdec_tools_dir() -> Path:
    """The `tui/tools/` directory of the installed app (helper scripts run in other interpreters)."""
    return Path(__file__).resolve().parents[2] / "tools"


BUNDLED_SONNET_SHA256 = "d58663195ba6780da5f029b920c7ac00cad1e435ee1df7e03bf9ec2470f8dea4"


def bundled_data_dir() -> Path:
    """The directory holding the bundled data files (the real sonnet.txt): `data/` of the installed
    `specdec_profiles` package, else `profiles/data/` of a source checkout."""
    try:
        from importlib import resources

        d = Path(str(resources.files("specdec_profiles") / "data"))
        if (d / "sonnet.txt").is_file():
            return d
    except (ModuleNotFoundError, TypeError, OSError):
        pass
    return Path(__file__).resolve().parents[3] / "profiles" / "data"


@dataclass
class Placeholders:
    """Values of the {name} placeholders profiles may use. Resolved at run time, never at load time."""

    python: str = field(default_factory=lambda: sys.executable)
    sim_hub: str = ""
    cache_dir: str = field(default_factory=lambda: str(default_cache_dir()))
    run_dir: str = ""
    # The interpreter that owns the server command's `vllm` (tui.core.host.interpreter.find_server_interpreter);
    # filled by whoever needs it, "" until then.
    vllm_python: str = ""
    specdec_tools: str = field(default_factory=lambda: str(specdec_tools_dir()))
    bundled_data: str = field(default_factory=lambda: str(bundled_data_dir()))

    NAMES = ("python", "sim_hub", "cache_dir", "run_dir", "vllm_python", "specdec_tools", "bundled_data")

    def resolve(self, value: str) -> str:
        out = value
        if "{" not in out:
            return out
        for name in self.NAMES:
            key = "{" + name + "}"
            if key in out:
                out = out.replace(key, getattr(self, name))
        return out

    def resolve_tree(self, value: Any) -> Any:
        """`value` with every string inside (dict values, list items) resolved; keys are left alone."""
        if isinstance(value, str):
            return self.resolve(value)
        if isinstance(value, dict):
            return {k: self.resolve_tree(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve_tree(v) for v in value]
        return value


def _json(v: Any) -> str:
    return json.dumps(v)


def connect_host(host: str) -> str:
    """The address a client on this machine uses to reach a server bound to `host`."""
    if host in ("0.0.0.0", "", "::"):
        return "127.0.0.1"
    return host


def base_url(profile: Profile) -> str:
    host = connect_host(profile.server.host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{profile.server.port}"


def server_prefix(profile: Profile, ph: Placeholders | None = None) -> list[str]:
    ph = ph or Placeholders()
    return [ph.resolve(x) for x in profile.server.command]


def target_model(profile: Profile, ph: Placeholders | None = None) -> str:
    """models.target as vLLM gets it (placeholders resolved): also the served model name."""
    return (ph or Placeholders()).resolve(profile.models.target)


def draft_model(profile: Profile, ph: Placeholders | None = None) -> str:
    """speculative.model (or models.draft) as vLLM gets it (placeholders resolved)."""
    return (ph or Placeholders()).resolve(profile.speculative.model)


def speculative_settings(profile: Profile, speculative: SpeculativeSettings | bool | None) -> SpeculativeSettings | None:
    """The settings of a server: an arm's own (`Arm.speculative`), True for the profile's [speculative] table,
    False or None for the baseline (no --speculative-config)."""
    if isinstance(speculative, SpeculativeSettings):
        return speculative
    return profile.speculative if speculative else None


def speculative_config(profile: Profile, ph: Placeholders | None = None,
                       speculative: SpeculativeSettings | None = None) -> dict[str, Any]:
    """The JSON of --speculative-config: `speculative` (an arm's settings), else the profile's [speculative]."""
    sp = speculative or profile.speculative
    cfg: dict[str, Any] = {"method": sp.method, "model": (ph or Placeholders()).resolve(sp.model),
                           "num_speculative_tokens": sp.num_speculative_tokens}
    if sp.draft_tensor_parallel_size:
        cfg["draft_tensor_parallel_size"] = sp.draft_tensor_parallel_size
    for key, value in sp.extra.items():  # [speculative.extra], checked by the profile (profile/model.py)
        if key == "synthetic_acceptance_rates" and isinstance(value, list):
            value = value[:sp.num_speculative_tokens]  # vLLM wants exactly k rates: a tune arm takes the first k
        cfg[key] = ph.resolve_tree(value) if ph is not None else value
    return cfg


def sweep_levels(profile: Profile) -> list[int]:
    """[tune] concurrency, ascending ([] without a load sweep)."""
    return list(profile.tune.levels) if profile.tune is not None else []


def level_prompts(profile: Profile, level: int | None) -> int:
    """How many prompts a bench at concurrency `level` sends: benchmark.num_prompts, and in a load sweep at least
    tune.min_waves × level, so every level runs several full waves and its ramp-up and tail stay a small share."""
    n = int(profile.benchmark.num_prompts)
    if level is None:
        return n
    waves = profile.tune.min_waves if profile.tune is not None else 4
    return max(n, waves * int(level))


def server_settings(profile: Profile) -> ServerSettings:
    """The [server] a launch uses. In a load sweep every arm is launched once with room for the largest level:
    max_num_seqs = max(tune.concurrency), and on Neuron `additional_config.neuron_config.num_seqs_buckets` = the
    sweep's levels (vllm-neuron compiles one decode graph per bucket and its largest must equal max_num_seqs, so
    each level runs in a graph of exactly its batch size)."""
    s = profile.server
    levels = sweep_levels(profile)
    if not levels:
        return s
    top = levels[-1]
    extra: dict[str, Any] = {"max_num_seqs": top}
    if profile.platform == "neuron":
        ac = copy.deepcopy(s.additional_config)
        nc = dict(ac.get("neuron_config") or {})
        nc["num_seqs_buckets"] = list(levels)
        ac["neuron_config"] = nc
        extra["additional_config"] = ac
    return dataclasses.replace(s, **extra)


def serve_argv(profile: Profile, speculative: SpeculativeSettings | bool | None,
               ph: Placeholders | None = None) -> list[str]:
    """The `vllm serve` argv of the profile's [server] (server_settings: a load sweep's room for its largest
    level); with --speculative-config from `speculative` (an arm's settings, True for the profile's own; False
    or None: the baseline)."""
    ph = ph or Placeholders()
    spec = speculative_settings(profile, speculative)
    s = server_settings(profile)
    argv = server_prefix(profile, ph) + ["serve", target_model(profile, ph)]
    if s.dtype != "auto":
        argv += ["--dtype", s.dtype]
    if s.tensor_parallel_size > 1:
        argv += ["--tensor-parallel-size", str(s.tensor_parallel_size)]
    if s.pipeline_parallel_size > 1:
        argv += ["--pipeline-parallel-size", str(s.pipeline_parallel_size)]
    for flag, value in (("--max-num-seqs", s.max_num_seqs), ("--max-model-len", s.max_model_len),
                        ("--max-num-batched-tokens", s.max_num_batched_tokens)):
        if value:
            argv += [flag, str(value)]
    argv.append("--enable-prefix-caching" if s.enable_prefix_caching else "--no-enable-prefix-caching")
    if s.enforce_eager:
        argv.append("--enforce-eager")
    if s.hf_overrides:
        argv += ["--hf-overrides", _json(ph.resolve_tree(s.hf_overrides))]
    if s.additional_config:
        argv += ["--additional-config", _json(ph.resolve_tree(s.additional_config))]
    if spec is not None:
        argv += ["--speculative-config", _json(speculative_config(profile, ph, spec))]
    argv += ["--host", ph.resolve(s.host), "--port", str(s.port)]
    return argv


def prepare_argv(profile: Profile, ph: Placeholders | None = None) -> list[str]:
    """models.prepare with placeholders resolved ([] when the profile has none). The checkpoints step runs it
    when a local model directory (tui.core.profile.model.local_model_keys) does not exist yet."""
    ph = ph or Placeholders()
    return [ph.resolve(x) for x in profile.models.prepare]


SONNET_REMOVED_IN = (0, 32)  # `vllm bench serve --dataset-name sonnet` exists only before 0.32
CUSTOM_JSONL = "sonnet.custom.jsonl"  # the run's sonnet prompts as a custom dataset (vLLM >= 0.32)
DATASET_MODE_LABELS = {
    "sonnet": "sonnet (--dataset-name sonnet)",
    "custom-from-sonnet": "sonnet (built as custom JSONL: vLLM >= 0.32 has no sonnet dataset)",
}


def dataset_mode(vllm_version: str | None) -> str:
    """"sonnet" where the bench has `--dataset-name sonnet` (< 0.32, and an unknown version: the vLLM that
    Neuron SDK 2.33 pins, 0.29, has it), else "custom-from-sonnet"."""
    return "custom-from-sonnet" if at_least(vllm_version, SONNET_REMOVED_IN) else "sonnet"


def sonnet_custom_argv(profile: Profile, python_argv: list[str], tools_dir: str, sonnet_path: str, out_path: str,
                       ph: Placeholders | None = None, num_prompts: int | None = None) -> list[str]:
    """The builder of the custom JSONL (tui/tools/sonnet_custom.py), run in the vLLM interpreter: vLLM's own
    SonnetDataset sampling with the target's tokenizer, seed 0 and prefix 200 like the bench's defaults.
    `num_prompts` (default benchmark.num_prompts): more makes a pool that benches with their own --seed
    sample differently from (tui.core.plan.build.custom_pool_size)."""
    ph = ph or Placeholders()
    b = profile.benchmark
    return list(python_argv) + [str(Path(tools_dir) / "sonnet_custom.py"),
                                "--sonnet", sonnet_path,
                                "--tokenizer", target_model(profile, ph),
                                "--input-len", str(b.input_len),
                                "--output-len", str(b.output_len),
                                "--prefix-len", "200",
                                "--num-prompts", str(num_prompts or b.num_prompts),
                                "--seed", "0",
                                "--out", out_path]


SKIP_CHAT_TEMPLATE_RENAMED_IN = (0, 11)  # --custom-skip-chat-template before, --skip-chat-template after
DISABLE_SHUFFLE_SINCE = (0, 11, 2)  # vllm PR #26258


def _skip_chat_template_flag(vllm_version: str | None) -> str:
    if at_least(vllm_version, SKIP_CHAT_TEMPLATE_RENAMED_IN) is False:
        return "--custom-skip-chat-template"
    return "--skip-chat-template"


def bench_dataset_args(workload: Any, profile: Profile, dataset_path: str, vllm_version: str | None,
                       shuffle: bool = False) -> list[str]:
    """The dataset flags of `vllm bench serve` for `workload` (a tui.core.plan.workloads.Workload; None or sonnet:
    the tutorial's flags). For chat/own, `dataset_path` is the custom JSONL (workloads.write_bench_jsonl).
    `shuffle`: leave out `--disable-shuffle`, so the custom dataset is shuffled with the bench's `--seed`
    (repeats with different seeds then draw different prompts); else the file's order is kept."""
    b = profile.benchmark
    if workload is None or workload.name == "sonnet":
        if dataset_mode(vllm_version) == "custom-from-sonnet":
            return ["--dataset-name", "custom", "--dataset-path", dataset_path, "--custom-output-len",
                    str(b.output_len), "--skip-chat-template", *([] if shuffle else ["--disable-shuffle"])]
        return ["--dataset-name", profile.dataset.name, "--dataset-path", dataset_path,
                "--sonnet-input-len", str(b.input_len), "--sonnet-output-len", str(b.output_len)]
    args = ["--dataset-name", "custom", "--dataset-path", dataset_path, "--custom-output-len", str(b.output_len),
            _skip_chat_template_flag(vllm_version)]
    if not shuffle and at_least(vllm_version, DISABLE_SHUFFLE_SINCE) is not False:
        args.append("--disable-shuffle")
    return args


def bench_backend_args(workload: Any) -> list[str]:
    """`--backend openai-chat --endpoint /v1/chat/completions` for chat workloads, else [] (the default
    openai backend and /v1/completions, as the tutorial's command)."""
    if workload is None or workload.endpoint == "completions":
        return []
    return ["--backend", workload.backend, "--endpoint", workload.path]


def goodput_args(profile: Profile) -> list[str]:
    """`--goodput ttft:MS tpot:MS e2el:MS` from [tune] slo (vLLM's SLO goodput; [] without an SLO)."""
    slo = profile.tune.slo.limits() if profile.tune is not None and profile.tune.slo is not None else {}
    parts = [f"{name}:{float(slo[key]):g}" for name, key in (("ttft", "ttft_ms"), ("tpot", "tpot_ms"),
                                                              ("e2el", "e2el_ms")) if slo.get(key) is not None]
    return ["--goodput", *parts] if parts else []


def bench_argv(profile: Profile, result_filename: str, dataset_path: str,
               vllm_version: str | None = None, ph: Placeholders | None = None,
               workload: Any = None, seed: int | None = None, shuffle: bool = False,
               level: int | None = None) -> list[str]:
    """`vllm bench serve` argv. Version-aware additions (intended differences from the tutorial):
    always `--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99`; on vLLM ≥ 0.15,
    `--temperature 0` (the tutorial means greedy; 0.15+ no longer forces it). `--model` is always
    passed (the tutorial does, and < 0.14 requires it).

    On vLLM ≥ 0.32 (no sonnet dataset) `dataset_path` is the custom JSONL of the sonnet prompts
    (sonnet_custom_argv) and the dataset flags are `--dataset-name custom --dataset-path JSONL
    --custom-output-len N --skip-chat-template --disable-shuffle`: the prompts are already
    chat-formatted, exactly as sonnet sends them to /v1/completions, and kept in sonnet's order
    (custom shuffles by default).

    `workload` (a tui.core.plan.workloads.Workload; None or sonnet: the argv above, unchanged): a chat or own
    workload benchmarks its custom JSONL (`dataset_path`, workloads.write_bench_jsonl) with the dataset flags
    of bench_dataset_args, and a chat endpoint adds `--backend openai-chat --endpoint /v1/chat/completions`
    after `bench serve`. `seed` (a tune repeat's, tui.core.plan.build.bench_seed) adds `--seed N`; `shuffle` drops
    `--disable-shuffle` (see bench_dataset_args). `level` (a load sweep's concurrency level) sets
    `--max-concurrency` and the prompts (level_prompts) and adds `--goodput` from [tune] slo. The run's argv come
    from tui.core.plan.build."""
    ph = ph or Placeholders()
    b = profile.benchmark
    dataset = bench_dataset_args(workload, profile, dataset_path, vllm_version, shuffle)
    argv = server_prefix(profile, ph) + ["bench", "serve", *bench_backend_args(workload),
                                         "--base-url", base_url(profile),
                                         "--model", target_model(profile, ph),
                                         *dataset,
                                         "--num-prompts", str(level_prompts(profile, level)),
                                         "--max-concurrency", str(level if level is not None else b.max_concurrency),
                                         "--save-result",
                                         "--result-filename", result_filename]
    argv += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"]
    if at_least(vllm_version, (0, 15)) is not False:
        argv += ["--temperature", "0"]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if level is not None:
        argv += goodput_args(profile)
    return [ph.resolve(a) for a in argv]


def serve_env(profile: Profile, ph: Placeholders | None = None) -> dict[str, str]:
    """Environment additions for `vllm serve` (profile env + timeout defaults), placeholders resolved.
    The Neuron compile timeouts are added on platform neuron only; VLLM_ENGINE_READY_TIMEOUT_S and
    VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (vLLM's own) everywhere."""
    ph = ph or Placeholders()
    env = {k: ph.resolve(v) for k, v in profile.server.env.items()}
    timeout = int(profile.server.startup_timeout_s)
    env.setdefault("VLLM_ENGINE_READY_TIMEOUT_S", str(timeout))
    for var in COMPILE_TIMEOUT_VARS:
        if profile.platform == "neuron" or var in GENERIC_TIMEOUT_VARS:
            env.setdefault(var, str(max(1200, timeout)))
    return env


def format_command(argv: list[str], env: dict[str, str] | None = None) -> str:
    """Shell form like the tutorial: env assignments, `cmd sub ARG \\`, then one flag (with its value) per line."""
    lines: list[str] = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    # Head: everything before the first flag.
    i = 0
    while i < len(argv) and not argv[i].startswith("--"):
        i += 1
    lines.append(" ".join(shlex.quote(a) for a in argv[:i]))
    while i < len(argv):
        flag = argv[i]
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):  # a flag's values (--goodput ttft:500 tpot:10)
            j += 1
        lines.append("  " + " ".join([flag, *(shlex.quote(a) for a in argv[i + 1:j])]))
        i = j
    return " \\\n".join(lines)


def tools_dir() -> str:
    """tui/tools/ of the installed app (sonnet_custom.py, tinymodels.py)."""
    return str(specdec_tools_dir())
