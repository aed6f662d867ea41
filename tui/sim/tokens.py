"""Approximate tokenisation shared by the simulated server and bench (no tokenizer available here).

One token per word, per run of digits, per punctuation mark and per whitespace run between words is
close enough to a BPE count for English verse to keep the bench's prompt lengths near the target.
"""

from __future__ import annotations

import re

_TOKEN_RE = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]|\s+")


def tokenize(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    # Whitespace between words is folded into the following word by real BPE tokenizers.
    return sum(1 for t in _TOKEN_RE.findall(text) if not t.isspace())


def render_chat(messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """Stand-in for the gpt-oss (harmony) chat template: each message as
    ``<|start|>ROLE<|message|>CONTENT<|end|>``, then ``<|start|>assistant`` (add_generation_prompt)."""
    out = "".join(f"<|start|>{m['role']}<|message|>{m['content']}<|end|>" for m in messages)
    return out + ("<|start|>assistant" if add_generation_prompt else "")
