"""Helpers for the log pipeline tests (test_logparse*.py): the fixture logs and one cached pipeline run of each."""
from __future__ import annotations

from pathlib import Path


from tui.core.serverlog.logparse import CleanLine, LogPipeline, RankCount


LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
T0 = 1000.0
DT = 0.25  # synthetic seconds between consecutive lines

COLD = "tp16_eagle3_cold.log"
WARM = "tp16_eagle3_warm.log"
LEGACY = "legacy_nxdi.log"
HBM = "tp8_hbm_oom.log"
OOM = "compile_oom_kill.log"
BUSY = "cores_busy.log"
TIMEOUT = "engine_ready_timeout.log"
TQDM = "hf_download_tqdm.log"


def ts_of(i: int) -> float:
    return T0 + DT * i


def read(name: str) -> list[str]:
    with open(LOGS / name, encoding="utf-8", newline="") as f:  # newline="": keep the \r of progress bars
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


class Run:
    def __init__(self, name: str, speculative: bool = True):
        self.lines = read(name)
        self.pipe = LogPipeline(speculative=speculative)
        self.events: list = []
        for i, raw in enumerate(self.lines):
            self.events.extend(self.pipe.feed(raw, ts_of(i)))
        self.end_ts = ts_of(len(self.lines))
        self.events.extend(self.pipe.close(self.end_ts))

    def of(self, cls):
        return [e for e in self.events if isinstance(e, cls)]

    def first_index(self, needle: str) -> int:
        for i, raw in enumerate(self.lines):
            if needle in raw:
                return i
        raise AssertionError(f"{needle!r} not in fixture")

    def final_counts(self) -> dict[int, int]:
        counts = {c.line_id: 1 for c in self.of(CleanLine)}
        for rc in self.of(RankCount):
            counts[rc.line_id] = rc.ranks
        return counts

    def lines_starting(self, prefix: str) -> list[CleanLine]:
        return [c for c in self.of(CleanLine) if c.text.startswith(prefix)]


_runs: dict[tuple[str, bool], Run] = {}


def run(name: str, speculative: bool = True) -> Run:
    key = (name, speculative)
    if key not in _runs:
        _runs[key] = Run(name, speculative)
    return _runs[key]
