"""vLLM's `--speculative-config` as the simulator reads it: synthetic rejection sampling and the dynamic
speculative-decoding schedule, with vLLM 0.32's validation and messages.

Followed from vLLM 0.32's sources (vllm/config/speculative.py, vllm/v1/spec_decode/dynamic/utils.py):

- ``rejection_sample_method``: "standard" | "synthetic" | "block" (0.33 adds "fly"). With "synthetic", exactly
  one of ``synthetic_acceptance_rates`` (per-position UNCONDITIONAL rates: entry i is the probability that the
  first i + 1 drafts are all accepted; length num_speculative_tokens, each in [0, 1], non-increasing) or
  ``synthetic_acceptance_length`` (in [1, k + 1], turned into rates by the minimum-variance schedule
  [1, …, 1, frac, 0, …]). The sampler accepts position i with the conditional probability a_i / a_{i-1}, so the
  measured per-position marginals (accepted at position i / drafts) are the configured rates.
- ``num_speculative_tokens_per_batch_size``: ``[[start, end, k], …]`` inclusive batch-size ranges, validated by
  ``validate_and_normalize_dynamic_sd_schedule`` and expanded by ``build_dynamic_sd_schedule_lookup`` into a
  dense batch size → k table (gaps and the tail carry the previous k forward, every k capped at
  num_speculative_tokens; k = 0 is a plain step). The scheduler looks k up by the number of requests in the step.
- ``draft_sample_method`` ("greedy" | "probabilistic") and ``parallel_drafting`` are accepted and validated for
  type; the simulated draft is greedy and sequential either way.

Every check raises ValueError with vLLM's own message, so a server can fail at startup as vLLM's config
validation does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REJECTION_METHODS = ("standard", "synthetic", "block")
REJECTION_METHODS_033 = REJECTION_METHODS + ("fly",)
DRAFT_SAMPLE_METHODS = ("greedy", "probabilistic")
SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
# vllm-neuron compiles one graph set per fixed k (the decode graphs verify batch × (k + 1) tokens), so its
# platform refuses a batch-size schedule (the simulated plugin's check_and_update_config).
NEURON_SCHEDULE_ERROR = (f"{SCHEDULE_KEY} (dynamic speculative decoding) is not supported on the Neuron platform: "
                         "vllm-neuron compiles the draft and verify graphs for a fixed num_speculative_tokens. "
                         f"Remove {SCHEDULE_KEY} from --speculative-config and set num_speculative_tokens instead.")


class FieldError(ValueError):
    """A field's type or literal check (pydantic's per-field error rather than the validator's ValueError)."""

    def __init__(self, field: str, detail: str, kind: str, value: Any):
        super().__init__(f"{field}: {detail}")
        self.field, self.detail, self.kind, self.value = field, detail, kind, value


def pydantic_text(exc: ValueError, spec: dict[str, Any]) -> str:
    """The exception line vLLM prints when SpeculativeConfig rejects --speculative-config (pydantic 2)."""
    if isinstance(exc, FieldError):
        body = (f"{exc.field}\n  {exc.detail} [type={exc.kind}, input_value={exc.value!r}, "
                f"input_type={type(exc.value).__name__}]")
    else:
        shown = repr(spec)
        shown = shown if len(shown) <= 40 else shown[:17] + "..." + shown[-20:]
        body = f"  Value error, {exc} [type=value_error, input_value=ArgsKwargs((), {shown}), input_type=ArgsKwargs]"
    return ("pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n" + body +
            "\n    For further information visit https://errors.pydantic.dev/2.14/v/" +
            (exc.kind if isinstance(exc, FieldError) else "value_error"))


def _literal_text(choices: tuple[str, ...]) -> str:
    quoted = [f"'{c}'" for c in choices]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0]


# --- synthetic acceptance (SpeculativeConfig) --------------------------------------------------------------
def acceptance_length_to_rates(length: float, n: int) -> list[float]:
    """Mean acceptance length to unconditional per-position rates (vLLM's minimum-variance schedule)."""
    num_drafts = length - 1
    num_full = int(num_drafts)
    return ([1.0] * num_full + [num_drafts - num_full] + [0.0] * (n - num_full - 1))[:n]


def resolve_synthetic_acceptance_rates(n: int, rates: list[float] | None, length: float | None) -> list[float]:
    """Per-position unconditional rates from exactly one of rates or length (vLLM's checks and messages)."""
    if (rates is None) == (length is None):
        raise ValueError("rejection_sample_method='synthetic' requires exactly one of "
                         "synthetic_acceptance_rates or synthetic_acceptance_length.")
    if rates is not None:
        if len(rates) != n:
            raise ValueError(f"synthetic_acceptance_rates must have length {n}, got {rates}.")
        if not all(0.0 <= r <= 1.0 for r in rates):
            raise ValueError(f"synthetic_acceptance_rates entries must be in [0, 1], got {rates}.")
        if any(rates[i] > rates[i - 1] for i in range(1, n)):
            raise ValueError(f"synthetic_acceptance_rates must be non-increasing, got {rates}.")
        return list(rates)
    assert length is not None
    if not 1.0 <= length <= float(n + 1):
        raise ValueError(f"synthetic_acceptance_length must be in [1, {n + 1}], got {length}.")
    return acceptance_length_to_rates(length, n)


def conditional_rates(marginals: list[float]) -> list[float]:
    """The sampler's conditional acceptance per position: a_0, a_1 / a_0, a_2 / a_1, … (0 after a zero)."""
    out: list[float] = []
    prev = 1.0
    for a in marginals:
        out.append(min(1.0, a / prev) if prev > 0 else 0.0)
        prev = a
    return out


# --- the dynamic schedule (vllm/v1/spec_decode/dynamic/utils.py) ---------------------------------------------
def validate_schedule(schedule: object) -> list[tuple[int, int, int]]:
    """vLLM's validate_and_normalize_dynamic_sd_schedule: sorted inclusive (start, end, k) ranges."""
    if schedule is None:
        raise ValueError("num_speculative_tokens_per_batch_size is required for dynamic speculative decoding.")
    if not isinstance(schedule, list):
        raise ValueError("num_speculative_tokens_per_batch_size must be a non-empty list of "
                         "(range_start, range_end, num_speculative_tokens) entries.")
    if not schedule:
        raise ValueError("num_speculative_tokens_per_batch_size must not be empty.")
    parsed: list[tuple[int, int, int]] = []
    for entry in schedule:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise ValueError("Each num_speculative_tokens_per_batch_size entry must be a "
                             "3-item sequence: (range_start, range_end, num_speculative_tokens).")
        start, end, k = int(entry[0]), int(entry[1]), int(entry[2])
        if start <= 0 or end <= 0:
            raise ValueError(f"Batch-size range ({start}, {end}) must be positive.")
        if start > end:
            raise ValueError(f"Batch-size range start must be <= end for ({start}, {end}, {k}).")
        if k < 0:
            raise ValueError("num_speculative_tokens_per_batch_size values must be >= 0.")
        parsed.append((start, end, k))
    parsed.sort(key=lambda e: e[0])
    previous_end = 0
    for start, end, _ in parsed:
        if start <= previous_end:
            raise ValueError("Batch-size ranges must be non-overlapping and sorted.")
        previous_end = end
    if parsed[0][0] != 1:
        raise ValueError("The first batch-size range must start at 1 so every runtime batch size has a "
                         "defined schedule.")
    return parsed


def schedule_lookup(schedule: object, max_batch_size: int, num_speculative_tokens: int) -> list[int]:
    """vLLM's build_dynamic_sd_schedule_lookup: index b (1..max_batch_size) holds the k for batch size b."""
    if max_batch_size <= 0:
        raise ValueError("vllm_max_batch_size must be > 0.")
    if num_speculative_tokens <= 0:
        raise ValueError("vllm_num_speculative_tokens must be > 0.")
    parsed = validate_schedule(schedule)
    dense = [0] * (max_batch_size + 1)
    nxt = 1
    last: int | None = None
    for start, end, k in parsed:
        if start > nxt and last is not None:  # a gap carries the previous k forward
            for b in range(nxt, min(start, max_batch_size + 1)):
                dense[b] = min(num_speculative_tokens, last)
        for b in range(max(start, nxt), min(end, max_batch_size) + 1):
            dense[b] = min(num_speculative_tokens, k)
        nxt = max(nxt, end + 1)
        last = k
        if nxt > max_batch_size:
            break
    if last is None:
        raise ValueError("num_speculative_tokens_per_batch_size must contain at least one valid batch-size range.")
    for b in range(nxt, max_batch_size + 1):  # the tail carries the last k
        dense[b] = min(num_speculative_tokens, last)
    return dense


# --- the whole config -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpecSettings:
    """What the simulator takes from --speculative-config."""

    k: int
    rejection_sample_method: str = "standard"
    synthetic_rates: tuple[float, ...] | None = None  # marginal rates (rejection_sample_method = "synthetic")
    schedule: tuple[tuple[int, int, int], ...] | None = None
    draft_sample_method: str = "greedy"
    parallel_drafting: bool = False

    def lookup(self, max_num_seqs: int) -> list[int] | None:
        """The dense batch size → k table, or None without a schedule."""
        if self.schedule is None:
            return None
        return schedule_lookup([list(e) for e in self.schedule], max_num_seqs, self.k)


def parse_speculative_config(spec: dict[str, Any] | None, version: tuple[int, ...] | None = None, *,
                             schedule: bool = True) -> SpecSettings | None:
    """Validate the keys the simulator models, with vLLM's messages (ValueError). None: no speculation.

    The model-level checks run as SpeculativeConfig's validator does (num_speculative_tokens first, then the
    synthetic rates). schedule: also check num_speculative_tokens_per_batch_size, as vLLM's scheduler does when
    the engine core starts (the API server's config check passes schedule=False)."""
    if not spec:
        return None
    k_raw = spec.get("num_speculative_tokens")
    if k_raw is None:
        raise ValueError("num_speculative_tokens must be provided with speculative model unless the draft model "
                         "config contains an n_predict parameter.")
    k = int(k_raw)
    if k <= 0:
        raise ValueError(f"Expected num_speculative_tokens to be greater than zero ({k}).")
    methods = REJECTION_METHODS_033 if version is not None and version >= (0, 33) else REJECTION_METHODS
    rsm = spec.get("rejection_sample_method", "standard")
    if rsm not in methods:
        raise FieldError("rejection_sample_method", f"Input should be {_literal_text(methods)}", "literal_error", rsm)
    dsm = spec.get("draft_sample_method", "greedy")
    if dsm not in DRAFT_SAMPLE_METHODS:
        raise FieldError("draft_sample_method", f"Input should be {_literal_text(DRAFT_SAMPLE_METHODS)}",
                         "literal_error", dsm)
    parallel = spec.get("parallel_drafting", False)
    if not isinstance(parallel, bool):
        raise FieldError("parallel_drafting", "Input should be a valid boolean", "bool_type", parallel)
    rates_raw = spec.get("synthetic_acceptance_rates")
    length_raw = spec.get("synthetic_acceptance_length")
    rates: list[float] | None = None
    if rates_raw is not None:
        if not isinstance(rates_raw, list) or not all(isinstance(r, (int, float)) and not isinstance(r, bool)
                                                      for r in rates_raw):
            raise FieldError("synthetic_acceptance_rates", "Input should be a valid list of numbers", "list_type",
                             rates_raw)
        rates = [float(r) for r in rates_raw]
    length: float | None = None
    if length_raw is not None:
        if not isinstance(length_raw, (int, float)) or isinstance(length_raw, bool):
            raise FieldError("synthetic_acceptance_length", "Input should be a valid number", "float_type",
                             length_raw)
        length = float(length_raw)
    synthetic: tuple[float, ...] | None = None
    if rsm == "synthetic":
        synthetic = tuple(resolve_synthetic_acceptance_rates(k, rates, length))
    elif rates is not None or length is not None:
        raise ValueError("synthetic_acceptance_rates / synthetic_acceptance_length "
                         "are only valid with rejection_sample_method='synthetic'.")
    ranges = None
    if schedule and spec.get(SCHEDULE_KEY) is not None:
        ranges = tuple(validate_schedule(spec[SCHEDULE_KEY]))
    return SpecSettings(k=k, rejection_sample_method=rsm, synthetic_rates=synthetic, schedule=ranges,
                        draft_sample_method=dsm, parallel_drafting=parallel)
