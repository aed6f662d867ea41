"""Step `checkpoints`: can both checkpoints be fetched, do they fit on disk, and do they belong together?

For the target (`models.target`) and the draft (`speculative.model` or `models.draft`): fetch
`config.json` and `model_info(files_metadata=True)` (commit, gated/private, size), or read a local
directory. Then check, before any compile, what makes EAGLE3 silently useless (acceptance length ≈ 1.0,
the tutorial's "acceptance rate is 0%"): draft type vs `speculative.method`, the draft's verifier vs
the target, hidden size and vocabulary size. Also notes the target's MXFP4 quantization_config and
whether the profile clears it with --hf-overrides.

Hub settings come from `ctx.environ` (HF_ENDPOINT, HF_TOKEN, HF_HOME/HF_HUB_CACHE, HF_HUB_OFFLINE,
HF_HUB_ETAG_TIMEOUT), see tui.core.hub. Writes checkpoints.json; tokens never reach a fact or a file.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from .. import diagnostics as dg
from ..events import Artifact
from ..hub import HubFailure, HubSettings, ModelProbe, free_bytes, hub_settings, probe_model, scrub, scrub_obj
from .base import FactRecorder, StepContext, StepResult

STEP = "checkpoints"
GB = 1e9

# Tests replace this to pretend a disk is full or huge: (path) -> (free bytes, existing path measured).
disk_free = free_bytes


def _gb(n: int | None) -> str:
    return "?" if n is None else f"{n / GB:.1f} GB"


def _human(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


# ---------------------------------------------------------------------------------------------
# Config fields
# ---------------------------------------------------------------------------------------------


def _target_fields(cfg: dict[str, Any]) -> dict[str, Any]:
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    q = cfg.get("quantization_config")
    return {
        "architectures": cfg.get("architectures"),
        "model_type": cfg.get("model_type"),
        "hidden_size": cfg.get("hidden_size", text.get("hidden_size")),
        "vocab_size": cfg.get("vocab_size", text.get("vocab_size")),
        "num_hidden_layers": cfg.get("num_hidden_layers", text.get("num_hidden_layers")),
        "num_local_experts": cfg.get("num_local_experts", text.get("num_local_experts")),
        "quantization": (q.get("quant_method") or "yes") if isinstance(q, dict) and q else None,
    }


def _draft_type(cfg: dict[str, Any]) -> str | None:
    sc = cfg.get("speculators_config") if isinstance(cfg.get("speculators_config"), dict) else {}
    for v in (cfg.get("speculators_model_type"), sc.get("algorithm")):
        if isinstance(v, str) and v:
            return v.lower()
    # Non-speculators exports (e.g. "LlamaForCausalLMEagle3", "EagleLlamaForCausalLM").
    names = " ".join(str(a) for a in (cfg.get("architectures") or [])) + " " + str(cfg.get("model_type") or "")
    low = names.lower()
    if "eagle3" in low:
        return "eagle3"
    if "eagle" in low:
        return "eagle"
    return None


def _draft_fields(cfg: dict[str, Any]) -> dict[str, Any]:
    sc = cfg.get("speculators_config") if isinstance(cfg.get("speculators_config"), dict) else {}
    ver = sc.get("verifier") if isinstance(sc.get("verifier"), dict) else {}
    tl = cfg.get("transformer_layer_config") if isinstance(cfg.get("transformer_layer_config"), dict) else {}
    return {
        "architectures": cfg.get("architectures"),
        "draft_type": _draft_type(cfg),
        "verifier": ver.get("name_or_path") if isinstance(ver.get("name_or_path"), str) else None,
        "hidden_size": tl.get("hidden_size", cfg.get("hidden_size")),
        "vocab_size": tl.get("vocab_size", cfg.get("vocab_size")),
        "draft_vocab_size": cfg.get("draft_vocab_size"),
    }


_CACHE_DIR_RE = re.compile(r"models--([^/\\]+)--([^/\\]+)")


def _repo_parts(name: str) -> tuple[str | None, str]:
    """(organisation or None, model name) of a repo id, hub URL, local path or HF cache snapshot path."""
    s = name.strip().rstrip("/\\")
    m = _CACHE_DIR_RE.search(s)
    if m:
        return m.group(1), m.group(2)
    for prefix in ("https://huggingface.co/", "http://huggingface.co/", "hf://"):
        if s.startswith(prefix):
            s = s[len(prefix):]
    parts = [p for p in re.split(r"[/\\]", s) if p]
    if not parts:
        return None, s
    if len(parts) == 2 and not s.startswith(("/", ".", "~")):
        return parts[0], parts[1]
    return None, parts[-1]


def verifier_match(verifier: str, target: str) -> str:
    """"same" | "same-name" (same model name, another organisation) | "different"."""
    vo, vn = _repo_parts(verifier)
    to, tn = _repo_parts(target)
    if vn.lower() != tn.lower():
        return "different"
    if vo is None or to is None or vo.lower() == to.lower():
        return "same"
    return "same-name"


# ---------------------------------------------------------------------------------------------
# The step
# ---------------------------------------------------------------------------------------------


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
    return (f"{fields.get('draft_type') or '?'} ({arch}), verifier {fields.get('verifier') or '?'}, "
            f"hidden {fields.get('hidden_size')}, vocab {fields.get('vocab_size')}")


def _compat_facts(f: _Facts, ctx: StepContext, target: ModelProbe, draft: ModelProbe,
                  tf: dict[str, Any], df: dict[str, Any]) -> bool:
    ok = True
    method = ctx.profile.speculative.method
    dtype = df["draft_type"]
    why = ("a draft of the wrong type loads fine but its proposals are rejected: acceptance length ≈ 1.0, "
           "no speedup (the tutorial's \"acceptance rate is 0%\")")
    if dtype is None:
        f.add("draft type", "unknown", "warn",
              "config.json has neither speculators_model_type nor speculators_config.algorithm",
              f"Make sure {draft.name} is an {method} draft (speculators format).")
    elif dtype == method:
        f.add("draft type", f"{dtype} = speculative.method", "pass", "the draft matches --speculative-config method")
    else:
        ok = False
        f.add("draft type", f"{dtype} draft, method {method}", "fail", why,
              f"Use an {method} draft, or set speculative.method = \"{dtype}\" if the draft is right.")

    verifier = df["verifier"]
    if not verifier:
        f.add("draft verifier", "not named", "warn", "the draft's config does not say which target it was trained for",
              f"Make sure {draft.name} was trained against {target.name}.")
    else:
        match = verifier_match(verifier, target.name)
        if match == "same":
            f.add("draft verifier", verifier, "pass", f"the draft was trained against {target.name}")
        elif match == "same-name":
            f.add("draft verifier", verifier, "warn",
                  f"the draft names {verifier}; the target is {target.name} (same model name, other organisation)",
                  "Make sure the target is an exact copy of the verifier the draft was trained on.")
        else:
            ok = False
            f.add("draft verifier", f"{verifier} ≠ {target.name}", "fail",
                  "the draft was trained against another model: " + why,
                  f"Use a draft trained for {target.name}, or serve {verifier} as the target.")

    for key, title in (("hidden_size", "hidden size"), ("vocab_size", "vocab size")):
        d, t = df.get(key), tf.get(key)
        if d is None or t is None:
            f.add(title, "not checked", "info", f"{'draft' if d is None else 'target'} config has no {key}")
        elif d == t:
            f.add(title, f"{d} = {t}", "pass", f"draft {key} equals the target's")
        else:
            ok = False
            f.add(title, f"draft {d} ≠ target {t}", "fail",
                  f"EAGLE3 feeds the target's hidden states and token ids to the draft; a {key} mismatch means the "
                  f"draft was built for another model (vLLM fails to load it or acceptance collapses)",
                  f"Use a draft whose {key} is {t} (trained for {target.name}).")
    return ok


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


def _disk_fact(f: _Facts, ctx: StepContext, hs: HubSettings, probes: list[ModelProbe]) -> dict[str, Any]:
    hub_probes = [p for p in probes if p.source == "hub" and p.failure is None]
    unknown = [p.name for p in hub_probes if p.size_bytes is None]
    needed = sum(max(0, (p.size_bytes or 0) - p.cached_bytes) for p in hub_probes)
    try:
        free, measured = disk_free(hs.cache_dir)
    except OSError as exc:
        f.add("disk space", "not checked", "warn", f"cannot measure free space at {hs.cache_dir}: {exc}")
        return {"cache_dir": str(hs.cache_dir), "needed_bytes": needed, "free_bytes": None}
    info = {"cache_dir": str(hs.cache_dir), "measured_at": str(measured), "needed_bytes": needed,
            "free_bytes": free}
    if any(p.failure is not None for p in probes if p.source == "hub") or unknown:
        why = "sizes unknown (offline mode)" if unknown else "a checkpoint could not be looked up"
        f.add("disk space", f"{_gb(free)} free", "info", f"{why}; free space in {measured}")
        return info
    if not hub_probes:
        f.add("disk space", "nothing to download", "pass", "both checkpoints are local directories")
        return info
    text = f"{_gb(free)} free, {_gb(needed)} to download"
    detail = f"HF cache {hs.cache_dir} (on the filesystem of {measured})"
    if free >= needed:
        f.add("disk space", text, "pass", detail)
    else:
        f.add("disk space", text, "fail", detail + f"; short by {_gb(needed - free)}",
              "Free space there, or point HF_HOME (or HF_HUB_CACHE) at a volume with "
              f"at least {_gb(needed)} free, for this app and for vLLM.")
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


async def run(ctx: StepContext, *, timeout_s: float | None = None) -> StepResult:
    rec = FactRecorder(ctx, STEP)
    hs = hub_settings(ctx.environ, sim_hub=ctx.ph.sim_hub, timeout_s=timeout_s)
    f = _Facts(rec, hs.secrets)
    target_name = ctx.ph.resolve(ctx.profile.models.target)
    draft_name = ctx.ph.resolve(ctx.profile.draft_model)

    if hs.offline:
        f.add("hub lookups", "offline (HF_HUB_OFFLINE)", "info",
              f"model_info skipped; config.json is read from the local cache {hs.cache_dir}")

    target, draft = await asyncio.gather(asyncio.to_thread(probe_model, target_name, hs),
                                         asyncio.to_thread(probe_model, draft_name, hs))

    tf = _target_fields(target.config) if target.config is not None else None
    df = _draft_fields(draft.config) if draft.config is not None else None
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

    disk = _disk_fact(f, ctx, hs, [target, draft])

    compatible = False
    if tf is not None and df is not None:
        compatible = _compat_facts(f, ctx, target, draft, tf, df)
    else:
        missing = [n for n, c in (("target", tf), ("draft", df)) if c is None]
        f.add("compatibility", "not checked", "info",
              f"the {' and '.join(missing)} config.json {'is' if len(missing) == 1 else 'are'} unavailable")
    if tf is not None:
        _quant_facts(f, ctx, tf)
    # Common-issues diagnoses this step can raise before any compile.
    if tf is not None and df is not None and not compatible:
        evidence = [scrub(f"{x.name}: {x.value} — {x.detail}", hs.secrets) for x in rec.facts
                    if x.status == "fail" and x.name in ("draft type", "draft verifier", "hidden size", "vocab size")]
        ctx.emit(dg.make("draft-target-mismatch", STEP, evidence))
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
        "disk": disk,
        "status": rec.status(),
        "facts": rec.as_json(),
    }, hs.secrets)
    path = ctx.run.write_json("checkpoints.json", artifact)
    ctx.emit(Artifact(STEP, "checkpoints.json", str(path)))
    return rec.result(scrub_obj({"target": target_json, "draft": draft_json, "compatible": compatible,
                                 "endpoint": hs.endpoint}, hs.secrets))


__all__ = ["run", "verifier_match"]
