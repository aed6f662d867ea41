"""The bench's datasets: vLLM's SonnetDataset.sample and CustomDataset (JSONL), with the stand-in tokenizer."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..tokens import count_tokens, render_chat
from .args import BenchError
from .console import emit

BASE_PROMPT = "Pick as many lines as you can from these poem lines:\n"


def chat_template(content: str) -> str:
    """Stand-in for the gpt-oss (harmony) chat template, add_generation_prompt=True (the same template the
    simulated server applies on /v1/chat/completions)."""
    return render_chat([{"role": "user", "content": content}])


@dataclass
class SampleRequest:
    prompt: str
    prompt_len: int
    expected_output_len: int
    request_id: str


def sample_sonnet(path: str, num_requests: int, input_len: int, output_len: int, prefix_len: int,
                  seed: int, request_id_prefix: str, vt: tuple[int, ...], raw: bool = False) -> list[SampleRequest]:
    """raw: the openai-chat backend, which sends the prompt without the chat template (the server applies
    it); the length check still uses the chat-formatted text, as vLLM's does."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as exc:
        raise BenchError(f"cannot read --dataset-path {path}: {exc.strerror or exc}") from None
    if not lines:
        raise BenchError(f"--dataset-path {path} is empty")
    avg_len = sum(count_tokens(line) for line in lines) / len(lines)
    if avg_len <= 0:
        raise BenchError(f"--dataset-path {path} has no tokens")
    base_offset = count_tokens(chat_template(BASE_PROMPT))
    if input_len <= base_offset:
        raise BenchError(f"'input_len' must be higher than the base prompt length ({base_offset}).")
    num_input_lines = round((input_len - base_offset) / avg_len)
    if vt >= (0, 31):
        num_input_lines = max(num_input_lines, 1)
    num_prefix_lines = max(round((prefix_len - base_offset) / avg_len), 0)
    # Sim-only guard: real vLLM rejection-samples forever when the shared prefix alone exceeds
    # input_len (e.g. the default --sonnet-prefix-len 200 with --sonnet-input-len 128); shrink it.
    num_prefix_lines = min(num_prefix_lines, num_input_lines)
    while num_prefix_lines > 0 and count_tokens(
            chat_template(BASE_PROMPT + "".join(lines[:num_prefix_lines]))) > input_len:
        num_prefix_lines -= 1
    prefix_lines = lines[:num_prefix_lines]
    rng = random.Random(seed)
    out: list[SampleRequest] = []
    attempts, max_attempts = 0, 1000 + 1000 * num_requests
    while len(out) < num_requests:
        attempts += 1
        if attempts > max_attempts:
            raise BenchError(f"could not sample sonnet prompts of at most {input_len} tokens from {path}")
        extra = rng.choices(lines, k=max(num_input_lines - num_prefix_lines, 0))
        content = BASE_PROMPT + "".join(prefix_lines + extra)
        prompt = chat_template(content)
        plen = count_tokens(prompt)
        if plen <= input_len:
            out.append(SampleRequest(content if raw else prompt, plen, output_len, f"{request_id_prefix}{len(out)}"))
    return out


def sample_custom(path: str | None, num_requests: int, output_len: int | None, skip_chat_template: bool, seed: int,
                  disable_shuffle: bool, no_oversample: bool, request_id_prefix: str) -> list[SampleRequest]:
    """vLLM's CustomDataset (load_data + sample + maybe_oversample_requests) for a JSONL of {"prompt", ...}."""
    if path is None:
        raise BenchError("dataset_path must be provided for loading data.")
    if not path.endswith(".jsonl"):
        raise BenchError("Only JSONL format is supported for CustomDataset.")
    rows: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    raise BenchError(f"{path}: line {n} is not JSON (pandas.read_json: Expected object or value)") from None
                rows.append(row if isinstance(row, dict) else {})
    except OSError as exc:
        raise BenchError(f"cannot read --dataset-path {path}: {exc.strerror or exc}") from None
    if not any("prompt" in r for r in rows):
        raise BenchError("JSONL file must contain a 'prompt' column.")
    rng = random.Random(seed)  # vLLM: random.seed(self.random_seed); random.shuffle(self.data)
    if not disable_shuffle:
        rng.shuffle(rows)
    if num_requests <= 0:
        num_requests = len(rows)
    out: list[SampleRequest] = []
    for i, item in enumerate(rows):
        if len(out) >= num_requests:
            break
        prompt = str(item.get("prompt", ""))
        if output_len is None or output_len == -1:
            if "output_tokens" not in item:
                raise BenchError("If no output length is provided the custom dataset must contain an 'output_tokens' "
                                 "field.")
            try:
                new_output_len = int(item["output_tokens"])
            except (TypeError, ValueError):
                raise BenchError(f"Invalid value for 'output_tokens' in custom dataset: '{item['output_tokens']}'. "
                                 "Must be an integer.") from None
        else:
            new_output_len = output_len
        if not skip_chat_template:
            prompt = chat_template(prompt)
        out.append(SampleRequest(prompt, count_tokens(prompt), new_output_len, request_id_prefix + str(i)))
    if not no_oversample and out and len(out) < num_requests:
        rng = random.Random(seed)
        have = len(out)
        out.extend(replace(rng.choice(out[:have]), request_id=request_id_prefix + str(have + i))
                   for i in range(num_requests - have))
        emit(f"INFO {datetime.now().strftime('%m-%d %H:%M:%S')} [datasets.py:324] Oversampled requests to reach "
             f"{num_requests} total samples.")
    return out
