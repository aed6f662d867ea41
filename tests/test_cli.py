"""CLI contract: bad input → one clear paragraph and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 60):
    return subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, env=env, timeout=timeout, stdin=subprocess.DEVNULL)


BAD = [
    (["--profile", "nope"], "not found"),
    (["--profile", "missing/dir/x.toml"], "no such file"),
    (["--demo", "--profile", "gpt-oss-120b-eagle3-trn2"], "--demo means --profile demo"),
    (["--demo", "--steps", "env,bogus"], "unknown step id(s) 'bogus'"),
    (["--demo", "--steps", ","], "--steps is empty"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["--headless"], "--headless needs a profile"),
    (["--show-commands"], "--show-commands needs a profile"),
]


@pytest.mark.parametrize("args,fragment", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_usage_exits_2_without_traceback(args, fragment):
    r = cli(*args)
    assert r.returncode == 2, r.stderr
    assert fragment in r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("specdec-tui: error:")
    assert r.stderr.count("\n") == 1  # one paragraph


def test_bad_profile_file_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[models]\ntarget = "a"\ndraft = "b"\n[server]\ntensor_parallel_size = 0\n')
    r = cli("--profile", str(bad), "--headless")
    assert r.returncode == 2
    assert "server.tensor_parallel_size = 0" in r.stderr and "Traceback" not in r.stderr
    syntax = tmp_path / "syntax.toml"
    syntax.write_text("[models\n")
    r = cli("--profile", str(syntax), "--headless")
    assert r.returncode == 2 and "line 1" in r.stderr


def test_run_dir_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = cli("--demo", "--headless", "--run-dir", str(f))
    assert r.returncode == 2 and "not a directory" in r.stderr


def test_version_and_list_profiles():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("specdec-tui ") and "Textual" in r.stdout
    r = cli("--list-profiles")
    assert r.returncode == 0
    names = [line.split("\t")[0] for line in r.stdout.splitlines()]
    assert "demo [simulated]" in names and "gpt-oss-120b-eagle3-trn2" in names
