"""`specdec-tui serve-web` (tui/web/): the wizard in a browser through textual-serve.

Real processes throughout: serve-web runs as `python -m tui serve-web` with the demo profile (the simulator as
its servers), browser sessions speak textual-serve's websocket protocol (tests/web_util.py: aiohttp, the screen
rendered by pyte), and the last test opens the page in Debian's headless chromium inside a network namespace
with only loopback (tests/web_browser.py, driven over the DevTools protocol). Processes are checked with psutil;
waits poll with a deadline (tests/web_util.py: SAFETY_S), and no sleep is an assertion.

Chromium: as in tests/test_report_html.py, a missing chromium fails the browser test under CI (CI=true or
SPECDEC_REQUIRE_CHROMIUM=1) and skips it elsewhere; SPECDEC_CHROMIUM names another binary.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tui.cli import main
from tui.web import cli as web_cli
from tui.web import server as web_server

from test_report_html import BROWSER_FLAGS, SINK, need_chromium, network_requests
from web_util import (REPO, SAFETY_S, BrowserSession, Relay, ServeWeb, demo_profile, json_file, refused_status,
                      wait_for, ws_refused_status)

EXTERNAL = re.compile(r"(?:https?|wss?)://", re.I)


def _in_ci() -> bool:
    return (os.environ.get("CI", "").lower() in ("true", "1", "yes")
            or os.environ.get("SPECDEC_REQUIRE_CHROMIUM", "") not in ("", "0"))


# -- the command line: refused before anything is bound ---------------------------------------------------------

@pytest.mark.parametrize("argv, says", [
    (["--host", "0.0.0.0"], ["0.0.0.0 is not a loopback address", "--allow-remote", "ssh -N -L"]),
    (["--host", "10.1.2.3", "--port", "9999"], ["10.1.2.3 is not a loopback address", "9999:127.0.0.1:9999"]),
    (["--port", "70000"], ["--port 70000 is not a port"]),
    (["--port", "many"], ["invalid int value", "serve-web --help"]),
    (["--public-url", "ftp://x/"], ["--public-url 'ftp://x/' is not an http:// or https:// URL"]),
    (["--public-url", "http://localhost:9000/?a=1"], ["has a query or a fragment"]),
    (["--profile", "no-such-profile"], ["no-such-profile"]),
    (["--demo", "--profile", "cpu"], ["--demo means --profile demo"]),
    (["--open", "somewhere", "--demo"], ["--open browses a finished run; it cannot be combined with --demo"]),
    (["--open", "no-such-run"], ["--open", "no such directory"]),
    (["--demo", "--steps", ","], ["--steps is empty"]),
    (["--demo", "--steps", "env,bogus"], ["'bogus'"]),
    (["--bogus"], ["unrecognized arguments: --bogus"]),
])
def test_bad_options_are_one_paragraph_and_exit_2(argv, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["serve-web", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("specdec-tui serve-web: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for s in says:
        assert s in err, err


def test_a_run_dir_that_is_a_file_is_refused(tmp_path, capsys):
    f = tmp_path / "a-file"
    f.write_text("x")
    assert main(["serve-web", "--demo", "--run-dir", str(f)]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                             ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                             ("::", False), ("10.0.0.1", False), ("192.168.1.5", False)])
def test_is_loopback(host, loopback):
    assert web_cli.is_loopback(host) is loopback


def test_wizard_options_pass_through_as_an_argv(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = web_cli.build_serve_web_parser().parse_args(
        ["--demo", "--steps", "env", "--run-dir", "runs/it's a \"dir\" $(x)", "--port", "0"])
    assert web_cli.wizard_argv(args) == ["--demo", "--steps", "env", "--run-dir",
                                         str(tmp_path / "runs" / "it's a \"dir\" $(x)")]
    args = web_cli.build_serve_web_parser().parse_args(["--open", "r"])
    assert web_cli.wizard_argv(args) == ["--open", str(tmp_path / "r")]


def test_close_reasons_fit_a_websocket_close_frame():
    for text in (web_server.SECOND_SESSION, web_server.STILL_STOPPING):
        assert len(text.encode()) <= 123
    long = "é" * 100
    assert len(web_server._close_reason(long)) <= 123


def test_without_the_web_extra_one_paragraph_names_it(tmp_path):
    code = ("import sys; sys.modules['textual_serve'] = None; from tui.cli import main; "
            "sys.exit(main(['serve-web', '--demo', '--port', '0']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=SAFETY_S,
                         cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    err = out.stderr
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "pip install 'specdec-tui[web]'" in err and "textual-serve 1.1.3" in err and "textual_serve" in err


def test_serve_web_does_not_import_textual():
    """serve-web itself is a small aiohttp process; Textual runs in each session's app."""
    code = "import sys, tui.web.server, tui.web.cli; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=SAFETY_S)
    assert out.stdout.strip() == "False", out.stderr


# -- the server: token, page, files --------------------------------------------------------------------------------

def test_token_guards_every_url_and_the_page_loads_nothing_from_outside(tmp_path):
    serve = ServeWeb(tmp_path, ["--demo", "--port", "0", "--public-url", "http://localhost:9000/"])
    try:
        serve.wait_url()
        port = serve.port
        # printed: the public URL with the token, the tunnel line for its local port
        assert serve.printed_url == f"http://localhost:9000/{serve.token}/"
        assert f"ssh -N -L 9000:127.0.0.1:{port} " in serve.stdout
        local = f"http://127.0.0.1:{port}/{serve.token}/"
        wrong = "A" * len(serve.token)

        async def check() -> dict:
            import aiohttp

            got = {
                "root": await refused_status(f"http://127.0.0.1:{port}/"),
                "wrong": await refused_status(f"http://127.0.0.1:{port}/{wrong}/"),
                "prefix": await refused_status(f"http://127.0.0.1:{port}/{serve.token[:-1]}/"),
                "static_no_token": await refused_status(f"http://127.0.0.1:{port}/static/js/textual.js"),
                "static_wrong": await refused_status(f"http://127.0.0.1:{port}/{wrong}/static/js/textual.js"),
                "traversal": await refused_status(f"{local}static/%2e%2e/server.py"),
                "ws_no_token": await ws_refused_status(f"ws://127.0.0.1:{port}/ws"),
                "ws_wrong": await ws_refused_status(f"ws://127.0.0.1:{port}/{wrong}/ws"),
            }
            async with aiohttp.ClientSession() as s:
                async with s.get(local) as r:
                    got["page"] = (r.status, await r.text(), dict(r.headers))
                async with s.get(local.rstrip("/"), allow_redirects=False) as r:
                    got["bare"] = (r.status, r.headers.get("Location"))
                for f in ("js/textual.js", "css/xterm.css", "fonts/RobotoMono-VariableFont_wght.ttf"):
                    async with s.get(f"{local}static/{f}") as r:
                        got[f] = (r.status, len(await r.read()))
            return got

        got = asyncio.run(check())
        for key in ("root", "wrong", "prefix", "static_no_token", "static_wrong", "ws_no_token", "ws_wrong"):
            assert got[key] == 403, (key, got[key])
        assert got["traversal"] in (403, 404)
        status, html, headers = got["page"]
        assert status == 200
        assert got["bare"] == (302, f"{serve.token}/")
        for f in ("js/textual.js", "css/xterm.css", "fonts/RobotoMono-VariableFont_wght.ttf"):
            assert got[f][0] == 200 and got[f][1] > 1000
        # the page names no other host: every URL in it is relative, the font is the bundled one
        assert not EXTERNAL.search(html), EXTERNAL.findall(html)
        assert "googleapis" not in html and 'src: url("static/fonts/RobotoMono-VariableFont_wght.ttf")' in html
        csp = headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and f"connect-src 'self' ws://127.0.0.1:{port}" in csp
        assert headers["Referrer-Policy"] == "no-referrer"
        serve.signal(signal.SIGTERM)
        assert serve.wait() == 0
    finally:
        serve.close()
    # the token: on stdout once (the URL), in no log line
    assert serve.stdout.count(serve.token) == 1
    assert serve.token not in serve.stderr
    assert serve.stderr.count("refused GET from 127.0.0.1: no valid token") >= 5


def test_allow_remote_binds_every_address_with_a_warning(tmp_path):
    """Run inside a loopback-only network namespace, so 0.0.0.0 is reachable from this machine only."""
    prefix = _loopback_namespace()
    if prefix is None:
        pytest.skip("unshare -n is not available (root only): 0.0.0.0 is not bound on the host network here")
    code = ("import subprocess, sys, time, signal\n"
            "p = subprocess.Popen([sys.executable, '-m', 'tui', 'serve-web', '--demo', '--host', '0.0.0.0', "
            "'--allow-remote', '--port', '0'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)\n"
            "line = ''\n"
            "while 'then open' not in line and p.poll() is None: line = p.stdout.readline()\n"
            "url = p.stdout.readline()\n"
            "p.send_signal(signal.SIGTERM)\n"
            "out, err = p.communicate(timeout=120)\n"
            "print(url.strip()); print(err, file=sys.stderr); sys.exit(p.returncode)\n")
    out = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=SAFETY_S * 2,
                         cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 0, out.stderr
    assert "warning: listening on 0.0.0.0:" in out.stderr and "not loopback (--allow-remote)" in out.stderr
    assert re.match(r"http://\S+:\d+/[A-Za-z0-9_-]{20,}/$", out.stdout.strip()), out.stdout


def test_a_busy_port_is_one_paragraph(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "tui", "serve-web", "--demo", "--port", str(port)],
                             capture_output=True, text=True, timeout=SAFETY_S, cwd=tmp_path,
                             env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "--port 0" in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


# -- sessions: one driver, and the app's lifecycle ----------------------------------------------------------------

def _report(run_dir: Path, serve: ServeWeb) -> dict:
    rep = json_file(run_dir / "report.json")
    assert rep is not None, f"no report.json in {run_dir}: {sorted(p.name for p in run_dir.iterdir())}\n{serve.stderr}"
    return rep


def _cmdline(p) -> str:
    try:
        return " ".join(p.cmdline())
    except Exception:  # psutil.Error: it has gone
        return ""


def _server_running(run_dir: Path) -> bool:
    log = run_dir / "baseline.serve.log"
    return log.exists() and "Compil" in log.read_text(errors="replace")


def _first_screen(b: BrowserSession) -> bool:
    return "Profile" in b.text and "accept the profile" in b.text


def test_tab_closed_is_a_terminal_loss_and_one_session_drives(tmp_path):
    """A second session is refused while one drives; closing the driving tab mid-launch stops the app as a lost
    terminal does (servers stopped, report written, exit 130); serve-web goes on and takes the next session. The
    run directory has a space, quotes and $(...) in its name: no shell ever sees it."""
    run_dir = tmp_path / "runs" / "it's a \"dir\" $(touch pwned)"
    serve = ServeWeb(tmp_path, ["--profile", str(demo_profile(tmp_path)), "--run-dir", str(run_dir), "--port", "0"])
    try:
        url = serve.wait_url()

        async def scenario() -> dict:
            res: dict = {}
            async with BrowserSession(url) as one:
                assert await one.until(lambda: _first_screen(one)), one.text
                async with BrowserSession(url) as two:
                    assert await two.until(lambda: two.closed)
                    res["second"] = (two.close_code, two.close_reason, two.text)
                await one.keys("a")  # run everything
                assert await one.until(lambda: _server_running(run_dir)), one.text
                res["family"] = serve.descendants()
                res["app"] = [p for p in res["family"] if "tui.web.child" in _cmdline(p)]
                # the tab goes away
            res["gone"] = await asyncio.to_thread(wait_for, lambda: not serve.alive_family())
            # once serve-web says the session ended, the next one is taken
            await asyncio.to_thread(wait_for, lambda: "ended (the browser went away)" in serve.stderr)
            async with BrowserSession(url) as three:
                res["third"] = await three.until(lambda: _first_screen(three) or three.closed)
                res["third_text"] = three.text
            res["gone_again"] = await asyncio.to_thread(wait_for, lambda: not serve.alive_family())
            return res

        res = asyncio.run(scenario())
        code, reason, text = res["second"]
        assert code == web_server.REFUSED_CODE and reason == web_server.SECOND_SESSION
        assert "this one is refused" in text
        assert len(res["app"]) == 1 and len(res["family"]) > 2, res["family"]  # the app, a server, its helpers
        assert res["gone"], f"left behind: {serve.alive_family()}"
        rep = _report(run_dir, serve)
        state = json.loads((run_dir / "state.json").read_text())
        assert rep["exit_code"] == 130 and state["steps"]["baseline"]["status"] == "interrupted"
        assert res["third"] and "Profile" in res["third_text"], res["third_text"]
        assert res["gone_again"]
        assert serve.proc.poll() is None, "serve-web stopped with a session"
        assert not (tmp_path / "pwned").exists() and not (run_dir.parent / "pwned").exists()
        serve.signal(signal.SIGTERM)
        assert serve.wait() == 0
    finally:
        serve.close()
    assert "ended (the browser went away); the app exited with code 130" in serve.stderr
    assert "refused a browser session from 127.0.0.1: Another browser session" in serve.stderr
    for f in run_dir.rglob("*"):
        if f.is_file():
            assert serve.token not in f.read_text(errors="replace"), f
    assert serve.token not in serve.stderr


def test_quit_in_the_browser_stops_every_server(tmp_path):
    run_dir = tmp_path / "run"
    serve = ServeWeb(tmp_path, ["--profile", str(demo_profile(tmp_path)), "--run-dir", str(run_dir), "--port", "0"])
    try:
        url = serve.wait_url()

        async def scenario() -> dict:
            res: dict = {}
            async with BrowserSession(url) as b:
                assert await b.until(lambda: _first_screen(b)), b.text
                await b.keys("a")
                assert await b.until(lambda: _server_running(run_dir)), b.text
                res["family"] = serve.descendants()
                await b.keys("q")  # a server runs: the app asks first
                assert await b.until(lambda: "Quit specdec-tui?" in b.text), b.text
                await b.keys("y")
                res["closed"] = await b.until(lambda: b.closed)
                res["reason"] = b.close_reason
            res["gone"] = await asyncio.to_thread(wait_for, lambda: not serve.alive_family())
            return res

        res = asyncio.run(scenario())
        assert res["closed"] and res["reason"].startswith("specdec-tui has quit")
        assert len(res["family"]) > 2 and res["gone"], serve.alive_family()
        assert _report(run_dir, serve)["exit_code"] == 130
        assert serve.proc.poll() is None  # serve-web goes on: Restart opens the wizard again
        serve.signal(signal.SIGINT)  # ^C
        assert serve.wait() == 0
    finally:
        serve.close()
    assert "ended (quit in the browser); the app exited with code 130" in serve.stderr

    # --open passes through: the finished run, browsed read-only in the browser
    browse = ServeWeb(tmp_path, ["--open", str(run_dir), "--port", "0"])
    try:
        url = browse.wait_url()

        async def opened() -> str:
            async with BrowserSession(url) as b:
                await b.until(lambda: "Opened read-only" in b.text)
                return b.text

        text = asyncio.run(opened())
        assert "Opened read-only" in text and "Baseline server" in text, text
        assert not list(tmp_path.glob("specdec-runs")), "browsing a run started one"
        browse.signal(signal.SIGTERM)
        assert browse.wait() == 0
    finally:
        browse.close()


def test_a_lost_tunnel_is_a_terminal_loss(tmp_path):
    """The tunnel stops forwarding without closing (the laptop's network went away): the websocket's heartbeat
    notices, and the app stops its servers, writes its report and exits, as after a lost terminal. The benchmark
    is long enough to be still running when the heartbeat notices (about 22 s), so the run is interrupted."""
    run_dir = tmp_path / "run"
    serve = ServeWeb(tmp_path, ["--profile", str(demo_profile(tmp_path, num_prompts=2000)), "--run-dir", str(run_dir), "--port", "0"])
    try:
        serve.wait_url()

        async def scenario() -> dict:
            relay = await Relay(serve.port).start()
            try:
                async with BrowserSession(f"http://127.0.0.1:{relay.port}/{serve.token}/") as b:
                    assert await b.until(lambda: _first_screen(b)), b.text
                    await b.keys("a")
                    assert await b.until(lambda: _server_running(run_dir)), b.text
                    family = serve.descendants()
                    relay.freeze()
                    # the heartbeat (HEARTBEAT_S, then half of it for the pong) and the app's own stop
                    gone = await asyncio.to_thread(wait_for, lambda: not serve.alive_family(),
                                                   SAFETY_S + 2 * web_server.HEARTBEAT_S)
                    await relay.close()
                return {"family": family, "gone": gone}
            finally:
                await relay.close()

        res = asyncio.run(scenario())
        assert len(res["family"]) > 2 and res["gone"], serve.alive_family()
        assert _report(run_dir, serve)["exit_code"] == 130
        assert serve.proc.poll() is None
        serve.signal(signal.SIGTERM)
        assert serve.wait() == 0
    finally:
        serve.close()
    assert "ended (the browser went away); the app exited with code 130" in serve.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_serve_web_stopped_or_killed_leaves_no_process(tmp_path, sig):
    """SIGTERM: serve-web stops the app the terminal-loss way and exits 0. SIGKILL: the app hangs up with it
    (PR_SET_PDEATHSIG) and stops its servers itself. Either way the report is written and nothing is left."""
    run_dir = tmp_path / "run"
    serve = ServeWeb(tmp_path, ["--profile", str(demo_profile(tmp_path)), "--run-dir", str(run_dir), "--port", "0"])
    try:
        url = serve.wait_url()

        async def scenario() -> list:
            async with BrowserSession(url) as b:
                assert await b.until(lambda: _first_screen(b)), b.text
                await b.keys("a")
                assert await b.until(lambda: _server_running(run_dir)), b.text
                family = serve.descendants()
                serve.signal(sig)
                if sig == signal.SIGTERM:
                    assert await b.until(lambda: b.closed)
                    assert b.close_reason.startswith("serve-web has stopped")
                return family

        family = asyncio.run(scenario())
        code = serve.wait()
        assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
        assert len(family) > 2
        assert wait_for(lambda: not serve.alive_family()), f"left behind: {serve.alive_family()}"
        assert wait_for(lambda: (json_file(run_dir / "report.json") or {}).get("exit_code") == 130)
        state = json.loads((run_dir / "state.json").read_text())
        assert state["steps"]["baseline"]["status"] == "interrupted"
    finally:
        serve.close()


# -- the page in a real browser, offline ---------------------------------------------------------------------------

def _loopback_namespace() -> list[str] | None:
    """The prefix that runs a command in a new network namespace with only `lo` up (root), or None."""
    try:
        ok = subprocess.run(["unshare", "-n", "--", "sh", "-c", "ip link set lo up"], capture_output=True,
                            timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return ["unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "_"] if ok else None


def test_the_wizard_in_headless_chromium_offline(tmp_path):
    exe = need_chromium()
    prefix = _loopback_namespace()
    if prefix is None and _in_ci():
        pytest.fail("unshare -n is not available under CI: the browser test must run in a loopback-only namespace")
    out = tmp_path / "browser"
    out.mkdir()
    cfg = {"out": str(out), "run_dir": str(out / "run"), "profile": str(demo_profile(out)), "chromium": exe,
           "flags": BROWSER_FLAGS, "namespace": prefix is not None}
    (out / "cfg.json").write_text(json.dumps(cfg))
    proc = subprocess.run([*(prefix or []), sys.executable, str(REPO / "tests" / "web_browser.py"),
                           str(out / "cfg.json")], capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads((out / "result.json").read_text())
    port = res["port"]
    print(f"serve-web in chromium: first paint of the wizard {res.get('first_paint_ms')} ms after navigation "
          f"(websocket open at {res.get('state_a', {}).get('opened')} ms, first contentful paint "
          f"{res.get('fcp_ms')} ms); demo run {res.get('run_s')} s; namespace {res['namespace']}")

    # refused without the token: the page, a file, the websocket (and a wrong token)
    assert res["refused"] == {"root": 403, "wrong_token": 403, "static_without_token": 403,
                              "ws_without_token": 403, "ws_wrong_token": 403, "page_with_token": 200}
    # the wizard renders: the terminal in the DOM, its first screen, the bundled font, a screenshot with ink
    assert res["wizard_shown"], res.get("state_a")
    a = res["state_a"]
    assert a["terminal"] and a["canvas"] >= 1 and a["connected"] and a["firstByte"]
    assert a["font"] == "loaded" and a["fontReady"] and "Roboto Mono:loaded" in a["fontFaces"]
    assert "Environment" in res["screen_first"] and "Baseline server" in res["screen_first"]
    assert res["first_paint_ms"] is not None
    assert res["ink_first"]["ink"] > 0.05 and res["ink_first"]["colours"] > 16, res["ink_first"]
    # a second tab is refused, and says why
    b = res["state_b"]
    assert b["closed"] and b["message"] == web_server.SECOND_SESSION
    assert [web_server.REFUSED_CODE, web_server.SECOND_SESSION] in b["closes"]
    # the address without the token: 403 and the refusal
    # the page is refused, and so is anything else the tab asked for (Chromium's own /favicon.ico, when it asks)
    assert res["status_c"][0] == ["/", 403] and "refused" in res["state_c"]["text"]
    assert all(status == 403 for _, status in res["status_c"]), res["status_c"]
    assert {path for path, _ in res["status_c"]} <= {"/", "/favicon.ico"}, res["status_c"]
    # keys from the page ran the demo to its result
    assert res["finished"], res["screen_result"]
    assert res["report"]["exit_code"] == 0
    assert "speedup" in res["screen_result"] and "Results" in res["screen_result"]
    assert res["ink_result"]["ink"] > 0.05
    # quitting in the page: the app quits, nothing is left under serve-web, serve-web goes on until SIGTERM
    assert res["quit_closed"] and res["state_quit"]["message"].startswith("specdec-tui has quit")
    assert res["left_after_quit"] == [] and res["serve_alive_after_quit"]
    assert res["serve_exit"] == 0 and res["left_after_stop"] == []
    # the network: chromium's own log holds no URL outside this server (its service calls go to SINK)
    assert res["netlog"], "chromium wrote no net log"
    urls = network_requests(res["netlog"])
    ours = (f"http://127.0.0.1:{port}/", f"ws://127.0.0.1:{port}/")
    assert urls and all(u.startswith(ours) for u in urls), [u for u in urls if not u.startswith(ours)]
    assert any(u.startswith(f"ws://127.0.0.1:{port}/") for u in urls)
    assert all(u.startswith(ours) for u in res["requests"] + res["websockets"])
    # nothing the page does breaks its Content-Security-Policy, and no script failed
    problems = [json.dumps(c)[:300] for c in res["console"]
                if "Content Security Policy" in json.dumps(c) or "exceptionDetails" in c]
    assert problems == []
    # the token stayed out of the logs
    token = res["stdout"].split(f"http://127.0.0.1:{port}/", 1)[1].split("/", 1)[0]
    assert res["stdout"].count(token) == 1 and token not in res["stderr"]
    assert SINK not in json.dumps(res["requests"])
