"""The simulated ``vllm serve`` (vLLM 0.21–0.24 with the vllm-neuron ≥ 0.21 platform plugin).

``python -m tui.sim serve MODEL [flags]`` behaves like ``vllm serve`` as far as specdec-tui can tell:

- argv: the tutorial's flags plus common harmless ones; unknown flags and bad JSON fail like vLLM's
  argparse (usage line + ``error: ...``, exit 2).
- process model: this API-server process binds the port *before* model loading (a busy port fails
  at once with ``OSError: [Errno 98] Address already in use``, exit 1) but listens only once uvicorn
  starts. The engine runs in a real child process (``python -m tui.sim.engine_core``) that prints the
  ``(EngineCore_DP0 pid=N)`` / ``(Worker_TPk pid=M)`` startup lines, keeps a real compile cache under
  ``$VLLM_CACHE_ROOT/neuron/compile_cache`` and reports readiness over a pipe. The child dies with
  this process (PR_SET_PDEATHSIG, plus an explicit kill on exit / SIGTERM / SIGINT).
- HTTP: a real uvicorn + starlette app on the pre-bound socket: /health, /ping, /load, /version,
  /v1/models, /v1/completions (SSE streaming as vLLM: one chunk per engine step), /v1/chat/completions
  (chat.completion / chat.completion.chunk objects as vLLM 0.32 sends them: a first chunk with
  delta {"role": "assistant", "content": ""}, then delta content per engine step, the usage chunk with
  include_usage; messages rendered with a stand-in harmony template, tui.sim.tokens.render_chat),
  /tokenize, /detokenize, /metrics (prometheus_client, vLLM metric names; spec-decode counters only with
  --speculative-config).
- --per-request-spec-decode-metrics none|summary|detailed (when the simulated vLLM is >= 0.29): with
  --speculative-config, `metrics.speculative_decoding` (vLLM's RequestSpecDecodeMetrics.to_dict:
  mean_acceptance_length, draft_acceptance_rate, acceptance_histogram of length k+1, num_spec_steps,
  num_accepted_draft_tokens, num_draft_tokens, num_spec_tokens; per_step_accepted/drafted at detailed) at the
  response root and on the final usage chunk of a stream; without it, startup fails with vLLM's
  ValidationError ("... requires speculative decoding to be enabled (via --speculative-config).", exit 1).
- acceptance per route: [simulation] acceptance on /v1/completions, chat_acceptance on /v1/chat/completions
  (the tutorial's draft was trained on chat data), as the mean of each prompt's own acceptance
  (acceptance_spread); every request's timing is scaled by the host's drifting speed (run_spread).
- faults and timing come from SPECDEC_SIM (see tui/sim/config.py); the maths lives in tui/sim/model.py.

Durations in logs and metrics are simulated seconds: startup phases run at wall time / time_scale, serving
(TTFT, decode steps, the stats interval) at wall time / token_time_scale.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

from ..core.versions import release
from .config import sim_config
from .logs import ProcessLog, color_enabled, traceback_lines
from .model import (DRAFT_PREFILL_COST, HostNoise, effective_acceptance, plan_request, prompt_acceptance,
                    seed_of)
from .tokens import render_chat
from .tokens import tokenize as _tok

PROG = "vllm serve"
USAGE = "vllm serve [model_tag] [options]"
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
STATS_INTERVAL_S = 10.0  # VLLM_LOG_STATS_INTERVAL

# --------------------------------------------------------------------------------------------------
# argv
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# tracebacks of the API server
# --------------------------------------------------------------------------------------------------

_CLI_FRAMES = [
    (f"{sys.prefix}/bin/vllm", 10, "<module>", "sys.exit(main())"),
    ("vllm/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
    ("vllm/entrypoints/cli/serve.py", 60, "cmd", "uvloop.run(run_server(args))"),
    ("uvloop/__init__.py", 109, "run", "return __asyncio.run("),
    ("stdlib/asyncio/runners.py", 118, "run", "return self._loop.run_until_complete(task)"),
    ("uvloop/__init__.py", 61, "wrapper", "return await main"),
]


def _print_api_traceback(log: ProcessLog, frames: list, exc: str) -> None:
    lines = [part for line in traceback_lines(_CLI_FRAMES + frames, exc) for part in line.split("\n")]
    log.write_lines(lines, stream=sys.stderr)


# --------------------------------------------------------------------------------------------------
# engine-core child
# --------------------------------------------------------------------------------------------------


class EngineProc:
    """The engine-core child process and its readiness pipe."""

    def __init__(self, ea: dict[str, Any], environ: dict[str, str]):
        r, w = os.pipe()
        env = dict(environ)
        env["SPECDEC_SIM_ENGINE_ARGS"] = json.dumps(ea)
        env["PYTHONUNBUFFERED"] = "1"
        pkg_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tui.sim.engine_core", "--parent-pid", str(os.getpid()), "--ready-fd", str(w)],
                stdin=subprocess.PIPE, pass_fds=(w,), env=env, close_fds=True)
        finally:
            os.close(w)
        self.rfd = r
        self._buf = b""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float) -> tuple[str, dict[str, Any]]:
        """("ready", info) | ("failed", {}) | ("timeout", {})."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", {}
            r, _, _ = select.select([self.rfd], [], [], min(remaining, 0.2))
            if r:
                chunk = os.read(self.rfd, 65536)
                if not chunk:  # the child closed the pipe: it exited
                    self.proc.wait()
                    return "failed", {}
                self._buf += chunk
                if b"\n" in self._buf:
                    line, _, self._buf = self._buf.partition(b"\n")
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        msg = {"status": "failed"}
                    if msg.get("status") == "ready":
                        return "ready", msg
                    self.proc.wait()
                    return "failed", msg
            elif self.proc.poll() is not None:
                return "failed", {}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace_s: float = 2.0) -> None:
        with contextlib.suppress(OSError):
            os.close(self.rfd)
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.terminate()
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    self.proc.kill()
                self.proc.wait()
        if self.proc.stdin:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()


# --------------------------------------------------------------------------------------------------
# serving state: scheduler, metrics, stats logging
# --------------------------------------------------------------------------------------------------


class Metrics:
    """vLLM's Prometheus series (own CollectorRegistry)."""

    def __init__(self, model_name: str, k: int, ready: dict[str, Any]):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = reg = CollectorRegistry()
        ln = ["model_name", "engine"]
        lv = {"model_name": model_name, "engine": "0"}
        self.labels = lv
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", ln,
                                     registry=reg).labels(**lv)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.", ln,
                                         registry=reg).labels(**lv)
        self._success = Counter("vllm:request_success", "Count of successfully processed requests.",
                                ln + ["finished_reason"], registry=reg)
        for reason in ("stop", "length", "abort"):
            self._success.labels(finished_reason=reason, **lv)
        self.num_preemptions = Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                                       ln, registry=reg).labels(**lv)
        self.running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                             ln, registry=reg).labels(**lv)
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                             ln, registry=reg).labels(**lv)
        self.kv_usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                              ln, registry=reg).labels(**lv)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              ln, registry=reg, buckets=[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                                         0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
                                                         640.0, 2560.0]).labels(**lv)
        itl_buckets = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                       20.0, 40.0, 80.0]
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                             ln, registry=reg, buckets=itl_buckets).labels(**lv)
        self.tpot = Histogram("vllm:request_time_per_output_token_seconds",
                              "Histogram of time_per_output_token_seconds per request.", ln, registry=reg,
                              buckets=itl_buckets).labels(**lv)
        e2e_buckets = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                       240.0, 480.0, 960.0, 1920.0, 7680.0]
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                             ln, registry=reg, buckets=e2e_buckets).labels(**lv)
        self.queue = Histogram("vllm:request_queue_time_seconds",
                               "Histogram of time spent in WAITING phase for request.", ln, registry=reg,
                               buckets=e2e_buckets).labels(**lv)
        self.k = k
        if k > 0:
            self.spec_drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", ln,
                                       registry=reg).labels(**lv)
            self.spec_draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", ln,
                                             registry=reg).labels(**lv)
            self.spec_accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", ln,
                                         registry=reg).labels(**lv)
            per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                              ln + ["position"], registry=reg)
            self.spec_per_pos = [per_pos.labels(position=str(i), **lv) for i in range(k)]
        # vllm-neuron's own startup series.
        Gauge("vllm_neuron:startup_time_seconds", "Time from engine start to ready.", registry=reg).set(
            float(ready.get("startup_time_s", 0.0)))
        Gauge("vllm_neuron:model_load_time_seconds", "Time spent loading model weights.", registry=reg).set(
            float(ready.get("model_load_time_s", 0.0)))
        Gauge("vllm_neuron:model_load_size_bytes", "Bytes of model weights loaded to device.", registry=reg).set(
            float(ready.get("model_load_size_bytes", 0)))
        comp = Gauge("vllm_neuron:compilation_time_seconds", "Compilation time per graph.", ["bucket_name"],
                     registry=reg)
        for name, secs in (ready.get("compile_times") or {}).items():
            comp.labels(bucket_name=name).set(float(secs))

    def success(self, reason: str) -> None:
        self._success.labels(finished_reason=reason, **self.labels).inc()


class Interval:
    def __init__(self, k: int):
        self.prompt = 0
        self.gen = 0
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted = 0
        self.per_pos = [0] * k


class ServingState:
    def __init__(self, ns: argparse.Namespace, ea: dict[str, Any], cfg: dict[str, Any], log: ProcessLog,
                 engine: EngineProc | None, ready: dict[str, Any]):
        self.ns = ns
        self.ea = ea
        self.cfg = cfg
        self.log = log
        self.engine = engine
        self.scale = float(cfg.get("token_time_scale") or 1.0)  # serving timing; startup uses time_scale
        self.fault = str(cfg.get("fault") or "none")
        spec = ea.get("speculative_config")
        self.k = int(spec.get("num_speculative_tokens") or 1) if spec else 0
        # The host's run-to-run drift ([simulation] run_spread), seeded by --seed and the served configuration,
        # so the baseline and each EAGLE3 arm drift independently and a rerun of the same server repeats itself.
        noise_key = json.dumps([getattr(ns, "seed", 0), ns.model, spec], sort_keys=True, default=str)
        self.noise = HostNoise(float(cfg.get("run_spread", 0.0) or 0.0), seed_of(noise_key))
        # --per-request-spec-decode-metrics: "none" | "summary" | "detailed" (speculative servers only; main()
        # refuses the flag without --speculative-config, as vLLM does).
        level = getattr(ns, "per_request_spec_decode_metrics", "none") or "none"
        self.per_request = level if self.k else "none"
        self.served = ns.served_model_name or [ns.model]
        self.model = ns.model
        self.max_model_len = int(ea["max_model_len"])
        self.kv_tokens = int(ready.get("kv_cache_tokens") or self.max_model_len)
        self.stats_on = not ns.disable_log_stats
        self.metrics = Metrics(self.served[0], self.k, ready)
        self.max_num_seqs = int(ea["max_num_seqs"])
        self._sem: asyncio.Semaphore | None = None
        self.running = 0
        self.waiting = 0
        self.kv_in_use: dict[int, int] = {}
        self.interval = Interval(self.k)
        self.vocab: dict[str, int] = {}
        self.inv_vocab: dict[int, str] = {}
        self.server: Any = None
        self.pending_exit = False
        self.engine_dead = False

    @property
    def sem(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_num_seqs)
        return self._sem

    def _gauges(self) -> None:
        if not self.stats_on:
            return
        self.metrics.running.set(self.running)
        self.metrics.waiting.set(self.waiting)
        self.metrics.kv_usage.set(min(1.0, sum(self.kv_in_use.values()) / max(self.kv_tokens, 1)))

    # -- token ids for /tokenize ------------------------------------------------------------------
    def token_ids(self, text: str) -> tuple[list[int], list[str]]:
        toks = [t for t in _tok(text) if not t.isspace()]
        ids = []
        for t in toks:
            if t not in self.vocab:
                i = 1000 + len(self.vocab)
                self.vocab[t] = i
                self.inv_vocab[i] = t
            ids.append(self.vocab[t])
        return ids, toks

    # -- one request --------------------------------------------------------------------------------
    def new_spec_stats(self) -> dict[str, Any] | None:
        """The per-request accumulator (vLLM's RequestSpecDecodeMetrics), or None when not enabled."""
        if self.per_request == "none":
            return None
        return {"histogram": [0] * (self.k + 1), "num_draft_tokens": 0, "per_step_accepted": [],
                "per_step_drafted": []}

    def spec_metrics(self, stats: dict[str, Any] | None, stream: bool) -> dict[str, Any] | None:
        """The response's `metrics` object (RequestSpecDecodeMetrics.to_dict under `speculative_decoding`):
        non-streamed responses carry every PerRequestMetrics field (nulls included), the final usage chunk of a
        stream only the set ones (exclude_none), as vLLM 0.32 serializes them."""
        if stats is None:
            return None
        hist = stats["histogram"]
        steps = sum(hist)
        accepted = sum(j * c for j, c in enumerate(hist))
        sd: dict[str, Any] = {
            "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
            "draft_acceptance_rate": accepted / stats["num_draft_tokens"] if stats["num_draft_tokens"] else 0.0,
            "acceptance_histogram": list(hist),
            "num_spec_steps": steps,
            "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": stats["num_draft_tokens"],
            "num_spec_tokens": self.k,
        }
        detailed = self.per_request == "detailed" and stats["per_step_accepted"]
        if detailed:
            sd["per_step_accepted"] = list(stats["per_step_accepted"])
            sd["per_step_drafted"] = list(stats["per_step_drafted"])
        if stream:
            return {"speculative_decoding": sd}
        if not detailed:
            sd["per_step_accepted"] = None
            sd["per_step_drafted"] = None
        return {"time_to_first_token_ms": None, "generation_time_ms": None, "queue_time_ms": None,
                "mean_itl_ms": None, "tokens_per_second": None, "speculative_decoding": sd}

    async def run(self, prompt: str, prompt_tokens: int, max_tokens: int, stop: list[str], *,
                  acceptance: float | None = None,
                  spec_stats: dict[str, Any] | None = None) -> AsyncIterator[tuple[str, str | None, str | None, int]]:
        """Yield (text, finish_reason, stop_reason, completion_tokens_so_far) once per engine step.

        acceptance: the draft's position-0 acceptance for this request ([simulation] acceptance unless the
        route says otherwise: chat_acceptance on /v1/chat/completions). spec_stats (new_spec_stats()) is filled
        with this request's verify steps."""
        base = float(self.cfg.get("acceptance", 0.69)) if acceptance is None else float(acceptance)
        # This prompt's own acceptance around the route's mean (the same prompt, the same acceptance).
        mine = prompt_acceptance(prompt, base, float(self.cfg.get("acceptance_spread", 0.0) or 0.0))
        acceptance = effective_acceptance(mine, self.fault)
        plan = plan_request(prompt, prompt_tokens, max_tokens,
                            ttft=float(self.cfg.get("ttft_ms", 252.0)), tpot=float(self.cfg.get("tpot_ms", 7.0)),
                            k=self.k, acceptance=acceptance, decay=float(self.cfg.get("acceptance_decay", 0.7)),
                            max_model_len=self.max_model_len,
                            lossless_broken=(self.fault == "lossless-broken"),
                            draft_cost=float(self.cfg.get("draft_prefill_cost", DRAFT_PREFILL_COST)),
                            speed=self.noise.next())
        loop = asyncio.get_running_loop()
        rid = id(plan)
        arrival = loop.time()
        self.waiting += 1
        self._gauges()
        try:
            await self.sem.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        self.kv_in_use[rid] = prompt_tokens
        self._gauges()
        m = self.metrics
        finished: str | None = None
        text = ""
        n_out = 0
        start = loop.time()
        first_at = None
        try:
            if self.stats_on:
                m.queue.observe((start - arrival) / self.scale)
            due = start
            prev = None
            last = len(plan.steps) - 1
            for idx, step in enumerate(plan.steps):
                due += step.delay_ms * self.scale / 1000.0
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                now = loop.time()
                emitted = 0
                piece = ""
                finish = stop_reason = None
                for tok in step.tokens:
                    emitted += 1
                    candidate = text + piece + tok
                    hit = next((s for s in stop if s and s in candidate), None)
                    if hit is not None:
                        cut = candidate.index(hit)
                        piece = candidate[len(text):cut] if cut >= len(text) else ""
                        finish, stop_reason = "stop", hit
                        break
                    piece += tok
                n_out += emitted
                text += piece
                if finish is None and idx == last:
                    finish = "length"
                self.kv_in_use[rid] = prompt_tokens + n_out
                if spec_stats is not None and step.drafted and self.k:  # independent of --disable-log-stats
                    spec_stats["histogram"][min(step.accepted, self.k)] += 1
                    spec_stats["num_draft_tokens"] += step.drafted
                    if self.per_request == "detailed":
                        spec_stats["per_step_accepted"].append(step.accepted)
                        spec_stats["per_step_drafted"].append(step.drafted)
                if self.stats_on:
                    iv = self.interval
                    if idx == 0:
                        m.prompt_tokens.inc(prompt_tokens)
                        iv.prompt += prompt_tokens
                        m.ttft.observe((now - arrival) / self.scale)
                        first_at = now
                    elif prev is not None:
                        m.itl.observe((now - prev) / self.scale)
                    m.generation_tokens.inc(emitted)
                    iv.gen += emitted
                    if step.drafted and self.k:
                        m.spec_drafts.inc()
                        m.spec_draft_tokens.inc(step.drafted)
                        m.spec_accepted.inc(step.accepted)
                        iv.drafts += 1
                        iv.draft_tokens += step.drafted
                        iv.accepted += step.accepted
                        for i in range(min(step.accepted, self.k)):
                            m.spec_per_pos[i].inc()
                            iv.per_pos[i] += 1
                    self._gauges()
                prev = now
                yield piece, finish, stop_reason, n_out
                if finish:
                    finished = finish
                    break
        finally:
            self.running -= 1
            self.kv_in_use.pop(rid, None)
            self.sem.release()
            if self.stats_on:
                end = loop.time()
                m.success(finished or "abort")
                if finished:
                    m.e2e.observe((end - arrival) / self.scale)
                    if first_at is not None and n_out > 1:
                        m.tpot.observe((end - first_at) / self.scale / (n_out - 1))
                self._gauges()

    # -- periodic stats -----------------------------------------------------------------------------
    async def stats_loop(self) -> None:
        loop = asyncio.get_running_loop()
        interval = STATS_INTERVAL_S * self.scale
        last = loop.time()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            dt = max((now - last) / self.scale, 1e-9)
            last = now
            iv, self.interval = self.interval, Interval(self.k)
            if not self.stats_on or (iv.prompt == 0 and iv.gen == 0):
                continue
            kv = 100.0 * min(1.0, sum(self.kv_in_use.values()) / max(self.kv_tokens, 1))
            self.log.info("loggers.py", 127,
                          f"Engine 000: Avg prompt throughput: {iv.prompt / dt:.1f} tokens/s, "
                          f"Avg generation throughput: {iv.gen / dt:.1f} tokens/s, Running: {self.running} reqs, "
                          f"Waiting: {self.waiting} reqs, GPU KV cache usage: {kv:.1f}%, "
                          f"Prefix cache hit rate: 0.0%")
            if iv.drafts > 0:
                per_pos = ", ".join(f"{c / iv.drafts:.3f}" for c in iv.per_pos)
                rate = 100.0 * iv.accepted / iv.draft_tokens if iv.draft_tokens else float("nan")
                self.log.info("metrics.py", 96,
                              f"SpecDecoding metrics: Mean acceptance length: {1 + iv.accepted / iv.drafts:.2f}, "
                              f"Accepted throughput: {iv.accepted / dt:.2f} tokens/s, "
                              f"Drafted throughput: {iv.draft_tokens / dt:.2f} tokens/s, "
                              f"Accepted: {iv.accepted} tokens, Drafted: {iv.draft_tokens} tokens, "
                              f"Per-position acceptance rate: {per_pos}, Avg Draft acceptance rate: {rate:.1f}%")

    async def engine_watch(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            if self.engine is not None and not self.engine.alive():
                await asyncio.sleep(0.2)  # a process-group signal may be on its way to us too
                if self.pending_exit or (self.server is not None and self.server.should_exit):
                    return
                self.engine_dead = True
                self.log.error("core_client.py", 564,
                               "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.")
                if self.server is not None:
                    self.server.should_exit = True
                return


# --------------------------------------------------------------------------------------------------
# HTTP app
# --------------------------------------------------------------------------------------------------

ROUTES_PRINTED = [
    ("/openapi.json", "GET, HEAD"), ("/health", "GET"), ("/load", "GET"), ("/ping", "POST"), ("/ping", "GET"),
    ("/tokenize", "POST"), ("/detokenize", "POST"), ("/v1/models", "GET"), ("/version", "GET"),
    ("/v1/completions", "POST"), ("/v1/chat/completions", "POST"), ("/reset_prefix_cache", "POST"),
    ("/metrics", "GET"),
]


def _err(message: str, etype: str, code: int):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": etype, "param": None, "code": code}},
                        status_code=code)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def create_app(st: ServingState):
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    api_key = st.ns.api_key

    def unauthorized(request: Request) -> Response | None:
        if api_key and request.headers.get("authorization", "") != f"Bearer {api_key}":
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        return None

    async def health(request: Request) -> Response:
        if st.engine_dead or (st.engine is not None and not st.engine.alive()):
            return Response(status_code=503)
        return Response(status_code=200)

    async def load(request: Request) -> Response:
        return JSONResponse({"server_load": st.running + st.waiting})

    async def version(request: Request) -> Response:
        return JSONResponse({"version": st.cfg.get("vllm_version", "0.24.0")})

    async def openapi(request: Request) -> Response:
        return JSONResponse({"openapi": "3.1.0", "info": {"title": "vLLM (specdec-tui simulation)",
                                                           "version": st.cfg.get("vllm_version", "0.24.0")},
                             "paths": {p: {} for p, _ in ROUTES_PRINTED}})

    async def models(request: Request) -> Response:
        if (r := unauthorized(request)) is not None:
            return r
        now = int(time.time())
        data = [{"id": name, "object": "model", "created": now, "owned_by": "vllm", "root": st.model,
                 "parent": None, "max_model_len": st.max_model_len,
                 "permission": [{"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission",
                                 "created": now, "allow_create_engine": False, "allow_sampling": True,
                                 "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                                 "allow_fine_tuning": False, "organization": "*", "group": None,
                                 "is_blocking": False}]}
                for name in st.served]
        return JSONResponse({"object": "list", "data": data})

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(st.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def reset_prefix_cache(request: Request) -> Response:
        return Response(status_code=200)

    async def _body(request: Request) -> dict[str, Any] | Response:
        try:
            body = await request.json()
        except ValueError as e:
            return _err(f"JSON decode error: {e}", "BadRequestError", 400)
        if not isinstance(body, dict):
            return _err("Request body must be a JSON object.", "BadRequestError", 400)
        return body

    async def tokenize_ep(request: Request) -> Response:
        body = await _body(request)
        if isinstance(body, Response):
            return body
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            return _err("'prompt' must be a string.", "BadRequestError", 400)
        ids, toks = st.token_ids(prompt)
        return JSONResponse({"count": len(ids), "max_model_len": st.max_model_len, "tokens": ids,
                             "token_strs": toks if body.get("return_token_strs") else None})

    async def detokenize_ep(request: Request) -> Response:
        body = await _body(request)
        if isinstance(body, Response):
            return body
        ids = body.get("tokens")
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            return _err("'tokens' must be a list of integers.", "BadRequestError", 400)
        return JSONResponse({"prompt": " ".join(st.inv_vocab.get(i, "") for i in ids)})

    def _sampling(body: dict[str, Any], prompt_tokens: int,
                  max_keys: tuple[str, ...]) -> Response | tuple[int, bool, bool, list[str]]:
        """(max_tokens, stream, include_usage, stop) of a request, or its 400 response (vLLM's messages)."""
        if max_keys == ("max_tokens",):  # /v1/completions: OpenAI's default of 16
            max_tokens: Any = body.get("max_tokens", 16)
        else:  # chat: max_completion_tokens, else the deprecated max_tokens, else the rest of the context
            max_tokens = next((body[k] for k in max_keys if body.get(k) is not None), None)
        if max_tokens is None:
            max_tokens = st.max_model_len - prompt_tokens
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            return _err(f"max_tokens must be at least 1, got {max_tokens}.", "BadRequestError", 400)
        if prompt_tokens > st.max_model_len:
            return _err(f"This model's maximum context length is {st.max_model_len} tokens. However, your request "
                        f"has {prompt_tokens} input tokens. Please reduce the length of the input messages.",
                        "BadRequestError", 400)
        if prompt_tokens + max_tokens > st.max_model_len:
            return _err(f"'max_tokens' is too large: {max_tokens}. This model's maximum context length is "
                        f"{st.max_model_len} tokens and your request has {prompt_tokens} input tokens "
                        f"({max_tokens} > {st.max_model_len} - {prompt_tokens}).", "BadRequestError", 400)
        stream = bool(body.get("stream", False))
        stream_options = body.get("stream_options")
        if stream_options is not None and not stream:
            return _err("Stream options can only be defined when `stream=True`.", "BadRequestError", 400)
        include_usage = bool((stream_options or {}).get("include_usage")) or st.ns.enable_force_include_usage
        stop = body.get("stop") or []
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            return _err("'stop' must be a string or a list of strings.", "BadRequestError", 400)
        return max_tokens, stream, include_usage, stop

    def _model(body: dict[str, Any]) -> Response | str:
        model = body.get("model")
        if model is not None and model not in st.served:
            return _err(f"The model `{model}` does not exist.", "NotFoundError", 404)
        return model or st.served[0]

    async def _request(request: Request) -> tuple[dict[str, Any], str] | Response:
        """The checks every generation route makes first, as vLLM does: the API key, a JSON body, the model."""
        if (r := unauthorized(request)) is not None:
            return r
        body = await _body(request)
        if isinstance(body, Response):
            return body
        model = _model(body)
        if isinstance(model, Response):
            return model
        return body, model

    async def completions(request: Request) -> Response:
        got = await _request(request)
        if isinstance(got, Response):
            return got
        body, model = got
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            prompt_tokens = len(prompt)
            prompt = " ".join(str(t) for t in prompt)
        elif isinstance(prompt, str):
            prompt_tokens = max(1, len([t for t in _tok(prompt) if not t.isspace()]))
        else:
            return _err("'prompt' must be a string, a list of one string or a list of token ids.",
                        "BadRequestError", 400)
        sampling = _sampling(body, prompt_tokens, ("max_tokens",))
        if isinstance(sampling, Response):
            return sampling
        max_tokens, stream, include_usage, stop = sampling
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex
        cid = f"cmpl-{rid}"
        created = int(time.time())
        stats = st.new_spec_stats()

        if not stream:
            text = ""
            finish = stop_reason = None
            n_out = 0
            async with contextlib.aclosing(st.run(prompt, prompt_tokens, max_tokens, stop, spec_stats=stats)) as steps:
                async for piece, fin, sr, n in steps:
                    text += piece
                    n_out = n
                    if fin:
                        finish, stop_reason = fin, sr
            resp: dict[str, Any] = {
                "id": cid, "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                             "stop_reason": stop_reason, "prompt_logprobs": None}],
                "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + n_out,
                          "completion_tokens": n_out, "prompt_tokens_details": None},
                "kv_transfer_params": None}
            if stats is not None:
                resp["metrics"] = st.spec_metrics(stats, stream=False)
            return JSONResponse(resp)

        async def sse() -> AsyncIterator[str]:
            n_out = 0
            async with contextlib.aclosing(st.run(prompt, prompt_tokens, max_tokens, stop, spec_stats=stats)) as steps:
                async for piece, fin, sr, n in steps:
                    n_out = n
                    chunk = {"id": cid, "object": "text_completion", "created": created, "model": model,
                             "choices": [{"index": 0, "text": piece, "logprobs": None, "finish_reason": fin,
                                          "stop_reason": sr, "prompt_token_ids": None, "token_ids": None}],
                             "usage": None}
                    yield f"data: {_dumps(chunk)}\n\n"
            if include_usage:
                usage: dict[str, Any] = {"id": cid, "object": "text_completion", "created": created, "model": model,
                                         "choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                                                  "total_tokens": prompt_tokens + n_out,
                                                                  "completion_tokens": n_out}}
                if stats is not None:  # metrics ride on the usage chunk only
                    usage["metrics"] = st.spec_metrics(stats, stream=True)
                yield f"data: {_dumps(usage)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    def _messages(body: dict[str, Any]) -> Response | list[dict[str, str]]:
        """The request's messages with text content (a string, or a list of {"type": "text"} parts, joined as
        vLLM's 'string' content format does), or a 400."""
        msgs = body.get("messages")
        if not isinstance(msgs, list):
            return _err("'messages' must be a list of messages.", "BadRequestError", 400)
        if not msgs:
            return _err("Cannot apply chat template to an empty conversation. Provide at least one message.",
                        "BadRequestError", 400)
        out = []
        for m in msgs:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                return _err("Each message must be an object with a 'role'.", "BadRequestError", 400)
            content = m.get("content")
            if content is None:
                content = ""
            if isinstance(content, list):
                texts = []
                for part in content:
                    if isinstance(part, str):
                        texts.append(part)
                    elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                        texts.append(part["text"])
                    else:
                        return _err("Only text content parts are supported by this model.", "BadRequestError", 400)
                content = "\n".join(texts)
            if not isinstance(content, str):
                return _err("'content' must be a string or a list of content parts.", "BadRequestError", 400)
            out.append({"role": m["role"], "content": content})
        return out

    async def chat_completions(request: Request) -> Response:
        got = await _request(request)
        if isinstance(got, Response):
            return got
        body, model = got
        messages = _messages(body)
        if isinstance(messages, Response):
            return messages
        prompt = render_chat(messages)  # the stand-in chat template, add_generation_prompt=True
        prompt_tokens = max(1, len([t for t in _tok(prompt) if not t.isspace()]))
        sampling = _sampling(body, prompt_tokens, ("max_completion_tokens", "max_tokens"))
        if isinstance(sampling, Response):
            return sampling
        max_tokens, stream, include_usage, stop = sampling
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex
        cid = f"chatcmpl-{rid}"
        created = int(time.time())
        stats = st.new_spec_stats()
        acceptance = float(st.cfg.get("chat_acceptance", st.cfg.get("acceptance", 0.69)))

        def steps_of():
            return contextlib.aclosing(st.run(prompt, prompt_tokens, max_tokens, stop, acceptance=acceptance,
                                              spec_stats=stats))

        if not stream:
            text = ""
            finish = stop_reason = None
            n_out = 0
            async with steps_of() as steps:
                async for piece, fin, sr, n in steps:
                    text += piece
                    n_out = n
                    if fin:
                        finish, stop_reason = fin, sr
            resp: dict[str, Any] = {
                "id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None,
                                                     "annotations": None, "audio": None, "function_call": None,
                                                     "reasoning": None},
                             "logprobs": None, "finish_reason": finish, "stop_reason": stop_reason,
                             "token_ids": None}],
                "service_tier": None,
                "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + n_out,
                          "completion_tokens": n_out, "prompt_tokens_details": None},
                "prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None}
            if stats is not None:
                resp["metrics"] = st.spec_metrics(stats, stream=False)
            return JSONResponse(resp)

        async def sse() -> AsyncIterator[str]:
            n_out = 0
            first = True
            async with steps_of() as steps:
                async for piece, fin, sr, n in steps:
                    n_out = n
                    if first:  # vLLM sends the role with the first engine output, content ""
                        first = False
                        head = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                             "logprobs": None, "finish_reason": None}],
                                "prompt_token_ids": None}
                        yield f"data: {_dumps(head)}\n\n"
                    choice: dict[str, Any] = {"index": 0, "delta": {"content": piece}, "logprobs": None,
                                              "finish_reason": fin}
                    if fin:
                        choice["stop_reason"] = sr
                    choice["token_ids"] = None
                    chunk = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                             "choices": [choice]}
                    yield f"data: {_dumps(chunk)}\n\n"
            if include_usage:
                usage: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created,
                                         "model": model, "choices": [],
                                         "usage": {"prompt_tokens": prompt_tokens,
                                                   "total_tokens": prompt_tokens + n_out, "completion_tokens": n_out}}
                if stats is not None:
                    usage["metrics"] = st.spec_metrics(stats, stream=True)
                yield f"data: {_dumps(usage)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"detail": "Not Found"}, status_code=404)

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return JSONResponse({"detail": "Method Not Allowed"}, status_code=405)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        tasks = [asyncio.create_task(st.stats_loop()), asyncio.create_task(st.engine_watch())]
        if st.pending_exit and st.server is not None:
            st.server.should_exit = True
        try:
            yield
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    routes = [
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/load", load, methods=["GET"]),
        Route("/ping", health, methods=["GET", "POST"]),
        Route("/tokenize", tokenize_ep, methods=["POST"]),
        Route("/detokenize", detokenize_ep, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/version", version, methods=["GET"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/reset_prefix_cache", reset_prefix_cache, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_allowed})


def uvicorn_log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's own formatters (``INFO:     Started server process [PID]``), to stdout, no colours."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "default": {"()": "uvicorn.logging.DefaultFormatter", "fmt": "%(levelprefix)s %(message)s",
                        "use_colors": False},
            "access": {"()": "uvicorn.logging.AccessFormatter",
                       "fmt": '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s',
                       "use_colors": False},
        },
        "handlers": {
            "default": {"formatter": "default", "class": "logging.StreamHandler", "stream": "ext://sys.stdout"},
            "access": {"formatter": "access", "class": "logging.StreamHandler", "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": ["access"], "level": level.upper(), "propagate": False},
        },
    }


# --------------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------------


def _bind(host: str | None, port: int) -> socket.socket:
    family = socket.AF_INET6 if host and ":" in host else socket.AF_INET
    sock = socket.socket(family=family, type=socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host if host is not None else "127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    # Accepted connections inherit TCP_NODELAY. asyncio sets it itself only on sockets whose proto is
    # IPPROTO_TCP (this one's is 0); vLLM's uvloop sets it on every TCP transport. Without it every SSE
    # chunk after the headers waits for the client's delayed ACK (about 40 ms on Linux loopback).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class _Interrupted(KeyboardInterrupt):
    pass


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = dict(os.environ)
    cfg = sim_config(environ)
    version = cfg.get("vllm_version", "0.24.0")
    try:
        ns = parse_args(argv, version)
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    scale = float(cfg.get("time_scale") or 1.0)
    pid = os.getpid()
    log = ProcessLog("APIServer", pid, sys.stdout, color_enabled(environ))
    ea = engine_args(ns)

    log.info("api_server.py", 1839, f"vLLM API server version {version}")
    log.info("utils.py", 233, f"non-default args: {non_default_args(ns, version)}")
    try:
        sock = _bind(ns.host, ns.port)
    except OSError as e:
        _print_api_traceback(log, [
            ("vllm/entrypoints/openai/api_server.py", 1884, "run_server",
             "listen_address, sock = setup_server(args)"),
            ("vllm/entrypoints/openai/api_server.py", 1870, "setup_server", "sock = create_server_socket(sock_addr)"),
            ("vllm/entrypoints/openai/api_server.py", 1830, "create_server_socket", "sock.bind(addr)"),
        ], f"{type(e).__name__}: {e}")
        return 1

    def on_signal(signum, frame):
        raise _Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    engine: EngineProc | None = None
    try:
        log.info("model.py", 547, f"Resolved architecture: {_architecture(ns.model)}")
        log.info("model.py", 1510, f"Using max model len {ea['max_model_len']}")
        log.plugin("WARNING", "platform.py", 142, "Neuron Platform only supports the following distributed executor "
                   "backends: ('mp', 'uni'), using mp")
        log.plugin("INFO", "platform.py", 188, "Defaulting optimization level to O1 on Neuron")
        log.info("scheduler.py", 205,
                 f"Chunked prefill is enabled with max_num_batched_tokens={ea['max_num_batched_tokens']}.")
        if getattr(ns, "per_request_spec_decode_metrics", "none") != "none" and not ea["speculative_config"]:
            # VllmConfig.__post_init__ (config/vllm.py): the flag needs a speculative config. vLLM 0.32 reports it
            # as pydantic's ValidationError from create_engine_config, exit 1, before any engine process.
            _print_api_traceback(log, [
                ("vllm/entrypoints/openai/api_server.py", 1896, "run_server",
                 "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)"),
                ("vllm/entrypoints/openai/api_server.py", 1912, "run_server_worker",
                 "async with build_async_engine_client("),
                ("stdlib/contextlib.py", 210, "__aenter__", "return await anext(self.gen)"),
                ("vllm/entrypoints/openai/api_server.py", 172, "build_async_engine_client_from_engine_args",
                 "vllm_config = engine_args.create_engine_config(usage_context=usage_context)"),
                ("vllm/engine/arg_utils.py", 2838, "create_engine_config", "config = VllmConfig("),
                ("pydantic/_internal/_dataclasses.py", 121, "__init__",
                 "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)"),
            ], "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig\n"
               f"  Value error, {PER_REQUEST_ERROR} [type=value_error, input_value=ArgsKwargs((), "
               "{'model_co... 'shutdown_timeout': 0}), input_type=ArgsKwargs]\n"
               "    For further information visit https://errors.pydantic.dev/2.14/v/value_error")
            return 1
        if ea["speculative_config"]:
            log.plugin("WARNING", "platform.py", 231, "Speculative decoding is enabled; disabling async scheduling.")
        log.plugin("INFO", "platform.py", 254, "Using NEURON custom attention backend.")

        engine = EngineProc(ea, environ)
        timeout_cfg = float(environ.get("VLLM_ENGINE_READY_TIMEOUT_S", "600") or 600)
        status, info = engine.wait_ready(timeout_cfg * scale)
        frames_wait = [
            ("vllm/entrypoints/openai/api_server.py", 1896, "run_server",
             "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)"),
            ("vllm/entrypoints/openai/api_server.py", 1912, "run_server_worker",
             "async with build_async_engine_client("),
            ("stdlib/contextlib.py", 210, "__aenter__", "return await anext(self.gen)"),
            ("vllm/entrypoints/openai/api_server.py", 180, "build_async_engine_client_from_engine_args",
             "async_llm = AsyncLLM.from_vllm_config("),
            ("vllm/v1/engine/async_llm.py", 136, "__init__", "self.engine_core = EngineCoreClient.make_async_mp_client("),
            ("vllm/v1/engine/core_client.py", 469, "__init__", "with launch_core_engines(vllm_config, executor_class,"),
            ("stdlib/contextlib.py", 144, "__exit__", "next(self.gen)"),
            ("vllm/v1/engine/utils.py", 782, "launch_core_engines", "wait_for_engine_startup("),
        ]
        if status == "timeout":
            shown = int(timeout_cfg) if timeout_cfg == int(timeout_cfg) else timeout_cfg
            _print_api_traceback(log, frames_wait + [
                ("vllm/v1/engine/utils.py", 860, "wait_for_engine_startup", "raise TimeoutError("),
            ], "TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow "
               f"weight loading for large models. Waited {shown}s (configured by VLLM_ENGINE_READY_TIMEOUT_S). "
               "To increase the timeout, set the environment variable: VLLM_ENGINE_READY_TIMEOUT_S=<seconds>")
            return 1
        if status != "ready":
            engine.stop()
            rc = engine.proc.returncode
            _print_api_traceback(log, frames_wait + [
                ("vllm/v1/engine/utils.py", 871, "wait_for_engine_startup", "raise RuntimeError("),
            ], "RuntimeError: Engine core initialization failed. See root cause above. "
               f"Failed core proc(s): {{'EngineCore_DP0': {rc if rc is not None else 1}}}")
            return 1

        import uvicorn

        st = ServingState(ns, ea, cfg, log, engine, info)
        app = create_app(st)
        host_shown = ns.host or "0.0.0.0"  # --host "" means every interface, as in vLLM
        log.info("api_server.py", 1634, "Supported_tasks: ['generate']")
        log.info("api_server.py", 1912, f"Starting vLLM API server 0 on http://{host_shown}:{ns.port}")
        log.info("launcher.py", 34, "Available routes are:")
        for path, methods in ROUTES_PRINTED:
            log.info("launcher.py", 42, f"Route: {path}, Methods: {methods}")
        config = uvicorn.Config(app, log_config=uvicorn_log_config(ns.uvicorn_log_level), lifespan="on",
                                access_log=not ns.disable_uvicorn_access_log, timeout_keep_alive=5,
                                timeout_graceful_shutdown=2, log_level=ns.uvicorn_log_level)
        server = uvicorn.Server(config)
        st.server = server

        def during_serve(signum, frame):  # uvicorn restores this handler and re-raises into it after shutdown
            st.pending_exit = True
            server.should_exit = True

        signal.signal(signal.SIGTERM, during_serve)
        signal.signal(signal.SIGINT, during_serve)
        asyncio.run(server.serve(sockets=[sock]))
        return 1 if st.engine_dead else 0
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if engine is not None:
            engine.stop()
        with contextlib.suppress(OSError):
            sock.close()
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
