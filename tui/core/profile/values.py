"""Profile values checked for what they become.

TOML carries values that the places a profile's values go to cannot: a date/time (JSON has none: it
would reach --hf-overrides / --additional-config / SPECDEC_SIM), NaN and infinity (not JSON either, and
vLLM would parse them into nonsense), and strings with a NUL character (neither argv nor an environment
variable can hold one). check_values() walks the whole validated profile at load time and raises
ProfileError naming the dotted key path, the bad value and what is allowed, so such a profile stops
before anything is written or started.

Rules:
- everything (every table, including hf_overrides, additional_config and simulation): no date/time,
  no NaN/inf, no NUL in a string or a key;
- server.env: names are non-empty, without '=' (an environment variable name cannot hold one);
- server.command: the first word (the executable) is not empty.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from tui.core.profile.errors import ProfileError
from tui.core.secrets import is_secret_name

_JSON_TABLES = {
    "server.hf_overrides": "sent as JSON to --hf-overrides",
    "server.additional_config": "sent as JSON to --additional-config",
    "simulation": "sent as JSON to the simulator",
}
_JSON_ALLOWED = "strings, numbers, booleans, arrays and tables (JSON values)"


def _is_secret_path(path: str) -> bool:

    return is_secret_name(path.rsplit(".", 1)[-1])


def _show(path: str, v: Any) -> str:
    if isinstance(v, str) and _is_secret_path(path):
        return "'***'"
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat()
    if isinstance(v, str) and len(v) > 80:
        return repr(v[:77] + "...")
    return repr(v)


def _where(path: str) -> str:
    for prefix, what in _JSON_TABLES.items():
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            return what
    if path.startswith("server.env"):
        return "passed as an environment variable"
    return "passed on a command line or to the server"


def _walk(v: Any, path: str, source: str) -> None:

    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        kind = ("a TOML date-time" if isinstance(v, _dt.datetime) else
                "a TOML date" if isinstance(v, _dt.date) else "a TOML time")
        raise ProfileError(
            f"profile {source}: {path} = {_show(path, v)} is not valid: it is {kind}, which JSON cannot carry "
            f"(this value is {_where(path)}); allowed: {_JSON_ALLOWED}. Quote it (\"{v.isoformat()}\") if a string "
            "is meant.")
    if isinstance(v, float) and not math.isfinite(v):
        raise ProfileError(
            f"profile {source}: {path} = {v!r} is not valid: NaN and infinity are not numbers JSON or vLLM accept "
            f"(this value is {_where(path)}); allowed: a finite number. Use a finite number or remove the key.")
    if isinstance(v, str):
        if "\x00" in v:
            raise ProfileError(
                f"profile {source}: {path} = {_show(path, v)} is not valid: it contains a NUL character (\\u0000), "
                f"which no command line or environment variable can hold (this value is {_where(path)}); "
                "allowed: text without NUL. Remove the \\u0000.")
        return
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(k, str) and "\x00" in k:
                raise ProfileError(
                    f"profile {source}: a key in {path or 'the top level'} contains a NUL character (\\u0000) "
                    f"({k!r}); allowed: key names without NUL. Rename the key.")
            _walk(x, f"{path}.{k}" if path else str(k), source)
        return
    if isinstance(v, list):
        for i, x in enumerate(v):
            _walk(x, f"{path}[{i}]", source)


def check_values(data: dict[str, Any], source: str = "<memory>") -> None:
    """Raise ProfileError for the first value of `data` (a validated profile's tables) that cannot become
    JSON, argv or an environment variable."""

    _walk(data, "", source)
    server = data.get("server") or {}
    env = server.get("env") or {}
    for name in env:
        if not name or "=" in name:
            raise ProfileError(
                f"profile {source}: server.env has a variable named {name!r}, which is not valid: an environment "
                "variable name is not empty and has no '='; allowed: names such as HF_TOKEN or "
                "NEURON_RT_VISIBLE_CORES. Rename it.")
    cmd = server.get("command") or []
    if cmd and not str(cmd[0]).strip():
        raise ProfileError(
            f"profile {source}: server.command[0] = {cmd[0]!r} is not valid: the first word is the executable; "
            'allowed: a program name or path, e.g. ["vllm"]. Put the executable first.')


__all__ = ["check_values"]
