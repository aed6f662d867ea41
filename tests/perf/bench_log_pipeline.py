"""Benchmark of tui.core.serverlog.logparse.LogPipeline (not a test; pytest does not collect it).

Run from the repository root:
    python tests/perf/bench_log_pipeline.py [--lines 1000000] [--keep]

Writes a synthetic TP16 `vllm serve` log (ANSI-coloured prefixes, worker lines repeated once per rank,
periodic engine / spec-decode stat lines, uvicorn access lines, a few phase markers) to a temp file,
times the pipeline over it on one core (reading the file included), times `grep -c INFO` over the
same file, and prints both and their ratio. Target: >= 100k lines/s.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tui.core.serverlog.logparse import LogPipeline  # noqa: E402

ESC = "\x1b"
TP = 16


def _c(s: str) -> str:
    return f"{ESC}[1;36m{s}{ESC}[0;0m"


API = _c("(APIServer pid=2871)") + " "
ENG = _c("(EngineCore_DP0 pid=3012)") + " "
WORKERS = [ENG + _c(f"(Worker_TP{r} pid={3101 + r})") + " " for r in range(TP)]

# startup markers, in order; each is printed by all 16 ranks unless it starts with "E:" / "A:" (one process)
MARKERS = [
    "A:vLLM API server version 0.24.0",
    "A:non-default args: {'model': 'openai/gpt-oss-120b', 'tensor_parallel_size': 16}",
    "Initialized NeuronWorker with rank {r}, local_rank {r}",
    "Loading weights from openai/gpt-oss-120b",
    "Weight loading completed in {s:.2f} seconds",
    "Spec decode enabled. Loading draft model ...",
    "Neuron HBM: 17.42 GiB used, 6.58 GiB free",
    "Extracting graphs for 1 prefill buckets: [(512, 512)]",
    "Compilation cache key: 0f3c2a9d0b8e4f7a9c3d2e1f0a9b8c7d",
    "Local cache miss for key: 0f3c2a9d0b8e4f7a9c3d2e1f0a9b8c7d",
    "Compilation complete in {s:.2f} seconds",
    "Warming up model for 1 num_batched_tokens_buckets: [512]",
    "Model warmup completed: 1 num_batched_tokens_buckets, 1 num_seqs_buckets",
    "E:init engine (profile, create kv cache, warmup model) took 1534.21 seconds",
    "A:Starting vLLM API server 0 on http://0.0.0.0:8000",
    "A:Route: /v1/completions, Methods: POST",
    "U:Application startup complete.",
]

WORKER_MSGS = [
    "Starting model forward pass ...",
    "Model forward pass completed in {ms:.3f} ms",
    "Executing decode step: batch=1, seq_len={n}, num_spec_tokens=3",
    "Sampling {n} tokens with on-device sampler",
    "Draft proposal: {k} tokens accepted of 3",
]


def generate(path: Path, n_lines: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    t = [9 * 3600.0]

    def vh(level: str, src: str) -> str:
        t[0] += rng.random() * 0.05
        s = int(t[0])
        return f"{level} 03-14 {s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d} [{src}] "

    def ph(level: str, src: str) -> str:
        s = int(t[0])
        ms = int(t[0] * 1000) % 1000
        return f"2026-03-14 {s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d},{ms:03d} - {level} - {src} - "

    out: list[str] = []
    marker_every = max(1, n_lines // (len(MARKERS) + 1))
    next_marker = 0
    mi = 0
    step = 0
    while len(out) < n_lines:
        if len(out) >= next_marker and mi < len(MARKERS):
            m = MARKERS[mi]
            mi += 1
            next_marker += marker_every
            if m.startswith("A:"):
                out.append(API + vh("INFO", "api_server.py:1912") + m[2:])
            elif m.startswith("E:"):
                out.append(ENG + vh("INFO", "core.py:251") + m[2:])
            elif m.startswith("U:"):
                out.append(API + "INFO:     " + m[2:])
            else:
                ranks = list(range(TP))
                rng.shuffle(ranks)
                for r in ranks:
                    out.append(WORKERS[r] + ph("INFO", "neuron_model_runner.py:575") + m.format(r=r, s=100 + r * 0.3))
            continue
        step += 1
        kind = rng.random()
        if kind < 0.80:  # one worker message, printed by each rank (interleaved a little)
            tmpl = WORKER_MSGS[step % len(WORKER_MSGS)]
            ranks = list(range(TP))
            if rng.random() < 0.5:
                rng.shuffle(ranks)
            ms, n, k = rng.random() * 9, rng.randint(512, 768), rng.randint(0, 3)
            for r in ranks:
                msg = tmpl.format(ms=ms, n=n, k=k)
                if step % 3:
                    out.append(WORKERS[r] + ph("INFO", "neuron_model_runner.py:575") + msg)
                else:
                    out.append(WORKERS[r] + vh("INFO", "neuron_worker.py:301") + msg)
        elif kind < 0.90:  # uvicorn access lines
            for _ in range(rng.randint(1, 8)):
                port = rng.randint(30000, 60000)
                out.append(API + f'INFO:     127.0.0.1:{port} - "POST /v1/completions HTTP/1.1" 200 OK')
        elif kind < 0.97:  # periodic stats
            out.append(API + vh("INFO", "loggers.py:123") +
                       f"Engine 000: Avg prompt throughput: {rng.random() * 500:.1f} tokens/s, Avg generation "
                       f"throughput: {rng.random() * 140:.1f} tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
                       f"GPU KV cache usage: {rng.random() * 3:.1f}%, Prefix cache hit rate: 0.0%")
            out.append(API + vh("INFO", "metrics.py:96") +
                       f"SpecDecoding metrics: Mean acceptance length: 1.68, Accepted throughput: 54.10 tokens/s, "
                       f"Drafted throughput: 235.20 tokens/s, Accepted: {rng.randint(400, 600)} tokens, Drafted: "
                       f"{rng.randint(2000, 2400)} tokens, Per-position acceptance rate: 0.690, 0.412, 0.201, "
                       f"Avg Draft acceptance rate: 23.0%")
        else:  # misc engine-core lines, some warnings
            if rng.random() < 0.5:
                out.append(ENG + vh("WARNING", "scheduler.py:402") + "Sequence group 0 is preempted by "
                           "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.")
            else:
                out.append(ENG + vh("DEBUG", "core.py:512") + f"EngineCore loop step {step} took "
                           f"{rng.random() * 20:.2f} ms")
    del out[n_lines:]
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(out))
        f.write("\n")


def run_pipeline(path: Path) -> tuple[float, float, int, int, LogPipeline]:
    pipe = LogPipeline(speculative=True)
    feed = pipe.feed
    n_events = 0
    ts = 0.0
    t0 = time.perf_counter()
    c0 = time.process_time()
    with open(path, encoding="utf-8", newline="") as f:
        for line in f:
            ts += 0.0005
            n_events += len(feed(line, ts))
    n_events += len(pipe.close(ts))
    return time.perf_counter() - t0, time.process_time() - c0, pipe.lines_fed, n_events, pipe


def run_grep(path: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.run(["grep", "-c", "INFO", str(path)], capture_output=True, text=True, check=False)
    dt = time.perf_counter() - t0
    return dt, int(proc.stdout.strip() or 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the generated log and print its path")
    args = ap.parse_args()

    fd, name = tempfile.mkstemp(prefix="specdec-bench-", suffix=".log")
    os.close(fd)
    path = Path(name)
    try:
        t0 = time.perf_counter()
        generate(path, args.lines)
        size = path.stat().st_size
        print(f"generated {args.lines:,} lines ({size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s")

        wall, cpu, n, n_events, pipe = run_pipeline(path)
        rate = n / wall
        print(f"pipeline: {n:,} lines in {wall:.2f} s wall / {cpu:.2f} s cpu -> {rate:,.0f} lines/s "
              f"({n_events:,} events, {pipe.lines_emitted:,} distinct lines, "
              f"phases {' > '.join(p.name for p in pipe.phases)})")

        g_wall, g_count = run_grep(path)
        g_rate = n / g_wall if g_wall > 0 else float("inf")
        print(f"grep -c INFO: {g_count:,} matches in {g_wall:.3f} s -> {g_rate:,.0f} lines/s")
        print(f"ratio: the pipeline takes {wall / g_wall:.1f}x the time of grep -c" if g_wall > 0 else "ratio: n/a")
        print("target >= 100,000 lines/s:", "PASS" if rate >= 100_000 else "FAIL")
        if args.keep:
            print("log kept at", path)
        return 0 if rate >= 100_000 else 1
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)


if __name__ == "__main__":
    raise SystemExit(main())
