"""Settings vLLM refuses for a model's shape, checked from its config.json before anything is launched.

vLLM (vllm/config/model.py and the linear layers, as of 0.32) refuses at startup:
  * a tensor-parallel size that does not divide the model's attention heads
    (ModelConfig.verify_with_parallel_config: total_num_attention_heads % tp == 0), and one that splits the KV
    heads unevenly (QKVParallelLinear: kv_heads % tp == 0 when tp <= kv_heads, else tp % kv_heads == 0);
  * the same for the draft of a speculative config at its own TP (draft_tensor_parallel_size, by default the
    target's: SpeculativeConfig verifies the draft's ModelConfig with the draft's parallel config);
  * a --max-model-len above the length derived from the config (_get_and_verify_max_len: the smallest of
    max_position_embeddings, n_positions, max_seq_len, seq_length, model_max_length, max_target_positions,
    max_sequence_length, max_seq_length, seq_len; model_max_length wins when set; times the RoPE scaling factor
    except for su/longrope/llama3/YaRN types, whose max_position_embeddings is already scaled) unless
    VLLM_ALLOW_LONG_MAX_MODEL_LEN is set. Before vLLM's YaRN realignment a "yarn" config's length was
    original_max_position_embeddings × factor; vLLM 0.32 (checked in its source) has the realigned rule, so from
    0.32 on that is the rule, and for an older or unknown vLLM the larger of the two readings is used (nothing
    any of them accepts is refused);
  * pipeline stages without a layer (get_pp_indices splits num_hidden_layers over the stages: more stages
    than layers leaves stages empty).
The draft's own positions are not checked: vLLM caps the draft's length at the target's.

Pure functions over config dicts; the checkpoints step records `shape_of` of both models (StepResult facts
"model_shape") and refuses there; the Profile pane's as-you-type checks (tui/core/host/livecheck.py) call `check`
with the same recorded shapes.
"""

from __future__ import annotations

from typing import Any, Mapping
from tui.core.host.platforms import smallest_fitting

ERROR = "error"
WARN = "warn"
Issue = tuple[str, str, str]  # (dotted key, "error" | "warn", message)

TP_KEY = "server.tensor_parallel_size"
DRAFT_TP_KEY = "speculative.draft_tensor_parallel_size"
PP_KEY = "server.pipeline_parallel_size"
LEN_KEY = "server.max_model_len"
ALLOW_LONG = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"

# vLLM's derive_max_model_len_and_key, in its order.
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")
# RoPE types whose max_position_embeddings already holds the scaled length (vLLM leaves `factor` out).
SCALED_ROPE_TYPES = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def text_config(cfg: Mapping[str, Any], role: str = "target") -> Mapping[str, Any]:
    """The part of a config.json that describes the transformer vLLM builds: a speculators draft's
    transformer_layer_config, a multimodal model's text_config, else the config itself."""
    if role == "draft" and isinstance(cfg.get("transformer_layer_config"), dict):
        return cfg["transformer_layer_config"]
    if isinstance(cfg.get("text_config"), dict):
        return cfg["text_config"]
    return cfg


def _rope_parameters(tc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rp = tc.get("rope_parameters")
    if not isinstance(rp, dict) or not rp:
        rp = tc.get("rope_scaling")  # transformers 4.x name; vLLM renames it to rope_parameters
    if not isinstance(rp, dict) or not rp:
        return []
    if all(isinstance(v, dict) for v in rp.values()):  # one set per layer type
        return [v for v in rp.values() if v]
    return [rp]


YARN_REALIGNED_SINCE = (0, 32)


def derive_max_len(tc: Mapping[str, Any], yarn_realigned: bool | None = None) -> tuple[int | None, str]:
    """(vLLM's derived maximum length, how it was derived); (None, "") when the config names none (vLLM
    then accepts any --max-model-len). `yarn_realigned`: the vLLM reads a YaRN config's max_position_embeddings
    as already scaled (True), as original × factor (False), or either (None: the larger)."""
    best: float | None = None
    key = ""
    for k in MAX_LEN_KEYS:
        v = _num(tc.get(k))
        if v is not None and (best is None or v < best):
            best, key = v, k
    mml = _num(tc.get("model_max_length"))
    if mml:
        best, key = mml, "model_max_length"
    if best is None:
        return None, ""
    how = f"{key} = {int(best)}"
    params = _rope_parameters(tc)
    if params and "gemma3" not in str(tc.get("model_type") or ""):
        factor = 1.0
        kind = ""
        old_yarn: float | None = None
        for p in params:
            rtype = str(p.get("rope_type") or p.get("type") or "default")
            kind = kind or rtype
            if rtype not in SCALED_ROPE_TYPES:
                f = _num(p.get("factor"))
                factor = f if f is not None else factor
            elif rtype == "yarn" and _num(p.get("original_max_position_embeddings")) and _num(p.get("factor")):
                old_yarn = _num(p["original_max_position_embeddings"]) * _num(p["factor"])  # type: ignore[operator]
        if factor != 1.0:
            best *= factor
            how += f" × rope factor {factor:g} ({kind})"
        elif kind in SCALED_ROPE_TYPES:
            how += f", rope {kind}: already scaled"
        if old_yarn is not None and yarn_realigned is False:
            best, how = old_yarn, f"original_max_position_embeddings × rope factor = {int(old_yarn)} (yarn)"
        elif old_yarn is not None and yarn_realigned is None and old_yarn > best:
            how += ("; vLLM before the YaRN realignment reads original_max_position_embeddings × factor = "
                    f"{int(old_yarn)}")
            best = old_yarn
    return int(best), how


def yarn_realigned(vllm_version: tuple[int, ...] | None) -> bool | None:
    return None if vllm_version is None or vllm_version < YARN_REALIGNED_SINCE else True


def shape_of(cfg: Mapping[str, Any] | None, name: str, role: str = "target",
             yarn_realigned: bool | None = None) -> dict[str, Any] | None:
    """What the refusal rules need from one config.json (JSON-ready)."""
    if not isinstance(cfg, Mapping):
        return None
    tc = text_config(cfg, role)
    heads = _int(tc.get("num_attention_heads"))
    kv = next((_int(tc[k]) for k in KV_HEAD_KEYS if _int(tc.get(k)) is not None), None)
    max_len, how = derive_max_len(tc, yarn_realigned)
    return {"name": name, "heads": heads, "kv_heads": kv if kv is not None else heads,
            "layers": _int(tc.get("num_hidden_layers")), "max_len": max_len, "max_len_source": how}


def tp_ok(tp: int, heads: int | None, kv: int | None) -> bool:
    if tp < 1:
        return False
    if heads and heads % tp:
        return False
    if kv and kv % tp and tp % kv:
        return False
    return True


def valid_tps(heads: int | None, kv: int | None, limit: int | None = None) -> list[int]:
    top = max(heads or 1, kv or 1)
    if limit:
        top = min(top, limit)
    return [t for t in range(1, top + 1) if tp_ok(t, heads, kv)]


def suggest_tp(tp: int, heads: int | None, kv: int | None, limit: int | None = None, at_least: int = 1) -> int | None:
    """The TP to propose instead of `tp`: the smallest valid one at or above both `tp` and `at_least` (e.g. what
    the HBM needs), else the largest valid one within `limit`."""
    ok = valid_tps(heads, kv, limit)
    above = [t for t in ok if t >= max(tp, at_least)]
    return above[0] if above else (ok[-1] if ok else None)


def _or_list(xs: list[int]) -> str:
    s = [str(x) for x in xs]
    return s[0] if len(s) == 1 else ", ".join(s[:-1]) + " or " + s[-1]


def _tp_issue(tp: int, shape: Mapping[str, Any], what: str, limit: int | None, limit_why: str, at_least: int = 1,
              role: str = "") -> str | None:
    heads, kv = _int(shape.get("heads")), _int(shape.get("kv_heads"))
    if tp_ok(tp, heads, kv):
        return None
    name = (role + " " if role else "") + str(shape.get("name") or "the model")
    if heads and heads % tp:
        msg = f"{what} {tp} does not divide the {heads} attention heads of {name}"
    else:
        msg = (f"{what} {tp} splits the {kv} KV heads of {name} unevenly (vLLM needs {kv} % TP = 0 or "
               f"TP % {kv} = 0)")
    ok = valid_tps(heads, kv, limit)
    why = [limit_why] if limit and limit_why else []
    if at_least > 1 and [t for t in ok if t >= at_least]:
        ok = [t for t in ok if t >= at_least]
        why.append(f"TP {at_least} or more for the HBM")
    if ok:
        msg += f"; use {_or_list(ok)}" + (f" ({'; '.join(why)})" if why else "")
    else:
        msg += "; no TP divides them" + (f" {limit_why}" if limit_why else "")
    return msg + " — vLLM refuses it at startup"


def machine_limits(env_facts: Mapping[str, Any] | None, platform: str, pp: int = 1) -> tuple[int | None, str, int]:
    """(largest TP this machine has room for, how to say so, smallest TP whose weights fit), from the facts the
    environment step stored; (None, "", 1) where unknown."""
    facts = env_facts or {}
    if platform == "neuron":
        cores = _int(facts.get("logical_cores"))
        per_core, weights = _int(facts.get("hbm_per_core")), _int(facts.get("weights_bytes"))
        fit = smallest_fitting(weights, per_core, cores or 128) if per_core and weights else None
        return cores, (f"within the {cores} logical cores" if cores else ""), fit or 1
    if platform == "cuda":
        vis = facts.get("visible_gpus")
        if isinstance(vis, list) and vis:
            n = max(len(vis) // max(pp, 1), 1)
            return n, f"within the {len(vis)} visible GPUs" + (f" at PP {pp}" if pp > 1 else ""), 1
    return None, "", 1


def truthy(v: Any) -> bool:
    """vLLM's reading of a boolean environment variable."""
    return str(v or "").strip().lower() in ("1", "true")


def check(shapes: Mapping[str, Any] | None, server: Mapping[str, Any], speculative: Mapping[str, Any],
          *, tp_limit: int | None = None, tp_limit_why: str = "", tp_at_least: int = 1,
          allow_long: bool | None = None) -> list[Issue]:
    """Issues of the settings (`server` / `speculative` tables of a profile) against the recorded shapes
    ({"target": shape_of(...), "draft": shape_of(...)}). `tp_limit`: the largest TP the machine has room for
    (neuron: logical cores), named in the suggestions as `tp_limit_why`; `tp_at_least`: the smallest TP whose
    weights fit (the suggestions start there). `allow_long`: VLLM_ALLOW_LONG_MAX_MODEL_LEN
    is set (None: read the profile's server.env)."""
    shapes = shapes or {}
    target, draft = shapes.get("target"), shapes.get("draft")
    issues: list[Issue] = []
    tp = _int(server.get("tensor_parallel_size"))
    if isinstance(target, Mapping) and tp and tp > 0:
        msg = _tp_issue(tp, target, "TP", tp_limit, tp_limit_why, tp_at_least)
        if msg:
            issues.append((TP_KEY, ERROR, msg))
    dtp_set = _int(speculative.get("draft_tensor_parallel_size")) or 0
    dtp = dtp_set or tp
    if isinstance(draft, Mapping) and dtp and dtp > 0:
        msg = _tp_issue(dtp, draft, "draft TP" if dtp_set else "TP", tp_limit, tp_limit_why,
                        1 if dtp_set else tp_at_least, role="the draft")
        if msg:
            if not dtp_set:
                msg += f" (the draft runs at the target's TP unless {DRAFT_TP_KEY} = 1)"
            issues.append((DRAFT_TP_KEY if dtp_set else TP_KEY, ERROR, msg))

    if isinstance(target, Mapping):
        name = target.get("name") or "the model"
        mml, limit = _int(server.get("max_model_len")), _int(target.get("max_len"))
        if mml and limit and mml > limit:
            if allow_long is None:
                env = server.get("env") if isinstance(server.get("env"), Mapping) else {}
                allow_long = truthy(env.get(ALLOW_LONG))
            src = target.get("max_len_source") or ""
            msg = (f"max_model_len {mml} exceeds the {limit} positions of {name}"
                   + (f" ({src})" if src else ""))
            if allow_long:
                issues.append((LEN_KEY, WARN, msg + f"; {ALLOW_LONG} is set, so vLLM accepts it (positions past "
                                                    f"{limit} give NaN or garbage)"))
            else:
                issues.append((LEN_KEY, ERROR, msg + f"; use {limit} or less (0: vLLM takes {limit}) — vLLM "
                                                     "refuses it at startup"))
        pp, layers = _int(server.get("pipeline_parallel_size")) or 1, _int(target.get("layers"))
        if layers and pp > layers:
            issues.append((PP_KEY, ERROR, f"PP {pp} splits the {layers} layers of {name} into {pp} stages: "
                                          f"{pp - layers} would hold no layer; use at most {layers}"))
    return issues


__all__ = ["ERROR", "WARN", "Issue", "check", "derive_max_len", "machine_limits", "shape_of", "suggest_tp",
           "text_config", "tp_ok", "truthy", "valid_tps", "yarn_realigned"]
