"""Step 3 — Checkpoints: a card for the target and one for the draft (checkpoint, commit, access/gated,
size, config) and the compatibility verdict (draft type, verifier, hidden size, vocab, quantization)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container, VerticalScroll
from textual.widgets import Static

from tui.core import events as ev
from tui.widgets.common import shorten
from tui.widgets.facts import fact_icon, facts_text

from .base import StepPane

COMPAT_NAMES = ("draft type", "draft verifier", "hidden size", "vocab size", "vocab mapping", "aux layers",
                "compatibility",
                "target quantization", "quantization override")
_CARD_ORDER = ("checkpoint", "commit", "access", "size", "config")


class CheckpointCard(Static):
    DEFAULT_CSS = """
    CheckpointCard { height: auto; border: round $primary 60%; padding: 0 1; }
    CheckpointCard.-fail { border: heavy $error; }
    CheckpointCard.-warn { border: round $warning; }
    CheckpointCard.-pass { border: round $success; }
    """

    def __init__(self, label: str, model: str, *, id: str | None = None):
        super().__init__("", id=id, markup=False)
        self.label = label
        self.model = model
        self.facts: dict[str, ev.Fact] = {}

    def on_mount(self) -> None:
        self._draw()

    def set_model(self, model: str) -> None:
        self.model = model
        self._draw()

    def clear(self) -> None:
        self.facts.clear()
        self._draw()

    def add(self, key: str, fact: ev.Fact) -> None:
        self.facts[key] = fact
        self._draw()

    def _draw(self) -> None:
        self.border_title = f"{self.label.capitalize()} · {self.model}"
        statuses = {f.status for f in self.facts.values()}
        for s in ("fail", "warn", "pass"):
            self.set_class(False, f"-{s}")
        if statuses:
            worst = "fail" if "fail" in statuses else ("warn" if "warn" in statuses else "pass")
            self.set_class(True, f"-{worst}")
        t = Text()
        if not self.facts:
            t.append("not checked yet", style="dim")
        keys = [k for k in _CARD_ORDER if k in self.facts] + [k for k in self.facts if k not in _CARD_ORDER]
        for i, key in enumerate(keys):
            f = self.facts[key]
            if i:
                t.append("\n")
            t.append_text(fact_icon(f.status))
            t.append(f" {key:<10} ", style="bold")
            value = f.value
            if key == "commit" and len(value) >= 40:
                value = value[:12]
            t.append(value)
            if f.status in ("fail", "warn") and f.remedy:
                t.append(f"\n  fix: {f.remedy}", style="italic")
        self.update(t)


class CheckpointsView(VerticalScroll):
    DEFAULT_CSS = """
    CheckpointsView { height: 1fr; }
    CheckpointsView > #ckpt-cards { height: auto; layout: vertical; }
    CheckpointsView > #ckpt-verdict { height: auto; border: round $primary 60%; padding: 0 1; }
    CheckpointsView > #ckpt-verdict.-ok { border: round $success; }
    CheckpointsView > #ckpt-verdict.-bad { border: heavy $error; }
    CheckpointsView > #ckpt-other { height: auto; padding: 0 1; }
    """


class CheckpointsPane(StepPane):
    def __init__(self, target: str = "", draft: str = "") -> None:
        super().__init__("checkpoints", "Checkpoints")
        self._target = target
        self._draft = draft
        self.compat: list[ev.Fact] = []
        self.other: list[ev.Fact] = []

    def compose_body(self) -> ComposeResult:
        with CheckpointsView():
            with Container(id="ckpt-cards"):
                yield CheckpointCard("target", self._target, id="card-target")
                yield CheckpointCard("draft", self._draft, id="card-draft")
            yield Static("", id="ckpt-verdict", markup=False)
            yield Static("", id="ckpt-other", markup=False)

    def on_mount(self) -> None:
        super().on_mount()
        self._draw_verdict()

    def set_models(self, target: str, draft: str) -> None:
        self._target, self._draft = target, draft
        self.query_one("#card-target", CheckpointCard).set_model(target)
        self.query_one("#card-draft", CheckpointCard).set_model(draft)

    def reset(self) -> None:
        self.query_one("#card-target", CheckpointCard).clear()
        self.query_one("#card-draft", CheckpointCard).clear()
        self.compat.clear()
        self.other.clear()
        self._draw_verdict()

    def handle(self, event: ev.Event) -> None:
        if not isinstance(event, ev.Fact):
            return
        name = event.name
        if name in COMPAT_NAMES:
            self.compat.append(event)
        elif name.startswith(("target ", "draft ")):
            label, key = name.split(" ", 1)
            self.query_one(f"#card-{label}", CheckpointCard).add(key, event)
        else:
            self.other.append(event)
        self._draw_verdict()

    def verdict(self) -> str:
        checks = [f for f in self.compat if f.name != "compatibility"]
        if not self.compat:
            return "pending"
        if any(f.status == "fail" for f in self.compat):
            return "incompatible"
        if any(f.name == "compatibility" and f.value == "not checked" for f in self.compat):
            return "not checked"
        if any(f.status == "warn" for f in checks):
            return "compatible, with warnings"
        return "compatible"

    def _draw_verdict(self) -> None:
        v = self.verdict()
        box = self.query_one("#ckpt-verdict", Static)
        box.border_title = f"Compatibility · {v}"
        box.set_class(v.startswith("compatible"), "-ok")
        box.set_class(v == "incompatible", "-bad")
        t = Text()
        if not self.compat:
            t.append("Press n to look up both checkpoints and compare the draft with the target.", style="dim")
        for i, f in enumerate(self.compat):
            if i:
                t.append("\n")
            t.append_text(fact_icon(f.status))
            t.append(f" {f.name}: ", style="bold")
            t.append(shorten(f.value, 200))
            if f.status in ("fail", "warn") and f.remedy:
                t.append(f"\n  fix: {f.remedy}", style="italic")
        box.update(t)
        o = facts_text(self.other)
        self.query_one("#ckpt-other", Static).update(o)
