"""The compatibility rules of the checkpoints step: the facts about each model, the draft against the
target (verifier, hidden size, vocabulary, auxiliary layers), tensor shapes and quantization."""

from __future__ import annotations

from typing import Any

from tui.core.host import modelshape as ms
from tui.core.host.hub import HubSettings, ModelProbe
from tui.core.secrets import scrub
from tui.core.host.platforms import env_lookup, profile_platform
from tui.core.steps.base import FactRecorder, StepContext
from tui.core.steps.checkpoint_layout import (
    CONVENTIONAL_TARGETS, DOCUMENTED_CROSS_PAIRS, EAGLE3_AUX_STATES, LAYOUTS, TYPE_LABEL, _gb, _human,
    _int_or_none, _repo_parts, verifier_match,
)


class _Facts:
    """FactRecorder wrapper that scrubs every text (the run's token is not in os.environ)."""

    def __init__(self, rec: FactRecorder, secrets: tuple[str, ...]):
        self.rec = rec
        self.secrets = secrets

    def add(self, name: str, value: Any, status: str, detail: str = "", remedy: str = "") -> None:
        s = self.secrets
        self.rec.add(name, scrub(str(value), s), status, scrub(detail, s), scrub(remedy, s))  # type: ignore[arg-type]


def _model_facts(f: _Facts, label: str, p: ModelProbe, hs: HubSettings) -> None:
    if p.failure is not None:
        where = f"local directory {p.path}" if p.source == "local" else f"{hs.endpoint}"
        f.add(f"{label} checkpoint", f"{p.name}: {p.failure.value}", "fail",
              f"{p.failure.detail} (looked up at {where})", p.failure.remedy)
        return
    if p.source == "local":
        f.add(f"{label} checkpoint", p.name, "pass", "local directory with config.json (nothing to download)")
    elif p.info_skipped:
        f.add(f"{label} checkpoint", p.name, "pass", f"config.json read from the local cache {hs.cache_dir} "
              "(offline mode)")
    else:
        f.add(f"{label} checkpoint", p.name, "pass", f"reachable at {hs.endpoint}; config.json fetched")
    if p.source == "hub" and p.commit:
        f.add(f"{label} commit", p.commit, "info", "the revision 'main' resolves to this commit")
    if p.source == "hub" and not p.info_skipped:
        token = "HF_TOKEN is set" if hs.token else "no HF_TOKEN is set"
        if p.gated:
            f.add(f"{label} access", f"gated ({p.gated})", "warn",
                  f"downloads need an account that accepted the license ({token}); the tutorial's checkpoints "
                  "are public",
                  f"Accept the license at {hs.endpoint}/{p.repo_id} and set HF_TOKEN for this app and vLLM.")
        elif p.private:
            f.add(f"{label} access", "private", "warn", f"only accounts with access can download it ({token})",
                  "Set HF_TOKEN to a read token of an account with access (vLLM needs it too).")
        else:
            f.add(f"{label} access", "public", "pass", "no token or license acceptance needed")
    if p.size_bytes is not None:
        cached = f"; {_human(p.cached_bytes)} already in the cache" if p.cached_bytes and p.source == "hub" else ""
        extra = ""
        if p.repo_bytes is not None and p.repo_bytes > p.size_bytes:
            extra = f"; {_gb(p.repo_bytes)} with subfolders vLLM does not need"
        f.add(f"{label} size", _gb(p.size_bytes), "info", f"{p.files} top-level files{cached}{extra}")


def _describe_config(label: str, fields: dict[str, Any]) -> str:
    arch = ", ".join(fields.get("architectures") or []) or "?"
    if label == "target":
        parts = [arch, f"hidden {fields.get('hidden_size')}", f"vocab {fields.get('vocab_size')}",
                 f"{fields.get('num_hidden_layers')} layers"]
        if fields.get("num_local_experts"):
            parts.append(f"{fields['num_local_experts']} experts")
        if fields.get("quantization"):
            parts.append(str(fields["quantization"]))
        return ", ".join(parts)
    text = (f"{fields.get('draft_type') or '?'} ({arch}), verifier {fields.get('verifier') or '?'}, "
            f"hidden {fields.get('hidden_size')}, vocab {fields.get('vocab_size')}")
    if fields.get("draft_vocab_size") is not None:
        text += f", draft vocab {fields['draft_vocab_size']}"
    return text


def _layout_fact(f: _Facts, draft: ModelProbe, df: dict[str, Any]) -> None:
    layout = df.get("layout")
    arch = ", ".join(df.get("architectures") or []) or "no architectures"
    value = f"{LAYOUTS.get(layout or '', 'unknown')} ({arch})"
    ts = df.get("tensors")
    if ts is None:
        detail = "tensors not read: weights of a hub repo are not downloaded (config.json only)"
    elif not ts.get("read"):
        detail = f"tensors not read: {ts.get('note')}"
    else:
        parts = []
        if ts.get("prefix") == "midlayer":
            parts.append("midlayer.*")
        elif ts.get("prefix") == "layers":
            parts.append(f"layers.* ({ts.get('layers')} layer{'s' if ts.get('layers') != 1 else ''})")
        for key in ("embed_tokens", "fc", "lm_head", "d2t", "t2d"):
            if ts.get(key):
                parts.append(f"{key} {ts[key]}")
        if ts.get("norm"):
            parts.append("norm")
        detail = f"{ts.get('count')} tensors in {', '.join(ts.get('files') or [])}: {', '.join(parts)}"
        if ts.get("note"):
            detail += f" ({ts['note']})"
    f.add("draft layout", value, "info", detail)


def _cross_pair(verifier: str, target: str) -> bool:
    vo, vn = _repo_parts(verifier)
    to, tn = _repo_parts(target)
    v = f"{(vo or '').lower()}/{vn.lower()}"
    return any(v == a and (tn.lower() == b.split("/")[1] and (to is None or to.lower() == b.split("/")[0]))
               for a, b in DOCUMENTED_CROSS_PAIRS)


def _aux_suggestion(layers: int) -> list[int] | None:
    if layers < EAGLE3_AUX_STATES:
        return None
    ids = sorted({1, layers // 2, layers - 1})
    return ids if len(ids) == EAGLE3_AUX_STATES else list(range(EAGLE3_AUX_STATES))


def _compat_facts(f: _Facts, ctx: StepContext, target: ModelProbe, draft: ModelProbe,
                  tf: dict[str, Any], df: dict[str, Any]) -> bool:
    ok = True
    method = ctx.profile.speculative.method
    dtype = df["draft_type"]
    layout = df.get("layout")
    ts = df.get("tensors") or {}
    why = ("a draft of the wrong type loads fine but its proposals are rejected: acceptance length ≈ 1.0, "
           "no speedup (the tutorial's \"acceptance rate is 0%\")")

    # -- type vs method -------------------------------------------------------------------------------------
    if dtype is None:
        f.add("draft type", "unknown", "warn",
              f"{draft.name}: config.json has no speculators_model_type, no Eagle architecture and no "
              "draft_vocab_size, and its tensors do not tell (no fc layer read)",
              f"Make sure {draft.name} is an {TYPE_LABEL.get(method, method)} draft (speculators format, or the "
              f"EAGLE repo layout) for speculative.method = \"{method}\".")
    elif dtype == method:
        f.add("draft type", f"{dtype} = speculative.method", "pass",
              f"{TYPE_LABEL.get(dtype, dtype)} draft in the {LAYOUTS.get(layout or '', '?')} layout "
              f"({df.get('type_source')}); it matches --speculative-config method \"{method}\"")
    else:
        ok = False
        if dtype == "eagle3" and method == "eagle":
            effect = ("vLLM builds an EAGLE-1 head (one hidden state in, fc of 2 × hidden) for an EAGLE3 checkpoint "
                      "whose fc takes 3 aux hidden states: the weights do not fit or the proposals are garbage")
        elif dtype == "eagle" and method == "eagle3":
            effect = ("vLLM builds an EAGLE3 head that expects 3 aux hidden states of the target (fc of 3 × hidden) "
                      "from an EAGLE-1 checkpoint trained on the last hidden state only")
        else:
            effect = why
        f.add("draft type", f"{dtype} draft, method {method}", "fail",
              f"{draft.name} is an {TYPE_LABEL.get(dtype, dtype)} draft ({df.get('type_source')}) but "
              f"speculative.method is \"{method}\": {effect}; " + why,
              f"Set speculative.method = \"{dtype}\" to match {draft.name}, or use an "
              f"{TYPE_LABEL.get(method, method)} draft trained for {target.name}.")

    # -- verifier --------------------------------------------------------------------------------------------
    verifier = df["verifier"]
    conventional = None
    if not verifier and layout in ("eagle3-repo", "eagle-repo"):
        org, base = _repo_parts(draft.name)
        conventional = CONVENTIONAL_TARGETS.get(f"{(org or '').lower()}/{base.lower()}")
    if conventional:
        if verifier_match(conventional, target.name) == "different":
            f.add("draft verifier", f"{conventional} (by convention) ≠ {target.name}", "warn",
                  f"the {LAYOUTS[layout or 'eagle-repo']} layout names no verifier; {draft.name} is documented as "
                  f"the draft of {conventional}: " + why,
                  f"Serve {conventional} as the target, or use a draft trained for {target.name}.")
        else:
            f.add("draft verifier", f"{conventional} (by convention)", "pass",
                  f"the {LAYOUTS[layout or 'eagle-repo']} layout names no verifier; {draft.name} is documented as "
                  f"the draft of {conventional}")
    elif not verifier:
        if layout in ("eagle3-repo", "eagle-repo"):
            f.add("draft verifier", "not named (EAGLE repo layout)", "info",
                  f"the {LAYOUTS[layout]} layout does not record the target a draft was trained for (only the name "
                  "says so, by convention); the size, vocabulary and layer checks still apply",
                  f"Make sure {draft.name} was trained against {target.name}.")
        else:
            f.add("draft verifier", "not named", "warn",
                  "the draft's config does not say which target it was trained for",
                  f"Make sure {draft.name} was trained against {target.name}.")
    else:
        match = verifier_match(verifier, target.name)
        varch = df.get("verifier_architectures") or []
        tarch = tf.get("architectures") or []
        if match == "same" and varch and tarch and not set(varch) & set(tarch):
            f.add("draft verifier", verifier, "warn",
                  f"the draft names {verifier} ({', '.join(varch)}), but the target's architectures are "
                  f"{', '.join(tarch)}",
                  "Make sure the target is an exact copy of the verifier the draft was trained on.")
        elif match == "same":
            f.add("draft verifier", verifier, "pass", f"the draft was trained against {target.name}")
        elif match == "different" and _cross_pair(verifier, target.name):
            f.add("draft verifier", f"{verifier} ≠ {target.name} (documented pair)", "warn",
                  f"the draft was trained against {verifier}; vLLM's documentation serves it with {target.name} "
                  "(same architecture, hidden size and vocabulary, another fine-tune): expect a lower acceptance "
                  "rate than on its own verifier",
                  f"For the best acceptance serve {verifier} as the target, or use a draft trained for {target.name}.")
        elif match == "same-name":
            f.add("draft verifier", verifier, "warn",
                  f"the draft names {verifier}; the target is {target.name} (same model name, other organisation)",
                  "Make sure the target is an exact copy of the verifier the draft was trained on.")
        else:
            ok = False
            f.add("draft verifier", f"{verifier} ≠ {target.name}", "fail",
                  "the draft was trained against another model: " + why,
                  f"Use a draft trained for {target.name}, or serve {verifier} as the target.")

    # -- hidden size -------------------------------------------------------------------------------------
    t_hidden = _int_or_none(tf.get("hidden_size"))
    d_hidden = _int_or_none(df.get("hidden_size"))
    d_target_hidden = df.get("target_hidden_size") or d_hidden
    fc = ts.get("fc") if ts.get("read") else None
    if d_target_hidden is None or t_hidden is None:
        f.add("hidden size", "not checked", "info", f"{'draft' if d_target_hidden is None else 'target'} config "
              "has no hidden_size")
    elif d_target_hidden != t_hidden:
        ok = False
        key = "target_hidden_size" if df.get("target_hidden_size") else "hidden_size"
        f.add("hidden size", f"draft {d_target_hidden} ≠ target {t_hidden}", "fail",
              f"EAGLE feeds the target's hidden states to the draft; the draft's {key} is {d_target_hidden}, the "
              f"target's hidden_size is {t_hidden}: the draft was built for another model (vLLM fails to load it or "
              "acceptance collapses)",
              f"Use a draft whose hidden size is {t_hidden} (trained for {target.name}).")
    elif fc and len(fc) == 2 and fc[1] % t_hidden != 0:
        ok = False
        f.add("hidden size", f"fc.weight {fc} vs target hidden {t_hidden}", "fail",
              f"the draft's fc layer takes {fc[1]} inputs, not a multiple of the target's hidden_size {t_hidden}: "
              "the checkpoint was trained on another model's hidden states (vLLM fails with a shape mismatch)",
              f"Use a draft trained for {target.name} (hidden size {t_hidden}).")
    else:
        extra = f" (draft's own hidden_size {d_hidden}; target_hidden_size {d_target_hidden})" \
            if df.get("target_hidden_size") and d_hidden != d_target_hidden else ""
        if fc:
            extra += f"; fc.weight {fc} takes {fc[1] // t_hidden} × {t_hidden}"
        f.add("hidden size", f"{d_target_hidden} = {t_hidden}", "pass", "draft hidden size equals the target's" + extra)

    # -- vocabulary ----------------------------------------------------------------------------------------
    d_vocab, t_vocab = _int_or_none(df.get("vocab_size")), _int_or_none(tf.get("vocab_size"))
    if d_vocab is None or t_vocab is None:
        f.add("vocab size", "not checked", "info", f"{'draft' if d_vocab is None else 'target'} config has no "
              "vocab_size")
    elif d_vocab == t_vocab:
        f.add("vocab size", f"{d_vocab} = {t_vocab}", "pass", "draft vocab_size equals the target's")
    else:
        ok = False
        f.add("vocab size", f"draft {d_vocab} ≠ target {t_vocab}", "fail",
              "EAGLE feeds the target's token ids to the draft; a vocab_size mismatch means the draft was built for "
              "another model (vLLM fails to load it or acceptance collapses)",
              f"Use a draft whose vocab_size is {t_vocab} (trained for {target.name}).")
    if dtype == "eagle3" and t_vocab is not None:
        ok = _vocab_mapping_fact(f, df, ts, t_vocab, draft.name) and ok

    # -- EAGLE3 aux hidden-state layers ---------------------------------------------------------------------
    if dtype == "eagle3" or (dtype is None and method == "eagle3"):
        ok = _aux_fact(f, df, ts, tf, t_hidden, target.name, draft.name) and ok
    return ok


def _vocab_mapping_fact(f: _Facts, df: dict[str, Any], ts: dict[str, Any], t_vocab: int, draft_name: str) -> bool:
    dv = _int_or_none(df.get("draft_vocab_size"))
    read = bool(ts.get("read"))
    lm_rows = (ts.get("lm_head") or [None])[0] if read else None
    d2t, t2d = (ts.get("d2t"), ts.get("t2d")) if read else (None, None)
    fix = f"Re-export {draft_name} with d2t (draft→target id offsets, one per draft token) and t2d, or use the draft " \
          "as published."
    if dv is None or dv == t_vocab:
        if lm_rows is not None and lm_rows != t_vocab:
            f.add("vocab mapping", f"lm_head {lm_rows} rows ≠ vocab {t_vocab}", "fail",
                  f"the draft declares the full vocabulary ({t_vocab}) but its lm_head has {lm_rows} rows",
                  "Set draft_vocab_size to the lm_head's row count and ship d2t/t2d, or re-export the draft.")
            return False
        f.add("vocab mapping", f"full vocabulary ({t_vocab})", "pass",
              "draft_vocab_size equals the target's vocabulary: no d2t mapping needed" if dv else
              "no draft_vocab_size: the draft predicts over the target's whole vocabulary")
        return True
    if dv > t_vocab:
        f.add("vocab mapping", f"draft_vocab_size {dv} > target vocab {t_vocab}", "fail",
              "the draft's reduced vocabulary cannot be larger than the target's", fix)
        return False
    if not read:
        note = ts.get("note") if ts else "weights of a hub repo are not downloaded"
        f.add("vocab mapping", f"draft {dv} → target {t_vocab} via d2t", "info",
              f"draft_vocab_size {dv} < target vocab {t_vocab}: vLLM maps draft ids to target ids with the "
              f"checkpoint's d2t tensor (not verified: {note})")
        return True
    problems = []
    if d2t is None:
        problems.append("no d2t tensor (vLLM then maps draft id i to target id i: wrong tokens, acceptance ≈ 0)")
    elif list(d2t) != [dv]:
        problems.append(f"d2t has shape {d2t}, not [{dv}]")
    if t2d is not None and list(t2d) != [t_vocab]:
        problems.append(f"t2d has shape {t2d}, not [{t_vocab}]")
    if lm_rows is not None and lm_rows != dv:
        problems.append(f"lm_head has {lm_rows} rows, not draft_vocab_size {dv}")
    if problems:
        f.add("vocab mapping", f"draft {dv} → target {t_vocab}: " + problems[0].split(" (")[0], "fail",
              f"draft_vocab_size {dv} < target vocab {t_vocab}, but " + "; ".join(problems), fix)
        return False
    f.add("vocab mapping", f"draft {dv} → target {t_vocab} via d2t", "pass",
          f"d2t {d2t}" + (f", t2d {t2d}" if t2d else "") + (f", lm_head {ts.get('lm_head')}" if lm_rows else ""))
    return True


def _aux_fact(f: _Facts, df: dict[str, Any], ts: dict[str, Any], tf: dict[str, Any], t_hidden: int | None,
              target_name: str, draft_name: str) -> bool:
    layers = _int_or_none(tf.get("num_hidden_layers"))
    fc = ts.get("fc") if ts.get("read") else None
    expected, exp_src = EAGLE3_AUX_STATES, "vLLM's EAGLE3 head"
    if fc and len(fc) == 2 and t_hidden and fc[1] % t_hidden == 0 and fc[1] // t_hidden >= 1:
        expected, exp_src = fc[1] // t_hidden, f"fc.weight {fc} = {fc[1] // t_hidden} × target hidden {t_hidden}"
    ids, src = df.get("aux_layer_ids"), df.get("aux_source")
    if layers is None:
        f.add("aux layers", "not checked", "info", "the target config has no num_hidden_layers")
        return True
    pinned = ids is not None
    if not pinned:
        ids = [2, layers // 2, layers - 3]
    bad = [i for i in ids if not (isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers)]
    distinct = sorted({i for i in ids if i not in bad})
    where = f"eagle_aux_hidden_state_layer_ids {ids} from the draft's {src}" if pinned else \
        f"vLLM's default (2, L//2, L-3) = {tuple(ids)} for L = {layers} (the draft pins no " \
        "eagle_aux_hidden_state_layer_ids)"
    suggestion = _aux_suggestion(layers)
    remedy = (f"Add \"eagle_aux_hidden_state_layer_ids\": {suggestion} ({expected} distinct layers in 0..{layers - 1}) "
              f"to {draft_name}'s config.json (the layers it was trained on)" if suggestion and expected == 3 else
              f"Use {expected} distinct layer ids in 0..{layers - 1} in the draft's eagle_aux_hidden_state_layer_ids")
    remedy += ", or use a target with enough layers." if suggestion is None else "."
    crash = ("vLLM starts, then the first request kills the engine with a shape mismatch ('mat1 and mat2 shapes "
             "cannot be multiplied', EngineDeadError)")
    if bad:
        f.add("aux layers", f"{bad} outside 0..{layers - 1}", "fail",
              f"{where}: the target {target_name} has {layers} layers, so layer ids {bad} never produce a hidden "
              f"state and the draft gets fewer than the {expected} it needs ({exp_src}): {crash}", remedy)
        return False
    if len(distinct) != expected:
        f.add("aux layers", f"{tuple(ids)}: {len(distinct)} distinct, draft needs {expected}", "fail",
              f"{where} gives {len(distinct)} distinct layers {distinct} for a {layers}-layer target; the draft "
              f"needs {expected} ({exp_src}): {crash}", remedy)
        return False
    f.add("aux layers", f"{tuple(ids)} of {layers} layers", "pass",
          f"{where}: {expected} distinct layers, as the draft needs ({exp_src})")
    return True


# Where each refused setting is changed: the profile key and, where it has one, the Profile pane's field.
SHAPE_WHERE = {
    ms.TP_KEY: "",  # a Profile pane field: the diagnosis carries it as its setting (the app names the way there)
    ms.DRAFT_TP_KEY: " in the profile",
    ms.LEN_KEY: " in the profile",
    ms.PP_KEY: " in the profile",
}


SHAPE_FACTS = {ms.TP_KEY: "TP vs heads", ms.DRAFT_TP_KEY: "draft TP vs heads", ms.LEN_KEY: "max_model_len",
               ms.PP_KEY: "pipeline stages"}


def _shape_facts(f: _Facts, ctx: StepContext, shapes: dict[str, Any]) -> tuple[list[str], str | None]:
    """What vLLM would refuse at startup for these models (tui/core/host/modelshape.py): one fact per setting;
    returns the evidence of the refused ones and, when the target's TP is refused with a TP that fits, that
    TP (the diagnosis's setting suggestion)."""
    srv, sp = ctx.profile.data["server"], ctx.profile.data["speculative"]
    env = ctx.shared.get("env") or {}
    platform = env.get("platform") or profile_platform(ctx.profile)
    tp, pp = int(srv["tensor_parallel_size"]), int(srv.get("pipeline_parallel_size") or 1)
    limit, why, at_least = ms.machine_limits(env, platform, pp)
    server_env = {k: ctx.ph.resolve(str(v)) for k, v in (srv.get("env") or {}).items()}
    allow, _where = env_lookup(ms.ALLOW_LONG, dict(ctx.environ), server_env)
    shapes["allow_long"] = ms.truthy(allow)  # the Profile pane's checks read it with the shapes
    issues = ms.check(shapes, srv, sp, tp_limit=limit, tp_limit_why=why, tp_at_least=at_least,
                      allow_long=shapes["allow_long"])
    by_fact: dict[str, list[tuple[str, str, str]]] = {}
    for key, level, msg in issues:
        name = SHAPE_FACTS[key] if key != ms.TP_KEY or "of the draft" not in msg else SHAPE_FACTS[ms.DRAFT_TP_KEY]
        by_fact.setdefault(name, []).append((key, level, msg))
    t, d = shapes.get("target") or {}, shapes.get("draft") or {}
    evidence: list[str] = []
    tp_fix: list[str] = []

    def heads_text(sh: dict[str, Any]) -> str:
        kv = sh.get("kv_heads")
        return f"{sh.get('heads')} attention heads" + (f", {kv} KV heads" if kv and kv != sh.get("heads") else "")

    def report(name: str, ok_value: str, ok_detail: str, bad_value: str = "") -> None:
        bad_value = bad_value or ok_value
        found = by_fact.get(name)
        if not found:
            f.add(name, ok_value, "pass", ok_detail)
            return
        key, level, msg = found[0]
        if key == ms.TP_KEY:
            sh = d if name == SHAPE_FACTS[ms.DRAFT_TP_KEY] else t
            sug = ms.suggest_tp(tp, sh.get("heads"), sh.get("kv_heads"), limit, at_least)
            ok_t = ms.suggest_tp(tp, t.get("heads"), t.get("kv_heads"), limit, at_least) if t else sug
            if sug and ok_t == sug:
                fix = f"Set {key} to {sug}" + SHAPE_WHERE[key]
                if level == ms.ERROR:
                    tp_fix.append(str(sug))
            else:
                fix = f"Set {ms.DRAFT_TP_KEY} to 1 (the draft runs unsplit){SHAPE_WHERE[ms.DRAFT_TP_KEY]}"
        elif key == ms.DRAFT_TP_KEY:
            fix = f"Set {key} to 1, or remove it{SHAPE_WHERE[key]}"
        elif key == ms.LEN_KEY:
            fix = (f"Set {key} to {t.get('max_len')} or less (0 lets vLLM take it){SHAPE_WHERE[key]}"
                   if level == ms.ERROR else f"Lower {key}, or accept positions the model was not trained for")
        else:
            fix = f"Set {key} to at most {t.get('layers')}{SHAPE_WHERE[key]}"
        f.add(name, bad_value, "fail" if level == ms.ERROR else "warn", msg, fix + ".")
        if level == ms.ERROR:
            evidence.append(f"{name}: {msg}")

    if t.get("heads"):
        report(SHAPE_FACTS[ms.TP_KEY], f"TP {tp}: {heads_text(t)}",
               f"{t.get('name')} has {heads_text(t)}: TP {tp} divides them, as vLLM requires")
    dtp = int(sp.get("draft_tensor_parallel_size") or 0) or tp
    if d.get("heads"):
        report(SHAPE_FACTS[ms.DRAFT_TP_KEY], f"draft TP {dtp}: {heads_text(d)}",
               f"the draft {d.get('name')} has {heads_text(d)}: its TP {dtp} divides them"
               + ("" if sp.get("draft_tensor_parallel_size") else " (the draft runs at the target's TP)"))
    mml = int(srv.get("max_model_len") or 0)
    if t.get("max_len"):
        if mml:
            report(SHAPE_FACTS[ms.LEN_KEY], f"{mml} ≤ {t['max_len']} positions",
                   f"{t.get('name')}: {t.get('max_len_source')}", f"{mml} > {t['max_len']} positions")
        else:
            f.add(SHAPE_FACTS[ms.LEN_KEY], f"not sent: vLLM takes {t['max_len']}", "info",
                  f"{t.get('name')}: {t.get('max_len_source')}")
    if pp > 1 and t.get("layers"):
        report(SHAPE_FACTS[ms.PP_KEY], f"PP {pp} over {t['layers']} layers",
               f"{t.get('name')} has {t['layers']} layers: each of the {pp} stages holds at least one")
    return evidence, (tp_fix[0] if tp_fix else None)


def _quant_facts(f: _Facts, ctx: StepContext, tf: dict[str, Any]) -> None:
    q = tf.get("quantization")
    if not q:
        return
    f.add("target quantization", str(q), "info",
          "the checkpoint's MoE experts are stored in MXFP4; trn2 runs BF16 and vLLM Neuron dequantizes them at "
          "load time — no separate BF16 checkpoint is needed")
    overrides = ctx.profile.server.hf_overrides or {}
    if isinstance(overrides, dict) and overrides.get("quantization_config") == {}:
        f.add("quantization override", "cleared by --hf-overrides", "pass",
              "server.hf_overrides sets quantization_config = {}, so the BF16 load path is selected")
    else:
        f.add("quantization override", "not cleared", "warn",
              f"the target's quantization_config ({q}) is not cleared; on trn2 the MXFP4 path is unsupported",
              "Add [server.hf_overrides] quantization_config = {} (passes --hf-overrides "
              "'{\"quantization_config\": {}}'); no separate BF16 checkpoint is needed.")
