"""The journey tier runs the README's text: every marked block is run by a journey, every journey's block is
in the README, and a marker without its block is an error rather than a silently skipped journey."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import readme_blocks

HERE = Path(__file__).resolve().parent


def journeys_run_by_tests() -> set[str]:
    names: set[str] = set()
    for f in HERE.glob("test_*.py"):
        names |= set(re.findall(r'session\.(?:run|run_saving|pty)\("([^"]+)"', f.read_text()))
    return names


def test_every_marked_readme_block_is_run_and_every_journey_is_in_the_readme():
    assert set(readme_blocks()) == journeys_run_by_tests()


def test_blocks_are_the_readme_text_exactly():
    text = "intro\n<!-- journey: one -->\n\n```bash\nspecdec-tui --demo   # note\n  x\n```\nafter\n"
    assert readme_blocks(text) == {"one": "specdec-tui --demo   # note\n  x\n"}


@pytest.mark.parametrize("text", [
    "<!-- journey: lost -->\nprose, no fence\n",
    "<!-- journey: open -->\n```bash\nnever closed\n",
    "<!-- journey: a -->\n```\nx\n```\n<!-- journey: a -->\n```\ny\n```\n",
])
def test_a_marker_without_its_block_is_an_error(text):
    with pytest.raises(ValueError):
        readme_blocks(text)
