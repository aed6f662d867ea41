"""A profile's cross-field checks, after every value passed the schema: per platform (neuron: vllm-neuron's own
rules, so a bad bucket configuration fails here, not after a 20-minute compile; cuda and cpu: nothing
Neuron-specific), then everywhere ([tune], [speculative.extra], the SLO, vLLM's rule for
draft_tensor_parallel_size, the benchmark lengths, NEURON_VISIBLE_DEVICES) and, for a profile that states the
vLLM release it runs ([simulation] vllm_version), what that release refuses (profile/release_rules.py).
Each failure is one ProfileError paragraph naming the key, the value and the fix."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tui.core.host.placement import PlacementError, aligned_ranges, parse_visible_devices
from tui.core.profile.errors import ProfileError, bad_value
from tui.core.profile.paths import local_model_keys
from tui.core.profile.release_rules import release_problems
from tui.core.profile.schema import _method_allowed, _method_check
from tui.core.profile.spec_extra import speculative_extra_checks

if TYPE_CHECKING:  # pragma: no cover
    from tui.core.profile.model import Profile

_err = bad_value


def _neuron_config(prof: "Profile") -> dict[str, Any] | None:
    ac = prof.data["server"]["additional_config"]
    nc = ac.get("neuron_config")
    if nc is None:
        return None
    if not isinstance(nc, dict):
        raise _err(prof.source, "server.additional_config.neuron_config", nc, "a table")
    return nc


def _int_list(prof: "Profile", nc: dict[str, Any], key: str) -> list[int] | None:
    v = nc.get(key)
    if v is None:
        return None
    path = f"server.additional_config.neuron_config.{key}"
    if not (isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v)):
        raise _err(prof.source, path, v, "a non-empty list of positive integers")
    return v


_NC = "server.additional_config.neuron_config"


def cross_checks(prof: "Profile") -> None:
    """Every cross-field check of a profile whose values passed the schema (ProfileError on the first failure)."""
    if prof.platform == "neuron":
        _neuron_checks(prof)
    else:
        _non_neuron_checks(prof)
    _common_checks(prof)
    _declared_release_checks(prof)


def _declared_release_checks(prof: "Profile") -> None:
    """A profile that states its vLLM release ([simulation] vllm_version, the version the simulator plays) is
    checked against what that release refuses now, not at launch (profile/release_rules.py)."""
    version = prof.declared_vllm_version
    for _path, text in release_problems(prof, version)[:1]:
        raise ProfileError(f"profile {prof.source}: {text} (vLLM {version} is the release [simulation] "
                           "vllm_version plays.)")


def _neuron_checks(prof: "Profile") -> None:
    """vllm-neuron's own rules: fixed shapes, buckets, on-device sampling with speculation, no mxfp4 on trn2."""
    s = prof.data["server"]
    src = prof.source
    for key in ("max_num_seqs", "max_model_len", "max_num_batched_tokens"):
        if s[key] == 0:
            raise ProfileError(
                f"profile {src}: server.{key} = 0 is not valid on platform 'neuron'; allowed: a positive integer "
                "(vllm-neuron compiles a graph for these exact shapes, so vLLM's default cannot be left to it). "
                f"Set server.{key} explicitly."
            )
    nc = _neuron_config(prof)
    if nc is not None:
        nbt = _int_list(prof, nc, "num_batched_tokens_buckets")
        if nbt is not None and max(nbt) != s["max_num_batched_tokens"]:
            raise ProfileError(
                f"profile {src}: {_NC}.num_batched_tokens_buckets = {nbt} is not valid; "
                f"its largest value must equal server.max_num_batched_tokens ({s['max_num_batched_tokens']}), as vllm-neuron "
                "requires. Make the two agree."
            )
        kv = nc.get("kv_segment_size_buckets")
        if kv is not None:
            kvl = _int_list(prof, nc, "kv_segment_size_buckets")
            assert kvl is not None
            bad = [x for x in kvl if x not in (512, 1024, 2048, 4096, 8192)]
            if bad:
                raise _err(src, f"{_NC}.kv_segment_size_buckets", kvl, "values from {512, 1024, 2048, 4096, 8192}")
            want = nbt if nbt is not None else [s["max_num_batched_tokens"]]
            if sorted(kvl) != sorted(want):
                raise ProfileError(
                    f"profile {src}: {_NC}.kv_segment_size_buckets = {kvl} is not valid; "
                    f"it must equal num_batched_tokens_buckets ({want}) — the segmented-prefill kernel supports a "
                    "single segment size identical to the prefill bucket. Make the two lists equal."
                )
        nsb = _int_list(prof, nc, "num_seqs_buckets")
        if nsb is not None and max(nsb) != s["max_num_seqs"]:
            raise ProfileError(
                f"profile {src}: {_NC}.num_seqs_buckets = {nsb} is not valid; "
                f"its largest value must equal server.max_num_seqs ({s['max_num_seqs']}). Make the two agree."
            )
        quant = nc.get("quantization")
        inst = prof.data["environment"]["instance_type"]
        if quant == "mxfp4" and (inst == "" or inst.startswith("trn2")):
            raise ProfileError(
                f"profile {src}: {_NC}.quantization = 'mxfp4' is not valid on trn2; "
                "allowed: 'bf16' (vllm-neuron raises \"quantization='mxfp4' is not supported on TRN2\"). "
                "Use quantization = \"bf16\" with hf_overrides = {quantization_config = {}}."
            )
        ods = nc.get("on_device_sampling_config")
        if ods is not None and not isinstance(ods, dict):
            raise _err(src, f"{_NC}.on_device_sampling_config", ods, "a table")
    if "speculative" in prof.raw:
        if nc is None or nc.get("on_device_sampling_config") is None:
            raise ProfileError(
                f"profile {src}: {_NC}.on_device_sampling_config is missing; "
                "vllm-neuron requires on-device sampling for speculative decoding. Add "
                "on_device_sampling_config = {all_greedy = true} to [server.additional_config.neuron_config]."
            )


def _non_neuron_checks(prof: "Profile") -> None:
    """cuda / cpu: nothing Neuron-specific may be configured."""
    src, plat = prof.source, prof.platform
    if "neuron_config" in prof.data["server"]["additional_config"]:
        raise ProfileError(
            f"profile {src}: {_NC} is not valid on platform {plat!r}; allowed: a neuron_config table only with "
            f"platform = \"neuron\" (it configures the vllm-neuron plugin, which vLLM on {plat} does not load). "
            f"Remove [{_NC}] from the profile, or set platform = \"neuron\"."
        )
    sdk = prof.data["environment"]["min_neuron_sdk"]
    if sdk:
        raise ProfileError(
            f"profile {src}: environment.min_neuron_sdk = {sdk!r} is not valid on platform {plat!r}; allowed: \"\" "
            "(the Neuron SDK is only checked on platform \"neuron\"). Remove environment.min_neuron_sdk, or set "
            "platform = \"neuron\"."
        )


DRAFT_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")


def _tune_checks(prof: "Profile") -> None:
    """[tune]: the named drafts ({model, method}), the own-prompts file when "own" is a workload."""
    t = prof.data.get("tune")
    if t is None:
        return
    src = prof.source
    for name, d in t["drafts"].items():
        path = f"tune.drafts.{name}"
        if not name or not set(name) <= DRAFT_NAME_CHARS or len(name) > 24:
            raise _err(src, path, name, "a draft name of lowercase letters, digits and _ (at most 24)",
                       "It names the arm's files and its column, e.g. [tune.drafts.redhat].")
        if not isinstance(d, dict):
            raise _err(src, path, d, 'a table such as {model = "RedHatAI/gpt-oss-120b-speculator.eagle3", '
                                     'method = "eagle3"}')
        unknown = sorted(set(d) - {"model", "method"})
        if unknown:
            raise ProfileError(f"profile {src}: unknown key '{path}.{unknown[0]}' in [{path}]; allowed keys: model, "
                               "method. Remove it or check its spelling.")
        if not isinstance(d.get("model"), str) or not d["model"].strip():
            raise _err(src, f"{path}.model", d.get("model", ""), "a Hugging Face repo id or local path",
                       f"Add model = \"...\" to [{path}].")
        if "method" in d and not _method_check(d["method"]):
            raise _err(src, f"{path}.method", d["method"], _method_allowed)
    if "own" in t["workloads"] and not t["prompts_file"].strip():
        raise ProfileError(f"profile {src}: tune.workloads includes 'own' but tune.prompts_file is empty; allowed: "
                           "a JSONL file with one {\"prompt\": ...} or {\"messages\": [...]} per line. Set "
                           "tune.prompts_file, or remove 'own' from tune.workloads.")
    if t["prompts_file"].strip() and "own" not in t["workloads"]:
        raise ProfileError(f"profile {src}: tune.prompts_file = {t['prompts_file']!r} is set but tune.workloads "
                           f"({t['workloads']}) does not include 'own', so it would be ignored. Add \"own\" to "
                           "tune.workloads, or remove tune.prompts_file.")
    if t["parallel"] and prof.platform != "neuron":
        raise ProfileError(f"profile {src}: tune.parallel = true is not valid on platform {prof.platform!r}; allowed: "
                           "false (parallel arms need disjoint NeuronCore ranges: neuron only). Set tune.parallel = "
                           "false.")



def _slo_checks(prof: "Profile") -> None:
    t = prof.data.get("tune")
    if not t:
        return
    slo = t.get("slo") or {}
    unknown = sorted(set(slo) - {"ttft_ms", "tpot_ms", "e2el_ms", "attainment"})
    if unknown:
        raise ProfileError(f"profile {prof.source}: unknown key 'tune.slo.{unknown[0]}' in tune.slo; allowed keys: "
                           "ttft_ms, tpot_ms, e2el_ms, attainment. Remove it or check its spelling.")
    for key in ("ttft_ms", "tpot_ms", "e2el_ms"):
        v = slo.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 3_600_000):
            raise _err(prof.source, f"tune.slo.{key}", v, "milliseconds, a number > 0")
    a = slo.get("attainment")
    if a is not None and (isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 < a <= 1):
        raise _err(prof.source, "tune.slo.attainment", a, "a share from 0 (exclusive) to 1, e.g. 0.9")
    if slo and not any(k in slo for k in ("ttft_ms", "tpot_ms", "e2el_ms")):
        raise ProfileError(f"profile {prof.source}: tune.slo has no limit; allowed: ttft_ms, tpot_ms and/or e2el_ms "
                           "(milliseconds), e.g. slo = {ttft_ms = 500.0, tpot_ms = 12.0}.")
    if slo and not t.get("concurrency"):
        raise ProfileError(f"profile {prof.source}: tune.slo is set but tune.concurrency is empty; the SLO is judged "
                           "per concurrency level. Set tune.concurrency, e.g. [1, 2, 4, 8], or remove tune.slo.")


def _sweep_only_checks(prof: "Profile") -> None:
    """[tune] keys that act only in a load sweep (tune.concurrency) are refused without one, so a setting never
    silently does nothing."""
    t = prof.tune
    given = prof.raw.get("tune") or {}
    if t is None or t.concurrency:
        return
    for key, what in (("min_waves", "the prompts each concurrency level sends (min_waves × the level)"),
                      ("verify_schedule", "whether the derived per-level k schedule gets its own arm")):
        if key in given:
            raise ProfileError(f"profile {prof.source}: tune.{key} = {given[key]!r} has no effect: it sets {what}, and "
                               "tune.concurrency is empty (no load sweep). Set tune.concurrency, e.g. [1, 2, 4, 8], "
                               f"or remove tune.{key}.")


def _common_checks(prof: "Profile") -> None:
    _tune_checks(prof)
    _slo_checks(prof)
    _sweep_only_checks(prof)
    speculative_extra_checks(prof)
    s = prof.data["server"]
    src = prof.source
    dtp = prof.data["speculative"]["draft_tensor_parallel_size"]
    tp = s["tensor_parallel_size"]
    if dtp not in (0, 1, tp):
        raise ProfileError(
            f"profile {src}: speculative.draft_tensor_parallel_size = {dtp} is not valid; allowed: 0 (unset: vLLM "
            f"uses the target's TP), 1, or server.tensor_parallel_size ({tp}) — vLLM rejects any other value. "
            f"Set it to 1 or {tp}, or remove it."
        )
    _visible_devices_check(prof)
    m = prof.data["models"]
    if m["prepare"] and not local_model_keys(prof):
        raise ProfileError(
            f"profile {src}: models.prepare = {m['prepare']!r} is not valid; allowed: a prepare command only when "
            "models.target, models.draft or speculative.model is a local directory (\"/...\", \"./...\", "
            "\"../...\" or \"{cache_dir}/...\"), since it runs only when such a directory is missing. "
            "Point a model at the directory the command creates, or remove models.prepare."
        )
    b = prof.data["benchmark"]
    if s["max_model_len"] and b["input_len"] + b["output_len"] > s["max_model_len"]:
        raise ProfileError(
            f"profile {src}: benchmark.input_len + benchmark.output_len = {b['input_len'] + b['output_len']} is not "
            f"valid; it must not exceed server.max_model_len ({s['max_model_len']}) or every request is rejected. "
            "Lower the lengths or raise max_model_len."
        )
    sweep = prof.tune is not None and bool(prof.tune.concurrency)
    if s["max_num_seqs"] and b["max_concurrency"] > s["max_num_seqs"] and not sweep:
        # a load sweep launches with max_num_seqs = its largest level (plan/commands.py)
        raise ProfileError(
            f"profile {src}: benchmark.max_concurrency = {b['max_concurrency']} is not valid; it must not exceed "
            f"server.max_num_seqs ({s['max_num_seqs']}). Lower max_concurrency or raise max_num_seqs."
        )


def _visible_devices_check(prof: "Profile") -> None:
    """A hand-set server.env.NEURON_VISIBLE_DEVICES (platform neuron) is placed as tui.core.host.placement places
    servers: one contiguous range of TP x PP cores without repeats, starting at a multiple of the TP."""
    val = prof.data["server"]["env"].get("NEURON_VISIBLE_DEVICES")
    if prof.platform != "neuron" or not isinstance(val, str) or "{" in val:
        return

    s = prof.data["server"]
    tp, pp = int(s["tensor_parallel_size"]), int(s.get("pipeline_parallel_size") or 1)
    try:
        parse_visible_devices(val, tp, pp)
    except PlacementError as exc:
        raise ProfileError(f"profile {prof.source}: server.env.NEURON_VISIBLE_DEVICES = {val!r} is not valid: {exc} "
                           f"Ranges that work for TP {tp}" + (f" x PP {pp}" if pp > 1 else "")
                           + f": {aligned_ranges(tp, pp)}; or remove it to use 0-{tp * max(pp, 1) - 1}.") from None