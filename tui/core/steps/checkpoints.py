"""Step `checkpoints`: can both checkpoints be fetched, do they fit on disk, and do they belong together?

For the target (`models.target`) and the draft (`speculative.model` or `models.draft`): fetch
`config.json` and `model_info(files_metadata=True)` (commit, gated/private, size), or read a local
directory: its config.json and the safetensors headers (tensor names and shapes; no weights are loaded,
no hub call is made). Model paths may carry placeholders ({cache_dir}, ...). A local directory that does
not exist yet is first created by `models.prepare` (argv, placeholders incl. {vllm_python} resolved; its
output streams as LogLine/Progress events and goes to checkpoints.prepare.log).

Both draft layouts vLLM loads are understood: the RedHatAI "speculators" layout (speculators_model_type,
transformer_layer_config, speculators_config.verifier, draft_vocab_size; tensors layers.0.*, norm, fc,
lm_head, d2t/t2d) and the EAGLE repo layouts (EAGLE3: LlamaForCausalLMEagle3, midlayer.*; EAGLE-1: a plain
one-layer LlamaForCausalLM with fc over 2 × hidden; the target is named only by convention).

Then it checks, before any compile, what makes speculation silently useless (acceptance length ≈ 1.0, the
tutorial's "acceptance rate is 0%") or kills the engine on the first request: draft type vs
`speculative.method`, the draft's verifier vs the target, hidden size, vocabulary (target vocab vs
draft_vocab_size and the d2t mapping), and the EAGLE3 aux hidden-state layers (the draft's
eagle_aux_hidden_state_layer_ids, or vLLM's default (2, L//2, L-3), must give as many distinct layers of
the target as the draft's fc takes). Also notes the target's MXFP4 quantization_config and whether the
profile clears it with --hf-overrides, and refuses what vLLM would refuse at startup for the models' shape
(tui/core/host/modelshape.py: TP against the attention / KV heads of target and draft, max_model_len against the
derived positions, PP against the layers); the shapes go into the step's facts as `model_shape` for the
Profile pane's as-you-type checks. A tune run's other drafts (`[tune.drafts]`) get the same checks, each
fact named with the draft's name ("draft checkpoint (redhat)"), so a typo fails here, before any launch.

Hub settings come from `ctx.environ` (HF_ENDPOINT, HF_TOKEN, HF_HOME/HF_HUB_CACHE, HF_HUB_OFFLINE,
HF_HUB_ETAG_TIMEOUT), see tui.core.host.hub. Writes checkpoints.json; tokens never reach a fact or a file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import shlex
from typing import Any

from tui.core.serverlog import diagnostics as dg
from tui.core.host import modelshape as ms
from tui.core.plan.commands import format_command
from tui.core.events import Artifact, Command, LogLine, Progress
from tui.core.plan.build import prepare_argv
from tui.core.host.hub import HubFailure, HubSettings, ModelProbe, hub_settings, looks_local, probe_model
from tui.core.secrets import scrub, scrub_obj
from tui.core.host.interpreter import find_server_interpreter, server_launch_env
from tui.core.host.sysinfo import fmt_bytes, free_bytes, free_space, version_tuple
from tui.core.proc.child import wait_child
from tui.core.proc.supervisor import ManagedProcess
from tui.core.steps.base import FactRecorder, StepContext, StepResult
from tui.core.steps.checkpoint_rules import (
    SHAPE_FACTS, _Facts, _compat_facts, _describe_config, _layout_fact, _model_facts, _quant_facts, _shape_facts,
)
from tui.core.steps.checkpoint_layout import _draft_fields, _target_fields, verifier_match


STEP = "checkpoints"


# The draft<->target checks (a failing one raises the draft-target-mismatch diagnosis).
COMPAT_FACTS = ("draft type", "draft verifier", "hidden size", "vocab size", "vocab mapping", "aux layers")


# Tests replace this to pretend a disk is full or huge: (path) -> (free bytes or None, existing path measured). The
# environment step measures with the same function and words the figure the same way (sysinfo.free_space).
disk_free = free_bytes


def _disk_fact(f: _Facts, ctx: StepContext, hs: HubSettings, probes: list[ModelProbe]) -> dict[str, Any]:
    hub_probes = [p for p in probes if p.source == "hub" and p.failure is None]
    unknown = [p.name for p in hub_probes if p.size_bytes is None]
    needed = sum(max(0, (p.size_bytes or 0) - p.cached_bytes) for p in hub_probes)
    free, measured = disk_free(hs.cache_dir)
    value, where = free_space(free, hs.cache_dir, measured)
    if free is None:
        f.add("disk space", "not checked", "warn", f"cannot measure free space: {where}")
        return {"cache_dir": str(hs.cache_dir), "needed_bytes": needed, "free_bytes": None}
    info = {"cache_dir": str(hs.cache_dir), "measured_at": str(measured), "needed_bytes": needed,
            "free_bytes": free}
    if any(p.failure is not None for p in probes if p.source == "hub") or unknown:
        why = "sizes unknown (offline mode)" if unknown else "a checkpoint could not be looked up"
        f.add("disk space", value, "info", f"{why}; {where}")
        return info
    if not hub_probes:
        f.add("disk space", "nothing to download", "pass", "both checkpoints are local directories")
        return info
    text = f"{value}, {fmt_bytes(needed)} to download"
    if free >= needed:
        f.add("disk space", text, "pass", where)
    else:
        f.add("disk space", text, "fail", where + f"; short by {fmt_bytes(needed - free)}",
              "Free space there, or point HF_HOME (or HF_HUB_CACHE) at a volume with "
              f"at least {fmt_bytes(needed)} free, for this app and for vLLM.")
    return info


PREPARE_TIMEOUT_S = 3600.0  # tests lower it


PREPARE_LOG = "checkpoints.prepare.log"


_PCT_RE = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d+)?)\s?%")


_FRAC_RE = re.compile(r"(?<![\d/])(\d+)\s?/\s?(\d+)(?![\d/])")


def _model_paths(ctx: StepContext) -> list[tuple[str, str]]:
    """(profile key, resolved value) of every model the step checks or vLLM loads."""
    m, sp = ctx.profile.data["models"], ctx.profile.data["speculative"]
    out = [("models.target", m["target"]), ("models.draft", m["draft"])]
    if sp.get("model"):
        out.append(("speculative.model", sp["model"]))
    for d in (ctx.profile.tune.drafts if ctx.profile.tune is not None else ()):
        out.append((f"tune.drafts.{d.name}.model", d.model))
    return [(k, ctx.ph.resolve(v)) for k, v in out]


def _missing_local(ctx: StepContext) -> list[tuple[str, str]]:
    seen: set[str] = set()
    out = []
    for key, path in _model_paths(ctx):
        if looks_local(path) and not os.path.isdir(os.path.expanduser(path)) and path not in seen:
            seen.add(path)
            out.append((key, path))
    return out


def _vllm_python(ctx: StepContext) -> tuple[str | None, str]:
    """The interpreter that owns the server command's `vllm` (env step's fact, else found now)."""
    vp = (ctx.shared.get("env") or {}).get("vllm_python") or getattr(ctx.ph, "vllm_python", "") or ""
    if not vp:
        env = server_launch_env(ctx.profile, ctx.ph, ctx.environ)
        it = find_server_interpreter(ctx.ph.resolve(ctx.profile.server.command[0]), env)
        if not it.python:
            return None, it.error or "no interpreter found"
        vp = it.python
    if hasattr(ctx.ph, "vllm_python"):
        try:
            setattr(ctx.ph, "vllm_python", vp)
        except (AttributeError, TypeError):  # a frozen Placeholders: resolve it ourselves below
            pass
    return vp, ""


_FRAME_RE = re.compile(r'^\s*File ".*", line \d+')


def _tail_lines(lines: list[str], n: int = 5) -> list[str]:
    """The last n non-empty lines of a child's output with Python traceback frames left out (the exception
    line itself stays): a fact is one paragraph, never a traceback."""
    out: list[str] = []
    in_tb = False
    for raw in lines:
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.startswith("Traceback (most recent call last)"):
            in_tb = True
            continue
        if in_tb and (line[:1].isspace() or _FRAME_RE.match(line)):
            continue
        in_tb = False
        out.append(line.strip())
    return out[-n:]


def _progress_pct(line: str) -> float | None:
    m = _PCT_RE.search(line)
    if m and float(m.group(1)) <= 100:
        return float(m.group(1))
    m = _FRAC_RE.search(line)
    if m and 0 < int(m.group(2)) and int(m.group(1)) <= int(m.group(2)):
        return 100.0 * int(m.group(1)) / int(m.group(2))
    return None


async def _prepare(ctx: StepContext, f: _Facts, secrets: tuple[str, ...]) -> dict[str, Any] | None:
    """Run models.prepare when a local model directory is missing. None when there was nothing to run."""
    argv_raw = [str(a) for a in (ctx.profile.data["models"].get("prepare") or [])]
    missing = _missing_local(ctx)
    if not missing or not argv_raw:
        return None
    wanted = ", ".join(f"{k} = {p}" for k, p in missing)
    info: dict[str, Any] = {"missing": [p for _, p in missing], "argv": None, "exit_code": None, "log": PREPARE_LOG}
    vp = ""
    if any("{vllm_python}" in a for a in argv_raw):
        found, err = _vllm_python(ctx)
        if not found:
            f.add("model prepare", "no {vllm_python}", "fail",
                  f"models.prepare uses {{vllm_python}} (the interpreter of the server command's vllm) to create "
                  f"{wanted}, but it cannot be found: {err}",
                  "Install vLLM so that server.command[0] resolves on PATH, or write the interpreter's path into "
                  "models.prepare.")
            return info
        vp = found
    argv = [a.replace("{vllm_python}", vp) if vp else a for a in prepare_argv(ctx.profile, ctx.ph)]
    shown = scrub(shlex.join(argv), secrets)
    info["argv"] = shown
    ctx.emit(Command(STEP, "tool", tuple(argv), format_command(argv)))
    done_pct = 0.0

    def on_line(text: str, ts: float) -> None:
        nonlocal done_pct
        line = scrub(text, secrets)
        ctx.emit(LogLine(STEP, line, source="prepare", ts=ts))
        pct = _progress_pct(line)
        if pct is not None:
            done_pct = max(done_pct, pct)
        ctx.emit(Progress(STEP, "prepare", done_pct, 100.0, "%", description=f"models.prepare: {line.strip()[:60]}"))

    ctx.emit(Progress(STEP, "prepare", 0.0, 100.0, "%", description="models.prepare"))
    proc = ManagedProcess(argv, dict(ctx.environ), ctx.run.path / PREPARE_LOG, on_line=on_line,
                          cwd=str(ctx.run.path), grace_s=5.0)
    try:
        await proc.start()
    except OSError as exc:  # FileNotFoundError: not on PATH / not executable
        f.add("model prepare", "cannot start", "fail",
              f"models.prepare `{shown}` (to create {wanted}) cannot start: {exc}",
              "Fix models.prepare[0] (a program on PATH or a path; placeholders such as {vllm_python} resolve).")
        ctx.emit(Progress(STEP, "prepare", 100.0, 100.0, "%", description="models.prepare", done=True))
        return info
    ctx.cleanups.append(proc)
    ctx.emit(Artifact(STEP, PREPARE_LOG, str(ctx.run.path / PREPARE_LOG)))
    rc, timed_out = await wait_child(proc, PREPARE_TIMEOUT_S)
    output = list(proc.tail)  # before the stop signal adds its own noise
    rc_final = await proc.stop(grace_s=0.5 if not timed_out else 5.0)  # closes the log; ends leftover children
    ctx.forget(proc)
    rc = rc if rc is not None else rc_final
    info["exit_code"] = rc
    ctx.emit(Progress(STEP, "prepare", 100.0, 100.0, "%", description="models.prepare", done=True))
    tail = [scrub(t, secrets) for t in _tail_lines(output)]
    last = (" Last lines: " + " | ".join(tail)) if tail else " It printed nothing."
    if timed_out or rc != 0:
        what = f"did not finish within {PREPARE_TIMEOUT_S:g} s and was stopped" if timed_out else \
            f"exited with code {rc}"
        f.add("model prepare", "timed out" if timed_out else f"exit code {rc}", "fail",
              f"models.prepare `{shown}` (run because {wanted} does not exist) {what}.{last}",
              f"Fix what the output says (full output in {PREPARE_LOG} of the run directory) and retry, or create "
              "the directories yourself, or point the profile at existing checkpoints.")
        return info
    still = [(k, p) for k, p in missing if not os.path.isdir(os.path.expanduser(p))]
    if still:
        f.add("model prepare", "directories still missing", "fail",
              f"models.prepare `{shown}` exited with code 0 but did not create "
              + ", ".join(f"{k} = {p}" for k, p in still) + f".{last}",
              "Make models.prepare write exactly the directories models.target / models.draft / speculative.model "
              "name (same placeholders), or fix those paths.")
        return info
    f.add("model prepare", f"created {len(missing)} director{'y' if len(missing) == 1 else 'ies'}", "pass",
          f"models.prepare `{shown}` (exit code 0) created {wanted}")
    return info


_HUB_WIDE = ("timeout", "dns", "refused", "proxy", "network", "offline")


def _shared_failure(a: ModelProbe, b: ModelProbe) -> HubFailure | None:
    if a.source != "hub" or b.source != "hub" or a.failure is None or b.failure is None:
        return None
    fa, fb = a.failure, b.failure
    if fa.kind in _HUB_WIDE and fa.kind == fb.kind and fa.value == fb.value:
        detail = fa.detail.replace(f"{a.repo_id}/config.json", "the config.json files")
        remedy = fa.remedy.replace(f"`hf download {a.repo_id}`", f"`hf download {a.repo_id}` and `hf download {b.repo_id}`")
        return HubFailure(fa.kind, fa.value, detail, remedy)
    return None


class _Named(_Facts):
    """The facts of one [tune.drafts] draft: each name carries the draft's, e.g. "draft type (redhat)"."""

    def __init__(self, f: _Facts, name: str):
        super().__init__(f.rec, f.secrets)
        self.suffix = f" ({name})"

    def add(self, name: str, value: Any, status: str, detail: str = "", remedy: str = "") -> None:
        super().add(name + self.suffix, value, status, detail, remedy)


def _tune_drafts(ctx: StepContext, main_draft: str) -> list[tuple[str, str, str]]:
    """[(name, resolved model, method)] of the [tune.drafts] a tune run's arms load, other than the profile's own
    draft with its own method (checked already)."""
    t = ctx.profile.tune
    if t is None:
        return []
    method = ctx.profile.speculative.method
    out = []
    for d in t.drafts:
        model, m = ctx.ph.resolve(d.model), d.method or method
        if (model, m) != (main_draft, method):
            out.append((d.name, model, m))
    return out


def _tune_draft_facts(f: _Facts, ctx: StepContext, hs: HubSettings, name: str, method: str, probe: ModelProbe,
                      target: ModelProbe, tf: dict[str, Any] | None, realigned: bool | None
                      ) -> tuple[list[str], list[str], dict[str, Any]]:
    """The checks of the profile's own draft, for one [tune.drafts] draft: reachable (a typo is named here,
    before any launch), its config and layout, compatible with the target for its method, and its shape
    against the TP. Returns (shape refusals, compatibility evidence, its checkpoints.json entry)."""
    nf = _Named(f, name)
    _model_facts(nf, "draft", probe, hs)
    df = _draft_fields(probe.config, probe.tensors, probe.name) if probe.config is not None else None
    entry = dict(probe.as_json(), config=df, method=method)
    if df is None:
        return [], [], entry
    nf.add("draft config", _describe_config("draft", df), "info", "from config.json")
    _layout_fact(nf, probe, df)
    mismatch: list[str] = []
    if tf is not None:
        sub = dataclasses.replace(ctx, profile=ctx.profile.with_values({"speculative.method": method}))
        before = len(f.rec.facts)
        if not _compat_facts(nf, sub, target, probe, tf, df):
            mismatch = [scrub(f"{x.name}: {x.value} — {x.detail}", hs.secrets) for x in f.rec.facts[before:]
                        if x.status == "fail"]
    shape = ms.shape_of(probe.config, probe.name, "draft", realigned)
    entry["model_shape"] = shape
    refused, _ = _shape_facts(nf, ctx, {"draft": shape})
    return refused, mismatch, entry


async def run(ctx: StepContext, *, timeout_s: float | None = None) -> StepResult:
    rec = FactRecorder(ctx, STEP)
    hs = hub_settings(ctx.environ, sim_hub=ctx.ph.sim_hub, timeout_s=timeout_s)
    f = _Facts(rec, hs.secrets)
    target_name = ctx.ph.resolve(ctx.profile.models.target)
    draft_name = ctx.ph.resolve(ctx.profile.draft_model)

    if hs.offline:
        f.add("hub lookups", "offline (HF_HUB_OFFLINE)", "info",
              f"model_info skipped; config.json is read from the local cache {hs.cache_dir}")

    prepare = await _prepare(ctx, f, hs.secrets)  # local model directories that do not exist yet

    tune_drafts = _tune_drafts(ctx, draft_name)  # every draft a tune arm loads is resolved here, before any launch
    target, draft, *tune_probes = await asyncio.gather(
        asyncio.to_thread(probe_model, target_name, hs), asyncio.to_thread(probe_model, draft_name, hs),
        *(asyncio.to_thread(probe_model, model, hs) for _, model, _ in tune_drafts))

    tf = _target_fields(target.config) if target.config is not None else None
    df = _draft_fields(draft.config, draft.tensors, draft.name) if draft.config is not None else None
    shared = _shared_failure(target, draft)
    if shared is not None:
        # The hub itself is unreachable (or offline without a cache): one fact, not one per model.
        f.add("hub", f"{hs.endpoint}: {shared.value}", "fail",
              f"{shared.detail}; needed for {target.name} and {draft.name}", shared.remedy)
    else:
        _model_facts(f, "target", target, hs)
    if tf is not None:
        f.add("target config", _describe_config("target", tf), "info", "from config.json")
    if shared is None:
        _model_facts(f, "draft", draft, hs)
    if df is not None:
        f.add("draft config", _describe_config("draft", df), "info", "from config.json")
        _layout_fact(f, draft, df)

    disk = _disk_fact(f, ctx, hs, [target, draft, *tune_probes])

    compatible = False
    if tf is not None and df is not None:
        compatible = _compat_facts(f, ctx, target, draft, tf, df)
    else:
        missing = [n for n, c in (("target", tf), ("draft", df)) if c is None]
        f.add("compatibility", "not checked", "info",
              f"the {' and '.join(missing)} config.json {'is' if len(missing) == 1 else 'are'} unavailable")
    if tf is not None:
        _quant_facts(f, ctx, tf)
    realigned = ms.yarn_realigned(version_tuple((ctx.shared.get("env") or {}).get("vllm_version")))
    shapes = {"target": ms.shape_of(target.config, target_name, "target", realigned)
              if target.config is not None else None,
              "draft": ms.shape_of(draft.config, draft_name, "draft", realigned) if draft.config is not None else None}
    refused, tp_suggest = _shape_facts(f, ctx, shapes)
    tune_json: dict[str, Any] = {}
    tune_mismatch: list[str] = []
    for (name, _model, method), probe in zip(tune_drafts, tune_probes):
        t_refused, t_mismatch, tune_json[name] = _tune_draft_facts(f, ctx, hs, name, method, probe, target, tf,
                                                                    realigned)
        refused += t_refused
        tune_mismatch += t_mismatch
    if refused:
        diag = dg.make("settings-refused-by-vllm", STEP, refused,
                       advice=" ".join(dict.fromkeys(x.remedy for x in rec.facts if x.status == "fail"
                                                     and x.name.split(" (")[0] in SHAPE_FACTS.values())))
        tp_names = (SHAPE_FACTS[ms.TP_KEY], SHAPE_FACTS[ms.DRAFT_TP_KEY])
        if tp_suggest and all(e.split(":", 1)[0] in tp_names for e in refused):  # one fix: the pane's TP field
            diag = dataclasses.replace(diag, setting=ms.TP_KEY, suggest=tp_suggest)
        ctx.emit(diag)
    # Common-issues diagnoses this step can raise before any compile.
    if tf is not None and df is not None and not compatible:
        evidence = [scrub(f"{x.name}: {x.value} — {x.detail}", hs.secrets) for x in rec.facts
                    if x.status == "fail" and x.name in COMPAT_FACTS]
        ctx.emit(dg.make("draft-target-mismatch", STEP, evidence + tune_mismatch))
    elif tune_mismatch:
        ctx.emit(dg.make("draft-target-mismatch", STEP, tune_mismatch))
    for diag in dg.bf16_rule(STEP, target_name, ctx.profile.server.hf_overrides or {},
                             bool(tf is not None and tf.get("quantization"))):
        ctx.emit(diag)

    target_json = dict(target.as_json(), config=tf)
    draft_json = dict(draft.as_json(), config=df)
    artifact = scrub_obj({
        "endpoint": hs.endpoint,
        "offline": hs.offline,
        "token": f"set ({hs.token_source})" if hs.token else "not set",
        "cache_dir": str(hs.cache_dir),
        "method": ctx.profile.speculative.method,
        "target": target_json,
        "draft": draft_json,
        "compatible": compatible,
        "model_shape": shapes,
        **({"tune_drafts": tune_json} if tune_json else {}),
        "disk": disk,
        "prepare": prepare,
        "status": rec.status(),
        "facts": rec.as_json(),
    }, hs.secrets)
    path = ctx.run.write_json("checkpoints.json", artifact)
    ctx.emit(Artifact(STEP, "checkpoints.json", str(path)))
    checks = {f["name"]: f["status"] for f in rec.as_json() if f["name"] in COMPAT_FACTS}
    return rec.result(scrub_obj({"target": target_json, "draft": draft_json, "compatible": compatible,
                                 "model_shape": shapes, "endpoint": hs.endpoint, "checks": checks}, hs.secrets))


__all__ = ["COMPAT_FACTS", "PREPARE_TIMEOUT_S", "run", "verifier_match"]
