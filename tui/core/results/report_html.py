"""report.html: one self-contained document (inline CSS, the charts' SVGs inline, no script and no URL to anything
outside it) in the order report.md reads: the verdict and its table first, then the charts, then the details
(the load analysis), then an appendix with the full matrix. Pure: renders the report dict and reads the SVG files
figures_draw.render_figures wrote."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from tui.core.results.figures import ChartError, _arm_labels, _dict, _fmt, _fmt_ci, _level, _list, _num
from tui.core.results.load_text import best_words, kind_at
from tui.core.results.report_md import not_passed
from tui.core.results.statement import WORDS
from tui.core.results.verdict_table import COLUMNS, guarantee, verdict_rows

CSS = """
body { font-family: "DejaVu Sans", Verdana, Arial, sans-serif; color: #111; background: #fff; margin: 1.5em auto;
       max-width: 1100px; padding: 0 1em; line-height: 1.4; }
h1 { font-size: 1.45em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.0em; margin-bottom: 0.3em; }
.verdict { font-weight: bold; padding: 0.5em 0.7em; border-left: 5px solid #555; background: #f3f3f3; }
.verdict.ok { border-left-color: #009E73; } .verdict.bad { border-left-color: #D55E00; }
.meta { color: #444; font-size: 0.9em; }
figure { margin: 1.2em 0; padding: 0.6em; border: 1px solid #ddd; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { font-size: 0.88em; color: #333; margin-top: 0.4em; }
figcaption b { color: #111; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f0f0f0; } td.l, th.l { text-align: left; }
code { font-size: 0.95em; }
"""


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _inline_svg(svg: str, name: str, alt: str) -> str:
    """The SVG file as an element of the page: no XML prolog or doctype, no namespace URLs (the HTML parser
    needs none), every id prefixed with the chart's name (several charts in one document), sized by CSS."""
    start = svg.find("<svg")
    if start < 0:
        raise ChartError(f"The chart file for {name} holds no <svg> element; draw the charts again "
                         "(render_figures) before writing report.html.")
    s = svg[start:]
    s = re.sub(r'\s+xmlns(?::\w+)?="[^"]*"', "", s)
    s = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{name}-{m.group(1)}"', s)
    s = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{name}-{m.group(1)}"', s)
    s = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{name}-{m.group(1)})", s)
    s = re.sub(r'^<svg([^>]*?)\s+width="[^"]*"\s+height="[^"]*"', r"<svg\1", s, count=1)
    s = s.replace("<svg", f'<svg role="img" aria-label="{_e(alt)}"', 1)
    return s.rstrip() + "\n"


def _table(head: list[str], rows: list[list[Any]], left: int = 1, text_last: bool = False) -> str:
    """A compact table: the first `left` columns (and the last, a sentence, with text_last) left-aligned."""
    def cells(r: list[Any], tag: str) -> str:
        cls = ' class="l"'
        return "".join(f"<{tag}{cls if i < left or (text_last and i == len(r) - 1) else ''}>{_e(v)}</{tag}>"
                       for i, v in enumerate(r))
    return ("<table><thead><tr>" + cells(head, "th") + "</tr></thead><tbody>"
            + "".join("<tr>" + cells(r, "td") + "</tr>" for r in rows) + "</tbody></table>\n")


def _load_html(load: dict[str, Any], labels: dict[str, str]) -> str:
    out = ["<h2>Load: where speculation pays</h2>\n"]
    for wl, w in _dict(load.get("workloads")).items():
        w = _dict(w)
        out.append(f"<h3>Workload {_e(wl)}</h3>\n")
        best = _dict(w.get("best"))
        arms = _dict(w.get("arms"))
        levels = sorted({n for a in arms.values() for lv in _dict(_dict(a).get("levels")) if (n := _level(lv))})
        rows = []
        for n in levels:
            b = _dict(best.get(str(n)))
            row: list[Any] = [n]
            for aid, a in arms.items():
                rec = _dict(_dict(_dict(a).get("levels")).get(str(n)))
                sp = _dict(rec.get("speedup"))
                tp = _dict(rec.get("throughput"))
                kind = kind_at(_dict(a), n)
                if _dict(a).get("k") is None:
                    row.append(_fmt(tp.get("mean")) if tp.get("mean") is not None else "not measured")
                elif kind in ("not_measured", "no_baseline"):
                    row.append(WORDS[kind])
                else:
                    row.append(f"{_fmt(sp.get('ratio'), 2, 'x')} {'(unbounded)' if sp.get('unbounded') else _fmt_ci(sp.get('ci95'), 2)}"
                               + (f" {WORDS[kind]}" if kind in WORDS else ""))
            row.append(best_words(b, arms))
            rows.append(row)
        if rows:
            head = ["concurrency"] + [("baseline tok/s" if _dict(a).get("k") is None
                                       else f"{_dict(a).get('label') or labels.get(aid, aid)} speedup [95 %]")
                                      for aid, a in arms.items()] + ["best"]
            out.append(_table(head, rows, left=0, text_last=True))
        items = [f"<li>{_e(_dict(_dict(a).get('statement')).get('text'))}</li>" for a in arms.values()
                 if _dict(_dict(a).get("statement")).get("text")]
        for key, name in (("schedule_text", "vLLM schedule"), ("slo_text", "SLO")):
            if w.get(key):
                items.append(f"<li>{name}: {_e(w[key])}</li>")
        if _dict(w.get("schedule_basis")).get("text"):
            items.append(f"<li>schedule basis: {_e(w['schedule_basis']['text'])}</li>")
        ho = _dict(_dict(w.get("model")).get("held_out"))
        if ho.get("text"):
            items.append(f"<li>speedup model: {_e(ho['text'])}</li>")
        if w.get("schedule"):
            items.append(f"<li><code>num_speculative_tokens_per_batch_size = {_e(w['schedule'])}</code></li>")
        why = _dict(_dict(w.get("model")).get("why"))
        for lv, t in why.items():
            items.append(f"<li>why at concurrency {_e(lv)}: {_e(t)}</li>")
        if items:
            out.append("<ul>" + "".join(items) + "</ul>\n")
    sv = _dict(load.get("schedule_verification"))
    if sv.get("text"):
        out.append(f"<p>Schedule verification ({_e(sv.get('status'))}): {_e(sv['text'])}</p>\n")
    if load.get("coverage"):
        out.append(f'<p class="meta">{_e(load["coverage"])}</p>\n')
    return "".join(out)


def _matrix_html(m: dict[str, Any], labels: dict[str, str]) -> str:
    arms = [a for a in _list(m.get("arms")) if isinstance(a, dict) and a.get("id")]
    cells = _dict(m.get("cells"))
    rows = []
    for key in [k for k in _list(m.get("workloads")) if isinstance(k, str)]:
        for a in arms:
            c = _dict(_dict(cells.get(a["id"])).get(key))
            if not c.get("repeats"):
                continue
            ot, sp = _dict(c.get("output_throughput")), _dict(c.get("speedup"))
            rows.append([key, labels.get(a["id"], a["id"]), c.get("repeats"), _fmt(ot.get("mean")), _fmt_ci(ot.get("ci95")),
                         _fmt(sp.get("ratio"), 2, "x") if sp else "—",
                         ("unbounded" if sp.get("unbounded") else _fmt_ci(sp.get("ci95"), 2)) if sp else "—",
                         _fmt(c.get("acceptance_rate")), _fmt(c.get("acceptance_length"), 2), _fmt(c.get("median_tpot_ms"), 2)])
    if not rows:
        return ""
    return ("<h3>Full matrix</h3>\n"
            + _table(["bench", "arm", "repeats", "output tok/s", "95 %", "speedup", "95 %", "acceptance %",
                      "acceptance length", "median TPOT ms"], rows, left=2))


def _runs_html(report: dict[str, Any]) -> str:
    runs = _dict(report.get("runs"))
    b, e = _dict(runs.get("baseline")), _dict(runs.get("eagle3"))
    if not b and not e:
        return ""
    rows = [[label, _fmt(b.get(k), 2), _fmt(e.get(k), 2)] for label, k in (
        ("output tokens/s", "output_throughput"), ("median TPOT ms", "median_tpot_ms"),
        ("median TTFT ms", "median_ttft_ms"), ("P99 TPOT ms", "p99_tpot_ms"))]
    rows.append(["acceptance %", "n/a", _fmt(e.get("acceptance_rate"))])
    rows.append(["acceptance length", "n/a", _fmt(e.get("acceptance_length"), 2)])
    sp = _dict(report.get("comparison")).get("output_throughput_speedup")
    return ("<h2>Baseline vs EAGLE3</h2>\n" + _table(["metric", "baseline", "EAGLE3"], rows)
            + (f"<p>Output throughput speedup: <b>{_fmt(sp, 2, 'x')}</b></p>\n" if _num(sp) is not None else ""))


def render_html(report: dict[str, Any], figures: list[dict[str, Any]], out_dir: Path) -> str:
    """report.html: one self-contained document (inline CSS, the charts' SVGs inline, no script and no URL to
    anything outside it), in report.md's order: the verdict and its table (id "verdict"), the steps that did not
    pass, each chart in a <figure data-chart="NAME"> with its caption, the load details and recommendations, and
    the full matrix in an appendix. `figures` is what render_figures returned ([] where there are no charts: the
    page says why); their SVG files are read from out_dir (the run directory)."""
    report = _dict(report)
    labels = _arm_labels(report)
    v = _dict(report.get("verdict"))
    models = _dict(report.get("models"))
    title = f"specdec-tui report — {report.get('profile') or 'run'}" + (" (SIMULATED)" if report.get("simulated") else "")
    parts = ["<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
             f"<title>{_e(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
             f"<h1>{_e(title)}</h1>\n"]
    if v.get("text"):
        parts.append(f'<p class="verdict {"ok" if v.get("ok") else "bad"}">{"✓" if v.get("ok") else "✗"} '
                     f"{_e(v['text'])}</p>\n")
    meta = [f"profile <b>{_e(report.get('profile'))}</b>"]
    if models.get("target"):
        meta.append(f"target <code>{_e(models['target'])}</code>")
    if models.get("draft"):
        meta.append(f"draft <code>{_e(models['draft'])}</code>")
    if report.get("generated"):
        meta.append(f"generated {_e(report['generated'])}")
    if report.get("exit_code") is not None:
        meta.append(f"exit code {_e(report['exit_code'])}")
    parts.append(f'<p class="meta">{", ".join(meta)}.</p>\n')
    if report.get("not_written"):
        parts.append(f'<p class="verdict bad">Not written: {_e(", ".join(report["not_written"]))} — '
                     f'{_e(report.get("figures_error") or "")}</p>\n')
    rows = verdict_rows(report)
    if rows:
        parts.append('<h2 id="verdict">Verdict</h2>\n' + _table(list(COLUMNS), rows, left=3, text_last=True))
        sure = guarantee(report)
        if sure:
            parts.append(f'<p class="guarantee">{_e(sure)}</p>\n')
    bad = not_passed(report)
    if bad:
        parts.append("<ul>" + "".join(f"<li>{_e(b)}</li>" for b in bad) + "</ul>\n")
    if figures:
        parts.append("<h2>Charts</h2>\n")
    elif report.get("figures_error"):
        parts.append(f'<h2>Charts</h2>\n<p class="meta">Charts not drawn: {_e(report["figures_error"])}</p>\n')
    for f in figures:
        try:
            svg = (Path(out_dir) / f["svg"]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ChartError(f"report.html inlines each chart's SVG, and {f['svg']} under {out_dir} could not be "
                             f"read ({e}). Pass render_html the list render_figures returned for the same run "
                             "directory, after it has written the files.") from e
        parts.append(f'<figure data-chart="{_e(f["name"])}" id="chart-{_e(f["name"])}">\n'
                     + _inline_svg(svg, f["name"], f.get("alt") or f["title"])
                     + f"<figcaption><b>{_e(f['title'])}.</b> {_e(f.get('caption') or '')} "
                     f"(files: {_e(f['png'])}, {_e(f['svg'])})</figcaption>\n</figure>\n")
    if report.get("load"):
        parts.append(_load_html(_dict(report["load"]), labels))
    if report.get("matrix"):
        recs = [(wl, _dict(r).get("text")) for wl, r in _dict(_dict(report["matrix"]).get("recommendation")).items()
                if _dict(r).get("text")]
        if recs:
            parts.append("<h2>Step 3: recommendation per workload</h2>\n<ul>"
                         + "".join(f"<li>{_e(wl)}: {_e(t)}</li>" for wl, t in recs) + "</ul>\n")
        parts.append("<h2>Appendix</h2>\n" + _matrix_html(_dict(report["matrix"]), labels))
    else:
        parts.append(_runs_html(report))
    parts.append('<p class="meta">Every number here is read from this run\'s report.json, which holds the '
                 "servers' and benchmarks' own output; the charts are drawn with matplotlib. This page loads "
                 "nothing from anywhere else.</p>\n</body>\n</html>\n")
    return "".join(parts)
