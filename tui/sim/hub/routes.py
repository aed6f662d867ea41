"""The loopback hub's Starlette app (`HubApp`): the hub API, `resolve` downloads, the dataset mirror, the
faults and the request log."""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import re
import threading
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..sonnet import sonnet_bytes
from .faults import DroppingResponse, Fault
from .repos import AUTHORIZED_TOKEN, SimRepo, default_repos

DATASET_PATH = "/datasets/sonnet.txt"


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    query: str
    range: str | None
    authorized: bool  # an Authorization header was sent (its value is never recorded)
    status: int


_API_REV_RE = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)/revision/(?P<rev>[^/]+)$")
_API_RE = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)$")
_RESOLVE_RE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


def _parse_range(value: str | None, total: int) -> tuple[int, int] | None | str:
    """(start, end inclusive) for a single `bytes=` range; None if absent; "bad" if unsatisfiable."""
    if not value:
        return None
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", value)
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return None  # unsupported form (e.g. several ranges): ignore, like many servers
    if m.group(1) == "":
        n = int(m.group(2))
        if n == 0:
            return "bad"
        return max(0, total - n), total - 1
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else total - 1
    if start >= total or end < start:
        return "bad"
    return start, min(end, total - 1)


class HubApp:
    """The Starlette application plus its mutable state (repos, faults, request log)."""

    def __init__(self, *, repos: Mapping[str, SimRepo] | None = None, delay: float = 0.0,
                 faults: Mapping[str, str] | None = None, tokens: Iterable[str] = (AUTHORIZED_TOKEN,),
                 dataset: bytes | None = None):
        self.repos: dict[str, SimRepo] = dict(default_repos() if repos is None else repos)
        self.delay = float(delay)
        self.tokens = set(tokens)
        self.dataset = sonnet_bytes() if dataset is None else dataset
        self._lock = threading.Lock()
        self._faults: list[tuple[str, Fault]] = []
        self._drops_left: dict[str, int] = {}
        self.requests: list[RequestRecord] = []
        for pattern, spec in (faults or {}).items():
            self.set_fault(pattern, spec)
        self.app = Starlette(routes=[Route("/{path:path}", self._endpoint, methods=["GET", "HEAD"])])

    # -- faults ------------------------------------------------------------------------------------
    def set_fault(self, pattern: str, spec: str) -> None:
        fault = Fault.parse(spec)
        with self._lock:
            self._faults = [(p, f) for p, f in self._faults if p != pattern] + [(pattern, fault)]
            self._drops_left[pattern] = fault.drop

    def clear_faults(self) -> None:
        with self._lock:
            self._faults = []
            self._drops_left = {}

    def _fault_for(self, path: str) -> tuple[Fault, str | None]:
        with self._lock:
            for pattern, fault in reversed(self._faults):
                if fnmatch.fnmatchcase(path, pattern):
                    return fault, pattern
        return Fault(), None

    def _take_drop(self, pattern: str | None, fault: Fault) -> bool:
        if pattern is None or fault.drop == 0:
            return False
        with self._lock:
            left = self._drops_left.get(pattern, 0)
            if left == 0:
                return False
            if left > 0:
                self._drops_left[pattern] = left - 1
            return True

    # -- responses -----------------------------------------------------------------------------------
    def _auth(self, request: Request) -> tuple[bool, bool]:
        header = request.headers.get("authorization", "")
        sent = bool(header)
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        return sent, token in self.tokens

    @staticmethod
    def _error(status: int, code: str | None, message: str, extra: Mapping[str, str] | None = None) -> Any:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        headers.update(extra or {})
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    def _body(self, request: Request, data: bytes, headers: dict[str, str], fault: Fault,
              pattern: str | None, media_type: str) -> Any:
        if fault.corrupt and data:
            changed = data.swapcase()  # same length, different bytes
            data = changed if changed != data else bytes([data[0] ^ 1]) + data[1:]
        total = len(data)
        headers = dict(headers)
        headers["Accept-Ranges"] = "bytes"
        status = 200
        rng = None if fault.no_range else _parse_range(request.headers.get("range"), total)
        if rng == "bad":
            return Response(b"", status_code=416, headers={"Content-Range": f"bytes */{total}"})
        if isinstance(rng, tuple):
            start, end = rng
            data = data[start:end + 1]
            headers["Content-Range"] = f"bytes {start}-{end}/{total}"
            status = 206
        headers["Content-Length"] = str(len(data))
        if request.method == "HEAD":
            return Response(b"", status_code=status, headers=headers, media_type=media_type)
        if data and self._take_drop(pattern, fault):
            return DroppingResponse(data, status_code=status, headers=headers, media_type=media_type)
        return Response(data, status_code=status, headers=headers, media_type=media_type)

    async def _endpoint(self, request: Request) -> Any:
        path = request.url.path
        fault, pattern = self._fault_for(path)
        delay = self.delay + fault.delay
        if delay > 0:
            await asyncio.sleep(delay)
        response = self._dispatch(request, path, fault, pattern)
        sent, _ = self._auth(request)
        with self._lock:
            self.requests.append(RequestRecord(request.method, path, request.url.query,
                                               request.headers.get("range"), sent, response.status_code))
        return response

    def _dispatch(self, request: Request, path: str, fault: Fault, pattern: str | None) -> Any:
        hub_path = path.startswith("/api/") or "/resolve/" in path
        if fault.status is not None:
            code = fault.error_code
            if code is None and hub_path:
                code = {404: "RepoNotFound", 401: "RepoNotFound", 403: "GatedRepo"}.get(fault.status)
            return self._error(fault.status, code if hub_path or fault.error_code else None,
                               f"simulated fault {fault.status} for {path}")
        if path == "/api/agent-harnesses":
            return JSONResponse({"standardEnvVars": [], "harnesses": {}})
        if path in ("/", "/api", "/healthz"):
            return JSONResponse({"name": "specdec-tui loopback hub", "repos": sorted(self.repos),
                                 "datasets": [DATASET_PATH]})
        if path == DATASET_PATH:
            headers = {"ETag": f'"{hashlib.sha256(self.dataset).hexdigest()[:32]}"',
                       "Cache-Control": "max-age=300"}
            return self._body(request, self.dataset, headers, fault, pattern, "text/plain; charset=utf-8")
        m = _API_REV_RE.match(path) or _API_RE.match(path)
        if m:
            return self._api(request, m.group("repo"), m.groupdict().get("rev"))
        m = _RESOLVE_RE.match(path)
        if m:
            return self._resolve(request, m.group("repo"), m.group("rev"), m.group("file"), fault, pattern)
        return self._error(404, None, f"not found: {path}")

    def _repo_or_error(self, request: Request, repo_id: str, *, for_download: bool) -> tuple[SimRepo | None, Any]:
        repo = self.repos.get(repo_id)
        _, ok = self._auth(request)
        if repo is None:
            return None, self._error(404, "RepoNotFound", "Repository not found")
        if repo.private and not ok:  # the hub does not reveal private repos: 401 + RepoNotFound
            return None, self._error(401, "RepoNotFound", "Repository not found")
        if for_download and repo.gated and not ok:
            return None, self._error(403, "GatedRepo",
                                     f"Access to model {repo_id} is restricted. You must have access to it and be "
                                     "authenticated to access it. Please log in.")
        return repo, None

    def _api(self, request: Request, repo_id: str, rev: str | None) -> Any:
        repo, err = self._repo_or_error(request, repo_id, for_download=False)
        if err is not None:
            return err
        assert repo is not None
        if rev is not None and rev not in ("main", repo.sha):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        metadata = request.query_params.get("blobs", "").lower() in ("1", "true")
        return JSONResponse(repo.info(metadata))

    def _resolve(self, request: Request, repo_id: str, rev: str, filename: str, fault: Fault,
                 pattern: str | None) -> Any:
        repo, err = self._repo_or_error(request, repo_id, for_download=True)
        if err is not None:
            return err
        assert repo is not None
        if rev not in ("main", repo.sha):
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        commit = {"X-Repo-Commit": repo.sha}
        if filename not in repo.files and filename not in repo.listed:
            return self._error(404, "EntryNotFound", f"{filename} does not exist on \"{rev}\"", commit)
        headers = dict(commit, ETag=f'"{repo.etag(filename)}"')
        if filename in repo.listed:
            if request.method == "HEAD":
                headers["Content-Length"] = str(repo.size(filename))
                return Response(b"", headers=headers, media_type="application/octet-stream")
            return self._error(501, None, f"the loopback hub lists {filename} ({repo.size(filename)} bytes) "
                                          "but does not serve its bytes", commit)
        media = "application/json" if filename.endswith(".json") else "text/plain; charset=utf-8"
        return self._body(request, repo.files[filename], headers, fault, pattern, media)
