"""tune-demo (and tune-load-demo) adaptive and fixed, side by side in one invocation (issue 29): the same pick?
and what each cost in device time — launches (every server start, the race's relaunches included) plus bench
seconds, as the runs recorded them in state.json — and in wall time.

Not a test: figures for the closing note. Each profile runs with tune.adaptive = true (tune.max_repeats as the
profile sets it) and with tune.adaptive = false, each in its own run directory under --out (default: a temporary
directory).

Run: python tests/perf/adaptive_vs_fixed.py [--profiles tune-demo tune-load-demo] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tui.core.profile.model import load_profile  # noqa: E402


def device_seconds(run_dir: Path) -> dict[str, float]:
    """{launch_s, bench_s} summed over the run's arm steps (and the race's relaunches)."""
    state = json.loads((run_dir / "state.json").read_text())
    launch = bench = 0.0
    for sid, st in (state.get("steps") or {}).items():
        f = st.get("facts") or {}
        starts = f.get("launches") or ([f["startup"]] if isinstance(f.get("startup"), dict) else [])
        launch += sum(float(s.get("seconds") or 0.0) for s in starts if isinstance(s, dict))
        for recs in (f.get("repeats") or {}).values():
            for r in recs if isinstance(recs, list) else []:
                if isinstance(r, dict) and isinstance(r.get("duration_s"), (int, float)):
                    bench += float(r["duration_s"])
    return {"launch_s": launch, "bench_s": bench}


def picks(run_dir: Path) -> dict[str, Any]:
    rep = json.loads((run_dir / "report.json").read_text())
    recs = (rep.get("matrix") or {}).get("recommendation") or {}
    return {k: (r.get("verdict"), r.get("arm") or r.get("candidate")) for k, r in recs.items()}


def run(profile_path: Path, run_dir: Path) -> tuple[float, int]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "tui", "--profile", str(profile_path), "--headless", "--run-dir",
                        str(run_dir)], cwd=run_dir.parent, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return time.monotonic() - t0, p.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", nargs="+", default=["tune-demo", "tune-load-demo"])
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="adaptive-vs-fixed-"))
    out.mkdir(parents=True, exist_ok=True)
    for name in a.profiles:
        prof = load_profile(name)
        rows = {}
        for mode, p in (("adaptive", prof.with_values({"tune.adaptive": True})),
                        ("fixed", prof.with_values({"tune.adaptive": False}))):
            path = out / f"{name}-{mode}.toml"
            path.write_text(p.with_values({"name": f"{name}-{mode}"}).to_toml())
            run_dir = out / f"{name}-{mode}"
            wall, rc = run(path, run_dir)
            dev = device_seconds(run_dir)
            rows[mode] = {"wall_s": wall, "rc": rc, **dev, "device_s": dev["launch_s"] + dev["bench_s"],
                          "picks": picks(run_dir)}
            print(f"{name} {mode:8}: exit {rc}, wall {wall:7.1f} s, device {rows[mode]['device_s']:7.1f} s "
                  f"(launch {dev['launch_s']:.1f} + bench {dev['bench_s']:.1f}); picks {rows[mode]['picks']}",
                  flush=True)
        ad, fx = rows["adaptive"], rows["fixed"]
        same = ad["picks"] == fx["picks"]
        print(f"{name}: same pick: {same}; adaptive / fixed device time {ad['device_s'] / fx['device_s']:.2f}, "
              f"wall {ad['wall_s'] / fx['wall_s']:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
