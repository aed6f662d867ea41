"""The serving state of the simulated `vllm serve`: the scheduler, vLLM's Prometheus series and the periodic
stats log."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any, AsyncIterator

from ..logs import ProcessLog
from ..model import (DRAFT_PREFILL_COST, VERIFY_COST_PER_DRAFT, Decoder, HostNoise, effective_acceptance,
                    prompt_acceptance, seed_of, ttft_ms)
from ..specconfig import SpecSettings, conditional_rates, parse_speculative_config
from ..tokens import tokenize as _tok
from .batch import BatchEngine, Seq
from .engine_proc import EngineProc

STATS_INTERVAL_S = 10.0  # VLLM_LOG_STATS_INTERVAL


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
        # Validated by main() before the engine starts (vLLM's messages); here only read.
        self.spec: SpecSettings | None = parse_speculative_config(spec)
        self.k = self.spec.k if self.spec else 0
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
        self.generated = 0  # tokens generated since startup (acceptance_drift's clock)
        drift = float(cfg.get("acceptance_drift", 0.0) or 0.0)
        self.engine_clock = BatchEngine(
            tpot_ms=float(cfg.get("tpot_ms", 7.0)), batch_cost=float(cfg.get("batch_cost", 0.0) or 0.0), k=self.k,
            max_num_seqs=self.max_num_seqs, scale=self.scale,
            draft_cost=float(cfg.get("draft_step_cost", VERIFY_COST_PER_DRAFT)),
            knee=int(cfg.get("batch_knee", 1) or 1),
            lookup=self.spec.lookup(self.max_num_seqs) if self.spec else None,
            acceptance_shift=(lambda: drift * self.generated / 1000.0) if drift else None)
        self.kv_in_use: dict[int, int] = {}
        self.interval = Interval(self.k)
        self.vocab: dict[str, int] = {}
        self.inv_vocab: dict[int, str] = {}
        self.server: Any = None
        self.pending_exit = False
        self.engine_dead = False

    @property
    def running(self) -> int:
        return len(self.engine_clock.running)

    @property
    def waiting(self) -> int:
        return sum(1 for s in self.engine_clock.waiting if not s.cancelled)

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
        conditionals = None
        if self.spec is not None and self.spec.synthetic_rates is not None and self.fault != "draft-mismatch":
            conditionals = conditional_rates(list(self.spec.synthetic_rates))
        tpot = float(self.cfg.get("tpot_ms", 7.0))
        decoder = Decoder(prompt, prompt_tokens, max_tokens, acceptance=acceptance,
                          decay=float(self.cfg.get("acceptance_decay", 0.7)), conditionals=conditionals,
                          max_model_len=self.max_model_len, lossless_broken=(self.fault == "lossless-broken"))
        prefill = ttft_ms(prompt_tokens, float(self.cfg.get("ttft_ms", 252.0)), self.k > 0, k=self.k,
                          draft_cost=float(self.cfg.get("draft_prefill_cost", DRAFT_PREFILL_COST)), tpot_ms=tpot)
        seq = Seq(decoder, prefill, speed=self.noise.next())
        loop = asyncio.get_running_loop()
        rid = id(seq)
        arrival = loop.time()
        self.engine_clock.submit(seq)
        self._gauges()
        m = self.metrics
        finished: str | None = None
        text = ""
        n_out = 0
        first_at = None
        try:
            prev = None
            idx = -1
            while True:
                out = await seq.out.get()
                idx += 1
                step = out.step
                if idx == 0:
                    self.kv_in_use[rid] = prompt_tokens
                    if self.stats_on and seq.admitted_at is not None:
                        m.queue.observe((seq.admitted_at - arrival) / self.scale)
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
                self.generated += emitted
                text += piece
                if finish is None and out.last:
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
            seq.cancelled = True  # a finished sequence has left the batch already; an abandoned one leaves now
            self.kv_in_use.pop(rid, None)
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


