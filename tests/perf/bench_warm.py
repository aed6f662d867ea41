"""A tune sweep's wall time with `benchmark.warm = "off"` (one process per bench) vs `"auto"` (one warm process per
arm), against its floor, side by side in one invocation (not a test: wall-clock figures belong here).

    python tests/perf/bench_warm.py --profile profiles/tune-load-demo.toml          # the simulator's load sweep
    export PATH="$(dirname "$VLLM_PY"):$PATH"                                       # the real vLLM (cpu build)
    python tests/perf/bench_warm.py --profile cpu-tune.toml --shared-cache          # the README's cpu-tune profile

Each leg runs `specdec-tui --profile P --headless --json` in a child process from its own fresh directory, on a free
loopback port; P `extends` the given profile and sets only the port and benchmark.warm (plus any --set; --parallel:
`[tune] parallel = true` in both legs). Each leg has
its own cache (cold) unless --shared-cache (the user's cache: the cpu profile's tiny models are built once, not per
leg). With --rounds N the legs alternate (off, auto, auto, off, ...).

The floor of a leg is what no schedule can beat: one server launch plus every bench's own `duration`, from the run's
own files (tests/perf/bench_sweep.py floor_of). Printed per leg: wall, floor, wall/floor, and the benches' wall as
the engine timed each (`bench_seconds`: start to exit, the start-up included) against their own durations, i.e.
what each bench costs beyond its requests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweep import REPO, floor_of, free_port, write_profile  # noqa: E402


def bench_overhead(run_dir: Path) -> tuple[float, float, list[str]]:
    """(sum of bench_seconds, sum of result durations, how each bench ran) over every repeat the run recorded."""
    steps = json.loads((run_dir / "state.json").read_text())["steps"]
    secs = durs = 0.0
    ran: list[str] = []
    for facts in (s.get("facts") or {} for s in steps.values()):
        for reps in (facts.get("repeats") or {}).values():
            for rep in reps:
                secs += float(rep["bench_seconds"])
                durs += float(json.loads(Path(rep["result_file"]).read_text())["duration"])
                ran.append(str(rep.get("ran", "process")))
    return secs, durs, ran


def run_leg(tmp: Path, base: str, warm: str, sets: list[str], tag: str, shared_cache: bool,
            parallel: bool) -> tuple[float, Path]:
    work = tmp / tag
    work.mkdir()
    prof = write_profile(work, base, f"warm-{tag}", free_port(), parallel, [*sets, f"benchmark.warm={warm}"])
    run_dir = work / "run"
    env = dict(os.environ)
    if not shared_cache:
        env["XDG_CACHE_HOME"] = str(work / "cache")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--json", "--run-dir",
                        str(run_dir)], capture_output=True, text=True, cwd=work, env=env, stdin=subprocess.DEVNULL,
                       timeout=7200)
    wall = time.monotonic() - t0
    rep = json.loads(p.stdout) if p.stdout.strip() else {}
    if p.returncode not in (0, 1) or "matrix" not in rep:
        sys.exit(f"{tag}: exit {p.returncode}\n{p.stderr[-3000:]}")
    return wall, run_dir


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default=str(REPO / "profiles" / "tune-load-demo.toml"),
                    help="the tune profile (a bundled name or a .toml path; default profiles/tune-load-demo.toml)")
    ap.add_argument("--rounds", type=int, default=1, help="off/auto pairs, alternating (default 1)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra key for both legs' profile, e.g. tune.repeats=1 (repeatable)")
    ap.add_argument("--shared-cache", action="store_true", help="every leg uses the user's cache (XDG_CACHE_HOME)")
    ap.add_argument("--parallel", action="store_true", help="both legs with [tune] parallel = true (neuron, simulator)")
    ap.add_argument("--keep", action="store_true", help="keep the run directories (printed)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="specdec-warm-"))
    rows: dict[str, list[tuple[float, float]]] = {"off": [], "auto": []}
    try:
        for r in range(1, args.rounds + 1):
            order = ("off", "auto") if r % 2 else ("auto", "off")
            for warm in order:
                tag = f"{warm}{r}"
                wall, run_dir = run_leg(tmp, args.profile, warm, args.set, tag, args.shared_cache, args.parallel)
                startup, benches, n = floor_of(run_dir)
                floor = startup + benches
                secs, durs, ran = bench_overhead(run_dir)
                rows[warm].append((wall, floor))
                how = ", ".join(f"{ran.count(k)} {k}" for k in sorted(set(ran)))
                print(f"{tag}: wall {wall:7.1f} s; floor {floor:6.1f} s = first launch {startup:.1f} s + {n} benches "
                      f"{benches:.1f} s; wall/floor {wall / floor:.2f}x; benches {secs:.1f} s for {durs:.1f} s of "
                      f"requests ({(secs - durs) / max(len(ran), 1):.2f} s a bench beyond them; ran: {how})",
                      flush=True)
        for warm, legs in rows.items():
            print(f"warm = {warm:4}: wall {', '.join(f'{w:.1f}' for w, _ in legs)} s; floor "
                  f"{', '.join(f'{f:.1f}' for _, f in legs)} s; wall/floor (median) "
                  f"{statistics.median(w / f for w, f in legs):.2f}x")
        off, auto = (statistics.median(w for w, _ in rows[k]) for k in ("off", "auto"))
        print(f"off/auto wall (medians): {off / auto:.2f}x ({off - auto:.1f} s saved)")
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
