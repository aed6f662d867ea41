"""`python -m tui.sim serve`: bind the port, start the engine-core child, wait for it, then serve with
uvicorn; the API server's own tracebacks (a busy port, an engine that never became ready)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from typing import Any

from ...core.versions import DEMO_VLLM, release
from ..config import sim_config
from ..specconfig import parse_speculative_config, pydantic_text
from ..logs import ProcessLog, color_enabled, traceback_lines
from .args import PER_REQUEST_ERROR, _architecture, engine_args, non_default_args, parse_args
from .engine_proc import EngineProc
from .routes import ROUTES_PRINTED, create_app
from .state import ServingState

_CLI_FRAMES = [
    (f"{sys.prefix}/bin/vllm", 10, "<module>", "sys.exit(main())"),
    ("vllm/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
    ("vllm/entrypoints/cli/serve.py", 60, "cmd", "uvloop.run(run_server(args))"),
    ("uvloop/__init__.py", 109, "run", "return __asyncio.run("),
    ("stdlib/asyncio/runners.py", 118, "run", "return self._loop.run_until_complete(task)"),
    ("uvloop/__init__.py", 61, "wrapper", "return await main"),
]


_CONFIG_FRAMES = [
    ("vllm/entrypoints/openai/api_server.py", 1896, "run_server",
     "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)"),
    ("vllm/entrypoints/openai/api_server.py", 1912, "run_server_worker", "async with build_async_engine_client("),
    ("stdlib/contextlib.py", 210, "__aenter__", "return await anext(self.gen)"),
    ("vllm/entrypoints/openai/api_server.py", 172, "build_async_engine_client_from_engine_args",
     "vllm_config = engine_args.create_engine_config(usage_context=usage_context)"),
]


def _print_api_traceback(log: ProcessLog, frames: list, exc: str) -> None:
    lines = [part for line in traceback_lines(_CLI_FRAMES + frames, exc) for part in line.split("\n")]
    log.write_lines(lines, stream=sys.stderr)



def uvicorn_log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's own formatters (``INFO:     Started server process [PID]``), to stdout, no colours."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "default": {"()": "uvicorn.logging.DefaultFormatter", "fmt": "%(levelprefix)s %(message)s",
                        "use_colors": False},
            "access": {"()": "uvicorn.logging.AccessFormatter",
                       "fmt": '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s',
                       "use_colors": False},
        },
        "handlers": {
            "default": {"formatter": "default", "class": "logging.StreamHandler", "stream": "ext://sys.stdout"},
            "access": {"formatter": "access", "class": "logging.StreamHandler", "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": ["access"], "level": level.upper(), "propagate": False},
        },
    }


def _bind(host: str | None, port: int) -> socket.socket:
    family = socket.AF_INET6 if host and ":" in host else socket.AF_INET
    sock = socket.socket(family=family, type=socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host if host is not None else "127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    # Accepted connections inherit TCP_NODELAY. asyncio sets it itself only on sockets whose proto is
    # IPPROTO_TCP (this one's is 0); vLLM's uvloop sets it on every TCP transport. Without it every SSE
    # chunk after the headers waits for the client's delayed ACK (about 40 ms on Linux loopback).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class _Interrupted(KeyboardInterrupt):
    pass


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = dict(os.environ)
    cfg = sim_config(environ)
    version = cfg.get("vllm_version", DEMO_VLLM)
    try:
        ns = parse_args(argv, version)
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    scale = float(cfg.get("time_scale") or 1.0)
    pid = os.getpid()
    log = ProcessLog("APIServer", pid, sys.stdout, color_enabled(environ))
    ea = engine_args(ns)

    log.info("api_server.py", 1839, f"vLLM API server version {version}")
    log.info("utils.py", 233, f"non-default args: {non_default_args(ns, version)}")
    try:
        sock = _bind(ns.host, ns.port)
    except OSError as e:
        _print_api_traceback(log, [
            ("vllm/entrypoints/openai/api_server.py", 1884, "run_server",
             "listen_address, sock = setup_server(args)"),
            ("vllm/entrypoints/openai/api_server.py", 1870, "setup_server", "sock = create_server_socket(sock_addr)"),
            ("vllm/entrypoints/openai/api_server.py", 1830, "create_server_socket", "sock.bind(addr)"),
        ], f"{type(e).__name__}: {e}")
        return 1

    def on_signal(signum, frame):
        raise _Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    engine: EngineProc | None = None
    try:
        log.info("model.py", 547, f"Resolved architecture: {_architecture(ns.model)}")
        log.info("model.py", 1510, f"Using max model len {ea['max_model_len']}")
        log.plugin("WARNING", "platform.py", 142, "Neuron Platform only supports the following distributed executor "
                   "backends: ('mp', 'uni'), using mp")
        log.plugin("INFO", "platform.py", 188, "Defaulting optimization level to O1 on Neuron")
        log.info("scheduler.py", 205,
                 f"Chunked prefill is enabled with max_num_batched_tokens={ea['max_num_batched_tokens']}.")
        if getattr(ns, "per_request_spec_decode_metrics", "none") != "none" and not ea["speculative_config"]:
            # VllmConfig.__post_init__ (config/vllm.py): the flag needs a speculative config. vLLM 0.32 reports it
            # as pydantic's ValidationError from create_engine_config, exit 1, before any engine process.
            _print_api_traceback(log, _CONFIG_FRAMES + [
                ("vllm/engine/arg_utils.py", 2838, "create_engine_config", "config = VllmConfig("),
                ("pydantic/_internal/_dataclasses.py", 121, "__init__",
                 "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)"),
            ], "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig\n"
               f"  Value error, {PER_REQUEST_ERROR} [type=value_error, input_value=ArgsKwargs((), "
               "{'model_co... 'shutdown_timeout': 0}), input_type=ArgsKwargs]\n"
               "    For further information visit https://errors.pydantic.dev/2.14/v/value_error")
            return 1
        try:
            parse_speculative_config(ea["speculative_config"], release(version), schedule=False)
        except ValueError as e:
            # SpeculativeConfig's pydantic validation (config/speculative.py) inside create_engine_config: exit 1
            # before any engine process, as vLLM does.
            _print_api_traceback(log, _CONFIG_FRAMES + [
                ("vllm/engine/arg_utils.py", 2594, "create_engine_config",
                 "speculative_config = self.create_speculative_config("),
                ("vllm/engine/arg_utils.py", 2099, "create_speculative_config",
                 "return SpeculativeConfig(**self.speculative_config)"),
                ("pydantic/_internal/_dataclasses.py", 121, "__init__",
                 "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)"),
            ], pydantic_text(e, ea["speculative_config"]))
            return 1
        if ea["speculative_config"]:
            log.plugin("WARNING", "platform.py", 231, "Speculative decoding is enabled; disabling async scheduling.")
        log.plugin("INFO", "platform.py", 254, "Using NEURON custom attention backend.")

        engine = EngineProc(ea, environ)
        timeout_cfg = float(environ.get("VLLM_ENGINE_READY_TIMEOUT_S", "600") or 600)
        status, info = engine.wait_ready(timeout_cfg * scale)
        frames_wait = [
            ("vllm/entrypoints/openai/api_server.py", 1896, "run_server",
             "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)"),
            ("vllm/entrypoints/openai/api_server.py", 1912, "run_server_worker",
             "async with build_async_engine_client("),
            ("stdlib/contextlib.py", 210, "__aenter__", "return await anext(self.gen)"),
            ("vllm/entrypoints/openai/api_server.py", 180, "build_async_engine_client_from_engine_args",
             "async_llm = AsyncLLM.from_vllm_config("),
            ("vllm/v1/engine/async_llm.py", 136, "__init__", "self.engine_core = EngineCoreClient.make_async_mp_client("),
            ("vllm/v1/engine/core_client.py", 469, "__init__", "with launch_core_engines(vllm_config, executor_class,"),
            ("stdlib/contextlib.py", 144, "__exit__", "next(self.gen)"),
            ("vllm/v1/engine/utils.py", 782, "launch_core_engines", "wait_for_engine_startup("),
        ]
        if status == "timeout":
            shown = int(timeout_cfg) if timeout_cfg == int(timeout_cfg) else timeout_cfg
            _print_api_traceback(log, frames_wait + [
                ("vllm/v1/engine/utils.py", 860, "wait_for_engine_startup", "raise TimeoutError("),
            ], "TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow "
               f"weight loading for large models. Waited {shown}s (configured by VLLM_ENGINE_READY_TIMEOUT_S). "
               "To increase the timeout, set the environment variable: VLLM_ENGINE_READY_TIMEOUT_S=<seconds>")
            return 1
        if status != "ready":
            engine.stop()
            rc = engine.proc.returncode
            _print_api_traceback(log, frames_wait + [
                ("vllm/v1/engine/utils.py", 871, "wait_for_engine_startup", "raise RuntimeError("),
            ], "RuntimeError: Engine core initialization failed. See root cause above. "
               f"Failed core proc(s): {{'EngineCore_DP0': {rc if rc is not None else 1}}}")
            return 1

        import uvicorn

        st = ServingState(ns, ea, cfg, log, engine, info)
        app = create_app(st)
        host_shown = ns.host or "0.0.0.0"  # --host "" means every interface, as in vLLM
        log.info("api_server.py", 1634, "Supported_tasks: ['generate']")
        log.info("api_server.py", 1912, f"Starting vLLM API server 0 on http://{host_shown}:{ns.port}")
        log.info("launcher.py", 34, "Available routes are:")
        for path, methods in ROUTES_PRINTED:
            log.info("launcher.py", 42, f"Route: {path}, Methods: {methods}")
        config = uvicorn.Config(app, log_config=uvicorn_log_config(ns.uvicorn_log_level), lifespan="on",
                                access_log=not ns.disable_uvicorn_access_log, timeout_keep_alive=5,
                                timeout_graceful_shutdown=2, log_level=ns.uvicorn_log_level)
        server = uvicorn.Server(config)
        st.server = server

        def during_serve(signum, frame):  # uvicorn restores this handler and re-raises into it after shutdown
            st.pending_exit = True
            server.should_exit = True

        signal.signal(signal.SIGTERM, during_serve)
        signal.signal(signal.SIGINT, during_serve)
        asyncio.run(server.serve(sockets=[sock]))
        return 1 if st.engine_dead else 0
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if engine is not None:
            engine.stop()
        with contextlib.suppress(OSError):
            sock.close()
        sys.stdout.flush()

