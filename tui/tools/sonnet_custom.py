"""Build vLLM's sonnet benchmark prompts as a `custom` JSONL (for vLLM >= 0.32, which has no sonnet dataset).

Standalone: the standard library plus `transformers`, no import of the app. It runs in the interpreter
that owns the profile's `vllm` (that one has the target's tokenizer, the same one `vllm bench serve`
loads), e.g.

    <vllm python> sonnet_custom.py --sonnet sonnet.txt --tokenizer openai/gpt-oss-120b \\
        --input-len 512 --output-len 128 --prefix-len 200 --num-prompts 30 --seed 0 --out run/sonnet.custom.jsonl

`sample_sonnet` is vLLM's SonnetDataset.sample (0.31, the last version that has it): the average token
length of a poem line, the chat-formatted base prompt's length, the same first `prefix` lines in every
prompt, `random.choices` for the other lines (Python's `random` seeded like `--seed`), the chat template
applied (add_generation_prompt=True), and rejection sampling until the chat-formatted prompt fits
`input_len` tokens. Each JSONL line is {"prompt": <chat-formatted text>, "output_tokens": N}: exactly the
text sonnet sends to /v1/completions, so the bench runs it with `--dataset-name custom
--skip-chat-template`. The file is written atomically; one JSON summary line goes to stdout. Errors are
one line on stderr (exit 1; 2 for bad arguments).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from typing import Any

BASE_PROMPT = "Pick as many lines as you can from these poem lines:\n"
DEFAULT_PREFIX_LEN = 200
MAX_ATTEMPTS_PER_PROMPT = 1000
PROG = "sonnet_custom"


class BuildError(Exception):
    """A problem with the inputs: printed as one line, exit status 1."""


def _n_tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text).input_ids)


def _chat(tokenizer: Any, content: str) -> str:
    return tokenizer.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                         tokenize=False)


def sample_sonnet(lines: list[str], tokenizer: Any, num_requests: int, input_len: int, output_len: int,
                  prefix_len: int = DEFAULT_PREFIX_LEN, seed: int = 0,
                  max_attempts: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """vLLM's SonnetDataset.sample with return_prompt_formatted=True (the /v1/completions path).

    `lines` as `readlines()` gives them (newlines kept). Returns (records, stats): records are
    {"prompt", "output_tokens", "prompt_len"}; stats hold the derived numbers. Unlike vLLM, which loops
    forever when no prompt can fit, this gives up after `max_attempts` draws with a BuildError."""
    if not lines:
        raise BuildError("the sonnet file is empty")
    if not (getattr(tokenizer, "chat_template", None) or getattr(tokenizer, "default_chat_template", None)):
        raise BuildError("Tokenizer/model must have chat template for sonnet dataset.")
    if num_requests < 1:
        raise BuildError(f"--num-prompts must be at least 1 (got {num_requests})")
    avg_len = sum(_n_tokens(tokenizer, line) for line in lines) / len(lines)
    if avg_len <= 0:
        raise BuildError("the sonnet lines have no tokens")
    base_offset = _n_tokens(tokenizer, _chat(tokenizer, BASE_PROMPT))
    if input_len <= base_offset:
        raise BuildError(f"'input_len' must be higher than the base prompt length ({base_offset}).")
    num_input_lines = max(round((input_len - base_offset) / avg_len), 1)  # 0.31 adds the max(..., 1)
    num_prefix_lines = max(round((prefix_len - base_offset) / avg_len), 0)
    prefix_lines = lines[:num_prefix_lines]
    rng = random.Random(seed)  # the same sequence as vLLM's random.seed(seed) + random.choices
    limit = max_attempts if max_attempts is not None else MAX_ATTEMPTS_PER_PROMPT * num_requests
    records: list[dict[str, Any]] = []
    attempts = 0
    while len(records) < num_requests:
        attempts += 1
        if attempts > limit:
            raise BuildError(
                f"no sonnet prompt of at most {input_len} tokens after {limit} draws ({num_prefix_lines} shared "
                f"prefix lines from --prefix-len {prefix_len}, {num_input_lines} lines per prompt): raise the "
                "input length or lower the prefix length")
        extra = rng.choices(lines, k=num_input_lines - num_prefix_lines)
        prompt = _chat(tokenizer, BASE_PROMPT + "".join(prefix_lines + extra))
        plen = _n_tokens(tokenizer, prompt)
        if plen <= input_len:
            records.append({"prompt": prompt, "output_tokens": output_len, "prompt_len": plen})
    stats = {"avg_line_tokens": round(avg_len, 4), "base_offset": base_offset, "num_input_lines": num_input_lines,
             "num_prefix_lines": num_prefix_lines, "draws": attempts}
    return records, stats


def write_jsonl_atomic(path: str, records: list[dict[str, Any]]) -> None:
    """{"prompt", "output_tokens"} per line, via a temporary file in the same directory and os.replace."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps({"prompt": r["prompt"], "output_tokens": r["output_tokens"]}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load_tokenizer(name: str) -> Any:
    try:
        from transformers import AutoTokenizer  # type: ignore[import-not-found]
    except ImportError as exc:
        raise BuildError(f"transformers is not importable in {sys.executable} ({exc}); install it there "
                         f"(`{sys.executable} -m pip install transformers`) or use the interpreter that runs vllm") from None
    try:
        return AutoTokenizer.from_pretrained(name)
    except Exception as exc:  # noqa: BLE001 - any loader failure is reported in one line
        msg = " ".join(str(exc).split())[:400]
        raise BuildError(f"cannot load the tokenizer {name!r}: {type(exc).__name__}: {msg}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Build vLLM's sonnet prompts as a custom JSONL dataset.")
    p.add_argument("--sonnet", required=True, help="sonnet.txt")
    p.add_argument("--tokenizer", required=True, help="tokenizer name or directory (the target model)")
    p.add_argument("--input-len", type=int, required=True)
    p.add_argument("--output-len", type=int, required=True)
    p.add_argument("--prefix-len", type=int, default=DEFAULT_PREFIX_LEN)
    p.add_argument("--num-prompts", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="the JSONL file to write")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        try:
            with open(args.sonnet, encoding="utf-8") as f:
                lines = f.readlines()
        except OSError as exc:
            raise BuildError(f"cannot read --sonnet {args.sonnet}: {exc.strerror or exc}") from None
        tokenizer = load_tokenizer(args.tokenizer)
        records, stats = sample_sonnet(lines, tokenizer, args.num_prompts, args.input_len, args.output_len,
                                       args.prefix_len, args.seed)
        try:
            write_jsonl_atomic(args.out, records)
        except OSError as exc:
            raise BuildError(f"cannot write --out {args.out}: {exc.strerror or exc}") from None
    except BuildError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return 1
    lens = [r["prompt_len"] for r in records]
    summary = {"num_prompts": len(records), "mean_prompt_tokens": round(sum(lens) / len(lens), 2),
               "min_prompt_tokens": min(lens), "max_prompt_tokens": max(lens), "output_tokens": args.output_len,
               "input_len": args.input_len, "prefix_len": args.prefix_len, "seed": args.seed,
               "tokenizer": args.tokenizer, "out": args.out, **stats}
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
