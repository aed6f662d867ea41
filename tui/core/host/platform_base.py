"""What every platform's checks share: the platform names, the profile's platform, where a remedy installs
from, and looking a variable up in the server's environment before the process's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tui.core.host.sysinfo import dlami_vllm_venvs


PLATFORMS = ("neuron", "cuda", "cpu")


MIN_PLUGIN = (0, 21, 0, 1, 0, 0)


MIB = 1024**2


def profile_platform(profile: Any) -> str:
    """The profile's platform (neuron | cuda | cpu), "neuron" when the profile does not say."""
    val = getattr(profile, "platform", None)
    if not isinstance(val, str) or not val:
        val = profile.data.get("platform", "neuron") if hasattr(profile, "data") else "neuron"
    return val if val in PLATFORMS else "neuron"


def install_remedy(root: Path, placeholder: bool = False) -> str:
    pre = "pip uninstall vllm-neuron, then " if placeholder else ""
    venvs = dlami_vllm_venvs(root)
    if venvs:
        return (f"{pre}use the Neuron DLAMI venv: source {venvs[-1]}/bin/activate "
                "(or install vllm-neuron from the Neuron repository)")
    return (f"{pre}install vllm-neuron from the Neuron repository (pip.repos.neuron.amazonaws.com) "
            "or use a Neuron DLAMI venv (/opt/aws_neuronx_venv_*vllm*)")


def env_lookup(name: str, environ: dict[str, str], server_env: dict[str, str]) -> tuple[str | None, str]:
    """(value, where) with the profile's server.env taking precedence (it is applied on top at launch)."""
    if name in server_env:
        return server_env[name], "profile [server.env]"
    if name in environ:
        return environ[name], "the environment"
    return None, ""
