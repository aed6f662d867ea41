"""Host-wide locks on what a run's servers use: their TCP port and their accelerator cores.

Two runs on one host (two operators, or an operator and a cron job) must not launch on the same port or the same
cores: the second one's server dies with `Address already in use` (or busy cores) while the first one's answers its
readiness checks and takes its benchmark. So a run holds an exclusive `flock` on one file per port and one per core
before it launches anything, and a second run that finds one held refuses, naming the holder.

- Liveness is the flock, never the file: the kernel releases it when the holder exits, however it exits, so a file
  left behind by a killed run is harmless (the next run takes it and writes itself in).
- Each lock file holds its holder's JSON (pid, user, run directory, command line, profile, when it started), which
  the refusal quotes. The descriptors are close-on-exec: a launched server never inherits a lock.
- Where: ports are host-wide, so their files live in a directory every user's runs see: $SPECDEC_LOCK_DIR when set,
  else /run/lock/specdec-tui where /run/lock is the usual world-writable sticky directory, else
  /tmp/specdec-tui-locks (created sticky and world-writable, like /tmp itself). Cores belong to the machine whose
  devices the run sees: with a system root other than "/" (SPECDEC_SYSROOT: a stand-in platform's), their files
  live under that root's run/lock/specdec-tui, so two stand-in machines never share cores.
- What: `port-<n>` for the server port (a port is host-wide for a wildcard bind, so the host is not part of the
  name); on neuron `neuron-core-<n>` for each logical NeuronCore of NEURON_VISIBLE_DEVICES (unset: 0..TP x PP - 1),
  on cuda `cuda-gpu-<id>` for each CUDA_VISIBLE_DEVICES entry (unset: 0..TP x PP - 1), only where the machine has
  such devices (/dev/neuron*, /dev/nvidia<n> under its system root); on cpu the port alone. Overlapping ranges
  collide core by core.

Pure file locking; no processes, no sockets.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pwd
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from tui.core.host.sysinfo import neuron_device_nodes, parse_core_list, ranges, sysroot

ENV_DIR = "SPECDEC_LOCK_DIR"
RUN_LOCK = Path("/run/lock")
TMP = Path("/tmp")
SHARED_MODE = 0o1777  # sticky and world-writable: every user's runs create their files there, none removes another's
FILE_MODE = 0o666     # every user's run may write itself into a lock file it takes
DEFAULT_DIRS = (RUN_LOCK / "specdec-tui", TMP / "specdec-tui-locks")  # shared by every user: made sticky
READ_TRIES = 5        # a holder writes its JSON right after taking the lock: a reader may catch it half-written


class LockDirError(OSError):
    """The lock directory cannot be used (not creatable, not writable); the message names it and the fix."""


def lock_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The host-wide directory of the port locks (see the module docstring)."""
    env = os.environ if environ is None else environ
    if env.get(ENV_DIR):
        return Path(env[ENV_DIR])
    try:
        st = os.stat(RUN_LOCK)
        if stat.S_ISDIR(st.st_mode) and st.st_mode & SHARED_MODE == SHARED_MODE:
            return RUN_LOCK / "specdec-tui"
    except OSError:
        pass
    return TMP / "specdec-tui-locks"


def device_lock_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the core locks of the machine at the run's system root live: the host's lock directory for "/",
    that root's own run/lock/specdec-tui otherwise."""
    env = os.environ if environ is None else environ
    root = sysroot(env)
    if root.resolve() == Path("/").resolve():
        return lock_dir(env)
    return root / "run" / "lock" / "specdec-tui"


@dataclass(frozen=True)
class Claim:
    """One lockable thing: its lock file and how a sentence names it ("port 127.0.0.1:8000", "NeuronCore 3")."""

    path: Path
    what: str
    kind: str = "port"        # "port" | "core"
    label: str = ""           # the value alone ("8000", "3", "GPU-5f…"), for grouping into "NeuronCores 0-15"


def port_claim(host: str, port: int, environ: Mapping[str, str] | None = None) -> Claim:
    return Claim(lock_dir(environ) / f"port-{int(port)}.lock", f"port {host}:{int(port)}", "port", str(int(port)))


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:100] or "_"


def core_claims(platform: str, cores: Iterable[int | str], environ: Mapping[str, str] | None = None) -> list[Claim]:
    """The claims of these cores (NeuronCore ids on neuron, CUDA_VISIBLE_DEVICES entries on cuda); none on cpu."""
    d = device_lock_dir(environ)
    if platform == "neuron":
        return [Claim(d / f"neuron-core-{int(c)}.lock", f"NeuronCore {int(c)}", "core", str(int(c))) for c in cores]
    if platform == "cuda":
        return [Claim(d / f"cuda-gpu-{_safe(str(c))}.lock", f"GPU {c}", "core", str(c)) for c in cores]
    return []


def _has_nvidia(root: Path) -> bool:
    try:
        return any(re.fullmatch(r"nvidia\d+", n) for n in os.listdir(root / "dev"))
    except OSError:
        return False


def has_devices(platform: str, environ: Mapping[str, str]) -> bool:
    """Does the machine at the run's system root have this platform's devices (/dev/neuron*, /dev/nvidia<n>)?"""
    root = sysroot(environ)
    if platform == "neuron":
        return bool(neuron_device_nodes(root))
    if platform == "cuda":
        return _has_nvidia(root)
    return False


def server_cores(platform: str, width: int, server_env: Mapping[str, str],
                 environ: Mapping[str, str]) -> list[int | str]:
    """The cores a server of `width` = TP x PP ranks takes on this machine: NEURON_VISIBLE_DEVICES (the profile's
    [server.env] first, then the environment; unset: 0..width-1) on neuron, CUDA_VISIBLE_DEVICES likewise on cuda.
    Empty on cpu, on a machine without those devices, or for a value that does not parse (the environment step
    reports that one)."""
    if not has_devices(platform, environ):
        return []
    if platform == "neuron":
        val = server_env.get("NEURON_VISIBLE_DEVICES", environ.get("NEURON_VISIBLE_DEVICES"))
        if val is None or not str(val).strip():
            return list(range(max(int(width), 1)))
        return list(parse_core_list(str(val)) or [])
    if platform == "cuda":
        val = server_env.get("CUDA_VISIBLE_DEVICES", environ.get("CUDA_VISIBLE_DEVICES"))
        if val is None:
            return list(range(max(int(width), 1)))
        return [x.strip() for x in str(val).split(",") if x.strip()]
    return []


def server_claims(platform: str, host: str, port: int, width: int, server_env: Mapping[str, str],
                  environ: Mapping[str, str]) -> list[Claim]:
    """Everything one server of the run takes: its port and its cores."""
    return [port_claim(host, port, environ),
            *core_claims(platform, server_cores(platform, width, server_env, environ), environ)]


# ---------------------------------------------------------------------------------------------
# holders
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as its file says (every field may be missing from an odd file)."""

    pid: int | None = None
    user: str = ""
    run_dir: str = ""
    command: str = ""
    profile: str = ""
    started: float | None = None

    @classmethod
    def from_json(cls, data: Any) -> "Holder":
        if not isinstance(data, dict):
            return cls()
        pid = data.get("pid")
        started = data.get("started")
        return cls(pid if isinstance(pid, int) and not isinstance(pid, bool) else None, str(data.get("user") or ""),
                   str(data.get("run_dir") or ""), str(data.get("command") or ""), str(data.get("profile") or ""),
                   float(started) if isinstance(started, (int, float)) and not isinstance(started, bool) else None)

    def describe(self, now: float | None = None) -> str:
        """"specdec-tui pid 1234 (user ann, run dir /x/run, `specdec-tui --demo --headless`), started 22:01:05
        (3 min ago)"; "another specdec-tui run (it has not written its name yet)" when the file says nothing."""
        if self.pid is None:
            return "another specdec-tui run (its lock file does not name it)"
        bits = [f"user {self.user}" if self.user else "", f"run dir {self.run_dir}" if self.run_dir else "",
                f"`{_short(self.command)}`" if self.command else ""]
        inner = ", ".join(b for b in bits if b)
        text = f"specdec-tui pid {self.pid}" + (f" ({inner})" if inner else "")
        if self.started is not None:
            ago = max(0.0, (time.time() if now is None else now) - self.started)
            text += (f", started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.started))} "
                     f"({_ago(ago)})")
        return text


def _short(cmd: str, n: int = 160) -> str:
    return cmd if len(cmd) <= n else cmd[: n - 1] + "…"


def _ago(secs: float) -> str:
    if secs < 90:
        return f"{secs:.0f} s ago"
    if secs < 5400:
        return f"{secs / 60:.0f} min ago"
    return f"{secs / 3600:.1f} h ago"


def read_holder(path: Path) -> Holder:
    """The holder a lock file names (an empty Holder when it names none)."""
    for i in range(READ_TRIES):
        try:
            with open(path, "rb") as f:
                raw = f.read(65536)
        except OSError:
            return Holder()
        try:
            return Holder.from_json(json.loads(raw.decode("utf-8")))
        except (ValueError, UnicodeDecodeError):
            if i + 1 < READ_TRIES:
                time.sleep(0.02)  # caught while its holder writes it
    return Holder()


@dataclass(frozen=True)
class Refusal:
    """Claims another run holds: [(claim, holder)]. `text()` is the one paragraph the operator reads."""

    held: tuple[tuple[Claim, Holder], ...]

    def what(self) -> str:
        """"port 127.0.0.1:8000 and NeuronCores 0-15"."""
        ports = [c.what for c, _ in self.held if c.kind == "port"]
        cores = [c for c, _ in self.held if c.kind == "core"]
        parts = list(dict.fromkeys(ports))
        if cores:
            labels = [c.label for c in cores]
            noun = cores[0].what.rsplit(" ", 1)[0]
            if all(x.isdigit() for x in labels):
                parts.append(f"{noun}s {ranges(int(x) for x in labels)}" if len(labels) > 1 else cores[0].what)
            else:
                parts.append(f"{noun}s {', '.join(labels)}" if len(labels) > 1 else cores[0].what)
        return " and ".join(parts)

    def _verb(self) -> str:
        text = self.what()
        return "are" if " and " in text or text.split(" ", 1)[0] in ("NeuronCores", "GPUs") else "is"

    def holders(self) -> list[Holder]:
        seen: dict[Any, Holder] = {}
        for _, h in self.held:
            seen.setdefault(h.pid if h.pid is not None else id(h), h)
        return list(seen.values())

    def short(self) -> str:
        """"port 127.0.0.1:8000 is held by specdec-tui pid 1234 (run dir …)" for a step summary."""
        hs = self.holders()
        who = (f"specdec-tui pid {hs[0].pid}" + (f" (run dir {hs[0].run_dir})" if hs[0].run_dir else "")
               if len(hs) == 1 and hs[0].pid is not None else "another specdec-tui run")
        return f"{self.what()} {self._verb()} held by {who}"

    def text(self, fix: str) -> str:
        hs = self.holders()
        who = "; ".join(h.describe() for h in hs)
        verb = self._verb()
        kill = next((f" (`kill {h.pid}`)" for h in hs if h.pid is not None), "")
        return (f"{self.what()} {verb} held by {who}. Two runs on one host would corrupt each other's numbers, so "
                f"this run launches nothing: wait for that run to finish, stop it{kill}, or {fix}.")


# ---------------------------------------------------------------------------------------------
# the locks of one run
# ---------------------------------------------------------------------------------------------


def _ensure_dir(d: Path, shared: bool) -> None:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LockDirError(f"the lock directory {d} cannot be created ({exc.strerror or exc}): set "
                           f"{ENV_DIR} to a directory every user's runs can write, e.g. one made with "
                           f"`mkdir -m 1777 DIR`") from None
    if shared:
        try:
            st = d.stat()
            if st.st_uid == os.getuid() and st.st_mode & SHARED_MODE != SHARED_MODE:
                os.chmod(d, SHARED_MODE)
        except OSError:
            pass
    if not os.access(d, os.W_OK | os.X_OK):
        raise LockDirError(f"the lock directory {d} is not writable by this user: make it shared "
                           f"(`sudo chmod 1777 {d}`) or set {ENV_DIR} to a directory every user's runs can write")


def _open(path: Path) -> int:
    flags = os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | os.O_RDWR, FILE_MODE)
    except PermissionError:
        fd = os.open(path, flags | os.O_RDONLY)  # another user's file without write access: flock works all the same
    try:
        if os.fstat(fd).st_uid == os.getuid():
            os.fchmod(fd, FILE_MODE)  # through the umask: every user's run may write itself in
    except OSError:
        pass
    return fd


@dataclass
class HostLocks:
    """The locks one run holds, in groups ("profile": the profile's port and cores; "pool": tune.parallel's extra
    ports and ranges). `info`: what the lock files say about this run (pid, user, run_dir, command, profile,
    started). Close-on-exec descriptors; `release()` (or the process's end) frees them."""

    info: dict[str, Any]
    _fds: dict[Path, int] = field(default_factory=dict)
    _groups: dict[str, set[Path]] = field(default_factory=dict)
    _claims: dict[Path, Claim] = field(default_factory=dict)

    @staticmethod
    def this_run(run_dir: str, command: str, profile: str = "") -> "HostLocks":
        try:
            user = pwd.getpwuid(os.getuid()).pw_name
        except (KeyError, OSError):
            user = str(os.getuid())
        return HostLocks({"pid": os.getpid(), "user": user, "run_dir": run_dir, "command": command,
                          "profile": profile, "started": round(time.time(), 3)})

    def holds(self, claim: Claim) -> bool:
        return claim.path in self._fds

    def held(self, group: str | None = None) -> list[Claim]:
        paths = self._fds if group is None else (self._groups.get(group) or set())
        return [self._claims[p] for p in paths if p in self._claims]

    def take(self, claims: Sequence[Claim], group: str = "profile") -> Refusal | None:
        """Take every claim or none: None when all are held by this run now, else the Refusal naming what another
        run holds (what this call took is released again). Raises LockDirError when a lock directory is unusable
        (having released what this call took)."""
        wanted = list(dict.fromkeys(claims))
        new: list[Path] = []
        held: list[tuple[Claim, Holder]] = []
        try:
            for c in sorted(wanted, key=lambda c: str(c.path)):
                if c.path in self._fds:
                    continue
                holder = self._acquire(c)
                if holder is None:
                    new.append(c.path)
                else:
                    held.append((c, holder))
        except LockDirError:
            for p in new:
                self._drop(p)
            raise
        if held:
            for p in new:
                self._drop(p)
            return Refusal(tuple(held))
        self._groups.setdefault(group, set()).update(c.path for c in wanted)
        return None

    def _acquire(self, c: Claim) -> Holder | None:
        """Lock `c` for this run (None) or say who holds it (a Holder)."""
        _ensure_dir(c.path.parent, shared=c.path.parent in DEFAULT_DIRS)
        try:
            fd = _open(c.path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise LockDirError(f"{c.path} is a symbolic link: remove it (lock files are never links)") from None
            raise LockDirError(f"{c.path} cannot be opened ({exc.strerror or exc}): fix its permissions or set "
                               f"{ENV_DIR}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return read_holder(c.path)
            raise LockDirError(f"{c.path} cannot be locked ({exc.strerror or exc})") from None
        self._fds[c.path] = fd
        self._claims[c.path] = c
        self._write_info(fd, c)
        return None

    def _write_info(self, fd: int, claim: Claim) -> None:
        data = json.dumps(dict(self.info, what=claim.what), sort_keys=True).encode("utf-8")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, data + b"\n", 0)
        except OSError:
            pass  # a file this user may only read: the lock holds all the same, it just cannot name us

    def held_elsewhere(self, claim: Claim) -> Holder | None:
        """The other run holding `claim` now, or None (free, or held by this run). Takes nothing."""
        if claim.path in self._fds or not claim.path.exists():
            return None
        try:
            fd = os.open(claim.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return read_holder(claim.path)
            return None
        finally:
            os.close(fd)  # closing releases a lock this probe may have taken
        return None

    def _drop(self, path: Path) -> None:
        fd = self._fds.pop(path, None)
        self._claims.pop(path, None)
        for g in self._groups.values():
            g.discard(path)
        if fd is not None:
            try:
                os.close(fd)  # closing the only descriptor releases the flock
            except OSError:
                pass

    def release(self, group: str | None = None) -> None:
        """Release a group's locks (all when None). A path another group still holds stays locked."""
        if group is None:
            for p in list(self._fds):
                self._drop(p)
            self._groups.clear()
            return
        mine = self._groups.pop(group, set())
        others = set().union(*self._groups.values()) if self._groups else set()
        for p in mine - others:
            self._drop(p)

    def summary(self) -> str:
        """"port 127.0.0.1:8000, NeuronCores 0-15" (what this run holds), "" when nothing."""
        claims = self.held()
        if not claims:
            return ""
        return Refusal(tuple((c, Holder()) for c in claims)).what().replace(" and ", ", ")

    def __del__(self) -> None:  # an engine dropped without close(): its descriptors must not leak
        try:
            self.release()
        except Exception:
            pass


__all__ = ["Claim", "ENV_DIR", "Holder", "HostLocks", "LockDirError", "Refusal", "core_claims", "device_lock_dir",
           "has_devices", "lock_dir", "port_claim", "read_holder", "server_claims", "server_cores"]
