"""Step `env`: check the machine before anything is downloaded or launched. Never touches the network.

Every fact is pass / warn / fail / info with a one-line remedy. Filesystem roots come from
`ctx.environ["SPECDEC_SYSROOT"]` (default "/"), tools from ctx.environ["PATH"] plus /opt/aws/neuron/bin.
The vLLM facts come from a probe run in the interpreter that owns the profile's `server.command[0]`.

Stored for later steps (StepResult.facts, i.e. ctx.shared["env"]):
  simulated, vllm_version, vllm_neuron_version, neuron_sdk, python (interpreter path), python_version,
  sonnet_available, bench_prints_spec_decode, instance_type, neuron_devices, logical_cores, lnc,
  hf_hub_cache, vllm_cache_root, compile_cache_dir, compile_cache_entries, port_free.
Artifact: env.json (facts, stored values, probe output, neuron-ls, SDK signals).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..diagnostics import from_env_facts
from ..events import Artifact
from ..probe import Interpreter, ProbeResult, find_server_interpreter, run_capture, run_probe, server_launch_env
from ..sysinfo import (
    DEVICES_PER_INSTANCE,
    GB,
    NeuronLs,
    compile_cache_entries,
    dlami_vllm_venvs,
    dmi_instance_type,
    fmt_bytes,
    free_bytes,
    hf_hub_cache,
    hf_repo_cached_bytes,
    is_numeric_host,
    neuron_device_nodes,
    neuron_sysfs_devices,
    parse_core_list,
    parse_neuron_ls,
    parse_neuronx_cc_version,
    plugin_vllm_part,
    port_error_text,
    port_holders,
    bind_error,
    process_command,
    ranges,
    same_filesystem,
    sdk_from_neuronx_cc,
    sdk_from_plugin,
    sdk_from_tools,
    search_path,
    sysroot,
    version_ge,
    version_tuple,
    vllm_cache_root,
    which,
)
from .base import FactRecorder, StepContext, StepResult

STEP = "env"

RT_VISIBLE_CORES_MSG = ("NEURON_RT_VISIBLE_CORES cannot be used with multi-processing execution on vLLM. "
                        "Set NEURON_VISIBLE_DEVICES to control device visibility.")
MIN_PLUGIN = (0, 21, 0, 1, 0, 0)
MIN_PYTHON = (3, 11)
SONNET_REMOVED = (0, 32)
SPEC_STATS_SINCE = (0, 14)
# Conservative download size of the tutorial pair: ~65 GB MXFP4 target + ~1.7 GB EAGLE3 draft.
TUTORIAL_MODELS = {"openai/gpt-oss-120b", "redhatai/gpt-oss-120b-speculator.eagle3"}
TUTORIAL_BYTES = 70 * GB
NEURON_LS_TIMEOUT_S = 15.0
PKG_TIMEOUT_S = 5.0
SIMULATED = "simulated"


def _install_remedy(root: Path, placeholder: bool = False) -> str:
    pre = "pip uninstall vllm-neuron, then " if placeholder else ""
    venvs = dlami_vllm_venvs(root)
    if venvs:
        return (f"{pre}use the Neuron DLAMI venv: source {venvs[-1]}/bin/activate "
                "(or install vllm-neuron from the Neuron repository)")
    return (f"{pre}install vllm-neuron from the Neuron repository (pip.repos.neuron.amazonaws.com) "
            "or use a Neuron DLAMI venv (/opt/aws_neuronx_venv_*vllm*)")


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


def _env_lookup(name: str, environ: dict[str, str], server_env: dict[str, str]) -> tuple[str | None, str]:
    """(value, where) with the profile's server.env taking precedence (it is applied on top at launch)."""
    if name in server_env:
        return server_env[name], "profile [server.env]"
    if name in environ:
        return environ[name], "the environment"
    return None, ""


async def run(ctx: StepContext) -> StepResult:
    rec = FactRecorder(ctx, STEP)
    prof = ctx.profile
    environ = dict(ctx.environ)
    root = sysroot(environ)
    spath = search_path(environ, root)
    simulated = prof.simulated
    srv = prof.server
    tp = int(srv.tensor_parallel_size)
    server_env = {k: ctx.ph.resolve(v) for k, v in srv.env.items()}
    launch_env = server_launch_env(prof, ctx.ph, environ)  # what `vllm serve` will see
    cmd0 = ctx.ph.resolve(srv.command[0])

    # ---- subprocess work, concurrently --------------------------------------------------------
    interp: Interpreter = find_server_interpreter(cmd0, launch_env, launch_env.get("PATH", ""))
    probe_task = run_probe(interp, launch_env, cwd=str(ctx.run.path))
    if simulated:
        probe = await probe_task
        nls: dict[str, Any] = {"found": False, "skipped": SIMULATED}
        tools_ver, tools_src = None, ""
    else:
        nls_exe = which("neuron-ls", spath)
        probe, nls, (tools_ver, tools_src) = await asyncio.gather(
            probe_task, _neuron_ls(nls_exe, environ), _tools_version(spath, environ))
    pdata = probe.data if probe.ok else {}
    packages: dict[str, str] = pdata.get("packages", {}) or {}
    dists: dict[str, dict[str, Any]] = pdata.get("dists", {}) or {}

    cc_ver, cc_src = None, ""
    if not simulated:
        if packages.get("neuronx-cc"):
            cc_ver, cc_src = packages["neuronx-cc"], "pip metadata"
        else:
            extra = os.path.dirname(interp.python) if interp.python else ""
            cc = which("neuronx-cc", spath + (os.pathsep + extra if extra else ""))
            if cc:
                rc, out, _ = await run_capture([cc, "--version"], environ, 20.0)
                cc_ver = parse_neuronx_cc_version(out) if rc == 0 else None
                cc_src = "neuronx-cc --version" if cc_ver else ""

    shared: dict[str, Any] = {"simulated": simulated}
    parsed: NeuronLs | None = nls.get("parsed")

    # ---- Neuron platform ---------------------------------------------------------------------
    expected_type = prof.environment.instance_type
    actual_type, dmi_src = dmi_instance_type(root)
    nodes = neuron_device_nodes(root)
    shared["instance_type"] = actual_type
    shared["neuron_devices"] = len(nodes)
    shared["logical_cores"] = parsed.logical_cores if parsed else None
    shared["lnc"] = parsed.lnc if parsed else None

    if simulated:
        for name in ("instance type", "Neuron devices", "neuron-ls", "Neuron SDK"):
            rec.add(name, SIMULATED, "pass", "simulated profile: no Neuron hardware is needed")
        shared["neuron_sdk"] = None
    else:
        _instance_fact(rec, expected_type, actual_type, dmi_src)
        _devices_fact(rec, root, nodes, expected_type or actual_type or "")
        needed = _needed_cores(rec, tp, environ, server_env)
        _neuron_ls_facts(rec, nls, parsed, nodes, tp, needed)
        shared["neuron_sdk"] = _sdk_fact(rec, prof.environment.min_neuron_sdk, tools_ver, tools_src, cc_ver, cc_src,
                                         dists.get("vllm-neuron"))

    # ---- vLLM and the plugin -----------------------------------------------------------------
    _interpreter_facts(rec, interp, probe, root, simulated)
    vllm_version: str | None = None
    if simulated:
        vllm_version = str(prof.simulation.vllm_version)
        rec.add("vLLM", f"{vllm_version} (simulated)", "pass",
                "from [simulation] vllm_version; the simulator stands in for `vllm`")
        rec.add("vllm-neuron", SIMULATED, "pass", "simulated profile: no Neuron plugin is needed")
        shared["vllm_neuron_version"] = None
    elif probe.ok:
        vllm_version = packages.get("vllm")
        if vllm_version:
            rec.add("vLLM", vllm_version, "pass", f"installed in {interp.python}")
        else:
            rec.add("vLLM", "not installed", "fail", f"no `vllm` distribution in {interp.python}",
                    _install_remedy(root))
        shared["vllm_neuron_version"] = _plugin_facts(rec, pdata, vllm_version, root, interp.python or "")
    else:
        shared["vllm_neuron_version"] = None
    shared["vllm_version"] = vllm_version
    vt = version_tuple(vllm_version)
    shared["sonnet_available"] = None if vt is None else vt < SONNET_REMOVED
    shared["bench_prints_spec_decode"] = None if vt is None else vt >= SPEC_STATS_SINCE
    if vt is not None:
        if vt >= SONNET_REMOVED:
            rec.add("sonnet dataset", f"removed in vLLM {vllm_version}", "fail",
                    "`vllm bench serve --dataset-name sonnet` no longer exists from vLLM 0.32: the benchmark steps "
                    "cannot run",
                    "run the vLLM the plugin pins (0.21.0 or 0.24.0; install the matching vllm-neuron or use the DLAMI venv)"
                    + (", or set [simulation] vllm_version below 0.32" if simulated else ""))
        else:
            rec.add("sonnet dataset", "available", "pass", f"vLLM {vllm_version} still has --dataset-name sonnet")
        if vt >= SPEC_STATS_SINCE:
            rec.add("spec-decode stats", "printed by vllm bench serve", "pass",
                    f"vLLM {vllm_version} prints the Speculative Decoding block")
        else:
            rec.add("spec-decode stats", "not printed", "info",
                    f"vLLM {vllm_version} (< 0.14) prints no Speculative Decoding block: the app scrapes /metrics itself")

    # ---- environment variables ---------------------------------------------------------------
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
    _host_facts(rec)
    _disk_facts(rec, prof, launch_env, simulated, shared)

    # ---- network -------------------------------------------------------------------------------
    shared["port_free"] = _port_fact(rec, srv.host, int(srv.port))
    _bind_address_fact(rec, srv.host, int(srv.port))

    shared["python"] = interp.python
    shared["python_version"] = pdata.get("python")
    doc = {
        "profile": prof.name,
        "simulated": simulated,
        "sysroot": str(root),
        "facts": rec.as_json(),
        "stored": shared,
        "interpreter": {"command": cmd0, "path": interp.path, "python": interp.python, "flags": interp.flags,
                        "how": interp.how, "error": interp.error},
        "probe": probe.as_dict(),
        "neuron_ls": {k: v for k, v in nls.items() if k != "parsed"} | ({"parsed": parsed.as_dict()} if parsed else {}),
        "sdk_signals": {"aws-neuronx-tools": tools_ver, "aws-neuronx-tools_source": tools_src,
                        "neuronx-cc": cc_ver, "neuronx-cc_source": cc_src,
                        "vllm-neuron": (dists.get("vllm-neuron") or {}).get("version")},
    }
    path = ctx.run.write_json("env.json", doc)
    ctx.emit(Artifact(STEP, "env.json", str(path)))
    for diag in from_env_facts(STEP, rec.facts, host=srv.host, port=srv.port):
        ctx.emit(diag)
    return rec.result(shared)


# ---------------------------------------------------------------------------------------------
# Neuron facts
# ---------------------------------------------------------------------------------------------


def _instance_fact(rec: FactRecorder, expected: str, actual: str | None, src: str) -> None:
    if not expected:
        rec.add("instance type", actual or "unknown", "info", "not checked: the profile sets no instance_type")
    elif actual is None:
        rec.add("instance type", "unknown", "fail",
                f"{src} is missing: this is not an EC2 (Nitro) instance; expected {expected}",
                f"run on a {expected} instance")
    elif actual != expected:
        rec.add("instance type", actual, "fail", f"expected {expected} (read from {src})",
                f"run on a {expected} instance, or set [environment] instance_type = \"\" to skip this check")
    else:
        rec.add("instance type", actual, "pass", f"read from {src}")


def _devices_fact(rec: FactRecorder, root: Path, nodes: list[int], itype: str) -> None:
    expected = DEVICES_PER_INSTANCE.get(itype)
    n = len(nodes)
    if n == 0:
        sysfs = neuron_sysfs_devices(root)
        if sysfs:
            rec.add("Neuron devices", "0", "fail",
                    f"no /dev/neuron* nodes, but the Neuron sysfs lists {len(sysfs)} devices: the driver is loaded and "
                    "the devices are not visible here (a container without --device?)",
                    "pass the devices in (docker run --device=/dev/neuron0 … or --privileged)")
        else:
            rec.add("Neuron devices", "0", "fail", "no /dev/neuron* devices: no Neuron driver or no Neuron hardware",
                    "run on a Trainium instance with the Neuron driver (aws-neuronx-dkms) installed and loaded")
        return
    shown = f"{n} (/dev/neuron{nodes[0]}..{nodes[-1]})" if n > 1 else f"1 (/dev/neuron{nodes[0]})"
    if expected and n < expected:
        rec.add("Neuron devices", shown, "warn", f"{itype} has {expected}; only {n} visible",
                "check `neuron-ls`; a container may expose only some devices")
    else:
        rec.add("Neuron devices", shown, "pass", f"{itype} has {expected}" if expected else "")


def _needed_cores(rec: FactRecorder, tp: int, environ: dict[str, str], server_env: dict[str, str]) -> list[int]:
    """Logical cores the engine will use: NEURON_VISIBLE_DEVICES when set, else 0..TP-1."""
    val, where = _env_lookup("NEURON_VISIBLE_DEVICES", environ, server_env)
    if val is None:
        return list(range(tp))
    cores = parse_core_list(val)
    if cores is None:
        rec.add("NEURON_VISIBLE_DEVICES", repr(val), "fail", f"set in {where} but not a core list such as 0-15",
                "fix or unset NEURON_VISIBLE_DEVICES")
        return list(range(tp))
    if len(cores) != tp:
        rec.add("NEURON_VISIBLE_DEVICES", val, "fail",
                f"set in {where}: selects {len(cores)} logical cores but tensor_parallel_size is {tp}",
                f"unset NEURON_VISIBLE_DEVICES or list exactly {tp} cores")
    else:
        rec.add("NEURON_VISIBLE_DEVICES", val, "pass", f"set in {where}: the engine uses cores {ranges(cores)}")
    return cores


def _neuron_ls_facts(rec: FactRecorder, nls: dict[str, Any], parsed: NeuronLs | None, nodes: list[int], tp: int,
                     needed: list[int]) -> None:
    if not nls.get("found"):
        rec.add("neuron-ls", "not found", "warn",
                "not on PATH nor in /opt/aws/neuron/bin: core count and busy cores are not checked",
                "install aws-neuronx-tools and add /opt/aws/neuron/bin to PATH")
        if nodes:
            est = len(nodes) * 4
            rec.add("logical cores", f"~{est} (estimated)", "info",
                    f"assuming LNC=2 (4 logical cores per trn2 device); TP{tp} needs {tp}")
        return
    if parsed is None:
        rec.add("neuron-ls", "error", "warn", f"`neuron-ls -j`: {nls.get('error', 'failed')}",
                "run `neuron-ls` by hand; reinstall aws-neuronx-tools if it fails")
        return
    hbm = parsed.hbm_per_device
    lnc = parsed.lnc
    value = (f"{len(parsed.devices)} devices, {parsed.logical_cores} logical cores, LNC={lnc if lnc else '?'}, "
             f"{fmt_bytes(hbm, 'GiB') if hbm else '?'} HBM per device")
    detail = f"instance type {parsed.instance_type}" if parsed.instance_type else ""
    rec.add("neuron-ls", value, "pass", detail)

    have = {c for d in parsed.devices for c in d.core_ids}
    missing = [c for c in needed if c not in have]
    devs = parsed.devices_for_cores(needed)
    if missing:
        rec.add("logical cores", str(parsed.logical_cores), "fail",
                f"TP{tp} needs logical cores {ranges(needed)}; cores {ranges(missing)} do not exist (LNC={lnc or '?'})",
                f"lower [server] tensor_parallel_size to at most {parsed.logical_cores} or use a larger instance")
    else:
        rec.add("logical cores", str(parsed.logical_cores), "pass",
                f"TP{tp} uses cores {ranges(needed)} on device(s) {ranges(d.index for d in devs)}")

    holders: list[str] = []
    first_pid: int | None = None
    others: list[str] = []
    for d in parsed.devices:
        for p in d.processes:
            cmd = p.command or process_command(p.pid) or "(command not reported)"
            text = f"pid {p.pid if p.pid is not None else '?'} `{cmd}` on device {d.index} (cores {ranges(d.core_ids)})"
            if d in devs:
                holders.append(text)
                if first_pid is None and p.pid is not None:
                    first_pid = p.pid
            else:
                others.append(text)
    if holders:
        kill = f"`kill {first_pid}`" if first_pid is not None else "`kill <pid>`"
        rec.add("Neuron cores free", f"busy ({len(holders)} process{'es' if len(holders) > 1 else ''})", "fail",
                "held: " + "; ".join(holders),
                f"stop that process, e.g. {kill} (TP{tp} needs cores {ranges(needed)})")
    else:
        detail = f"cores {ranges(needed)} are free"
        if others:
            detail += "; outside them: " + "; ".join(others)
        rec.add("Neuron cores free", "yes", "pass", detail)


def _sdk_fact(rec: FactRecorder, minimum: str, tools: str | None, tools_src: str, cc: str | None, cc_src: str,
              plugin: dict[str, Any] | None) -> str | None:
    signals: list[str] = []
    candidates: list[str] = []
    if tools:
        s = sdk_from_tools(tools)
        signals.append(f"aws-neuronx-tools {tools} ({tools_src}) → {s or '?'}")
        if s:
            candidates.append(s)
    if cc:
        s = sdk_from_neuronx_cc(cc)
        signals.append(f"neuronx-cc {cc} ({cc_src}) → {s or '?'}")
        if s:
            candidates.append(s)
    pv = plugin.get("version") if plugin and not plugin.get("wrong_package") else None
    if pv:
        s = sdk_from_plugin(pv)
        signals.append(f"vllm-neuron {pv} → {s or '?'}")
        if s:
            candidates.append(s)
    sdk = candidates[0] if candidates else None
    detail = "; ".join(signals)
    if sdk is None:
        rec.add("Neuron SDK", "unknown", "warn",
                "no aws-neuronx-tools package, neuronx-cc or known vllm-neuron version found" + (f" ({detail})" if detail else ""),
                f"install Neuron SDK {minimum or '2.31'} or later, or use a Neuron DLAMI")
        return None
    if not minimum:
        rec.add("Neuron SDK", sdk, "pass", detail + "; the profile sets no minimum")
        return sdk
    mt = version_tuple(minimum) or ()
    if version_ge(sdk, mt) is False:
        rec.add("Neuron SDK", sdk, "fail", f"the profile needs Neuron SDK {minimum} or later ({detail})",
                f"upgrade the Neuron SDK (driver, runtime, tools, compiler, vllm-neuron) to {minimum}+ or use a current Neuron DLAMI")
    else:
        rec.add("Neuron SDK", sdk, "pass", f"{detail}; needs ≥ {minimum}")
    return sdk


# ---------------------------------------------------------------------------------------------
# vLLM facts
# ---------------------------------------------------------------------------------------------


def _interpreter_facts(rec: FactRecorder, interp: Interpreter, probe: ProbeResult, root: Path,
                       simulated: bool) -> None:
    if not interp.python:
        venvs = dlami_vllm_venvs(root)
        if simulated:
            remedy = "fix [server] command in the profile (the simulator runs as [\"{python}\", \"-m\", \"tui.sim\"])"
        elif venvs:
            remedy = f"activate the Neuron vLLM venv: source {venvs[-1]}/bin/activate"
        else:
            remedy = ("activate the venv that has vllm-neuron (a Neuron DLAMI has /opt/aws_neuronx_venv_*vllm*) "
                      "or set [server] command")
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
    if vi and vi[:2] >= MIN_PYTHON:
        rec.add("Python (vLLM)", d.get("python", "?"), "pass", "vllm-neuron needs Python 3.11+")
    else:
        rec.add("Python (vLLM)", d.get("python", "?"), "fail", f"{interp.python} is older than Python 3.11",
                "use a Python 3.11+ venv for vLLM (the Neuron DLAMI venvs are)")


def _plugin_facts(rec: FactRecorder, pdata: dict[str, Any], vllm_version: str | None, root: Path,
                  python: str) -> str | None:
    dists = pdata.get("dists", {}) or {}
    plugin = dists.get("vllm-neuron")
    eps = [e for e in pdata.get("platform_plugins", []) or [] if e.get("name") == "neuron"]
    if plugin and (plugin.get("wrong_package") or plugin.get("version") == "0.1.0"):
        rec.add("vllm-neuron", f"{plugin.get('version')} (placeholder)", "fail",
                "WRONG PACKAGE placeholder from PyPI: vllm-neuron 0.1.0 has no code and no `neuron` platform plugin",
                _install_remedy(root, placeholder=True))
        return plugin.get("version")
    if not plugin:
        legacy = dists.get("neuronx-vllm-plugin")
        if legacy or eps:
            src = legacy or {"name": eps[0].get("dist"), "version": eps[0].get("dist_version")}
            rec.add("vllm-neuron", "not installed", "fail",
                    f"only {src.get('name')} {src.get('version')} provides the Neuron platform (a legacy plugin)",
                    _install_remedy(root))
        else:
            rec.add("vllm-neuron", "not installed", "fail", f"no vllm-neuron distribution in {python}",
                    _install_remedy(root))
        return None
    pv = plugin.get("version")
    if version_ge(pv, MIN_PLUGIN):
        rec.add("vllm-neuron", pv, "pass", "needs 0.21.0.1.0.0 or later (EAGLE3, gpt-oss BF16 on trn2)")
    else:
        rec.add("vllm-neuron", pv, "fail",
                "EAGLE3 and gpt-oss BF16 on trn2 need vllm-neuron 0.21.0.1.0.0 or later (Neuron SDK 2.31+)",
                _install_remedy(root))
    if eps:
        e = eps[0]
        rec.add("neuron platform plugin", f"neuron = {e.get('value')}", "pass",
                f"vllm.platform_plugins entry point from {e.get('dist')} {e.get('dist_version')}")
    else:
        rec.add("neuron platform plugin", "missing", "fail",
                "no `neuron` entry point in vllm.platform_plugins: vLLM will not load the Neuron platform",
                f"reinstall vllm-neuron into {python} ({_install_remedy(root)})")
    origin = (pdata.get("find_spec") or {}).get("vllm_neuron")
    if origin:
        rec.add("vllm_neuron module", "found", "pass", str(origin))
    else:
        rec.add("vllm_neuron module", "not found", "fail",
                f"the vllm-neuron distribution is installed but `vllm_neuron` is not importable in {python} "
                "(an editable install whose source tree moved?)",
                f"reinstall vllm-neuron into {python}")
    part = plugin_vllm_part(pv)
    if vllm_version and part:
        vt = version_tuple(vllm_version) or ()
        if ".".join(str(x) for x in vt[:3]) == part:
            rec.add("vLLM pin", f"vllm {vllm_version} matches", "pass", f"vllm-neuron {pv} pins vLLM {part}")
        else:
            rec.add("vLLM pin", f"vllm {vllm_version} ≠ {part}", "fail",
                    f"vllm-neuron {pv} is built for vLLM {part}, but {python} has vLLM {vllm_version}",
                    f"{python} -m pip install vllm=={part} (or use the Neuron DLAMI venv)")
    return pv


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
    if sys.version_info[:2] >= MIN_PYTHON:
        rec.add("Python (app)", v, "pass", sys.executable)
    else:  # pragma: no cover - the package requires 3.11
        rec.add("Python (app)", v, "fail", "specdec-tui needs Python 3.11+", "run the app with Python 3.11 or later")


def _host_facts(rec: FactRecorder) -> None:
    try:
        import psutil

        mem = psutil.virtual_memory().total
        rec.add("host RAM", fmt_bytes(mem, "GiB"), "info", "trn2.48xlarge has 2048 GiB")
        logical = psutil.cpu_count(logical=True)
        phys = psutil.cpu_count(logical=False)
        rec.add("CPUs", f"{logical} logical" + (f" ({phys} cores)" if phys else ""), "info", "trn2.48xlarge has 192 vCPUs")
    except Exception as exc:  # pragma: no cover - psutil is a dependency
        rec.add("host RAM", "unknown", "info", f"psutil unavailable: {exc}")


def _disk_facts(rec: FactRecorder, prof: Any, environ: dict[str, str], simulated: bool, shared: dict[str, Any]) -> None:
    hub = hf_hub_cache(environ)
    vroot = vllm_cache_root(environ)
    shared["hf_hub_cache"] = str(hub)
    shared["vllm_cache_root"] = str(vroot)
    free, anc = free_bytes(hub)
    models = [prof.models.target, prof.draft_model]
    remote = [m for m in models if not os.path.isdir(os.path.expanduser(m))]
    if free is None:
        rec.add("disk (HF cache)", "unknown", "warn", f"cannot read free space of {anc}",
                "check the HF cache location (HF_HUB_CACHE / HF_HOME)")
    elif simulated:
        rec.add("disk (HF cache)", f"{fmt_bytes(free)} free", "info",
                f"{hub}: a simulated run downloads small stand-in checkpoints")
    elif not remote:
        rec.add("disk (HF cache)", f"{fmt_bytes(free)} free", "info", f"{hub}: both models are local directories")
    elif all(m.lower() in TUTORIAL_MODELS for m in remote):
        cached = sum(hf_repo_cached_bytes(hub, m) for m in remote)
        need = max(0, TUTORIAL_BYTES - cached)
        where = f"{hub}" + (f" (on {anc})" if anc != hub else "")
        if free < need:
            rec.add("disk (HF cache)", f"{fmt_bytes(free)} free", "fail",
                    f"{where}: the gpt-oss-120b checkpoints need ~{fmt_bytes(TUTORIAL_BYTES)}, {fmt_bytes(cached)} "
                    f"already cached, {fmt_bytes(need)} more needed but only {fmt_bytes(free)} free",
                    f"free {fmt_bytes(need - free)} or point HF_HUB_CACHE / HF_HOME at a larger local disk")
        else:
            rec.add("disk (HF cache)", f"{fmt_bytes(free)} free", "pass",
                    f"{where}: needs ~{fmt_bytes(need)} more ({fmt_bytes(cached)} of ~{fmt_bytes(TUTORIAL_BYTES)} cached)")
    else:
        rec.add("disk (HF cache)", f"{fmt_bytes(free)} free", "info",
                f"{hub}: no size estimate for {', '.join(remote)}")

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


def _port_fact(rec: FactRecorder, host: str, port: int) -> bool | None:
    name = "server port"
    check_host = "127.0.0.1" if host == "localhost" else ("0.0.0.0" if host == "" else host)
    if not is_numeric_host(check_host):
        rec.add(name, f"{host}:{port}", "info", f"not checked: {host} is a name and this step makes no DNS lookups")
        return None
    err = bind_error(check_host, port)
    if err is None:
        rec.add(name, f"{host}:{port} free", "pass")
        return True
    if err.errno is not None and port_error_text(err) == "in use":
        holders, how = port_holders(port)
        named = [(pid, cmd) for pid, cmd in holders if pid is not None]
        if named:
            who = "; ".join(f"pid {pid} `{cmd or '?'}`" for pid, cmd in named)
            rec.add(name, f"{host}:{port} in use", "fail", f"held by {who} (found via {how})",
                    f"stop it (`kill {named[0][0]}`) or set [server] port to a free port")
        else:
            rec.add(name, f"{host}:{port} in use", "fail", "held by a process this user cannot see",
                    f"find it with `sudo ss -ltnp 'sport = :{port}'` and stop it, or set [server] port to a free port")
        return False
    rec.add(name, f"{host}:{port}", "fail", f"cannot bind: {port_error_text(err)}",
            "set [server] host/port to a local address and a free port ≥ 1024")
    return False


def _bind_address_fact(rec: FactRecorder, host: str, port: int) -> None:
    if host in ("0.0.0.0", "::", ""):
        rec.add("bind address", host or "(all interfaces)", "warn",
                "the OpenAI API is open to the network (no authentication)",
                f'set [server] host = "127.0.0.1" and use an SSH tunnel (ssh -L {port}:127.0.0.1:{port} …)')
    elif host in ("localhost", "::1") or host.startswith("127."):
        rec.add("bind address", host, "pass", "loopback only")
    else:
        rec.add("bind address", host, "info", "reachable from the network this address is on")
