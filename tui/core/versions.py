"""The one version type of the engine and the simulator.

Every version the app compares (vLLM, vllm-neuron, the Neuron SDK and its packages, CUDA) goes through
`parse`: a `packaging.version.Version` (PEP 440: "0.11.1rc5", "0.32.0+cpu", "0.33.0.dev12+g1234"), after
dropping a dpkg epoch ("1:2.32.28.0-1"); a string PEP 440 does not accept keeps its leading numeric fields
("2.x-beta" -> 2). Feature thresholds compare the release numbers (`release`, `at_least`): a pre-release, dev
or local build of X.Y.Z counts as X.Y.Z, since vLLM's rc and dev builds already carry the release's flags.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

__all__ = ["Version", "parse", "release", "at_least", "release_str"]


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
