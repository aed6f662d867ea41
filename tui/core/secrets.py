"""Redaction: the one place that knows what a secret is and removes it from text, objects and events.

Every channel uses it: files the run directory writes, child-process logs, the events both front ends render,
the CLI's own output. It removes the value of every variable whose name says TOKEN, KEY, SECRET or PASSWORD
(from the process environment and from what the engine registers: the profile's server.env and the run's
environment), and anything shaped like a Hugging Face token (hf_...).
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
from typing import Any, Iterable, Mapping

# ---------------------------------------------------------------------------------------------
# Secrets
# ---------------------------------------------------------------------------------------------

# A variable is secret when a word of its name is TOKEN, KEY, SECRET or PASSWORD (HF_TOKEN, OPENAI_API_KEY,
# AWS_SECRET_ACCESS_KEY, DB_PASSWORD ...). TOKENIZERS_PARALLELISM is not (TOKEN is not a word of it); nor is
# a variable that names a file holding a secret (HF_TOKEN_PATH): its value is a path, not the secret.
_SECRET_NAME_RE = re.compile(r"(?:^|_)(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|APIKEY)(?:_|$)", re.IGNORECASE)
_NOT_SECRET_SUFFIX = ("_PATH", "_FILE", "_DIR")
_NOT_SECRET_VALUES = {"true", "false", "yes", "no", "none", "null", "auto", "1", "0", "on", "off"}
_TOKEN_RE = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")
_MIN_SECRET_LEN = 4
_ENV_REFRESH_S = 1.0


def is_secret_name(name: str) -> bool:
    up = name.upper()
    return bool(_SECRET_NAME_RE.search(up)) and not up.endswith(_NOT_SECRET_SUFFIX)


def _secret_value_ok(value: Any) -> bool:
    return isinstance(value, str) and len(value.strip()) >= _MIN_SECRET_LEN and value.strip().lower() not in _NOT_SECRET_VALUES


class _Redactor:
    def __init__(self) -> None:
        self._registered: set[str] = set()
        self._env: frozenset[str] = frozenset()
        self._env_at = -1e9
        self._lock = threading.Lock()
        self._pattern: re.Pattern[str] | None = None
        self._pattern_for: frozenset[str] | None = None
        self._current: tuple[re.Pattern[str], tuple[str, ...]] | None = None

    def add(self, values: Iterable[str]) -> None:
        with self._lock:
            for v in values:
                if _secret_value_ok(v):
                    self._registered.add(v.strip())
                    if v != v.strip():
                        self._registered.add(v)
            self._current = None

    def add_from_env(self, mapping: Mapping[str, Any]) -> None:
        self.add(v for k, v in mapping.items() if isinstance(k, str) and is_secret_name(k) and isinstance(v, str))

    def clear_registered(self) -> None:  # tests
        with self._lock:
            self._registered.clear()
            self._env_at = -1e9
            self._current = None

    def _values(self) -> frozenset[str]:
        return self._env | frozenset(self._registered)

    def current(self) -> tuple[re.Pattern[str], tuple[str, ...]]:
        """(pattern, literal secret values); the environment is re-read at most once a second."""
        now = time.monotonic()
        if now - self._env_at > _ENV_REFRESH_S:
            env = frozenset(v.strip() for k, v in list(os.environ.items())
                            if is_secret_name(k) and _secret_value_ok(v))
            self._env_at = now
            if env != self._env:
                self._env = env
                self._current = None
        cur = self._current
        if cur is None:
            pat = self.pattern()
            cur = self._current = (pat, tuple(self._pattern_for or ()))
        return cur

    def pattern(self) -> re.Pattern[str]:
        values = self._values()
        if self._pattern is None or values != self._pattern_for:
            alts = [re.escape(v) for v in sorted(values, key=len, reverse=True)]
            lit = f"(?P<s>{'|'.join(alts)})|" if alts else ""
            self._pattern = re.compile(f"{lit}(?P<t>{_TOKEN_RE.pattern})")
            self._pattern_for = values
        return self._pattern


_REDACTOR = _Redactor()


def _sub(m: re.Match[str]) -> str:
    return "hf_***" if m.lastgroup == "t" else "***"


def add_secrets(values: Iterable[str]) -> None:
    """Register literal secret values (e.g. a token read from a file) for every channel."""
    _REDACTOR.add(values)


def add_secrets_from_env(mapping: Mapping[str, Any]) -> None:
    """Register the values of the secret-named variables of `mapping` (a profile's server.env, a run's env)."""
    _REDACTOR.add_from_env(mapping)


def redact(text: str) -> str:
    """`text` with every known secret value replaced by *** and Hugging Face tokens by hf_***."""
    if not text:
        return text
    pat, literals = _REDACTOR.current()
    # Plain substring tests first (C speed): most lines hold no secret, and the regex is much slower.
    if "hf_" not in text:
        for v in literals:
            if v in text:
                break
        else:
            return text
    return pat.sub(_sub, text)


def redact_obj(obj: Any) -> Any:
    """redact() applied to every string in a JSON-like structure (dict keys included)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact_obj(k) if isinstance(k, str) else k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact_obj(v) for v in obj)
    return obj


_EVENT_FIELDS: dict[type, tuple[str, ...]] = {}


def redact_event(event: Any) -> Any:
    """The same event with its text fields redacted (a new object only when something changed)."""
    cls = type(event)
    names = _EVENT_FIELDS.get(cls)
    if names is None:
        if not dataclasses.is_dataclass(event):
            return event
        numeric = {"float", "int", "bool", "float | None", "int | None", "bool | None"}
        names = _EVENT_FIELDS[cls] = tuple(f.name for f in dataclasses.fields(event)
                                           if str(f.type) not in numeric and f.name not in ("step", "source", "node"))
    changes: dict[str, Any] | None = None
    for name in names:
        v = getattr(event, name)
        if type(v) is str:
            nv: Any = redact(v)
            if nv is v:
                continue
        elif isinstance(v, (str, dict, list, tuple)):
            nv = redact_obj(v)
            if nv == v:
                continue
        else:
            continue
        if changes is None:
            changes = {}
        changes[name] = nv
    return dataclasses.replace(event, **changes) if changes else event


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """redact() plus the literal values of the given secrets (e.g. a token from the run's environ, which the
    process environment does not hold)."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return redact(text)


def scrub_obj(obj: Any, secrets: tuple[str, ...] = ()) -> Any:
    if isinstance(obj, str):
        return scrub(obj, secrets)
    if isinstance(obj, dict):
        return {k: scrub_obj(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub_obj(v, secrets) for v in obj]
    return obj
