"""Step `dataset` against the loopback dataset mirror (real httpx, 127.0.0.1 only)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tui.core.plan.commands import Placeholders
from tui.core.events import Artifact, Event, Fact, Progress
from tui.core.profile.model import profile_from_dict
from tui.core.store.rundir import RunDir
from tui.core.steps import dataset
from tui.core.steps.base import StepContext
from tui.sim.sonnet import SONNET_SHA256, SONNET_SIZE, sonnet_bytes

URL = "{sim_hub}/datasets/sonnet.txt"


def profile(sha256: str = SONNET_SHA256, path: str = "", url: str = URL):
    return profile_from_dict({"models": {"target": "openai/gpt-oss-120b",
                                         "draft": "RedHatAI/gpt-oss-120b-speculator.eagle3"},
                              "dataset": {"url": url, "sha256": sha256, "path": path}})


class Run:
    def __init__(self, ctx, events, result):
        self.ctx, self.events, self.result = ctx, events, result

    @property
    def facts(self) -> dict[str, Fact]:
        return {e.name: e for e in self.events if isinstance(e, Fact)}

    @property
    def progress(self) -> list[Progress]:
        return [e for e in self.events if isinstance(e, Progress)]

    @property
    def failed(self) -> list[Fact]:
        return [f for f in self.facts.values() if f.status == "fail"]


def run_step(tmp_path: Path, prof, hub, run_name: str = "run", **kw) -> Run:
    events: list[Event] = []
    ctx = StepContext(profile=prof, run=RunDir(tmp_path / run_name), emit=events.append,
                      ph=Placeholders(sim_hub=hub.url, cache_dir=str(tmp_path / "cache")), environ={})
    result = asyncio.run(dataset.run(ctx, **kw))
    return Run(ctx, events, result)


def test_fresh_download_verifies_and_reports_progress(hub, tmp_path):
    run = run_step(tmp_path, profile(), hub)
    assert run.result.status == "passed", [(f.name, f.value, f.detail) for f in run.failed]
    dest = tmp_path / "run" / "sonnet.txt"
    assert dest.read_bytes() == sonnet_bytes()
    assert not (tmp_path / "run" / "sonnet.txt.part").exists()
    assert run.result.facts["path"] == str(dest)
    assert run.result.facts["sha256"] == SONNET_SHA256 and run.result.facts["bytes"] == SONNET_SIZE
    assert run.facts["sha256"].status == "pass" and run.facts["sha256"].value == "verified"
    assert run.facts["source"].value == hub.dataset_url
    assert run.facts["lines"].value == "518"  # readlines() of vLLM's sonnet.txt
    last = run.progress[-1]
    assert last.done and last.task == "download" and last.unit == "B"
    assert last.completed == last.total == SONNET_SIZE
    assert all(p.total == SONNET_SIZE for p in run.progress)
    assert len(run.progress) < 20  # throttled, not one per chunk
    assert any(isinstance(e, Artifact) and e.path == str(dest) for e in run.events)
    # The verified file also lands in the cache, keyed by its hash.
    assert (tmp_path / "cache" / "datasets" / SONNET_SHA256 / "sonnet.txt").read_bytes() == sonnet_bytes()


def test_resume_after_a_dropped_connection(hub, tmp_path):
    hub.set_fault("/datasets/*", "drop=1")
    run = run_step(tmp_path, profile(), hub)
    assert run.result.status == "passed", [(f.name, f.value, f.detail) for f in run.failed]
    assert (tmp_path / "run" / "sonnet.txt").read_bytes() == sonnet_bytes()
    gets = hub.requests_to("/datasets/sonnet.txt")
    assert len(gets) == 2 and gets[0].range is None
    assert gets[1].range is not None and gets[1].range.startswith("bytes=") and gets[1].status == 206
    assert int(gets[1].range[6:-1]) > 0
    assert "resumed" in run.facts["source"].detail


def test_server_that_ignores_range_restarts(hub, tmp_path):
    hub.set_fault("/datasets/*", "drop=1,no-range")
    run = run_step(tmp_path, profile(), hub)
    assert run.result.status == "passed"
    assert (tmp_path / "run" / "sonnet.txt").read_bytes() == sonnet_bytes()
    assert [r.status for r in hub.requests_to("/datasets/*")] == [200, 200]
    assert "ignored the Range" in run.facts["source"].detail


def test_resume_from_a_part_left_by_a_crashed_run(hub, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "sonnet.txt.part").write_bytes(sonnet_bytes()[:5000])
    run = run_step(tmp_path, profile(), hub)
    assert run.result.status == "passed"
    assert (tmp_path / "run" / "sonnet.txt").read_bytes() == sonnet_bytes()
    assert [(r.range, r.status) for r in hub.requests_to("/datasets/*")] == [("bytes=5000-", 206)]


def test_hash_mismatch_fails_and_keeps_nothing(hub, tmp_path):
    hub.set_fault("/datasets/*", "corrupt")
    run = run_step(tmp_path, profile(), hub)
    assert run.result.status == "failed"
    f = run.facts["sha256"]
    assert f.status == "fail" and SONNET_SHA256 in f.detail and "actual" in f.detail
    assert not (tmp_path / "run" / "sonnet.txt").exists()
    assert not (tmp_path / "run" / "sonnet.txt.part").exists()
    assert not (tmp_path / "cache" / "datasets" / SONNET_SHA256).exists()


def test_existing_verified_file_is_reused_without_a_request(hub, tmp_path):
    assert run_step(tmp_path, profile(), hub).result.status == "passed"
    hub.clear_requests()
    run = run_step(tmp_path, profile(), hub)
    assert run.result.status == "passed" and hub.requests == []
    assert "reused" in run.facts["source"].detail
    # Another run directory, same cache: copied from the cache, still no request.
    run = run_step(tmp_path, profile(), hub, run_name="run2")
    assert run.result.status == "passed" and hub.requests == []
    assert (tmp_path / "run2" / "sonnet.txt").read_bytes() == sonnet_bytes()
    assert "cache" in run.facts["source"].detail


def test_local_path_skips_the_download(hub, tmp_path):
    local = tmp_path / "my-sonnet.txt"
    local.write_bytes(sonnet_bytes())
    run = run_step(tmp_path, profile(path=str(local)), hub)
    assert run.result.status == "passed" and run.result.facts["path"] == str(local)
    assert hub.requests == []
    assert not (tmp_path / "run" / "sonnet.txt").exists()

    local.write_bytes(b"not the sonnets\n")
    run = run_step(tmp_path, profile(path=str(local)), hub)
    assert [f.name for f in run.failed] == ["sha256"]
    run = run_step(tmp_path, profile(path=str(tmp_path / "missing.txt")), hub)
    assert [f.name for f in run.failed] == ["dataset file"] and "dataset.path" in run.failed[0].remedy


def test_no_sha_configured_is_unverified_but_passes(hub, tmp_path):
    run = run_step(tmp_path, profile(sha256=""), hub)
    assert run.result.status == "passed"
    assert run.facts["sha256"].status == "info" and SONNET_SHA256 in run.facts["sha256"].detail


def test_http_error_is_one_readable_failure(hub, tmp_path):
    hub.set_fault("/datasets/*", "404")
    run = run_step(tmp_path, profile(), hub)
    assert [f.name for f in run.failed] == ["download"]
    f = run.failed[0]
    assert f.value.startswith("HTTP 404") and "dataset.path" in f.remedy


def test_connection_that_keeps_dropping_fails_after_retries(hub, tmp_path):
    hub.set_fault("/datasets/*", "drop")
    run = run_step(tmp_path, profile(), hub, retries=2)
    assert [f.name for f in run.failed] == ["download"]
    assert "after 2 retries" in run.failed[0].value
    assert len(hub.requests_to("/datasets/*")) == 3
    assert not (tmp_path / "run" / "sonnet.txt").exists()
    assert (tmp_path / "run" / "sonnet.txt.part").stat().st_size > 0  # kept for the next attempt


def test_slow_mirror_times_out(tmp_path):
    from tui.sim.hub import start_hub

    with start_hub(delay=0.5) as slow:
        run = run_step(tmp_path, profile(), slow, timeout_s=0.05)
    assert [f.name for f in run.failed] == ["download"]
    assert "no answer within 0.05 s" in run.failed[0].value
