"""`python -m tui.sim bench serve`: SSE client, sonnet sampling, CLI errors, and end-to-end runs against
the real `python -m tui.sim serve` (baseline and EAGLE3) on loopback ephemeral ports."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tui.core.bench import metrics as mx
from tui.core.bench.benchparse import TqdmProgressParser, parse_result_json, parse_stdout_blocks
from tui.sim.bench import BASE_PROMPT, BenchError, chat_template, request_completion, sample_sonnet
from tui.sim.sonnet import sonnet_path
from tui.sim.tokens import count_tokens

ROOT = Path(__file__).resolve().parents[1]
MODEL = "openai/gpt-oss-120b"
SPEC_CONFIG = json.dumps({"method": "eagle3", "model": "RedHatAI/gpt-oss-120b-speculator.eagle3",
                          "num_speculative_tokens": 1})
SIM = {"time_scale": 0.05, "token_time_scale": 0.05,
       "weights_s": 0.1, "draft_s": 0.1, "hlo_s": 0.1, "compile_s": 0.1, "warmup_s": 0.1}

WORDS = ("summer winds blow fair things grow love time beauty eyes heart night day sweet rose youth age glass "
         "thou thy doth art shall when where gold light").split()


def write_verse(path: Path, n: int = 100, seed: int = 5) -> Path:
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 11))]
        lines.append(" ".join(words).capitalize() + ("," if i % 4 != 3 else "."))
    path.write_text("\n".join(lines), encoding="utf-8")  # no trailing newline, like sonnet.txt
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sim_env(tmp: Path, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECDEC_", "VLLM_"))}
    env["SPECDEC_SIM"] = json.dumps({**SIM, **extra})
    env["VLLM_CACHE_ROOT"] = str(tmp / "vllm-cache")
    env["PYTHONPATH"] = str(ROOT)
    env["NO_PROXY"] = "127.0.0.1,localhost"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def bench(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.sim", "bench", "serve", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


# --------------------------------------------------------------------------------------------- SSE client

async def _raw_server(body_parts: list[bytes], status: str = "200 OK"):
    """A loopback HTTP server that answers every request with `body_parts`, written one by one."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))
        await reader.readexactly(length)
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n".encode())
        for part in body_parts:
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.005)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/completions"


def _chunk(text: str) -> bytes:
    return b"data: " + json.dumps({"id": "c", "object": "text_completion",
                                   "choices": [{"index": 0, "text": text, "finish_reason": None}]}).encode() + b"\n\n"


def _send(parts: list[bytes], vt=(0, 24, 0), status: str = "200 OK"):
    async def go():
        server, url = await _raw_server(parts, status)
        async with server:
            async with httpx.AsyncClient(trust_env=False) as client:
                return await request_completion(client, url, {"prompt": "x", "max_tokens": 4}, {}, 11, vt)

    return asyncio.run(go())


USAGE = (b'data: {"id":"c","object":"text_completion","choices":[],'
         b'"usage":{"prompt_tokens":493,"total_tokens":497,"completion_tokens":4}}\n\n')


def test_sse_parsing_like_vllm_client():
    one, two = _chunk(" the"), _chunk(" rose")
    parts = [b": ping\n\n", one[:9], one[9:] + two[:3], two[3:], _chunk(""), _chunk(" blows"), USAGE,
             b"data: [DONE]\n\n"]
    out = _send(parts)
    assert out.success and out.error == ""
    assert out.generated_text == " the rose blows"
    assert len(out.itl) == 3  # 4 content chunks (the empty-text one counts) -> 3 gaps
    assert out.ttft > 0 and out.latency >= out.ttft + sum(out.itl) - 1e-9
    assert out.output_tokens == 4
    assert out.prompt_len == 493  # 0.22+: usage.prompt_tokens overrides the sampled length
    assert _send(parts, vt=(0, 14, 0)).prompt_len == 11


def test_sse_trailing_message_without_blank_line():
    out = _send([_chunk(" a"), b'data: {"choices":[{"text":" b"}]}'])
    assert out.success and out.generated_text == " a b" and len(out.itl) == 1


def test_sse_failures():
    bad = _send([_chunk(" a"), b"data: {not json}\n\n"])
    assert not bad.success and "JSONDecodeError" in bad.error
    empty = _send([USAGE, b"data: [DONE]\n\n"])
    assert not empty.success and empty.error.startswith("Never received a valid chunk to calculate TTFT.")
    nf = _send([b'{"error": {}}'], status="404 Not Found")
    assert not nf.success and nf.error == "Not Found"


# --------------------------------------------------------------------------------------------- sonnet

def test_sonnet_sampling(tmp_path):
    path = write_verse(tmp_path / "verse.txt")
    lines = path.read_text().splitlines(keepends=True)
    reqs = sample_sonnet(str(path), 6, 128, 16, 60, seed=0, request_id_prefix="bench-x-", vt=(0, 24, 0))
    assert [r.request_id for r in reqs] == [f"bench-x-{i}" for i in range(6)]
    head = chat_template(BASE_PROMPT)[:-len("<|end|><|start|>assistant")]
    for r in reqs:
        assert r.prompt_len == count_tokens(r.prompt) <= 128 and r.expected_output_len == 16
        assert r.prompt.startswith(head)
    # The shared prefix: the first lines of the file, the same in every prompt.
    prefix_tokens = 60 - count_tokens(chat_template(BASE_PROMPT))
    n_prefix = round(prefix_tokens / (sum(count_tokens(x) for x in lines) / len(lines)))
    assert n_prefix >= 1
    assert all(r.prompt.startswith(head + "".join(lines[:n_prefix])) for r in reqs)
    again = sample_sonnet(str(path), 6, 128, 16, 60, seed=0, request_id_prefix="bench-x-", vt=(0, 24, 0))
    other = sample_sonnet(str(path), 6, 128, 16, 60, seed=1, request_id_prefix="bench-x-", vt=(0, 24, 0))
    assert [r.prompt for r in again] == [r.prompt for r in reqs]
    assert [r.prompt for r in other] != [r.prompt for r in reqs]
    with pytest.raises(BenchError, match=r"'input_len' must be higher than the base prompt length"):
        sample_sonnet(str(path), 1, 10, 16, 0, 0, "", (0, 24, 0))


# --------------------------------------------------------------------------------------------- CLI errors

def test_cli_argument_errors(tmp_path):
    env = sim_env(tmp_path)
    r = bench(["--num-prompts", "2", "--no-such-flag", "1"], env, tmp_path)
    assert r.returncode == 2 and "unrecognized arguments: --no-such-flag" in r.stderr
    assert r.stderr.startswith("usage: vllm bench serve")
    r = bench(["--dataset-path", "x.txt"], sim_env(tmp_path, vllm_version="0.11.0"), tmp_path)
    assert r.returncode == 2 and "the following arguments are required: --model" in r.stderr
    r = bench(["--model", MODEL, "--dataset-name", "sonnet"], sim_env(tmp_path, vllm_version="0.33.0"), tmp_path)
    assert r.returncode == 2 and "invalid choice: 'sonnet'" in r.stderr


def test_unreachable_server_is_a_clear_error(tmp_path):
    """Without --model the bench asks /v1/models first: a dead server is a clear error (exit 1)."""
    path = write_verse(tmp_path / "verse.txt")
    port = free_port()
    r = bench(["--base-url", f"http://127.0.0.1:{port}", "--dataset-name", "sonnet",
               "--dataset-path", str(path), "--num-prompts", "2"], sim_env(tmp_path), tmp_path)
    assert r.returncode == 1
    assert f"Error: cannot reach the server at http://127.0.0.1:{port}" in r.stderr
    assert "Traceback" not in r.stderr


def test_unreachable_server_with_model_fails_every_request_and_exits_0(tmp_path):
    """With --model (0.14+) nothing is fetched first: like vLLM 0.32, every request fails, exit 0,
    `completed: 0` in the result file, the tracebacks under "Failed requests during benchmark run"."""
    path = write_verse(tmp_path / "verse.txt")
    port = free_port()
    r = bench(["--base-url", f"http://127.0.0.1:{port}", "--model", MODEL, "--dataset-name", "sonnet",
               "--dataset-path", str(path), "--sonnet-input-len", "128", "--num-prompts", "3", "--save-result",
               "--result-filename", "dead.json"], sim_env(tmp_path), tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    res = parse_result_json(tmp_path / "dead.json")
    assert (res.completed, res.failed) == (0, 3)
    assert "Failed requests during benchmark run detected (capping to 10):" in r.stdout
    assert "Error 0: Traceback (most recent call last):" in r.stdout
    assert "All requests failed" in r.stderr


# --------------------------------------------------------------------------------------------- end to end

class SimServer:
    def __init__(self, tmp: Path, speculative: bool, **sim):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "tui.sim", "serve", MODEL, "--dtype", "bfloat16", "--tensor-parallel-size", "16",
                "--max-num-seqs", "1", "--max-model-len", "768", "--max-num-batched-tokens", "512",
                "--no-enable-prefix-caching", "--host", "127.0.0.1", "--port", str(self.port)]
        if speculative:
            argv += ["--speculative-config", SPEC_CONFIG]
        self.log = open(tmp / f"serve-{'eagle3' if speculative else 'baseline'}-{self.port}.log", "wb")
        self.proc = subprocess.Popen(argv, env=sim_env(tmp, **sim), cwd=tmp, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait_ready(self, limit_s: float = 30.0) -> None:
        deadline = time.monotonic() + limit_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sim server exited with {self.proc.returncode}: "
                                   + Path(self.log.name).read_text(errors="replace")[-2000:])
            try:
                if httpx.get(self.url + "/health", timeout=1.0, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("sim server did not become ready")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sim-servers")
    started = [SimServer(tmp, False), SimServer(tmp, True)]
    try:
        for s in started:
            s.wait_ready()
        yield {"baseline": started[0], "eagle3": started[1]}
    finally:
        for s in started:
            s.stop()


HEADER_KEYS = ["date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts"]
RESULT_KEYS = ["request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
               "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
               "output_throughput", "total_token_throughput", "latencies", "queue_times",
               "max_output_tokens_per_s", "max_concurrent_requests", "rtfx"]
SPEC_KEYS = ["spec_decode_acceptance_rate", "spec_decode_acceptance_length", "spec_decode_num_drafts",
             "spec_decode_draft_tokens", "spec_decode_accepted_tokens", "spec_decode_per_position_acceptance_rates"]


def metric_keys(metrics: list[str], pcts: list[str]) -> list[str]:
    return [f"{part}_{m}_ms" for m in metrics for part in ["mean", "median", "std"] + [f"p{p}" for p in pcts]]


def tutorial_args(url: str, dataset: Path, result: str) -> list[str]:
    return ["--base-url", url, "--model", MODEL, "--dataset-name", "sonnet", "--dataset-path", str(dataset),
            "--sonnet-input-len", "128", "--sonnet-output-len", "16", "--num-prompts", "4",
            "--max-concurrency", "1", "--save-result", "--result-filename", result]


def check_run(r: subprocess.CompletedProcess, result_file: Path, speculative: bool) -> tuple[dict, dict]:
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.splitlines()
    assert out[0].startswith("Namespace(")
    seq = ["Starting initial single prompt test run...", "Skipping endpoint ready check.",
           "Starting main benchmark run...", "Traffic request rate: inf", "Burstiness factor: 1.0 (Poisson process)",
           "Maximum request concurrency: 1"]
    idx = [out.index(s) for s in seq]
    assert idx == sorted(idx)
    assert out[-1] == "=" * 50
    assert out.index("============ Serving Benchmark Result ============") > idx[-1]
    # tqdm bar on stderr, parseable by our own progress parser.
    parser = TqdmProgressParser()
    parser.feed(r.stderr)
    assert parser.last is not None and (parser.last.n, parser.last.total) == (4, 4)

    raw = result_file.read_text()
    assert "\n" not in raw and not raw.startswith("{\n")  # one line, no indent, no trailing newline
    doc = json.loads(raw)
    pcts = ["50", "90", "99"]
    expected = HEADER_KEYS + RESULT_KEYS + (SPEC_KEYS if speculative else []) + metric_keys(
        ["ttft", "tpot", "itl", "e2el"], pcts)
    assert list(doc) == expected
    assert doc["completed"] == 4 and doc["failed"] == 0 and doc["num_prompts"] == 4
    assert doc["request_rate"] == "inf" and doc["max_concurrency"] == 1 and doc["model_id"] == MODEL
    assert doc["total_output_tokens"] == 4 * 16  # --ignore-eos
    assert len(doc["latencies"]) == 4 and len(doc["queue_times"]) == 4
    assert doc["queue_times"][0] < doc["queue_times"][-1]  # concurrency 1: later requests wait

    res = parse_result_json(result_file)
    blocks = parse_stdout_blocks(r.stdout)
    s = blocks["serving"]
    assert s["Successful requests"] == doc["completed"] and s["Failed requests"] == 0
    assert s["Total input tokens"] == doc["total_input_tokens"]
    assert s["Total generated tokens"] == doc["total_output_tokens"]
    for key, label in (("duration", "Benchmark duration (s)"), ("request_throughput", "Request throughput (req/s)"),
                       ("output_throughput", "Output token throughput (tok/s)"),
                       ("total_token_throughput", "Total token throughput (tok/s)"),
                       ("max_output_tokens_per_s", "Peak output token throughput (tok/s)"),
                       ("max_concurrent_requests", "Peak concurrent requests")):
        assert s[label] == round(doc[key], 2), label
    for m, short in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL")):
        assert s[f"Mean {short} (ms)"] == round(doc[f"mean_{m}_ms"], 2)
        assert s[f"Median {short} (ms)"] == round(doc[f"median_{m}_ms"], 2)
        for p in pcts:
            assert s[f"P{p} {short} (ms)"] == round(doc[f"p{p}_{m}_ms"], 2)
    # vLLM's definitions: E2EL = TTFT + (output_len - 1) * TPOT per request.
    assert res.e2el.mean == pytest.approx(res.ttft.mean + 15 * res.tpot.mean, rel=1e-6)
    assert statistics.median(doc["latencies"]) * 1000 == pytest.approx(res.e2el.median)
    assert res.completed == 4 and res.failed == 0
    if speculative:
        sp = blocks["spec"]
        assert sp is not None and res.spec is not None
        assert sp["Acceptance rate (%)"] == round(doc["spec_decode_acceptance_rate"], 2)
        assert sp["Acceptance length"] == round(doc["spec_decode_acceptance_length"], 2)
        assert sp["Drafts"] == doc["spec_decode_num_drafts"]
        assert sp["Draft tokens"] == doc["spec_decode_draft_tokens"]
        assert sp["Accepted tokens"] == doc["spec_decode_accepted_tokens"]
        assert blocks["per_position"] == [round(p * 100, 2) for p in doc["spec_decode_per_position_acceptance_rates"]]
        assert "Speculative Decoding" in r.stdout
    else:
        assert blocks["spec"] is None and "Speculative Decoding" not in r.stdout
        assert res.spec is None
    return doc, blocks


def _scrape_counters(url: str) -> mx.SpecCounters | None:
    return mx.parse_spec_counters(asyncio.run(mx.scrape(url)))


def test_e2e_baseline(servers, tmp_path):
    srv = servers["baseline"]
    dataset = write_verse(tmp_path / "verse.txt")
    assert _scrape_counters(srv.url) is None  # no spec counters on a baseline server
    args = tutorial_args(srv.url, dataset, str(tmp_path / "x.json")) + [
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--temperature", "0", "--ignore-eos"]
    r = bench(args, sim_env(tmp_path), tmp_path)
    check_run(r, tmp_path / "x.json", speculative=False)
    assert "WARNING: vllm bench serve no longer sets temperature==0" not in r.stdout


def test_e2e_eagle3_and_metrics_delta_agrees(servers, tmp_path):
    srv = servers["eagle3"]
    dataset = write_verse(tmp_path / "verse.txt")
    before = _scrape_counters(srv.url)
    assert before is not None
    args = tutorial_args(srv.url, dataset, "x.json") + [
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--temperature", "0", "--ignore-eos"]
    r = bench(args, sim_env(tmp_path), tmp_path)  # relative --result-filename: the CWD
    doc, blocks = check_run(r, tmp_path / "x.json", speculative=True)
    ours = mx.spec_delta(before, _scrape_counters(srv.url))
    assert ours is not None
    assert ours.num_drafts == doc["spec_decode_num_drafts"]
    assert ours.draft_tokens == doc["spec_decode_draft_tokens"]
    assert ours.accepted_tokens == doc["spec_decode_accepted_tokens"]
    assert ours.acceptance_rate == pytest.approx(doc["spec_decode_acceptance_rate"])
    assert ours.acceptance_length == pytest.approx(doc["spec_decode_acceptance_length"])
    assert ours.per_position == pytest.approx([p * 100 for p in doc["spec_decode_per_position_acceptance_rates"]])
    assert ours.acceptance_rate == pytest.approx(blocks["spec"]["Acceptance rate (%)"], abs=0.006)
    # k = 1: one draft token per draft, acceptance length = 1 + rate.
    assert ours.draft_tokens == ours.num_drafts
    assert ours.acceptance_length == pytest.approx(1 + ours.acceptance_rate / 100)


def test_e2e_model_from_server_append_metadata_and_default_name(servers, tmp_path):
    srv = servers["eagle3"]
    dataset = write_verse(tmp_path / "verse.txt")
    common = ["--base-url", srv.url, "--dataset-name", "sonnet", "--dataset-path", str(dataset),
              "--sonnet-input-len", "128", "--sonnet-output-len", "8", "--num-prompts", "2",
              "--max-concurrency", "2", "--seed", "3", "--disable-tqdm"]
    for _ in range(2):
        r = bench(common + ["--append-result", "--result-dir", "out", "--result-filename", "runs.json",
                            "--label", "eagle3", "--metadata", "run=7", "profile=demo"], sim_env(tmp_path), tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "WARNING: vllm bench serve no longer sets temperature==0" in r.stdout
        # --disable-tqdm: no progress bar; the default release (0.29) prints SonnetDataset's DeprecationWarning
        rest = [ln for ln in r.stderr.splitlines() if ln.strip() and "SonnetDataset" not in ln]
        assert rest == [], r.stderr
    text = (tmp_path / "out" / "runs.json").read_text()
    lines = text.split("\n")
    assert len(lines) == 2
    docs = [json.loads(x) for x in lines]
    for d in docs:
        assert list(d)[:12] == HEADER_KEYS + ["run", "profile", "request_rate", "burstiness", "max_concurrency"]
        assert d["model_id"] == MODEL and d["label"] == "eagle3" and d["run"] == "7"
        assert d["max_concurrency"] == 2 and d["completed"] == 2
    last = parse_result_json(tmp_path / "out" / "runs.json")
    assert last.raw == docs[1]

    r = bench(common + ["--model", MODEL, "--save-result"], sim_env(tmp_path), tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    names = [p.name for p in tmp_path.glob("*.json")]
    assert len(names) == 1
    assert re.fullmatch(r"openai-infqps-concurrency2-gpt-oss-120b-\d{8}-\d{6}\.json", names[0])


def test_e2e_vllm_0_11_shape_against_eagle3(servers, tmp_path):
    """The Neuron plugin's vLLM 0.11: ready check with the first prompt, no Failed line, "Total Token
    throughput", no spec block/keys even against a spec server; the /metrics delta still gives acceptance."""
    srv = servers["eagle3"]
    dataset = write_verse(tmp_path / "verse.txt")
    before = _scrape_counters(srv.url)
    r = bench(tutorial_args(srv.url, dataset, "old.json"), sim_env(tmp_path, vllm_version="0.11.0"), tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.splitlines()
    seq = ["Starting initial single prompt test run...", "Waiting for endpoint to become up in 600 seconds",
           "Initial test run completed. Starting main benchmark run...", "Traffic request rate: inf"]
    idx = [out.index(s) for s in seq]
    assert idx == sorted(idx)
    assert "WARNING: vllm bench serve no longer sets temperature==0" not in r.stdout
    assert "Failed requests:" not in r.stdout and "Speculative Decoding" not in r.stdout
    assert any(line.startswith("Total Token throughput (tok/s):") for line in out)
    doc = json.loads((tmp_path / "old.json").read_text())
    assert list(doc) == HEADER_KEYS + [
        "request_rate", "burstiness", "max_concurrency", "duration", "completed", "total_input_tokens",
        "total_output_tokens", "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
        "max_output_tokens_per_s", "max_concurrent_requests"] + metric_keys(["ttft", "tpot", "itl"], ["99"])
    res = parse_result_json(tmp_path / "old.json")
    assert res.failed_reported is False and res.failed == 0 and res.spec is None
    blocks = parse_stdout_blocks(r.stdout)
    assert blocks["serving"]["Total token throughput (tok/s)"] == round(doc["total_token_throughput"], 2)
    ours = mx.spec_delta(before, _scrape_counters(srv.url))
    assert ours is not None and ours.num_drafts > 0 and 0 < ours.acceptance_rate <= 100


def test_e2e_failed_requests_still_exit_0(servers, tmp_path):
    """A wrong --model: every request gets HTTP 404; vLLM's client records response.reason and exits 0."""
    srv = servers["baseline"]
    dataset = write_verse(tmp_path / "verse.txt")
    args = tutorial_args(srv.url, dataset, "fail.json")
    args[args.index("--model") + 1] = "no/such-model"
    args[args.index("--num-prompts") + 1] = "2"
    r = bench(args, sim_env(tmp_path), tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Failed requests during benchmark run detected (capping to 10):" in r.stdout
    assert "Error 0: Not Found" in r.stdout and "Error 1: Not Found" in r.stdout
    assert "All requests failed" in r.stderr
    res = parse_result_json(tmp_path / "fail.json")
    assert (res.completed, res.failed, res.num_prompts) == (0, 2, 2)
    assert res.ttft.mean == 0.0 and res.output_throughput == 0.0 and res.max_concurrent_requests == 0
    blocks = parse_stdout_blocks(r.stdout)
    assert blocks["serving"]["Failed requests"] == 2 and blocks["serving"]["Successful requests"] == 0


# --------------------------------------------------------------------------------------------- repeats vary

@pytest.fixture(scope="module")
def varied(tmp_path_factory):
    """An EAGLE3 server with the demo's spreads: each prompt its own acceptance, a drifting host speed."""
    srv = SimServer(tmp_path_factory.mktemp("sim-varied"), True, acceptance_spread=0.15, run_spread=0.08)
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


@pytest.mark.parametrize("version", ["0.29.0", "0.31.0", "0.32.0", "0.33.0"])
def test_seed_draws_the_prompts_and_the_acceptance(varied, tmp_path, version):
    """`--seed` (every version the simulator plays; vLLM's default 0) picks the sonnet prompts: two seeds send
    different prompts and measure different acceptance, the same seed twice the same prompts and acceptance
    (greedy decoding is deterministic). On >= 0.32 the sonnet prompts come as a custom JSONL, which the bench
    shuffles with the seed."""
    vt = tuple(int(x) for x in version.split("."))
    env = sim_env(tmp_path, vllm_version=version)
    if vt >= (0, 32):
        rows = sample_sonnet(str(sonnet_path()), 40, 256, 24, 200, seed=0, request_id_prefix="", vt=(0, 31))
        data = tmp_path / "sonnet.custom.jsonl"
        data.write_text("".join(json.dumps({"prompt": r.prompt, "output_tokens": 24}) + "\n" for r in rows))
        ds = ["--dataset-name", "custom", "--dataset-path", str(data), "--custom-output-len", "24"]
    else:
        ds = ["--dataset-name", "sonnet", "--dataset-path", str(sonnet_path()), "--sonnet-input-len", "256",
              "--sonnet-output-len", "24"]
    docs = {}
    for name, seed in (("a", ["--seed", "1"]), ("b", ["--seed", "2"]), ("a2", ["--seed", "1"]), ("dflt", [])):
        args = ["--base-url", varied.url, "--model", MODEL, *ds, "--num-prompts", "6", "--max-concurrency", "1",
                "--temperature", "0", "--ignore-eos", "--disable-tqdm", "--save-result", "--save-detailed",
                "--result-filename", f"{name}.json", *seed]
        r = bench(args, env, tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        docs[name] = json.loads((tmp_path / f"{name}.json").read_text())
        assert docs[name]["completed"] == 6
    a, b, a2, dflt = docs["a"], docs["b"], docs["a2"], docs["dflt"]
    # What the server received and answered: greedy text is a function of the prompt.
    assert a["generated_texts"] == a2["generated_texts"] and a["input_lens"] == a2["input_lens"]
    assert a["generated_texts"] != b["generated_texts"]
    assert dflt["generated_texts"] != a["generated_texts"]
    # Acceptance follows the prompts drawn.
    assert a["spec_decode_acceptance_rate"] == a2["spec_decode_acceptance_rate"]
    assert a["spec_decode_accepted_tokens"] == a2["spec_decode_accepted_tokens"]
    assert a["spec_decode_acceptance_rate"] != b["spec_decode_acceptance_rate"]
