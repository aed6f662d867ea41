"""A loopback stand-in for the Hugging Face hub and the sonnet dataset mirror.

A real HTTP server (a Starlette app served by uvicorn in a background thread) that speaks the part of
the hub protocol huggingface_hub uses, so the checkpoints step, `hf_hub_download` and `HfApi` run
unmodified against it with `HF_ENDPOINT` set to its URL:

* `HEAD`/`GET /{repo_id}/resolve/{revision}/{filename}` with `X-Repo-Commit`, `ETag`,
  `Content-Length`, `Accept-Ranges` (and `Range` support). Large weight files are *listed* (their
  HEAD answers with the real size) but their bytes are not served (`GET` answers 501).
* `GET /api/models/{repo_id}` and `/api/models/{repo_id}/revision/{revision}` (`?blobs=true` adds
  `size`, `blobId` and `lfs` to every sibling), `GET /api/agent-harnesses` (an empty registry).
* Errors carry the hub's headers: `X-Error-Code: RepoNotFound` (404, or 401 for a private repo without
  a token), `GatedRepo` (403), `EntryNotFound` (404), `RevisionNotFound` (404).
* `GET /datasets/sonnet.txt`: vLLM's sonnet.txt, the bundled copy (`tui.sim.sonnet`), with `ETag`,
  `Content-Length` and `Range` (206 + `Content-Range`).

Repositories: `openai/gpt-oss-120b`, `RedHatAI/gpt-oss-120b-speculator.eagle3` (the tutorial pair),
`stevenabreu7/gpt-oss-120b-speculator.eagle3`, `openai/gpt-oss-20b` + `RedHatAI/gpt-oss-20b-speculator.eagle3`,
the gated `meta-llama/Llama-3.1-8B-Instruct` + `RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3`, the gated
`meta-llama/Meta-Llama-3-8B-Instruct` + the EAGLE-1 `yuhuili/EAGLE-LLaMA3-Instruct-8B`, and test drafts under
`specdec-sim/` (see `default_repos()`). Gated repositories answer downloads only with a token in `tokens`
(default: `AUTHORIZED_TOKEN`). Commits are sha1 of the repo id, so they are stable.

Faults, per server (`start_hub(delay=..., faults=...)`) or changed at run time
(`HubHandle.set_fault`): `faults` maps an fnmatch pattern on the request path to a spec, a
comma-separated list of:

    404 | 401 | 403 | 500 | 503   answer with that status (hub error headers on hub paths)
    gated                         403 with X-Error-Code: GatedRepo
    entry-404 | revision-404      404 EntryNotFound / RevisionNotFound
    delay=SECONDS                 sleep before answering
    drop | drop=N                 send half of a body, then drop the connection (always / first N times)
    corrupt                       serve different bytes of the same length (a hash mismatch)
    no-range                      ignore Range headers (always answer 200 with the whole body)

`python -m tui.sim hub [--host H] [--port N] [--delay S] [--fault PATTERN=SPEC ...]` prints the URL
and serves until Ctrl+C.

The package, one job a module: configs.py (the published config.json files and the speculators draft config),
repos.py (the repositories and their files), faults.py (the fault specs and the dropped connection),
routes.py (the Starlette app: hub API, resolve, the dataset mirror), server.py (`start_hub`, `HubHandle`: uvicorn
in a thread) and main.py (`main`: the command line).
"""

from __future__ import annotations

from .configs import (EAGLE_LLAMA3_8B_CONFIG, GPT_OSS_120B_CONFIG, LLAMA_3_8B_CONFIG, LLAMA_31_8B_CONFIG,
                      speculators_config)
from .faults import Fault
from .main import main
from .repos import AUTHORIZED_TOKEN, SimRepo, commit_for, default_repos
from .routes import DATASET_PATH, HubApp, RequestRecord
from .server import HubHandle, start_hub

__all__ = ["AUTHORIZED_TOKEN", "DATASET_PATH", "EAGLE_LLAMA3_8B_CONFIG", "Fault", "GPT_OSS_120B_CONFIG", "HubApp",
           "HubHandle", "LLAMA_31_8B_CONFIG", "LLAMA_3_8B_CONFIG", "RequestRecord", "SimRepo", "commit_for",
           "default_repos", "main", "speculators_config", "start_hub"]
