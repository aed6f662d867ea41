"""The Step 3 matrix's wall time on the simulator, one server at a time vs `[tune] parallel = true` (later arms'
servers start on their own NeuronCore ranges while earlier arms benchmark), measured side by side in one run.

    python tests/perf/tune_parallel.py                     # baseline + k = 1, 2, 3, one repeat, sonnet
    python tests/perf/tune_parallel.py --repeats 2 --time-scale 1.0

Prints each mode's wall time, the ratio, and checks that both produced the full matrix (the same arms, every
cell benchmarked). Not collected by pytest: wall-clock figures belong here, not in tests.

--time-scale scales the simulated startup (compile, weights); the default is the demo's 0.25, where a server is
up in about 10 s. On the instance a cold GPT-OSS-120B compile takes tens of minutes, so the ratio there is
larger than here: parallel launches overlap exactly that part.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
from e2e_util import free_port  # noqa: E402

from tui.core.profile.model import load_profile  # noqa: E402


def run(tmp: Path, parallel: bool, args: argparse.Namespace) -> tuple[float, dict]:
    name = "tune-par" if parallel else "tune-seq"
    values = {"name": name, "server.port": free_port(), "tune.parallel": parallel,
              "tune.repeats": args.repeats, "tune.workloads": ["sonnet"], "tune.probe_prompts": 0,
              "tune.num_speculative_tokens": [1, 2, 3], "benchmark.num_prompts": args.prompts,
              "simulation.time_scale": args.time_scale}
    prof = tmp / f"{name}.toml"
    prof.write_text(load_profile("tune-demo").with_values(values).to_toml())
    run_dir = tmp / name
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / f"cache-{name}"))  # each mode compiles cold
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--json",
                        "--run-dir", str(run_dir)], capture_output=True, text=True, cwd=tmp, env=env,
                       stdin=subprocess.DEVNULL, timeout=3600)
    wall = time.monotonic() - t0
    rep = json.loads(p.stdout) if p.stdout.strip() else {}
    if p.returncode not in (0, 1) or "matrix" not in rep:
        sys.exit(f"{name}: exit {p.returncode}\n{p.stderr[-3000:]}")
    return wall, rep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--time-scale", type=float, default=0.25)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="specdec-tune-perf-") as d:
        tmp = Path(d)
        seq, rseq = run(tmp, False, args)
        par, rpar = run(tmp, True, args)
    arms = [a["id"] for a in rseq["matrix"]["arms"]]
    assert arms == [a["id"] for a in rpar["matrix"]["arms"]], "both modes run the same arms"
    for rep in (rseq, rpar):
        assert all(rep["matrix"]["cells"][a]["sonnet"]["repeats"] == args.repeats for a in arms)
    print(f"arms: {', '.join(arms)}; {args.repeats} repeat(s) of {args.prompts} prompts; time_scale {args.time_scale}")
    print(f"sequential: {seq:.1f} s")
    print(f"parallel:   {par:.1f} s")
    print(f"ratio sequential / parallel: {seq / par:.2f}x")
    for label, rep in (("sequential", rseq), ("parallel", rpar)):
        rec = rep["matrix"]["recommendation"]["sonnet"]
        print(f"{label} recommendation: {rec.get('text')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
