"""The headless renderer over synthetic events (its full output is covered by the CLI end-to-end tests)."""

from __future__ import annotations

import io

from rich.console import Console

from tui import headless
from tui.core import events as ev


def render(events, terminal: bool = False) -> str:
    buf = io.StringIO()
    r = headless.HeadlessRenderer(Console(file=buf, force_terminal=terminal, width=100, color_system=None))
    for e in events:
        r(e)
    return buf.getvalue()


def test_skipped_steps_take_one_line_and_sections_have_headers():
    out = render([
        ev.StepStarted("env", "Environment"),
        ev.Fact("env", "instance type", "unknown", "fail", "not EC2", "run on trn2.48xlarge"),
        ev.StepFinished("env", "failed", 0.1, "1 of 1 checks failed"),
        ev.StepStarted("checkpoints", "Checkpoints"),
        ev.StepFinished("checkpoints", "skipped", 0.0, "skipped: step 'env' failed"),
    ])
    assert "Environment (env)" in out and "✗ instance type: unknown" in out and "fix: run on trn2.48xlarge" in out
    assert "Checkpoints (checkpoints)" in out  # the one-line form
    assert out.count("Checkpoints") == 1


def test_phase_lines_and_non_tty_heartbeat(monkeypatch):
    monkeypatch.setattr(headless, "HEARTBEAT_S", 0.0)
    out = render([
        ev.StepStarted("baseline", "Baseline server"),
        ev.Phase("baseline", "compile", "started"),
        ev.LogLine("baseline", "Compiling..."),
        ev.Phase("baseline", "compile", "finished", 12.5, "cache 0 hit(s), 2 miss(es)"),
        ev.LogLine("baseline", "after the phase: no heartbeat"),
    ])
    assert "compile started" in out
    assert out.count("compile still running") == 1
    assert "▸ compile" in out and "12.5s" in out and "cache 0 hit(s), 2 miss(es)" in out


def test_diagnosis_panel_and_summary():
    out = render([
        ev.Diagnosis("results", "acceptance-near-zero", "error", "Acceptance rate is 0% or near 0%",
                     ("acceptance rate 0.45%",), "check the draft"),
        ev.StepFinished("results", "failed", 0.0, "speedup 0.78x"),
        ev.RunFinished("", 1, "run/report.json"),
    ])
    assert "acceptance-near-zero" in out and "acceptance rate 0.45%" in out and "Remedy" in out
    assert "Summary" in out and "exit code 1" in out and "run/report.json" in out
