"""Regenerate the README screenshots (docs/screenshots/launch.svg and results.svg) from a real demo run.

    python tests/perf/make_screenshots.py [--size 100x30] [--time-scale 0.25]

Runs the bundled demo profile (simulated backend) in the real app, headless, driven by the keyboard
(`a`: run everything); saves the EAGLE3 launch pane a few requests into its benchmark and the results
pane at the end (Textual's SVG export). HOME, caches and the run directory live in a temp directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "screenshots"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def shoot(size: tuple[int, int], time_scale: float) -> None:
    from tui.app import SpecdecApp
    from tui.core import events as ev
    from tui.core.profile.model import load_profile

    prof = load_profile("demo").with_values({"simulation.time_scale": time_scale, "server.port": free_port()})
    app = SpecdecApp(prof, Path("specdec-runs") / "demo")
    half_way = asyncio.Event()
    sink = app.sink

    def spy(e: ev.Event) -> None:
        sink(e)
        if (isinstance(e, ev.Progress) and e.step == "eagle3" and e.task == "requests" and e.total
                and e.completed >= 10):
            half_way.set()

    app.sink = spy  # type: ignore[method-assign]
    OUT.mkdir(parents=True, exist_ok=True)
    async with app.run_test(size=size) as pilot:
        await pilot.press("a")
        await asyncio.wait_for(half_way.wait(), 600)
        app.flush_logs()
        await pilot.pause(0.3)
        app.save_screenshot(str(OUT / "launch.svg"))
        await asyncio.wait_for(app.run_finished.wait(), 600)
        await pilot.pause(0.3)
        app.save_screenshot(str(OUT / "results.svg"))
        await pilot.press("ctrl+q")
        await asyncio.wait_for(app.shutdown_done.wait(), 120)
    print(f"wrote {OUT / 'launch.svg'} and {OUT / 'results.svg'}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="100x32", help="terminal COLSxROWS (default 100x32)")
    p.add_argument("--time-scale", type=float, default=0.25, help="simulation.time_scale (default: the demo's)")
    args = p.parse_args()
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    sys.path.insert(0, str(REPO))
    tmp = tempfile.mkdtemp(prefix="specdec-shots-")
    os.environ.update(HOME=tmp, XDG_CACHE_HOME=str(Path(tmp) / "cache"))
    os.environ.pop("NO_COLOR", None)
    os.chdir(tmp)
    asyncio.run(shoot((cols, rows), args.time_scale))
    return 0


if __name__ == "__main__":
    sys.exit(main())
