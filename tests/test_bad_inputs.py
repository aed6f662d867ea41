"""Bad inputs, each with one clear answer: profiles, the command line, run directories, file systems, the
network, child processes and signals (secrets, saved files and the second round: test_bad_inputs_2.py).

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
    inproc,
    one_paragraph_error,
    MARK_VAR,
    jail_available,
    leftovers_after,
    no_tmp_files,
    run_cli,
    snapshot,
)
from e2e_util import REPO, child_env, demo_variant, free_port, wait_for
from tui.core.store import rundir

FIXTURES = REPO / "tests" / "fixtures"
JAIL_WHY = jail_available()
needs_jail = pytest.mark.skipif(JAIL_WHY is not None, reason=f"real read-only/full file systems need it: {JAIL_WHY}")



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
