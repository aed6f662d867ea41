"""Headless front end: renders engine events with rich on stderr (stdout stays free for --json)."""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from .core import events as ev
from .core.secrets import redact_event

_FACT_ICON = {"pass": "[green]✓[/]", "warn": "[yellow]![/]", "fail": "[red]✗[/]", "info": "[blue]·[/]"}
_STATUS_STYLE = {"passed": "green", "warned": "yellow", "failed": "red", "skipped": "dim",
                 "unavailable": "dim", "interrupted": "magenta"}
_SEV_STYLE = {"error": "red", "warning": "yellow", "info": "blue"}
HEARTBEAT_S = 60.0


class HeadlessRenderer:
    def __init__(self, console: Console | None = None, verbose: bool = False):
        self.console = console or Console(file=sys.stderr, highlight=False)
        self.verbose = verbose
        self.progress: Progress | None = None
        self.tasks: dict[tuple[str, str], TaskID] = {}
        self.step_rows: list[tuple[str, str, float, str]] = []
        self.diagnoses: list[ev.Diagnosis] = []
        self._last_bench_print = 0.0
        self.phase_spinner: Progress | None = None
        self._pending_rule: tuple[str, str] | None = None
        self._phase_since: tuple[str, float, float] | None = None  # (phase, started, last heartbeat)
        self.titles: dict[str, str] = {}  # step id → title, from StepStarted (a tune run's arms have their own)
        self.nodes: dict[str, str] = {}  # step id → the fleet node it runs on (from StepStarted)
        self._where: tuple[str, str] | None = None  # (step, node) of the last line printed for a fleet node

    # -- the current startup phase: a spinner with its elapsed time (TTY), a start line otherwise ----------
    def _phase_started(self, e: ev.Phase) -> None:
        self._phase_stop()
        if e.phase == "ready":
            return
        if not self.console.is_terminal:
            self.console.print(f"  [dim]… {escape(e.phase)} started[/]")
            self._phase_since = (e.phase, time.monotonic(), time.monotonic())
            return
        self.phase_spinner = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                      console=self.console, transient=True)
        self.phase_spinner.add_task(f"{e.phase} …", total=None)
        self.phase_spinner.start()

    def _heartbeat(self) -> None:
        """Non-TTY: a line every HEARTBEAT_S during a long phase, so a CI or nohup log shows it is alive."""
        if self._phase_since is None:
            return
        phase, start, last = self._phase_since
        now = time.monotonic()
        if now - last >= HEARTBEAT_S:
            self._phase_since = (phase, start, now)
            self.console.print(f"  [dim]… {escape(phase)} still running ({now - start:.0f}s)[/]")

    def _phase_stop(self) -> None:
        self._phase_since = None
        if self.phase_spinner is not None:
            self.phase_spinner.stop()
            self.phase_spinner = None

    # -- progress bars ---------------------------------------------------------------------------
    def _progress(self, unit: str) -> Progress:
        if self.progress is None:
            cols: list[Any] = [TextColumn("  {task.description}"), BarColumn()]
            if unit == "B":
                cols += [DownloadColumn(), TransferSpeedColumn()]
            else:
                cols += [TextColumn("{task.completed:.0f}/{task.total:.0f} {task.fields[unit]}"),
                         TextColumn("{task.fields[rate]}")]
            cols.append(TimeRemainingColumn())
            self.progress = Progress(*cols, console=self.console, transient=True)
            self.progress.start()
        return self.progress

    def _stop_progress(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
            self.tasks.clear()

    def _on_progress(self, e: ev.Progress) -> None:
        if not self.console.is_terminal:
            # Plain log: one line per ~2 s and at the end (CI logs, pipes).
            now = time.monotonic()
            if e.done or now - self._last_bench_print > 2.0:
                self._last_bench_print = now
                tot = f"/{e.total:.0f}" if e.total else ""
                rate = f" {e.rate:.2f} {e.unit}/s" if e.rate else ""
                self.console.print(f"  {escape(e.description or e.task)}: {e.completed:.0f}{tot} {e.unit}{rate}")
            return
        prog = self._progress(e.unit)
        key = (e.step, e.task)
        rate = f"{e.rate:.2f} {e.unit}/s" if e.rate else ""
        if key not in self.tasks:
            self.tasks[key] = prog.add_task(e.description or e.task, total=e.total, unit=e.unit, rate=rate)
        prog.update(self.tasks[key], completed=e.completed, total=e.total, rate=rate,
                    description=e.description or e.task)
        if e.done:
            self._stop_progress()

    # -- events ----------------------------------------------------------------------------------------
    def __call__(self, e: ev.Event) -> None:
        e = redact_event(e)  # the engine redacts already; a renderer fed from elsewhere must not leak either
        c = self.console
        if isinstance(e, ev.Progress):
            self._on_progress(e)
            return
        if isinstance(e, ev.LogLine):
            self._heartbeat()
            if self.verbose:
                c.print(f"[dim]{escape(e.text)}[/]", markup=True, soft_wrap=True)
            return
        self._stop_progress()
        if self._pending_rule is not None and not (isinstance(e, ev.StepFinished) and e.status == "skipped"):
            step, title = self._pending_rule
            self._pending_rule = None
            node = self.nodes.get(step) or (e.node if e.step == step else "")
            c.rule(f"[bold]{escape(title)}[/] [dim]({step})[/]" + (f" [cyan]on {escape(node)}[/]" if node else ""),
                   align="left")
            self._where = (step, node)
        self._node_header(e)
        if isinstance(e, ev.RunStarted):
            sim = " [bold magenta]SIMULATED[/]" if e.simulated else ""
            c.print(f"[bold]specdec-tui[/] profile [cyan]{escape(e.profile)}[/]{sim} → {escape(e.run_dir)}", soft_wrap=True)
        elif isinstance(e, ev.StepStarted):
            # The header is printed with the step's first output, so skipped steps take one line each.
            self._pending_rule = (e.step, e.title)
            self.titles[e.step] = e.title
            if e.node:
                self.nodes[e.step] = e.node
        elif isinstance(e, ev.Fact):
            line = f"  {_FACT_ICON.get(e.status, '?')} {escape(e.name)}: [bold]{escape(e.value)}[/]"
            if e.detail:
                line += f" [dim]— {escape(e.detail)}[/]"
            c.print(line, soft_wrap=True)
            if e.remedy and e.status in ("warn", "fail"):
                c.print(f"      [dim]fix:[/] {escape(e.remedy)}", soft_wrap=True)
        elif isinstance(e, ev.Phase):
            if e.status == "started":
                self._phase_started(e)
            elif e.status == "failed":
                self._phase_stop()
                c.print(f"  [red]✗[/] {escape(e.phase):<10} {e.elapsed_s:8.1f}s  [red]failed here[/]" + (f"  [dim]{escape(e.detail)}[/]" if e.detail else ""))
            else:
                self._phase_stop()
                c.print(f"  [cyan]▸[/] {escape(e.phase):<10} {e.elapsed_s:8.1f}s  [dim]{escape(e.detail)}[/]")
        elif isinstance(e, ev.CompileCache):
            if self.verbose:
                c.print(f"  [dim]compile cache {'hit' if e.hit else 'miss'}: {e.key}[/]")
        elif isinstance(e, ev.Notice):
            style = {"info": "blue", "warning": "yellow", "error": "red"}[e.level]
            c.print(f"  [{style}]{escape(e.text)}[/]", soft_wrap=True)
        elif isinstance(e, ev.Diagnosis):
            self.diagnoses.append(e)
            style = _SEV_STYLE.get(e.severity, "white")
            body = "\n".join(f"• {escape(x)}" for x in e.evidence[:8])
            body += f"\n[bold]Remedy:[/] {escape(e.remedy)}"
            c.print(Panel(body, title=f"[{style}]{e.severity.upper()}[/] {escape(e.title)} [dim]({e.id})[/]",
                          border_style=style, expand=True))
        elif isinstance(e, ev.ComparisonTable):
            self._on_table(e)
        elif isinstance(e, ev.MatrixTable):
            self._on_matrix(e)
        elif isinstance(e, ev.LoadTable):
            self._on_load(e)
        elif isinstance(e, ev.ArmProgress):
            if e.repeat == 0:
                c.print(f"  [cyan]▸[/] workload [bold]{escape(e.workload)}[/]: probe, then {e.repeats} bench repeat(s)")
        elif isinstance(e, ev.Snippet):
            c.print(Panel(escape(e.text), title="The tutorial's comparison (from the two JSON files)", expand=False))
        elif isinstance(e, ev.Command):
            indent = "    " if e.role == "tool" else "  "
            c.print(f"{indent}[dim]$ {escape(e.text)}[/]", soft_wrap=True)
        elif isinstance(e, ev.Artifact):
            if self.verbose:
                c.print(f"  [dim]wrote {escape(e.name)}: {escape(e.path)}[/]", soft_wrap=True)
        elif isinstance(e, ev.StepFinished):
            self._phase_stop()
            self.step_rows.append((e.step, e.status, e.seconds, e.summary))
            if e.status == "skipped":
                self._pending_rule = None
                c.print(f"[dim]– {escape(self._title(e.step))} ({e.step}): {escape(e.summary)}[/]")
                return
            style = _STATUS_STYLE.get(e.status, "white")
            c.print(f"  [{style}]{e.status}[/] in {e.seconds:.1f}s — {escape(e.summary)}", soft_wrap=True)
        elif isinstance(e, ev.RunFinished):
            self._summary(e)

    _NODE_LINES = (ev.Fact, ev.Notice, ev.Phase, ev.Command, ev.ArmProgress, ev.StepFinished, ev.Diagnosis)

    def _node_header(self, e: ev.Event) -> None:
        """A fleet runs arms on several nodes at once: when the lines turn to another step or node, say which."""
        if not e.node or not e.step or not isinstance(e, self._NODE_LINES) or self._where == (e.step, e.node):
            return
        self._where = (e.step, e.node)
        self.console.print(f"[bold]▌ {escape(self._title(e.step))}[/] [dim]({e.step})[/] [cyan]on {escape(e.node)}[/]")

    def _on_table(self, e: ev.ComparisonTable) -> None:
        t = Table(title="Baseline vs EAGLE3", show_lines=False)
        t.add_column("Metric")
        t.add_column("Baseline", justify="right")
        t.add_column("EAGLE3", justify="right")
        for label, b, x in e.rows:
            t.add_row(label, b, x)
        self.console.print(t)
        for line in e.notes:
            self.console.print(f"  [dim]{escape(line)}[/]")

    def _title(self, sid: str) -> str:
        return self.titles.get(sid) or ev.STEP_TITLES.get(sid, sid)

    def _on_matrix(self, e: ev.MatrixTable) -> None:
        """A tune run: per workload, the recommendation first, then arms × metrics (stats.matrix_rows)."""
        from .core.results.stats import matrix_columns, matrix_rows

        m = e.matrix
        width = self.console.width
        for wl in m.get("workloads") or []:
            rec = (m.get("recommendation") or {}).get(wl) or {}
            style = ("yellow" if rec.get("verdict") == "not_proven" else
                     "red" if rec.get("stop_tuning") or not rec.get("arm") else "green")
            self.console.print(Panel(escape(rec.get("text") or "n/a")
                                     + (f"\n[dim]{escape(rec['reason'])}[/]" if rec.get("reason") else ""),
                                     title=f"Recommendation — {escape(wl)}", border_style=style, expand=False))
            body = matrix_rows(m, wl, width)
            if not body:
                continue
            head = ["Metric", *matrix_columns(m, width)]
            t = Table(title=f"Step 3 matrix — {wl}", show_lines=False)
            for i, h in enumerate(head):
                t.add_column(str(h), justify="left" if i == 0 else "right", overflow="fold")
            for r in body:
                t.add_row(*(escape(str(x)) for x in r))
            self.console.print(t)
            nf = (m.get("noise_floor") or {}).get(wl) or {}
            if nf.get("ratio") is not None:
                ci = nf.get("ci95")
                self.console.print(f"  [dim]noise floor (baseline vs baseline): {nf['ratio']:.3f}x"
                                   + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "") + "[/]")
            cov = (m.get("coverage") or {}).get(wl)
            if cov:
                self.console.print(f"  [dim]{escape(cov)}[/]")
            for note in (m.get("notes") or {}).get(wl) or []:
                self.console.print(f"  [yellow]note:[/] {escape(note)}")
            spread = ((m.get("fleet") or {}).get("spread") or {}).get(wl) or {}
            if spread.get("text"):  # a fleet run: each arm against its own node's baseline; the nodes' spread
                self.console.print(f"  [dim]fleet: each speedup is against the baseline of the arm's own node "
                                   f"(@nK); {escape(spread['text'])}[/]")

    def _on_load(self, e: ev.LoadTable) -> None:
        """A load sweep: where each k pays, the best k per level, the schedule, the SLO, drift and the model, as
        tui.core.results.load_text.load_lines words them."""
        from .core.results.load_text import load_lines

        lines = load_lines(e.load, max(self.console.width - 4, 40))
        if lines:
            self.console.print(Panel("\n".join(escape(x) for x in lines), title="Load: where speculation stops paying",
                                     expand=False))

    def _summary(self, e: ev.RunFinished) -> None:
        c = self.console
        if not self.step_rows:  # nothing ran (e.g. a run directory refused): the message above says why
            c.print(f"exit code {e.exit_code}")
            return
        t = Table(title="Summary", show_header=True)
        t.add_column("Step")
        if self.nodes:
            t.add_column("Node")
        t.add_column("Status")
        t.add_column("Time", justify="right")
        t.add_column("Summary", overflow="fold")
        for sid, status, secs, summary in self.step_rows:
            style = _STATUS_STYLE.get(status, "white")
            node = [escape(self.nodes.get(sid, ""))] if self.nodes else []
            t.add_row(self._title(sid), *node, f"[{style}]{status}[/]", f"{secs:.1f}s", escape(summary))
        c.print(t)
        if e.report_path:
            c.print(f"report: {escape(e.report_path)}", soft_wrap=True)  # a path the user copies: never broken
        c.print(f"exit code {e.exit_code}")
