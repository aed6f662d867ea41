"""The run directory: every artifact of one run, and the one place that writes them.

Writes: every file of a run goes through this module. A file is written atomically (a temp file in the
same directory, fsync, rename, then fsync of the directory), so nothing already saved is ever replaced by
a partial write; on failure the temp file is removed. An OSError that says the directory cannot be
written at all (EROFS, ENOSPC, EDQUOT, EACCES, EPERM) becomes one RunDirUnwritable naming the file and
the remedy; after the first one, every later write to that directory raises the same exception at once,
without touching the disk again (so the operator gets one paragraph, not one traceback per file). Log
files that children stream into (AppendLog) never raise: they record the failure for the directory and
stop writing; the engine picks it up.

Secrets: every text file written here passes through tui.core.secrets.redact, the one redaction module.

Reuse: a run directory given again (--run-dir) is checked before anything is written there
(tui.core.run.reuse.check_reuse, above the plan because it compares the saved run with the profile's arms): state.json must parse and have the expected shape, it must belong to the same profile (or
to a profile with the same settings under another name), and no live process may own it. A step left
"running" by an app that is gone (killed) is shown as interrupted and can be run again.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from tui.core.secrets import redact
from tui.core.store.schema import result_problem, state_facts_problem

# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

_UNWRITABLE_ERRNOS = {errno.EROFS, errno.ENOSPC, errno.EACCES, errno.EPERM}
if hasattr(errno, "EDQUOT"):
    _UNWRITABLE_ERRNOS.add(errno.EDQUOT)


class RunDirUnwritable(Exception):
    """The run directory cannot be written. str() is one paragraph: the file, the reason, the remedy."""

    def __init__(self, path: Path, err: int, detail: str = ""):
        self.path = Path(path)
        self.errno = err
        self.detail = detail
        super().__init__(self.message())

    @property
    def directory(self) -> Path:
        return self.path.parent

    def reason(self) -> str:
        e = self.errno
        if e == errno.EROFS:
            return "the file system holding it is read-only (EROFS)"
        if e == errno.ENOSPC:
            return "the disk holding it is full (ENOSPC)"
        if e == getattr(errno, "EDQUOT", -1):
            return "the disk quota of this user there is exhausted (EDQUOT)"
        if e in (errno.EACCES, errno.EPERM):
            return f"permission denied ({errno.errorcode.get(e, e)}): this user may not write there"
        return self.detail or os.strerror(e)

    def remedy(self) -> str:
        e = self.errno
        if e in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
            return ("Free space there, or choose a run directory on another disk with --run-dir DIR; the files "
                    "already saved there are kept as they were.")
        if e in (errno.EACCES, errno.EPERM):
            return "Fix the directory's permissions or choose a writable run directory with --run-dir DIR."
        return "Choose a run directory on a writable file system with --run-dir DIR."

    def message(self) -> str:
        return (f"cannot write {self.path}: {self.reason()}. Nothing more is written to {self.directory}. "
                f"{self.remedy()}")


def unwritable_error(exc: OSError, path: Path) -> RunDirUnwritable | None:
    """The RunDirUnwritable an OSError stands for, or None when it is some other failure."""
    if exc.errno in _UNWRITABLE_ERRNOS:
        return RunDirUnwritable(path, exc.errno, exc.strerror or "")
    return None


def as_unwritable(exc: BaseException, directory: Path) -> RunDirUnwritable | None:
    """For an OSError some code raised while writing a file inside `directory` (e.g. a step writing on its
    own): the recorded RunDirUnwritable, or None when it is not one."""
    if isinstance(exc, RunDirUnwritable):
        return exc
    if not isinstance(exc, OSError) or not exc.filename:
        return None
    target = Path(os.fsdecode(exc.filename))
    try:
        inside = os.path.abspath(target).startswith(_key(directory) + os.sep) or _key(target) == _key(directory)
    except (TypeError, ValueError):
        return None
    err = unwritable_error(exc, target) if inside else None
    return _record_failure(err) if err is not None else None


# Directories found unwritable in this process: later writes there fail at once with the same error.
_FAILED: dict[str, RunDirUnwritable] = {}
_LISTENERS: dict[str, list[Callable[[RunDirUnwritable], None]]] = {}


def _key(directory: Path) -> str:
    return os.path.abspath(str(directory))


def _record_failure(err: RunDirUnwritable) -> RunDirUnwritable:
    key = _key(err.directory)
    if key not in _FAILED:
        _FAILED[key] = err
        for cb in list(_LISTENERS.get(key, [])):
            try:
                cb(err)
            except Exception:
                pass
    return _FAILED[key]


def failure_for(directory: Path) -> RunDirUnwritable | None:
    return _FAILED.get(_key(directory))


def forget_failure(directory: Path) -> None:
    _FAILED.pop(_key(directory), None)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(str(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_fd(fd: int, data: bytes) -> None:
    """Write all of `data` to the temp file `fd`, fsync and close it (tests replace this to simulate a full disk)."""
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically. Raises RunDirUnwritable for EROFS/ENOSPC/EDQUOT/EACCES/EPERM (and at
    once, without trying, once the directory has failed like that); other OSErrors propagate."""
    path = Path(path)
    prior = failure_for(path.parent)
    if prior is not None:
        raise prior
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
        _write_fd(fd, data)
        os.replace(tmp, path)
        tmp = None
        _fsync_dir(path.parent)
    except OSError as exc:
        err = unwritable_error(exc, path)
        if err is None:
            raise
        raise _record_failure(err) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, redact(text).encode("utf-8"))


def json_safe(obj: Any) -> Any:
    """obj with NaN/inf replaced by None (strict JSON: other tools read these files)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def atomic_write_json(path: Path, obj: Any) -> None:
    # Serialised first: a value JSON cannot carry fails here, before anything on disk is touched.
    text = json.dumps(json_safe(obj), indent=2, sort_keys=False, default=str, allow_nan=False) + "\n"
    atomic_write_text(path, text)


class AppendLog:
    """A log file a child's output streams into (line-buffered appends). It never raises: on the first
    EROFS/ENOSPC/EDQUOT/EACCES it records the failure for its directory (the engine stops the run) and
    drops every later line; other errors just stop the log."""

    def __init__(self, path: Path, buffering: int = 1 << 16):
        self.path = Path(path)
        self.error: BaseException | None = None
        self._f = None
        prior = failure_for(self.path.parent)
        if prior is not None:
            raise prior
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(self.path, "a", encoding="utf-8", errors="replace", buffering=buffering)
        except OSError as exc:
            err = unwritable_error(exc, self.path)
            if err is None:
                raise
            raise _record_failure(err) from None

    def _fail(self, exc: OSError) -> None:
        err = unwritable_error(exc, self.path)
        self.error = _record_failure(err) if err is not None else exc
        f, self._f = self._f, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass

    def write(self, text: str) -> None:
        if self._f is None:
            return
        try:
            self._f.write(text)
        except OSError as exc:
            self._fail(exc)

    def flush(self) -> None:
        if self._f is None:
            return
        try:
            self._f.flush()
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        if self._f is None:
            return
        try:
            self._f.close()
        except OSError as exc:
            self._fail(exc)
        self._f = None


def open_append(path: Path) -> AppendLog:
    return AppendLog(path)


_MAX_NAME = 64


def safe_name(name: str) -> str:
    """A profile name as one safe path component (letters, digits, . _ -)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")
    return safe[:_MAX_NAME].rstrip("-._") or "profile"


def default_run_dir(profile_name: str, base: Path | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (base or Path("specdec-runs")) / f"{stamp}-{safe_name(profile_name)}"


# ---------------------------------------------------------------------------------------------
# state.json: shape, owner, reuse
# ---------------------------------------------------------------------------------------------

# "pending": a later step reset by a retry of an earlier one (Engine.retry), saved so until it runs again
STATUSES = ("running", "passed", "warned", "failed", "skipped", "unavailable", "interrupted", "pending")
_STEP_IDS = ("env", "checkpoints", "dataset", "baseline", "eagle3", "results", "race")
# a tune run's speculative arms, and its schedule arm
_ARM_ID = re.compile(r"^(eagle3|eagle)-(k\d{1,2}(-[a-z0-9_]{1,24})?|schedule)$")


class RunDirStateError(Exception):
    """A reused run directory cannot be continued (damaged, foreign or in use). str() is one paragraph."""


def _owner_now() -> dict[str, Any]:
    started = None
    try:
        import psutil

        started = psutil.Process(os.getpid()).create_time()
    except Exception:
        pass
    return {"pid": os.getpid(), "started": started, "host": socket.gethostname()}


def owner_alive(owner: Mapping[str, Any]) -> bool | None:
    """True: the process that owns the state still runs; False: it is gone; None: cannot tell (another host)."""
    pid = owner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    if owner.get("host") not in (None, socket.gethostname()):
        return None
    try:
        import psutil

        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        started = owner.get("started")
        if isinstance(started, (int, float)) and abs(p.create_time() - float(started)) > 1.0:
            return False  # the pid was reused by another process
        return True
    except Exception:
        return False


def _shape_problem(state: Any) -> str | None:
    if not isinstance(state, dict):
        return f"it holds {type(state).__name__} instead of an object"
    prof = state.get("profile")
    if not isinstance(prof, str):
        return "it has no profile name (\"profile\")"
    steps = state.get("steps")
    if not isinstance(steps, dict):
        return "\"steps\" is missing or not an object"
    for sid, st in steps.items():
        if sid not in _STEP_IDS and not _ARM_ID.match(sid):
            return f"it has an unknown step id {sid!r}"
        if not isinstance(st, dict):
            return f"steps.{sid} is not an object"
        if st.get("status") not in STATUSES:
            return f"steps.{sid}.status = {st.get('status')!r} is not one of {', '.join(STATUSES)}"
        if "facts" in st and not isinstance(st["facts"], dict):
            return f"steps.{sid}.facts is not an object"
        if "seconds" in st and st["seconds"] is not None and not isinstance(st["seconds"], (int, float)):
            return f"steps.{sid}.seconds is not a number"
        if "summary" in st and not isinstance(st["summary"], str):
            return f"steps.{sid}.summary is not text"
    owner = state.get("owner")
    if owner is not None:
        if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int):
            return "\"owner\" is not an object with a pid"
    if "tune" in state and not isinstance(state["tune"], bool):
        return "\"tune\" is not true or false"
    rq = state.get("requested_steps")
    if rq is not None and not (isinstance(rq, list) and all(isinstance(x, str) for x in rq)):
        return "\"requested_steps\" is not a list of step ids"
    return None


def state_problem(directory: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(state, None) for a sound state.json of `directory`, (None, None) when there is none, (None, why) when it
    is damaged: "state.json is damaged: …" / "state.json is not a specdec-tui state: …" (one sentence)."""
    sp = Path(directory) / "state.json"
    if not sp.exists() and not sp.is_symlink():
        return None, None
    if not sp.is_file():
        return None, "state.json is not a regular file"
    try:
        data = sp.read_bytes()
    except OSError as exc:
        return None, f"state.json cannot be read ({exc.strerror})"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, (f"state.json is damaged: it is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                      f"{exc.start})")
    try:
        state = json.loads(text)
    except ValueError as exc:
        what = "empty" if not text.strip() else f"not valid JSON ({exc})"
        return None, f"state.json is damaged (truncated?): it is {what}"
    problem = _shape_problem(state)
    if problem:
        return None, f"state.json is not a specdec-tui state: {problem}"
    problem = state_facts_problem(state)
    if problem:
        return None, f"state.json is damaged: {problem}"
    return state, None


def read_state(directory: Path) -> dict[str, Any] | None:
    """The state.json of `directory`, validated: None when there is none; RunDirStateError when it is damaged."""
    state, problem = state_problem(directory)
    if problem:
        fix = "It is left as it is. Move it aside to start afresh in that directory, or choose another --run-dir."
        raise RunDirStateError(f"run directory {directory}: {problem}. {fix}")
    return state


def _unrecorded_result_problem(directory: Path, state: Mapping[str, Any]) -> str | None:
    """A two-arm server step saved as passed without its numbers is given them from its result file on disk (a
    state from an older specdec-tui): that file must be a bench result, else it is named as damaged."""
    for sid in ("baseline", "eagle3"):
        st = (state.get("steps") or {}).get(sid)
        if not (isinstance(st, dict) and st.get("status") in ("passed", "warned")):
            continue
        facts = st.get("facts") if isinstance(st.get("facts"), dict) else {}
        path = Path(directory) / f"{sid}.json"
        if isinstance(facts.get("bench"), dict) or not path.is_file():
            continue
        why = result_problem(path)
        if why:
            return f"the result file {sid}.json is damaged ({why}); the {sid} step saved no numbers of its own"
    return None


def stale_running_steps(state: Mapping[str, Any]) -> list[str]:
    """Steps a state says are 'running' although the app that ran them is gone."""
    steps = state.get("steps") or {}
    running = [sid for sid, st in steps.items() if isinstance(st, dict) and st.get("status") == "running"]
    if not running:
        return []
    owner = state.get("owner")
    if isinstance(owner, dict) and owner.get("pid") == os.getpid() and not owner.get("ended"):
        return []
    if isinstance(owner, dict) and not owner.get("ended") and owner_alive(owner):
        return []
    return running


class RunDir:
    """One run directory. The state is validated on construction; a damaged state is not loaded
    (`state_error` says why) and nothing is written until the engine has checked it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.state: dict[str, Any] = {"steps": {}}
        self.state_error: RunDirStateError | None = None
        self.setup_error: RunDirUnwritable | None = None
        forget_failure(self.path)  # a new attempt: the disk may have been fixed since
        _LISTENERS.pop(_key(self.path), None)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            err = unwritable_error(exc, self.path / "state.json")
            if err is None:
                raise
            self.setup_error = _record_failure(err)
        try:
            loaded = read_state(self.path)
        except RunDirStateError as exc:
            self.state_error = exc
            loaded = None
        if loaded is not None:
            self.state = loaded

    # -- failure hooks -------------------------------------------------------------------------
    @property
    def failed(self) -> RunDirUnwritable | None:
        return failure_for(self.path)

    def on_unwritable(self, cb: Callable[[RunDirUnwritable], None]) -> None:
        _LISTENERS.setdefault(_key(self.path), []).append(cb)

    # -- files ----------------------------------------------------------------------------------
    def file(self, name: str) -> Path:
        return self.path / name

    def write_json(self, name: str, obj: Any) -> Path:
        p = self.file(name)
        atomic_write_json(p, obj)
        return p

    def write_text(self, name: str, text: str) -> Path:
        p = self.file(name)
        atomic_write_text(p, text)
        return p

    def write_bytes(self, name: str, data: bytes) -> Path:
        p = self.file(name)
        atomic_write_bytes(p, data)
        return p

    def open_log(self, name: str) -> AppendLog:
        return AppendLog(self.file(name))

    def save_state(self) -> None:
        atomic_write_json(self.file("state.json"), self.state)

    def update_step(self, step: str, **fields: Any) -> None:
        self.state["steps"].setdefault(step, {}).update(fields)
        self.save_state()

    def claim(self) -> None:
        """Record this process as the owner (pid + start time), so a later app can tell a killed run."""
        self.state["owner"] = _owner_now()

    def release(self) -> None:
        owner = self.state.get("owner")
        if isinstance(owner, dict):
            owner["ended"] = time.time()

    def mark_interrupted(self, steps: list[str], why: str) -> None:
        for sid in steps:
            st = self.state["steps"].setdefault(sid, {})
            st["status"] = "interrupted"
            st["summary"] = why


# ---------------------------------------------------------------------------------------------
# Result files: recorded with their sha256 and size, checked before a continued run reuses them
# ---------------------------------------------------------------------------------------------

def file_digest(path: Path) -> dict[str, Any]:
    """{"result_sha256", "result_bytes"} of a file (what state.json records for each bench result file)."""
    import hashlib

    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return {"result_sha256": h.hexdigest(), "result_bytes": size}


def result_file_problem(directory: Path, name: str, recorded: Mapping[str, Any] | None) -> str | None:
    """Why the result file `name` of run directory `directory` cannot stand for the numbers `recorded` (a bench's
    facts as state.json holds them): "missing", "changed (…)", or "has no checksum in state.json"; None when it is
    there with the recorded sha256 and size."""
    path = Path(directory) / name
    if not path.is_file():
        return "is missing"
    if not isinstance(recorded, Mapping) or not isinstance(recorded.get("result_sha256"), str):
        return "has no checksum in state.json (recorded by an older specdec-tui)"
    try:
        now = file_digest(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    size = recorded.get("result_bytes")
    if isinstance(size, int) and size != now["result_bytes"]:
        return f"was changed since the run recorded it ({now['result_bytes']} bytes, {size} recorded)"
    if now["result_sha256"] != recorded["result_sha256"]:
        return "was changed since the run recorded it (its sha256 differs from state.json's)"
    return None
