"""The exact commands a profile runs: `vllm serve` (baseline and EAGLE3) and `vllm bench serve`.

Argv order follows the tutorial flag for flag. Intended differences from the tutorial (each covered by
the golden test): `--host` is passed (servers bind 127.0.0.1 unless the profile says otherwise) and the
bench `--base-url` follows it; `--dataset-path` and `--result-filename` point into the run directory;
and the version-aware bench flags added by `bench_argv` (see its docstring).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .profile import Profile

# Environment defaults the engine adds when the profile does not set them: a cold gpt-oss-120b +
# EAGLE3 compile exceeds vLLM's 600 s engine-ready budget and the plugin's 600 s compile wait.
COMPILE_TIMEOUT_VARS = (
    "VLLM_NEURON_COMPILATION_TIMEOUT",
    "NEURON_LIBTORCH_COMPILATION_TIMEOUT",
    "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS",
)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specdec-tui"


@dataclass
class Placeholders:
    python: str = field(default_factory=lambda: sys.executable)
    sim_hub: str = ""
    cache_dir: str = field(default_factory=lambda: str(default_cache_dir()))
    run_dir: str = ""

    def resolve(self, value: str) -> str:
        out = value
        for key, repl in (("{python}", self.python), ("{sim_hub}", self.sim_hub),
                          ("{cache_dir}", self.cache_dir), ("{run_dir}", self.run_dir)):
            if key in out:
                out = out.replace(key, repl)
        return out


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


def speculative_config(profile: Profile) -> dict[str, Any]:
    sp = profile.speculative
    return {"method": sp.method, "model": profile.draft_model, "num_speculative_tokens": sp.num_speculative_tokens}


def serve_argv(profile: Profile, speculative: bool, ph: Placeholders | None = None) -> list[str]:
    s = profile.server
    argv = server_prefix(profile, ph) + ["serve", profile.models.target,
                                         "--dtype", s.dtype,
                                         "--tensor-parallel-size", str(s.tensor_parallel_size),
                                         "--max-num-seqs", str(s.max_num_seqs),
                                         "--max-model-len", str(s.max_model_len),
                                         "--max-num-batched-tokens", str(s.max_num_batched_tokens),
                                         "--enable-prefix-caching" if s.enable_prefix_caching else "--no-enable-prefix-caching"]
    if s.hf_overrides:
        argv += ["--hf-overrides", _json(s.hf_overrides)]
    if s.additional_config:
        argv += ["--additional-config", _json(s.additional_config)]
    if speculative:
        argv += ["--speculative-config", _json(speculative_config(profile))]
    argv += ["--host", s.host, "--port", str(s.port)]
    return argv


def _version_tuple(v: str | None) -> tuple[int, ...] | None:
    if not v:
        return None
    parts: list[int] = []
    for p in v.split("+")[0].split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        if digits == "":
            break
        parts.append(int(digits))
    return tuple(parts) if parts else None


SONNET_REMOVED_IN = (0, 32)  # `vllm bench serve --dataset-name sonnet` exists only before 0.32
CUSTOM_JSONL = "sonnet.custom.jsonl"  # the run's sonnet prompts as a custom dataset (vLLM >= 0.32)
DATASET_MODE_LABELS = {
    "sonnet": "sonnet (--dataset-name sonnet)",
    "custom-from-sonnet": "sonnet (built as custom JSONL: vLLM >= 0.32 has no sonnet dataset)",
}


def dataset_mode(vllm_version: str | None) -> str:
    """"sonnet" where the bench has `--dataset-name sonnet` (< 0.32, and an unknown version: the vLLM that
    Neuron SDK 2.33 pins, 0.29, has it), else "custom-from-sonnet"."""
    vt = _version_tuple(vllm_version)
    return "custom-from-sonnet" if vt is not None and vt >= SONNET_REMOVED_IN else "sonnet"


def sonnet_custom_argv(profile: Profile, python_argv: list[str], tools_dir: str, sonnet_path: str, out_path: str,
                       ph: Placeholders | None = None) -> list[str]:
    """The builder of the custom JSONL (tui/tools/sonnet_custom.py), run in the vLLM interpreter: vLLM's own
    SonnetDataset sampling with the target's tokenizer, seed 0 and prefix 200 like the bench's defaults."""
    ph = ph or Placeholders()
    b = profile.benchmark
    return list(python_argv) + [str(Path(tools_dir) / "sonnet_custom.py"),
                                "--sonnet", sonnet_path,
                                "--tokenizer", ph.resolve(profile.models.target),
                                "--input-len", str(b.input_len),
                                "--output-len", str(b.output_len),
                                "--prefix-len", "200",
                                "--num-prompts", str(b.num_prompts),
                                "--seed", "0",
                                "--out", out_path]


def bench_argv(profile: Profile, result_filename: str, dataset_path: str,
               vllm_version: str | None = None, ph: Placeholders | None = None) -> list[str]:
    """`vllm bench serve` argv. Version-aware additions (intended differences from the tutorial):
    always `--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99`; on vLLM ≥ 0.15,
    `--temperature 0` (the tutorial means greedy; 0.15+ no longer forces it). `--model` is always
    passed (the tutorial does, and < 0.14 requires it).

    On vLLM ≥ 0.32 (no sonnet dataset) `dataset_path` is the custom JSONL of the sonnet prompts
    (sonnet_custom_argv) and the dataset flags are `--dataset-name custom --dataset-path JSONL
    --custom-output-len N --skip-chat-template --disable-shuffle`: the prompts are already
    chat-formatted, exactly as sonnet sends them to /v1/completions, and kept in sonnet's order
    (custom shuffles by default)."""
    b = profile.benchmark
    if dataset_mode(vllm_version) == "custom-from-sonnet":
        dataset = ["--dataset-name", "custom",
                   "--dataset-path", dataset_path,
                   "--custom-output-len", str(b.output_len),
                   "--skip-chat-template",
                   "--disable-shuffle"]
    else:
        dataset = ["--dataset-name", profile.dataset.name,
                   "--dataset-path", dataset_path,
                   "--sonnet-input-len", str(b.input_len),
                   "--sonnet-output-len", str(b.output_len)]
    argv = server_prefix(profile, ph) + ["bench", "serve",
                                         "--base-url", base_url(profile),
                                         "--model", profile.models.target,
                                         *dataset,
                                         "--num-prompts", str(b.num_prompts),
                                         "--max-concurrency", str(b.max_concurrency),
                                         "--save-result",
                                         "--result-filename", result_filename]
    argv += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"]
    vt = _version_tuple(vllm_version)
    if vt is None or vt >= (0, 15):
        argv += ["--temperature", "0"]
    return argv


def serve_env(profile: Profile, ph: Placeholders | None = None) -> dict[str, str]:
    """Environment additions for `vllm serve` (profile env + timeout defaults), placeholders resolved."""
    ph = ph or Placeholders()
    env = {k: ph.resolve(v) for k, v in profile.server.env.items()}
    timeout = int(profile.server.startup_timeout_s)
    env.setdefault("VLLM_ENGINE_READY_TIMEOUT_S", str(timeout))
    for var in COMPILE_TIMEOUT_VARS:
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
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            lines.append(f"  {flag} {shlex.quote(argv[i + 1])}")
            i += 2
        else:
            lines.append(f"  {flag}")
            i += 1
    return " \\\n".join(lines)


@dataclass
class PlannedCommands:
    baseline_serve: list[str]
    eagle3_serve: list[str]
    baseline_bench: list[str]
    eagle3_bench: list[str]
    env: dict[str, str]
    dataset_mode: str = "sonnet"
    build_custom: list[str] | None = None  # vLLM >= 0.32: the custom JSONL builder, run once per run


def tools_dir() -> str:
    """tui/tools/ of the installed app (where sonnet_custom.py lives)."""
    return str(Path(__file__).resolve().parent.parent / "tools")


def planned_commands(profile: Profile, run_dir: str = "./specdec-runs/<run>", vllm_version: str | None = None,
                     ph: Placeholders | None = None, vllm_python: list[str] | None = None) -> PlannedCommands:
    ph = ph or Placeholders(run_dir=run_dir)
    sonnet = profile.dataset.path or f"{run_dir}/sonnet.txt"
    mode = dataset_mode(vllm_version)
    build = None
    dataset = sonnet
    if mode == "custom-from-sonnet":
        dataset = f"{run_dir}/{CUSTOM_JSONL}"
        build = sonnet_custom_argv(profile, vllm_python or ["{vllm_python}"], tools_dir(), sonnet, dataset, ph)
    return PlannedCommands(
        baseline_serve=serve_argv(profile, False, ph),
        eagle3_serve=serve_argv(profile, True, ph),
        baseline_bench=bench_argv(profile, f"{run_dir}/baseline.json", dataset, vllm_version, ph),
        eagle3_bench=bench_argv(profile, f"{run_dir}/eagle3.json", dataset, vllm_version, ph),
        env=serve_env(profile, ph),
        dataset_mode=mode,
        build_custom=build,
    )


def show_commands_text(profile: Profile, run_dir: str = "./specdec-runs/<run>", vllm_version: str | None = None,
                       version_source: str = "unknown", vllm_python: list[str] | None = None) -> str:
    """The commands for `vllm_version`. `version_source`: "detected" (probed from the profile's command),
    "simulated" ([simulation] vllm_version), "given" (--vllm-version) or "unknown" (not found: the sonnet
    form, as on the vLLM Neuron pins, stated in the output)."""
    pc = planned_commands(profile, run_dir, vllm_version, vllm_python=vllm_python)
    if version_source == "given":
        head = f"# vLLM {vllm_version} (given with --vllm-version)"
    elif version_source == "simulated" and vllm_version:
        head = f"# vLLM {vllm_version} (the version the simulator plays: [simulation] vllm_version)"
    elif version_source == "detected" and vllm_version:
        head = f"# vLLM {vllm_version} (detected from server.command {profile.server.command[0]!r})"
    else:
        head = ("# vLLM version unknown (server.command's vllm could not be probed): assuming < 0.32, which has "
                "--dataset-name sonnet (pass --vllm-version X.Y.Z for another version)")
    parts = [head, f"# Dataset: {DATASET_MODE_LABELS[pc.dataset_mode]}", ""]
    if pc.build_custom is not None:
        parts += ["# Step 0: build the sonnet prompts as a custom JSONL (once per run; both benchmarks use it)"]
        if not vllm_python:
            parts.append("# {vllm_python}: the Python that runs `vllm` (not found here)")
        parts += [format_command(pc.build_custom), ""]
    parts += [
        "# Step 1: baseline server",
        format_command(pc.baseline_serve, pc.env),
        "",
        "# Step 1: baseline benchmark",
        format_command(pc.baseline_bench),
        "",
        "# Step 2: EAGLE3 server",
        format_command(pc.eagle3_serve, pc.env),
        "",
        "# Step 2: EAGLE3 benchmark",
        format_command(pc.eagle3_bench),
    ]
    return "\n".join(parts) + "\n"
