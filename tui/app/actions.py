"""The keys that act on the panes rather than on the run: the setting a failure's fix names (p), the log
(l, f, v, /), paging ([ ]), the exact commands (c), saving the profile (w) and exporting the report (e).

`PaneActions` is a mixin of `SpecdecApp` (tui/app/app.py); which of these keys can act now is
tui/app/availability.py's business.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tui.screens.launch import LaunchPane
from tui.screens.matrix import MatrixPane
from tui.screens.modals import CommandScreen, SaveProfileScreen
from tui.screens.knobs import is_knob
from tui.screens.profile import ProfilePane, save_profile
from tui.screens.results import export_paths

from ..core import events as ev
from ..core.plan.build import recorded_text, recorded_vllm_version, show_commands_text
from ..core.profile.model import ProfileError
from ..widgets.common import shorten_path


class PaneActions:
    """Actions of the keys that show or edit something; the app provides the panes, the engine and the plan."""

    # -- a fix that is a setting ---------------------------------------------------------------------------------
    def setting_fix(self) -> ev.Diagnosis | None:
        """The failed step's diagnosis whose fix is a setting on the Profile pane (Diagnosis.setting), if any."""
        f = self.failed_step
        if not f or f not in self.plan.run_steps:
            return None
        return next((d for d in self.pane(f).problem_diagnoses if d.setting and is_knob(d.setting)), None)

    def _setting_value(self, setting: str) -> Any:
        prof = self.engine.profile if self.engine is not None else self.profile
        section, _, key = setting.partition(".")
        return (prof.data.get(section) or {}).get(key) if prof is not None else None

    def action_edit_setting(self) -> None:
        """After a failure whose fix is a setting: show the Profile pane with that field focused."""
        fix = self.setting_fix()
        if fix is None:
            return
        self.show_step("profile")
        self.query_one(ProfilePane).focus_setting(fix.setting)

    def _env_facts(self) -> dict[str, Any]:
        """What the environment step found: its stored facts once it passed, else its failed attempt's own
        (a TP 8 caught there still knows the cores and the HBM per core)."""
        if self.engine is None:
            return {}
        res = self.engine.results.get("env")
        facts = dict(res.facts) if res is not None and res.facts else dict(self.engine.ctx.shared.get("env") or {})
        # Once the checkpoints step has read the models' config.json (passed or refused): their shape, so the
        # Profile pane refuses as you type what vLLM would refuse (TP vs heads, max_model_len, PP).
        ck = self.engine.results.get("checkpoints")
        shape = (ck.facts if ck is not None and ck.facts else self.engine.ctx.shared.get("checkpoints") or {}) \
            .get("model_shape")
        if shape:
            facts["model_shape"] = shape
        return facts

    def _launch_pane(self) -> LaunchPane | None:
        pid = self.current_pane_id
        if pid in self.launch_steps:
            return self.query_one(f"#pane-{pid}", LaunchPane)
        return None

    def action_focus_log(self) -> None:
        lp = self._launch_pane()
        if lp is not None:
            lp.log_view.focus()

    def action_follow(self) -> None:
        lp = self._launch_pane()
        if lp is not None:
            lp.log_view.follow = not lp.log_view.follow

    def action_log_mode(self) -> None:
        lp = self._launch_pane()
        if lp is not None:
            lp.log_view.toggle_mode()

    def action_log_filter(self) -> None:
        lp = self._launch_pane()
        if lp is not None:
            lp.log_panel.action_focus_filter()

    def action_page_next(self) -> None:
        self._page(1)

    def action_page_prev(self) -> None:
        self._page(-1)

    def _page(self, delta: int) -> None:
        pane = self.current_pane_id
        if pane == "results" and isinstance(self.results_pane, MatrixPane):
            self.results_pane.cycle_workload(delta)
        elif self.browse is not None and pane in self.launch_steps:
            self.query_one(f"#pane-{pane}", LaunchPane).page_log(delta)

    def action_show_command(self) -> None:
        """The exact commands: a launched server's own; after the run (or on --open) every command the run
        launched, read from the run directory (commands.json); else what the profile will run (the text of
        --show-commands, tui.core.plan.build), from the first screen on."""
        lp = self._launch_pane()
        if lp is not None and lp.command_text:
            script = str(self.run_dir / f"{lp.step}.command.sh") if self.run_dir else ""
            self.push_screen(CommandScreen(lp.title, lp.command_text, lp.bench_command_text, script))
            return
        if self.run_dir is not None and (self.browse is not None or self.closed):
            ran = recorded_text(self.run_dir)
            if ran is not None:
                name = self.profile.name if self.profile is not None else self.run_dir.name
                self.push_screen(CommandScreen(f"{name} (ran)", ran, "", several=True))
                return
        try:
            prof = self.engine.profile if self.engine is not None else self.query_one(ProfilePane).current_profile()
        except ProfileError as exc:
            self.notify(f"The profile is not valid yet: {exc}", severity="error", timeout=8)
            return
        run_dir = str(self.run_dir) if self.run_dir is not None else "./specdec-runs/<run>"  # absolute from the cli
        env = (self.engine.ctx.shared.get("env") or {}) if self.engine is not None else {}
        version = env.get("vllm_version")  # what the environment step found, once it has run
        source = "detected" if version else "unknown"
        if version is None and self.run_dir is not None:
            version = recorded_vllm_version(self.run_dir)  # a run directory's env.json (--open, a continued run)
            source = "recorded" if version else "unknown"
        text = show_commands_text(prof, run_dir, version, source,
                                  [env["vllm_python"]] if env.get("vllm_python") else None)
        self.push_screen(CommandScreen(f"{prof.name} (planned)", text, "", several=True))

    def action_save_profile(self) -> None:
        pane = self.query_one(ProfilePane)
        try:
            prof = self.engine.profile if self.engine is not None else pane.current_profile()
        except ProfileError as exc:
            self.notify(f"The profile is not valid: {exc}", severity="error", timeout=8)
            return
        default = f"{prof.name}-edited.toml" if pane.edits() and self.engine is None else f"{prof.name}.toml"

        def done(path: str | None) -> None:
            if not path:
                return
            try:
                saved = save_profile(prof, Path(path))
            except (OSError, ProfileError) as exc:
                self.notify(f"Could not save {path}: {exc}", severity="error", timeout=8)
                return
            self.notify(f"Saved {saved.source}. Replay: specdec-tui --profile {saved.source} --headless",
                        timeout=8)

        self.push_screen(SaveProfileScreen(default), done)

    def action_export(self) -> None:
        if self.browse is not None:
            paths = {k: v for k, v in export_paths(self.browse.path / "report.json").items() if v.is_file()}
            self.results_pane.set_exports(paths, final=True)
            self.show_step("results")
            self.notify("This run is closed (opened with --open): its report is already written: "
                        + ", ".join(str(p) for p in paths.values()), timeout=8)
            return
        if self.engine is None:
            self.notify("Nothing has run yet.", severity="warning")
            return
        if self.busy:
            self.notify("Wait for the running step to finish (or stop it with s).", severity="warning")
            return
        eng = self.engine
        if self.closed:
            paths = export_paths(eng.run.file("report.json"))
            self.results_pane.set_exports(paths, final=True)
        else:
            path = eng.interim_report()
            if path is None:
                self.notify("The report could not be written (see report.error.log in the run directory).",
                            severity="error", timeout=8)
                return
            paths = export_paths(path)
            self.results_pane.set_exports(paths, final=False)
        self.show_step("results")
        where = {str(p.parent) for p in paths.values()}
        width = max(16, min(60, self.size.width // 2) - 4)  # a toast's text width (60 columns, at most half)
        if len(where) == 1:
            self.notify(f"Wrote {', '.join(paths)} in {shorten_path(where.pop(), width)}", timeout=8)
        else:
            self.notify("Wrote " + ", ".join(shorten_path(str(p), width) for p in paths.values()), timeout=8)
