"""`specdec-tui` command line.

Exit codes: 0 all requested steps passed (warnings allowed), 1 a step failed, 2 usage or profile error,
130 interrupted. A run directory that cannot be written (read-only, full, no permission): 2 when nothing
could be written there yet (the run never started, like a bad --run-dir), 1 when it happens after steps
ran. A reused run directory whose state.json is damaged, belongs to another profile or is in use: 2, and
it is left as it is.

`specdec-tui compare RUN_DIR RUN_DIR… [--json]`: saved runs side by side (tui/core/results/compare.py); 0 printed,
2 a run directory without a readable specdec-tui report.json (or a usage error).

`specdec-tui serve-web [...]`: the wizard in a browser (tui/web/cli.py); each browser session runs this CLI with
`main(argv, web=True)` (tui/web/child.py): the app is drawn through the browser, not a terminal.

`specdec-tui fleet-local --nodes N [-- COMMAND…]`: a local Ray cluster of N simulated nodes to try --ray on
(tui/sim/fleet.py); with a COMMAND, it runs with RAY_ADDRESS set and the cluster goes down after it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from . import __version__
from .core.run.engine import EXIT_INTERRUPTED, EXIT_USAGE, Engine, parse_steps, run_engine_blocking
from .core.events import STEP_IDS
from .core.profile.model import ProfileError, bundled_profiles, load_profile, with_absolute_paths
from .core.run.reuse import check_reuse
from .core.secrets import add_secrets_from_env, redact
from .core.versions import served_text
from .core.store.rundir import (
    RunDirStateError,
    default_run_dir,
    unwritable_error,
)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}. Run `specdec-tui --help` for the options.")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="specdec-tui",
        description="Deploy EAGLE3 speculative decoding with vLLM Neuron and measure what it buys: "
                    "environment check, checkpoints, dataset, baseline and EAGLE3 servers, benchmarks, "
                    "side-by-side results and diagnostics.",
        epilog="Exit codes: 0 passed, 1 a step failed, 2 usage or profile error, 130 interrupted. "
               "Compare saved runs: specdec-tui compare RUN_DIR RUN_DIR... (see specdec-tui compare --help). "
               "The wizard in a browser: specdec-tui serve-web (see specdec-tui serve-web --help).",
    )
    p.add_argument("--profile", metavar="NAME|PATH", help="bundled profile name or path to a TOML profile")
    p.add_argument("--demo", action="store_true", help="same as --profile demo (simulated backend, no hardware)")
    p.add_argument("--headless", action="store_true", help="run without the interactive UI (for automation)")
    p.add_argument("--steps", metavar="ID,...",
                   help="steps to run, comma-separated: env,checkpoints,dataset,baseline,eagle3,results. A tune "
                        "profile (one with [tune]) has a step per arm instead of eagle3, its arm ids: "
                        "<method>-k<k> for each k of tune.num_speculative_tokens (eagle3-k1,eagle3-k2,...), "
                        "<method>-k<k>-<draft> when [tune.drafts] names several, <method>-schedule for a load "
                        "sweep's derived schedule. `--profile P --show-commands` names P's arm ids, and an unknown "
                        "id is answered with the allowed ones")
    p.add_argument("--run-dir", metavar="DIR", help="run directory (default ./specdec-runs/<time>-<profile>/)")
    p.add_argument("--json", action="store_true", help="print report.json on stdout (progress goes to stderr)")
    p.add_argument("--show-commands", action="store_true", help="print the exact commands the profile runs, then exit")
    p.add_argument("--vllm-version", metavar="X.Y.Z",
                   help=f"with --show-commands: show the commands for this vLLM version ({served_text()}; neuron: "
                        f"{served_text('neuron')}) instead of the detected one (a simulated profile: the version it "
                        "plays)")
    p.add_argument("--expect", action="append", default=[], metavar="EXPR",
                   help="a gate on the finished run, e.g. 'speedup>=1.15' or 'acceptance>=60' (names from report.json's "
                        "\"metrics\"; NAME@KEY on one bench key, e.g. 'speedup@sonnet@c4>=1.1'; or a dotted path into "
                        "report.json, e.g. 'matrix.cells.eagle3-k1.sonnet@c4.speedup.ratio>1' or "
                        "'load.workloads.sonnet.arms.eagle3-k1.levels.4.speedup.ratio>1'); repeatable; a failed gate "
                        "exits 1, one the run cannot produce exits 2 before anything runs")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run a tune run's arms on the Ray cluster at ADDRESS (HOST:PORT of its head, or auto): a "
                        "baseline on each node, each arm placed by Ray with its NeuronCores/GPUs/CPUs (needs "
                        "pip install 'specdec-tui[fleet]'; also [fleet] address in the profile)")
    p.add_argument("--list-profiles", action="store_true", help="list the bundled profiles, then exit")
    p.add_argument("--open", metavar="RUN_DIR", dest="open_run",
                   help="browse a finished run (its steps, results and logs) read-only, without starting anything")
    p.add_argument("--verbose", "-v", action="store_true", help="headless: also stream the raw server log")
    p.add_argument("--version", action="store_true", help="print the version, then exit")
    return p


def _fail_usage(msg: str) -> int:
    print(f"specdec-tui: error: {redact(msg)}", file=sys.stderr)
    return EXIT_USAGE


def _version_text() -> str:
    try:
        from importlib.metadata import version

        tv = version("textual")
    except Exception:
        tv = "not installed"
    return f"specdec-tui {__version__} (Textual {tv}, Python {sys.version.split()[0]})"


_VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?([.+-]?[0-9A-Za-z.+-]*)?$")


def _vllm_version_problem(given: str, platform: str | None = None) -> str | None:
    """Why --vllm-version `given` cannot be used (not a version, or outside the releases served on `platform`:
    tui/core/versions.py, the one rule), else None."""
    from .core import versions

    served = versions.served_text(platform)
    rel = versions.release(given) if _VERSION_RE.match(given) else None
    if rel is None:
        return f"--vllm-version {given!r} is not a version; give it as X.Y.Z (e.g. 0.32.0), a vLLM from {served}."
    outside = versions.served_problem(given, platform)
    if outside:
        return (f"--vllm-version {given}: {outside}, so the commands shown would not be the ones a run uses. Give a "
                f"version from {served} (e.g. {served.split(' to ')[0]}.0), or leave --vllm-version out to use the "
                "version server.command's vLLM reports.")
    return None


def _connect_fleet(profile, args: argparse.Namespace):
    """(executor or None, error text): the Ray cluster of --ray / [fleet] address, connected and checked before
    anything runs (unreachable, another Ray or Python, no node with an arm's resources: one paragraph)."""
    from .core.exec import ExecConfig, Executor, ExecutorError

    config = ExecConfig.of(profile, args.ray)
    if not config.address:
        return None, ""
    executor = Executor.get_class(config)(config)
    try:
        executor.connect(profile)
    except ExecutorError as exc:
        return None, str(exc)
    return executor, ""


def _show_commands(profile, args: argparse.Namespace, executor=None) -> int:
    """--show-commands: the commands for the given (--vllm-version), stated ([simulation] vllm_version: the release
    the simulator plays, which its run uses), detected or unknown vLLM version. What that release refuses in the
    profile ([speculative.extra] keys, server.env) is a profile error, exit 2 (tui/core/profile/release_rules.py)."""
    from .core.plan.commands import Placeholders
    from .core.plan.build import show_commands_text
    from .core.host.cpu import synthetic_note, wants_synthetic
    from .core.host.interpreter import find_server_interpreter, probe_metadata, probe_vllm_version, server_launch_env
    from .core.profile.release_rules import release_problems

    # the run directory as a run would use it (absolute: tui.core.run.engine resolves it once)
    run_dir = os.path.abspath(args.run_dir) if args.run_dir else "./specdec-runs/<run>"
    ph = Placeholders(run_dir=run_dir)
    environ = dict(os.environ)
    if args.vllm_version:
        problem = _vllm_version_problem(args.vllm_version, profile.platform)
        if problem:
            return _fail_usage(problem)
        version, source = args.vllm_version, "given"
    elif profile.declared_vllm_version:
        version, source = profile.declared_vllm_version, "simulated"
    else:
        try:
            version = probe_vllm_version(profile, ph, environ)
        except Exception:  # an unprobeable command only means "unknown"
            version = None
        source = "detected" if version else "unknown"
    for _path, text in release_problems(profile, version)[:1]:
        how = {"given": "given with --vllm-version", "detected": "what server.command's vLLM reports",
               "simulated": "the release [simulation] vllm_version plays"}.get(source, source)
        return _fail_usage(f"profile {profile.source} at vLLM {version} ({how}): {text}")
    launch_env = server_launch_env(profile, ph, environ)
    interp = find_server_interpreter(ph.resolve(profile.server.command[0]), launch_env)
    python = interp.argv if interp.python else None
    notes = [synthetic_note(probe_metadata(profile, ph, environ), launch_env)] if wants_synthetic(profile) else []
    if executor is not None:
        from .core.exec.cluster import fleet_commands_text

        text = fleet_commands_text(executor, profile, run_dir, version, source, vllm_python=python, notes=notes)
    else:
        text = show_commands_text(profile, run_dir, version, source, vllm_python=python, notes=notes)
    sys.stdout.write(redact(text))
    return 0


def _open_run(args: argparse.Namespace, web: bool = False) -> int:
    """--open RUN_DIR: the app on a finished run, read-only (tui/browse.py). Nothing is started or written."""
    others = [flag for flag, given in (("--profile", args.profile), ("--demo", args.demo),
                                       ("--headless", args.headless), ("--steps", args.steps),
                                       ("--run-dir", args.run_dir), ("--json", args.json),
                                       ("--show-commands", args.show_commands), ("--vllm-version", args.vllm_version),
                                       ("--ray", args.ray))
              if given]
    if others:
        return _fail_usage(f"--open browses a finished run; it cannot be combined with {', '.join(others)}. "
                           "To run a profile again: --profile RUN_DIR/profile.toml.")
    from .browse import OpenRunError, open_run

    try:
        run = open_run(args.open_run)
    except OpenRunError as exc:
        return _fail_usage(str(exc))
    if not (web or sys.stdin.isatty() and sys.stdout.isatty()):
        return _fail_usage(f"--open needs a terminal: it opens the app. Without one, read the run's files: "
                           f"{run.path / 'report.md'}, {run.path / 'report.json'} and the *.log files.")
    try:
        from .app import run_app
    except ModuleNotFoundError:
        return _fail_usage(f"--open needs the interactive UI, which is not available in this version; read "
                           f"{run.path / 'report.md'} instead.")
    return run_app(None, None, browse=run)


def main(argv: list[str] | None = None, *, web: bool = False) -> int:
    """`web`: the app is drawn in a browser (specdec-tui serve-web), so no terminal is needed for it."""
    try:
        return _main(argv, web)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout closed (e.g. `| head`): nothing more to say
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 1
    except Exception as exc:  # a bug: one paragraph, never a traceback (SPECDEC_DEBUG=1 re-raises)
        if os.environ.get("SPECDEC_DEBUG"):
            raise
        print(f"specdec-tui: internal error: {type(exc).__name__}: {redact(str(exc))}. This is a bug in "
              "specdec-tui; run it again with SPECDEC_DEBUG=1 for the traceback and report it.", file=sys.stderr)
        return 1


def build_compare_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="specdec-tui compare",
        description="Compare saved runs side by side from each run directory's report.json: profile, verdict, "
                    "platform, target/draft, k, baseline and speculative throughput, speedup, TPOT, TTFT, "
                    "acceptance (a tune run: one column per speculative arm and workload).",
        epilog="Exit codes: 0 printed, 2 usage error or a run directory without a readable report.json.",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (or their report.json)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON on stdout")
    p.add_argument("--headless", action="store_true",
                   help="print the table (the default without a terminal) instead of opening the app's compare screen")
    return p


def _compare_main(argv: list[str]) -> int:
    from .core.results.compare import CompareError, compare_columns, compare_json, load_run, render_compare

    try:
        args = build_compare_parser().parse_args(argv)
    except UsageError as exc:
        return _fail_usage(str(exc).replace("`specdec-tui --help`", "`specdec-tui compare --help`"))
    reports = []
    for d in args.run_dirs:
        try:
            reports.append(load_run(d))
        except CompareError as exc:
            return _fail_usage(str(exc))
    if args.json:
        sys.stdout.write(redact(json.dumps(compare_json(reports, args.run_dirs), indent=2)) + "\n")
        return 0
    if not args.headless and sys.stdin.isatty() and sys.stdout.isatty():
        try:
            from tui.screens.compare import run_compare_app
        except ModuleNotFoundError:
            pass  # no interactive UI in this version: the table below
        else:
            return run_compare_app(reports, paths=[str(d) for d in args.run_dirs])
    from rich.console import Console

    # not a terminal (a file, a pipe): wide enough for the columns instead of rich's default 80
    width = None if sys.stdout.isatty() else max(100, min(250, 24 + 30 * len(compare_columns(reports))))
    render_compare(reports, Console(file=sys.stdout, highlight=False, width=width))
    return 0


def _main(argv: list[str] | None, web: bool = False) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "compare":
        return _compare_main(list(argv[1:]))
    if argv and argv[0] == "serve-web":
        from .web.cli import serve_web_main

        return serve_web_main(list(argv[1:]))
    if argv and argv[0] == "fleet-local":  # a local Ray cluster of simulated nodes, to try --ray (tui/sim/fleet.py)
        from .sim.fleet import main as fleet_local_main

        return fleet_local_main(list(argv[1:]))
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        return _fail_usage(str(exc))
    if args.vllm_version is not None and not args.vllm_version.strip():
        return _fail_usage(f"--vllm-version is empty; give a vLLM version X.Y.Z from {served_text()} "
                           "with --show-commands (e.g. --vllm-version 0.32.0), or leave the option out.")
    if args.version:
        print(_version_text())
        return 0
    if args.list_profiles:
        for name, path in bundled_profiles().items():
            try:
                prof = load_profile(str(path))
                desc = prof.data.get("description", "")
                sim = " [simulated]" if prof.simulated else ""
            except ProfileError as exc:
                desc, sim = f"(invalid: {exc})", ""
            print(f"{name}{sim}\t{desc}")
        return 0
    if args.open_run is not None:
        return _open_run(args, web)
    if args.demo and args.profile and args.profile != "demo":
        return _fail_usage(f"--demo means --profile demo; it cannot be combined with --profile {args.profile}.")
    profile_name = "demo" if args.demo else args.profile
    if args.steps is not None and not args.steps.replace(",", "").strip():
        return _fail_usage(f"--steps is empty; allowed: {', '.join(STEP_IDS)} (comma-separated, e.g. --steps env,checkpoints). "
                           "Leave --steps out to run every step.")
    if profile_name is not None and not profile_name.strip():
        return _fail_usage("--profile is empty; give a bundled profile name (see `specdec-tui --list-profiles`) "
                           "or a path to a .toml file.")
    try:
        steps = parse_steps(args.steps) if profile_name is None else None  # with a profile: its own steps, below
    except ValueError as exc:
        return _fail_usage(str(exc))

    if profile_name is None and args.headless:
        return _fail_usage("--headless needs a profile: pass --profile NAME|PATH or --demo "
                           "(see `specdec-tui --list-profiles`).")
    profile = None
    if profile_name is not None:
        try:
            profile = with_absolute_paths(load_profile(profile_name))  # paths resolved once
        except ProfileError as exc:
            return _fail_usage(str(exc))
        add_secrets_from_env(profile.data["server"]["env"])  # redacted on every channel from here on
        try:
            steps = parse_steps(args.steps, profile)  # a tune profile has a step per arm
        except ValueError as exc:
            return _fail_usage(str(exc))

    from .core.results import gates

    try:
        expectations = gates.parse_all(args.expect)
        if profile is not None:
            gates.check_producible(expectations, profile)  # a gate that can never pass: refused before any run
    except ValueError as exc:
        return _fail_usage(str(exc))
    if expectations and not (args.headless or args.json):
        return _fail_usage("--expect gates a headless run: add --headless (or --json).")
    if args.ray is not None and not args.ray.strip():
        return _fail_usage("--ray is empty; give the Ray cluster's address (HOST:PORT of its head, e.g. "
                           "10.0.0.5:6379, or auto), or leave the option out to run on this host.")
    if args.ray is not None and profile is None:
        return _fail_usage("--ray needs a profile: pass --profile NAME|PATH (a tune profile, e.g. tune-demo).")
    if args.show_commands:
        if profile is None:
            return _fail_usage("--show-commands needs a profile: pass --profile NAME|PATH or --demo.")
        executor, problem = _connect_fleet(profile, args)
        if problem:
            return _fail_usage(problem)
        try:
            return _show_commands(profile, args, executor)
        finally:
            _disconnect(executor)
    if args.vllm_version:
        return _fail_usage("--vllm-version only applies to --show-commands.")

    if args.run_dir is not None:
        if not args.run_dir.strip():
            return _fail_usage("--run-dir is empty; give a directory path (or leave the option out).")
        if "\x00" in args.run_dir:
            return _fail_usage("--run-dir contains a NUL character; give a directory path.")
        run_dir = Path(os.path.abspath(args.run_dir))  # paths resolved once (children run elsewhere)
        if run_dir.exists() and not run_dir.is_dir():
            return _fail_usage(f"--run-dir {args.run_dir} exists and is not a directory; choose another path.")
        if profile is not None and run_dir.is_dir():
            try:
                check_reuse(run_dir, profile)  # nothing is written to a damaged, foreign or busy run directory
            except RunDirStateError as exc:
                return _fail_usage(str(exc))
    else:
        run_dir = Path(os.path.abspath(default_run_dir(profile.name if profile else "interactive")))

    executor = None
    if profile is not None:  # a fleet: the cluster is checked before anything runs or is written
        executor, problem = _connect_fleet(profile, args)
        if problem:
            return _fail_usage(problem)

    interactive = not args.headless and not args.json and (web or sys.stdin.isatty() and sys.stdout.isatty())
    if interactive:
        try:
            from .app import run_app  # noqa: F401
        except ModuleNotFoundError:
            interactive = False
            print("specdec-tui: the interactive UI is not available in this version; running headless.",
                  file=sys.stderr)
        else:
            return run_app(profile=profile, run_dir=run_dir, steps=steps, **({"executor": executor} if executor else {}))
    elif not args.headless and not args.json:
        print("specdec-tui: no terminal attached; running headless.", file=sys.stderr)

    if profile is None:
        return _fail_usage("no profile given: pass --profile NAME|PATH or --demo.")

    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _disconnect(executor)
        err = unwritable_error(exc, run_dir)
        why = err.reason() if err is not None else (exc.strerror or str(exc))
        return _fail_usage(f"cannot create the run directory {run_dir}: {why}. Choose a writable --run-dir.")

    from .headless import HeadlessRenderer

    renderer = HeadlessRenderer(verbose=args.verbose)
    engine = Engine(profile, run_dir, renderer, steps=steps, verbose=args.verbose, executor=executor)
    code = run_engine_blocking(engine)
    report_json = run_dir / "report.json"
    if expectations and report_json.exists() and engine.refused is None and engine.unwritable is None:
        ok, lines = gates.apply_gates(report_json, args.expect)
        for line in lines:
            print(f"specdec-tui: {redact(line)}", file=sys.stderr)
        if not ok and code == 0:
            code = 1
            print("specdec-tui: exit code 1: an --expect gate failed (the run itself passed)", file=sys.stderr)
    if args.json:
        rp = run_dir / "report.json"
        problem = engine.refused or engine.unwritable
        if rp.exists() and problem is None:
            sys.stdout.write(rp.read_text(encoding="utf-8", errors="replace"))
            sys.stdout.flush()
        else:
            msg = redact(str(problem)) if problem is not None else "no report written"
            sys.stdout.write(json.dumps({"error": msg, "exit_code": code}) + "\n")
    return code


def _disconnect(executor) -> None:
    """Leave the Ray cluster (a fleet run that ends before its engine starts)."""
    if executor is not None:
        import asyncio

        asyncio.run(executor.shutdown())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


__all__ = ["main", "build_parser", "build_compare_parser"]
