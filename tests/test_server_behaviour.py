"""The server step against a fake `vllm serve` (tests/fixtures/fakes/fake_vllm_serve.py) that replays lines
recorded from the real vLLM 0.32 CPU server: our own stop is not an error, and an engine that dies on its
first request after a clean start is diagnosed as a draft/target mismatch. Loopback only."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from tui.core.plan.commands import Placeholders
from tui.core.events import CleanLog, Diagnosis, Fact
from tui.core.profile.model import profile_from_dict
from tui.core.store.rundir import RunDir
from tui.core.steps.base import StepContext
from tui.core.steps.server import ServerRun

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FAKE = FIXTURES / "fakes" / "fake_vllm_serve.py"
LOGS = FIXTURES / "logs"
REAL_CPU = LOGS / "real_cpu_0.32_baseline.log"
BAD_AUX = LOGS / "real_cpu_0.32_eagle3_bad_aux.log"
READY = "Application startup complete."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split_at_ready(path: Path) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8")
    i = text.index(READY)
    j = text.index("\n", i) + 1
    return text[:j], text[j:]


def first_request_death_lines(path: Path) -> str:
    """The recorded lines from the first request on, up to (not including) vLLM's own shutdown."""
    _, after = split_at_ready(path)
    return after


def make_ctx(tmp_path, mode: str, startup: str, death: str = "", shutdown: str = "",
             target="/models/tiny/target", draft="/models/tiny/draft-eagle3"):
    (tmp_path / "startup.log").write_text(startup, encoding="utf-8")
    (tmp_path / "death.log").write_text(death, encoding="utf-8")
    (tmp_path / "shutdown.log").write_text(shutdown, encoding="utf-8")
    prof = profile_from_dict({
        "models": {"target": target, "draft": draft},
        "server": {"command": [sys.executable, str(FAKE)], "port": free_port(), "tensor_parallel_size": 1,
                   "max_model_len": 1024, "startup_timeout_s": 120, "stop_grace_s": 30,
                   "env": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
    })
    prof.data["platform"] = "cpu"  # shared decision 1 (the profiles helper adds the key to the schema)
    events: list = []
    environ = {"PATH": "/usr/bin:/bin", "FAKE_VLLM_MODE": mode, "FAKE_VLLM_STARTUP": str(tmp_path / "startup.log"),
               "FAKE_VLLM_DEATH": str(tmp_path / "death.log"), "FAKE_VLLM_SHUTDOWN": str(tmp_path / "shutdown.log")}
    ctx = StepContext(profile=prof, run=RunDir(tmp_path / "run"), emit=events.append, ph=Placeholders(),
                      environ=environ)
    return ctx, events


SHUTDOWN_0_32 = """\
(APIServer pid=9573) INFO 12-01 16:38:39 [launcher.py:254] [shutdown] API server: shutdown triggered
(APIServer pid=9573) ERROR 12-01 16:38:39 [async_llm.py:906] AsyncLLM output_handler failed.
(APIServer pid=9573) ERROR 12-01 16:38:39 [async_llm.py:906] Traceback (most recent call last):
(APIServer pid=9573) ERROR 12-01 16:38:39 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: EngineCore \
encountered an issue. See stack trace (above) for the root cause.
INFO:     Application shutdown complete.
"""


async def test_our_stop_is_not_an_error(tmp_path):
    startup, _ = split_at_ready(REAL_CPU)
    ctx, events = make_ctx(tmp_path, "ok", startup, shutdown=SHUTDOWN_0_32)
    sr = ServerRun(ctx, "baseline", speculative=False)
    try:
        assert await sr.launch()
        assert await sr.wait_ready()
        assert sr.proc.ready  # readiness marks the process: a stop gives it the full stop_grace_s
        assert await sr.smoke()
        n_before_stop = len(events)
    finally:
        await sr.stop()
    after = events[n_before_stop:]
    shutdown_lines = [e for e in after if isinstance(e, CleanLog)]
    assert any("AsyncLLM output_handler failed." in e.text for e in shutdown_lines)
    assert any("EngineDeadError" in e.text for e in shutdown_lines)
    assert not [e for e in shutdown_lines if e.is_error]
    assert not [e for e in events if isinstance(e, Diagnosis)]
    assert sr.watcher.stop_requested and sr.watcher.error_signatures() == []
    assert sr.proc.signals_sent == ["SIGINT"]
    assert sr.result_facts["stop"]["exit_code"] == 0


async def test_engine_dies_on_first_request_is_a_draft_target_mismatch(tmp_path):
    startup, _ = split_at_ready(BAD_AUX)
    death = first_request_death_lines(BAD_AUX)
    ctx, events = make_ctx(tmp_path, "die", startup, death=death)
    sr = ServerRun(ctx, "eagle3", speculative=True)
    try:
        assert await sr.launch()
        assert await sr.wait_ready()
        assert not await sr.smoke()
    finally:
        await sr.stop()
    diags = [e for e in events if isinstance(e, Diagnosis)]
    assert [d.id for d in diags] == ["engine-died-on-first-request"]
    d = diags[0]
    assert "first request" in d.title and "mismatch" in d.title
    assert "mat1 and mat2 shapes cannot be multiplied" in d.evidence[0]
    assert "first request: HTTP 500" in d.evidence and "server exited with code 0" in d.evidence
    assert any("EngineDeadError" in e for e in d.evidence)
    assert "/models/tiny/draft-eagle3" in d.remedy and "/models/tiny/target" in d.remedy
    assert "eagle_aux_hidden_state_layer_ids" in d.remedy
    facts = {f.name: f for f in events if isinstance(f, Fact)}
    assert facts["smoke test"].status == "fail" and facts["server"].status == "fail"
    # the death's lines were real errors (before any stop): highlighted
    assert any(e.is_error and "shapes cannot be multiplied" in e.text for e in events if isinstance(e, CleanLog))


async def test_baseline_dying_on_first_request_is_not_called_a_mismatch(tmp_path):
    startup, _ = split_at_ready(REAL_CPU)
    death = first_request_death_lines(BAD_AUX)
    ctx, events = make_ctx(tmp_path, "die", startup, death=death)
    sr = ServerRun(ctx, "baseline", speculative=False)
    try:
        assert await sr.launch() and await sr.wait_ready()
        assert not await sr.smoke()
    finally:
        await sr.stop()
    assert [d.id for d in events if isinstance(d, Diagnosis)] == ["engine-died-serving"]
