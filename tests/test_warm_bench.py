"""The warm bench runner (issue 23): an arm's benches in one warm process, each from exactly its argv.

Four layers, each with real processes:
- the runner script (tui/tools/warm_bench.py) driven over its stdin: exit statuses as a fresh interpreter gives them,
  `sys.argv` / `sys.path[0]` / `__main__` as `python script` and `python -m mod` set them, the process put back the
  way a fresh one starts between jobs, a quiet warm-up, Ctrl+C;
- the app's client (tui/core/proc/warm.py): per-bench logs and callbacks, a runner that exits mid-bench, stop() that
  leaves no process behind;
- the rule (tui/core/plan/benchmode.py) and the plan's statement of it (`--show-commands`);
- the engine (tui/core/steps/benchrun.py through run_benchmark and headless runs on the simulator): one runner per
  arm, a bench that raises, the fallbacks, a timeout, Ctrl+C, and the same results warm or not.
The real vLLM's warm path is tests/realvllm/test_warm_real.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from bad_inputs_util import MARK_VAR, leftovers_after, stalled_headless
from e2e_util import FAST_SIM, REPO, child_env, free_port
from tui.core.events import Command, Notice
from tui.core.plan import build as plan
from tui.core.plan.benchmode import bench_mode
from tui.core.plan.commands import Placeholders
from tui.core.proc.warm import WarmRunner
from tui.core.profile.model import load_profile
from tui.core.steps.base import StepContext
from tui.core.steps.benchrun import BenchChild, stop_runner
from tui.core.store.rundir import RunDir

RUNNER = REPO / "tui" / "tools" / "warm_bench.py"
FAKE = REPO / "tests" / "fixtures" / "fakes" / "warm_fake_vllm.py"

PROG = '''import os, sys
a = sys.argv[1:]
print("argv0=" + sys.argv[0], "path0=" + sys.path[0], "name=" + __name__, "args=" + ",".join(a), flush=True)
if a[0] == "exit":
    sys.exit(int(a[1]) if a[1].lstrip("-").isdigit() else a[1])
if a[0] == "raise":
    raise ValueError("boom " + a[1])
if a[0] == "state":
    print("leak=" + os.environ.get("PROG_LEAK", "-"), "stdin=" + repr(sys.stdin.read()),
          "nonce=" + os.environ.get("SPECDEC_WARM_NONCE", "-"), flush=True)
    os.environ["PROG_LEAK"] = "1"
    import progwarn  # a module stays imported between jobs, and so does its once-per-location registry
    progwarn.warn()
if a[0] == "sleep":
    import subprocess, time
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("sleeping", flush=True)
    time.sleep(600)
'''


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _runner(tmp_path: Path, jobs: list[dict], nonce: str = "abc123", timeout: float = 60) -> tuple[int, str]:
    """Run the runner script with `jobs` on stdin (then end of input); (exit status, merged output)."""
    p = subprocess.run([sys.executable, str(RUNNER)], input="".join(json.dumps(j) + "\n" for j in jobs),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, timeout=timeout,
                       env=dict(os.environ, PYTHONUNBUFFERED="1", SPECDEC_WARM_NONCE=nonce))
    return p.returncode, p.stdout


def _prog(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    prog = d / "prog"
    prog.write_text(f"#!{sys.executable}\n" + PROG)
    prog.chmod(0o755)
    (d / "progwarn.py").write_text("import warnings\n\n\ndef warn():\n"
                                   "    warnings.warn('once per location', UserWarning)\n")
    return prog


def _split(out: str, nonce: str = "abc123") -> list[tuple[list[str], str, int]]:
    """[(the job's output lines, its id, its exit status)] from the runner's merged output."""
    jobs, lines = [], []
    for line in out.splitlines():
        mark = f"[specdec-warm {nonce}] "
        if line.startswith(mark):
            jid, _, rc = line[len(mark):].split()
            jobs.append((lines, jid, int(rc)))
            lines = []
        else:
            lines.append(line)
    return jobs


# ------------------------------------------------------------------------------------------- the runner script

def test_each_job_runs_from_its_argv_as_main_with_a_fresh_interpreters_exit_status(tmp_path):
    prog = _prog(tmp_path)
    job = lambda *args: {"id": args[0], "kind": "path", "target": str(prog), "args": list(args[1:])}  # noqa: E731
    rc, out = _runner(tmp_path, [job("1", "ok", "x"), job("2", "exit", "3"), job("3", "exit", "a message"),
                                 job("4", "raise", "two"), job("5", "exit", "0"), job("6", "ok", "again")])
    assert rc == 0, out
    got = _split(out)
    assert [(j, r) for _, j, r in got] == [("1", 0), ("2", 3), ("3", 1), ("4", 1), ("5", 0), ("6", 0)]
    first = got[0][0][0]
    assert f"argv0={prog}" in first and f"path0={prog.parent}" in first and "name=__main__" in first
    assert "args=ok,x" in first
    assert "a message" in got[2][0]  # SystemExit("a message"): printed, status 1
    assert "Traceback (most recent call last):" in got[3][0] and got[3][0][-1] == "ValueError: boom two"
    assert "args=ok,again" in got[5][0][0]  # the runner carries on after a bench that raised


def test_a_module_job_runs_as_python_dash_m_would(tmp_path):
    (tmp_path / "mymod.py").write_text(PROG)
    rc, out = _runner(tmp_path, [{"id": "1", "kind": "module", "target": "mymod", "args": ["exit", "5"]}])
    lines, jid, code = _split(out)[0]
    assert (rc, jid, code) == (0, "1", 5), out
    assert f"argv0={tmp_path / 'mymod.py'}" in lines[0] and f"path0={tmp_path}" in lines[0]
    assert "name=__main__" in lines[0]


def test_between_jobs_the_process_is_put_back_as_a_fresh_one_starts(tmp_path):
    """A job's environment change is gone for the next, a once-per-location warning shows again, and a job's stdin
    is /dev/null (not the runner's job channel)."""
    prog = _prog(tmp_path)
    job = {"kind": "path", "target": str(prog), "args": ["state"]}
    rc, out = _runner(tmp_path, [dict(job, id="1"), dict(job, id="2")])
    assert rc == 0, out
    (a, _, ra), (b, _, rb) = _split(out)
    assert ra == rb == 0
    for lines in (a, b):
        assert "leak=- stdin='' nonce=-" in lines, lines
        assert sum("UserWarning: once per location" in ln for ln in lines) == 1, lines


def test_a_quiet_job_shows_its_output_only_when_it_fails(tmp_path):
    prog = _prog(tmp_path)
    rc, out = _runner(tmp_path, [{"id": "warm", "kind": "path", "target": str(prog), "args": ["exit", "0"],
                                  "quiet": True},
                                 {"id": "w2", "kind": "path", "target": str(prog), "args": ["exit", "4"],
                                  "quiet": True}])
    (a, _, ra), (b, _, rb) = _split(out)
    assert (rc, ra, rb) == (0, 0, 4) and a == [] and any("args=exit,4" in ln for ln in b), out


def test_ctrl_c_ends_the_job_with_130_and_the_runner_with_it(tmp_path):
    prog = _prog(tmp_path)
    p = subprocess.Popen([sys.executable, str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, cwd=tmp_path, start_new_session=True,
                         env=dict(os.environ, PYTHONUNBUFFERED="1", SPECDEC_WARM_NONCE="n1"))
    try:
        p.stdin.write(json.dumps({"id": "1", "kind": "path", "target": str(prog), "args": ["sleep"]}) + "\n")
        p.stdin.flush()
        first = p.stdout.readline()
        assert "args=sleep" in first
        assert p.stdout.readline().strip() == "sleeping"
        os.killpg(p.pid, signal.SIGINT)
        out = p.stdout.read()
        assert p.wait(timeout=30) == 130
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert "KeyboardInterrupt" in out and out.rstrip().endswith("[specdec-warm n1] 1 exit 130")


def test_a_bad_job_line_or_no_nonce_ends_the_runner_with_2(tmp_path):
    p = subprocess.run([sys.executable, str(RUNNER)], input="not json\n", capture_output=True, text=True,
                       timeout=30, env=dict(os.environ, SPECDEC_WARM_NONCE="n"))
    assert p.returncode == 2 and "bad job" in p.stderr
    p = subprocess.run([sys.executable, str(RUNNER)], input="", capture_output=True, text=True, timeout=30,
                       env={k: v for k, v in os.environ.items() if k != "SPECDEC_WARM_NONCE"})
    assert p.returncode == 2 and "usage: SPECDEC_WARM_NONCE=<nonce> warm_bench.py" in p.stderr


# ------------------------------------------------------------------------------------------- the app's client

async def test_the_client_gives_each_bench_its_own_log_and_callbacks(tmp_path):
    prog = _prog(tmp_path)
    runner = WarmRunner([sys.executable, str(RUNNER)], dict(os.environ, PYTHONUNBUFFERED="1"),
                        tmp_path / "runner.log", {"kind": "path", "target": str(prog), "args": ["exit", "0"]})
    await runner.start()
    try:
        assert await runner.warmed(60) == 0
        pid = runner.pid
        seen: dict[str, list[str]] = {"a": [], "b": []}
        for name, args in (("a", ["ok", "first"]), ("b", ["exit", "9"])):
            argv = ["prog", *args]
            job = await runner.submit({"kind": "path", "target": str(prog), "args": args}, tmp_path / f"{name}.log",
                                      argv, on_line=lambda ln, ts, n=name: seen[n].append(ln))
            rc = await asyncio.wait_for(job.wait(), 60)
            assert rc == (0 if name == "a" else 9) and not job.ended_by_runner_exit
        assert runner.pid == pid and runner.alive
        assert seen["a"] == [f"argv0={prog} path0={prog.parent} name=__main__ args=ok,first"]
        assert seen["b"] == [f"argv0={prog} path0={prog.parent} name=__main__ args=exit,9"]
        log_a = (tmp_path / "a.log").read_text().splitlines()
        assert log_a[0].endswith("$ prog ok first") and "args=ok,first" in log_a[1]
        assert log_a[-1].endswith(f"[specdec-warm {runner.nonce}] 1 exit 0") and len(log_a) == 3
        rlog = (tmp_path / "runner.log").read_text()
        assert "warm exit 0" in rlog and "args=" not in rlog and "(between benches: bench 2 exited 9)" in rlog
    finally:
        await runner.stop()
    assert not runner.alive


async def test_a_runner_that_exits_mid_bench_gives_the_bench_its_exit_status(tmp_path):
    script = tmp_path / "die.py"
    script.write_text("import os, sys\nprint('going', flush=True)\nos._exit(int(sys.argv[1]))\n")
    runner = WarmRunner([sys.executable, str(RUNNER)], dict(os.environ), tmp_path / "runner.log")
    await runner.start()
    try:
        job = await runner.submit({"kind": "path", "target": str(script), "args": ["7"]}, tmp_path / "b.log", ["die"])
        assert await asyncio.wait_for(job.wait(), 60) == 7
        assert job.ended_by_runner_exit and not runner.alive
        assert "going" in (tmp_path / "b.log").read_text()
    finally:
        await runner.stop()


async def test_stop_takes_the_bench_and_everything_it_started_down(tmp_path):
    prog = _prog(tmp_path)
    runner = WarmRunner([sys.executable, str(RUNNER)], dict(os.environ, PYTHONUNBUFFERED="1"), tmp_path / "r.log")
    await runner.start()
    lines: list[str] = []
    await runner.submit({"kind": "path", "target": str(prog), "args": ["sleep"]}, tmp_path / "b.log", ["p"],
                        on_line=lambda ln, ts: lines.append(ln))
    for _ in range(300):
        if "sleeping" in lines:
            break
        await asyncio.sleep(0.1)
    tree = [p.pid for p in runner.proc.tree()]
    assert len(tree) >= 2  # the runner and the bench's own child
    await runner.stop(grace_s=2)
    assert all(gone(pid) for pid in tree)
    assert runner.job.done.done() and runner.job.done.result() != 0


# ------------------------------------------------------------------------------------------- the rule and the plan

def _tune(tmp_path: Path, command: list[str], name: str = "warm-rule", **values) -> object:
    path = tmp_path / f"{name}.toml"
    vals = {"server.command": command, "tune.repeats": 2, "tune.workloads": ["sonnet"],
            "tune.num_speculative_tokens": [1], "name": name, **values}
    path.write_text(load_profile("tune-demo").with_values(vals).to_toml())
    return load_profile(str(path))


def test_the_rule_is_about_what_the_command_is(tmp_path):
    prog = _prog(tmp_path)
    env = dict(os.environ, PATH=f"{prog.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    script = bench_mode(_tune(tmp_path, ["prog"]), env)
    assert (script.warm, script.python, script.kind, script.target, script.skip) == (True, (sys.executable,), "path",
                                                                                    str(prog), 1)
    assert script.job(["prog", "bench", "serve", "--seed", "1"])["args"] == ["bench", "serve", "--seed", "1"]
    assert script.warm_up_job(["prog", "bench", "serve", "--x"])["args"] == ["bench", "serve", "--help"]
    module = bench_mode(_tune(tmp_path, ["{python}", "-u", "-m", "tui.sim"]), env)
    assert (module.warm, module.python, module.kind, module.target, module.skip) == (True, (sys.executable, "-u"),
                                                                                    "module", "tui.sim", 4)
    by_path = bench_mode(_tune(tmp_path, ["{python}", str(FAKE)]), env)
    assert (by_path.kind, by_path.target, by_path.skip) == ("path", str(FAKE), 2)
    assert "one warm process per arm" in module.text() and "tui.sim's own bench code" in module.text()

    def why(command, env=env, **values) -> str:
        m = bench_mode(_tune(tmp_path, command, **values), env)
        assert not m.warm
        return m.text()

    assert 'benchmark.warm = "off"' in why(["prog"], **{"benchmark.warm": "off"})
    assert "one bench" in why(["prog"], **{"tune.repeats": 1})
    assert "VLLM_USE_RUST_BENCH" in why(["prog"], env=dict(env, VLLM_USE_RUST_BENCH="1"))
    assert "-c" in why(["{python}", "-c", "print(1)"])
    sh = tmp_path / "bin" / "wrapper"
    sh.write_text("#!/bin/sh\nexec prog \"$@\"\n")
    sh.chmod(0o755)
    assert "not a Python program" in why(["wrapper"])
    assert "decided at run time" in why(["no-such-vllm-here"])
    assert bench_mode(load_profile("demo"), env).text().startswith("one process per bench (each server runs one")


def test_the_plan_states_the_mode_and_a_run_records_how_each_bench_ran(tmp_path):
    prof = _tune(tmp_path, ["{python}", "-m", "tui.sim"])
    text = plan.show_commands_text(prof, str(tmp_path / "run"), "0.29.0", "given")
    assert "# Benches: one warm process per arm runs its benches (tui.sim's own bench code" in text
    off = _tune(tmp_path, ["{python}", "-m", "tui.sim"], name="off", **{"benchmark.warm": "off"})
    assert '# Benches: one process per bench (benchmark.warm = "off")' in plan.show_commands_text(off, "RUN")
    run = RunDir(tmp_path / "r")
    plan.record_command(run.path, "baseline", "bench", ["vllm", "bench"], "vllm bench", run.write_json,
                        "in the arm's warm runner (pid 1)")
    assert plan.recorded_commands(run.path)[0]["how"] == "in the arm's warm runner (pid 1)"
    assert "# baseline: bench (in the arm's warm runner (pid 1))" in plan.recorded_text(run.path)


def test_a_bad_warm_value_is_one_paragraph(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('extends = "tune-demo"\nname = "bad"\n[benchmark]\nwarm = "always"\n')
    r = subprocess.run([sys.executable, "-m", "tui", "--profile", str(path), "--show-commands"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "benchmark.warm" in r.stderr and "'auto', 'off'" in r.stderr
    assert "Traceback" not in r.stderr


# ------------------------------------------------------------------------------------------- the engine's side

def _ctx(tmp_path: Path, fake_bench: str, **values) -> tuple[StepContext, list]:
    prof = _tune(tmp_path, ["{python}", str(FAKE)], **values)
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    events: list = []
    env = dict(os.environ, FAKE_BENCH=fake_bench, PYTHONPATH=str(REPO))
    return StepContext(profile=prof, run=RunDir(run), emit=events.append, ph=Placeholders(run_dir=str(run)),
                       environ=env), events


def _sr(ctx: StepContext) -> SimpleNamespace:
    return SimpleNamespace(step="baseline", prof=ctx.profile, bench_runner=None, bench_warm_off="")


async def _bench(ctx: StepContext, sr, seed: int, timeout: float = 60) -> tuple[int | None, BenchChild, list[str]]:
    """One bench of the fake through BenchChild, as run_benchmark drives it; (exit status or None on a timeout)."""
    result = ctx.run.file(f"b{seed}.json")
    argv = plan.bench_argv(ctx.profile, str(result), "data.jsonl", "0.29.0", ctx.ph, repeat=seed + 1)
    lines: list[str] = []
    child = BenchChild(ctx, sr, argv, dict(ctx.environ, PYTHONUNBUFFERED="1"), ctx.run.file(f"b{seed}.bench.log"),
                       lambda ln, ts: lines.append(ln), lambda t: None,
                       lambda how: ctx.emit(Command("baseline", "bench", tuple(argv), "", how=how)))
    await child.start()
    try:
        rc = await asyncio.wait_for(child.wait(), timeout)
    except asyncio.TimeoutError:
        await child.stop(grace_s=2)
        return None, child, lines
    await child.finish()
    return rc, child, lines


async def test_an_arms_benches_share_one_runner_and_a_bench_that_raises_does_not_end_it(tmp_path):
    ctx, events = _ctx(tmp_path, "0=ok,1=raise,2=exit3,3=ok")
    sr = _sr(ctx)
    try:
        rc0, c0, l0 = await _bench(ctx, sr, 0)
        pid = sr.bench_runner.pid
        rc1, c1, l1 = await _bench(ctx, sr, 1)
        rc2, _, _ = await _bench(ctx, sr, 2)
        rc3, c3, l3 = await _bench(ctx, sr, 3)
        assert (rc0, rc1, rc2, rc3) == (0, 1, 3, 0)
        assert sr.bench_runner.pid == pid and c0.how == c3.how == f"in the arm's warm runner (pid {pid})"
        assert f"fake bench pid={pid} seed=0" in l0 and f"fake bench pid={pid} seed=3" in l3
        assert l1[-1] == "RuntimeError: fake bench failed at seed 1"
        log1 = (ctx.run.path / "b1.bench.log").read_text()
        assert "Traceback (most recent call last)" in log1 and "exit 1" in log1.splitlines()[-1]
        assert json.loads((ctx.run.path / "b3.json").read_text())["pid"] == pid
        hows = [e.how for e in events if isinstance(e, Command) and e.role == "bench"]
        assert hows == [f"in the arm's warm runner (pid {pid})"] * 4
        assert [e for e in events if isinstance(e, Command) and e.role == "tool"][0].argv[1] == str(RUNNER)
    finally:
        await stop_runner(ctx, sr)
    assert not ctx.cleanups and gone(pid)


async def test_a_hung_bench_takes_its_runner_with_it_and_the_next_bench_gets_a_new_one(tmp_path):
    ctx, events = _ctx(tmp_path, "0=ok,1=stall,2=ok")
    sr = _sr(ctx)
    try:
        await _bench(ctx, sr, 0)
        first = sr.bench_runner.pid
        rc, child, lines = await _bench(ctx, sr, 1, timeout=10)
        assert rc is None and sr.bench_runner is None and gone(first)
        assert (ctx.run.path / "b1.bench.log").read_text().count("0/10") == 1
        rc2, child2, l2 = await _bench(ctx, sr, 2)
        assert rc2 == 0 and sr.bench_runner.pid != first and child2.how.endswith(f"(pid {sr.bench_runner.pid})")
        assert not sr.bench_warm_off
    finally:
        await stop_runner(ctx, sr)
    assert not ctx.cleanups


@pytest.mark.parametrize("case", ["warm-up fails", "runner dies"])
async def test_where_the_runner_cannot_be_used_the_arm_falls_back_to_a_process_per_bench(tmp_path, case):
    ctx, events = _ctx(tmp_path, "help=fail,0=ok,1=ok" if case == "warm-up fails" else "0=die,1=ok")
    sr = _sr(ctx)
    try:
        rc0, c0, l0 = await _bench(ctx, sr, 0)
        rc1, c1, l1 = await _bench(ctx, sr, 1)
    finally:
        await stop_runner(ctx, sr)
    notices = [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]
    if case == "warm-up fails":
        assert rc0 == rc1 == 0 and c0.how == c1.how == ""  # both ran as their own process
        assert f"start-up (`{sys.executable} {FAKE} bench serve --help` in its interpreter) ended with exit status 1" \
            in notices[0]
        assert "fake warm-up failure" in (ctx.run.path / "baseline.bench-runner.log").read_text()
    else:
        assert rc0 == 7 and c0.how.startswith("in the arm's warm runner") and "dying" in l0
        assert rc1 == 0 and c1.how == ""
        assert "exited by itself during this bench (exit status 7" in notices[0]
    assert "remaining benches run one process each" in notices[0] and len(notices) == 1
    assert sr.bench_warm_off and not ctx.cleanups


# ------------------------------------------------------------------------------------------- headless runs

def _variant(tmp_path: Path, name: str, **updates) -> Path:
    values = dict(FAST_SIM, **{"server.port": free_port(), "name": name, "tune.repeats": 2, "tune.adaptive": False,
                               "tune.workloads": ["sonnet"], "tune.num_speculative_tokens": [1],
                               "benchmark.num_prompts": 4})
    values.update({k.replace("__", "."): v for k, v in updates.items()})
    path = tmp_path / f"{name}.toml"
    path.write_text(load_profile("tune-demo").with_values(values).to_toml())
    return path


def _headless(tmp_path: Path, prof: Path, run: Path, fake_bench: str = "", steps: str = "") -> tuple[int, str, str]:
    env = child_env(tmp_path)
    env[MARK_VAR] = mark = f"warm-{os.getpid()}-{time.monotonic_ns()}"
    env["FAKE_BENCH"] = fake_bench
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    args = [sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--run-dir", str(run)]
    r = subprocess.run(args + (["--steps", steps] if steps else []), capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=600, stdin=subprocess.DEVNULL)
    return r.returncode, r.stderr, mark


REQUEST_KEYS = ("num_prompts", "completed", "failed", "total_input_tokens", "total_output_tokens", "max_concurrency")


def test_warm_and_per_process_benches_send_the_same_requests_and_record_how_they_ran(tmp_path):
    """The same profile with benchmark.warm auto and off: every result file's request-level numbers are equal (same
    argv, same seed, same prompts), the warm run's benches ran in one runner per arm, and each run says how."""
    runs = {}
    for warm in ("auto", "off"):
        prof = _variant(tmp_path, f"eq-{warm}", benchmark__warm=warm)
        run = tmp_path / f"run-{warm}"
        rc, err, mark = _headless(tmp_path, prof, run, steps="env,dataset,baseline,eagle3-k1")
        assert rc == 0, err[-3000:]
        assert not leftovers_after(mark)
        runs[warm] = run
    names = sorted(p.name for p in runs["auto"].glob("*.sonnet.r*.json"))
    assert len(names) == 4 and names == sorted(p.name for p in runs["off"].glob("*.sonnet.r*.json"))
    for name in names:
        a, b = (json.loads((runs[w] / name).read_text()) for w in ("auto", "off"))
        assert {k: a[k] for k in REQUEST_KEYS} == {k: b[k] for k in REQUEST_KEYS}, name
    rows = {w: plan.recorded_commands(runs[w]) for w in runs}
    warm_benches = [r for r in rows["auto"] if r["role"] == "bench"]
    assert len(warm_benches) == 4 and all(r["how"].startswith("in the arm's warm runner (pid") for r in warm_benches)
    assert len({r["how"] for r in warm_benches}) == 2  # one runner per arm
    assert [r["how"] for r in rows["auto"] if r["role"] == "tool" and "warm_bench.py" in r["argv"][1]] == \
        ["the arm's warm bench runner"] * 2
    assert not any("how" in r for r in rows["off"] if r["role"] == "bench")
    for w in runs:  # exactly the argv the plan shows, warm or not (the warm runner's own command included)
        planned = plan.build_plan(load_profile(str(tmp_path / f"eq-{w}.toml")), str(runs[w]), "0.29.0")
        arms = ("baseline", "eagle3-k1")
        assert [r["argv"] for r in rows[w] if r["step"] in arms] == \
            [list(c.argv) for c in planned.commands if c.step in arms]
        assert sum(c.role == "tool" and c.argv[-1] == str(RUNNER) for c in planned.commands) == \
            (sum(c.role == "serve" for c in planned.commands) if w == "auto" else 0)  # one runner per arm
    assert "Each arm's benches ran in one warm process" in (runs["auto"] / "report.md").read_text()
    assert "Each bench ran as a process of its own." in (runs["off"] / "report.md").read_text()
    state = json.loads((runs["auto"] / "state.json").read_text())
    assert {r["ran"] for reps in state["steps"]["baseline"]["facts"]["repeats"].values() for r in reps} == {"warm"}


def test_a_bench_that_raises_in_the_warm_runner_fails_its_arm_with_the_traceback_in_its_log(tmp_path):
    prof = _variant(tmp_path, "raises", server__command=["{python}", str(FAKE)])
    run = tmp_path / "run"
    rc, err, mark = _headless(tmp_path, prof, run, fake_bench="1=raise", steps="env,dataset,baseline")
    assert rc == 1 and "Traceback" not in err and not leftovers_after(mark)
    assert "vllm bench serve exited with code 1" in err and "RuntimeError: fake bench failed at seed 1" in err
    log = (run / "baseline.sonnet.r2.bench.log").read_text()
    assert "Traceback (most recent call last)" in log and "RuntimeError: fake bench failed at seed 1" in log
    assert (run / "baseline.sonnet.r1.json").is_file() and not (run / "baseline.sonnet.r2.json").exists()


@pytest.mark.parametrize("how", ["timeout", "sigint"])
def test_a_stalled_warm_bench_is_stopped_its_output_set_aside_and_nothing_outlives_the_app(tmp_path, how):
    extra = {"benchmark__timeout_s": 25.0} if how == "timeout" else {}
    prof = _variant(tmp_path, f"stall-{how}", server__command=["{python}", str(FAKE)], **extra)
    run = tmp_path / "run"
    mark = f"warm-{how}-{os.getpid()}-{time.monotonic_ns()}"
    rc, err = stalled_headless(tmp_path, mark, ["--profile", str(prof), "--headless", "--steps", "env,dataset,baseline",
                                                "--run-dir", str(run)], how, run / "baseline.sonnet.r2.json", 240, 300,
                               FAKE_BENCH="1=stall")
    assert rc == (130 if how == "sigint" else 1), err[-3000:]
    assert "Traceback" not in err and not leftovers_after(mark)
    assert not (run / "baseline.sonnet.r2.json").exists()
    assert (run / "baseline.sonnet.r2.json.partial").read_text().startswith('{"date"')
    rows = plan.recorded_commands(run)
    assert [r["how"][:27] for r in rows if r["role"] == "bench"] == ["in the arm's warm runner (p"] * 2
    rep = json.loads((run / "report.json").read_text())
    step = {s["id"]: s for s in rep["steps"]}["baseline"]
    assert step["status"] == ("interrupted" if how == "sigint" else "failed")
    assert "baseline.sonnet.r2.json.partial" in step["summary"] + err
    if how == "timeout":
        assert "timed out after 25s" in err
