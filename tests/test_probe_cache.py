"""The vLLM interpreter probe is remembered per interpreter for the run (tui.core.host.interpreter.remembered_probe):
the arms of a run ask for the vLLM version without starting that interpreter again, the version probe reads the
metadata only (no pandas / transformers import), and a change to the interpreter's installed distributions (its
sys.path directories) makes the next call probe afresh."""

from __future__ import annotations

import shutil

from env_util import PY, make_profile, make_vllm_venv

from tui.core.host import interpreter as ip
from tui.core.plan.commands import Placeholders


def _counting(monkeypatch) -> list[list[str]]:
    calls: list[list[str]] = []
    real = ip.run_capture_sync

    def spy(argv, environ, timeout, cwd=None):
        calls.append(list(argv))
        return real(argv, environ, timeout, cwd=cwd)

    monkeypatch.setattr(ip, "run_capture_sync", spy)
    monkeypatch.setattr(ip, "_PROBES", {})
    return calls


def _first_probe(tmp_path, monkeypatch):
    """(probe calls so far, the fake venv's bin, its environment, placeholders) after one version probe of vLLM 0.21.0."""
    calls = _counting(monkeypatch)
    vbin = make_vllm_venv(tmp_path, vllm="0.21.0", plugin=None)
    env = {"PATH": str(vbin)}
    ph = Placeholders(python=PY)
    assert ip.probe_vllm_version(make_profile(), ph, env) == "0.21.0"
    return calls, vbin, env, ph


def test_version_probe_is_remembered_and_reads_metadata_only(tmp_path, monkeypatch):
    calls, _, env, ph = _first_probe(tmp_path, monkeypatch)
    assert ip.probe_vllm_version(make_profile(), ph, env) == "0.21.0"
    assert len(calls) == 1, "the second arm reuses the first probe"
    assert calls[0][-1] == ip.PROBE_METADATA_SOURCE and ip.IMPORTS_MARKER not in calls[0][-1]
    # Another environment for the same interpreter (what decides its sys.path differs): probed on its own.
    assert ip.probe_vllm_version(make_profile(), ph, {**env, "PYTHONPATH": str(tmp_path)}) == "0.21.0"
    assert len(calls) == 2


def test_an_install_in_between_is_seen(tmp_path, monkeypatch):
    calls, vbin, env, ph = _first_probe(tmp_path, monkeypatch)
    site = next((vbin.parent / "lib").glob("python3*/site-packages"))
    old = site / "vllm-0.21.0.dist-info"
    new = site / "vllm-0.22.0.dist-info"
    shutil.copytree(old, new)
    (new / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.22.0\n")
    shutil.rmtree(old)  # what `pip install -U vllm` does to site-packages
    assert ip.probe_vllm_version(make_profile(), ph, env) == "0.22.0"
    assert len(calls) == 2


def test_the_env_steps_full_probe_serves_the_version(tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    vbin = make_vllm_venv(tmp_path, vllm="0.21.0", plugin=None)
    env = {"PATH": str(vbin)}
    it = ip.find_server_interpreter("vllm", env)
    full = ip.run_probe_sync(it, env)
    assert full.ok and "imports" in full.data and len(calls) == 1
    assert ip.probe_vllm_version(make_profile(), Placeholders(python=PY), env) == "0.21.0"
    assert len(calls) == 1
    # A failed probe is never remembered.
    broken = ip.Interpreter(command="vllm", python=str(vbin / "python"), flags=["-c", "raise SystemExit(3)", "--"])
    assert not ip.run_probe_sync(broken, env).ok
    assert ip.remembered_probe(broken, env) is None
