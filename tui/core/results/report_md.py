"""report.md: the verdict first (a compact table per workload and level: best arm, speedup with its interval,
verdict), then the charts, then the details (the load analysis, the recommendations, the two-arm comparison,
checks, diagnostics, steps); the settings, host, launches, the full matrix and every command in an appendix.
A "warned" step is named with what it warned about. Pure: renders the report dict."""

from __future__ import annotations

import io
from typing import Any

from tui.core.events import STEP_TITLES
from tui.core.results.contamination import contamination_markdown
from tui.core.results.figures import figures_markdown
from tui.core.results.fleet import fleet_markdown
from tui.core.results.load_text import load_markdown
from tui.core.results.report_rows import _fmt, comparison_rows
from tui.core.results.stats import STOP_RULE, matrix_columns, matrix_rows
from tui.core.results.verdict_table import guarantee, verdict_markdown


def _md_cell(v: Any) -> str:
    return _fmt(v).replace("|", "\\|")


def _settings_markdown(rep: dict[str, Any], w: Any) -> None:
    st = rep.get("settings") or {}
    if not st:
        return
    w("\n### Settings\n\n| Setting | Value |\n|---|---|\n")
    pairs = [
        ("Platform", st.get("platform")),
        ("Speculative method, tokens (k)", f"{st.get('method')}, {st.get('num_speculative_tokens')}"),
        ("Tensor / pipeline parallel", f"{st.get('tensor_parallel_size')} / {st.get('pipeline_parallel_size')}"),
        ("dtype, max model len, max seqs", f"{st.get('dtype')}, {st.get('max_model_len')}, {st.get('max_num_seqs')}"),
        ("Max batched tokens, prefix caching",
         f"{st.get('max_num_batched_tokens')}, {'on' if st.get('enable_prefix_caching') else 'off'}"),
        ("Input / output length", f"{st.get('input_len')} / {st.get('output_len')}"),
        ("Prompts, max concurrency", f"{st.get('num_prompts')}, {st.get('max_concurrency')}"),
        ("Server", f"{st.get('host')}:{st.get('port')}"),
    ]
    t = st.get("tune")
    if t:
        pairs[1] = ("Speculative method, tokens (k)",
                    f"{st.get('method')}, k = {', '.join(str(k) for k in t.get('num_speculative_tokens') or [])}")
        pairs.append(("Step 3: repeats, workloads, probe prompts",
                      f"{t.get('repeats')}, {', '.join(t.get('workloads') or [])}, {t.get('probe_prompts')}"))
        drafts = t.get("drafts") or {}
        if drafts:
            pairs.append(("Step 3: drafts", ", ".join(f"{n}: {d.get('model')}" for n, d in drafts.items())))
        pairs.append(("Step 3: parallel launches", "on" if t.get("parallel") else "off (one server at a time)"))
    for k, val in pairs:
        w(f"| {k} | {_md_cell(val)} |\n")


def not_passed(rep: dict[str, Any]) -> list[str]:
    """ "Results warned — 2 warnings: recommendation (sonnet@c4), drift k = 1 at c8 (sonnet)": every step that did
    not pass, with its summary (which names what it warned about or why it failed)."""
    out = []
    for st in rep.get("steps") or []:
        if st.get("status") in ("warned", "failed", "unavailable", "interrupted"):
            title = st.get("title") or STEP_TITLES.get(st["id"], st["id"])
            out.append(f"{title} {st['status']} — {st.get('summary') or 'no summary'}")
    return out


def render_markdown(rep: dict[str, Any]) -> str:
    """report.md, which stands alone in a ticket and reads first: the verdict (one short sentence and a compact
    table per workload and level), the steps that did not pass with what they said, then the charts, then the
    details (load analysis, recommendations, the two-arm comparison, checks, diagnostics, steps), and an
    appendix with the settings, versions, dataset, host, launches, the full matrix and every command."""
    out = io.StringIO()
    w = out.write
    w(f"# specdec-tui report — {rep['profile']}{' (SIMULATED)' if rep['simulated'] else ''}\n\n")
    v = rep.get("verdict") or {}
    if v:
        w(f"**{'✓' if v.get('ok') else '✗'} {v.get('text', '')}**\n\n")
    w(f"Target `{rep['models']['target']}`, draft `{rep['models']['draft']}`. Generated {rep['generated']}, "
      f"exit code {rep['exit_code']}, run directory `{rep['run_dir']}`.\n")
    if rep.get("not_written"):
        w(f"\n**Not written: {', '.join(rep['not_written'])}** — {rep.get('figures_error') or ''}\n")
    table = verdict_markdown(rep)
    if table:
        w("\n" + table)
        if rep.get("matrix"):
            covs = list(dict.fromkeys(((rep["matrix"].get("coverage") or {}).values())))
            sure = guarantee(rep)
            w("\n" + (sure + " " if sure else "") + "Speedup: the ratio of mean output throughputs, each arm's 95 % "
              "Fieller interval over the repeats." + (f" {covs[0]}" if len(covs) == 1 else "") + "\n")
    bad = not_passed(rep)
    if bad:
        w("\n" + "".join(f"- {_md_cell(b)}\n" for b in bad))
    if rep.get("figures"):
        w("\n" + figures_markdown(rep["figures"]).strip("\n") + "\n")
    elif rep.get("figures_error"):
        w(f"\n## Charts\n\nCharts not drawn: {rep['figures_error']}\n")
    if rep.get("fleet"):
        w("\n" + fleet_markdown(rep["fleet"]).rstrip("\n") + "\n")
    if rep.get("load"):
        w("\n" + load_markdown(rep["load"]).rstrip("\n") + "\n")
    if rep.get("matrix"):
        _recommendations_markdown(rep["matrix"], w)
    elif rep["runs"]:
        w("\n## Baseline vs EAGLE3\n\n| Metric | Baseline | EAGLE3 |\n|---|---|---|\n")
        for label, bv, ev in comparison_rows(rep):
            w(f"| {label} | {bv} | {ev} |\n")
        sp = rep["comparison"].get("output_throughput_speedup")
        if sp is not None:
            w(f"\n**EAGLE3 output throughput speedup: {sp:.2f}x**\n")
        w("\nITL is measured per streamed chunk; under speculative decoding a chunk carries several tokens, "
          "so compare the runs by TPOT and throughput.\n")
        if any((r or {}).get("dataset_mode") == "custom-from-sonnet" for r in rep["runs"].values()):
            w("\nDataset: sonnet (built as custom JSONL: vLLM >= 0.32 has no sonnet dataset); the same prompts as "
              "`--dataset-name sonnet`, sent with `--dataset-name custom --skip-chat-template`.\n")
    w(contamination_markdown(rep.get("contaminated") or []))
    _checks_markdown(rep, w)
    w("\n## Diagnostics\n\n")
    if not rep["diagnostics"]:
        w("No issues found.\n")
    for d in rep["diagnostics"]:
        w(f"### [{d['severity']}] {d['title']} (`{d['id']}`)\n\n")
        for ev in d["evidence"]:
            w(f"- `{ev}`\n" if len(ev) < 300 else f"- {ev[:300]}…\n")
        w(f"\n**Remedy:** {d['remedy']}\n\n")
    w("\n## Steps\n\n| Step | Status | Seconds | Summary |\n|---|---|---|---|\n")
    for step in rep["steps"]:
        summary = str(step["summary"]).replace("|", "\\|")
        w(f"| {step.get('title') or STEP_TITLES.get(step['id'], step['id'])} | {step['status']} | "
          f"{_fmt(step['seconds'], 1)} | {summary} |\n")
    _appendix_markdown(rep, w)
    return out.getvalue()


def _appendix_markdown(rep: dict[str, Any], w: Any) -> None:
    """Settings, versions, dataset, host, launches, the full matrix, the commands: what a reader looks up."""
    w("\n## Appendix\n")
    _settings_markdown(rep, w)
    vers = rep.get("versions") or {}
    if vers:
        w("\n### Versions\n\n" + ", ".join(f"{k} `{_fmt(val)}`" for k, val in vers.items()) + "\n")
    ds = rep.get("dataset") or {}
    if ds:
        w(f"\n### Dataset\n\n{ds.get('name')} at `{_fmt(ds.get('path'))}`, sha256 `{_fmt(ds.get('sha256'))}`"
          f" ({'verified' if ds.get('verified') else 'not verified'}; source {_fmt(ds.get('source'))}).\n")
    _host_markdown(rep, w)
    if rep.get("matrix"):
        _matrix_markdown(rep["matrix"], w)
    else:
        _launches_markdown(rep.get("launches") or [], w)
    cmds = rep.get("commands") or {}
    if cmds:
        w("\n### Commands\n")
        for sid, text in cmds.items():
            w(f"\n{(rep.get('step_titles') or {}).get(sid) or STEP_TITLES.get(sid, sid)}:\n\n```bash\n{text}\n```\n")
    _bench_commands_markdown(rep, w)


def _recommendations_markdown(matrix: dict[str, Any], w: Any) -> None:
    """The Step 3 recommendation of every workload (or bench key) with its reasons; the tables are in the
    appendix."""
    w("\n## Step 3: recommendation per workload\n\n")
    for wl in matrix.get("workloads") or []:
        rec = (matrix.get("recommendation") or {}).get(wl) or {}
        w(f"- **{wl}**: {rec.get('text') or 'n/a'}" + (f" — {rec['reason']}" if rec.get("reason") else "") + "\n")
    w("\nAcceptance is pooled over the repeats from the servers' /metrics counters; " + STOP_RULE + ".\n")


def _host_markdown(rep: dict[str, Any], w: Any) -> None:
    host = rep.get("host") or {}
    if not host or not (host.get("facts") or host.get("instance_type")):
        return
    w("\n### Host\n\n| Fact | Value | Detail |\n|---|---|---|\n")
    w(f"| Platform | {_md_cell(host.get('platform'))}{' (simulated)' if host.get('simulated') else ''} | |\n")
    names = {f.get("name") for f in host.get("facts") or []}
    if "instance type" not in names:
        w(f"| Instance type | {_md_cell(host.get('instance_type'))} | DMI product name |\n")
    for f in host.get("facts") or []:
        w(f"| {_md_cell(f.get('name'))} | {_md_cell(f.get('value'))} | {_md_cell(f.get('detail') or '')} |\n")


def _bench_commands_markdown(rep: dict[str, Any], w: Any) -> None:
    """Every benchmark as it ran, one bash block per arm (a comment names the workload and repeat)."""
    bc = rep.get("bench_commands") or {}
    if not bc:
        return
    titles = rep.get("step_titles") or {}
    w("\n### Benchmark commands (as run)\n")
    ran = [row.get("ran") for sid, rows in bc.items() if sid != "tool" for row in rows]
    if ran and all(r == "warm" for r in ran):
        w("\nEach arm's benches ran in one warm process (the bench command's own code, imported once; each bench "
          "from exactly the argv below).\n")
    elif "warm" in ran:
        w(f"\n{ran.count('warm')} of these ran in their arm's warm process (the bench command's own code, imported "
          f"once), {len(ran) - ran.count('warm')} as a process of their own; each from exactly the argv below.\n")
    elif ran:
        w("\nEach bench ran as a process of its own.\n")
    for sid, rows in bc.items():
        title = "Sonnet custom-JSONL builder (vLLM >= 0.32)" if sid == "tool" else titles.get(sid) or STEP_TITLES.get(sid, sid)
        w(f"\n{title}:\n\n```bash\n")
        for i, row in enumerate(rows):
            if row.get("repeat") is not None:
                w(f"# {row.get('workload')} repeat {row['repeat']}\n")
            w(row["command"] + "\n" + ("\n" if i < len(rows) - 1 else ""))
        w("```\n")


def _checks_markdown(rep: dict[str, Any], w: Any) -> None:
    """The smoke test and lossless checks of every server, as the steps recorded them."""
    checks = rep.get("checks") or {}
    if not checks:
        return
    titles = rep.get("step_titles") or {}
    w("\n## Smoke and lossless checks\n\n| Server | Smoke test | Reply | Greedy reply vs baseline | "
      "Probe prompts identical to the baseline |\n|---|---|---|---|---|\n")
    for sid, c in checks.items():
        smoke = "passed" if c.get("smoke_passed") else "failed" if c.get("smoke_passed") is False else "n/a"
        mb = c.get("matches_baseline")
        same = "same" if mb is True else "differs" if mb is False else "—"
        lossless = ", ".join(f"{wl}: {v.get('identical')} of {v.get('prompts')}"
                             for wl, v in (c.get("lossless") or {}).items()) or "—"
        w(f"| {_md_cell(titles.get(sid) or sid)} | {smoke} | `{_md_cell(repr(c.get('smoke_text') or ''))}` | {same} | "
          f"{_md_cell(lossless)} |\n")


def _launches_markdown(launches: list[dict[str, Any]], w: Any) -> None:
    if not any(a.get("startup_s") is not None for a in launches):
        return
    w("\n### Launches\n\n| Server | Status | Startup (s) | Compile cache hits / misses |\n|---|---|---|---|\n")
    for a in launches:
        w(f"| {a.get('title') or a.get('id')} | {a.get('status')} | {_fmt(a.get('startup_s'), 1)} | "
          f"{_fmt(a.get('cache_hits'))} / {_fmt(a.get('cache_misses'))} |\n")


def _matrix_markdown(matrix: dict[str, Any], w: Any) -> None:
    """The full tune matrix (appendix): arms × metrics with intervals per workload or bench key, the noise floor,
    the launches."""
    w("\n### Full matrix\n")
    for wl in matrix.get("workloads") or []:
        body = matrix_rows(matrix, wl, 200)
        w(f"\n#### `{wl}`\n")
        if body:
            head = ["Metric", *matrix_columns(matrix, 200)]
            w("\n| " + " | ".join(_md_cell(c) for c in head) + " |\n|" + "---|" * len(head) + "\n")
            for r in body:
                w("| " + " | ".join(_md_cell(c) for c in r) + " |\n")
        nf = (matrix.get("noise_floor") or {}).get(wl) or {}
        if nf.get("ratio") is not None:
            ci = nf.get("ci95")
            w(f"\nNoise floor (baseline vs baseline): {nf['ratio']:.3f}x"
              + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "") + "\n")
    covs = list(dict.fromkeys((matrix.get("coverage") or {}).values()))
    w("\n" + (" ".join(covs) if covs else "Intervals are 95 % Student-t intervals over the repeats.")
      + " An arm pays only when its speedup interval's lower bound is above 1.0x.\n")
    for wl, texts in (matrix.get("notes") or {}).items():
        for text in texts:
            w(f"\nNote ({wl}): {text}\n")
    arms = matrix.get("arms") or []
    if any(a.get("startup_s") is not None for a in arms):
        w("\n### Launches\n\n| Arm | Status | Startup (s) | Compile cache hits / misses | Cores, port |\n|---|---|---|---|---|\n")
        for a in arms:
            pl = a.get("placement") or {}
            where = f"{pl.get('neuron_visible_devices')}, {pl.get('port')}" if pl else "—"
            w(f"| {a.get('title') or a.get('id')} | {a.get('status')} | {_fmt(a.get('startup_s'), 1)} | "
              f"{_fmt(a.get('cache_hits'))} / {_fmt(a.get('cache_misses'))} | {where} |\n")
