"""Reuse of a run directory: may this profile continue the run saved there? (nothing is written)

It sits above the plan because it compares the saved run with the profile's settings and arms.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Mapping

from tui.core.plan.arms import is_tune, run_steps
from tui.core.profile.model import profile_from_dict
from tui.core.secrets import redact
from tui.core.store.rundir import _ARM_ID, RunDirStateError, _unrecorded_result_problem, owner_alive, read_state


def _comparable_settings(toml_text: str) -> dict[str, Any] | None:
    """A profile's settings (every table with defaults, without name/description), or None when unloadable."""
    try:
        raw = tomllib.loads(toml_text)
        data = dict(profile_from_dict(raw, "<saved>").data)
    except Exception:
        return None
    data.pop("name", None)
    data.pop("description", None)
    data.pop("extends", None)
    return data


def check_reuse(directory: Path, profile: Any) -> dict[str, Any] | None:
    """Check that `profile` may continue the run in `directory` (nothing is written). Returns the validated
    state (None for a fresh directory); raises RunDirStateError with one paragraph otherwise.

    Rules: the state must parse and have the expected shape; its profile name must be the profile's name,
    or the directory's saved profile.toml must have the same settings as the profile apart from its name and
    description (a renamed copy); no live process may own it (two apps in one run directory would overwrite
    each other's files)."""
    directory = Path(directory)
    state = read_state(directory)
    if state is None:
        return None
    keep = "It is left as it is."
    saved_name = state.get("profile")
    if saved_name != profile.name:
        saved = directory / "profile.toml"
        same = False
        try:
            same = (_comparable_settings(saved.read_text(encoding="utf-8"))
                    == _comparable_settings(redact(profile.to_toml())))
        except (OSError, UnicodeDecodeError):
            same = False
        if not same:
            raise RunDirStateError(
                f"run directory {directory} belongs to profile {saved_name!r}, not {profile.name!r}, and its saved "
                f"profile.toml has other settings; its results would be mixed with this profile's. {keep} Choose "
                "another --run-dir, or continue it with its own profile: --profile " + str(directory / "profile.toml") + ".")
    mismatch = shape_mismatch(state, profile)
    if mismatch:
        raise RunDirStateError(
            f"run directory {directory} holds {mismatch}; continuing it would mix the two runs' results (or drop the "
            f"saved ones from the report). {keep} Choose another --run-dir for this profile, or continue that run "
            "with its own profile: --profile " + str(directory / "profile.toml") + ".")
    damaged = _unrecorded_result_problem(directory, state)
    if damaged:
        raise RunDirStateError(
            f"run directory {directory}: {damaged}. {keep} Move that file aside (its step then runs again when "
            "requested), or choose another --run-dir.")
    owner = state.get("owner")
    if isinstance(owner, dict) and not owner.get("ended") and owner.get("pid") != os.getpid():
        if owner_alive(owner):
            raise RunDirStateError(
                f"run directory {directory} is in use by another specdec-tui (pid {owner.get('pid')}). {keep} Wait for "
                "it to finish or stop it, or choose another --run-dir.")
    return state


_SETTLED_NOTHING = ("skipped", "pending")  # a step in these states holds no result of its own


def _saved_kind(state: Mapping[str, Any]) -> bool | None:
    """Whether the saved run is a tune run (True), a two-arm run (False), or cannot tell (None: only the checks
    before the servers ran). From "tune" in state.json, else from its step ids and the baseline's facts."""
    if isinstance(state.get("tune"), bool):
        return state["tune"]
    steps = state.get("steps") or {}
    if any(_ARM_ID.match(sid) for sid in steps):
        return True
    if "eagle3" in steps:
        return False
    facts = (steps.get("baseline") or {}).get("facts") if isinstance(steps.get("baseline"), dict) else None
    if isinstance(facts, dict):
        if isinstance(facts.get("repeats"), dict):
            return True
        if isinstance(facts.get("bench"), dict):
            return False
    return None


def shape_mismatch(state: Mapping[str, Any], profile: Any) -> str | None:
    """Why `profile` cannot continue the saved run `state` although its name may match: the run is of another
    shape (a two-arm run and a tune run) or holds arms the profile does not have. None when it fits (a profile
    with more arms than the saved run may add them)."""
    tune = is_tune(profile)
    saved = _saved_kind(state)
    kinds = {True: "a tune run", False: "a two-arm run (baseline vs eagle3)"}
    if saved is not None and saved != tune:
        return f"{kinds[saved]}, and profile {profile.name!r} is {kinds[tune]}"
    allowed = set(run_steps(profile))
    extra = [sid for sid, st in (state.get("steps") or {}).items()
             if sid not in allowed and not (isinstance(st, dict) and st.get("status") in _SETTLED_NOTHING)]
    if extra:
        return (f"step(s) {', '.join(extra)} that profile {profile.name!r} does not have (its steps: "
                f"{', '.join(run_steps(profile))})")
    return None
