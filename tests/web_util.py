"""Helpers for tests/test_serve_web.py and tests/web_browser.py: `specdec-tui serve-web` as a real process, a fast
demo profile, and a browser session spoken in textual-serve's websocket protocol (aiohttp) whose screen is
rendered by pyte. Waits poll with a deadline; no sleep is an assertion."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import aiohttp
import psutil
import pyte

from tui.core.profile.model import load_profile

REPO = Path(__file__).resolve().parents[1]
URL_RE = re.compile(r"^\s+(https?://\S+/([A-Za-z0-9_-]{20,})/)\s*$")
SERVING_RE = re.compile(r"^specdec-tui serve-web: serving .* on \S+:(\d+)")
SAFETY_S = 120.0  # a safety net for waits on a loaded 2-core machine; never a measured outcome


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def demo_profile(tmp: Path, name: str = "web-demo.toml", num_prompts: int = 4) -> Path:
    """The demo profile, fast (time scales 0.2, 4 prompts) on a free port, with its vLLM cache under tmp. A test
    that must catch the run still going when something happens to it (a lost tunnel, noticed only by the
    websocket's heartbeat) gives it more prompts."""
    prof = load_profile("demo").with_values({
        "simulation.time_scale": 0.2, "simulation.token_time_scale": 0.2, "benchmark.num_prompts": num_prompts,
        "server.port": free_port(), "server.env": {"VLLM_CACHE_ROOT": str(tmp / "vllm-cache")}})
    path = tmp / name
    path.write_text(prof.to_toml())
    return path


def wait_for(cond: Callable[[], object], timeout: float = SAFETY_S, every: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(every)
    return bool(cond())


class ServeWeb:
    """`python -m tui serve-web ARGS` in `cwd`; stdout and stderr are collected by threads."""

    def __init__(self, cwd: Path, args: list[str], env: dict[str, str] | None = None):
        self.env = dict(os.environ, HOME=str(cwd / "home"), XDG_CACHE_HOME=str(cwd / "home" / ".cache"),
                        PYTHONPATH=str(REPO), **(env or {}))
        self.env.pop("NO_COLOR", None)
        (cwd / "home").mkdir(exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-m", "tui", "serve-web", *args], cwd=cwd, env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out: list[str] = []
        self.err: list[str] = []
        self._threads = [threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True)]
        for t in self._threads:
            t.start()
        self.url = self.token = self.printed_url = ""
        self.port = 0
        self.family: set[psutil.Process] = set()  # every descendant ever seen (see `watch`)

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for raw in iter(stream.readline, b""):
            into.append(raw.decode("utf-8", "replace"))

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)

    def wait_url(self, timeout: float = SAFETY_S) -> str:
        """The URL on this machine (`printed_url`: as printed, e.g. with --public-url)."""
        def found() -> bool:
            lines = list(self.out)
            ports = [int(m.group(1)) for m in map(SERVING_RE.match, lines) if m]
            urls = [m for m in map(URL_RE.match, lines) if m]
            if ports and urls:
                self.port = ports[0]
                self.printed_url, self.token = urls[0].group(1), urls[0].group(2)
                self.url = f"http://127.0.0.1:{self.port}/{self.token}/"  # where this machine reaches it
                return True
            return self.proc.poll() is not None

        wait_for(found, timeout)
        assert self.url, f"serve-web printed no URL (exit {self.proc.poll()}):\n{self.stdout}\n{self.stderr}"
        return self.url

    @property
    def base(self) -> str:
        """http://127.0.0.1:PORT (no slash)."""
        return self.url[: -len(self.token) - 2]

    def descendants(self) -> list[psutil.Process]:
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            kids = []
        self.family.update(kids)
        return kids

    def alive_family(self) -> list[psutil.Process]:
        """Every descendant seen so far that still runs (a zombie does not count)."""
        self.descendants()
        out = []
        for p in self.family:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def signal(self, sig: int) -> None:
        self.descendants()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float = SAFETY_S) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        """Kill whatever is left (a failed test): serve-web and every descendant seen."""
        self.descendants()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        for p in self.family:
            try:
                p.kill()
            except psutil.Error:
                pass
        for t in self._threads:
            t.join(5)


class BrowserSession:
    """A browser session without a browser: textual-serve's protocol over aiohttp; pyte renders the screen."""

    def __init__(self, url: str, width: int = 100, height: int = 30):
        self.url = url
        self.width, self.height = width, height
        self.screen = pyte.Screen(width, height)
        self.stream = pyte.ByteStream(self.screen)
        self.close_code: int | None = None
        self.close_reason = ""
        self.texts: list[str] = []
        self._session: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task | None = None

    async def __aenter__(self) -> "BrowserSession":
        self._session = aiohttp.ClientSession()
        ws_url = "ws" + self.url[len("http"):] + f"ws?width={self.width}&height={self.height}"
        self.ws = await self._session.ws_connect(ws_url, autoping=True)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
        if self._session is not None:
            await self._session.close()

    async def _read(self) -> None:
        assert self.ws is not None
        while True:
            msg = await self.ws.receive()
            if msg.type == aiohttp.WSMsgType.BINARY:
                self.stream.feed(msg.data)
            elif msg.type == aiohttp.WSMsgType.TEXT:
                self.texts.append(msg.data)
            elif msg.type == aiohttp.WSMsgType.CLOSE:
                self.close_reason = msg.extra or ""
            elif msg.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.ERROR):
                break
        self.close_code = self.ws.close_code

    @property
    def text(self) -> str:
        return "\n".join(self.screen.display)

    @property
    def closed(self) -> bool:
        return self._reader is not None and self._reader.done()

    async def until(self, cond: Callable[[], object], timeout: float = SAFETY_S) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return True
            await asyncio.sleep(0.1)
        return bool(cond())

    async def keys(self, text: str) -> None:
        assert self.ws is not None
        await self.ws.send_str(json.dumps(["stdin", text]))

    async def close(self) -> None:
        """The tab goes away (the websocket closes)."""
        if self.ws is not None and not self.ws.closed:
            await self.ws.close()
        if self._reader is not None:
            await asyncio.wait_for(self._reader, SAFETY_S)


async def refused_status(url: str) -> int:
    async with aiohttp.ClientSession() as s:
        async with s.get(url, allow_redirects=False) as r:
            return r.status


async def ws_refused_status(url: str) -> int | None:
    """The HTTP status of a websocket handshake to `url` (None when it was accepted)."""
    async with aiohttp.ClientSession() as s:
        try:
            ws = await s.ws_connect(url)
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status
        await ws.close()
        return None


def json_file(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class Relay:
    """A TCP relay on 127.0.0.1 standing in for an SSH tunnel: `freeze()` stops it forwarding in both directions
    without closing anything, as a tunnel does when the laptop's network goes away (no FIN, no RST)."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._pumps: set[asyncio.Task] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> "Relay":
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers += [writer, up_writer]
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pump(src, dst))
            self._pumps.add(task)

    @staticmethod
    async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()

    def freeze(self) -> None:
        for task in self._pumps:
            task.cancel()

    async def close(self) -> None:
        self.freeze()
        for w in self._writers:
            w.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
