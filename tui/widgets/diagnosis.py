"""A diagnosis as a panel: severity-coloured border, title, evidence and remedy."""

from __future__ import annotations

from rich.markup import escape
from rich.text import Text
from textual.widgets import Static

from ..core.events import Diagnosis
from .common import SEVERITY_ICONS


class DiagnosisPanel(Static):
    DEFAULT_CSS = """
    DiagnosisPanel { height: auto; border: round $primary; padding: 0 1; margin: 0 0 1 0; }
    DiagnosisPanel.-error { border: heavy $error; border-title-color: $text-error; }
    DiagnosisPanel.-warning { border: round $warning; border-title-color: $text-warning; }
    DiagnosisPanel.-info { border: round $primary; border-title-color: $text-primary; }
    DiagnosisPanel { border-title-style: bold; }
    """

    def __init__(self, diag: Diagnosis, max_evidence: int = 6):
        super().__init__("", classes=f"-{diag.severity}", markup=False)
        self.diag = diag
        self.border_title = escape(f"{SEVERITY_ICONS.get(diag.severity, '?')} {diag.severity.upper()} · {diag.id}")
        t = Text()
        t.append(diag.title, style="bold")
        shown = list(diag.evidence[:max_evidence])
        for ev in shown:
            t.append("\n• ")
            t.append(ev if len(ev) <= 400 else ev[:400] + "…", style="italic")
        if len(diag.evidence) > max_evidence:
            t.append(f"\n  (+{len(diag.evidence) - max_evidence} more in report.json)", style="dim")
        t.append("\nRemedy: ", style="bold")
        t.append(diag.remedy)
        self.update(t)
