"""Bad inputs, continued from test_bad_inputs.py: secrets on every channel, saved files read back through a
schema, run directories of another shape, gates a run cannot produce, an interrupted bench (issue 18), and the
second round (tune inputs, core ranges, executables and probe children, --vllm-version).

Every case asserts the exit code, a message naming the problem, no traceback, the run directory unchanged where
it must be, and no process left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bad_inputs_util import (
    inproc,
    one_paragraph_error,
    MARK_VAR,
    leftovers_after,
    run_cli,
    snapshot,
    stalled_headless,
)
from e2e_util import FAST_SIM, REPO, child_env, demo_variant, free_port
from tui.core import secrets
from tui.core.profile.model import load_profile
from tui.core.run import reuse

FIXTURES = REPO / "tests" / "fixtures"
D = 'extends = "demo"\nname = "bad"\n'



# ---------------------------------------------------------------------------------------------------------
# 8. Secrets: redacted on every channel
# ---------------------------------------------------------------------------------------------------------

TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"

SECRET_CASES = [
    ("hf-token-in-server-env", f'[server.env]\nHF_TOKEN = "{TOKEN}"\n', {}, TOKEN, "HF_TOKEN=***"),
    ("api-key-in-server-env", '[server.env]\nMY_API_KEY = "k3y-value-123"\n', {}, "k3y-value-123", "MY_API_KEY=***"),
    ("password-from-process-env", '[models]\ntarget = "pw-in-target-9876"\n', {"DB_PASSWORD": "pw-in-target-9876"},
     "pw-in-target-9876", "serve ***"),
    ("secret-from-process-env", '[dataset]\npath = "data/zz-secret-zz.txt"\n', {"APP_SECRET": "zz-secret-zz"},
     "zz-secret-zz", "/data/***.txt"),  # the path is shown absolute (resolved once, at start)
    ("bare-hf-token", f'[speculative]\nmodel = "{TOKEN}"\n', {}, TOKEN, '"model": "hf_***"'),
]


@pytest.mark.parametrize("extra,env,secret,shown", [c[1:] for c in SECRET_CASES], ids=[c[0] for c in SECRET_CASES])
def test_secrets_never_printed(capsys, monkeypatch, tmp_path, extra, env, secret, shown):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    secrets._REDACTOR._env_at = -1e9  # pick up the environment now
    prof = tmp_path / "sec.toml"
    prof.write_text(D + extra)
    try:
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(prof), "--show-commands")
        assert rc == 0, err
        assert secret not in out + err, [l for l in (out + err).splitlines() if secret in l]
        assert shown in out
    finally:
        secrets._REDACTOR.clear_registered()


def test_not_secret_names_are_kept(capsys, monkeypatch, tmp_path):
    prof = tmp_path / "p.toml"
    prof.write_text(D + '[server.env]\nTOKENIZERS_PARALLELISM = "false"\nHF_TOKEN_PATH = "tokfile"\n')
    rc, out, _ = inproc(capsys, monkeypatch, tmp_path, "--profile", str(prof), "--show-commands")
    assert rc == 0 and "TOKENIZERS_PARALLELISM=false" in out and "HF_TOKEN_PATH=tokfile" in out


def test_token_redacted_on_console_files_and_report(tmp_path):
    from tui.core.profile.model import load_profile

    env = dict(load_profile("demo").server.env, HF_TOKEN=TOKEN, MY_SECRET="s3cr3t-in-env")
    prof = demo_variant(tmp_path, "tok", server__env=env,
                        server__command=["{python}", "-c", f"print('{TOKEN}', 's3cr3t-in-env'); raise SystemExit(3)"])
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--verbose", "--steps", "baseline", "--run-dir", str(run))
    assert r.rc == 1, r.err
    assert TOKEN not in r.both and "s3cr3t-in-env" not in r.both
    assert "HF_TOKEN=***" in r.err  # the console shows the command with the value redacted
    for p in run.rglob("*"):
        if p.is_file():
            body = p.read_text(errors="replace")
            assert TOKEN not in body and "s3cr3t-in-env" not in body, p.name
    assert not r.leftovers


def test_redact_event_covers_every_text_field():
    from tui.core import events as ev

    secrets.add_secrets(["very-secret-value"])
    try:
        e = secrets.redact_event(ev.Command("baseline", "serve", ("x", "very-secret-value"), TOKEN))
        assert tuple(e.argv) == ("x", "***") and e.text == "hf_***"
        d = secrets.redact_event(ev.Diagnosis("s", "x", "error", "t very-secret-value", ("ev " + TOKEN,), "r"))
        assert d.title == "t ***" and d.evidence == ("ev hf_***",)
        line = ev.LogLine("s", "nothing here")
        assert secrets.redact_event(line) is line
    finally:
        secrets._REDACTOR.clear_registered()


# ---------------------------------------------------------------------------------------------------------
# 9. Saved files read back through a schema (compare, --open, continuation, --steps results), run directories
#    reused by a run of another shape, gates a run cannot produce, an interrupted bench (issue 18)
# ---------------------------------------------------------------------------------------------------------


def _closed_run(root: Path, tune: bool) -> Path:
    """A finished run directory (report.json, state.json, profile.toml, logs) as a run writes it, without running."""
    sys.path.insert(0, str(REPO / "tests" / "snapshot_apps"))
    from snapshot_apps import tune as tune_app

    return tune_app.write_closed_run(root / ("tune" if tune else "two"), tune=tune)


def _mutate(path: Path, fn) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    fn(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")


def _set(keys: str, value):
    """A mutation: doc[k1][k2]... = value (list indexes as digits)."""
    def fn(doc):
        parts = keys.split("/")
        cur = doc
        for k in parts[:-1]:
            cur = cur[int(k)] if isinstance(cur, list) else cur[k]
        last = parts[-1]
        if isinstance(cur, list):
            cur[int(last)] = value
        else:
            cur[last] = value
    return fn


REPORT_DAMAGE = [
    ("arm-not-object", True, _set("matrix/arms/1", "x"), "matrix.arms[1] is text 'x', expected an object"),
    ("mean-is-text", True, _set("matrix/cells/eagle3-k1/sonnet/output_throughput/mean", "fast"),
     "matrix.cells.eagle3-k1.sonnet.output_throughput.mean is text 'fast', expected a number"),
    ("interval-one-end", True, _set("matrix/cells/eagle3-k1/sonnet/speedup/ci95", [1.0]),
     "matrix.cells.eagle3-k1.sonnet.speedup.ci95 has 1 items, expected 2"),
    ("recommendation-number", True, _set("matrix/recommendation/sonnet", 3),
     "matrix.recommendation.sonnet is the number 3, expected an object"),
    ("workloads-not-list", True, _set("matrix/workloads", "sonnet"), "matrix.workloads is text 'sonnet', expected a list"),
    ("runs-list", False, _set("runs/baseline", []), "runs.baseline is a list of 0, expected an object"),
    ("throughput-text", False, _set("runs/eagle3/output_throughput", "139"),
     "runs.eagle3.output_throughput is text '139', expected a number"),
    ("settings-text", False, _set("settings", "neuron"), "settings is text 'neuron', expected an object"),
    ("verdict-text-number", False, _set("verdict/text", 5), "verdict.text is the number 5, expected text"),
    ("step-without-id", False, _set("steps/0", {"status": "passed"}), "steps[0].id is missing"),
    ("severity-unknown", False, _set("diagnostics/0/severity", "fatal"),
     "diagnostics[0].severity is text 'fatal', expected one of error, warning, info"),
    ("speedup-text", False, _set("comparison/output_throughput_speedup", "1.2x"),
     "comparison.output_throughput_speedup is text '1.2x', expected a number"),
    ("exit-code-text", False, _set("exit_code", "0"), "exit_code is text '0', expected a whole number"),
    ("odd-key", False, _set("runs/a\nb", 1), "runs['a\\nb'] is the number 1, expected an object"),
]


@pytest.mark.parametrize("tune,mutate,fragment", [c[1:] for c in REPORT_DAMAGE], ids=[c[0] for c in REPORT_DAMAGE])
def test_damaged_report_is_named_by_compare_and_open(capsys, monkeypatch, tmp_path, tune, mutate, fragment):
    good = _closed_run(tmp_path / "good", tune=not tune)
    run = _closed_run(tmp_path, tune)
    _mutate(run / "report.json", mutate)
    before = snapshot(tmp_path)
    for args in (("compare", str(good), str(run)), ("compare", "--json", str(run)), ("compare", "--headless", str(run)),
                 ("--open", str(run))):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
        assert rc == 2, err
        one_paragraph_error(err)
        assert "report.json is damaged: " + fragment in err, err
        assert out == ""
    assert snapshot(tmp_path) == before


STATE_DAMAGE = [
    ("bench-list", False, _set("steps/baseline/facts/bench", []),
     "steps.baseline.facts.bench is a list of 0, expected an object"),
    ("bench-number-text", False, _set("steps/eagle3/facts/bench/output_throughput", "fast"),
     "steps.eagle3.facts.bench.output_throughput is text 'fast', expected a number"),
    ("phases-text", False, _set("steps/baseline/facts/startup/phases", "x"),
     "steps.baseline.facts.startup.phases is text 'x', expected a list"),
    ("repeats-not-list", True, _set("steps/eagle3-k1/facts/repeats", {"sonnet": {}}),
     "steps.eagle3-k1.facts.repeats.sonnet is an object, expected a list"),
    ("smoke-passed-text", True, _set("steps/baseline/facts/smoke/passed", "yes"),
     "steps.baseline.facts.smoke.passed is text 'yes', expected true or false"),
    ("dataset-bytes-text", False, _set("steps/dataset/facts/bytes", "22 kB"),
     "steps.dataset.facts.bytes is text '22 kB', expected a whole number"),
]


@pytest.mark.parametrize("tune,mutate,fragment", [c[1:] for c in STATE_DAMAGE], ids=[c[0] for c in STATE_DAMAGE])
def test_damaged_state_is_named_by_open_continuation_and_results(capsys, monkeypatch, tmp_path, tune, mutate,
                                                                 fragment):
    run = _closed_run(tmp_path, tune)
    _mutate(run / "state.json", mutate)
    before = snapshot(tmp_path)
    prof = str(run / "profile.toml")
    for args in (("--open", str(run)),
                 ("--profile", prof, "--headless", "--steps", "results", "--run-dir", str(run)),
                 ("--profile", prof, "--headless", "--json", "--run-dir", str(run))):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
        assert rc == 2, err
        one_paragraph_error(err)
        assert "state.json is damaged: " + fragment in err, err
    assert snapshot(tmp_path) == before


def test_engine_refuses_damaged_facts_without_the_cli_check(tmp_path):
    """The wizard builds the Engine itself: a state whose facts are damaged is refused there too, untouched."""
    import asyncio

    from tui.core.run.engine import Engine
    from tui.core.profile.model import load_profile

    run = _closed_run(tmp_path, False)
    _mutate(run / "state.json", _set("steps/baseline/facts/bench", "fast"))
    before = snapshot(run)
    events = []
    eng = Engine(load_profile(str(run / "profile.toml")), run, events.append, steps=["results"])
    assert asyncio.run(eng.run_all()) == 2 and snapshot(run) == before
    assert any("steps.baseline.facts.bench is text 'fast'" in getattr(e, "text", "") for e in events)


def test_damaged_result_file_without_recorded_numbers(capsys, monkeypatch, tmp_path):
    """A state from an older specdec-tui: baseline passed without its numbers, which come from baseline.json; a
    baseline.json that is not a bench result is named, not silently dropped."""
    run = _closed_run(tmp_path, False)
    _mutate(run / "state.json", lambda d: d["steps"]["baseline"]["facts"].pop("bench"))
    (run / "baseline.json").write_text(json.dumps({"date": "20260101", "completed": "thirty", "duration": 1.0}))
    before = snapshot(run)
    rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(run / "profile.toml"), "--headless", "--steps",
                        "results", "--run-dir", str(run))
    assert rc == 2, err
    one_paragraph_error(err)
    assert "the result file baseline.json is damaged" in err and "key 'completed' is not a number: 'thirty'" in err, err
    assert snapshot(run) == before


SHAPE_CASES = [
    ("two-arm-by-tune", False, 'extends = "tune-demo"\nname = "demo"\n',
     "holds a two-arm run (baseline vs eagle3), and profile 'demo' is a tune run"),
    ("tune-by-two-arm", True, 'extends = "demo"\nname = "tune-demo"\n',
     "holds a tune run, and profile 'tune-demo' is a two-arm run (baseline vs eagle3)"),
    ("tune-by-fewer-arms", True, 'extends = "tune-demo"\nname = "tune-demo"\n[tune]\nnum_speculative_tokens = [1, 2]\n',
     "holds step(s) eagle3-k3 that profile 'tune-demo' does not have"),
    ("tune-by-other-drafts", True,
     'extends = "tune-demo"\nname = "tune-demo"\n[tune.drafts.a]\nmodel = "RedHatAI/gpt-oss-120b-speculator.eagle3"\n'
     '[tune.drafts.b]\nmodel = "RedHatAI/gpt-oss-120b-speculator.eagle3"\n',
     "holds step(s) eagle3-k1, eagle3-k2, eagle3-k3 that profile 'tune-demo' does not have"),
]


@pytest.mark.parametrize("tune,profile_text,fragment", [c[1:] for c in SHAPE_CASES], ids=[c[0] for c in SHAPE_CASES])
def test_run_dir_of_another_shape_is_refused_untouched(capsys, monkeypatch, tmp_path, tune, profile_text, fragment):
    run = _closed_run(tmp_path, tune)
    prof = tmp_path / "other.toml"
    prof.write_text(profile_text)
    before = snapshot(tmp_path)
    for steps in ("env", "results"):
        rc, _, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(prof), "--headless", "--steps", steps,
                            "--run-dir", str(run))
        assert rc == 2, err
        one_paragraph_error(err)
        assert fragment in err and "left as it is" in err, err
    assert snapshot(tmp_path) == before


def test_run_dir_shape_rules_directly(tmp_path):
    """More arms than the saved run (extending the matrix) may continue it; a state that says nothing of its
    shape (only the checks ran) fits either; the engine writes the shape it ran."""
    from tui.core.profile.model import load_profile

    run = _closed_run(tmp_path, True)
    more = load_profile("tune-demo").with_values({"tune.num_speculative_tokens": [1, 2, 3, 4]})
    assert reuse.check_reuse(run, more) is not None
    state = {"profile": "demo", "steps": {"env": {"status": "passed"}}}
    assert reuse.shape_mismatch(state, load_profile("tune-demo")) is None
    assert reuse.shape_mismatch(dict(state, tune=True), load_profile("demo")) is not None


GATE_CASES = [
    ("speedup-lo-two-arm", "--demo", "speedup_lo>1", "speedup_lo is the lower end of a tune run's speedup interval"),
    ("metrics-speedup-lo-two-arm", "--demo", "metrics.speedup_lo>1", "a two-arm run (one bench per arm, no interval)"),
    ("matrix-on-two-arm", "--demo", "matrix.cells.eagle3-k1.sonnet.speedup.ratio>1",
     "'matrix' is written by tune runs only"),
    ("unknown-arm-runs", "--demo", "runs.eagle3-k2.output_throughput>1",
     "arm 'eagle3-k2' is not an arm of this profile (its arms: baseline, eagle3)"),
    ("unknown-report-key", "--demo", "runz.eagle3.output_throughput>1", "report.json has no 'runz'"),
    ("unknown-comparison-key", "--demo", "comparison.speedup>1", "comparison has no 'speedup'"),
    ("unknown-metric", "--demo", "metrics.speed>1", "metrics has no 'speed'"),
    ("comparison-on-tune", "tune-demo", "comparison.output_throughput_speedup>1",
     "'comparison' (baseline vs eagle3) is filled by two-arm runs only"),
    ("unknown-arm-matrix", "tune-demo", "matrix.cells.eagle3-k7.sonnet.speedup.ratio>1",
     "arm 'eagle3-k7' is not an arm of this profile (its arms: baseline, eagle3-k1, eagle3-k2, eagle3-k3)"),
    ("unknown-workload", "tune-demo", "matrix.cells.eagle3-k1.code.speedup.ratio>1",
     "bench key 'code' is not a bench key of this profile (its bench keys: sonnet, chat)"),
    ("unknown-workload-recommendation", "tune-demo", "matrix.recommendation.code.arm>1", "bench key 'code'"),
    ("speedup-lo-one-repeat", "ONE_REPEAT", "speedup_lo>1", "tune.repeats = 1 gives none"),
]


@pytest.mark.parametrize("profile,expect,fragment", [c[1:] for c in GATE_CASES], ids=[c[0] for c in GATE_CASES])
def test_gate_the_run_cannot_produce_is_refused_before_anything(capsys, monkeypatch, tmp_path, profile, expect,
                                                                fragment):
    if profile == "ONE_REPEAT":
        (tmp_path / "one.toml").write_text('extends = "tune-demo"\nname = "one"\n[tune]\nrepeats = 1\n')
        profile = str(tmp_path / "one.toml")
    prof = ["--demo"] if profile == "--demo" else ["--profile", profile]
    before = snapshot(tmp_path)
    for extra in ((), ("--json",), ("--run-dir", str(tmp_path / "run"))):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *prof, "--headless", "--expect", expect, *extra)
        assert rc == 2, err
        one_paragraph_error(err)
        assert "can never pass" in err and fragment in err and "Nothing was run" in err, err
    assert snapshot(tmp_path) == before and not (tmp_path / "run").exists()


def test_gates_a_run_can_produce_are_accepted():
    from tui.core.results import gates
    from tui.core.profile.model import load_profile

    two, tune = load_profile("demo"), load_profile("tune-demo")
    for text in ("speedup>=1.1", "runs.eagle3.acceptance_rate>50", "comparison.median_tpot_ratio<1",
                 "steps.0.seconds>0", "metrics.acceptance>1"):
        gates.check_producible(gates.parse_all([text]), two)
    for text in ("speedup_lo>1", "matrix.cells.eagle3-k2.chat.speedup.ratio>1", "runs.eagle3-k3.output_throughput>1",
                 "matrix.recommendation.sonnet.repeats_needed<3", "launches.1.startup_s<600"):
        gates.check_producible(gates.parse_all([text]), tune)


STALL_BENCH = FIXTURES / "fakes" / "stall_bench.py"


@pytest.mark.parametrize("how", ["sigint", "timeout"])
def test_interrupted_bench_output_is_never_taken_for_a_result(tmp_path, how):
    """A bench that wrote half its result file and then stalls: stopped by a signal (exit 130, the step interrupted)
    or by benchmark.timeout_s (exit 1, the step failed). Its output is left as baseline.json.partial, the step's
    summary says so, and a later `--steps results` does not read it as the baseline's numbers."""
    extra = {"benchmark__timeout_s": 3.0} if how == "timeout" else {}
    prof = demo_variant(tmp_path, "stall", server__command=["{python}", str(STALL_BENCH)], **extra)
    run = tmp_path / "run"
    mark = f"stall-{os.getpid()}-{time.monotonic_ns()}"
    rc, err = stalled_headless(tmp_path, mark, ["--profile", str(prof), "--headless", "--steps", "baseline",
                                                "--run-dir", str(run)], how, run / "baseline.json", 120, 120)
    assert rc == (130 if how == "sigint" else 1), err
    assert "Traceback" not in err and not leftovers_after(mark)
    assert not (run / "baseline.json").exists()
    assert (run / "baseline.json.partial").read_text().startswith('{"date"')
    status = {"sigint": "interrupted", "timeout": "failed"}[how]
    rep = json.loads((run / "report.json").read_text())
    step = {s["id"]: s for s in rep["steps"]}["baseline"]
    assert step["status"] == status and "baseline.json.partial" in step["summary"] + err
    if how == "sigint":
        assert "interrupted during the benchmark" in step["summary"]
    before = (run / "baseline.json.partial").read_bytes()
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", "results", "--run-dir", str(run))
    assert r.rc == 1 and "missing: baseline, eagle3" in r.err and "Traceback" not in r.both, r.err
    assert (run / "baseline.json.partial").read_bytes() == before and not r.leftovers


# =========================================================================================================
# Issue 18 (second round), items 3-6: tune inputs, core ranges, executables and probe children, --vllm-version.
# =========================================================================================================


def _tune_variant(tmp_path: Path, name: str, **updates) -> Path:
    """tune-demo at the simulator's fast settings, one repeat of one workload, with `updates` (a__b = a.b)."""
    values = dict(FAST_SIM, **{"server.port": free_port(), "name": name, "tune.repeats": 1,
                               "tune.workloads": ["sonnet"], "tune.num_speculative_tokens": [1]})
    values.update({k.replace("__", "."): v for k, v in updates.items()})
    path = tmp_path / f"{name}.toml"
    path.write_text(load_profile("tune-demo").with_values(values).to_toml())
    return path


def _refused_before_anything(capsys, monkeypatch, tmp_path: Path, prof: Path, fragments: tuple[str, ...]) -> None:
    """Exit 2 with one paragraph naming the problem, for --show-commands and a headless run; nothing written."""
    before = snapshot(tmp_path)
    for args in (("--profile", str(prof), "--show-commands"), ("--profile", str(prof), "--headless")):
        rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
        assert rc == 2, err
        one_paragraph_error(err)
        for fragment in fragments:
            assert fragment in err, err
        assert out == ""
        assert snapshot(tmp_path) == before


# ---- 3. tune inputs ---------------------------------------------------------------------------------------

D18 = 'extends = "tune-demo"\nname = "bad"\n'

TUNE_CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("k-list-too-long", D18 + "[tune]\nnum_speculative_tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n",
     ("tune.num_speculative_tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9] is not valid", "at most 8 k values", "from 1 to 16")),
    ("k-list-empty", D18 + "[tune]\nnum_speculative_tokens = []\n", ("a list of 1 to 8 distinct integers",)),
    ("k-repeated", D18 + "[tune]\nnum_speculative_tokens = [2, 2]\n", ("tune.num_speculative_tokens = [2, 2]",
                                                                      "distinct")),
    ("k-too-large", D18 + "[tune]\nnum_speculative_tokens = [17]\n", ("each from 1 to 16",)),
    ("workloads-repeated", D18 + '[tune]\nworkloads = ["chat", "chat"]\n', ("a list of 1 to 3 distinct names",)),
    ("workload-unknown", D18 + '[tune]\nworkloads = ["sonet"]\n', ("tune.workloads = ['sonet'] is not valid",)),
    ("draft-name-upper", D18 + '[tune.drafts.RedHat]\nmodel = "x/y"\n', ("tune.drafts.RedHat",)),
    ("draft-no-model", D18 + "[tune.drafts.redhat]\nmethod = \"eagle3\"\n", ("tune.drafts.redhat.model",)),
    ("draft-bad-method", D18 + '[tune.drafts.redhat]\nmodel = "x/y"\nmethod = "medusa"\n',
     ("tune.drafts.redhat.method = 'medusa'",)),
    ("draft-unknown-key", D18 + '[tune.drafts.redhat]\nmodel = "x/y"\nk = 2\n', ("unknown key 'tune.drafts.redhat.k'",)),
    ("parallel-off-neuron", 'extends = "llama-3-8b-eagle-cuda"\nname = "bad"\n[tune]\nparallel = true\n',
     ("tune.parallel = true is not valid on platform 'cuda'",)),
]


@pytest.mark.parametrize("text,fragments", [c[1:] for c in TUNE_CASES], ids=[c[0] for c in TUNE_CASES])
def test_bad_tune_values_name_their_limits(capsys, monkeypatch, tmp_path, text, fragments):
    prof = tmp_path / "p.toml"
    prof.write_text(text, encoding="utf-8")
    _refused_before_anything(capsys, monkeypatch, tmp_path, prof, fragments)


def test_tune_draft_typo_fails_the_checkpoints_step_before_any_launch(tmp_path):
    prof = _tune_variant(tmp_path, "typo", tune__drafts={"redhat": {"model": "RedHatAI/gpt-oss-120b-speculator.eagle3"},
                                                         "typo": {"model": "RedHatAI/no-such-draft-xyz"}})
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--run-dir", str(run))
    assert r.rc == 1, r.err
    assert "draft checkpoint (typo): RedHatAI/no-such-draft-xyz: repository not found" in r.err, r.err
    assert "Traceback" not in r.both and not r.leftovers
    rep = json.loads((run / "report.json").read_text())
    status = {s["id"]: s["status"] for s in rep["steps"]}
    assert status["checkpoints"] == "failed" and status["baseline"] != "passed", status
    assert not list(run.glob("*.serve.log"))  # no server was launched
    ck = json.loads((run / "checkpoints.json").read_text())
    assert ck["tune_drafts"]["typo"]["error"]["value"] == "repository not found"
    assert set(ck["tune_drafts"]) == {"typo"}  # "redhat" is the profile's own draft, checked as such


def test_tune_draft_of_the_wrong_method_is_a_mismatch(tmp_path):
    prof = _tune_variant(tmp_path, "meth", tune__drafts={
        "e1": {"model": "RedHatAI/gpt-oss-120b-speculator.eagle3", "method": "eagle"}})
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", "env,checkpoints", "--run-dir", str(run))
    assert r.rc == 1, r.err
    assert "draft type (e1): eagle3 draft, method eagle" in r.err
    assert "Traceback" not in r.both and not r.leftovers
    rep = json.loads((run / "report.json").read_text())
    assert "draft-target-mismatch" in {d["id"] for d in rep["diagnostics"]}


def test_capacity_notice_counts_every_arm():
    from tui.core.host.placement import plan_ranges

    p = plan_ranges(64, 32, 3)
    assert p.summary().startswith("2 of 3 arm(s) at once")
    assert "not enough cores for 3 arms at once" in p.reasons[0] and "2 aligned range(s) of 32" in p.reasons[0]


# ---- 4. core ranges ---------------------------------------------------------------------------------------

NVD_CASES = [
    ("repeated-cores", "0,0,1,1,2,3,4,5,6,7,8,9,10,11,12,13", ("cores 0-1 repeated", "0-15, 16-31")),
    ("unaligned", "4-19", ("starts at core 4, which is not a multiple of tensor_parallel_size 16", "0-15, 16-31")),
    ("unaligned-list", "8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23", ("starts at core 8", "16-31")),
    ("gap", "0-7,16-23", ("not one contiguous ascending range", "0-15, 16-31")),
    ("wrong-count", "0-7", ("selects 8 logical cores but the server has tensor_parallel_size 16 ranks",)),
    ("not-a-list", "all", ("is not a list of logical NeuronCores",)),
]


@pytest.mark.parametrize("value,fragments", [c[1:] for c in NVD_CASES], ids=[c[0] for c in NVD_CASES])
def test_hand_set_core_range_in_the_profile_is_refused(capsys, monkeypatch, tmp_path, value, fragments):
    prof = tmp_path / "p.toml"
    prof.write_text(f'extends = "demo"\nname = "nvd"\n[server.env]\nNEURON_VISIBLE_DEVICES = "{value}"\n')
    _refused_before_anything(capsys, monkeypatch, tmp_path, prof,
                             ("server.env.NEURON_VISIBLE_DEVICES", "Ranges that work for TP 16", *fragments))


def test_aligned_core_range_in_the_profile_is_accepted(capsys, monkeypatch, tmp_path):
    prof = tmp_path / "p.toml"
    prof.write_text('extends = "demo"\nname = "nvd"\n[server.env]\nNEURON_VISIBLE_DEVICES = "16-31"\n')
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", str(prof), "--show-commands")
    assert rc == 0 and "NEURON_VISIBLE_DEVICES=16-31" in out, err


@pytest.mark.parametrize("value,fragment", [("0,0,1,1,2,3,4,5,6,7,8,9,10,11,12,13", "repeated"),
                                            ("4-19", "not a multiple of tensor_parallel_size 16")],
                         ids=["repeated", "unaligned"])
def test_hand_set_core_range_in_the_environment_fails_the_env_step(tmp_path, value, fragment):
    prof = demo_variant(tmp_path, "nvdenv")
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", "env", "--run-dir", str(run),
                env_extra={"NEURON_VISIBLE_DEVICES": value})
    assert r.rc == 1, r.err
    assert "NEURON_VISIBLE_DEVICES" in r.err and fragment in r.err
    assert "one of 0-15, 16-31, 32-47, 48-63" in r.err  # the ranges that work
    assert "Traceback" not in r.both and not r.leftovers


# ---- 5. executables and probe children ----------------------------------------------------------------------


def _not_executable_on_path(tmp_path: Path) -> dict[str, str]:
    d = tmp_path / "bin"
    d.mkdir()
    (d / "vllm").write_text("#!/bin/sh\nexit 0\n")
    (d / "vllm").chmod(0o644)
    return {"PATH": f"{d}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.parametrize("steps,fact", [("env", "vLLM interpreter: not executable"), ("baseline", "cannot start")])
def test_server_command_on_path_but_not_executable(tmp_path, steps, fact):
    prof = demo_variant(tmp_path, "nx", server__command=["vllm"])
    run = tmp_path / "r"
    r = run_cli(tmp_path, "--profile", str(prof), "--headless", "--steps", steps, "--run-dir", str(run),
                env_extra=_not_executable_on_path(tmp_path))
    assert r.rc == 1, r.err
    assert fact in r.err and f"{tmp_path / 'bin' / 'vllm'} exists but is not executable (mode 644)" in r.err, r.err
    assert "not found on PATH" not in r.err
    assert "Traceback" not in r.both and not r.leftovers


def test_not_runnable_says_why():
    from tui.core.host.sysinfo import not_runnable

    assert not_runnable("no-such-tool-xyz", "/nonexistent") is None  # the caller says "not found on PATH"
    assert not_runnable("/nonexistent/vllm", "") == "/nonexistent/vllm does not exist"
    assert "is a directory" in not_runnable(str(REPO), "")


_HANGS = "#!/bin/sh\n# a probe that never answers and has started a child of its own\nsleep 300 &\nsleep 300\n"

_PROBE_DRIVER = r'''
import asyncio, os, sys, time
from tui.core.host.interpreter import run_capture, run_capture_sync
exe = sys.argv[1]
t0 = time.monotonic()
print("async", asyncio.run(run_capture([exe], dict(os.environ), 1.0)))
print("sync", run_capture_sync([exe], dict(os.environ), 1.0))
print("quick", asyncio.run(run_capture(["/bin/sh", "-c", "sleep 300 & echo hi"], dict(os.environ), 30.0)))
async def cancelled():
    t = asyncio.ensure_future(run_capture([exe], dict(os.environ), 60.0))
    await asyncio.sleep(0.5)
    t.cancel()
    try:
        await t
    except asyncio.CancelledError:
        return "cancelled"
print("cancel", asyncio.run(cancelled()))
print("elapsed", time.monotonic() - t0 < 25)
'''


def test_probe_children_are_killed_with_their_own_children_at_the_deadline(tmp_path):
    import uuid

    exe = tmp_path / "hangs"
    exe.write_text(_HANGS)
    exe.chmod(0o755)
    mark = uuid.uuid4().hex
    env = dict(child_env(tmp_path), **{MARK_VAR: mark, "PYTHONPATH": str(REPO)})
    r = subprocess.run([sys.executable, "-c", _PROBE_DRIVER, str(exe)], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "async (None, '', 'hangs did not finish within 1 s (stopped it and the processes it started)')" in r.stdout
    assert "sync (None, '', 'hangs did not finish within 1 s" in r.stdout
    assert "quick (0, 'hi\\n', '')" in r.stdout  # a normal exit: its output, and what it left running is stopped
    assert "cancel cancelled" in r.stdout  # a stopped run: the probe and its child are killed too
    assert "elapsed True" in r.stdout  # no read waited for the grandchildren
    assert "Event loop is closed" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    assert leftovers_after(mark, timeout=5) == []


def test_env_step_stops_a_hanging_probe_and_its_children(tmp_path):
    """A hanging `nvidia-smi` (platform cuda) that started a child: the env step gives up at its deadline, kills
    both, and the console has no asyncio noise."""
    import uuid

    d = tmp_path / "bin"
    d.mkdir()
    (d / "nvidia-smi").write_text(_HANGS)
    (d / "nvidia-smi").chmod(0o755)
    prof = tmp_path / "cuda.toml"
    prof.write_text(f'extends = "llama-3-8b-eagle-cuda"\nname = "hang"\n[server]\nport = {free_port()}\n')
    mark = uuid.uuid4().hex
    env = dict(child_env(tmp_path), **{MARK_VAR: mark, "PYTHONPATH": str(REPO),
                                       "PATH": f"{d}{os.pathsep}{os.environ.get('PATH', '')}"})
    code = ("import sys; import tui.core.steps.env as e; e.NVIDIA_SMI_TIMEOUT_S = 2.0; from tui.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "--profile", str(prof), "--headless", "--steps", "env",
                        "--run-dir", str(tmp_path / "r")], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=120, stdin=subprocess.DEVNULL)
    both = r.stdout + r.stderr
    assert r.returncode == 1, both
    assert "nvidia-smi did not finish within 2 s" in both, both
    assert "Traceback" not in both and "Event loop is closed" not in both and "Exception ignored" not in both
    assert leftovers_after(mark, timeout=5) == []


# ---- 6. --vllm-version ------------------------------------------------------------------------------------

VLLM_VERSION_CASES = [
    ("empty", ["--demo", "--show-commands", "--vllm-version", ""], "--vllm-version is empty"),
    ("equals-empty", ["--demo", "--show-commands", "--vllm-version="], "--vllm-version is empty"),
    ("blank", ["--demo", "--show-commands", "--vllm-version", " "], "--vllm-version is empty"),
    ("empty-headless", ["--demo", "--headless", "--vllm-version="], "--vllm-version is empty"),
    ("too-old", ["--demo", "--show-commands", "--vllm-version", "0.24.0"],
     "--vllm-version 0.24.0: vLLM 0.24.0 is outside the releases specdec-tui serves on platform 'neuron' (0.29 to 0.33)"),
    ("just-below", ["--demo", "--show-commands", "--vllm-version", "0.28.9"], "serves on platform 'neuron' (0.29 to 0.33)"),
    ("too-new", ["--demo", "--show-commands", "--vllm-version", "0.34.0"], "vllm-neuron has no release for vLLM 0.34"),
    ("major", ["--demo", "--show-commands", "--vllm-version", "1.0"], "serves on platform 'neuron' (0.29 to 0.33)"),
    ("cuda-too-new", ["--profile", "llama-3.1-8b-eagle3-cuda", "--show-commands", "--vllm-version", "0.35.0"],
     "serves on platform 'cuda' (0.29 to 0.34)"),
    ("word", ["--demo", "--show-commands", "--vllm-version", "latest"], "is not a version"),
]


@pytest.mark.parametrize("args,fragment", [c[1:] for c in VLLM_VERSION_CASES], ids=[c[0] for c in VLLM_VERSION_CASES])
def test_bad_vllm_versions(capsys, monkeypatch, tmp_path, args, fragment):
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, *args)
    assert rc == 2, err
    one_paragraph_error(err)
    assert fragment in err and out == ""
    assert not (tmp_path / "specdec-runs").exists()


@pytest.mark.parametrize("profile,version", [("demo", "0.29.0"), ("demo", "0.33.2rc1"), ("cpu", "0.32.0+cpu"),
                                             ("llama-3.1-8b-eagle3-cuda", "0.34.0")])
def test_served_vllm_versions_are_shown(capsys, monkeypatch, tmp_path, profile, version):
    rc, out, err = inproc(capsys, monkeypatch, tmp_path, "--profile", profile, "--show-commands", "--vllm-version",
                          version)
    assert rc == 0 and out.startswith(f"# vLLM {version} (given with --vllm-version)"), err
