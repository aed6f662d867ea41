"""The run directory: every artifact of one run, each written atomically (temp file + rename)."""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

# Secrets that must never reach a log or a report.
_SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "VLLM_API_KEY")
_TOKEN_RE = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")


def redact(text: str) -> str:
    """Remove tokens (HF_TOKEN-style values and the literal values of secret env vars)."""
    for var in _SECRET_ENV:
        val = os.environ.get(var)
        if val and len(val) >= 4:
            text = text.replace(val, "***")
    return _TOKEN_RE.sub("hf_***", text)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, redact(text).encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def default_run_dir(profile_name: str, base: Path | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", profile_name) or "profile"
    return (base or Path("specdec-runs")) / f"{stamp}-{safe}"


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.state: dict[str, Any] = {"steps": {}}
        sp = self.path / "state.json"
        if sp.exists():
            try:
                self.state = json.loads(sp.read_text())
                self.state.setdefault("steps", {})
            except (OSError, ValueError):
                pass

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

    def save_state(self) -> None:
        atomic_write_json(self.file("state.json"), self.state)

    def update_step(self, step: str, **fields: Any) -> None:
        self.state["steps"].setdefault(step, {}).update(fields)
        self.save_state()
