"""The load sweep's vLLM facts, measured on the real vLLM (CPU) and held against the simulator:

- dynamic speculative decoding (`num_speculative_tokens_per_batch_size`, the schedule a load sweep derives) is
  honoured by the real scheduler: a request alone in the batch drafts the schedule's k for batch size 1, and
  requests sharing the batch draft the k of their batch size (counted by the server's own spec-decode counters),
  so the schedule arm can run on the cpu platform.

(Synthetic rejection sampling on the CPU build, with the tier's test plugin: test_real_synthetic.py.)
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from .servers import Server, free_port, serve_flags, sim_env, sim_serve_argv
from .test_contract import PROMPT, counter, metric_values

REAL_STARTUP_TIMEOUT_S = 900
SIM_STARTUP_TIMEOUT_S = 120
SCHEDULE = [[1, 1, 2], [2, 4, 1]]  # k = 2 alone in the batch, k = 1 from two sequences on


def _flags(models: Path, port: int) -> list[str]:
    flags = serve_flags(str(models / "target"), port, str(models / "draft-eagle3"), 2, eager=True)
    flags[flags.index("--max-num-seqs") + 1] = "4"
    cfg = json.loads(flags[flags.index("--speculative-config") + 1])
    cfg["num_speculative_tokens_per_batch_size"] = SCHEDULE
    flags[flags.index("--speculative-config") + 1] = json.dumps(cfg)
    return flags


@pytest.fixture(scope="module", params=["real"])
def sched_server(request, tmp_path_factory):
    port = free_port()
    if request.param == "real":
        rv = request.getfixturevalue("real_vllm")
        models = request.getfixturevalue("tiny_models")
        argv, env, timeout = [str(rv.vllm), "serve", *_flags(models, port)], rv.env(), REAL_STARTUP_TIMEOUT_S
    else:
        models = tmp_path_factory.mktemp("sim-models")
        for d in ("target", "draft-eagle3"):
            (models / d).mkdir()
        env = sim_env(tmp_path_factory.mktemp("sim-cache"))
        argv, timeout = sim_serve_argv(_flags(models, port)), SIM_STARTUP_TIMEOUT_S
    srv = Server(request.param, "eagle3", argv, env, port, str(models / "target"), 2)
    try:
        srv.ready(timeout)
        yield srv
    finally:
        srv.kill()


def _spec(srv: Server) -> tuple[float, float]:
    vals = metric_values(httpx.get(srv.url + "/metrics", timeout=60).text)
    return (counter(vals, "vllm:spec_decode_num_drafts"), counter(vals, "vllm:spec_decode_num_draft_tokens"))


async def _complete_all(srv: Server, n: int) -> None:
    async with httpx.AsyncClient(timeout=300) as client:
        rs = await asyncio.gather(*(client.post(srv.url + "/v1/completions", json={
            "model": srv.target, "prompt": f"{PROMPT} {i}", "max_tokens": 96, "temperature": 0, "ignore_eos": True})
            for i in range(n)))
    assert all(r.status_code == 200 for r in rs), [r.text[:200] for r in rs if r.status_code != 200]


def test_the_dynamic_schedule_sets_k_by_batch_size(sched_server):
    """Alone in the batch a request drafts the schedule's k = 2 per step; four at once draft k = 1 while two or more
    share the batch (the real scheduler's dense lookup, counted by the server's own spec-decode counters). This is
    what lets a cpu load sweep run its schedule arm. (The simulator plays vllm-neuron, which refuses the key.)"""
    d0, t0 = _spec(sched_server)
    asyncio.run(_complete_all(sched_server, 1))
    d1, t1 = _spec(sched_server)
    assert d1 > d0 and (t1 - t0) == 2 * (d1 - d0), "batch size 1 drafts the schedule's k = 2 per step"
    asyncio.run(_complete_all(sched_server, 4))
    d2, t2 = _spec(sched_server)
    per_step = (t2 - t1) / (d2 - d1)
    assert 1.0 <= per_step < 2.0, f"{per_step} draft tokens per draft: the batched steps must draft k = 1"
