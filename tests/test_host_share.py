"""A host is shared (issue 22): own server, own numbers.

- Host locks (tui/core/host/hostlock.py): a second process holding a port or an overlapping core range is named
  (pid, run dir, command); the kernel releases a dead holder's lock; a stale file is harmless; the default
  directory is used when SPECDEC_LOCK_DIR is unset.
- Two real `specdec-tui --headless` runs started at once on one port: the second refuses before launching anything,
  naming the first; the first passes with its own numbers.
- Readiness counts only the launched server's own socket: a child that cannot bind (a foreign server took the
  port) fails at once with its exit status and vLLM's line; a foreign /health never makes it ready.
- A foreign client during a bench: the bench is marked contaminated from the server's own /metrics counters, kept
  on disk, left out of every statistic and named in the report; a continued run measures it again.

Real processes throughout (the simulator and the app as subprocesses, real sockets); every wait polls a file or an
event with a deadline, nothing asserts on time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from scipy import stats as sps

from e2e_util import REPO, child_env, demo_variant, free_port, load_report, wait_for
from test_tune import tune_variant
from tui.core.bench import metrics as mx
from tui.core.events import Command, Diagnosis, Fact, Notice
from tui.core.host import hostlock
from tui.core.plan.commands import Placeholders
from tui.core.profile.model import load_profile
from tui.core.run.engine import Engine
from tui.core.results.contamination import usable_repeats
from tui.core.results.stats import cell
from tui.core.steps.base import StepContext
from tui.core.steps.server import ServerRun
from tui.core.store.rundir import RunDir

HOLDER = r"""
import sys
from tui.core.host import hostlock
locks = hostlock.HostLocks.this_run(sys.argv[1], "specdec-tui --profile held --headless", "held")
claims = [hostlock.port_claim("127.0.0.1", int(sys.argv[2]))]
claims += hostlock.core_claims("neuron", range(int(sys.argv[3]), int(sys.argv[4])))
print("refused" if locks.take(claims) else "held", flush=True)
sys.stdin.read()
"""


def _machine(tmp_path: Path) -> dict[str, str]:
    """An environment whose system root has Neuron devices (so cores are locked) and its own lock directory."""
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True, exist_ok=True)
    for i in range(4):
        (root / "dev" / f"neuron{i}").write_text("")
    return {**os.environ, "SPECDEC_LOCK_DIR": str(tmp_path / "locks"), "SPECDEC_SYSROOT": str(root)}


def _holder(env: dict[str, str], run_dir: str, port: int, first: int, last: int) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, run_dir, str(port), str(first), str(last)], env=env,
                         cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


# -- the lock module ------------------------------------------------------------------------------------------

def test_a_second_process_is_named_and_its_death_frees_the_locks(tmp_path):
    env = _machine(tmp_path)
    port = free_port()
    holder = _holder(env, "/runs/first", port, 0, 16)
    mine = hostlock.HostLocks.this_run("/runs/second", "specdec-tui --demo", "demo")
    try:
        refusal = mine.take([hostlock.port_claim("127.0.0.1", port, env)])
        assert refusal is not None
        (h,) = refusal.holders()
        assert (h.pid, h.run_dir, h.command, h.profile) == (holder.pid, "/runs/first",
                                                             "specdec-tui --profile held --headless", "held")
        text = refusal.text("set server.port to a free port")
        assert text.startswith(f"port 127.0.0.1:{port} is held by specdec-tui pid {holder.pid} (user ")
        assert "run dir /runs/first" in text and "`specdec-tui --profile held --headless`" in text
        assert f"`kill {holder.pid}`" in text and text.endswith("or set server.port to a free port.")
        assert "\n" not in text
        # Overlapping core ranges collide core by core; a disjoint range does not.
        over = mine.take(hostlock.core_claims("neuron", range(8, 24), env))
        assert over is not None and over.what() == "NeuronCores 8-15"
        assert over.short() == f"NeuronCores 8-15 are held by specdec-tui pid {holder.pid} (run dir /runs/first)"
        assert mine.held() == []  # all or nothing: 16-23 were not kept
        assert mine.take(hostlock.core_claims("neuron", range(16, 32), env)) is None
        assert mine.held_elsewhere(hostlock.port_claim("127.0.0.1", port, env)).pid == holder.pid
        assert mine.held_elsewhere(hostlock.core_claims("neuron", [16], env)[0]) is None  # ours
    finally:
        holder.kill()
        holder.wait(timeout=30)
    # The kernel released the dead holder's flocks: the port is ours now, and its file names us.
    assert mine.take([hostlock.port_claim("127.0.0.1", port, env)]) is None
    assert hostlock.read_holder(hostlock.port_claim("127.0.0.1", port, env).path).pid == os.getpid()
    mine.release()
    assert mine.held() == []


def test_a_stale_lock_file_is_harmless_and_a_bad_directory_is_named(tmp_path):
    env = _machine(tmp_path)
    claim = hostlock.port_claim("127.0.0.1", free_port(), env)
    claim.path.parent.mkdir(parents=True)
    claim.path.write_text(json.dumps({"pid": 999999, "run_dir": "/gone", "command": "specdec-tui"}))
    mine = hostlock.HostLocks.this_run("/runs/now", "specdec-tui", "p")
    assert mine.take([claim]) is None  # liveness is the flock, not the file
    assert hostlock.read_holder(claim.path).run_dir == "/runs/now"
    mine.release()
    blocker = tmp_path / "z-file"
    blocker.write_text("")
    bad = {**env, "SPECDEC_LOCK_DIR": str(blocker / "locks")}
    cores = hostlock.core_claims("neuron", [0, 1], env)  # in the system root's directory: taken first, then let go
    with pytest.raises(hostlock.LockDirError) as err:
        mine.take([*cores, hostlock.port_claim("127.0.0.1", 8000, bad)])
    assert str(blocker / "locks") in str(err.value) and "SPECDEC_LOCK_DIR" in str(err.value)
    assert mine.held() == [] and all(mine.held_elsewhere(c) is None for c in cores)


def test_the_default_directory_is_shared_by_every_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != hostlock.ENV_DIR}
    d = hostlock.lock_dir(env)
    assert d in hostlock.DEFAULT_DIRS
    port = free_port()
    claim = hostlock.port_claim("127.0.0.1", port, env)
    assert claim.path.parent == d
    mine = hostlock.HostLocks.this_run(str(tmp_path), "specdec-tui --demo", "demo")
    assert mine.take([claim]) is None
    try:
        assert d.stat().st_mode & 0o1777 == 0o1777  # sticky and world-writable: every user's runs meet there
        probe = ("import sys; from tui.core.host import hostlock; h = hostlock.HostLocks.this_run('x', 'y')."
                 "held_elsewhere(hostlock.port_claim('127.0.0.1', int(sys.argv[1]))); print(h.pid, h.run_dir)")
        out = subprocess.run([sys.executable, "-c", probe, str(port)], env=env, cwd=REPO, capture_output=True,
                             text=True, timeout=60)
        assert out.stdout.split() == [str(os.getpid()), str(tmp_path)], out.stderr
    finally:
        mine.release()


async def test_the_wizards_retry_takes_the_lock_once_the_other_run_has_ended(tmp_path, monkeypatch):
    """The Engine as the wizard drives it: the env step is refused while another run holds the port, and a retry
    after that run has ended takes the lock and passes."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    prof = load_profile(str(demo_variant(tmp_path, "retry")))
    holder = _holder(dict(os.environ), "/runs/first", prof.server.port, 0, 0)
    events: list[Any] = []
    eng = Engine(prof, tmp_path / "run", events.append, steps=["env"])
    try:
        res = await eng.run_next()
        assert res.status == "failed" and f"held by specdec-tui pid {holder.pid} (user " in res.summary
        fact = next(e for e in events if isinstance(e, Fact) and e.name == "host lock")
        assert fact.status == "fail" and fact.remedy.startswith(f"wait for it to finish, stop it (`kill {holder.pid}`)")
    finally:
        holder.kill()
        holder.wait(timeout=30)
    try:
        res = await eng.retry("env")
        assert res.status in ("passed", "warned"), res.summary
        facts = [e for e in events if isinstance(e, Fact) and e.name == "host lock"]
        assert facts[-1].status == "pass" and facts[-1].value.startswith(f"port 127.0.0.1:{prof.server.port}")
    finally:
        assert await eng.finish() == 0
    assert eng.host_locks.held() == []  # released with the run


async def test_an_unusable_lock_directory_warns_once_and_the_run_goes_on(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("SPECDEC_LOCK_DIR", str(blocker / "locks"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    events: list[Any] = []
    eng = Engine(load_profile(str(demo_variant(tmp_path, "nolock"))), tmp_path / "run", events.append, steps=["env"])
    assert await eng.run_all() == 0
    warned = [e.text for e in events if isinstance(e, Notice) and e.text.startswith("host locks not taken")]
    assert len(warned) == 1 and str(blocker / "locks") in warned[0]
    fact = next(e for e in events if isinstance(e, Fact) and e.name == "host lock")
    assert fact.status == "warn" and fact.value == "not held"


# -- isolation from the server's counters --------------------------------------------------------------------

def _c(req: int, gen: int, running: int | None = 0) -> mx.ServerCounters:
    return mx.ServerCounters(request_success=req, generation_tokens=gen, running=running, waiting=0)


def test_isolation_compares_the_servers_counters_with_what_the_bench_sent():
    clean = mx.isolation(_c(5, 100), _c(15, 740), completed=10, failed=0, output_tokens=640, max_tokens=64)
    assert clean["checked"] and not clean["contaminated"] and clean["foreign_requests"] == 0
    more = mx.isolation(_c(5, 100), _c(42, 1036), completed=20, failed=0, output_tokens=640, max_tokens=64)
    assert more["contaminated"] and more["foreign_requests"] == 17 and more["foreign_tokens"] == 296
    assert more["text"].startswith("the server finished 37 requests, the bench sent 20")
    # A foreign request still running when the bench ended: its tokens and the gauge give it away.
    running = mx.isolation(_c(0, 0), _c(10, 700, running=1), completed=10, failed=0, output_tokens=640,
                           max_tokens=64)
    assert running["contaminated"] and running["foreign_requests"] == 0 and running["foreign_tokens"] == 60
    assert "1 request still on the server after the bench ended" in running["text"]
    # The bench's own failed requests and its ready-check prompt are its own.
    ours = mx.isolation(_c(0, 0), _c(12, 700), completed=10, failed=1, output_tokens=640, max_tokens=64,
                        extra_requests=1)
    assert not ours["contaminated"]
    # Counters that never moved (--disable-log-stats) or went backwards cannot tell: not checked, not contaminated.
    assert mx.isolation(_c(0, 0), _c(0, 0), completed=10, failed=0, output_tokens=640, max_tokens=64) == {
        "checked": False, "why": "the server's request counters did not move (stats logging off: --disable-log-stats)"}
    assert not mx.isolation(_c(9, 9), _c(1, 1), completed=1, failed=0, output_tokens=1, max_tokens=1)["checked"]
    assert not mx.isolation(None, _c(1, 1), completed=1, failed=0, output_tokens=1, max_tokens=1)["checked"]


def test_the_gauges_are_parsed_from_vllm_metrics_text():
    text = ("# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{engine="0",model_name="m"} 2.0\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            'vllm:num_requests_waiting{engine="0",model_name="m"} 1.0\n'
            "# TYPE vllm:request_success counter\n"
            'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 7.0\n'
            'vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"} 1.0\n')
    c = mx.parse_server_counters(text)
    assert (c.running, c.waiting, c.in_flight, c.request_success) == (2, 1, 3, 8)
    assert mx.parse_server_counters("").running is None


def test_a_contaminated_repeat_is_left_out_of_the_cell_and_its_interval():
    reps = [{"output_throughput": 100.0}, {"output_throughput": 180.0, "contaminated": {"text": "x"}},
            {"output_throughput": 104.0}, {"output_throughput": 98.0}]
    assert usable_repeats(reps) == [reps[0], reps[2], reps[3]]
    c = cell(reps, speculative=False)
    vals = [100.0, 104.0, 98.0]
    assert c["repeats"] == 3 and c["output_throughput"]["values"] == vals
    lo, hi = sps.t.interval(0.95, len(vals) - 1, loc=sps.tmean(vals), scale=sps.sem(vals))
    assert c["output_throughput"]["ci95"] == pytest.approx([lo, hi], rel=1e-6)


# -- readiness belongs to the launched server ----------------------------------------------------------------

class _Health(BaseHTTPRequestHandler):
    hits = 0

    def log_message(self, *a):
        pass

    def do_GET(self):
        type(self).hits += 1
        body = json.dumps({"data": [{"id": "openai/gpt-oss-120b", "root": "openai/gpt-oss-120b"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _foreign_server_on_launch(port: int, servers: list[ThreadingHTTPServer]):
    """An emit that binds a foreign HTTP server (answering /health 200) on the port the moment the server step
    shows its command: after its pre-launch port check, before the child binds."""
    events: list[Any] = []

    def emit(e: Any) -> None:
        events.append(e)
        if isinstance(e, Command) and e.role == "serve" and not servers:
            srv = ThreadingHTTPServer(("127.0.0.1", port), _Health)
            threading.Thread(target=srv.serve_forever, daemon=True).start()
            servers.append(srv)
    return events, emit


def _server_ctx(tmp_path: Path, emit: Any, **values: Any) -> StepContext:
    prof = load_profile("demo").with_values({"server.port": free_port(), "server.startup_timeout_s": 60,
                                            "simulation.time_scale": 0.05, **values})
    env = {**child_env(tmp_path), "SPECDEC_SIM": json.dumps({"time_scale": 0.05, "vllm_version": "0.24.0"})}
    return StepContext(profile=prof, run=RunDir(tmp_path / "run"), emit=emit,
                       ph=Placeholders(run_dir=str(tmp_path / "run"), python=sys.executable), environ=env)


async def _never_ready_beside_a_foreign_server(ctx) -> tuple[ServerRun, list]:
    """Launch the baseline server of `ctx` while a foreign server takes its port at launch; it must never be
    ready. Returns the ServerRun (stopped) and the events it emitted."""
    servers: list[ThreadingHTTPServer] = []
    events, emit = _foreign_server_on_launch(ctx.profile.server.port, servers)
    ctx.emit = emit
    sr = ServerRun(ctx, "baseline", False)
    sr.vllm_version = "0.24.0"
    try:
        assert await sr.launch()
        assert not await sr.wait_ready()
    finally:
        for s in servers:  # first: our stop waits for the port to be free
            s.shutdown()
            s.server_close()
        await sr.stop()
    return sr, events


async def test_a_child_that_cannot_bind_fails_at_once_never_ready_from_a_foreign_health(tmp_path):
    ctx = _server_ctx(tmp_path, None)
    port = ctx.profile.server.port
    sr, events = await _never_ready_beside_a_foreign_server(ctx)
    facts = {f.name: f for f in events if isinstance(f, Fact)}
    assert facts["startup"].status == "fail" and facts["startup"].value == "server exited with code 1"
    assert "Address already in use" in facts["startup"].detail  # the decisive line of its log
    (d,) = [e for e in events if isinstance(e, Diagnosis)]
    assert d.id == "port-in-use"
    assert f"127.0.0.1:{port} is held by pid {os.getpid()}" in d.evidence[-1]  # the foreign server: this process
    assert sr.result_facts["startup"]["seconds"] is None and "ready_by" not in sr.result_facts["startup"]


async def test_a_foreign_health_is_not_our_servers_readiness(tmp_path):
    """A child that never binds (a sleeper) while a foreign server answers /health on its port: not ready; the
    startup fails at its timeout naming the foreign socket's process."""
    ctx = _server_ctx(tmp_path, None, **{"server.startup_timeout_s": 3,
                                         "server.command": [sys.executable, "-c", "import time; time.sleep(600)"]})
    sr, events = await _never_ready_beside_a_foreign_server(ctx)
    assert _Health.hits > 0  # the foreign server did answer
    notes = [e.text for e in events if isinstance(e, Notice) and "answered /health" in e.text]
    assert len(notes) == 1 and f"belongs to pid {os.getpid()}" in notes[0]
    assert "does not count as ready" in notes[0]
    facts = {f.name: f for f in events if isinstance(f, Fact)}
    assert facts["startup"].status == "fail" and facts["startup"].value.startswith("not ready after")
    assert f"belongs to pid {os.getpid()}" in facts["startup"].detail


# -- two runs on one host --------------------------------------------------------------------------------------

def _spawn(tmp_path: Path, profile: Path, run_dir: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tui", "--profile", str(profile), "--headless", "--run-dir",
                             str(run_dir)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_two_runs_started_at_once_the_second_refuses_naming_the_first(tmp_path):
    prof = demo_variant(tmp_path, "shared-port")
    env = {k: v for k, v in child_env(tmp_path).items() if k != hostlock.ENV_DIR}  # the default directory
    a_dir, b_dir = tmp_path / "run-a", tmp_path / "run-b"
    a, b = _spawn(tmp_path, prof, a_dir, env), _spawn(tmp_path, prof, b_dir, env)
    outs = {}
    try:
        for p in (a, b):
            outs[p.pid] = p.communicate(timeout=600)[0]
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
    states = {p.pid: json.loads((d / "state.json").read_text()) for p, d in ((a, a_dir), (b, b_dir))}
    refused = [p for p in (a, b) if states[p.pid]["steps"]["env"]["status"] == "failed"]
    assert len(refused) == 1, outs
    lose = refused[0]
    win = b if lose is a else a
    win_dir, lose_dir = (a_dir, b_dir) if win is a else (b_dir, a_dir)
    assert lose.returncode == 1
    port = load_profile(str(prof)).server.port
    text = " ".join(outs[lose.pid].split())  # rich wraps long lines
    assert f"port 127.0.0.1:{port} is held by specdec-tui pid {win.pid} (run dir {win_dir})" in text
    state = json.loads((lose_dir / "state.json").read_text())
    env_step = state["steps"]["env"]
    assert env_step["status"] == "failed"
    assert f"held by specdec-tui pid {win.pid} (user " in env_step["summary"]
    assert f"run dir {win_dir}" in env_step["summary"] and "this run launches nothing" in env_step["summary"]
    assert not list(lose_dir.glob("*.serve.log")) and not list(lose_dir.glob("*.bench.log"))  # nothing launched
    assert {state["steps"][s]["status"] for s in ("baseline", "eagle3", "results")} == {"skipped"}
    # The first run measured its own server, alone (its verdict is the simulator's numbers': not asserted).
    rep = load_report(win_dir)
    assert rep["comparison"]["output_throughput_speedup"] > 0 and not rep["contaminated"]
    wstate = states[win.pid]
    assert [wstate["steps"][s]["status"] for s in ("env", "baseline", "eagle3")] == ["passed"] * 3
    for sid in ("baseline", "eagle3"):
        iso = wstate["steps"][sid]["facts"]["bench"]["isolation"]
        assert iso["checked"] and not iso["contaminated"]
        assert iso["server_requests"] == iso["bench_requests"] == wstate["steps"][sid]["facts"]["bench"]["completed"]
        assert iso["server_tokens"] == iso["bench_tokens"]


# -- a foreign client during a bench ---------------------------------------------------------------------------

class Hammer(threading.Thread):
    """Sends requests to the server from the moment `start` appears in the run directory (the bench process has
    started) until `stop` appears (the bench wrote its result), one at a time."""

    def __init__(self, run_dir: Path, port: int, start: str, stop: str):
        super().__init__(daemon=True)
        self.run_dir, self.url, self.start_name, self.stop_name = run_dir, f"http://127.0.0.1:{port}", start, stop
        self.sent = 0
        self.error = ""

    def run(self) -> None:
        if not wait_for(lambda: (self.run_dir / self.start_name).exists(), timeout=600, interval=0.01):
            self.error = f"{self.start_name} never appeared"
            return
        try:
            with httpx.Client(timeout=60, trust_env=False) as c:
                model = c.get(self.url + "/v1/models").json()["data"][0]["id"]
                while not (self.run_dir / self.stop_name).exists():
                    c.post(self.url + "/v1/completions",
                           json={"model": model, "prompt": "1 2 3 4", "max_tokens": 8, "temperature": 0})
                    self.sent += 1
        except httpx.HTTPError as exc:
            self.error = str(exc)


def _run(tmp_path: Path, prof: Path, run_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(child_env(tmp_path), SPECDEC_LOCK_DIR=str(tmp_path / "locks"))
    return subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--run-dir",
                           str(run_dir)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=900)


def test_a_foreign_client_during_a_tune_repeat_contaminates_it_and_only_it(tmp_path):
    prof = tune_variant(tmp_path, "shared", tune__num_speculative_tokens=[1], tune__repeats=3,
                        tune__workloads=["sonnet"], tune__probe_prompts=0, benchmark__num_prompts=12)
    port = load_profile(str(prof)).server.port
    run_dir = tmp_path / "run"
    hammer = Hammer(run_dir, port, "baseline.sonnet.r2.bench.log", "baseline.sonnet.r2.json")
    hammer.start()
    r = _run(tmp_path, prof, run_dir)
    hammer.join(timeout=60)
    out = " ".join((r.stdout + r.stderr).split())
    assert hammer.sent > 0, (hammer.error, out[-3000:])
    state = json.loads((run_dir / "state.json").read_text())
    base = state["steps"]["baseline"]
    reps = base["facts"]["repeats"]["sonnet"]
    bad = reps[1]["contaminated"]
    assert 1 <= bad["foreign_requests"] <= hammer.sent and bad["server_requests"] > bad["bench_requests"]
    assert bad["text"].startswith(f"the server finished {bad['server_requests']} requests, the bench sent "
                                  f"{bad['bench_requests']}")
    for rec in (reps[0], reps[2], *state["steps"]["eagle3-k1"]["facts"]["repeats"]["sonnet"]):
        assert "contaminated" not in rec and rec["isolation"]["checked"] and not rec["isolation"]["contaminated"]
    assert base["status"] == "warned" and "contaminated sonnet r2" in base["summary"]
    assert "contaminated sonnet r2: the server finished" in out  # one headless line
    assert (run_dir / "baseline.sonnet.r2.json").is_file()  # kept on disk
    rep = load_report(run_dir)
    assert rep["contaminated"] == [{"arm": "baseline", "bench": "sonnet", "repeat": 2, "measured_again": False,
                                    "result_file": "baseline.sonnet.r2.json", "text": bad["text"]}]
    kept = [json.loads((run_dir / f"baseline.sonnet.r{i}.json").read_text())["output_throughput"] for i in (1, 3)]
    c = rep["matrix"]["cells"]["baseline"]["sonnet"]
    assert c["repeats"] == 2 and c["output_throughput"]["values"] == pytest.approx(kept)
    md = (run_dir / "report.md").read_text()
    assert "## Contaminated benchmarks" in md and f"- baseline sonnet r2 (`baseline.sonnet.r2.json`): {bad['text']}" in md
    assert any(d["id"] == "bench-contaminated" and d["step"] == "baseline" for d in rep["diagnostics"])

    # Continuing the run measures that repeat again; the contaminated result is set aside, not deleted.
    r2 = _run(tmp_path, prof, run_dir)
    out2 = " ".join((r2.stdout + r2.stderr).split())
    assert "baseline.sonnet.r2.json was contaminated" in out2
    assert (run_dir / "baseline.sonnet.r2.json.contaminated").is_file()
    state = json.loads((run_dir / "state.json").read_text())
    assert not [x for x in state["steps"]["baseline"]["facts"]["repeats"]["sonnet"] if "contaminated" in x]
    assert "baseline.sonnet.r2.json was contaminated" in out2 and "measured again" in out2  # said live too
    rep = load_report(run_dir)
    assert rep["matrix"]["cells"]["baseline"]["sonnet"]["repeats"] == 3
    # the report still names the earlier bench: kept as evidence, replaced by the new measurement
    assert rep["contaminated"] == [{"arm": "baseline", "bench": "sonnet", "repeat": 2, "measured_again": True,
                                    "result_file": "baseline.sonnet.r2.json.contaminated", "text": bad["text"]}]
    md = (run_dir / "report.md").read_text()
    assert f"- baseline sonnet r2 (`baseline.sonnet.r2.json.contaminated`, measured again): {bad['text']}" in md


def test_a_foreign_client_during_a_two_arm_bench_gives_no_speedup(tmp_path):
    prof = demo_variant(tmp_path, "two-arm-shared", benchmark__num_prompts=12)
    port = load_profile(str(prof)).server.port
    run_dir = tmp_path / "run"
    hammer = Hammer(run_dir, port, "baseline.bench.log", "baseline.json")
    hammer.start()
    r = _run(tmp_path, prof, run_dir)
    hammer.join(timeout=60)
    out = " ".join((r.stdout + r.stderr).split())
    assert hammer.sent > 0, (hammer.error, out[-3000:])
    assert r.returncode == 1, out[-3000:]
    state = json.loads((run_dir / "state.json").read_text())
    bench = state["steps"]["baseline"]["facts"]["bench"]
    assert state["steps"]["baseline"]["status"] == "failed" and bench["contaminated"]["foreign_requests"] >= 1
    assert state["steps"]["eagle3"]["status"] == "skipped"
    assert "contaminated bench: the server finished" in out
    assert (run_dir / "baseline.json").is_file()
    rep = load_report(run_dir)
    assert "baseline" not in rep["runs"] and rep["comparison"]["output_throughput_speedup"] is None
    assert [(c["arm"], c["repeat"]) for c in rep["contaminated"]] == [("baseline", None)]
    assert rep["verdict"]["text"] == "Failed at Baseline server: Another client used the server during a benchmark."

    # Run again, alone: the baseline is measured again, the contaminated result is kept as evidence and named.
    r2 = _run(tmp_path, prof, run_dir)
    out2 = " ".join((r2.stdout + r2.stderr).split())
    assert "baseline.json was contaminated" in out2, out2[-3000:]
    assert (run_dir / "baseline.json.contaminated").is_file() and (run_dir / "baseline.json").is_file()
    rep = load_report(run_dir)
    assert rep["comparison"]["output_throughput_speedup"] is not None, out2[-3000:]
    assert rep["contaminated"] == [{"arm": "baseline", "bench": "sonnet", "repeat": None, "measured_again": True,
                                    "result_file": "baseline.json.contaminated", "text": bench["contaminated"]["text"]}]


def test_tune_parallel_skips_a_port_another_run_holds(tmp_path):
    """tune.parallel picks extra ports counting up from server.port: one another run has locked (its server not up
    yet, so the port still binds) is skipped, and the ports it picks are locked for this run."""
    prof = tune_variant(tmp_path, "par-shared", tune__workloads=["sonnet"], tune__repeats=1, tune__probe_prompts=0,
                        tune__parallel=True)
    port = load_profile(str(prof)).server.port
    env = dict(child_env(tmp_path), SPECDEC_LOCK_DIR=str(tmp_path / "locks"))
    holder = _holder(env, "/runs/other", port + 1, 0, 0)
    try:
        r = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--run-dir",
                            str(tmp_path / "run")], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=900)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert "tune.parallel: 3 of 3 arm(s) at once" in r.stderr, r.stderr[-3000:]
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    ports = [state["steps"][sid]["facts"]["placement"]["port"] for sid in ("baseline", "eagle3-k1", "eagle3-k2")]
    assert ports[0] == port and port + 1 not in ports and len(set(ports)) == 3
    for p in ports:  # each was this run's: its lock file names it
        assert hostlock.read_holder(tmp_path / "locks" / f"port-{p}.lock").run_dir == str(tmp_path / "run")
