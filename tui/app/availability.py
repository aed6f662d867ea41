"""Which keys can act now, and why the others cannot: a pure function of a snapshot of the app's state.

`SpecdecApp.check_action` (the footer shows only the keys that can act) and `SpecdecApp.on_key` (a key that
cannot act says why in a toast) both ask `why_not(state, action)`; the app builds the `KeyState` snapshot
(`SpecdecApp.key_state`). Nothing here imports Textual, so the rules are tested without an app
(tests/test_app_availability.py).
"""

from __future__ import annotations

from dataclasses import dataclass

CLOSED_RUN = "this run is closed: opened with --open"
PAGE_GENERAL = "[ and ] page through the workloads of the matrix results, or the log files of a run opened with --open."


@dataclass(frozen=True)
class MatrixView:
    """The matrix results pane (a tune run's results), as far as paging needs it."""

    ready: bool  # the results step has run: the matrix is there
    workloads: int  # how many workloads it pages through
    workload: str  # the one shown


@dataclass(frozen=True)
class KeyState:
    """What the keys' availability depends on, read from the app at one moment."""

    pane: str  # the pane shown: a step id ("profile", "baseline", ..., "results")
    pane_title: str = ""  # its step's title in the step list
    launch_steps: tuple[str, ...] = ()  # the server steps (one log each)
    tune: bool = False  # a tune profile (one server step per arm, the matrix results pane)
    busy: str | None = None  # the step running now
    busy_title: str = ""
    browse: bool = False  # a finished run opened read-only with --open
    run_dir: str | None = None
    started: bool = False  # the run has started (the engine exists)
    closed: bool = False  # the run has finished
    cursor: str | None = "profile"  # the step n runs next (None: every step is done)
    failed: str | None = None  # the step r retries
    failed_title: str = ""
    failed_status: str = ""
    setting_fix: bool = False  # the failed step's fix is a setting on the Profile pane
    matrix: MatrixView | None = None  # set when the results pane is the matrix
    log_files: int = 0  # an opened run's launch pane: how many log files [ and ] page through
    results_ready: bool = False  # a tune run's matrix is there (whichever pane is shown)


def why_not(state: KeyState, action: str) -> str | None:
    """None when `action` can act in `state`, else one sentence saying why not and what to do."""
    s = state
    if action in ("page_next", "page_prev"):
        return _why_not_page(s)
    if s.browse and action in ("next", "run_all", "retry", "stop_server"):
        return (f"{CLOSED_RUN[0].upper()}{CLOSED_RUN[1:]}, so nothing runs and no server starts. A new run "
                f"of the same profile: specdec-tui --profile {s.run_dir}/profile.toml")
    if action in ("next", "run_all"):
        if s.closed:
            return "The run has finished: e exports the report, ctrl+q quits."
        if s.busy:
            return f"{s.busy_title} is running: wait for it, or press s to stop its server."
        if s.failed:
            return (f"{s.failed_title} {s.failed_status}: r retries it "
                    "(edit the settings on the Profile pane first).")
        if s.cursor is None:
            return "Every step is done: e exports the report."
        return None
    if action == "retry":
        if s.busy:
            return f"{s.busy_title} is running: wait for it, or press s to stop its server."
        if not s.failed:
            return "Nothing has failed: n runs the next step."
        return None
    if action in ("focus_log", "follow", "log_mode", "log_filter"):
        if s.pane not in s.launch_steps:
            if not s.tune:
                return "The log belongs to the server steps: select Baseline server or EAGLE3 server."
            return "The log belongs to the server steps: select Baseline server or one of the EAGLE3 arms."
        return None
    if action == "stop_server":
        return None if s.busy in s.launch_steps else "No server is running."
    if action == "export":
        if s.browse:
            return None
        if not s.started:
            return "Nothing has run yet: n starts the run."
        if s.busy:
            return f"{s.busy_title} is running: export when it ends (or stop it with s)."
        return None
    if action == "edit_setting":
        if s.busy:
            return f"{s.busy_title} is running: wait for it, or press s to stop its server."
        if not s.setting_fix:
            return ("p opens the setting a failed step's fix names; no step has failed with such a fix. The "
                    "settings are on the Profile pane (select it in the step list).")
        return None
    if action == "charts":
        if not s.tune:
            return ("g shows the charts of a tune run's results (throughput vs k, speedup vs concurrency, acceptance "
                    "per position and over time); this run has two arms: its comparison is on the Results pane.")
        if not s.results_ready:
            return ("The charts appear when the results step has run; while an arm benches, its pane draws "
                    "acceptance over time live.")
        return None
    if action == "save_profile":
        return None if s.pane == "profile" else "w saves the profile from the Profile pane: select it first."
    return None


def _why_not_page(s: KeyState) -> str | None:
    if s.pane == "results" and s.matrix is not None:
        if not s.matrix.ready:
            return "The matrix appears when the results step has run: " + PAGE_GENERAL
        if s.matrix.workloads < 2:
            return f"This run has one workload ({s.matrix.workload}): nothing to page through."
        return None
    if s.browse and s.pane in s.launch_steps:
        if s.log_files < 2:
            return f"{s.pane_title} has one log file or none: nothing to page through."
        return None
    return PAGE_GENERAL
