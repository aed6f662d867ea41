"""`python -m tui.sim bench serve [flags]`: a stand-in for `vllm bench serve` (openai and openai-chat
backends; sonnet, custom).

It is a real client: it builds SonnetDataset-style prompts (approximate tokenizer, stand-in chat
template), sends streaming `/v1/completions` requests (`--backend openai`/`vllm`) or `/v1/chat/completions`
requests (`--backend openai-chat`: one user message of text parts, `max_completion_tokens`, read from
`choices[0].delta.content`, as vLLM's async_request_openai_chat_completions) with httpx under
`--max-concurrency` (TCP_NODELAY, as aiohttp's connector), parses the SSE stream the way vLLM's client does,
computes vLLM's metrics, prints vLLM's stdout (progress bar on stderr via tqdm) and writes the `--save-result`
JSON in vLLM's key order.

Version behaviour follows SPECDEC_SIM["vllm_version"] (default 0.24.0):
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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import socket
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import httpx
from tqdm import tqdm

from ..core.versions import release
from .config import sim_config
from .tokens import count_tokens, render_chat

PROG = "vllm bench serve"
BASE_PROMPT = "Pick as many lines as you can from these poem lines:\n"
TEMPERATURE_WARNING = ("WARNING: vllm bench serve no longer sets temperature==0 (greedy) in requests by default. "
                       "The default will be determined on the server side and can be model/API specific. "
                       "For the old behavior, include --temperature=0.")
# vLLM 0.32's `--dataset-name` choices (sonnet is gone).
DATASET_CHOICES_032 = ["sharegpt", "burstgpt", "random", "random-mm", "random-rerank", "hf", "custom", "custom_audio",
                       "custom_image", "prefix_repetition", "spec_bench", "speed_bench", "timed_trace"]
SONNET_DEPRECATION = ("vllm/benchmarks/datasets/datasets.py:2293: DeprecationWarning: SonnetDataset is deprecated and "
                      "will be removed in a future version.\n  dataset = SonnetDataset(dataset_path=args.dataset_path)")
METRIC_NAMES = {
    "ttft": ("TTFT", "Time to First Token"),
    "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
    "itl": ("ITL", "Inter-token Latency"),
    "e2el": ("E2EL", "End-to-end Latency"),
}


class BenchError(Exception):
    """A fatal benchmark error: printed as `Error: ...` and exit status 1."""


def chat_template(content: str) -> str:
    """Stand-in for the gpt-oss (harmony) chat template, add_generation_prompt=True (the same template the
    simulated server applies on /v1/chat/completions)."""
    return render_chat([{"role": "user", "content": content}])


# ----------------------------------------------------------------------------------------------
# CLI

def build_parser(vt: tuple[int, ...]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Benchmark the online serving throughput (simulated).")
    p.add_argument("--backend", default="openai", choices=["openai", "vllm", "openai-chat"])
    p.add_argument("--base-url", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--endpoint", default="/v1/completions")
    p.add_argument("--model", default=None, required=vt < (0, 14))
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--trust-remote-code", action="store_true")
    if vt >= (0, 32):
        p.add_argument("--dataset-name", type=str, default="random", choices=DATASET_CHOICES_032)
        p.add_argument("--dataset-path", type=str, default=None)
        p.add_argument("--no-oversample", action="store_true")
        p.add_argument("--skip-chat-template", action="store_true")
        p.add_argument("--disable-shuffle", action="store_true")
        p.add_argument("--custom-output-len", type=int, default=256)
        p.add_argument("--input-len", type=int, default=None)
        p.add_argument("--output-len", type=int, default=None)
    else:
        p.add_argument("--dataset-name", default="sonnet", choices=["sonnet", "custom"])
        p.add_argument("--dataset-path", default=None)
        p.add_argument("--no-oversample", action="store_true")
        # The custom dataset's flags before 0.32: --custom-skip-chat-template before 0.11 (the general
        # --skip-chat-template later), --disable-shuffle from 0.11.2 (vllm PR #26258).
        if vt >= (0, 11):
            p.add_argument("--skip-chat-template", action="store_true")
        else:
            p.add_argument("--custom-skip-chat-template", dest="skip_chat_template", action="store_true")
        if vt >= (0, 11, 2):
            p.add_argument("--disable-shuffle", action="store_true")
        p.add_argument("--custom-output-len", type=int, default=256)
        p.add_argument("--sonnet-input-len", type=int, default=550)
        p.add_argument("--sonnet-output-len", type=int, default=150)
        p.add_argument("--sonnet-prefix-len", type=int, default=200)
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--burstiness", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--request-id-prefix", default=None)
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--save-result", action="store_true")
    p.add_argument("--save-detailed", action="store_true")
    p.add_argument("--append-result", action="store_true")
    p.add_argument("--result-dir", default=None)
    p.add_argument("--result-filename", default=None)
    p.add_argument("--metadata", nargs="*", default=None)
    p.add_argument("--label", default=None)
    p.add_argument("--percentile-metrics", default=None)
    p.add_argument("--metric-percentiles", default="99")
    p.add_argument("--ready-check-timeout-sec", type=int, default=600 if vt < (0, 14) else 0)
    return p


# ----------------------------------------------------------------------------------------------
# Dataset (SonnetDataset.sample)

@dataclass
class SampleRequest:
    prompt: str
    prompt_len: int
    expected_output_len: int
    request_id: str


def sample_sonnet(path: str, num_requests: int, input_len: int, output_len: int, prefix_len: int,
                  seed: int, request_id_prefix: str, vt: tuple[int, ...], raw: bool = False) -> list[SampleRequest]:
    """raw: the openai-chat backend, which sends the prompt without the chat template (the server applies
    it); the length check still uses the chat-formatted text, as vLLM's does."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as exc:
        raise BenchError(f"cannot read --dataset-path {path}: {exc.strerror or exc}") from None
    if not lines:
        raise BenchError(f"--dataset-path {path} is empty")
    avg_len = sum(count_tokens(line) for line in lines) / len(lines)
    if avg_len <= 0:
        raise BenchError(f"--dataset-path {path} has no tokens")
    base_offset = count_tokens(chat_template(BASE_PROMPT))
    if input_len <= base_offset:
        raise BenchError(f"'input_len' must be higher than the base prompt length ({base_offset}).")
    num_input_lines = round((input_len - base_offset) / avg_len)
    if vt >= (0, 31):
        num_input_lines = max(num_input_lines, 1)
    num_prefix_lines = max(round((prefix_len - base_offset) / avg_len), 0)
    # Sim-only guard: real vLLM rejection-samples forever when the shared prefix alone exceeds
    # input_len (e.g. the default --sonnet-prefix-len 200 with --sonnet-input-len 128); shrink it.
    num_prefix_lines = min(num_prefix_lines, num_input_lines)
    while num_prefix_lines > 0 and count_tokens(
            chat_template(BASE_PROMPT + "".join(lines[:num_prefix_lines]))) > input_len:
        num_prefix_lines -= 1
    prefix_lines = lines[:num_prefix_lines]
    rng = random.Random(seed)
    out: list[SampleRequest] = []
    attempts, max_attempts = 0, 1000 + 1000 * num_requests
    while len(out) < num_requests:
        attempts += 1
        if attempts > max_attempts:
            raise BenchError(f"could not sample sonnet prompts of at most {input_len} tokens from {path}")
        extra = rng.choices(lines, k=max(num_input_lines - num_prefix_lines, 0))
        content = BASE_PROMPT + "".join(prefix_lines + extra)
        prompt = chat_template(content)
        plen = count_tokens(prompt)
        if plen <= input_len:
            out.append(SampleRequest(content if raw else prompt, plen, output_len, f"{request_id_prefix}{len(out)}"))
    return out


def sample_custom(path: str | None, num_requests: int, output_len: int | None, skip_chat_template: bool, seed: int,
                  disable_shuffle: bool, no_oversample: bool, request_id_prefix: str) -> list[SampleRequest]:
    """vLLM's CustomDataset (load_data + sample + maybe_oversample_requests) for a JSONL of {"prompt", ...}."""
    if path is None:
        raise BenchError("dataset_path must be provided for loading data.")
    if not path.endswith(".jsonl"):
        raise BenchError("Only JSONL format is supported for CustomDataset.")
    rows: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    raise BenchError(f"{path}: line {n} is not JSON (pandas.read_json: Expected object or value)") from None
                rows.append(row if isinstance(row, dict) else {})
    except OSError as exc:
        raise BenchError(f"cannot read --dataset-path {path}: {exc.strerror or exc}") from None
    if not any("prompt" in r for r in rows):
        raise BenchError("JSONL file must contain a 'prompt' column.")
    rng = random.Random(seed)  # vLLM: random.seed(self.random_seed); random.shuffle(self.data)
    if not disable_shuffle:
        rng.shuffle(rows)
    if num_requests <= 0:
        num_requests = len(rows)
    out: list[SampleRequest] = []
    for i, item in enumerate(rows):
        if len(out) >= num_requests:
            break
        prompt = str(item.get("prompt", ""))
        if output_len is None or output_len == -1:
            if "output_tokens" not in item:
                raise BenchError("If no output length is provided the custom dataset must contain an 'output_tokens' "
                                 "field.")
            try:
                new_output_len = int(item["output_tokens"])
            except (TypeError, ValueError):
                raise BenchError(f"Invalid value for 'output_tokens' in custom dataset: '{item['output_tokens']}'. "
                                 "Must be an integer.") from None
        else:
            new_output_len = output_len
        if not skip_chat_template:
            prompt = chat_template(prompt)
        out.append(SampleRequest(prompt, count_tokens(prompt), new_output_len, request_id_prefix + str(i)))
    if not no_oversample and out and len(out) < num_requests:
        rng = random.Random(seed)
        have = len(out)
        out.extend(replace(rng.choice(out[:have]), request_id=request_id_prefix + str(have + i))
                   for i in range(num_requests - have))
        _out(f"INFO {datetime.now().strftime('%m-%d %H:%M:%S')} [datasets.py:324] Oversampled requests to reach "
             f"{num_requests} total samples.")
    return out


# ----------------------------------------------------------------------------------------------
# Request (async_request_openai_completions)

@dataclass
class RequestOutput:
    success: bool = False
    generated_text: str = ""
    prompt_len: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    start_time: float = 0.0
    queue_time: float = 0.0
    error: str = ""


class _StreamState:
    def __init__(self, out: RequestOutput, st: float, vt: tuple[int, ...], chat: bool = False):
        self.out, self.st, self.vt, self.chat = out, st, vt, chat
        self.first = False
        self.recent = st

    def message(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").strip()
        if not text or text.startswith(":"):
            return
        if text.startswith("data:"):
            text = text[5:].lstrip()
        if text == "[DONE]":
            return
        data = json.loads(text)  # a parse error fails the request, as in vLLM
        if not isinstance(data, dict):
            return
        choices = data.get("choices")
        if choices:
            ts = time.perf_counter()
            if not self.first:
                self.first = True
                self.out.ttft = ts - self.st
            else:
                self.out.itl.append(ts - self.recent)
            self.recent = ts
            if self.chat:  # async_request_openai_chat_completions: choices[0]["delta"].get("content")
                self.out.generated_text += (choices[0]["delta"].get("content") or "")
            else:
                self.out.generated_text += (choices[0].get("text") or "")
        elif data.get("usage"):
            usage = data["usage"]
            self.out.output_tokens = usage.get("completion_tokens") or 0
            if self.vt >= (0, 22) and usage.get("prompt_tokens") is not None:
                self.out.prompt_len = int(usage["prompt_tokens"])


async def request_completion(client: httpx.AsyncClient, api_url: str, payload: dict[str, Any],
                             headers: dict[str, str], prompt_len: int, vt: tuple[int, ...],
                             chat: bool = False) -> RequestOutput:
    out = RequestOutput(prompt_len=prompt_len)
    st = time.perf_counter()
    out.start_time = st
    state = _StreamState(out, st, vt, chat)
    try:
        async with client.stream("POST", api_url, json=payload, headers=headers) as resp:
            if resp.status_code != 200:
                out.error = resp.reason_phrase or f"HTTP {resp.status_code}"
                return out
            buf = b""
            async for chunk in resp.aiter_bytes():
                buf += chunk
                while True:
                    idx = buf.find(b"\n\n")
                    if idx < 0:
                        break
                    msg, buf = buf[:idx], buf[idx + 2:]
                    state.message(msg)
            if buf.strip():
                state.message(buf)
        if state.first:
            out.success = True
            out.latency = state.recent - st
        else:
            out.error = ("Never received a valid chunk to calculate TTFT."
                         "This response will be marked as failed!")
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, like vLLM's client
        out.success = False
        out.error = "".join(traceback.format_exception(exc))  # vLLM keeps the whole formatted traceback
    return out


# ----------------------------------------------------------------------------------------------
# Statistics (numpy's mean / median / std(ddof=0) / percentile(linear))

def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _percentile(xs: list[float], p: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _std(xs: list[float]) -> float:
    if not xs:
        return 0.0
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def p_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


# ----------------------------------------------------------------------------------------------
# /metrics (fetch_spec_decode_metrics: line based, as vLLM's bench does it)

@dataclass
class _SpecSnapshot:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: dict[int, int] = field(default_factory=dict)


async def fetch_spec_metrics(client: httpx.AsyncClient, base_url: str,
                             vt: tuple[int, ...]) -> _SpecSnapshot | None:
    try:
        resp = await client.get(base_url + "/metrics")
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    snap, found = _SpecSnapshot(), False
    for line in resp.text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or not line.startswith("vllm:spec_decode"):
            continue
        found = True
        name = line.split(None, 1)[0].split("{")[0]
        if vt >= (0, 22) and not name.endswith("_total"):
            continue
        try:
            value = int(float(line.split()[-1]))
        except ValueError:
            continue
        if "num_drafts" in name:
            snap.drafts += value
        elif "num_draft_tokens" in name:
            snap.draft_tokens += value
        elif "num_accepted_tokens_per_pos" in name:
            marker = 'position="'
            i = line.find(marker)
            if i >= 0:
                j = line.find('"', i + len(marker))
                try:
                    pos = int(line[i + len(marker):j])
                except ValueError:
                    continue
                snap.per_pos[pos] = snap.per_pos.get(pos, 0) + value
        elif "num_accepted_tokens" in name:
            snap.accepted += value
    return snap if found else None


# This stand-in for `vllm bench serve` computes its Speculative Decoding block on its own, the way vLLM's
# line-based parser does, on purpose: the engine cross-checks it against tui.core.bench.metrics (prometheus_client's
# parser), so sharing that code would make the agreement check test nothing.
def spec_stats(before: _SpecSnapshot | None, after: _SpecSnapshot | None) -> dict[str, Any] | None:
    if before is None or after is None:
        return None
    d_drafts = after.drafts - before.drafts
    d_tokens = after.draft_tokens - before.draft_tokens
    d_acc = after.accepted - before.accepted
    if d_tokens <= 0:
        return None
    per_pos: list[float] = []
    if d_drafts > 0:
        per_pos = [(after.per_pos[k] - before.per_pos.get(k, 0)) / d_drafts for k in sorted(after.per_pos)]
    return {
        "acceptance_rate": d_acc / d_tokens * 100,
        "acceptance_length": 1 + d_acc / d_drafts if d_drafts > 0 else 0.0,
        "num_drafts": d_drafts,
        "draft_tokens": d_tokens,
        "accepted_tokens": d_acc,
        "per_position_acceptance_rates": per_pos,
    }


# ----------------------------------------------------------------------------------------------
# The run

def _out(*parts: Any) -> None:
    print(*parts, flush=True)


def _line(label: str, value: Any, fmt: str = "") -> None:
    _out(("{:<40} {:<10" + fmt + "}").format(label, value))


def _block(title: str, c: str) -> None:
    _out("{s:{c}^{n}}".format(s=title, n=50, c=c))


def _selected_metrics(args: argparse.Namespace) -> list[str]:
    raw = args.percentile_metrics or "ttft,tpot,itl"
    chosen = [m.strip() for m in raw.split(",") if m.strip()]
    bad = [m for m in chosen if m not in METRIC_NAMES]
    if bad:
        raise BenchError(f"invalid --percentile-metrics {', '.join(bad)} (choose from {', '.join(METRIC_NAMES)})")
    return chosen


def _peaks(outputs: list[RequestOutput]) -> tuple[float, int]:
    ok = [o for o in outputs if o.success]
    if not ok:
        return 0.0, 0
    t0 = min(o.start_time for o in ok)
    t1 = max(o.start_time + o.latency for o in ok)
    n = int(math.ceil(t1 - t0)) + 1
    tokens = [0] * n
    active = [0] * n
    for o in ok:
        t = o.start_time + o.ttft
        stamps = [t]
        for gap in o.itl:
            t += gap
            stamps.append(t)
        for s in stamps:
            b = int(s - t0)
            if 0 <= b < n:
                tokens[b] += 1
        for b in range(int(o.start_time - t0), min(int(o.start_time + o.latency - t0), n - 1) + 1):
            active[b] += 1
    return float(max(tokens)), int(max(active))


def calculate_and_print(args: argparse.Namespace, vt: tuple[int, ...], outputs: list[RequestOutput],
                        duration: float, spec: dict[str, Any] | None) -> dict[str, Any]:
    completed = 0
    total_input = 0
    actual_output_lens: list[int] = []
    ttfts: list[float] = []
    tpots: list[float] = []
    itls: list[float] = []
    e2els: list[float] = []
    for o in outputs:
        if not o.success:
            actual_output_lens.append(0)
            continue
        olen = o.output_tokens or count_tokens(o.generated_text)
        actual_output_lens.append(olen)
        total_input += o.prompt_len
        if olen > 1:
            tpots.append((o.latency - o.ttft) / (olen - 1))
        itls += o.itl
        ttfts.append(o.ttft)
        e2els.append(o.latency)
        completed += 1
    if completed == 0:
        print("UserWarning: All requests failed. This is likely due to a misconfiguration on the benchmark "
              "arguments.", file=sys.stderr, flush=True)
    total_output = sum(actual_output_lens)
    failed = len(outputs) - completed
    peak_tokens, peak_conc = _peaks(outputs)
    req_tput = completed / duration if duration > 0 else 0.0
    out_tput = total_output / duration if duration > 0 else 0.0
    tot_tput = (total_input + total_output) / duration if duration > 0 else 0.0

    if vt >= (0, 14) and failed:
        _out("Failed requests during benchmark run detected (capping to 10):")
        for i, o in enumerate([o for o in outputs if not o.success][:10]):
            _out(f"Error {i}: {o.error}")
    if vt >= (0, 14):
        _out("tip: install termplotlib and gnuplot to plot the metrics")

    _block(" Serving Benchmark Result ", "=")
    _line("Successful requests:", completed)
    if vt >= (0, 13):
        _line("Failed requests:", failed)
    if args.max_concurrency is not None:
        _line("Maximum request concurrency:", args.max_concurrency)
    if args.request_rate != float("inf"):
        _line("Request rate configured (RPS):", args.request_rate, ".2f")
    _line("Benchmark duration (s):", duration, ".2f")
    _line("Total input tokens:", total_input)
    _line("Total generated tokens:", total_output)
    _line("Request throughput (req/s):", req_tput, ".2f")
    _line("Output token throughput (tok/s):", out_tput, ".2f")
    _line("Peak output token throughput (tok/s):", peak_tokens, ".2f")
    _line("Peak concurrent requests:", peak_conc, ".2f")
    _line("Total Token throughput (tok/s):" if vt < (0, 13) else "Total token throughput (tok/s):", tot_tput, ".2f")

    result: dict[str, Any] = {
        "duration": duration,
        "completed": completed,
    }
    if vt >= (0, 13):
        result["failed"] = failed
    result.update({
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": req_tput,
        "request_goodput": None,
        "output_throughput": out_tput,
        "total_token_throughput": tot_tput,
        "input_lens": [o.prompt_len for o in outputs],
        "output_lens": actual_output_lens,
        "ttfts": [o.ttft for o in outputs],
        "itls": [o.itl for o in outputs],
    })
    if vt >= (0, 14):
        result["latencies"] = [o.latency for o in outputs]
        result["start_times"] = [o.start_time for o in outputs]
        result["queue_times"] = [o.queue_time for o in outputs]
    result["generated_texts"] = [o.generated_text for o in outputs]
    result["errors"] = [o.error for o in outputs]
    result["max_output_tokens_per_s"] = peak_tokens
    result["max_concurrent_requests"] = peak_conc
    if vt >= (0, 14):
        result["rtfx"] = 0.0
    if spec is not None:
        for k, v in spec.items():
            result[f"spec_decode_{k}"] = v

    percentiles = [float(p) for p in str(args.metric_percentiles).split(",") if p.strip()]
    values = {"ttft": ttfts, "tpot": tpots, "itl": itls, "e2el": e2els}
    selected = _selected_metrics(args)
    for metric in ("ttft", "tpot", "itl", "e2el"):
        if metric not in selected:
            continue
        short, header = METRIC_NAMES[metric]
        xs = values[metric]
        mean, median, std = _mean(xs) * 1000, _percentile(xs, 50) * 1000, _std(xs) * 1000
        _block(header, "-")
        _line(f"Mean {short} (ms):", mean, ".2f")
        _line(f"Median {short} (ms):", median, ".2f")
        result[f"mean_{metric}_ms"] = mean
        result[f"median_{metric}_ms"] = median
        result[f"std_{metric}_ms"] = std
        for p in percentiles:
            val = _percentile(xs, p) * 1000
            result[f"p{p_word(p)}_{metric}_ms"] = val
            _line(f"P{p_word(p)} {short} (ms):", val, ".2f")
    if spec is not None:
        _block("Speculative Decoding", "-")
        _line("Acceptance rate (%):", spec["acceptance_rate"], ".2f")
        _line("Acceptance length:", spec["acceptance_length"], ".2f")
        _line("Drafts:", spec["num_drafts"])
        _line("Draft tokens:", spec["draft_tokens"])
        _line("Accepted tokens:", spec["accepted_tokens"])
        if spec["per_position_acceptance_rates"]:
            _out("Per-position acceptance (%):")
            for i, rate in enumerate(spec["per_position_acceptance_rates"]):
                _line(f"  Position {i}:", rate * 100, ".2f")
    _out("=" * 50)
    return result


def _metadata(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise BenchError("Invalid metadata format. Please use KEY=VALUE format.")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _arrival_delays(n: int, rate: float, burstiness: float, seed: int) -> list[float]:
    if rate == float("inf"):
        return [0.0] * n
    rng = random.Random(seed)
    theta = 1.0 / (rate * burstiness)
    return [rng.gammavariate(burstiness, theta) for _ in range(n)]


async def _resolve_model(client: httpx.AsyncClient, base_url: str, args: argparse.Namespace,
                         vt: tuple[int, ...]) -> tuple[str, str]:
    """(model_id, model_name). Without --model, or before 0.14, also the reachability check: a connection error
    is fatal. With --model on 0.14+ nothing is fetched (like vLLM): a dead server fails every request."""
    if args.model is not None and vt >= (0, 14):
        return args.model, args.served_model_name or args.model
    try:
        resp = await client.get(base_url + "/v1/models")
    except httpx.HTTPError as exc:
        raise BenchError(f"cannot reach the server at {base_url}: {type(exc).__name__}: {exc or 'connection failed'}"
                         " (is `vllm serve` running and ready?)") from None
    if args.model is not None:
        return args.model, args.served_model_name or args.model
    try:
        resp.raise_for_status()
        first = resp.json()["data"][0]
        model_name = first["id"]
        return first.get("root") or model_name, model_name
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise BenchError(f"cannot determine the model from {base_url}/v1/models ({exc}); pass --model") from None


async def run(args: argparse.Namespace, cfg: dict[str, Any], vt: tuple[int, ...]) -> int:
    _out(args)
    if vt >= (0, 15) and args.temperature is None:
        _out(TEMPERATURE_WARNING)
    base_url = (args.base_url or f"http://{args.host}:{args.port}").rstrip("/")
    api_url = base_url + args.endpoint
    chat = args.backend == "openai-chat"
    if chat and not api_url.endswith("chat/completions"):
        raise BenchError("OpenAI Chat Completions API URL must end with one of: {'chat/completions'}.")
    if not args.endpoint.endswith("completions"):
        raise BenchError("OpenAI Completions API URL must end with 'completions'.")
    if args.dataset_name == "sonnet" and not args.dataset_path:
        raise BenchError("--dataset-path is required for the sonnet dataset")
    if args.dataset_name not in ("sonnet", "custom"):
        raise BenchError(f"the simulator implements the sonnet (< 0.32) and custom datasets, not {args.dataset_name!r}")
    if vt >= (0, 32) and args.output_len is not None:
        args.custom_output_len = args.output_len  # vLLM maps the general --output-len onto each dataset
    metadata = _metadata(args.metadata)
    _selected_metrics(args)  # validate before the run
    time_scale = float(cfg.get("time_scale", 1.0) or 1.0)

    max_conn = args.max_concurrency if args.max_concurrency else None
    limits = httpx.Limits(max_connections=max_conn, max_keepalive_connections=max_conn)
    timeout = httpx.Timeout(6 * 3600, connect=10.0)
    # TCP_NODELAY like aiohttp's connector (vLLM's client): without it the request body waits for the
    # server's delayed ACK of the headers (about 40 ms on Linux loopback), which TTFT would include.
    transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    async with httpx.AsyncClient(timeout=timeout, transport=transport, trust_env=False) as client:
        model_id, model_name = await _resolve_model(client, base_url, args, vt)
        tokenizer_id = args.tokenizer or model_id
        prefix = args.request_id_prefix if args.request_id_prefix is not None else f"bench-{uuid.uuid4().hex[:8]}-"
        if args.dataset_name == "custom":
            requests = sample_custom(args.dataset_path, args.num_prompts, args.custom_output_len,
                                     args.skip_chat_template, args.seed, getattr(args, "disable_shuffle", False),
                                     args.no_oversample,
                                     prefix)
        else:
            if (0, 29) <= vt < (0, 32):
                print(SONNET_DEPRECATION, file=sys.stderr, flush=True)
            requests = sample_sonnet(args.dataset_path, args.num_prompts, args.sonnet_input_len,
                                     args.sonnet_output_len, args.sonnet_prefix_len, args.seed, prefix, vt, raw=chat)
        if not requests:
            raise BenchError(f"no requests sampled from {args.dataset_path}")

        headers_base: dict[str, str] = {}
        api_key = os.environ.get("OPENAI_API_KEY")
        if vt < (0, 14) or api_key:
            headers_base["Authorization"] = f"Bearer {api_key}"

        def payload_for(req: SampleRequest) -> dict[str, Any]:
            payload: dict[str, Any]
            if chat:  # async_request_openai_chat_completions: one user message of text parts
                payload = {"model": model_name,
                           "messages": [{"role": "user", "content": [{"type": "text", "text": req.prompt}]}],
                           "max_completion_tokens": req.expected_output_len, "stream": True,
                           "stream_options": {"include_usage": True}}
            else:
                payload = {"model": model_name, "prompt": req.prompt, "repetition_penalty": 1.0,
                           "max_tokens": req.expected_output_len, "logprobs": None,
                           "stream": True, "stream_options": {"include_usage": True}}
            if args.temperature is not None:
                payload["temperature"] = args.temperature
            elif vt < (0, 15):
                payload["temperature"] = 0.0
            if args.ignore_eos:
                payload["ignore_eos"] = True
            return payload

        async def send(req: SampleRequest) -> RequestOutput:
            headers = dict(headers_base, **{"x-request-id": req.request_id})
            return await request_completion(client, api_url, payload_for(req), headers, req.prompt_len, vt, chat)

        _out("Starting initial single prompt test run...")
        if args.ready_check_timeout_sec <= 0:
            _out("Skipping endpoint ready check.")
            if vt < (0, 13):
                _out("Starting main benchmark run...")
        else:
            _out(f"Waiting for endpoint to become up in {args.ready_check_timeout_sec} seconds")
            deadline = time.monotonic() + args.ready_check_timeout_sec
            retry = min(5.0, max(0.05, 5.0 * time_scale))
            while True:
                test = await send(requests[0])
                if test.success:
                    break
                if time.monotonic() + retry > deadline:
                    raise BenchError("Initial test run failed - Please make sure benchmark arguments are "
                                     f"correctly specified. Error: {test.error}")
                await asyncio.sleep(retry)
            _out("Initial test run completed. Starting main benchmark run..." if vt < (0, 13)
                 else "Initial test run completed.")
        if vt >= (0, 13):
            _out("Starting main benchmark run...")
        _out(f"Traffic request rate: {args.request_rate}")
        dist = "Poisson process" if args.burstiness == 1.0 else "Gamma distribution"
        _out(f"Burstiness factor: {args.burstiness} ({dist})")
        _out(f"Maximum request concurrency: {args.max_concurrency}")

        spec_before = await fetch_spec_metrics(client, base_url, vt) if vt >= (0, 14) else None
        pbar = tqdm(total=len(requests), disable=args.disable_tqdm)
        sem = asyncio.Semaphore(args.max_concurrency) if args.max_concurrency else None

        async def limited(req: SampleRequest) -> RequestOutput:
            queued = time.perf_counter()
            if sem is None:
                out = await send(req)
            else:
                async with sem:
                    wait = time.perf_counter() - queued
                    out = await send(req)
                    out.queue_time = wait
            pbar.update(1)
            return out

        delays = _arrival_delays(len(requests), args.request_rate, args.burstiness, args.seed)
        start = time.perf_counter()
        tasks: list[asyncio.Task[RequestOutput]] = []
        for i, (req, delay) in enumerate(zip(requests, delays)):
            tasks.append(asyncio.create_task(limited(req)))
            if delay > 0 and i < len(requests) - 1:
                await asyncio.sleep(delay)  # the next arrival
        outputs = list(await asyncio.gather(*tasks))
        pbar.close()
        duration = time.perf_counter() - start
        spec_after = await fetch_spec_metrics(client, base_url, vt) if vt >= (0, 14) else None
        spec = spec_stats(spec_before, spec_after)

    result = calculate_and_print(args, vt, outputs, duration, spec)

    if args.save_result or args.append_result:
        result_json: dict[str, Any] = {
            "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
            "endpoint_type": args.backend,
            "backend": args.backend,
            "label": args.label,
            "model_id": model_id,
            "tokenizer_id": tokenizer_id,
            "num_prompts": args.num_prompts,
        }
        result_json.update(metadata)
        result_json["request_rate"] = args.request_rate if args.request_rate < float("inf") else "inf"
        result_json["burstiness"] = args.burstiness
        result_json["max_concurrency"] = args.max_concurrency
        result_json = {**result_json, **result}
        if not args.save_detailed:
            for k in ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors"):
                result_json.pop(k, None)
        base_model_id = model_id.split("/")[-1]
        conc = f"-concurrency{args.max_concurrency}" if args.max_concurrency is not None else ""
        label = args.label or args.backend
        file_name = args.result_filename or (
            f"{label}-{args.request_rate}qps{conc}-{base_model_id}-{result_json['date']}.json")
        if args.result_dir:
            os.makedirs(args.result_dir, exist_ok=True)
            file_name = os.path.join(args.result_dir, file_name)
        try:
            with open(file_name, mode="a+" if args.append_result else "w", encoding="utf-8") as f:
                if args.append_result and f.tell() != 0:
                    f.write("\n")
                json.dump(result_json, f)
        except OSError as exc:
            raise BenchError(f"cannot write the result file {file_name}: {exc.strerror or exc}") from None
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = sim_config()
    vt = release(cfg.get("vllm_version")) or (0, 24, 0)
    parser = build_parser(vt)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return asyncio.run(run(args, cfg, vt))
    except BenchError as exc:
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
