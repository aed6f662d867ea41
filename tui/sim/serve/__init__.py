"""The simulated ``vllm serve`` (vLLM 0.21–0.34, by default the 0.29 the Neuron SDK 2.33 plugin pins, with the
vllm-neuron ≥ 0.21 platform plugin).

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

The package, one job a module: args.py (argv), engine_proc.py (the engine-core child), state.py (the serving
state: scheduler, metrics, stats log), routes.py (the HTTP app) and main.py (`main`: the process).
"""

from __future__ import annotations

from .args import (DEFAULT_MODEL, PER_REQUEST_ERROR, PER_REQUEST_SINCE, PROG, USAGE, build_parser,
                   default_max_model_len, engine_args, non_default_args, parse_args)
from .engine_proc import EngineProc
from .main import main, uvicorn_log_config
from .routes import ROUTES_PRINTED, create_app
from .state import STATS_INTERVAL_S, Interval, Metrics, ServingState

__all__ = ["DEFAULT_MODEL", "EngineProc", "Interval", "Metrics", "PER_REQUEST_ERROR", "PER_REQUEST_SINCE", "PROG",
           "ROUTES_PRINTED", "STATS_INTERVAL_S", "ServingState", "USAGE", "build_parser", "create_app",
           "default_max_model_len", "engine_args", "main", "non_default_args", "parse_args", "uvicorn_log_config"]
