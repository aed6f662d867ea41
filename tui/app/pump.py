"""The event pump: engine events → widgets.

The engine calls `sink` synchronously, on the app's loop, for every event. The sink is cheap: log lines go into
per-step buffers flushed into the log widgets at most every LOG_FLUSH_S, Progress keeps only the latest value
per task, BenchSample windows are kept per step and handed to the panes in batches (the live acceptance chart of
the arm's pane, the matrix pane's charts), all announced by coalescing messages; every other event becomes one
`EngineEvent` message, which `on_engine_event` turns into step states, pane updates, diagnoses and toasts.

`EnginePump` is a mixin of `SpecdecApp` (tui/app/app.py): Textual finds its message handlers through the MRO.
"""

from __future__ import annotations

import time

from tui.screens.dataset import DatasetPane
from tui.screens.launch import LaunchPane
from tui.screens.matrix import MatrixPane
from tui.screens.profile import ProfilePane

from ..core import events as ev
from ..messages import EngineEvent, LogsPending, ProgressPending, SamplesPending

LOG_FLUSH_S = 0.1


class EnginePump:
    """The sink's buffers and the handlers that move engine events into the widgets."""

    def _init_pump(self) -> None:
        self._raw_buf: dict[str, list[str]] = {}
        self._clean_buf: dict[str, list[tuple[int, str, bool, int]]] = {}
        self._ranks_buf: dict[str, dict[int, int]] = {}
        self._logs_posted = False
        self._last_flush = 0.0
        self._flush_timer = None
        self._progress: dict[tuple[str, str], ev.Progress] = {}
        self._progress_posted = False
        self._samples: dict[str, list[ev.BenchSample]] = {}
        self._samples_posted = False
        self.log_lines_in = 0
        self.samples_in = 0

    # -- the sink (called synchronously by the engine, on this loop) ---------------------------------------
    def sink(self, e: ev.Event) -> None:
        t = type(e)
        if t is ev.LogLine:
            self._raw_buf.setdefault(e.step, []).append(e.text)  # type: ignore[attr-defined]
            self.log_lines_in += 1
            self._logs_pending()
        elif t is ev.CleanLog:
            self._clean_buf.setdefault(e.step, []).append(
                (e.line_id, e.text, e.is_error, e.ranks))  # type: ignore[attr-defined]
            self._logs_pending()
        elif t is ev.LogRanks:
            self._ranks_buf.setdefault(e.step, {})[e.line_id] = e.ranks  # type: ignore[attr-defined]
            self._logs_pending()
        elif t is ev.Progress:
            self._progress[(e.step, e.task)] = e  # type: ignore[attr-defined]
            if not self._progress_posted:
                self._progress_posted = True
                self.post_message(ProgressPending())
        elif t is ev.BenchSample:
            self._samples.setdefault(e.step, []).append(e)  # type: ignore[arg-type]
            self.samples_in += 1
            if not self._samples_posted:
                self._samples_posted = True
                self.post_message(SamplesPending())
        else:
            self.events.append(e)
            self.post_message(EngineEvent(e))

    def _logs_pending(self) -> None:
        if not self._logs_posted:
            self._logs_posted = True
            self.post_message(LogsPending())

    def on_logs_pending(self, _msg: LogsPending) -> None:
        if self._flush_timer is not None:
            return
        wait = LOG_FLUSH_S - (time.monotonic() - self._last_flush)
        if wait > 0.005:
            self._flush_timer = self.set_timer(wait, self._timer_flush)
        else:
            self.flush_logs()

    def _timer_flush(self) -> None:
        self._flush_timer = None
        self.flush_logs()

    def flush_logs(self) -> None:
        """Move buffered log lines into the log widgets (batched)."""
        self._logs_posted = False
        self._last_flush = time.monotonic()
        raw, clean, ranks = self._raw_buf, self._clean_buf, self._ranks_buf
        self._raw_buf, self._clean_buf, self._ranks_buf = {}, {}, {}
        cap = self.max_log_lines
        for step in set(raw) | set(clean) | set(ranks):
            if step not in self.launch_steps:
                continue
            lv = self.query_one(f"#pane-{step}", LaunchPane).log_view
            if step in raw:
                lines = raw[step]
                lv.total_raw += max(0, len(lines) - cap)  # a burst beyond the cap: only the newest are kept
                lv.add_raw(lines[-cap:])
            if step in clean:
                items = clean[step]
                lv.total_clean += max(0, len(items) - cap)
                lv.add_clean(items[-cap:])
            if step in ranks:
                lv.set_ranks(ranks[step])

    def on_progress_pending(self, _msg: ProgressPending) -> None:
        self._progress_posted = False
        latest, self._progress = self._progress, {}
        for (step, _task), p in latest.items():
            if step in self.plan.run_steps:
                self.pane(step).progress(p)

    def on_samples_pending(self, _msg: SamplesPending) -> None:
        """BenchSample windows to the step's live chart and to the matrix pane's charts; a step without a chart
        (or not shown in this run) ignores them."""
        self._samples_posted = False
        batch, self._samples = self._samples, {}
        found = self.query("#pane-results")
        res = found.first() if found else None
        for step, samples in batch.items():
            pane = self.query(f"#pane-{step}") if step in self.launch_steps else None
            if pane and isinstance(pane.first(), LaunchPane):
                pane.first().add_samples(samples)
            if isinstance(res, MatrixPane):
                res.add_samples(step, samples)

    # -- engine events --------------------------------------------------------------------------------------
    def on_engine_event(self, msg: EngineEvent) -> None:
        e = msg.event
        step = e.step
        if isinstance(e, ev.RunStarted):
            if self.engine is not None:  # show the dataset URL with {sim_hub} etc. resolved
                self.query_one(DatasetPane).set_url(self.engine.ctx.ph.resolve(self.engine.profile.data["dataset"]["url"]))
            self._update_header()
            self._update_hint()
            return
        if isinstance(e, ev.StepStarted):
            if step in self.status:
                self.query_one(ProfilePane).lock_profile()
                if e.attempt > 1:  # a retry: the earlier attempt's diagnoses are gone from the report too
                    self.results_pane.drop_diagnoses(step)
                self.pane(step).reset()
                self.set_step_status(step, "running")
                if e.node:  # a fleet run: the node this arm runs on
                    self.set_step_node(step, e.node)
                if self.busy == step and not self._quitting:
                    self.show_step(step)
            return
        if isinstance(e, ev.StepFinished):
            if step in self.status:
                self.pane(step).handle(e)
                self.set_step_status(step, e.status, e.seconds, e.summary)
                if e.status in ("failed", "unavailable", "interrupted") and self.engine is not None \
                        and not self._quitting:
                    self.query_one(ProfilePane).unlock_for_retry(self.engine.profile, self._env_facts(), e.status)
            self._update_header()
            return
        if isinstance(e, ev.RunFinished):
            self.closed = True
            self.exit_code = e.exit_code
            self.run_finished.set()
            self.results_pane.handle(e)
            self._update_header()
            self._update_hint()
            self.refresh_bindings()
            return
        if isinstance(e, ev.Diagnosis):
            self.results_pane.add_diagnosis(e)
            if step in self.plan.run_steps:
                self.pane(step).note_problem(e)
                if step != "results":
                    self.pane(step).handle(e)
            return
        if isinstance(e, ev.Fact) and e.status == "fail" and step in self.plan.run_steps:
            self.pane(step).note_problem(e)
        if isinstance(e, ev.Notice) and not step:
            if e.level != "info":
                self.notify(e.text, severity="warning" if e.level == "warning" else "error")
            return
        if step in self.plan.run_steps:
            self.pane(step).handle(e)

