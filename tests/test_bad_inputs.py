"""Bad inputs, each with one clear answer: profiles, the command line, run directories, file systems, the
network, child processes, signals and secrets.

Every case asserts the exit code, a message naming the problem, no traceback on stdout/stderr, the run
directory unchanged where it must be, and no process left behind. Most cases load a profile, print the
commands or run the fast `env` step (in this process or as a child); a few run the simulator.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bad_inputs_util import (
    MARK_VAR,
    jail_available,
    leftovers_after,
    no_tmp_files,
    run_cli,
    snapshot,
)
from e2e_util import REPO, child_env, demo_variant, free_port, wait_for
from tui.cli import main
from tui.core import secrets
from tui.core.run import reuse
from tui.core.store import rundir

FIXTURES = REPO / "tests" / "fixtures"
JAIL_WHY = jail_available()
needs_jail = pytest.mark.skipif(JAIL_WHY is not None, reason=f"real read-only/full file systems need it: {JAIL_WHY}")


# ---------------------------------------------------------------------------------------------------------
# In-process CLI runs (fast): exit code, stderr, no traceback, nothing written, no child left
# ---------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------
# 1. Profiles (values checked for what they become: JSON, argv, environment; encodings)
# ---------------------------------------------------------------------------------------------------------

D = 'extends = "demo"\nname = "bad"\n'

PROFILE_CASES: list[tuple[str, str | bytes, str]] = [
    ("date-in-hf-overrides", D + "[server.hf_overrides]\nwhen = 1979-05-27\n",
     "server.hf_overrides.when = 1979-05-27 is not valid: it is a TOML date"),
    ("offset-datetime-nested", D + "[server.hf_overrides.rope]\nat = 1979-05-27T07:32:00Z\n",
     "server.hf_overrides.rope.at = 1979-05-27T07:32:00+00:00 is not valid: it is a TOML date-time"),
    ("local-datetime", D + "[server.hf_overrides]\nat = 1979-05-27T07:32:00\n", "server.hf_overrides.at"),
    ("time", D + "[server.hf_overrides]\nt = 07:32:00\n", "server.hf_overrides.t = 07:32:00 is not valid: it is a TOML time"),
    ("date-in-list", D + "[server.hf_overrides]\nxs = [1, 1979-05-27]\n", "server.hf_overrides.xs[1]"),
    ("date-in-additional-config", D + "[server.additional_config]\nwhen = 1979-05-27\n",
     "server.additional_config.when = 1979-05-27"),
    ("date-in-neuron-config", D + "[server.additional_config.neuron_config]\nbuilt = 2024-01-01\n",
     "server.additional_config.neuron_config.built"),
    ("date-in-array-of-tables", D + "[[server.hf_overrides.layers]]\nat = 2024-01-01\n",
     "server.hf_overrides.layers[0].at"),
    ("nan-in-hf-overrides", D + "[server.hf_overrides]\nx = nan\n", "server.hf_overrides.x = nan is not valid"),
    ("inf-in-additional-config", D + "[server.additional_config]\nx = inf\n", "server.additional_config.x = inf"),
    ("minus-inf-in-list", D + "[server.hf_overrides]\nxs = [1.0, -inf]\n", "server.hf_overrides.xs[1] = -inf"),
    ("nan-timeout", D + "[server]\nstartup_timeout_s = nan\n", "server.startup_timeout_s = nan"),
    ("inf-bench-timeout", D + "[benchmark]\ntimeout_s = inf\n", "benchmark.timeout_s = inf"),
    ("nul-in-target", D + '[models]\ntarget = "a\\u0000b"\n', "models.target = 'a\\x00b' is not valid: it contains a NUL"),
    ("nul-in-command", D + '[server]\ncommand = ["vllm", "x\\u0000"]\n', "server.command[1]"),
    ("nul-in-env-value", D + '[server.env]\nFOO = "a\\u0000"\n', "server.env.FOO"),
    ("nul-in-secret-env-value", D + '[server.env]\nHF_TOKEN = "hf_\\u0000abcdefgh"\n', "server.env.HF_TOKEN = '***'"),
    ("nul-in-env-name", D + '[server.env]\n"A\\u0000B" = "x"\n', "a key in server.env contains a NUL"),
    ("equals-in-env-name", D + '[server.env]\n"A=B" = "x"\n', "server.env has a variable named 'A=B'"),
    ("empty-env-name", D + '[server.env]\n"" = "x"\n', "server.env has a variable named ''"),
    ("nul-in-hf-overrides-value", D + '[server.hf_overrides]\nx = "\\u0000"\n', "server.hf_overrides.x"),
    ("nul-in-hf-overrides-key", D + '[server.hf_overrides]\n"k\\u0000" = 1\n', "a key in server.hf_overrides contains a NUL"),
    ("nul-in-smoke-prompt", D + '[smoke]\nprompt = "1 2 3\\u0000"\n', "smoke.prompt"),
    ("nul-in-name", 'extends = "demo"\nname = "x\\u0000"\n', "name = 'x\\x00'"),
    ("nul-in-dataset-path", D + '[dataset]\npath = "data/a\\u0000b"\n', "dataset.path"),
    ("nul-in-simulation-string", D + '[simulation]\nvllm_version = "0.24\\u0000"\n', "simulation.vllm_version"),
    ("empty-executable", D + '[server]\ncommand = ["", "x"]\n', "server.command[0] = '' is not valid"),
    ("date-as-port", D + "[server]\nport = 1979-05-27\n", "server.port"),
    ("date-as-name", 'extends = "demo"\nname = 1979-05-27\n', "name = "),
    ("date-in-simulation", D + "[simulation]\ncompile_s = 1979-05-27\n", "simulation.compile_s"),
    ("latin-1-byte", b'extends = "demo"\nname = "caf\xe9"\n', "is not UTF-8 text (byte 0xe9 at offset 28)"),
    ("utf-16", 'extends = "demo"\n'.encode("utf-16"), "is not UTF-8 text (byte 0xff at offset 0) (it looks like UTF-16)"),
    ("truncated-utf-8", b'extends = "demo"\nname = "\xe2\x82', "is not UTF-8 text (byte 0xe2 at offset 25)"),
    ("binary", b"\x89PNG\r\n\x1a\n\x00\x00", "is not UTF-8 text (byte 0x89 at offset 0)"),
    ("empty-file", b"", "required key 'models.target' is missing"),
    ("syntax-error", "[models\n", "TOML syntax error"),
    ("unknown-key", D + "[server]\nprot = 1\n", "unknown key 'server.prot'"),
    ("wrong-type", D + '[server]\nport = "8000"\n', "server.port = '8000' is not valid"),
    ("out-of-range", D + "[server]\nport = 99999\n", "server.port = 99999 is not valid"),
    ("bool-for-int", D + "[server]\ntensor_parallel_size = true\n", "server.tensor_parallel_size = true"),
    ("extends-missing", 'extends = "no-such-base"\n', "extends = 'no-such-base' cannot be loaded"),
    ("extends-self", 'extends = "p.toml"\n', "forms a cycle"),
    ("bad-table-type", D + 'server = 3\n', "'server' must be a table"),
]


@pytest.mark.parametrize("text,fragment", [c[1:] for c in PROFILE_CASES], ids=[c[0] for c in PROFILE_CASES])
def test_bad_profile_values(capsys, monkeypatch, tmp_path, text, fragment):
    prof = tmp_path / "p.toml"
    if isinstance(text, bytes):
        prof.write_bytes(text)
    else:
        prof.write_text(text, encoding="utf-8")
    before = snapshot(tmp_path)
    for args in (("--profile", str(prof), "--show-commands"),
                 ("--profile", str(prof), "--headless", "--steps", "env")):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
        assert rc == 2, err
        one_paragraph_error(err)
        assert fragment in err, err
        assert out == ""
        assert snapshot(tmp_path) == before  # nothing written: no run directory


def test_base_profile_not_utf8_names_the_base(capsys, monkeypatch, tmp_path):
    base = tmp_path / "base.toml"
    base.write_bytes(b'extends = "demo"\n# caf\xe9\n')
    child = tmp_path / "child.toml"
    child.write_text('extends = "base.toml"\n')
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(child), "--show-commands")
    assert rc == 2 and f"profile {base} is not UTF-8 text (byte 0xe9 at offset 22)" in err


def test_profile_that_is_a_directory(capsys, monkeypatch, tmp_path):
    (tmp_path / "dir.toml").mkdir()
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(tmp_path / "dir.toml"), "--show-commands")
    assert rc == 2 and "no such file" in err


def test_utf8_bom_is_accepted(capsys, monkeypatch, tmp_path):
    prof = tmp_path / "bom.toml"
    prof.write_bytes(b"\xef\xbb\xbf" + D.encode())
    rc, out, _ = inproc(capsys, monkeypatch, tmp_path, "--profile", str(prof), "--show-commands")
    assert rc == 0 and ("tui.sim" in out or "vllm" in out)


# ---------------------------------------------------------------------------------------------------------
# 2. The command line
# ---------------------------------------------------------------------------------------------------------

CLI_CASES = [
    ("steps-empty", ["--demo", "--headless", "--steps", ""], "--steps is empty"),
    ("steps-equals-empty", ["--demo", "--headless", "--steps="], "--steps is empty"),
    ("steps-blank", ["--demo", "--headless", "--steps", "  "], "--steps is empty"),
    ("steps-commas", ["--demo", "--headless", "--steps", ",,"], "--steps is empty"),
    ("steps-empty-show", ["--demo", "--show-commands", "--steps", ""], "--steps is empty"),
    ("steps-empty-json", ["--demo", "--headless", "--json", "--steps", ""], "--steps is empty"),
    ("steps-bogus", ["--demo", "--headless", "--steps", "env,,bogus"], "unknown step id(s) 'bogus'"),
    ("steps-case", ["--demo", "--headless", "--steps", "ENV"], "unknown step id(s) 'ENV'"),
    ("profile-empty", ["--profile", "", "--headless"], "--profile is empty"),
    ("profile-missing-value", ["--profile"], "expected one argument"),
    ("run-dir-empty", ["--demo", "--headless", "--run-dir", ""], "--run-dir is empty"),
    ("unknown-option", ["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ("demo-and-profile", ["--demo", "--profile", "gpt-oss-120b-eagle3-trn2"], "--demo means --profile demo"),
    ("headless-no-profile", ["--headless"], "--headless needs a profile"),
    ("show-commands-no-profile", ["--show-commands"], "--show-commands needs a profile"),
    ("profile-not-found", ["--profile", "no-such-profile", "--headless"], "not found"),
]


@pytest.mark.parametrize("args,fragment", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_bad_command_lines(capsys, monkeypatch, tmp_path, args, fragment):
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
    assert rc == 2, err
    one_paragraph_error(err)
    assert fragment in err
    assert not (tmp_path / "specdec-runs").exists()  # an empty --steps runs nothing, rewrites nothing


def test_run_dir_is_a_file_or_below_one(capsys, monkeypatch, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    for rd, fragment in ((f, "exists and is not a directory"), (f / "sub", "cannot create the run directory")):
        rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(rd))
        assert rc == 2 and fragment in err, err
        one_paragraph_error(err)
    assert f.read_text() == "x"


def test_empty_steps_does_not_touch_a_saved_run(capsys, monkeypatch, tmp_path):
    run = tmp_path / "run"
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(run))
    assert rc == 0, err
    before = snapshot(run)
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--demo", "--headless", "--steps", "", "--run-dir", str(run))
    assert rc == 2 and "--steps is empty" in err
    assert snapshot(run) == before


# ---------------------------------------------------------------------------------------------------------
# 3. Reused run directories: damaged, foreign, in use, left by a killed app
# ---------------------------------------------------------------------------------------------------------


def _good_state(**over) -> dict:
    st = {"steps": {"env": {"status": "passed", "seconds": 1.0, "summary": "ok", "facts": {}}}, "profile": "demo"}
    st.update(over)
    return st


STATE_CASES: list[tuple[str, bytes | str | dict, str]] = [
    ("empty", b"", "state.json is damaged (truncated?): it is empty"),
    ("truncated", json.dumps(_good_state())[:25], "state.json is damaged (truncated?): it is not valid JSON"),
    ("list", [1, 2], "it holds list instead of an object"),
    ("steps-not-object", {"profile": "demo", "steps": []}, '"steps" is missing or not an object'),
    ("no-steps", {"profile": "demo"}, '"steps" is missing or not an object'),
    ("unknown-step", _good_state(steps={"bogus": {"status": "passed"}}), "unknown step id 'bogus'"),
    ("bad-status", _good_state(steps={"env": {"status": "done"}}), "steps.env.status = 'done' is not one of"),
    ("facts-not-object", _good_state(steps={"env": {"status": "passed", "facts": [1]}}), "steps.env.facts is not an object"),
    ("seconds-text", _good_state(steps={"env": {"status": "passed", "seconds": "1s"}}), "steps.env.seconds is not a number"),
    ("step-not-object", _good_state(steps={"env": "passed"}), "steps.env is not an object"),
    ("no-profile", {"steps": {}}, 'it has no profile name ("profile")'),
    ("owner-not-object", _good_state(owner=12), '"owner" is not an object with a pid'),
    ("requested-not-list", _good_state(requested_steps="env"), '"requested_steps" is not a list'),
    ("not-utf8", b'{"profile": "d\xe9mo", "steps": {}}', "state.json is damaged: it is not UTF-8 text (byte 0xe9 at offset 14)"),
    ("foreign-profile", _good_state(profile="someone-else"), "belongs to profile 'someone-else', not 'demo'"),
    ("in-use", "OWNER_ALIVE", "is in use by another specdec-tui (pid"),
]


@pytest.mark.parametrize("content,fragment", [c[1:] for c in STATE_CASES], ids=[c[0] for c in STATE_CASES])
def test_reused_run_dir_refused_and_left_as_it_is(capsys, monkeypatch, tmp_path, content, fragment):
    run = tmp_path / "run"
    run.mkdir()
    owner = None
    if content == "OWNER_ALIVE":  # another live process owns it
        owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        assert wait_for(lambda: psutil.pid_exists(owner.pid), 10)
        content = _good_state(owner={"pid": owner.pid, "started": psutil.Process(owner.pid).create_time(),
                                     "host": socket.gethostname()}, steps={"baseline": {"status": "running"}})
    if isinstance(content, (dict, list)):
        content = json.dumps(content)
    if isinstance(content, str):
        content = content.encode()
    (run / "state.json").write_bytes(content)
    (run / "baseline.json").write_bytes((FIXTURES / "bench" / "v0_31_baseline.json").read_bytes())
    before = snapshot(run)
    try:
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir",
                              str(run))
    finally:
        if owner is not None:
            owner.kill()
            owner.wait()
    assert rc == 2, err
    one_paragraph_error(err)
    assert fragment in err, err
    assert "left as it is" in err
    assert snapshot(run) == before


def test_state_json_that_is_a_directory(capsys, monkeypatch, tmp_path):
    run = tmp_path / "run"
    (run / "state.json").mkdir(parents=True)
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(run))
    assert rc == 2 and "state.json is not a regular file" in err


def test_engine_refuses_a_damaged_state_without_the_cli_check(tmp_path):
    """The wizard builds the Engine itself: it too refuses a damaged state and writes nothing."""
    import asyncio

    from tui.core.run.engine import Engine
    from tui.core.profile.model import load_profile

    run = tmp_path / "run"
    run.mkdir()
    (run / "state.json").write_text('{"steps": ')
    before = snapshot(run)
    events = []
    eng = Engine(load_profile("demo"), run, events.append, steps=["env"])
    code = asyncio.run(eng.run_all())
    assert code == 2 and snapshot(run) == before
    assert any("state.json is damaged" in getattr(e, "text", "") for e in events)


def test_renamed_copy_of_the_profile_may_continue(capsys, monkeypatch, tmp_path):
    run = tmp_path / "run"
    first = demo_variant(tmp_path, "first")
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(first), "--headless", "--steps", "env",
                        "--run-dir", str(run))
    assert rc == 0, err
    renamed = tmp_path / "renamed.toml"
    renamed.write_text(first.read_text().replace('name = "first"', 'name = "renamed"'))
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(renamed), "--headless", "--steps", "env",
                        "--run-dir", str(run))
    assert rc == 0, err
    other = demo_variant(tmp_path, "other", benchmark__num_prompts=3)
    before = snapshot(run)
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(other), "--headless", "--steps", "env",
                        "--run-dir", str(run))
    assert rc == 2 and "belongs to profile 'renamed', not 'other'" in err
    assert snapshot(run) == before


def test_step_left_running_by_a_killed_app_is_interrupted_and_continues(capsys, monkeypatch, tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(gone.pid).create_time() if psutil.pid_exists(gone.pid) else time.time() - 5
    gone.wait()
    run = tmp_path / "run"
    run.mkdir()
    state = _good_state(owner={"pid": gone.pid, "started": started, "host": socket.gethostname()})
    state["steps"]["baseline"] = {"status": "running", "started": time.time()}
    (run / "state.json").write_text(json.dumps(state))
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(run))
    assert rc == 0, err
    assert "left running by pid" in err and "shown as interrupted" in err and "--steps baseline" in err
    rep = json.loads((run / "report.json").read_text())
    statuses = {s["id"]: s["status"] for s in rep["steps"]}
    assert statuses["baseline"] == "interrupted" and statuses["env"] == "passed"
    saved = json.loads((run / "state.json").read_text())
    assert saved["owner"]["pid"] == os.getpid() and saved["owner"]["ended"]


def test_baseline_results_on_disk_stay_in_the_report(capsys, monkeypatch, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    state = _good_state()
    state["steps"]["baseline"] = {"status": "passed", "seconds": 10.0, "summary": "ok", "facts": {}}
    (run / "state.json").write_text(json.dumps(state))
    shutil.copy(FIXTURES / "bench" / "v0_31_baseline.json", run / "baseline.json")
    raw = json.loads((run / "baseline.json").read_text())
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(run))
    assert rc == 0, err
    rep = json.loads((run / "report.json").read_text())
    assert rep["runs"]["baseline"]["output_throughput"] == pytest.approx(raw["output_throughput"])
    assert (run / "baseline.json").read_text() == (FIXTURES / "bench" / "v0_31_baseline.json").read_text()


def test_profile_name_is_shown_and_names_the_run_dir(capsys, monkeypatch, tmp_path):
    prof = tmp_path / "file-stem.toml"
    prof.write_text('extends = "demo"\nname = "My Run/../x"\n')
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(prof), "--headless", "--steps", "env")
    assert rc == 0, err
    runs = list((tmp_path / "specdec-runs").iterdir())
    assert len(runs) == 1 and runs[0].name.endswith("-My-Run-..-x")
    assert "My Run/../x" in err  # the header
    assert json.loads((runs[0] / "report.json").read_text())["profile"] == "My Run/../x"


# ---------------------------------------------------------------------------------------------------------
# 4. File systems: read-only, full, no permission (real mounts in a private namespace; faults in-process)
# ---------------------------------------------------------------------------------------------------------


@needs_jail
def test_read_only_run_dir_fresh(tmp_path):
    run = tmp_path / "ro"
    run.mkdir()
    r = run_cli(tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(run), jail=["--ro", str(run)])
    assert r.rc == 2, r.err
    assert "read-only (EROFS)" in r.err and f"cannot write {run}/state.json" in r.err
    assert r.err.count("cannot write") == 1 and "Traceback" not in r.both
    assert list(run.iterdir()) == [] and not r.leftovers


@needs_jail
def test_read_only_run_dir_keeps_the_saved_run(tmp_path):
    run = tmp_path / "run"
    r = run_cli(tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(run))
    assert r.rc == 0, r.err
    before = snapshot(run)
    r = run_cli(tmp_path, "--demo", "--headless", "--steps", "env,checkpoints", "--run-dir", str(run), "--json",
                jail=["--ro", str(run)])
    assert r.rc == 2, r.err
    assert "read-only (EROFS)" in r.err and "Traceback" not in r.both
    assert json.loads(r.out)["error"].startswith("cannot write")
    assert snapshot(run) == before and not r.leftovers


@needs_jail
def test_read_only_parent(tmp_path):
    parent = tmp_path / "parent"
    parent.mkdir()
    r = run_cli(tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(parent / "run"),
                jail=["--ro", str(parent)])
    assert r.rc == 2 and "cannot create the run directory" in r.err and "read-only (EROFS)" in r.err
    assert "Traceback" not in r.both and list(parent.iterdir()) == []


@needs_jail
def test_full_disk_fresh_run_dir(tmp_path):
    mnt = tmp_path / "mnt"
    manifest = tmp_path / "manifest.json"
    r = run_cli(tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(mnt / "run"),
                jail=["--tmpfs", f"{mnt}:64k", "--fill", str(mnt), "--manifest", str(manifest)])
    assert r.rc == 2, r.err
    assert "full (ENOSPC)" in r.err and r.err.count("cannot write") == 1 and "Traceback" not in r.both
    files = json.loads(manifest.read_text())[str(mnt)]
    assert not [f for f in files if f.endswith(".tmp")], files
    assert not r.leftovers


@needs_jail
def test_full_disk_keeps_the_saved_state(tmp_path):
    seed = tmp_path / "seed"
    r = run_cli(tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(seed))
    assert r.rc == 0, r.err
    before = snapshot(seed)
    mnt = tmp_path / "mnt"
    manifest = tmp_path / "manifest.json"
    r = run_cli(tmp_path, "--demo", "--headless", "--steps", "env", "--run-dir", str(mnt),
                jail=["--tmpfs", f"{mnt}:256k", "--seed", f"{seed}:{mnt}", "--fill", str(mnt), "--manifest", str(manifest)])
    assert r.rc == 2, r.err
    assert "full (ENOSPC)" in r.err and "Traceback" not in r.both
    after = json.loads(manifest.read_text())[str(mnt)]
    assert after == {k: v for k, v in before.items() if v != "dir"}  # every saved file, byte for byte; no .tmp
    assert not r.leftovers


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0, reason="needs root and setpriv")
def test_permission_denied_run_dir(tmp_path):
    # chmod 0555 alone does not stop root: the CLI runs without CAP_DAC_OVERRIDE (setpriv), so it does.
    run = tmp_path / "run"
    run.mkdir()
    run.chmod(0o555)
    env = child_env(tmp_path)
    env[MARK_VAR] = mark = f"perm-{os.getpid()}-{time.monotonic_ns()}"
    drop = "-dac_override,-dac_read_search"
    try:
        r = subprocess.run(["setpriv", "--bounding-set", drop, "--inh-caps", drop, sys.executable, "-m", "tui",
                            "--demo", "--headless", "--steps", "env", "--run-dir", str(run)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    finally:
        run.chmod(0o755)
    assert r.returncode == 2, r.stderr
    assert "permission denied (EACCES)" in r.stderr and "cannot write" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert list(run.iterdir()) == [] and not leftovers_after(mark)


def _fail_writes(monkeypatch, err: int, after: int = 0):
    """Make rundir's writes fail with `err` after `after` successful ones (the disk fills up)."""
    real = rundir._write_fd
    count = {"n": 0}

    def fake(fd, data):
        count["n"] += 1
        if count["n"] > after:
            os.close(fd)
            raise OSError(err, os.strerror(err))
        real(fd, data)

    monkeypatch.setattr(rundir, "_write_fd", fake)
    return count


FAULTS = [
    ("enospc-at-start", errno.ENOSPC, 0, 2, "full (ENOSPC)"),
    ("edquot-at-start", errno.EDQUOT, 0, 2, "quota of this user there is exhausted (EDQUOT)"),
    ("eacces-at-start", errno.EACCES, 0, 2, "permission denied (EACCES)"),
    ("erofs-at-start", errno.EROFS, 0, 2, "read-only (EROFS)"),
    ("enospc-mid-run", errno.ENOSPC, 3, 1, "full (ENOSPC)"),
    ("edquot-mid-run", errno.EDQUOT, 3, 1, "(EDQUOT)"),
]


@pytest.mark.parametrize("err,after,code,fragment", [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_write_faults_give_one_paragraph(capsys, monkeypatch, tmp_path, err, after, code, fragment):
    run = tmp_path / "run"
    _fail_writes(monkeypatch, err, after)
    rc, out, errtext = inproc(capsys, monkeypatch, tmp_path, "--demo", "--headless", "--steps", "env,checkpoints",
                              "--run-dir", str(run))
    assert rc == code, errtext
    assert fragment in errtext and errtext.count("cannot write") == 1, errtext
    assert no_tmp_files(run) == []
    if after:
        state = json.loads((run / "state.json").read_text())  # the last complete state, not a partial one
        assert state["profile"] == "demo"


def test_atomic_write_keeps_the_old_file_on_failure(monkeypatch, tmp_path):
    p = tmp_path / "state.json"
    rundir.atomic_write_json(p, {"a": 1})
    _fail_writes(monkeypatch, errno.ENOSPC)
    with pytest.raises(rundir.RunDirUnwritable) as ei:
        rundir.atomic_write_json(p, {"a": 2})
    assert "cannot write" in str(ei.value) and "--run-dir" in str(ei.value)
    assert json.loads(p.read_text()) == {"a": 1} and no_tmp_files(tmp_path) == []
    monkeypatch.undo()
    with pytest.raises(rundir.RunDirUnwritable):  # nothing more is attempted in that directory
        rundir.atomic_write_json(tmp_path / "other.json", {})
    assert not (tmp_path / "other.json").exists()
    rundir.forget_failure(tmp_path)


def test_append_log_records_a_full_disk_once(tmp_path):
    log = rundir.AppendLog(tmp_path / "x.serve.log")
    seen = []
    rundir._LISTENERS.setdefault(rundir._key(tmp_path), []).append(seen.append)

    class Full:
        def write(self, _t):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            pass

    log._f = Full()
    log.write("a\n")
    log.write("b\n")
    log.flush()
    assert isinstance(log.error, rundir.RunDirUnwritable) and len(seen) == 1
    assert rundir.failure_for(tmp_path) is seen[0]
    rundir.forget_failure(tmp_path)
    rundir._LISTENERS.pop(rundir._key(tmp_path), None)


def test_json_files_are_strict_json(tmp_path):
    rundir.atomic_write_json(tmp_path / "r.json", {"x": float("nan"), "y": [float("inf"), 1.5]})
    assert json.loads((tmp_path / "r.json").read_text(), parse_constant=lambda c: pytest.fail(c)) == \
        {"x": None, "y": [None, 1.5]}


# ---------------------------------------------------------------------------------------------------------
# 5. The network: which one failed (name, address, port); loopback only
# ---------------------------------------------------------------------------------------------------------


@needs_jail
def test_unresolvable_host_says_so(tmp_path):
    prof = demo_variant(tmp_path, "dns", server__host="no-such-host.invalid")
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", "baseline", "--run-dir", str(tmp_path / "r"),
                jail=["--net"])  # a namespace with only lo: the lookup fails without leaving the machine
    assert r.rc == 1, r.err
    assert "server.host 'no-such-host.invalid' does not resolve" in r.err
    assert "in use" not in r.err and "Traceback" not in r.both and not r.leftovers
    assert not (tmp_path / "r" / "baseline.serve.log").exists()  # never launched


@pytest.mark.parametrize("steps,fragment", [("env", "cannot bind: not an address of this machine"),
                                            ("baseline", "server.host '192.0.2.1' is not an address of this machine")],
                         ids=["env", "baseline"])
def test_non_local_address(tmp_path, steps, fragment):
    prof = demo_variant(tmp_path, "nonlocal", server__host="192.0.2.1")  # TEST-NET-1: only bound, never contacted
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", steps, "--run-dir", str(tmp_path / "r"))
    assert r.rc == 1, r.err
    assert fragment in r.err and "already in use" not in r.err
    assert "Traceback" not in r.both and not r.leftovers


@pytest.mark.parametrize("steps", ["env", "baseline"])
def test_port_in_use(tmp_path, steps):
    port = free_port()
    prof = demo_variant(tmp_path, "busy", server__port=port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen(1)
        r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", steps, "--run-dir", str(tmp_path / "r"))
    assert r.rc == 1, r.err
    assert f"127.0.0.1:{port}" in r.err and "in use" in r.err and "does not resolve" not in r.err
    assert "Traceback" not in r.both and not r.leftovers


def test_bind_problem_kinds():
    from tui.core.host.sysinfo import bind_problem

    assert bind_problem("127.0.0.1", 0) is None
    assert bind_problem("192.0.2.1", 0)[0] == "not-local"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        kind, text, _ = bind_problem("127.0.0.1", s.getsockname()[1])
    assert kind == "in-use" and "already in use" in text


# ---------------------------------------------------------------------------------------------------------
# 6. Child processes: missing, not executable, exits at once
# ---------------------------------------------------------------------------------------------------------


def _not_executable(tmp_path: Path) -> str:
    p = tmp_path / "vllm-not-x"
    p.write_text("#!/bin/sh\nexit 0\n")
    p.chmod(0o644)
    return str(p)


CHILD_CASES = [
    ("missing", lambda t: ["no-such-vllm-binary-xyz"], "'no-such-vllm-binary-xyz' not found on PATH"),
    ("not-executable", lambda t: [_not_executable(t)], "is not executable"),
    ("exits-at-once", lambda t: ["{python}", "-c", "import sys; print('bye'); sys.exit(3)"], "server exited with code 3"),
]


@pytest.mark.parametrize("make,fragment", [c[1:] for c in CHILD_CASES], ids=[c[0] for c in CHILD_CASES])
def test_server_command_problems(tmp_path, make, fragment):
    prof = demo_variant(tmp_path, "child", server__command=make(tmp_path))
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", "baseline", "--run-dir", str(run))
    assert r.rc == 1, r.err
    assert fragment in r.err and "Traceback" not in r.both and not r.leftovers
    rep = json.loads((run / "report.json").read_text())
    assert {s["id"]: s["status"] for s in rep["steps"]}["baseline"] == "failed"


# ---------------------------------------------------------------------------------------------------------
# 7. Signals: a killed app's run directory continues; a second signal during cleanup
# ---------------------------------------------------------------------------------------------------------


def _start_slow(tmp_path: Path, run: Path, name: str) -> tuple[subprocess.Popen, str]:
    prof = demo_variant(tmp_path, name, simulation__weights_s=250.0)
    env = child_env(tmp_path)
    mark = f"{name}-{os.getpid()}-{time.monotonic_ns()}"
    env[MARK_VAR] = mark
    app = subprocess.Popen([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--steps", "baseline",
                            "--run-dir", str(run)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    log = run / "baseline.serve.log"
    assert wait_for(lambda: log.exists() and "Loading weights" in log.read_text(errors="replace"), 120)
    return app, str(prof)


def test_sigkilled_app_leaves_an_interrupted_step_that_continues(tmp_path):
    run = tmp_path / "run"
    app, prof = _start_slow(tmp_path, run, "killed")
    mark = None
    try:
        state = json.loads((run / "state.json").read_text())
        assert state["steps"]["baseline"]["status"] == "running" and state["owner"]["pid"] == app.pid
        mark = psutil.Process(app.pid).environ()[MARK_VAR]
        app.kill()
        app.wait(timeout=30)
        assert not leftovers_after(mark, timeout=30)  # the watchdog took the server down
        r = run_cli(tmp_path, "--profile", prof, "--headless", "--steps", "env", "--run-dir", str(run))
        assert r.rc == 0, r.err
        assert "shown as interrupted" in r.err and "Traceback" not in r.both
        rep = json.loads((run / "report.json").read_text())
        assert {s["id"]: s["status"] for s in rep["steps"]}["baseline"] == "interrupted"
    finally:
        if app.poll() is None:
            app.kill()
        app.stderr.close()
        if mark:
            leftovers_after(mark, timeout=1)


def test_second_signal_during_cleanup(tmp_path):
    run = tmp_path / "run"
    app, _ = _start_slow(tmp_path, run, "twice")
    mark = psutil.Process(app.pid).environ()[MARK_VAR]
    try:
        app.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        app.send_signal(signal.SIGTERM)
        assert app.wait(timeout=60) == 130
        err = app.stderr.read().decode(errors="replace")
        assert "Traceback" not in err
        assert not leftovers_after(mark, timeout=30)
        json.loads((run / "state.json").read_text())
    finally:
        if app.poll() is None:
            app.kill()
        app.stderr.close()


# ---------------------------------------------------------------------------------------------------------
# 8. Secrets: redacted on every channel
# ---------------------------------------------------------------------------------------------------------

TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"

SECRET_CASES = [
    ("hf-token-in-server-env", f'[server.env]\nHF_TOKEN = "{TOKEN}"\n', {}, TOKEN, "HF_TOKEN=***"),
    ("api-key-in-server-env", '[server.env]\nMY_API_KEY = "k3y-value-123"\n', {}, "k3y-value-123", "MY_API_KEY=***"),
    ("password-from-process-env", '[models]\ntarget = "pw-in-target-9876"\n', {"DB_PASSWORD": "pw-in-target-9876"},
     "pw-in-target-9876", "serve ***"),
    ("secret-from-process-env", '[dataset]\npath = "data/zz-secret-zz.txt"\n', {"APP_SECRET": "zz-secret-zz"},
     "zz-secret-zz", "/data/***.txt"),  # the path is shown absolute (resolved once, at start)
    ("bare-hf-token", f'[speculative]\nmodel = "{TOKEN}"\n', {}, TOKEN, '"model": "hf_***"'),
]


@pytest.mark.parametrize("extra,env,secret,shown", [c[1:] for c in SECRET_CASES], ids=[c[0] for c in SECRET_CASES])
def test_secrets_never_printed(capsys, monkeypatch, tmp_path, extra, env, secret, shown):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    secrets._REDACTOR._env_at = -1e9  # pick up the environment now
    prof = tmp_path / "sec.toml"
    prof.write_text(D + extra)
    try:
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(prof), "--show-commands")
        assert rc == 0, err
        assert secret not in out + err, [l for l in (out + err).splitlines() if secret in l]
        assert shown in out
    finally:
        secrets._REDACTOR.clear_registered()


def test_not_secret_names_are_kept(capsys, monkeypatch, tmp_path):
    prof = tmp_path / "p.toml"
    prof.write_text(D + '[server.env]\nTOKENIZERS_PARALLELISM = "false"\nHF_TOKEN_PATH = "tokfile"\n')
    rc, out, _ = inproc(capsys, monkeypatch, tmp_path, "--profile", str(prof), "--show-commands")
    assert rc == 0 and "TOKENIZERS_PARALLELISM=false" in out and "HF_TOKEN_PATH=tokfile" in out


def test_token_redacted_on_console_files_and_report(tmp_path):
    from tui.core.profile.model import load_profile

    env = dict(load_profile("demo").server.env, HF_TOKEN=TOKEN, MY_SECRET="s3cr3t-in-env")
    prof = demo_variant(tmp_path, "tok", server__env=env,
                        server__command=["{python}", "-c", f"print('{TOKEN}', 's3cr3t-in-env'); raise SystemExit(3)"])
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--verbose", "--steps", "baseline", "--run-dir", str(run))
    assert r.rc == 1, r.err
    assert TOKEN not in r.both and "s3cr3t-in-env" not in r.both
    assert "HF_TOKEN=***" in r.err  # the console shows the command with the value redacted
    for p in run.rglob("*"):
        if p.is_file():
            body = p.read_text(errors="replace")
            assert TOKEN not in body and "s3cr3t-in-env" not in body, p.name
    assert not r.leftovers


def test_redact_event_covers_every_text_field():
    from tui.core import events as ev

    secrets.add_secrets(["very-secret-value"])
    try:
        e = secrets.redact_event(ev.Command("baseline", "serve", ("x", "very-secret-value"), TOKEN))
        assert tuple(e.argv) == ("x", "***") and e.text == "hf_***"
        d = secrets.redact_event(ev.Diagnosis("s", "x", "error", "t very-secret-value", ("ev " + TOKEN,), "r"))
        assert d.title == "t ***" and d.evidence == ("ev hf_***",)
        line = ev.LogLine("s", "nothing here")
        assert secrets.redact_event(line) is line
    finally:
        secrets._REDACTOR.clear_registered()


# ---------------------------------------------------------------------------------------------------------
# 9. Saved files read back through a schema (compare, --open, continuation, --steps results), run directories
#    reused by a run of another shape, gates a run cannot produce, an interrupted bench (issue 18)
# ---------------------------------------------------------------------------------------------------------


def _closed_run(root: Path, tune: bool) -> Path:
    """A finished run directory (report.json, state.json, profile.toml, logs) as a run writes it, without running."""
    sys.path.insert(0, str(REPO / "tests" / "snapshot_apps"))
    from snapshot_apps import tune as tune_app

    return tune_app.write_closed_run(root / ("tune" if tune else "two"), tune=tune)


def _mutate(path: Path, fn) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    fn(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")


def _set(keys: str, value):
    """A mutation: doc[k1][k2]... = value (list indexes as digits)."""
    def fn(doc):
        parts = keys.split("/")
        cur = doc
        for k in parts[:-1]:
            cur = cur[int(k)] if isinstance(cur, list) else cur[k]
        last = parts[-1]
        if isinstance(cur, list):
            cur[int(last)] = value
        else:
            cur[last] = value
    return fn


REPORT_DAMAGE = [
    ("arm-not-object", True, _set("matrix/arms/1", "x"), "matrix.arms[1] is text 'x', expected an object"),
    ("mean-is-text", True, _set("matrix/cells/eagle3-k1/sonnet/output_throughput/mean", "fast"),
     "matrix.cells.eagle3-k1.sonnet.output_throughput.mean is text 'fast', expected a number"),
    ("interval-one-end", True, _set("matrix/cells/eagle3-k1/sonnet/speedup/ci95", [1.0]),
     "matrix.cells.eagle3-k1.sonnet.speedup.ci95 has 1 items, expected 2"),
    ("recommendation-number", True, _set("matrix/recommendation/sonnet", 3),
     "matrix.recommendation.sonnet is the number 3, expected an object"),
    ("workloads-not-list", True, _set("matrix/workloads", "sonnet"), "matrix.workloads is text 'sonnet', expected a list"),
    ("runs-list", False, _set("runs/baseline", []), "runs.baseline is a list of 0, expected an object"),
    ("throughput-text", False, _set("runs/eagle3/output_throughput", "139"),
     "runs.eagle3.output_throughput is text '139', expected a number"),
    ("settings-text", False, _set("settings", "neuron"), "settings is text 'neuron', expected an object"),
    ("verdict-text-number", False, _set("verdict/text", 5), "verdict.text is the number 5, expected text"),
    ("step-without-id", False, _set("steps/0", {"status": "passed"}), "steps[0].id is missing"),
    ("severity-unknown", False, _set("diagnostics/0/severity", "fatal"),
     "diagnostics[0].severity is text 'fatal', expected one of error, warning, info"),
    ("speedup-text", False, _set("comparison/output_throughput_speedup", "1.2x"),
     "comparison.output_throughput_speedup is text '1.2x', expected a number"),
    ("exit-code-text", False, _set("exit_code", "0"), "exit_code is text '0', expected a whole number"),
    ("odd-key", False, _set("runs/a\nb", 1), "runs['a\\nb'] is the number 1, expected an object"),
]


@pytest.mark.parametrize("tune,mutate,fragment", [c[1:] for c in REPORT_DAMAGE], ids=[c[0] for c in REPORT_DAMAGE])
def test_damaged_report_is_named_by_compare_and_open(capsys, monkeypatch, tmp_path, tune, mutate, fragment):
    good = _closed_run(tmp_path / "good", tune=not tune)
    run = _closed_run(tmp_path, tune)
    _mutate(run / "report.json", mutate)
    before = snapshot(tmp_path)
    for args in (("compare", str(good), str(run)), ("compare", "--json", str(run)), ("compare", "--headless", str(run)),
                 ("--open", str(run))):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
        assert rc == 2, err
        one_paragraph_error(err)
        assert "report.json is damaged: " + fragment in err, err
        assert out == ""
    assert snapshot(tmp_path) == before


STATE_DAMAGE = [
    ("bench-list", False, _set("steps/baseline/facts/bench", []),
     "steps.baseline.facts.bench is a list of 0, expected an object"),
    ("bench-number-text", False, _set("steps/eagle3/facts/bench/output_throughput", "fast"),
     "steps.eagle3.facts.bench.output_throughput is text 'fast', expected a number"),
    ("phases-text", False, _set("steps/baseline/facts/startup/phases", "x"),
     "steps.baseline.facts.startup.phases is text 'x', expected a list"),
    ("repeats-not-list", True, _set("steps/eagle3-k1/facts/repeats", {"sonnet": {}}),
     "steps.eagle3-k1.facts.repeats.sonnet is an object, expected a list"),
    ("smoke-passed-text", True, _set("steps/baseline/facts/smoke/passed", "yes"),
     "steps.baseline.facts.smoke.passed is text 'yes', expected true or false"),
    ("dataset-bytes-text", False, _set("steps/dataset/facts/bytes", "22 kB"),
     "steps.dataset.facts.bytes is text '22 kB', expected a whole number"),
]


@pytest.mark.parametrize("tune,mutate,fragment", [c[1:] for c in STATE_DAMAGE], ids=[c[0] for c in STATE_DAMAGE])
def test_damaged_state_is_named_by_open_continuation_and_results(capsys, monkeypatch, tmp_path, tune, mutate,
                                                                 fragment):
    run = _closed_run(tmp_path, tune)
    _mutate(run / "state.json", mutate)
    before = snapshot(tmp_path)
    prof = str(run / "profile.toml")
    for args in (("--open", str(run)),
                 ("--profile", prof, "--headless", "--steps", "results", "--run-dir", str(run)),
                 ("--profile", prof, "--headless", "--json", "--run-dir", str(run))):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
        assert rc == 2, err
        one_paragraph_error(err)
        assert "state.json is damaged: " + fragment in err, err
    assert snapshot(tmp_path) == before


def test_engine_refuses_damaged_facts_without_the_cli_check(tmp_path):
    """The wizard builds the Engine itself: a state whose facts are damaged is refused there too, untouched."""
    import asyncio

    from tui.core.run.engine import Engine
    from tui.core.profile.model import load_profile

    run = _closed_run(tmp_path, False)
    _mutate(run / "state.json", _set("steps/baseline/facts/bench", "fast"))
    before = snapshot(run)
    events = []
    eng = Engine(load_profile(str(run / "profile.toml")), run, events.append, steps=["results"])
    assert asyncio.run(eng.run_all()) == 2 and snapshot(run) == before
    assert any("steps.baseline.facts.bench is text 'fast'" in getattr(e, "text", "") for e in events)


def test_damaged_result_file_without_recorded_numbers(capsys, monkeypatch, tmp_path):
    """A state from an older specdec-tui: baseline passed without its numbers, which come from baseline.json; a
    baseline.json that is not a bench result is named, not silently dropped."""
    run = _closed_run(tmp_path, False)
    _mutate(run / "state.json", lambda d: d["steps"]["baseline"]["facts"].pop("bench"))
    (run / "baseline.json").write_text(json.dumps({"date": "20260101", "completed": "thirty", "duration": 1.0}))
    before = snapshot(run)
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(run / "profile.toml"), "--headless", "--steps",
                        "results", "--run-dir", str(run))
    assert rc == 2, err
    one_paragraph_error(err)
    assert "the result file baseline.json is damaged" in err and "key 'completed' is not a number: 'thirty'" in err, err
    assert snapshot(run) == before


SHAPE_CASES = [
    ("two-arm-by-tune", False, 'extends = "tune-demo"\nname = "demo"\n',
     "holds a two-arm run (baseline vs eagle3), and profile 'demo' is a tune run"),
    ("tune-by-two-arm", True, 'extends = "demo"\nname = "tune-demo"\n',
     "holds a tune run, and profile 'tune-demo' is a two-arm run (baseline vs eagle3)"),
    ("tune-by-fewer-arms", True, 'extends = "tune-demo"\nname = "tune-demo"\n[tune]\nnum_speculative_tokens = [1, 2]\n',
     "holds step(s) eagle3-k3 that profile 'tune-demo' does not have"),
    ("tune-by-other-drafts", True,
     'extends = "tune-demo"\nname = "tune-demo"\n[tune.drafts.a]\nmodel = "RedHatAI/gpt-oss-120b-speculator.eagle3"\n'
     '[tune.drafts.b]\nmodel = "RedHatAI/gpt-oss-120b-speculator.eagle3"\n',
     "holds step(s) eagle3-k1, eagle3-k2, eagle3-k3 that profile 'tune-demo' does not have"),
]


@pytest.mark.parametrize("tune,profile_text,fragment", [c[1:] for c in SHAPE_CASES], ids=[c[0] for c in SHAPE_CASES])
def test_run_dir_of_another_shape_is_refused_untouched(capsys, monkeypatch, tmp_path, tune, profile_text, fragment):
    run = _closed_run(tmp_path, tune)
    prof = tmp_path / "other.toml"
    prof.write_text(profile_text)
    before = snapshot(tmp_path)
    for steps in ("env", "results"):
        rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(prof), "--headless", "--steps", steps,
                            "--run-dir", str(run))
        assert rc == 2, err
        one_paragraph_error(err)
        assert fragment in err and "left as it is" in err, err
    assert snapshot(tmp_path) == before


def test_run_dir_shape_rules_directly(tmp_path):
    """More arms than the saved run (extending the matrix) may continue it; a state that says nothing of its
    shape (only the checks ran) fits either; the engine writes the shape it ran."""
    from tui.core.profile.model import load_profile

    run = _closed_run(tmp_path, True)
    more = load_profile("tune-demo").with_values({"tune.num_speculative_tokens": [1, 2, 3, 4]})
    assert reuse.check_reuse(run, more) is not None
    state = {"profile": "demo", "steps": {"env": {"status": "passed"}}}
    assert reuse.shape_mismatch(state, load_profile("tune-demo")) is None
    assert reuse.shape_mismatch(dict(state, tune=True), load_profile("demo")) is not None


GATE_CASES = [
    ("speedup-lo-two-arm", "--demo", "speedup_lo>1", "speedup_lo is the lower end of a tune run's speedup interval"),
    ("metrics-speedup-lo-two-arm", "--demo", "metrics.speedup_lo>1", "a two-arm run (one bench per arm, no interval)"),
    ("matrix-on-two-arm", "--demo", "matrix.cells.eagle3-k1.sonnet.speedup.ratio>1",
     "'matrix' is written by tune runs only"),
    ("unknown-arm-runs", "--demo", "runs.eagle3-k2.output_throughput>1",
     "arm 'eagle3-k2' is not an arm of this profile (its arms: baseline, eagle3)"),
    ("unknown-report-key", "--demo", "runz.eagle3.output_throughput>1", "report.json has no 'runz'"),
    ("unknown-comparison-key", "--demo", "comparison.speedup>1", "comparison has no 'speedup'"),
    ("unknown-metric", "--demo", "metrics.speed>1", "metrics has no 'speed'"),
    ("comparison-on-tune", "tune-demo", "comparison.output_throughput_speedup>1",
     "'comparison' (baseline vs eagle3) is filled by two-arm runs only"),
    ("unknown-arm-matrix", "tune-demo", "matrix.cells.eagle3-k7.sonnet.speedup.ratio>1",
     "arm 'eagle3-k7' is not an arm of this profile (its arms: baseline, eagle3-k1, eagle3-k2, eagle3-k3)"),
    ("unknown-workload", "tune-demo", "matrix.cells.eagle3-k1.code.speedup.ratio>1",
     "bench key 'code' is not a bench key of this profile (its bench keys: sonnet, chat)"),
    ("unknown-workload-recommendation", "tune-demo", "matrix.recommendation.code.arm>1", "bench key 'code'"),
    ("speedup-lo-one-repeat", "ONE_REPEAT", "speedup_lo>1", "tune.repeats = 1 gives none"),
]


@pytest.mark.parametrize("profile,expect,fragment", [c[1:] for c in GATE_CASES], ids=[c[0] for c in GATE_CASES])
def test_gate_the_run_cannot_produce_is_refused_before_anything(capsys, monkeypatch, tmp_path, profile, expect,
                                                                fragment):
    if profile == "ONE_REPEAT":
        (tmp_path / "one.toml").write_text('extends = "tune-demo"\nname = "one"\n[tune]\nrepeats = 1\n')
        profile = str(tmp_path / "one.toml")
    prof = ["--demo"] if profile == "--demo" else ["--profile", profile]
    before = snapshot(tmp_path)
    for extra in ((), ("--json",), ("--run-dir", str(tmp_path / "run"))):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *prof, "--headless", "--expect", expect, *extra)
        assert rc == 2, err
        one_paragraph_error(err)
        assert "can never pass" in err and fragment in err and "Nothing was run" in err, err
    assert snapshot(tmp_path) == before and not (tmp_path / "run").exists()


def test_gates_a_run_can_produce_are_accepted():
    from tui.core.results import gates
    from tui.core.profile.model import load_profile

    two, tune = load_profile("demo"), load_profile("tune-demo")
    for text in ("speedup>=1.1", "runs.eagle3.acceptance_rate>50", "comparison.median_tpot_ratio<1",
                 "steps.0.seconds>0", "metrics.acceptance>1"):
        gates.check_producible(gates.parse_all([text]), two)
    for text in ("speedup_lo>1", "matrix.cells.eagle3-k2.chat.speedup.ratio>1", "runs.eagle3-k3.output_throughput>1",
                 "matrix.recommendation.sonnet.repeats_needed<3", "launches.1.startup_s<600"):
        gates.check_producible(gates.parse_all([text]), tune)


STALL_BENCH = FIXTURES / "fakes" / "stall_bench.py"


@pytest.mark.parametrize("how", ["sigint", "timeout"])
def test_interrupted_bench_output_is_never_taken_for_a_result(tmp_path, how):
    """A bench that wrote half its result file and then stalls: stopped by a signal (exit 130, the step interrupted)
    or by benchmark.timeout_s (exit 1, the step failed). Its output is left as baseline.json.partial, the step's
    summary says so, and a later `--steps results` does not read it as the baseline's numbers."""
    from e2e_util import demo_variant

    extra = {"benchmark__timeout_s": 3.0} if how == "timeout" else {}
    prof = demo_variant(tmp_path, "stall", server__command=["{python}", str(STALL_BENCH)], **extra)
    run = tmp_path / "run"
    env = child_env(tmp_path)
    env[MARK_VAR] = mark = f"stall-{os.getpid()}-{time.monotonic_ns()}"
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    app = subprocess.Popen([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--steps", "baseline",
                            "--run-dir", str(run)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if how == "sigint":
            assert wait_for(lambda: (run / "baseline.json").exists(), 120)
            time.sleep(0.3)
            app.send_signal(signal.SIGINT)
        err = app.communicate(timeout=120)[1]
    finally:
        if app.poll() is None:
            app.kill()
            app.communicate()
    assert app.returncode == (130 if how == "sigint" else 1), err
    assert "Traceback" not in err and not leftovers_after(mark)
    assert not (run / "baseline.json").exists()
    assert (run / "baseline.json.partial").read_text().startswith('{"date"')
    status = {"sigint": "interrupted", "timeout": "failed"}[how]
    rep = json.loads((run / "report.json").read_text())
    step = {s["id"]: s for s in rep["steps"]}["baseline"]
    assert step["status"] == status and "baseline.json.partial" in step["summary"] + err
    if how == "sigint":
        assert "interrupted during the benchmark" in step["summary"]
    before = (run / "baseline.json.partial").read_bytes()
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", "results", "--run-dir", str(run))
    assert r.rc == 1 and "missing: baseline, eagle3" in r.err and "Traceback" not in r.both, r.err
    assert (run / "baseline.json.partial").read_bytes() == before and not r.leftovers


# =========================================================================================================
# Issue 18 (second round), items 3-6: tune inputs, core ranges, executables and probe children, --vllm-version.
# (A separate block: other parts of the corpus are extended elsewhere in this file.)
# =========================================================================================================

from e2e_util import FAST_SIM  # noqa: E402
from tui.core.profile.model import load_profile  # noqa: E402


def _tune_variant(tmp_path: Path, name: str, **updates) -> Path:
    """tune-demo at the simulator's fast settings, one repeat of one workload, with `updates` (a__b = a.b)."""
    values = dict(FAST_SIM, **{"server.port": free_port(), "name": name, "tune.repeats": 1,
                               "tune.workloads": ["sonnet"], "tune.num_speculative_tokens": [1]})
    values.update({k.replace("__", "."): v for k, v in updates.items()})
    path = tmp_path / f"{name}.toml"
    path.write_text(load_profile("tune-demo").with_values(values).to_toml())
    return path


def _refused_before_anything(capsys, monkeypatch, tmp_path: Path, prof: Path, fragments: tuple[str, ...]) -> None:
    """Exit 2 with one paragraph naming the problem, for --show-commands and a headless run; nothing written."""
    before = snapshot(tmp_path)
    for args in (("--profile", str(prof), "--show-commands"), ("--profile", str(prof), "--headless")):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
        assert rc == 2, err
        one_paragraph_error(err)
        for fragment in fragments:
            assert fragment in err, err
        assert out == ""
        assert snapshot(tmp_path) == before


# ---- 3. tune inputs ---------------------------------------------------------------------------------------

D18 = 'extends = "tune-demo"\nname = "bad"\n'

TUNE_CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("k-list-too-long", D18 + "[tune]\nnum_speculative_tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n",
     ("tune.num_speculative_tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9] is not valid", "at most 8 k values", "from 1 to 16")),
    ("k-list-empty", D18 + "[tune]\nnum_speculative_tokens = []\n", ("a list of 1 to 8 distinct integers",)),
    ("k-repeated", D18 + "[tune]\nnum_speculative_tokens = [2, 2]\n", ("tune.num_speculative_tokens = [2, 2]",
                                                                      "distinct")),
    ("k-too-large", D18 + "[tune]\nnum_speculative_tokens = [17]\n", ("each from 1 to 16",)),
    ("workloads-repeated", D18 + '[tune]\nworkloads = ["chat", "chat"]\n', ("a list of 1 to 3 distinct names",)),
    ("workload-unknown", D18 + '[tune]\nworkloads = ["sonet"]\n', ("tune.workloads = ['sonet'] is not valid",)),
    ("draft-name-upper", D18 + '[tune.drafts.RedHat]\nmodel = "x/y"\n', ("tune.drafts.RedHat",)),
    ("draft-no-model", D18 + "[tune.drafts.redhat]\nmethod = \"eagle3\"\n", ("tune.drafts.redhat.model",)),
    ("draft-bad-method", D18 + '[tune.drafts.redhat]\nmodel = "x/y"\nmethod = "medusa"\n',
     ("tune.drafts.redhat.method = 'medusa'",)),
    ("draft-unknown-key", D18 + '[tune.drafts.redhat]\nmodel = "x/y"\nk = 2\n', ("unknown key 'tune.drafts.redhat.k'",)),
    ("parallel-off-neuron", 'extends = "llama-3-8b-eagle-cuda"\nname = "bad"\n[tune]\nparallel = true\n',
     ("tune.parallel = true is not valid on platform 'cuda'",)),
]


@pytest.mark.parametrize("text,fragments", [c[1:] for c in TUNE_CASES], ids=[c[0] for c in TUNE_CASES])
def test_bad_tune_values_name_their_limits(capsys, monkeypatch, tmp_path, text, fragments):
    prof = tmp_path / "p.toml"
    prof.write_text(text, encoding="utf-8")
    _refused_before_anything(capsys, monkeypatch, tmp_path, prof, fragments)


def test_tune_draft_typo_fails_the_checkpoints_step_before_any_launch(tmp_path):
    prof = _tune_variant(tmp_path, "typo", tune__drafts={"redhat": {"model": "RedHatAI/gpt-oss-120b-speculator.eagle3"},
                                                         "typo": {"model": "RedHatAI/no-such-draft-xyz"}})
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run))
    assert r.rc == 1, r.err
    assert "draft checkpoint (typo): RedHatAI/no-such-draft-xyz: repository not found" in r.err, r.err
    assert "Traceback" not in r.both and not r.leftovers
    rep = json.loads((run / "report.json").read_text())
    status = {s["id"]: s["status"] for s in rep["steps"]}
    assert status["checkpoints"] == "failed" and status["baseline"] != "passed", status
    assert not list(run.glob("*.serve.log"))  # no server was launched
    ck = json.loads((run / "checkpoints.json").read_text())
    assert ck["tune_drafts"]["typo"]["error"]["value"] == "repository not found"
    assert set(ck["tune_drafts"]) == {"typo"}  # "redhat" is the profile's own draft, checked as such


def test_tune_draft_of_the_wrong_method_is_a_mismatch(tmp_path):
    prof = _tune_variant(tmp_path, "meth", tune__drafts={
        "e1": {"model": "RedHatAI/gpt-oss-120b-speculator.eagle3", "method": "eagle"}})
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", "env,checkpoints", "--run-dir", str(run))
    assert r.rc == 1, r.err
    assert "draft type (e1): eagle3 draft, method eagle" in r.err
    assert "Traceback" not in r.both and not r.leftovers
    rep = json.loads((run / "report.json").read_text())
    assert "draft-target-mismatch" in {d["id"] for d in rep["diagnostics"]}


def test_capacity_notice_counts_every_arm():
    from tui.core.host.placement import plan_ranges

    p = plan_ranges(64, 32, 3)
    assert p.summary().startswith("2 of 3 arm(s) at once")
    assert "not enough cores for 3 arms at once" in p.reasons[0] and "2 aligned range(s) of 32" in p.reasons[0]


# ---- 4. core ranges ---------------------------------------------------------------------------------------

NVD_CASES = [
    ("repeated-cores", "0,0,1,1,2,3,4,5,6,7,8,9,10,11,12,13", ("cores 0-1 repeated", "0-15, 16-31")),
    ("unaligned", "4-19", ("starts at core 4, which is not a multiple of tensor_parallel_size 16", "0-15, 16-31")),
    ("unaligned-list", "8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23", ("starts at core 8", "16-31")),
    ("gap", "0-7,16-23", ("not one contiguous ascending range", "0-15, 16-31")),
    ("wrong-count", "0-7", ("selects 8 logical cores but the server has tensor_parallel_size 16 ranks",)),
    ("not-a-list", "all", ("is not a list of logical NeuronCores",)),
]


@pytest.mark.parametrize("value,fragments", [c[1:] for c in NVD_CASES], ids=[c[0] for c in NVD_CASES])
def test_hand_set_core_range_in_the_profile_is_refused(capsys, monkeypatch, tmp_path, value, fragments):
    prof = tmp_path / "p.toml"
    prof.write_text(f'extends = "demo"\nname = "nvd"\n[server.env]\nNEURON_VISIBLE_DEVICES = "{value}"\n')
    _refused_before_anything(capsys, monkeypatch, tmp_path, prof,
                             ("server.env.NEURON_VISIBLE_DEVICES", "Ranges that work for TP 16", *fragments))


def test_aligned_core_range_in_the_profile_is_accepted(capsys, monkeypatch, tmp_path):
    prof = tmp_path / "p.toml"
    prof.write_text('extends = "demo"\nname = "nvd"\n[server.env]\nNEURON_VISIBLE_DEVICES = "16-31"\n')
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(prof), "--show-commands")
    assert rc == 0 and "NEURON_VISIBLE_DEVICES=16-31" in out, err


@pytest.mark.parametrize("value,fragment", [("0,0,1,1,2,3,4,5,6,7,8,9,10,11,12,13", "repeated"),
                                            ("4-19", "not a multiple of tensor_parallel_size 16")],
                         ids=["repeated", "unaligned"])
def test_hand_set_core_range_in_the_environment_fails_the_env_step(tmp_path, value, fragment):
    prof = demo_variant(tmp_path, "nvdenv")
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", "env", "--run-dir", str(run),
                env_extra={"NEURON_VISIBLE_DEVICES": value})
    assert r.rc == 1, r.err
    assert "NEURON_VISIBLE_DEVICES" in r.err and fragment in r.err
    assert "one of 0-15, 16-31, 32-47, 48-63" in r.err  # the ranges that work
    assert "Traceback" not in r.both and not r.leftovers


# ---- 5. executables and probe children ----------------------------------------------------------------------


def _not_executable_on_path(tmp_path: Path) -> dict[str, str]:
    d = tmp_path / "bin"
    d.mkdir()
    (d / "vllm").write_text("#!/bin/sh\nexit 0\n")
    (d / "vllm").chmod(0o644)
    return {"PATH": f"{d}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.parametrize("steps,fact", [("env", "vLLM interpreter: not executable"), ("baseline", "cannot start")])
def test_server_command_on_path_but_not_executable(tmp_path, steps, fact):
    prof = demo_variant(tmp_path, "nx", server__command=["vllm"])
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", steps, "--run-dir", str(run),
                env_extra=_not_executable_on_path(tmp_path))
    assert r.rc == 1, r.err
    assert fact in r.err and f"{tmp_path / 'bin' / 'vllm'} exists but is not executable (mode 644)" in r.err, r.err
    assert "not found on PATH" not in r.err
    assert "Traceback" not in r.both and not r.leftovers


def test_not_runnable_says_why():
    from tui.core.host.sysinfo import not_runnable

    assert not_runnable("no-such-tool-xyz", "/nonexistent") is None  # the caller says "not found on PATH"
    assert not_runnable("/nonexistent/vllm", "") == "/nonexistent/vllm does not exist"
    assert "is a directory" in not_runnable(str(REPO), "")


_HANGS = "#!/bin/sh\n# a probe that never answers and has started a child of its own\nsleep 300 &\nsleep 300\n"

_PROBE_DRIVER = r'''
import asyncio, os, sys, time
from tui.core.host.interpreter import run_capture, run_capture_sync
exe = sys.argv[1]
t0 = time.monotonic()
print("async", asyncio.run(run_capture([exe], dict(os.environ), 1.0)))
print("sync", run_capture_sync([exe], dict(os.environ), 1.0))
print("quick", asyncio.run(run_capture(["/bin/sh", "-c", "sleep 300 & echo hi"], dict(os.environ), 30.0)))
async def cancelled():
    t = asyncio.ensure_future(run_capture([exe], dict(os.environ), 60.0))
    await asyncio.sleep(0.5)
    t.cancel()
    try:
        await t
    except asyncio.CancelledError:
        return "cancelled"
print("cancel", asyncio.run(cancelled()))
print("elapsed", time.monotonic() - t0 < 25)
'''


def test_probe_children_are_killed_with_their_own_children_at_the_deadline(tmp_path):
    import uuid

    exe = tmp_path / "hangs"
    exe.write_text(_HANGS)
    exe.chmod(0o755)
    mark = uuid.uuid4().hex
    env = dict(child_env(tmp_path), **{MARK_VAR: mark, "PYTHONPATH": str(REPO)})
    r = subprocess.run([sys.executable, "-c", _PROBE_DRIVER, str(exe)], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "async (None, '', 'hangs did not finish within 1 s (stopped it and the processes it started)')" in r.stdout
    assert "sync (None, '', 'hangs did not finish within 1 s" in r.stdout
    assert "quick (0, 'hi\\n', '')" in r.stdout  # a normal exit: its output, and what it left running is stopped
    assert "cancel cancelled" in r.stdout  # a stopped run: the probe and its child are killed too
    assert "elapsed True" in r.stdout  # no read waited for the grandchildren
    assert "Event loop is closed" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    assert leftovers_after(mark, timeout=5) == []


def test_env_step_stops_a_hanging_probe_and_its_children(tmp_path):
    """A hanging `nvidia-smi` (platform cuda) that started a child: the env step gives up at its deadline, kills
    both, and the console has no asyncio noise."""
    import uuid

    d = tmp_path / "bin"
    d.mkdir()
    (d / "nvidia-smi").write_text(_HANGS)
    (d / "nvidia-smi").chmod(0o755)
    prof = tmp_path / "cuda.toml"
    prof.write_text(f'extends = "llama-3-8b-eagle-cuda"\nname = "hang"\n[server]\nport = {free_port()}\n')
    mark = uuid.uuid4().hex
    env = dict(child_env(tmp_path), **{MARK_VAR: mark, "PYTHONPATH": str(REPO),
                                       "PATH": f"{d}{os.pathsep}{os.environ.get('PATH', '')}"})
    code = ("import sys; import tui.core.steps.env as e; e.NVIDIA_SMI_TIMEOUT_S = 2.0; from tui.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "--profile", str(prof), "--headless", "--steps", "env",
                        "--run-dir", str(tmp_path / "r")], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=120, stdin=subprocess.DEVNULL)
    both = r.stdout + r.stderr
    assert r.returncode == 1, both
    assert "nvidia-smi did not finish within 2 s" in both, both
    assert "Traceback" not in both and "Event loop is closed" not in both and "Exception ignored" not in both
    assert leftovers_after(mark, timeout=5) == []


# ---- 6. --vllm-version ------------------------------------------------------------------------------------

VLLM_VERSION_CASES = [
    ("empty", ["--demo", "--show-commands", "--vllm-version", ""], "--vllm-version is empty"),
    ("equals-empty", ["--demo", "--show-commands", "--vllm-version="], "--vllm-version is empty"),
    ("blank", ["--demo", "--show-commands", "--vllm-version", " "], "--vllm-version is empty"),
    ("empty-headless", ["--demo", "--headless", "--vllm-version="], "--vllm-version is empty"),
    ("too-old", ["--demo", "--show-commands", "--vllm-version", "0.24.0"],
     "--vllm-version 0.24.0: vLLM 0.24.0 is outside the releases specdec-tui serves on platform 'neuron' (0.29 to 0.33)"),
    ("just-below", ["--demo", "--show-commands", "--vllm-version", "0.28.9"], "serves on platform 'neuron' (0.29 to 0.33)"),
    ("too-new", ["--demo", "--show-commands", "--vllm-version", "0.34.0"], "vllm-neuron has no release for vLLM 0.34"),
    ("major", ["--demo", "--show-commands", "--vllm-version", "1.0"], "serves on platform 'neuron' (0.29 to 0.33)"),
    ("cuda-too-new", ["--profile", "llama-3.1-8b-eagle3-cuda", "--show-commands", "--vllm-version", "0.35.0"],
     "serves on platform 'cuda' (0.29 to 0.34)"),
    ("word", ["--demo", "--show-commands", "--vllm-version", "latest"], "is not a version"),
]


@pytest.mark.parametrize("args,fragment", [c[1:] for c in VLLM_VERSION_CASES], ids=[c[0] for c in VLLM_VERSION_CASES])
def test_bad_vllm_versions(capsys, monkeypatch, tmp_path, args, fragment):
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
    assert rc == 2, err
    one_paragraph_error(err)
    assert fragment in err and out == ""
    assert not (tmp_path / "specdec-runs").exists()


@pytest.mark.parametrize("profile,version", [("demo", "0.29.0"), ("demo", "0.33.2rc1"), ("cpu", "0.32.0+cpu"),
                                             ("llama-3.1-8b-eagle3-cuda", "0.34.0")])
def test_served_vllm_versions_are_shown(capsys, monkeypatch, tmp_path, profile, version):
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", profile, "--show-commands", "--vllm-version",
                          version)
    assert rc == 0 and out.startswith(f"# vLLM {version} (given with --vllm-version)"), err
