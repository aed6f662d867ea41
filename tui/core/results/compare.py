"""`specdec-tui compare RUN_DIR RUN_DIR…`: saved runs side by side, from each run directory's report.json.

A two-arm run gives one column (baseline vs EAGLE3); a tune run one column per speculative arm and workload
of its matrix. load_run reads and checks a run directory (CompareError, one paragraph, for anything that is
not a readable specdec-tui report); compare_columns turns reports into columns; compare_rows into table rows
(label, value per column); compare_json is the --json document. Rendering (rich) lives in render_compare.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence
from tui.core.results.stats import arm_k, chat_template_mix, chat_template_text
from tui.core.store.schema import report_problem

SCHEMA_PREFIX = "specdec-tui/report/"
NA = "n/a"


class CompareError(Exception):
    """A run directory compare cannot use; the message is one paragraph for the user."""


def load_run(path: str | Path) -> dict[str, Any]:
    """report.json of a run directory (or the report.json path itself), checked to be a specdec-tui report."""
    p = Path(path)
    if p.is_dir():
        rp = p / "report.json"
    elif p.name == "report.json" or p.suffix == ".json":
        rp = p
    elif not p.exists():
        raise CompareError(f"{path} does not exist; give run directories (each holds a report.json written by "
                           "`specdec-tui --headless`).")
    else:
        raise CompareError(f"{path} is not a run directory; give run directories (each holds a report.json).")
    if not rp.is_file():
        if not p.exists():
            raise CompareError(f"{path} does not exist; give run directories (each holds a report.json written "
                               "by `specdec-tui --headless`).")
        if (p / "state.json").is_file():
            raise CompareError(f"{path} has no report.json: the run never reached its report (interrupted before "
                               f"it finished). Run it again with --run-dir {path} to continue it, then compare.")
        raise CompareError(f"{path} has no report.json and is not a specdec-tui run directory; give run "
                           "directories written by `specdec-tui --headless` (or the app).")
    try:
        text = rp.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise CompareError(f"cannot read {rp}: {why}.") from None
    try:
        rep = json.loads(text)
    except ValueError as exc:
        raise CompareError(f"{rp} is not valid JSON ({exc}); the file is damaged or was cut short.") from None
    schema = rep.get("schema") if isinstance(rep, dict) else None
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise CompareError(f"{rp} is not a specdec-tui report (schema {schema!r}, expected "
                           f"{SCHEMA_PREFIX}N); give run directories written by specdec-tui.")

    problem = report_problem(rep)
    if problem:
        raise CompareError(f"{rp} is damaged: {problem}. Nothing was compared and the file is left as it is; "
                           "restore it from a copy, or run the profile again to write a new report.")
    rep.setdefault("run_dir", str(p if p.is_dir() else p.parent))
    rep["compare_path"] = str(p if p.is_dir() else p.parent)  # where it was read from (the run may have moved)
    return rep


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _ratio(a: Any, b: Any) -> float | None:
    a, b = _num(a), _num(b)
    return a / b if a is not None and b else None


def _run_label(rep: dict[str, Any], index: int, labels_seen: set[str]) -> str:
    where = rep.get("compare_path") or rep.get("run_dir") or f"run{index + 1}"
    name = Path(str(where)).resolve().name if rep.get("compare_path") else Path(str(where)).name
    name = name or f"run{index + 1}"
    if name in labels_seen:
        name = f"{name}#{index + 1}"
    labels_seen.add(name)
    return name


def _common(rep: dict[str, Any], label: str) -> dict[str, Any]:
    st = rep.get("settings") or {}
    models = rep.get("models") or {}
    v = rep.get("verdict") or {}
    return {"run": label, "run_dir": rep.get("compare_path") or rep.get("run_dir"), "profile": rep.get("profile"),
            "simulated": bool(rep.get("simulated")), "verdict": v.get("text"), "verdict_ok": v.get("ok"),
            "platform": st.get("platform"), "target": models.get("target") or st.get("target"),
            "exit_code": rep.get("exit_code")}


def _paired_baseline(matrix: dict[str, Any], arm: dict[str, Any] | None, wl: str) -> dict[str, Any] | None:
    """A fleet run (results/fleet.py): the baseline cell of the node an arm ran on, the one its speedup is against."""
    fleet = matrix.get("fleet") or {}
    pair = (fleet.get("pairing") or {}).get(arm["id"]) if arm else None
    if not pair or len(pair) != 1:
        return None
    return ((fleet.get("baselines") or {}).get(pair[0]) or {}).get(wl)


def columns_of(rep: dict[str, Any], label: str) -> list[dict[str, Any]]:
    """The columns one report contributes: one for a two-arm run, one per speculative arm × workload of a
    matrix (a baseline-only matrix: one per workload with no speculative figures)."""
    base = _common(rep, label)
    matrix = rep.get("matrix")
    if isinstance(matrix, dict) and matrix.get("cells"):
        arms = matrix.get("arms") or []
        wls = matrix.get("workloads") or []
        cells = matrix.get("cells") or {}
        barm = next((a for a in arms if a.get("kind") == "baseline"), None)
        spec = [a for a in arms if a.get("kind") != "baseline"] or [None]
        out = []
        for wl in wls:
            bc = ((cells.get(barm["id"]) or {}).get(wl) or {}) if barm else {}
            rec = ((matrix.get("recommendation") or {}).get(wl) or {})
            for a in spec:
                c = ((cells.get(a["id"]) or {}).get(wl) or {}) if a else {}
                pb = _paired_baseline(matrix, a, wl) or bc  # a fleet arm: its own node's baseline
                sp = c.get("speedup") or {}
                tput = (c.get("output_throughput") or {})
                btput = (pb.get("output_throughput") or {})
                out.append({**base, "arm": a["id"] if a else None, "workload": wl,
                            "draft": (a or {}).get("draft_name") or (a or {}).get("draft"),
                            "method": (a or {}).get("method"), "k": arm_k(a),
                            "baseline_tok_s": _num(btput.get("mean")), "baseline_ci95": btput.get("ci95"),
                            "spec_tok_s": _num(tput.get("mean")), "spec_ci95": tput.get("ci95"),
                            "speedup": _num(sp.get("ratio")), "speedup_ci95": sp.get("ci95"),
                            "tpot_ms": _num(c.get("median_tpot_ms")), "baseline_tpot_ms": _num(pb.get("median_tpot_ms")),
                            "ttft_ms": _num(c.get("median_ttft_ms")), "baseline_ttft_ms": _num(pb.get("median_ttft_ms")),
                            "acceptance": _num(c.get("acceptance_rate")),
                            "acceptance_length": _num(c.get("acceptance_length")),
                            "repeats": c.get("repeats"),
                            "recommended": bool(a and rec.get("arm") == a["id"]),
                            "recommendation": rec.get("text")})
        return out
    st = rep.get("settings") or {}
    models = rep.get("models") or {}
    runs = rep.get("runs") or {}
    b, e = runs.get("baseline") or {}, runs.get("eagle3") or {}
    comp = rep.get("comparison") or {}
    return [{**base, "arm": "eagle3", "workload": "sonnet" if runs else None,
             "draft": models.get("draft") or st.get("draft"), "method": st.get("method"),
             "k": arm_k(st),
             "baseline_tok_s": _num(b.get("output_throughput")), "baseline_ci95": None,
             "spec_tok_s": _num(e.get("output_throughput")), "spec_ci95": None,
             "speedup": _num(comp.get("output_throughput_speedup")), "speedup_ci95": None,
             "tpot_ms": _num(e.get("median_tpot_ms")), "baseline_tpot_ms": _num(b.get("median_tpot_ms")),
             "ttft_ms": _num(e.get("median_ttft_ms")), "baseline_ttft_ms": _num(b.get("median_ttft_ms")),
             "acceptance": _num(e.get("acceptance_rate")), "acceptance_length": _num(e.get("acceptance_length")),
             "repeats": 1 if e else None, "recommended": None, "recommendation": None}]


def compare_columns(reports: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    cols: list[dict[str, Any]] = []
    for i, rep in enumerate(reports):
        cols.extend(columns_of(rep, _run_label(rep, i, seen)))
    return cols


def _f(v: Any, nd: int = 1, suffix: str = "") -> str:
    return NA if _num(v) is None else f"{v:.{nd}f}{suffix}"


def _with_ci(v: Any, ci: Any, nd: int = 1, suffix: str = "") -> str:
    s = _f(v, nd, suffix)
    if s != NA and isinstance(ci, list) and len(ci) == 2 and all(_num(x) is not None for x in ci):
        s += f" [{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"
    return s


def _lat(col: dict[str, Any], key: str) -> str:
    v, b = col.get(f"{key}_ms"), col.get(f"baseline_{key}_ms")
    s = _f(v, 2)
    r = _ratio(v, b)
    return f"{s} ({r:.2f}x)" if s != NA and r is not None else s


def column_title(col: dict[str, Any], multi: dict[str, int]) -> str:
    """The run's name, plus the arm (k, draft) and workload where the run has several columns."""
    t = col["run"]
    if multi.get(col["run"], 0) > 1:
        bits = []
        if col.get("k") is not None:
            bits.append(f"k={col['k']}")
        if col.get("arm") and col.get("k") is None:
            bits.append(str(col["arm"]))
        if col.get("workload"):
            bits.append(str(col["workload"]))
        t += "\n" + " ".join(bits)
    return t


ROWS = ("Profile", "Verdict", "Platform", "Target", "Draft", "Method, k", "Workload", "Baseline tok/s",
        "Spec tok/s", "Speedup", "Median TPOT ms", "Median TTFT ms", "Acceptance %", "Acceptance length",
        "Recommended")


def compare_rows(cols: Sequence[dict[str, Any]]) -> list[tuple[str, ...]]:
    """(label, value per column) for the side-by-side table; TPOT / TTFT carry their ratio to the run's
    baseline, throughputs and speedup their 95 % intervals where the run had repeats."""
    def rec(c: dict[str, Any]) -> str:
        if c.get("recommended") is None:
            return NA
        return "✓" if c["recommended"] else ""

    def profile(c: dict[str, Any]) -> str:
        return f"{c.get('profile')}{' (simulated)' if c.get('simulated') else ''}"

    fns = {
        "Profile": profile,
        "Verdict": lambda c: (("✓ " if c.get("verdict_ok") else "✗ ") + str(c["verdict"])) if c.get("verdict") else NA,
        "Platform": lambda c: str(c.get("platform") or NA),
        "Target": lambda c: str(c.get("target") or NA),
        "Draft": lambda c: str(c.get("draft") or NA),
        "Method, k": lambda c: f"{c.get('method') or NA}, {c['k'] if c.get('k') is not None else NA}",
        "Workload": lambda c: str(c.get("workload") or NA),
        "Baseline tok/s": lambda c: _with_ci(c.get("baseline_tok_s"), c.get("baseline_ci95")),
        "Spec tok/s": lambda c: _with_ci(c.get("spec_tok_s"), c.get("spec_ci95")),
        "Speedup": lambda c: (_f(c.get("speedup"), 2, "x")
                              + (f" [{c['speedup_ci95'][0]:.2f}, {c['speedup_ci95'][1]:.2f}]"
                                 if c.get("speedup") is not None and c.get("speedup_ci95") else "")),
        "Median TPOT ms": lambda c: _lat(c, "tpot"),
        "Median TTFT ms": lambda c: _lat(c, "ttft"),
        "Acceptance %": lambda c: _f(c.get("acceptance")),
        "Acceptance length": lambda c: _f(c.get("acceptance_length"), 2),
        "Recommended": rec,
    }
    rows = [(label, *(fns[label](c) for c in cols)) for label in ROWS]
    if all(c.get("recommended") is None for c in cols):
        rows = [r for r in rows if r[0] != "Recommended"]
    return rows


def _chat_benches(rep: dict[str, Any]) -> list[dict[str, Any]]:
    """A report's chat benches as {command, vllm_version} (its bench commands, at the run's vLLM)."""
    version = (rep.get("versions") or {}).get("vllm") if isinstance(rep.get("versions"), dict) else None
    return [{"command": str(r.get("command") or ""), "vllm_version": version}
            for rows in (rep.get("bench_commands") or {}).values() for r in (rows if isinstance(rows, list) else ())
            if isinstance(r, dict)]


def chat_template_note(reports: Sequence[dict[str, Any]]) -> dict[str, str] | None:
    """A note when acceptance over chat is compared across vLLM <= 0.33 and >= 0.34 (stats.chat_template_mix, the
    one rule the matrix uses too): "info" when every chat bench passed --skip-chat-template (the app's own do: the
    same prompts on both sides), else "warning"."""
    mix = chat_template_mix(b for rep in reports for b in _chat_benches(rep))
    if mix is None:
        return None
    return {"severity": "info" if mix["skipped"] else "warning", "text": chat_template_text(mix)}


def compare_json(reports: Sequence[dict[str, Any]], paths: Sequence[str] | None = None) -> dict[str, Any]:
    cols = compare_columns(reports)
    note = chat_template_note(reports)
    return {"schema": "specdec-tui/compare/1",
            "runs": [str(p) for p in (paths or [r.get("compare_path") or r.get("run_dir") for r in reports])],
            "columns": cols, "notes": [note] if note else []}


RUN_ROWS = ("Profile", "Verdict", "Platform", "Target")  # one value per run: said once, above the table
TABLE_MAX_WIDTH = 120  # the headless table is stacked (columns in groups) to fit this, or the console if narrower


def _stack(widths: Sequence[int], label_width: int, limit: int) -> list[list[int]]:
    """Column indexes in groups whose table (the label column, then these) fits `limit` columns."""
    groups: list[list[int]] = []
    used = limit
    for i, w in enumerate(widths):
        if not groups or used + w + 3 > limit:
            groups.append([])
            used = label_width + 4
        groups[-1].append(i)
        used += w + 3
    return groups


def render_compare(reports: Sequence[dict[str, Any]], console: Any) -> None:
    """Headless compare on a rich Console: each run once (its profile, platform, target, verdict and, for a
    matrix, the recommendation per workload), then the numbers with columns = runs (× arms × workloads) and
    rows = ROWS less the per-run ones, stacked in groups of columns that fit the console (at most
    TABLE_MAX_WIDTH columns)."""
    from rich.cells import cell_len
    from rich.markup import escape
    from rich.table import Table

    cols = compare_columns(reports)
    multi: dict[str, int] = {}
    for c in cols:
        multi[c["run"]] = multi.get(c["run"], 0) + 1
    console.print("[bold]specdec-tui compare[/]")
    all_rows = compare_rows(cols)
    run_rows = {r[0]: r[1:] for r in all_rows if r[0] in RUN_ROWS}
    drafts = {r[0]: r[1:] for r in all_rows}["Draft"]
    # A draft shared by all of a run's columns is said once, on the run's line (it is the widest cell).
    one_draft = all(len({d for d, c in zip(drafts, cols) if c["run"] == run}) == 1 for run in multi)
    seen_runs: set[str] = set()
    for i, c in enumerate(cols):
        if c["run"] in seen_runs:
            continue
        seen_runs.add(c["run"])
        profile, verdict = run_rows["Profile"][i], run_rows["Verdict"][i]
        console.print(f"[bold]{escape(c['run'])}[/]: {escape(profile)} · {escape(run_rows['Platform'][i])} · "
                      f"{escape(run_rows['Target'][i])}" + (f" → {escape(drafts[i])}" if one_draft else ""))
        console.print(f"  {escape(verdict)}")
        shown: set[str] = set()
        for rc in cols:
            wl = str(rc.get("workload"))
            if rc["run"] == c["run"] and rc.get("recommendation") and wl not in shown:
                shown.add(wl)
                console.print(f"  [bold]{escape(wl)}[/]: {escape(rc['recommendation'])}")
    rows = [r for r in all_rows if r[0] not in RUN_ROWS and not (one_draft and r[0] == "Draft")]
    titles = [column_title(c, multi) for c in cols]
    widths = [max([cell_len(line) for line in titles[i].split("\n")] + [cell_len(r[i + 1]) for r in rows])
              for i in range(len(cols))]
    label_width = max(cell_len(r[0]) for r in rows)
    for group in _stack(widths, label_width, min(TABLE_MAX_WIDTH, console.width)):
        t = Table(show_lines=False)
        t.add_column("", style="bold", no_wrap=True)
        for i in group:
            t.add_column(escape(titles[i]), overflow="fold")
        for row in rows:
            t.add_row(row[0], *(escape(row[i + 1]) for i in group))
        console.print(t)
    note = chat_template_note(reports)
    if note:
        console.print(("[bold]warning[/]: " if note["severity"] == "warning" else "note: ") + escape(note["text"]))


__all__ = ["CompareError", "chat_template_note", "load_run", "columns_of", "compare_columns", "compare_rows",
           "compare_json", "column_title", "render_compare", "ROWS", "RUN_ROWS"]
