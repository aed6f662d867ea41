"""The app's own cost on the real vLLM (CPU): `specdec-tui --profile cpu --headless --steps baseline,eagle3` vs a
plain bash script replaying that run's own commands.json, alternately (ABAB…) in one invocation.

    python tests/perf/bench_overhead.py                 # 2 app runs and 2 replays, alternating
    python tests/perf/bench_overhead.py --pairs 3 --keep
    python tests/perf/bench_overhead.py --vllm-python /path/to/vllm-venv/bin/python

Needs the real vLLM (tests/realvllm/provision.sh; found there when --vllm-python is not given) and the tiny
models of the `cpu` profile (made on first use: run the cpu profile once first, or its checkpoints step).
Not collected by pytest: wall-clock figures belong here, not in tests.

What is compared (both sides start from nothing in a fresh directory):
  app     the CLI in a child process, from a fresh working directory, on a free loopback port (a profile that
          extends `cpu` and sets only server.port). Its steps are baseline and eagle3: the env, checkpoints and
          dataset steps are left out on purpose, they check the host and have no counterpart in a script. What
          the two server steps do beyond the recorded commands (the vLLM version probe, the /v1/models check,
          the lossless check, /metrics scrapes during the bench, waiting for the server's process group to end)
          is the app's overhead this script measures.
  replay  a bash script generated from that app run's commands.json, run from a fresh directory (every path of
          the app's run directory rewritten to it): each command in order; `tool` commands (the sonnet custom
          JSONL on vLLM >= 0.32) in the foreground; `serve` in the background, then `curl /health` every 1 s until
          it answers, one smoke request (the app's own request body from <step>.smoke.json), the `bench` in the
          foreground, `kill -INT` the server and `wait` for it.

Printed: every run's wall time (in the order they ran), the medians and the ratio app/replay, and per run the
phases as each side's own files record them (the app: state.json's step seconds and its startup, bench and stop
facts; the replay: the timestamps it writes itself).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vllm_python(given: str | None) -> str:
    if given:
        return given
    out = subprocess.run(["bash", str(REPO / "tests" / "realvllm" / "provision.sh")], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip().splitlines()[-1]


def child_env(vpy: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(vpy) + os.pathsep + env.get("PATH", "")
    return env


def run_app(work: Path, port: int, env: dict[str, str], steps: str) -> tuple[float, Path]:
    work.mkdir(parents=True)
    prof = work / "cpu-overhead.toml"
    prof.write_text(f'extends = "cpu"\nname = "cpu-overhead"\n\n[server]\nport = {port}\n')
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--steps", steps],
                       cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=3600)
    wall = time.monotonic() - t0
    (work / "app.out").write_text(p.stdout)
    runs = sorted((work / "specdec-runs").glob("*"))
    if p.returncode != 0 or not runs:
        sys.exit(f"app run in {work}: exit {p.returncode}\n{p.stdout[-3000:]}")
    return wall, runs[-1]


def replay_script(run_dir: Path, out: Path, port: int) -> str:
    """The bash script replaying run_dir's commands.json in `out`."""
    cmds = json.loads((run_dir / "commands.json").read_text())["commands"]
    src = str(run_dir)
    url = f"http://127.0.0.1:{port}"
    lines = ["#!/usr/bin/env bash", "set -u", f"cd {shlex.quote(str(out))}",
             'mark() { echo "$1 $(date +%s.%N)" >> phases.txt; }', "mark start"]
    for c in cmds:
        text = c["text"].replace(src, str(out))
        step, role = c["step"], c["role"]
        if role == "tool":
            lines += [f"mark {step}.tool", text + f" > {step}.tool.log 2>&1 || exit 1"]
        elif role == "serve":
            smoke = json.loads((run_dir / f"{step}.smoke.json").read_text())["request"]
            (out / f"{step}.smoke.request.json").write_text(json.dumps(smoke))
            lines += [f"mark {step}.serve", text + f" > {step}.serve.log 2>&1 &", "pid=$!",
                      f"until curl -sf -o /dev/null {url}/health; do",
                      '  kill -0 "$pid" 2>/dev/null || { echo "server exited" >&2; exit 1; }',
                      "  sleep 1", "done",
                      f"mark {step}.ready",
                      f"curl -sf -o {step}.smoke.json -H 'Content-Type: application/json' "
                      f"-d @{step}.smoke.request.json {url}/v1/completions || exit 1",
                      f"mark {step}.smoked"]
        elif role == "bench":
            lines += [f"mark {step}.bench", text + f" > {step}.bench.log 2>&1 || exit 1", f"mark {step}.benched",
                      'kill -INT "$pid"', 'wait "$pid"', f"mark {step}.stopped"]
        else:
            sys.exit(f"unknown role {role!r} in {run_dir / 'commands.json'}")
    lines.append("mark end")
    return "\n".join(lines) + "\n"


def run_replay(app_run: Path, work: Path, port: int, env: dict[str, str]) -> float:
    work.mkdir(parents=True)
    script = work / "replay.sh"
    script.write_text(replay_script(app_run, work, port))
    t0 = time.monotonic()
    p = subprocess.run(["bash", str(script)], cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=3600)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"replay in {work}: exit {p.returncode}\n{p.stdout[-3000:]}")
    return wall


def app_phases(run_dir: Path) -> str:
    st = json.loads((run_dir / "state.json").read_text())["steps"]
    parts = []
    for step, s in st.items():
        f = s.get("facts") or {}
        up = (f.get("startup") or {}).get("seconds")
        stop = (f.get("stop") or {}).get("seconds")
        bench = f.get("bench") or {}
        bench_s = str(bench.get("bench_seconds", "?"))
        parts.append(f"{step} {s.get('seconds', 0):.1f} s (startup {up} s, bench step {bench_s} s, "
                     f"bench duration {bench.get('duration_s', 0):.1f} s, stop {stop} s)")
    return "; ".join(parts)


def replay_phases(work: Path) -> str:
    marks = [ln.split() for ln in (work / "phases.txt").read_text().splitlines()]
    t = {k: float(v) for k, v in marks}
    out = []
    for step in dict.fromkeys(k.split(".")[0] for k in t if "." in k):
        g = lambda a, b: t.get(f"{step}.{b}", 0) - t.get(f"{step}.{a}", 0)  # noqa: E731
        tool = f"tool {g('tool', 'serve'):.1f} s, " if f"{step}.tool" in t else ""
        out.append(f"{step} {tool}startup {g('serve', 'ready'):.1f} s, smoke {g('ready', 'smoked'):.2f} s, "
                   f"bench {g('bench', 'benched'):.1f} s, stop {g('benched', 'stopped'):.1f} s")
    return "; ".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2, help="app/replay pairs, run alternately (default 2)")
    ap.add_argument("--steps", default="baseline,eagle3")
    ap.add_argument("--vllm-python", help="the real vLLM's python (default: tests/realvllm/provision.sh)")
    ap.add_argument("--keep", action="store_true", help="keep the working directories (printed)")
    args = ap.parse_args()
    if shutil.which("curl") is None:
        sys.exit("the replay needs curl")
    env = child_env(vllm_python(args.vllm_python))
    tmp = Path(tempfile.mkdtemp(prefix="specdec-overhead-"))
    apps: list[float] = []
    replays: list[float] = []
    try:
        for i in range(1, args.pairs + 1):
            port = free_port()
            wall, run_dir = run_app(tmp / f"app{i}", port, env, args.steps)
            apps.append(wall)
            print(f"app    #{i}: {wall:6.1f} s   {app_phases(run_dir)}", flush=True)
            wall = run_replay(run_dir, tmp / f"replay{i}", port, env)
            replays.append(wall)
            print(f"replay #{i}: {wall:6.1f} s   {replay_phases(tmp / f'replay{i}')}", flush=True)
        a, r = statistics.median(apps), statistics.median(replays)
        print(f"app    wall: {', '.join(f'{x:.1f}' for x in apps)} s (median {a:.1f} s)")
        print(f"replay wall: {', '.join(f'{x:.1f}' for x in replays)} s (median {r:.1f} s)")
        print(f"ratio app / replay: {a / r:.3f}x (medians); per pair: "
              + ", ".join(f"{x / y:.3f}" for x, y in zip(apps, replays)))
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
