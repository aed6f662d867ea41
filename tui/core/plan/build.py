"""The one plan of a run: every argv it launches, built in one place for the profile, the platform and the vLLM
version.

`build_plan` lists them in run order — the models' preparation (models.prepare), the dataset builders (the sonnet
prompts as a custom JSONL on vLLM >= 0.32), each arm's server and each benchmark (arm × workload × repeat, with
its `--seed`). The launches (steps/checkpoints, steps/server, steps/arm, steps/bench) call the same functions
(`serve_argv`, `bench_argv`, `custom_builder_argv`, `prepare_argv`), `--show-commands` and the app's `c` screen
render `build_plan` (`show_commands_text`), and nothing appends flags afterwards. A run records every command it
launched in `commands.json` (`record_command`); a finished run's `c` and `--open` show those (`recorded_text`).

Seeds (`bench_seed`): a tune run's repeat r benchmarks with `--seed tune.seed + r - 1` (tune.seed defaults to 0,
vLLM's default), so repeats draw different prompts and an interval covers prompt sampling as well as timing
noise; `tune.vary_seed = false` keeps `--seed tune.seed` for every repeat. Where the bench reads a custom JSONL
(sonnet on vLLM >= 0.32, chat, own), varying seeds drop `--disable-shuffle` so the file is shuffled with the
seed, and the sonnet JSONL holds `num_prompts × repeats` prompts (`custom_pool_size`) so each seed samples a
different subset. A two-arm run passes no `--seed` (the tutorial's command, vLLM's default seed 0).

This module sits above commands, arms, workloads and probe; none of them imports it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from tui.core.plan import commands as cmd
from tui.core.plan.benchmode import BenchMode, bench_mode
from tui.core.plan.arms import arms_of, is_tune, level_key, levels_of, repeats_of, result_name, workloads_of
from tui.core.plan.commands import CUSTOM_JSONL, DATASET_MODE_LABELS, Placeholders, dataset_mode, format_command
from tui.core.host.interpreter import find_server_interpreter
from tui.core.profile.model import Profile
from tui.core.profile.sections import SpeculativeSettings
from tui.core.plan.workloads import Workload, WorkloadError, _label, resolve_workload, serve_flags_for_per_request
from tui.core.versions import served_problem

DEFAULT_RUN_DIR = "./specdec-runs/<run>"
RECORD_FILE = "commands.json"  # every command a run launched, in order (record_command)


# --------------------------------------------------------------------------------------------------
# seeds


def vary_seed(profile: Profile) -> bool:
    """Whether the repeats of a tune run draw their prompts with different seeds (tune.vary_seed, default true)."""
    return profile.tune is not None and profile.tune.vary_seed


def bench_seed(profile: Profile, repeat: int) -> int | None:
    """The `--seed` of repeat `repeat` (1-based) of a tune run: tune.seed + repeat - 1 (tune.seed with
    tune.vary_seed = false); None for a two-arm run (no --seed: the tutorial's command)."""
    t = profile.tune
    if t is None:
        return None
    return t.seed + (int(repeat) - 1) if t.vary_seed else t.seed


def custom_pool_size(profile: Profile) -> int:
    """How many sonnet prompts the custom JSONL holds: benchmark.num_prompts (in a load sweep the most any level
    sends), times the repeats when seeds vary (each seed then shuffles the pool and the bench takes a different
    subset of it)."""
    n = max([int(profile.benchmark.num_prompts)] + [cmd.level_prompts(profile, lv) for lv in cmd.sweep_levels(profile)])
    if is_tune(profile) and vary_seed(profile) and repeats_of(profile) > 1:
        return n * repeats_of(profile)
    return n


# --------------------------------------------------------------------------------------------------
# argv (what the launches call)


def prepare_argv(profile: Profile, ph: Placeholders | None = None) -> list[str]:
    """models.prepare with placeholders resolved ([] when the profile has none)."""
    return cmd.prepare_argv(profile, ph)


def serve_argv(profile: Profile, speculative: SpeculativeSettings | bool | None, vllm_version: str | None,
               ph: Placeholders | None = None) -> list[str]:
    """The server argv: the tutorial's `vllm serve` (commands.serve_argv) and, on a tune run's speculative arm
    with vLLM >= 0.29, `--per-request-spec-decode-metrics summary` (the probe's per-request metrics)."""
    argv = cmd.serve_argv(profile, speculative, ph)
    if is_tune(profile):
        argv += serve_flags_for_per_request(vllm_version, bool(speculative))
    return argv


def serve_env(profile: Profile, ph: Placeholders | None = None) -> dict[str, str]:
    return cmd.serve_env(profile, ph)


def custom_builder_argv(profile: Profile, python_argv: list[str], sonnet_path: str, out_path: str,
                        ph: Placeholders | None = None) -> list[str]:
    """The sonnet custom JSONL builder (vLLM >= 0.32), run in the vLLM interpreter."""
    return cmd.sonnet_custom_argv(profile, python_argv, cmd.tools_dir(), sonnet_path, out_path, ph,
                                  num_prompts=custom_pool_size(profile))


def bench_argv(profile: Profile, result_file: str, dataset_path: str, vllm_version: str | None,
               ph: Placeholders | None = None, workload: Workload | None = None, repeat: int = 1,
               level: int | None = None) -> list[str]:
    """The `vllm bench serve` argv of one benchmark: repeat `repeat` of `workload` (None: the tutorial's sonnet),
    at concurrency `level` in a load sweep (None: benchmark.max_concurrency)."""
    seed = bench_seed(profile, repeat)
    shuffle = vary_seed(profile) and repeats_of(profile) > 1
    return cmd.bench_argv(profile, result_file, dataset_path, vllm_version, ph, workload=workload, seed=seed,
                          shuffle=shuffle, level=level)


def sonnet_path(profile: Profile, run_dir: str, ph: Placeholders) -> str:
    """Where the run's sonnet.txt is: dataset.path, else the run directory's copy."""
    return ph.resolve(profile.dataset.path) if profile.dataset.path else f"{run_dir}/sonnet.txt"


def planned_workload(profile: Profile, name: str, ph: Placeholders) -> Workload:
    """The Workload for the plan: "own" reads tune.prompts_file's first line for its endpoint; a file that cannot
    be read yet is planned as {"prompt"} lines (/v1/completions)."""
    if name == "own":
        path = ph.resolve(profile.tune.prompts_file if profile.tune is not None else "")
        try:
            return resolve_workload("own", path)
        except WorkloadError:
            return Workload("own", "completions", path, _label("own", "completions"))
    return resolve_workload(name)


# --------------------------------------------------------------------------------------------------
# the plan


@dataclass(frozen=True)
class PlannedCommand:
    step: str  # the step that launches it
    role: str  # "prepare" | "tool" | "serve" | "bench"
    title: str  # the comment above it
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    workload: str | None = None
    repeat: int | None = None
    seed: int | None = None

    def text(self) -> str:
        return format_command(list(self.argv), self.env or None)


@dataclass
class RunPlan:
    profile_name: str
    run_dir: str
    vllm_version: str | None
    dataset_mode: str
    commands: list[PlannedCommand]
    bench_mode: BenchMode | None = None  # how each arm's benches run (one warm process per arm, or one each)

    def of(self, step: str, role: str | None = None) -> list[PlannedCommand]:
        return [c for c in self.commands if c.step == step and (role is None or c.role == role)]


def _show_placeholders(profile: Profile, run_dir: str) -> Placeholders:
    """{vllm_python} is the interpreter of the `vllm` on PATH when one is found, else it stays written as
    "{vllm_python}" (determined at run time)."""
    ph = Placeholders(run_dir=run_dir)
    interp = find_server_interpreter(ph.resolve(profile.server.command[0]), dict(os.environ))
    ph.vllm_python = interp.python or "{vllm_python}"
    return ph


def build_plan(profile: Profile, run_dir: str = DEFAULT_RUN_DIR, vllm_version: str | None = None,
               ph: Placeholders | None = None, vllm_python: list[str] | None = None) -> RunPlan:
    """Every command of a run of `profile` in `run_dir` with `vllm_version`, in run order."""
    if ph is None:
        ph = _show_placeholders(profile, run_dir)
    if vllm_python is None and ph.vllm_python and ph.vllm_python != "{vllm_python}":
        vllm_python = [ph.vllm_python]
    mode = dataset_mode(vllm_version)
    out: list[PlannedCommand] = []
    prep = prepare_argv(profile, ph)
    if prep:
        out.append(PlannedCommand("checkpoints", "prepare", "Checkpoints: prepare the local models (runs only when a "
                                  "model directory is missing)", tuple(prep)))
    sonnet = sonnet_path(profile, run_dir, ph)
    dataset = sonnet
    if mode == "custom-from-sonnet":
        dataset = f"{run_dir}/{CUSTOM_JSONL}"
        py = vllm_python or ["{vllm_python}"]
        out.append(PlannedCommand("baseline", "tool", "Step 0: build the sonnet prompts as a custom JSONL (once per "
                                  "run; " + ("every benchmark uses it)" if is_tune(profile) else "both benchmarks use it)"),
                                  tuple(custom_builder_argv(profile, py, sonnet, dataset, ph))))
    env = serve_env(profile, ph)
    benches = bench_mode(profile, dict(os.environ), ph)
    tune = is_tune(profile)
    wls = workloads_of(profile) if tune else ["sonnet"]
    repeats = repeats_of(profile) if tune else 1
    rounds = list(profile.tune.rounds) if tune and profile.tune is not None else [repeats]

    def arm_commands(arm: Any, first: int, last: int, race: bool) -> None:
        what = "baseline" if not arm.speculative else (arm.title if tune else "EAGLE3")  # the tutorial's words
        step_no = "Step 1" if arm.id == "baseline" else ("Step 2" if not tune else "Step 3")
        if race:
            step_no = "Race (only for a configuration still in contention after the first round; the same server)"
        out.append(PlannedCommand(arm.id, "serve", f"{step_no}: {what} server" + (f" ({arm.id})" if tune and
                                  arm.speculative else ""), tuple(serve_argv(profile, arm.speculative, vllm_version, ph)),
                                  env))
        if benches.warm:
            warm_up = " ".join(benches.warm_up_argv(cmd.server_prefix(profile, ph) + ["bench", "serve"]))
            out.append(PlannedCommand(arm.id, "tool", f"{step_no}: {what} warm bench runner: runs this arm's benches "
                                      f"below in one process, each from its argv (it first runs `{warm_up}` there to "
                                      "import the bench's code)", tuple(benches.runner_argv())))
        for wl in wls:
            w = None if not tune or wl == "sonnet" else planned_workload(profile, wl, ph)
            path = dataset if w is None else f"{run_dir}/{w.bench_jsonl}"
            for level in (levels_of(profile) or [None]) if tune else [None]:
                key = level_key(wl, level)
                for r in range(first, last + 1):
                    res = f"{run_dir}/{result_name(profile, arm.id, key, r)}"
                    seed = bench_seed(profile, r)
                    title = f"{step_no}: {what} benchmark"
                    if tune:
                        title += f", workload {wl}" + (f" at concurrency {level}" if level is not None else "") + \
                            f" (r{r} of {last}, seed {seed})"
                    out.append(PlannedCommand(arm.id, "bench", title,
                                              tuple(bench_argv(profile, res, path, vllm_version, ph, workload=w,
                                                               repeat=r, level=level)),
                                              workload=key, repeat=r, seed=seed))

    all_arms = arms_of(profile)
    for arm in [a for a in all_arms if not a.schedule]:
        arm_commands(arm, 1, repeats, False)
    if len(rounds) > 1:  # the race's second round: at most these, in this order (tui/core/steps/race.py)
        for arm in [a for a in all_arms if not a.schedule]:
            arm_commands(arm, repeats + 1, rounds[-1], True)
    for arm in [a for a in all_arms if a.schedule]:
        arm_commands(arm, 1, repeats, False)
    return RunPlan(profile.name, run_dir, vllm_version, mode, out, benches)


def _version_head(profile: Profile, vllm_version: str | None, version_source: str) -> str:
    if version_source == "given":
        return f"# vLLM {vllm_version} (given with --vllm-version)"
    if version_source == "simulated" and vllm_version:
        outside = served_problem(vllm_version, profile.platform)
        return (f"# vLLM {vllm_version} (the version the simulator plays: [simulation] vllm_version)"
                + (f"\n# note: {outside}" if outside else ""))
    if version_source == "detected" and vllm_version:
        return f"# vLLM {vllm_version} (detected from server.command {profile.server.command[0]!r})"
    if version_source == "recorded" and vllm_version:
        return f"# vLLM {vllm_version} (recorded in the run's env.json)"
    return ("# vLLM version unknown (server.command's vllm could not be probed): assuming < 0.32, which has "
            "--dataset-name sonnet (pass --vllm-version X.Y.Z for another version)")


def planned_version(profile: Profile, vllm_version: str | None, version_source: str) -> tuple[str | None, str]:
    """(version, source) the plan is shown for: the one given, detected or recorded; else the release the profile
    states it runs ([simulation] vllm_version: "simulated"), which is the one its run uses; else unknown."""
    if vllm_version:
        return vllm_version, version_source
    declared = profile.declared_vllm_version
    if declared:
        return declared, "simulated"
    return None, "unknown"


def show_commands_text(profile: Profile, run_dir: str = DEFAULT_RUN_DIR, vllm_version: str | None = None,
                       version_source: str = "unknown", vllm_python: list[str] | None = None,
                       notes: Sequence[str] = ()) -> str:
    """The plan as shell text. `version_source`: "detected" (probed from the profile's command), "simulated"
    ([simulation] vllm_version), "given" (--vllm-version), "recorded" (a run's env.json) or "unknown" (not found:
    the sonnet form, as on the vLLM Neuron pins, stated in the output). Without a version, a profile that states
    its release ([simulation] vllm_version) is shown for that release (planned_version), as its run uses it.
    `notes`: further header lines about the server's vLLM (each printed as a comment)."""
    vllm_version, version_source = planned_version(profile, vllm_version, version_source)
    plan = build_plan(profile, run_dir, vllm_version, vllm_python=vllm_python)
    parts = [_version_head(profile, vllm_version, version_source),
             f"# Dataset: {DATASET_MODE_LABELS[plan.dataset_mode]}", *(f"# {n}" for n in notes)]
    if plan.bench_mode is not None:
        parts.append(f"# Benches: {plan.bench_mode.text()}")
    if is_tune(profile):
        # the seeds as planned; what the intervals then cover is the report's to say, from the seeds that ran
        seeds = [bench_seed(profile, r) for r in range(1, repeats_of(profile) + 1)]
        parts.append(f"# Repeats: {repeats_of(profile)} per arm and workload, bench --seed "
                     f"{', '.join(str(s) for s in seeds)}"
                     + ("" if len(set(seeds)) > 1 else " (tune.vary_seed = false: every repeat sends the same prompts)"))
        rounds = list(profile.tune.rounds) if profile.tune is not None else []
        if len(rounds) > 1:
            parts.append(f"# Race (tune.adaptive): after the first round, only the configurations still in contention "
                         f"are relaunched, for up to {rounds[-1]} repeats where the race is open; the commands marked "
                         "Race are the most it can run")
    parts.append("")
    for c in plan.commands:
        parts.append(f"# {c.title}")
        if c.role == "tool" and "{vllm_python}" in c.argv:
            parts.append("# {vllm_python}: the Python that runs `vllm` (not found here)")
        parts += [c.text(), ""]
    return "\n".join(parts).rstrip("\n") + "\n"


# --------------------------------------------------------------------------------------------------
# what a run launched


def record_command(run_dir: Path, step: str, role: str, argv: list[str] | tuple[str, ...], text: str,
                   write_json: Any, how: str = "") -> None:
    """Append one launched command to the run's commands.json (rewritten whole through `write_json`, the run
    directory's atomic writer). `how`: how it ran, where that is not its own process (a bench in the arm's warm
    runner)."""
    path = Path(run_dir) / RECORD_FILE
    try:
        rows = json.loads(path.read_text(encoding="utf-8")).get("commands", [])
    except (OSError, ValueError, AttributeError):
        rows = []
    row = {"step": step, "role": role, "argv": list(argv), "text": text}
    if how:
        row["how"] = how
    rows.append(row)
    write_json(RECORD_FILE, {"commands": rows})


def recorded_commands(run_dir: str | Path) -> list[dict[str, Any]]:
    """The commands a run launched ([] when it recorded none)."""
    try:
        rows = json.loads((Path(run_dir) / RECORD_FILE).read_text(encoding="utf-8")).get("commands", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [r for r in rows if isinstance(r, dict) and isinstance(r.get("argv"), list)]


def recorded_vllm_version(run_dir: str | Path) -> str | None:
    """The vLLM version a run's environment step found (env.json), else None."""
    for name in ("env.json",):
        try:
            data = json.loads((Path(run_dir) / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for holder in (data.get("stored") if isinstance(data, dict) else None, data):
            if isinstance(holder, dict) and isinstance(holder.get("vllm_version"), str):
                return holder["vllm_version"]
    return None


def recorded_text(run_dir: str | Path) -> str | None:
    """The commands that ran, as shell text with the step and role of each (None when none were recorded)."""
    rows = recorded_commands(run_dir)
    if not rows:
        return None
    version = recorded_vllm_version(run_dir)
    parts = [f"# The commands this run launched ({RECORD_FILE}), in order"
             + (f"; vLLM {version} (recorded in env.json)" if version else ""), ""]
    for r in rows:
        how = f" ({r['how']})" if isinstance(r.get("how"), str) and r.get("how") else ""
        parts += [f"# {r.get('step')}: {r.get('role')}{how}", str(r.get("text") or format_command(r["argv"])), ""]
    return "\n".join(parts).rstrip("\n") + "\n"


def plan_as_dict(plan: RunPlan) -> dict[str, Any]:
    return {"profile": plan.profile_name, "run_dir": plan.run_dir, "vllm_version": plan.vllm_version,
            "dataset_mode": plan.dataset_mode, "commands": [asdict(c) for c in plan.commands],
            "bench_mode": plan.bench_mode.as_dict() if plan.bench_mode is not None else None}


__all__ = ["PlannedCommand", "RunPlan", "bench_argv", "bench_seed", "build_plan", "custom_builder_argv",
           "custom_pool_size", "planned_version", "prepare_argv", "record_command", "recorded_commands",
           "recorded_text", "recorded_vllm_version", "serve_argv", "show_commands_text",
           "vary_seed"]
