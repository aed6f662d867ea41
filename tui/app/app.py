"""The Textual front end: `specdec-tui` with a terminal attached. The App class, its layout and run control.

One main screen: a header (profile, target → draft, SIMULATED badge), the step list on the left, the
current step's pane on the right (a ContentSwitcher holding one pane per step from `screens/`), and a
footer with the bindings. The engine is the same one the headless runner drives; it runs in an async
worker on the app's event loop (child processes get PR_SET_PDEATHSIG from the thread that creates
them, so that thread must live as long as the app) and calls `SpecdecApp.sink` for every event.

The rest of the app lives beside this file, one job each: pump.py (the sink: engine events → widgets),
keygate.py (the bindings, and which of them can act now) over availability.py (a pure `why_not(state, action)`),
runcontrol.py (the keys that run, retry, stop and quit), actions.py (the keys that show or edit a pane: log,
paging, commands, save) and terminal.py (loss of the tty).
"""

from __future__ import annotations

import asyncio
import gc
import signal
from pathlib import Path
from typing import Any, Iterable

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import ContentSwitcher, DataTable, Input, Static
from textual.worker import Worker, WorkerState

from tui.screens.base import StepPane
from tui.screens.checkpoints import CheckpointsPane
from tui.screens.dataset import DatasetPane
from tui.screens.environment import EnvironmentPane
from tui.screens.launch import LaunchPane
from tui.screens.modals import HelpScreen
from tui.screens.profile import ProfilePane
from tui.screens.matrix import MatrixPane
from tui.screens.results import ResultsBase, ResultsPane

from ..browse import ClosedRun, show_closed_run
from ..core import events as ev
from ..core.run.engine import EXIT_INTERRUPTED, Engine
from ..core.profile.model import Profile
from ..messages import StepSelected
from ..runplan import StepPlan, plan_for
from ..widgets.charts import ChartsView
from ..widgets.common import env_frozen
from ..widgets.footer import StableFooter
from ..widgets.header import HeaderBar
from ..widgets.pathtext import PathText
from ..widgets.step_list import StepList
from .actions import PaneActions
from .keygate import APP_BINDINGS, KeyGate
from .pump import EnginePump
from .runcontrol import RunControl
from .terminal import TerminalLoss, watch_tty

LAUNCH_STEPS = ("baseline", "eagle3")  # a two-arm run's server steps (a tune run has one per arm: see `plan`)


class SpecdecApp(EnginePump, PaneActions, KeyGate, RunControl, TerminalLoss, App[int]):
    """specdec-tui's interactive front end. `run_app()` is the entry point the CLI calls."""

    TITLE = "specdec-tui"
    CSS_PATH = "app.tcss"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    BINDINGS = APP_BINDINGS

    def __init__(self, profile: Profile | None = None, run_dir: str | Path | None = None,
                 steps: list[str] | None = None, *, frozen: bool | None = None, handle_signals: bool = False,
                 max_log_lines: int = 10_000, browse: ClosedRun | None = None, executor: Any = None):
        super().__init__()
        self.executor = executor  # where the steps run (tui/core/exec): None for this host, a fleet's for --ray
        self.frozen = env_frozen() if frozen is None else frozen
        self.browse = browse  # --open RUN_DIR: a finished run, read-only; no engine ever starts
        if browse is not None:
            profile, run_dir = browse.profile, browse.path
        self.profile = profile
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._steps_arg = list(steps) if steps else None
        # The steps shown, one pane each: the run's steps of the profile (tui.core.plan.arms.run_steps).
        self.plan: StepPlan = browse.plan if browse is not None else plan_for(profile, self._steps_arg)
        self.requested_steps = list(self.plan.requested)
        self.handle_signals = handle_signals
        self.max_log_lines = max_log_lines
        self.engine: Engine | None = None
        self.status: dict[str, str] = {}
        self._init_status(self.plan)
        self.busy: str | None = None  # the step running now
        self.closed = browse is not None
        self.exit_code: int | None = browse.exit_code if browse is not None else None
        self.events: list[ev.Event] = []  # every low-rate event, in order (tests, debugging)
        self.run_finished = asyncio.Event()
        self.step_done = asyncio.Event()
        self.shutdown_done = asyncio.Event()  # set just before the app exits after ctrl+q
        self._step_worker: Any = None
        self._worker_done: asyncio.Event | None = None
        self._quitting = False
        self._unattended = False  # the run was started with "run everything" (a): a passed retry goes on
        self._terminal_lost = False
        self._run_started_at = 0.0
        self._init_pump()  # the sink's buffers (pump.py)

    # -- layout ----------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        p = self.profile
        yield HeaderBar(id="header")
        with Horizontal(id="main"):
            with Vertical(id="sidebar"):
                yield StepList(self.plan.steps, self.plan.titles, id="steps")
                yield Static("", id="next-hint", markup=False)
                yield PathText(id="run-info", lines=2)
            with ContentSwitcher(id="panes", initial="pane-profile"):
                yield ProfilePane(p, str(self.run_dir or ""))
                for sid in self.plan.run_steps:
                    yield self._make_pane(sid, self.plan)
        yield StableFooter(compact=True)

    def _make_pane(self, sid: str, plan: StepPlan) -> StepPane:
        p = self.profile
        if sid == "env":
            return EnvironmentPane()
        if sid == "checkpoints":
            return CheckpointsPane(p.models.target if p else "", p.draft_model if p else "")
        if sid == "dataset":
            return DatasetPane(p.data["dataset"]["url"] if p else "")
        if sid == "results":
            if plan.tune:
                return MatrixPane()
            return ResultsPane(p.speculative.num_speculative_tokens if p else None)
        return LaunchPane(sid, plan.pane_titles.get(sid, sid), self.max_log_lines)

    def _init_status(self, plan: StepPlan) -> None:
        old = self.status
        self.status = {s: old.get(s, "pending") for s in plan.steps}
        for sid in plan.run_steps:
            if sid not in plan.requested:
                self.status[sid] = "excluded"
            elif self.status[sid] == "excluded":
                self.status[sid] = "pending"

    @property
    def launch_steps(self) -> tuple[str, ...]:
        """The server steps of this run (one LaunchPane each)."""
        return self.plan.launch

    def title_of(self, sid: str) -> str:
        return self.plan.titles.get(sid, sid)

    async def apply_plan(self, plan: StepPlan) -> None:
        """Another profile was chosen before the run started: the step list and the panes follow it (a tune
        profile has one server step per arm and the matrix results pane)."""
        old = self.plan
        if plan == old:
            return
        switcher = self.query_one(ContentSwitcher)
        gone = [sid for sid in old.run_steps
                if sid not in plan.steps or (sid == "results" and old.tune != plan.tune)]
        if switcher.current and switcher.current.removeprefix("pane-") in gone:
            switcher.current = "pane-profile"
        for sid in gone:
            await self.pane(sid).remove()
        self.plan = plan
        self.requested_steps = list(plan.requested)
        self._init_status(plan)
        prev: StepPane = self.query_one(ProfilePane)
        for sid in plan.run_steps:
            try:
                pane = self.pane(sid)
            except Exception:
                pane = self._make_pane(sid, plan)
                pane.display = False
                await switcher.mount(pane, after=prev)
            if pane.title != plan.pane_titles.get(sid, pane.title) and sid != "results":
                pane.title = plan.pane_titles[sid]
                pane.refresh_title()
            prev = pane
        sl = self.query_one(StepList)
        sl.set_steps(plan.steps, plan.titles)
        for sid, st in self.status.items():
            sl.set_status(sid, st)
        self._update_hint()
        self.refresh_bindings()

    def on_mount(self) -> None:
        # Everything alive now (the imported modules, the widget tree) is long-lived: keep it out of the cyclic
        # collector's full passes, whose pauses were the slowest key presses while servers stream their logs.
        gc.freeze()
        if self.frozen:
            self.animation_level = "none"
            for inp in self.query(Input):
                inp.cursor_blink = False
        steps = self.query_one(StepList)
        for sid, st in self.status.items():
            if st != "pending":
                steps.set_status(sid, st)
        if self.browse is not None:
            show_closed_run(self, self.browse)
            steps.focus()
        elif self.profile is None:
            self.query_one("#profile-select").focus()  # nothing to run before a profile is chosen
        else:
            steps.focus()
        self._update_header()
        self._update_hint()
        if self.handle_signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGHUP):
                try:
                    loop.add_signal_handler(sig, self._on_signal, sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass

    def _on_signal(self, sig: int = signal.SIGTERM) -> None:
        if sig == signal.SIGHUP:
            self.terminal_lost()
            return
        if not self._quitting:
            self.call_later(self._start_shutdown)

    # -- helpers -----------------------------------------------------------------------------------------------
    def pane(self, step: str) -> StepPane:
        return self.query_one(f"#pane-{step}", StepPane)

    @property
    def current_pane_id(self) -> str:
        return (self.query_one(ContentSwitcher).current or "pane-profile").removeprefix("pane-")

    def show_step(self, step: str, move_cursor: bool = True) -> None:
        self.query_one(ContentSwitcher).current = f"pane-{step}"
        if move_cursor:
            sl = self.query_one(StepList)
            idx = self.plan.steps.index(step)
            if sl.highlighted != idx:
                sl.highlighted = idx
        self.refresh_bindings()

    def set_step_status(self, step: str, status: str, seconds: float | None = None, summary: str = "") -> None:
        self.status[step] = status
        self.query_one(StepList).set_status(step, status, seconds)
        self.pane(step).set_state(status, seconds, summary)
        self._update_hint()
        self.refresh_bindings()

    def set_step_node(self, step: str, node: str) -> None:
        """A fleet run (--ray): the step list names the node each arm runs on."""
        self.query_one(StepList).set_node(step, node)

    @property
    def cursor(self) -> str | None:
        """The step `n` runs next: Profile until the run starts, then what the engine says runs next."""
        if self.browse is not None:
            return None
        if self.status["profile"] != "passed" or self.engine is None:
            return "profile"
        if self.closed:
            return None
        return self.engine.next_step()

    @property
    def failed_step(self) -> str | None:
        """The step `r` retries: the engine's next step when its last attempt did not pass."""
        c = self.cursor
        if c and c != "profile" and self.engine is not None:
            st = self.engine.status_of(c)
            if st is not None and not st.settled:
                return c
        return None

    def _update_header(self) -> None:
        p = self.profile
        if self.engine is not None and self.engine.profile is not None:
            p = self.engine.profile
        if p is None and self.browse is not None:  # a run whose profile.toml no longer loads: the report's names
            rep = self.browse.report
            models = rep.get("models") or {}
            self.query_one(HeaderBar).set_profile(rep.get("profile"), models.get("target"), models.get("draft"),
                                                  bool(rep.get("simulated")), f"opened read-only (exit {self.exit_code})")
            return
        state = ""
        if self.browse is not None:
            state = f"opened read-only (exit {self.exit_code})"
        elif self.closed:
            state = f"finished (exit {self.exit_code})"
        elif self.busy:
            state = f"running {self.title_of(self.busy)}"
        self.query_one(HeaderBar).set_profile(p.name if p else None, p.models.target if p else None,
                                              p.draft_model if p else None, bool(p and p.simulated), state)

    def _update_hint(self) -> None:
        hint = self.query_one("#next-hint", Static)
        c = self.cursor
        if self.browse is not None:
            text = "Opened read-only.\n[ ] logs · ctrl+q quit"
        elif self.closed:
            text = "Run finished.\ne export · ctrl+q quit"
        elif self.busy:
            text = f"Running {self.title_of(self.busy)}…\ns stop · ctrl+q quit"
        elif c == "profile":
            text = "n accept the profile\na run everything"
        elif c is None:
            text = "All steps done."
        elif self.failed_step:
            keys = "p fix setting · r retry" if self.setting_fix() else "r retry · e export"
            text = f"{self.title_of(c)} {self.status[c]}.\n{keys}"
        else:
            text = f"n run {self.title_of(c)}\na run all the rest"
        hint.update(text)
        shown = self.run_dir is not None and (self.engine is not None or self.browse is not None)
        self.query_one("#run-info", PathText).set_path("Run dir:\n" if shown else "",
                                                       str(self.run_dir) if shown else "")

    # -- step list -------------------------------------------------------------------------------------------
    def on_step_selected(self, msg: StepSelected) -> None:
        if msg.step in self.plan.steps:
            self.show_step(msg.step, move_cursor=False)

    @property
    def results_pane(self) -> ResultsBase:
        return self.query_one("#pane-results", ResultsBase)

    @on(ProfilePane.Changed)
    async def _profile_changed(self, msg: ProfilePane.Changed) -> None:
        if self.engine is not None or self.browse is not None:
            return
        if msg.profile is None and self.query_one(ProfilePane).base is None:
            self.profile = None  # a bad file or path: no profile is active until one is chosen
            self._update_header()
        if msg.profile is not None:
            self.profile = msg.profile
            self._update_header()
            await self.apply_plan(plan_for(msg.profile, self._steps_arg))  # the step list follows the profile
            self.query_one(CheckpointsPane).set_models(msg.profile.models.target, msg.profile.draft_model)
            self.query_one(DatasetPane).set_url(msg.profile.data["dataset"]["url"])
            res = self.results_pane
            if isinstance(res, ResultsPane):
                res.num_spec = msg.profile.speculative.num_speculative_tokens

    def action_charts(self) -> None:
        """g: the results' charts view (a tune run), or back to the matrix table; from another pane it opens the
        Results pane with its charts."""
        res = self.results_pane
        if not isinstance(res, MatrixPane):
            return
        if self.current_pane_id != "results":
            self.show_step("results")
            shown = res.toggle_charts(True)
        else:
            shown = res.toggle_charts()
        # the view scrolls with the arrow keys (at 80x24 one chart fits at a time); back: the table's cursor
        (res.query_one(ChartsView) if shown else res.query_one(DataTable)).focus()
        self.refresh_bindings()

    def action_focus_steps(self) -> None:
        self.query_one(StepList).focus()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    # -- command palette -------------------------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield SystemCommand("Next step", "Run the current step (n)", self.action_next)
        yield SystemCommand("Run all", "Run the remaining steps unattended (a)", self.action_run_all)
        if self.failed_step:
            yield SystemCommand("Retry", f"Run {self.title_of(self.failed_step)} again (r)", self.action_retry)
            yield SystemCommand("Skip step", f"Mark {self.title_of(self.failed_step)} as skipped and move on",
                                self.action_skip)
        if self.busy in self.launch_steps:
            yield SystemCommand("Stop server", "Stop the running server (s)", self.action_stop_server)
        yield SystemCommand("Export report", "Write report.md / report.json / summary.csv (e)", self.action_export)
        yield SystemCommand("Save profile as…", "Write the profile as TOML (w)", self.action_save_profile)
        for sid in self.plan.steps:
            yield SystemCommand(f"Show {self.title_of(sid)}", f"Show the {self.plan.pane_titles.get(sid, sid)} pane",
                                lambda sid=sid: self.show_step(sid))
        yield SystemCommand("Help", "Keys and how the app works (?)", self.action_help)
        yield from super().get_system_commands(screen)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """One funnel for unexpected failures of the app's own workers (the engine reports step failures
        as events; this catches bugs), so nothing fails silently."""
        if event.state == WorkerState.ERROR:
            err = event.worker.error
            self.notify(f"{event.worker.name}: {type(err).__name__}: {err}", title="Internal error",
                        severity="error", timeout=15)


def run_app(profile: Profile | None, run_dir: str | Path | None, steps: list[str] | None = None,
            browse: ClosedRun | None = None, executor: Any = None) -> int:
    """Run the interactive app; returns the engine's exit code (130 when the run was interrupted). With
    `browse` (--open RUN_DIR) it shows that finished run read-only and returns 0."""
    app = SpecdecApp(profile=profile, run_dir=run_dir, steps=steps, handle_signals=True, browse=browse,
                     executor=executor)
    stop_watch = watch_tty(app)  # EIO/EOF on the tty without a SIGHUP (terminal.py)
    try:
        result = app.run()
    finally:
        stop_watch.set()
        if app.engine is not None and not app.closed:
            app.engine.cleanup_sync()  # last resort: never leave a server behind
    if result is None:
        return app.exit_code if app.exit_code is not None else EXIT_INTERRUPTED
    return int(result)


__all__ = ["SpecdecApp", "run_app"]
