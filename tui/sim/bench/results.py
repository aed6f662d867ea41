"""The bench's results: numpy-style statistics, the printed report, the result dict and the --save-result
file in vLLM's key order."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from datetime import datetime
from typing import Any

from ..tokens import count_tokens
from .args import METRIC_NAMES, BenchError, good_requests, goodput_config, selected_metrics
from .client import RequestOutput
from .console import emit, emit_banner, emit_row


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
    all_tpots: list[float] = []  # 0 for a request of at most one token (vLLM's goodput rule)
    itls: list[float] = []
    e2els: list[float] = []
    for o in outputs:
        if not o.success:
            actual_output_lens.append(0)
            continue
        olen = o.output_tokens or count_tokens(o.generated_text)
        actual_output_lens.append(olen)
        total_input += o.prompt_len
        tpot = 0.0
        if olen > 1:
            tpot = (o.latency - o.ttft) / (olen - 1)
            tpots.append(tpot)
        all_tpots.append(tpot)
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
    slo = goodput_config(getattr(args, "goodput", None))
    goodput = good_requests(slo, ttfts, all_tpots, e2els) / duration if slo and duration > 0 else None
    out_tput = total_output / duration if duration > 0 else 0.0
    tot_tput = (total_input + total_output) / duration if duration > 0 else 0.0

    if vt >= (0, 14) and failed:
        emit("Failed requests during benchmark run detected (capping to 10):")
        for i, o in enumerate([o for o in outputs if not o.success][:10]):
            emit(f"Error {i}: {o.error}")
    if vt >= (0, 14):
        emit("tip: install termplotlib and gnuplot to plot the metrics")

    emit_banner(" Serving Benchmark Result ", "=")
    emit_row("Successful requests:", completed)
    if vt >= (0, 13):
        emit_row("Failed requests:", failed)
    if args.max_concurrency is not None:
        emit_row("Maximum request concurrency:", args.max_concurrency)
    if args.request_rate != float("inf"):
        emit_row("Request rate configured (RPS):", args.request_rate, ".2f")
    emit_row("Benchmark duration (s):", duration, ".2f")
    emit_row("Total input tokens:", total_input)
    emit_row("Total generated tokens:", total_output)
    emit_row("Request throughput (req/s):", req_tput, ".2f")
    if slo:
        emit_row("Request goodput (req/s):", goodput if goodput is not None else 0.0, ".2f")
    emit_row("Output token throughput (tok/s):", out_tput, ".2f")
    emit_row("Peak output token throughput (tok/s):", peak_tokens, ".2f")
    emit_row("Peak concurrent requests:", peak_conc, ".2f")
    emit_row("Total Token throughput (tok/s):" if vt < (0, 13) else "Total token throughput (tok/s):", tot_tput, ".2f")

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
        "request_goodput": goodput,
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
    selected = selected_metrics(args)
    for metric in ("ttft", "tpot", "itl", "e2el"):
        if metric not in selected:
            continue
        short, header = METRIC_NAMES[metric]
        xs = values[metric]
        mean, median, std = _mean(xs) * 1000, _percentile(xs, 50) * 1000, _std(xs) * 1000
        emit_banner(header, "-")
        emit_row(f"Mean {short} (ms):", mean, ".2f")
        emit_row(f"Median {short} (ms):", median, ".2f")
        result[f"mean_{metric}_ms"] = mean
        result[f"median_{metric}_ms"] = median
        result[f"std_{metric}_ms"] = std
        for p in percentiles:
            val = _percentile(xs, p) * 1000
            result[f"p{p_word(p)}_{metric}_ms"] = val
            emit_row(f"P{p_word(p)} {short} (ms):", val, ".2f")
    if spec is not None:
        emit_banner("Speculative Decoding", "-")
        emit_row("Acceptance rate (%):", spec["acceptance_rate"], ".2f")
        emit_row("Acceptance length:", spec["acceptance_length"], ".2f")
        emit_row("Drafts:", spec["num_drafts"])
        emit_row("Draft tokens:", spec["draft_tokens"])
        emit_row("Accepted tokens:", spec["accepted_tokens"])
        if spec["per_position_acceptance_rates"]:
            emit("Per-position acceptance (%):")
            for i, rate in enumerate(spec["per_position_acceptance_rates"]):
                emit_row(f"  Position {i}:", rate * 100, ".2f")
    emit("=" * 50)
    return result


def save_result(args: argparse.Namespace, model_id: str, tokenizer_id: str, metadata: dict[str, str],
                result: dict[str, Any]) -> None:
    """Write (or append) the --save-result JSON, when asked for."""
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
