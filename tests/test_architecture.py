"""The engine's floors (docs/architecture.md): a module of tui/core imports only its own floor and the floors
below it, so no two folders import each other, there is no import circle, and tui/core imports neither Textual
nor the simulator. The graph is grimp's, with imports inside functions counted (a lazy import cannot dodge a
floor) and `if TYPE_CHECKING:` imports left out (they never run)."""

from __future__ import annotations

import grimp
import pytest

# Ground first. A floor may import the floors listed before it, never one after it.
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("tui.core", "tui.core.events", "tui.core.versions", "tui.core.vllmfacts", "tui.core.secrets")),
    ("bench", ("tui.core.bench",)),
    ("store", ("tui.core.store",)),
    ("host", ("tui.core.host",)),
    ("proc", ("tui.core.proc",)),
    ("profile", ("tui.core.profile",)),
    ("serverlog", ("tui.core.serverlog",)),
    ("plan", ("tui.core.plan",)),
    ("results", ("tui.core.results",)),
    ("steps", ("tui.core.steps",)),
    ("exec", ("tui.core.exec",)),
    ("run", ("tui.core.run",)),
]


def floor_of(module: str) -> int | None:
    """The index of the floor `module` lives on (a ground module is named exactly; a floor holds its package and
    everything under it), or None when no floor holds it."""
    for i, (_, roots) in enumerate(FLOORS):
        for root in roots:
            if module == root or (i > 0 and module.startswith(root + ".")):
                return i
    return None


def violations(modules: set[str], edges: set[tuple[str, str]]) -> list[str]:
    """Every way the graph breaks the floors: a tui.core module on no floor, an import of a higher floor, and
    an import circle inside a floor."""
    out = [f"{m} is on no floor (add it to FLOORS and docs/architecture.md)" for m in sorted(modules)
           if m.startswith("tui.core") and floor_of(m) is None]
    for a, b in sorted(edges):
        fa, fb = floor_of(a), floor_of(b)
        if fa is not None and fb is not None and fb > fa:
            out.append(f"{a} ({FLOORS[fa][0]}) imports {b} ({FLOORS[fb][0]}), a higher floor")
    adj: dict[str, set[str]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
    for start in sorted(adj):
        seen, todo = set(), list(adj[start])
        while todo:
            m = todo.pop()
            if m == start:
                out.append(f"{start} imports itself through a circle")
                break
            if m not in seen:
                seen.add(m)
                todo += adj.get(m, ())
    return out


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("tui", include_external_packages=True, exclude_type_checking_imports=True,
                             cache_dir=None)


def _core(graph: grimp.ImportGraph) -> tuple[set[str], set[tuple[str, str]]]:
    modules = {m for m in graph.modules if m == "tui.core" or m.startswith("tui.core.")}
    edges = {(a, b) for a in modules for b in graph.find_modules_directly_imported_by(a) if b in modules}
    return modules, edges


def test_engine_keeps_to_its_floors(graph):
    modules, edges = _core(graph)
    assert len(modules) > 40 and "tui.core.run.engine" in modules  # the graph really holds the engine
    assert violations(modules, edges) == []


def test_no_two_core_folders_import_each_other(graph):
    modules, edges = _core(graph)
    top = {(".".join(a.split(".")[:3]), ".".join(b.split(".")[:3])) for a, b in edges}
    top = {(a, b) for a, b in top if a != b}
    assert sorted((a, b) for a, b in top if (b, a) in top) == []


def test_core_imports_neither_textual_nor_the_simulator(graph):
    modules, _ = _core(graph)
    bad = sorted((m, t) for m in modules for t in graph.find_modules_directly_imported_by(m)
                 if t.split(".")[0] == "textual" or t == "tui.sim" or t.startswith("tui.sim."))
    assert bad == []


def test_plan_sits_above_its_builders(graph):
    """tui.core.plan.build is the one place that assembles a run's argv: it imports the builders (arms,
    commands, workloads, the interpreter probe) and none of them imports it."""
    builders = {"tui.core.plan.arms", "tui.core.plan.commands", "tui.core.plan.workloads",
                "tui.core.host.interpreter"}
    assert builders <= graph.find_modules_directly_imported_by("tui.core.plan.build")
    assert all("tui.core.plan.build" not in graph.find_modules_directly_imported_by(b) for b in builders)


def test_the_load_analysis_sits_on_the_results_floor(graph):
    """Issue 17's pure analysis modules live on the results floor (its package root holds them) and import
    nothing above it (plan.arms for the bench keys is below)."""
    results = next(i for i, (name, _) in enumerate(FLOORS) if name == "results")
    for m in ("tui.core.results.load", "tui.core.results.drift", "tui.core.results.specmodel"):
        assert m in graph.modules and floor_of(m) == results
        assert all((floor_of(t) or 0) <= results for t in graph.find_modules_directly_imported_by(m)
                   if t.startswith("tui."))


REPORT_MODULES = ("figures", "figures_draw", "report", "report_md", "report_html", "report_rows", "verdict_table",
                  "statement", "load_text")


def test_report_figures_sit_on_the_results_floor(graph):
    """The report's modules (issue 22 split report.py and figures.py by job: the chart data, their drawing, the
    verdict table, report.md, report.html, the statement every text and chart takes its words from) are on the
    results floor and import nothing above it, and nothing in the engine imports matplotlib but
    tui.core.results.figures_draw (drawn only when a report is written)."""
    idx = next(i for i, (name, _) in enumerate(FLOORS) if name == "results")
    modules, _ = _core(graph)
    for name in REPORT_MODULES:
        mod = f"tui.core.results.{name}"
        assert floor_of(mod) == idx and mod in modules, mod
        up = [m for m in graph.find_modules_directly_imported_by(mod)
              if m.startswith("tui.core") and (floor_of(m) or 0) > idx]
        assert up == [], (mod, up)
    users = sorted(m for m in modules if any(t.split(".")[0] == "matplotlib"
                                             for t in graph.find_modules_directly_imported_by(m)))
    assert users == ["tui.core.results.figures_draw"]


def test_every_floor_exists_as_a_package(graph):
    for name, roots in FLOORS:
        for root in roots:
            assert root in graph.modules, f"floor {name}: {root} is missing"


# The checker itself: a deliberately bad graph must be caught, a good one must pass.

def test_checker_catches_an_import_running_up():
    mods = {"tui.core.events", "tui.core.store.rundir", "tui.core.plan.arms"}
    assert violations(mods, {("tui.core.plan.arms", "tui.core.store.rundir")}) == []
    bad = violations(mods, {("tui.core.store.rundir", "tui.core.plan.arms")})
    assert bad == ["tui.core.store.rundir (store) imports tui.core.plan.arms (plan), a higher floor"]


def test_checker_catches_a_circle_inside_a_floor():
    mods = {"tui.core.plan.arms", "tui.core.plan.commands"}
    bad = violations(mods, {("tui.core.plan.arms", "tui.core.plan.commands"),
                            ("tui.core.plan.commands", "tui.core.plan.arms")})
    assert "tui.core.plan.arms imports itself through a circle" in bad


def test_checker_catches_a_module_on_no_floor():
    assert violations({"tui.core.misc"}, set()) == [
        "tui.core.misc is on no floor (add it to FLOORS and docs/architecture.md)"]
    assert floor_of("tui.core.eventsx") is None and floor_of("tui.core.events") == 0


def test_engine_runs_steps_through_the_registry():
    """Every step id of the tutorial has its step, any other id (a tune arm) runs through the arm step, and
    the engine finds steps there (no import by module name)."""
    from tui.core.events import STEP_IDS
    from tui.core.profile.model import load_profile
    from tui.core.steps import registry

    assert set(registry.STEPS) == set(STEP_IDS) | {"race"}  # race: a tune run's second round (issue 29)
    assert registry.step_for("eagle3-k4") is registry.ARM_STEP
    assert registry.step_for("race", load_profile("tune-demo")) is registry.STEPS["race"]
    tune = load_profile("tune-demo")
    assert registry.step_for("baseline", tune) is registry.ARM_STEP
    assert registry.step_for("baseline", load_profile("demo")) is registry.STEPS["baseline"]
    from tui.core.run import engine

    assert "importlib" not in open(engine.__file__, encoding="utf-8").read()


def _function_imports(source: str) -> list[tuple[int, str]]:
    """(line, text) of each import of the project's own modules inside a function body."""
    import ast

    lines = source.splitlines()
    out = []
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom):
                    own = node.level > 0 or (node.module or "").split(".")[0] in ("tui", "screens")
                elif isinstance(node, ast.Import):
                    own = any(a.name.split(".")[0] in ("tui", "screens") for a in node.names)
                else:
                    continue
                if own:
                    out.append((node.lineno, lines[node.lineno - 1]))
    return sorted(set(out))


def test_engine_imports_at_the_top_of_its_files():
    """The graph a reader sees is the real one: an import of the project inside a function is allowed only
    where it keeps start-up fast, and then it says so on its line ("start-up")."""
    from pathlib import Path

    core = Path(__file__).resolve().parents[1] / "tui" / "core"
    hidden = [f"{p.relative_to(core.parent.parent)}:{n}: {text.strip()}" for p in sorted(core.rglob("*.py"))
              for n, text in _function_imports(p.read_text(encoding="utf-8")) if "start-up" not in text]
    assert hidden == []


def test_function_import_finder_finds_one():
    src = "import os\n\ndef f():\n    from tui.core import events\n    import json\n    return events\n"
    assert _function_imports(src) == [(4, "    from tui.core import events")]
    assert _function_imports("def f():\n    from tui.core import events  # start-up: lazy\n")[0][0] == 2


# -- the front ends: no import circle either ------------------------------------------------------------------
def front_end_graph() -> tuple[set[str], set[tuple[str, str]]]:
    """The front ends' modules (tui/app, tui/widgets, screens/ installed as tui.screens, and tui's own top-level
    modules) and the imports among them, read from their sources (imports inside functions count): grimp reads the
    `tui` folder, which does not hold screens/."""
    import ast
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    files: dict[str, Path] = {}
    for folder, package in (("tui/app", "tui.app"), ("tui/widgets", "tui.widgets"), ("screens", "tui.screens")):
        for p in sorted((repo / folder).glob("*.py")):
            files[package if p.stem == "__init__" else f"{package}.{p.stem}"] = p
    for p in sorted((repo / "tui").glob("*.py")):
        if p.stem not in ("__init__", "__main__"):
            files[f"tui.{p.stem}"] = p
    edges: set[tuple[str, str]] = set()
    for mod, path in files.items():
        package = mod if path.stem == "__init__" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                if t in files and t != mod:
                    edges.add((mod, t))
    return set(files), edges


def test_front_ends_import_no_circle():
    modules, edges = front_end_graph()
    assert {"tui.app.app", "tui.screens.base", "tui.screens.profile", "tui.widgets.common"} <= modules
    assert ("tui.screens.profile", "tui.screens.base") in edges  # the graph really holds the panes' imports
    assert [v for v in violations(modules, edges) if "circle" in v] == []
