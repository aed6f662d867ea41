"""Tests for tui.core.serverlog.logparse: the `vllm serve` log pipeline, on the synthetic logs in fixtures/logs/."""
from __future__ import annotations

import re

import pytest

from tui.core.serverlog.logparse import (
    ERROR_KINDS,
    LEGACY_PHASES,
    PHASES,
    CacheResult,
    CleanLine,
    ErrorSignature,
    LogPipeline,
    PhaseChange,
    RankCount,
    Ready,
    Timing,
    classify_error,
    clean_line,
    collapse_cr,
    root_cause,
    strip_ansi,
)


from logparse_util import T0, COLD, WARM, LEGACY, HBM, OOM, BUSY, TIMEOUT, TQDM, ts_of, run

# ------------------------------------------------------------------------------------------ phases

NATIVE_MARKERS = {
    "config": "vLLM API server version",
    "workers": "Initialized NeuronWorker",
    "weights": "Loading model on NeuronWorker",
    "draft": "Spec decode enabled. Loading draft model",
    "hbm": "Neuron HBM:",
    "graphs": "Extracting graphs for",
    "compile": "Compilation cache key:",
    "warmup": "Warming up model for",
    "engine": "Model warmup completed",
    "api": "Supported_tasks",
    "ready": "Application startup complete.",
}
LEGACY_MARKERS = {
    "config": "vLLM API server version",
    "graphs": "Generating HLOs for the following models",
    "compile": "Starting compilation for the priority HLO",
    "weights": "Sharding weights on load",
    "warmup": "Warming up the model.",
    "hbm": "GPU KV cache size",
    "engine": "init engine (profile, create kv cache, warmup model)",
    "api": "Supported_tasks",
    "ready": "Application startup complete.",
}

PHASE_CASES = [
    (COLD, True, list(PHASES), NATIVE_MARKERS),
    (WARM, True, list(PHASES), NATIVE_MARKERS),
    (TQDM, False, [p for p in PHASES if p != "draft"], NATIVE_MARKERS),
    (LEGACY, False, ["config", "graphs", "compile", "weights", "warmup", "hbm", "engine", "api", "ready"],
     LEGACY_MARKERS),
    (HBM, True, ["config", "workers", "weights"], NATIVE_MARKERS),
    (OOM, True, ["config", "workers", "weights", "draft", "hbm", "graphs", "compile"], NATIVE_MARKERS),
    (BUSY, True, ["config", "workers"], NATIVE_MARKERS),
    (TIMEOUT, True, ["config", "workers", "weights", "draft", "hbm", "graphs", "compile"], NATIVE_MARKERS),
]


@pytest.mark.parametrize("name,spec,expected,markers", PHASE_CASES, ids=[c[0] for c in PHASE_CASES])
def test_phase_sequence_and_elapsed(name, spec, expected, markers):
    r = run(name, spec)
    assert [p.name for p in r.pipe.phases] == expected
    changes = [e for e in r.of(PhaseChange) if e.phase is not None]
    assert [c.phase for c in changes] == expected
    assert [c.prev_phase for c in changes] == [None] + expected[:-1]

    # each phase starts at the first line carrying its marker and ends where the next one starts
    starts = [r.first_index(markers[p]) for p in expected]
    assert starts == sorted(starts)
    ends = [ts_of(i) for i in starts[1:]] + [r.end_ts]
    for rec, start, end in zip(r.pipe.phases, starts, ends):
        assert rec.start_ts == ts_of(start), rec.name
        assert rec.end_ts == end, rec.name
        assert rec.elapsed_s == pytest.approx(end - ts_of(start)), rec.name
    for c, rec in zip(changes[1:], r.pipe.phases):
        assert c.prev_elapsed_s == pytest.approx(rec.elapsed_s)

    # close() reports the last phase's duration, once
    last = r.of(PhaseChange)[-1]
    assert last.phase is None and last.prev_phase == expected[-1]
    assert last.prev_elapsed_s == pytest.approx(r.end_ts - ts_of(starts[-1]))
    assert r.pipe.close(r.end_ts + 5) == []


def test_legacy_route_detected():
    assert run(LEGACY, False).pipe.route == "legacy"
    assert run(COLD).pipe.route == "native"
    assert run(LEGACY, False).pipe.expected_phases == tuple(p for p in LEGACY_PHASES if p != "draft")


def test_expected_phases_follow_speculative_flag():
    assert LogPipeline(speculative=True).expected_phases == PHASES
    assert "draft" not in LogPipeline(speculative=False).expected_phases


@pytest.mark.parametrize("name", [c[0] for c in PHASE_CASES])
def test_phases_never_go_backwards(name):
    r = run(name)
    order = LEGACY_PHASES if r.pipe.route == "legacy" else PHASES
    idx = [order.index(p.name) for p in r.pipe.phases]
    assert idx == sorted(set(idx))


def test_late_marker_of_earlier_phase_is_ignored():
    p = LogPipeline()
    ev = p.feed("(APIServer pid=1) INFO 03-14 09:00:00 [api_server.py:1] vLLM API server version 0.24.0", 1.0)
    assert [e.phase for e in ev if isinstance(e, PhaseChange)] == ["config"]
    ev = p.feed("(EngineCore_DP0 pid=2) (Worker_TP0 pid=3) 2026-03-14 09:00:01,000 - INFO - eagle.py:512 - "
                "EAGLE3 warmup: num_tokens=512, num_reqs=1", 2.0)
    assert [e.phase for e in ev if isinstance(e, PhaseChange)] == ["warmup"]
    for i, late in enumerate([
        "(APIServer pid=1) INFO 03-14 09:00:02 [utils.py:1] non-default args: {}",
        "(EngineCore_DP0 pid=2) (Worker_TP1 pid=4) 2026-03-14 09:00:02,000 - INFO - x.py:1 - Loading weights from m",
        "(EngineCore_DP0 pid=2) (Worker_TP1 pid=4) 2026-03-14 09:00:02,000 - INFO - x.py:1 - Compiling...",
    ]):
        assert not [e for e in p.feed(late, 3.0 + i) if isinstance(e, PhaseChange)]
    assert p.phase == "warmup"
    assert [r.name for r in p.phases] == ["config", "warmup"]
    assert p.phases[0].elapsed_s == 1.0 and p.phases[1].end_ts is None


def test_reported_durations():
    r = run(COLD)
    fixture_compiles = [float(x) for x in re.findall(r"Compilation complete in ([\d.]+) seconds", "\n".join(r.lines))]
    assert len(fixture_compiles) == 5
    timings = r.of(Timing)
    assert [t.seconds for t in timings if t.name == "compile"] == fixture_compiles
    assert r.pipe.phase_record("compile").reported_s == pytest.approx(sum(fixture_compiles))
    assert r.pipe.phase_record("engine").reported_s == 1534.21
    assert [t.name for t in timings] == ["weights"] + ["compile"] * 5 + ["init_engine"]
    # weights: the first rank's own figure (every rank reports its own; repeats are merged)
    first = r.lines_starting("Weight loading completed in")[0].text
    assert r.pipe.phase_record("weights").reported_s == float(first.split()[4])

    leg = run(LEGACY, False)
    names = {t.name: t.seconds for t in leg.of(Timing)}
    assert names["graphs"] == 13.71 and names["weights"] == 97.08 and names["init_engine"] == 402.11
    assert leg.pipe.phase_record("compile").reported_s == pytest.approx(106.24 + 1.32)


def test_ready_event():
    r = run(COLD)
    (ready,) = r.of(Ready)
    i = r.first_index("Application startup complete.")
    assert ready.ts == ts_of(i) and ready.startup_s == pytest.approx(ts_of(i) - T0)
    assert r.pipe.ready and r.pipe.ready_ts == ts_of(i)
    assert not run(HBM).pipe.ready and not run(HBM).of(Ready)


# --------------------------------------------------------------------------------- rank dedup

def test_rank_dedup_counts_tp16():
    r = run(COLD)
    counts = r.final_counts()
    raw_inits = [x for x in r.lines if "Initialized NeuronWorker" in x]
    assert len(raw_inits) == 16
    (init,) = r.lines_starting("Initialized NeuronWorker with rank ")
    assert counts[init.line_id] == 16
    (weights,) = r.lines_starting("Loading weights from openai/gpt-oss-120b")
    assert counts[weights.line_id] == 16
    # per-rank figures differ but are still one line
    (done,) = r.lines_starting("Weight loading completed in ")
    assert counts[done.line_id] == 16
    # 15 ranks wait for rank 0's compile of each of the 5 graphs
    waits = r.lines_starting("Waiting for shared compilation")
    assert len(waits) == 5 and all(counts[w.line_id] == 15 for w in waits)
    # each RankCount update grows by one, from 2
    seq: dict[int, list[int]] = {}
    for rc in r.of(RankCount):
        seq.setdefault(rc.line_id, []).append(rc.ranks)
    assert seq[init.line_id] == list(range(2, 17))
    assert r.pipe.ranks_seen == set(range(16))


@pytest.mark.parametrize("name", [c[0] for c in PHASE_CASES])
def test_every_line_accounted_once(name):
    r = run(name)
    nonblank = sum(1 for x in r.lines if clean_line(x)[0])
    updates = len(r.of(RankCount))
    assert r.pipe.lines_emitted == len(r.of(CleanLine))
    assert len(r.of(CleanLine)) + updates == nonblank
    assert sum(r.final_counts().values()) == nonblank


def test_dedup_tp8_errors_merged():
    r = run(HBM)
    counts = r.final_counts()
    (alloc,) = r.lines_starting("Failed to allocate 4.000GB")
    assert counts[alloc.line_id] == 8 and alloc.is_error and alloc.level == "ERROR"
    assert r.pipe.ranks_seen == set(range(8))


def w(rank: int, msg: str) -> str:
    return (f"\x1b[1;36m(EngineCore_DP0 pid=10)\x1b[0;0m \x1b[1;36m(Worker_TP{rank} pid={20 + rank})\x1b[0;0m "
            f"2026-03-14 09:00:00,000 - INFO - neuron_worker.py:1 - {msg}")


def test_dedup_rules():
    p = LogPipeline(dedup_window_s=10.0)
    a = p.feed(w(0, "=" * 80), 0.0)
    b = p.feed(w(0, "=" * 80), 0.1)  # same rank again: a new line
    c = p.feed(w(1, "=" * 80), 0.2)  # joins the first
    d = p.feed(w(1, "=" * 80), 0.3)  # joins the second
    assert isinstance(a[0], CleanLine) and isinstance(b[0], CleanLine) and a[0].line_id != b[0].line_id
    assert c == [RankCount(a[0].line_id, 2, 1, 0.2)]
    assert d == [RankCount(b[0].line_id, 2, 1, 0.3)]
    # outside the window: a new line
    e = p.feed(w(2, "=" * 80), 20.0)
    assert isinstance(e[0], CleanLine)
    # differing only in numbers merges; differing in words does not
    f = p.feed(w(0, "Moving model to device: neuron:0"), 21.0)
    g = p.feed(w(5, "Moving model to device: neuron:5"), 21.1)
    h = p.feed(w(6, "Moving draft model to device: neuron:6"), 21.2)
    assert g == [RankCount(f[0].line_id, 2, 5, 21.1)]
    assert isinstance(h[0], CleanLine)
    # non-worker lines are never merged
    x = p.feed("(APIServer pid=1) INFO 03-14 09:00:00 [a.py:1] hello", 22.0)
    y = p.feed("(APIServer pid=1) INFO 03-14 09:00:00 [a.py:1] hello", 22.0)
    assert isinstance(x[0], CleanLine) and isinstance(y[0], CleanLine)


def test_worker_without_rank_dedups_by_pid():
    p = LogPipeline()
    a = p.feed("(Worker pid=7) INFO 03-14 09:00:00 [w.py:1] ready", 0.0)
    b = p.feed("(Worker pid=8) INFO 03-14 09:00:00 [w.py:1] ready", 0.0)
    c = p.feed("(Worker pid=8) INFO 03-14 09:00:00 [w.py:1] ready", 0.0)
    assert a[0].rank is None and a[0].text == "ready" and a[0].level == "INFO"
    assert b == [RankCount(a[0].line_id, 2, None, 0.0)]
    assert isinstance(c[0], CleanLine)


# ---------------------------------------------------------------------------- ANSI, \r, prefixes

def test_ansi_stripped_everywhere():
    r = run(COLD)
    assert any("\x1b[" in x for x in r.lines)
    assert not any("\x1b" in c.text for c in r.of(CleanLine))
    (split,) = r.lines_starting("Compilation time split - FX to HLO: ")[:1]
    assert re.fullmatch(r"Compilation time split - FX to HLO: [\d.]+s \| Compile: [\d.]+s \| Total: [\d.]+s",
                        split.text)
    assert strip_ansi("\x1b[1;36m(APIServer pid=15)\x1b[0;0m INFO") == "(APIServer pid=15) INFO"
    assert strip_ansi("\x1b[91m3.21s\x1b[0m|\x1b[A\x1b[2K\x1b]0;title\x07x") == "3.21s|x"


def test_cr_progress_bars_collapsed():
    r = run(TQDM, speculative=False)
    assert sum(x.count("\r") for x in r.lines) > 20
    bars = [c for c in r.of(CleanLine) if "%|" in c.text]
    assert [b.text.split(":")[0] for b in bars] == [
        "Fetching 15 files",
        "model-00001-of-00015.safetensors",
        "model-00002-of-00015.safetensors",
        "model-00003-of-00015.safetensors",
    ]
    assert all("100%|" in b.text and "\r" not in b.text for b in bars)
    assert all(b.rank == 0 and b.process == "EngineCore_DP0" for b in bars)
    assert not any("\r" in c.text or "\x1b" in c.text for c in r.of(CleanLine))


def test_collapse_cr_unit():
    assert collapse_cr("a 10%\rb 50%\rc 100%") == "c 100%"
    assert collapse_cr("(Worker_TP0 pid=5) \rx 1%\rx 100%\r") == "(Worker_TP0 pid=5) x 100%"
    assert collapse_cr("line\r") == "line"
    assert collapse_cr("plain") == "plain"


@pytest.mark.parametrize("raw,msg,proc,rank,level,source", [
    ("\x1b[1;36m(APIServer pid=15)\x1b[0;0m INFO 12-01 10:00:00 [api_server.py:1839] vLLM API server version 0.11.0",
     "vLLM API server version 0.11.0", "APIServer", None, "INFO", None),
    ("(EngineCore_DP0 pid=459) (Worker_TP0 pid=465) 2026-01-06 18:45:40,349 - INFO - neuron_model_runner.py:575 - "
     "Starting model forward pass ...", "Starting model forward pass ...", "EngineCore_DP0", 0, "INFO", None),
    ("(EngineCore_DP0 pid=459) (Worker_TP12 pid=477) WARNING 03-14 09:12:09 [neuron_worker.py:131] EFA x",
     "EFA x", "EngineCore_DP0", 12, "WARNING", None),
    ("(APIServer pid=15) INFO:     Application startup complete.", "Application startup complete.", "APIServer",
     None, "INFO", None),
    ("INFO:     Started server process [15]", "Started server process [15]", None, None, "INFO", None),
    ("(EngineCore_DP0 pid=9) INFO:Neuron:Generating HLOs for the following models: ['a']",
     "Generating HLOs for the following models: ['a']", "EngineCore_DP0", None, "INFO", "Neuron"),
    ("2025-May-15 20:58:33.897479 224822:224822 ERROR  TDRV:log_dev_mem                             Failed to "
     "allocate 4.000GB (alignment: none, usage: tensors) on ND 0:NC 4",
     "Failed to allocate 4.000GB (alignment: none, usage: tensors) on ND 0:NC 4", None, None, "ERROR",
     "TDRV:log_dev_mem"),
    ("(VllmWorker rank=3 pid=99) WARN 03-14 09:12:09 [w.py:1] careful", "careful", "VllmWorker", 3, "WARNING",
     None),
    ("(EngineCore_DP0 pid=3) ERROR 03-14 09:20:14 [core.py:708]   File \"core.py\", line 699, in run",
     '  File "core.py", line 699, in run', "EngineCore_DP0", None, "ERROR", None),
    ("RuntimeError: boom  \n", "RuntimeError: boom", None, None, None, None),
])
def test_clean_line_formats(raw, msg, proc, rank, level, source):
    m, info = clean_line(raw)
    assert m == msg
    assert (info.process, info.rank, info.level, info.source) == (proc, rank, level, source)
    # the pipeline's fast path agrees with clean_line
    (ev, *_) = LogPipeline().feed(raw, 0.0)
    assert (ev.text, ev.process, ev.rank, ev.level) == (msg, proc, rank, level)


def test_blank_and_prefix_only_lines_emit_nothing():
    p = LogPipeline()
    assert p.feed("", 0.0) == []
    assert p.feed("\x1b[1;36m(APIServer pid=1)\x1b[0;0m \n", 0.0) == []
    assert p.feed("(Worker_TP0 pid=5) \r\r", 0.0) == []
    assert p.lines_emitted == 0 and p.lines_fed == 3


def test_line_starting_with_parenthesis_is_not_a_prefix():
    (ev,) = LogPipeline().feed("(note) something else", 0.0)
    assert ev.text == "(note) something else" and ev.process is None and ev.rank is None


# ---------------------------------------------------------------------------------- compile cache

def test_cache_misses_cold_and_hits_warm():
    cold = run(COLD).pipe
    assert len(cold.cache_keys) == 5
    assert cold.cache_misses == {k: 1 for k in cold.cache_keys}
    assert cold.cache_hits == {} and cold.cache_miss_count == 5
    warm = run(WARM).pipe
    assert warm.cache_hits == {k: 1 for k in warm.cache_keys} and warm.cache_misses == {}
    assert list(warm.cache_keys) == list(cold.cache_keys)
    res = run(WARM).of(CacheResult)
    assert [c.key for c in res] == list(warm.cache_keys) and all(c.hit and c.source == "local" for c in res)


def test_cache_legacy():
    r = run(LEGACY, False)
    res = r.of(CacheResult)
    assert [(c.hit, c.source) for c in res] == [(False, "legacy"), (True, "legacy")]
    assert res[1].key.startswith("MODULE_")
    assert r.pipe.cache_hit_count == 1 and r.pipe.cache_miss_count == 1


def test_cache_remote_lines():
    p = LogPipeline()
    ev = p.feed(w(0, "Remote cache hit for key 0123abcd — copying from /cache/x"), 0.0)
    assert CacheResult("0123abcd", True, "remote", 0.0) in ev
    ev = p.feed(w(0, "VLLM_NEURON_DISABLE_WARMUP_COMPILE: local compile cache miss for key ffee01. All graphs "
                     "must be pre-compiled when warmup compilation is disabled."), 1.0)
    assert CacheResult("ffee01", False, "local", 1.0) in ev


# ------------------------------------------------------------------------------------------ errors

@pytest.mark.parametrize("name,primary,kinds", [
    (HBM, "hbm-allocation-failure", {"hbm-allocation-failure", "engine-failed"}),
    (OOM, "compile-oom-killed", {"compile-oom-killed", "engine-failed"}),
    (BUSY, "neuron-cores-busy", {"neuron-cores-busy", "engine-failed"}),
    (TIMEOUT, "engine-startup-timeout", {"engine-startup-timeout"}),
])
def test_error_fixture_kind(name, primary, kinds):
    r = run(name)
    assert r.pipe.primary_error.kind == primary
    assert {e.kind for e in r.pipe.errors} == kinds
    assert r.of(ErrorSignature) == r.pipe.errors
    first = r.pipe.primary_error
    assert first.context and len(first.context) <= r.pipe.context_lines
    # the context is the clean lines just before the error line
    texts = [c.text for c in r.of(CleanLine)]
    pos = texts.index(first.line)
    assert list(first.context) == texts[max(0, pos - len(first.context)):pos]
    line = next(c for c in r.of(CleanLine) if c.line_id == first.line_id)
    assert line.is_error and line.text == first.line


@pytest.mark.parametrize("name", [COLD, WARM, LEGACY, TQDM])
def test_healthy_logs_have_no_errors(name):
    r = run(name)
    assert r.pipe.errors == [] and r.pipe.primary_error is None
    assert not [c.text for c in r.of(CleanLine) if c.is_error]


@pytest.mark.parametrize("line,kind", [
    ('RuntimeError: nrt_tensor_allocate status=4 message="Allocation Failure"', "hbm-allocation-failure"),
    ("Failed to allocate 4.000GB (alignment: none, usage: tensors) on ND 0:NC 4", "hbm-allocation-failure"),
    ("Computed KV cache budget is below minimum threshold. effective=0.4 GiB, minimum=1.00 GiB.",
     "hbm-allocation-failure"),
    ("[ERROR] [NCC_EVRF009] Estimated peak HBM usage exceeds the limit", "hbm-allocation-failure"),
    ("The neuronx-cc (neuron compiler) process was killed (SIG_KILL).", "compile-oom-killed"),
    ("RuntimeError: neuronx-cc compilation failed with -9. Check compiler logs.", "compile-oom-killed"),
    ("RuntimeError: neuronx-cc failed with -9", "compile-oom-killed"),
    ("RuntimeError: neuronx-cc compilation failed with -6. Check compiler logs.", "compile-failed"),
    ("RuntimeError: neuronx-cc failed with 70", "compile-failed"),
    ("ERROR 42759 [neuronxcc.driver.CommandDriver]:  An Internal Compiler Error has occurred", "compile-failed"),
    ("[INTERNAL_ERROR] [NCC_INLA001] Unhandled exception with message: type must be boolean", "compile-failed"),
    ("Logical Neuron Core(s) not available - Requested:lnc0-lnc0 Available:0 Logical Core size:2 (cores busy, "
     "ret=-16)", "neuron-cores-busy"),
    ("NeuronCore(s) not available - Requested:nc1-nc1 Available:0", "neuron-cores-busy"),
    ("Failure: NRT_EXEC_NC_BUSY in nrt_execute()", "neuron-cores-busy"),
    ("TimeoutError: Timed out waiting for engine core processes to start.", "engine-startup-timeout"),
    ("RuntimeError: NEURON_RT_VISIBLE_CORES cannot be used with multi-processing execution on vLLM.",
     "neuron-rt-visible-cores-set"),
    ('ImportError: WRONG PACKAGE. Please install the package from Neuron Repository', "placeholder-vllm-neuron"),
    ("OSError: [Errno 98] Address already in use", "port-in-use"),
    ("EngineCore failed to start.", "engine-failed"),
    ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
     "engine-failed"),
    ("Compilation complete in 12.00 seconds", None),
    ("Local cache miss for key: 0123", None),
    ("Failed to allocate a buffer for the tokenizer", None),
    ("Neuron HBM: 17.42 GiB used, 6.58 GiB free", None),
])
def test_classify_error(line, kind):
    assert classify_error(line) == kind
    assert kind is None or kind in ERROR_KINDS


def test_error_signature_from_pipeline_line():
    p = LogPipeline()
    p.feed("(APIServer pid=1) INFO 03-14 09:00:00 [a.py:1] one", 0.0)
    ev = p.feed("(APIServer pid=1) OSError: [Errno 98] Address already in use", 1.0)
    (err,) = [e for e in ev if isinstance(e, ErrorSignature)]
    assert err.kind == "port-in-use" and err.context == ("one",) and err.ts == 1.0
    assert ev[0].is_error and ev[0].level is None


# -------------------------------------------------------------------------------------- root cause

def test_root_cause_hbm_is_the_allocation_line_not_the_wrapper():
    r = run(HBM)
    assert "Engine core initialization failed" in r.lines[-1]
    rc = root_cause(r.lines)
    assert rc is not None and classify_error(rc) == "hbm-allocation-failure"
    assert rc.startswith("Failed to allocate 4.000GB") and "on ND " in rc
    # the pipeline's own history holds the first rank's copy of the same line
    own = r.pipe.root_cause()
    assert own.startswith("Failed to allocate 4.000GB") and classify_error(own) == "hbm-allocation-failure"


def test_root_cause_oom_is_the_sig_kill_line():
    r = run(OOM)
    rc = root_cause(r.lines)
    assert classify_error(rc) == "compile-oom-killed" and "SIG_KILL" in rc
    assert r.pipe.root_cause() == rc


def test_root_cause_cores_busy_and_timeout():
    assert classify_error(root_cause(run(BUSY).lines)) == "neuron-cores-busy"
    assert classify_error(root_cause(run(TIMEOUT).lines)) == "engine-startup-timeout"


def test_root_cause_plain_exception_fallback_and_none():
    lines = [
        "(EngineCore_DP0 pid=3) ERROR 03-14 09:00:00 [core.py:708] EngineCore failed to start.",
        "(EngineCore_DP0 pid=3) ERROR 03-14 09:00:00 [core.py:708] Traceback (most recent call last):",
        '(EngineCore_DP0 pid=3) ERROR 03-14 09:00:00 [core.py:708]   File "x.py", line 1, in f',
        "(EngineCore_DP0 pid=3) ERROR 03-14 09:00:00 [core.py:708] ValueError: No available memory for the cache "
        "blocks. Try increasing `gpu_memory_utilization`",
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {'EngineCore_DP0': 1}",
    ]
    assert root_cause(lines) == ("ValueError: No available memory for the cache blocks. Try increasing "
                                 "`gpu_memory_utilization`")
    assert root_cause(lines[:1] + lines[-1:]) is None
    assert root_cause(run(COLD).lines) is None


def test_root_cause_skips_worker_wrappers():
    lines = [
        "(EngineCore_DP0 pid=3) (Worker_TP2 pid=7) ERROR 03-14 09:00:00 [multiproc_executor.py:597] ValueError: "
        "Draft model architecture 'X' not found in vLLM Neuron model registry.",
        "(EngineCore_DP0 pid=3) ERROR 03-14 09:00:00 [core.py:708] EngineCore failed to start.",
        "(EngineCore_DP0 pid=3) ERROR 03-14 09:00:00 [core.py:708] Exception: WorkerProc initialization failed due "
        "to an exception in a background process. See stack trace for root cause.",
        "(EngineCore_DP0 pid=3) Process EngineCore_DP0:",
        "(EngineCore_DP0 pid=3) Exception: WorkerProc initialization failed due to an exception in a background "
        "process. See stack trace for root cause.",
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {'EngineCore_DP0': 1}",
    ]
    assert root_cause(lines) == "ValueError: Draft model architecture 'X' not found in vLLM Neuron model registry."
