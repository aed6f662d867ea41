"""The config.json files the loopback hub serves: the published ones of the target models and EAGLE-1 draft,
and the speculators-format draft config."""

from __future__ import annotations

from typing import Any


GPT_OSS_120B_CONFIG: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"],
    "attention_bias": True,
    "attention_dropout": 0.0,
    "eos_token_id": 200002,
    "experts_per_token": 4,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2880,
    "initial_context_length": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072,
    "model_type": "gpt_oss",
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "num_local_experts": 128,
    "output_router_logits": False,
    "pad_token_id": 199999,
    "quantization_config": {
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                   "model.embed_tokens", "lm_head"],
        "quant_method": "mxfp4",
    },
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                     "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000,
    "router_aux_loss_coef": 0.9,
    "sliding_window": 128,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": False,
    "transformers_version": "4.55.0",
    "use_cache": True,
    "vocab_size": 201088,
}

# meta-llama/Llama-3.1-8B-Instruct (gated upstream), as published.
LLAMA_31_8B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "mlp_bias": False,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}


# meta-llama/Meta-Llama-3-8B-Instruct (gated upstream). Values as published in its config.json; the
# transformers_version string is assumed.
LLAMA_3_8B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128009,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}

# yuhuili/EAGLE-LLaMA3-Instruct-8B: the EAGLE-1 repo layout. A plain one-layer LlamaForCausalLM config (no
# Eagle architecture, no verifier: its target, meta-llama/Meta-Llama-3-8B-Instruct, is named only by the
# model card), weights in pytorch_model.bin (embed_tokens, layers.0.*, fc over 2 × hidden). The sizes
# follow the target's; max_position_embeddings, torch_dtype and transformers_version are assumed.
EAGLE_LLAMA3_8B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 1,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "transformers_version": "4.28.1",
    "use_cache": True,
    "vocab_size": 128256,
}


def speculators_config(*, algorithm: str = "eagle3", verifier: str = "openai/gpt-oss-120b",
                       verifier_arch: str = "GptOssForCausalLM", hidden_size: int = 2880,
                       vocab_size: int = 201088, draft_vocab_size: int = 64000, heads: int = 64,
                       kv_heads: int = 8, intermediate_size: int = 2880) -> dict[str, Any]:
    """A speculators-format draft config (the keys checkpoints.md lists)."""
    arch = "Eagle3Speculator" if algorithm == "eagle3" else "EagleSpeculator"
    cfg: dict[str, Any] = {
        "architectures": [arch],
        "speculators_model_type": algorithm,
        "speculators_version": "0.2.0",
        "draft_vocab_size": draft_vocab_size,
        "norm_before_fc": True,
        "norm_before_residual": True,
        "embed_requires_grad": False,
        "speculators_config": {
            "algorithm": algorithm,
            "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3,
                                  "verifier_accept_k": 1, "accept_tolerance": 0.0}],
            "verifier": {"name_or_path": verifier, "architectures": [verifier_arch]},
        },
        "transformer_layer_config": {
            "model_type": "llama",
            "hidden_size": hidden_size,
            "intermediate_size": intermediate_size,
            "num_hidden_layers": 1,
            "num_attention_heads": heads,
            "num_key_value_heads": kv_heads,
            "head_dim": 64 if hidden_size == 2880 else hidden_size // heads,
            "hidden_act": "silu",
            "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-05,
            "vocab_size": vocab_size,
        },
        "torch_dtype": "bfloat16",
    }
    if algorithm != "eagle3":
        cfg.pop("draft_vocab_size")
        cfg.pop("norm_before_fc")
    return cfg
