"""Helpers for tests/test_bad_inputs*.py: run the CLI (in this process or as a child), snapshot directories,
find leftover processes, and run a command under tests/fsjail.py (real read-only / full file systems, a
loopback-only network) when this machine allows mount namespaces."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil

from e2e_util import REPO, child_env, wait_for
from tui.cli import main

MARK_VAR = "SPECDEC_BADINPUT_MARK"
JAIL = REPO / "tests" / "fsjail.py"


@dataclass
class Result:
    rc: int
    out: str
    err: str
    leftovers: list[str]

    @property
    def both(self) -> str:
        return self.out + self.err


def snapshot(d: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under d (directories as 'dir')."""
    out: dict[str, str] = {}
    if not d.exists():
        return out
    for p in sorted(d.rglob("*")):
        rel = str(p.relative_to(d))
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _marked(mark: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get(MARK_VAR) == mark and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def leftovers_after(mark: str, timeout: float = 20.0) -> list[str]:
    deadline = time.monotonic() + timeout
    alive = _marked(mark)
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = _marked(mark)
    out = []
    for p in alive:
        try:
            out.append(f"{p.pid} {' '.join(p.cmdline())[:200]}")
            p.kill()
        except psutil.Error:
            pass
    return out


def run_cli(tmp_path: Path, *args: str, env_extra: dict[str, str] | None = None, jail: list[str] | None = None,
            timeout: float = 180, cwd: Path | None = None) -> Result:
    """`python -m tui ARGS` as a child (optionally inside fsjail), marked so that leftovers can be found."""
    env = child_env(tmp_path)
    mark = uuid.uuid4().hex
    env[MARK_VAR] = mark
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    argv = [sys.executable, "-m", "tui", *args]
    if jail is not None:
        argv = ["unshare", "-m", "-n", "--propagation", "private", sys.executable, str(JAIL), *jail, "--", *argv]
    r = subprocess.run(argv, capture_output=True, text=True, cwd=cwd or tmp_path, env=env, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    return Result(r.returncode, r.stdout, r.stderr, leftovers_after(mark))


def jail_available() -> str | None:
    """None when mount + network namespaces work here, else why not."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare/mount not installed"
    try:
        r = subprocess.run(["unshare", "-m", "-n", "--propagation", "private", "mount", "-t", "tmpfs", "-o", "size=16k",
                            "tmpfs", "/mnt"], capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    if r.returncode != 0:
        return f"no mount namespace here: {r.stderr.decode(errors='replace').strip()}"
    if shutil.which("ip") is None:
        return "iproute2 (ip) not installed"
    return None


def no_tmp_files(d: Path) -> list[str]:
    return [p.name for p in d.rglob("*.tmp")] if d.exists() else []


# --- in-process CLI runs (fast): exit code, stderr, no traceback, no child left ------------------------------

def _kids() -> set[int]:
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.add(p.pid)
        except psutil.Error:
            pass
    return out


def inproc(capsys, monkeypatch, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = _kids()
    rc = main(list(args))
    out, err = capsys.readouterr()
    assert wait_for(lambda: not (_kids() - before), 20), _kids() - before
    assert "Traceback" not in out + err
    return rc, out, err


def one_paragraph_error(err: str) -> None:
    assert err.startswith("specdec-tui: error:"), err
    assert err.count("\n") == 1, err


# --- a headless run stopped by SIGINT or left to fail on its own --------------------------------------------

def stalled_headless(tmp_path: Path, mark: str, argv: list[str], how: str, ready: Path, ready_s: float,
                     timeout: float, **env_extra: str) -> tuple[int, str]:
    """Run `python -m tui ARGV` as a child marked `mark` (MARK_VAR, for leftovers_after). how == "sigint": once
    `ready` exists, send SIGINT; otherwise let the run end by itself (a timeout it was given). Returns its exit
    status and stderr; the child never outlives the call."""
    env = child_env(tmp_path)
    env.update(env_extra)
    env[MARK_VAR] = mark
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    app = subprocess.Popen([sys.executable, "-m", "tui", *argv], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if how == "sigint":
            assert wait_for(ready.exists, ready_s), f"{ready.name} never appeared"
            time.sleep(0.3)
            app.send_signal(signal.SIGINT)
        err = app.communicate(timeout=timeout)[1]
    finally:
        if app.poll() is None:
            app.kill()
            app.communicate()
    return app.returncode, err
