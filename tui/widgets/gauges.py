"""Host CPU and RAM gauges (psutil), one line."""

from __future__ import annotations

import psutil
from rich.text import Text
from textual.widgets import Static

from .common import bar, is_frozen

FROZEN_CPU = 37.0
FROZEN_RAM = (12.4 * 2**30, 32.0 * 2**30)


class HostGauges(Static):
    DEFAULT_CSS = """
    HostGauges { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__("", id=id, markup=False)
        self.cpu = 0.0
        self.ram_used = 0.0
        self.ram_total = 0.0

    def on_mount(self) -> None:
        if not is_frozen(self):
            psutil.cpu_percent(interval=None)  # prime the counter; the first value is meaningless
        self.sample()
        self.set_interval(1.0, self.sample)

    def sample(self) -> None:
        if is_frozen(self):
            self.cpu = FROZEN_CPU
            self.ram_used, self.ram_total = FROZEN_RAM
        else:
            if not self.display or not self.is_on_screen:
                return
            self.cpu = psutil.cpu_percent(interval=None)
            vm = psutil.virtual_memory()
            self.ram_used, self.ram_total = float(vm.total - vm.available), float(vm.total)
        self._draw()

    def _draw(self) -> None:
        g = 2**30
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("Host   ", style="bold")
        t.append("CPU ")
        t.append(bar(self.cpu / 100.0, 8), style="reverse" if self.cpu >= 90 else "")
        t.append(f" {self.cpu:3.0f}%   RAM ")
        frac = self.ram_used / self.ram_total if self.ram_total else 0.0
        t.append(bar(frac, 8), style="reverse" if frac >= 0.9 else "")
        t.append(f" {self.ram_used / g:.1f}/{self.ram_total / g:.1f} GiB")
        self.update(t, layout=False)  # one fixed row
