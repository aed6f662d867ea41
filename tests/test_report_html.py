"""report.html and the chart files (tui/core/results/figures.py): which charts a report gets, deterministic
PNG/SVG files, a self-contained page, and the page opened in a real headless browser (Debian's chromium) with
no network: every chart's <svg> is in the DOM with drawn paths, every chart's region of the screenshot is not
blank, and the browser's net log holds no http/https/ws request.

The report is realistic: its matrix is built by tui.core.results.stats.build_matrix from synthetic repeat facts
(a concurrency sweep: bench keys "sonnet@c1" … "sonnet@c8"); its "load" section is written here in the
contract's shape from that matrix's cells; its time series are /metrics windows in the contract's shape.

Chromium: under CI (CI=true, or SPECDEC_REQUIRE_CHROMIUM=1 as .ci/run sets it) a missing chromium FAILS the
browser tests (.ci/run installs it); elsewhere they are skipped with the reason. SPECDEC_CHROMIUM names another
binary."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tui.core.plan.arms import level_key
from tui.core.results import figures as F
from tui.core.results import figures_draw as D
from tui.core.results import report_html as H
from tui.core.results.statement import statement
from tui.core.results.stats import build_matrix

from bad_inputs_util import jail_available, run_cli, snapshot
from tune_reports import arm, bench, facts, two_arm_report

REPO = Path(__file__).resolve().parents[1]
LEVELS = [1, 2, 4, 8]
KEYS = [level_key("sonnet", n) for n in LEVELS]
ARMS = [arm("baseline", "baseline"), arm("eagle3-k1", k=1), arm("eagle3-k2", k=2), arm("eagle3-k3", k=3)]
BASE_TPUT = {1: 110.0, 2: 205.0, 4: 380.0, 8: 690.0}
SPEEDUP = {1: {1: 1.34, 2: 1.22, 4: 1.04, 8: 0.86}, 2: {1: 1.46, 2: 1.21, 4: 0.97, 8: 0.76},
           3: {1: 1.31, 2: 1.06, 4: 0.86, 8: 0.66}}
PER_POS = {1: [71.0], 2: [71.0, 46.0], 3: [71.0, 46.0, 29.0]}
NOISE = (0.99, 1.0, 1.01)
DRIFTING = ("eagle3-k1", 4)  # acceptance falls during this arm's bench at this level


def sweep_matrix() -> dict[str, Any]:
    af = {}
    for a in ARMS:
        k = a["num_speculative_tokens"]
        reps = {}
        for n, key in zip(LEVELS, KEYS):
            if k is None:
                reps[key] = [dict(bench(BASE_TPUT[n] * f, tpot=9.0 + n), seed=r, concurrency=n)
                             for r, f in enumerate(NOISE)]
            else:
                pp = PER_POS[k]
                acc = sum(pp) / k
                reps[key] = [dict(bench(BASE_TPUT[n] * SPEEDUP[k][n] * f, tpot=7.0 + n, acc=acc, per_pos=pp, k=k),
                                  seed=r, concurrency=n) for r, f in enumerate(NOISE)]
        af[a["id"]] = facts(reps)
    return build_matrix(ARMS, af, KEYS)


def _verdict(sp: dict[str, Any] | None) -> str | None:
    if not sp or not sp.get("ci95"):
        return None if not sp else "not_proven"
    lo, hi = sp["ci95"]
    return "pays" if lo > 1 else "loses" if hi < 1 else "not_proven"


def load_section(matrix: dict[str, Any]) -> dict[str, Any]:
    """report["load"] in the contract's shape, its numbers taken from the matrix's cells."""
    arms: dict[str, Any] = {}
    for a in matrix["arms"]:
        k = a["num_speculative_tokens"]
        levels = {}
        for n, key in zip(LEVELS, KEYS):
            c = matrix["cells"][a["id"]][key]
            pp = c.get("per_position") or {}
            levels[str(n)] = {
                "key": key, "repeats": c["repeats"],
                "throughput": {"mean": c["output_throughput"]["mean"], "ci95": c["output_throughput"]["ci95"]},
                "speedup": c["speedup"], "verdict": _verdict(c["speedup"]) if k else None,
                "median_ttft_ms": c["median_ttft_ms"], "p90_ttft_ms": c["p90_ttft_ms"], "p99_ttft_ms": c["p99_ttft_ms"],
                "median_tpot_ms": c["median_tpot_ms"], "p90_tpot_ms": c["p90_tpot_ms"], "p99_tpot_ms": c["p99_tpot_ms"],
                "acceptance_rate": c["acceptance_rate"], "acceptance_length": c["acceptance_length"],
                "per_position": pp.get("marginal"), "goodput": None, "meets_slo": None}
        if k is None:
            arms[a["id"]] = {"label": "baseline", "k": None, "levels": levels, "sustains_slo_up_to": None}
            continue
        st = statement([(n, levels[str(n)]["verdict"]) for n in LEVELS], f"k = {k}")
        arms[a["id"]] = {"label": f"k = {k}", "k": k, "levels": levels, **st["levels"], "statement": st,
                         "range_text": st["range_text"], "sustains_slo_up_to": None}
    drift = {"eagle3-k1": {"4": {"first": 71.2, "last": 63.0, "diff": -8.2, "ci95": [-12.1, -4.3], "p_value": 0.001,
                                 "drift": True, "windows": 30,
                                 "text": "acceptance fell from 71.2 % to 63.0 % (first vs last third)"},
                           "2": {"first": 71.0, "last": 70.6, "diff": -0.4, "ci95": [-2.0, 1.2], "p_value": 0.6,
                                 "drift": False, "windows": 30, "text": "no drift"}}}
    return {
        "levels": LEVELS, "slo": None,
        "workloads": {"sonnet": {
            "arms": arms,
            "best": {"1": {"arm": "eagle3-k2", "k": 2, "verdict": "pays", "text": "k = 2 pays most at 1"},
                     "2": {"arm": "eagle3-k1", "k": 1, "verdict": "pays", "text": "k = 1 at 2"},
                     "4": {"arm": None, "k": None, "verdict": "not_proven", "text": "not proven at 4"},
                     "8": {"arm": "baseline", "k": 0, "verdict": "keep_baseline", "text": "keep the baseline at 8"}},
            "schedule": [[1, 1, 2], [2, 2, 1], [3, 8, 0]],
            "schedule_text": "k=2 at 1 concurrent request, k=1 at 2, no speculation from 3",
            "slo_text": None,
            "model": {"alpha": 0.66, "alpha_source": "fitted to per-position marginals (a_i = α^i)", "cost": {},
                      "rows": [], "untried": [],
                      "why": {"1": "k=2 adds 0.46 accepted tokens per step and costs 9 % more per step than k=1"},
                      "note": "vLLM's acceptance rate is accepted/draft tokens = (AL − 1)/k, not the paper's α"},
            "drift": drift}},
        "schedule_verification": None, "schedule_profile": None,
        "coverage": "Intervals are 95 % Student-t intervals over 3 repeats with seeds 0, 1, 2.",
    }


def windows(tput: float, acc: float | None, k: int | None, n: int = 20, fall: float = 0.0) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        gen = round(tput * (1.0 + 0.03 * ((i * 7) % 5 - 2) / 2))
        w: dict[str, Any] = {"t0": float(i), "t1": float(i + 1), "generation_tokens": gen,
                             "num_drafts": None, "draft_tokens": None, "accepted_tokens": None, "per_position": None}
        if acc is not None and k:
            a = acc - fall * i / (n - 1)
            drafts = round(gen / (1 + a / 100 * k))
            w.update(num_drafts=drafts, draft_tokens=drafts * k, accepted_tokens=round(drafts * k * a / 100),
                     per_position=[float(a)] * k)
        out.append(w)
    return out


def timeseries(matrix: dict[str, Any]) -> dict[str, Any]:
    ts: dict[str, Any] = {}
    for a in matrix["arms"]:
        k = a["num_speculative_tokens"]
        ts[a["id"]] = {}
        for n, key in zip(LEVELS, KEYS):
            tput = matrix["cells"][a["id"]][key]["output_throughput"]["mean"]
            acc = sum(PER_POS[k]) / k if k else None
            fall = 10.0 if (a["id"], n) == DRIFTING else 0.0
            ts[a["id"]][key] = [{"repeat": r, "windows": windows(tput, acc, k, fall=fall)} for r in (1, 2)]
    return ts


def sweep_report() -> dict[str, Any]:
    m = sweep_matrix()
    texts = [f"{w}: {r['text']}" for w, r in m["recommendation"].items()]
    return {"schema": "specdec-tui/report/1", "profile": "tune-load-demo", "simulated": True, "exit_code": 0,
            "generated": "2025-01-01T00:00:00+0000",
            "verdict": {"ok": True, "text": "Recommendation — " + "; ".join(texts)},
            "models": {"target": "openai/gpt-oss-120b", "draft": "RedHatAI/gpt-oss-120b-speculator.eagle3"},
            "settings": {"num_speculative_tokens": 3}, "runs": {}, "comparison": {},
            "matrix": m, "load": load_section(m), "timeseries": timeseries(m)}


ALL = ["throughput_vs_k", "speedup_vs_concurrency", "per_position_acceptance", "acceptance_over_time"]


# -- which charts, from which numbers ----------------------------------------------------------------------------

def test_a_sweep_gets_every_chart_from_its_numbers():
    rep = sweep_report()
    charts = {c["name"]: c for c in F.chart_data(rep)}
    assert list(charts) == ALL
    tk = charts["throughput_vs_k"]
    (s,) = tk["series"]  # one workload, drawn at its lowest level
    assert s["key"] == "sonnet@c1" and [p["k"] for p in s["points"]] == [0, 1, 2, 3]
    cells = rep["matrix"]["cells"]
    for p in s["points"]:
        c = cells[p["arm"]]["sonnet@c1"]["output_throughput"]
        assert p["mean"] == c["mean"] and list(p["ci95"]) == list(c["ci95"])
    assert "concurrency 1" in tk["title"]
    sp = charts["speedup_vs_concurrency"]
    (panel,) = sp["panels"]
    assert [a["arm"] for a in panel["arms"]] == ["eagle3-k1", "eagle3-k2", "eagle3-k3"]
    k1 = panel["arms"][0]
    assert [p["level"] for p in k1["points"]] == LEVELS
    assert [p["ratio"] for p in k1["points"]] == [cells["eagle3-k1"][k]["speedup"]["ratio"] for k in KEYS]
    st = rep["load"]["workloads"]["sonnet"]["arms"]["eagle3-k1"]["statement"]
    assert k1["changes"] == st["changes"] and k1["text"] == st["text"] and st["text"] in sp["caption"]
    pp = charts["per_position_acceptance"]
    assert [b["values"] for b in pp["panels"][0]["bars"]] == [
        cells[a]["sonnet@c1"]["per_position"]["marginal"] for a in ("eagle3-k1", "eagle3-k2", "eagle3-k3")]
    ot = charts["acceptance_over_time"]
    assert [p["arm"] for p in ot["panels"]] == ["baseline", "eagle3-k1", "eagle3-k2", "eagle3-k3"]
    k1 = ot["panels"][1]
    assert [(s["key"], s["repeat"]) for s in k1["segments"]] == [(k, r) for k in KEYS for r in (1, 2)]
    times = [p["t"] for s in k1["segments"] for p in s["points"]]
    assert times == sorted(times)  # benches laid end to end
    drifted = [s["key"] for s in k1["segments"] if s["drift"]]
    assert drifted == ["sonnet@c4", "sonnet@c4"]  # only the flagged level, both repeats
    assert "fell from 71.2 % to 63.0 %" in ot["caption"]
    w0 = rep["timeseries"]["eagle3-k1"]["sonnet@c1"][0]["windows"][0]
    assert k1["segments"][0]["points"][0]["acceptance"] == pytest.approx(
        w0["accepted_tokens"] / w0["draft_tokens"] * 100)
    assert all(p["acceptance"] is None for s in ot["panels"][0]["segments"] for p in s["points"])


def test_a_run_without_levels_or_a_two_arm_run_gets_only_its_charts():
    rep = sweep_report()
    for drop in ("load", "timeseries"):
        del rep[drop]
    assert [c["name"] for c in F.chart_data(rep)] == ["throughput_vs_k", "per_position_acceptance"]
    two = two_arm_report()
    assert [c["name"] for c in F.chart_data(two)] == ["per_position_acceptance"]
    two["timeseries"] = {"eagle3": {"sonnet": [{"repeat": 1, "windows": windows(280.0, 67.0, 1)}]}}
    assert [c["name"] for c in F.chart_data(two)] == ["per_position_acceptance", "acceptance_over_time"]
    assert F.chart_data({}) == [] and F.chart_data({"matrix": {"arms": "junk"}, "load": []}) == []


def test_figures_module_imports_matplotlib_only_when_drawing():
    code = "import sys, tui.core.results.report, tui.core.results.figures_draw; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# -- the files -----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> tuple[Path, dict[str, Any], list[dict[str, Any]], str]:
    run = tmp_path_factory.mktemp("run")
    rep = sweep_report()
    figs = D.render_figures(rep, run)
    page = H.render_html(rep, figs, run)
    (run / "report.html").write_text(page, encoding="utf-8")
    return run, rep, figs, page


def test_render_figures_writes_png_and_svg_deterministically(rendered, tmp_path):
    import matplotlib
    from PIL import Image

    run, rep, figs, _ = rendered
    assert [f["name"] for f in figs] == ALL
    for f in figs:
        assert f["png"] == f"figures/{f['name']}.png" and f["svg"] == f"figures/{f['name']}.svg"
        assert f["title"] and f["alt"] and f["caption"]
        with Image.open(run / f["png"]) as im:
            assert im.format == "PNG" and im.width > 300 and im.height > 200
        svg = (run / f["svg"]).read_text(encoding="utf-8")
        assert "<text" not in svg and "<metadata" not in svg  # text as paths; no date, no creator
    before = dict(matplotlib.rcParams)
    again = D.render_figures(rep, tmp_path)
    assert again == figs
    for f in figs:
        for fmt in ("png", "svg"):
            assert (tmp_path / f[fmt]).read_bytes() == (run / f[fmt]).read_bytes(), f[fmt]
    assert dict(matplotlib.rcParams) == before  # no style leaked into the process


def test_report_html_is_self_contained(rendered):
    run, rep, figs, page = rendered
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == len(figs)
    low = page.lower()
    assert "<script" not in low and "<link" not in low and "@import" not in low and "<iframe" not in low
    assert re.findall(r"\bsrc\s*=", low) == []
    assert [h for h in re.findall(r'href\s*=\s*"([^"]*)"', page) if not h.startswith("#")] == []
    assert [u for u in re.findall(r"url\(([^)]*)\)", page) if not u.startswith("#")] == []
    assert "http://" not in low and "https://" not in low and "//" not in re.sub(r"<svg.*?</svg>", "", page, flags=re.S)
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # the inline SVGs' ids do not collide
    refs = set(re.findall(r'href="#([^"]+)"', page)) | set(re.findall(r"url\(#([^)]+)\)", page))
    assert refs and refs <= set(ids)
    for name in ALL:
        assert f'<figure data-chart="{name}"' in page
    assert rep["verdict"]["text"].split(" — ")[0] in page and "tune-load-demo" in page
    assert "k=2 at 1 concurrent request, k=1 at 2, no speculation from 3" in page
    assert "acceptance fell from 71.2 % to 63.0 %" in page
    md = F.figures_markdown(figs)
    for f in figs:
        assert f"![{f['title']}]({f['png']})" in md and f"]({f['svg']})" in md
    assert "[report.html](report.html)" in md and F.figures_markdown([]) == ""


# -- the page in a real browser ------------------------------------------------------------------------------------

def chromium() -> str | None:
    env = os.environ.get("SPECDEC_CHROMIUM")
    if env:
        return env
    found = shutil.which("chromium")
    return found if found else None


# Debian's chromium talks to Google services on its own at start-up (network time, the component updater, the
# account list), whatever page it opens. Those are switched off, or pointed at a loopback port where nothing
# listens (SINK), and every host name resolves to nothing; so the only http/ws URLs a net log may hold are the
# browser's own calls to SINK, and any other one was asked for by the page.
SINK = "http://127.0.0.1:9"
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-default-apps", "--disable-extensions", "--disable-component-extensions-with-background-pages",
                 "--disable-domain-reliability", "--no-pings", "--disable-client-side-phishing-detection",
                 "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate",
                 f"--gaia-url={SINK}", f"--google-apis-url={SINK}", f"--component-updater=url-source={SINK}",
                 "--hide-scrollbars", "--force-device-scale-factor=1", "--host-resolver-rules=MAP * ~NOTFOUND"]

# The only script the test adds (to a COPY of the page, for the layout): each chart's box, in CSS pixels.
MEASURE = """<script>
document.body.setAttribute('data-boxes', JSON.stringify(Array.from(document.querySelectorAll('figure[data-chart]'))
  .map(f => { const r = f.querySelector('svg').getBoundingClientRect();
              return {name: f.dataset.chart, x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height}; })));
document.body.setAttribute('data-height', String(document.documentElement.scrollHeight));
</script>"""


def browse(exe: str, page: Path, tmp: Path, tag: str, *mode: str, height: int = 4000) -> tuple[str, str]:
    """Open `page` (file://) in headless chromium with no network; returns (stdout, the net log's text)."""
    net = tmp / f"net-{tag}.json"
    argv = [exe, *BROWSER_FLAGS, f"--user-data-dir={tmp / ('profile-' + tag)}", f"--log-net-log={net}",
            f"--window-size=1200,{height}", *mode, page.as_uri()]
    env = dict(os.environ, HOME=str(tmp / "home"))
    out = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode == 0, f"chromium failed ({out.returncode}): {out.stderr[-2000:]}"
    return out.stdout, net.read_text(encoding="utf-8", errors="replace") if net.exists() else ""


NET_URL = re.compile(r'"url"\s*:\s*"((?:https?|wss?)://[^"]*)"', re.I)


def network_requests(netlog: str) -> list[str]:
    """Every http/https/ws/wss URL the browser's net log names in an event (the log's constants, the table of
    event names, are left out), except the browser's own service calls to SINK."""
    events = netlog.split('"events"', 1)[1] if '"events"' in netlog else ""
    return sorted({u for u in NET_URL.findall(events) if not u.startswith(SINK + "/")})


def need_chromium() -> str:
    exe = chromium()
    if exe is None:
        if (os.environ.get("CI", "").lower() in ("true", "1", "yes")
                or os.environ.get("SPECDEC_REQUIRE_CHROMIUM", "") not in ("", "0")):
            pytest.fail("chromium is not installed but CI=true (or SPECDEC_REQUIRE_CHROMIUM=1): the report.html "
                        "browser check must run in CI "
                        "(.ci/run installs Debian's chromium with apt-get; or set SPECDEC_CHROMIUM to a binary)")
        pytest.skip("chromium is not installed (apt-get install chromium, or set SPECDEC_CHROMIUM); "
                    "report.html is not opened in a browser here")
    return exe


def test_the_net_log_check_catches_a_page_that_fetches(tmp_path):
    """The no-network check is not vacuous: a page that asks for an image and a script elsewhere is caught."""
    exe = need_chromium()
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/x.png">'
                    '<script src="https://cdn.example.invalid/lib.js"></script></body></html>', encoding="utf-8")
    _, net = browse(exe, page, tmp_path, "bad", "--dump-dom")
    assert net
    assert network_requests(net) == ["http://example.invalid/x.png", "https://cdn.example.invalid/lib.js"]


def test_report_html_renders_every_chart_offline_in_chromium(rendered, tmp_path):
    exe = need_chromium()
    run, rep, figs, _ = rendered
    assert_charts_render(exe, run, figs, tmp_path)


def assert_charts_render(exe: str, run: Path, figs: list[dict[str, Any]], tmp_path: Path) -> None:
    """Open run/report.html in headless chromium with no network: every chart in `figs` is in the DOM as an <svg>
    with drawn paths, inks its own region of a screenshot, and no load makes a network request (the journey tier
    calls this on a real run's report too)."""
    from PIL import Image

    page = run / "report.html"

    # 1. the DOM as chromium parsed it: every chart a <figure data-chart> with an <svg> holding drawn paths
    dom, net1 = browse(exe, page, tmp_path, "dom", "--dump-dom")
    assert "<html" in dom
    for f in figs:
        m = re.search(rf'<figure data-chart="{f["name"]}"[^>]*>(.*?)</figure>', dom, re.S)
        assert m, f"{f['name']}: no <figure data-chart> in the DOM"
        body = m.group(1)
        assert "<svg" in body and "</svg>" in body, f"{f['name']}: no <svg> in its figure"
        paths = re.findall(r'<path[^>]*\bd="([^"]{8,})"', body)
        assert len(paths) > 20, f"{f['name']}: only {len(paths)} drawn paths"
        assert "<figcaption>" in body

    # 2. where each chart sits (a copy of the page with one measuring script; same layout, same window)
    probe = run / "report.measure.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom2, net2 = browse(exe, probe, tmp_path, "measure", "--dump-dom")
    boxes = json.loads(re.search(r'data-boxes="([^"]*)"', dom2).group(1).replace("&quot;", '"'))
    height = int(re.search(r'data-height="(\d+)"', dom2).group(1))
    assert [b["name"] for b in boxes] == [f["name"] for f in figs]

    # 3. the screenshot of the page itself, tall enough to hold all of it
    shot = tmp_path / "shot.png"
    _, net3 = browse(exe, page, tmp_path, "shot", f"--screenshot={shot}", height=max(4000, height))
    with Image.open(shot) as im:
        img = im.convert("L")
        for b in boxes:
            assert b["w"] > 400 and b["h"] > 150, f"{b['name']}: drawn {b['w']}x{b['h']} px"
            box = (int(b["x"]) + 2, int(b["y"]) + 2, int(b["x"] + b["w"]) - 2, int(b["y"] + b["h"]) - 2)
            assert box[3] <= img.height, f"{b['name']} lies below the screenshot"
            region = img.crop(box)
            hist = region.histogram()
            total = region.width * region.height
            inked = sum(hist[:200]) / total  # share of pixels clearly darker than the white background
            assert inked > 0.01, f"{b['name']}: its region of the screenshot is blank ({inked:.2%} inked)"
            assert sum(1 for h in hist if h) > 16, f"{b['name']}: its region has almost no shades"

    # 4. no network: the net log of every load names no http/https/ws request
    for tag, net in (("dom", net1), ("measure", net2), ("shot", net3)):
        assert net, f"chromium wrote no net log ({tag})"
        assert network_requests(net) == [], f"{tag}: network requests {network_requests(net)}"


def test_render_html_names_a_missing_chart_file(tmp_path):
    figs = [{"name": "throughput_vs_k", "title": "t", "alt": "a", "caption": "c",
             "png": "figures/throughput_vs_k.png", "svg": "figures/throughput_vs_k.svg"}]
    with pytest.raises(F.ChartError, match=r"figures/throughput_vs_k\.svg .* could not be read.*render_figures"):
        H.render_html(sweep_report(), figs, tmp_path)


# -- a figures/ that cannot be written ----------------------------------------------------------------------------
# The report is still written, without charts, and says so; the run exits 1 naming what was not written; never a
# stale report (or report.html) with exit 0.

DEMO_SMALL = 'extends = "demo"\nname = "demo-small"\n\n[benchmark]\nnum_prompts = 4\n'


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """A finished simulated two-arm run (about 40 s): its report has charts."""
    root = tmp_path_factory.mktemp("demo")
    (root / "demo-small.toml").write_text(DEMO_SMALL)
    run = root / "run"
    r = run_cli(root, "--profile", str(root / "demo-small.toml"), "--headless", "--run-dir", str(run), timeout=600)
    assert r.rc == 0, r.err
    assert json.loads((run / "report.json").read_text())["figures"]
    return root, run


def _again(root: Path, run: Path, jail: list[str] | None = None):
    return run_cli(root, "--profile", str(root / "demo-small.toml"), "--headless", "--steps", "results", "--run-dir",
                   str(run), jail=jail, timeout=300)


def _assert_written_without_charts(r, run: Path, fragment: str) -> None:
    assert r.rc == 1, r.err
    assert "Traceback" not in r.both and "written without charts" in r.err and fragment in r.err
    rep = json.loads((run / "report.json").read_text())
    assert rep["exit_code"] == 1 and rep["figures"] == [] and rep["verdict"]["ok"] is False
    assert rep["not_written"] == ["figures/*.png", "figures/*.svg"] and fragment in rep["figures_error"]
    md = (run / "report.md").read_text()
    assert "**Not written: figures/*.png, figures/*.svg**" in "\n".join(md.splitlines()[:12])
    assert "](figures/" not in md and "exit code 1" in md
    page = (run / "report.html").read_text()  # rewritten now, without charts: not the earlier run's
    assert "<figure" not in page and "Not written" in page and rep["generated"] in page
    assert (run / "summary.csv").is_file()


def test_a_figures_path_that_is_a_file_leaves_the_report_without_charts_and_exit_1(demo_run, tmp_path):
    root, run = demo_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    shutil.rmtree(copy / "figures")
    (copy / "figures").write_text("a file in the way\n")
    _assert_written_without_charts(_again(root, copy), copy, "File exists")
    assert (copy / "figures").read_text() == "a file in the way\n"


@pytest.mark.skipif(jail_available() is not None, reason=f"a read-only mount needs it: {jail_available()}")
def test_a_read_only_figures_dir_leaves_the_report_without_charts_and_exit_1(demo_run, tmp_path):
    root, run = demo_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    before = snapshot(copy / "figures")
    r = _again(root, copy, jail=["--ro", str(copy / "figures")])
    _assert_written_without_charts(r, copy, "read-only (EROFS)")
    assert snapshot(copy / "figures") == before  # the old charts are left as they were, and not linked
