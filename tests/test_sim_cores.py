"""NeuronCore occupancy on the stand-in platform (tui/sim/cores.py, engine_core.py, standin.py).

Simulated servers claim the logical cores of NEURON_VISIBLE_DEVICES (default 0..TP-1) for as long as their
engine runs; the stand-in's neuron-ls lists them per device with their pids; a server whose range overlaps a
live one fails at startup with the runtime's busy-cores error, as on a real trn2.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from e2e_util import wait_for
from test_sim_serve import ANSI, Sim, serve_args
from tui.core.host.placement import core_facts, format_range
from tui.core.host.sysinfo import parse_neuron_ls
from tui.sim import cores
from tui.sim.standin import build, start_holder, stop_holder

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the claims follow /proc")

BUSY_LINE = ("Logical Neuron Core(s) not available - Requested:lnc{c}-lnc{c} Available:0 Logical Core size:2 "
             "(cores busy, ret=-16)")
BUSY_ERROR = ("RuntimeError: Neuron runtime cannot be initialized; cannot determine the number of available "
              "NeuronCores")


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# --- claims ----------------------------------------------------------------------------------------

def test_claim_overlap_release_and_stale(tmp_path):
    d = tmp_path / "claims"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert cores.claim(d, range(0, 16), command="a", pid=sleeper.pid) == (True, [])
        ok, clash = cores.claim(d, range(8, 24), command="b")
        assert not ok and [c["pid"] for c in clash] == [sleeper.pid] and clash[0]["cores"] == list(range(16))
        assert cores.claim(d, range(16, 32), command="b") == (True, [])
        assert [c["pid"] for c in cores.live_claims(d)] == sorted([sleeper.pid, os.getpid()])
        cores.release(d)
        assert [c["pid"] for c in cores.live_claims(d)] == [sleeper.pid]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert cores.live_claims(d) == []  # its holder is gone: the claim no longer counts
    assert (d / f"{sleeper.pid}.json").exists()  # neuron-ls only reads; the next claim removes it
    assert cores.claim(d, range(0, 16))[0]
    assert not (d / f"{sleeper.pid}.json").exists()


def test_a_reused_pid_does_not_keep_a_claim(tmp_path):
    d = tmp_path / "claims"
    d.mkdir()
    (d / f"{os.getpid()}.json").write_text(json.dumps({"pid": os.getpid(), "starttime": "1", "cores": [0]}))
    (d / f"{dead_pid()}.json").write_text(json.dumps({"pid": dead_pid(), "cores": [1]}))
    (d / "junk.json").write_text("not json")
    assert cores.live_claims(d) == []
    assert cores.pid_alive(os.getpid(), cores.starttime(os.getpid())) and not cores.pid_alive(-1)


def test_merge_into_devices_lists_a_holder_on_each_device_it_uses():
    devs = [{"neuron_device": i, "neuroncore_ids": [4 * i + j for j in range(4)], "neuron_processes": []}
            for i in range(16)]
    out = cores.merge_into_devices(devs, [{"pid": 7, "cores": list(range(16, 32)), "command": "x"}])
    assert [d["neuron_device"] for d in out if d["neuron_processes"]] == [4, 5, 6, 7]
    assert out[4]["neuron_processes"] == [{"pid": 7, "command": "x", "neuron_runtime_version": cores.RUNTIME_VERSION}]
    assert devs[4]["neuron_processes"] == []  # a copy


# --- two simulated servers side by side ----------------------------------------------------------

@pytest.fixture()
def platform(tmp_path):
    """The stand-in's sysroot + neuron-ls, laid out in-process (no hub)."""
    msg = build(tmp_path / "standin", {"vllm_version": "0.24.0", "fault": "none"},
                {"PATH": os.environ.get("PATH", "")}, None)
    return msg["env"]


def neuron_ls(env: dict[str, str]) -> list[dict]:
    r = subprocess.run(["neuron-ls", "-j"], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "PATH": env["PATH"]})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def holders(devices: list[dict]) -> dict[int, list[int]]:
    """pid -> devices it is listed on."""
    out: dict[int, list[int]] = {}
    for d in devices:
        for p in d["neuron_processes"]:
            out.setdefault(p["pid"], []).append(d["neuron_device"])
    return out


def server(tmp_path: Path, env: dict[str, str], name: str, visible: str | None, **kw) -> Sim:
    e = {"SPECDEC_SYSROOT": env["SPECDEC_SYSROOT"], "PATH": env["PATH"]}
    if visible is not None:
        e["NEURON_VISIBLE_DEVICES"] = visible
    return Sim(serve_args(), tmp_path / f"cache-{name}", env=e, **kw)


def engine_pid(sim: Sim) -> int:
    sim.wait_for("(EngineCore_DP0 pid=")
    return int(re.search(r"\(EngineCore_DP0 pid=(\d+)\)", sim.text).group(1))


def test_disjoint_ranges_both_start_and_neuron_ls_shows_them(tmp_path, platform):
    a = server(tmp_path, platform, "a", "0-15")
    b = server(tmp_path, platform, "b", "16-31")
    try:
        a.ready()
        b.ready()
        pa, pb = engine_pid(a), engine_pid(b)
        assert "NEURON_RT_ROOT_COMM_ID=localhost:61234 " in a.text
        assert "NEURON_RT_ROOT_COMM_ID=localhost:61250 " in b.text  # 61234 + first core
        devs = neuron_ls(platform)
        assert holders(devs) == {pa: [0, 1, 2, 3], pb: [4, 5, 6, 7]}
        proc = next(p for p in devs[4]["neuron_processes"])
        assert "tui.sim.engine_core" in proc["command"] and proc["neuron_runtime_version"]
        # What the env step stores / parses is enough to place the next arms on the free ranges.
        facts = core_facts({"logical_cores": 64, "lnc": 2}, parse_neuron_ls(devs))
        plan = facts.plan(16, 4)
        assert [format_range(x) for x in plan.ranges] == ["32-47", "48-63"]
        assert plan.reasons == (f"cores 0-31 are held by pid {min(pa, pb)}, {max(pa, pb)} (another process), so "
                                "range(s) 0-15, 16-31 are not available",)

        # An overlapping range fails at startup with the runtime's busy-cores signature, naming its cores.
        c = server(tmp_path, platform, "c", "8-23")
        try:
            assert c.wait_exit() == 1
            text = ANSI.sub("", c.text)
            for core in range(8, 24):
                assert BUSY_LINE.format(c=core) in text, core
            assert BUSY_LINE.format(c=24) not in text and BUSY_ERROR in text
            assert text.index(BUSY_LINE.format(c=8)) < text.index("EngineCore failed to start.")
            assert "Loading weights from" not in text and "Application startup complete" not in text
        finally:
            c.kill()
        # The default range (unset: 0..TP-1) overlaps the first server too.
        d = server(tmp_path, platform, "d", None)
        try:
            assert d.wait_exit() == 1
            assert BUSY_LINE.format(c=0) in ANSI.sub("", d.text)
        finally:
            d.kill()
        assert holders(neuron_ls(platform)) == {pa: [0, 1, 2, 3], pb: [4, 5, 6, 7]}  # the failures held nothing

        # A graceful stop frees the cores (and removes the claim); a killed server's claim stops counting.
        claims = Path(platform["SPECDEC_SYSROOT"]) / cores.CLAIMS_SUBDIR
        a.proc.send_signal(signal.SIGTERM)
        assert a.wait_exit() == 0
        assert wait_for(lambda: not (claims / f"{pa}.json").exists(), 10)
        b.kill()
        assert wait_for(lambda: holders(neuron_ls(platform)) == {}, 10)
    finally:
        a.kill()
        b.kill()
    again = server(tmp_path, platform, "again", "0-15")
    try:
        again.ready()
    finally:
        again.kill()


def test_count_mismatch_fails_like_the_plugin(tmp_path, platform):
    s = server(tmp_path, platform, "m", "0-7")
    try:
        assert s.wait_exit() == 1
        text = ANSI.sub("", s.text)
        assert ("Resolved 8 Neuron cores [0, 1, 2, 3, 4, 5, 6, 7] for this replica, but local_world_size=16 "
                "(NEURON_VISIBLE_DEVICES=0-7, assigned_physical_gpu_ids=[0, 1, 2, 3, 4, 5, 6, 7])") in text
        assert "EngineCore failed to start." in text
    finally:
        s.kill()


def test_cores_busy_fault_holds_cores_0_15_only(tmp_path):
    holder = start_holder(tmp_path / "standin")
    try:
        env = build(tmp_path / "standin", {"vllm_version": "0.24.0", "fault": "cores-busy"},
                    {"PATH": os.environ.get("PATH", "")}, None, holder_pid=holder.pid)["env"]
        devices = neuron_ls(env)
        # a separate process holds them, not the stand-in (here: this process), and it reads like a vLLM server
        assert holders(devices) == {holder.pid: [0, 1, 2, 3]}
        cmd = next(p["command"] for d in devices for p in d["neuron_processes"])
        assert "vllm serve openai/gpt-oss-120b --tensor-parallel-size 16" in cmd
        ok = server(tmp_path, env, "ok", "16-31", sim={"fault": "cores-busy"})
        busy = server(tmp_path, env, "busy", None, sim={"fault": "cores-busy"})
        try:
            ok.ready()
            assert busy.wait_exit() == 1
            assert BUSY_LINE.format(c=0) in ANSI.sub("", busy.text)
        finally:
            ok.kill()
            busy.kill()
        # doing what the remedy says (kill the holder's pid) frees the cores
        os.kill(holder.pid, signal.SIGTERM)
        holder.wait(timeout=10)
        assert holders(neuron_ls(env)) == {}
    finally:
        stop_holder(holder)


def test_the_stand_in_stops_its_cores_holder_and_survives_its_kill(tmp_path):
    """demo-cores-busy: the holder is the stand-in's child, not the stand-in; killing it (the fix) leaves the
    platform up, and a stand-in that exits leaves no holder behind."""
    prof = tmp_path / "profile.toml"
    prof.write_text('extends = "demo-cores-busy"\n[simulation]\nhub = false\n')
    for kill_holder_first in (True, False):
        p = subprocess.Popen([sys.executable, "-m", "tui.sim", "stand-in", "--profile", str(prof)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        try:
            env = json.loads(p.stdout.readline())["env"]
            (pid,) = holders(neuron_ls(env))
            assert pid != p.pid and cores.pid_alive(pid)
            if kill_holder_first:
                os.kill(pid, signal.SIGTERM)
                assert wait_for(lambda: holders(neuron_ls(env)) == {}, timeout=30)
                assert p.poll() is None  # the platform is still up
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=30) == 0
            assert wait_for(lambda: not cores.pid_alive(pid), timeout=10)  # no orphan
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
