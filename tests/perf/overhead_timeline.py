"""Where a run's seconds go: the engine's events, each stamped with the time it reached the sink (not a test).

    python tests/perf/overhead_timeline.py --profile cpu --steps baseline,eagle3     # real vLLM: put its bin on PATH
    python tests/perf/overhead_timeline.py --profile demo --steps baseline --all

Runs the engine in this process (as the headless front end does) on a free loopback port, in a fresh temporary
run directory, and prints every step start/finish, command, notice and fact with its offset from the run's start
and the gap since the previous line (--all: every event, progress included). Read next to bench_overhead.py:
the gaps between "launched", "startup" and the bench's command are where the app's own seconds go.
"""

from __future__ import annotations

import argparse
import resource
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tui.core import events as ev  # noqa: E402
from tui.core.profile.model import load_profile  # noqa: E402
from tui.core.run.engine import Engine, parse_steps, run_engine_blocking  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--steps", default="baseline,eagle3")
    ap.add_argument("--all", action="store_true", help="every event (progress included)")
    args = ap.parse_args()
    prof = load_profile(args.profile).with_values({"server.port": free_port()})
    t0 = time.monotonic()
    last = [t0]

    def sink(e: ev.Event) -> None:
        now = time.monotonic()
        kind = type(e).__name__
        if kind in ("Progress", "LogLine", "PhaseChanged", "ServerLog", "BenchSample") and not args.all:
            return
        what = ""
        if isinstance(e, ev.Command):
            what = f"{e.role}: {' '.join(e.argv)[:90]}"
        elif isinstance(e, ev.Fact):
            what = f"{e.name}: {e.value} [{e.status}] {getattr(e, 'detail', '')}"[:140]
        elif isinstance(e, ev.Notice):
            what = e.text[:120]
        elif isinstance(e, ev.StepFinished):
            what = f"{e.status}"
        print(f"{now - t0:8.3f} (+{now - last[0]:6.3f}) {e.step:9} {kind:14} {what}", flush=True)
        last[0] = now

    with tempfile.TemporaryDirectory(prefix="specdec-timeline-") as d:
        engine = Engine(prof, Path(d) / "run", sink, steps=parse_steps(args.steps, prof))
        rc = run_engine_blocking(engine)
    me = resource.getrusage(resource.RUSAGE_SELF)
    print(f"exit {rc}; {time.monotonic() - t0:.1f} s; this process's own CPU: user {me.ru_utime:.2f} s, "
          f"system {me.ru_stime:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
