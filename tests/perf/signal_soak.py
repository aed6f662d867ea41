"""Signal soak (not a test): kill a headless run at random moments and count what is left behind.

    python tests/perf/signal_soak.py                     # 20 trials each of SIGINT, SIGTERM, SIGHUP, SIGKILL, pty-close
    python tests/perf/signal_soak.py --trials 2 --kinds SIGINT,SIGKILL
    python tests/perf/signal_soak.py --trials 5 --seed 7 --keep   # keep the run directories
    python tests/perf/signal_soak.py --shapes tune --trials 3      # only the tune run

Each trial runs a profile of one of two shapes (--shapes, both by default: every kind is tried on each): the
demo's two-arm run (baseline vs EAGLE3) and a small tune run (tune-demo with baseline + k = 1, 2, one repeat on
sonnet), on a free loopback port with the fast simulator timings the e2e tests use, as `specdec-tui --profile P
--headless` in a child process. It waits a random time between 0.2 s and the length of an undisturbed run of
that shape (measured once first, or --max-delay), then:

  SIGINT / SIGTERM / SIGHUP / SIGKILL   sends that signal to the app;
  pty-close                             the app runs on a pseudo-terminal that is its controlling terminal
                                        (setsid --ctty); the soak closes the master side, as when an SSH
                                        connection drops: the kernel hangs up the session and every write
                                        to the terminal fails from then on.

After the app has exited (or been killed after --exit-timeout), it waits for the app's processes to go
(--grace: the watchdog takes the server down after a SIGKILL) and counts, per kind:

  leftover   processes still alive that carry the trial's marker variable (servers, bench, watchdogs)
  state_bad  state.json missing, not strict JSON, or not a valid state (tui.core.store.rundir.read_state, which
             checks the saved facts against tui/core/store/schema.py too)
  report_bad report.json present but not strict JSON or not of the report's shape (tui.core.store.schema; a missing
             report is expected after SIGKILL; counted apart as report_missing)
  fake_result a file under a result's name (baseline.json, eagle3-k1.sonnet.r1.json …) that is not a bench
             result: an interrupted bench must leave its output as *.partial (counted apart as partial)
  tmp        temp files (*.tmp) left in the run directory
  port_busy  the server port still bound after the grace period

and the exit codes seen. It prints a summary table and exits 1 when any leftover or unparseable file was
found. Loopback only; the trials run one after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from e2e_util import FAST_SIM, child_env, demo_variant, free_port, port_is_free  # noqa: E402
from tui.core.store.rundir import RunDirStateError, read_state  # noqa: E402
from tui.core.store.schema import report_problem, result_problem  # noqa: E402

MARK_VAR = "SPECDEC_SOAK_MARK"
KINDS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGKILL", "pty-close")
SHAPES = ("two-arm", "tune")
RESULT_NAME = re.compile(r"^(baseline|eagle3|[a-z0-9]+-k\d+(-[a-z0-9_]+)?)(\.[a-z0-9_-]+\.r\d+)?\.json$")


def make_profile(shape: str, work: Path) -> Path:
    """The trial's profile: the demo (two-arm) or a small tune run (baseline + k = 1, 2, one repeat on sonnet)."""
    if shape == "two-arm":
        return demo_variant(work, "soak")
    from tui.core.profile.model import load_profile

    values = dict(FAST_SIM, **{"benchmark.num_prompts": 6, "benchmark.output_len": 32, "server.port": free_port(),
                               "name": "soak-tune", "tune.num_speculative_tokens": [1, 2], "tune.repeats": 1,
                               "tune.workloads": ["sonnet"], "tune.probe_prompts": 0})
    path = work / "soak-tune.toml"
    path.write_text(load_profile("tune-demo").with_values(values).to_toml())
    return path


def _marked(mark: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get(MARK_VAR) == mark and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


def _strict_json(path: Path) -> bool:
    def bad_constant(c: str):
        raise ValueError(c)

    try:
        json.loads(path.read_text(encoding="utf-8"), parse_constant=bad_constant)
        return True
    except (OSError, ValueError):
        return False


def _drain(fd: int) -> None:
    import select

    while True:
        r, _, _ = select.select([fd], [], [], 0)
        if not r:
            return
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return


def run_trial(kind: str | None, delay: float, work: Path, exit_timeout: float, grace: float,
              shape: str = "two-arm") -> dict:
    work.mkdir(parents=True, exist_ok=True)
    prof = make_profile(shape, work)
    from tui.core.profile.model import load_profile

    port = load_profile(str(prof)).server.port
    run_dir = work / "run"
    env = child_env(work)
    mark = uuid.uuid4().hex
    env[MARK_VAR] = mark
    argv = [sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--run-dir", str(run_dir)]
    master = None
    if kind == "pty-close":
        master, slave = pty.openpty()
        app = subprocess.Popen(["setsid", "--ctty", *argv], cwd=work, env=env, stdin=slave, stdout=slave, stderr=slave,
                               close_fds=True)
        os.close(slave)
    else:
        app = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    t0 = time.monotonic()
    deadline = t0 + delay
    while time.monotonic() < deadline and app.poll() is None:
        if master is not None:
            _drain(master)
        time.sleep(0.02)
    finished_first = app.poll() is not None
    if not finished_first and kind is not None:
        if kind == "pty-close":
            _drain(master)
            os.close(master)
            master = None
        else:
            app.send_signal(getattr(signal, kind))
    try:
        rc = app.wait(timeout=exit_timeout)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
        app.kill()
        rc = app.wait()
    if master is not None:
        os.close(master)
    elapsed = time.monotonic() - t0
    # Let the app's children go (a SIGKILLed app's watchdog stops them).
    end = time.monotonic() + grace
    left = _marked(mark)
    while left and time.monotonic() < end:
        time.sleep(0.25)
        left = _marked(mark)
    leftover = len(left)
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    state = run_dir / "state.json"
    state_bad = False
    if state.exists():
        if not _strict_json(state):
            state_bad = True
        else:
            try:
                read_state(run_dir)
            except RunDirStateError:
                state_bad = True
    elif run_dir.exists() and any(run_dir.iterdir()):
        state_bad = True  # files written but no state: the run cannot be continued
    report = run_dir / "report.json"
    report_missing = not report.exists()
    report_bad = report.exists() and not _strict_json(report)
    if report.exists() and not report_bad:
        report_bad = report_problem(json.loads(report.read_text(encoding="utf-8"))) is not None
    tmp = len(list(run_dir.rglob("*.tmp"))) if run_dir.exists() else 0
    results = [p for p in run_dir.glob("*.json") if RESULT_NAME.match(p.name)] if run_dir.exists() else []
    fake_result = sum(result_problem(p) is not None for p in results)
    partial = len(list(run_dir.glob("*.partial"))) if run_dir.exists() else 0
    port_busy = not port_is_free(port)
    return {"kind": kind or "none", "shape": shape, "delay": round(delay, 2), "rc": rc, "hung": hung,
            "finished_first": finished_first, "elapsed": round(elapsed, 2), "leftover": leftover,
            "state_bad": state_bad, "report_bad": report_bad, "report_missing": report_missing,
            "fake_result": fake_result, "partial": partial, "tmp": tmp, "port_busy": port_busy}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20, help="trials per kind (default 20)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--max-delay", type=float, default=None,
                    help="latest moment for the signal in seconds (default: the length of one undisturbed run)")
    ap.add_argument("--exit-timeout", type=float, default=120.0, help="seconds the app gets to exit after the signal")
    ap.add_argument("--grace", type=float, default=30.0, help="seconds its children get to go after it exits")
    ap.add_argument("--keep", action="store_true", help="keep the trial directories")
    ap.add_argument("--json", action="store_true", help="also print every trial as a JSON line")
    a = ap.parse_args()
    kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or a.trials < 1:
        ap.error(f"unknown kind(s) {bad}; allowed: {', '.join(KINDS)}" if bad else "--trials must be ≥ 1")
    shapes = [x.strip() for x in a.shapes.split(",") if x.strip()]
    if not shapes or [x for x in shapes if x not in SHAPES]:
        ap.error(f"--shapes: give one or more of {', '.join(SHAPES)}")
    if "pty-close" in kinds and shutil.which("setsid") is None:
        ap.error("pty-close needs setsid (util-linux)")
    rng = random.Random(a.seed)
    root = Path(tempfile.mkdtemp(prefix="specdec-soak-"))
    results: list[dict] = []
    try:
        max_delay: dict[str, float] = {}
        for shape in shapes:
            if a.max_delay is not None:
                max_delay[shape] = a.max_delay
                continue
            cal = run_trial(None, 1e9, root / f"calibrate-{shape}", a.exit_timeout * 5, a.grace, shape)
            max_delay[shape] = max(1.0, cal["elapsed"])
            print(f"calibration ({shape}): an undisturbed run took {cal['elapsed']:.1f}s (exit {cal['rc']}); "
                  f"signals land between 0.2s and {max_delay[shape]:.1f}s", file=sys.stderr)
            if cal["rc"] not in (0, 1) or cal["report_missing"]:  # 1: the numbers' verdict (a loaded machine)
                print(f"calibration run did not finish; the soak needs a {shape} run that reaches its report",
                      file=sys.stderr)
                return 2
        plan = [(shape, k) for shape in shapes for k in kinds for _ in range(a.trials)]
        rng.shuffle(plan)
        for i, (shape, kind) in enumerate(plan, 1):
            delay = rng.uniform(0.2, max_delay[shape])
            res = run_trial(kind, delay, root / f"t{i:03d}", a.exit_timeout, a.grace, shape)
            results.append(res)
            flag = "" if not (res["leftover"] or res["state_bad"] or res["report_bad"] or res["tmp"] or res["hung"]
                              or res["fake_result"]) else "  <-- PROBLEM"
            partial = f", {res['partial']} partial" if res["partial"] else ""
            print(f"[{i}/{len(plan)}] {shape:<7} {kind:<9} at {delay:5.1f}s -> rc {res['rc']}"
                  f"{' (finished first)' if res['finished_first'] else ''}; leftover {res['leftover']}, "
                  f"state {'BAD' if res['state_bad'] else 'ok'}, report "
                  f"{'BAD' if res['report_bad'] else ('missing' if res['report_missing'] else 'ok')}"
                  f"{partial}{flag}",
                  file=sys.stderr)
            if a.json:
                print(json.dumps(res))
            if not a.keep:
                shutil.rmtree(root / f"t{i:03d}", ignore_errors=True)
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept: {root}", file=sys.stderr)
    # Summary.
    cols = ("shape", "kind", "trials", "exit codes", "finished 1st", "hung", "leftover", "state_bad", "report_bad",
            "report_missing", "fake_result", "partial", "tmp", "port_busy")
    rows = []
    for shape in shapes:
        for kind in kinds:
            rs = [r for r in results if r["kind"] == kind and r["shape"] == shape]
            codes = Counter(r["rc"] for r in rs)
            rows.append((shape, kind, str(len(rs)), " ".join(f"{c}×{n}" for c, n in sorted(codes.items())),
                         *(str(sum(r[k] for r in rs)) for k in ("finished_first", "hung", "leftover", "state_bad",
                                                                 "report_bad", "report_missing", "fake_result",
                                                                 "partial", "tmp", "port_busy"))))
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    line = "  ".join(c.ljust(w) for c, w in zip(cols, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))
    problems = sum(r["leftover"] + r["state_bad"] + r["report_bad"] + r["hung"] + r["fake_result"] for r in results)
    print(f"\n{len(results)} trials; {problems} problems (leftover processes, unparseable or damaged files, results "
          "that are not results, hung apps)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
