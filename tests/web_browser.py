"""`python tests/web_browser.py CONFIG.json`: specdec-tui serve-web opened in Debian's headless chromium, driven over
the DevTools protocol (aiohttp's websocket client), run by tests/test_serve_web.py inside a network namespace with
only loopback (`unshare -n`). It collects, and the test asserts on, result.json in the config's "out" folder:

- the refusals: the page, a static file and the websocket without the token (or with a wrong one);
- tab A: the page loads, the font is the bundled one, the DOM has the terminal, the wizard's first screen
  arrives (its time after navigation start is the page-load-to-first-paint figure), a screenshot;
- tab B (while A drives): refused, the reason on its page;
- tab C: the address without the token, refused;
- keys typed in tab A ("a": run everything) run the demo to its result (report.json, the results screen),
  a screenshot; "q" quits the app from the page ("has quit" on the page, no process left under serve-web);
- SIGTERM stops serve-web; chromium's own net log of the whole session (every URL it asked for).

The screen A shows is read back by pyte from the bytes the page's websocket received (a listener the test adds
before the page's scripts run); the screenshots are chromium's own.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import aiohttp
import pyte

sys.path.insert(0, str(Path(__file__).resolve().parent))
from web_util import SAFETY_S, ServeWeb, json_file, refused_status, ws_refused_status  # noqa: E402

WIDTH, HEIGHT = 1280, 800

# Added before the page's own scripts: every binary frame the page's websocket receives, with its time
# (performance.now(), ms since the navigation started), and every close with its code and reason.
TAP = """(() => {
  const Native = window.WebSocket;
  window.__rx = []; window.__closes = [];
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (e) => {
        if (typeof e.data === "string") return;
        const b = new Uint8Array(e.data); let s = "";
        for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
        window.__rx.push([performance.now(), btoa(s)]);
      });
      this.addEventListener("open", () => { window.__opened = window.__opened || performance.now(); });
      this.addEventListener("close", (e) => window.__closes.push([e.code, e.reason]));
    }
  };
})();"""

STATE = """JSON.stringify({
  terminal: !!document.querySelector("#terminal .xterm-screen"),
  canvas: document.querySelectorAll("#terminal .xterm-screen canvas").length,
  connected: !!document.querySelector("#terminal.-connected"),
  firstByte: document.body ? document.body.classList.contains("-first-byte") : false,
  closed: document.body ? document.body.classList.contains("-closed") : false,
  message: (document.querySelector(".closed-dialog .message") || {}).textContent || "",
  font: document.body ? (document.body.dataset.font || "") : "",
  fontReady: document.fonts.check('16px "Roboto Mono"'),
  fontFaces: Array.from(document.fonts).map(f => f.family + ":" + f.status),
  closes: window.__closes || [],
  fcp: (performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime || null,
  opened: window.__opened || null,
  text: document.body ? document.body.innerText.slice(0, 400) : ""
})"""


class CDP:
    """A minimal DevTools-protocol client: calls (flattened sessions) and the events they raise."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws = ws
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future] = {}
        self.events: list[dict[str, Any]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            fut = self.waiting.pop(data.get("id", -1), None)
            if fut is not None and not fut.done():
                fut.set_result(data)
            elif "method" in data:
                self.events.append(data)
        for fut in self.waiting.values():  # the browser went away: nothing more will answer
            if not fut.done():
                fut.set_exception(ConnectionError("the browser closed its DevTools connection"))

    async def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = fut
        await self.ws.send_str(json.dumps(msg))
        data = await asyncio.wait_for(fut, SAFETY_S)
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return data.get("result", {})


class Tab:
    def __init__(self, cdp: CDP, session: str, target: str):
        self.cdp, self.session, self.target = cdp, session, target
        self.screen = pyte.Screen(400, 200)  # larger than any terminal the page fits; the app draws in its corner
        self.stream = pyte.ByteStream(self.screen)
        self.chunks: list[tuple[float, bytes]] = []

    @classmethod
    async def open(cls, cdp: CDP) -> "Tab":
        target = (await cdp.call("Target.createTarget", {"url": "about:blank"}))["targetId"]
        session = (await cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        tab = cls(cdp, session, target)
        for domain in ("Page.enable", "Runtime.enable", "Network.enable", "Log.enable"):
            await tab.call(domain)
        await tab.call("Page.addScriptToEvaluateOnNewDocument", {"source": TAP})
        await tab.call("Emulation.setFocusEmulationEnabled", {"enabled": True})
        return tab

    async def call(self, method: str, params: dict | None = None) -> dict:
        return await self.cdp.call(method, params, self.session)

    async def eval(self, expr: str) -> Any:
        res = await self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        return res.get("result", {}).get("value")

    async def state(self) -> dict[str, Any]:
        return json.loads(await self.eval(STATE) or "{}")

    async def pull(self) -> None:
        """The frames the page received since the last pull, into the pyte screen (sized as the page's terminal)."""
        raw = await self.eval("JSON.stringify((window.__rx || []).splice(0))")
        for t, b64 in json.loads(raw or "[]"):
            data = base64.b64decode(b64)
            self.chunks.append((t, data))
            self.stream.feed(data)

    def text(self) -> str:
        return "\n".join(self.screen.display)

    async def until(self, cond, timeout: float = SAFETY_S) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            await self.pull()
            if await cond():
                return True
            await asyncio.sleep(0.1)
        await self.pull()
        return bool(await cond())

    async def screenshot(self, path: Path) -> None:
        data = (await self.call("Page.captureScreenshot", {"format": "png"}))["data"]
        path.write_bytes(base64.b64decode(data))

    async def key(self, ch: str) -> None:
        """A key typed on the page: into the terminal's textarea, as a keyboard would."""
        await self.eval("document.querySelector('.xterm-helper-textarea').focus()")
        code = f"Key{ch.upper()}" if ch.isalpha() else ""
        vk = ord(ch.upper())
        await self.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": ch, "code": code, "text": ch,
                                                   "unmodifiedText": ch, "windowsVirtualKeyCode": vk})
        await self.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": ch, "code": code,
                                                   "windowsVirtualKeyCode": vk})


def browser_flags(flags: list[str]) -> list[str]:
    """tests/test_report_html.py's flags for a page on 127.0.0.1: its host-resolver rule (every name to nothing)
    leaves 127.0.0.1 alone, and autofill's server queries (which chromium makes for an http page) are off too."""
    out = []
    for f in flags:
        if f.startswith("--host-resolver-rules="):
            f = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
        elif f.startswith("--disable-features="):
            f += ",AutofillServerCommunication"
        out.append(f)
    return out


def log(msg: str) -> None:
    print(f"web_browser: {msg}", file=sys.stderr, flush=True)


def inked(png: Path) -> dict[str, float]:
    """How much of a screenshot is not the page's background colour, and how many colours it has."""
    from PIL import Image

    img = Image.open(png).convert("RGB")
    w, h = img.size
    pixels = img.load()
    counts: dict[tuple[int, int, int], int] = {}
    for y in range(0, h, 2):
        for x in range(0, w, 2):
            c = pixels[x, y]
            counts[c] = counts.get(c, 0) + 1
    total = sum(counts.values())
    background = max(counts, key=counts.get)
    return {"ink": 1 - counts[background] / total, "colours": len(counts), "width": w, "height": h}


async def drive(cfg: dict[str, Any]) -> dict[str, Any]:
    out = Path(cfg["out"])
    res: dict[str, Any] = {"namespace": cfg.get("namespace", False)}
    run_dir = Path(cfg["run_dir"])
    serve = ServeWeb(out, ["--profile", cfg["profile"], "--run-dir", str(run_dir), "--port", "0"])
    browser: subprocess.Popen | None = None
    try:
        url = serve.wait_url()
        port = serve.port
        res["port"] = port
        wrong = serve.token[:-4] + ("AAAA" if not serve.token.endswith("AAAA") else "BBBB")
        res["refused"] = {
            "root": await refused_status(serve.base + "/"),
            "wrong_token": await refused_status(f"{serve.base}/{wrong}/"),
            "static_without_token": await refused_status(serve.base + "/static/js/textual.js"),
            "ws_without_token": await ws_refused_status(f"ws://127.0.0.1:{port}/ws"),
            "ws_wrong_token": await ws_refused_status(f"ws://127.0.0.1:{port}/{wrong}/ws"),
            "page_with_token": await refused_status(url),
        }

        profile_dir = out / "chromium-profile"
        netlog = out / "netlog.json"
        flags = browser_flags(cfg["flags"])
        argv = [cfg["chromium"], *flags, f"--user-data-dir={profile_dir}", f"--log-net-log={netlog}",
                "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", f"--window-size={WIDTH},{HEIGHT}",
                "about:blank"]
        browser = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(out / "chromium.stderr", "wb"),
                                   env=dict(os.environ, HOME=str(out / "home")))
        active = profile_dir / "DevToolsActivePort"
        end = time.monotonic() + SAFETY_S
        while not (active.exists() and len(active.read_text().splitlines()) >= 2) and time.monotonic() < end:
            await asyncio.sleep(0.1)
        dport, dpath = active.read_text().splitlines()[:2]
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(f"ws://127.0.0.1:{dport}{dpath}", max_msg_size=0) as ws:
                cdp = CDP(ws)
                res.update(await browse(cdp, serve, url, run_dir, out))
                try:
                    await cdp.call("Browser.close")
                except Exception:
                    pass
        res["chromium_exit"] = browser.wait(SAFETY_S)
        res["netlog"] = netlog.read_text(encoding="utf-8", errors="replace") if netlog.exists() else ""
        # serve-web: ^C's sibling, SIGTERM
        serve.signal(signal.SIGTERM)
        res["serve_exit"] = serve.wait()
        res["left_after_stop"] = [p.pid for p in serve.alive_family()]
    finally:
        if browser is not None and browser.poll() is None:
            browser.kill()
            browser.wait()
        serve.close()
        res["stdout"] = serve.stdout
        res["stderr"] = serve.stderr
    return res


async def browse(cdp: CDP, serve: ServeWeb, url: str, run_dir: Path, out: Path) -> dict[str, Any]:
    res: dict[str, Any] = {}
    a = await Tab.open(cdp)
    await a.call("Page.navigate", {"url": url})

    async def wizard_shown() -> bool:
        return "Profile" in a.text() and "Results" in a.text() and "accept the profile" in a.text()

    res["wizard_shown"] = await a.until(wizard_shown)
    if not res["wizard_shown"]:
        res["state_a"] = await a.state()
        await a.screenshot(out / "wizard.png")
        return res
    res["terminal_px"] = json.loads(await a.eval(
        "JSON.stringify([document.querySelector('#terminal .xterm-screen').offsetWidth, "
        "document.querySelector('#terminal .xterm-screen').offsetHeight])") or "[0, 0]")
    first = None
    replay = pyte.Screen(400, 200)
    rstream = pyte.ByteStream(replay)
    for t, data in a.chunks:
        rstream.feed(data)
        text = "\n".join(replay.display)
        if "Profile" in text and "Results" in text and "accept the profile" in text:
            first = t
            break
    st = await a.state()
    log(f"wizard shown; first paint {first} ms")
    res["first_paint_ms"] = first  # navigation start -> the frame that completes the wizard's first screen
    res["fcp_ms"] = st.get("fcp")
    res["state_a"] = st
    res["screen_first"] = a.text()
    await asyncio.sleep(0.5)  # let the canvas paint the frame before the picture (a picture, not an assertion)
    await a.screenshot(out / "wizard.png")
    res["ink_first"] = inked(out / "wizard.png")

    # tab B while A drives: refused, with the reason on its page
    b = await Tab.open(cdp)
    await b.call("Page.navigate", {"url": url})

    async def b_closed() -> bool:
        return bool((await b.state()).get("closed"))

    await b.until(b_closed)
    res["state_b"] = await b.state()
    await b.screenshot(out / "second-session.png")
    await cdp.call("Target.closeTarget", {"targetId": b.target})

    # tab C: the address without the token
    c = await Tab.open(cdp)
    await c.call("Page.navigate", {"url": serve.base + "/"})  # the address without the token

    async def c_loaded() -> bool:
        return "refused" in ((await c.state()).get("text") or "")

    await c.until(c_loaded, 30)
    res["state_c"] = await c.state()
    # every response tab C got, by path: the page, and whatever the browser asks for by itself (its favicon)
    res["status_c"] = [[urllib.parse.urlsplit(e["params"]["response"]["url"]).path, e["params"]["response"]["status"]]
                       for e in cdp.events
                       if e.get("method") == "Network.responseReceived" and e.get("sessionId") == c.session]
    await cdp.call("Target.closeTarget", {"targetId": c.target})

    # keys from tab A run the demo to its result
    await a.call("Page.bringToFront")
    t0 = time.monotonic()
    await a.key("a")
    report = run_dir / "report.json"

    async def finished() -> bool:
        rep = json_file(report)
        return rep is not None and "speedup" in a.text().lower()

    res["finished"] = await a.until(finished, 300)
    log(f"demo finished: {res['finished']} ({time.monotonic() - t0:.1f} s)")
    res["run_s"] = round(time.monotonic() - t0, 1)
    res["report"] = json_file(report)
    res["screen_result"] = a.text()
    await asyncio.sleep(0.5)
    await a.screenshot(out / "result.png")
    res["ink_result"] = inked(out / "result.png")

    # quit from the page
    await a.key("q")

    async def a_closed() -> bool:
        return bool((await a.state()).get("closed"))

    res["quit_closed"] = await a.until(a_closed, 60)
    res["state_quit"] = await a.state()
    end = time.monotonic() + SAFETY_S
    while serve.alive_family() and time.monotonic() < end:
        await asyncio.sleep(0.1)
    res["left_after_quit"] = [p.pid for p in serve.alive_family()]
    res["serve_alive_after_quit"] = serve.proc.poll() is None
    res["console"] = [e["params"] for e in cdp.events if e.get("method") in ("Runtime.exceptionThrown",
                                                                            "Log.entryAdded")]
    res["requests"] = sorted({e["params"]["request"]["url"] for e in cdp.events
                              if e.get("method") == "Network.requestWillBeSent"})
    res["websockets"] = sorted({e["params"]["url"] for e in cdp.events
                                if e.get("method") == "Network.webSocketCreated"})
    return res


def main() -> int:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    res = asyncio.run(drive(cfg))
    (Path(cfg["out"]) / "result.json").write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
