"""Results charts drawn with text: acceptance per position and baseline vs EAGLE3 bars."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widget import Widget

from .common import bar, fmt_num


class AcceptanceBars(Widget):
    """Acceptance rate, acceptance length and one bar per draft position (percent)."""

    DEFAULT_CSS = """
    AcceptanceBars { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.rate: float | None = None
        self.length: float | None = None
        self.positions: list[float] = []
        self.num_spec: int | None = None
        self.source: str | None = None

    def set_values(self, rate: float | None, length: float | None, positions: list[float] | None,
                   num_spec: int | None = None, source: str | None = None) -> None:
        self.rate, self.length, self.positions = rate, length, list(positions or [])
        self.num_spec, self.source = num_spec, source
        self.refresh(layout=True)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return (3 if self.source else 2) + max(1, len(self.positions))

    def render(self) -> Text:
        w = max(10, self.size.width - 20)
        t = Text(no_wrap=True, overflow="ellipsis")
        if self.rate is None:
            t.append("Acceptance: waiting for the EAGLE3 benchmark", style="dim")
            return t
        t.append("Acceptance rate ", style="bold")
        t.append(f"{self.rate:.2f}%")
        t.append("   length ", style="bold")
        t.append(fmt_num(self.length))
        if self.num_spec:
            t.append(f" (max {self.num_spec + 1})", style="dim")
        if self.source:
            t.append(f"\nsource: {self.source} ", style="dim")
            t.append("(metrics = the server's /metrics counters over the run; bench = vllm bench serve)",
                     style="dim")
        t.append("\nPer-position acceptance", style="bold")
        for i, p in enumerate(self.positions or []):
            t.append(f"\n pos {i:<2} ")
            t.append(bar(p / 100.0, w))
            t.append(f" {p:5.1f}%")
        if not self.positions:
            t.append("\n (none reported)", style="dim")
        return t


class CompareChart(Widget):
    """Baseline vs EAGLE3 as paired bars per metric (throughput higher is better, latency lower)."""

    DEFAULT_CSS = """
    CompareChart { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    METRICS = (
        ("Output throughput (tok/s)", "output_throughput", True),
        ("Median TPOT (ms)", "median_tpot_ms", False),
    )

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.runs: dict[str, Any] = {}

    def set_runs(self, runs: dict[str, Any]) -> None:
        self.runs = runs or {}
        self.refresh(layout=True)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return 3 * len(self.METRICS) if self.runs else 1

    def render(self) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        b = self.runs.get("baseline") or {}
        e = self.runs.get("eagle3") or {}
        if not b and not e:
            t.append("Chart: waiting for both benchmarks", style="dim")
            return t
        w = max(8, self.size.width - 20)
        first = True
        for label, key, higher_better in self.METRICS:
            bv, ev = b.get(key), e.get(key)
            vals = [v for v in (bv, ev) if isinstance(v, (int, float))]
            top = max(vals) if vals else 0
            if not first:
                t.append("\n")
            first = False
            t.append(label, style="bold")
            t.append("  (higher is better)" if higher_better else "  (lower is better)", style="dim")
            for name, v, style in (("baseline", bv, ""), ("EAGLE3", ev, "bold")):
                t.append(f"\n {name:<9}")
                if isinstance(v, (int, float)) and top > 0:
                    t.append(bar(v / top, w), style=style)
                    t.append(f" {v:8.2f}")
                else:
                    t.append("n/a", style="dim")
        return t
