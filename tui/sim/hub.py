"""A loopback stand-in for the Hugging Face hub and the sonnet dataset mirror.

A real HTTP server (a Starlette app served by uvicorn in a background thread) that speaks the part of
the hub protocol huggingface_hub uses, so the checkpoints step, `hf_hub_download` and `HfApi` run
unmodified against it with `HF_ENDPOINT` set to its URL:

* `HEAD`/`GET /{repo_id}/resolve/{revision}/{filename}` with `X-Repo-Commit`, `ETag`,
  `Content-Length`, `Accept-Ranges` (and `Range` support). Large weight files are *listed* (their
  HEAD answers with the real size) but their bytes are not served (`GET` answers 501).
* `GET /api/models/{repo_id}` and `/api/models/{repo_id}/revision/{revision}` (`?blobs=true` adds
  `size`, `blobId` and `lfs` to every sibling), `GET /api/agent-harnesses` (an empty registry).
* Errors carry the hub's headers: `X-Error-Code: RepoNotFound` (404, or 401 for a private repo without
  a token), `GatedRepo` (403), `EntryNotFound` (404), `RevisionNotFound` (404).
* `GET /datasets/sonnet.txt`: vLLM's sonnet.txt, the bundled copy (`tui.sim.sonnet`), with `ETag`,
  `Content-Length` and `Range` (206 + `Content-Range`).

Repositories: `openai/gpt-oss-120b`, `RedHatAI/gpt-oss-120b-speculator.eagle3` (the tutorial pair),
`stevenabreu7/gpt-oss-120b-speculator.eagle3`, `openai/gpt-oss-20b` + `RedHatAI/gpt-oss-20b-speculator.eagle3`,
the gated `meta-llama/Llama-3.1-8B-Instruct` + `RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3`, the gated
`meta-llama/Meta-Llama-3-8B-Instruct` + the EAGLE-1 `yuhuili/EAGLE-LLaMA3-Instruct-8B`, and test drafts under
`specdec-sim/` (see `default_repos()`). Gated repositories answer downloads only with a token in `tokens`
(default: `AUTHORIZED_TOKEN`). Commits are sha1 of the repo id, so they are stable.

Faults, per server (`start_hub(delay=..., faults=...)`) or changed at run time
(`HubHandle.set_fault`): `faults` maps an fnmatch pattern on the request path to a spec, a
comma-separated list of:

    404 | 401 | 403 | 500 | 503   answer with that status (hub error headers on hub paths)
    gated                         403 with X-Error-Code: GatedRepo
    entry-404 | revision-404      404 EntryNotFound / RevisionNotFound
    delay=SECONDS                 sleep before answering
    drop | drop=N                 send half of a body, then drop the connection (always / first N times)
    corrupt                       serve different bytes of the same length (a hash mismatch)
    no-range                      ignore Range headers (always answer 200 with the whole body)

`python -m tui.sim hub [--host H] [--port N] [--delay S] [--fault PATTERN=SPEC ...]` prints the URL
and serves until Ctrl+C.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import hashlib
import json
import logging
import re
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .sonnet import sonnet_bytes

DATASET_PATH = "/datasets/sonnet.txt"
AUTHORIZED_TOKEN = "hf_SimAuthorizedToken0000"  # accepted for gated/private repos (a fake, never real)

# ---------------------------------------------------------------------------------------------
# Repositories
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Faults
# ---------------------------------------------------------------------------------------------


@dataclass
class Fault:
    status: int | None = None
    error_code: str | None = None
    delay: float = 0.0
    drop: int = 0  # -1: always; N > 0: the next N responses with a body
    corrupt: bool = False
    no_range: bool = False

    @classmethod
    def parse(cls, spec: str) -> "Fault":
        f = cls()
        for raw in spec.split(","):
            tok = raw.strip().lower()
            if not tok or tok == "none":
                continue
            if tok.isdigit():
                f.status = int(tok)
            elif tok == "gated":
                f.status, f.error_code = 403, "GatedRepo"
            elif tok == "entry-404":
                f.status, f.error_code = 404, "EntryNotFound"
            elif tok == "revision-404":
                f.status, f.error_code = 404, "RevisionNotFound"
            elif tok.startswith("delay="):
                f.delay = float(tok.split("=", 1)[1])
            elif tok == "drop":
                f.drop = -1
            elif tok.startswith("drop="):
                f.drop = int(tok.split("=", 1)[1])
            elif tok == "corrupt":
                f.corrupt = True
            elif tok == "no-range":
                f.no_range = True
            else:
                raise ValueError(f"unknown hub fault {tok!r}; allowed: 404, 401, 403, 500, 503, gated, entry-404, "
                                 "revision-404, delay=S, drop, drop=N, corrupt, no-range")
        return f


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    query: str
    range: str | None
    authorized: bool  # an Authorization header was sent (its value is never recorded)
    status: int


class _DropConnection(Exception):
    """Raised after half a body was sent: uvicorn then closes the connection mid-response."""


class _QuietDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _DropConnection)


logging.getLogger("uvicorn.error").addFilter(_QuietDrops())


# ---------------------------------------------------------------------------------------------
# The app
# ---------------------------------------------------------------------------------------------

_API_REV_RE = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)/revision/(?P<rev>[^/]+)$")
_API_RE = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)$")
_RESOLVE_RE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


def _parse_range(value: str | None, total: int) -> tuple[int, int] | None | str:
    """(start, end inclusive) for a single `bytes=` range; None if absent; "bad" if unsatisfiable."""
    if not value:
        return None
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", value)
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return None  # unsupported form (e.g. several ranges): ignore, like many servers
    if m.group(1) == "":
        n = int(m.group(2))
        if n == 0:
            return "bad"
        return max(0, total - n), total - 1
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else total - 1
    if start >= total or end < start:
        return "bad"
    return start, min(end, total - 1)


class HubApp:
    """The Starlette application plus its mutable state (repos, faults, request log)."""

    def __init__(self, *, repos: Mapping[str, SimRepo] | None = None, delay: float = 0.0,
                 faults: Mapping[str, str] | None = None, tokens: Iterable[str] = (AUTHORIZED_TOKEN,),
                 dataset: bytes | None = None):
        self.repos: dict[str, SimRepo] = dict(default_repos() if repos is None else repos)
        self.delay = float(delay)
        self.tokens = set(tokens)
        self.dataset = sonnet_bytes() if dataset is None else dataset
        self._lock = threading.Lock()
        self._faults: list[tuple[str, Fault]] = []
        self._drops_left: dict[str, int] = {}
        self.requests: list[RequestRecord] = []
        for pattern, spec in (faults or {}).items():
            self.set_fault(pattern, spec)
        self.app = Starlette(routes=[Route("/{path:path}", self._endpoint, methods=["GET", "HEAD"])])

    # -- faults ------------------------------------------------------------------------------------
    def set_fault(self, pattern: str, spec: str) -> None:
        fault = Fault.parse(spec)
        with self._lock:
            self._faults = [(p, f) for p, f in self._faults if p != pattern] + [(pattern, fault)]
            self._drops_left[pattern] = fault.drop

    def clear_faults(self) -> None:
        with self._lock:
            self._faults = []
            self._drops_left = {}

    def _fault_for(self, path: str) -> tuple[Fault, str | None]:
        with self._lock:
            for pattern, fault in reversed(self._faults):
                if fnmatch.fnmatchcase(path, pattern):
                    return fault, pattern
        return Fault(), None

    def _take_drop(self, pattern: str | None, fault: Fault) -> bool:
        if pattern is None or fault.drop == 0:
            return False
        with self._lock:
            left = self._drops_left.get(pattern, 0)
            if left == 0:
                return False
            if left > 0:
                self._drops_left[pattern] = left - 1
            return True

    # -- responses -----------------------------------------------------------------------------------
    def _auth(self, request: Request) -> tuple[bool, bool]:
        header = request.headers.get("authorization", "")
        sent = bool(header)
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        return sent, token in self.tokens

    @staticmethod
    def _error(status: int, code: str | None, message: str, extra: Mapping[str, str] | None = None) -> Any:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        headers.update(extra or {})
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    def _body(self, request: Request, data: bytes, headers: dict[str, str], fault: Fault,
              pattern: str | None, media_type: str) -> Any:
        if fault.corrupt and data:
            changed = data.swapcase()  # same length, different bytes
            data = changed if changed != data else bytes([data[0] ^ 1]) + data[1:]
        total = len(data)
        headers = dict(headers)
        headers["Accept-Ranges"] = "bytes"
        status = 200
        rng = None if fault.no_range else _parse_range(request.headers.get("range"), total)
        if rng == "bad":
            return Response(b"", status_code=416, headers={"Content-Range": f"bytes */{total}"})
        if isinstance(rng, tuple):
            start, end = rng
            data = data[start:end + 1]
            headers["Content-Range"] = f"bytes {start}-{end}/{total}"
            status = 206
        headers["Content-Length"] = str(len(data))
        if request.method == "HEAD":
            return Response(b"", status_code=status, headers=headers, media_type=media_type)
        if data and self._take_drop(pattern, fault):
            return _DroppingResponse(data, status_code=status, headers=headers, media_type=media_type)
        return Response(data, status_code=status, headers=headers, media_type=media_type)

    async def _endpoint(self, request: Request) -> Any:
        path = request.url.path
        fault, pattern = self._fault_for(path)
        delay = self.delay + fault.delay
        if delay > 0:
            await asyncio.sleep(delay)
        response = self._dispatch(request, path, fault, pattern)
        sent, _ = self._auth(request)
        with self._lock:
            self.requests.append(RequestRecord(request.method, path, request.url.query,
                                               request.headers.get("range"), sent, response.status_code))
        return response

    def _dispatch(self, request: Request, path: str, fault: Fault, pattern: str | None) -> Any:
        hub_path = path.startswith("/api/") or "/resolve/" in path
        if fault.status is not None:
            code = fault.error_code
            if code is None and hub_path:
                code = {404: "RepoNotFound", 401: "RepoNotFound", 403: "GatedRepo"}.get(fault.status)
            return self._error(fault.status, code if hub_path or fault.error_code else None,
                               f"simulated fault {fault.status} for {path}")
        if path == "/api/agent-harnesses":
            return JSONResponse({"standardEnvVars": [], "harnesses": {}})
        if path in ("/", "/api", "/healthz"):
            return JSONResponse({"name": "specdec-tui loopback hub", "repos": sorted(self.repos),
                                 "datasets": [DATASET_PATH]})
        if path == DATASET_PATH:
            headers = {"ETag": f'"{hashlib.sha256(self.dataset).hexdigest()[:32]}"',
                       "Cache-Control": "max-age=300"}
            return self._body(request, self.dataset, headers, fault, pattern, "text/plain; charset=utf-8")
        m = _API_REV_RE.match(path) or _API_RE.match(path)
        if m:
            return self._api(request, m.group("repo"), m.groupdict().get("rev"))
        m = _RESOLVE_RE.match(path)
        if m:
            return self._resolve(request, m.group("repo"), m.group("rev"), m.group("file"), fault, pattern)
        return self._error(404, None, f"not found: {path}")

    def _repo_or_error(self, request: Request, repo_id: str, *, for_download: bool) -> tuple[SimRepo | None, Any]:
        repo = self.repos.get(repo_id)
        _, ok = self._auth(request)
        if repo is None:
            return None, self._error(404, "RepoNotFound", "Repository not found")
        if repo.private and not ok:  # the hub does not reveal private repos: 401 + RepoNotFound
            return None, self._error(401, "RepoNotFound", "Repository not found")
        if for_download and repo.gated and not ok:
            return None, self._error(403, "GatedRepo",
                                     f"Access to model {repo_id} is restricted. You must have access to it and be "
                                     "authenticated to access it. Please log in.")
        return repo, None

    def _api(self, request: Request, repo_id: str, rev: str | None) -> Any:
        repo, err = self._repo_or_error(request, repo_id, for_download=False)
        if err is not None:
            return err
        assert repo is not None
        if rev is not None and rev not in ("main", repo.sha):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        metadata = request.query_params.get("blobs", "").lower() in ("1", "true")
        return JSONResponse(repo.info(metadata))

    def _resolve(self, request: Request, repo_id: str, rev: str, filename: str, fault: Fault,
                 pattern: str | None) -> Any:
        repo, err = self._repo_or_error(request, repo_id, for_download=True)
        if err is not None:
            return err
        assert repo is not None
        if rev not in ("main", repo.sha):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        commit = {"X-Repo-Commit": repo.sha}
        if filename not in repo.files and filename not in repo.listed:
            return self._error(404, "EntryNotFound", f"{filename} does not exist on \"{rev}\"", commit)
        headers = dict(commit, ETag=f'"{repo.etag(filename)}"')
        if filename in repo.listed:
            if request.method == "HEAD":
                headers["Content-Length"] = str(repo.size(filename))
                return Response(b"", headers=headers, media_type="application/octet-stream")
            return self._error(501, None, f"the loopback hub lists {filename} ({repo.size(filename)} bytes) "
                                          "but does not serve its bytes", commit)
        media = "application/json" if filename.endswith(".json") else "text/plain; charset=utf-8"
        return self._body(request, repo.files[filename], headers, fault, pattern, media)


class _DroppingResponse(Response):
    """Sends the headers and half of the body, then raises so uvicorn drops the connection."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body[: max(1, len(self.body) // 2)],
                    "more_body": True})
        await asyncio.sleep(0.05)  # let the half reach the socket before the connection drops
        raise _DropConnection("simulated connection drop")


# ---------------------------------------------------------------------------------------------
# Running it
# ---------------------------------------------------------------------------------------------


class HubHandle:
    """A running hub. `url` (no trailing slash), `stop()`, context manager, plus test helpers."""

    def __init__(self, hub: HubApp, server: Any, thread: threading.Thread, host: str, port: int):
        self.hub = hub
        self._server = server
        self._thread = thread
        self.host = host
        self.port = port
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}"

    @property
    def dataset_url(self) -> str:
        return self.url + DATASET_PATH

    @property
    def requests(self) -> list[RequestRecord]:
        with self.hub._lock:
            return list(self.hub.requests)

    def requests_to(self, path_pattern: str) -> list[RequestRecord]:
        return [r for r in self.requests if fnmatch.fnmatchcase(r.path, path_pattern)]

    def clear_requests(self) -> None:
        with self.hub._lock:
            self.hub.requests.clear()

    def set_fault(self, pattern: str, spec: str) -> None:
        self.hub.set_fault(pattern, spec)

    def clear_faults(self) -> None:
        self.hub.clear_faults()

    @property
    def repos(self) -> dict[str, SimRepo]:
        return self.hub.repos

    def stop(self, timeout: float = 5.0) -> None:
        if not self._thread.is_alive():
            return
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)

    def __enter__(self) -> "HubHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_hub(host: str = "127.0.0.1", port: int = 0, *, delay: float = 0.0,
              faults: Mapping[str, str] | None = None, repos: Mapping[str, SimRepo] | None = None,
              tokens: Iterable[str] = (AUTHORIZED_TOKEN,), dataset: bytes | None = None,
              log_level: str = "warning", startup_timeout: float = 10.0) -> HubHandle:
    """Start the hub in a background thread and return once it accepts connections."""
    import uvicorn

    hub = HubApp(repos=repos, delay=delay, faults=faults, tokens=tokens, dataset=dataset)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(hub.app, log_level=log_level, access_log=False, lifespan="off", http="h11",
                            loop="asyncio", ws="none", timeout_graceful_shutdown=1, timeout_keep_alive=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"sim-hub-{bound_port}",
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"the loopback hub did not start on {host}:{bound_port}")
        time.sleep(0.01)
    return HubHandle(hub, server, thread, host, bound_port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.sim hub",
                                     description="Serve specdec-tui's loopback Hugging Face hub and dataset mirror.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before every response")
    parser.add_argument("--fault", action="append", default=[], metavar="PATTERN=SPEC",
                        help="e.g. '/datasets/*=drop=1' or '*/resolve/*=gated' (repeatable)")
    args = parser.parse_args(argv)
    faults: dict[str, str] = {}
    for item in args.fault:
        pattern, sep, spec = item.partition("=")
        if not sep:
            parser.error(f"--fault {item!r}: expected PATTERN=SPEC")
        try:
            Fault.parse(spec)
        except ValueError as exc:
            parser.error(str(exc))
        faults[pattern] = spec
    try:
        handle = start_hub(args.host, args.port, delay=args.delay, faults=faults)
    except (OSError, RuntimeError) as exc:
        print(f"hub: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    print(handle.url, flush=True)
    print(f"  HF_ENDPOINT={handle.url}  dataset: {handle.dataset_url}  (Ctrl+C to stop)", file=sys.stderr,
          flush=True)
    stop = threading.Event()

    def _term(signum: int, frame: Any) -> None:
        stop.set()

    try:
        signal.signal(signal.SIGTERM, _term)
    except ValueError:  # not the main thread
        pass
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        handle.stop()
    return 0


__all__ = ["AUTHORIZED_TOKEN", "DATASET_PATH", "Fault", "HubApp", "HubHandle", "RequestRecord", "SimRepo",
           "commit_for", "default_repos", "main", "speculators_config", "start_hub"]
