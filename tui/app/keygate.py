"""The main screen's keys: the bindings, and the gate that asks tui/app/availability.py whether a key can act now.

`KeyGate` is a mixin of `SpecdecApp` (tui/app/app.py): `check_action` keeps the footer to the keys that can act,
and `on_key` answers a key that cannot with a toast saying why (named as the operator types it: "]", not the
key's internal name).
"""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.widgets import ContentSwitcher, Input

from tui.screens.matrix import MatrixPane

from ..keys import key_label
from .availability import KeyState, MatrixView, why_not

APP_BINDINGS = [
    Binding("n", "next", "Next", id="next", tooltip="Run the current step (on Profile: accept the profile)"),
    Binding("a", "run_all", "Run all", id="run-all", tooltip="Run the remaining steps unattended"),
    # ctrl+r too: it retries from a field of the Profile pane, where r is a letter typed into the field.
    Binding("r,ctrl+r", "retry", "Retry", key_display="r", id="retry",
            tooltip="Run the failed step again (ctrl+r also from inside a field)"),
    Binding("p", "edit_setting", "Settings", id="edit-setting",
            tooltip="Open the Profile pane's settings (after a failure: the field its fix names)"),
    Binding("l", "focus_log", "Log", id="focus-log", tooltip="Focus the live server log"),
    Binding("f", "follow", "Follow", id="follow", tooltip="Follow the end of the log, or pause it"),
    Binding("v", "log_mode", "Raw/×N", id="log-mode", show=False,
            tooltip="Show the log raw or rank-collapsed (×N)"),
    Binding("slash", "log_filter", "Filter", key_display="/", id="log-filter", show=False,
            tooltip="Filter the log"),
    Binding("c", "show_command", "Cmd", id="show-command", tooltip="Show and copy the exact commands"),
    Binding("s", "stop_server", "Stop server", id="stop-server", tooltip="Stop the running server"),
    Binding("e", "export", "Export", id="export", tooltip="Write report.md / report.json / summary.csv"),
    Binding("w", "save_profile", "Save as…", id="save-profile", tooltip="Save the profile as a TOML file"),
    Binding("right_square_bracket", "page_next", "Page", key_display="]", id="page-next",
            tooltip="Matrix results: the next workload; a run opened with --open: the step's next log file"),
    Binding("left_square_bracket", "page_prev", "Page back", key_display="[", id="page-prev", show=False,
            tooltip="Matrix results: the previous workload; an opened run: the step's previous log file"),
    Binding("g", "charts", "Charts", id="charts",
            tooltip="Tune results: the charts of the workload shown (g again: the table)"),
    Binding("question_mark", "help", "Help", key_display="?", id="help", tooltip="Keys and how the app works"),
    Binding("escape", "focus_steps", "Steps", show=False, id="focus-steps"),
    Binding("ctrl+q", "quit", "Quit", id="quit", priority=True, tooltip="Quit (asks while a server is running)"),
    # q quits too, where no text field takes it as a letter (an Input, the log filter, a list's search).
    Binding("q", "quit_key", "Quit", id="quit-q", show=False, tooltip="Quit (asks while a server is running)"),
]


class KeyGate:
    """Which keys can act now (the app provides its state: panes, plan, engine)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer offers only the keys that can act now; `why_not` says why the others cannot."""
        if self.screen is not self.screen_stack[0] and action not in ("quit", "help", "command_palette"):
            return False  # a modal is open: only its own keys
        return self.why_not(action) is None

    def why_not(self, action: str) -> str | None:
        """None when `action` can act in the current state, else one sentence saying why not and what to do
        (availability.why_not on a snapshot of this app)."""
        if not self._composed_ok():
            return None
        return why_not(self.key_state(), action)

    def key_state(self) -> KeyState:
        """The snapshot of this app that `availability.why_not` decides on."""
        pane = self.current_pane_id
        failed = self.failed_step
        res = self.results_pane if pane == "results" else None
        matrix = MatrixView(res.matrix is not None, len(res.workloads), res.workload) \
            if isinstance(res, MatrixPane) else None
        browse = self.browse is not None
        log_files = len(self.pane(pane).log_files) if browse and pane in self.launch_steps else 0  # type: ignore[attr-defined]
        found = self.query("#pane-results")  # absent while another profile's plan swaps the results pane
        full = found.first() if found else None
        return KeyState(
            pane=pane, pane_title=self.title_of(pane), launch_steps=self.launch_steps, tune=self.plan.tune,
            busy=self.busy, busy_title=self.title_of(self.busy) if self.busy else "", browse=browse,
            run_dir=str(self.run_dir) if self.run_dir is not None else None, started=self.engine is not None,
            closed=self.closed, cursor=self.cursor, failed=failed,
            failed_title=self.title_of(failed) if failed else "", failed_status=self.status[failed] if failed else "",
            setting_fix=self.setting_fix() is not None, matrix=matrix, log_files=log_files,
            results_ready=isinstance(full, MatrixPane) and full.matrix is not None)

    def on_key(self, event: events.Key) -> None:
        """A key whose action cannot act now says why (its binding is hidden from the footer)."""
        if self.screen is not self.screen_stack[0] or (isinstance(self.focused, Input) and event.is_printable):
            return  # a letter typed into a field is the field's
        action = self._key_actions().get(event.key)
        if action is None:
            return
        reason = self.why_not(action)
        if reason is not None:
            event.stop()
            self.notify(reason, title=f"{key_label(event.key)}: not now", timeout=5)

    def _key_actions(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for b in self.BINDINGS:
            if isinstance(b, Binding):
                for key in b.key.split(","):
                    out[key.strip()] = b.action
        return out

    def _composed_ok(self) -> bool:
        try:
            self.query_one(ContentSwitcher)
            return True
        except Exception:
            return False
