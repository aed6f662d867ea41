"""Step 1 — Profile: choose a bundled profile or a TOML file, edit the key knobs with inline validation
(the TOML loader's own validator; once the environment step has run, also the platform's facts:
tui/core/host/livecheck.py), and save the result as a profile that `--headless` replays exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Input, Label, Select, Static

from tui.core import events as ev
from tui.core.host.livecheck import ERROR, check_edits
from tui.core.profile.model import Profile, ProfileError, bundled_profiles, load_profile, validate_value
from tui.core.plan.arms import is_tune
from tui.widgets.sweep import SweepToggle, with_sweep, without_sweep
from tui.core.proc.supervisor import port_free
from tui.widgets.fields import Field
from tui.widgets.pathtext import PathText

from .base import StepPane
from .knobs import KNOBS, RETRY_KEYS, knob_id

def short_error(exc: Exception) -> str:
    """'profile <memory>: server.port = 0 is not valid; ...' → 'server.port = 0 is not valid; ...'."""
    msg = str(exc)
    if msg.startswith("profile ") and ": " in msg:
        msg = msg.split(": ", 1)[1]
    return msg


class ProfileForm(VerticalScroll, can_focus=False):
    """The form scrolls with the focused field; it takes no focus itself (Tab goes field to field)."""


class ProfilePane(StepPane):
    DEFAULT_CSS = """
    ProfilePane > ProfileForm { height: 1fr; }
    ProfilePane .row { height: 1; margin: 0 0 0 0; }
    ProfilePane .row > Label { width: 21; height: 1; }
    ProfilePane .row > Select { width: 1fr; }
    ProfilePane .row > Input { width: 1fr; max-width: 36; height: 1; }
    ProfilePane .row > .mark { width: 2; height: 1; margin: 0 0 0 1; }
    ProfilePane .row.-invalid > Label { text-style: bold; color: $text-error; }
    ProfilePane .row.-warned > Label { text-style: bold; color: $text-warning; }
    ProfilePane #profile-about { height: auto; margin: 0 0 1 0; padding: 0 0 0 0; }
    ProfilePane #profile-errors { height: auto; color: $text-error; }
    ProfilePane #profile-errors.-ok { color: $text-success; }
    ProfilePane #profile-buttons { height: 1; margin: 0; }
    ProfilePane #profile-buttons Button { margin: 0 2 0 0; }
    ProfilePane #profile-rundir { height: auto; color: $text-muted; }
    ProfilePane .section-label { height: 1; text-style: bold; margin: 1 0 0 0; }
    """

    STATE_WORDS = {"pending": "not accepted yet", "passed": "accepted"}
    SHOW_SECONDS = False  # accepting a profile takes no time worth a figure

    class Changed(Message):
        """The edited profile changed (valid or not)."""

        def __init__(self, profile: Profile | None, valid: bool) -> None:
            super().__init__()
            self.profile = profile
            self.valid = valid

    def __init__(self, profile: Profile | None, run_dir: str = "") -> None:
        super().__init__("profile", "Profile")
        self.base: Profile | None = profile
        self.edited: Profile | None = profile
        self.errors: dict[str, str] = {}
        self.warnings: dict[str, str] = {}  # platform facts that may not hold (not refused)
        self.env_facts: dict[str, Any] = {}  # what the environment step found (set when a retry opens)
        self.cross_error = ""
        self.load_error = ""  # a profile file that did not load: shown until another profile is chosen
        self.locked = False
        self.retry_open = False
        self.run_dir = run_dir
        self._filling = False
        self._origins: dict[str, Profile | None] = {}
        self._about_for: Profile | None = None

    def compose_body(self) -> ComposeResult:
        names = list(bundled_profiles())
        # A bundled profile's source is its bundled name; a file's own `name` may equal one and is not it.
        current = self.base.source if self.base is not None and self.base.source in names else Select.NULL
        with ProfileForm():
            with Horizontal(classes="row", id="profile-choose-row"):
                yield Label("Bundled profile")
                yield Select([(n, n) for n in names], prompt="choose…", value=current, id="profile-select",
                             compact=True)
            with Horizontal(classes="row", id="profile-file-row"):
                yield Label("…or a TOML file")
                yield Field(placeholder="path/to/profile.toml ⏎", id="profile-file", compact=True)
            yield Static("", id="profile-about", markup=False)
            for section, key, label, kind in KNOBS:
                with Horizontal(classes="row", id=knob_id(section, key) + "-row"):
                    yield Label(label)
                    yield Field(id=knob_id(section, key), type="integer" if kind == "integer" else "text",
                                compact=True, select_on_focus=False)
                    yield Static("", classes="mark", markup=False)
            yield SweepToggle(id="profile-sweep", classes="row")
            yield Static("", id="profile-errors", markup=False)
            with Horizontal(id="profile-buttons"):
                yield Button("Save as profile… (w)", id="save-profile", compact=True)
            yield PathText(id="profile-rundir")

    def on_mount(self) -> None:
        super().on_mount()
        if not self.locked:
            self.set_hint("edit, then press n to start (a runs everything)")
            self._fill(self.base)
        self._draw_rundir()

    # -- filling and validating ----------------------------------------------------------------------------
    def set_run_dir(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self._draw_rundir()

    def _draw_rundir(self) -> None:
        self.query_one("#profile-rundir", PathText).set_path("Run directory: " if self.run_dir else "", self.run_dir)

    def load(self, profile: Profile) -> None:
        self.base = profile
        self.load_error = ""
        self._fill(profile)

    def _fill(self, profile: Profile | None) -> None:
        self._filling = True
        try:
            for section, key, _label, _kind in KNOBS:
                inp = self.query_one("#" + knob_id(section, key), Input)
                inp.value = "" if profile is None else str(profile.data[section][key])
                inp.cursor_position = len(inp.value)
        finally:
            self._filling = False
        self.query_one(SweepToggle).show(profile)
        self._draw_about(profile)
        self._sync_sweep_field()
        self.validate_all()

    def _draw_about(self, profile: Profile | None) -> None:
        about = Text()
        if profile is None:
            about.append("Choose a bundled profile (demo runs everything on a simulator) or load a TOML file.",
                         style="dim")
        else:
            about.append(profile.name, style="bold")
            if profile.simulated:
                about.append(" ")
                about.append("SIMULATED", style="bold reverse")
            if profile.source != profile.name:
                about.append(f"  {profile.source}", style="dim")
            desc = edited_description(profile, self._origin(profile)) or profile.data.get("description", "")
            if desc:
                about.append(f"\n{desc}", style="dim")
            about.append(f"\n{profile.models.target} → {profile.draft_model}")
        self.query_one("#profile-about", Static).update(about)

    def _origin(self, profile: Profile) -> Profile | None:
        """The profile as its source (bundled name or file) has it, read once per source."""
        if profile.source not in self._origins:
            try:
                self._origins[profile.source] = load_profile(profile.source)
            except (ProfileError, OSError, ValueError):
                self._origins[profile.source] = None
        return self._origins[profile.source]

    def sweep_ks(self) -> list[int] | None:
        """The k the sweep runs (the profile's [tune] table), or None without a sweep."""
        if self.base is None or not is_tune(self.base):
            return None
        return list(self.base.tune.num_speculative_tokens)

    def _sync_sweep_field(self) -> None:
        """With the sweep on, each arm has its own k (tune.num_speculative_tokens): the single "Speculative
        tokens" value is not used, so its field is disabled and the status line says why."""
        field = self.query_one("#" + knob_id("speculative", "num_speculative_tokens"), Input)
        ks = self.sweep_ks()
        if ks is not None:
            field.disabled = True
            field.tooltip = f"The sweep sets k per arm: k = {', '.join(map(str, ks))}"
        else:
            field.tooltip = None
            field.disabled = self.locked and not self.retry_open

    def _values(self) -> tuple[dict[str, Any], dict[str, str]]:
        values: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for section, key, label, kind in KNOBS:
            dotted = f"{section}.{key}"
            raw = self.query_one("#" + knob_id(section, key), Input).value.strip()
            value: Any = raw
            if kind == "integer":
                try:
                    value = int(raw)
                except ValueError:
                    errors[dotted] = f"{dotted}: enter an integer"
                    continue
            try:
                values[dotted] = validate_value(section, key, value)
            except ProfileError as exc:
                errors[dotted] = short_error(exc)
        return values, errors

    def validate_all(self) -> bool:
        if self.base is None:
            self.errors, self.cross_error, self.edited = {}, "", None
            self._draw_errors()
            return False
        values, errors = self._values()
        self.warnings = {}
        for key, level, msg in check_edits(self.base, self.env_facts, values,
                                           port_free if self.env_facts else None):
            (errors if level == ERROR else self.warnings).setdefault(key, msg)
        self.errors = errors
        self.cross_error = ""
        if not errors:
            changed = {k: v for k, v in values.items()
                       if self.base.data[k.split(".")[0]][k.split(".")[1]] != v}
            try:
                self.edited = self.base.with_values(changed) if changed else self.base
            except ProfileError as exc:
                self.cross_error = short_error(exc)
                self.edited = None
        else:
            self.edited = None
        self._draw_errors()
        if self.edited is not None and self.edited is not self._about_for:
            self._about_for = self.edited
            self._draw_about(self.edited)  # an edit makes the description say "edited"
        valid = self.edited is not None
        self.post_message(self.Changed(self.edited, valid))
        return valid

    def edits(self) -> dict[str, Any]:
        """The knob values that differ from the loaded profile (dotted keys)."""
        if self.base is None:
            return {}
        values, _ = self._values()
        return {k: v for k, v in values.items() if self.base.data[k.split(".")[0]][k.split(".")[1]] != v}

    def _draw_errors(self) -> None:
        for section, key, _label, _kind in KNOBS:
            dotted = f"{section}.{key}"
            bad = dotted in self.errors
            warned = not bad and dotted in self.warnings
            row = self.query_one("#" + knob_id(section, key) + "-row")
            row.set_class(bad, "-invalid")
            row.set_class(warned, "-warned")
            swept = dotted == "speculative.num_speculative_tokens" and self.sweep_ks() is not None
            row.query_one(".mark", Static).update("✗" if bad else "⚠" if warned else "–" if swept else
                                                  ("✓" if self.base is not None else ""))
        box = self.query_one("#profile-errors", Static)
        # A file that did not load is drawn on every validation, not once: the fields its failure emptied validate
        # again when their Changed messages arrive, and must not wipe the reason.
        msgs = list(dict.fromkeys(([self.load_error] if self.load_error else []) + list(self.errors.values())
                                  + ([self.cross_error] if self.cross_error else [])))
        warns = [f"⚠ {m}" for m in dict.fromkeys(self.warnings.values())]
        ks = self.sweep_ks()
        if ks is not None:
            warns.append(f"– Speculative tokens: not used, the sweep sets k = {', '.join(map(str, ks))}")
        if msgs:
            box.update("\n".join([f"✗ {m}" for m in msgs] + warns))
            box.set_class(False, "-ok")
        elif self.base is not None:
            n = len(self.edits())
            box.update("\n".join(["✓ valid" + (f" ({n} edited value{'s' if n != 1 else ''})" if n else "")] + warns))
            box.set_class(True, "-ok")
        else:
            box.update("")

    def current_profile(self) -> Profile:
        """The edited, validated profile; raises ProfileError naming what is wrong."""
        if self.base is None:
            raise ProfileError("no profile chosen: pick a bundled profile or load a TOML file")
        if not self.validate_all():
            msgs = list(self.errors.values()) + ([self.cross_error] if self.cross_error else [])
            raise ProfileError("; ".join(dict.fromkeys(msgs)))
        assert self.edited is not None
        return self.edited

    def lock_profile(self) -> None:
        """The run has started (or a step runs): the profile can no longer change."""
        self.locked = True
        self.retry_open = False
        for w in self.query("Input, Select, Checkbox"):
            w.disabled = True
        # Choosing another profile is a new run: the chooser rows go (disabled, they only showed an empty
        # "choose…" for a profile from a file or a run directory); the lines under them name the profile.
        for row in self.query("#profile-choose-row, #profile-file-row"):
            row.display = False
        self.set_hint("locked: the run has started (save it with w)")

    def unlock_for_retry(self, profile: Profile, env_facts: dict[str, Any] | None = None,
                         status: str = "failed") -> None:
        """A step failed: the settings become editable again, validated as you type against the profile rules
        and `env_facts` (what the environment step found); `r` retries with them. Choosing another profile
        stays locked: that is a new run."""
        self.retry_open = True
        self.base = profile
        self.env_facts = dict(env_facts or {})
        self._fill(profile)
        for section, key, _label, _kind in KNOBS:
            self.query_one("#" + knob_id(section, key), Input).disabled = False
        self._sync_sweep_field()
        word = {"interrupted": "stopped", "unavailable": "unavailable"}.get(status, status)
        self.set_hint(f"{word}: edit a setting, {RETRY_KEYS.replace(' (', ' retries (')}")

    def focus_setting(self, setting: str) -> bool:
        """Focus the field of `setting` (a dotted key such as "server.tensor_parallel_size"); False when the
        pane has no such field."""
        section, _, key = setting.partition(".")
        try:
            field = self.query_one("#" + knob_id(section, key), Input)
        except Exception:
            return False
        if field.disabled:
            self.set_hint("locked: the run has started (save it with w)")
        else:
            field.focus()
            field.action_select_all()
        return True

    def retry_edits(self) -> dict[str, Any]:
        """The settings changed since the failure (empty when none, or when no retry is open)."""
        return self.edits() if self.retry_open else {}

    def accept_retry(self, profile: Profile) -> None:
        """The retry runs with `profile`: it becomes the base, and the form locks again."""
        self.base = profile
        self._fill(profile)
        self.lock_profile()

    # -- user input --------------------------------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id and event.input.id.startswith("knob-") and not self._filling:
            event.stop()
            self.validate_all()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "profile-file":
            path = event.value.strip()
            if not path:
                return
            try:
                prof = load_profile(path)
            except ProfileError as exc:
                # Never leave the previous profile silently active: nothing is chosen until this is fixed.
                self.base = None
                self.load_error = str(exc)
                self._fill(None)  # draws the error (validate_all → _draw_errors)
                self.query_one("#profile-select", Select).clear()
                self.post_message(self.Changed(None, False))
                return
            self.load(prof)
        elif self.retry_open and event.input.id and event.input.id.startswith("knob-"):
            # After a failure: Enter commits the edit and goes back to the step list, where r retries with it.
            if self.validate_all():
                n = len(self.retry_edits())
                self.set_hint(f"{n} setting{'s' if n != 1 else ''} changed: r retries with "
                              f"{'them' if n != 1 else 'it'}" if n else "nothing changed yet: edit a setting first")
                self.app.action_focus_steps()  # type: ignore[attr-defined]
        else:
            self.screen.focus_next()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if event.value is Select.NULL or self.locked:
            return
        if self.base is not None and self.base.name == event.value and self.base.source == event.value:
            return
        try:
            prof = load_profile(str(event.value))
        except ProfileError as exc:
            self.load_error = str(exc)
            self._draw_errors()
            return
        self.load(prof)
        if event.select.has_focus:
            self.app.action_focus_steps()  # type: ignore[attr-defined]  # so n / a act at once

    def on_sweep_toggle_toggled(self, event: SweepToggle.Toggled) -> None:
        """The sweep toggle: the loaded profile gains (or loses) a [tune] table; the knob edits are kept."""
        event.stop()
        if self.base is None or self.locked:
            return
        self.base = with_sweep(self.base) if event.on else without_sweep(self.base)
        self.query_one(SweepToggle).show(self.base)
        self._sync_sweep_field()
        self.validate_all()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save-profile":
            event.stop()
            self.app.action_save_profile()  # type: ignore[attr-defined]

    def handle(self, event: ev.Event) -> None:
        pass


def edited_description(profile: Profile, origin: Profile | None = None) -> str | None:
    """A description for `profile` once its settings differ from the bundled profile or file it came from
    (a fix applied on the Profile pane, the sweep toggled): the original's text describes the original ("TP 8
    → HBM allocation failure"), so it says what changed and quotes the old text. None when nothing changed
    or the origin cannot be read."""
    if origin is None:
        try:
            origin = load_profile(profile.source)
        except (ProfileError, OSError, ValueError):
            return None
    changes = [f"{label} {origin.data[section][key]} → {profile.data[section][key]}"
               for section, key, label, _kind in KNOBS
               if origin.data[section][key] != profile.data[section][key]]
    if is_tune(origin) != is_tune(profile):
        changes.append("sweep k " + ("on" if is_tune(profile) else "off"))
    if not changes:
        return None
    old = origin.data.get("description", "")
    return f"{origin.name}, edited: {', '.join(changes)}" + (f" (was: {old})" if old else "")


def save_profile(profile: Profile, path: Path) -> Profile:
    """Write `profile` as TOML at `path` (its name becomes the file's stem) and return the reloaded one. A
    profile edited since it was loaded gets a description that says so (edited_description)."""
    path = Path(path).expanduser()
    if path.suffix != ".toml":
        path = path.with_suffix(".toml")
    desc = edited_description(profile)
    if desc is not None:
        profile = profile.with_values({"description": desc})
    named = profile.with_values({"name": path.stem}) if profile.raw.get("name") != path.stem else profile
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(named.to_toml(), encoding="utf-8")
    return load_profile(str(path))
