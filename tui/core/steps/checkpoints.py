"""Step `checkpoints`: can both checkpoints be fetched, do they fit on disk, and do they belong together?

For the target (`models.target`) and the draft (`speculative.model` or `models.draft`): fetch
`config.json` and `model_info(files_metadata=True)` (commit, gated/private, size), or read a local
directory: its config.json and the safetensors headers (tensor names and shapes; no weights are loaded,
no hub call is made). Model paths may carry placeholders ({cache_dir}, ...). A local directory that does
not exist yet is first created by `models.prepare` (argv, placeholders incl. {vllm_python} resolved; its
output streams as LogLine/Progress events and goes to checkpoints.prepare.log).

Both draft layouts vLLM loads are understood: the RedHatAI "speculators" layout (speculators_model_type,
transformer_layer_config, speculators_config.verifier, draft_vocab_size; tensors layers.0.*, norm, fc,
lm_head, d2t/t2d) and the EAGLE repo layouts (EAGLE3: LlamaForCausalLMEagle3, midlayer.*; EAGLE-1: a plain
one-layer LlamaForCausalLM with fc over 2 × hidden; the target is named only by convention).

Then it checks, before any compile, what makes speculation silently useless (acceptance length ≈ 1.0, the
tutorial's "acceptance rate is 0%") or kills the engine on the first request: draft type vs
`speculative.method`, the draft's verifier vs the target, hidden size, vocabulary (target vocab vs
draft_vocab_size and the d2t mapping), and the EAGLE3 aux hidden-state layers (the draft's
eagle_aux_hidden_state_layer_ids, or vLLM's default (2, L//2, L-3), must give as many distinct layers of
the target as the draft's fc takes). Also notes the target's MXFP4 quantization_config and whether the
profile clears it with --hf-overrides, and refuses what vLLM would refuse at startup for the models' shape
(tui/core/host/modelshape.py: TP against the attention / KV heads of target and draft, max_model_len against the
derived positions, PP against the layers); the shapes go into the step's facts as `model_shape` for the
Profile pane's as-you-type checks. A tune run's other drafts (`[tune.drafts]`) get the same checks, each
fact named with the draft's name ("draft checkpoint (redhat)"), so a typo fails here, before any launch.

Hub settings come from `ctx.environ` (HF_ENDPOINT, HF_TOKEN, HF_HOME/HF_HUB_CACHE, HF_HUB_OFFLINE,
HF_HUB_ETAG_TIMEOUT), see tui.core.host.hub. Writes checkpoints.json; tokens never reach a fact or a file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import shlex
from typing import Any

from tui.core.serverlog import diagnostics as dg
from tui.core.host import modelshape as ms
from tui.core.plan.commands import format_command
from tui.core.events import Artifact, Command, LogLine, Progress
from tui.core.plan.build import prepare_argv
from tui.core.host.hub import (HubFailure, HubSettings, ModelProbe, free_bytes, hub_settings, looks_local, probe_model, scrub,
                   scrub_obj)
from tui.core.host.platforms import env_lookup, profile_platform
from tui.core.host.interpreter import find_server_interpreter, server_launch_env
from tui.core.host.safetensors_header import DirTensors
from tui.core.host.sysinfo import version_tuple
from tui.core.proc.supervisor import ManagedProcess
from tui.core.steps.base import FactRecorder, StepContext, StepResult

STEP = "checkpoints"
# The draft<->target checks (a failing one raises the draft-target-mismatch diagnosis).
COMPAT_FACTS = ("draft type", "draft verifier", "hidden size", "vocab size", "vocab mapping", "aux layers")
GB = 1e9

# Tests replace this to pretend a disk is full or huge: (path) -> (free bytes, existing path measured).
disk_free = free_bytes


def _gb(n: int | None) -> str:
    return "?" if n is None else f"{n / GB:.1f} GB"


def _human(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


# ---------------------------------------------------------------------------------------------
# Config fields
# ---------------------------------------------------------------------------------------------


def _target_fields(cfg: dict[str, Any]) -> dict[str, Any]:
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    q = cfg.get("quantization_config")
    return {
        "architectures": cfg.get("architectures"),
        "model_type": cfg.get("model_type"),
        "hidden_size": cfg.get("hidden_size", text.get("hidden_size")),
        "vocab_size": cfg.get("vocab_size", text.get("vocab_size")),
        "num_hidden_layers": cfg.get("num_hidden_layers", text.get("num_hidden_layers")),
        "num_local_experts": cfg.get("num_local_experts", text.get("num_local_experts")),
        "quantization": (q.get("quant_method") or "yes") if isinstance(q, dict) and q else None,
    }


# Draft layouts vLLM loads (see shared decisions; vLLM's speculators config parser and llama_eagle3.py):
#  * "speculators" (RedHatAI, vllm-project/speculators): speculators_model_type, transformer_layer_config,
#    speculators_config.verifier, draft_vocab_size; tensors layers.0.*, norm, fc, lm_head, d2t, t2d.
#  * "eagle3-repo" (the EAGLE authors' EAGLE3 exports): a Llama config with architectures
#    ["LlamaForCausalLMEagle3"] and draft_vocab_size; tensors midlayer.*, fc, norm, lm_head, d2t, t2d.
#  * "eagle-repo" (EAGLE-1, e.g. yuhuili/EAGLE-LLaMA3-Instruct-8B): a plain LlamaForCausalLM config with one
#    layer; tensors layers.0.*, embed_tokens, fc (2 × hidden in). The target is named only by convention.
LAYOUTS = {"speculators": "speculators", "eagle3-repo": "EAGLE3 repo", "eagle-repo": "EAGLE-1 repo"}
TYPE_LABEL = {"eagle3": "EAGLE3", "eagle": "EAGLE-1"}
# EAGLE repo-layout drafts name no verifier; these are the pairs their model cards document.
CONVENTIONAL_TARGETS = {
    "yuhuili/eagle-llama3-instruct-8b": "meta-llama/Meta-Llama-3-8B-Instruct",
    "yuhuili/eagle3-llama3.1-instruct-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "yuhuili/eagle-llama3-instruct-70b": "meta-llama/Meta-Llama-3-70B-Instruct",
    "yuhuili/eagle-llama2-chat-7b": "meta-llama/Llama-2-7b-chat-hf",
    "yuhuili/eagle-vicuna-7b-v1.3": "lmsys/vicuna-7b-v1.3",
}
# (verifier the draft names, target) pairs that differ by name but that vLLM's own docs serve together
# (its EAGLE3 example runs RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3 on Meta-Llama-3-8B-Instruct):
# same architecture and sizes, another fine-tune, so a warning rather than a failure.
DOCUMENTED_CROSS_PAIRS = {("meta-llama/llama-3.1-8b-instruct", "meta-llama/meta-llama-3-8b-instruct")}
EAGLE3_AUX_STATES = 3  # vLLM's Eagle3 head: fc takes 3 × target hidden (unless the checkpoint's fc says otherwise)


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _tensor_key(name: str) -> str:
    return name[len("model."):] if name.startswith("model.") else name


def _tensor_summary(tensors: DirTensors | None) -> dict[str, Any] | None:
    """What the layout checks need from the safetensors headers (None: not read, e.g. a hub repo)."""
    if tensors is None:
        return None
    if not tensors.read:
        return {"read": False, "note": tensors.note or "no tensors"}
    by = {_tensor_key(k): v.shape for k, v in tensors.tensors.items()}
    prefix = None
    if any(k.startswith("midlayer.") for k in by):
        prefix = "midlayer"
    elif any(k.startswith("layers.") for k in by):
        prefix = "layers"
    layers = sorted({k.split(".")[1] for k in by if k.startswith("layers.") and k.count(".") >= 2})
    return {
        "read": True, "files": list(tensors.files), "count": len(by), "note": tensors.note,
        "prefix": prefix, "layers": len(layers) if prefix == "layers" else (1 if prefix else 0),
        "fc": _shape(by.get("fc.weight")), "lm_head": _shape(by.get("lm_head.weight")),
        "embed_tokens": _shape(by.get("embed_tokens.weight")), "norm": "norm.weight" in by,
        "d2t": _shape(by.get("d2t")), "t2d": _shape(by.get("t2d")),
    }


def _shape(s: tuple[int, ...] | None) -> list[int] | None:
    return None if s is None else list(s)


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _draft_layout(cfg: dict[str, Any], ts: dict[str, Any] | None, name: str) -> tuple[str | None, str | None, str]:
    """(layout, draft type, how the type was told)."""
    sc = _dict(cfg.get("speculators_config"))
    for key, v in (("speculators_model_type", cfg.get("speculators_model_type")),
                   ("speculators_config.algorithm", sc.get("algorithm"))):
        if isinstance(v, str) and v:
            return "speculators", v.lower(), f"{key} = \"{v}\""
    if sc:
        return "speculators", None, "speculators_config names no algorithm"
    archs = [str(a) for a in (cfg.get("architectures") or []) if isinstance(a, str)]
    low = " ".join(archs + [str(cfg.get("model_type") or "")]).lower()
    arch_text = f"architectures {archs}" if archs else f"model_type \"{cfg.get('model_type')}\""
    if "eagle3" in low:
        return "eagle3-repo", "eagle3", arch_text
    if "eagle" in low:
        return "eagle-repo", "eagle", arch_text
    hidden = _int_or_none(cfg.get("hidden_size"))
    if ts and ts.get("read"):
        if ts.get("prefix") == "midlayer":
            return "eagle3-repo", "eagle3", "its tensors are midlayer.* (the EAGLE3 repo layout)"
        fc = ts.get("fc")
        if fc and len(fc) == 2 and hidden and fc[1] % hidden == 0:
            k = fc[1] // hidden
            if k == 3:
                return "eagle3-repo", "eagle3", f"fc.weight {fc} takes 3 × hidden {hidden} (EAGLE3)"
            if k == 2:
                return "eagle-repo", "eagle", f"fc.weight {fc} takes 2 × hidden {hidden} (EAGLE-1)"
        if ts.get("d2t"):
            return "eagle3-repo", "eagle3", "it has a d2t vocabulary mapping (EAGLE3)"
    if cfg.get("draft_vocab_size") is not None:
        return "eagle3-repo", "eagle3", "config.json has draft_vocab_size (EAGLE3)"
    _, base = _repo_parts(name)
    if "eagle3" in base.lower():
        return "eagle3-repo", "eagle3", f"the name {base} (config.json is a plain {', '.join(archs) or 'config'})"
    if "eagle" in base.lower():
        return "eagle-repo", "eagle", f"the name {base} (config.json is a plain {', '.join(archs) or 'config'}: " \
                                      "the EAGLE-1 layout)"
    return None, None, ""


def _aux_ids(cfg: dict[str, Any]) -> tuple[list[Any] | None, str]:
    """eagle_aux_hidden_state_layer_ids where vLLM looks for it (the draft's config), and where it was."""
    for where, d in (("config.json", cfg), ("transformer_layer_config", _dict(cfg.get("transformer_layer_config"))),
                     ("eagle_config", _dict(cfg.get("eagle_config")))):
        v = d.get("eagle_aux_hidden_state_layer_ids")
        if isinstance(v, (list, tuple)) and v:
            return list(v), where
    return None, ""


def _draft_fields(cfg: dict[str, Any], tensors: DirTensors | None = None, name: str = "") -> dict[str, Any]:
    sc = _dict(cfg.get("speculators_config"))
    ver = _dict(sc.get("verifier"))
    tl = _dict(cfg.get("transformer_layer_config"))
    ts = _tensor_summary(tensors)
    layout, dtype, type_source = _draft_layout(cfg, ts, name)
    aux, aux_source = _aux_ids(cfg)
    target_hidden = cfg.get("target_hidden_size", tl.get("target_hidden_size"))
    return {
        "architectures": cfg.get("architectures"),
        "layout": layout,
        "draft_type": dtype,
        "type_source": type_source,
        "verifier": ver.get("name_or_path") if isinstance(ver.get("name_or_path"), str) else None,
        "verifier_architectures": ver.get("architectures") if isinstance(ver.get("architectures"), list) else None,
        "hidden_size": tl.get("hidden_size", cfg.get("hidden_size")),
        "target_hidden_size": target_hidden if _int_or_none(target_hidden) else None,
        "vocab_size": tl.get("vocab_size", cfg.get("vocab_size")),
        "draft_vocab_size": cfg.get("draft_vocab_size", tl.get("draft_vocab_size")),
        "aux_layer_ids": aux,
        "aux_source": aux_source,
        "tensors": ts,
    }


_CACHE_DIR_RE = re.compile(r"models--([^/\\]+)--([^/\\]+)")


def _repo_parts(name: str) -> tuple[str | None, str]:
    """(organisation or None, model name) of a repo id, hub URL, local path or HF cache snapshot path."""
    s = name.strip().rstrip("/\\")
    m = _CACHE_DIR_RE.search(s)
    if m:
        return m.group(1), m.group(2)
    for prefix in ("https://huggingface.co/", "http://huggingface.co/", "hf://"):
        if s.startswith(prefix):
            s = s[len(prefix):]
    parts = [p for p in re.split(r"[/\\]", s) if p]
    if not parts:
        return None, s
    if len(parts) == 2 and not s.startswith(("/", ".", "~")):
        return parts[0], parts[1]
    return None, parts[-1]


def verifier_match(verifier: str, target: str) -> str:
    """"same" | "same-name" (same model name, another organisation) | "different"."""
    vo, vn = _repo_parts(verifier)
    to, tn = _repo_parts(target)
    if vn.lower() != tn.lower():
        return "different"
    if vo is None or to is None or vo.lower() == to.lower():
        return "same"
    return "same-name"


# ---------------------------------------------------------------------------------------------
# The step
# ---------------------------------------------------------------------------------------------


class _Facts:
    """FactRecorder wrapper that scrubs every text (the run's token is not in os.environ)."""

    def __init__(self, rec: FactRecorder, secrets: tuple[str, ...]):
        self.rec = rec
        self.secrets = secrets

    def add(self, name: str, value: Any, status: str, detail: str = "", remedy: str = "") -> None:
        s = self.secrets
        self.rec.add(name, scrub(str(value), s), status, scrub(detail, s), scrub(remedy, s))  # type: ignore[arg-type]


def _model_facts(f: _Facts, label: str, p: ModelProbe, hs: HubSettings) -> None:
    if p.failure is not None:
        where = f"local directory {p.path}" if p.source == "local" else f"{hs.endpoint}"
        f.add(f"{label} checkpoint", f"{p.name}: {p.failure.value}", "fail",
              f"{p.failure.detail} (looked up at {where})", p.failure.remedy)
        return
    if p.source == "local":
        f.add(f"{label} checkpoint", p.name, "pass", "local directory with config.json (nothing to download)")
    elif p.info_skipped:
        f.add(f"{label} checkpoint", p.name, "pass", f"config.json read from the local cache {hs.cache_dir} "
              "(offline mode)")
    else:
        f.add(f"{label} checkpoint", p.name, "pass", f"reachable at {hs.endpoint}; config.json fetched")
    if p.source == "hub" and p.commit:
        f.add(f"{label} commit", p.commit, "info", "the revision 'main' resolves to this commit")
    if p.source == "hub" and not p.info_skipped:
        token = "HF_TOKEN is set" if hs.token else "no HF_TOKEN is set"
        if p.gated:
            f.add(f"{label} access", f"gated ({p.gated})", "warn",
                  f"downloads need an account that accepted the license ({token}); the tutorial's checkpoints "
                  "are public",
                  f"Accept the license at {hs.endpoint}/{p.repo_id} and set HF_TOKEN for this app and vLLM.")
        elif p.private:
            f.add(f"{label} access", "private", "warn", f"only accounts with access can download it ({token})",
                  "Set HF_TOKEN to a read token of an account with access (vLLM needs it too).")
        else:
            f.add(f"{label} access", "public", "pass", "no token or license acceptance needed")
    if p.size_bytes is not None:
        cached = f"; {_human(p.cached_bytes)} already in the cache" if p.cached_bytes and p.source == "hub" else ""
        extra = ""
        if p.repo_bytes is not None and p.repo_bytes > p.size_bytes:
            extra = f"; {_gb(p.repo_bytes)} with subfolders vLLM does not need"
        f.add(f"{label} size", _gb(p.size_bytes), "info", f"{p.files} top-level files{cached}{extra}")


def _describe_config(label: str, fields: dict[str, Any]) -> str:
    arch = ", ".join(fields.get("architectures") or []) or "?"
    if label == "target":
        parts = [arch, f"hidden {fields.get('hidden_size')}", f"vocab {fields.get('vocab_size')}",
                 f"{fields.get('num_hidden_layers')} layers"]
        if fields.get("num_local_experts"):
            parts.append(f"{fields['num_local_experts']} experts")
        if fields.get("quantization"):
            parts.append(str(fields["quantization"]))
        return ", ".join(parts)
    text = (f"{fields.get('draft_type') or '?'} ({arch}), verifier {fields.get('verifier') or '?'}, "
            f"hidden {fields.get('hidden_size')}, vocab {fields.get('vocab_size')}")
    if fields.get("draft_vocab_size") is not None:
        text += f", draft vocab {fields['draft_vocab_size']}"
    return text


def _layout_fact(f: _Facts, draft: ModelProbe, df: dict[str, Any]) -> None:
    layout = df.get("layout")
    arch = ", ".join(df.get("architectures") or []) or "no architectures"
    value = f"{LAYOUTS.get(layout or '', 'unknown')} ({arch})"
    ts = df.get("tensors")
    if ts is None:
        detail = "tensors not read: weights of a hub repo are not downloaded (config.json only)"
    elif not ts.get("read"):
        detail = f"tensors not read: {ts.get('note')}"
    else:
        parts = []
        if ts.get("prefix") == "midlayer":
            parts.append("midlayer.*")
        elif ts.get("prefix") == "layers":
            parts.append(f"layers.* ({ts.get('layers')} layer{'s' if ts.get('layers') != 1 else ''})")
        for key in ("embed_tokens", "fc", "lm_head", "d2t", "t2d"):
            if ts.get(key):
                parts.append(f"{key} {ts[key]}")
        if ts.get("norm"):
            parts.append("norm")
        detail = f"{ts.get('count')} tensors in {', '.join(ts.get('files') or [])}: {', '.join(parts)}"
        if ts.get("note"):
            detail += f" ({ts['note']})"
    f.add("draft layout", value, "info", detail)


def _cross_pair(verifier: str, target: str) -> bool:
    vo, vn = _repo_parts(verifier)
    to, tn = _repo_parts(target)
    v = f"{(vo or '').lower()}/{vn.lower()}"
    return any(v == a and (tn.lower() == b.split("/")[1] and (to is None or to.lower() == b.split("/")[0]))
               for a, b in DOCUMENTED_CROSS_PAIRS)


def _aux_suggestion(layers: int) -> list[int] | None:
    if layers < EAGLE3_AUX_STATES:
        return None
    ids = sorted({1, layers // 2, layers - 1})
    return ids if len(ids) == EAGLE3_AUX_STATES else list(range(EAGLE3_AUX_STATES))


def _compat_facts(f: _Facts, ctx: StepContext, target: ModelProbe, draft: ModelProbe,
                  tf: dict[str, Any], df: dict[str, Any]) -> bool:
    ok = True
    method = ctx.profile.speculative.method
    dtype = df["draft_type"]
    layout = df.get("layout")
    ts = df.get("tensors") or {}
    why = ("a draft of the wrong type loads fine but its proposals are rejected: acceptance length ≈ 1.0, "
           "no speedup (the tutorial's \"acceptance rate is 0%\")")

    # -- type vs method -------------------------------------------------------------------------------------
    if dtype is None:
        f.add("draft type", "unknown", "warn",
              f"{draft.name}: config.json has no speculators_model_type, no Eagle architecture and no "
              "draft_vocab_size, and its tensors do not tell (no fc layer read)",
              f"Make sure {draft.name} is an {TYPE_LABEL.get(method, method)} draft (speculators format, or the "
              f"EAGLE repo layout) for speculative.method = \"{method}\".")
    elif dtype == method:
        f.add("draft type", f"{dtype} = speculative.method", "pass",
              f"{TYPE_LABEL.get(dtype, dtype)} draft in the {LAYOUTS.get(layout or '', '?')} layout "
              f"({df.get('type_source')}); it matches --speculative-config method \"{method}\"")
    else:
        ok = False
        if dtype == "eagle3" and method == "eagle":
            effect = ("vLLM builds an EAGLE-1 head (one hidden state in, fc of 2 × hidden) for an EAGLE3 checkpoint "
                      "whose fc takes 3 aux hidden states: the weights do not fit or the proposals are garbage")
        elif dtype == "eagle" and method == "eagle3":
            effect = ("vLLM builds an EAGLE3 head that expects 3 aux hidden states of the target (fc of 3 × hidden) "
                      "from an EAGLE-1 checkpoint trained on the last hidden state only")
        else:
            effect = why
        f.add("draft type", f"{dtype} draft, method {method}", "fail",
              f"{draft.name} is an {TYPE_LABEL.get(dtype, dtype)} draft ({df.get('type_source')}) but "
              f"speculative.method is \"{method}\": {effect}; " + why,
              f"Set speculative.method = \"{dtype}\" to match {draft.name}, or use an "
              f"{TYPE_LABEL.get(method, method)} draft trained for {target.name}.")

    # -- verifier --------------------------------------------------------------------------------------------
    verifier = df["verifier"]
    conventional = None
    if not verifier and layout in ("eagle3-repo", "eagle-repo"):
        org, base = _repo_parts(draft.name)
        conventional = CONVENTIONAL_TARGETS.get(f"{(org or '').lower()}/{base.lower()}")
    if conventional:
        if verifier_match(conventional, target.name) == "different":
            f.add("draft verifier", f"{conventional} (by convention) ≠ {target.name}", "warn",
                  f"the {LAYOUTS[layout or 'eagle-repo']} layout names no verifier; {draft.name} is documented as "
                  f"the draft of {conventional}: " + why,
                  f"Serve {conventional} as the target, or use a draft trained for {target.name}.")
        else:
            f.add("draft verifier", f"{conventional} (by convention)", "pass",
                  f"the {LAYOUTS[layout or 'eagle-repo']} layout names no verifier; {draft.name} is documented as "
                  f"the draft of {conventional}")
    elif not verifier:
        if layout in ("eagle3-repo", "eagle-repo"):
            f.add("draft verifier", "not named (EAGLE repo layout)", "info",
                  f"the {LAYOUTS[layout]} layout does not record the target a draft was trained for (only the name "
                  "says so, by convention); the size, vocabulary and layer checks still apply",
                  f"Make sure {draft.name} was trained against {target.name}.")
        else:
            f.add("draft verifier", "not named", "warn",
                  "the draft's config does not say which target it was trained for",
                  f"Make sure {draft.name} was trained against {target.name}.")
    else:
        match = verifier_match(verifier, target.name)
        varch = df.get("verifier_architectures") or []
        tarch = tf.get("architectures") or []
        if match == "same" and varch and tarch and not set(varch) & set(tarch):
            f.add("draft verifier", verifier, "warn",
                  f"the draft names {verifier} ({', '.join(varch)}), but the target's architectures are "
                  f"{', '.join(tarch)}",
                  "Make sure the target is an exact copy of the verifier the draft was trained on.")
        elif match == "same":
            f.add("draft verifier", verifier, "pass", f"the draft was trained against {target.name}")
        elif match == "different" and _cross_pair(verifier, target.name):
            f.add("draft verifier", f"{verifier} ≠ {target.name} (documented pair)", "warn",
                  f"the draft was trained against {verifier}; vLLM's documentation serves it with {target.name} "
                  "(same architecture, hidden size and vocabulary, another fine-tune): expect a lower acceptance "
                  "rate than on its own verifier",
                  f"For the best acceptance serve {verifier} as the target, or use a draft trained for {target.name}.")
        elif match == "same-name":
            f.add("draft verifier", verifier, "warn",
                  f"the draft names {verifier}; the target is {target.name} (same model name, other organisation)",
                  "Make sure the target is an exact copy of the verifier the draft was trained on.")
        else:
            ok = False
            f.add("draft verifier", f"{verifier} ≠ {target.name}", "fail",
                  "the draft was trained against another model: " + why,
                  f"Use a draft trained for {target.name}, or serve {verifier} as the target.")

    # -- hidden size -------------------------------------------------------------------------------------
    t_hidden = _int_or_none(tf.get("hidden_size"))
    d_hidden = _int_or_none(df.get("hidden_size"))
    d_target_hidden = df.get("target_hidden_size") or d_hidden
    fc = ts.get("fc") if ts.get("read") else None
    if d_target_hidden is None or t_hidden is None:
        f.add("hidden size", "not checked", "info", f"{'draft' if d_target_hidden is None else 'target'} config "
              "has no hidden_size")
    elif d_target_hidden != t_hidden:
        ok = False
        key = "target_hidden_size" if df.get("target_hidden_size") else "hidden_size"
        f.add("hidden size", f"draft {d_target_hidden} ≠ target {t_hidden}", "fail",
              f"EAGLE feeds the target's hidden states to the draft; the draft's {key} is {d_target_hidden}, the "
              f"target's hidden_size is {t_hidden}: the draft was built for another model (vLLM fails to load it or "
              "acceptance collapses)",
              f"Use a draft whose hidden size is {t_hidden} (trained for {target.name}).")
    elif fc and len(fc) == 2 and fc[1] % t_hidden != 0:
        ok = False
        f.add("hidden size", f"fc.weight {fc} vs target hidden {t_hidden}", "fail",
              f"the draft's fc layer takes {fc[1]} inputs, not a multiple of the target's hidden_size {t_hidden}: "
              "the checkpoint was trained on another model's hidden states (vLLM fails with a shape mismatch)",
              f"Use a draft trained for {target.name} (hidden size {t_hidden}).")
    else:
        extra = f" (draft's own hidden_size {d_hidden}; target_hidden_size {d_target_hidden})" \
            if df.get("target_hidden_size") and d_hidden != d_target_hidden else ""
        if fc:
            extra += f"; fc.weight {fc} takes {fc[1] // t_hidden} × {t_hidden}"
        f.add("hidden size", f"{d_target_hidden} = {t_hidden}", "pass", "draft hidden size equals the target's" + extra)

    # -- vocabulary ----------------------------------------------------------------------------------------
    d_vocab, t_vocab = _int_or_none(df.get("vocab_size")), _int_or_none(tf.get("vocab_size"))
    if d_vocab is None or t_vocab is None:
        f.add("vocab size", "not checked", "info", f"{'draft' if d_vocab is None else 'target'} config has no "
              "vocab_size")
    elif d_vocab == t_vocab:
        f.add("vocab size", f"{d_vocab} = {t_vocab}", "pass", "draft vocab_size equals the target's")
    else:
        ok = False
        f.add("vocab size", f"draft {d_vocab} ≠ target {t_vocab}", "fail",
              "EAGLE feeds the target's token ids to the draft; a vocab_size mismatch means the draft was built for "
              "another model (vLLM fails to load it or acceptance collapses)",
              f"Use a draft whose vocab_size is {t_vocab} (trained for {target.name}).")
    if dtype == "eagle3" and t_vocab is not None:
        ok = _vocab_mapping_fact(f, df, ts, t_vocab, draft.name) and ok

    # -- EAGLE3 aux hidden-state layers ---------------------------------------------------------------------
    if dtype == "eagle3" or (dtype is None and method == "eagle3"):
        ok = _aux_fact(f, df, ts, tf, t_hidden, target.name, draft.name) and ok
    return ok


def _vocab_mapping_fact(f: _Facts, df: dict[str, Any], ts: dict[str, Any], t_vocab: int, draft_name: str) -> bool:
    dv = _int_or_none(df.get("draft_vocab_size"))
    read = bool(ts.get("read"))
    lm_rows = (ts.get("lm_head") or [None])[0] if read else None
    d2t, t2d = (ts.get("d2t"), ts.get("t2d")) if read else (None, None)
    fix = f"Re-export {draft_name} with d2t (draft→target id offsets, one per draft token) and t2d, or use the draft " \
          "as published."
    if dv is None or dv == t_vocab:
        if lm_rows is not None and lm_rows != t_vocab:
            f.add("vocab mapping", f"lm_head {lm_rows} rows ≠ vocab {t_vocab}", "fail",
                  f"the draft declares the full vocabulary ({t_vocab}) but its lm_head has {lm_rows} rows",
                  "Set draft_vocab_size to the lm_head's row count and ship d2t/t2d, or re-export the draft.")
            return False
        f.add("vocab mapping", f"full vocabulary ({t_vocab})", "pass",
              "draft_vocab_size equals the target's vocabulary: no d2t mapping needed" if dv else
              "no draft_vocab_size: the draft predicts over the target's whole vocabulary")
        return True
    if dv > t_vocab:
        f.add("vocab mapping", f"draft_vocab_size {dv} > target vocab {t_vocab}", "fail",
              "the draft's reduced vocabulary cannot be larger than the target's", fix)
        return False
    if not read:
        note = ts.get("note") if ts else "weights of a hub repo are not downloaded"
        f.add("vocab mapping", f"draft {dv} → target {t_vocab} via d2t", "info",
              f"draft_vocab_size {dv} < target vocab {t_vocab}: vLLM maps draft ids to target ids with the "
              f"checkpoint's d2t tensor (not verified: {note})")
        return True
    problems = []
    if d2t is None:
        problems.append("no d2t tensor (vLLM then maps draft id i to target id i: wrong tokens, acceptance ≈ 0)")
    elif list(d2t) != [dv]:
        problems.append(f"d2t has shape {d2t}, not [{dv}]")
    if t2d is not None and list(t2d) != [t_vocab]:
        problems.append(f"t2d has shape {t2d}, not [{t_vocab}]")
    if lm_rows is not None and lm_rows != dv:
        problems.append(f"lm_head has {lm_rows} rows, not draft_vocab_size {dv}")
    if problems:
        f.add("vocab mapping", f"draft {dv} → target {t_vocab}: " + problems[0].split(" (")[0], "fail",
              f"draft_vocab_size {dv} < target vocab {t_vocab}, but " + "; ".join(problems), fix)
        return False
    f.add("vocab mapping", f"draft {dv} → target {t_vocab} via d2t", "pass",
          f"d2t {d2t}" + (f", t2d {t2d}" if t2d else "") + (f", lm_head {ts.get('lm_head')}" if lm_rows else ""))
    return True


def _aux_fact(f: _Facts, df: dict[str, Any], ts: dict[str, Any], tf: dict[str, Any], t_hidden: int | None,
              target_name: str, draft_name: str) -> bool:
    layers = _int_or_none(tf.get("num_hidden_layers"))
    fc = ts.get("fc") if ts.get("read") else None
    expected, exp_src = EAGLE3_AUX_STATES, "vLLM's EAGLE3 head"
    if fc and len(fc) == 2 and t_hidden and fc[1] % t_hidden == 0 and fc[1] // t_hidden >= 1:
        expected, exp_src = fc[1] // t_hidden, f"fc.weight {fc} = {fc[1] // t_hidden} × target hidden {t_hidden}"
    ids, src = df.get("aux_layer_ids"), df.get("aux_source")
    if layers is None:
        f.add("aux layers", "not checked", "info", "the target config has no num_hidden_layers")
        return True
    pinned = ids is not None
    if not pinned:
        ids = [2, layers // 2, layers - 3]
    bad = [i for i in ids if not (isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers)]
    distinct = sorted({i for i in ids if i not in bad})
    where = f"eagle_aux_hidden_state_layer_ids {ids} from the draft's {src}" if pinned else \
        f"vLLM's default (2, L//2, L-3) = {tuple(ids)} for L = {layers} (the draft pins no " \
        "eagle_aux_hidden_state_layer_ids)"
    suggestion = _aux_suggestion(layers)
    remedy = (f"Add \"eagle_aux_hidden_state_layer_ids\": {suggestion} ({expected} distinct layers in 0..{layers - 1}) "
              f"to {draft_name}'s config.json (the layers it was trained on)" if suggestion and expected == 3 else
              f"Use {expected} distinct layer ids in 0..{layers - 1} in the draft's eagle_aux_hidden_state_layer_ids")
    remedy += ", or use a target with enough layers." if suggestion is None else "."
    crash = ("vLLM starts, then the first request kills the engine with a shape mismatch ('mat1 and mat2 shapes "
             "cannot be multiplied', EngineDeadError)")
    if bad:
        f.add("aux layers", f"{bad} outside 0..{layers - 1}", "fail",
              f"{where}: the target {target_name} has {layers} layers, so layer ids {bad} never produce a hidden "
              f"state and the draft gets fewer than the {expected} it needs ({exp_src}): {crash}", remedy)
        return False
    if len(distinct) != expected:
        f.add("aux layers", f"{tuple(ids)}: {len(distinct)} distinct, draft needs {expected}", "fail",
              f"{where} gives {len(distinct)} distinct layers {distinct} for a {layers}-layer target; the draft "
              f"needs {expected} ({exp_src}): {crash}", remedy)
        return False
    f.add("aux layers", f"{tuple(ids)} of {layers} layers", "pass",
          f"{where}: {expected} distinct layers, as the draft needs ({exp_src})")
    return True


# Where each refused setting is changed: the profile key and, where it has one, the Profile pane's field.
SHAPE_WHERE = {
    ms.TP_KEY: "",  # a Profile pane field: the diagnosis carries it as its setting (the app names the way there)
    ms.DRAFT_TP_KEY: " in the profile",
    ms.LEN_KEY: " in the profile",
    ms.PP_KEY: " in the profile",
}
SHAPE_FACTS = {ms.TP_KEY: "TP vs heads", ms.DRAFT_TP_KEY: "draft TP vs heads", ms.LEN_KEY: "max_model_len",
               ms.PP_KEY: "pipeline stages"}


def _shape_facts(f: _Facts, ctx: StepContext, shapes: dict[str, Any]) -> tuple[list[str], str | None]:
    """What vLLM would refuse at startup for these models (tui/core/host/modelshape.py): one fact per setting;
    returns the evidence of the refused ones and, when the target's TP is refused with a TP that fits, that
    TP (the diagnosis's setting suggestion)."""
    srv, sp = ctx.profile.data["server"], ctx.profile.data["speculative"]
    env = ctx.shared.get("env") or {}
    platform = env.get("platform") or profile_platform(ctx.profile)
    tp, pp = int(srv["tensor_parallel_size"]), int(srv.get("pipeline_parallel_size") or 1)
    limit, why, at_least = ms.machine_limits(env, platform, pp)
    server_env = {k: ctx.ph.resolve(str(v)) for k, v in (srv.get("env") or {}).items()}
    allow, _where = env_lookup(ms.ALLOW_LONG, dict(ctx.environ), server_env)
    shapes["allow_long"] = ms.truthy(allow)  # the Profile pane's checks read it with the shapes
    issues = ms.check(shapes, srv, sp, tp_limit=limit, tp_limit_why=why, tp_at_least=at_least,
                      allow_long=shapes["allow_long"])
    by_fact: dict[str, list[tuple[str, str, str]]] = {}
    for key, level, msg in issues:
        name = SHAPE_FACTS[key] if key != ms.TP_KEY or "of the draft" not in msg else SHAPE_FACTS[ms.DRAFT_TP_KEY]
        by_fact.setdefault(name, []).append((key, level, msg))
    t, d = shapes.get("target") or {}, shapes.get("draft") or {}
    evidence: list[str] = []
    tp_fix: list[str] = []

    def heads_text(sh: dict[str, Any]) -> str:
        kv = sh.get("kv_heads")
        return f"{sh.get('heads')} attention heads" + (f", {kv} KV heads" if kv and kv != sh.get("heads") else "")

    def report(name: str, ok_value: str, ok_detail: str, bad_value: str = "") -> None:
        bad_value = bad_value or ok_value
        found = by_fact.get(name)
        if not found:
            f.add(name, ok_value, "pass", ok_detail)
            return
        key, level, msg = found[0]
        if key == ms.TP_KEY:
            sh = d if name == SHAPE_FACTS[ms.DRAFT_TP_KEY] else t
            sug = ms.suggest_tp(tp, sh.get("heads"), sh.get("kv_heads"), limit, at_least)
            ok_t = ms.suggest_tp(tp, t.get("heads"), t.get("kv_heads"), limit, at_least) if t else sug
            if sug and ok_t == sug:
                fix = f"Set {key} to {sug}" + SHAPE_WHERE[key]
                if level == ms.ERROR:
                    tp_fix.append(str(sug))
            else:
                fix = f"Set {ms.DRAFT_TP_KEY} to 1 (the draft runs unsplit){SHAPE_WHERE[ms.DRAFT_TP_KEY]}"
        elif key == ms.DRAFT_TP_KEY:
            fix = f"Set {key} to 1, or remove it{SHAPE_WHERE[key]}"
        elif key == ms.LEN_KEY:
            fix = (f"Set {key} to {t.get('max_len')} or less (0 lets vLLM take it){SHAPE_WHERE[key]}"
                   if level == ms.ERROR else f"Lower {key}, or accept positions the model was not trained for")
        else:
            fix = f"Set {key} to at most {t.get('layers')}{SHAPE_WHERE[key]}"
        f.add(name, bad_value, "fail" if level == ms.ERROR else "warn", msg, fix + ".")
        if level == ms.ERROR:
            evidence.append(f"{name}: {msg}")

    if t.get("heads"):
        report(SHAPE_FACTS[ms.TP_KEY], f"TP {tp}: {heads_text(t)}",
               f"{t.get('name')} has {heads_text(t)}: TP {tp} divides them, as vLLM requires")
    dtp = int(sp.get("draft_tensor_parallel_size") or 0) or tp
    if d.get("heads"):
        report(SHAPE_FACTS[ms.DRAFT_TP_KEY], f"draft TP {dtp}: {heads_text(d)}",
               f"the draft {d.get('name')} has {heads_text(d)}: its TP {dtp} divides them"
               + ("" if sp.get("draft_tensor_parallel_size") else " (the draft runs at the target's TP)"))
    mml = int(srv.get("max_model_len") or 0)
    if t.get("max_len"):
        if mml:
            report(SHAPE_FACTS[ms.LEN_KEY], f"{mml} ≤ {t['max_len']} positions",
                   f"{t.get('name')}: {t.get('max_len_source')}", f"{mml} > {t['max_len']} positions")
        else:
            f.add(SHAPE_FACTS[ms.LEN_KEY], f"not sent: vLLM takes {t['max_len']}", "info",
                  f"{t.get('name')}: {t.get('max_len_source')}")
    if pp > 1 and t.get("layers"):
        report(SHAPE_FACTS[ms.PP_KEY], f"PP {pp} over {t['layers']} layers",
               f"{t.get('name')} has {t['layers']} layers: each of the {pp} stages holds at least one")
    return evidence, (tp_fix[0] if tp_fix else None)


def _quant_facts(f: _Facts, ctx: StepContext, tf: dict[str, Any]) -> None:
    q = tf.get("quantization")
    if not q:
        return
    f.add("target quantization", str(q), "info",
          "the checkpoint's MoE experts are stored in MXFP4; trn2 runs BF16 and vLLM Neuron dequantizes them at "
          "load time — no separate BF16 checkpoint is needed")
    overrides = ctx.profile.server.hf_overrides or {}
    if isinstance(overrides, dict) and overrides.get("quantization_config") == {}:
        f.add("quantization override", "cleared by --hf-overrides", "pass",
              "server.hf_overrides sets quantization_config = {}, so the BF16 load path is selected")
    else:
        f.add("quantization override", "not cleared", "warn",
              f"the target's quantization_config ({q}) is not cleared; on trn2 the MXFP4 path is unsupported",
              "Add [server.hf_overrides] quantization_config = {} (passes --hf-overrides "
              "'{\"quantization_config\": {}}'); no separate BF16 checkpoint is needed.")


def _disk_fact(f: _Facts, ctx: StepContext, hs: HubSettings, probes: list[ModelProbe]) -> dict[str, Any]:
    hub_probes = [p for p in probes if p.source == "hub" and p.failure is None]
    unknown = [p.name for p in hub_probes if p.size_bytes is None]
    needed = sum(max(0, (p.size_bytes or 0) - p.cached_bytes) for p in hub_probes)
    try:
        free, measured = disk_free(hs.cache_dir)
    except OSError as exc:
        f.add("disk space", "not checked", "warn", f"cannot measure free space at {hs.cache_dir}: {exc}")
        return {"cache_dir": str(hs.cache_dir), "needed_bytes": needed, "free_bytes": None}
    info = {"cache_dir": str(hs.cache_dir), "measured_at": str(measured), "needed_bytes": needed,
            "free_bytes": free}
    if any(p.failure is not None for p in probes if p.source == "hub") or unknown:
        why = "sizes unknown (offline mode)" if unknown else "a checkpoint could not be looked up"
        f.add("disk space", f"{_gb(free)} free", "info", f"{why}; free space in {measured}")
        return info
    if not hub_probes:
        f.add("disk space", "nothing to download", "pass", "both checkpoints are local directories")
        return info
    text = f"{_gb(free)} free, {_gb(needed)} to download"
    detail = f"HF cache {hs.cache_dir} (on the filesystem of {measured})"
    if free >= needed:
        f.add("disk space", text, "pass", detail)
    else:
        f.add("disk space", text, "fail", detail + f"; short by {_gb(needed - free)}",
              "Free space there, or point HF_HOME (or HF_HUB_CACHE) at a volume with "
              f"at least {_gb(needed)} free, for this app and for vLLM.")
    return info


# ---------------------------------------------------------------------------------------------
# models.prepare: create local checkpoint directories that do not exist yet
# ---------------------------------------------------------------------------------------------

PREPARE_TIMEOUT_S = 3600.0  # tests lower it
PREPARE_LOG = "checkpoints.prepare.log"
_PCT_RE = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d+)?)\s?%")
_FRAC_RE = re.compile(r"(?<![\d/])(\d+)\s?/\s?(\d+)(?![\d/])")


def _model_paths(ctx: StepContext) -> list[tuple[str, str]]:
    """(profile key, resolved value) of every model the step checks or vLLM loads."""
    m, sp = ctx.profile.data["models"], ctx.profile.data["speculative"]
    out = [("models.target", m["target"]), ("models.draft", m["draft"])]
    if sp.get("model"):
        out.append(("speculative.model", sp["model"]))
    for name, d in ((ctx.profile.data.get("tune") or {}).get("drafts") or {}).items():
        out.append((f"tune.drafts.{name}.model", d["model"]))
    return [(k, ctx.ph.resolve(v)) for k, v in out]


def _missing_local(ctx: StepContext) -> list[tuple[str, str]]:
    seen: set[str] = set()
    out = []
    for key, path in _model_paths(ctx):
        if looks_local(path) and not os.path.isdir(os.path.expanduser(path)) and path not in seen:
            seen.add(path)
            out.append((key, path))
    return out


def _vllm_python(ctx: StepContext) -> tuple[str | None, str]:
    """The interpreter that owns the server command's `vllm` (env step's fact, else found now)."""
    vp = (ctx.shared.get("env") or {}).get("vllm_python") or getattr(ctx.ph, "vllm_python", "") or ""
    if not vp:
        env = server_launch_env(ctx.profile, ctx.ph, ctx.environ)
        it = find_server_interpreter(ctx.ph.resolve(ctx.profile.server.command[0]), env)
        if not it.python:
            return None, it.error or "no interpreter found"
        vp = it.python
    if hasattr(ctx.ph, "vllm_python"):
        try:
            setattr(ctx.ph, "vllm_python", vp)
        except (AttributeError, TypeError):  # a frozen Placeholders: resolve it ourselves below
            pass
    return vp, ""


_FRAME_RE = re.compile(r'^\s*File ".*", line \d+')


def _tail_lines(lines: list[str], n: int = 5) -> list[str]:
    """The last n non-empty lines of a child's output with Python traceback frames left out (the exception
    line itself stays): a fact is one paragraph, never a traceback."""
    out: list[str] = []
    in_tb = False
    for raw in lines:
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.startswith("Traceback (most recent call last)"):
            in_tb = True
            continue
        if in_tb and (line[:1].isspace() or _FRAME_RE.match(line)):
            continue
        in_tb = False
        out.append(line.strip())
    return out[-n:]


def _progress_pct(line: str) -> float | None:
    m = _PCT_RE.search(line)
    if m and float(m.group(1)) <= 100:
        return float(m.group(1))
    m = _FRAC_RE.search(line)
    if m and 0 < int(m.group(2)) and int(m.group(1)) <= int(m.group(2)):
        return 100.0 * int(m.group(1)) / int(m.group(2))
    return None


async def _prepare(ctx: StepContext, f: _Facts, secrets: tuple[str, ...]) -> dict[str, Any] | None:
    """Run models.prepare when a local model directory is missing. None when there was nothing to run."""
    argv_raw = [str(a) for a in (ctx.profile.data["models"].get("prepare") or [])]
    missing = _missing_local(ctx)
    if not missing or not argv_raw:
        return None
    wanted = ", ".join(f"{k} = {p}" for k, p in missing)
    info: dict[str, Any] = {"missing": [p for _, p in missing], "argv": None, "exit_code": None, "log": PREPARE_LOG}
    vp = ""
    if any("{vllm_python}" in a for a in argv_raw):
        found, err = _vllm_python(ctx)
        if not found:
            f.add("model prepare", "no {vllm_python}", "fail",
                  f"models.prepare uses {{vllm_python}} (the interpreter of the server command's vllm) to create "
                  f"{wanted}, but it cannot be found: {err}",
                  "Install vLLM so that server.command[0] resolves on PATH, or write the interpreter's path into "
                  "models.prepare.")
            return info
        vp = found
    argv = [a.replace("{vllm_python}", vp) if vp else a for a in prepare_argv(ctx.profile, ctx.ph)]
    shown = scrub(shlex.join(argv), secrets)
    info["argv"] = shown
    ctx.emit(Command(STEP, "tool", tuple(argv), format_command(argv)))
    done_pct = 0.0

    def on_line(text: str, ts: float) -> None:
        nonlocal done_pct
        line = scrub(text, secrets)
        ctx.emit(LogLine(STEP, line, source="prepare", ts=ts))
        pct = _progress_pct(line)
        if pct is not None:
            done_pct = max(done_pct, pct)
        ctx.emit(Progress(STEP, "prepare", done_pct, 100.0, "%", description=f"models.prepare: {line.strip()[:60]}"))

    ctx.emit(Progress(STEP, "prepare", 0.0, 100.0, "%", description="models.prepare"))
    proc = ManagedProcess(argv, dict(ctx.environ), ctx.run.path / PREPARE_LOG, on_line=on_line,
                          cwd=str(ctx.run.path), grace_s=5.0)
    try:
        await proc.start()
    except OSError as exc:  # FileNotFoundError: not on PATH / not executable
        f.add("model prepare", "cannot start", "fail",
              f"models.prepare `{shown}` (to create {wanted}) cannot start: {exc}",
              "Fix models.prepare[0] (a program on PATH or a path; placeholders such as {vllm_python} resolve).")
        ctx.emit(Progress(STEP, "prepare", 100.0, 100.0, "%", description="models.prepare", done=True))
        return info
    ctx.cleanups.append(proc)
    ctx.emit(Artifact(STEP, PREPARE_LOG, str(ctx.run.path / PREPARE_LOG)))
    timed_out = False
    try:
        rc: int | None = await asyncio.wait_for(proc.wait(), PREPARE_TIMEOUT_S)
        output = list(proc.tail)
    except asyncio.TimeoutError:
        timed_out = True
        rc = None
        output = list(proc.tail)  # before the stop signal adds its own noise
    rc_final = await proc.stop(grace_s=0.5 if not timed_out else 5.0)  # closes the log; ends leftover children
    ctx.forget(proc)
    rc = rc if rc is not None else rc_final
    info["exit_code"] = rc
    ctx.emit(Progress(STEP, "prepare", 100.0, 100.0, "%", description="models.prepare", done=True))
    tail = [scrub(t, secrets) for t in _tail_lines(output)]
    last = (" Last lines: " + " | ".join(tail)) if tail else " It printed nothing."
    if timed_out or rc != 0:
        what = f"did not finish within {PREPARE_TIMEOUT_S:g} s and was stopped" if timed_out else \
            f"exited with code {rc}"
        f.add("model prepare", "timed out" if timed_out else f"exit code {rc}", "fail",
              f"models.prepare `{shown}` (run because {wanted} does not exist) {what}.{last}",
              f"Fix what the output says (full output in {PREPARE_LOG} of the run directory) and retry, or create "
              "the directories yourself, or point the profile at existing checkpoints.")
        return info
    still = [(k, p) for k, p in missing if not os.path.isdir(os.path.expanduser(p))]
    if still:
        f.add("model prepare", "directories still missing", "fail",
              f"models.prepare `{shown}` exited with code 0 but did not create "
              + ", ".join(f"{k} = {p}" for k, p in still) + f".{last}",
              "Make models.prepare write exactly the directories models.target / models.draft / speculative.model "
              "name (same placeholders), or fix those paths.")
        return info
    f.add("model prepare", f"created {len(missing)} director{'y' if len(missing) == 1 else 'ies'}", "pass",
          f"models.prepare `{shown}` (exit code 0) created {wanted}")
    return info


_HUB_WIDE = ("timeout", "dns", "refused", "proxy", "network", "offline")


def _shared_failure(a: ModelProbe, b: ModelProbe) -> HubFailure | None:
    if a.source != "hub" or b.source != "hub" or a.failure is None or b.failure is None:
        return None
    fa, fb = a.failure, b.failure
    if fa.kind in _HUB_WIDE and fa.kind == fb.kind and fa.value == fb.value:
        detail = fa.detail.replace(f"{a.repo_id}/config.json", "the config.json files")
        remedy = fa.remedy.replace(f"`hf download {a.repo_id}`", f"`hf download {a.repo_id}` and `hf download {b.repo_id}`")
        return HubFailure(fa.kind, fa.value, detail, remedy)
    return None


class _Named(_Facts):
    """The facts of one [tune.drafts] draft: each name carries the draft's, e.g. "draft type (redhat)"."""

    def __init__(self, f: _Facts, name: str):
        super().__init__(f.rec, f.secrets)
        self.suffix = f" ({name})"

    def add(self, name: str, value: Any, status: str, detail: str = "", remedy: str = "") -> None:
        super().add(name + self.suffix, value, status, detail, remedy)


def _tune_drafts(ctx: StepContext, main_draft: str) -> list[tuple[str, str, str]]:
    """[(name, resolved model, method)] of the [tune.drafts] a tune run's arms load, other than the profile's own
    draft with its own method (checked already)."""
    t = ctx.profile.data.get("tune")
    if not isinstance(t, dict):
        return []
    method = ctx.profile.speculative.method
    out = []
    for name, d in (t.get("drafts") or {}).items():
        model, m = ctx.ph.resolve(d["model"]), d.get("method", method)
        if (model, m) != (main_draft, method):
            out.append((name, model, m))
    return out


def _tune_draft_facts(f: _Facts, ctx: StepContext, hs: HubSettings, name: str, method: str, probe: ModelProbe,
                      target: ModelProbe, tf: dict[str, Any] | None, realigned: bool | None
                      ) -> tuple[list[str], list[str], dict[str, Any]]:
    """The checks of the profile's own draft, for one [tune.drafts] draft: reachable (a typo is named here,
    before any launch), its config and layout, compatible with the target for its method, and its shape
    against the TP. Returns (shape refusals, compatibility evidence, its checkpoints.json entry)."""
    nf = _Named(f, name)
    _model_facts(nf, "draft", probe, hs)
    df = _draft_fields(probe.config, probe.tensors, probe.name) if probe.config is not None else None
    entry = dict(probe.as_json(), config=df, method=method)
    if df is None:
        return [], [], entry
    nf.add("draft config", _describe_config("draft", df), "info", "from config.json")
    _layout_fact(nf, probe, df)
    mismatch: list[str] = []
    if tf is not None:
        sub = dataclasses.replace(ctx, profile=ctx.profile.with_values({"speculative.method": method}))
        before = len(f.rec.facts)
        if not _compat_facts(nf, sub, target, probe, tf, df):
            mismatch = [scrub(f"{x.name}: {x.value} — {x.detail}", hs.secrets) for x in f.rec.facts[before:]
                        if x.status == "fail"]
    shape = ms.shape_of(probe.config, probe.name, "draft", realigned)
    entry["model_shape"] = shape
    refused, _ = _shape_facts(nf, ctx, {"draft": shape})
    return refused, mismatch, entry


async def run(ctx: StepContext, *, timeout_s: float | None = None) -> StepResult:
    rec = FactRecorder(ctx, STEP)
    hs = hub_settings(ctx.environ, sim_hub=ctx.ph.sim_hub, timeout_s=timeout_s)
    f = _Facts(rec, hs.secrets)
    target_name = ctx.ph.resolve(ctx.profile.models.target)
    draft_name = ctx.ph.resolve(ctx.profile.draft_model)

    if hs.offline:
        f.add("hub lookups", "offline (HF_HUB_OFFLINE)", "info",
              f"model_info skipped; config.json is read from the local cache {hs.cache_dir}")

    prepare = await _prepare(ctx, f, hs.secrets)  # local model directories that do not exist yet

    tune_drafts = _tune_drafts(ctx, draft_name)  # every draft a tune arm loads is resolved here, before any launch
    target, draft, *tune_probes = await asyncio.gather(
        asyncio.to_thread(probe_model, target_name, hs), asyncio.to_thread(probe_model, draft_name, hs),
        *(asyncio.to_thread(probe_model, model, hs) for _, model, _ in tune_drafts))

    tf = _target_fields(target.config) if target.config is not None else None
    df = _draft_fields(draft.config, draft.tensors, draft.name) if draft.config is not None else None
    shared = _shared_failure(target, draft)
    if shared is not None:
        # The hub itself is unreachable (or offline without a cache): one fact, not one per model.
        f.add("hub", f"{hs.endpoint}: {shared.value}", "fail",
              f"{shared.detail}; needed for {target.name} and {draft.name}", shared.remedy)
    else:
        _model_facts(f, "target", target, hs)
    if tf is not None:
        f.add("target config", _describe_config("target", tf), "info", "from config.json")
    if shared is None:
        _model_facts(f, "draft", draft, hs)
    if df is not None:
        f.add("draft config", _describe_config("draft", df), "info", "from config.json")
        _layout_fact(f, draft, df)

    disk = _disk_fact(f, ctx, hs, [target, draft, *tune_probes])

    compatible = False
    if tf is not None and df is not None:
        compatible = _compat_facts(f, ctx, target, draft, tf, df)
    else:
        missing = [n for n, c in (("target", tf), ("draft", df)) if c is None]
        f.add("compatibility", "not checked", "info",
              f"the {' and '.join(missing)} config.json {'is' if len(missing) == 1 else 'are'} unavailable")
    if tf is not None:
        _quant_facts(f, ctx, tf)
    realigned = ms.yarn_realigned(version_tuple((ctx.shared.get("env") or {}).get("vllm_version")))
    shapes = {"target": ms.shape_of(target.config, target_name, "target", realigned)
              if target.config is not None else None,
              "draft": ms.shape_of(draft.config, draft_name, "draft", realigned) if draft.config is not None else None}
    refused, tp_suggest = _shape_facts(f, ctx, shapes)
    tune_json: dict[str, Any] = {}
    tune_mismatch: list[str] = []
    for (name, _model, method), probe in zip(tune_drafts, tune_probes):
        t_refused, t_mismatch, tune_json[name] = _tune_draft_facts(f, ctx, hs, name, method, probe, target, tf,
                                                                    realigned)
        refused += t_refused
        tune_mismatch += t_mismatch
    if refused:
        diag = dg.make("settings-refused-by-vllm", STEP, refused,
                       advice=" ".join(dict.fromkeys(x.remedy for x in rec.facts if x.status == "fail"
                                                     and x.name.split(" (")[0] in SHAPE_FACTS.values())))
        tp_names = (SHAPE_FACTS[ms.TP_KEY], SHAPE_FACTS[ms.DRAFT_TP_KEY])
        if tp_suggest and all(e.split(":", 1)[0] in tp_names for e in refused):  # one fix: the pane's TP field
            diag = dataclasses.replace(diag, setting=ms.TP_KEY, suggest=tp_suggest)
        ctx.emit(diag)
    # Common-issues diagnoses this step can raise before any compile.
    if tf is not None and df is not None and not compatible:
        evidence = [scrub(f"{x.name}: {x.value} — {x.detail}", hs.secrets) for x in rec.facts
                    if x.status == "fail" and x.name in COMPAT_FACTS]
        ctx.emit(dg.make("draft-target-mismatch", STEP, evidence + tune_mismatch))
    elif tune_mismatch:
        ctx.emit(dg.make("draft-target-mismatch", STEP, tune_mismatch))
    for diag in dg.bf16_rule(STEP, target_name, ctx.profile.server.hf_overrides or {},
                             bool(tf is not None and tf.get("quantization"))):
        ctx.emit(diag)

    target_json = dict(target.as_json(), config=tf)
    draft_json = dict(draft.as_json(), config=df)
    artifact = scrub_obj({
        "endpoint": hs.endpoint,
        "offline": hs.offline,
        "token": f"set ({hs.token_source})" if hs.token else "not set",
        "cache_dir": str(hs.cache_dir),
        "method": ctx.profile.speculative.method,
        "target": target_json,
        "draft": draft_json,
        "compatible": compatible,
        "model_shape": shapes,
        **({"tune_drafts": tune_json} if tune_json else {}),
        "disk": disk,
        "prepare": prepare,
        "status": rec.status(),
        "facts": rec.as_json(),
    }, hs.secrets)
    path = ctx.run.write_json("checkpoints.json", artifact)
    ctx.emit(Artifact(STEP, "checkpoints.json", str(path)))
    checks = {f["name"]: f["status"] for f in rec.as_json() if f["name"] in COMPAT_FACTS}
    return rec.result(scrub_obj({"target": target_json, "draft": draft_json, "compatible": compatible,
                                 "model_shape": shapes, "endpoint": hs.endpoint, "checks": checks}, hs.secrets))


__all__ = ["COMPAT_FACTS", "PREPARE_TIMEOUT_S", "run", "verifier_match"]
