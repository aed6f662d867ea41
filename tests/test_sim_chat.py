"""The simulator's /v1/chat/completions route, --per-request-spec-decode-metrics, route-dependent acceptance,
the simulated bench's openai-chat backend, and the workload probe client (tui.core.plan.workloads.probe), all
against real `python -m tui.sim serve` processes on ephemeral loopback ports (as vLLM 0.32)."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys

import httpx
import pytest

from test_sim_serve import FAST, Sim, sse_events
from tui.core.plan import workloads as W

MODEL = "m/chat-target"
K = 2
SIM_V = {**FAST, "vllm_version": "0.32.0", "acceptance": 0.3, "chat_acceptance": 0.9}
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another one, please."}]


def spec_args(k: int = K) -> list[str]:
    return ["--speculative-config", json.dumps({"method": "eagle3", "model": "m/draft", "num_speculative_tokens": k})]


def start(tmp, args: list[str], sim: dict | None = None) -> Sim:
    s = Sim([MODEL, "--max-model-len", "2048", *args], tmp / "vllm-cache", sim=sim or SIM_V)
    s.ready(60)
    return s


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    s = start(tmp_path_factory.mktemp("spec"), [*spec_args(), "--per-request-spec-decode-metrics", "summary"])
    yield s
    s.kill()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    s = start(tmp_path_factory.mktemp("base"), [])
    yield s
    s.kill()


def chat(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", timeout=30,
                      json={"model": MODEL, "messages": MESSAGES, "max_tokens": 12, "temperature": 0, **body})


def stream_events(url: str, path: str, body: dict) -> list[dict]:
    with httpx.stream("POST", f"{url}{path}", timeout=30, json={"model": MODEL, "temperature": 0, "stream": True,
                                                              **body}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "data: [DONE]"
    return [json.loads(e[len("data: "):]) for e in events[:-1]]


def check_spec(sd: dict, k: int, detailed: bool = False) -> None:
    keys = {"mean_acceptance_length", "draft_acceptance_rate", "acceptance_histogram", "num_spec_steps",
            "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens"}
    assert keys <= set(sd)
    hist = sd["acceptance_histogram"]
    assert len(hist) == k + 1 and sd["num_spec_tokens"] == k
    assert sum(hist) == sd["num_spec_steps"] > 0
    acc = sum(j * c for j, c in enumerate(hist))
    assert acc == sd["num_accepted_draft_tokens"]
    assert sd["num_draft_tokens"] == k * sd["num_spec_steps"]
    assert sd["mean_acceptance_length"] == pytest.approx(1 + acc / sd["num_spec_steps"])
    assert sd["draft_acceptance_rate"] == pytest.approx(acc / sd["num_draft_tokens"])
    if detailed:
        assert len(sd["per_step_accepted"]) == sd["num_spec_steps"] == len(sd["per_step_drafted"])
        assert sum(sd["per_step_accepted"]) == acc


# --------------------------------------------------------------------------------------------------
# startup


def test_per_request_flag_on_the_baseline_fails_like_vllm(tmp_path):
    s = Sim([MODEL, "--per-request-spec-decode-metrics", "summary"], tmp_path / "c", sim=SIM_V)
    try:
        rc = s.wait_exit(60)
    finally:
        s.kill()
    assert rc == 1
    text = s.text
    assert "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig" in text
    assert ("Value error, --per-request-spec-decode-metrics requires speculative decoding to be enabled "
            "(via --speculative-config).") in text
    assert "Application startup complete." not in text
    assert "EngineCore" not in text, "vLLM fails in create_engine_config, before any engine process"


def test_per_request_flag_is_unknown_before_029(tmp_path):
    s = Sim([MODEL, *spec_args(), "--per-request-spec-decode-metrics", "summary"], tmp_path / "c",
            sim={**SIM_V, "vllm_version": "0.24.0"})
    try:
        rc = s.wait_exit(60)
    finally:
        s.kill()
    assert rc == 2
    assert "unrecognized arguments: --per-request-spec-decode-metrics summary" in s.text


# --------------------------------------------------------------------------------------------------
# /v1/chat/completions


def test_chat_non_stream_shape(base):
    r = chat(base.url)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert body["model"] == MODEL and isinstance(body["created"], int)
    ch = body["choices"][0]
    assert ch["index"] == 0 and ch["finish_reason"] == "length"
    assert ch["message"]["role"] == "assistant" and isinstance(ch["message"]["content"], str)
    assert ch["message"]["content"]
    u = body["usage"]
    assert u["completion_tokens"] == 12 and u["total_tokens"] == u["prompt_tokens"] + 12
    assert "metrics" not in body, "no per-request metrics without the flag"
    assert chat(base.url).json()["choices"][0]["message"]["content"] == ch["message"]["content"], "greedy"


def test_chat_stream_shape_and_per_request_metrics(spec):
    chunks = stream_events(spec.url, "/v1/chat/completions", {"messages": MESSAGES, "max_completion_tokens": 16,
                                                              "stream_options": {"include_usage": True}})
    head, *body, usage = chunks
    assert {c["id"] for c in chunks} == {head["id"]} and head["id"].startswith("chatcmpl-")
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert head["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert head["choices"][0]["finish_reason"] is None
    assert body and all(set(c["choices"][0]["delta"]) == {"content"} for c in body)
    assert [c["choices"][0]["finish_reason"] for c in body] == [None] * (len(body) - 1) + ["length"]
    assert "usage" not in body[0]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 16
    assert set(usage["metrics"]) == {"speculative_decoding"}
    sd = usage["metrics"]["speculative_decoding"]
    check_spec(sd, K)
    assert "per_step_accepted" not in sd, "summary: no per-step arrays; the stream leaves unset fields out"
    streamed = "".join(c["choices"][0]["delta"]["content"] for c in body)
    full = chat(spec.url, max_tokens=16).json()
    assert full["choices"][0]["message"]["content"] == streamed
    root = full["metrics"]
    assert root["time_to_first_token_ms"] is None and root["speculative_decoding"]["per_step_accepted"] is None
    check_spec(root["speculative_decoding"], K)


def test_chat_without_include_usage_has_no_usage_or_metrics(spec):
    chunks = stream_events(spec.url, "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 6})
    assert all(c["choices"] for c in chunks)
    assert not any("usage" in c or "metrics" in c for c in chunks)


def test_chat_content_parts_and_errors(base):
    text = chat(base.url, messages=[{"role": "user", "content": "Name a colour."}]).json()
    parts = chat(base.url, messages=[{"role": "user", "content": [{"type": "text", "text": "Name a colour."}]}]).json()
    assert parts["choices"][0]["message"]["content"] == text["choices"][0]["message"]["content"]
    assert parts["usage"] == text["usage"]
    r = chat(base.url, messages=[])
    assert r.status_code == 400
    assert r.json()["error"]["message"] == ("Cannot apply chat template to an empty conversation. "
                                            "Provide at least one message.")
    r = chat(base.url, stream_options={"include_usage": True})
    assert r.status_code == 400 and "Stream options" in r.json()["error"]["message"]
    r = chat(base.url, model="no/such-model")
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFoundError"


def test_completions_carry_per_request_metrics_too(spec, base):
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 10, "temperature": 0}
    r = httpx.post(f"{spec.url}/v1/completions", json=body, timeout=30).json()
    check_spec(r["metrics"]["speculative_decoding"], K)
    chunks = stream_events(spec.url, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 10,
                                                        "stream_options": {"include_usage": True}})
    assert chunks[-1]["choices"] == [] and set(chunks[-1]["metrics"]) == {"speculative_decoding"}
    assert not any("metrics" in c for c in chunks[:-1])
    assert "metrics" not in httpx.post(f"{base.url}/v1/completions", json=body, timeout=30).json()


def test_chat_traffic_is_accepted_more_than_completions(spec):
    """[simulation] chat_acceptance (0.9 here) on /v1/chat/completions, acceptance (0.3) on /v1/completions."""
    prompts = [f"Question {i}: tell me something about the number {i}." for i in range(6)]
    chat_rates, cmpl_rates = [], []
    for p in prompts:
        c = chat(spec.url, messages=[{"role": "user", "content": p}], max_tokens=40).json()
        chat_rates.append(c["metrics"]["speculative_decoding"]["draft_acceptance_rate"])
        r = httpx.post(f"{spec.url}/v1/completions", timeout=30,
                       json={"model": MODEL, "prompt": p, "max_tokens": 40, "temperature": 0}).json()
        cmpl_rates.append(r["metrics"]["speculative_decoding"]["draft_acceptance_rate"])
    assert statistics.mean(chat_rates) > statistics.mean(cmpl_rates) + 0.2, (chat_rates, cmpl_rates)


def test_detailed_level_adds_per_step_arrays(tmp_path):
    s = start(tmp_path, [*spec_args(1), "--per-request-spec-decode-metrics", "detailed"])
    try:
        sd = chat(s.url, max_tokens=10).json()["metrics"]["speculative_decoding"]
        check_spec(sd, 1, detailed=True)
        assert set(sd["per_step_drafted"]) == {1}
    finally:
        s.kill()


# --------------------------------------------------------------------------------------------------
# the probe client


def _probe(url: str, wl: W.Workload, prompts: list, max_tokens: int = 12) -> list[dict]:
    async def go():
        async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
            return await W.probe(url, MODEL, wl, prompts, max_tokens, client)
    return asyncio.run(go())


def test_probe_chat_and_completions_lossless_with_per_request_spec(spec, base):
    chat_wl = W.resolve_workload("chat")
    inputs = W.probe_inputs(chat_wl, 3)
    on_spec, on_base = _probe(spec.url, chat_wl, inputs), _probe(base.url, chat_wl, inputs)
    assert [r["prompt_index"] for r in on_spec] == [0, 1, 2]
    assert [r["text"] for r in on_spec] == [r["text"] for r in on_base], "greedy output is lossless"
    assert all(r["text"] and r["completion_tokens"] == 12 and r["error"] is None for r in on_spec + on_base)
    for r in on_spec:
        check_spec(r["spec"], K)
    assert all(r["spec"] is None for r in on_base)
    # the same text as a non-streamed request of the same content
    assert chat(base.url, messages=inputs[0]).json()["choices"][0]["message"]["content"] == on_base[0]["text"]

    sonnet = W.resolve_workload("sonnet")
    c_spec = _probe(spec.url, sonnet, ["Shall I compare thee", "to a summer's day?"], 8)
    c_base = _probe(base.url, sonnet, ["Shall I compare thee", "to a summer's day?"], 8)
    assert [r["text"] for r in c_spec] == [r["text"] for r in c_base]
    assert all(r["spec"]["num_spec_tokens"] == K for r in c_spec)
    rec = W.probe_file_record(sonnet, c_spec)
    assert rec["workload"] == "sonnet" and rec["endpoint"] == "/v1/completions" and len(rec["requests"]) == 2
    json.dumps(rec)


def test_probe_reports_errors_instead_of_raising(base):
    async def go():
        async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
            bad = await W.probe(base.url, "no/such-model", W.resolve_workload("chat"), ["hi"], 4, client)
            dead = await W.probe("http://127.0.0.1:9", MODEL, W.resolve_workload("chat"), ["hi"], 4, client)
            return bad, dead
    bad, dead = asyncio.run(go())
    assert bad[0]["error"].startswith("HTTP 404: The model `no/such-model` does not exist.")
    assert bad[0]["spec"] is None and bad[0]["text"] == ""
    assert dead[0]["error"] and "Connect" in dead[0]["error"]


# --------------------------------------------------------------------------------------------------
# the simulated bench's openai-chat backend


def bench(url: str, args: list[str], tmp, version: str = "0.32.0") -> tuple[subprocess.CompletedProcess, dict | None]:
    out = tmp / "r.json"
    env = {**__import__("os").environ, "SPECDEC_SIM": json.dumps({**SIM_V, "vllm_version": version})}
    p = subprocess.run([sys.executable, "-m", "tui.sim", "bench", "serve", "--base-url", url, "--model", MODEL,
                        "--num-prompts", "4", "--max-concurrency", "1", "--temperature", "0", "--save-result",
                        "--result-filename", str(out), "--disable-tqdm", *args],
                       capture_output=True, text=True, timeout=120, env=env)
    return p, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.parametrize("version", ["0.32.0", "0.29.0"])
def test_bench_openai_chat_custom(spec, tmp_path, version):
    wl = W.resolve_workload("chat")
    jsonl = W.write_bench_jsonl(wl, tmp_path / wl.bench_jsonl)
    from tui.core.profile.model import load_profile

    prof = load_profile("gpt-oss-120b-eagle3-trn2")
    ds = W.bench_dataset_args(wl, prof, str(jsonl), version)
    ds[ds.index("--custom-output-len") + 1] = "16"
    p, res = bench(spec.url, [*W.bench_backend_args(wl), *ds], tmp_path, version)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert res["backend"] == res["endpoint_type"] == "openai-chat"
    assert res["completed"] == 4 and res["failed"] == 0 and res["total_output_tokens"] == 64
    assert res["spec_decode_acceptance_rate"] > 50, "chat traffic gets chat_acceptance"
    assert "Speculative Decoding" in p.stdout


def test_bench_openai_chat_needs_the_chat_endpoint(spec, tmp_path):
    p, res = bench(spec.url, ["--backend", "openai-chat", "--dataset-name", "custom", "--dataset-path",
                              str(tmp_path / "x.jsonl")], tmp_path)
    assert p.returncode == 1 and res is None
    assert "OpenAI Chat Completions API URL must end with one of: {'chat/completions'}." in p.stderr


def test_bench_custom_flag_names_before_011(spec, tmp_path):
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"prompt": "hello"}\n')
    common = ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions", "--dataset-name", "custom",
              "--dataset-path", str(jsonl), "--custom-output-len", "4"]
    p, res = bench(spec.url, [*common, "--custom-skip-chat-template"], tmp_path, "0.10.2")
    assert p.returncode == 0 and res["completed"] == 4, p.stderr[-2000:]
    p, _ = bench(spec.url, [*common, "--skip-chat-template"], tmp_path, "0.10.2")
    assert p.returncode == 2 and "unrecognized arguments: --skip-chat-template" in p.stderr
    p, _ = bench(spec.url, [*common, "--skip-chat-template", "--disable-shuffle"], tmp_path, "0.11.0")
    assert p.returncode == 2 and "unrecognized arguments: --disable-shuffle" in p.stderr
