"""The bench's HTTP client: the model lookup and one streaming request (async_request_openai_completions /
async_request_openai_chat_completions) with its SSE reader."""

from __future__ import annotations

import argparse
import json
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import httpx

from .args import BenchError


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


# vLLM 0.34's client marks a request failed when an SSE chunk carries {"error": ...} (its error: the JSON of that
# value); before, such a chunk was skipped and the request counted as completed
# (vllm/benchmarks/lib/endpoint_request_func.py; tui/core/data/vllm_facts.json bench_stream_error_fails_request).
STREAM_ERROR_FAILS_SINCE = (0, 34)


class _StreamState:
    def __init__(self, out: RequestOutput, st: float, vt: tuple[int, ...], chat: bool = False):
        self.out, self.st, self.vt, self.chat = out, st, vt, chat
        self.first = False
        self.recent = st
        self.stream_error: str | None = None

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
        if self.vt >= STREAM_ERROR_FAILS_SINCE and data.get("error"):
            self.stream_error = json.dumps(data["error"])
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
        if state.stream_error is not None:
            out.error = state.stream_error
        elif state.first:
            out.success = True
            out.latency = state.recent - st
        else:
            out.error = ("Never received a valid chunk to calculate TTFT."
                         "This response will be marked as failed!")
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, like vLLM's client
        out.success = False
        out.error = "".join(traceback.format_exception(exc))  # vLLM keeps the whole formatted traceback
    return out


async def resolve_model(client: httpx.AsyncClient, base_url: str, args: argparse.Namespace,
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
