"""`specdec-tui serve-web`: the wizard in a browser, for an operator behind an SSH tunnel.

It serves the wizard through textual-serve (the optional `web` extra) on 127.0.0.1 by default, with a random
token in the URL, printed once on stdout and nowhere else (not in a log, not in the run directory). Each browser
session runs the wizard as `python -m tui.web.child` with the options given here (`--demo`, `--profile`,
`--open`, `--run-dir`, `--steps`), checked here first so that a bad one fails at once with exit 2. One browser
session drives the app at a time. Closing the tab or losing the tunnel is a terminal loss for the app (it stops
its servers, writes its report and exits); quitting in the browser quits the app; ^C, SIGTERM or SIGHUP stop
serve-web, every app and every server they started. Exit codes: 0 stopped by a signal, 2 usage error (or the web
extra is missing, or the address cannot be bound).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import ipaddress
import logging
import os
import secrets
import shlex
import socket
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from urllib.parse import urlsplit

from ..browse import OpenRunError, open_run
from ..core.profile.model import ProfileError, load_profile
from ..core.run.engine import EXIT_USAGE, parse_steps
from ..core.run.reuse import check_reuse
from ..core.secrets import add_secrets, redact
from ..core.store.rundir import RunDirStateError

DEFAULT_PORT = 8765  # away from vLLM's 8000 (every profile's server.port) and its neighbours
TESTED_TEXTUAL_SERVE = "1.1.3"
EXTRA_MISSING = (
    "specdec-tui serve-web needs the optional `web` extra (textual-serve {want} and aiohttp), which is not "
    "installed in this Python ({missing} cannot be imported). Install it into the venv specdec-tui runs from: "
    "pip install 'specdec-tui[web]' (from a checkout: pip install -e '.[web]'). The wizard in a terminal needs "
    "no extra: specdec-tui --demo.")


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{message}. Run `specdec-tui serve-web --help` for the options.")


def build_serve_web_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="specdec-tui serve-web",
        description="Serve the wizard to a browser (textual-serve, the `web` extra): on 127.0.0.1 by default, "
                    "reached through an SSH tunnel, with a random token in the URL (printed once). One browser "
                    "session drives the app at a time; closing the tab stops the app like a lost terminal "
                    "(servers stopped, report written). Nothing the page loads comes from outside this machine.",
        epilog="Exit codes: 0 stopped (^C, SIGTERM, SIGHUP), 2 usage error, missing `web` extra or an address "
               "that cannot be bound. Tunnel: ssh -N -L PORT:127.0.0.1:PORT user@instance, then open the URL "
               "printed on start-up.",
    )
    p.add_argument("--host", default="127.0.0.1", metavar="ADDR",
                   help="address to listen on (default 127.0.0.1); a non-loopback one needs --allow-remote")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="N",
                   help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--public-url", metavar="URL",
                   help="the address the browser opens, when it is not http://127.0.0.1:PORT/: the local end of a "
                        "tunnel to another port (http://localhost:9000/) or a proxy (https://host/specdec/); the "
                        "printed URL and ssh line use it (the page itself works under any address)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow --host to be a non-loopback address (anyone who can reach it and has the URL drives "
                        "the app and the servers it launches; plain HTTP). Prefer an SSH tunnel")
    g = p.add_argument_group("the wizard's options (passed to each browser session's app)")
    g.add_argument("--profile", metavar="NAME|PATH", help="bundled profile name or path to a TOML profile")
    g.add_argument("--demo", action="store_true", help="same as --profile demo (simulated backend, no hardware)")
    g.add_argument("--steps", metavar="ID,...", help="steps to run, comma-separated")
    g.add_argument("--run-dir", metavar="DIR", help="run directory (default ./specdec-runs/<time>-<profile>/ per session)")
    g.add_argument("--open", metavar="RUN_DIR", dest="open_run", help="browse a finished run read-only")
    return p


def _fail(msg: str) -> int:
    print(f"specdec-tui serve-web: error: {redact(msg)}", file=sys.stderr)
    return EXIT_USAGE


def is_loopback(host: str) -> bool:
    """True when every address `host` names is a loopback one (127.0.0.0/8, ::1; a name is resolved)."""
    h = host.strip().strip("[]")
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(h, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    addrs = {info[4][0] for info in infos}
    return bool(addrs) and all(ipaddress.ip_address(a.split("%", 1)[0]).is_loopback for a in addrs)


def _url_host(host: str) -> str:
    h = host.strip().strip("[]")
    return f"[{h}]" if ":" in h else h


def wizard_argv(args: argparse.Namespace) -> list[str]:
    """The options every browser session's app gets (an argv: no shell ever sees it)."""
    out: list[str] = []
    if args.demo:
        out.append("--demo")
    if args.profile is not None:
        out += ["--profile", args.profile]
    if args.steps is not None:
        out += ["--steps", args.steps]
    if args.run_dir is not None:
        out += ["--run-dir", os.path.abspath(args.run_dir)]
    if args.open_run is not None:
        out += ["--open", os.path.abspath(args.open_run)]
    return out


def check_wizard_args(args: argparse.Namespace) -> str | None:
    """What the app would refuse at start-up, refused here at once (one paragraph), else None."""
    if args.open_run is not None:
        others = [f for f, v in (("--profile", args.profile), ("--demo", args.demo), ("--steps", args.steps),
                                 ("--run-dir", args.run_dir)) if v]
        if others:
            return (f"--open browses a finished run; it cannot be combined with {', '.join(others)}. To run a "
                    "profile again: --profile RUN_DIR/profile.toml.")
        try:
            open_run(args.open_run)
        except OpenRunError as exc:
            return str(exc)
        return None
    if args.demo and args.profile and args.profile != "demo":
        return f"--demo means --profile demo; it cannot be combined with --profile {args.profile}."
    name = "demo" if args.demo else args.profile
    if name is not None and not name.strip():
        return "--profile is empty; give a bundled profile name (see `specdec-tui --list-profiles`) or a .toml file."
    if args.steps is not None and not args.steps.replace(",", "").strip():
        return "--steps is empty; leave it out to run every step, or name steps (e.g. --steps env,checkpoints)."
    profile = None
    try:
        if name is not None:
            profile = load_profile(name)
        if args.steps is not None:
            parse_steps(args.steps, profile)
    except (ProfileError, ValueError) as exc:
        return str(exc)
    if args.run_dir is not None:
        if not args.run_dir.strip() or "\x00" in args.run_dir:
            return "--run-dir is empty or not a path; give a directory path (or leave the option out)."
        run_dir = Path(os.path.abspath(args.run_dir))
        if run_dir.exists() and not run_dir.is_dir():
            return f"--run-dir {args.run_dir} exists and is not a directory; choose another path."
        if profile is not None and run_dir.is_dir():
            try:
                check_reuse(run_dir, profile)
            except RunDirStateError as exc:
                return str(exc)
    return None


def public_url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (f"--public-url {url!r} is not an http:// or https:// URL with a host; give the address the browser "
                "opens, e.g. http://localhost:9000/ (the local end of ssh -L 9000:127.0.0.1:PORT).")
    if parts.query or parts.fragment:
        return f"--public-url {url!r} has a query or a fragment; give the address only, e.g. https://host/specdec/."
    return None


def _import_server():
    """tui.web.server (textual-serve, aiohttp: the optional `web` extra), imported here, once serve-web's options
    are checked, so that a missing extra is one paragraph (and `specdec-tui --help` never needs it)."""
    from . import server

    return server


def _setup_logging(server_mod) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("specdec-tui serve-web: %(message)s"))
    handler.addFilter(server_mod.RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("specdec-tui.web").setLevel(logging.INFO)


def _say(text: str = "") -> None:
    """stdout, flushed (a pipe reads it at once); never raises (a hung-up terminal)."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except OSError:
        pass


def serve_web_main(argv: list[str]) -> int:
    try:
        args = build_serve_web_parser().parse_args(argv)
    except _UsageError as exc:
        return _fail(str(exc))
    if not 0 <= args.port <= 65535:
        return _fail(f"--port {args.port} is not a port; give 1 to 65535, or 0 for a free one.")
    if not args.host.strip():
        return _fail("--host is empty; leave it out to listen on 127.0.0.1.")
    remote = not is_loopback(args.host)
    if remote and not args.allow_remote:
        return _fail(f"--host {args.host} is not a loopback address: anyone who can reach it would drive the wizard, "
                     "and the servers it launches, over plain HTTP. Leave --host out (127.0.0.1) and use an SSH "
                     f"tunnel (ssh -N -L {args.port or DEFAULT_PORT}:127.0.0.1:{args.port or DEFAULT_PORT} "
                     "user@instance), or add --allow-remote if you mean it.")
    if args.public_url is not None and (problem := public_url_problem(args.public_url)):
        return _fail(problem)
    problem = check_wizard_args(args)
    if problem:
        return _fail(problem)
    try:
        server_mod = _import_server()
    except ImportError as exc:
        return _fail(EXTRA_MISSING.format(want=TESTED_TEXTUAL_SERVE, missing=exc.name or "textual_serve"))
    try:
        have = version("textual-serve")
    except PackageNotFoundError:
        have = "unknown"
    if have != TESTED_TEXTUAL_SERVE:
        print(f"specdec-tui serve-web: warning: textual-serve {have} is installed; serve-web is tested with "
              f"{TESTED_TEXTUAL_SERVE} (pip install 'specdec-tui[web]' installs it).", file=sys.stderr)
    _setup_logging(server_mod)

    token = secrets.token_urlsafe(24)
    add_secrets([token])  # from here on redact() removes it from every channel: logs, messages
    app_argv = [sys.executable, "-m", "tui.web.child", *wizard_argv(args)]
    what = shlex.join(["specdec-tui", *wizard_argv(args)])
    host = args.host.strip().strip("[]")
    server = server_mod.WebServer(app_argv, token=token, host=host, port=args.port,
                                  title=f"specdec-tui {' '.join(wizard_argv(args)[:2])}".strip(), cwd=os.getcwd())

    def ready(port: int) -> None:
        # the address a browser on this machine (or the laptop's end of the tunnel) opens
        shown = socket.gethostname() if host in ("0.0.0.0", "::") else host
        base = args.public_url or f"http://{_url_host(shown)}:{port}/"
        url = base.rstrip("/") + f"/{token}/"
        local = urlsplit(base).port or port
        target = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, _url_host(host))
        if remote:
            print(f"specdec-tui serve-web: warning: listening on {args.host}:{port}, not loopback (--allow-remote): "
                  "anyone who can reach this port and has the URL drives the wizard and the servers it launches, "
                  "and the URL (its token) travels unencrypted. An SSH tunnel to 127.0.0.1 is safer.",
                  file=sys.stderr)
        _say(f"specdec-tui serve-web: serving `{what}` on {_url_host(args.host)}:{port}"
             + ("" if remote else " (loopback only)"))
        _say("From your laptop, open a tunnel (your usual ssh destination for this machine):")
        _say(f"    ssh -N -L {local}:{target}:{port} {_user()}@{socket.gethostname()}")
        _say("then open this URL in a browser (its token is the key; it is printed only here):")
        _say(f"    {url}")
        _say("One browser session drives the wizard at a time; closing the tab stops the app and its servers, as "
             "a lost terminal does. ^C stops serving, every app and every server.")

    try:
        asyncio.run(server.serve(ready))
    except server_mod.BindError as err:
        exc = err.error
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}. "
                     + ("Another program (another serve-web?) uses that port: pass --port N, or --port 0 for a "
                        "free one." if getattr(exc, "errno", None) in (98, 48) else "Check --host and --port."))
    return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "user"


__all__ = ["serve_web_main", "build_serve_web_parser", "is_loopback", "check_wizard_args", "wizard_argv",
           "public_url_problem", "DEFAULT_PORT"]
