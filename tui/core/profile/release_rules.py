"""What one vLLM release refuses in a profile, checked once the release is known.

`release_problems(prof, version)` lists, as (key path, one paragraph), what the vLLM release `version` would
refuse at start-up or silently ignore:
- a [speculative.extra] key its `SpeculativeConfig` does not have (vLLM's `@config` dataclasses forbid unknown
  keys: the server would not start), naming the nearest key it does have and the releases that have this one
  (0.34 removed disable_padded_drafter_batch and use_heterogeneous_vocab, added speculator_options, ...);
- a key it documents as a deprecated no-op (0.34: parallel_drafting, suffix_decoding_max_spec_factor,
  suffix_decoding_min_token_prob);
- a rejection_sample_method / draft_sample_method value its Literal lacks ("fly" before 0.33);
- `VLLM_USE_V2_MODEL_RUNNER` set to anything but "1" from 0.34, which raises "VLLM_USE_V2_MODEL_RUNNER=... is no
  longer supported: Model Runner V1 has been removed. Unset this variable." (vllm/platforms/interface.py).
The tables are read from each release's wheel (tui/core/vllmfacts.py); a release without facts has its
[speculative.extra] refused (it cannot be checked).

Where the release is known, and how a problem ends the run (one rule): a simulated profile's [simulation]
vllm_version at load time and `--show-commands` (given or detected version): exit 2, a profile error; the
environment step's probe of the real vLLM: a failing fact, exit 1, before any server is launched; and each
server launch (a run without the environment step): a failing fact, nothing started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tui.core import vllmfacts
from tui.core.profile.spec_extra import MODELLED_SPEC_KEYS, did_you_mean, releases_with, span_text
from tui.core.versions import served_text

if TYPE_CHECKING:  # pragma: no cover
    from tui.core.profile.model import Profile
    from tui.core.profile.sections import SpeculativeSettings

V2_RUNNER_VAR = "VLLM_USE_V2_MODEL_RUNNER"


def extra_problems(extra: dict[str, Any], version: str) -> list[tuple[str, str]]:
    """[(key path, paragraph)] for the [speculative.extra] keys and values vLLM `version` refuses or ignores."""
    if not extra:
        return []
    sf = vllmfacts.speculative_fields(version)
    if sf is None:
        first = next(iter(extra))
        return [(f"speculative.extra.{first}",
                 f"speculative.extra.{first} cannot be checked against vLLM {version}: specdec-tui knows the "
                 f"SpeculativeConfig of the releases it serves ({served_text()}) only, read from their wheels. "
                 "Use a served release, or remove [speculative.extra].")]
    out: list[tuple[str, str]] = []
    settable = [k for k in sf.settable() if k not in MODELLED_SPEC_KEYS]
    for key in extra:
        path = f"speculative.extra.{key}"
        if key in MODELLED_SPEC_KEYS:
            continue  # refused at load time, whatever the release
        if key not in sf.fields:
            have = releases_with(lambda f, key=key: f is not None and key in f.fields)
            where = f" (only vLLM {span_text(have)} has it)" if have else ""
            out.append((path, f"unknown key '{path}' for vLLM {version}: its SpeculativeConfig has no field "
                              f"'{key}'{where} and forbids unknown keys, so the server would refuse to start. "
                              + did_you_mean(key, settable) + f" Remove it for vLLM {version}."))
        elif key in sf.deprecated:
            out.append((path, f"{path} has no effect in vLLM {version}: its SpeculativeConfig documents '{key}' as "
                              "\"Deprecated and has no effect\". Remove it."))
    for key, attr in (("rejection_sample_method", "rejection_sample_methods"),
                      ("draft_sample_method", "draft_sample_methods")):
        value = extra.get(key)
        allowed = getattr(sf, attr)
        if value is not None and allowed and value not in allowed:
            have = releases_with(lambda f, value=value, attr=attr: f is not None and value in getattr(f, attr))
            out.append((f"speculative.extra.{key}",
                        f"speculative.extra.{key} = {value!r} is not valid for vLLM {version}; allowed there: "
                        + ", ".join(repr(m) for m in allowed)
                        + (f" ({value!r} needs vLLM {span_text(have)})" if have else "") + "."))
    return out


def env_problems(server_env: dict[str, str], version: str, environ: dict[str, str] | None = None
                 ) -> list[tuple[str, str]]:
    """[(where, paragraph)] for environment variables vLLM `version` refuses at start-up: from 0.34,
    VLLM_USE_V2_MODEL_RUNNER set to anything but "1" (server.env wins over the process environment)."""
    if not vllmfacts.has(version, "model_runner_v1_removed"):
        return []
    if V2_RUNNER_VAR in server_env:
        value, where = server_env[V2_RUNNER_VAR], f"server.env.{V2_RUNNER_VAR}"
    elif environ is not None and V2_RUNNER_VAR in environ:
        value, where = environ[V2_RUNNER_VAR], f"{V2_RUNNER_VAR} in the environment"
    else:
        return []
    if value == "1":
        return []
    fix = (f"Remove {V2_RUNNER_VAR} from [server.env]" if where.startswith("server.env")
           else f"Unset {V2_RUNNER_VAR} (`unset {V2_RUNNER_VAR}`)")
    return [(where, f"{where} = {value!r} is refused by vLLM {version}: \"{V2_RUNNER_VAR}={value} is no longer "
                    "supported: Model Runner V1 has been removed. Unset this variable.\" "
                    f"(vllm/platforms/interface.py, {vllmfacts.marker(version, 'model_runner_v1_removed')}). {fix}, "
                    "or use vLLM 0.33 or older for the V1 runner.")]


def release_problems(prof: "Profile", version: str | None, environ: dict[str, str] | None = None
                     ) -> list[tuple[str, str]]:
    """Everything vLLM `version` would refuse or ignore in `prof` ([] for an unknown version: nothing to check)."""
    if not version:
        return []
    extra = prof.data["speculative"].get("extra") or {}
    return extra_problems(extra, version) + env_problems(dict(prof.data["server"]["env"]), version, environ)


def launch_problems(prof: "Profile", speculative: "SpeculativeSettings | None", version: str | None,
                    environ: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """What vLLM `version` refuses in one server launch: its speculative settings' extra keys (an arm's own,
    None for the baseline) and the environment. [] for an unknown version (the launch cannot be checked)."""
    if not version:
        return []
    extra = speculative.extra if speculative is not None else {}
    return extra_problems(extra, version) + env_problems(dict(prof.data["server"]["env"]), version, environ)


__all__ = ["V2_RUNNER_VAR", "env_problems", "extra_problems", "launch_problems", "release_problems"]
