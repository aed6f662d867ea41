"""A fleet's numbers (tui/core/exec/ray.py ran the arms on several nodes), as an analyst signs them.

- Pairing: a speculative arm's speedup is against the baseline measured on the node it ran on (every node group
  runs its own baseline: the `baseline` step's facts hold them under `nodes`). An arm whose repeats ran on several
  nodes (a continued run, a re-run after a lost node) is compared with the baselines of exactly those nodes.
- Node classes: nodes whose facts differ (instance type, Neuron SDK / driver, vLLM and plugin, CPU, model files)
  are never pooled. Each class gets its own matrix and recommendation; the run's matrix is the class of the first
  node's baseline, and the report says which arms are apart and why. An arm's repeats on a node of another class
  than its last node are left out of its cell (named, not pooled).
- Homogeneity: the node-to-node spread of the baseline, per workload: each node's mean with its interval, and the
  fastest over the slowest node's mean with Fieller's 95 % interval (stats.ratio_interval). An interval that
  includes 1.0 says the nodes cannot be told apart at this noise.

Pure: from the arms' facts (each arm's `node` object and each repeat's `node` key), nothing else.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

from tui.core.results.intervals import _numbers, ratio_interval, t_interval
from tui.core.results.stats import build_matrix, cell


def node_baselines(facts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{node key: that node's baseline facts} ({} for a run on one host)."""
    nodes = (facts.get("baseline") or {}).get("nodes")
    return {k: v for k, v in nodes.items() if isinstance(v, dict)} if isinstance(nodes, dict) else {}


def is_fleet(facts: dict[str, dict[str, Any]]) -> bool:
    return bool(node_baselines(facts))


def _node_objects(facts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{node key: its node object} from every arm's and every node baseline's facts."""
    out: dict[str, dict[str, Any]] = {}
    for f in [*facts.values(), *node_baselines(facts).values()]:
        node = (f or {}).get("node")
        if isinstance(node, dict) and node.get("key"):
            out.setdefault(str(node["key"]), node)
    return out


def class_of(host: dict[str, Any] | None) -> str:
    """A node class: the digest of the node's comparable facts."""
    blob = json.dumps(host or {}, sort_keys=True, default=str)
    return "c" + hashlib.sha256(blob.encode()).hexdigest()[:8]


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def node_classes(facts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """[{id, nodes, host, differs}] in node order: nodes with identical facts share a class; `differs` says how a
    class's facts differ from the first class's ("" for the first)."""
    nodes = _node_objects(facts)
    classes: dict[str, dict[str, Any]] = {}
    for key in sorted(nodes, key=_key_order):
        host = nodes[key].get("host") or {}
        cid = class_of(host)
        classes.setdefault(cid, {"id": cid, "nodes": [], "host": host, "differs": ""})["nodes"].append(key)
    out = list(classes.values())
    if out:
        first = _flat(out[0]["host"])
        for c in out[1:]:
            mine = _flat(c["host"])
            diff = [f"{k}: {mine.get(k)} vs {first.get(k)}" for k in sorted(set(first) | set(mine))
                    if mine.get(k) != first.get(k)]
            c["differs"] = "; ".join(diff)
    return out


def _key_order(key: str) -> tuple[int, str]:
    return (int(key[1:]) if key[1:].isdigit() else 1 << 30, key)


def _repeats(facts: dict[str, Any], wl: str) -> list[dict[str, Any]]:
    return [r for r in ((facts.get("repeats") or {}).get(wl) or []) if isinstance(r, dict)]


def view(arm_ids: Sequence[str], facts: dict[str, dict[str, Any]],
         workloads: Sequence[str]) -> dict[str, Any] | None:
    """The fleet's view of a run's arms, None for a run on one host: {"facts": each arm's facts with only the repeats
    of its last node's class, "baselines": {arm: the baseline facts it is compared with}, "left_out": {arm: text},
    "class_of": {node: class id}, "arm_class": {arm: class id}, "classes": node_classes}."""
    bases = node_baselines(facts)
    if not bases:
        return None
    classes = node_classes(facts)
    cls_of = {k: c["id"] for c in classes for k in c["nodes"]}
    out_facts: dict[str, dict[str, Any]] = {}
    pairs: dict[str, dict[str, Any]] = {}
    left: dict[str, str] = {}
    arm_class: dict[str, str] = {}
    for aid in arm_ids:
        f = facts.get(aid) or {}
        if aid == "baseline":
            out_facts[aid] = f
            top = (f.get("node") or {}).get("key")
            arm_class[aid] = cls_of.get(str(top), classes[0]["id"] if classes else "")
            continue
        home = str((f.get("node") or {}).get("key") or "")
        cid = cls_of.get(home, "")
        arm_class[aid] = cid
        kept: dict[str, list[dict[str, Any]]] = {}
        used: set[str] = set()
        dropped: list[str] = []
        for wl, recs in (f.get("repeats") or {}).items():
            kept[wl] = []
            for r, rec in enumerate(recs if isinstance(recs, list) else [], start=1):
                if not isinstance(rec, dict):
                    continue
                node = str(rec.get("node") or home)
                if cls_of.get(node, cid) != cid:
                    dropped.append(f"{wl} r{r} on {node}")
                    continue
                used.add(node)
                kept[wl].append(rec)
        if dropped:
            left[aid] = (f"left out (measured on a node of another class than {home}): " + ", ".join(dropped))
        out_facts[aid] = dict(f, repeats=kept) if f.get("repeats") is not None else f
        if not used and home:
            used = {home}
        base: dict[str, Any] = {"repeats": {}, "probe": {}}
        for node in sorted(used, key=_key_order):
            b = bases.get(node) or {}
            for wl in workloads:
                base["repeats"].setdefault(wl, []).extend(_repeats(b, wl))
            for wl, p in (b.get("probe") or {}).items():
                base["probe"].setdefault(wl, p)  # the first node's probe: lossless is per node's own prompts
        if home in bases:
            base["probe"] = dict((bases[home].get("probe") or {}))
        base["nodes"] = sorted(used, key=_key_order)
        pairs[aid] = base
    return {"facts": out_facts, "baselines": pairs, "left_out": left, "class_of": cls_of, "arm_class": arm_class,
            "classes": classes}


def spread(facts: dict[str, dict[str, Any]], workloads: Sequence[str]) -> dict[str, Any]:
    """The node-to-node spread of the baseline per workload: {wl: {"nodes": {key: {mean, ci95, n}}, "ratio",
    "ci95", "fastest", "slowest", "homogeneous": True / False / None (no interval), "text"}}."""
    bases = node_baselines(facts)
    out: dict[str, Any] = {}
    for wl in workloads:
        per = {}
        for key in sorted(bases, key=_key_order):
            vals = _numbers(r.get("output_throughput") for r in _repeats(bases[key], wl))
            if vals:
                ti = t_interval(vals)
                per[key] = {"mean": ti["mean"], "ci95": ti["ci95"], "n": ti["n"], "values": vals}
        entry: dict[str, Any] = {"nodes": {k: {x: v[x] for x in ("mean", "ci95", "n")} for k, v in per.items()},
                                 "ratio": None, "ci95": None, "fastest": None, "slowest": None, "homogeneous": None,
                                 "text": ""}
        if len(per) >= 2:
            fast = max(per, key=lambda k: per[k]["mean"])
            slow = min(per, key=lambda k: per[k]["mean"])
            ri = ratio_interval(per[fast]["values"], per[slow]["values"])
            entry.update(ratio=ri["ratio"], ci95=ri["ci95"], fastest=fast, slowest=slow)
            if ri["ci95"]:
                entry["homogeneous"] = ri["ci95"][0] <= 1.0 <= ri["ci95"][1]
                lo, hi = ri["ci95"]
                entry["text"] = (f"baseline {fast} / {slow}: {ri['ratio']:.3f}x [{lo:.3f}, {hi:.3f}] — "
                                 + ("the nodes cannot be told apart at this noise" if entry["homogeneous"] else
                                    "the nodes differ beyond the noise: compare arms within a node"))
            elif ri["ratio"] is not None:
                entry["text"] = (f"baseline {fast} / {slow}: {ri['ratio']:.3f}x (no interval: "
                                 + ("unbounded" if ri.get("unbounded") else "one repeat") + ")")
        elif len(per) == 1:
            entry["text"] = f"one node measured a baseline ({next(iter(per))}): no spread"
        out[wl] = entry
    return out


def matrix(rows: list[dict[str, Any]], fv: dict[str, Any], keys: list[str],
           facts: dict[str, dict[str, Any]], selection: dict[str, Any] | None = None) -> dict[str, Any]:
    """A fleet's matrix (stats.build_matrix with each arm paired with its nodes' baselines, `view`); when the nodes
    fall into several classes, it holds the first class's arms and `fleet.classes` a matrix per class. The
    matrix's `fleet`: node → class, the classes (nodes, facts, how they differ, arms), the baseline spread, the
    repeats left out, each arm's pairing (the nodes whose baselines it is compared with) and each node's baseline
    cell per workload (`baselines`)."""
    classes = fv["classes"]
    arm_class = fv["arm_class"]

    def of_class(cid: str | None) -> dict[str, Any]:
        mine = [r for r in rows if cid is None or arm_class.get(r["id"]) == cid or r.get("kind") == "baseline"]
        return build_matrix(mine, {r["id"]: fv["facts"].get(r["id"]) or {} for r in mine}, keys, fv["baselines"], selection)

    several = len(classes) > 1
    main = of_class(classes[0]["id"] if several else None)
    info: dict[str, Any] = {"nodes": {c: n for c, n in fv["class_of"].items()}, "classes": [],
                            "spread": spread(facts, keys), "left_out": fv["left_out"],
                            "pairing": {aid: b.get("nodes") for aid, b in fv["baselines"].items()},
                            "baselines": {key: {wl: cell(_repeats(b, wl), speculative=False) for wl in keys}
                                          for key, b in sorted(node_baselines(facts).items(),
                                                               key=lambda kv: _key_order(kv[0]))}}
    for c in classes:
        entry = {"id": c["id"], "nodes": c["nodes"], "host": c["host"], "differs": c["differs"],
                 "arms": [r["id"] for r in rows if arm_class.get(r["id"]) == c["id"] and r.get("kind") != "baseline"]}
        if several:
            entry["matrix"] = of_class(c["id"])
        info["classes"].append(entry)
    main["fleet"] = info
    return main


def report_section(state_fleet: dict[str, Any], mat: dict[str, Any] | None) -> dict[str, Any]:
    """report.json's `fleet`: the cluster and its nodes as state.json recorded them (Ray node id, address, host
    facts, lost), with the matrix's classes, baseline spread, pairing and repeats left out."""
    out = {k: state_fleet.get(k) for k in ("address", "ray_version", "arm_resources", "nodes")}
    info = (mat or {}).get("fleet") or {}
    out.update({k: info.get(k) for k in ("classes", "spread", "pairing", "left_out")})
    return out


def fleet_markdown(fleet: dict[str, Any]) -> str:
    """report.md's Fleet section: the nodes, the node classes and why they differ, the baseline spread, the
    pairing of each arm with its node's baseline."""
    lines = ["## Fleet", "", f"Ray cluster at `{fleet.get('address')}` (Ray {fleet.get('ray_version')}); each arm "
             f"reserved {', '.join(f'{k} {v:g}' for k, v in (fleet.get('arm_resources') or {}).items())}.", "",
             "| Node | Ray node | Address | Host | Instance | vLLM | Status |", "|---|---|---|---|---|---|---|"]
    for key, n in sorted((fleet.get("nodes") or {}).items(), key=lambda kv: _key_order(kv[0])):
        host = n.get("host") or {}
        lines.append(f"| {key} | `{str(n.get('id') or '')[:12]}` | {n.get('address')} | {n.get('hostname')} | "
                     f"{host.get('instance_type') or '—'} | {host.get('vllm_version') or '—'} | "
                     f"{'lost: ' + n['lost'] if n.get('lost') else 'ok'} |")
    classes = fleet.get("classes") or []
    if len(classes) > 1:
        lines += ["", "Node classes (arms on nodes whose facts differ are never pooled; each class has its own "
                      "matrix in report.json's fleet.classes):", ""]
        for c in classes:
            lines.append(f"- {c['id']}: nodes {', '.join(c['nodes'])}; arms {', '.join(c.get('arms') or []) or 'none'}"
                         + (f" — differs: {c['differs']}" if c.get("differs") else " (the run's matrix)"))
    elif classes:
        lines += ["", f"One node class: nodes {', '.join(classes[0]['nodes'])} have the same instance, SDK, vLLM, "
                      "CPU and model files."]
    spread_ = fleet.get("spread") or {}
    if spread_:
        lines += ["", "Baseline spread across nodes (evidence of homogeneity):", ""]
        for wl, e in spread_.items():
            per = ", ".join(f"{k} {v['mean']:.1f} tok/s" for k, v in (e.get("nodes") or {}).items()
                            if v.get("mean") is not None)
            lines.append(f"- {wl}: {per}" + (f"; {e['text']}" if e.get("text") else ""))
    pairing = fleet.get("pairing") or {}
    if pairing:
        lines += ["", "Each arm's speedup is against the baseline of the node(s) it ran on: "
                  + ", ".join(f"{a} → {'+'.join(n or [])}" for a, n in pairing.items()) + "."]
    for aid, text in (fleet.get("left_out") or {}).items():
        lines.append(f"- {aid}: {text}")
    return "\n".join(lines) + "\n"


__all__ = ["class_of", "fleet_markdown", "matrix", "report_section", "is_fleet", "node_baselines", "node_classes", "spread", "view"]
