"""Textual messages of the front end. Engine events arrive wrapped in these.

The engine runs in an async worker on the app's loop and calls the app's sink synchronously for every
event. The sink must be cheap, so only low-rate events become one message each (`EngineEvent`); the
high-rate ones are buffered by the sink and announced by coalescing messages (`can_replace`), so a
flood of 20k log lines per second becomes at most one pending `LogsPending` and one `ProgressPending`
in the queue (and BenchSample windows one `SamplesPending`).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from .core.events import Event


@dataclass
class EngineEvent(Message):
    """One low-rate engine event (step, fact, phase, diagnosis, data, ...), delivered in order."""

    event: Event


@dataclass
class LogsPending(Message):
    """Log lines are waiting in the sink's buffer (coalesced: one pending message at most)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LogsPending)


@dataclass
class ProgressPending(Message):
    """New Progress values are waiting (coalesced: only the latest value per task is kept)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ProgressPending)


@dataclass
class SamplesPending(Message):
    """BenchSample windows are waiting (coalesced: the sink keeps them, in order, per step)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SamplesPending)


@dataclass
class StepSelected(Message):
    """The operator moved the step list's cursor to a step (show its pane)."""

    step: str


__all__ = ["EngineEvent", "LogsPending", "ProgressPending", "SamplesPending", "StepSelected"]
