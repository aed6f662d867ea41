"""What each served vLLM release is, read from its own wheel: `tui/core/data/vllm_facts.json`.

The file is generated (tests/vllm_wheel_facts.py, from the excerpts under tests/fixtures/vllm/<version>/, which
record each wheel's sha256 and build date) and never edited by hand; tests/test_vllm_facts.py checks that it is
what the generator gives. Per release (0.29.0 to 0.34.0):

- `speculative`: the fields `SpeculativeConfig` takes (vllm/config/speculative.py; vLLM's `@config` dataclasses
  forbid any other key), the ones vLLM fills in itself (`SkipValidation[...]`), the init=False ones, the ones
  documented as deprecated no-ops, and the values of its method Literals (`rejection_sample_method`, ...);
- `bench_serve_flags`: every `--flag` `vllm bench serve` declares;
- `markers`: behaviour changes found in the source, each with its file:line (`model_runner_v1_removed`,
  `cpu_x86_requires_triton`, `bench_stream_error_fails_request`, `bench_chat_backends_skip_chat_template`, ...).

A patch release X.Y.Z is read with X.Y.0's facts (a patch does not change these tables); a release with no
entry gives None ("not known", never a guess).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from tui.core.versions import release

DATA = "data/vllm_facts.json"


@dataclass(frozen=True)
class WheelSource:
    """Where a release's facts were read: the wheel's file name, sha256, size and build date."""

    version: str
    wheel: str
    sha256: str
    built: str
    commit: str | None


@dataclass(frozen=True)
class SpeculativeFields:
    """The fields of one release's `SpeculativeConfig` (what `--speculative-config` JSON may carry)."""

    version: str
    fields: tuple[str, ...]  # every key SpeculativeConfig(**json) takes, in declaration order
    internal: tuple[str, ...]  # filled in by vLLM itself (passed from the engine / made in post-init)
    init_false: tuple[str, ...]  # not constructor arguments at all (0.34: custom_method)
    deprecated: tuple[str, ...]  # documented as "Deprecated and has no effect"
    types: tuple[tuple[str, str], ...]  # (field, its annotation as written)
    methods: tuple[str, ...]
    rejection_sample_methods: tuple[str, ...]
    draft_sample_methods: tuple[str, ...]

    def settable(self) -> tuple[str, ...]:
        """The keys a user may put into --speculative-config: the fields less the internal ones."""
        return tuple(f for f in self.fields if f not in self.internal)

    def annotation(self, name: str) -> str | None:
        return dict(self.types).get(name)


@lru_cache(maxsize=1)
def _facts() -> dict[str, Any]:
    text = resources.files("tui.core").joinpath(DATA).read_text(encoding="utf-8")
    return json.loads(text)["versions"]


def known_versions() -> tuple[str, ...]:
    """The releases with facts, oldest first ("0.29.0", ..., "0.34.0")."""
    return tuple(_facts())


def _entry(version: str | None) -> tuple[str, dict[str, Any]] | None:
    rel = release(version)
    if rel is None:
        return None
    key = f"{rel[0]}.{rel[1] if len(rel) > 1 else 0}.0"
    entry = _facts().get(key)
    return (key, entry) if entry is not None else None


def source(version: str | None) -> WheelSource | None:
    """The wheel `version`'s facts were read from (None: no facts for it)."""
    hit = _entry(version)
    if hit is None:
        return None
    key, e = hit
    s = e["source"]
    return WheelSource(key, s["wheel"], s["wheel_sha256"], s["built"], s.get("commit"))


@lru_cache(maxsize=64)
def speculative_fields(version: str | None) -> SpeculativeFields | None:
    """`SpeculativeConfig`'s fields in `version` (X.Y.Z read as X.Y.0), None when no facts are recorded for it."""
    hit = _entry(version)
    if hit is None:
        return None
    key, e = hit
    s = e["speculative_config"]
    return SpeculativeFields(key, tuple(s["fields"]), tuple(s["internal"]), tuple(s["init_false"]),
                             tuple(s["deprecated"]), tuple(sorted(s["types"].items())), tuple(s.get("methods", ())),
                             tuple(s.get("rejection_sample_methods", ())), tuple(s.get("draft_sample_methods", ())))


def bench_serve_flags(version: str | None) -> frozenset[str] | None:
    """The `--flags` `vllm bench serve` declares in `version`, None when not known."""
    hit = _entry(version)
    return frozenset(hit[1]["bench_serve_flags"]) if hit is not None else None


def marker(version: str | None, name: str) -> str | None:
    """Where `version`'s source carries behaviour `name` ("path:line"), "" when it does not, None when the
    release has no facts."""
    hit = _entry(version)
    if hit is None:
        return None
    return hit[1]["markers"].get(name, "")


def has(version: str | None, name: str) -> bool | None:
    """Whether `version` carries behaviour `name` (see marker); None when not known."""
    where = marker(version, name)
    return None if where is None else bool(where)


__all__ = ["SpeculativeFields", "WheelSource", "bench_serve_flags", "has", "known_versions", "marker", "source",
           "speculative_fields"]
