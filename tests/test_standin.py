"""The engine's side of the stand-in protocol: start the profile's [stand_in] command like a server, read its
one JSON line, apply env / unset / placeholders, stop it at close. Errors are one readable paragraph."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import psutil

from tui.core.run.engine import Engine
from tui.core.events import Notice, StepFinished
from tui.core.profile.model import profile_from_dict

PY = sys.executable

STAND_IN = r'''
import json, os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
print("a warning line before the message", flush=True)
print(json.dumps({"env": {"SPECDEC_TEST_VAR": "set-by-stand-in", "PATH": "/nonexistent-bin" + os.pathsep + os.environ.get("PATH", "")},
                  "unset": ["SPECDEC_TEST_DROP"], "placeholders": {"sim_hub": "http://127.0.0.1:9"},
                  "notice": "test stand-in up"}), flush=True)
time.sleep(120)
'''


def profile(cmd: list[str] | None, simulated: bool = False):
    raw: dict[str, Any] = {"name": "t", "models": {"target": "org/t", "draft": "org/d"}}
    if cmd is not None:
        raw["stand_in"] = {"command": cmd}
    if simulated:
        raw["simulation"] = {}
    return profile_from_dict(raw)




def run(prof, tmp_path: Path, monkeypatch, steps: list[str] | None = None) -> tuple[Engine, list[Any]]:
    monkeypatch.setenv("SPECDEC_TEST_DROP", "x")
    events: list[Any] = []
    eng = Engine(prof, tmp_path / "run", events.append, steps=steps or ["env"])

    async def main() -> None:
        await eng.open()
        await eng.ready()
        eng.seen_env = dict(eng.ctx.environ)  # type: ignore[attr-defined]
        eng.seen_hub = eng.ctx.ph.sim_hub  # type: ignore[attr-defined]
        if steps:
            for sid in steps:
                await eng.run_step(sid)
        await eng.close()

    asyncio.run(main())
    return eng, events


def test_stand_in_message_is_applied_and_the_process_stopped(tmp_path, monkeypatch):
    script = tmp_path / "standin.py"
    script.write_text(STAND_IN)
    pidfile = tmp_path / "pid"
    eng, events = run(profile(["{python}", str(script), str(pidfile)]), tmp_path, monkeypatch, steps=[])
    env = eng.seen_env  # type: ignore[attr-defined]
    assert env["SPECDEC_TEST_VAR"] == "set-by-stand-in" and "SPECDEC_TEST_DROP" not in env
    assert env["PATH"].startswith("/nonexistent-bin")
    assert eng.seen_hub == "http://127.0.0.1:9"  # type: ignore[attr-defined]
    assert any(isinstance(e, Notice) and e.text == "test stand-in up" for e in events)
    assert eng.platform_error == ""
    pid = int(pidfile.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert "a warning line" in (tmp_path / "run" / "stand-in.log").read_text()
    assert eng.ctx.cleanups == []


def test_stand_in_that_cannot_start_fails_every_step_readably(tmp_path, monkeypatch):
    eng, events = run(profile(["no-such-stand-in-binary"]), tmp_path, monkeypatch, steps=["env"])
    assert "could not be started" in eng.platform_error and "[stand_in] command" in eng.platform_error
    fin = [e for e in events if isinstance(e, StepFinished)]
    assert fin and fin[0].status == "failed" and "Traceback" not in fin[0].summary
    assert not (tmp_path / "run" / "env.json").exists()  # the step itself never ran


def test_stand_in_that_exits_without_a_message(tmp_path, monkeypatch):
    eng, _ = run(profile(["{python}", "-c", "import sys; print('boom: no platform here'); sys.exit(3)"]), tmp_path,
                 monkeypatch, steps=[])
    assert "exited with status 3" in eng.platform_error and "boom: no platform here" in eng.platform_error


def test_simulated_profile_without_stand_in_says_so(tmp_path, monkeypatch):
    _, events = run(profile(None, simulated=True), tmp_path, monkeypatch, steps=[])
    assert any(isinstance(e, Notice) and "no [stand_in] command" in e.text for e in events)


def test_stand_in_cli_reports_a_profile_without_simulation(tmp_path):
    import subprocess

    p = tmp_path / "p.toml"
    p.write_text('[models]\ntarget = "a/b"\ndraft = "c/d"\n')
    r = subprocess.run([PY, "-m", "tui.sim", "stand-in", "--profile", str(p)], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and "no [simulation] table" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""



def test_stop_children_keeps_the_platform_until_close(tmp_path, monkeypatch):
    script = tmp_path / "standin.py"
    script.write_text(STAND_IN)
    pidfile = tmp_path / "pid"
    events: list[Any] = []
    eng = Engine(profile(["{python}", str(script), str(pidfile)]), tmp_path / "run", events.append, steps=["env"])

    async def main() -> tuple[bool, bool]:
        await eng.open()
        await eng.ready()
        pid = int(pidfile.read_text())
        await eng.stop_children()  # what the wizard's "stop server" does
        alive_after_stop = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        await eng.close()
        gone = not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        return alive_after_stop, gone

    alive, gone = asyncio.run(main())
    assert alive and gone
