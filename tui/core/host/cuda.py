"""The CUDA platform's environment checks: nvidia-smi (XML and CSV) parsed, the visible GPUs, and the facts."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from tui.core.events import FactRecording
from tui.core.host.sysinfo import GIB, fmt_bytes, process_command, version_tuple
from tui.core.host.platform_base import MIB, env_lookup
from tui.core.host.weights import _gib, bytes_per_param, smallest_fitting, weight_bytes


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
