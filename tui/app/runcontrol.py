"""Run control: the keys that run steps (n, a, r), stop a server (s), skip a failed step, and quit (q, ctrl+q).

`RunControl` is a mixin of `SpecdecApp` (tui/app/app.py). The engine runs in an async worker on the app's event
loop; what runs next, what a retry resets and the exit code are the engine's decisions (the headless runner drives
the same loop), so this module only starts, awaits and cancels that worker.
"""

from __future__ import annotations

import asyncio
import os
import time

from textual.notifications import Notification, Notify

from tui.screens.knobs import RETRY_KEYS, setting_label
from tui.screens.launch import LaunchPane
from tui.screens.modals import QuitScreen
from tui.screens.profile import ProfilePane
from tui.screens.results import ResultsPane

from ..core.profile.model import Profile, ProfileError
from ..core.run.engine import EXIT_INTERRUPTED, Engine
from ..core.store.rundir import default_run_dir


class RunControl:
    """Starting, retrying, stopping and quitting the run (the app provides the engine, the panes and the plan)."""

    # -- running steps ----------------------------------------------------------------------------------------------
    def _ensure_engine(self) -> bool:
        """Accept the edited profile and open the run (Profile step). False when the profile is invalid."""
        if self.engine is not None:
            return True
        pane = self.query_one(ProfilePane)
        try:
            prof = pane.current_profile()
        except ProfileError as exc:
            self.notify(f"Fix the profile first: {exc}", severity="error", timeout=8)
            self.show_step("profile")
            return False
        self.profile = prof
        if self.run_dir is None:
            self.run_dir = default_run_dir(prof.name)
        self.engine = Engine(prof, self.run_dir, self.sink, steps=self.requested_steps, executor=self.executor)
        pane.lock_profile()
        self.set_step_status("profile", "passed", 0.0, prof.name)
        res = self.results_pane
        if isinstance(res, ResultsPane):
            res.num_spec = prof.speculative.num_speculative_tokens
        self._run_started_at = time.monotonic()
        return True

    def action_next(self) -> None:
        if self.busy or self._quitting:
            return
        self._unattended = False
        if self.cursor == "profile":
            if self._ensure_engine():
                self._start_worker("open", then_show=self.cursor)
            return
        if self.cursor is None:
            return
        self._start_worker("next")

    def action_run_all(self) -> None:
        if self.busy or self._quitting:
            return
        self._unattended = True
        if self.cursor == "profile" and not self._ensure_engine():
            return
        self._start_worker("all")

    def action_retry(self) -> None:
        if self.busy or self._quitting:
            return
        f = self.failed_step
        if not f or self.engine is None:
            return
        fixed: Profile | None = None
        pane = self.query_one(ProfilePane)
        fix = self.setting_fix()
        if fix is not None and not pane.retry_edits():
            # The fix is a setting and nothing changed: the same step would fail the same way. Say so.
            label, now = setting_label(fix.setting), self._setting_value(fix.setting)
            to = f" (to {fix.suggest} or higher)" if fix.suggest else ""
            self.notify(f"{label} is still {now}; the fix is to change it{to}: press p to open the setting on the "
                        f"Profile pane, type the new value, then {RETRY_KEYS} retries with it.",
                        title="r: nothing changed", severity="warning", timeout=10)
            return
        if pane.retry_edits():
            try:
                fixed = pane.current_profile()
            except ProfileError as exc:
                self.notify(f"Fix the settings first: {exc}", severity="error", timeout=8)
                self.show_step("profile")
                return
        self._start_worker("retry", profile=fixed)

    def _start_worker(self, mode: str, then_show: str | None = None, profile: Profile | None = None) -> None:
        """mode: "open" (accept the profile), "next" (one step), "all" (until a failure), "retry"."""
        self._worker_done = asyncio.Event()
        self.step_done.clear()
        self._step_worker = self.run_worker(self._run_steps(mode, then_show, profile, self._worker_done),
                                            name="engine-steps", group="engine", exit_on_error=False,
                                            description="Running specdec-tui steps")

    def _set_busy(self, sid: str | None) -> None:
        self.busy = sid
        self._update_header()
        self._update_hint()
        self.refresh_bindings()

    async def _run_steps(self, mode: str, then_show: str | None, profile: Profile | None,
                         done: asyncio.Event) -> None:
        """Drive the engine's run loop; what runs next, what a retry resets and the exit code are the
        engine's decisions (the headless runner drives the same loop)."""
        engine = self.engine
        assert engine is not None
        try:
            if not engine.opened:
                await engine.open()
                if then_show:
                    self.show_step(then_show)
            if mode == "retry":
                sid = self.failed_step
                if sid is not None:
                    self._set_busy(sid)
                    res = await engine.retry(sid, profile)
                    if profile is not None:
                        self.profile = engine.profile
                        self.query_one(ProfilePane).accept_retry(engine.profile)
                    if self._unattended and res.status.settled and engine.failed_step is None:
                        mode = "all"  # started with "run everything": the fixed step passed, so go on to the end
            if mode == "next":
                sid = engine.next_step()
                if sid is not None:
                    self._set_busy(sid)
                    await engine.run_step(sid)
            elif mode == "all":
                while engine.failed_step is None and (sid := engine.next_step()) is not None:
                    self._set_busy(sid)
                    res = await engine.run_step(sid)
                    if not res.status.settled:
                        break
            self.busy = None
            if engine.complete() and not engine.closed:
                # Every requested step is done: end the run (report, RunFinished) like the headless runner.
                await engine.finish()
                self.show_step("results")
        finally:
            self.busy = None
            done.set()
            self.step_done.set()
            self._update_header()
            self._update_hint()
            self.refresh_bindings()

    async def _cancel_running(self) -> None:
        """Interrupt the running step (its server is stopped by the step's own cleanup) and wait for it."""
        if self._step_worker is not None and self.busy:
            self._step_worker.cancel()
        if self._worker_done is not None:
            await self._worker_done.wait()
        if self.engine is not None:
            await self.engine.stop_children()

    def action_stop_server(self) -> None:
        if self.busy not in self.launch_steps:
            self.notify("No server is running.")
            return
        what = self.plan.pane_titles.get(self.busy, self.busy)
        # The toast stays while the server stops (it may take a grace period) and goes when it has stopped.
        note = Notification(f"Stopping the {what}…", "", "information", 120)
        self.post_message(Notify(note))
        self.run_worker(self._stop_server(note, what), name="stop-server", group="control", exit_on_error=False)

    async def _stop_server(self, note: Notification, what: str) -> None:
        try:
            await self._cancel_running()
        finally:
            try:
                self._unnotify(note)
            except KeyError:
                pass  # already timed out or dismissed
        if not self._quitting:
            self.notify(f"The {what} has stopped: r runs its step again.", timeout=5)

    # -- quitting -------------------------------------------------------------------------------------------------
    async def action_quit_key(self) -> None:
        """q: the same as ctrl+q (with its confirmation while a server runs); inside a dialog it does nothing."""
        await self.action_quit()

    async def action_quit(self) -> None:
        if self._quitting:
            return
        if self.busy:
            what = f"The {self.title_of(self.busy)} step is running."
            if self.busy in self.launch_steps:
                phase = self.query_one(f"#pane-{self.busy}", LaunchPane).timeline.current
                what = (f"The {self.plan.pane_titles.get(self.busy, self.busy)} is running"
                        + (f" (phase: {phase})." if phase else "."))

            def answer(yes: bool | None) -> None:
                if yes:
                    self._start_shutdown()

            self.push_screen(QuitScreen(what), answer)
            return
        self._start_shutdown()

    def _start_shutdown(self) -> None:
        if self._quitting:
            return
        self._quitting = True
        self.run_worker(self._quit_run(), name="shutdown", group="control", exit_on_error=False)

    async def _quit_run(self) -> None:
        try:
            code = await self.finish_run()
        finally:
            self.shutdown_done.set()
        if self._terminal_lost:
            # The report is written and the children are gone; Textual's teardown would write to (and can
            # block on) the dead terminal.
            os._exit(code)
        self.exit(code)

    async def finish_run(self) -> int:
        """Stop what runs, end the run (report) if it is open, and return the exit code."""
        if self.browse is not None:
            return 0  # nothing ran: browsing a finished run is not a run
        if self.engine is None:
            return EXIT_INTERRUPTED
        was_busy = bool(self.busy)
        await self._cancel_running()
        if self.closed:
            return self.exit_code if self.exit_code is not None else 0
        eng = self.engine
        # Quitting while a step ran interrupts the run; otherwise the engine ends it as the headless
        # runner would (after a failure the remaining steps are recorded as skipped).
        return await eng.finish(interrupted=was_busy or (eng.failed_step is None and eng.next_step() is not None))

    def action_skip(self) -> None:
        f = self.failed_step
        if f and self.engine is not None and not self.busy:
            self.engine.skip_step(f, "skipped by the operator")
