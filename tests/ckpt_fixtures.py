"""Tiny checkpoint directories in the layouts the checkpoints step understands (config.json plus a
.safetensors file with a hand-written header and zero bytes; no torch needed).

Shapes follow vLLM's llama_eagle3.py: q/k/v of the EAGLE3 layer take 2 × hidden, fc takes
N_aux × target hidden, lm_head has draft_vocab_size rows, d2t [draft_vocab] (I64), t2d [vocab] (BOOL).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tui.core.host.safetensors_header import write_file

H, V, L = 128, 2000, 4  # hidden, vocab, target layers (the tinymodels target's shape)


def _write(d: Path, cfg: dict[str, Any], tensors: dict[str, tuple[str, tuple[int, ...]]]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    write_file(d / "model.safetensors", tensors, {"format": "pt"})
    return d


def target(d: Path, *, hidden: int = H, vocab: int = V, layers: int = L) -> Path:
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
           "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
           "num_hidden_layers": layers, "vocab_size": vocab, "torch_dtype": "bfloat16"}
    t: dict[str, tuple[str, tuple[int, ...]]] = {"model.embed_tokens.weight": ("BF16", (vocab, hidden)),
                                                   "model.norm.weight": ("BF16", (hidden,)),
                                                   "lm_head.weight": ("BF16", (vocab, hidden))}
    for i in range(layers):
        t[f"model.layers.{i}.self_attn.q_proj.weight"] = ("BF16", (hidden, hidden))
    return _write(d, cfg, t)


def _eagle3_layer(prefix: str, hidden: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    kv = hidden // 2
    return {
        f"{prefix}.self_attn.q_proj.weight": ("BF16", (hidden, 2 * hidden)),
        f"{prefix}.self_attn.k_proj.weight": ("BF16", (kv, 2 * hidden)),
        f"{prefix}.self_attn.v_proj.weight": ("BF16", (kv, 2 * hidden)),
        f"{prefix}.self_attn.o_proj.weight": ("BF16", (hidden, hidden)),
        f"{prefix}.mlp.gate_proj.weight": ("BF16", (256, hidden)),
        f"{prefix}.mlp.up_proj.weight": ("BF16", (256, hidden)),
        f"{prefix}.mlp.down_proj.weight": ("BF16", (hidden, 256)),
        f"{prefix}.input_layernorm.weight": ("BF16", (hidden,)),
        f"{prefix}.hidden_norm.weight": ("BF16", (hidden,)),
        f"{prefix}.post_attention_layernorm.weight": ("BF16", (hidden,)),
    }


def _eagle3_head(hidden: int, vocab: int, draft_vocab: int | None, *, fc_in: int | None = None,
                 d2t: int | None | bool = True, t2d: bool = True, lm_rows: int | None = None
                 ) -> dict[str, tuple[str, tuple[int, ...]]]:
    dv = draft_vocab or vocab
    t: dict[str, tuple[str, tuple[int, ...]]] = {
        "fc.weight": ("BF16", (hidden, fc_in if fc_in is not None else 3 * hidden)),
        "norm.weight": ("BF16", (hidden,)),
        "lm_head.weight": ("BF16", (lm_rows or dv, hidden)),
    }
    if draft_vocab is not None and draft_vocab != vocab:
        if d2t is True:
            t["d2t"] = ("I64", (dv,))
        elif isinstance(d2t, int) and d2t is not False:
            t["d2t"] = ("I64", (d2t,))
        if t2d:
            t["t2d"] = ("BOOL", (vocab,))
    return t


def speculators_draft(d: Path, *, verifier: str = "target", hidden: int = H, vocab: int = V,
                      draft_vocab: int | None = 1000, algorithm: str = "eagle3",
                      aux: list[int] | None = None, **head: Any) -> Path:
    """The RedHatAI speculators layout (tensors layers.0.*, norm, fc, lm_head, d2t, t2d)."""
    cfg: dict[str, Any] = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": algorithm,
        "speculators_version": "0.2.0",
        "norm_before_residual": True,
        "speculators_config": {
            "algorithm": algorithm, "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 1}],
            "verifier": {"name_or_path": verifier, "architectures": ["LlamaForCausalLM"]},
        },
        "transformer_layer_config": {"model_type": "llama", "hidden_size": hidden, "intermediate_size": 256,
                                     "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
                                     "vocab_size": vocab},
    }
    if draft_vocab is not None:
        cfg["draft_vocab_size"] = draft_vocab
    if aux is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = aux
    return _write(d, cfg, {**_eagle3_layer("layers.0", hidden), **_eagle3_head(hidden, vocab, draft_vocab, **head)})


def eagle3_repo_draft(d: Path, *, hidden: int = H, vocab: int = V, draft_vocab: int | None = 1000,
                      aux: list[int] | None = None, **head: Any) -> Path:
    """The EAGLE3 repo layout: LlamaForCausalLMEagle3, tensors midlayer.*, fc, norm, lm_head, d2t, t2d."""
    cfg: dict[str, Any] = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": hidden,
                           "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
                           "num_hidden_layers": 1, "vocab_size": vocab}
    if draft_vocab is not None:
        cfg["draft_vocab_size"] = draft_vocab
    if aux is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = aux
    return _write(d, cfg, {**_eagle3_layer("midlayer", hidden), **_eagle3_head(hidden, vocab, draft_vocab, **head)})


def eagle1_repo_draft(d: Path, *, hidden: int = H, vocab: int = V) -> Path:
    """The EAGLE-1 repo layout: a plain one-layer LlamaForCausalLM config; embed_tokens, layers.0.*, fc (2 × hidden)."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
           "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
           "vocab_size": vocab}
    t = {"embed_tokens.weight": ("BF16", (vocab, hidden)),
         "layers.0.self_attn.q_proj.weight": ("BF16", (hidden, hidden)),
         "layers.0.mlp.down_proj.weight": ("BF16", (hidden, 256)),
         "layers.0.post_attention_layernorm.weight": ("BF16", (hidden,)),
         "fc.weight": ("BF16", (hidden, 2 * hidden)), "fc.bias": ("BF16", (hidden,))}
    return _write(d, cfg, t)
