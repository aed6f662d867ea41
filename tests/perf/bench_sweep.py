"""A tune sweep's wall time, one server at a time vs `[tune] parallel = true`, against its floor, side by side in one
invocation (not a test: wall-clock figures belong here).

    python tests/perf/bench_sweep.py                                   # profiles/tune-demo.toml as it is
    python tests/perf/bench_sweep.py --profile profiles/tune-load-demo.toml --rounds 2
    python tests/perf/bench_sweep.py --set tune.repeats=1 --set 'tune.workloads=["sonnet"]'

Each leg runs `specdec-tui --profile P --headless --json` in a child process, from its own fresh directory with its
own cache (every leg starts cold), on a free loopback port. P is a small profile this script writes to a temp
directory: `extends` the given profile and sets only the port and, for the parallel leg, `[tune] parallel = true`
(plus any --set). With --rounds N the legs alternate (seq, par, seq, par, ...).

The floor of a leg is what no schedule can beat: one server launch plus every benchmark back to back, both taken
from that run's own files: the first arm's startup seconds as the run recorded them (state.json's
steps[arm].facts.startup.seconds) plus the sum of every bench's own `duration` from its result JSON (each repeat's
result file, every workload and level). Printed: the three wall times per round, and the ratios seq/floor,
par/floor and seq/par. The ratios are what to read on a shared machine; the raw seconds are printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port(span: int = 16) -> int:
    """A port p with p .. p+span free (parallel arms take consecutive ports after the profile's)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p + span < 65535 and all(_free(q) for q in range(p, p + span)):
            return p
    raise SystemExit("no run of free ports on 127.0.0.1")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def toml_value(text: str) -> str:
    """--set VALUE as TOML: JSON-ish values as they are (numbers, true/false, lists), anything else quoted."""
    try:
        json.loads(text)
        return text
    except ValueError:
        return json.dumps(text)


def write_profile(tmp: Path, base: str, name: str, port: int, parallel: bool, sets: list[str]) -> Path:
    base_ref = str(Path(base).resolve()) if Path(base).suffix == ".toml" else base
    tables: dict[str, dict[str, str]] = {"server": {"port": str(port)}, "tune": {}}
    if parallel:
        tables["tune"]["parallel"] = "true"
    top: dict[str, str] = {}
    for s in sets:
        key, _, value = s.partition("=")
        table, _, leaf = key.rpartition(".")
        (tables.setdefault(table, {}) if table else top)[leaf] = toml_value(value)
    lines = [f"extends = {json.dumps(base_ref)}", f"name = {json.dumps(name)}"]
    lines += [f"{k} = {v}" for k, v in top.items()]
    for table, kv in tables.items():
        if kv:
            lines.append(f"\n[{table}]")
            lines += [f"{k} = {v}" for k, v in kv.items()]
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def floor_of(run_dir: Path) -> tuple[float, float, int]:
    """(first arm's startup seconds, sum of the benches' own durations, number of benches) from the run's files."""
    steps = json.loads((run_dir / "state.json").read_text())["steps"]
    startup = None
    benches: list[float] = []
    for facts in (s.get("facts") or {} for s in steps.values()):
        up = (facts.get("startup") or {}).get("seconds")
        if up is not None and startup is None:
            startup = float(up)
        for reps in (facts.get("repeats") or {}).values():
            for rep in reps:
                res = json.loads(Path(rep["result_file"]).read_text())
                benches.append(float(res["duration"]))
    if startup is None or not benches:
        raise SystemExit(f"{run_dir}: no startup or no bench recorded")
    return startup, sum(benches), len(benches)


def run_leg(tmp: Path, base: str, parallel: bool, sets: list[str], tag: str) -> tuple[float, Path, dict]:
    work = tmp / tag
    work.mkdir()
    prof = write_profile(work, base, f"sweep-{tag}", free_port(), parallel, sets)
    run_dir = work / "run"
    env = dict(os.environ, XDG_CACHE_HOME=str(work / "cache"))  # every leg compiles cold
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--json", "--run-dir",
                        str(run_dir)], capture_output=True, text=True, cwd=work, env=env, stdin=subprocess.DEVNULL,
                       timeout=7200)
    wall = time.monotonic() - t0
    rep = json.loads(p.stdout) if p.stdout.strip() else {}
    if p.returncode not in (0, 1) or "matrix" not in rep:
        sys.exit(f"{tag}: exit {p.returncode}\n{p.stderr[-3000:]}")
    return wall, run_dir, rep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default=str(REPO / "profiles" / "tune-demo.toml"),
                    help="the tune profile to sweep (a bundled name or a .toml path; default profiles/tune-demo.toml)")
    ap.add_argument("--rounds", type=int, default=1, help="seq/par pairs, alternating (default 1)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra key for both legs' profile, e.g. tune.repeats=1 (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the run directories (printed)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="specdec-sweep-"))
    rows: list[tuple[str, float, float]] = []  # (leg, wall, floor)
    try:
        for r in range(1, args.rounds + 1):
            reps = {}
            for parallel in (False, True):
                tag = f"{'par' if parallel else 'seq'}{r}"
                wall, run_dir, rep = run_leg(tmp, args.profile, parallel, args.set, tag)
                startup, benches, n = floor_of(run_dir)
                floor = startup + benches
                rows.append((tag[:3], wall, floor))
                reps[tag[:3]] = rep
                print(f"{tag}: wall {wall:7.1f} s; floor {floor:6.1f} s = first launch {startup:.1f} s + "
                      f"{n} benches {benches:.1f} s; wall/floor {wall / floor:.2f}x", flush=True)
            arms = [a["id"] for a in reps["seq"]["matrix"]["arms"]]
            if arms != [a["id"] for a in reps["par"]["matrix"]["arms"]]:
                sys.exit("the two legs ran different arms")
        seq = [(w, f) for leg, w, f in rows if leg == "seq"]
        par = [(w, f) for leg, w, f in rows if leg == "par"]
        sw, pw = statistics.median(w for w, _ in seq), statistics.median(w for w, _ in par)
        sr, pr = statistics.median(w / f for w, f in seq), statistics.median(w / f for w, f in par)
        print(f"sequential: {', '.join(f'{w:.1f}' for w, _ in seq)} s; floor {', '.join(f'{f:.1f}' for _, f in seq)} s")
        print(f"parallel:   {', '.join(f'{w:.1f}' for w, _ in par)} s; floor {', '.join(f'{f:.1f}' for _, f in par)} s")
        print(f"ratios (medians): seq/floor {sr:.2f}x, par/floor {pr:.2f}x, seq/par {sw / pw:.2f}x")
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
