"""The engine and the headless front end never import Textual (harlequin-style import contract)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENGINE_MODULES = sorted(
    "tui.core." + ".".join(p.relative_to(REPO / "tui" / "core").with_suffix("").parts)
    for p in (REPO / "tui" / "core").rglob("*.py")
    if p.name != "__init__.py"
)


@pytest.mark.parametrize("module", ["tui.headless", "tui.cli"] + ENGINE_MODULES)
def test_no_textual_in_engine_or_headless(module):
    code = f"import sys, {module}; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", f"{module} pulls in textual"


def test_engine_modules_listed():
    assert "tui.core.run.engine" in ENGINE_MODULES and "tui.core.steps.env" in ENGINE_MODULES


@pytest.mark.parametrize("module", ["tui.headless", "tui.cli"] + ENGINE_MODULES)
def test_no_simulator_in_engine_or_headless(module):
    """The simulator stands in for a platform (a [stand_in] command); the engine never imports tui.sim."""
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m == 'tui.sim' or m.startswith('tui.sim.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"{module} pulls in {out.stdout.strip()}"


def test_no_simulator_import_in_engine_sources():
    bad = ("import tui.sim", "from tui.sim", "from tui import sim", "from ..sim", "from ...sim")
    offenders = [f"{p.relative_to(REPO)}: {line.strip()}" for p in (REPO / "tui" / "core").rglob("*.py")
                 for line in p.read_text(encoding="utf-8").splitlines() if line.lstrip().startswith(bad)]
    assert offenders == []


# The floors (no circle, no import running up) are enforced by tests/test_architecture.py.
