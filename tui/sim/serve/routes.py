"""The HTTP app of the simulated `vllm serve`: vLLM's routes on starlette (completions, chat completions,
tokenize, metrics, ...) over the serving state."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from typing import Any, AsyncIterator

from ...core.versions import DEMO_VLLM
from ..tokens import render_chat
from ..tokens import tokenize as _tok
from .state import ServingState

ROUTES_PRINTED = [
    ("/openapi.json", "GET, HEAD"), ("/health", "GET"), ("/load", "GET"), ("/ping", "POST"), ("/ping", "GET"),
    ("/tokenize", "POST"), ("/detokenize", "POST"), ("/v1/models", "GET"), ("/version", "GET"),
    ("/v1/completions", "POST"), ("/v1/chat/completions", "POST"), ("/reset_prefix_cache", "POST"),
    ("/metrics", "GET"),
]


def _err(message: str, etype: str, code: int):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": etype, "param": None, "code": code}},
                        status_code=code)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def create_app(st: ServingState):
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    api_key = st.ns.api_key

    def unauthorized(request: Request) -> Response | None:
        if api_key and request.headers.get("authorization", "") != f"Bearer {api_key}":
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        return None

    async def health(request: Request) -> Response:
        if st.engine_dead or (st.engine is not None and not st.engine.alive()):
            return Response(status_code=503)
        return Response(status_code=200)

    async def load(request: Request) -> Response:
        return JSONResponse({"server_load": st.running + st.waiting})

    async def version(request: Request) -> Response:
        return JSONResponse({"version": st.cfg.get("vllm_version", DEMO_VLLM)})

    async def openapi(request: Request) -> Response:
        return JSONResponse({"openapi": "3.1.0", "info": {"title": "vLLM (specdec-tui simulation)",
                                                           "version": st.cfg.get("vllm_version", DEMO_VLLM)},
                             "paths": {p: {} for p, _ in ROUTES_PRINTED}})

    async def models(request: Request) -> Response:
        if (r := unauthorized(request)) is not None:
            return r
        now = int(time.time())
        data = [{"id": name, "object": "model", "created": now, "owned_by": "vllm", "root": st.model,
                 "parent": None, "max_model_len": st.max_model_len,
                 "permission": [{"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission",
                                 "created": now, "allow_create_engine": False, "allow_sampling": True,
                                 "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                                 "allow_fine_tuning": False, "organization": "*", "group": None,
                                 "is_blocking": False}]}
                for name in st.served]
        return JSONResponse({"object": "list", "data": data})

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(st.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def reset_prefix_cache(request: Request) -> Response:
        return Response(status_code=200)

    async def _body(request: Request) -> dict[str, Any] | Response:
        try:
            body = await request.json()
        except ValueError as e:
            return _err(f"JSON decode error: {e}", "BadRequestError", 400)
        if not isinstance(body, dict):
            return _err("Request body must be a JSON object.", "BadRequestError", 400)
        return body

    async def tokenize_ep(request: Request) -> Response:
        body = await _body(request)
        if isinstance(body, Response):
            return body
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            return _err("'prompt' must be a string.", "BadRequestError", 400)
        ids, toks = st.token_ids(prompt)
        return JSONResponse({"count": len(ids), "max_model_len": st.max_model_len, "tokens": ids,
                             "token_strs": toks if body.get("return_token_strs") else None})

    async def detokenize_ep(request: Request) -> Response:
        body = await _body(request)
        if isinstance(body, Response):
            return body
        ids = body.get("tokens")
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            return _err("'tokens' must be a list of integers.", "BadRequestError", 400)
        return JSONResponse({"prompt": " ".join(st.inv_vocab.get(i, "") for i in ids)})

    def _sampling(body: dict[str, Any], prompt_tokens: int,
                  max_keys: tuple[str, ...]) -> Response | tuple[int, bool, bool, list[str]]:
        """(max_tokens, stream, include_usage, stop) of a request, or its 400 response (vLLM's messages)."""
        if max_keys == ("max_tokens",):  # /v1/completions: OpenAI's default of 16
            max_tokens: Any = body.get("max_tokens", 16)
        else:  # chat: max_completion_tokens, else the deprecated max_tokens, else the rest of the context
            max_tokens = next((body[k] for k in max_keys if body.get(k) is not None), None)
        if max_tokens is None:
            max_tokens = st.max_model_len - prompt_tokens
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            return _err(f"max_tokens must be at least 1, got {max_tokens}.", "BadRequestError", 400)
        if prompt_tokens > st.max_model_len:
            return _err(f"This model's maximum context length is {st.max_model_len} tokens. However, your request "
                        f"has {prompt_tokens} input tokens. Please reduce the length of the input messages.",
                        "BadRequestError", 400)
        if prompt_tokens + max_tokens > st.max_model_len:
            return _err(f"'max_tokens' is too large: {max_tokens}. This model's maximum context length is "
                        f"{st.max_model_len} tokens and your request has {prompt_tokens} input tokens "
                        f"({max_tokens} > {st.max_model_len} - {prompt_tokens}).", "BadRequestError", 400)
        stream = bool(body.get("stream", False))
        stream_options = body.get("stream_options")
        if stream_options is not None and not stream:
            return _err("Stream options can only be defined when `stream=True`.", "BadRequestError", 400)
        include_usage = bool((stream_options or {}).get("include_usage")) or st.ns.enable_force_include_usage
        stop = body.get("stop") or []
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            return _err("'stop' must be a string or a list of strings.", "BadRequestError", 400)
        return max_tokens, stream, include_usage, stop

    def _model(body: dict[str, Any]) -> Response | str:
        model = body.get("model")
        if model is not None and model not in st.served:
            return _err(f"The model `{model}` does not exist.", "NotFoundError", 404)
        return model or st.served[0]

    async def _request(request: Request) -> tuple[dict[str, Any], str] | Response:
        """The checks every generation route makes first, as vLLM does: the API key, a JSON body, the model."""
        if (r := unauthorized(request)) is not None:
            return r
        body = await _body(request)
        if isinstance(body, Response):
            return body
        model = _model(body)
        if isinstance(model, Response):
            return model
        return body, model

    async def completions(request: Request) -> Response:
        got = await _request(request)
        if isinstance(got, Response):
            return got
        body, model = got
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            prompt_tokens = len(prompt)
            prompt = " ".join(str(t) for t in prompt)
        elif isinstance(prompt, str):
            prompt_tokens = max(1, len([t for t in _tok(prompt) if not t.isspace()]))
        else:
            return _err("'prompt' must be a string, a list of one string or a list of token ids.",
                        "BadRequestError", 400)
        sampling = _sampling(body, prompt_tokens, ("max_tokens",))
        if isinstance(sampling, Response):
            return sampling
        max_tokens, stream, include_usage, stop = sampling
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex
        cid = f"cmpl-{rid}"
        created = int(time.time())
        stats = st.new_spec_stats()

        if not stream:
            text = ""
            finish = stop_reason = None
            n_out = 0
            async with contextlib.aclosing(st.run(prompt, prompt_tokens, max_tokens, stop, spec_stats=stats)) as steps:
                async for piece, fin, sr, n in steps:
                    text += piece
                    n_out = n
                    if fin:
                        finish, stop_reason = fin, sr
            resp: dict[str, Any] = {
                "id": cid, "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                             "stop_reason": stop_reason, "prompt_logprobs": None}],
                "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + n_out,
                          "completion_tokens": n_out, "prompt_tokens_details": None},
                "kv_transfer_params": None}
            if stats is not None:
                resp["metrics"] = st.spec_metrics(stats, stream=False)
            return JSONResponse(resp)

        async def sse() -> AsyncIterator[str]:
            n_out = 0
            async with contextlib.aclosing(st.run(prompt, prompt_tokens, max_tokens, stop, spec_stats=stats)) as steps:
                async for piece, fin, sr, n in steps:
                    n_out = n
                    chunk = {"id": cid, "object": "text_completion", "created": created, "model": model,
                             "choices": [{"index": 0, "text": piece, "logprobs": None, "finish_reason": fin,
                                          "stop_reason": sr, "prompt_token_ids": None, "token_ids": None}],
                             "usage": None}
                    yield f"data: {_dumps(chunk)}\n\n"
            if include_usage:
                usage: dict[str, Any] = {"id": cid, "object": "text_completion", "created": created, "model": model,
                                         "choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                                                  "total_tokens": prompt_tokens + n_out,
                                                                  "completion_tokens": n_out}}
                if stats is not None:  # metrics ride on the usage chunk only
                    usage["metrics"] = st.spec_metrics(stats, stream=True)
                yield f"data: {_dumps(usage)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    def _messages(body: dict[str, Any]) -> Response | list[dict[str, str]]:
        """The request's messages with text content (a string, or a list of {"type": "text"} parts, joined as
        vLLM's 'string' content format does), or a 400."""
        msgs = body.get("messages")
        if not isinstance(msgs, list):
            return _err("'messages' must be a list of messages.", "BadRequestError", 400)
        if not msgs:
            return _err("Cannot apply chat template to an empty conversation. Provide at least one message.",
                        "BadRequestError", 400)
        out = []
        for m in msgs:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                return _err("Each message must be an object with a 'role'.", "BadRequestError", 400)
            content = m.get("content")
            if content is None:
                content = ""
            if isinstance(content, list):
                texts = []
                for part in content:
                    if isinstance(part, str):
                        texts.append(part)
                    elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                        texts.append(part["text"])
                    else:
                        return _err("Only text content parts are supported by this model.", "BadRequestError", 400)
                content = "\n".join(texts)
            if not isinstance(content, str):
                return _err("'content' must be a string or a list of content parts.", "BadRequestError", 400)
            out.append({"role": m["role"], "content": content})
        return out

    async def chat_completions(request: Request) -> Response:
        got = await _request(request)
        if isinstance(got, Response):
            return got
        body, model = got
        messages = _messages(body)
        if isinstance(messages, Response):
            return messages
        prompt = render_chat(messages)  # the stand-in chat template, add_generation_prompt=True
        prompt_tokens = max(1, len([t for t in _tok(prompt) if not t.isspace()]))
        sampling = _sampling(body, prompt_tokens, ("max_completion_tokens", "max_tokens"))
        if isinstance(sampling, Response):
            return sampling
        max_tokens, stream, include_usage, stop = sampling
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex
        cid = f"chatcmpl-{rid}"
        created = int(time.time())
        stats = st.new_spec_stats()
        acceptance = float(st.cfg.get("chat_acceptance", st.cfg.get("acceptance", 0.69)))

        def steps_of():
            return contextlib.aclosing(st.run(prompt, prompt_tokens, max_tokens, stop, acceptance=acceptance,
                                              spec_stats=stats))

        if not stream:
            text = ""
            finish = stop_reason = None
            n_out = 0
            async with steps_of() as steps:
                async for piece, fin, sr, n in steps:
                    text += piece
                    n_out = n
                    if fin:
                        finish, stop_reason = fin, sr
            resp: dict[str, Any] = {
                "id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None,
                                                     "annotations": None, "audio": None, "function_call": None,
                                                     "reasoning": None},
                             "logprobs": None, "finish_reason": finish, "stop_reason": stop_reason,
                             "token_ids": None}],
                "service_tier": None,
                "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + n_out,
                          "completion_tokens": n_out, "prompt_tokens_details": None},
                "prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None}
            if stats is not None:
                resp["metrics"] = st.spec_metrics(stats, stream=False)
            return JSONResponse(resp)

        async def sse() -> AsyncIterator[str]:
            n_out = 0
            first = True
            async with steps_of() as steps:
                async for piece, fin, sr, n in steps:
                    n_out = n
                    if first:  # vLLM sends the role with the first engine output, content ""
                        first = False
                        head = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                             "logprobs": None, "finish_reason": None}],
                                "prompt_token_ids": None}
                        yield f"data: {_dumps(head)}\n\n"
                    choice: dict[str, Any] = {"index": 0, "delta": {"content": piece}, "logprobs": None,
                                              "finish_reason": fin}
                    if fin:
                        choice["stop_reason"] = sr
                    choice["token_ids"] = None
                    chunk = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                             "choices": [choice]}
                    yield f"data: {_dumps(chunk)}\n\n"
            if include_usage:
                usage: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created,
                                         "model": model, "choices": [],
                                         "usage": {"prompt_tokens": prompt_tokens,
                                                   "total_tokens": prompt_tokens + n_out, "completion_tokens": n_out}}
                if stats is not None:
                    usage["metrics"] = st.spec_metrics(stats, stream=True)
                yield f"data: {_dumps(usage)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"detail": "Not Found"}, status_code=404)

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return JSONResponse({"detail": "Method Not Allowed"}, status_code=405)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        tasks = [asyncio.create_task(st.stats_loop()), asyncio.create_task(st.engine_watch())]
        if st.pending_exit and st.server is not None:
            st.server.should_exit = True
        try:
            yield
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    routes = [
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/load", load, methods=["GET"]),
        Route("/ping", health, methods=["GET", "POST"]),
        Route("/tokenize", tokenize_ep, methods=["POST"]),
        Route("/detokenize", detokenize_ep, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/version", version, methods=["GET"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/reset_prefix_cache", reset_prefix_cache, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_allowed})


