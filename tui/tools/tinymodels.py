#!/usr/bin/env python3
"""Make a tiny Llama target and two tiny EAGLE3 drafts that the real vLLM serves (no hub needed).

    python tinymodels.py --out DIR [--sonnet PATH]

Runs in the vLLM interpreter (torch, transformers, safetensors, tokenizers); it imports nothing of
specdec-tui. It writes

  DIR/target            LlamaForCausalLM, 4 layers, hidden 128, bf16, a byte-level BPE tokenizer
                        (about 2000 tokens) trained on sonnet.txt, with a chat template;
  DIR/draft-eagle3      a one-layer EAGLE3 draft in the speculators layout (speculators_model_type
                        "eagle3", transformer_layer_config, speculators_config.verifier, tensors
                        layers.0.*, norm, fc, lm_head);
  DIR/draft-eagle3-repo the same draft in the EAGLE3 repository layout (architectures
                        ["LlamaForCausalLMEagle3"], tensors midlayer.*, fc, lm_head).

How the draft agrees with the target (so acceptance is real and not trivial):
  * the target's greedy walk is a fixed random permutation g of the ordinary tokens: embedding rows
    are random unit vectors e_x, lm_head row g(x) is e_x; attention and MLP outputs are scaled down so
    they only perturb the residual stream and never flip the argmax (greedy output is the same with and
    without the draft: the lossless check holds for real);
  * the draft averages the target's aux hidden states (layers 1, 2, 3: pinned, since vLLM's default
    (2, L//2, L-3) collapses for L = 4 and the first request then kills the engine), its attention and
    MLP outputs are zero, and its lm_head predicts g(g(x)) for most tokens x, and a wrong token for a
    fixed MISS_FRACTION of them: acceptance at num_speculative_tokens = 1 is about 1 - MISS_FRACTION.

Idempotent: DIR/.tinymodels.json records a hash of this script, the corpus and the parameters; a
directory with a matching marker is left alone, anything else is rebuilt.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

VOCAB = 2000
HIDDEN = 128
LAYERS = 4
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 256
MAX_POS = 2048
AUX_LAYERS = [1, 2, 3]
PERTURB = 0.05          # scale of the target's attention/MLP outputs relative to the residual stream
MISS_FRACTION = 0.25    # share of tokens whose draft prediction is deliberately wrong
SEED = 1234
LOGIT_SCALE = 4.0
SPECIALS = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
MARKER = ".tinymodels.json"


def _default_sonnet() -> Path | None:
    here = Path(__file__).resolve().parent
    # The bundled copy: profiles/data/ in a checkout, specdec_profiles/data/ when installed.
    for cand in (here.parent.parent / "profiles" / "data" / "sonnet.txt",
                 here.parent.parent / "specdec_profiles" / "data" / "sonnet.txt", here / "sonnet.txt"):
        if cand.is_file():
            return cand
    return None


def _fingerprint(sonnet: bytes) -> str:
    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    h.update(hashlib.sha256(sonnet).digest())
    return h.hexdigest()


def _train_tokenizer(text: str, out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text.splitlines(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", pad_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = MAX_POS
    fast.save_pretrained(str(out))
    return fast


def _llama_cfg(vocab: int, layers: int) -> dict:
    return {
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": layers,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "vocab_size": vocab,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
    }


def _write(dirpath: Path, cfg: dict, tensors: dict) -> None:
    import torch
    from safetensors.torch import save_file

    dirpath.mkdir(parents=True, exist_ok=True)
    (dirpath / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()},
              str(dirpath / "model.safetensors"), metadata={"format": "pt"})


def build(out: Path, sonnet: Path) -> dict:
    import torch

    text = sonnet.read_text(encoding="utf-8")
    fp = _fingerprint(text.encode("utf-8"))
    marker = out / MARKER
    if marker.is_file():
        try:
            if json.loads(marker.read_text()).get("fingerprint") == fp:
                return json.loads(marker.read_text())
        except (OSError, ValueError):
            pass
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tinymodels-", dir=str(out)))
    try:
        torch.manual_seed(SEED)
        gen = torch.Generator().manual_seed(SEED)
        tok = _train_tokenizer(text, tmp / "target")
        vocab = len(tok)
        n_special = len(SPECIALS)
        ordinary = torch.arange(n_special, vocab)
        n = ordinary.numel()

        # Token vectors: random unit vectors.
        emb = torch.randn(vocab, HIDDEN, generator=gen)
        emb = emb / emb.norm(dim=1, keepdim=True)
        # g: a random permutation of the ordinary tokens (target's greedy successor).
        perm = ordinary[torch.randperm(n, generator=gen)]
        g = torch.arange(vocab)
        g[ordinary] = perm
        # target lm_head: row g(x) = e_x (specials' rows stay zero: never emitted).
        lm_t = torch.zeros(vocab, HIDDEN)
        lm_t[g[ordinary]] = emb[ordinary] * LOGIT_SCALE

        def rnd(*shape, scale=1.0):
            return torch.randn(*shape, generator=gen) * scale / (shape[-1] ** 0.5)

        t = {"model.embed_tokens.weight": emb, "model.norm.weight": torch.ones(HIDDEN), "lm_head.weight": lm_t}
        for i in range(LAYERS):
            p = f"model.layers.{i}."
            t[p + "input_layernorm.weight"] = torch.ones(HIDDEN)
            t[p + "post_attention_layernorm.weight"] = torch.ones(HIDDEN)
            t[p + "self_attn.q_proj.weight"] = rnd(HEADS * HEAD_DIM, HIDDEN)
            t[p + "self_attn.k_proj.weight"] = rnd(KV_HEADS * HEAD_DIM, HIDDEN)
            t[p + "self_attn.v_proj.weight"] = rnd(KV_HEADS * HEAD_DIM, HIDDEN)
            # RMSNorm feeds sqrt(HIDDEN)-sized vectors; scale the outputs back to a small perturbation.
            t[p + "self_attn.o_proj.weight"] = rnd(HIDDEN, HEADS * HEAD_DIM, scale=PERTURB / HIDDEN ** 0.5)
            t[p + "mlp.gate_proj.weight"] = rnd(INTERMEDIATE, HIDDEN)
            t[p + "mlp.up_proj.weight"] = rnd(INTERMEDIATE, HIDDEN)
            t[p + "mlp.down_proj.weight"] = rnd(HIDDEN, INTERMEDIATE, scale=PERTURB / HIDDEN ** 0.5)
        tcfg = dict(_llama_cfg(vocab, LAYERS), architectures=["LlamaForCausalLM"])
        _write(tmp / "target", tcfg, t)
        # Greedy by default (vLLM takes temperature from here when a request sends none, e.g. `vllm bench
        # serve` >= 0.15): on the CPU build, random-sampling requests accepted 0 % of the drafts (measured).
        (tmp / "target" / "generation_config.json").write_text(json.dumps(
            {"bos_token_id": 1, "eos_token_id": 2, "do_sample": False, "temperature": 0.0}, indent=2) + "\n")

        # Draft: predict d(x) = g(g(tau(x))), tau a derangement of a MISS_FRACTION subset (else identity).
        gg = g[g]
        tau = torch.arange(vocab)
        miss = ordinary[torch.randperm(n, generator=gen)[: max(2, int(n * MISS_FRACTION))]]
        tau[miss] = miss.roll(1)
        d = gg[tau]
        lm_d = torch.zeros(vocab, HIDDEN)
        lm_d[d[ordinary]] = emb[ordinary] * LOGIT_SCALE
        eye = torch.eye(HIDDEN)
        fc = torch.cat([eye] * len(AUX_LAYERS), dim=1) / len(AUX_LAYERS)      # [hidden, 3*target_hidden]
        layer = {
            "input_layernorm.weight": torch.ones(HIDDEN),
            "hidden_norm.weight": torch.ones(HIDDEN),
            "post_attention_layernorm.weight": torch.ones(HIDDEN),
            "self_attn.q_proj.weight": rnd(HEADS * HEAD_DIM, 2 * HIDDEN),
            "self_attn.k_proj.weight": rnd(KV_HEADS * HEAD_DIM, 2 * HIDDEN),
            "self_attn.v_proj.weight": rnd(KV_HEADS * HEAD_DIM, 2 * HIDDEN),
            "self_attn.o_proj.weight": torch.zeros(HIDDEN, HEADS * HEAD_DIM),
            "mlp.gate_proj.weight": rnd(INTERMEDIATE, HIDDEN),
            "mlp.up_proj.weight": rnd(INTERMEDIATE, HIDDEN),
            "mlp.down_proj.weight": torch.zeros(HIDDEN, INTERMEDIATE),
        }
        common = {"norm.weight": torch.ones(HIDDEN), "fc.weight": fc, "lm_head.weight": lm_d}
        layer_cfg = dict(_llama_cfg(vocab, 1), architectures=["LlamaForCausalLM"])

        spec_cfg = {
            "architectures": ["Eagle3Speculator"],
            "speculators_model_type": "eagle3",
            "speculators_version": "0.1.0",
            "draft_vocab_size": vocab,
            "target_hidden_size": HIDDEN,
            "norm_before_residual": True,
            "eagle_aux_hidden_state_layer_ids": AUX_LAYERS,
            "transformer_layer_config": layer_cfg,
            "speculators_config": {
                "algorithm": "eagle3",
                "default_proposal_method": "greedy",
                "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 1,
                                      "verifier_accept_k": 1, "accept_tolerance": 0.0}],
                "verifier": {"name_or_path": "target", "architectures": ["LlamaForCausalLM"]},
            },
            "torch_dtype": "bfloat16",
        }
        _write(tmp / "draft-eagle3", spec_cfg,
               {**{f"layers.0.{k}": v for k, v in layer.items()}, **common})

        repo_cfg = dict(_llama_cfg(vocab, 1), architectures=["LlamaForCausalLMEagle3"],
                        draft_vocab_size=vocab, target_hidden_size=HIDDEN,
                        eagle_aux_hidden_state_layer_ids=AUX_LAYERS,
                        eagle_config={"eagle_aux_hidden_state_layer_ids": AUX_LAYERS,
                                      "use_aux_hidden_state": True})
        _write(tmp / "draft-eagle3-repo", repo_cfg,
               {**{f"midlayer.{k}": v for k, v in layer.items()}, **common})
        for name in ("draft-eagle3", "draft-eagle3-repo"):
            for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
                if (tmp / "target" / f).is_file():
                    shutil.copy2(tmp / "target" / f, tmp / name / f)

        info = {"fingerprint": fp, "vocab_size": vocab, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
                "aux_layers": AUX_LAYERS, "miss_fraction": MISS_FRACTION,
                "sonnet_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                "dirs": ["target", "draft-eagle3", "draft-eagle3-repo"]}
        for name in info["dirs"]:
            dst = out / name
            if dst.exists():
                shutil.rmtree(dst)
            os.replace(tmp / name, dst)
        (out / (MARKER + ".tmp")).write_text(json.dumps(info, indent=2) + "\n")
        os.replace(out / (MARKER + ".tmp"), marker)
        return info
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory to write target/, draft-eagle3/, draft-eagle3-repo/")
    ap.add_argument("--sonnet", help="sonnet.txt to train the tokenizer on (default: the bundled copy)")
    ap.add_argument("sonnet_pos", nargs="?", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    src = a.sonnet or a.sonnet_pos
    sonnet = Path(src) if src else _default_sonnet()
    if sonnet is not None and sonnet.is_dir():
        sonnet = sonnet / "sonnet.txt"
    if sonnet is None or not sonnet.is_file():
        print(f"tinymodels: no sonnet text at {sonnet or '(bundled copy not found)'}; "
              "pass --sonnet PATH to a sonnet.txt.", file=sys.stderr)
        return 2
    try:
        info = build(Path(a.out), sonnet)
    except ImportError as e:
        print(f"tinymodels: {e}. Run this script with the vLLM interpreter (it needs torch, transformers, "
              "safetensors and tokenizers).", file=sys.stderr)
        return 2
    print(json.dumps({"out": str(Path(a.out)), **{k: info[k] for k in ("vocab_size", "fingerprint")}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
