"""Terminal loss, measured: how long the app takes to exit after its pseudo-terminal disappears, from the
first screen, mid-launch and with the quit dialog open (goal: < 5 s, with no child left).

    python tests/perf/terminal_loss.py [--trials 3]

Not collected by pytest (wall-clock figures belong here, not in tests)."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from test_terminal_loss import SAFETY_S, PtyApp, _profile  # noqa: E402


def trial(where: str) -> tuple[float | None, int]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        run_dir = tmp / "run"
        app = PtyApp(tmp, ["--profile", str(_profile(tmp)), "--run-dir", str(run_dir)])
        kids: list[psutil.Process] = []
        try:
            app.wait_for(lambda: b"Profile" in app.screen, 30)
            if where != "first-screen":
                app.send(b"a")
                log = run_dir / "baseline.serve.log"
                app.wait_for(lambda: log.exists() and "Compil" in log.read_text(errors="replace"), SAFETY_S)
                kids = psutil.Process(app.pid).children(recursive=True)
                if where == "quit-dialog":
                    app.send(b"\x11")
                    app.wait_for(lambda: b"Quit" in app.screen, 10)
            t0 = time.monotonic()
            app.hang_up()
            code = app.wait_exit(SAFETY_S)
            secs = time.monotonic() - t0 if code is not None else None
        finally:
            app.kill()
        left = psutil.wait_procs(kids, timeout=5)[1]
        for k in left:
            k.kill()
        return secs, len(left)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    print(f"{'where':<14} {'trials':>6} {'median s':>9} {'max s':>7} {'hung':>5} {'children left':>14}")
    for where in ("first-screen", "mid-launch", "quit-dialog"):
        times, hung, left = [], 0, 0
        for _ in range(args.trials):
            secs, n = trial(where)
            left += n
            if secs is None:
                hung += 1
            else:
                times.append(secs)
        med = f"{statistics.median(times):.2f}" if times else "-"
        mx = f"{max(times):.2f}" if times else "-"
        print(f"{where:<14} {args.trials:>6} {med:>9} {mx:>7} {hung:>5} {left:>14}")


if __name__ == "__main__":
    main()
