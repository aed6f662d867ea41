"""Log line rendering for the simulated `vllm serve` (API server and engine-core processes).

Formats (neuron.md §2.1, vllm.md §3.3/§5):
- vLLM:      ``(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:LINE] msg``
- plugin:    ``(EngineCore_DP0 pid=N) (Worker_TPk pid=M) YYYY-mm-dd HH:MM:SS,mmm - INFO - file.py:N - msg``
- NRT:       ``YYYY-Mon-DD HH:MM:SS.ffffff PID:TID ERROR  TDRV:log_dev_mem    msg`` (C library, no prefix)

Prefixes carry ANSI colour only when colour is forced (``FORCE_COLOR`` / ``VLLM_LOGGING_COLOR`` set
to a true value) and ``NO_COLOR`` is not set. Every write is flushed, so lines from the API server
and the engine-core child interleave in the order they were produced.
"""

from __future__ import annotations

import datetime as _dt
import os
import sysconfig
import threading
from typing import Iterable, Mapping, Sequence, TextIO

ANSI_PREFIX = "\x1b[1;36m"
ANSI_RESET = "\x1b[0;0m"
ANSI_RED = "\x1b[91m"
ANSI_END = "\x1b[0m"

_TRUE = ("1", "true", "yes", "on", "always")


def color_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Colour only when forced, never with NO_COLOR (https://no-color.org: any non-empty value)."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR", ""):
        return False
    return (env.get("FORCE_COLOR", "").strip().lower() in _TRUE
            or env.get("VLLM_LOGGING_COLOR", "").strip().lower() in _TRUE)


def process_prefix(name: str, pid: int, color: bool = False) -> str:
    """``(APIServer pid=N) `` (with the trailing space), optionally coloured."""
    tag = f"({name} pid={pid})"
    return f"{ANSI_PREFIX}{tag}{ANSI_RESET} " if color else f"{tag} "


def _now(when: _dt.datetime | None) -> _dt.datetime:
    return when if when is not None else _dt.datetime.now()


def vllm_format(level: str, fileinfo: str, lineno: int, msg: str, when: _dt.datetime | None = None) -> str:
    """vLLM's ``%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s``, datefmt ``%m-%d %H:%M:%S``."""
    return f"{level} {_now(when):%m-%d %H:%M:%S} [{fileinfo}:{lineno}] {msg}"


def plugin_format(level: str, filename: str, lineno: int, msg: str, when: _dt.datetime | None = None) -> str:
    """vllm-neuron's ``%(asctime)s - %(levelname)s - %(filename)s:%(lineno)d - %(message)s``."""
    t = _now(when)
    return f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d} - {level} - {filename}:{lineno} - {msg}"


def nrt_format(level: str, where: str, msg: str, pid: int, tid: int | None = None,
               when: _dt.datetime | None = None) -> str:
    """Neuron runtime (C library) line: ``2025-May-15 20:58:33.897479 224822:224822 ERROR  TDRV:x   msg``."""
    t = _now(when)
    return f"{t:%Y-%b-%d %H:%M:%S}.{t.microsecond:06d} {pid}:{tid if tid is not None else pid} {level:<6} {where:<44} {msg}"


def neuronx_cc_format(level: str, pid: int, module: str, msg: str, when: _dt.datetime | None = None) -> str:
    """neuronx-cc's own stderr/logfile format: ``2026-05-17T10:00:00Z ERROR 42759 [module]: msg``."""
    t = _now(when).astimezone(_dt.timezone.utc)
    return f"{t:%Y-%m-%dT%H:%M:%SZ} {level} {pid} [{module}]: {msg}"


def red_if(text: str, cond: bool, color: bool) -> str:
    return f"{ANSI_RED}{text}{ANSI_END}" if (cond and color) else text


def site_packages() -> str:
    """Where a real install would keep vllm (for realistic traceback paths)."""
    return sysconfig.get_paths().get("purelib", "site-packages")


def traceback_lines(frames: Sequence[tuple[str, int, str, str]], exc: str,
                    chained_from: Sequence[str] | None = None) -> list[str]:
    """A Python-style traceback. frames: (path relative to site-packages, "stdlib/..." or absolute), line, func, code."""
    out: list[str] = []
    if chained_from:
        out += list(chained_from)
        out += ["", "The above exception was the direct cause of the following exception:", ""]
    out.append("Traceback (most recent call last):")
    sp = site_packages()
    stdlib = sysconfig.get_paths().get("stdlib", "lib")
    for path, line, func, code in frames:
        if path.startswith("stdlib/"):
            full = f"{stdlib}/{path[len('stdlib/'):]}"
        elif path.startswith("/"):
            full = path
        else:
            full = f"{sp}/{path}"
        out.append(f'  File "{full}", line {line}, in {func}')
        if code:
            out.append(f"    {code}")
    out.append(exc)
    return out


class ProcessLog:
    """Writes lines for one (simulated) process with its ``(Name pid=N) `` prefix."""

    _lock = threading.Lock()

    def __init__(self, name: str, pid: int, stream: TextIO, color: bool = False):
        self.name = name
        self.pid = pid
        self.stream = stream
        self.color = color
        self.prefix = process_prefix(name, pid, color)

    # -- raw output ----------------------------------------------------------------------------
    def write_lines(self, lines: Iterable[str], prefix: str | None = None, stream: TextIO | None = None) -> None:
        pre = self.prefix if prefix is None else prefix
        text = "".join(f"{pre}{line}\n" for line in lines)
        out = stream or self.stream
        with self._lock:
            out.write(text)
            out.flush()

    def raw(self, text: str, stream: TextIO | None = None) -> None:
        """Every line of text with the process prefix (like vLLM's stdout/stderr wrapper)."""
        self.write_lines(text.split("\n"), stream=stream)

    def unprefixed(self, lines: Iterable[str], stream: TextIO | None = None) -> None:
        """Output that bypasses the Python-level prefix wrapper (the Neuron runtime's C logging)."""
        self.write_lines(lines, prefix="", stream=stream)

    # -- vLLM logger -----------------------------------------------------------------------------
    def log(self, level: str, fileinfo: str, lineno: int, msg: str, stream: TextIO | None = None) -> None:
        first, *rest = msg.split("\n")
        self.write_lines([vllm_format(level, fileinfo, lineno, first), *rest], stream=stream)

    def info(self, fileinfo: str, lineno: int, msg: str) -> None:
        self.log("INFO", fileinfo, lineno, msg)

    def warning(self, fileinfo: str, lineno: int, msg: str) -> None:
        self.log("WARNING", fileinfo, lineno, msg)

    def error(self, fileinfo: str, lineno: int, msg: str) -> None:
        self.log("ERROR", fileinfo, lineno, msg)

    # -- plugin logger (in this process, e.g. platform.py in the API server) ---------------------
    def plugin(self, level: str, filename: str, lineno: int, msg: str) -> None:
        self.write_lines([plugin_format(level, filename, lineno, msg)])


class WorkerGroup:
    """The TP worker processes of one engine core: each line is printed once per rank."""

    def __init__(self, engine: ProcessLog, worker_pids: Sequence[int]):
        self.engine = engine
        self.pids = list(worker_pids)

    def prefix(self, rank: int) -> str:
        return f"{self.engine.prefix}{process_prefix(f'Worker_TP{rank}', self.pids[rank], self.engine.color)}"

    def rank(self, rank: int, level: str, filename: str, lineno: int, msg: str) -> None:
        self.engine.write_lines([plugin_format(level, filename, lineno, msg)], prefix=self.prefix(rank))

    def each(self, level: str, filename: str, lineno: int, msg: str | None = None, *, fmt=None) -> None:
        """Print msg (or fmt(rank)) once per rank, ranks in order."""
        lines = []
        for r in range(len(self.pids)):
            text = fmt(r) if fmt is not None else msg
            lines.append(f"{self.prefix(r)}{plugin_format(level, filename, lineno, text)}")
        self.engine.write_lines(lines, prefix="")

    def vllm_each(self, level: str, fileinfo: str, lineno: int, fmt) -> None:
        """A vLLM-format line from every worker (e.g. parallel_state.py rank assignment)."""
        lines = [f"{self.prefix(r)}{vllm_format(level, fileinfo, lineno, fmt(r))}" for r in range(len(self.pids))]
        self.engine.write_lines(lines, prefix="")

    def info(self, filename: str, lineno: int, msg: str) -> None:
        self.each("INFO", filename, lineno, msg)
