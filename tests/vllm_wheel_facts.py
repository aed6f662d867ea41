"""Derive the per-version vLLM facts the app relies on from vLLM's own wheels (tui/core/data/vllm_facts.json).

Two stages, so the facts can be re-derived and checked without downloading anything:

1. `excerpt` (needs the wheel, ~240 MB each): reads a few source files out of the wheel with zipfile (nothing is
   installed or imported) and writes a small, reviewable excerpt of each under tests/fixtures/vllm/<version>/:
   - `SOURCE.json`: the wheel's file name, sha256, size, build date (the zip date of vllm/_version.py), the
     commit id in vllm/_version.py and the sha256 of every source file read;
   - `speculative.py`: vllm/config/speculative.py reduced by `speculative_excerpt` to the Literal aliases and
     the annotated fields of `class SpeculativeConfig` (with each field's docstring);
   - `bench_args.txt`: the `--flags` `vllm bench serve` declares (add_argument in vllm/benchmarks/serve.py and
     vllm/benchmarks/datasets/datasets.py);
   - `markers.txt`: "name path:line text" for each behaviour marker found (MARKERS);
   - `files.txt`: which of the modules in PRESENCE the wheel has (a module's removal is a fact too).
2. `derive` (no wheel): builds one version's facts from its excerpt directory (`speculative_table`,
   the flags, the markers). tests/test_vllm_facts.py checks that the committed JSON is `derive` of the
   committed excerpts, and checks the functions on a small handwritten source.

Usage (from the repository root):
    pip download --no-deps vllm==0.34.0 -d /tmp/w && python tests/vllm_wheel_facts.py excerpt /tmp/w/vllm-0.34.0-*.whl
    python tests/vllm_wheel_facts.py write       # tui/core/data/vllm_facts.json from tests/fixtures/vllm/*/
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "vllm"
DATA = ROOT / "tui" / "core" / "data" / "vllm_facts.json"

SPECULATIVE = "vllm/config/speculative.py"
BENCH_SOURCES = ("vllm/benchmarks/serve.py", "vllm/benchmarks/datasets/datasets.py")
VERSION_FILE = "vllm/_version.py"
LITERALS = {"SpeculativeMethod": "methods", "RejectionSampleMethod": "rejection_sample_methods",
            "DraftSampleMethod": "draft_sample_methods"}

# Behaviour markers: (name, source file in the wheel, regular expression of the line that carries it).
MARKERS = (
    ("config_forbids_unknown_keys", "vllm/config/utils.py", r'ConfigDict\(extra="forbid"\)'),
    ("model_runner_v1_removed", "vllm/platforms/interface.py",
     r"VLLM_USE_V2_MODEL_RUNNER=\{value\} is no longer supported"),
    ("unknown_vllm_env_detected", "vllm/platforms/interface.py", r"Unknown vLLM environment variable detected"),
    ("cpu_x86_requires_triton", "vllm/platforms/cpu.py", r"vLLM on x86 CPUs requires Triton \(triton-cpu\)"),
    ("cpu_x86_triton_warning", "vllm/platforms/cpu.py", r"Triton is not installed\. triton-cpu is expected"),
    ("bench_stream_error_fails_request", "vllm/benchmarks/lib/endpoint_request_func.py",
     r"if error := data\.get\(\"error\"\)"),
    ("bench_chat_backends_skip_chat_template", "vllm/benchmarks/datasets/datasets.py",
     r"^CHAT_TEMPLATE_BACKENDS = "),
)

# Files recorded by their sha256 only (a claim that they are the same in several releases is checked on these).
HASHED = ("vllm/v1/spec_decode/dynamic/utils.py",)
# Modules whose presence or absence matters (vllm-neuron imports the first; the CPU synthetic-sampling fallback
# lives in the third; dynamic speculative decoding's schedule validator in the last).
PRESENCE = ("vllm/v1/spec_decode/metadata.py", "vllm/v1/worker/gpu_model_runner.py", "vllm/utils/cpu_triton_utils.py",
            "vllm/v1/spec_decode/dynamic/utils.py")


# ------------------------------------------------------------------------------------------------- stage 1


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise ValueError(f"no class {name} in the source")


def speculative_excerpt(source: str) -> str:
    """The parts of vllm/config/speculative.py the table is derived from: the module-level `X = Literal[...]`
    aliases and `class SpeculativeConfig` with only its annotated fields (and the docstring after each)."""
    tree = ast.parse(source)
    out: list[str] = []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Subscript) and ast.unparse(node.value.value) == "Literal"):
            out.append(ast.unparse(node))
    cls = _class(tree, "SpeculativeConfig")
    body: list[str] = []
    for i, st in enumerate(cls.body):
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            body.append("    " + ast.unparse(st))
            nxt = cls.body[i + 1] if i + 1 < len(cls.body) else None
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                body.append("    " + ast.unparse(nxt))
    out.append("\n\nclass SpeculativeConfig:\n" + "\n".join(body))
    return "\n".join(out) + "\n"


def bench_flags(sources: list[str]) -> list[str]:
    """The `--flags` declared by `add_argument("--flag", ...)` calls (first string argument), sorted."""
    flags: set[str] = set()
    for src in sources:
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                for a in node.args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"):
                        flags.add(a.value)
    return sorted(flags)


def find_markers(files: dict[str, str]) -> list[str]:
    """'name path:line text' for every marker whose line is in `files` ({wheel path: source})."""
    out = []
    for name, path, pattern in MARKERS:
        src = files.get(path)
        if src is None:
            continue
        for no, line in enumerate(src.splitlines(), 1):
            if re.search(pattern, line):
                out.append(f"{name} {path}:{no} {line.strip()}")
                break
    return out


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def excerpt(wheel: Path, dest_root: Path = FIXTURES) -> Path:
    """Write tests/fixtures/vllm/<version>/ from a vLLM wheel (see the module docstring). Returns the directory."""
    data = wheel.read_bytes()
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        ver_src = zf.read(VERSION_FILE).decode()
        version = re.search(r"__version__ = version = '([^']+)'", ver_src).group(1)  # type: ignore[union-attr]
        commit = re.search(r"commit_id = '([^']*)'", ver_src)
        built = zf.getinfo(VERSION_FILE).date_time
        wanted = {SPECULATIVE, *BENCH_SOURCES, *(p for _, p, _ in MARKERS), *HASHED}
        files = {p: zf.read(p).decode() for p in sorted(wanted) if p in names}
    d = dest_root / version
    d.mkdir(parents=True, exist_ok=True)
    source = {"package": "vllm", "version": version, "wheel": wheel.name, "wheel_sha256": _sha(data),
              "wheel_bytes": len(data), "built": "%04d-%02d-%02d" % built[:3],
              "commit": commit.group(1) if commit else None,
              "files_sha256": {p: _sha(s.encode()) for p, s in files.items()}}
    (d / "SOURCE.json").write_text(json.dumps(source, indent=2) + "\n")
    (d / "speculative.py").write_text(
        f"# Excerpt of {SPECULATIVE} from {wheel.name} (tests/vllm_wheel_facts.py speculative_excerpt)\n"
        + speculative_excerpt(files[SPECULATIVE]))
    (d / "bench_args.txt").write_text("\n".join(bench_flags([files[p] for p in BENCH_SOURCES if p in files])) + "\n")
    (d / "markers.txt").write_text("\n".join(find_markers(files)) + "\n")
    (d / "files.txt").write_text("".join(f"{p}\n" for p in PRESENCE if p in names))
    return d


# ------------------------------------------------------------------------------------------------- stage 2


def _literal_values(node: ast.expr, aliases: dict[str, ast.expr]) -> list[str]:
    """The strings of a Literal[...] type, nested aliases (`EagleModelTypes`) expanded."""
    if isinstance(node, ast.Name) and node.id in aliases:
        return _literal_values(aliases[node.id], aliases)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Literal":
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [v for it in items for v in _literal_values(it, aliases)]
    raise ValueError(f"not a Literal: {ast.unparse(node)}")


def _init_false(value: ast.expr | None) -> bool:
    return (isinstance(value, ast.Call) and ast.unparse(value.func) in ("field", "dataclasses.field", "Field")
            and any(k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in value.keywords))


def speculative_table(source: str) -> dict[str, Any]:
    """From vllm/config/speculative.py (or its excerpt): the fields `SpeculativeConfig(**json)` takes, in
    declaration order (init=False fields left out and listed apart), those vLLM fills in itself
    (`SkipValidation[...]`: passed from the engine or made in post-init), those documented as deprecated no-ops,
    each field's annotation, and the values of the method Literals."""
    tree = ast.parse(source)
    aliases = {n.targets[0].id: n.value for n in tree.body
               if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
    cls = _class(tree, "SpeculativeConfig")
    fields: list[str] = []
    types: dict[str, str] = {}
    internal: list[str] = []
    init_false: list[str] = []
    deprecated: list[str] = []
    for i, st in enumerate(cls.body):
        if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
            continue
        name, ann = st.target.id, ast.unparse(st.annotation)
        if ann.startswith("ClassVar"):
            continue
        if _init_false(st.value):
            init_false.append(name)
            continue
        fields.append(name)
        types[name] = ann
        if ann.startswith("SkipValidation["):
            internal.append(name)
        nxt = cls.body[i + 1] if i + 1 < len(cls.body) else None
        if (isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)
                and nxt.value.value.lstrip().startswith("Deprecated")):
            deprecated.append(name)
    out: dict[str, Any] = {"fields": fields, "internal": internal, "init_false": init_false,
                           "deprecated": deprecated, "types": types}
    for alias, key in LITERALS.items():
        if alias in aliases:
            seen: list[str] = []
            for v in _literal_values(aliases[alias], aliases):
                if v not in seen:
                    seen.append(v)
            out[key] = seen
    return out


def derive(version_dir: Path) -> dict[str, Any]:
    """One version's facts from its excerpt directory (stage 1's output)."""
    source = json.loads((version_dir / "SOURCE.json").read_text())
    markers = {}
    for line in (version_dir / "markers.txt").read_text().splitlines():
        if line.strip():
            name, where, _text = line.split(" ", 2)
            markers[name] = where
    return {
        "source": {k: source[k] for k in ("wheel", "wheel_sha256", "wheel_bytes", "built", "commit")},
        "speculative_config": speculative_table((version_dir / "speculative.py").read_text()),
        "bench_serve_flags": [f for f in (version_dir / "bench_args.txt").read_text().split() if f],
        "markers": markers,
        "modules": {p: p in (version_dir / "files.txt").read_text().split() for p in PRESENCE},
    }


def derive_all(root: Path = FIXTURES) -> dict[str, Any]:
    versions = sorted((d for d in root.iterdir() if (d / "SOURCE.json").is_file()),
                      key=lambda d: tuple(int(x) for x in d.name.split(".")))
    return {"generated_by": "tests/vllm_wheel_facts.py (derive of tests/fixtures/vllm/<version>/)",
            "versions": {d.name: derive(d) for d in versions}}


def render(facts: dict[str, Any]) -> str:
    return json.dumps(facts, indent=1, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["excerpt"] and len(argv) > 1:
        for w in argv[1:]:
            print(excerpt(Path(w)))
        return 0
    if argv == ["write"]:
        DATA.parent.mkdir(parents=True, exist_ok=True)
        DATA.write_text(render(derive_all()))
        print(DATA)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
