"""`specdec-tui --open RUN_DIR`: browse a finished run without starting anything.

`open_run` reads the run directory (report.json, and state.json / profile.toml / the step artifacts when they
are there) and refuses, with one paragraph, a directory that is missing or is not a finished specdec-tui run.
`show_closed_run` fills the app's panes from it: each step's status and summary, the facts the steps saved
(env.json, checkpoints.json, the dataset and server facts of state.json), the diagnoses, the results (the
comparison of a two-arm run from report.json's runs/comparison, the matrix pane for a tune run, with its "load"
and the benches' /metrics windows for the charts view) and each
server step's log files, paged one at a time in the log view. No engine is created: n / a / r / s say why not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .core import events as ev
from .core.events import STEP_TITLES
from .core.profile.model import Profile, ProfileError, load_profile
from .runplan import PROFILE_STEP, StepPlan, plan_for

REPORT_SCHEMA_PREFIX = "specdec-tui/report/"
LOG_TS_RE = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) ")
MAX_LOG_BYTES = 64 << 20  # a log read in browse mode: its last 64 MiB at most


class OpenRunError(Exception):
    """The directory cannot be browsed. str() is one paragraph for the operator (exit 2)."""


@dataclass
class ClosedRun:
    path: Path
    report: dict[str, Any]
    state: dict[str, Any] | None
    profile: Profile | None
    plan: StepPlan
    notes: list[str]

    @property
    def exit_code(self) -> int:
        code = self.report.get("exit_code")
        return code if isinstance(code, int) and not isinstance(code, bool) else 1

    @property
    def tune(self) -> bool:
        return isinstance(self.report.get("matrix"), dict)

    def step_facts(self, sid: str) -> dict[str, Any]:
        st = ((self.state or {}).get("steps") or {}).get(sid) or {}
        facts = st.get("facts")
        return facts if isinstance(facts, dict) else {}

    @property
    def workloads(self) -> list[str]:
        m = self.report.get("matrix") if isinstance(self.report.get("matrix"), dict) else {}
        tune = self.profile.tune if self.profile is not None else None
        wls = m.get("workloads") or (list(tune.workloads) if tune is not None else None)
        return [w for w in wls or [] if isinstance(w, str)]

    def log_files(self, sid: str) -> list[Path]:
        return log_files(self.path, sid, self.workloads)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def open_run(path: str | Path) -> ClosedRun:
    """The finished run in `path`; OpenRunError (one paragraph) when there is none."""
    raw = str(path)
    if not raw.strip():
        raise OpenRunError("--open needs a run directory, e.g. specdec-runs/20260101-120000-demo.")
    d = Path(raw).expanduser()
    if not d.exists():
        raise OpenRunError(f"--open {raw}: no such directory. Give the directory of a finished run (the one that "
                           "holds its report.json), e.g. specdec-runs/20260101-120000-demo.")
    if not d.is_dir():
        hint = f" Give its directory: --open {d.parent}" if d.name == "report.json" else ""
        raise OpenRunError(f"--open {raw} is a file, not a run directory.{hint}")
    rp = d / "report.json"
    if not rp.is_file():
        if (d / "state.json").is_file():
            raise OpenRunError(
                f"--open {raw}: the run has no report.json: it never finished (or it is still running). Continue "
                f"it with `specdec-tui --profile {d}/profile.toml --run-dir {d}`, then open it again.")
        raise OpenRunError(f"--open {raw} is not a specdec-tui run directory: it has neither report.json nor "
                           "state.json. Give the directory a run wrote (by default under ./specdec-runs/).")
    try:
        report = _read_json(rp)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).split("\n")[0]
        raise OpenRunError(f"--open {raw}: report.json cannot be read ({why}); it is damaged. Its report.md and "
                           "the step logs are still there to read as files.") from None
    schema = report.get("schema") if isinstance(report, dict) else None
    if not isinstance(schema, str) or not schema.startswith(REPORT_SCHEMA_PREFIX):
        raise OpenRunError(f"--open {raw}: report.json is not a specdec-tui report (schema {schema!r}, expected "
                           f"{REPORT_SCHEMA_PREFIX}1). Give the directory of a specdec-tui run.")
    from .core.store.rundir import state_problem
    from .core.store.schema import report_problem

    problem = report_problem(report)
    if problem:
        raise OpenRunError(f"--open {raw}: report.json is damaged: {problem}. Nothing was opened and the file is left "
                           "as it is; its report.md and the step logs are still there to read as files.")
    if not isinstance(report.get("steps"), list):
        raise OpenRunError(f"--open {raw}: report.json has no list of steps; it is damaged or from another tool.")
    notes: list[str] = []
    state, problem = state_problem(d)
    if problem:
        raise OpenRunError(f"--open {raw}: {problem}. Nothing was opened and the file is left as it is; the run's "
                           "report.md and the step logs are still there to read as files.")
    profile = None
    if (d / "profile.toml").is_file():
        try:
            profile = load_profile(str(d / "profile.toml"))
        except ProfileError as exc:
            notes.append(f"profile.toml does not load in this version ({exc}); the steps come from report.json.")
    return ClosedRun(d, report, state, profile, plan_of(report, profile), notes)


def plan_of(report: dict[str, Any], profile: Profile | None) -> StepPlan:
    """The steps to show: the profile's (its titles), unless the report lists steps the profile does not
    have (a profile edited since, or one that no longer loads): then the report's own."""
    ids = [s["id"] for s in report.get("steps") or []]
    requested = [s for s in report.get("requested_steps") or ids if isinstance(s, str)]
    if profile is not None:
        plan = plan_for(profile, requested)
        if set(ids) <= set(plan.run_steps):
            return plan
    matrix = report.get("matrix") if isinstance(report.get("matrix"), dict) else None
    arms = {a["id"]: a for a in (matrix or {}).get("arms") or [] if isinstance(a, dict) and a.get("id")}
    titles = {PROFILE_STEP: "Profile"}
    pane_titles = {PROFILE_STEP: "Profile"}
    for sid in ids:
        a = arms.get(sid)
        t = STEP_TITLES.get(sid) if a is None or a.get("kind") == "baseline" else str(a.get("title") or sid)
        titles[sid] = (t or sid) if len(t or sid) <= 15 else (t or sid)[:14] + "…"
        pane_titles[sid] = STEP_TITLES.get(sid, f"{t} server" if a is not None else sid)
    launch = tuple(s for s in ids if s in arms or s in ("baseline", "eagle3"))
    return StepPlan((PROFILE_STEP, *ids), titles, pane_titles, launch, tuple(s for s in ids if s in requested) or
                    tuple(ids), matrix is not None)


def log_files(run_dir: Path, sid: str, workloads: list[str] | None = None) -> list[Path]:
    """A step's saved logs: `{step}.serve.log`, then `{step}.bench.log` or `{step}.{workload}.r{i}.bench.log`
    (by workload, in the run's order of `workloads`, then by repeat)."""
    rank = {w: i for i, w in enumerate(workloads or [])}
    out = []
    serve = run_dir / f"{sid}.serve.log"
    if serve.is_file():
        out.append(serve)
    bench = run_dir / f"{sid}.bench.log"
    if bench.is_file():
        out.append(bench)

    def order(p: Path) -> tuple[int, str, int, str]:
        parts = p.name[len(sid) + 1:].split(".")  # workload, r{i}, bench, log
        rep = parts[1][1:] if len(parts) > 1 and parts[1].startswith("r") else ""
        return (rank.get(parts[0], len(rank)), parts[0], int(rep) if rep.isdigit() else 0, p.name)

    extra = [p for p in run_dir.glob(f"{sid}.*.bench.log") if p.is_file() and p not in out]
    extra += [p for p in run_dir.glob(f"{sid}.*.probe.log") if p.is_file() and p not in out]
    return out + sorted(extra, key=order)


def read_tail(path: Path, max_lines: int) -> list[str]:
    """The last `max_lines` lines of a log file (undecodable bytes replaced)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - MAX_LOG_BYTES))
            data = f.read()
    except OSError as exc:
        return [f"(cannot read {path.name}: {exc.strerror or exc})"]
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[-max_lines:]


def _split_ts(line: str) -> tuple[float, str]:
    m = LOG_TS_RE.match(line)
    if not m:
        return 0.0, line
    h, mi, s, ms = (int(x) for x in m.groups())
    return h * 3600 + mi * 60 + s + ms / 1000.0, line[m.end():]


def make_log_loader(max_lines: int, speculative_steps: set[str], platform: str | None = None):
    """A loader for LaunchPane.page_log: a serve log is replayed through the engine's own log pipeline (the
    rank-collapsed ×N view, errors marked); other logs are shown as they are."""

    def load(path: Path, lv: Any) -> None:
        lines = read_tail(path, max_lines)
        if path.name.endswith(".serve.log"):
            from .core.serverlog.logwatch import ServeLogWatcher

            sid = path.name[: -len(".serve.log")]
            raw: list[str] = []
            clean: list[tuple[int, str, bool, int]] = []
            ranks: dict[int, int] = {}

            def sink(e: ev.Event) -> None:
                if isinstance(e, ev.CleanLog):
                    clean.append((e.line_id, e.text, e.is_error, e.ranks))
                elif isinstance(e, ev.LogRanks):
                    ranks[e.line_id] = e.ranks

            watcher = ServeLogWatcher(sink, sid, sid in speculative_steps, verbose_lines=False, platform=platform)
            for line in lines:
                ts, text = _split_ts(line)
                raw.append(text)
                if text.startswith("# "):  # the command header the engine writes
                    continue
                watcher.on_line(text, ts)
            lv.add_raw(raw)
            lv.add_clean(clean)
            lv.set_ranks(ranks)
        else:
            lv.add_raw([_split_ts(x)[1] for x in lines])
            lv.add_clean([(i, _split_ts(x)[1], False, 1) for i, x in enumerate(lines)])

    return load


# -- filling the app ------------------------------------------------------------------------------------------
def _facts_from(items: Any, sid: str) -> list[ev.Fact]:
    out = []
    for f in items or []:
        if isinstance(f, dict) and isinstance(f.get("name"), str):
            status = f.get("status") if f.get("status") in ("pass", "warn", "fail", "info") else "info"
            out.append(ev.Fact(sid, f["name"], str(f.get("value", "")), status, str(f.get("detail") or ""),
                               str(f.get("remedy") or "")))
    return out


def _artifact_facts(run: ClosedRun, name: str, sid: str) -> list[ev.Fact]:
    try:
        doc = _read_json(run.path / name)
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    return _facts_from(doc.get("facts") if isinstance(doc, dict) else None, sid)


def _dataset_facts(run: ClosedRun) -> list[ev.Fact]:
    f = run.step_facts("dataset")
    if not f:
        return []
    out = []
    if f.get("source"):
        out.append(ev.Fact("dataset", "source", str(f["source"]), "pass", "as the run fetched it"))
    if f.get("bytes") is not None:
        out.append(ev.Fact("dataset", "size", f"{f['bytes']} bytes", "info", str(f.get("path") or "")))
    if f.get("sha256"):
        out.append(ev.Fact("dataset", "sha256", "verified" if f.get("verified") else "not verified",
                           "pass" if f.get("verified") else "info", str(f["sha256"])))
    if f.get("lines") is not None:
        out.append(ev.Fact("dataset", "lines", str(f["lines"]), "info",
                           "lines of text the benchmark samples prompts from"))
    return out


def _launch_events(run: ClosedRun, sid: str) -> list[ev.Event]:
    """What a server step's pane shows of a finished run: its phases, command, smoke test and bench numbers."""
    f = run.step_facts(sid)
    out: list[ev.Event] = []
    for ph in ((f.get("startup") or {}).get("phases") or []):
        if isinstance(ph, dict) and isinstance(ph.get("phase"), str):
            secs = ph.get("seconds") if isinstance(ph.get("seconds"), (int, float)) else 0.0
            rep = ph.get("reported_s")
            detail = f"log reports {rep:.1f}s" if isinstance(rep, (int, float)) else ""
            out.append(ev.Phase(sid, ph["phase"], "started", 0.0, "", ts=0.0))
            out.append(ev.Phase(sid, ph["phase"], "failed" if ph.get("failed") else "finished", float(secs or 0.0),
                                detail, ts=0.0))
    try:
        cmd = (run.path / f"{sid}.command.sh").read_text(encoding="utf-8")
        text = "\n".join(ln for ln in cmd.splitlines() if not ln.startswith("#!")).strip()
        if text:
            out.append(ev.Command(sid, "serve", tuple(text.split()), text))
    except (OSError, UnicodeDecodeError):
        pass
    smoke = f.get("smoke") or {}
    if isinstance(smoke, dict) and "passed" in smoke:
        out.append(ev.Fact(sid, "smoke test", repr(smoke.get("text", "")), "pass" if smoke.get("passed") else "fail",
                           str(smoke.get("why") or "")))
        if "matches_baseline" in smoke:
            same = bool(smoke["matches_baseline"])
            out.append(ev.Fact(sid, "lossless check", "same as baseline" if same else "differs from baseline",
                               "pass" if same else "warn"))
    reps = f.get("repeats")
    per = {w: [r for r in v if isinstance(r, dict)] for w, v in reps.items() if isinstance(v, list)} \
        if isinstance(reps, dict) else {}
    per = {w: v for w, v in per.items() if v}
    if per:
        # A tune arm benched each workload `repeats` times: every repeat's numbers, labelled with its workload and
        # repeat; the pane shows the first (and the one whose log file [ / ] pages to).
        names = tuple(per)
        for w, recs in per.items():
            for i, rec in enumerate(recs, 1):
                out.append(ev.ArmProgress(sid, w, i, len(recs), names))
                out.extend(_bench_facts(sid, rec))
        n = sum(len(v) for v in per.values())
        first = names[0]
        out.append(ev.ArmProgress(sid, first, 1, len(per[first]), names))
        out.extend(_bench_facts(sid, per[first][0]))
        out.append(ev.Notice(sid, "info", f"{n} bench {'run' if n == 1 else 'runs'} on {', '.join(names)}: "
                                          "[ ] pages through their log files and numbers; the numbers with their "
                                          "intervals are on the Results pane"))
        return out
    bench = f.get("bench") or (run.report.get("runs") or {}).get(sid) or {}
    out.extend(_bench_facts(sid, bench))
    return out


def _bench_facts(sid: str, bench: Any) -> list[ev.Event]:
    """One bench result's numbers as the facts a server step's Bench line shows."""
    out: list[ev.Event] = []
    if isinstance(bench, dict) and bench:
        if bench.get("completed") is not None:
            out.append(ev.Fact(sid, "requests", f"{bench.get('completed')} completed, {bench.get('failed', 0)} failed",
                               "pass" if not bench.get("failed") else "warn"))
        if isinstance(bench.get("output_throughput"), (int, float)):
            out.append(ev.Fact(sid, "output throughput", f"{bench['output_throughput']:.2f} tok/s", "pass"))
        t, tt = bench.get("median_tpot_ms"), bench.get("median_ttft_ms")
        if isinstance(t, (int, float)) and isinstance(tt, (int, float)):
            out.append(ev.Fact(sid, "median TPOT / TTFT", f"{t:.2f} ms / {tt:.2f} ms", "pass"))
        ar, al = bench.get("acceptance_rate"), bench.get("acceptance_length")
        if isinstance(ar, (int, float)):
            out.append(ev.Fact(sid, "acceptance", f"{ar:.2f}%" + (f" (length {al:.2f})" if isinstance(al, (int, float))
                                                                   else ""), "pass"))
    return out


def _results_events(run: ClosedRun) -> list[ev.Event]:
    rep = run.report
    out: list[ev.Event] = []
    if run.tune:
        out.append(ev.MatrixTable("results", rep["matrix"]))
        if isinstance(rep.get("load"), dict):  # a concurrency sweep: the charts view's speedup vs concurrency
            out.append(ev.LoadTable("results", rep["load"]))
        return out
    runs = rep.get("runs") or {}
    if runs:
        from .core.results.report import comparison_rows

        try:
            rows = comparison_rows({"runs": runs})
        except Exception:  # a report from another version: show what can be shown
            rows = []
        notes = ("ITL is measured per streamed chunk: under EAGLE3 a chunk carries several tokens, so compare the "
                 "runs by TPOT and output throughput.",)
        out.append(ev.ComparisonTable("results", tuple(tuple(r) for r in rows), rep.get("comparison") or {}, notes,
                                      runs))
    try:
        snippet = (run.path / "comparison.txt").read_text(encoding="utf-8").rstrip("\n")
        if snippet:
            out.append(ev.Snippet("results", snippet))
    except (OSError, UnicodeDecodeError):
        pass
    return out


def saved_timeseries(run: ClosedRun) -> dict[tuple[str, str], list[Any]]:
    """Each bench's /metrics windows, {(arm, bench key): [each repeat's timeseries]}: from report.json's
    "timeseries" ({arm: {key: [{"repeat": r, "windows": [...]}, ...]}}, results/report.py timeseries_of) where the
    report has it, else from the arms' repeat facts in state.json (facts["repeats"][key][i]["timeseries"])."""
    out: dict[tuple[str, str], list[Any]] = {}
    saved = run.report.get("timeseries")
    if isinstance(saved, dict) and saved:
        for arm, keys in saved.items():
            for key, reps in (keys.items() if isinstance(keys, dict) else ()):
                if isinstance(reps, list) and reps:
                    out[(str(arm), str(key))] = [r for r in reps if isinstance(r, (dict, list))]
        return out
    for sid in run.plan.launch:
        reps = run.step_facts(sid).get("repeats")
        for key, recs in (reps.items() if isinstance(reps, dict) else ()):
            series = [r.get("timeseries") for r in recs or [] if isinstance(r, dict) and r.get("timeseries")]
            if series:
                out[(sid, key)] = series
    return out


def show_closed_run(app: Any, run: ClosedRun) -> None:
    """Fill the app's panes from the closed run (called once, on mount)."""
    from tui.screens.launch import LaunchPane
    from tui.screens.profile import ProfilePane
    from tui.screens.results import export_paths

    plan = app.plan
    app.query_one(ProfilePane).lock_profile()
    app.query_one(ProfilePane).set_hint("read-only: a finished run opened with --open (w saves its profile)")
    app.set_step_status(PROFILE_STEP, "passed", 0.0, run.report.get("profile") or "")
    by_id = {s["id"]: s for s in run.report.get("steps") or []}
    events: dict[str, list[ev.Event]] = {
        "env": _artifact_facts(run, "env.json", "env"),
        "checkpoints": _artifact_facts(run, "checkpoints.json", "checkpoints"),
        "dataset": _dataset_facts(run),
        "results": _results_events(run),
    }
    spec_steps = {s for s in plan.launch if s != "baseline"}
    loader = make_log_loader(app.max_log_lines, spec_steps, run.profile.platform if run.profile else None)
    for sid in plan.launch:
        events[sid] = _launch_events(run, sid)
    for sid in plan.run_steps:
        pane = app.pane(sid)
        for e in events.get(sid, []):
            pane.handle(e)
        if isinstance(pane, LaunchPane):
            pane.timeline.end()
            pane.show_closed(run.log_files(sid), loader)
    for d in run.report.get("diagnostics") or []:
        if not isinstance(d, dict) or not d.get("id"):
            continue
        diag = ev.Diagnosis(str(d.get("step") or ""), str(d["id"]), d.get("severity") or "info",
                            str(d.get("title") or d["id"]), tuple(str(x) for x in d.get("evidence") or ()),
                            str(d.get("remedy") or ""), str(d.get("setting") or ""), str(d.get("suggest") or ""))
        app.results_pane.add_diagnosis(diag)
        if diag.step in plan.run_steps and diag.step != "results":
            app.pane(diag.step).note_problem(diag)
            app.pane(diag.step).handle(diag)
    for sid in plan.run_steps:
        st = by_id.get(sid)
        if st is None:
            continue
        status = st.get("status") if st.get("status") in ev.StepStatus._value2member_map_ else "pending"
        secs = st.get("seconds") if isinstance(st.get("seconds"), (int, float)) else None
        app.set_step_status(sid, status, secs, str(st.get("summary") or ""))
    if run.tune and hasattr(app.results_pane, "set_timeseries"):
        series = saved_timeseries(run)
        if series:
            app.results_pane.set_timeseries(series)
    paths = {k: v for k, v in export_paths(run.path / "report.json").items() if v.is_file()}
    app.results_pane.set_exports(paths, final=True)
    for note in run.notes:
        app.notify(note, severity="warning", timeout=10)


__all__ = ["ClosedRun", "OpenRunError", "open_run", "show_closed_run", "saved_timeseries", "log_files", "read_tail"]
