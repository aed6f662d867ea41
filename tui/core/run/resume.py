"""A run continued in the same directory: the facts restored from state.json, the result files checked
against what state.json recorded, and which arms are kept. A part of the Engine (run/engine.py), kept apart
for its size."""

from __future__ import annotations

from typing import Any

from tui.core.plan.arms import arms_of, fingerprint, is_tune, result_name, run_steps
from tui.core.store.rundir import result_file_problem
from tui.core.steps.base import StepResult
from tui.core.bench.benchparse import parse_result_json
from tui.core.steps.bench import bench_facts
from tui.core.bench import metrics as mx
from tui.core.store.rundir import file_digest
from tui.core.results.contamination import usable_repeats


class Resume:
    """Engine methods (the Engine inherits them; `self` is the Engine)."""

    def _restore_facts(self) -> None:
        """ctx.shared from state.json; a server step that passed but whose facts lack the bench numbers gets
        them from its result file on disk (results already saved are never dropped from the report)."""
        for sid, st in self.run.state.get("steps", {}).items():
            if not (isinstance(st, dict) and st.get("status") in ("passed", "warned")):
                continue
            facts = dict(st["facts"]) if isinstance(st.get("facts"), dict) else {}
            if sid in ("baseline", "eagle3") and not isinstance(facts.get("bench"), dict):
                result = self.run.file(f"{sid}.json")
                if result.is_file():
                    try:
                        res = parse_result_json(result)
                        spec = None
                        if res.spec is not None:
                            b = res.spec
                            spec = mx.SpecStats(b.acceptance_rate, b.acceptance_length, b.num_drafts, b.draft_tokens,
                                                b.accepted_tokens, list(b.per_position))

                        facts["bench"] = dict(bench_facts(res, spec, "bench" if spec else None),
                                              result_file=str(result), **file_digest(result))
                    except Exception:
                        pass
            self.ctx.shared[sid] = facts

    def _result_problems(self, sid: str, facts: dict[str, Any]) -> list[tuple[str, str, str, str | None, int]]:
        """[(what, file name, why, workload, repeat)] for each result file of arm `sid` that state.json records
        numbers for and that is missing or changed since (checked against its recorded sha256 and size)."""
        out: list[tuple[str, str, str, str | None, int]] = []
        if is_tune(self.profile):
            repeats = facts.get("repeats") if isinstance(facts.get("repeats"), dict) else {}
            for wl, recs in repeats.items():
                for r, rec in enumerate(recs if isinstance(recs, list) else [], start=1):
                    name = result_name(self.profile, sid, str(wl), r)
                    why = result_file_problem(self.run.path, name, rec if isinstance(rec, dict) else None)
                    if not why and isinstance(rec, dict) and not usable_repeats([rec]):  # another client's work
                        why = (f"was contaminated ({(rec.get('contaminated') or {}).get('text') or 'another client'}"
                               "; it is set aside as " + name + ".contaminated)")
                    if why:
                        out.append((f"{wl} repeat {r} ", name, why, str(wl), r))
        elif isinstance(facts.get("bench"), dict):
            name = result_name(self.profile, sid, "", 1)
            why = result_file_problem(self.run.path, name, facts["bench"])
            if why:
                out.append(("", name, why, None, 1))
        return out

    def _plan_continuation(self) -> list[str]:
        """A run continued in the same directory (--run-dir). Returns the arms kept.

        A tune run goes on where it stopped: every requested arm that finished there with the same fingerprint
        (server argv, benchmark, workloads, repeats) and whose result files are all there as state.json recorded
        them (sha256 and size) is kept, results and all, and not run again. Only arms: the checks before them are
        cheap and are run again. A result file missing or changed is named; its arm runs again and benchmarks
        only the repeats whose files are gone or changed (the others are kept: ctx.runtime["resume"]).

        An arm not requested now (--steps) whose numbers the results step would read back from state.json is
        checked the same way: with a missing or changed file it is run again when the results step is requested,
        else its numbers are not used."""
        tune = is_tune(self.profile)
        kept: list[str] = []
        added: list[str] = []
        resume: dict[str, dict[str, Any]] = {}
        for arm in arms_of(self.profile):
            st = (self.run.state.get("steps") or {}).get(arm.id)
            if not isinstance(st, dict) or st.get("status") not in ("passed", "warned"):
                continue
            facts = st.get("facts") if isinstance(st.get("facts"), dict) else {}
            requested = arm.id in self.steps
            same = tune and facts.get("fingerprint") == fingerprint(self.profile, arm) and bool(facts.get("repeats"))
            if requested and not same:
                continue  # run again from scratch: a two-arm run's server steps, or an arm with other settings
            problems = self._result_problems(arm.id, facts)
            if not problems:
                if requested:
                    summary = str(st.get("summary") or "")
                    self.results[arm.id] = StepResult(st["status"], summary, dict(facts))
                    self.ctx.shared[arm.id] = dict(facts)
                    kept.append(arm.id)
                continue
            if requested or "results" in self.steps:
                if not requested:
                    added.append(arm.id)
                if same:  # only the repeats whose files are gone or changed are benchmarked again
                    bad = {(wl, r) for _, _, _, wl, r in problems}
                    resume[arm.id] = {"fingerprint": facts.get("fingerprint"), "repeats": {
                        str(wl): {r: rec for r, rec in enumerate(recs, start=1)
                                  if (wl, r) not in bad and isinstance(rec, dict)}
                        for wl, recs in (facts.get("repeats") or {}).items() if isinstance(recs, list)}}
                action = "running it again" if same else ("running the arm again" if tune else "running the step again")
            else:
                self.ctx.shared.pop(arm.id, None)
                action = (f"its numbers are not used (run it again: --steps {arm.id},results with the same "
                          "--run-dir)")
            for what, name, why, _, _ in problems:
                self._file_notices.append(f"{arm.id}: {what}result file {name} {why} → {action}")
        if added:
            wanted = set(self.steps) | set(added)
            self.steps = [sid for sid in run_steps(self.profile) if sid in wanted]
        if resume:
            self.ctx.runtime["resume"] = resume
        self.ctx.runtime["todo"] = [sid for sid in self.steps if sid not in kept]
        return kept
