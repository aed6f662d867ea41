"""Turns a server's raw output into engine events through the log pipeline (tui.core.serverlog.logparse)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tui.core.serverlog import logparse as lp
from tui.core.events import CleanLog, CompileCache, LogLine, LogRanks, Phase, Sink


def cache_counts(hits: int, misses: int) -> str:
    """"cache 1 hit, 2 misses": the compile-cache counts in words, singular or plural as they are."""
    return f"cache {hits} hit{'' if hits == 1 else 's'}, {misses} {'miss' if misses == 1 else 'misses'}"


SAME_KIND_LINES = 6  # later lines of an error kind kept as evidence candidates


class ServeLogWatcher:
    """Feed with on_line(raw, ts); emits LogLine (raw), CleanLog/LogRanks (rank-collapsed view), Phase and
    CompileCache events; remembers error signatures, timings and readiness for the server step.

    Call stopping() right before the server is signalled to stop: the lines after it (vLLM's shutdown
    traceback and EngineDeadError) are shown, but never highlighted as errors nor turned into diagnoses."""

    def __init__(self, emit: Sink, step: str, speculative: bool, verbose_lines: bool = True,
                 platform: str | None = None):
        self.emit = emit
        self.step = step
        self.pipe = lp.LogPipeline(speculative=speculative, platform=platform)
        self.verbose_lines = verbose_lines
        self.ready_event = asyncio.Event()
        self.current_phase: str | None = None
        self.aux_layers_line: str | None = None  # the EAGLE3 aux hidden-state layers vLLM says it uses
        self.last_cache_miss: str | None = None  # the compile-cache key of the graph compiled last
        self.failed_phase: str | None = None  # the phase the startup failed in (finish(failed=True))
        self._finished = False
        self._failing = False

    @property
    def ready(self) -> bool:
        return self.pipe.ready

    def stopping(self, ts: float | None = None) -> None:
        """Our stop begins now (call before sending SIGINT). Idempotent."""
        self.pipe.stopping(time.time() if ts is None else ts)

    @property
    def stop_requested(self) -> bool:
        return self.pipe.stopping_requested

    def errors_after_ready(self) -> list[tuple[str, str, list[str]]]:
        """(kind, line, context) of the error signatures raised after readiness and before our stop, in
        order: an engine that died serving (e.g. on the first request)."""
        return [(e.kind, e.line, list(e.context[-3:])) for e in self.pipe.errors_after_ready()]

    def on_line(self, raw: str, ts: float) -> None:
        emit = self.emit
        step = self.step
        if self.verbose_lines:
            emit(LogLine(step, raw, "serve", ts))
        for e in self.pipe.feed(raw, ts):
            t = type(e)
            if t is lp.CleanLine:
                emit(CleanLog(step, e.line_id, e.text, e.level, e.is_error, e.ranks))
                if "auxiliary layers" in e.text:  # vLLM: "Using auxiliary layers from speculative config: ..."
                    self.aux_layers_line = e.text
            elif t is lp.RankCount:
                emit(LogRanks(step, e.line_id, e.ranks))
            elif t is lp.PhaseChange:
                self._phase_change(e)
            elif t is lp.CacheResult:
                if not e.hit and e.key:
                    self.last_cache_miss = e.key  # the graph being compiled now (a compile failure names it)
                emit(CompileCache(step, e.key, e.hit))
            elif t is lp.Ready:
                self.ready_event.set()

    def _phase_change(self, e: Any) -> None:
        if e.prev_phase is not None and e.phase is None and self._failing:
            # the end of the stream of a server that failed: the open phase is where it failed
            self.failed_phase = e.prev_phase
            detail = ""
            if e.prev_phase == "compile":
                detail = cache_counts(self.pipe.cache_hit_count, self.pipe.cache_miss_count)
            self.emit(Phase(self.step, e.prev_phase, "failed", e.prev_elapsed_s or 0.0, detail, e.ts))
            self.current_phase = None
            return
        if e.prev_phase is not None:
            rec = self.pipe.phase_record(e.prev_phase)
            detail = ""
            if rec is not None and rec.reported_s is not None:
                if e.prev_phase == "engine":
                    detail = f"vLLM: init engine took {rec.reported_s:.1f}s in all"
                else:
                    detail = f"log reports {rec.reported_s:.1f}s"
            if e.prev_phase == "compile":
                hits, misses = self.pipe.cache_hit_count, self.pipe.cache_miss_count
                detail = (detail + "; " if detail else "") + cache_counts(hits, misses)
            self.emit(Phase(self.step, e.prev_phase, "finished", e.prev_elapsed_s or 0.0, detail, e.ts))
        self.current_phase = e.phase
        if e.phase is not None:
            self.emit(Phase(self.step, e.phase, "started", 0.0, e.detail, e.ts))
            if e.phase == "ready":
                # `ready` is a point in time: close it at once so timelines end cleanly.
                self.emit(Phase(self.step, "ready", "finished", 0.0, "Application startup complete.", e.ts))

    def finish(self, failed: bool = False) -> None:
        """The stream ended: close the open phase. failed: the server exited (or timed out) during startup, so
        the open phase is marked failed (Phase status "failed"), not finished."""
        if self._finished:
            return
        self._finished = True
        self._failing = failed
        if self.pipe.phase not in (None, "ready"):
            for e in self.pipe.close(time.time()):
                if type(e) is lp.PhaseChange:
                    self._phase_change(e)

    def error_signatures(self) -> list[tuple[str, str, list[str]]]:
        """(kind, line, context) per error kind, in order of first appearance: the first line of the kind, the
        three lines before it, then the kind's later lines (up to SAME_KIND_LINES; the decisive line of a
        failure often follows its banner, e.g. neuronx-cc's `[NCC_…]` line after "An Internal Compiler Error
        has occurred")."""
        first: dict[str, tuple[str, str, list[str]]] = {}
        for e in self.pipe.errors:
            got = first.get(e.kind)
            if got is None:
                first[e.kind] = (e.kind, e.line, list(e.context[-3:]))
            elif len(got[2]) < 3 + SAME_KIND_LINES and e.line != got[1] and e.line not in got[2]:
                got[2].append(e.line)
        return list(first.values())

    def root_cause(self) -> str | None:
        return self.pipe.root_cause()

    def last_lines(self, n: int) -> list[str]:
        return self.pipe.recent_lines()[-n:]

    def summary(self) -> dict[str, Any]:
        phases = []
        for rec in self.pipe.phases:
            phases.append({"phase": rec.name, "seconds": None if rec.elapsed_s is None else round(rec.elapsed_s, 3),
                           "reported_s": rec.reported_s})
            if rec.name == self.failed_phase:
                phases[-1]["failed"] = True
        return {
            "phases": phases,
            "cache_hits": self.pipe.cache_hit_count,
            "cache_misses": self.pipe.cache_miss_count,
            "ranks": len(self.pipe.ranks_seen),
            "lines": self.pipe.lines_fed,
            "route": self.pipe.route,
        }
