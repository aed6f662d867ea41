"""Benchmark (not a test): flood the launch screen with server log lines and measure key→paint latency.

    python tests/perf/bench_tui_flood.py                  # 20k lines/s for 30 s at 80×24
    python tests/perf/bench_tui_flood.py --rate 50000 --seconds 10 --no-pipeline
    python tests/perf/bench_tui_flood.py --servers 4 --rate 8000   # four arms' servers streaming at once

The script starts the real app in a child process on a pseudo-terminal (so every frame is really
rendered and written, as over SSH), puts it on the Baseline launch pane, and feeds it `--rate` lines
per second for `--seconds` from a task on the app's event loop — the same place the engine's process
reader runs. By default every line goes through the engine's log pipeline (ServeLogWatcher: ANSI and
prefix stripping, rank merging, phase and error classification) before reaching the app's sink, so
the measured cost is the whole path a real flood takes. The lines mimic vLLM Neuron output: 16 worker
ranks repeating each message, tqdm `\\r` progress bars, warnings and some errors.

Key→paint latency: the parent presses `v` (log view: collapsed ↔ raw) on the terminal and times how
long until the toolbar text for the new mode ("[v] raw" / "[v] collapsed") arrives on the terminal.
It prints p50 / p99 / max over all presses, the flood rate achieved, and the child's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import pty
import resource
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------------
# Child: the app plus the flood
# ---------------------------------------------------------------------------------------------------

def _lines():
    """An endless stream of vLLM-Neuron-like raw lines."""
    i = 0
    while True:
        i += 1
        msg_kind = i % 50
        if msg_kind == 0:
            yield (f"2026-Jan-01 12:00:00.{i % 1000000:06d} 4242:4242 ERROR  TDRV:log_dev_mem    "
                   f"Failed to allocate 64.0MB (usage: scratchpad) on ND 0:NC {i % 16}")
            continue
        if msg_kind == 1:
            yield (f"(APIServer pid=4242) \x1b[33mWARNING\x1b[0m 01-01 12:00:00 [scheduler.py:{i % 900}] "
                   f"Sequence group {i} is preempted by PreemptionMode.RECOMPUTE")
            continue
        if msg_kind == 2:
            pct = i % 100
            yield (f"(EngineCore_DP0 pid=4242) Loading safetensors checkpoint shards: {pct:3d}% |"
                   f"{'█' * (pct // 10):<10}| {pct}/100 [00:0{i % 9}<00:00]\r" * 3)
            continue
        text = f"Compiling graph {i // 16} for bucket {512 * (1 + i % 4)} (neuronx-cc, {i % 7} workers busy)"
        for r in range(16):
            yield (f"(EngineCore_DP0 pid=4242) (Worker_TP{r} pid={5000 + r}) 2026-01-01 12:00:00,{i % 1000:03d} "
                   f"- INFO - model_runner.py:{100 + i % 400} - {text}")


async def _flood(app, rate: float, seconds: float, pipeline: bool, stats: dict,
                 steps: tuple[str, ...] = ("baseline",)) -> None:
    """Feed `rate` lines per second in total, spread over `steps` (several servers streaming at once)."""
    from tui.core import events as ev

    feeds = []
    for step in steps:
        if pipeline:
            from tui.core.serverlog.logwatch import ServeLogWatcher

            feeds.append(ServeLogWatcher(app.sink, step, speculative=step != "baseline", verbose_lines=True).on_line)
        else:
            counter = iter(range(1 << 62))

            def one(raw: str, ts: float, step: str = step, counter=counter) -> None:
                app.sink(ev.LogLine(step, raw, "serve", ts))
                app.sink(ev.CleanLog(step, next(counter), raw[-80:], None, "ERROR" in raw))

            feeds.append(one)
    gens = [_lines() for _ in feeds]  # each server its own stream (its ranks' repeats stay together)
    sent = 0
    t0 = time.monotonic()
    while True:
        now = time.monotonic()
        el = now - t0
        if el >= seconds:
            break
        due = int(rate * el) - sent
        ts = time.time()
        for i in range(max(0, due)):
            k = i % len(feeds)
            feeds[k](next(gens[k]), ts)
        sent += max(0, due)
        await asyncio.sleep(0.005)
    stats["sent"] = sent
    stats["flood_s"] = time.monotonic() - t0


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO))
    from tui.screens.profile import ProfilePane
    from tui.app import SpecdecApp
    from tui.core import events as ev
    from tui.core.profile.model import load_profile

    stats: dict = {}
    servers = int(args.servers)
    profile = load_profile("tune-demo" if servers > 1 else "demo")
    app = SpecdecApp(profile, Path(args.tmp) / "run")
    from tui.core.plan.arms import arms_of

    steps = tuple(a.id for a in arms_of(profile))[:servers] if servers > 1 else ("baseline",)

    async def start() -> None:
        app.query_one(ProfilePane).lock_profile()
        app.set_step_status("profile", "passed", 0.0, profile.name)
        app.busy = "baseline"
        for sid in steps:  # tune.parallel: every arm's server streams its log while the first one is shown
            app.sink(ev.StepStarted(sid, sid))
        app.show_step("baseline")
        app.query_one("#pane-baseline").log_view.focus()
        await asyncio.sleep(float(args.warmup))
        with open(Path(args.tmp) / "ready", "w") as f:
            f.write("1")
        await _flood(app, args.rate, args.seconds, not args.no_pipeline, stats, steps)
        stats["lines_in_app"] = app.log_lines_in
        stats["rss_self_peak_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        (Path(args.tmp) / "stats.json").write_text(json.dumps(stats))
        await asyncio.sleep(0.5)
        app.exit(0)

    app.call_later(lambda: app.run_worker(start(), name="flood", group="bench"))
    if args.cprofile:
        import cProfile

        cProfile.runctx("app.run()", globals(), {"app": app}, args.cprofile)
    else:
        app.run()


# ---------------------------------------------------------------------------------------------------
# Parent: the terminal, the key presses, the measurements
# ---------------------------------------------------------------------------------------------------

class Terminal:
    def __init__(self, fd: int):
        self.fd = fd
        self.buf = b""

    def pump(self, timeout: float) -> None:
        r, _, _ = select.select([self.fd], [], [], timeout)
        if r:
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                data = b""
            self.buf = (self.buf + data)[-(1 << 16):]

    def wait_for(self, needle: bytes, timeout: float) -> float | None:
        """Seconds until `needle` shows up in output that arrives from now on (None on timeout)."""
        self.buf = b""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            self.pump(0.002)
            if needle in self.buf:
                return time.perf_counter() - t0
        return None


def parent(args: argparse.Namespace) -> int:
    import psutil

    tmp = tempfile.mkdtemp(prefix="specdec-flood-")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", args.rows, args.cols, 0, 0))
    env = dict(os.environ, TERM=os.environ.get("TERM", "xterm-256color"), PYTHONPATH=str(REPO),
               HOME=tmp, XDG_CACHE_HOME=str(Path(tmp) / "cache"), TEXTUAL_ANIMATIONS="none")
    env.pop("NO_COLOR", None)
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--tmp", tmp, "--rate", str(args.rate),
            "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--servers", str(args.servers)]
    if args.no_pipeline:
        argv.append("--no-pipeline")
    if args.cprofile:
        argv += ["--cprofile", str(Path(args.cprofile).resolve())]
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=tmp,
                            start_new_session=True, close_fds=True)
    os.close(slave)
    term = Terminal(master)
    ps = psutil.Process(proc.pid)
    peak_rss = 0
    latencies: list[float] = []
    misses = 0
    try:
        ready = Path(tmp) / "ready"
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            term.pump(0.05)
        if not ready.exists():
            print("the app did not start", file=sys.stderr)
            return 1
        t_end = time.monotonic() + args.seconds
        mode = "collapsed"
        while time.monotonic() < t_end - 0.5:
            try:
                peak_rss = max(peak_rss, ps.memory_info().rss)
            except psutil.Error:
                break
            want = "raw" if mode == "collapsed" else "collapsed"
            term.pump(0.0)
            os.write(master, b"v")
            lat = term.wait_for(f"[v] {want}".encode(), timeout=5.0)
            if lat is None:
                misses += 1
            else:
                latencies.append(lat)
            mode = want
            t_next = time.monotonic() + args.interval
            while time.monotonic() < t_next:
                term.pump(0.01)
        # Let the child finish and exit on its own.
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            term.pump(0.05)
            try:
                peak_rss = max(peak_rss, ps.memory_info().rss)
            except psutil.Error:
                pass
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)
    stats = {}
    sp = Path(tmp) / "stats.json"
    if sp.exists():
        stats = json.loads(sp.read_text())
    peak_kb = max(peak_rss // 1024, int(stats.get("rss_self_peak_kb", 0)))
    sent = stats.get("sent", 0)
    flood_s = stats.get("flood_s", args.seconds) or args.seconds
    lat_ms = sorted(x * 1000 for x in latencies)

    def pct(p: float) -> float:
        if not lat_ms:
            return float("nan")
        k = min(len(lat_ms) - 1, max(0, int(round(p / 100 * (len(lat_ms) - 1)))))
        return lat_ms[k]

    print(f"terminal {args.cols}×{args.rows}, {args.servers} server log(s) streaming, "
          f"flood {args.rate:.0f} lines/s in total for {args.seconds:.0f} s "
          f"({'engine log pipeline' if not args.no_pipeline else 'raw events'})")
    print(f"lines fed: {sent} ({sent / flood_s:.0f}/s achieved); lines reaching the app's sink: "
          f"{stats.get('lines_in_app', '?')}")
    print(f"key→paint latency over {len(lat_ms)} presses ({misses} missed): p50 {pct(50):.1f} ms, "
          f"p99 {pct(99):.1f} ms, max {lat_ms[-1] if lat_ms else float('nan'):.1f} ms"
          + (f", mean {statistics.mean(lat_ms):.1f} ms" if lat_ms else ""))
    print(f"peak RSS of the app: {peak_kb / 1024:.1f} MiB")
    return 0 if lat_ms and misses == 0 else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=20_000, help="log lines per second (default 20000)")
    p.add_argument("--seconds", type=float, default=30, help="flood duration (default 30)")
    p.add_argument("--interval", type=float, default=0.25, help="seconds between key presses (default 0.25)")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds before the flood starts")
    p.add_argument("--servers", type=int, default=1,
                   help="servers streaming at once (tune-demo's arms, as with [tune] parallel; default 1)")
    p.add_argument("--cols", type=int, default=80)
    p.add_argument("--rows", type=int, default=24)
    p.add_argument("--no-pipeline", action="store_true", help="send events straight to the sink (skip the "
                                                              "engine's log parsing)")
    p.add_argument("--cprofile", metavar="FILE", help="run the app under cProfile and write its stats to FILE "
                                                       "(read with python -m pstats; slows the app down)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--tmp", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
