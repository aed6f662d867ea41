"""The root cause of a failed server: the line of the log that names what failed (not a wrapper, banner or
traceback header), and the log lines ranked as evidence (`root_cause`, `evidence_rank`, `rank_evidence`)."""

from __future__ import annotations

import re
from typing import Iterable

from tui.core.serverlog.clean import _EXC, clean_line
from tui.core.serverlog.rules import _PROCESS_BANNER, _WRAPPERS, classify_error


# Kinds that wrap the real cause rather than name it.
_GENERIC_KINDS = frozenset(("engine-failed", "engine-dead"))


def _is_wrapper(msg: str) -> bool:
    for w in _WRAPPERS:
        if w in msg:
            return True
    return bool(_PROCESS_BANNER.match(msg))


def _root_cause_clean(msgs: list[str], max_scan: int = 400, run_gap: int = 50) -> str | None:
    n = len(msgs)
    start = n
    for i in range(n - 1, -1, -1):
        if "Engine core initialization failed" in msgs[i] or "EngineCore failed to start" in msgs[i]:
            start = i
            break
    fallback: str | None = None
    found: str | None = None
    found_kind: str | None = None
    found_at = 0
    for i in range(start - 1, max(-1, start - 1 - max_scan), -1):
        if found is not None and found_at - i > run_gap:
            break
        m = msgs[i]
        s = m.strip()
        if not s or _is_wrapper(s):
            continue
        kind = classify_error(s)
        if kind is not None and kind not in _GENERIC_KINDS:
            if found is None:
                found, found_kind, found_at = s, kind, i
            elif kind == found_kind:
                # the earliest of the run, unless a later copy carries more (an NCC code over a banner)
                if evidence_rank(s) <= evidence_rank(found):
                    found = s
                found_at = i
            continue
        if found is None and fallback is None and not m[:1].isspace() and _EXC.match(s) \
                and not s.startswith("Traceback"):
            fallback = s
    return found if found is not None else fallback


_NCC_CODE = re.compile(r"\bNCC_[A-Z]{2,6}\d{2,4}\b")


_NRT_ERR = re.compile(r"\bNRT(?:_[A-Z_]+|:\w+)|\bnrt_\w+ status=|\bTDRV:|Failed to allocate .*? on ND ?\d"
                      r"|(?:Logical )?Neuron ?Core\(s\) not available|Neuron runtime cannot be initialized"
                      r"|Runtime could not be initialized")


# Lines that announce a failure without saying what failed: banners' text, wrappers, traceback headers.
_BOILERPLATE: tuple[str, ...] = (
    "An Internal Compiler Error has occurred", "Please contact Neuron support", "Traceback (most recent call",
    "please check the stack trace above", "Check the stack trace", "Internal details:", "Version information:",
)


def evidence_rank(msg: str) -> int:
    """How decisive one clean log message is as evidence of a failure, lower first:
    0 a compiler error code (`[NCC_…]`) or a Neuron runtime (NRT) error; 1 a Python exception line
    (`SomeError: …`, `FATAL: …`) that names a cause; 2 another line of a known error signature or with an
    error word; 3 any other line; 4 boilerplate (the "An Internal Compiler Error has occurred" banner text,
    the engine's generic wrappers, traceback headers); 9 a line without a letter or digit (a banner of
    asterisks): never evidence."""
    s = msg.strip()
    if not s or not any(c.isalnum() for c in s):
        return 9
    if _NCC_CODE.search(s) or _NRT_ERR.search(s):
        return 0
    if _is_wrapper(s) or any(b in s for b in _BOILERPLATE):
        return 4
    if _EXC.match(s) is not None or s.startswith("FATAL"):
        return 1
    kind = classify_error(s)
    if kind is not None and kind not in _GENERIC_KINDS:
        return 2
    low = s.lower()
    if "error" in low or "failed" in low or "exception" in low:
        return 2
    return 3


def rank_evidence(lines: Iterable[str], limit: int | None = None) -> list[str]:
    """Log lines as evidence: the decisive ones first (evidence_rank; ties keep the log's order), banners
    dropped, duplicates dropped, at most `limit` lines."""
    seen: set[str] = set()
    keyed: list[tuple[int, int, str]] = []
    for i, x in enumerate(lines):
        s = str(x).strip() if x is not None else ""
        if not s or s in seen:
            continue
        seen.add(s)
        r = evidence_rank(s)
        if r < 9:
            keyed.append((r, i, s))
    keyed.sort()
    out = [s for _, _, s in keyed]
    return out if limit is None else out[:limit]


def root_cause(lines: Iterable[str], max_scan: int = 400, run_gap: int = 50) -> str | None:
    """The real cause above the generic engine-failure wrapper, as a clean message.

    Finds the last `Engine core initialization failed` / `EngineCore failed to start` line (or the end
    of the input if there is none) and scans up to `max_scan` lines backwards, skipping other wrappers
    (WorkerProc initialization failed, See root cause above, ...), blanks and traceback frames. Returns
    the nearest line matching a specific error signature (any kind but engine-failed); failing that
    the nearest exception line (`SomeError: ...`, `FATAL: ...`); else None. Of a run of lines with the
    same signature (less than `run_gap` lines apart; e.g. every rank's copy, or SIG_KILL -> "failed with
    -9" -> FATAL) the earliest is returned, which is the most explanatory. `lines` may be raw.
    """
    return _root_cause_clean([clean_line(x)[0] for x in lines], max_scan, run_gap)
