"""Model weights for the memory fit checks (HBM, GPU memory, RAM): parameter counts of the bundled models,
bytes per parameter of a dtype, and the smallest parallel size whose per-unit memory holds them."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from tui.core.host.sysinfo import GIB


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
