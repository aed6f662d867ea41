"""Read-only facts about the host: DMI, Neuron devices, `neuron-ls -j`, SDK versions, disk, ports.

Pure helpers (no asyncio, no network, no textual). Every filesystem location is taken relative to a
*sysroot* so tests can point them at a fake tree: `sysroot(environ)` is `environ["SPECDEC_SYSROOT"]`
or "/".
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from tui.core import versions as _versions

NEURON_BIN = "opt/aws/neuron/bin"  # relative to the sysroot
DMI_PRODUCT = "sys/devices/virtual/dmi/id/product_name"
NEURON_SYSFS = "sys/devices/virtual/neuron_device"

# Neuron devices per instance type (/dev/neuron0..N-1).
DEVICES_PER_INSTANCE: dict[str, int] = {
    "trn2.48xlarge": 16,
    "trn2u.48xlarge": 16,
    "trn2.3xlarge": 1,
    "trn1.32xlarge": 16,
    "trn1n.32xlarge": 16,
    "trn1.2xlarge": 1,
    "inf2.48xlarge": 12,
    "inf2.24xlarge": 6,
    "inf2.8xlarge": 1,
    "inf2.xlarge": 1,
}

GIB = 1024**3
GB = 1000**3


# ---------------------------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------------------------


# One version type (tui.core.versions): these names stay for the engine's callers.
version_tuple = _versions.release
version_ge = _versions.at_least


def plugin_vllm_part(plugin_version: str | None) -> str | None:
    """vllm-neuron 'A.B.C.x.y.z' pins vLLM 'A.B.C' (neuron.md §1.2/§3.4): a rule, so a plugin no table lists yet
    (Neuron SDK 2.34 published none) is still read; None for a version of fewer than six numbers."""
    t = version_tuple(plugin_version)
    if t is None or len(t) < 6:
        return None
    return ".".join(str(x) for x in t[:3])


# SDK release <-> package versions (neuron.md §3.4): known facts, used only to name the SDK a plugin came with.
# The vLLM a plugin pins is never looked up here: plugin_vllm_part reads it from the plugin's own version.
_PLUGIN_SDK = {"0.21.0.1.0.0": "2.31", "0.24.0.1.1.0": "2.32", "0.29.0.1.2.0": "2.33"}
_PLUGIN_VLLM_SDK = {"0.21.0": "2.31", "0.24.0": "2.32", "0.29.0": "2.33"}
# What each Neuron SDK release brought for vLLM (platform-2026-12b.md §2; aws-neuron-sdk release notes).
NEURON_SDK_VLLM = {
    "2.31": "vllm-neuron 0.21.0.1.0.0 (vLLM 0.21)",
    "2.32": "vllm-neuron 0.24.0.1.1.0 (vLLM 0.24)",
    "2.33": "vllm-neuron 0.29.0.1.2.0 (vLLM 0.29)",
    "2.34": ("vLLM Neuron generally available (2026-11-30, multi-LoRA, KV-cache-aware routing with llm-d); no "
             "vllm-neuron version or vLLM pin published"),
}


def sdk_from_tools(version: str | None) -> str | None:
    """aws-neuronx-tools 2.Y.* -> SDK 2.Y."""
    t = version_tuple(version)
    if t is None or len(t) < 2 or t[0] != 2:
        return None
    return f"2.{t[1]}"


def sdk_from_neuronx_cc(version: str | None) -> str | None:
    """neuronx-cc 2.X.* -> SDK 2.(X+5)."""
    t = version_tuple(version)
    if t is None or len(t) < 2 or t[0] != 2:
        return None
    return f"2.{t[1] + 5}"


def sdk_from_plugin(version: str | None) -> str | None:
    """vllm-neuron 0.21.0.1.0.0 -> 2.31, 0.24.0.1.1.0 -> 2.32, 0.29.0.1.2.0 -> 2.33 (others: unknown)."""
    if not version:
        return None
    t = version_tuple(version)
    if t is None:
        return None
    key = ".".join(str(x) for x in t)
    if key in _PLUGIN_SDK:
        return _PLUGIN_SDK[key]
    part = plugin_vllm_part(version)
    return _PLUGIN_VLLM_SDK.get(part or "")


def parse_neuronx_cc_version(text: str) -> str | None:
    m = re.search(r"^NeuronX Compiler version (\S+)", text, re.M)
    return m.group(1) if m else None


# ---------------------------------------------------------------------------------------------
# Paths and lookups
# ---------------------------------------------------------------------------------------------


def sysroot(environ: dict[str, str]) -> Path:
    return Path(environ.get("SPECDEC_SYSROOT") or "/")


def under(root: Path, rel: str) -> Path:
    return root / rel.lstrip("/")


def search_path(environ: dict[str, str], root: Path) -> str:
    """PATH of the environment plus the Neuron tools directory (inside the sysroot)."""
    parts = [p for p in environ.get("PATH", "").split(os.pathsep) if p]
    extra = str(under(root, NEURON_BIN))
    if extra not in parts:
        parts.append(extra)
    return os.pathsep.join(parts)


def which(name: str, path: str) -> str | None:
    if os.sep in name:
        p = Path(name)
        return str(p) if p.is_file() and os.access(p, os.X_OK) else None
    return shutil.which(name, path=path)


def not_runnable(name: str, path: str) -> str | None:
    """Why `name` (a command for which `which(name, path)` found no executable) cannot be run when a file of that
    name is there: a directory, or a file that is not executable (say so: "not found on PATH" would send the
    user looking for a file that exists). A path that does not exist: "... does not exist". None when a bare
    name is simply not on PATH. One sentence, no trailing period."""

    def why(p: Path) -> str | None:
        if p.is_dir():
            return f"{p} is a directory, not an executable"
        if p.exists():
            try:
                mode = f" (mode {p.stat().st_mode & 0o777:o})"
            except OSError:
                mode = ""
            return f"{p} exists but is not executable{mode}: `chmod +x {p}`, or name an executable file"
        return None

    if os.sep in name:
        return why(Path(name)) or f"{name} does not exist"
    for d in (path or "").split(os.pathsep):
        found = why(Path(d) / name) if d else None
        if found and "not executable" in found:
            return f"`{name}` on PATH: {found}"
    return None


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def dmi_instance_type(root: Path) -> tuple[str | None, str]:
    """(instance type or None, where it came from). DMI first, then the Neuron sysfs fallback."""
    p = under(root, DMI_PRODUCT)
    v = read_text(p)
    if v:
        return v, "/" + DMI_PRODUCT
    fb = under(root, NEURON_SYSFS) / "neuron0" / "info" / "architecture" / "instance_type"
    v = read_text(fb)
    if v:
        return v, f"/{NEURON_SYSFS}/neuron0/info/architecture/instance_type"
    return None, "/" + DMI_PRODUCT


def _num_suffix(name: str, prefix: str) -> int | None:
    m = re.fullmatch(re.escape(prefix) + r"(\d+)", name)
    return int(m.group(1)) if m else None


def neuron_device_nodes(root: Path) -> list[int]:
    """Indices N of /dev/neuronN, sorted."""
    d = under(root, "dev")
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return sorted(n for n in (_num_suffix(x, "neuron") for x in names) if n is not None)


def neuron_sysfs_devices(root: Path) -> list[int]:
    d = under(root, NEURON_SYSFS)
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return sorted(n for n in (_num_suffix(x, "neuron") for x in names) if n is not None)


def dlami_vllm_venvs(root: Path) -> list[str]:
    """Neuron DLAMI vLLM venvs, found by glob (never hard-coded)."""
    base = under(root, "opt")
    try:
        return sorted(str(p) for p in base.glob("aws_neuronx_venv_*vllm*") if p.is_dir())
    except OSError:
        return []


def hf_hub_cache(environ: dict[str, str]) -> Path:
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"]).expanduser()
    if environ.get("HUGGINGFACE_HUB_CACHE"):
        return Path(environ["HUGGINGFACE_HUB_CACHE"]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "hub"
    return _cache_base(environ) / "huggingface" / "hub"


def vllm_cache_root(environ: dict[str, str]) -> Path:
    if environ.get("VLLM_CACHE_ROOT"):
        return Path(environ["VLLM_CACHE_ROOT"]).expanduser()
    return _cache_base(environ) / "vllm"


def _home(environ: dict[str, str]) -> Path:
    h = environ.get("HOME")
    return Path(h) if h else Path.home()


def _cache_base(environ: dict[str, str]) -> Path:
    x = environ.get("XDG_CACHE_HOME")
    return Path(x).expanduser() if x else _home(environ) / ".cache"


def existing_ancestor(path: Path) -> Path:
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def free_bytes(path: Path) -> tuple[int | None, Path]:
    anc = existing_ancestor(path)
    try:
        return shutil.disk_usage(anc).free, anc
    except OSError:
        return None, anc


def free_space(free: int | None, path: Path, measured: Path) -> tuple[str, str]:
    """The free-space figure the environment and checkpoints steps both show, in one unit (fmt_bytes: GB): the
    value ("77.2 GB free") and where it was measured ("HF cache ~/.cache/huggingface/hub, on the filesystem of
    /home"), from `free_bytes(path)`'s two results."""
    value = f"{fmt_bytes(free)} free" if free is not None else "unknown"
    where = f"HF cache {path}" + ("" if Path(measured) == Path(path) else f", on the filesystem of {measured}")
    return value, where


def same_filesystem(a: Path, b: Path) -> bool:
    try:
        return existing_ancestor(a).stat().st_dev == existing_ancestor(b).stat().st_dev
    except OSError:
        return False


def hf_repo_cached_bytes(hub_cache: Path, repo_id: str) -> int:
    """Bytes of complete blobs already in the HF cache for a model repo."""
    d = hub_cache / ("models--" + repo_id.replace("/", "--")) / "blobs"
    total = 0
    try:
        with os.scandir(d) as it:
            for e in it:
                if e.name.endswith(".incomplete"):
                    continue
                try:
                    if e.is_file(follow_symlinks=False):
                        total += e.stat(follow_symlinks=False).st_size
                except OSError:
                    pass
    except OSError:
        return 0
    return total


def compile_cache_entries(cache_root: Path) -> tuple[Path, int, int]:
    """(compile cache dir, complete entries, all entries) of $VLLM_CACHE_ROOT/neuron/compile_cache."""
    d = cache_root / "neuron" / "compile_cache"
    complete = total = 0
    try:
        with os.scandir(d) as it:
            for e in it:
                if not e.is_dir(follow_symlinks=False):
                    continue
                total += 1
                if os.path.exists(os.path.join(e.path, ".compilation_complete")):
                    complete += 1
    except OSError:
        pass
    return d, complete, total


def fmt_bytes(n: float | None, unit: str = "GB") -> str:
    if n is None:
        return "unknown"
    if unit == "GiB":
        return f"{n / GIB:.1f} GiB"
    return f"{n / GB:.1f} GB"


def parse_core_list(spec: str) -> list[int] | None:
    """'0-15' / '0,1,4-7' -> list of ints; None when malformed."""
    out: list[int] = []
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            return None
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        if b < a:
            return None
        out.extend(range(a, b + 1))
    return out or None


def ranges(nums: Iterable[int]) -> str:
    """[0,1,2,3,8] -> '0-3,8'."""
    s = sorted(set(nums))
    out: list[str] = []
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(out)


# ---------------------------------------------------------------------------------------------
# neuron-ls -j
# ---------------------------------------------------------------------------------------------


@dataclass
class NeuronProcess:
    pid: int | None
    command: str
    runtime_version: str = ""


@dataclass
class NeuronDevice:
    index: int
    nc_count: int | None
    lnc: int | None
    memory_size: int | None
    core_ids: list[int]
    processes: list[NeuronProcess] = field(default_factory=list)
    instance_type: str = ""
    bdf: str = ""


@dataclass
class NeuronLs:
    devices: list[NeuronDevice]

    @property
    def logical_cores(self) -> int:
        return sum(len(d.core_ids) for d in self.devices)

    @property
    def lnc(self) -> int | None:
        vals = {d.lnc for d in self.devices if d.lnc is not None}
        return vals.pop() if len(vals) == 1 else None

    @property
    def hbm_per_device(self) -> int | None:
        vals = {d.memory_size for d in self.devices if d.memory_size}
        return max(vals) if vals else None

    @property
    def instance_type(self) -> str:
        for d in self.devices:
            if d.instance_type:
                return d.instance_type
        return ""

    def devices_for_cores(self, cores: Iterable[int]) -> list[NeuronDevice]:
        want = set(cores)
        return [d for d in self.devices if want.intersection(d.core_ids)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "devices": [asdict(d) for d in self.devices],
            "logical_cores": self.logical_cores,
            "lnc": self.lnc,
            "hbm_bytes_per_device": self.hbm_per_device,
        }


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        m = re.fullmatch(r"\s*(\d+)\s*", v)
        return int(m.group(1)) if m else None
    return None


def parse_neuron_ls(obj: Any) -> NeuronLs:
    """Parse `neuron-ls -j` output (already json-decoded). Tolerates missing keys, string numbers, a dict
    wrapper ({"neuron_devices": [...]}) and extra keys. Raises ValueError when there is nothing to parse."""
    if isinstance(obj, dict):
        for key in ("neuron_devices", "devices", "neuron_device_info"):
            if isinstance(obj.get(key), list):
                obj = obj[key]
                break
        else:
            if "neuron_device" in obj:
                obj = [obj]
    if not isinstance(obj, list):
        raise ValueError("expected a JSON list of devices")
    raw: list[tuple[int, dict[str, Any]]] = []
    for pos, d in enumerate(obj):
        if not isinstance(d, dict):
            continue
        idx = _int(d.get("neuron_device"))
        raw.append((pos if idx is None else idx, d))
    raw.sort(key=lambda x: x[0])
    devices: list[NeuronDevice] = []
    next_core = 0
    for idx, d in raw:
        nc = _int(d.get("nc_count"))
        ids_raw = d.get("neuroncore_ids")
        ids: list[int] = []
        if isinstance(ids_raw, list):
            ids = [x for x in (_int(v) for v in ids_raw) if x is not None]
        elif isinstance(ids_raw, str):
            ids = parse_core_list(ids_raw) or []
        if not ids and nc:
            ids = list(range(next_core, next_core + nc))
        if ids:
            next_core = max(ids) + 1
        procs: list[NeuronProcess] = []
        praw = d.get("neuron_processes")
        if isinstance(praw, list):
            for p in praw:
                if not isinstance(p, dict):
                    continue
                procs.append(NeuronProcess(_int(p.get("pid")), str(p.get("command") or "").strip(),
                                           str(p.get("neuron_runtime_version") or "")))
        devices.append(NeuronDevice(
            index=idx,
            nc_count=nc if nc is not None else (len(ids) or None),
            lnc=_int(d.get("logical_neuroncore_config")),
            memory_size=_int(d.get("memory_size")),
            core_ids=ids,
            processes=procs,
            instance_type=str(d.get("instance_type") or ""),
            bdf=str(d.get("bdf") or ""),
        ))
    if not devices:
        raise ValueError("no device objects in the output")
    return NeuronLs(devices)


# ---------------------------------------------------------------------------------------------
# Processes and ports
# ---------------------------------------------------------------------------------------------


def process_command(pid: int | None, limit: int = 160) -> str:
    """The command line of a pid via psutil ('' when unknown)."""
    if pid is None:
        return ""
    try:
        import psutil

        p = psutil.Process(pid)
        try:
            cmd = " ".join(p.cmdline())
        except (psutil.AccessDenied, psutil.ZombieProcess):
            cmd = ""
        if not cmd:
            cmd = p.name()
    except Exception:
        return ""
    return cmd if len(cmd) <= limit else cmd[: limit - 1] + "…"


def bind_error(host: str, port: int) -> OSError | None:
    """Try to bind host:port like a server would (SO_REUSEADDR). None when it is free. A host name is resolved
    first: a name that does not resolve comes back as the socket.gaierror (see port_error_text)."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return exc
    except UnicodeError as exc:  # a name IDNA cannot encode
        return socket.gaierror(socket.EAI_NONAME, f"not a valid host name ({exc})")
    fam, _type, _proto, _canon, addr = infos[0]
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        if os.name != "nt":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(addr)
        s.listen(1)
        return None
    except OSError as exc:
        return exc
    finally:
        s.close()


def bind_problem(host: str, port: int) -> tuple[str, str, str] | None:
    """Why a server could not listen on host:port: (kind, sentence, remedy), or None when it can.
    kind: resolve (the name does not resolve), not-local (not an address of this machine), in-use,
    permission, other. Makes at most one name lookup (none for a numeric address)."""
    err = bind_error(host, port)
    if err is None:
        return None
    local = "set [server] host to an address of this machine (127.0.0.1, then an SSH tunnel)"
    if isinstance(err, socket.gaierror):
        return ("resolve", f"server.host {host!r} does not resolve ({err.strerror or err})", local)
    if err.errno == errno.EADDRNOTAVAIL:
        return ("not-local", f"server.host {host!r} is not an address of this machine", local)
    if err.errno == errno.EADDRINUSE:
        return ("in-use", f"{host}:{port} is already in use", "stop the process holding it or set [server] port")
    if err.errno == errno.EACCES:
        return ("permission", f"port {port} on {host} may not be bound by this user (ports below 1024 need root)",
                "set [server] port to a free port ≥ 1024")
    return ("other", f"cannot bind {host}:{port}: {err.strerror or err}", "set [server] host/port to a local address "
            "and a free port")


def is_numeric_host(host: str) -> bool:
    for fam in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(fam, host)
            return True
        except (OSError, ValueError):
            continue
    return False


def port_holders(port: int) -> tuple[list[tuple[int | None, str]], str]:
    """Processes listening on a TCP port: ([(pid, command)], how). Uses psutil.net_connections and falls back
    to per-process connections when that is not permitted. pid None = a socket whose owner is not visible."""
    import psutil

    found: dict[int | None, str] = {}
    how = "psutil.net_connections"
    try:
        for c in psutil.net_connections(kind="tcp"):
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN:
                found.setdefault(c.pid, "")
    except (psutil.AccessDenied, PermissionError, OSError):
        how = "per-process connections"
    if not [p for p in found if p is not None]:
        # Fallback: each visible process' own sockets (works where the global table is denied).
        for proc in psutil.process_iter(["pid"]):
            try:
                getter = getattr(proc, "net_connections", None) or getattr(proc, "connections")
                for c in getter(kind="tcp"):
                    if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN:
                        found[proc.pid] = ""
                        found.pop(None, None)
                        how = "per-process connections"
            except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
                continue
    return [(pid, process_command(pid)) for pid in found], how


def port_error_text(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return f"does not resolve ({exc.strerror or exc})"
    if exc.errno == errno.EADDRINUSE:
        return "in use"
    if exc.errno == errno.EACCES:
        return "permission denied (ports below 1024 need root)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "not an address of this machine"
    return exc.strerror or str(exc)
