"""The simulated `vllm serve` (tui/sim/serve/, engine_core.py, model.py, logs.py).

Every server test spawns the real simulator (`python -m tui.sim serve ...`) in its own session on an
ephemeral 127.0.0.1 port and kills the whole process group afterwards. Timings use a small time_scale and token_time_scale.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tui.core.versions import DEMO_VLLM
from tui.sim import logs, model

REPO = Path(__file__).resolve().parents[1]
TARGET = "openai/gpt-oss-120b"
DRAFT = "RedHatAI/gpt-oss-120b-speculator.eagle3"
COUNT_PROMPT = "I am gonna keep counting forever, 1 2 3 4 5 "
NEURON_CONFIG = {"neuron_config": {"quantization": "bf16", "num_batched_tokens_buckets": [512],
                                   "num_seqs_buckets": [1], "kv_segment_size_buckets": [512],
                                   "on_device_sampling_config": {"all_greedy": True}}}
SPEC_CONFIG = {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 1}
FAST = {"time_scale": 0.05, "token_time_scale": 0.05,
        "weights_s": 4.0, "draft_s": 1.0, "hlo_s": 1.0, "compile_s": 4.0, "warmup_s": 1.0}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def serve_args(tp: int = 16, speculative: bool = False) -> list[str]:
    args = [TARGET, "--dtype", "bfloat16", "--tensor-parallel-size", str(tp), "--max-num-seqs", "1",
            "--max-model-len", "768", "--max-num-batched-tokens", "512", "--no-enable-prefix-caching",
            "--hf-overrides", '{"quantization_config": {}}', "--additional-config", json.dumps(NEURON_CONFIG)]
    if speculative:
        args += ["--speculative-config", json.dumps(SPEC_CONFIG)]
    return args


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sim:
    """One `python -m tui.sim serve` process; its merged stdout/stderr is read by a thread."""

    def __init__(self, args: list[str], cache: Path, sim: dict | None = None, env: dict | None = None,
                 port: int | None = None, host_args: bool = True):
        self.port = port or free_port()
        e = {k: v for k, v in os.environ.items()
             if k not in ("NEURON_RT_VISIBLE_CORES", "FORCE_COLOR", "VLLM_LOGGING_COLOR", "NO_COLOR",
                          "VLLM_ENGINE_READY_TIMEOUT_S")}
        e["SPECDEC_SIM"] = json.dumps({**FAST, **(sim or {})})
        e["VLLM_CACHE_ROOT"] = str(cache)
        e.update(env or {})
        argv = [sys.executable, "-m", "tui.sim", "serve", *args]
        if host_args:
            argv += ["--host", "127.0.0.1", "--port", str(self.port)]
        self.lines: list[tuple[float, str]] = []
        self._cv = threading.Condition()
        self._eof = False
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e, cwd=REPO,
                                     start_new_session=True, text=True, errors="replace")
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._cv:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self._cv.notify_all()
        with self._cv:
            self._eof = True
            self._cv.notify_all()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def text(self) -> str:
        with self._cv:
            return "\n".join(ln for _, ln in self.lines)

    def wait_for(self, needle: str, timeout: float = 30.0, start: int = 0) -> tuple[int, float]:
        """Index and arrival time of the first line (from index start) containing needle."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for i in range(start, len(self.lines)):
                    if needle in self.lines[i][1]:
                        return i, self.lines[i][0]
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    raise AssertionError(f"{needle!r} not seen; output:\n" + "\n".join(ln for _, ln in self.lines[-60:]))
                self._cv.wait(min(left, 0.5))

    def ready(self, timeout: float = 30.0) -> float:
        """Seconds from process start to `Application startup complete.`"""
        _, t = self.wait_for("Application startup complete.", timeout)
        return t - self.t0

    def wait_exit(self, timeout: float = 30.0) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._thread.join(timeout=5)
        return rc

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._thread.join(timeout=5)
        if self.proc.stdout:
            self.proc.stdout.close()


def launch(tmp_path: Path, args: list[str], **kw) -> Sim:
    return Sim(args, tmp_path / "vllm-cache", **kw)


def counters(url: str) -> dict[str, float]:
    """name{sorted labels} -> value for every *_total sample of /metrics."""
    out: dict[str, float] = {}
    text = httpx.get(f"{url}/metrics", timeout=10).text
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            lab = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k not in ("engine", "model_name"))
            out[f"{s.name}{{{lab}}}"] = s.value
    return out


def sse_events(resp: httpx.Response) -> list[str]:
    buf = ""
    events = []
    for chunk in resp.iter_text():
        buf += chunk
        while "\n\n" in buf:
            ev, buf = buf.split("\n\n", 1)
            events.append(ev)
    assert buf == ""
    return events


def complete(url: str, prompt: str = COUNT_PROMPT, max_tokens: int = 10, **extra) -> dict:
    r = httpx.post(f"{url}/v1/completions", json={"model": TARGET, "prompt": prompt, "max_tokens": max_tokens,
                                                  "temperature": 0, **extra}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


# --------------------------------------------------------------------------------------------------
# shared servers
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    sim = launch(tmp_path_factory.mktemp("baseline"), serve_args())
    try:
        # Port bound but not listening while the engine loads: connection refused.
        sim.wait_for("Loading weights from")
        try:
            httpx.get(f"{sim.url}/health", timeout=5)
            sim.refused_while_loading = False
        except httpx.ConnectError:
            sim.refused_while_loading = True
        sim.ready()
        yield sim
    finally:
        sim.kill()


@pytest.fixture(scope="module")
def eagle3(tmp_path_factory):
    sim = launch(tmp_path_factory.mktemp("eagle3"), serve_args(speculative=True))
    try:
        sim.ready()
        yield sim
    finally:
        sim.kill()


# --------------------------------------------------------------------------------------------------
# pure functions
# --------------------------------------------------------------------------------------------------


def test_model_tpot_calibration():
    k1 = model.expected_tpot_ms(7.0, 0.69, 0.7, 1)
    assert abs(k1 - 5.8) / 5.8 < 0.05
    assert k1 < model.expected_tpot_ms(7.0, 0.69, 0.7, 2)
    assert k1 < model.expected_tpot_ms(7.0, 0.69, 0.7, 3)
    assert model.expected_tpot_ms(7.0, 0.69, 0.7, 0) == 7.0
    assert abs(model.expected_tokens_per_step(0.69, 0.7, 1) - 1.69) < 1e-9


def test_model_per_position_acceptance_decays():
    rates = model.per_position_acceptance(0.69, 0.7, 4)
    assert rates[0] == pytest.approx(0.69)
    assert all(a > b for a, b in zip(rates, rates[1:]))
    cond = [model.conditional_acceptance(0.69, 0.7, i) for i in range(4)]
    assert all(a > b for a, b in zip(cond, cond[1:]))


def test_model_ttft():
    base = model.ttft_ms(512, 252.0)
    assert base == pytest.approx(252.0) == model.prefill_ms(512, 252.0)
    assert model.ttft_ms(256, 252.0) < base < model.ttft_ms(1024, 252.0)
    assert model.ttft_ms(1, 252.0) > 0


def test_model_speculative_ttft_follows_the_draft_cost():
    """vLLM's first speculative step: the target's prefill, then the draft's prefill and k - 1 proposals."""
    base = model.ttft_ms(512, 252.0)
    cheap = model.ttft_ms(512, 252.0, speculative=True, k=1, draft_cost=0.02, tpot_ms=7.0)
    dear = model.ttft_ms(512, 252.0, speculative=True, k=1, draft_cost=0.3, tpot_ms=7.0)
    assert base < cheap < dear
    assert cheap == pytest.approx(252.0 * 1.02) and dear == pytest.approx(252.0 * 1.3)
    k3 = model.ttft_ms(512, 252.0, speculative=True, k=3, draft_cost=0.3, tpot_ms=7.0)
    assert k3 == pytest.approx(252.0 * 1.3 + 2 * 0.3 * 7.0)
    assert model.ttft_ms(512, 252.0, speculative=True, draft_cost=0.0) == pytest.approx(base)
    # The request plan's first step is that TTFT, whatever the acceptance (0.45 % or 69 %).
    for acc in (0.0045, 0.69):
        lo = model.plan_request("a prompt", 512, 8, ttft=252.0, tpot=7.0, k=1, acceptance=acc, draft_cost=0.02)
        hi = model.plan_request("a prompt", 512, 8, ttft=252.0, tpot=7.0, k=1, acceptance=acc, draft_cost=0.3)
        assert lo.steps[0].delay_ms == pytest.approx(cheap) and hi.steps[0].delay_ms == pytest.approx(dear)
        assert lo.steps[0].delay_ms > model.plan_request("a prompt", 512, 8, ttft=252.0, tpot=7.0).steps[0].delay_ms


def test_model_prompt_acceptance_varies_with_the_prompt():
    prompts = [f"Pick as many lines as you can {i}" for i in range(2000)]
    values = [model.prompt_acceptance(p, 0.69, 0.15) for p in prompts]
    assert values == [model.prompt_acceptance(p, 0.69, 0.15) for p in prompts]  # the same prompt, the same value
    assert all(0.0 <= v <= 1.0 for v in values) and len(set(values)) == len(values)
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    assert mean == pytest.approx(0.69, abs=0.015) and sd == pytest.approx(0.15, rel=0.1)
    assert model.prompt_acceptance("x", 0.69, 0.0) == 0.69
    assert model.prompt_acceptance("x", 0.0, 0.15) == 0.0 and model.prompt_acceptance("x", 1.0, 0.15) == 1.0
    # A spread too wide for the mean is capped (a quarter of the Beta's largest variance), never invalid.
    wide = [model.prompt_acceptance(p, 0.05, 0.5) for p in prompts[:500]]
    assert all(0.0 <= v <= 1.0 for v in wide) and sum(wide) / len(wide) == pytest.approx(0.05, abs=0.01)


def test_model_host_noise_is_seeded_and_spreads_runs():
    a, b, c = model.HostNoise(0.08, 7), model.HostNoise(0.08, 7), model.HostNoise(0.08, 8)
    fa = [a.next() for _ in range(3000)]
    assert fa == [b.next() for _ in range(3000)]  # same seed, same drift
    assert fa[:100] != [c.next() for _ in range(100)]
    assert sum(fa) / len(fa) == pytest.approx(1.0, abs=0.02)
    # Means of consecutive 10-request runs differ, with about 0.85 x run_spread (the profile's calibration).
    runs = [sum(fa[i:i + 10]) / 10 for i in range(0, 3000, 10)]
    assert len(set(runs)) == len(runs)
    m = sum(runs) / len(runs)
    sd = (sum((r - m) ** 2 for r in runs) / (len(runs) - 1)) ** 0.5
    assert 0.05 < sd < 0.085
    flat = model.HostNoise(0.0, 7)
    assert {flat.next() for _ in range(10)} == {1.0}


def test_model_plan_scales_with_the_host_speed():
    common = dict(ttft=252.0, tpot=7.0, k=1, acceptance=0.69, decay=0.7)
    one = model.plan_request("Shall I compare thee", 300, 40, **common)
    slow = model.plan_request("Shall I compare thee", 300, 40, speed=1.25, **common)
    assert slow.text == one.text and [s.accepted for s in slow.steps] == [s.accepted for s in one.steps]
    assert slow.duration_ms == pytest.approx(1.25 * one.duration_ms)


def test_model_counting_and_text():
    assert model.greedy_tokens(COUNT_PROMPT, 10) == ["6", " ", "7", " ", "8", " ", "9", " ", "10", " "]
    assert "".join(model.greedy_tokens("1, 2, 3", 6)) == ", 4, 5"
    a = model.greedy_tokens("Shall I compare thee to a summer's day?", 40)
    assert a == model.greedy_tokens("Shall I compare thee to a summer's day?", 40)
    assert a != model.greedy_tokens("Another prompt entirely", 40)


def test_model_plan_lossless_and_acceptance():
    common = dict(ttft=252.0, tpot=7.0, acceptance=0.69, decay=0.7, max_model_len=768)
    base = model.plan_request(COUNT_PROMPT, 12, 10, **common)
    spec = model.plan_request(COUNT_PROMPT, 12, 10, k=1, **common)
    assert base.text == spec.text == "6 7 8 9 10 "
    assert len(base.steps) == 10 and all(len(s.tokens) == 1 for s in base.steps)
    assert len(spec.steps) < len(base.steps) and all(1 <= len(s.tokens) <= 2 for s in spec.steps)
    broken = model.plan_request(COUNT_PROMPT, 12, 10, k=1, lossless_broken=True, **common)
    assert broken.text != base.text and len(broken.tokens) == 10
    # Acceptance over many steps matches the configured rate; draft-mismatch collapses it.
    drafts = accepted = 0
    for i in range(40):
        p = model.plan_request(f"prompt {i}", 500, 128, k=1, **common)
        drafts += sum(1 for s in p.steps if s.drafted)
        accepted += sum(s.accepted for s in p.steps)
        assert len(p.tokens) == 128
    assert 0.62 < accepted / drafts < 0.76
    bad = model.plan_request("x", 500, 128, k=1, **{**common, "acceptance": model.effective_acceptance(0.69, "draft-mismatch")})
    assert sum(s.accepted for s in bad.steps) <= 3


def test_logs_formats_and_colour():
    assert not logs.color_enabled({})
    assert logs.color_enabled({"FORCE_COLOR": "1"})
    assert logs.color_enabled({"VLLM_LOGGING_COLOR": "1"})
    assert not logs.color_enabled({"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert logs.process_prefix("APIServer", 7) == "(APIServer pid=7) "
    assert logs.process_prefix("APIServer", 7, True) == "\x1b[1;36m(APIServer pid=7)\x1b[0;0m "
    assert re.fullmatch(r"INFO \d\d-\d\d \d\d:\d\d:\d\d \[core\.py:1\] hi", logs.vllm_format("INFO", "core.py", 1, "hi"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - INFO - w\.py:2 - hi",
                        logs.plugin_format("INFO", "w.py", 2, "hi"))


# --------------------------------------------------------------------------------------------------
# CLI errors (no server)
# --------------------------------------------------------------------------------------------------


def _run_cli(args: list[str], tmp_path: Path, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "NEURON_RT_VISIBLE_CORES"}
    e.update({"SPECDEC_SIM": json.dumps(FAST), "VLLM_CACHE_ROOT": str(tmp_path / "c")}, **(env or {}))
    p = subprocess.Popen([sys.executable, "-m", "tui.sim", "serve", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=e, cwd=REPO, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def test_unknown_flag_exits_2(tmp_path):
    r = _run_cli([TARGET, "--bogus-flag", "1", "--port", str(free_port())], tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("usage: vllm serve")
    assert "vllm serve: error: unrecognized arguments: --bogus-flag 1" in r.stderr
    assert "Loading weights" not in r.stdout


def test_bad_json_exits_2(tmp_path):
    r = _run_cli([TARGET, "--speculative-config", "{bad json", "--port", str(free_port())], tmp_path)
    assert r.returncode == 2
    assert "error: argument --speculative-config:" in r.stderr
    assert "Expecting property name enclosed in double quotes" in r.stderr


# --------------------------------------------------------------------------------------------------
# startup log, readiness, HTTP
# --------------------------------------------------------------------------------------------------


def test_startup_phases_in_order(baseline, eagle3):
    order = [f"vLLM API server version {DEMO_VLLM}", "non-default args:", "Initialized NeuronWorker",
             "Loading weights from openai/gpt-oss-120b", "Weight loading completed in",
             "NeuronModel loading complete", "Neuron HBM:", "Extracting graphs for 1 prefill buckets: [(512, 512)]",
             "Extracting 1 decode compile targets: [(1, 768)]", "Compilation cache key:", "Local cache miss for key:",
             "Compiling...", "Compilation complete in", "Stored compilation artifacts in local cache:",
             "Warming up model for 1 num_batched_tokens_buckets: [512]", "Model warmup completed:",
             "init engine (profile, create kv cache, warmup model) took", "Starting vLLM API server 0 on http://127.0.0.1:",
             "Available routes are:", "Route: /v1/completions, Methods: POST",
             "INFO:     Started server process [", "INFO:     Waiting for application startup.",
             "INFO:     Application startup complete."]
    idx = 0
    for needle in order:
        idx, _ = baseline.wait_for(needle, timeout=1, start=idx)
    text = baseline.text
    assert "\x1b[" not in text
    assert re.search(r"^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[api_server\.py:\d+\] vLLM API server", text, re.M)
    worker = re.compile(r"^\(EngineCore_DP0 pid=\d+\) \(Worker_TP(\d+) pid=\d+\) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} "
                        r"- INFO - \w+\.py:\d+ - Loading weights from openai/gpt-oss-120b$", re.M)
    assert sorted(int(r) for r in worker.findall(text)) == list(range(16))
    assert text.count("=" * 80) == 32
    assert "Spec decode enabled" not in text and "EAGLE3" not in text
    # The speculative server also loads the draft and captures the EAGLE3 graphs.
    spec = eagle3.text
    for needle in ("Spec decode enabled. Loading draft model ...",
                   "Draft model loading complete (moved to device and compiled)",
                   "Capturing EAGLE3 prefill graphs for bucket size: 512", "EAGLE3 warmup: num_tokens=512"):
        assert spec.count(needle) == 16, needle
    assert spec.count("Local cache miss for key:") == 5 * 16  # prefill, decode, verify, draft prefill/decode


def test_health_refused_then_ok(baseline):
    assert baseline.refused_while_loading
    r = httpx.get(f"{baseline.url}/health", timeout=10)
    assert r.status_code == 200 and r.content == b""
    assert httpx.get(f"{baseline.url}/ping", timeout=10).status_code == 200
    assert httpx.get(f"{baseline.url}/version", timeout=10).json() == {"version": DEMO_VLLM}
    assert "server_load" in httpx.get(f"{baseline.url}/load", timeout=10).json()


def test_models_shape(baseline):
    body = httpx.get(f"{baseline.url}/v1/models", timeout=10).json()
    assert body["object"] == "list" and len(body["data"]) == 1
    m = body["data"][0]
    assert m["id"] == TARGET and m["root"] == TARGET and m["object"] == "model" and m["owned_by"] == "vllm"
    assert m["parent"] is None and m["max_model_len"] == 768 and isinstance(m["created"], int)
    assert isinstance(m["permission"], list) and m["permission"][0]["object"] == "model_permission"


def test_counting_smoke_is_lossless(baseline, eagle3):
    for sim in (baseline, eagle3):
        body = complete(sim.url)
        assert body["choices"][0]["text"] == "6 7 8 9 10 "
        assert body["choices"][0]["finish_reason"] == "length"
        assert body["usage"]["completion_tokens"] == 10
        assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 10
    prose = "Shall I compare thee to a summer's day? Thou art more lovely"
    assert complete(baseline.url, prose, 40)["choices"][0]["text"] == complete(eagle3.url, prose, 40)["choices"][0]["text"]


@pytest.mark.parametrize("include_usage", [True, False])
def test_sse_stream(eagle3, include_usage):
    payload = {"model": TARGET, "prompt": COUNT_PROMPT, "max_tokens": 24, "stream": True, "temperature": 0,
               "ignore_eos": True}
    if include_usage:
        payload["stream_options"] = {"include_usage": True}
    with httpx.stream("POST", f"{eagle3.url}/v1/completions", json=payload, timeout=30,
                      headers={"x-request-id": "bench-1234abcd-0"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert all(ev.startswith("data: ") for ev in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(ev[6:]) for ev in events[:-1]]
    content = [c for c in chunks if c["choices"]]
    assert all(c["id"] == "cmpl-bench-1234abcd-0" and c["object"] == "text_completion" for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in content] == [None] * (len(content) - 1) + ["length"]
    text = "".join(c["choices"][0]["text"] for c in content)
    assert text == "".join(model.greedy_tokens(COUNT_PROMPT, 24))
    # EAGLE3 k=1: one chunk per engine step carrying 1 or 2 tokens, so fewer chunks than tokens.
    assert len(content) < 24
    usage = [c for c in chunks if not c["choices"]]
    if include_usage:
        assert len(usage) == 1 and chunks[-1] is usage[0]
        assert usage[0]["usage"]["completion_tokens"] == 24
        assert usage[0]["usage"]["total_tokens"] == usage[0]["usage"]["prompt_tokens"] + 24
    else:
        assert usage == []


def test_openai_sdk(eagle3):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{eagle3.url}/v1", api_key="x", max_retries=0)
    try:
        r = client.completions.create(model=TARGET, prompt=COUNT_PROMPT, max_tokens=10, temperature=0)
        assert r.choices[0].text == "6 7 8 9 10 " and r.usage.completion_tokens == 10
        stream = client.completions.create(model=TARGET, prompt=COUNT_PROMPT, max_tokens=10, temperature=0,
                                           stream=True, stream_options={"include_usage": True})
        parts, usage = [], None
        for chunk in stream:
            if chunk.choices:
                parts.append(chunk.choices[0].text)
            if chunk.usage:
                usage = chunk.usage
        assert "".join(parts) == "6 7 8 9 10 "
        assert usage is not None and usage.completion_tokens == 10
        assert [m.id for m in client.models.list().data] == [TARGET]
    finally:
        client.close()


def test_errors(baseline):
    r = httpx.post(f"{baseline.url}/v1/completions", json={"model": "nope/model", "prompt": "hi", "max_tokens": 5},
                   timeout=10)
    assert r.status_code == 404
    assert r.json() == {"error": {"message": "The model `nope/model` does not exist.", "type": "NotFoundError",
                                  "param": None, "code": 404}}
    r = httpx.post(f"{baseline.url}/v1/completions", json={"model": TARGET, "prompt": "hi " * 100, "max_tokens": 700},
                   timeout=10)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "BadRequestError" and err["code"] == 400
    assert "maximum context length is 768 tokens" in err["message"]


def test_metrics_spec_counters(baseline, eagle3):
    base = counters(baseline.url)
    assert not any(k.startswith("vllm:spec_decode") for k in base)
    for name in ("vllm:prompt_tokens_total{}", "vllm:generation_tokens_total{}",
                 "vllm:request_success_total{finished_reason=length}", "vllm:num_requests_running{}",
                 "vllm:num_requests_waiting{}", "vllm:time_to_first_token_seconds_count{}"):
        assert name in base, name

    before = counters(eagle3.url)
    for name in ("vllm:spec_decode_num_drafts_total{}", "vllm:spec_decode_num_draft_tokens_total{}",
                 "vllm:spec_decode_num_accepted_tokens_total{}",
                 "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=0}"):
        assert name in before, name
    with httpx.stream("POST", f"{eagle3.url}/v1/completions", timeout=30,
                      json={"model": TARGET, "prompt": "Let me tell you a story about the sea", "max_tokens": 64,
                            "stream": True}) as r:
        steps = sum(1 for ev in sse_events(r) if ev != "data: [DONE]" and json.loads(ev[6:])["choices"])
    after = counters(eagle3.url)
    d = {k: after[k] - before.get(k, 0.0) for k in after}
    drafts = d["vllm:spec_decode_num_drafts_total{}"]
    accepted = d["vllm:spec_decode_num_accepted_tokens_total{}"]
    assert drafts == steps - 1  # every decode step after the prefill step drafted
    assert d["vllm:spec_decode_num_draft_tokens_total{}"] == drafts  # k = 1
    assert 0 < accepted <= drafts
    assert d["vllm:spec_decode_num_accepted_tokens_per_pos_total{position=0}"] == accepted
    assert 64 <= 1 + drafts + accepted <= 65  # the last step may be cut by max_tokens
    assert d["vllm:generation_tokens_total{}"] == 64
    assert d["vllm:request_success_total{finished_reason=length}"] == 1
    assert d["vllm:time_to_first_token_seconds_count{}"] == 1


def test_periodic_stats_lines(eagle3):
    start = len(eagle3.lines)
    complete(eagle3.url, "Tell me about the rivers of the north", 64)
    eagle3.wait_for("Engine 000: Avg prompt throughput:", timeout=15, start=start)
    i, _ = eagle3.wait_for("SpecDecoding metrics: Mean acceptance length:", timeout=15, start=start)
    line = eagle3.lines[i][1]
    assert re.search(r"SpecDecoding metrics: Mean acceptance length: [\d.]+, Accepted throughput: [\d.]+ tokens/s, "
                     r"Drafted throughput: [\d.]+ tokens/s, Accepted: \d+ tokens, Drafted: \d+ tokens, "
                     r"Per-position acceptance rate: [\d.]+, Avg Draft acceptance rate: [\d.]+%$", line)


# --------------------------------------------------------------------------------------------------
# faults, cache, process lifecycle (own servers)
# --------------------------------------------------------------------------------------------------


def test_lossless_broken_fault(tmp_path):
    sim = launch(tmp_path, serve_args(speculative=True), sim={"fault": "lossless-broken"})
    try:
        sim.ready()
        body = complete(sim.url)
        assert body["choices"][0]["text"] != "6 7 8 9 10 "
        assert body["usage"]["completion_tokens"] == 10
    finally:
        sim.kill()


def test_busy_port_fails_fast(tmp_path):
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        sim = launch(tmp_path, serve_args(), port=port)
        try:
            assert sim.wait_exit() == 1
            out = sim.text.rstrip().splitlines()
            assert out[-1].endswith("OSError: [Errno 98] Address already in use")
            assert "Loading weights" not in sim.text and "EngineCore_DP0" not in sim.text
        finally:
            sim.kill()
    finally:
        holder.close()


def _assert_engine_failed(sim: Sim) -> str:
    assert sim.wait_exit() == 1
    text = ANSI.sub("", sim.text)
    assert "EngineCore failed to start." in text
    last = text.rstrip().splitlines()[-1]
    assert last.endswith("RuntimeError: Engine core initialization failed. See root cause above. "
                         "Failed core proc(s): {'EngineCore_DP0': 1}")
    assert "Application startup complete" not in text
    return text


def test_neuron_rt_visible_cores_fails(tmp_path):
    sim = launch(tmp_path, serve_args(), env={"NEURON_RT_VISIBLE_CORES": "0-15"})
    try:
        text = _assert_engine_failed(sim)
        assert ("RuntimeError: NEURON_RT_VISIBLE_CORES cannot be used with multi-processing execution on vLLM. "
                "Set NEURON_VISIBLE_DEVICES to control device visibility.") in text
        assert "Loading weights" not in text
    finally:
        sim.kill()


def test_tp8_hbm_allocation_failure(tmp_path):
    sim = launch(tmp_path, serve_args(tp=8))
    try:
        text = _assert_engine_failed(sim)
        warm = text.index("Warming up for prefill")
        fail = text.index("ERROR  TDRV:log_dev_mem")
        assert warm < fail < text.index("EngineCore failed to start.")
        assert re.search(r"Failed to allocate [\d.]+GB \(alignment: none, usage: tensors\) on ND 0:NC 4", text)
        assert "Displaying Current Memory Utilization:" in text and "NEFF id to name mapping:" in text
        assert 'RuntimeError: nrt_tensor_allocate status=4 message="Allocation Failure"' in text
    finally:
        sim.kill()


@pytest.mark.parametrize("fault,needles", [
    ("compile-failed", ["[NCC_", "RuntimeError: neuronx-cc compilation failed with 1. Check compiler logs."]),
    ("compile-oom", ["process was killed (SIG_KILL)", "Out Of Memory (OOM) killer",
                     "RuntimeError: neuronx-cc compilation failed with -9. Check compiler logs."]),
    ("cores-busy", ["Logical Neuron Core(s) not available - Requested:lnc0-lnc0 Available:0 Logical Core size:2 "
                    "(cores busy, ret=-16)",
                    "RuntimeError: Neuron runtime cannot be initialized; cannot determine the number of available "
                    "NeuronCores"]),
])
def test_fatal_faults(tmp_path, fault, needles):
    sim = launch(tmp_path, serve_args(), sim={"fault": fault})
    try:
        text = _assert_engine_failed(sim)
        for n in needles:
            assert n in text, n
        assert text.index(needles[0]) < text.index("EngineCore failed to start.")
    finally:
        sim.kill()


def test_engine_timeout(tmp_path):
    sim = launch(tmp_path, serve_args(), sim={"fault": "engine-timeout"}, env={"VLLM_ENGINE_READY_TIMEOUT_S": "10"})
    try:
        assert sim.wait_exit() == 1
        last = sim.text.rstrip().splitlines()[-1]
        assert "TimeoutError: Timed out waiting for engine core processes to start." in last
        assert "Waited 10s (configured by VLLM_ENGINE_READY_TIMEOUT_S)" in last
        assert "Weight loading completed" not in sim.text
    finally:
        sim.kill()


def test_compile_cache_hit_skips_the_compile(tmp_path):
    slow = {"compile_s": 30.0}  # 1.5 s of cold compile at time_scale 0.05
    cold = launch(tmp_path, serve_args(), sim=slow)
    try:
        cold.ready()
        assert "Local cache hit" not in cold.text
    finally:
        cold.kill()
    entries = [p for p in (tmp_path / "vllm-cache" / "neuron" / "compile_cache").iterdir() if p.is_dir()]
    assert len(entries) == 2 and all(re.fullmatch(r"[0-9a-f]{32}", p.name) for p in entries)
    for e in entries:
        names = {p.name for p in e.iterdir()}
        assert {"graph.hlo", ".compilation_complete", ".artifact_metadata_v0.json"} <= names
        assert any(re.fullmatch(r"graph_[0-9a-f]+\.neff", n) for n in names)
    warm = launch(tmp_path, serve_args(), sim=slow)
    try:
        warm.ready()
        assert warm.text.count("Local cache hit for key:") == 2 * 16
        assert "Local cache miss" not in warm.text and "Compiling..." not in warm.text
    finally:
        warm.kill()


def test_sigterm_leaves_no_children(tmp_path):
    sim = launch(tmp_path, serve_args(), sim={"time_scale": 0.02})
    try:
        sim.ready()
        kids = psutil.Process(sim.proc.pid).children(recursive=True)
        assert len(kids) == 1 and "tui.sim.engine_core" in " ".join(kids[0].cmdline())
        os.kill(sim.proc.pid, signal.SIGTERM)
        assert sim.wait_exit() == 0
        gone, alive = psutil.wait_procs(kids, timeout=5)
        assert alive == []
        assert "INFO:     Shutting down" in sim.text
    finally:
        sim.kill()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_engine_core_dies_with_api_server(tmp_path):
    """SIGKILL the API server alone: the engine core must not outlive it (PR_SET_PDEATHSIG)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_child_subreaper = 36  # the orphan is re-parented to us, so we can reap it (no zombie left behind)
    libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    sim = launch(tmp_path, serve_args(), sim={"time_scale": 0.02})
    try:
        sim.ready()
        (child,) = psutil.Process(sim.proc.pid).children()
        os.kill(sim.proc.pid, signal.SIGKILL)
        sim.wait_exit()
        status = None
        for _ in range(200):
            pid, status = os.waitpid(child.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("engine core outlived the API server")
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    finally:
        libc.prctl(pr_set_child_subreaper, 0, 0, 0, 0)
        sim.kill()
