"""Hugging Face hub helpers shared by the steps: settings from a run's environment, probing a model
(config.json + model_info) and turning every hub/network failure into one readable sentence.

huggingface_hub reads HF_ENDPOINT, HF_HOME, HF_TOKEN and HF_HUB_OFFLINE from os.environ once, at
import time. A run carries its own environment (StepContext.environ, e.g. HF_ENDPOINT of the loopback
hub in a simulated run), so nothing here relies on those import-time constants: the endpoint, token,
cache directory and offline mode are resolved from the given environ and passed explicitly
(`endpoint=`, `token=`, `cache_dir=`, `local_files_only=`). Blocking calls; run them in a thread.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from tui.core.host.safetensors_header import DirTensors, read_dir

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT_S = 10.0
_TRUE = {"1", "ON", "YES", "TRUE"}


def env_true(value: str | None) -> bool:
    return (value or "").strip().upper() in _TRUE


@dataclass(frozen=True)
class HubSettings:
    endpoint: str
    token: str | None = field(repr=False)
    token_source: str  # "HF_TOKEN" | "HUGGING_FACE_HUB_TOKEN" | "token file" | ""
    cache_dir: Path
    offline: bool
    timeout_s: float

    @property
    def token_arg(self) -> str | bool:
        """What to pass as `token=`: the token, or False so huggingface_hub never picks one up itself."""
        return self.token if self.token else False

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.token,) if self.token else ()


def hub_settings(environ: Mapping[str, str], sim_hub: str = "", timeout_s: float | None = None) -> HubSettings:
    """Resolve the hub settings a run's environment asks for (never os.environ, never import-time values)."""
    endpoint = (environ.get("HF_ENDPOINT") or sim_hub or DEFAULT_ENDPOINT).strip().rstrip("/")
    token, source = None, ""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if environ.get(var, "").strip():
            token, source = environ[var].strip(), var
            break
    home = _expand(environ.get("HF_HOME") or os.path.join(
        environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"))
    if token is None:
        token_path = Path(_expand(environ.get("HF_TOKEN_PATH") or os.path.join(home, "token")))
        try:
            text = token_path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            text = ""
        if text:
            token, source = text, "token file"
    cache = environ.get("HF_HUB_CACHE") or environ.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    offline = env_true(environ.get("HF_HUB_OFFLINE")) or env_true(environ.get("TRANSFORMERS_OFFLINE"))
    if timeout_s is None:
        try:
            timeout_s = float(environ.get("HF_HUB_ETAG_TIMEOUT") or DEFAULT_TIMEOUT_S)
        except ValueError:
            timeout_s = DEFAULT_TIMEOUT_S
    return HubSettings(endpoint, token, source, Path(_expand(cache)), offline, float(timeout_s))


def _expand(p: str) -> str:
    return os.path.expandvars(os.path.expanduser(p))


def free_bytes(path: Path) -> tuple[int, Path]:
    """Free bytes on the filesystem holding `path` (or its nearest existing parent), and that parent."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free, p


def looks_local(name: str) -> bool:
    """vLLM's rule: an existing directory is a local model; so is anything shaped like a path."""
    if os.path.isdir(os.path.expanduser(name)):
        return True
    return name.startswith(("/", "./", "../", "~", ".\\")) or name.count("/") > 1 or "\\" in name


def cache_repo_dir(cache_dir: Path, repo_id: str) -> Path:
    return cache_dir / ("models--" + repo_id.replace("/", "--"))


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HubFailure:
    kind: str  # not-found | gated | revision | entry | offline | timeout | dns | refused | proxy | network | http | bad-config | error
    value: str  # short, for the fact value
    detail: str
    remedy: str


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _class_names(exc: BaseException) -> set[str]:
    return {c.__name__ for c in type(exc).__mro__}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def transport_failure(exc: BaseException, url: str, timeout_s: float, fix: str) -> HubFailure | None:
    """Classify httpx/httpx2/socket errors (anywhere in the exception chain). None if not a transport error."""
    import socket

    host = urlsplit(url).hostname or url
    chain = _chain(exc)
    names: set[str] = set()
    for e in chain:
        names |= _class_names(e)
    text = " | ".join(str(e) for e in chain).lower()
    top = next((e for e in chain if _class_names(e) & {"TransportError", "TimeoutException"}), chain[0])
    if "ProxyError" in names:
        return HubFailure("proxy", "proxy error", f"the proxy refused or failed the request to {host}: {_first_line(top)}",
                          "Check HTTPS_PROXY / HTTP_PROXY / NO_PROXY. " + fix)
    if "TimeoutException" in names or any(isinstance(e, TimeoutError) for e in chain):
        return HubFailure("timeout", f"no answer within {timeout_s:g} s",
                          f"{url} did not answer within {timeout_s:g} s ({type(top).__name__})",
                          "Check the network, proxy settings and the endpoint URL; retry later. " + fix)
    connect = "ConnectError" in names or any(isinstance(e, (ConnectionError, socket.gaierror)) for e in chain)
    if connect:
        if any(isinstance(e, socket.gaierror) for e in chain) or any(
                s in text for s in ("name or service not known", "nodename nor servname", "name resolution",
                                    "getaddrinfo", "no address associated", "name does not resolve")):
            return HubFailure("dns", f"cannot resolve {host}", f"DNS lookup of {host} failed: {_first_line(top)}",
                              "Check DNS and network access (or the proxy settings) and that the URL is right. " + fix)
        if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in text:
            return HubFailure("refused", "connection refused", f"nothing accepts connections at {url}",
                              "Check the URL/port (is the server running?) and the proxy settings. " + fix)
    if "RemoteProtocolError" in names or "ReadError" in names:
        return HubFailure("network", "connection dropped", f"the connection to {host} broke off: {_first_line(top)}",
                          "Check network access and proxy settings, then retry. " + fix)
    if connect:
        return HubFailure("network", "cannot connect", f"cannot connect to {url}: {_first_line(top)}",
                          "Check network access, firewall and proxy settings. " + fix)
    if "TransportError" in names:
        return HubFailure("network", "network error", f"the connection to {host} failed: {_first_line(top)}",
                          "Check network access and proxy settings, then retry. " + fix)
    return None


def describe_hub_error(exc: BaseException, *, repo_id: str, filename: str, settings: HubSettings) -> HubFailure:
    """One readable failure for any exception huggingface_hub (or the network under it) raises."""
    from huggingface_hub import errors as E

    ep = settings.endpoint
    page = f"{ep}/{repo_id}"
    token_hint = ("HF_TOKEN is set; make sure its account has access" if settings.token
                  else "set HF_TOKEN to a read token of an account with access")
    if isinstance(exc, E.GatedRepoError):
        return HubFailure("gated", "gated: license not accepted",
                          f"{repo_id} is a gated repository and the hub refused the download (HTTP 403 GatedRepo)",
                          f"Open {page}, accept the license with your account, and {token_hint} (vLLM needs it too).")
    if isinstance(exc, E.RepositoryNotFoundError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        return HubFailure("not-found", "repository not found",
                          f"{ep} answered HTTP {status or '404'} RepoNotFound for {repo_id}",
                          f"Check the repo id '{repo_id}' (spelling, organisation). If the repository is private, "
                          f"{token_hint}. If HF_ENDPOINT points at a mirror, check that it carries this repo.")
    if isinstance(exc, E.RevisionNotFoundError):
        return HubFailure("revision", "revision not found", f"{repo_id} has no such revision on {ep}",
                          "Use an existing branch, tag or commit (the default is 'main').")
    if isinstance(exc, E.LocalEntryNotFoundError):
        if settings.offline or isinstance(exc.__cause__, E.OfflineModeIsEnabled):
            return HubFailure("offline", "offline and not cached",
                              f"HF_HUB_OFFLINE is set and {repo_id}/{filename} is not in the local cache "
                              f"{settings.cache_dir}",
                              f"Unset HF_HUB_OFFLINE, or pre-download on a machine with access: "
                              f"`hf download {repo_id}` with the same HF_HOME / HF_HUB_CACHE.")
        t = transport_failure(exc, ep, settings.timeout_s, "Set HF_ENDPOINT to a reachable hub or mirror.")
        if t is not None:
            return t
        if isinstance(exc.__cause__, E.FileMetadataError):
            return HubFailure("http", "not a hub endpoint", _first_line(exc.__cause__),
                              "Check HF_ENDPOINT: it must point at the Hugging Face hub or a hub-compatible mirror.")
        return HubFailure("network", "hub unreachable, not cached", _first_line(exc),
                          "Check network access and HF_ENDPOINT, or pre-download the model into the cache.")
    if isinstance(exc, E.EntryNotFoundError):
        return HubFailure("entry", f"no {filename}", f"{repo_id} exists but has no {filename}",
                          f"Check that '{repo_id}' is a Transformers-format model checkpoint (it needs {filename}).")
    if isinstance(exc, E.OfflineModeIsEnabled):
        return HubFailure("offline", "offline mode", _first_line(exc),
                          "Unset HF_HUB_OFFLINE in the environment this app was started from, or pre-download "
                          f"`hf download {repo_id}`.")
    if isinstance(exc, E.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status == 401:
            return HubFailure("http", "unauthorized (401)", f"{ep} rejected the credentials for {repo_id}",
                              "Check HF_TOKEN: it may be expired or mistyped (create a new read token).")
        if status == 403:
            return HubFailure("http", "forbidden (403)", f"{ep} refused access to {repo_id}",
                              f"Check that your token may read {repo_id}; {token_hint}.")
        if status == 429:
            return HubFailure("http", "rate limited (429)", f"{ep} rate-limited the request for {repo_id}",
                              "Wait a minute and retry; an HF_TOKEN raises the limits.")
        if status is not None and status >= 500:
            return HubFailure("http", f"hub error (HTTP {status})", f"{ep} answered HTTP {status} for {repo_id}",
                              "The hub or mirror has a problem; retry later or check HF_ENDPOINT.")
        return HubFailure("http", f"HTTP {status}", _first_line(exc), "Check HF_ENDPOINT, the repo id and HF_TOKEN.")
    t = transport_failure(exc, ep, settings.timeout_s,
                          "If you use a mirror, check HF_ENDPOINT" + ("" if ep == DEFAULT_ENDPOINT else f" ({ep})") + ".")
    if t is not None:
        return t
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return HubFailure("bad-config", f"{filename} is not valid JSON", _first_line(exc),
                          f"The file in {repo_id} is damaged or not a config; check the repo or re-download it.")
    if isinstance(exc, OSError):
        return HubFailure("error", "local file error", f"{type(exc).__name__}: {_first_line(exc)}",
                          f"Check that {settings.cache_dir} is writable and has free space (or set HF_HOME).")
    return HubFailure("error", f"unexpected error ({type(exc).__name__})", _first_line(exc),
                      "Retry; if it persists, run with --verbose and report it.")


# ---------------------------------------------------------------------------------------------
# Probing a model
# ---------------------------------------------------------------------------------------------


@dataclass
class ModelProbe:
    name: str
    source: str  # "hub" | "local"
    repo_id: str | None = None
    path: str | None = None  # local directory, or the cached config.json
    commit: str | None = None
    gated: bool | str | None = None
    private: bool | None = None
    size_bytes: int | None = None  # top-level files: what `vllm serve` downloads
    repo_bytes: int | None = None  # every file in the repo
    cached_bytes: int = 0  # of size_bytes, already in the local cache
    files: int | None = None
    config: dict[str, Any] | None = None
    failure: HubFailure | None = None
    info_skipped: bool = False  # model_info not asked (offline mode)
    # Local directories: tensor names/shapes from the safetensors headers (None for hub repos: their
    # weights are not downloaded, so layout checks rely on config.json and conventions there).
    tensors: DirTensors | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "source": self.source, "repo": self.repo_id, "path": self.path,
            "commit": self.commit, "gated": self.gated, "private": self.private,
            "size_bytes": self.size_bytes, "repo_bytes": self.repo_bytes, "cached_bytes": self.cached_bytes,
            "files": self.files, "error": None if self.failure is None else
            {"kind": self.failure.kind, "value": self.failure.value, "detail": self.failure.detail},
            "tensors": None if self.tensors is None else {
                "files": self.tensors.files, "count": len(self.tensors.tensors), "note": self.tensors.note},
        }


def _silent_tqdm() -> Any:
    try:
        from huggingface_hub.utils.tqdm import silent_tqdm

        return silent_tqdm
    except ImportError:  # pragma: no cover - older/newer layouts
        return None


def _quiet_foreign_agent_registry(endpoint: str) -> None:
    """huggingface_hub may fetch `{import-time HF_ENDPOINT}/api/agent-harnesses` to decorate its User-Agent.
    When the run's endpoint differs (e.g. the loopback hub), that would contact a host the run never asked
    for; pre-seed the (cosmetic) registry with an empty one instead."""
    try:
        from huggingface_hub import constants
        from huggingface_hub.utils import _detect_agent

        if constants.HF_HUB_DISABLE_TELEMETRY or constants.ENDPOINT.rstrip("/") == endpoint:
            return
        if getattr(_detect_agent, "_registry", "absent") is None:
            _detect_agent._registry = {"standardEnvVars": [], "harnesses": {}}
    except Exception:  # cosmetic only; never fail a probe over it
        pass


def _read_local(name: str) -> ModelProbe:
    path = Path(os.path.expanduser(name))
    probe = ModelProbe(name, "local", path=str(path))
    if not path.is_dir():
        probe.failure = HubFailure("not-found", "local path not found", f"{path} is not a directory",
                                   "Fix the path, or use a Hugging Face repo id such as openai/gpt-oss-120b "
                                   "(a profile can also create local checkpoints first with models.prepare).")
        return probe
    cfg = path / "config.json"
    if not cfg.is_file():
        probe.failure = HubFailure("entry", "no config.json", f"{path} has no config.json",
                                   "Point at the directory that holds the checkpoint's config.json and weights.")
        return probe
    total, count = 0, 0
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            try:
                total += (Path(root) / f).stat().st_size
                count += 1
            except OSError:
                pass
    probe.size_bytes = probe.repo_bytes = probe.cached_bytes = total
    probe.files = count
    try:
        probe.config = json.loads(cfg.read_text(encoding="utf-8"))
        if not isinstance(probe.config, dict):
            raise ValueError("config.json is not a JSON object")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        probe.config = None
        probe.failure = HubFailure("bad-config", "config.json unreadable", f"{cfg}: {_first_line(exc)}",
                                   "Check the file (it must be the checkpoint's JSON config).")
        return probe
    probe.tensors = read_dir(path)  # headers only: a few KB per shard, no weights loaded
    return probe


def probe_model(name: str, settings: HubSettings) -> ModelProbe:
    """config.json and model_info(files_metadata=True) of a repo id, or config.json of a local directory.
    Never raises: failures land in `probe.failure`."""
    if looks_local(name):
        return _read_local(name)
    probe = ModelProbe(name, "hub", repo_id=name)
    try:
        from huggingface_hub import HfApi, hf_hub_download
    except ImportError:
        probe.failure = HubFailure("error", "huggingface_hub missing", "the huggingface_hub package is not installed",
                                   "Install it: pip install huggingface_hub")
        return probe
    _quiet_foreign_agent_registry(settings.endpoint)
    # Always "main" (not the commit model_info returned): the download then records refs/main in the
    # cache, exactly as vLLM's own download does, so a later offline run finds config.json.
    revision = "main"
    try:
        if settings.offline:
            probe.info_skipped = True
            ref = cache_repo_dir(settings.cache_dir, name) / "refs" / "main"
            try:
                probe.commit = ref.read_text().strip() or None
            except OSError:
                pass
        else:
            api = HfApi(endpoint=settings.endpoint, token=settings.token_arg)
            info = api.model_info(name, files_metadata=True, timeout=settings.timeout_s)
            probe.commit = info.sha
            probe.gated = info.gated
            probe.private = info.private
            sizes: dict[str, int] = {}
            for s in info.siblings or []:
                size = s.lfs.size if s.lfs is not None else s.size
                sizes[s.rfilename] = int(size or 0)
            if sizes or info.siblings is not None:
                top = {k: v for k, v in sizes.items() if "/" not in k}
                probe.repo_bytes = sum(sizes.values())
                probe.size_bytes = sum(top.values())
                probe.files = len(top)
                if probe.commit:
                    snap = cache_repo_dir(settings.cache_dir, name) / "snapshots" / probe.commit
                    probe.cached_bytes = sum(v for k, v in top.items() if (snap / k).exists())
        path = hf_hub_download(name, "config.json", revision=revision, endpoint=settings.endpoint,
                               token=settings.token_arg, cache_dir=str(settings.cache_dir),
                               etag_timeout=settings.timeout_s, local_files_only=settings.offline,
                               tqdm_class=_silent_tqdm())
        probe.path = str(path)
        probe.config = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(probe.config, dict):
            raise json.JSONDecodeError("config.json is not a JSON object", "", 0)
    except Exception as exc:  # every failure becomes one readable fact
        probe.failure = describe_hub_error(exc, repo_id=name, filename="config.json", settings=settings)
        probe.config = None
    return probe


__all__ = ["DEFAULT_ENDPOINT", "HubFailure", "HubSettings", "ModelProbe", "cache_repo_dir", "describe_hub_error",
           "env_true", "free_bytes", "hub_settings", "looks_local", "probe_model",
           "transport_failure"]
