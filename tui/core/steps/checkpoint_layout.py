"""What a checkpoint is, read from its config.json and safetensors headers: the target's fields, the draft's
layout (EAGLE / EAGLE3, auxiliary hidden-state layers, vocabulary mapping) and the verifier it was trained for."""

from __future__ import annotations

import re
from typing import Any

from tui.core.host.safetensors_header import DirTensors


GB = 1e9


def _gb(n: int | None) -> str:
    return "?" if n is None else f"{n / GB:.1f} GB"


def _human(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


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
