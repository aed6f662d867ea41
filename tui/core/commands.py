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


def bench_argv(profile: Profile, result_filename: str, dataset_path: str,
               vllm_version: str | None = None, ph: Placeholders | None = None) -> list[str]:
    """`vllm bench serve` argv. Version-aware additions (intended differences from the tutorial):
    always `--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99`; on vLLM ≥ 0.15,
    `--temperature 0` (the tutorial means greedy; 0.15+ no longer forces it). `--model` is always
    passed (the tutorial does, and < 0.14 requires it)."""
    b = profile.benchmark
    argv = server_prefix(profile, ph) + ["bench", "serve",
                                         "--base-url", base_url(profile),
                                         "--model", profile.models.target,
                                         "--dataset-name", profile.dataset.name,
                                         "--dataset-path", dataset_path,
                                         "--sonnet-input-len", str(b.input_len),
                                         "--sonnet-output-len", str(b.output_len),
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


def planned_commands(profile: Profile, run_dir: str = "./specdec-runs/<run>", vllm_version: str | None = None,
                     ph: Placeholders | None = None) -> PlannedCommands:
    ph = ph or Placeholders(run_dir=run_dir)
    dataset = profile.dataset.path or f"{run_dir}/sonnet.txt"
    return PlannedCommands(
        baseline_serve=serve_argv(profile, False, ph),
        eagle3_serve=serve_argv(profile, True, ph),
        baseline_bench=bench_argv(profile, f"{run_dir}/baseline.json", dataset, vllm_version, ph),
        eagle3_bench=bench_argv(profile, f"{run_dir}/eagle3.json", dataset, vllm_version, ph),
        env=serve_env(profile, ph),
    )


def show_commands_text(profile: Profile, run_dir: str = "./specdec-runs/<run>") -> str:
    pc = planned_commands(profile, run_dir)
    parts = [
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
