"""NeuronCore occupancy of the stand-in trn2.48xlarge: which simulated process holds which logical cores.

The real Neuron runtime gives a NeuronCore to one process until that process exits, and `neuron-ls` lists
the holders per device (`neuron_processes[].pid`). The stand-in keeps the same state as one claim file per
holder in `<sysroot>/var/run/neuron-cores/<pid>.json`:

    {"pid": 4242, "starttime": "123456", "cores": [16, ..., 31], "command": "...", "neuron_runtime_version": "..."}

- A simulated engine core claims the cores of NEURON_VISIBLE_DEVICES (default 0..TP-1) before it loads
  weights; a claim that overlaps a live one is refused (the caller then fails as the runtime does).
- A claim is live while its pid runs and still has the recorded start time (so a reused pid does not count);
  the holder removes its file when it exits, and stale files are removed by the next claim.
- The stand-in's `neuron-ls` adds the live claims to its devices (`merge_into_devices`). A real TP16 server
  shows its worker processes (one per core) under each device; the simulated one has a single real process,
  the engine core, which is listed under every device whose cores it holds.

Standard library only: the stand-in copies this file next to its `neuron-ls`, which runs in any interpreter.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

CLAIMS_SUBDIR = "var/run/neuron-cores"
RUNTIME_VERSION = "2.34.10"  # what `neuron-ls` reports per process (the value seen in a real SDK 2.32 output)


def claims_dir(sysroot: str | os.PathLike[str]) -> Path:
    return Path(sysroot) / CLAIMS_SUBDIR


def starttime(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks); None when unreadable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """True when pid runs (not a zombie) and, if `start` is given and readable, started at `start`."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        raw = stat.read_text()
    except FileNotFoundError:
        return False
    except OSError:
        raw = ""
    if raw:
        fields = raw[raw.rfind(")") + 2:].split()
        if fields and fields[0] in ("Z", "X"):
            return False
        if start is not None and len(fields) > 19 and fields[19] != start:
            return False
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("pid"), int) or not isinstance(obj.get("cores"), list):
        return None
    return obj


def live_claims(directory: str | os.PathLike[str], remove_stale: bool = False) -> list[dict[str, Any]]:
    """The claims whose holder still runs, by pid."""
    d = Path(directory)
    out: list[dict[str, Any]] = []
    try:
        files = sorted(d.glob("*.json"))
    except OSError:
        return out
    for f in files:
        obj = _read(f)
        if obj is not None and pid_alive(obj["pid"], obj.get("starttime")):
            out.append(obj)
        elif remove_stale and obj is not None:
            try:
                f.unlink()
            except OSError:
                pass
    return sorted(out, key=lambda c: c["pid"])


class _Lock:
    """An exclusive flock on <dir>/.lock (a no-op where fcntl is missing)."""

    def __init__(self, directory: Path):
        self.path = directory / ".lock"
        self.fd: int | None = None

    def __enter__(self) -> "_Lock":
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not Linux
            pass
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock
            self.fd = None


def claim(directory: str | os.PathLike[str], cores: Iterable[int], command: str = "",
          pid: int | None = None) -> tuple[bool, list[dict[str, Any]]]:
    """Claim `cores` for `pid` (default: this process). (True, []) when claimed; (False, conflicting live
    claims) when another live process holds any of them. Atomic across processes."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    want = sorted(set(int(c) for c in cores))
    pid = os.getpid() if pid is None else pid
    with _Lock(d):
        live = [c for c in live_claims(d, remove_stale=True) if c["pid"] != pid]
        clash = [c for c in live if set(want) & set(c["cores"])]
        if clash:
            return False, clash
        obj = {"pid": pid, "starttime": starttime(pid), "cores": want, "command": command,
               "neuron_runtime_version": RUNTIME_VERSION}
        tmp = d / f".{pid}.json.tmp"
        tmp.write_text(json.dumps(obj))
        os.replace(tmp, d / f"{pid}.json")
    return True, []


def release(directory: str | os.PathLike[str], pid: int | None = None) -> None:
    """Drop pid's claim (default: this process); quiet when there is none."""
    pid = os.getpid() if pid is None else pid
    try:
        (Path(directory) / f"{pid}.json").unlink()
    except OSError:
        pass


def merge_into_devices(devices: list[dict[str, Any]], claims: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`neuron-ls -j` devices with each claim listed under every device whose cores it holds (a copy)."""
    out = [dict(d, neuron_processes=list(d.get("neuron_processes") or [])) for d in devices]
    for c in claims:
        held = set(c.get("cores") or [])
        entry = {"pid": c["pid"], "command": str(c.get("command") or ""),
                 "neuron_runtime_version": str(c.get("neuron_runtime_version") or RUNTIME_VERSION)}
        for d in out:
            if held & set(d.get("neuroncore_ids") or []) and entry not in d["neuron_processes"]:
                d["neuron_processes"].append(dict(entry))
    return out


__all__ = ["CLAIMS_SUBDIR", "claim", "claims_dir", "live_claims", "merge_into_devices", "pid_alive", "release",
           "starttime"]
