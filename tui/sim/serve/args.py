"""The argv of the simulated `vllm serve`: the parser (vLLM's flags and its errors), the non-default args line
and the engine arguments the engine-core child gets."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ...core.versions import release

PROG = "vllm serve"
USAGE = "vllm serve [model_tag] [options]"
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D401 - argparse signature
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _json_type(flag: str):
    def parse(val: str) -> dict[str, Any]:
        try:
            obj = json.loads(val)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"Failed to parse JSON string {val!r}: {e}") from None
        if not isinstance(obj, dict):
            raise argparse.ArgumentTypeError(f"Expected a JSON object, got {type(obj).__name__}: {val!r}")
        return obj

    parse.__name__ = "json.loads"
    return parse


PER_REQUEST_SINCE = (0, 29)  # --per-request-spec-decode-metrics (vLLM 0.29, 0.30, 0.32, 0.33)
PER_REQUEST_ERROR = ("--per-request-spec-decode-metrics requires speculative decoding to be enabled "
                     "(via --speculative-config).")


def build_parser(version: str | None = None) -> argparse.ArgumentParser:
    """vLLM's serve argv. `version` (the simulated vLLM): --per-request-spec-decode-metrics exists from 0.29
    on (None: every flag)."""
    vt = release(version)
    p = _Parser(prog=PROG, usage=USAGE, description="Launch a local OpenAI-compatible API server to serve "
                "LLM completions via HTTP (specdec-tui simulation).")
    bo = argparse.BooleanOptionalAction
    p.add_argument("model_tag", nargs="?", default=None, help="The model tag to serve (optional if --model is given)")
    g = p.add_argument_group("Frontend")
    # vLLM binds every interface by default; this stand-in binds loopback unless told otherwise.
    g.add_argument("--host", default="127.0.0.1")
    g.add_argument("--port", type=int, default=8000)
    g.add_argument("--uvicorn-log-level", default="info",
                   choices=["critical", "debug", "error", "info", "trace", "warning"])
    g.add_argument("--disable-uvicorn-access-log", action="store_true")
    g.add_argument("--api-key", default=None)
    g.add_argument("--root-path", default=None)
    g.add_argument("--chat-template", default=None)
    g.add_argument("--enable-force-include-usage", action="store_true")
    g.add_argument("--enable-log-requests", action="store_true")
    g.add_argument("--disable-log-requests", action="store_true")
    g.add_argument("--max-log-len", type=int, default=None)
    g.add_argument("--disable-fastapi-docs", action="store_true")
    g = p.add_argument_group("ModelConfig")
    g.add_argument("--model", default=DEFAULT_MODEL)
    g.add_argument("--tokenizer", default=None)
    g.add_argument("--revision", default=None)
    g.add_argument("--trust-remote-code", action="store_true")
    g.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float", "float16", "float32", "half"])
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--max-model-len", type=int, default=None)
    g.add_argument("--served-model-name", nargs="+", default=None)
    g.add_argument("--hf-overrides", type=_json_type("--hf-overrides"), default={})
    g.add_argument("--generation-config", default="auto")
    g.add_argument("--override-generation-config", type=_json_type("--override-generation-config"), default={})
    g.add_argument("--enforce-eager", action="store_true")
    g.add_argument("--quantization", "-q", default=None)
    g = p.add_argument_group("LoadConfig")
    g.add_argument("--load-format", default="auto")
    g.add_argument("--download-dir", default=None)
    g = p.add_argument_group("ParallelConfig")
    g.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    g.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    g.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    g.add_argument("--distributed-executor-backend", default=None, choices=["mp", "uni", "ray", "external_launcher"])
    g = p.add_argument_group("CacheConfig")
    g.add_argument("--block-size", type=int, default=None)
    g.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    g.add_argument("--kv-cache-dtype", default="auto")
    g.add_argument("--num-gpu-blocks-override", type=int, default=None)
    g.add_argument("--enable-prefix-caching", action=bo, default=None)
    g = p.add_argument_group("SchedulerConfig")
    g.add_argument("--max-num-batched-tokens", type=int, default=None)
    g.add_argument("--max-num-seqs", type=int, default=None)
    g.add_argument("--enable-chunked-prefill", action=bo, default=None)
    g.add_argument("--async-scheduling", action=bo, default=None)
    g = p.add_argument_group("VllmConfig")
    g.add_argument("--speculative-config", type=_json_type("--speculative-config"), default=None)
    g.add_argument("--additional-config", type=_json_type("--additional-config"), default={})
    g.add_argument("--optimization-level", "-O", default=None)
    g = p.add_argument_group("Observability")
    g.add_argument("--disable-log-stats", action="store_true")
    if vt is None or vt >= PER_REQUEST_SINCE:
        g.add_argument("--per-request-spec-decode-metrics", default="none", choices=["none", "summary", "detailed"])
    return p


def _normalize_argv(argv: list[str]) -> list[str]:
    """vLLM accepts --max_model_len as --max-model-len (only the flag name, not its value)."""
    out = []
    for a in argv:
        if a.startswith("--") and len(a) > 2:
            key, eq, val = a.partition("=")
            a = key.replace("_", "-") + eq + val
        out.append(a)
    return out


def parse_args(argv: list[str], version: str | None = None) -> argparse.Namespace:
    p = build_parser(version)
    ns = p.parse_args(_normalize_argv(argv))
    if ns.model_tag:
        ns.model = ns.model_tag
    return ns


def non_default_args(ns: argparse.Namespace, version: str | None = None) -> dict[str, Any]:
    p = build_parser(version)
    out: dict[str, Any] = {}
    for action in p._actions:  # definition order, like vLLM's log
        dest = action.dest
        if dest == "help" or not hasattr(ns, dest):
            continue
        val = getattr(ns, dest)
        if val != action.default:
            out[dest] = val
    return out


def default_max_model_len(model: str) -> int:
    return 131072 if "gpt-oss" in model.lower() else 32768


def engine_args(ns: argparse.Namespace) -> dict[str, Any]:
    served = ns.served_model_name or [ns.model]
    return {
        "model": ns.model,
        "served_model_name": served[0],
        "dtype": "bfloat16" if ns.dtype in ("auto", "bfloat16") else ns.dtype,
        "tensor_parallel_size": ns.tensor_parallel_size,
        "max_model_len": ns.max_model_len or default_max_model_len(ns.model),
        "max_num_seqs": ns.max_num_seqs or 32,
        "max_num_batched_tokens": ns.max_num_batched_tokens or 2048,
        "enable_prefix_caching": True if ns.enable_prefix_caching is None else ns.enable_prefix_caching,
        "hf_overrides": ns.hf_overrides or {},
        "additional_config": ns.additional_config or {},
        "speculative_config": ns.speculative_config or None,
        "seed": ns.seed,
    }


def _architecture(model: str) -> str:
    m = model.lower()
    if "gpt-oss" in m:
        return "GptOssForCausalLM"
    if "qwen3" in m:
        return "Qwen3ForCausalLM"
    if "qwen" in m:
        return "Qwen2ForCausalLM"
    return "LlamaForCausalLM"


