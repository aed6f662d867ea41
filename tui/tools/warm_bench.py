"""A warm bench runner: one long-lived process that runs an arm's `vllm bench serve` commands one after another, each
from exactly its argv, with the bench's own code imported once.

Standalone: the standard library only, no import of the app. It runs in the interpreter that runs the bench command
(the `vllm` console script's Python), started by the app (tui/core/proc/warm.py) as

    SPECDEC_WARM_NONCE=<nonce> <python> [its flags] warm_bench.py

(the nonce marks its end-of-job lines; it is taken out of the environment the benches see) and reads one JSON job
a line on stdin:

    {"id": "3", "kind": "path", "target": "/venv/bin/vllm", "args": ["bench", "serve", ...], "quiet": false}

`kind` "path" runs the file `target` as `__main__` (a console script: what the shebang would run), "module" runs
the module `target` as `__main__` (`python -m target`); `sys.argv` is [the file, *args], `sys.path[0]` is the
script's directory (for a module, the working directory), as a fresh `python script args` / `python -m target args`
has them. The job's output (stdout and stderr, which the app merges) is the bench's own; when it ends, one line:

    [specdec-warm NONCE] ID exit RC

(RC: 0, the SystemExit code, 1 for an uncaught exception, whose traceback is printed first as Python prints it).
A "quiet" job (the warm-up, `bench serve --help`, which imports the bench's code) has its output kept back and
printed only when it fails. Between jobs the process is put back the way a fresh one starts: the environment, the
SIGINT/SIGTERM handlers, the warnings shown once per process, vLLM's log-once caches, the frozen GC heap. Ctrl+C
(SIGINT) ends the job with 130 and the runner with it; end of input ends the runner.
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import signal
import sys
import tempfile
import traceback
import warnings

MARK = "[specdec-warm {nonce}] {id} exit {rc}"
NONCE_VAR = "SPECDEC_WARM_NONCE"


def _exit_code(exc: SystemExit) -> int:
    """What the interpreter would exit with: None -> 0, an int as it is, anything else printed to stderr -> 1."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _fresh(environ: dict, handlers: dict) -> None:
    """Undo what a job leaves behind in the process, so that the next starts as a fresh process would."""
    os.environ.clear()
    os.environ.update(environ)
    for sig, handler in handlers.items():
        try:
            signal.signal(sig, handler)
        except (OSError, ValueError, TypeError):
            pass
    for mod in list(sys.modules.values()):  # warnings shown "once per location" show again, as in a new process
        try:  # the module's own dict: a lazy module's __getattr__ would import things
            reg = object.__getattribute__(mod, "__dict__").get("__warningregistry__")
        except (AttributeError, TypeError):
            continue
        if isinstance(reg, dict):
            reg.clear()
    try:
        warnings._filters_mutated()  # type: ignore[attr-defined]
    except AttributeError:
        pass
    logger = sys.modules.get("vllm.logger")  # vLLM's logger.info_once / warning_once: an lru_cache per process
    for name in dir(logger) if logger is not None else ():
        fn = getattr(logger, name, None)
        if name.endswith("_once") and hasattr(fn, "cache_clear"):
            fn.cache_clear()
    if hasattr(gc, "unfreeze"):  # vLLM's bench freezes the heap before it sends requests (freeze_gc_heap); its
        gc.unfreeze()            # next freeze collects it again, as in a fresh process


def _run(job: dict) -> int:
    target, args = str(job["target"]), [str(a) for a in job.get("args") or []]
    if job.get("kind") == "module":
        sys.argv = [target, *args]  # runpy puts the module's file in argv[0]
        sys.path[0] = os.getcwd()
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [target, *args]
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        runpy.run_path(target, run_name="__main__")
    return 0


def run_job(job: dict) -> int:
    """Run one job; its exit status. KeyboardInterrupt propagates (after the traceback)."""
    try:
        return _run(job)
    except SystemExit as exc:
        return _exit_code(exc)
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - what an uncaught exception does to a fresh interpreter
        traceback.print_exc()
        return 1


def quietly(job: dict) -> int:
    """Run `job` with file descriptors 1 and 2 sent to a temporary file (the Python stream objects stay as they are,
    so a logging handler set up during it still writes to the real stdout later); print it back when it failed."""
    _flush()
    saved = (os.dup(1), os.dup(2))
    with tempfile.TemporaryFile() as buf:
        os.dup2(buf.fileno(), 1)
        os.dup2(buf.fileno(), 2)
        try:
            rc = run_job(job)
        finally:
            _flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        if rc != 0:
            buf.seek(0)
            sys.stdout.write(buf.read().decode("utf-8", errors="replace"))
    return rc


def main(argv: list[str]) -> int:
    nonce = os.environ.pop(NONCE_VAR, "")
    if argv or not nonce:
        print(f"usage: {NONCE_VAR}=<nonce> warm_bench.py  (jobs as JSON lines on stdin)", file=sys.stderr)
        return 2
    control = os.fdopen(os.dup(0), "r", encoding="utf-8")  # the jobs; the benches see /dev/null as their stdin
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    environ = dict(os.environ)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return serve(control, nonce, environ, handlers)
    finally:
        control.close()


def serve(control, nonce: str, environ: dict, handlers: dict) -> int:
    """Run the jobs read from `control` until its end (0), a bad job (2) or Ctrl+C (130)."""
    for line in control:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            jid = str(job["id"])
            str(job["target"])
        except (ValueError, KeyError, TypeError) as exc:
            print(f"warm_bench: bad job {line.strip()[:200]!r}: {exc}", file=sys.stderr, flush=True)
            return 2
        try:
            rc = quietly(job) if job.get("quiet") else run_job(job)
        except KeyboardInterrupt:
            traceback.print_exc()
            _flush()
            print(MARK.format(nonce=nonce, id=jid, rc=130), flush=True)
            return 130
        _flush()
        print(MARK.format(nonce=nonce, id=jid, rc=rc), flush=True)
        _fresh(environ, handlers)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:  # stopped between jobs
        sys.exit(130)
