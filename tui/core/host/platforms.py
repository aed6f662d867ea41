"""Per-platform checks of the environment step: pure functions that read parsed facts and add Facts.

The `env` step gathers raw inputs (files under the sysroot, `neuron-ls -j`, `nvidia-smi`, the vLLM probe)
and calls these; nothing here starts a process or touches the network.

- neuron: instance type (DMI), /dev/neuron*, `neuron-ls` (logical cores, busy cores, HBM per core against the
  model's weights at the profile's TP), Neuron SDK, the vllm-neuron plugin and the vLLM pin it carries.
- cuda: `nvidia-smi -q -x` (driver, CUDA, GPUs, memory, processes) and `--query-gpu` CSV, CUDA_VISIBLE_DEVICES,
  GPUs used by other processes, GPU memory against the weights at TP x PP.
- cpu: the ISA (avx2 / avx512 flags of /proc/cpuinfo), cores, RAM (/proc/meminfo), VLLM_CPU_KVCACHE_SPACE,
  and the `+cpu` version vLLM's CPU platform detection needs.

Every fact has a value, a status, a detail, and a remedy that names the actual values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tui.core.events import FactRecording
from tui.core.host.sysinfo import (
    DEVICES_PER_INSTANCE, NEURON_SDK_VLLM, NeuronLs, fmt_bytes, neuron_sysfs_devices, parse_core_list, plugin_vllm_part,
    process_command, ranges, sdk_from_neuronx_cc, sdk_from_plugin, sdk_from_tools, version_ge, version_tuple,
)
from tui.core.host.placement import PlacementError, aligned_ranges, parse_visible_devices
from tui.core.host.platform_base import MIN_PLUGIN, env_lookup, install_remedy
from tui.core.host.weights import OVERHEAD_PER_RANK, _gib, bytes_per_param, smallest_fitting, weight_bytes

# The per-platform checks answer through this module too (steps/env reads them as plat.<name>): the CPU and
# CUDA ones live in host/cpu.py and host/cuda.py, the shared helpers in host/platform_base.py.
from tui.core.host.platform_base import PLATFORMS, profile_platform  # noqa: E402,F401
from tui.core.host.cpu import cpu_facts, parse_cpuinfo, parse_meminfo, synthetic_fact, wants_synthetic  # noqa: E402,F401
from tui.core.host.cuda import cuda_facts, parse_nvidia_smi_csv, parse_nvidia_smi_xml  # noqa: E402,F401


def instance_fact(rec: FactRecording, expected: str, actual: str | None, src: str) -> None:
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


def devices_fact(rec: FactRecording, root: Path, nodes: list[int], itype: str) -> None:
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


def needed_cores(rec: FactRecording, tp: int, environ: dict[str, str], server_env: dict[str, str],
                 pp: int = 1) -> list[int]:
    """Logical cores the engine will use: NEURON_VISIBLE_DEVICES when set, else 0..TP-1. A hand-set value is
    checked as tui.core.host.placement places servers: one contiguous range without repeats, TP x PP cores, starting
    at a multiple of the TP; otherwise the fact fails and names the ranges that would work."""
    val, where = env_lookup("NEURON_VISIBLE_DEVICES", environ, server_env)
    width = tp * max(int(pp or 1), 1)
    if val is None:
        return list(range(width))
    try:
        cores = parse_visible_devices(val, tp, pp)
    except PlacementError as exc:
        listed = parse_core_list(val)
        rec.add("NEURON_VISIBLE_DEVICES", repr(val) if listed is None else val, "fail", f"set in {where}: {exc}",
                f"set NEURON_VISIBLE_DEVICES to one of {aligned_ranges(tp, pp)} (the TP-aligned ranges of "
                f"{width} cores), or unset it to use 0-{width - 1}")
        return sorted(set(listed)) if listed else list(range(width))
    rec.add("NEURON_VISIBLE_DEVICES", val, "pass", f"set in {where}: the engine uses cores {ranges(cores)}")
    return cores


def neuron_ls_facts(rec: FactRecording, nls: dict[str, Any], parsed: NeuronLs | None, nodes: list[int], tp: int,
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

    # one entry per holding process (a TP16 server is listed under each of its devices): pid, command, where
    held: dict[Any, tuple[str, list[int], list[int]]] = {}
    outside: dict[Any, tuple[str, list[int], list[int]]] = {}
    for d in parsed.devices:
        for p in d.processes:
            cmd = p.command or process_command(p.pid) or "(command not reported)"
            entry = (held if d in devs else outside).setdefault(p.pid, (cmd, [], []))
            entry[1].append(d.index)
            entry[2].extend(d.core_ids)

    def _say(pid: Any, cmd: str, devices: list[int], cores: list[int]) -> str:
        where = (f"device {devices[0]}" if len(devices) == 1 else f"devices {ranges(devices)}")
        return f"pid {pid if pid is not None else '?'} `{cmd}` on {where} (cores {ranges(cores)})"

    holders = [_say(pid, *v) for pid, v in held.items()]
    others = [_say(pid, *v) for pid, v in outside.items() if pid not in held]
    if holders:
        pids = [pid for pid in held if pid is not None]
        kill = f"`kill {' '.join(str(p) for p in pids)}`" if pids else "`kill <pid>`"
        n = len(held)
        rec.add("Neuron cores free", f"busy ({n} process{'es' if n > 1 else ''})", "fail",
                "held: " + "; ".join(holders),
                f"stop {'that process' if n == 1 else 'those processes'}, e.g. {kill} (TP{tp} needs cores "
                f"{ranges(needed)}), then retry")
    else:
        detail = f"cores {ranges(needed)} are free"
        if others:
            detail += "; outside them: " + "; ".join(others)
        rec.add("Neuron cores free", "yes", "pass", detail)


def sdk_fact(rec: FactRecording, minimum: str, tools: str | None, tools_src: str, cc: str | None, cc_src: str,
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
    published = NEURON_SDK_VLLM.get(sdk)
    if published is not None and "no vllm-neuron version" in published:
        rec.add("Neuron SDK vLLM", f"SDK {sdk}: no published pin", "info",
                f"Neuron SDK {sdk}: {published}; the vLLM pin is read from the installed vllm-neuron's own version "
                "(A.B.C.x.y.z pins vLLM A.B.C)")
    mt = version_tuple(minimum) or ()
    if version_ge(sdk, mt) is False:
        rec.add("Neuron SDK", sdk, "fail", f"the profile needs Neuron SDK {minimum} or later ({detail})",
                f"upgrade the Neuron SDK (driver, runtime, tools, compiler, vllm-neuron) to {minimum}+ or use a current Neuron DLAMI")
    else:
        rec.add("Neuron SDK", sdk, "pass", f"{detail}; needs ≥ {minimum}")
    return sdk


def plugin_facts(rec: FactRecording, pdata: dict[str, Any], vllm_version: str | None, root: Path,
                  python: str) -> str | None:
    dists = pdata.get("dists", {}) or {}
    plugin = dists.get("vllm-neuron")
    eps = [e for e in pdata.get("platform_plugins", []) or [] if e.get("name") == "neuron"]
    if plugin and (plugin.get("wrong_package") or plugin.get("version") == "0.1.0"):
        rec.add("vllm-neuron", f"{plugin.get('version')} (placeholder)", "fail",
                "WRONG PACKAGE placeholder from PyPI: vllm-neuron 0.1.0 has no code and no `neuron` platform plugin",
                install_remedy(root, placeholder=True))
        return plugin.get("version")
    if not plugin:
        legacy = dists.get("neuronx-vllm-plugin")
        if legacy or eps:
            src = legacy or {"name": eps[0].get("dist"), "version": eps[0].get("dist_version")}
            rec.add("vllm-neuron", "not installed", "fail",
                    f"only {src.get('name')} {src.get('version')} provides the Neuron platform (a legacy plugin)",
                    install_remedy(root))
        else:
            rec.add("vllm-neuron", "not installed", "fail", f"no vllm-neuron distribution in {python}",
                    install_remedy(root))
        return None
    pv = plugin.get("version")
    if version_ge(pv, MIN_PLUGIN):
        rec.add("vllm-neuron", pv, "pass", "needs 0.21.0.1.0.0 or later (EAGLE3, gpt-oss BF16 on trn2)")
    else:
        rec.add("vllm-neuron", pv, "fail",
                "EAGLE3 and gpt-oss BF16 on trn2 need vllm-neuron 0.21.0.1.0.0 or later (Neuron SDK 2.31+)",
                install_remedy(root))
    if eps:
        e = eps[0]
        rec.add("neuron platform plugin", f"neuron = {e.get('value')}", "pass",
                f"vllm.platform_plugins entry point from {e.get('dist')} {e.get('dist_version')}")
    else:
        rec.add("neuron platform plugin", "missing", "fail",
                "no `neuron` entry point in vllm.platform_plugins: vLLM will not load the Neuron platform",
                f"reinstall vllm-neuron into {python} ({install_remedy(root)})")
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


def precompile_cache_fact(rec: FactRecording, plugin_version: str | None, environ: dict[str, str],
                          server_env: dict[str, str]) -> None:
    """vllm-neuron 0.29+ (SDK 2.33+): the Precompile Cache is off unless VLLM_NEURON_BACKEND selects the native
    route; TORCH_CACHING_PRECOMPILE=0 disables it (neuron.md, 2026-12 update)."""
    part = version_tuple(plugin_vllm_part(plugin_version))
    if part is None or part < (0, 29):
        return
    backend, bwhere = env_lookup("VLLM_NEURON_BACKEND", environ, server_env)
    pre, pwhere = env_lookup("TORCH_CACHING_PRECOMPILE", environ, server_env)
    name = "precompile cache"
    if backend in ("neuron_native", "neuron") and pre != "0":
        rec.add(name, "on", "info", f"VLLM_NEURON_BACKEND={backend} (in {bwhere}) selects the native route; a relaunch "
                "with the same configuration reuses the precompiled graphs")
    elif backend in ("neuron_native", "neuron"):
        rec.add(name, "off (TORCH_CACHING_PRECOMPILE=0)", "info", f"disabled in {pwhere}",
                "unset TORCH_CACHING_PRECOMPILE to reuse compiled graphs across launches")
    else:
        rec.add(name, "off", "info",
                f"vllm-neuron {plugin_version}: the Precompile Cache is off unless VLLM_NEURON_BACKEND is neuron_native "
                + (f"(it is {backend!r} in {bwhere})" if backend is not None else "(unset)"),
                'set VLLM_NEURON_BACKEND = "neuron_native" in [server.env] to reuse compiled graphs across launches')


def hbm_need_per_core(weights: float, tp: int) -> float:
    """HBM one logical core needs at tensor-parallel-size tp: its share of the weights plus the runtime."""
    return weights / max(int(tp), 1) + OVERHEAD_PER_RANK


def hbm_budget(parsed: NeuronLs | None, target: str, draft: str | None, profile: Any) -> tuple[int | None, int | None]:
    """(HBM per logical core, bytes of target + draft weights): the inputs of the HBM fit, None where unknown."""
    if parsed is None:
        return None, None
    per_dev = parsed.hbm_per_device
    cores_per_dev = max((len(d.core_ids) for d in parsed.devices), default=0)
    per_core = per_dev // cores_per_dev if per_dev and cores_per_dev else None
    bpp, dtype = bytes_per_param(profile)
    w, _ = weight_bytes(target, bpp, dtype)
    if w is None:
        return per_core, None
    dw = (weight_bytes(draft, bpp, dtype)[0] or 0) if draft else 0
    return per_core, w + dw


def hbm_fit_fact(rec: FactRecording, parsed: NeuronLs, tp: int, target: str, draft: str | None,
                 profile: Any) -> bool | None:
    """Weights of target (+ draft) spread over TP logical cores vs the HBM each logical core owns."""
    name = "HBM fit"
    per_dev = parsed.hbm_per_device
    cores_per_dev = max((len(d.core_ids) for d in parsed.devices), default=0)
    if not per_dev or not cores_per_dev:
        rec.add(name, "not checked", "info", "neuron-ls reports no memory_size / cores per device")
        return None
    per_core = per_dev // cores_per_dev
    bpp, dtype = bytes_per_param(profile)
    w, how = weight_bytes(target, bpp, dtype)
    if w is None:
        rec.add(name, "not checked", "info", f"{how}; each logical core has {_gib(per_core)} HBM")
        return None
    dw, dhow = weight_bytes(draft, bpp, dtype) if draft else (0, "")
    dw = dw or 0
    need = hbm_need_per_core(w + dw, tp)
    detail = (f"{target}: {fmt_bytes(w)} of weights ({how})" + (f" + draft {fmt_bytes(dw)}" if dw else "")
              + f", over TP{tp} = {_gib(need)} per logical core incl. ~{_gib(OVERHEAD_PER_RANK)} runtime; each logical "
              f"core owns {_gib(per_core)} HBM ({fmt_bytes(per_dev, 'GiB')} per device / {cores_per_dev} logical cores, "
              f"LNC={parsed.lnc or '?'}, from neuron-ls)")
    if need > per_core:
        fit = smallest_fitting(w + dw, per_core, parsed.logical_cores)
        remedy = (f"set [server] tensor_parallel_size = {fit} or higher (TP{tp} needs {_gib(need)} of "
                  f"{_gib(per_core)} per core)" if fit else
                  f"the weights do not fit in {parsed.logical_cores} logical cores: use a smaller model or quantization")
        rec.add(name, f"{_gib(need)} per core > {_gib(per_core)}", "fail",
                detail + ": the server would fail in warmup with an HBM allocation failure", remedy)
        return False
    rec.add(name, f"{_gib(need)} of {_gib(per_core)} per core", "pass", detail)
    return True
