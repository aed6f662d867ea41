"""`main`: parse the argv, sample the dataset, send the requests under --max-concurrency and report."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import sys
import time
import uuid
from typing import Any

import httpx
from tqdm import tqdm

from ..config import sim_config
from .args import (SONNET_DEPRECATION, TEMPERATURE_WARNING, BenchError, build_parser, goodput_config,
                   parse_metadata, selected_metrics, vllm_version)
from .client import RequestOutput, request_completion, resolve_model
from .console import emit
from .datasets import SampleRequest, sample_custom, sample_sonnet
from .results import calculate_and_print, save_result
from .spec_metrics import fetch_spec_metrics, spec_stats

CHAT_BACKENDS_SKIP_TEMPLATE_SINCE = (0, 34)


def _arrival_delays(n: int, rate: float, burstiness: float, seed: int) -> list[float]:
    if rate == float("inf"):
        return [0.0] * n
    rng = random.Random(seed)
    theta = 1.0 / (rate * burstiness)
    return [rng.gammavariate(burstiness, theta) for _ in range(n)]


async def run(args: argparse.Namespace, cfg: dict[str, Any], vt: tuple[int, ...]) -> int:
    emit(args)
    if vt >= (0, 15) and args.temperature is None:
        emit(TEMPERATURE_WARNING)
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
    metadata = parse_metadata(args.metadata)
    selected_metrics(args)  # validate before the run
    goodput_config(args.goodput)  # vLLM checks the SLOs before it sends anything
    time_scale = float(cfg.get("time_scale", 1.0) or 1.0)

    max_conn = args.max_concurrency if args.max_concurrency else None
    limits = httpx.Limits(max_connections=max_conn, max_keepalive_connections=max_conn)
    timeout = httpx.Timeout(6 * 3600, connect=10.0)
    # TCP_NODELAY like aiohttp's connector (vLLM's client): without it the request body waits for the
    # server's delayed ACK of the headers (about 40 ms on Linux loopback), which TTFT would include.
    transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    async with httpx.AsyncClient(timeout=timeout, transport=transport, trust_env=False) as client:
        model_id, model_name = await resolve_model(client, base_url, args, vt)
        tokenizer_id = args.tokenizer or model_id
        prefix = args.request_id_prefix if args.request_id_prefix is not None else f"bench-{uuid.uuid4().hex[:8]}-"
        if args.dataset_name == "custom":
            # vLLM 0.34: chat backends never apply the chat template client-side (the server does), as if
            # --skip-chat-template were given (vllm/benchmarks/datasets/datasets.py CHAT_TEMPLATE_BACKENDS)
            skip = args.skip_chat_template or (vt >= CHAT_BACKENDS_SKIP_TEMPLATE_SINCE and chat)
            requests = sample_custom(args.dataset_path, args.num_prompts, args.custom_output_len,
                                     skip, args.seed, getattr(args, "disable_shuffle", False),
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

        emit("Starting initial single prompt test run...")
        if args.ready_check_timeout_sec <= 0:
            emit("Skipping endpoint ready check.")
            if vt < (0, 13):
                emit("Starting main benchmark run...")
        else:
            emit(f"Waiting for endpoint to become up in {args.ready_check_timeout_sec} seconds")
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
            emit("Initial test run completed. Starting main benchmark run..." if vt < (0, 13)
                 else "Initial test run completed.")
        if vt >= (0, 13):
            emit("Starting main benchmark run...")
        emit(f"Traffic request rate: {args.request_rate}")
        dist = "Poisson process" if args.burstiness == 1.0 else "Gamma distribution"
        emit(f"Burstiness factor: {args.burstiness} ({dist})")
        emit(f"Maximum request concurrency: {args.max_concurrency}")

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
    save_result(args, model_id, tokenizer_id, metadata, result)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = sim_config()
    vt = vllm_version(cfg)
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

