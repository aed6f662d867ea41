"""A profile's paths: which model names are local directories, and making every relative path absolute once
(children run in other directories)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from tui.core.profile.model import Profile


def is_local_model(name: str) -> bool:
    """A model name that names a local directory rather than a Hugging Face repo id: absolute ("/..."),
    explicitly relative ("./...", "../...", "." or ".."), or starting with a placeholder ("{cache_dir}/...")."""
    return (name.startswith(("/", "./", "../", "{")) or name in (".", ".."))


def local_model_keys(prof: "Profile") -> dict[str, str]:
    """{key path: unresolved value} of the model names that are local directories (see is_local_model)."""
    out: dict[str, str] = {}
    for key, value in (("models.target", prof.data["models"]["target"]),
                       ("models.draft", prof.data["models"]["draft"]),
                       ("speculative.model", prof.data["speculative"]["model"])):
        if value and is_local_model(value):
            out[key] = value
    return out


def _absolute(value: str, cwd: str) -> str:
    """`value` made absolute against `cwd` when it is a relative path ("./x", "../x", "x/y"); placeholders
    ("{cache_dir}/..."), absolute paths and "" are returned as they are."""
    if not value or value.startswith(("{", "/")):
        return value
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(value)))


def with_absolute_paths(prof: "Profile", cwd: str | None = None) -> "Profile":
    """The profile with every relative path made absolute against `cwd` (default: the working directory), so
    that children get absolute paths whatever their working directory (the engine runs some in the run
    directory). Paths: dataset.path, tune.prompts_file, the local model directories (models.target,
    models.draft, speculative.model, tune.drafts.*.model: "./..." or "../..."), and the arguments of
    models.prepare and server.command that start with "./" or "../". Repo ids and placeholders are kept.
    Idempotent; returns `prof` itself when nothing changes."""
    cwd = cwd or os.getcwd()
    d = prof.data
    updates: dict[str, Any] = {}

    def put(key: str, old: str, new: str) -> None:
        if new != old:
            updates[key] = new

    if d["dataset"].get("path"):
        put("dataset.path", d["dataset"]["path"], _absolute(d["dataset"]["path"], cwd))
    t = prof.tune
    if t is not None:
        if t.prompts_file:
            put("tune.prompts_file", t.prompts_file, _absolute(t.prompts_file, cwd))
        for dr in t.drafts:
            if dr.model and is_local_model(dr.model):
                new = _absolute(dr.model, cwd)
                if new != dr.model:
                    updates[f"tune.drafts.{dr.name}.model"] = new
    for key, value in local_model_keys(prof).items():
        if key.split(".")[0] in prof.raw and key.split(".")[1] in prof.raw[key.split(".")[0]]:
            put(key, value, _absolute(value, cwd))

    def rel(a: str) -> bool:
        return a.startswith(("./", "../")) or a in (".", "..")

    for key, argv in (("models.prepare", d["models"]["prepare"]), ("server.command", d["server"]["command"])):
        if any(rel(a) for a in argv):
            updates[key] = [_absolute(a, cwd) if rel(a) else a for a in argv]
    return prof.with_values(updates) if updates else prof
