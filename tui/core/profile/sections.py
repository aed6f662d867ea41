"""Typed, frozen views of a profile's tables: what the plan, the arms, the report and the panes read.

`Profile.speculative` is a `SpeculativeSettings` and `Profile.server` a `ServerSettings`, built from the
validated table (`Profile.data`), so every value has already passed the schema. They are values: an arm of a
tune run carries its own `SpeculativeSettings` (`dataclasses.replace` of the profile's one with the arm's
method, draft and k), and changing one value never rebuilds or re-validates a profile.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class SpeculativeSettings:
    """The [speculative] table: the JSON of vLLM's `--speculative-config`."""

    method: str
    model: str  # the draft model: Profile.speculative fills in models.draft where speculative.model is ""
    num_speculative_tokens: int
    draft_tensor_parallel_size: int  # 0: unset, vLLM uses the target's TP
    extra_json: str = "{}"  # [speculative.extra] as canonical JSON (hashable): further --speculative-config keys

    @property
    def extra(self) -> dict[str, Any]:
        """[speculative.extra]: further --speculative-config keys, merged into its JSON as they are."""
        return json.loads(self.extra_json)

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> "SpeculativeSettings":
        vals = {f.name: table[f.name] for f in fields(cls) if f.name != "extra_json"}
        return cls(**vals, extra_json=json.dumps(table.get("extra") or {}, sort_keys=True))

    def with_extra(self, **keys: Any) -> "SpeculativeSettings":
        """These settings with keys added to (or, with value None, removed from) [speculative.extra]."""
        extra = self.extra
        for k, v in keys.items():
            if v is None:
                extra.pop(k, None)
            else:
                extra[k] = v
        return replace(self, extra_json=json.dumps(extra, sort_keys=True))

    def as_table(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("extra_json")
        out["extra"] = self.extra
        return out


@dataclass(frozen=True)
class ServerSettings:
    """The [server] table: the `vllm serve` command's flags and the engine's timeouts for it. The list and
    table values are copies of the profile's, so changing them changes nothing else."""

    command: list[str]
    host: str
    port: int
    dtype: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_num_seqs: int
    max_model_len: int
    max_num_batched_tokens: int
    enable_prefix_caching: bool
    enforce_eager: bool
    hf_overrides: dict[str, Any]
    additional_config: dict[str, Any]
    startup_timeout_s: float
    stop_grace_s: float
    env: dict[str, str]

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> "ServerSettings":
        return cls(**{f.name: copy.deepcopy(table[f.name]) for f in fields(cls)})

    def as_table(self) -> dict[str, Any]:
        return copy.deepcopy(asdict(self))
