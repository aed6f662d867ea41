"""Shared test setup.

huggingface_hub reads HF_* variables once, at import time. Before any test imports it, point those
import-time defaults somewhere harmless: a closed loopback port as the endpoint, a throwaway HF_HOME,
no token, no telemetry (which would otherwise fetch `{endpoint}/api/agent-harnesses`). Tests pass the
real loopback hub explicitly (StepContext.environ or `endpoint=`), so nothing here can reach the
internet.
"""

from __future__ import annotations

import os
import tempfile

for _var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE",
             "HUGGINGFACE_HUB_CACHE", "HF_TOKEN_PATH", "HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"):
    os.environ.pop(_var, None)
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"  # discard port: closed
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="specdec-tests-hf-")
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
# The host locks (tui/core/host/hostlock.py) of this test session live in a directory of its own: the many tests
# that check the demo's default port 8000 must not collide with another session's on a shared machine. The tests of
# the default directory ask for it explicitly (tests/test_host_share.py).
os.environ.setdefault("SPECDEC_LOCK_DIR", tempfile.mkdtemp(prefix="specdec-tests-locks-"))

import pytest  # noqa: E402


@pytest.fixture
def hub():
    """A fresh loopback hub + dataset mirror (tui.sim.hub) on 127.0.0.1; `hub.url`, `hub.requests`,
    `hub.set_fault(pattern, spec)`. Stopped after the test."""
    from tui.sim.hub import start_hub

    handle = start_hub()
    try:
        yield handle
    finally:
        handle.stop()
