"""Modal screens: quit confirmation, help, "Save as profile…" and the exact commands."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from tui.keys import KEY_TABLE, help_lines
from tui.widgets.fields import Field

MODAL_CSS = """
{name} {{ align: center middle; background: $background 60%; }}
{name} > Vertical {{ width: 72; max-width: 100%; height: auto; max-height: 90%; border: thick $primary;
                     background: $surface; padding: 0 1; }}
{name} .modal-title {{ text-style: bold; height: 1; }}
{name} .modal-buttons {{ height: auto; margin: 1 0 0 0; align-horizontal: right; }}
{name} .modal-buttons Button {{ margin: 0 0 0 2; }}
"""


class QuitScreen(ModalScreen[bool]):
    """Asks before quitting while a step (a server) is running. Returns True to stop it and quit."""

    DEFAULT_CSS = MODAL_CSS.format(name="QuitScreen")
    BINDINGS = [
        Binding("y", "confirm", "Stop and quit", id="quit-confirm"),
        Binding("n,escape", "cancel", "Keep running", id="quit-cancel"),
    ]

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Quit specdec-tui?", classes="modal-title", markup=False)
            yield Static(f"{self.what}\nQuitting stops it (SIGINT, then SIGTERM, then SIGKILL) and writes the "
                         "report of what has run so far.", markup=False)
            with Horizontal(classes="modal-buttons"):
                yield Button("Keep running (n)", id="cancel", variant="primary", compact=True)
                yield Button("Stop and quit (y)", id="confirm", variant="error", compact=True)

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


HELP_INTRO = ("specdec-tui walks through the tutorial \"Deploy EAGLE3 speculative decoding with vLLM Neuron\": check "
              "the instance, look up both checkpoints, fetch the dataset, launch and benchmark the baseline server, "
              "then the EAGLE3 server, and compare them.")
HELP_OUTRO = (
    "When a step fails, its pane starts with the diagnosis and the fix. The settings become editable again on the "
    "Profile pane (validated as you type); r retries the failed step with them (from inside a field: Enter, then r; or "
    "ctrl+r).",
    "Everything the app does is in the run directory: state.json, profile.toml, each server's log (*.serve.log) "
    "and command (*.command.sh), the benchmark JSON files and the report. `specdec-tui --profile <run dir>/"
    "profile.toml --headless` replays a run.",
)
# The help as plain text (no hard breaks inside a paragraph: the screen wraps them to its width).
HELP_TEXT = "\n\n".join([HELP_INTRO, "Keys\n" + help_lines(), *HELP_OUTRO])


def key_grid() -> Table:
    """KEY_TABLE as two columns: a description that wraps stays indented under its own column."""
    grid = Table.grid(padding=(0, 2), expand=True)
    grid.add_column(max_width=16, style="bold")
    grid.add_column(ratio=1, overflow="fold")
    for keys, action in KEY_TABLE:
        grid.add_row(keys.replace("`", ""), action.replace("`", ""))
    return grid


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = MODAL_CSS.format(name="HelpScreen") + """
    HelpScreen > Vertical { width: 96; height: 90%; }
    HelpScreen VerticalScroll { height: 1fr; }
    HelpScreen VerticalScroll > Static { margin: 0 0 1 0; }
    HelpScreen #help-keys { padding: 0 0 0 2; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close", id="help-close")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Help", classes="modal-title", markup=False)
            with VerticalScroll():
                yield Static(HELP_INTRO, markup=False)
                yield Static("Keys", classes="modal-title", markup=False)
                yield Static(key_grid(), id="help-keys")
                for para in HELP_OUTRO:
                    yield Static(para, markup=False)
            with Horizontal(classes="modal-buttons"):
                yield Button("Close (esc)", id="close", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class SaveProfileScreen(ModalScreen["str | None"]):
    """Asks for a path; returns it, or None when cancelled."""

    DEFAULT_CSS = MODAL_CSS.format(name="SaveProfileScreen") + """
    SaveProfileScreen Input { margin: 1 0 0 0; }
    SaveProfileScreen #save-error { color: $text-error; height: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="save-cancel")]

    def __init__(self, default_path: str, note: str = "") -> None:
        super().__init__()
        self.default_path = default_path
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Save as profile…", classes="modal-title", markup=False)
            yield Label("A TOML file that `specdec-tui --profile FILE --headless` replays exactly.")
            if self.note:
                yield Static(self.note, markup=False)
            yield Field(value=self.default_path, id="save-path")
            yield Static("", id="save-error", markup=False)
            with Horizontal(classes="modal-buttons"):
                yield Button("Cancel (esc)", id="cancel", compact=True)
                yield Button("Save (⏎)", id="save", variant="primary", compact=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._save()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self._save()
        else:
            self.dismiss(None)

    def _save(self) -> None:
        path = self.query_one(Input).value.strip()
        if not path:
            self.query_one("#save-error", Static).update("Enter a file path.")
            return
        self.dismiss(path)

    def action_cancel(self) -> None:
        self.dismiss(None)


def command_labels(text: str) -> list[str]:
    """The commands a text of several holds, by the "# " line right above each ("Step 1: baseline server",
    "baseline: serve"): a comment followed by a blank line or another comment labels no command."""
    lines = text.splitlines()
    return [a[2:].strip() for a, b in zip(lines, lines[1:])
            if a.startswith("# ") and b.strip() and not b.startswith("#")]


class CommandScreen(ModalScreen[None]):
    """The exact commands, selectable, with copy keys (OSC 52 clipboard). A launched server's pane gives its serve
    and bench command (c and b copy one each); the planned or recorded commands of a whole run are `several`
    (c copies them all, each under its "# " label, and says how many)."""

    DEFAULT_CSS = MODAL_CSS.format(name="CommandScreen") + """
    CommandScreen > Vertical { width: 100; height: 90%; }
    CommandScreen TextArea { height: 1fr; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close", id="command-close"),
        Binding("c", "copy('serve')", "Copy", id="command-copy-serve"),
        Binding("b", "copy('bench')", "Copy bench command", id="command-copy-bench"),
    ]

    def __init__(self, title: str, serve: str, bench: str, script_path: str = "", *, several: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.serve = serve
        self.bench = bench
        self.script_path = script_path
        self.several = several
        self.labels = command_labels(serve) if several else []

    def compose(self) -> ComposeResult:
        text = self.serve or "(the server has not been launched yet)"
        if self.bench:
            text += "\n\n" + self.bench
        with Vertical():
            yield Static(f"Exact commands — {self.title_text}", classes="modal-title", markup=False)
            yield TextArea(text, read_only=True, soft_wrap=True, show_line_numbers=False, id="command-text")
            if self.several:
                n = len(self.labels)
                hint = Text(f"c copies all {n} command{'s' if n != 1 else ''}, each under its # line (terminal "
                            "clipboard, OSC 52); select text with the mouse or shift+arrows.", style="dim")
            else:
                hint = Text("c copies the serve command, b the bench command (terminal clipboard, OSC 52); "
                            "select text with the mouse or shift+arrows.", style="dim")
            if self.script_path:
                hint.append(f"\nAlso saved as {self.script_path}", style="dim")
            yield Static(hint)
            with Horizontal(classes="modal-buttons"):
                yield Button("Close (esc)", id="close", variant="primary", compact=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "copy" and parameters == ("bench",) and self.several:
            return False  # one text of several commands: c copies them all
        return True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_copy(self, which: str) -> None:
        if self.several:
            self.app.copy_to_clipboard(self.serve)
            n = len(self.labels)
            self.notify(f"all {n} command{'s' if n != 1 else ''} copied to the clipboard, each under its # line: "
                        + "; ".join(self.labels), title="c: copied", timeout=8)
            return
        text = self.serve if which == "serve" else self.bench
        if not text:
            self.notify(f"no {which} command yet", severity="warning")
            return
        self.app.copy_to_clipboard(text)
        what = "vllm serve" if which == "serve" else "vllm bench serve"
        self.notify(f"the {self.title_text} {what} command copied to the clipboard (one command)")

    def action_close(self) -> None:
        self.dismiss(None)
