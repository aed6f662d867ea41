"""Step 3 against the real vLLM: a tune run of the bundled `cpu` profile (baseline + EAGLE3 k = 2, two repeats,
sonnet completions and the bundled chat conversations through /v1/chat/completions with the tiny target's chat
template), checked against the files the real bench and server wrote: the matrix's numbers, the chat backend,
per-request spec-decode metrics in the probe (the speculative server only), and the per-prompt lossless check.
Nothing asserts a duration."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from .servers import free_port, port_is_free
from .test_real_run import RUN_TIMEOUT_S, cpu_profile, run_env, vllm_processes


@pytest.fixture(scope="module")
def tune_run(real_vllm, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real-tune")
    port = free_port()
    prof = cpu_profile(tmp, port)
    with prof.open("a") as f:
        f.write('\n[tune]\nnum_speculative_tokens = [2]\nrepeats = 2\nworkloads = ["sonnet", "chat"]\n'
                'probe_prompts = 3\n')
    run_dir = tmp / "run"
    p = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--json",
                        "--run-dir", str(run_dir)], capture_output=True, text=True, cwd=tmp,
                       env=run_env(real_vllm, tmp), timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return {"proc": p, "run_dir": run_dir, "port": port}


def test_real_tune_matrix_follows_the_files(tune_run):
    p, run_dir = tune_run["proc"], tune_run["run_dir"]
    assert "Traceback" not in p.stderr, p.stderr[-6000:]
    rep = json.loads(p.stdout)
    st = {s["id"]: s["status"] for s in rep["steps"]}
    assert list(st) == ["env", "checkpoints", "dataset", "baseline", "eagle3-k2", "results"]
    for s in ("baseline", "eagle3-k2"):
        assert st[s] in ("passed", "warned"), (s, st, p.stderr[-6000:])
    m = rep["matrix"]
    for arm in ("baseline", "eagle3-k2"):
        for wl in ("sonnet", "chat"):
            files = [json.loads((run_dir / f"{arm}.{wl}.r{r}.json").read_text()) for r in (1, 2)]
            for f in files:
                assert f["completed"] == f["num_prompts"] and f["failed"] == 0
            cell = m["cells"][arm][wl]
            assert cell["output_throughput"]["values"] == pytest.approx([f["output_throughput"] for f in files])
            if wl == "chat":  # vLLM's own chat client against the real /v1/chat/completions
                assert all(f["backend"] == "openai-chat" for f in files)
    spec = m["cells"]["eagle3-k2"]["sonnet"]
    # Pooled acceptance equals the token-weighted mean of the bench's own blocks (same /metrics deltas).
    files = [json.loads((run_dir / f"eagle3-k2.sonnet.r{r}.json").read_text()) for r in (1, 2)]
    acc = sum(f["spec_decode_accepted_tokens"] for f in files) / sum(f["spec_decode_draft_tokens"]
                                                                     for f in files) * 100
    assert spec["acceptance_rate"] == pytest.approx(acc, abs=0.05)
    marg = spec["per_position"]["marginal"]
    assert len(marg) == 2 and marg[0] >= marg[1]
    assert spec["al_check"]["consistent"] is True
    assert spec["predicted_al"]["1"] == pytest.approx(1 + marg[0] / 100, abs=1e-3)
    # Speedup: the ratio of the mean throughputs in the files.
    base = [json.loads((run_dir / f"baseline.sonnet.r{r}.json").read_text())["output_throughput"] for r in (1, 2)]
    ratio = statistics.mean(f["output_throughput"] for f in files) / statistics.mean(base)
    assert spec["speedup"]["ratio"] == pytest.approx(ratio, rel=1e-3)


def test_real_probe_per_request_metrics_and_lossless(tune_run):
    run_dir = tune_run["run_dir"]
    rep = json.loads((run_dir / "report.json").read_text())
    for wl, endpoint in (("sonnet", "/v1/completions"), ("chat", "/v1/chat/completions")):
        base = json.loads((run_dir / f"baseline.{wl}.probe.json").read_text())
        arm = json.loads((run_dir / f"eagle3-k2.{wl}.probe.json").read_text())
        assert base["endpoint"] == arm["endpoint"] == endpoint
        assert all(r["error"] is None and r["text"] for r in base["requests"] + arm["requests"])
        assert all(r["spec"] is None for r in base["requests"])  # never on the baseline (vLLM refuses the flag)
        for r in arm["requests"]:  # the real server's metrics.speculative_decoding
            assert r["spec"] is not None and r["spec"]["num_draft_tokens"] > 0
        same = sum(a["text"] == b["text"] for a, b in zip(arm["requests"], base["requests"]))
        cell = rep["matrix"]["cells"]["eagle3-k2"][wl]
        assert cell["lossless"]["identical"] == same and cell["lossless"]["prompts"] == 3
        assert cell["per_request"]["n"] == 3


def test_real_tune_leaves_no_process(tune_run):
    port = tune_run["port"]
    _, alive = psutil.wait_procs(vllm_processes(port), timeout=30)
    assert not alive, [(p.pid, p.name()) for p in alive]
    assert port_is_free(port)
