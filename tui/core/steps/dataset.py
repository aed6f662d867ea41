"""Step `dataset`: put a verified copy of the benchmark dataset (sonnet.txt) in place.

* `dataset.path` set: use that local file (it must exist; its sha256 must match `dataset.sha256` when
  given). Nothing is downloaded.
* Otherwise download `dataset.url` (placeholders resolved, e.g. `{sim_hub}`) to `<run>/sonnet.txt`:
  streamed to `<run>/sonnet.txt.part` with Progress events (at most every 100 ms, plus a final one),
  resumed with `Range: bytes=N-` when the connection drops mid-file (a few retries within the step) or
  when a previous run left a .part behind; a server that ignores Range is handled by restarting. The
  sha256 is verified before the atomic rename; on a mismatch nothing is kept.
* Reuse without any request: an existing `<run>/sonnet.txt` (verified when a sha256 is configured), or
  a verified copy in specdec-tui's cache (`{cache_dir}/datasets/<sha256>/sonnet.txt`, filled after
  every verified download).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tui.core.events import Artifact, Progress
from tui.core.host.hub import transport_failure
from tui.core.secrets import redact
from tui.core.steps.base import FactRecorder, StepContext, StepResult

STEP = "dataset"
FILENAME = "sonnet.txt"
TIMEOUT_S = 10.0  # connect/read timeout of each request
RETRIES = 3  # resumptions after a connection dropped mid-file
PROGRESS_INTERVAL_S = 0.1


class _Fail(Exception):
    def __init__(self, name: str, value: str, detail: str, remedy: str):
        super().__init__(value)
        self.name, self.value, self.detail, self.remedy = name, value, detail, remedy


def _digest(path: Path) -> tuple[str, int, int]:
    """(sha256, bytes, lines) of a file."""
    h = hashlib.sha256()
    size = lines = 0
    last = b""
    with open(path, "rb") as fh:
        while True:
            block = fh.read(1 << 20)
            if not block:
                break
            h.update(block)
            size += len(block)
            lines += block.count(b"\n")
            last = block[-1:]
    if size and last != b"\n":
        lines += 1
    return h.hexdigest(), size, lines


def _copy_atomic(src: Path, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(src, "rb") as fi, open(tmp, "wb") as fo:
            while True:
                block = fi.read(1 << 20)
                if not block:
                    break
                fo.write(block)
            fo.flush()
            os.fsync(fo.fileno())
        os.replace(tmp, dest)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def _remedy(url: str) -> str:
    return (f"Download it yourself (e.g. `wget -O sonnet.txt {url}`) and set dataset.path to that file "
            "(keep dataset.sha256 so it is verified).")


class _Progress:
    def __init__(self, ctx: StepContext, description: str):
        self.ctx = ctx
        self.description = description
        self.last_emit = 0.0
        self.t0 = time.monotonic()
        self.session_bytes = 0  # bytes received in this step (for the rate)

    def update(self, completed: int, total: int | None, *, force: bool = False, done: bool = False) -> None:
        now = time.monotonic()
        if not (force or done) and now - self.last_emit < PROGRESS_INTERVAL_S:
            return
        self.last_emit = now
        elapsed = max(now - self.t0, 1e-6)
        rate = self.session_bytes / elapsed if self.session_bytes else None
        eta = None
        if rate and total is not None:
            eta = max(0.0, (total - completed) / rate)
        self.ctx.emit(Progress(STEP, "download", float(completed), None if total is None else float(total), "B",
                               rate, 0.0 if done else eta, self.description, done))


_CR_RE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_CR_STAR_RE = re.compile(r"bytes\s+\*/(\d+)")


async def _download(ctx: StepContext, url: str, part: Path, timeout_s: float, retries: int,
                    notes: list[str]) -> None:
    """Stream `url` into `part` (resuming what is there). Raises _Fail on a final error."""
    import httpx

    prog = _Progress(ctx, url)
    drops = 0
    restarts = 0
    timeout = httpx.Timeout(timeout_s)
    async with httpx.AsyncClient(follow_redirects=True, timeout=timeout) as client:
        while True:
            offset = part.stat().st_size if part.exists() else 0
            headers = {"Accept-Encoding": "identity"}
            if offset:
                headers["Range"] = f"bytes={offset}-"
            received = 0
            total: int | None = None
            try:
                async with client.stream("GET", url, headers=headers) as resp:
                    if resp.status_code == 416 and offset:
                        m = _CR_STAR_RE.search(resp.headers.get("content-range", ""))
                        if m and int(m.group(1)) == offset:
                            prog.update(offset, offset, done=True)
                            return  # the .part already holds the whole file
                        part.unlink(missing_ok=True)
                        restarts += 1
                        if restarts > retries:
                            raise _Fail("download", "HTTP 416", f"GET {url} keeps refusing the range request",
                                        _remedy(url))
                        notes.append("a stale partial download was discarded")
                        continue
                    if resp.status_code >= 400:
                        reason = resp.reason_phrase or ""
                        raise _Fail("download", f"HTTP {resp.status_code} {reason}".strip(),
                                    f"GET {url} answered HTTP {resp.status_code}", _remedy(url))
                    mode = "wb"
                    if resp.status_code == 206 and offset:
                        m = _CR_RE.search(resp.headers.get("content-range", ""))
                        if m and int(m.group(1)) == offset:
                            mode = "ab"
                            total = int(m.group(3)) if m.group(3) != "*" else None
                            notes.append(f"resumed at byte {offset}")
                        else:
                            notes.append("the server answered another range; restarted from the beginning")
                            offset = 0
                    elif offset:
                        notes.append("the server ignored the Range request; restarted from the beginning")
                        offset = 0
                    if total is None and mode == "wb":
                        cl = resp.headers.get("content-length")
                        total = int(cl) if cl and cl.isdigit() and resp.status_code == 200 else None
                    prog.update(offset, total, force=True)
                    with open(part, mode) as fh:
                        async for chunk in resp.aiter_bytes():  # as received: a drop keeps what arrived
                            fh.write(chunk)
                            received += len(chunk)
                            prog.session_bytes += len(chunk)
                            prog.update(offset + received, total)
                        fh.flush()
                        os.fsync(fh.fileno())
                    if total is not None and offset + received < total:
                        raise httpx.RemoteProtocolError(f"connection closed after {offset + received} of {total} bytes")
                    prog.update(offset + received, offset + received if total is None else total, done=True)
                    return
            except _Fail:
                raise
            except httpx.HTTPError as exc:
                mid_file = received > 0 or isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError))
                if mid_file and drops < retries:
                    drops += 1
                    notes.append(f"connection dropped after {offset + received} bytes; retrying")
                    await asyncio.sleep(0.05 * drops)
                    continue
                t = transport_failure(exc, url, timeout_s, _remedy(url))
                if t is None:
                    raise _Fail("download", type(exc).__name__, f"GET {url}: {exc}", _remedy(url)) from None
                attempts = f" (after {drops} retries)" if drops else ""
                raise _Fail("download", t.value + attempts, t.detail, t.remedy) from None


async def run(ctx: StepContext, *, timeout_s: float | None = None, retries: int | None = None) -> StepResult:
    rec = FactRecorder(ctx, STEP)
    ds = ctx.profile.dataset
    expected = (ds.sha256 or "").lower()
    timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
    retries = RETRIES if retries is None else retries

    def add(name: str, value: Any, status: str, detail: str = "", remedy: str = "") -> None:
        rec.add(name, redact(str(value)), status, redact(detail), redact(remedy))  # type: ignore[arg-type]

    def finish(path: Path, source: str, how: str, digest: tuple[str, int, int]) -> StepResult:
        sha, size, lines = digest
        add("source", source, "pass", how)
        add("size", f"{size} bytes", "info" if size else "fail", str(path),
            "" if size else "The file is empty; check dataset.path / dataset.url.")
        if expected:
            add("sha256", "verified", "pass", sha)
        else:
            add("sha256", "not checked", "info", f"{sha} (dataset.sha256 is empty)",
                f"Set dataset.sha256 = \"{sha}\" to pin this exact file.")
        add("lines", lines, "info" if lines else "fail", "lines of text the benchmark samples prompts from")
        ctx.emit(Artifact(STEP, path.name, str(path)))
        return rec.result({"path": str(path), "sha256": sha, "bytes": size, "lines": lines,
                           "verified": bool(expected), "source": source})

    # -- a local file ------------------------------------------------------------------------------
    if ds.path:
        path = Path(ctx.ph.resolve(ds.path)).expanduser()
        if not path.is_file():
            add("dataset file", str(path), "fail", "dataset.path does not name an existing file",
                f"Fix dataset.path, or clear it to download {ctx.ph.resolve(ds.url)}.")
            return rec.result({"path": str(path), "sha256": None, "bytes": None})
        try:
            digest = await asyncio.to_thread(_digest, path)
        except OSError as exc:
            add("dataset file", str(path), "fail", f"cannot read it: {exc}", "Check the file's permissions.")
            return rec.result({"path": str(path), "sha256": None, "bytes": None})
        if expected and digest[0] != expected:
            add("sha256", "mismatch", "fail", f"expected {expected}, actual {digest[0]} ({path})",
                "Use the right file, or update dataset.sha256 (empty skips the check).")
            return rec.result({"path": str(path), "sha256": digest[0], "bytes": digest[1]})
        return finish(path, str(path), "local file (dataset.path); nothing downloaded", digest)

    # -- download (or reuse) -----------------------------------------------------------------------
    url = ctx.ph.resolve(ds.url)
    dest = ctx.run.file(FILENAME)
    part = ctx.run.file(FILENAME + ".part")
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        add("download", url or "(empty)", "fail", "dataset.url is not an http(s) URL",
            "Set dataset.url to an http(s) URL, or set dataset.path to a local file.")
        return rec.result({"path": None, "sha256": None, "bytes": None})

    if dest.is_file():
        digest = await asyncio.to_thread(_digest, dest)
        if not expected or digest[0] == expected:
            return finish(dest, url, f"reused {dest} from an earlier attempt of this run; nothing downloaded", digest)
        rec.notice("warning", f"{dest} does not match dataset.sha256; downloading it again")
        dest.unlink(missing_ok=True)

    cached = Path(ctx.ph.cache_dir) / "datasets" / expected / FILENAME if expected else None
    if cached is not None and cached.is_file():
        digest = await asyncio.to_thread(_digest, cached)
        if digest[0] == expected:
            await asyncio.to_thread(_copy_atomic, cached, dest)
            return finish(dest, url, f"copied from the verified cache {cached}; nothing downloaded", digest)

    notes: list[str] = []
    if part.exists() and part.stat().st_size:
        notes.append(f"found a partial download of {part.stat().st_size} bytes")
    try:
        await _download(ctx, url, part, timeout_s, retries, notes)
    except _Fail as fl:
        add(fl.name, fl.value, "fail", fl.detail, fl.remedy)
        return rec.result({"path": None, "sha256": None, "bytes": None})
    except OSError as exc:
        add("download", "cannot write", "fail", f"{part}: {exc}", "Check free space and permissions of the run directory.")
        return rec.result({"path": None, "sha256": None, "bytes": None})

    digest = await asyncio.to_thread(_digest, part)
    if expected and digest[0] != expected:
        part.unlink(missing_ok=True)
        add("sha256", "mismatch", "fail",
            f"expected {expected}, actual {digest[0]} ({digest[1]} bytes from {url}); the file was not kept",
            "Check dataset.url (it may serve a different or changed file) or update dataset.sha256; "
            + _remedy(url))
        return rec.result({"path": None, "sha256": digest[0], "bytes": digest[1]})
    os.replace(part, dest)
    if cached is not None:
        try:
            await asyncio.to_thread(_copy_atomic, dest, cached)
        except OSError:
            pass  # the cache is an optimisation only
    how = "downloaded" + (" (" + "; ".join(notes) + ")" if notes else "")
    return finish(dest, url, how, digest)


__all__ = ["run"]
