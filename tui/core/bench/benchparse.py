"""Parsers for `vllm bench serve` output, for every vLLM version the TUI meets.

- `parse_result_json(text_or_path)`: the `--save-result` JSON. Shapes: 0.11 (no `failed`, no
  `spec_decode_*`), 0.14+ (`failed`, `spec_decode_*` on spec runs), 0.31+ (`latencies`,
  `queue_times`), 0.33 (more keys), 0.34 (the same keys; an in-stream error now fails its request), NaN
  values, `request_rate: "inf"`, `--append-result` files
  (one object per line: the last one wins) and indented re-dumps (`vllm bench sweep`).
- `parse_stdout_blocks(text)`: the "Serving Benchmark Result" and "Speculative Decoding" blocks.
- `first_request_error(text)`: the first failed request's error as bench printed it ("Error 0: ..."),
  a traceback reduced to its final exception line.
- `TqdmProgressParser`: tqdm's `\\r`-separated progress updates on the bench's stderr.

Units: latency stats in ms (as vLLM writes them); spec acceptance rates in PERCENT (vLLM's JSON
keeps the per-position rates as fractions; they are converted here).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.core import vllmfacts
from tui.core.bench.metrics import SpecStats
from tui.core.versions import at_least

__all__ = ["BenchParseError", "LatencyStats", "BenchResult", "parse_result_json", "parse_stdout_blocks",
           "first_request_error", "stream_errors_counted", "Progress", "TqdmProgressParser", "LATENCY_METRICS"]

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")


class BenchParseError(ValueError):
    """A result file that is not a usable `vllm bench serve` result. The message names the file."""

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


@dataclass
class LatencyStats:
    """One latency metric in ms. `percentiles` maps the key word ("99", "99.9") to the value."""

    mean: float | None = None
    median: float | None = None
    std: float | None = None
    percentiles: dict[str, float] = field(default_factory=dict)

    @property
    def p50(self) -> float | None:
        return self.percentiles.get("50")

    @property
    def p90(self) -> float | None:
        return self.percentiles.get("90")

    @property
    def p99(self) -> float | None:
        return self.percentiles.get("99")


@dataclass
class BenchResult:
    completed: int
    failed: int
    num_prompts: int | None
    duration: float
    request_throughput: float | None
    output_throughput: float | None
    total_token_throughput: float | None
    request_goodput: float | None = None    # req/s of requests within the SLO; null unless --goodput
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: int | None = None
    request_rate: float | None = None       # math.inf for "inf"
    max_concurrency: int | None = None
    model_id: str | None = None
    label: str | None = None
    date: str | None = None
    failed_reported: bool = False           # False: 0.11 shape, failed = num_prompts - completed
    ttft: LatencyStats | None = None        # None when the metric was not selected
    tpot: LatencyStats | None = None
    itl: LatencyStats | None = None
    e2el: LatencyStats | None = None
    latencies: list[float] | None = None    # seconds (0.31+)
    queue_times: list[float] | None = None  # seconds (0.31+)
    spec: SpecStats | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    source: str = "<string>"

    def latency(self, metric: str) -> LatencyStats | None:
        return getattr(self, metric)


def _load_objects(text: str, source: str) -> list[Any]:
    """One JSON document, or several concatenated (`--append-result`: newline separated)."""
    dec = json.JSONDecoder()
    objs: list[Any] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise BenchParseError(source, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        objs.append(obj)
    return objs


def _num(d: dict[str, Any], key: str, source: str, *, integer: bool = False, required: bool = False):
    if key not in d or d[key] is None:
        if required:
            raise BenchParseError(source, f"missing key {key!r} (not a `vllm bench serve` result?)")
        return None
    v = d[key]
    if isinstance(v, str):
        try:
            v = float(v)  # "inf", "nan", "1.5"
        except ValueError:
            raise BenchParseError(source, f"key {key!r} is not a number: {d[key]!r}") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BenchParseError(source, f"key {key!r} is not a number: {v!r}")
    if integer:
        if isinstance(v, float) and not v.is_integer():
            if math.isnan(v):
                return None
            raise BenchParseError(source, f"key {key!r} is not an integer: {v!r}")
        return int(v)
    return float(v)


_PCT_KEY = re.compile(r"^p(?P<p>\d+(?:\.\d+)?)_(?P<metric>[a-z0-9_]+)_ms$")


def _latency_stats(d: dict[str, Any], metric: str, source: str) -> LatencyStats | None:
    st = LatencyStats()
    seen = False
    for part in ("mean", "median", "std"):
        key = f"{part}_{metric}_ms"
        if key in d:
            seen = True
            setattr(st, part, _num(d, key, source))
    for key in d:
        m = _PCT_KEY.match(key)
        if m and m.group("metric") == metric:
            seen = True
            val = _num(d, key, source)
            if val is not None:
                st.percentiles[m.group("p")] = val
    return st if seen else None


def _float_list(d: dict[str, Any], key: str, source: str) -> list[float] | None:
    if key not in d or d[key] is None:
        return None
    v = d[key]
    if not isinstance(v, list):
        raise BenchParseError(source, f"key {key!r} is not a list")
    try:
        return [float(x) for x in v]
    except (TypeError, ValueError):
        raise BenchParseError(source, f"key {key!r} holds non-numbers") from None


def _spec(d: dict[str, Any], source: str) -> SpecStats | None:
    if "spec_decode_acceptance_rate" not in d:
        return None
    per_pos = _float_list(d, "spec_decode_per_position_acceptance_rates", source) or []
    return SpecStats(
        acceptance_rate=_num(d, "spec_decode_acceptance_rate", source) or 0.0,
        acceptance_length=_num(d, "spec_decode_acceptance_length", source) or 0.0,
        num_drafts=_num(d, "spec_decode_num_drafts", source, integer=True) or 0,
        draft_tokens=_num(d, "spec_decode_draft_tokens", source, integer=True) or 0,
        accepted_tokens=_num(d, "spec_decode_accepted_tokens", source, integer=True) or 0,
        per_position=[p * 100.0 for p in per_pos],
    )


def parse_result_json(text_or_path: str | os.PathLike[str]) -> BenchResult:
    """Parse a result file (path) or its text. A `str` that does not start with `{`/`[` is a path.
    Raises BenchParseError (a ValueError) naming the file and the problem, or OSError when the
    file cannot be read."""
    if isinstance(text_or_path, os.PathLike) or (isinstance(text_or_path, str)
                                                 and not text_or_path.lstrip().startswith(("{", "["))):
        path = Path(text_or_path)
        source = str(path)
        if isinstance(text_or_path, str) and not text_or_path.strip():
            raise BenchParseError("<string>", "empty input")
        text = path.read_text(encoding="utf-8", errors="replace")
    else:
        source, text = "<string>", str(text_or_path)
    objs = _load_objects(text, source)
    if not objs:
        raise BenchParseError(source, "empty file")
    d = objs[-1]
    if not isinstance(d, dict):
        raise BenchParseError(source, f"expected a JSON object, got {type(d).__name__}")

    completed = _num(d, "completed", source, integer=True, required=True)
    duration = _num(d, "duration", source, required=True)
    num_prompts = _num(d, "num_prompts", source, integer=True)
    failed_reported = "failed" in d and d["failed"] is not None
    if failed_reported:
        failed = _num(d, "failed", source, integer=True)
    else:
        failed = max(num_prompts - completed, 0) if num_prompts is not None else 0
    rr = _num(d, "request_rate", source)
    model_id = d.get("model_id")
    label = d.get("label")
    date = d.get("date")
    return BenchResult(
        completed=completed,
        failed=failed,
        num_prompts=num_prompts,
        duration=duration,
        request_throughput=_num(d, "request_throughput", source),
        output_throughput=_num(d, "output_throughput", source),
        total_token_throughput=_num(d, "total_token_throughput", source),
        request_goodput=_num(d, "request_goodput", source),
        total_input_tokens=_num(d, "total_input_tokens", source, integer=True),
        total_output_tokens=_num(d, "total_output_tokens", source, integer=True),
        max_output_tokens_per_s=_num(d, "max_output_tokens_per_s", source),
        max_concurrent_requests=_num(d, "max_concurrent_requests", source, integer=True),
        request_rate=rr,
        max_concurrency=_num(d, "max_concurrency", source, integer=True),
        model_id=model_id if isinstance(model_id, str) else None,
        label=label if isinstance(label, str) else None,
        date=date if isinstance(date, str) else None,
        failed_reported=failed_reported,
        ttft=_latency_stats(d, "ttft", source),
        tpot=_latency_stats(d, "tpot", source),
        itl=_latency_stats(d, "itl", source),
        e2el=_latency_stats(d, "e2el", source),
        latencies=_float_list(d, "latencies", source),
        queue_times=_float_list(d, "queue_times", source),
        spec=_spec(d, source),
        raw=d,
        source=source,
    )


# ---------------------------------------------------------------------------------------------
# stdout blocks

_SPEC_HEADER = "Speculative Decoding"
_OTHER_BLOCKS = ("Diffusion Decoding", "Probe Requests")  # 0.33 blocks, not parsed
_SERVING_START = re.compile(r"={3,} Serving Benchmark Result ={3,}")
_LINE = re.compile(r"^(?P<label>[^:]+?)\s*:\s+(?P<value>\S+)\s*$")
_POS = re.compile(r"^\s*Position\s+(?P<pos>\d+)\s*:\s+(?P<value>\S+)\s*$")
_HEADER = re.compile(r"^[=-]{2,}\s*(?P<title>[^=-].*?)\s*[=-]{2,}$")


def _canonical_label(label: str) -> str:
    label = " ".join(label.split())
    if label.lower() == "total token throughput (tok/s)":
        return "Total token throughput (tok/s)"  # 0.11 prints "Total Token throughput"
    return label


def _to_float(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def parse_stdout_blocks(text: str) -> dict[str, Any]:
    """Parse the LAST result block in `text` (bench stdout, possibly mixed with stderr).

    Returns {"serving": {label: float}, "spec": {label: float} | None, "per_position": [percent]}.
    Labels are as printed without the colon ("Mean TPOT (ms)", "Acceptance rate (%)");
    "Total Token throughput (tok/s)" (0.11) is normalised to "Total token throughput (tok/s)".
    `serving` is empty when no result block was found.
    """
    lines: list[str] = []
    for raw in text.replace("\r\n", "\n").split("\n"):
        lines.append(raw.rsplit("\r", 1)[-1])  # keep what a terminal would show after tqdm's \r
    start = None
    for i, ln in enumerate(lines):
        if _SERVING_START.search(ln):
            start = i
    out: dict[str, Any] = {"serving": {}, "spec": None, "per_position": []}
    if start is None:
        return out
    section = "serving"
    for ln in lines[start + 1:]:
        s = ln.strip()
        if not s:
            continue
        if set(s) == {"="}:
            break  # closing rule
        h = _HEADER.match(s)
        if h:
            title = h.group("title")
            if title == _SPEC_HEADER:
                section = "spec"
                out["spec"] = {}
            elif title in _OTHER_BLOCKS:
                section = "other"
            else:
                section = "serving"  # a latency sub-block of the serving result
            continue
        if section == "other":
            continue
        p = _POS.match(ln)
        if p and section == "spec":
            v = _to_float(p.group("value"))
            pos = int(p.group("pos"))
            per = out["per_position"]
            while len(per) <= pos:
                per.append(float("nan"))
            per[pos] = v if v is not None else float("nan")
            continue
        m = _LINE.match(s)
        if not m:
            continue
        v = _to_float(m.group("value"))
        if v is None:
            continue
        out[section][_canonical_label(m.group("label"))] = v
    return out


# ---------------------------------------------------------------------------------------------
# failed requests

_FAILED_HEADER = "Failed requests during benchmark run detected"
_ERROR_N = re.compile(r"^Error (?P<n>\d+): ?(?P<text>.*)$")
_TB_NOISE = ("Traceback (most recent call last):", "The above exception was the direct cause",
             "During handling of the above exception")


def _stream_error_text(text: str) -> str:
    """vLLM >= 0.34 fails a request whose SSE stream carried {"error": ...} and records that value as JSON
    (vllm/benchmarks/lib/endpoint_request_func.py): its message, with the type and code where given."""
    try:
        err = json.loads(text)
    except ValueError:
        return text
    if isinstance(err, dict) and err.get("message"):
        extra = ", ".join(str(err[k]) for k in ("type", "code") if err.get(k) not in (None, ""))
        return f"the server's stream reported an error: {err['message']}" + (f" ({extra})" if extra else "")
    return f"the server's stream reported an error: {text}"


def first_request_error(text: str) -> str | None:
    """The first error `vllm bench serve` printed under "Failed requests during benchmark run detected
    (capping to 10):". vLLM records `response.reason` ("Not Found"), for an exception the whole formatted
    traceback (reduced here to its last exception line, e.g. `aiohttp.client_exceptions.ClientConnectorError:
    Cannot connect to host 127.0.0.1:8000 ...`) and, from 0.34, for an {"error": ...} chunk in the stream that
    error as JSON (given here as its message, type and code). None when nothing failed.

    Failure accounting follows the bench's own counts (`completed`, `failed`): from vLLM 0.34 a request whose
    stream carries an error chunk is failed; on 0.33 and older the same request counted as completed, with
    whatever text came before the error (see stream_errors_counted)."""
    lines = [ln.rsplit("\r", 1)[-1] for ln in text.replace("\r\n", "\n").split("\n")]
    try:
        start = next(i for i, ln in enumerate(lines) if ln.startswith(_FAILED_HEADER))
    except StopIteration:
        return None
    block: list[str] = []
    for ln in lines[start + 1:]:
        m = _ERROR_N.match(ln)
        if m:
            if block:
                break  # the next error
            block.append(m.group("text"))
            continue
        if not block:
            continue
        if _SERVING_START.search(ln) or ln.startswith("tip: "):
            break
        block.append(ln)
    if not block:
        return None
    if block[0].lstrip().startswith("{"):
        return _stream_error_text(block[0].strip())
    if not block[0].startswith("Traceback"):
        return block[0].strip() or None
    for ln in reversed(block):
        s = ln.strip()
        if s and not ln[:1].isspace() and not s.startswith(_TB_NOISE):
            return s
    return block[0].strip()


def stream_errors_counted(vllm_version: str | None) -> bool | None:
    """Whether `vllm bench serve` of `vllm_version` counts a request whose stream carried {"error": ...} as
    failed (0.34 on: True; 0.33 and older: False, it counted as completed); None for an unknown version."""
    found = vllmfacts.has(vllm_version, "bench_stream_error_fails_request")
    if found is not None:
        return found
    return at_least(vllm_version, STREAM_ERROR_FAILS_SINCE)


STREAM_ERROR_FAILS_SINCE = (0, 34)


# ---------------------------------------------------------------------------------------------
# tqdm progress

@dataclass
class Progress:
    n: int
    total: int | None
    percent: float | None
    rate: float | None      # items per second (converted from s/it)
    elapsed: float | None   # seconds
    eta: float | None       # seconds; None when tqdm shows "?"


_SUFFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BAR = re.compile(
    r"(?:(?P<pct>\d+)%\|[^|]*\|\s*)?"
    r"(?P<n>\d+(?:\.\d+)?)(?P<nsuf>[kMGT]?)(?:/(?P<total>\d+(?:\.\d+)?)(?P<tsuf>[kMGT]?))?(?:it)?\s*"
    r"\[(?P<elapsed>[\d:]+|\?)(?:<(?P<eta>[\d:]+|\?))?,\s*(?P<rate>[^,\]]*?)\s*(?:,[^\]]*)?\]\s*$")
_RATE = re.compile(r"^(?P<v>\d+(?:\.\d+)?)(?P<suf>[kMGT]?)(?P<unit>it/s|s/it)$")


def _interval(s: str | None) -> float | None:
    if s is None or s == "?":
        return None
    parts = s.split(":")
    try:
        secs = 0.0
        for p in parts:
            secs = secs * 60 + int(p)
        return secs
    except ValueError:
        return None


def _rate(s: str) -> float | None:
    m = _RATE.match(s.strip())
    if not m:
        return None
    v = float(m.group("v")) * _SUFFIX[m.group("suf")]
    if m.group("unit") == "s/it":
        return 1.0 / v if v > 0 else None
    return v


def parse_tqdm_line(segment: str) -> Progress | None:
    """One tqdm status string, e.g. ` 40%|####      | 12/30 [00:05<00:07,  2.31it/s]`."""
    m = _BAR.search(segment.rstrip())
    if not m:
        return None
    n = int(float(m.group("n")) * _SUFFIX[m.group("nsuf")])
    total = int(float(m.group("total")) * _SUFFIX[m.group("tsuf")]) if m.group("total") else None
    if m.group("pct") is not None:
        pct: float | None = float(m.group("pct"))
    elif total:
        pct = 100.0 * n / total
    else:
        pct = None
    return Progress(n=n, total=total, percent=pct, rate=_rate(m.group("rate")),
                    elapsed=_interval(m.group("elapsed")), eta=_interval(m.group("eta")))


class TqdmProgressParser:
    """Feed raw stderr chunks (any split) or lines; returns the newest Progress found, else None.

    tqdm redraws with `\\r` and ends with `\\n`. Segments are parsed once terminated; an
    unterminated trailing segment is parsed early when it already ends with tqdm's closing `]`.
    """

    def __init__(self) -> None:
        self._buf = ""
        self._last_emitted: str | None = None
        self.last: Progress | None = None

    def feed(self, chunk: str | bytes) -> Progress | None:
        if isinstance(chunk, bytes):
            chunk = chunk.decode("utf-8", errors="replace")
        self._buf += chunk
        parts = re.split(r"[\r\n]", self._buf)
        self._buf = parts.pop()
        newest: Progress | None = None
        for seg in parts:
            if seg == self._last_emitted:
                self._last_emitted = None
                continue
            self._last_emitted = None
            p = parse_tqdm_line(seg)
            if p is not None:
                newest = p
        tail = self._buf
        if tail and tail.rstrip().endswith("]") and tail != self._last_emitted:
            p = parse_tqdm_line(tail)
            if p is not None:
                newest = p
                self._last_emitted = tail
        if newest is not None:
            self.last = newest
        return newest
