"""As-you-type checks of edited settings against the facts the environment step found.

The profile rules (tui/core/profile/model.py) say whether a value is valid at all; these checks say whether it can
work on *this* machine: TP against the logical cores (neuron) or visible GPUs (cuda), the model's weights at
that TP against the HBM of one logical core, the cores other processes hold, the server port, and the
benchmark lengths against server.max_model_len. The fact names are those the `env` step stores
(ctx.shared["env"], see tui/core/steps/env.py); a fact that is missing is not checked. Once the checkpoints step
has read the models' config.json, its `model_shape` (in the same facts mapping) adds what vLLM refuses for the
models' shape: TP against the attention / KV heads, max_model_len against the positions, PP against the layers
(tui/core/host/modelshape.py).

Pure: the port probe is passed in (tui.core.proc.supervisor.port_free in the app), so tests need no sockets.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from tui.core.host import modelshape
from tui.core.host.platforms import hbm_need_per_core, profile_platform, smallest_fitting
from tui.core.host.sysinfo import GIB, ranges

ERROR = "error"  # the retry would fail: the settings are refused until it is fixed
WARN = "warn"  # may fail (another process holds the port / cores): shown, not refused

Issue = tuple[str, str, str]  # (dotted key, level, message)


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def _edited_tables(profile: Any, edits: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    data = profile.data if hasattr(profile, "data") else profile
    out = {sec: dict(tbl) for sec, tbl in data.items() if isinstance(tbl, dict)}
    for dotted, value in (edits or {}).items():
        sec, _, key = dotted.partition(".")
        if key:
            out.setdefault(sec, {})[key] = value
    return out


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def check_edits(profile: Any, env_facts: Mapping[str, Any] | None, edits: Mapping[str, Any] | None = None,
                port_free: Callable[[str, int], bool] | None = None) -> list[Issue]:
    """Issues of `profile` (a Profile or its data) with `edits` (dotted keys) applied, against `env_facts`.

    Returns [(dotted key, "error" | "warn", message)], in the order of the form; empty when all is well."""
    s = _edited_tables(profile, edits)
    srv, bench = s.get("server", {}), s.get("benchmark", {})
    facts = env_facts or {}
    issues: list[Issue] = []

    tp = _int(srv.get("tensor_parallel_size"))
    pp = _int(srv.get("pipeline_parallel_size")) or 1
    platform = facts.get("platform") or profile_platform(profile)
    if tp is not None and tp > 0 and facts:
        key = "server.tensor_parallel_size"
        if platform == "neuron":
            cores = _int(facts.get("logical_cores"))
            if cores is not None and tp > cores:
                issues.append((key, ERROR, f"TP {tp} needs {tp} logical cores; this instance has {cores}"))
            per_core, weights = _int(facts.get("hbm_per_core")), _int(facts.get("weights_bytes"))
            if per_core and weights:
                need = hbm_need_per_core(weights, tp)
                if need > per_core:
                    fit = smallest_fitting(weights, per_core, cores or 128)
                    hint = f": use TP {fit} or higher" if fit else ": the weights fit at no TP on this instance"
                    issues.append((key, ERROR, f"TP {tp} needs {_gib(need)} HBM per logical core, "
                                               f"each has {_gib(per_core)}{hint}"))
            busy = facts.get("busy_cores")
            if isinstance(busy, list) and busy:
                held = sorted(set(range(tp)) & {c for c in busy if isinstance(c, int)})
                if held:
                    issues.append((key, WARN, f"logical cores {ranges(held)} are held by another process "
                                              "(see the Environment step)"))
        elif platform == "cuda":
            vis = facts.get("visible_gpus")
            if isinstance(vis, list) and tp * pp > len(vis):
                issues.append((key, ERROR, f"TP {tp} × PP {pp} needs {tp * pp} GPUs; {len(vis)} visible"))

    shapes = facts.get("model_shape")
    if isinstance(shapes, Mapping):
        limit, why, at_least = modelshape.machine_limits(facts, platform, pp)
        issues += modelshape.check(shapes, srv, s.get("speculative", {}), tp_limit=limit, tp_limit_why=why,
                                   tp_at_least=at_least, allow_long=shapes.get("allow_long"))

    port, host = _int(srv.get("port")), srv.get("host")
    if port_free is not None and port is not None and 0 < port < 65536 and isinstance(host, str) and host:
        try:
            free = port_free(host, port)
        except (OSError, ValueError):  # e.g. a host name that does not resolve: the profile rules speak to it
            free = True
        if not free:
            issues.append(("server.port", WARN, f"port {port} on {host} is in use (or needs privileges) now"))

    mml, inp, out = _int(srv.get("max_model_len")), _int(bench.get("input_len")), _int(bench.get("output_len"))
    if mml and inp is not None and out is not None and inp + out > mml:
        msg = f"input + output length {inp} + {out} = {inp + out} > server.max_model_len {mml}"
        issues += [("benchmark.input_len", ERROR, msg), ("benchmark.output_len", ERROR, msg)]
    return issues
