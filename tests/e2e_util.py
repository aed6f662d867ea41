"""Helpers for end-to-end tests: demo-profile variants on free ports, CLI runs, process bookkeeping."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from tui.core.profile.model import load_profile

REPO = Path(__file__).resolve().parents[1]

# Fast but not so fast that asyncio timer granularity distorts the timing model.
FAST_SIM = {
    "simulation.time_scale": 0.1,
    "simulation.token_time_scale": 0.1,
    "simulation.weights_s": 4.0,
    "simulation.draft_s": 1.0,
    "simulation.hlo_s": 1.0,
    "simulation.compile_s": 4.0,
    "simulation.warmup_s": 1.0,
    "benchmark.num_prompts": 10,
    "benchmark.output_len": 64,
    "server.stop_grace_s": 5.0,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def demo_variant(tmp_path: Path, name: str = "variant", **updates: Any) -> Path:
    values = dict(FAST_SIM)
    values["server.port"] = free_port()
    values["name"] = name
    values.update({k.replace("__", "."): v for k, v in updates.items()})
    prof = load_profile("demo").with_values(values)
    path = tmp_path / f"{name}.toml"
    path.write_text(prof.to_toml())
    return path


def child_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # {cache_dir}: simulator compile cache, dataset cache
    env.pop("NEURON_RT_VISIBLE_CORES", None)
    env.pop("VLLM_ENGINE_READY_TIMEOUT_S", None)
    return env


def run_cli(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=child_env(tmp_path), timeout=timeout, stdin=subprocess.DEVNULL)


def load_report(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "report.json").read_text())


def diag_ids(report: dict[str, Any]) -> set[str]:
    return {d["id"] for d in report["diagnostics"]}


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def wait_gone(procs: list[psutil.Process], timeout: float = 30.0) -> list[psutil.Process]:
    """Wait (bounded) until every process has exited; return the ones still alive."""
    deadline = time.monotonic() + timeout
    alive = list(procs)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        if alive:
            time.sleep(0.2)
    return alive


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_for(pred, timeout: float = 60.0, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())
