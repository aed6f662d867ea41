"""The web server of `specdec-tui serve-web`: textual-serve's app protocol behind a token, one driver at a time.

What comes from textual-serve 1.1.3 (the `web` extra): `AppService` (one app process per browser session and the
packet protocol to Textual's WebDriver), its bundled xterm.js client (`static/js/textual.js`), `xterm.css` and
Roboto Mono font files, served from its own package folder. What is ours (textual-serve's `Server` has no
authentication, runs its command through a shell and links a web font from a CDN):

- every URL is under `/<token>/` (page, websocket, static files); anything else is refused (403) after a
  constant-time comparison, and the token is never logged (it is registered with tui.core.secrets, and
  aiohttp's access log is off);
- the page is our template (tui/web/templates/app_index.html): relative URLs, the bundled font, a
  Content-Security-Policy that allows this origin only;
- the app runs without a shell (`create_subprocess_exec` of an argv), in its own session, as
  `python -m tui.web.child` (which makes the app hang up when serve-web dies);
- one browser session drives the app; a second one is refused with the reason shown on its page;
- when a session's websocket closes (tab closed, tunnel lost: the heartbeat notices), the app stops as on SIGTERM
  (its quit without the question: servers stopped, report written, exit 130), which stops nothing a terminal
  loss would not; after STOP_DEADLINE_S it is hung up (the terminal-loss path, tui/app/terminal.py, which exits
  within 4 s whatever blocks), then killed, and so is any child of it still there.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any, Callable

import jinja2
import psutil
import textual_serve
from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from ..core.secrets import redact

log = logging.getLogger("specdec-tui.web")

STATIC_DIR = (Path(textual_serve.__file__).parent / "static").resolve()  # textual-serve's own files, not copied
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"

HEARTBEAT_S = 15.0  # a lost tunnel is noticed within about this (aiohttp pings; no pong closes the websocket)
# The app stopped with SIGTERM ends its run (servers stopped with their grace, the report written) in seconds; on
# a loaded machine the report's charts take longest. After this it is hung up: a hung-up app kills its children
# within tui.app.terminal.TERMINAL_LOSS_EXIT_S (4 s) and exits once its report is written, at the latest
# TERMINAL_LOSS_REPORT_S (20 s) later, whatever blocks; HANGUP_DEADLINE_S after the hang-up its group is killed.
STOP_DEADLINE_S = 30.0
HANGUP_DEADLINE_S = 26.0
LEFTOVER_GRACE_S = 5.0  # the app's servers die with it (PR_SET_PDEATHSIG); what is still there then is killed
STDERR_KEEP = 64 * 1024
REFUSED_CODE = 4001  # websocket close code of a refused second session (4000-4999: the application's own)

REFUSED_PAGE = ("specdec-tui serve-web: refused. This address needs the URL with its token, as serve-web printed "
                "it when it started (http://HOST:PORT/TOKEN/).\n")
# (each fits a websocket close reason, 123 bytes, shown whole on the page)
SECOND_SESSION = "Another browser session drives specdec-tui now; this one is refused. Close that tab, then Restart here."
STILL_STOPPING = "The previous session's app is still stopping its servers. Press Restart in a few seconds."


def _terminal_text(text: str) -> bytes:
    """`text` as terminal output: cleared screen, CRLF line ends (shown before the page's closed dialog)."""
    return ("\x1b[2J\x1b[H" + text.replace("\r\n", "\n").replace("\n", "\r\n") + "\r\n").encode("utf-8")


def _close_reason(text: str) -> bytes:
    """A websocket close reason is at most 123 bytes."""
    data = text.encode("utf-8")
    return data if len(data) <= 123 else data[:120].decode("utf-8", "ignore").encode("utf-8") + b"..."


class AppSession(AppService):
    """One browser session's app: textual-serve's AppService, started without a shell and stopped like a
    terminal loss."""

    def __init__(self, argv: list[str], ws: web.WebSocketResponse, *, cwd: str | None = None) -> None:
        self.argv = list(argv)
        self.ws = ws
        self.cwd = cwd
        self.app_quit = False  # the app said it exits (its quit: q, ctrl+q)
        self.started = False  # the app's WebDriver answered (its __GANGLION__ prelude)
        self.stderr = bytearray()
        self.returncode: int | None = None
        self.end_reason = ""  # why serve-web stops the app, shown on its page
        self._stopping: asyncio.Task[None] | None = None
        super().__init__(" ".join(argv), write_bytes=self._to_browser_bytes, write_str=self._to_browser_str,
                         close=self._app_exited, download_manager=DownloadManager())

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None and self._stopping is None

    # -- the browser side ------------------------------------------------------------------------------------------
    async def _to_browser_bytes(self, data: bytes) -> None:
        if not self.ws.closed:
            try:
                await self.ws.send_bytes(data)
            except (ConnectionError, RuntimeError):
                pass  # the browser went away: its websocket handler stops the app; keep draining the app

    async def _to_browser_str(self, data: str) -> None:
        if not self.ws.closed:
            try:
                await self.ws.send_str(data)
            except (ConnectionError, RuntimeError):
                pass

    async def close_browser(self, reason: str, code: int = 1000) -> None:
        if not self.ws.closed:
            try:
                await self.ws.close(code=code, message=_close_reason(reason))
            except (ConnectionError, RuntimeError):
                pass

    async def _app_exited(self) -> None:
        """The app's WebDriver wrote its exit packet: the operator quit in the browser (the app has already
        stopped its servers and ended its run). Also the end of an app serve-web stopped: then it says why."""
        if self._stopping is not None:
            await self.close_browser(self.end_reason or "Session ended.")
            return
        self.app_quit = True
        await self.close_browser("specdec-tui has quit. Restart opens the wizard again.")

    # -- the app process -------------------------------------------------------------------------------------------
    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        env = self._build_environment(width=width, height=height)
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, cwd=self.cwd,
            start_new_session=True)  # serve-web's terminal signals (^C) reach serve-web, which stops the app
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def run(self) -> None:
        """Relay the app's packets to the browser until the app's output ends (after textual-serve's
        AppService.run, which this replaces: it keeps draining the app when the browser is gone, and shows why
        an app that never started did not)."""
        process = self._process
        assert process is not None and process.stdout is not None and process.stderr is not None
        stdout, stderr = process.stdout, process.stderr

        async def read_stderr() -> None:
            while chunk := await stderr.read(4096):
                if len(self.stderr) < STDERR_KEEP:
                    self.stderr += chunk[: STDERR_KEEP - len(self.stderr)]

        stderr_task = asyncio.create_task(read_stderr())
        try:
            for _ in range(10):  # Textual's WebDriver writes its prelude line first
                line = await stdout.readline()
                if not line:
                    break
                if line == b"__GANGLION__\n":
                    self.started = True
                    break
            while self.started:
                kind = await stdout.readexactly(1)
                size = int.from_bytes(await stdout.readexactly(4), "big")
                payload = await stdout.readexactly(size)
                if kind == b"D":
                    await self.on_data(payload)
                elif kind == b"M":
                    await self.on_meta(payload)
                elif kind == b"P":
                    await self.on_packed(payload)
        except (asyncio.IncompleteReadError, ConnectionResetError):
            pass
        try:
            await asyncio.wait_for(stderr_task, STOP_DEADLINE_S)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            stderr_task.cancel()
        try:
            self.returncode = await asyncio.wait_for(process.wait(), STOP_DEADLINE_S)
        except asyncio.TimeoutError:
            pass
        if not self.started:
            text = redact(self.stderr.decode("utf-8", "replace")).strip() or "(it printed nothing)"
            log.error("the app did not start (exit code %s): %s", self.returncode, text)
            await self._to_browser_bytes(_terminal_text(f"specdec-tui did not start (exit code {self.returncode}):"
                                                        f"\n\n{text}"))
            await self.close_browser("specdec-tui did not start: its message is above.")
        elif not self.app_quit:
            await self.close_browser(self.end_reason or f"specdec-tui exited (exit code {self.returncode}).")

    async def stop(self) -> None:
        """Stop the app (idempotent; concurrent callers wait for the one stop)."""
        if self._stopping is None:
            self._stopping = asyncio.create_task(self._stop())
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        process = self._process
        if process is None:
            return
        family: list[psutil.Process] = []
        if process.returncode is None:
            try:
                family = psutil.Process(process.pid).children(recursive=True)
            except psutil.Error:
                pass
            if not self.app_quit:
                # The app's own quit without its question (its SIGTERM handler): it stops its servers, ends the
                # run with its report and exits 130, as after a lost terminal but without the terminal's 4 s cut.
                _signal(process.pid, signal.SIGTERM)
            if not await _exited(process, STOP_DEADLINE_S):
                # The terminal-loss path (tui/app/terminal.py): it exits within 4 s whatever blocks.
                log.warning("the app (pid %d) did not stop within %.0f s: hanging it up", process.pid,
                            STOP_DEADLINE_S)
                _signal(process.pid, signal.SIGHUP)
                if not await _exited(process, HANGUP_DEADLINE_S):
                    log.warning("the app (pid %d) did not exit: killing it", process.pid)
                    _killpg(process.pid)
                    await process.wait()
        self.returncode = process.returncode
        if family:
            _, alive = await asyncio.to_thread(psutil.wait_procs, family, LEFTOVER_GRACE_S)
            for p in alive:
                log.warning("killing %s (pid %d), left by the app", _name(p), p.pid)
                try:
                    p.kill()
                except psutil.Error:
                    pass
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, STOP_DEADLINE_S)
            except asyncio.TimeoutError:
                self._task.cancel()
            self._task = None


async def _exited(process: asyncio.subprocess.Process, within: float) -> bool:
    try:
        await asyncio.wait_for(process.wait(), within)
        return True
    except asyncio.TimeoutError:
        return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the app leads its own process group (start_new_session)
    except (ProcessLookupError, PermissionError):
        _signal(pid, signal.SIGKILL)


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return "a process"


class BindError(Exception):
    """The address cannot be bound; `error` is the OSError."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class WebServer:
    """The aiohttp application: /<token>/ (page), /<token>/ws (the session), /<token>/static/... (files)."""

    def __init__(self, app_argv: list[str], *, token: str, host: str, port: int, title: str,
                 cwd: str | None = None) -> None:
        self.app_argv = list(app_argv)
        self.token = token
        self.host = host
        self.port = port
        self.title = title
        self.cwd = cwd
        self.driver: AppSession | None = None  # the one session that drives the app
        self.sessions: set[AppSession] = set()
        self.stop_reason = ""
        self._templates = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR), autoescape=True)

    # -- the token ---------------------------------------------------------------------------------------------------
    @web.middleware
    async def _token_gate(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        given = request.match_info.get("token")
        if given is None or not hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode("utf-8")):
            log.warning("refused %s from %s: no valid token in the URL", request.method, request.remote)
            return web.Response(status=403, text=REFUSED_PAGE, headers={"Cache-Control": "no-store"})
        return await handler(request)

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._token_gate])
        app.add_routes([
            web.get("/{token}", self.handle_bare),
            web.get("/{token}/", self.handle_index),
            web.get("/{token}/ws", self.handle_websocket),
            web.get("/{token}/static/{path:.+}", self.handle_static),
        ])
        return app

    # -- pages and files --------------------------------------------------------------------------------------------
    async def handle_bare(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"{request.match_info['token']}/")  # relative: the page's URLs need the slash

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        try:
            font_size = min(48, max(6, int(request.query.get("fontsize", "16"))))
        except ValueError:
            font_size = 16
        html = self._templates.get_template("app_index.html").render(title=self.title, font_size=font_size)
        host = request.host
        csp = ("default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
               f"font-src 'self'; img-src 'self' data:; connect-src 'self' ws://{host} wss://{host}; "
               "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        return web.Response(text=html, content_type="text/html", headers={
            "Content-Security-Policy": csp, "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff"})

    async def handle_static(self, request: web.Request) -> web.StreamResponse:
        path = (STATIC_DIR / request.match_info["path"]).resolve()
        if not path.is_relative_to(STATIC_DIR) or not path.is_file():
            raise web.HTTPNotFound()
        return web.FileResponse(path, headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})

    # -- the session ------------------------------------------------------------------------------------------------
    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(heartbeat=HEARTBEAT_S)
        peer = request.remote
        if self.driver is not None or self.stop_reason:
            busy = self.driver is not None and (self.driver.ws.closed or self.driver.app_quit)
            why = self.stop_reason or (STILL_STOPPING if busy else SECOND_SESSION)
            await ws.prepare(request)
            await ws.send_bytes(_terminal_text(why))
            await ws.close(code=REFUSED_CODE, message=_close_reason(why))
            log.warning("refused a browser session from %s: %s", peer, why)
            return ws
        width = _int(request.query.get("width"), 80)
        height = _int(request.query.get("height"), 24)
        session = AppSession(self.app_argv, ws, cwd=self.cwd)
        self.driver = session  # taken before the first await: a second session is refused from here on
        self.sessions.add(session)
        try:
            await ws.prepare(request)
            await session.start(width, height)
            log.info("browser session from %s: the app runs as pid %d", peer, session.pid)
            await self._relay(ws, session)
        except Exception as exc:  # one line for the operator, never a traceback with the request in it
            log.warning("browser session from %s: %s: %s", peer, type(exc).__name__, redact(str(exc)))
        finally:
            try:
                await session.stop()
            finally:
                code = session.returncode
                how = "quit in the browser" if session.app_quit else "the browser went away"
                if self.stop_reason:
                    how = "serve-web is stopping"
                log.info("browser session from %s ended (%s); the app exited with code %s", peer, how, code)
                if session.stderr and (not session.started or code not in (0, 130)):
                    log.info("the app's stderr: %s", redact(session.stderr.decode("utf-8", "replace")).strip())
                self.sessions.discard(session)
                if self.driver is session:
                    self.driver = None
                await session.close_browser(self.stop_reason or "Session ended.")
        return ws

    async def _relay(self, ws: web.WebSocketResponse, session: AppSession) -> None:
        """The browser's messages to the app (textual-serve's protocol: stdin, resize, ping, blur, focus)."""
        async for message in ws:
            if message.type != WSMsgType.TEXT or not session.alive:
                continue
            try:
                envelope = json.loads(message.data)
                kind, data = envelope[0], (envelope[1] if len(envelope) > 1 else None)
            except (ValueError, TypeError, IndexError, KeyError):
                continue
            if kind == "stdin" and isinstance(data, str):
                await session.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                await session.set_terminal_size(_int(data.get("width"), 80), _int(data.get("height"), 24))
            elif kind == "ping":
                await ws.send_json(["pong", data])
            elif kind == "blur":
                await session.blur()
            elif kind == "focus":
                await session.focus()

    async def stop_sessions(self, reason: str) -> None:
        """serve-web is stopping: every app is stopped the way a terminal loss stops it, then its page is told."""
        self.stop_reason = reason
        sessions = list(self.sessions)
        for s in sessions:
            s.end_reason = reason
        await asyncio.gather(*(s.stop() for s in sessions), return_exceptions=True)
        await asyncio.gather(*(s.close_browser(reason) for s in sessions), return_exceptions=True)

    # -- serving ----------------------------------------------------------------------------------------------------
    async def serve(self, on_ready: Callable[[int], None]) -> str:
        """Bind, call on_ready(port), serve until SIGINT, SIGTERM or SIGHUP (not when SIGHUP is ignored, as under
        nohup), stop every session, and return the name of the signal. BindError when the address cannot be bound."""
        runner = web.AppRunner(self.make_app(), handle_signals=False, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise BindError(exc) from exc
        port = self.port
        for addr in runner.addresses:
            if isinstance(addr, tuple) and len(addr) >= 2:
                port = int(addr[1])
                break
        got: asyncio.Queue[str] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        handled = []
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if sig == signal.SIGHUP and signal.getsignal(sig) is signal.SIG_IGN:
                continue
            loop.add_signal_handler(sig, got.put_nowait, sig.name)
            handled.append(sig)
        try:
            on_ready(port)
            name = await got.get()
            log.info("%s: stopping every browser session's app and its servers", name)
            await self.stop_sessions("serve-web has stopped; the app and its servers are stopped.")
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)
            await runner.cleanup()
        return name


def _int(value: Any, default: int) -> int:
    try:
        return max(1, min(1000, int(value)))
    except (TypeError, ValueError):
        return default


class RedactingFilter(logging.Filter):
    """Every log record passes through tui.core.secrets.redact (the token is registered there)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        return True


__all__ = ["AppSession", "BindError", "WebServer", "RedactingFilter", "STATIC_DIR", "TEMPLATE_DIR", "HEARTBEAT_S",
           "STOP_DEADLINE_S", "REFUSED_CODE", "SECOND_SESSION"]
