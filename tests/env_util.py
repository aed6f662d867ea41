"""Builders for the env step's tests (test_env.py, test_env_platforms.py, and others): fake sysroots, a fake
`neuron-ls`, fake package tools, real throwaway vLLM venvs whose fake packages raise on import, and a StepContext
that runs the step against them."""

from __future__ import annotations

import json
import os
import socket
import sys
import venv
from pathlib import Path
from typing import Any


from tui.core.plan.commands import Placeholders
from tui.core.events import Fact
from tui.core.profile.model import profile_from_dict
from tui.core.store.rundir import RunDir
from tui.core.steps import env as env_step
from tui.core.steps.base import StepContext, StepResult

FIXTURES = Path(__file__).parent / "fixtures" / "env"
PY = sys.executable


# ---------------------------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------------------------


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = v
    return base


def make_profile(**over: Any):
    raw: dict[str, Any] = {
        "name": "test",
        "models": {"target": "org/tiny-target", "draft": "org/tiny-draft"},
        "server": {"port": free_port(), "startup_timeout_s": 5400.0},
        "environment": {"instance_type": "trn2.48xlarge", "min_neuron_sdk": "2.31"},
    }
    return profile_from_dict(_merge(raw, over))


def write_exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def trn2_root(tmp_path: Path, product: str | None = "trn2.48xlarge", devices: int = 16) -> Path:
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True, exist_ok=True)
    if product is not None:
        dmi = root / "sys/devices/virtual/dmi/id"
        dmi.mkdir(parents=True)
        (dmi / "product_name").write_text(product + "\n")
    for i in range(devices):
        (root / "dev" / f"neuron{i}").write_text("")
        sd = root / "sys/devices/virtual/neuron_device" / f"neuron{i}"
        sd.mkdir(parents=True)
        (sd / "core_count").write_text("8\n")
    return root


def fake_neuron_ls(bindir: Path, devices: list[dict[str, Any]]) -> Path:
    data = bindir / "neuron-ls.json"
    bindir.mkdir(parents=True, exist_ok=True)
    data.write_text(json.dumps(devices))
    return write_exe(bindir / "neuron-ls", f"#!{PY}\nimport sys\n"
                     "if sys.argv[1:] != ['-j']:\n    sys.exit('fake neuron-ls: unexpected args %r' % sys.argv[1:])\n"
                     f"sys.stdout.write(open({str(data)!r}).read())\n")


def fake_dpkg_query(bindir: Path, version: str) -> Path:
    return write_exe(bindir / "dpkg-query", f"#!{PY}\nimport sys\n"
                     "if sys.argv[-1] != 'aws-neuronx-tools':\n    sys.exit(1)\n"
                     f"sys.stdout.write({version!r})\n")


def idle_devices() -> list[dict[str, Any]]:
    return json.loads((FIXTURES / "neuron-ls-trn2-idle.json").read_text())


def _dist_info(site: Path, dirname: str, metadata: str, entry_points: str | None = None) -> None:
    d = site / dirname
    d.mkdir(parents=True)
    (d / "METADATA").write_text(metadata)
    (d / "RECORD").write_text("")
    if entry_points is not None:
        (d / "entry_points.txt").write_text(entry_points)


def make_vllm_venv(tmp_path: Path, vllm: str | None = "0.24.0", plugin: str | None = "0.24.0.1.1.0",
                   placeholder: bool = False, name: str = "vllm-venv", launcher: str = "direct") -> Path:
    """A real venv with fake vllm / vllm-neuron distributions. Returns its bin directory (holds `vllm`)."""
    root = tmp_path / name
    venv.create(root, with_pip=False, symlinks=os.name != "nt")
    site = next((root / "lib").glob("python3*/site-packages"))
    if vllm:
        _dist_info(site, f"vllm-{vllm}.dist-info", f"Metadata-Version: 2.1\nName: vllm\nVersion: {vllm}\n",
                   "[console_scripts]\nvllm = vllm.entrypoints.cli.main:main\n")
        (site / "vllm").mkdir()
        (site / "vllm" / "__init__.py").write_text("raise RuntimeError('the env probe must not import vllm')\n")
    if placeholder:
        _dist_info(site, "vllm_neuron-0.1.0.dist-info",
                   "Metadata-Version: 2.1\nName: vllm-neuron\nVersion: 0.1.0\nMaintainer: Amazon Web Services, Inc.\n"
                   "License: Proprietary\n\nWRONG PACKAGE. Please install the package from Neuron Repository - "
                   "pip.repos.neuron.amazonaws.com\n")
        (site / "vllm-neuron").mkdir()
        (site / "vllm-neuron" / "__init__.py").write_text("raise ImportError('WRONG PACKAGE')\n")
    elif plugin:
        _dist_info(site, f"vllm_neuron-{plugin}.dist-info",
                   f"Metadata-Version: 2.1\nName: vllm-neuron\nVersion: {plugin}\nRequires-Python: >=3.11\n",
                   "[vllm.platform_plugins]\nneuron = vllm_neuron:register\n")
        (site / "vllm_neuron").mkdir()
        (site / "vllm_neuron" / "__init__.py").write_text("raise RuntimeError('the env probe must not import vllm_neuron')\n")
    bindir = root / "bin"
    shebang = f"#!{bindir / 'python'}" if launcher == "direct" else "#!/usr/bin/env python3"
    write_exe(bindir / "vllm", shebang + "\nimport sys\nfrom vllm.entrypoints.cli.main import main\n"
              "if __name__ == '__main__':\n    sys.exit(main())\n")
    return bindir


def make_ctx(tmp_path: Path, profile, root: Path | None = None, path: list[Path] | None = None,
             extra_env: dict[str, str] | None = None) -> tuple[StepContext, list[Any]]:
    if root is None:
        root = tmp_path / "emptyroot"
        root.mkdir(exist_ok=True)
    tbin = tmp_path / "bin"
    tbin.mkdir(exist_ok=True)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    environ = {
        "PATH": os.pathsep.join(str(p) for p in (path or []) + [tbin]),
        "HOME": str(home),
        "SPECDEC_SYSROOT": str(root),
        "LANG": "C.UTF-8",
    }
    environ.update(extra_env or {})
    events: list[Any] = []
    ctx = StepContext(profile=profile, run=RunDir(tmp_path / "run"), emit=events.append,
                      ph=Placeholders(python=PY, cache_dir=str(tmp_path / "cache"), run_dir=str(tmp_path / "run")),
                      environ=environ)
    return ctx, events


async def run_env(ctx: StepContext, events: list[Any]) -> tuple[StepResult, dict[str, Fact]]:
    res = await env_step.run(ctx)
    facts = {e.name: e for e in events if isinstance(e, Fact)}
    assert len(facts) == len([e for e in events if isinstance(e, Fact)]), "fact names must be unique"
    return res, facts


def good_setup(tmp_path: Path, devices: list[dict[str, Any]] | None = None, **venv_kw: Any):
    """trn2 sysroot + fake neuron-ls + dpkg-query (tools 2.32) + a good vLLM venv on PATH."""
    root = trn2_root(tmp_path)
    tbin = tmp_path / "bin"
    fake_neuron_ls(tbin, idle_devices() if devices is None else devices)
    fake_dpkg_query(tbin, "2.32.28.0")
    vbin = make_vllm_venv(tmp_path, **venv_kw)
    return root, [vbin]
