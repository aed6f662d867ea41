"""Server-log pipeline for `vllm serve` output (vLLM + vllm-neuron on trn2, and vLLM's own CPU / CUDA runner).

The engine feeds every raw output line of the server through one `LogPipeline`:

    pipe = LogPipeline(speculative=True)
    for raw in lines:                      # one line each, "\\n" optional, may hold "\\r" and ANSI codes
        for ev in pipe.feed(raw, ts=time.time()):
            ...                            # CleanLine / RankCount / PhaseChange / Timing / CacheResult /
                                           # ErrorSignature / Ready
    pipe.close(ts)                         # end of stream: closes the open phase

Per line the pipeline
1. strips ANSI escape sequences (CSI such as `\\x1b[1;36m`, OSC, two-byte escapes);
2. collapses carriage-return progress bars: only the last non-empty `\\r` segment is kept, with the
   process prefix of the first segment put back in front of it (tqdm bars of huggingface_hub);
3. strips the prefixes and keeps the level: `(APIServer pid=N) `, `(EngineCore_DP0 pid=N) `,
   `(Worker_TPk pid=M) `, `(Worker pid=N) `, `(VllmWorker rank=k pid=N) `, then one of the headers
   vLLM `LEVEL MM-DD HH:MM:SS [file.py:N] `, plugin `YYYY-mm-dd HH:MM:SS,mmm - LEVEL - file.py:N - `,
   uvicorn `INFO:     `, python-logging `INFO:Neuron:`, NRT
   `YYYY-Mon-DD HH:MM:SS.ffffff PID:TID LEVEL  MODULE:function   `, torch-neuronx
   `YYYY-mm-dd HH:MM:SS.ffffff:  PID  LEVEL `;
4. folds the access lines of the app's own `GET /metrics` sampling (uvicorn, status 200) into one line: the first
   is emitted as `METRICS_FOLD_TEXT`, every later one as a `RankCount` of that line carrying the count so far
   (shown "×N"); they are neither classified nor kept as context (`lines_fed` still counts them);
5. merges per-rank repeats: a worker line whose message equals (after masking digit runs, so
   `rank 3` and `neuron:3` match `rank 0`) a line first seen from another rank less than
   `dedup_window_s` ago is not emitted again; a `RankCount` update is emitted instead. A repeat from a
   rank already counted starts a new line (the banner printed twice per rank gives two lines x16).
   Only worker lines (a `Worker...` prefix) are merged; identity is the TP rank, else the worker pid.
6. classifies each first occurrence against rule tables (a cheap keyword gate first) into an error
   signature, a phase marker, a cache result, a timing, or readiness.

Events (slotted dataclasses deriving from `LogEvent`; frozen except the two per-line hot-path ones,
CleanLine and RankCount, which consumers must treat as immutable all the same):
- `CleanLine(line_id, text, level, process, rank, is_error, ts, ranks=1)`: a new message, prefix
  stripped. `line_id` counts emitted lines from 0. `level` is the log level or None (traceback lines).
- `RankCount(line_id, ranks, rank, ts)`: the line `line_id` has now been seen from `ranks` distinct
  ranks (show "x16"). Emitted once per repeat, so the last one carries the final count.
- `PhaseChange(phase, prev_phase, prev_elapsed_s, ts, detail)`: phase ids are those of the route
  (`ROUTES[pipe.route]`); phase None means end of stream (from `close()`); prev_* are None for the first
  phase. `detail` = marker text.
- `Timing(name, seconds, ts)`: a duration the log reports. Names: `weights` (Weight loading completed /
  legacy Finished weights loading / vLLM Loading weights took: the target's, then the draft's), `compile`
  (per graph: Compilation complete in; legacy Finished Compilation for all HLOs; vLLM torch.compile took
  X s in total, per compiled module), `init_engine`, legacy `graphs`, `priority_compile`, `build`,
  `sharding`, `warmup`, and vLLM `model_load` (Model loading took), `dynamo` (Dynamo bytecode transform
  time), `graph_compile` / `graph_load` (one compile range compiled / loaded from the cache),
  `profile_run` (Initial profiling/warmup run took), `cuda_graphs` (Graph capturing finished in).
- `CacheResult(key, hit, source, ts)`: a compile-cache lookup; source is `local`, `remote`, `legacy`
  (NxDI pre-compiled artifacts / cached neff) or `torch-compile` (vLLM's torch.compile cache: a compile
  range loaded from the cache or compiled, an AOT function loaded or saved).
- `ErrorSignature(kind, line, context, ts, line_id)`: `kind` is one of `ERROR_KINDS`; `line` is the
  clean message; `context` the clean messages just before it (oldest first).
- `Ready(ts, startup_s)`: `Application startup complete.` seen; startup_s counts from the first fed line.

Phases move forward only, in the order of the detected route (`pipe.route`, `ROUTES`):
- "native", `PHASES`: the >=0.21 vllm-neuron plugin (the default);
- "legacy", `LEGACY_PHASES`: once a legacy NxDI marker (Generating HLOs, NEURON_CC_WRAPPER, ...) is seen,
  because NxDI compiles before it shards the weights;
- "vllm", `VLLM_PHASES` (config, weights, draft, compile, kv-cache, cuda-graphs, engine, api, ready):
  vLLM's own CPU / CUDA model runner, once one of its markers (Starting to load model, Loading weights
  took, torch.compile, Warming up model for the compilation, Capturing CUDA graphs, ...) is seen before any
  Neuron-only phase, or from the start when the pipeline is built with platform "cpu" / "cuda".
A marker of an earlier phase never moves the phase back.

Our own stop: `stopping(ts)` tells the pipeline that the engine is about to signal the server. Lines fed
after it are still emitted as CleanLine, but never classified: no ErrorSignature, `is_error` False, no
phase change (vLLM 0.32 answers SIGINT with `AsyncLLM output_handler failed.`, a traceback and
EngineDeadError). `errors_after_ready()` lists the signatures raised after readiness and before the stop
(an engine that died serving its first request).

This module is pure stdlib and must not import textual.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

from tui.core.serverlog.clean import (
    CacheResult, CleanLine, ERROR_KINDS, ErrorSignature, LEGACY_PHASES, LinePrefix, LogEvent, METRICS_FOLD_TEXT,
    PHASES, PhaseChange, PhaseRecord, ROUTES, RankCount, Ready, Timing, VLLM_PHASES, _ANSI_sub, _DHEAD_match,
    _ERROR_LEVELS, _EXC, _LHEAD_match, _METRICS_GET_match, _NUM_sub, _PROCS_fullmatch, _PROCS_match, _header,
    _is_worker, _rank_of, clean_line, collapse_cr, strip_ansi,
)
from tui.core.serverlog.rules import (
    _AOT_HASH_RE, _CACHE_KEY_RE, _CACHE_RE, _GATE_search, _LEGACY_HIT_RE, _LEGACY_MARKERS, _LEGACY_MISS_RE,
    _MODULE_RE, _PHASE_RULES, _READY, _TC_AOT_RE, _TC_HIT_RE, _TC_MISS_RE, _TIMING_RULES, _VLLM_MARKERS,
    _VLLM_PHASE_RULES, _phase_of, classify_error,
)
from tui.core.serverlog.rootcause import _GENERIC_KINDS, _root_cause_clean, evidence_rank, rank_evidence, root_cause


__all__ = [
    "PHASES",
    "LEGACY_PHASES",
    "VLLM_PHASES",
    "ROUTES",
    "ERROR_KINDS",
    "LogEvent",
    "CleanLine",
    "RankCount",
    "PhaseChange",
    "Timing",
    "CacheResult",
    "ErrorSignature",
    "Ready",
    "PhaseRecord",
    "LinePrefix",
    "LogPipeline",
    "strip_ansi",
    "collapse_cr",
    "clean_line",
    "classify_error",
    "root_cause",
    "evidence_rank",
    "rank_evidence",
]


class LogPipeline:
    """Stateful per-server-process log pipeline. Not thread-safe; feed lines in order.

    Public state (read-only for consumers):
      phases        list[PhaseRecord] in the order entered
      phase         current phase id or None
      route         "native" (>=0.21 plugin) or "legacy" (NxDI)
      cache_hits    dict key -> hit lines (rank repeats merged); cache_misses likewise
      cache_keys    dict key -> None, every `Compilation cache key:` in order
      ranks_seen    set of worker ranks seen
      errors        list[ErrorSignature] in order
      timings       list[Timing] in order
      ready_ts      ts of `Application startup complete.` or None
      lines_fed / lines_emitted   counters
    """

    def __init__(self, speculative: bool = False, dedup_window_s: float = 30.0, context_lines: int = 6,
                 history: int = 2000, platform: str | None = None):
        """speculative: an EAGLE3 run (the draft phase is expected). dedup_window_s: how long after a
        line's first copy other ranks' copies are still merged into it. context_lines: lines of context
        an ErrorSignature carries. history: clean lines kept for root_cause()/recent_lines().
        platform: the profile's platform, a hint for the starting route ("cpu" / "cuda": the generic vLLM
        route; anything else: the Neuron route). The lines themselves switch the route either way."""
        self.speculative = speculative
        self.platform = platform
        self.dedup_window_s = dedup_window_s
        self.context_lines = context_lines
        self.phases: list[PhaseRecord] = []
        self.phase: str | None = None
        self.route = "vllm" if platform in ("cpu", "cuda", "rocm") else "native"
        self.stop_ts: float | None = None  # set by stopping(): our own stop began here
        self.lines_after_stop = 0
        self.errors_after_stop = 0  # error lines seen after stopping() (not reported as errors)
        self.cache_hits: dict[str, int] = {}
        self.cache_misses: dict[str, int] = {}
        self.cache_keys: dict[str, None] = {}
        self.ranks_seen: set[int] = set()
        self.errors: list[ErrorSignature] = []
        self.timings: list[Timing] = []
        self.ready_ts: float | None = None
        self._ready_line_id = -1
        self.first_ts: float | None = None
        self.closed = False
        self.lines_fed = 0
        self.lines_emitted = 0
        self._order = {p: i for i, p in enumerate(ROUTES[self.route])}
        self._idx = -1
        self._records: dict[str, PhaseRecord] = {}
        # masked message -> recent groups [line_id, set(rank ids), first_ts], oldest first
        self._groups: dict[str, list[list]] = {}
        self._exact: dict[str, list[list]] = {}
        self._max_groups = 8192
        self._full_group = 1  # largest rank count reached by a merged line so far (the TP degree, once known)
        self._recent: deque[str] = deque(maxlen=max(history, context_lines))
        self._prefix_cache: dict[str, tuple | bool] = {}
        self._metrics_line: int | None = None  # line_id of the folded GET /metrics line
        self.metrics_gets = 0  # GET /metrics access lines folded into it

    # -- derived ---------------------------------------------------------------------------------
    @property
    def expected_phases(self) -> tuple[str, ...]:
        order = ROUTES[self.route]
        return order if self.speculative else tuple(p for p in order if p != "draft")

    @property
    def stopping_requested(self) -> bool:
        return self.stop_ts is not None

    @property
    def ready(self) -> bool:
        return self.ready_ts is not None

    @property
    def cache_hit_count(self) -> int:
        return sum(self.cache_hits.values())

    @property
    def cache_miss_count(self) -> int:
        return sum(self.cache_misses.values())

    @property
    def primary_error(self) -> ErrorSignature | None:
        """The first specific error signature, else the first engine-failed one, else None."""
        for e in self.errors:
            if e.kind not in _GENERIC_KINDS:
                return e
        return self.errors[0] if self.errors else None

    def errors_after_ready(self) -> list[ErrorSignature]:
        """Error signatures raised after `Application startup complete.` (and before our stop)."""
        if self.ready_ts is None:
            return []
        return [e for e in self.errors if e.line_id > self._ready_line_id]

    def stopping(self, ts: float) -> None:
        """Our own stop (SIGINT) is about to begin. From here on lines are still cleaned and emitted, but never
        classified: vLLM 0.32 answers a SIGINT with `AsyncLLM output_handler failed.`, a traceback and
        EngineDeadError, which is its normal shutdown, not a failure. Idempotent (the first call counts)."""
        if self.stop_ts is None:
            self.stop_ts = ts

    def phase_record(self, name: str) -> PhaseRecord | None:
        return self._records.get(name)

    def recent_lines(self) -> list[str]:
        """The last `history` clean messages (rank repeats merged), oldest first."""
        return list(self._recent)

    def root_cause(self) -> str | None:
        """root_cause() over the pipeline's own recent history."""
        return _root_cause_clean(list(self._recent))

    # -- feeding ---------------------------------------------------------------------------------
    def feed(self, raw: str, ts: float) -> list[LogEvent]:
        """Process one raw line (trailing newline optional); return the events it produced (maybe none)."""
        self.lines_fed += 1
        if self.first_ts is None:
            self.first_ts = ts
        # Fast path: the "(Proc pid=N) " prefixes (ANSI colours included) are looked up in a cache keyed
        # by their raw text; the header is matched in place; ANSI is stripped from the message only.
        info = None
        k = 0
        if "\r" not in raw:
            c0 = c = raw[:1]
            if c == "(" or c == "\x1b":
                j = raw.find(")", 1)
                sp = raw.find(" ", j) if j > 0 else -1
                if sp > 0:
                    k1 = sp + 1
                    c = raw[k1:k1 + 1]
                    if c == "(" or c == "\x1b":
                        j = raw.find(")", k1)
                        sp = raw.find(" ", j) if j > 0 else -1
                        if sp > 0:
                            cand = raw[:sp + 1]
                            info = self._prefix_cache.get(cand)
                            if info is None:
                                info = self._learn_prefix(cand)
                            if info is not False:
                                k = sp + 1
                    if k == 0:
                        cand = raw[:k1]
                        info = self._prefix_cache.get(cand)
                        if info is None:
                            info = self._learn_prefix(cand)
                        if info is not False:
                            k = k1
            if k == 0:
                if c0 == "(" or c0 == "\x1b":
                    return self._feed_slow(raw, ts)
                info = None
            c = raw[k:k + 1]
            level = None
            if "0" <= c <= "9":
                m = _DHEAD_match(raw, k)
                if m is not None:
                    g = m.groups()
                    level = g[0] or g[1] or g[2] or g[4]
                    k = m.end()
            elif "A" <= c <= "Z":
                m = _LHEAD_match(raw, k)
                if m is not None:
                    level = m.group(1) or m.group(2)
                    k = m.end()
            elif c == "\x1b":
                return self._feed_slow(raw, ts)
            msg = raw[k:] if k else raw
            if "\x1b" in msg:
                msg = _ANSI_sub("", msg)
            msg = msg.rstrip()
        else:
            return self._feed_slow(raw, ts)
        return self._emit(msg, level, info, ts)

    def _feed_slow(self, raw: str, ts: float) -> list[LogEvent]:
        s = collapse_cr(_ANSI_sub("", raw) if "\x1b" in raw else raw)
        m = _PROCS_match(s)
        info = None
        k = 0
        if m is not None:
            k = m.end()
            pre = s[:k]
            info = self._prefix_cache.get(pre)
            if info is None:
                info = self._learn_prefix(pre)
            if info is False:  # cannot happen for a regex-matched prefix; be safe
                info, k = None, 0
        k, level, _ = _header(s, k)
        return self._emit(s[k:].rstrip(), level, info, ts)

    def _learn_prefix(self, cand: str):
        """Parse a raw prefix candidate; cache (process, rank identity or None, rank) or False."""
        cache = self._prefix_cache
        if len(cache) >= 4096:
            cache.clear()
        m = _PROCS_fullmatch(_ANSI_sub("", cand) if "\x1b" in cand else cand)
        if m is None:
            cache[cand] = False
            return False
        p1, r1, pid1, p2, r2, pid2 = m.groups()
        if p2 is not None:
            wname, rattr, wpid = p2, r2, pid2
        elif _is_worker(p1):
            wname, rattr, wpid = p1, r1, pid1
        else:
            info = cache[cand] = (p1, None, None)
            return info
        rank = _rank_of(wname, rattr)
        if rank is not None:
            self.ranks_seen.add(rank)
        info = cache[cand] = (p1, rank if rank is not None else "pid" + wpid, rank)
        return info

    def _emit(self, msg: str, level: str | None, info, ts: float) -> list[LogEvent]:
        if not msg:
            return []
        if level == "WARN":
            level = "WARNING"
        if info is not None:
            process, ident, rank = info
        else:
            process = ident = rank = None
        if ident is None and msg[:1].isalnum() and "GET /metrics" in msg and _METRICS_GET_match(msg) is not None:
            return self._fold_metrics(level, process, ts)
        if ident is not None:
            # worker line: merge per-rank repeats. _exact memoises message -> group list of its masked key.
            lst = self._exact.get(msg)
            if lst is None:
                key = _NUM_sub("#", msg)
                groups = self._groups
                lst = groups.get(key)
                if lst is None:
                    if len(groups) >= self._max_groups:
                        self._prune(ts)
                        groups = self._groups
                    lst = groups[key] = []
                exact = self._exact
                if len(exact) >= 4 * self._max_groups:
                    exact.clear()
                exact[msg] = lst
            window = self.dedup_window_s
            for g in lst:
                members = g[1]
                if ident not in members and ts - g[2] <= window:
                    members.add(ident)
                    n = len(members)
                    if n > self._full_group:
                        self._full_group = n
                    elif n == self._full_group:
                        lst.remove(g)  # every rank has printed it: no more repeats expected
                    return [RankCount(g[0], n, rank, ts)]
            line_id = self.lines_emitted
            lst.append([line_id, {ident}, ts])
            if len(lst) > 4:
                del lst[0]
        else:
            line_id = self.lines_emitted
        self.lines_emitted = line_id + 1

        out: list[LogEvent] = [None]  # type: ignore[list-item]  # slot for the CleanLine
        kind = None
        if self.stop_ts is not None:
            # After our own stop: shutdown noise (tracebacks, EngineDeadError) is neither an error nor a phase.
            self.lines_after_stop += 1
            if level in _ERROR_LEVELS or classify_error(msg) is not None or _EXC.match(msg) is not None:
                self.errors_after_stop += 1
            out[0] = CleanLine(line_id, msg, level, process, rank, False, ts)
            self._recent.append(msg)
            return out
        if _GATE_search(msg) is not None:
            kind = self._classify(msg, ts, line_id, out)
        is_error = (
            kind is not None
            or level in _ERROR_LEVELS
            or (level is None and ("Error" in msg or "Exception" in msg or "FATAL" in msg or "Traceback" in msg)
                and _EXC.match(msg) is not None)
        )
        out[0] = CleanLine(line_id, msg, level, process, rank, is_error, ts)
        self._recent.append(msg)
        return out

    def close(self, ts: float) -> list[LogEvent]:
        """End of stream: close the open phase. Idempotent."""
        if self.closed:
            return []
        self.closed = True
        if self.phase is None:
            return []
        rec = self._records[self.phase]
        rec.end_ts = ts
        return [PhaseChange(None, self.phase, ts - rec.start_ts, ts, "end of stream")]

    # -- internals -------------------------------------------------------------------------------
    def _fold_metrics(self, level: str | None, process: str | None, ts: float) -> list[LogEvent]:
        """One more access line of the /metrics sampling: the first becomes the folded line, the others its count."""
        self.metrics_gets += 1
        if self._metrics_line is None:
            self._metrics_line = line_id = self.lines_emitted
            self.lines_emitted = line_id + 1
            return [CleanLine(line_id, METRICS_FOLD_TEXT, level, process, None, False, ts)]
        return [RankCount(self._metrics_line, self.metrics_gets, None, ts)]

    def _prune(self, ts: float) -> None:
        w = self.dedup_window_s
        kept = {k: lst for k, lst in self._groups.items() if lst and ts - lst[-1][2] <= w}
        if len(kept) > self._max_groups // 2:
            kept = dict(islice(kept.items(), len(kept) - self._max_groups // 4, None))
        self._groups = kept
        self._exact.clear()

    def _switch_route(self, route: str) -> None:
        self.route = route
        self._order = {p: i for i, p in enumerate(ROUTES[route])}
        if self.phase is not None:
            self._idx = self._order[self.phase]

    def _classify(self, msg: str, ts: float, line_id: int, out: list[LogEvent]) -> str | None:
        kind = classify_error(msg)
        if kind is not None:
            ctx = tuple(reversed(list(islice(reversed(self._recent), self.context_lines))))
            err = ErrorSignature(kind, msg, ctx, ts, line_id)
            self.errors.append(err)
            out.append(err)
            return kind

        if self.route == "native":
            for k in _LEGACY_MARKERS:
                if k in msg:
                    self._switch_route("legacy")
                    break
            else:
                # Generic vLLM (CPU / CUDA) only before any Neuron-only phase was seen.
                if self.phase in (None, "config"):
                    for k in _VLLM_MARKERS:
                        if k in msg:
                            self._switch_route("vllm")
                            break

        phase = _phase_of(msg, _VLLM_PHASE_RULES if self.route == "vllm" else _PHASE_RULES)
        if phase is not None:
            idx = self._order[phase]
            if idx > self._idx:
                prev = self.phase
                prev_elapsed = None
                if prev is not None:
                    rec = self._records[prev]
                    rec.end_ts = ts
                    prev_elapsed = ts - rec.start_ts
                rec = PhaseRecord(phase, ts, None, msg)
                self.phases.append(rec)
                self._records[phase] = rec
                self.phase = phase
                self._idx = idx
                out.append(PhaseChange(phase, prev, prev_elapsed, ts, msg))

        if "cache hit" in msg or "cache miss" in msg:
            m = _CACHE_RE.search(msg)
            if m is not None:
                src, what, key = m.groups()
                hit = what == "hit"
                table = self.cache_hits if hit else self.cache_misses
                table[key] = table.get(key, 0) + 1
                out.append(CacheResult(key, hit, "remote" if src == "Remote" else "local", ts))
        elif "Compilation cache key" in msg:
            m = _CACHE_KEY_RE.search(msg)
            if m is not None:
                self.cache_keys[m.group(1)] = None
        elif "Directly load" in msg or "Compiling a graph for" in msg or "saved AOT compiled" in msg:
            key = None
            m = _TC_HIT_RE.search(msg)
            if m is not None:
                hit, key = True, (m.group(1) or "") + m.group(2)
            elif (m := _TC_MISS_RE.search(msg)) is not None:
                hit, key = False, (m.group(1) or "") + m.group(2)
            elif (m := _TC_AOT_RE.search(msg)) is not None:
                hit = msg[len(m.group(1) or ""):].startswith("Directly")
                h = _AOT_HASH_RE.search(m.group(2))
                key = (m.group(1) or "") + "AOT " + (h.group(1)[:16] if h else m.group(2))
            if key is not None:
                table = self.cache_hits if hit else self.cache_misses
                table[key] = table.get(key, 0) + 1
                out.append(CacheResult(key, hit, "torch-compile", ts))
        elif "artifacts" in msg or "cached neff" in msg:
            m = _LEGACY_HIT_RE.search(msg)
            hit = m is not None
            if m is None:
                m = _LEGACY_MISS_RE.search(msg)
            if m is not None:
                path = next(x for x in m.groups() if x)
                mm = _MODULE_RE.search(path)
                key = mm.group(0) if mm else path.rstrip(".")
                table = self.cache_hits if hit else self.cache_misses
                table[key] = table.get(key, 0) + 1
                out.append(CacheResult(key, hit, "legacy", ts))

        for gate, rx, name, rphase, acc in _TIMING_RULES:
            if gate in msg:
                m = rx.search(msg)
                if m is not None:
                    try:
                        secs = float(m.group(1).rstrip("."))
                    except ValueError:
                        continue
                    t = Timing(name, secs, ts)
                    self.timings.append(t)
                    out.append(t)
                    if isinstance(rphase, tuple):
                        rphase = self.phase if self.phase in rphase else rphase[0]
                    rec = self._records.get(rphase) if rphase else None
                    if rec is not None:
                        rec.reported_s = (rec.reported_s or 0.0) + secs if acc else secs
                break

        if _READY in msg and self.ready_ts is None:
            self.ready_ts = ts
            self._ready_line_id = line_id
            out.append(Ready(ts, ts - (self.first_ts if self.first_ts is not None else ts)))
        return None
