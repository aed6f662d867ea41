"""The loopback hub's repositories: `SimRepo` (served and listed files, hub metadata) and `default_repos()`."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from .configs import (EAGLE_LLAMA3_8B_CONFIG, GPT_OSS_120B_CONFIG, LLAMA_3_8B_CONFIG, LLAMA_31_8B_CONFIG,
                      speculators_config)

AUTHORIZED_TOKEN = "hf_SimAuthorizedToken0000"  # accepted for gated/private repos (a fake, never real)


def commit_for(repo_id: str) -> str:
    return hashlib.sha1(repo_id.encode("utf-8")).hexdigest()


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class SimRepo:
    """A model repository. `files` are served; `listed` (name -> size) are only listed (LFS, not served)."""

    repo_id: str
    files: dict[str, bytes] = field(default_factory=dict)
    listed: dict[str, int] = field(default_factory=dict)
    gated: bool | str = False  # False | "auto" | "manual"
    private: bool = False
    tags: tuple[str, ...] = ()
    library_name: str = "transformers"
    pipeline_tag: str = "text-generation"

    @property
    def sha(self) -> str:
        return commit_for(self.repo_id)

    def _lfs_sha256(self, name: str) -> str:
        return hashlib.sha256(f"{self.repo_id}/{name}".encode("utf-8")).hexdigest()

    def etag(self, name: str) -> str:
        if name in self.files:
            return _git_blob_sha1(self.files[name])
        return self._lfs_sha256(name)

    def size(self, name: str) -> int:
        return len(self.files[name]) if name in self.files else self.listed[name]

    def names(self) -> list[str]:
        return sorted(set(self.files) | set(self.listed))

    def total_size(self) -> int:
        return sum(self.size(n) for n in self.names())

    def sibling(self, name: str, metadata: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"rfilename": name}
        if not metadata:
            return out
        size = self.size(name)
        if name in self.files:
            out.update(size=size, blobId=_git_blob_sha1(self.files[name]))
        else:
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{self._lfs_sha256(name)}\nsize {size}\n"
            out.update(size=size, blobId=_git_blob_sha1(pointer.encode()),
                       lfs={"size": size, "sha256": self._lfs_sha256(name), "pointerSize": len(pointer)})
        return out

    def info(self, metadata: bool) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if "config.json" in self.files:
            try:
                cfg = json.loads(self.files["config.json"])
                config = {k: cfg[k] for k in ("architectures", "model_type") if k in cfg}
            except ValueError:
                config = {}
        author, _, _ = self.repo_id.partition("/")
        return {
            "_id": self.sha[:24],
            "id": self.repo_id,
            "modelId": self.repo_id,
            "author": author,
            "sha": self.sha,
            "lastModified": "2025-08-05T17:00:00.000Z",
            "createdAt": "2025-08-04T12:00:00.000Z",
            "private": self.private,
            "gated": self.gated,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "library_name": self.library_name,
            "pipeline_tag": self.pipeline_tag,
            "tags": list(self.tags),
            "config": config,
            "siblings": [self.sibling(n, metadata) for n in self.names()],
            "spaces": [],
            "usedStorage": self.total_size(),
        }


def _j(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2) + "\n").encode("utf-8")


def _shards(prefix: str, count: int, total: int, seed: str) -> dict[str, int]:
    """`count` shard names (model-00000-of-000NN style) whose sizes add up to `total` bytes."""
    weights = [900 + int(hashlib.sha1(f"{seed}{i}".encode()).hexdigest()[:4], 16) % 200 for i in range(count)]
    scale = total / sum(weights)
    sizes = [int(w * scale) for w in weights]
    sizes[-1] += total - sum(sizes)
    last = count - 1
    return {f"{prefix}-{i:05d}-of-{last:05d}.safetensors": s for i, s in enumerate(sizes)}

def _readme(title: str) -> bytes:
    return f"# {title}\n\nServed by specdec-tui's loopback hub (simulation).\n".encode("utf-8")


def _draft_repo(repo_id: str, cfg: dict[str, Any], size: int = 1_711_276_032, **kw: Any) -> SimRepo:
    return SimRepo(repo_id, files={"config.json": _j(cfg), "README.md": _readme(repo_id)},
                   listed={"model.safetensors": size}, tags=("speculators", "eagle3", "safetensors"),
                   library_name="speculators", **kw)


def default_repos() -> dict[str, SimRepo]:
    repos: list[SimRepo] = []
    gpt_files = {
        "config.json": _j(GPT_OSS_120B_CONFIG),
        "generation_config.json": _j({"bos_token_id": 199998, "do_sample": True,
                                      "eos_token_id": [200002, 199999, 200012], "pad_token_id": 199999}),
        "README.md": _readme("openai/gpt-oss-120b"),
        "special_tokens_map.json": _j({"bos_token": "<|startoftext|>", "eos_token": "<|return|>",
                                       "pad_token": "<|endoftext|>"}),
        "tokenizer_config.json": _j({"model_max_length": 1000000000000000019884624838656,
                                     "tokenizer_class": "PreTrainedTokenizerFast"}),
    }
    gpt_listed = {"tokenizer.json": 27_868_174, "chat_template.jinja": 16_738,
                  "model.safetensors.index.json": 55_410, "LICENSE": 11_357, "USAGE_POLICY": 200}
    gpt_listed.update(_shards("model", 15, 65_248_000_000, "gpt-oss-120b"))
    repos.append(SimRepo("openai/gpt-oss-120b", files=gpt_files, listed=gpt_listed,
                         tags=("transformers", "safetensors", "gpt_oss", "vllm", "mxfp4")))
    cfg20 = dict(GPT_OSS_120B_CONFIG, num_hidden_layers=24, num_local_experts=32,
                 layer_types=["sliding_attention", "full_attention"] * 12)
    repos.append(SimRepo("openai/gpt-oss-20b", files={"config.json": _j(cfg20), "README.md": _readme("gpt-oss-20b")},
                         listed=_shards("model", 3, 13_761_000_000, "gpt-oss-20b"),
                         tags=("transformers", "safetensors", "gpt_oss", "mxfp4")))
    repos.append(SimRepo("meta-llama/Llama-3.1-8B-Instruct",
                         files={"config.json": _j(LLAMA_31_8B_CONFIG), "README.md": _readme("Llama 3.1 8B Instruct")},
                         listed=_shards("model", 4, 16_060_522_496, "llama")  # 4 shards, 1-based upstream
                         , gated="manual", tags=("transformers", "safetensors", "llama")))
    repos.append(_draft_repo("RedHatAI/gpt-oss-120b-speculator.eagle3", speculators_config()))
    # The drafts of the other bundled profiles, as far as their model cards and the vLLM docs document them.
    # stevenabreu7's card: EAGLE-3 for openai/gpt-oss-120b, ~855M parameters, hidden 2880, intermediate 2880,
    # 64 heads / 8 KV heads, draft vocab 64000, target vocab 201088, norm_before_fc/norm_before_residual true,
    # max_position_embeddings 131072, trained with vllm-project/speculators (so: the speculators layout;
    # speculators_version and the proposal count are assumed).
    repos.append(_draft_repo("stevenabreu7/gpt-oss-120b-speculator.eagle3", speculators_config()))
    # vLLM's EAGLE3 example draft for Llama 3.1 8B (speculators layout); draft vocab 32000 and head_dim 128
    # are assumed from the speculators Llama recipes; size assumed.
    repos.append(_draft_repo("RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
                             speculators_config(verifier="meta-llama/Llama-3.1-8B-Instruct",
                                                verifier_arch="LlamaForCausalLM", hidden_size=4096,
                                                vocab_size=128256, draft_vocab_size=32000, heads=32,
                                                intermediate_size=14336), size=851_000_000))
    # vLLM's pipeline-parallel EAGLE3 example for gpt-oss-20b. Assumed: the same head shape and draft vocab as
    # the 120b speculator (hidden 2880 is the target's; draft vocab 64000 is not documented for this one).
    repos.append(_draft_repo("RedHatAI/gpt-oss-20b-speculator.eagle3",
                             speculators_config(verifier="openai/gpt-oss-20b")))
    repos.append(SimRepo("meta-llama/Meta-Llama-3-8B-Instruct",
                         files={"config.json": _j(LLAMA_3_8B_CONFIG), "README.md": _readme("Meta Llama 3 8B Instruct")},
                         listed=_shards("model", 4, 16_060_522_496, "llama3"), gated="manual",
                         tags=("transformers", "safetensors", "llama")))
    # EAGLE-1 drafts ship pytorch_model.bin; its size (≈0.78B parameters in fp16) is assumed.
    repos.append(SimRepo("yuhuili/EAGLE-LLaMA3-Instruct-8B",
                         files={"config.json": _j(EAGLE_LLAMA3_8B_CONFIG), "README.md": _readme("EAGLE-LLaMA3-Instruct-8B")},
                         listed={"pytorch_model.bin": 1_555_161_526}, tags=("pytorch",), library_name="transformers"))
    # Test drafts: each differs from the tutorial draft in one way (or, for the Llama one, all of them).
    repos.append(_draft_repo("specdec-sim/gpt-oss-120b-speculator.eagle", speculators_config(algorithm="eagle")))
    repos.append(_draft_repo("specdec-sim/gpt-oss-20b-speculator.eagle3",
                             speculators_config(verifier="openai/gpt-oss-20b")))
    repos.append(_draft_repo("specdec-sim/gpt-oss-120b-speculator.eagle3-h4096",
                             speculators_config(hidden_size=4096, heads=32, intermediate_size=14336)))
    repos.append(_draft_repo("specdec-sim/gpt-oss-120b-speculator.eagle3-vocab128k",
                             speculators_config(vocab_size=128256, draft_vocab_size=32000)))
    repos.append(_draft_repo("specdec-sim/Llama-3.1-8B-Instruct-speculator.eagle3",
                             speculators_config(verifier="meta-llama/Llama-3.1-8B-Instruct",
                                                verifier_arch="LlamaForCausalLM", hidden_size=4096,
                                                vocab_size=128256, draft_vocab_size=32000, heads=32,
                                                intermediate_size=14336), size=851_000_000))
    repos.append(_draft_repo("specdec-sim/gated-speculator.eagle3", speculators_config(), gated="manual"))
    repos.append(_draft_repo("specdec-sim/private-speculator.eagle3", speculators_config(), private=True))
    repos.append(SimRepo("specdec-sim/no-config", files={"README.md": _readme("no config.json here")}))
    return {r.repo_id: r for r in repos}
