"""`python -m tui.sim hub [--host H] [--port N] [--delay S] [--fault PATTERN=SPEC ...]`: serve until Ctrl+C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from .faults import Fault
from .server import start_hub


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.sim hub",
                                     description="Serve specdec-tui's loopback Hugging Face hub and dataset mirror.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before every response")
    parser.add_argument("--fault", action="append", default=[], metavar="PATTERN=SPEC",
                        help="e.g. '/datasets/*=drop=1' or '*/resolve/*=gated' (repeatable)")
    args = parser.parse_args(argv)
    faults: dict[str, str] = {}
    for item in args.fault:
        pattern, sep, spec = item.partition("=")
        if not sep:
            parser.error(f"--fault {item!r}: expected PATTERN=SPEC")
        try:
            Fault.parse(spec)
        except ValueError as exc:
            parser.error(str(exc))
        faults[pattern] = spec
    try:
        handle = start_hub(args.host, args.port, delay=args.delay, faults=faults)
    except (OSError, RuntimeError) as exc:
        print(f"hub: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    print(handle.url, flush=True)
    print(f"  HF_ENDPOINT={handle.url}  dataset: {handle.dataset_url}  (Ctrl+C to stop)", file=sys.stderr,
          flush=True)
    stop = threading.Event()

    def _term(signum: int, frame: Any) -> None:
        stop.set()

    try:
        signal.signal(signal.SIGTERM, _term)
    except ValueError:  # not the main thread
        pass
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        handle.stop()
    return 0
