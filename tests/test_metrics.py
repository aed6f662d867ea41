"""tui.core.bench.metrics: /metrics scraping (a real loopback HTTP server), spec counters and the delta."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from tui.core.bench.metrics import (MetricsError, SpecCounters, SpecStats, TokenRate, parse_server_counters,
                              parse_spec_counters, scrape, spec_delta)

REFERENCE_EXPOSITION = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="openai/gpt-oss-120b"} 10.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="openai/gpt-oss-120b"} 1.7960900030046525e+09
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="openai/gpt-oss-120b",position="0"} 7.0
"""


def spec_registry(k: int = 2):
    """A registry shaped like vLLM's SpecDecodingProm (labels model_name, engine [, position])."""
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    c = {
        "drafts": Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels, registry=reg),
        "tokens": Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels, registry=reg),
        "acc": Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels, registry=reg),
        "pos": Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                       labels + ["position"], registry=reg),
    }
    other = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=reg)
    other.labels("m", "0").inc(500)
    return reg, c


def observe(c, model: str, engine: str, accepted_per_step: list[int], k: int) -> None:
    """vLLM's SpecDecodingStats.observe_draft for a list of steps."""
    for acc in accepted_per_step:
        c["drafts"].labels(model, engine).inc()
        c["tokens"].labels(model, engine).inc(k)
        c["acc"].labels(model, engine).inc(acc)
        for i in range(k):
            c["pos"].labels(model, engine, str(i)).inc(1 if i < acc else 0)


def text_of(reg) -> str:
    return generate_latest(reg).decode()


# --------------------------------------------------------------------------------------------- parsing

def test_reference_exposition_ignores_created():
    sc = parse_spec_counters(REFERENCE_EXPOSITION)
    assert sc == SpecCounters(num_drafts=10, num_draft_tokens=0, num_accepted_tokens=0, per_position={0: 7})


def test_sums_over_engines_and_model_names():
    reg, c = spec_registry()
    observe(c, "a", "0", [2, 1, 0, 2], k=2)
    observe(c, "a", "1", [1, 1], k=2)
    observe(c, "b", "0", [0], k=2)
    text = text_of(reg)
    assert "_created" in text and 'engine="1"' in text
    sc = parse_spec_counters(text)
    assert sc.num_drafts == 7
    assert sc.num_draft_tokens == 14
    assert sc.num_accepted_tokens == 7
    assert sc.per_position == {0: 5, 1: 2}


def test_no_spec_metrics_is_none():
    reg = CollectorRegistry()
    Counter("vllm:generation_tokens", "x", ["model_name", "engine"], registry=reg).labels("m", "0").inc(3)
    assert parse_spec_counters(text_of(reg)) is None
    assert parse_spec_counters("") is None


def test_malformed_metrics_text():
    with pytest.raises(MetricsError):
        parse_spec_counters('vllm:spec_decode_num_drafts_total{engine="0" 1.0\n')


def test_server_counters():
    reg = CollectorRegistry()
    lab = ["model_name", "engine"]
    Counter("vllm:prompt_tokens", "p", lab, registry=reg).labels("m", "0").inc(100)
    Counter("vllm:prompt_tokens", "p", lab, registry=CollectorRegistry())  # unrelated registry: not exported
    Counter("vllm:generation_tokens", "g", lab, registry=reg).labels("m", "0").inc(40)
    ok = Counter("vllm:request_success", "s", lab + ["finished_reason"], registry=reg)
    ok.labels("m", "0", "length").inc(3)
    ok.labels("m", "1", "length").inc(2)
    ok.labels("m", "0", "stop").inc(1)
    sc = parse_server_counters(text_of(reg))
    assert (sc.prompt_tokens, sc.generation_tokens, sc.request_success) == (100, 40, 6)
    assert sc.request_success_by_reason == {"length": 5, "stop": 1}
    empty = parse_server_counters("")
    assert (empty.prompt_tokens, empty.generation_tokens, empty.request_success) == (0, 0, 0)


# --------------------------------------------------------------------------------------------- delta

def test_delta_maths_k3():
    reg, c = spec_registry()
    observe(c, "m", "0", [3, 0], k=3)  # traffic before the window
    before = parse_spec_counters(text_of(reg))
    steps = [3, 2, 1, 0, 3, 1, 1, 2]
    observe(c, "m", "0", steps, k=3)
    after = parse_spec_counters(text_of(reg))
    st = spec_delta(before, after)
    drafts, tokens, acc = len(steps), 3 * len(steps), sum(steps)
    assert (st.num_drafts, st.draft_tokens, st.accepted_tokens) == (drafts, tokens, acc)
    assert st.acceptance_rate == pytest.approx(acc / tokens * 100)
    assert st.acceptance_length == pytest.approx(1 + acc / drafts)
    expect = [sum(1 for s in steps if s > i) / drafts * 100 for i in range(3)]
    assert st.per_position == pytest.approx(expect)
    js = st.to_vllm_json()
    assert js["spec_decode_per_position_acceptance_rates"] == pytest.approx([e / 100 for e in expect])
    assert list(js) == ["spec_decode_acceptance_rate", "spec_decode_acceptance_length", "spec_decode_num_drafts",
                        "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
                        "spec_decode_per_position_acceptance_rates"]


def test_delta_k1_length_is_one_plus_rate():
    before = SpecCounters(10, 10, 7, {0: 7})
    after = SpecCounters(110, 110, 76, {0: 76})
    st = spec_delta(before, after)
    assert st.acceptance_rate == pytest.approx(69.0)
    assert st.acceptance_length == pytest.approx(1.69)
    assert st.per_position == [pytest.approx(69.0)]


def test_delta_none_cases():
    s = SpecCounters(5, 5, 3, {0: 3})
    assert spec_delta(s, SpecCounters(5, 5, 3, {0: 3})) is None  # no new draft tokens
    assert spec_delta(None, s) is None
    assert spec_delta(s, None) is None
    # drafts did not move but tokens did (inconsistent server): length 0.0, no per-position.
    st = spec_delta(SpecCounters(5, 5, 3, {0: 3}), SpecCounters(5, 7, 4, {0: 4}))
    assert isinstance(st, SpecStats) and st.acceptance_length == 0.0 and st.per_position == []


# --------------------------------------------------------------------------------------------- scrape

class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802
        if self.path == "/metrics":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(self.body)))
            self.end_headers()
            self.wfile.write(self.body)
        else:
            self.send_error(404)

    def log_message(self, *a):
        pass


@pytest.fixture
def metrics_server():
    reg, c = spec_registry()
    observe(c, "m", "0", [1, 0, 1], k=1)

    class H(_Handler):
        body = generate_latest(reg)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


def test_scrape_real_http(metrics_server):
    async def go():
        own = await scrape(metrics_server + "/")
        async with httpx.AsyncClient(trust_env=False) as client:
            shared = await scrape(metrics_server, client=client, timeout=2.0)
        return own, shared

    own, shared = asyncio.run(go())
    assert own == shared
    sc = parse_spec_counters(own)
    assert (sc.num_drafts, sc.num_draft_tokens, sc.num_accepted_tokens) == (3, 3, 2)


def test_scrape_errors(metrics_server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        asyncio.run(scrape(f"http://127.0.0.1:{free}", timeout=2.0))

    async def not_found():
        async with httpx.AsyncClient(trust_env=False, base_url=metrics_server) as client:
            return await scrape(metrics_server + "/nope", client=client)

    with pytest.raises(httpx.HTTPStatusError):
        asyncio.run(not_found())


# ------------------------------------------------------------------------- live token rate (pure)

def feed(rate: TokenRate, samples) -> list:
    return [rate.add(t, n) for t, n in samples]


def test_token_rate_counts_from_the_first_token_not_from_the_start():
    # The real bench client takes ~30 s to start: 15 polls at 0 tokens, then 149 tok/s.
    r = TokenRate(window_s=15)
    idle = [(2.0 * i, 0) for i in range(15)]          # t = 0 .. 28
    assert feed(r, idle) == [None] * 15 and not r.started
    first_tok_t = 28.0
    busy = [(first_tok_t + 2.0 * k, int(149 * 2.0 * k)) for k in range(1, 11)]  # t = 30 .. 48
    rates = feed(r, busy)
    assert r.started
    assert all(x == pytest.approx(149, rel=0.01) for x in rates)
    # what the old "tokens since the step began" figure would have shown at the end
    t_end, n_end = busy[-1]
    assert n_end / t_end < 0.5 * 149 < rates[-1]


def test_token_rate_uses_a_recent_window():
    r = TokenRate(window_s=10)
    samples = [(0.0, 0)] + [(float(t), 100 * t) for t in range(1, 21)]      # 100 tok/s for 20 s
    samples += [(float(t), 2000 + 20 * (t - 20)) for t in range(21, 41)]  # then 20 tok/s
    rates = feed(r, samples)
    assert rates[20] == pytest.approx(100)
    assert rates[-1] == pytest.approx(20)  # the last 10 s are all at the new speed
    assert rates[25] == pytest.approx((2100 - 1500) / 10)  # a window straddling the change


def test_token_rate_first_estimate_anchors_on_the_last_idle_sample():
    r = TokenRate()
    assert r.add(10.0, 0) is None
    assert r.add(12.0, 300) == pytest.approx(150)   # only one sample with tokens: from the idle anchor
    assert r.add(14.0, 600) == pytest.approx(150)   # from here on the anchor is dropped
    r2 = TokenRate()
    assert r2.add(5.0, 40) is None                  # tokens in the very first sample: no start time known
    assert r2.add(7.0, 340) == pytest.approx(150)


def test_token_rate_ignores_stale_samples_and_restarts_on_counter_reset():
    r = TokenRate(window_s=20)
    feed(r, [(0.0, 0), (2.0, 200), (4.0, 400)])
    assert r.add(4.0, 999) == pytest.approx(100)    # same time: ignored
    assert r.add(3.0, 999) == pytest.approx(100)    # earlier: ignored
    assert r.add(6.0, 10) is None and not r.started  # counter went backwards: start over (idle anchor at 10)
    assert r.add(8.0, 210) == pytest.approx(100)


def test_token_rate_eta_and_bad_window():
    r = TokenRate()
    assert r.eta(1280) is None
    feed(r, [(0.0, 0), (2.0, 256), (4.0, 512)])
    assert r.eta(1280) == pytest.approx((1280 - 512) / 128)
    with pytest.raises(ValueError):
        TokenRate(window_s=0)
