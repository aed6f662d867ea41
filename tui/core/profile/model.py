"""Strict TOML profiles.

A profile is a TOML file with the top-level keys name, description, extends and platform
("neuron" | "cuda" | "cpu", default "neuron"), the tables [models], [server], [speculative], [dataset],
[benchmark], [smoke], [environment], and (stand-in / simulated profiles only) [stand_in] and
[simulation]. Loading is strict: an unknown key, a wrong type or an out-of-range value raises
ProfileError whose message names the file, the key path, the bad value and what is allowed.

Validation is per platform. On neuron, cross-field checks mirror vllm-neuron's own validation so a bad
bucket configuration fails here, not after a 20-minute compile. On cuda and cpu a
[server.additional_config.neuron_config] table is an error. Everywhere: vLLM's rule for
speculative.draft_tensor_parallel_size (unset, 1, or the target's TP) and the benchmark lengths.

Some defaults depend on the platform (Spec defaults given as PerPlatform): server.tensor_parallel_size (16 on neuron,
1 elsewhere), environment.instance_type ("trn2.48xlarge" on neuron, "" elsewhere) and
environment.min_neuron_sdk ("2.31" on neuron; on cuda/cpu it must stay "").

String values may contain placeholders resolved at run time (never at load time, so a saved profile
replays exactly): {python} (the app's interpreter), {sim_hub} (the loopback hub/mirror URL of a
simulated run), {cache_dir} (specdec-tui's cache directory), {run_dir}, {vllm_python} (the interpreter
that runs the server command's `vllm`), {specdec_tools} (the app's tui/tools directory) and
{bundled_data} (the directory of the bundled sonnet.txt). See tui.core.plan.commands.Placeholders.

Model names (models.target, models.draft, speculative.model) are Hugging Face repo ids or local
directories. A local directory is written absolute ("/..."), relative ("./..." or "../..."; relative to
the directory specdec-tui runs in, as vLLM resolves it) or starting with a placeholder
("{cache_dir}/..."); see is_local_model(). models.prepare is the argv that creates missing local
model directories.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tui.core.profile.checks import cross_checks
from tui.core.profile.errors import ProfileError, bad_value
from tui.core.profile.paths import is_local_model, local_model_keys, with_absolute_paths
from tui.core.profile.schema import (OPTIONAL_TABLES, PLATFORMS, SCHEMA, SIM_FAULTS, _KIND_WORDS, _TABLE_TITLES, PerPlatform,
                                     _show, _type_ok)
from tui.core.profile.sections import BenchmarkSettings, ServerSettings, SpeculativeSettings, TuneSettings
from tui.core.profile.values import check_values  # values JSON/argv/env cannot carry (dates, NaN, NUL)

import tomli_w


# ---------------------------------------------------------------------------------------------
# Profile object
# ---------------------------------------------------------------------------------------------


@dataclass
class Profile:
    """A validated profile. `data` holds every table with defaults filled in."""

    name: str
    source: str  # file path or "<memory>"
    data: dict[str, Any]
    raw: dict[str, Any] = field(default_factory=dict)

    # -- convenient accessors ------------------------------------------------------------------
    def __getattr__(self, item: str) -> Any:
        data = self.__dict__.get("data")
        if data is not None and item in data and isinstance(data[item], dict):
            return _Section(data[item])
        raise AttributeError(item)

    @property
    def platform(self) -> str:
        """ "neuron" | "cuda" | "cpu" (top-level `platform`, default "neuron")."""
        return self.data["platform"]

    @property
    def simulated(self) -> bool:
        """True when the profile has a [stand_in] or a [simulation] table (a reported fact)."""
        return "simulation" in self.raw or "stand_in" in self.raw

    @property
    def speculative(self) -> SpeculativeSettings:
        """The [speculative] table, typed, with the draft filled in (speculative.model, else models.draft)."""
        sp = self.data["speculative"]
        return SpeculativeSettings.from_table({**sp, "model": sp["model"] or self.data["models"]["draft"]})

    @property
    def server(self) -> ServerSettings:
        """The [server] table, typed (a copy: changing it changes nothing in the profile)."""
        return ServerSettings.from_table(self.data["server"])

    @property
    def benchmark(self) -> BenchmarkSettings:
        """The [benchmark] table, typed."""
        return BenchmarkSettings.from_table(self.data["benchmark"])

    @property
    def tune(self) -> TuneSettings | None:
        """The [tune] table, typed; None for a two-arm profile (no [tune] table)."""
        t = self.data.get("tune")
        return TuneSettings.from_table(t) if isinstance(t, dict) else None

    @property
    def declared_vllm_version(self) -> str | None:
        """The vLLM release the profile states it runs: [simulation] vllm_version, the version the simulator
        plays (it stands in for the platform, vLLM included); None where the release is found at run time (the
        environment step's probe of server.command's interpreter)."""
        sim = self.data.get("simulation")
        return str(sim["vllm_version"]) if isinstance(sim, dict) and sim.get("vllm_version") else None

    @property
    def draft_model(self) -> str:
        return self.speculative.model

    def with_server(self, server: ServerSettings) -> "Profile":
        """This profile with its [server] table replaced, without loading or checking it again (the settings
        are typed values of an already validated profile: a parallel arm's port and NEURON_VISIBLE_DEVICES)."""
        table = server.as_table()
        changed = {k: v for k, v in table.items() if self.data["server"].get(k) != v}
        raw = copy.deepcopy(self.raw)
        raw.setdefault("server", {}).update(copy.deepcopy(changed))
        return Profile(name=self.name, source=self.source, data={**self.data, "server": table}, raw=raw)

    def to_toml(self) -> str:
        """The profile as TOML (only the keys the author set, plus edits). Loads back to an equal Profile."""
        return tomli_w.dumps(self.raw)

    def with_values(self, updates: dict[str, Any]) -> "Profile":
        """A new validated profile with dotted keys replaced, e.g. {"server.port": 8001}."""
        raw = copy.deepcopy(self.raw)
        for dotted, value in updates.items():
            parts = dotted.split(".")
            node = raw
            for p in parts[:-1]:
                node = node.setdefault(p, {})
            node[parts[-1]] = value
        return profile_from_dict(raw, self.source, name=self.name)


class _Section:
    """The tables not yet typed (models, dataset, smoke, environment, simulation, ...): attribute access to the
    validated dict. [speculative], [server], [benchmark] and [tune] are typed (profile/sections.py)."""

    def __init__(self, d: dict[str, Any]):
        self._d = d

    def __getattr__(self, item: str) -> Any:
        try:
            return self._d[item]
        except KeyError:
            raise AttributeError(item) from None

    def __getitem__(self, item: str) -> Any:
        return self._d[item]

    def get(self, item: str, default: Any = None) -> Any:
        return self._d.get(item, default)


# ---------------------------------------------------------------------------------------------
# Loading and validation
# ---------------------------------------------------------------------------------------------


_err = bad_value


def validate_value(section: str, key: str, value: Any, source: str = "<memory>") -> Any:
    """Validate one value against the schema (used by the TUI's inline editors). Returns the value."""
    spec = SCHEMA[section][key]
    path = f"{section}.{key}" if section else key
    if spec.kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not _type_ok(spec.kind, value):
        raise _err(source, path, value, f"{_KIND_WORDS[spec.kind]} ({spec.allowed})" if spec.allowed else _KIND_WORDS[spec.kind])
    if spec.check is not None and not spec.check(value):
        raise _err(source, path, value, spec.allowed)
    return value


def profile_from_dict(raw: dict[str, Any], source: str = "<memory>", name: str | None = None) -> Profile:
    data: dict[str, Any] = {}
    platform = raw.get("platform", SCHEMA[""]["platform"].default)
    if "platform" in raw:
        platform = validate_value("", "platform", platform, source)
    for key in raw:
        if key in SCHEMA and key != "":
            continue
        if key in SCHEMA[""]:
            continue
        known = ", ".join(f"[{k}]" for k in SCHEMA if k) + ", " + ", ".join(SCHEMA[""])
        raise ProfileError(
            f"profile {source}: unknown key '{key}' at the top level; allowed tables and keys: {known}. "
            "Remove it or check its spelling."
        )
    for section, specs in SCHEMA.items():
        if section == "":
            given = {k: v for k, v in raw.items() if k in specs}
        else:
            given = raw.get(section, {})
            if not isinstance(given, dict):
                raise ProfileError(
                    f"profile {source}: '{section}' must be a table ([{section}]), not {_show(given)}."
                )
        if section in OPTIONAL_TABLES and section not in raw:
            continue
        out: dict[str, Any] = {}
        for k, v in given.items():
            if k not in specs:
                allowed = ", ".join(specs)
                path = f"{section}.{k}" if section else k
                raise ProfileError(
                    f"profile {source}: unknown key '{path}' in {_TABLE_TITLES[section]}; allowed keys: {allowed}. "
                    "Remove it or check its spelling."
                )
            out[k] = validate_value(section, k, v, source)
        for k, spec in specs.items():
            if k in out:
                continue
            if spec.required:
                path = f"{section}.{k}" if section else k
                raise ProfileError(
                    f"profile {source}: required key '{path}' is missing; expected {spec.allowed}. "
                    f"Add it to {_TABLE_TITLES[section]}."
                )
            out[k] = copy.deepcopy(spec.default_for(platform))
        if section == "":
            data.update(out)
        else:
            data[section] = out

    check_values(data, source)
    # The profile's own `name` wins over the file stem a caller passes.
    prof = Profile(name=data.get("name") or name or Path(source).stem, source=source, data=data, raw=copy.deepcopy(raw))
    cross_checks(prof)
    return prof




def _toml_error(source: str, exc: tomllib.TOMLDecodeError) -> ProfileError:
    # Python 3.11's message already ends with "(at line L, column C)"; 3.14 adds attributes.
    return ProfileError(f"profile {source}: TOML syntax error: {exc}. Fix the syntax at that line and column.")


def load_profile_text(text: str, source: str = "<memory>", name: str | None = None) -> Profile:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(source, exc) from None
    return profile_from_dict(raw, source, name=name)


# ---------------------------------------------------------------------------------------------
# Finding profiles
# ---------------------------------------------------------------------------------------------


def bundled_profiles() -> dict[str, Path]:
    """Bundled profiles by name: the installed `specdec_profiles` package (wheel or editable install), else the
    `profiles/` directory of a source checkout."""
    found: dict[str, Path] = {}
    try:
        for entry in resources.files("specdec_profiles").iterdir():
            if entry.name.endswith(".toml"):
                found[entry.name[: -len(".toml")]] = Path(str(entry))
    except (ModuleNotFoundError, TypeError, OSError):
        pass
    if not found:
        here = Path(__file__).resolve().parents[3] / "profiles"
        found = {p.stem: p for p in here.glob("*.toml")} if here.is_dir() else {}
    return dict(sorted(found.items()))


def resolve_profile_path(name_or_path: str) -> Path:
    p = Path(name_or_path).expanduser()
    if p.suffix == ".toml" or "/" in name_or_path or p.exists():
        if not p.is_file():
            raise ProfileError(
                f"profile {name_or_path}: no such file. Give a path to a .toml file or one of the bundled "
                f"profile names: {', '.join(bundled_profiles()) or '(none found)'}."
            )
        return p
    bundled = bundled_profiles()
    if name_or_path in bundled:
        return bundled[name_or_path]
    raise ProfileError(
        f"profile '{name_or_path}' not found: it is neither a file nor a bundled profile. Bundled profiles: "
        f"{', '.join(bundled) or '(none found)'}; run `specdec-tui --list-profiles` to see them."
    )


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _load_raw(path: Path, source: str, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The profile's TOML as a dict, with `extends = "NAME|PATH"` resolved (the file's keys win)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProfileError(f"profile {path}: cannot be read ({exc.strerror or exc}). Check the path and its permissions.") from None
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        hint = " (it looks like UTF-16)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ProfileError(f"profile {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}){hint}. "
                           "Save it as UTF-8.") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(source, exc) from None
    base_ref = raw.pop("extends", None)
    if base_ref is None:
        return raw
    if not isinstance(base_ref, str) or not base_ref:
        raise _err(source, "extends", base_ref, "the name of a bundled profile or a path to a .toml file")
    rel = (path.parent / base_ref).expanduser()
    base_path = rel if rel.suffix == ".toml" and rel.is_file() else None
    if base_path is None:
        try:
            base_path = resolve_profile_path(base_ref)
        except ProfileError as exc:
            raise ProfileError(f"profile {source}: extends = {base_ref!r} cannot be loaded: {exc}") from None
    resolved = base_path.resolve()
    if resolved in seen or resolved == path.resolve():
        raise ProfileError(f"profile {source}: extends = {base_ref!r} forms a cycle. Remove one of the extends keys.")
    base = _load_raw(base_path, str(base_path), seen + (path.resolve(),))
    base.pop("name", None)
    base.pop("description", None)
    return _deep_merge(base, raw)


def load_profile(name_or_path: str) -> Profile:
    """Load a bundled profile by name or a TOML file by path. A profile may start from another one with
    `extends = "demo"` (a bundled name, or a path relative to the file); its own keys win, tables merge."""
    path = resolve_profile_path(name_or_path)
    bundled = bundled_profiles()
    name = path.stem
    source = name if bundled.get(name) == path else str(path)
    raw = _load_raw(path, source)
    return profile_from_dict(raw, source, name=name)


__all__ = [
    "PLATFORMS",
    "PerPlatform",
    "Profile",
    "ProfileError",
    "SCHEMA",
    "SIM_FAULTS",
    "bundled_profiles",
    "is_local_model",
    "local_model_keys",
    "load_profile",
    "load_profile_text",
    "profile_from_dict",
    "resolve_profile_path",
    "validate_value",
    "with_absolute_paths",
]
