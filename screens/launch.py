"""Step 5 — Launch, used for the baseline and the EAGLE3 server.

Top to bottom: the phase timeline (each phase's elapsed time, the current one animated, compile-cache
hits), host CPU and RAM gauges, the exact command (c shows it in full and copies it), the smoke-test
result, the benchmark progress (n/30 requests, tok/s so far, ETA), problems (diagnosis panels and
failed checks), acceptance and tokens/s over time while a bench runs (the server's /metrics about once a
second: BenchSample events; hidden until the first window), and the live log (collapsed ×N or raw,
follow/pause, filter).

A tune run has one such pane per arm; its bench line says which workload and repeat runs ("sonnet 2/3",
from ArmProgress). A run opened with --open shows the saved log files instead, one at a time (`[` / `]`).
"""

from __future__ import annotations

import re
from pathlib import Path

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.core import events as ev
from tui.widgets.charts import AcceptanceOverTime
from tui.widgets.facts import facts_text
from tui.widgets.common import FACT_ICONS, status_style
from tui.widgets.diagnosis import DiagnosisPanel
from tui.widgets.gauges import HostGauges
from tui.widgets.log_view import LogPanel, LogView
from tui.widgets.phases import PhaseTimeline
from tui.widgets.progress import ProgressLine

from .base import FAILED_STATES, StepPane

RESULT_FACTS = ("requests", "output throughput", "median TPOT / TTFT", "acceptance")


class LaunchPane(StepPane):
    # A failed launch at 80×24: the banner leads (its evidence one row each, the log below shows them whole), the
    # host gauges go (the server is gone), the problems box does not repeat the banner's diagnosis and lists the
    # failed checks one row each, so the log keeps rows of its own. With the log focused (l, tab, its filter) the
    # banner folds to its title row and the problems box and the live chart step aside: the log has the pane.
    DEFAULT_CSS = """
    LaunchPane > .launch-line { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    LaunchPane > #problems { height: auto; max-height: 45%; display: none; }
    LaunchPane > #problems.-shown { display: block; }
    LaunchPane > #problems > .problem-facts { height: auto; }
    LaunchPane.-failed > HostGauges { display: none; }
    LaunchPane.-failed > FailureBanner { margin: 0; }
    LaunchPane.-failed > #problems > DiagnosisPanel.-lead { display: none; }
    LaunchPane.-failed > #problems > .problem-facts { text-wrap: nowrap; text-overflow: ellipsis; }
    LaunchPane.-log-focus > FailureBanner { max-height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    LaunchPane.-log-focus > #problems { display: none; }
    LaunchPane.-log-focus > AcceptanceOverTime.-shown { display: none; }
    LaunchPane > AcceptanceOverTime { height: 40%; min-height: 9; max-height: 16; display: none; }
    LaunchPane > AcceptanceOverTime.-shown { display: block; }
    """

    COMPACT_BANNER = True

    def __init__(self, step: str, title: str, max_log_lines: int = 10_000) -> None:
        super().__init__(step, title)
        self.max_log_lines = max_log_lines
        self.command_text = ""
        self.command_argv: list[str] = []
        self.bench_command_text = ""
        self.smoke: ev.Fact | None = None
        self.lossless: ev.Fact | None = None
        self.result_facts: dict[str, ev.Fact] = {}
        self.failed_facts: list[ev.Fact] = []
        self.diagnoses: list[ev.Diagnosis] = []
        self.req: ev.Progress | None = None
        self.tok: ev.Progress | None = None
        self.attempt = 0
        self.arm_progress: ev.ArmProgress | None = None
        # A run opened with --open: the step's saved logs, paged with [ / ] (see tui/browse.py).
        self.log_files: list[Path] = []
        self.log_index = 0
        self.log_loader: "object | None" = None  # callable(path, log_view) that fills the log view
        self._repeat_facts: dict[tuple[str, int], dict[str, ev.Fact]] = {}  # (workload, repeat) → its numbers
        self._notices: list[ev.Notice] = []  # the step's notices: --open shows them above each log file

    def compose_body(self) -> ComposeResult:
        yield PhaseTimeline(id=f"{self.step}-phases")
        yield HostGauges(id=f"{self.step}-gauges")
        yield Static("", classes="launch-line launch-command", markup=False)
        yield Static("", classes="launch-line launch-smoke", markup=False)
        yield ProgressLine("Bench", id=f"{self.step}-bench", bar_width=12)
        with VerticalScroll(id="problems"):
            yield Static("", classes="problem-facts", markup=False)
        yield AcceptanceOverTime(id=f"{self.step}-live")
        yield LogPanel(self.max_log_lines, id=f"{self.step}-log")

    def on_mount(self) -> None:
        super().on_mount()
        self._draw_command()
        self._draw_smoke()
        self._draw_bench()

    # -- accessors ----------------------------------------------------------------------------------------
    @property
    def log_panel(self) -> LogPanel:
        return self.query_one(LogPanel)

    @property
    def log_view(self) -> LogView:
        return self.query_one(LogView)

    @property
    def timeline(self) -> PhaseTimeline:
        return self.query_one(PhaseTimeline)

    @property
    def live_chart(self) -> AcceptanceOverTime:
        return self.query_one(AcceptanceOverTime)

    def add_samples(self, samples: list[ev.BenchSample]) -> None:
        """The bench's /metrics windows as they arrive (the pump hands them over in batches): the live chart
        appears with the first one and repaints at most a few times a second."""
        chart = self.live_chart
        chart.add_class("-shown")
        chart.add_samples(samples)

    # -- a failed launch: the banner, the problems and the log share the pane ------------------------------
    def set_state(self, state: str, seconds: float | None = None, summary: str = "") -> None:
        super().set_state(state, seconds, summary)
        failed = state in FAILED_STATES
        self.set_class(failed, "-failed")
        if not self.is_mounted:
            return
        self.timeline.set_max_rows(1 if failed else None)  # where it stopped; the banner says the rest
        self._mark_lead()
        self._draw_problems()

    def _mark_lead(self) -> None:
        """The diagnosis the banner shows is not repeated in the problems box below it."""
        lead = self.lead_problem()[0] if self.state in FAILED_STATES else None
        for panel in self.query("#problems > DiagnosisPanel").results(DiagnosisPanel):
            panel.set_class(panel.diag is lead, "-lead")

    def note_problem(self, event: ev.Event) -> None:
        super().note_problem(event)
        self._mark_lead()

    def on_descendant_focus(self, _event: events.DescendantFocus) -> None:
        self._follow_focus()

    def on_descendant_blur(self, _event: events.DescendantBlur) -> None:
        self.call_after_refresh(self._follow_focus)  # focus may be moving to the filter, still inside the log

    def _follow_focus(self) -> None:
        focused = self.app.focused
        self.set_class(focused is not None and self.log_panel in focused.ancestors_with_self, "-log-focus")

    # -- events ---------------------------------------------------------------------------------------------
    def reset(self) -> None:
        self.attempt += 1
        self.smoke = self.lossless = None
        self.result_facts.clear()
        self._repeat_facts.clear()
        self._notices.clear()
        self.failed_facts.clear()
        self.diagnoses.clear()
        self.req = self.tok = None
        self.arm_progress = None
        self.query_one(ProgressLine).set_prefix("")
        self.live_chart.clear()
        self.live_chart.remove_class("-shown")
        self.timeline.reset()
        self.query_one(".launch-smoke").display = True
        self.query_one(ProgressLine).display = True
        problems = self.query_one("#problems")
        for panel in list(problems.query(DiagnosisPanel)):
            panel.remove()
        self._draw_problems()
        self._draw_smoke()
        self._draw_bench()
        if self.attempt > 1:
            self.log_view.add_notice("info", f"attempt {self.attempt}")

    def handle(self, event: ev.Event) -> None:
        if isinstance(event, ev.Phase):
            self.timeline.phase(event.phase, event.status, event.elapsed_s, event.detail)
        elif isinstance(event, ev.CompileCache):
            self.timeline.cache(event.hit)
        elif isinstance(event, ev.Command):
            if event.role == "serve":
                self.command_text = event.text
                self.command_argv = list(event.argv)
                self._draw_command()
            elif event.role == "bench":
                self.bench_command_text = event.text
        elif isinstance(event, ev.Fact):
            self._fact(event)
        elif isinstance(event, ev.Diagnosis):
            self.diagnoses.append(event)
            problems = self.query_one("#problems", VerticalScroll)
            problems.mount(DiagnosisPanel(event, max_evidence=4))
            self._draw_problems()
            self._mark_lead()
        elif isinstance(event, ev.Notice):
            self.log_view.add_notice(event.level, event.text)
            self._notices.append(event)
        elif isinstance(event, ev.ArmProgress):
            self._arm_progress(event)
        elif isinstance(event, ev.StepFinished):
            self.timeline.end()
            self._draw_bench()
            # A launch that failed before the smoke test: hide the lines that never ran, keep the problems.
            never = event.status not in ("passed", "warned") and self.smoke is None
            self.query_one(".launch-smoke").display = not never
            self.query_one(ProgressLine).display = not never

    def _arm_progress(self, e: ev.ArmProgress) -> None:
        """A new workload or repeat starts: the bench line shows its own progress, labelled "sonnet 2/3"."""
        if e.repeat > 0:
            self._repeat_facts.setdefault((e.workload, e.repeat), {})
        prev = self.arm_progress
        self.arm_progress = e
        if prev is None or (prev.workload, prev.repeat) != (e.workload, e.repeat):
            self.result_facts.clear()
            if self.req is not None and self.req.done:  # the previous repeat's; this one's may be here already
                self.req = self.tok = None
        label = f"{e.workload} probe" if e.repeat == 0 else f"{e.workload} {e.repeat}/{e.repeats}"
        self.query_one(ProgressLine).set_prefix(label)
        self._draw_bench()

    # -- a run opened with --open -------------------------------------------------------------------------
    def show_closed(self, files: list[Path], loader: object) -> None:
        """Browse mode: no live server; the log view pages through the step's saved log files."""
        self.log_files = list(files)
        self.log_loader = loader
        self.query_one(HostGauges).display = False  # the host now is not the host of the run
        self.page_log(0)

    def page_log(self, delta: int) -> Path | None:
        if not self.log_files:
            self.log_view.clear()
            self.log_view.add_notice("info", "no log files of this step in the run directory")
            return None
        self.log_index = (self.log_index + delta) % len(self.log_files)
        path = self.log_files[self.log_index]
        lv = self.log_view
        lv.clear()
        lv.total_raw = lv.total_clean = 0
        lv.errors = 0
        n = len(self.log_files)
        lv.follow = False
        lv.add_notice("info", f"{path.name} ({self.log_index + 1} of {n}{': [ ] switch' if n > 1 else ''})")
        for note in self._notices:
            lv.add_notice(note.level, note.text)
        if callable(self.log_loader):
            self.log_loader(path, lv)
        lv.scroll_home(animate=False, immediate=True)
        self._bench_of_log(path)
        return path

    def _bench_of_log(self, path: Path) -> None:
        """A tune arm's `{step}.{workload}.r{i}.bench.log`: the Bench line shows that repeat's numbers, labelled."""
        m = re.fullmatch(re.escape(self.step) + r"\.(.+)\.r(\d+)\.bench\.log", path.name)
        if m is None or self.arm_progress is None:
            return
        key = (m.group(1), int(m.group(2)))
        facts = self._repeat_facts.get(key)
        if not facts:
            return
        ap = self.arm_progress
        self._arm_progress(ev.ArmProgress(self.step, key[0], key[1], ap.repeats, ap.workloads))
        self.result_facts.clear()
        self.result_facts.update(facts)
        self._draw_bench()

    def _fact(self, f: ev.Fact) -> None:
        if f.name == "smoke test":
            self.smoke = f
            self._draw_smoke()
        elif f.name == "lossless check":
            self.lossless = f
            self._draw_smoke()
        elif f.name in RESULT_FACTS:
            self.result_facts[f.name] = f
            ap = self.arm_progress
            if ap is not None and ap.repeat > 0:  # kept per repeat: --open pages the Bench line with the logs
                self._repeat_facts.setdefault((ap.workload, ap.repeat), {})[f.name] = f
            self._draw_bench()
        elif f.name == "startup" and f.status == "pass":
            self.set_hint("")
            self.summary = f.value
            self.refresh_title()
        if f.status == "fail" and f.name != "smoke test":
            self.failed_facts.append(f)
            self._draw_problems()

    def progress(self, event: ev.Progress) -> None:
        if event.task == "tokens":
            self.tok = event
        else:
            self.req = event
        self._draw_bench()

    # -- drawing ---------------------------------------------------------------------------------------------
    def _draw_command(self) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("Cmd    ", style="bold")
        if self.command_text:
            t.append("[c] ", style="dim")
            words = [w for w in self.command_text.split() if w != "\\"]
            while words and "=" in words[0] and not words[0].startswith("-"):
                words.pop(0)  # env assignments: shown in full with c
            if words and words[0].startswith("/"):
                words[0] = "…/" + words[0].rsplit("/", 1)[-1]  # an absolute interpreter path: in full with c
            t.append("$ " + " ".join(words))
        else:
            t.append("vllm serve … (shown when the server starts)", style="dim")
        self.query_one(".launch-command", Static).update(t)

    def _draw_smoke(self) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("Smoke  ", style="bold")
        if self.smoke is None:
            t.append("after the server is ready: one greedy completion", style="dim")
        else:
            f = self.smoke
            t.append(FACT_ICONS.get(f.status, "?"), style=status_style("bold green" if f.status == "pass" else "bold red"))
            t.append(f" {f.value}")
            if self.lossless is not None:
                # Both on one line at 80 columns: the smoke detail gives way to the lossless verdict.
                lf = self.lossless
                t.append("   lossless ", style="bold")
                t.append(FACT_ICONS.get(lf.status, "?") + ("" if lf.status == "pass" else f" {lf.value}"),
                         style="" if lf.status == "pass" else status_style("bold yellow"))
            elif f.detail:
                t.append(f" — {f.detail}", style="dim")
        self.query_one(".launch-smoke", Static).update(t)

    def _draw_bench(self) -> None:
        line = self.query_one(ProgressLine)
        rf = self.result_facts
        if "output throughput" in rf or "requests" in rf:
            # The summary on one line where it fits, else on two (requests and throughput, then the
            # latencies and acceptance), abbreviated on purpose before anything is cut.
            first, second, short = [], [], []
            if "requests" in rf:
                first.append(f"{FACT_ICONS.get(rf['requests'].status, '?')} {rf['requests'].value}")
            if "output throughput" in rf:
                first.append(rf["output throughput"].value)
            if "median TPOT / TTFT" in rf:
                v = rf["median TPOT / TTFT"].value
                second.append("TPOT/TTFT " + v)
                short.append("TPOT/TTFT " + v.replace(" ms / ", " / "))  # "7.00 / 261.50 ms"
            if "acceptance" in rf:
                v = rf["acceptance"].value
                second.append("acceptance " + v)
                short.append("acc. " + v.split(" (", 1)[0])  # "68.94%", without the length
            choices = [" · ".join(first + second), " · ".join(first + short)]
            if second:
                head = " · ".join(first)
                choices += [head + "\n" + " · ".join(second), head + "\n" + " · ".join(short)]
            if len(first) > 1:  # a tune arm's "sonnet 2/3 · " leads the line: the requests alone on the first
                choices.append(first[0] + "\n" + " · ".join(first[1:] + short))
                if len(short) > 1:
                    choices.append(first[0] + "\n" + " · ".join(first[1:] + short[1:]) + "\n" + short[0])
            line.set_choices(choices)
            return
        if self.req is None:
            line.set_text("after the smoke test: vllm bench serve")
            return
        r = self.req
        extra = []
        if self.tok is not None and self.tok.rate:
            extra.append(f"{self.tok.rate:.1f} tok/s")
        eta = r.eta_s if not r.done else None
        text_extra = " · ".join(extra)
        line.set(r.completed, r.total, "req", None, eta, extra=text_extra)

    def _draw_problems(self) -> None:
        box = self.query_one("#problems", VerticalScroll)
        if self.state in FAILED_STATES and self.diagnoses:
            # The banner leads with the diagnosis and its fix: each failed check on one row, without its own fix.
            t = Text()
            for i, f in enumerate(self.failed_facts):
                t.append("\n" if i else "")
                t.append(f"{FACT_ICONS.get(f.status, '?')} {f.name}: ", style=status_style("bold red"))
                t.append(f.value + (f" — {f.detail}" if f.detail else ""))
        else:
            t = facts_text(self.failed_facts, icon_style=status_style("bold red"), remedy_always=True)
        facts = self.query_one(".problem-facts", Static)
        facts.update(t)
        facts.display = bool(self.failed_facts)
        box.set_class(bool(self.failed_facts or self.diagnoses), "-shown")

    def full_commands(self) -> str:
        out = []
        if self.command_text:
            out.append(f"# {self.title}: vllm serve\n{self.command_text}")
        if self.bench_command_text:
            out.append(f"# benchmark\n{self.bench_command_text}")
        return "\n\n".join(out)
