"""The one error a profile raises: str(exc) is a one-paragraph message fit for the operator."""

from __future__ import annotations

from typing import Any

from tui.core.profile.schema import _show


class ProfileError(Exception):
    """A profile could not be loaded. str(exc) is a one-paragraph message fit for the operator."""


def bad_value(source: str, path: str, value: Any, allowed: str, fix: str = "") -> ProfileError:
    """"profile SRC: PATH = VALUE is not valid; allowed: ALLOWED. FIX" as a ProfileError."""
    msg = f"profile {source}: {path} = {_show(value)} is not valid; allowed: {allowed}."
    if fix:
        msg += " " + fix
    return ProfileError(msg)
