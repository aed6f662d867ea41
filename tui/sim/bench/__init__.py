"""`python -m tui.sim bench serve [flags]`: a stand-in for `vllm bench serve` (openai and openai-chat
backends; sonnet, custom).

It is a real client: it builds SonnetDataset-style prompts (approximate tokenizer, stand-in chat
template), sends streaming `/v1/completions` requests (`--backend openai`/`vllm`) or `/v1/chat/completions`
requests (`--backend openai-chat`: one user message of text parts, `max_completion_tokens`, read from
`choices[0].delta.content`, as vLLM's async_request_openai_chat_completions) with httpx under
`--max-concurrency` (TCP_NODELAY, as aiohttp's connector), parses the SSE stream the way vLLM's client does,
computes vLLM's metrics, prints vLLM's stdout (progress bar on stderr via tqdm) and writes the `--save-result`
JSON in vLLM's key order.

Version behaviour follows SPECDEC_SIM["vllm_version"] (default tui.core.versions.DEMO_VLLM, 0.29.0):
- < 0.13: the 0.11 shape (no "Failed requests:" line / `failed` key, "Total Token throughput").
- < 0.14: `--model` required, ready check 600 s by default, no Speculative Decoding block/keys.
- < 0.15: `temperature: 0.0` forced in every request; 0.15+: WARNING unless --temperature.
- >= 0.14: the JSON uses the 0.31+ key set (`latencies`, `queue_times`, `rtfx`) as the TUI expects.
- >= 0.22: usage.prompt_tokens overrides the prompt length; /metrics parser keeps `_total` only.
- 0.29 - 0.31: sonnet prints the DeprecationWarning of vLLM's @deprecated SonnetDataset on stderr.
- >= 0.32: no sonnet (argparse rejects `--dataset-name sonnet` with 0.32's choices, `--sonnet-*` are
  unknown flags).
- `--dataset-name custom` (every version) reads a JSONL as vLLM's CustomDataset does (`prompt`, optional
  `output_tokens`, shuffled with --seed unless --disable-shuffle (0.11.2+), chat template applied client-side
  unless --skip-chat-template (--custom-skip-chat-template before 0.11) whatever the backend,
  --custom-output-len (default 256; -1 = the file's output_tokens), oversampled to --num-prompts unless
  --no-oversample).

With `--model` given (0.14+) the server is not contacted before the run: against a dead server every
request fails, the bench exits 0 and its result file says `completed: 0` (what vLLM 0.32 does).
Differences from vLLM: no real tokenizer (tui.sim.tokens); without --model, or before 0.14, an
unreachable server is a clear error (exit 1).

The package, one job a module: args.py (argv, the version, BenchError), datasets.py (the sonnet and custom
datasets' sampling), client.py (the streaming requests and their SSE reader), spec_metrics.py (the /metrics
reader and the Speculative Decoding block), results.py (the statistics, the printed report, the result file),
console.py (stdout) and main.py (`main`: the run).
"""

from __future__ import annotations

from .args import (DATASET_CHOICES_032, METRIC_NAMES, PROG, SONNET_DEPRECATION, TEMPERATURE_WARNING, BenchError,
                   build_parser, parse_metadata, selected_metrics, vllm_version)
from .client import RequestOutput, _StreamState, request_completion, resolve_model
from .datasets import BASE_PROMPT, SampleRequest, chat_template, sample_custom, sample_sonnet
from .main import main, run
from .results import calculate_and_print, p_word, save_result
from .spec_metrics import fetch_spec_metrics, spec_stats

__all__ = ["BASE_PROMPT", "DATASET_CHOICES_032", "METRIC_NAMES", "PROG", "SONNET_DEPRECATION", "TEMPERATURE_WARNING",
           "BenchError", "RequestOutput", "SampleRequest", "build_parser", "calculate_and_print", "chat_template",
           "fetch_spec_metrics", "main", "p_word", "parse_metadata", "request_completion", "resolve_model", "run",
           "sample_custom", "sample_sonnet", "save_result", "selected_metrics", "spec_stats", "vllm_version"]
