"""Typed, frozen views of a profile's tables: what the plan, the arms, the report and the panes read.

`Profile.speculative` is a `SpeculativeSettings`, `Profile.server` a `ServerSettings`, `Profile.benchmark` a
`BenchmarkSettings` and `Profile.tune` a `TuneSettings` (None without a [tune] table; its `slo` a `SloSettings`,
its `drafts` `DraftSettings`), built from the validated table (`Profile.data`), so every value has already passed
the schema. They are values: an arm of a tune run carries its own `SpeculativeSettings` (`dataclasses.replace`
of the profile's one with the arm's method, draft and k), and changing one value never rebuilds or re-validates
a profile. Lists are tuples here (hashable, and nothing can change them in place).
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


@dataclass(frozen=True)
class BenchmarkSettings:
    """The [benchmark] table: what every `vllm bench serve` of the run sends."""

    input_len: int
    output_len: int
    num_prompts: int
    max_concurrency: int
    timeout_s: float
    warm: str = "auto"  # "auto": an arm's benches share one warm process where they can; "off": one process each

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> "BenchmarkSettings":
        return cls(**{f.name: table[f.name] for f in fields(cls)})

    def as_table(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SloSettings:
    """[tune] slo: the limits a request must meet (milliseconds; None: no limit on that metric) and the share of
    requests that must meet them for a concurrency level to hold the SLO. Values are kept as written (as_table
    gives the table back unchanged: a run's fingerprint hashes it)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None
    attainment: float | None = None  # None: the default share, DEFAULT_ATTAINMENT

    LIMITS = ("ttft_ms", "tpot_ms", "e2el_ms")
    DEFAULT_ATTAINMENT = 0.9

    @classmethod
    def from_table(cls, table: dict[str, Any] | None) -> "SloSettings | None":
        """None for an empty or missing table (no SLO)."""
        if not table:
            return None
        return cls(**{k: table[k] for k in (*cls.LIMITS, "attainment") if table.get(k) is not None})

    @property
    def share(self) -> float:
        """The share of requests that must meet the limits (attainment, default 0.9)."""
        return float(self.attainment) if self.attainment is not None else self.DEFAULT_ATTAINMENT

    def limits(self) -> dict[str, float]:
        """{ttft_ms: ..., tpot_ms: ..., e2el_ms: ...} of the limits that are set."""
        return {k: getattr(self, k) for k in self.LIMITS if getattr(self, k) is not None}

    def as_table(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (*self.LIMITS, "attainment") if getattr(self, k) is not None}


@dataclass(frozen=True)
class DraftSettings:
    """One [tune.drafts.NAME] table: a named draft and its speculative method (None: [speculative] method)."""

    name: str
    model: str
    method: str | None = None


@dataclass(frozen=True)
class TuneSettings:
    """The [tune] table: the matrix of arms (k × drafts), workloads, repeats and seeds, and a load sweep's
    concurrency levels, waves, SLO and schedule arm."""

    num_speculative_tokens: tuple[int, ...]
    repeats: int
    adaptive: bool
    max_repeats: int
    indifference: float
    confidence: float
    workloads: tuple[str, ...]
    prompts_file: str
    probe_prompts: int
    seed: int
    vary_seed: bool
    parallel: bool
    concurrency: tuple[int, ...]
    min_waves: int
    slo: SloSettings | None
    verify_schedule: bool
    drafts: tuple[DraftSettings, ...]

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> "TuneSettings":
        drafts = tuple(DraftSettings(name, d["model"], d.get("method"))
                       for name, d in (table.get("drafts") or {}).items())
        return cls(num_speculative_tokens=tuple(table["num_speculative_tokens"]), repeats=table["repeats"],
                   adaptive=table["adaptive"], max_repeats=table["max_repeats"],
                   indifference=float(table["indifference"]), confidence=float(table["confidence"]),
                   workloads=tuple(table["workloads"]), prompts_file=table["prompts_file"],
                   probe_prompts=table["probe_prompts"], seed=table["seed"], vary_seed=table["vary_seed"],
                   parallel=table["parallel"], concurrency=tuple(table["concurrency"]), min_waves=table["min_waves"],
                   slo=SloSettings.from_table(table.get("slo")), verify_schedule=table["verify_schedule"],
                   drafts=drafts)

    @property
    def rounds(self) -> list[int]:
        """The repeats of each round of the race: [repeats] for a fixed matrix, [repeats, max_repeats] when
        adaptive (tui/core/results/selection.round_sizes)."""
        if not self.adaptive or self.max_repeats <= self.repeats:
            return [self.repeats]
        return [self.repeats, self.max_repeats]

    @property
    def levels(self) -> tuple[int, ...]:
        """The load sweep's concurrency levels, ascending (() without a sweep)."""
        return tuple(sorted(self.concurrency))

    def as_table(self) -> dict[str, Any]:
        out = asdict(self)
        for k in ("num_speculative_tokens", "workloads", "concurrency"):
            out[k] = list(out[k])
        out["slo"] = self.slo.as_table() if self.slo else {}
        out["drafts"] = {d.name: {"model": d.model, **({"method": d.method} if d.method else {})}
                         for d in self.drafts}
        return out
