"""Saved runs side by side (`specdec-tui compare RUN_DIR RUN_DIR…` in the app): one column per run, one row per
number: profile, verdict, baseline and speculative output tok/s, speedup, acceptance, TPOT.

`CompareScreen(reports)` takes the loaded report dicts (report.json of each run, as `tui.core.compare.load_run`
returns them) and works pushed on any app; `CompareApp(reports)` hosts it alone (what `compare` without
--headless runs). A tune run's column is its recommended arm on its first workload (the best arm by mean
throughput when there is no recommendation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from tui.widgets.common import status_style


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _f(v: Any, nd: int = 2, unit: str = "") -> str:
    x = _num(v)
    return "n/a" if x is None else f"{x:.{nd}f}{unit}"


def run_label(report: dict[str, Any], index: int) -> str:
    """The column heading: the run directory's name (a timestamp and the profile), else #index."""
    rd = report.get("run_dir")
    return Path(str(rd)).name if rd else f"run {index + 1}"


def _tune_pick(matrix: dict[str, Any]) -> tuple[str | None, str | None]:
    """(arm id, workload) a tune run is summed up by: the recommendation of its first workload, else the arm
    with the highest mean throughput there."""
    wls = matrix.get("workloads") or []
    if not wls:
        return None, None
    w = wls[0]
    rec = (matrix.get("recommendation") or {}).get(w) or {}
    if rec.get("arm"):
        return rec["arm"], w
    best, best_v = None, None
    for a in matrix.get("arms") or []:
        if a.get("kind") == "baseline":
            continue
        v = _num((((matrix.get("cells") or {}).get(a.get("id")) or {}).get(w) or {}).get("output_throughput", {})
                 .get("mean"))
        if v is not None and (best_v is None or v > best_v):
            best, best_v = a.get("id"), v
    return best, w


def run_numbers(report: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one run the comparison shows (two-arm or tune)."""
    matrix = report.get("matrix") if isinstance(report.get("matrix"), dict) else None
    v = report.get("verdict") or {}
    out: dict[str, Any] = {"profile": report.get("profile") or "?", "simulated": bool(report.get("simulated")),
                           "verdict": v.get("text") if isinstance(v, dict) else None,
                           "ok": bool(v.get("ok")) if isinstance(v, dict) else False, "arm": "EAGLE3"}
    if matrix is not None:
        arm_id, w = _tune_pick(matrix)
        cells = matrix.get("cells") or {}
        arms = {a.get("id"): a for a in matrix.get("arms") or []}
        base = next((a.get("id") for a in arms.values() if a.get("kind") == "baseline"), "baseline")
        bc = (cells.get(base) or {}).get(w or "") or {}
        sc = (cells.get(arm_id) or {}).get(w or "") or {}
        out.update({
            "arm": f"{(arms.get(arm_id) or {}).get('title') or arm_id} · {w}" if arm_id else "none",
            "baseline_tps": (bc.get("output_throughput") or {}).get("mean"),
            "spec_tps": (sc.get("output_throughput") or {}).get("mean"),
            "speedup": (sc.get("speedup") or {}).get("ratio"),
            "speedup_ci": (sc.get("speedup") or {}).get("ci95"),
            "acceptance": sc.get("acceptance_rate"),
            "acceptance_length": sc.get("acceptance_length"),
            "baseline_tpot": bc.get("median_tpot_ms"), "spec_tpot": sc.get("median_tpot_ms"),
        })
        return out
    runs = report.get("runs") or {}
    b, e = runs.get("baseline") or {}, runs.get("eagle3") or {}
    k = (report.get("settings") or {}).get("num_speculative_tokens")
    out.update({
        "arm": f"EAGLE3 k={k}" if k is not None else "EAGLE3",
        "baseline_tps": b.get("output_throughput"), "spec_tps": e.get("output_throughput"),
        "speedup": (report.get("comparison") or {}).get("output_throughput_speedup"), "speedup_ci": None,
        "acceptance": e.get("acceptance_rate"), "acceptance_length": e.get("acceptance_length"),
        "baseline_tpot": b.get("median_tpot_ms"), "spec_tpot": e.get("median_tpot_ms"),
    })
    return out


# -- SWAP ME: tui.core.compare's rows function (headless `compare`, not merged yet) builds these rows; until
# then the screen builds them here from the report dicts. [(row label, [cell per run])].
def compare_rows(reports: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    nums = [run_numbers(r) for r in reports]
    rows: list[tuple[str, list[str]]] = [
        ("Profile", [n["profile"] + (" (sim)" if n["simulated"] else "") for n in nums]),
        ("Verdict", [("✓ " if n["ok"] else "✗ ") + (n["verdict"] or "n/a") for n in nums]),
        ("Speculative arm", [n["arm"] for n in nums]),
        ("Baseline tok/s", [_f(n["baseline_tps"]) for n in nums]),
        ("Spec tok/s", [_f(n["spec_tps"]) for n in nums]),
        ("Speedup", [(_f(n["speedup"], 2, "x") + (f" [{n['speedup_ci'][0]:.2f}–{n['speedup_ci'][1]:.2f}]"
                                                  if isinstance(n["speedup_ci"], (list, tuple))
                                                  and len(n["speedup_ci"]) == 2
                                                  and all(_num(x) is not None for x in n["speedup_ci"]) else ""))
                     for n in nums]),
        ("Acceptance", [_f(n["acceptance"], 1, " %") + (f" (AL {_f(n['acceptance_length'])})"
                                                         if _num(n["acceptance_length"]) is not None else "")
                        for n in nums]),
        ("TPOT ms", [f"{_f(n['baseline_tpot'])} → {_f(n['spec_tpot'])}" for n in nums]),
    ]
    return rows
# -- end of SWAP ME ----------------------------------------------------------------------------------------------


def compare_table(reports: list[dict[str, Any]], labels: list[str]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, expand=True, show_edge=False, pad_edge=False)
    table.add_column("", no_wrap=True, style="bold", min_width=10, max_width=16)
    for lab in labels:
        table.add_column(lab, ratio=1, overflow="fold")
    for label, cells in compare_rows(reports):
        styled = []
        for c in cells:
            if label == "Verdict":
                styled.append(Text(c, style=status_style("green") if c.startswith("✓") else status_style("bold red")))
            else:
                styled.append(Text(c))
        table.add_row(label, *styled)
    return table


class CompareScreen(Screen[None]):
    """Runs as columns. esc / q closes it (in CompareApp: quits)."""

    DEFAULT_CSS = """
    CompareScreen { layout: vertical; }
    CompareScreen #compare-title { height: 1; padding: 0 1; background: $panel; text-style: bold; }
    CompareScreen #compare-scroll { height: 1fr; padding: 0 1; }
    CompareScreen #compare-table { height: auto; }
    CompareScreen #compare-legend { height: auto; color: $text-muted; margin: 1 0 0 0; }
    """
    BINDINGS = [Binding("escape,q", "close", "Close", id="compare-close")]

    def __init__(self, reports: list[dict[str, Any]], labels: list[str] | None = None,
                 paths: list[str] | None = None) -> None:
        super().__init__()
        self.reports = list(reports)
        self.labels = list(labels) if labels else [run_label(r, i) for i, r in enumerate(self.reports)]
        self.paths = list(paths) if paths else [str(r.get("run_dir") or "") for r in self.reports]

    def compose(self) -> ComposeResult:
        yield Static(f"specdec-tui · compare {len(self.reports)} runs", id="compare-title", markup=False)
        with VerticalScroll(id="compare-scroll"):
            yield Static(compare_table(self.reports, self.labels), id="compare-table")
            legend = Text()
            legend.append("Runs: ", style="bold")
            for lab, path in zip(self.labels, self.paths):
                legend.append(f"\n {lab}")
                if path and path != lab:
                    legend.append(f"  {path}", style="dim")
            legend.append("\nA tune run's column is its recommended arm on its first workload; "
                          "specdec-tui --open RUN_DIR shows every arm.", style="dim")
            yield Static(legend, id="compare-legend")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#compare-scroll").focus()

    def action_close(self) -> None:
        if len(self.app.screen_stack) > 2 or not isinstance(self.app, CompareApp):
            self.app.pop_screen()
        else:
            self.app.exit(0)


class CompareApp(App[int]):
    """`specdec-tui compare RUN_DIR RUN_DIR…` with a terminal: the CompareScreen alone."""

    TITLE = "specdec-tui compare"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", id="quit", priority=True)]

    def __init__(self, reports: list[dict[str, Any]], labels: list[str] | None = None,
                 paths: list[str] | None = None) -> None:
        super().__init__()
        self.reports, self.labels, self.paths = reports, labels, paths

    def on_mount(self) -> None:
        self.push_screen(CompareScreen(self.reports, self.labels, self.paths))

    def action_quit(self) -> None:  # type: ignore[override]
        self.exit(0)


def run_compare_app(reports: list[dict[str, Any]], labels: list[str] | None = None,
                    paths: list[str] | None = None) -> int:
    result = CompareApp(reports, labels, paths).run()
    return 0 if result is None else int(result)


__all__ = ["CompareScreen", "CompareApp", "run_compare_app", "compare_rows", "run_numbers", "run_label"]
