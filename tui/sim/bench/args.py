"""The bench's argv (vLLM's `bench serve` parser per version), its constants and its one error."""

from __future__ import annotations

import argparse
from typing import Any

from ...core.versions import DEMO_VLLM, release

PROG = "vllm bench serve"
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


def vllm_version(cfg: dict[str, Any]) -> tuple[int, ...]:
    """The simulated vLLM version (SPECDEC_SIM["vllm_version"], default DEMO_VLLM) as a tuple."""
    return release(cfg.get("vllm_version")) or release(DEMO_VLLM) or ()


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
    p.add_argument("--goodput", nargs="+", required=False, default=None)
    p.add_argument("--ready-check-timeout-sec", type=int, default=600 if vt < (0, 14) else 0)
    return p


def selected_metrics(args: argparse.Namespace) -> list[str]:
    raw = args.percentile_metrics or "ttft,tpot,itl"
    chosen = [m.strip() for m in raw.split(",") if m.strip()]
    bad = [m for m in chosen if m not in METRIC_NAMES]
    if bad:
        raise BenchError(f"invalid --percentile-metrics {', '.join(bad)} (choose from {', '.join(METRIC_NAMES)})")
    return chosen


def parse_metadata(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise BenchError("Invalid metadata format. Please use KEY=VALUE format.")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


GOODPUT_NAMES = ["ttft", "tpot", "e2el"]


def goodput_config(items: list[str] | None) -> dict[str, float]:
    """vLLM's check_goodput_args / parse_goodput: {"ttft": ms, ...} from "KEY:VALUE" pairs (its messages)."""
    out: dict[str, float] = {}
    if not items:
        return out
    try:
        for pair in items:
            name, val = pair.split(":")
            out[name] = float(val)
    except ValueError:
        raise BenchError("Invalid format found for service level objectives. Specify service level objectives for "
                         'goodput as "KEY:VALUE" pairs, where the key is a metric name, and the value is a number in '
                         "milliseconds.") from None
    for name, val in out.items():
        if name not in GOODPUT_NAMES:
            raise BenchError(f"Invalid metric name found, {name}: {val}. The service level objective name should be "
                             f"one of {str(GOODPUT_NAMES)}. ")
        if val < 0:
            raise BenchError(f"Invalid value found, {name}: {val}. The service level objective value should be "
                             "non-negative.")
    return out


def good_requests(slo_ms: dict[str, float], ttfts: list[float], tpots: list[float], e2els: list[float]) -> int:
    """vLLM's goodput count: successful requests whose every given metric (seconds) is within its SLO (ms);
    tpots holds 0 for a request of at most one output token."""
    metrics, limits = [], []
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("e2el", e2els)):
        if name in slo_ms:
            metrics.append(values)
            limits.append(slo_ms[name] / 1000.0)
    if not metrics:
        return 0
    return sum(1 for req in zip(*metrics) if all(s >= r for s, r in zip(limits, req)))
