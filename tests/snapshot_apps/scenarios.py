"""Deterministic synthetic engine events for snapshot and widget tests.

They follow the engine's event contract (tui/core/events.py) with fixed values, so screens can be put
in any state without running anything: a full demo run, a run stopped mid-launch, and the TP8 fault
(HBM allocation failure). Command texts are built with the engine's own formatter.
"""

from __future__ import annotations

from tui.core.serverlog import diagnostics as dg
from tui.core import events as ev
from tui.core.plan.commands import Placeholders, bench_argv, format_command, serve_argv, serve_env
from tui.core.profile.model import Profile, load_profile
from tui.core.results.report import comparison, comparison_rows

RUN_DIR = "specdec-runs/20260101-120000-demo"
PH = Placeholders(python="python", sim_hub="http://127.0.0.1:8765", cache_dir="~/.cache/specdec-tui",
                  run_dir=RUN_DIR)

BASE_RUN = {
    "output_throughput": 112.13, "request_throughput": 0.88, "total_token_throughput": 561.2, "duration_s": 34.2,
    "completed": 30, "failed": 0, "num_prompts": 30,
    "mean_ttft_ms": 255.1, "median_ttft_ms": 252.33, "p99_ttft_ms": 270.4,
    "mean_tpot_ms": 7.02, "median_tpot_ms": 7.0, "p99_tpot_ms": 7.31,
    "mean_itl_ms": 7.02, "median_itl_ms": 7.0, "p99_itl_ms": 7.9,
    "mean_e2el_ms": 1146.3, "median_e2el_ms": 1141.2, "p99_e2el_ms": 1180.0,
}
EAGLE_RUN = dict(BASE_RUN, output_throughput=134.53, request_throughput=1.05, total_token_throughput=673.3,
                 duration_s=28.5, mean_ttft_ms=220.4, median_ttft_ms=218.21, p99_ttft_ms=231.0,
                 mean_tpot_ms=5.85, median_tpot_ms=5.82, p99_tpot_ms=6.1, mean_itl_ms=9.81, median_itl_ms=9.77,
                 p99_itl_ms=11.2, mean_e2el_ms=963.1, median_e2el_ms=957.5, p99_e2el_ms=990.2,
                 acceptance_rate=69.0, acceptance_length=1.69, per_position_acceptance=[69.0],
                 acceptance_source="metrics")


def demo_profile() -> Profile:
    return load_profile("demo")


ENV_FACTS = [
    ("platform", "neuron", "pass", "vLLM with the vllm-neuron plugin on Trainium", ""),
    ("instance type", "trn2.48xlarge", "pass", "from DMI (/sys/class/dmi/id/product_name)", ""),
    ("Neuron devices", "16 devices, 64 logical cores (LNC=2)", "pass", "neuron-ls -j; /dev/neuron0..15", ""),
    ("NeuronCores in use", "none", "pass", "no process holds a NeuronCore (neuron-ls)", ""),
    ("Neuron SDK", "2.24 (≥ 2.31 needed: see vllm-neuron)", "pass", "from aws-neuronx-tools 2.24.0", ""),
    ("vLLM", "0.24.0", "pass", "installed in the interpreter that runs `vllm`", ""),
    ("vllm-neuron", "0.24.0.1.0.0", "pass", "the platform plugin is registered (vllm.platform_plugins)", ""),
    ("HBM fit", "8.3 GiB of 24.0 GiB per core", "pass",
     "openai/gpt-oss-120b: 234 GB of weights over TP16 incl. ~1 GiB runtime", ""),
    ("bench dataset support", "sonnet (built in)", "pass", "vLLM 0.24.0 reads sonnet.txt itself", ""),
    ("compile cache", "cold", "warn", "first launch compiles for several minutes",
     "keep VLLM_CACHE_ROOT on local NVMe so relaunches hit the cache"),
    ("server port", "127.0.0.1:8000 free", "pass", "", ""),
]


def env_events() -> list[ev.Event]:
    s = "env"
    out: list[ev.Event] = [ev.StepStarted(s, "Environment", ts=0.0)]
    out += [ev.Fact(s, *f) for f in ENV_FACTS]
    out.append(ev.StepFinished(s, "warned", 0.4, f"{len(ENV_FACTS)} checks, 1 warnings: compile cache", ts=0.0))
    return out


def env_hbm_fault_events() -> list[ev.Event]:
    """TP 8 caught before any launch: the HBM fit check fails in the environment step."""
    s = "env"
    facts = [f for f in ENV_FACTS if f[0] != "HBM fit"]
    fit = ("HBM fit", "15.6 GiB per core > 12.0 GiB", "fail",
           "openai/gpt-oss-120b: 234 GB of weights over TP8 = 15.6 GiB per logical core incl. ~1 GiB runtime; each "
           "logical core owns 12.0 GiB HBM (96 GiB per device / 8 logical cores, LNC=2, from neuron-ls): the server "
           "would fail in warmup with an HBM allocation failure",
           "set [server] tensor_parallel_size = 16 or higher (TP8 needs 15.6 GiB of 12.0 GiB per core)")
    out: list[ev.Event] = [ev.StepStarted(s, "Environment", ts=0.0)]
    out += [ev.Fact(s, *f) for f in facts[:7]] + [ev.Fact(s, *fit)] + [ev.Fact(s, *f) for f in facts[7:]]
    d = dg.hbm(s, [f"{fit[0]}: {fit[1]} — {fit[3]}"], 8, model="openai/gpt-oss-120b", remedy=fit[4])
    import dataclasses  # the title the environment step gives it (steps/env.py)

    out.append(dataclasses.replace(d, title="The model does not fit in device memory (HBM) at tensor-parallel-size 8"))
    out.append(ev.StepFinished(s, "failed", 0.4, f"1 of {len(facts) + 1} checks failed: HBM fit", ts=0.0))
    return out


def checkpoint_events() -> list[ev.Event]:
    s = "checkpoints"
    facts = [
        ("target checkpoint", "openai/gpt-oss-120b", "pass", "reachable; config.json fetched", ""),
        ("target commit", "b5c939de8f754692c1647ca79fbf85e8c1e70f8a", "info", "main", ""),
        ("target access", "public", "pass", "no token or license acceptance needed", ""),
        ("target size", "65.2 GB", "info", "15 top-level files", ""),
        ("target config", "GptOssForCausalLM, hidden 2880, vocab 201088, 36 layers, 128 experts, mxfp4", "info", "", ""),
        ("draft checkpoint", "RedHatAI/gpt-oss-120b-speculator.eagle3", "pass", "reachable; config.json fetched", ""),
        ("draft commit", "2f0a1d3c4b5e6f708192a3b4c5d6e7f8091a2b3c", "info", "main", ""),
        ("draft access", "public", "pass", "no token or license acceptance needed", ""),
        ("draft size", "1.7 GB", "info", "6 top-level files", ""),
        ("draft config", "eagle3 (Eagle3Speculator), verifier openai/gpt-oss-120b, hidden 2880, vocab 201088",
         "info", "", ""),
        ("disk space", "84.1 GB free", "info", "simulated run: nothing is downloaded", ""),
        ("draft type", "eagle3 = speculative.method", "pass", "", ""),
        ("draft verifier", "openai/gpt-oss-120b", "pass", "", ""),
        ("hidden size", "2880 = 2880", "pass", "", ""),
        ("vocab size", "201088 = 201088", "pass", "", ""),
        ("target quantization", "mxfp4", "info", "dequantized to BF16 at load time", ""),
        ("quantization override", "cleared by --hf-overrides", "pass", "", ""),
    ]
    out: list[ev.Event] = [ev.StepStarted(s, "Checkpoints", ts=0.0)]
    out += [ev.Fact(s, *f) for f in facts]
    out.append(ev.StepFinished(s, "passed", 1.2, "17 checks passed", ts=0.0))
    return out


def dataset_events() -> list[ev.Event]:
    s = "dataset"
    return [
        ev.StepStarted(s, "Dataset", ts=0.0),
        ev.Progress(s, "download", 11353, 22706, "B", 45000.0, 0.3, "sonnet.txt"),
        ev.Progress(s, "download", 22706, 22706, "B", 45412.0, 0.0, "sonnet.txt", done=True),
        ev.Fact(s, "source", "http://127.0.0.1:8765/datasets/sonnet.txt", "pass", "downloaded"),
        ev.Fact(s, "size", "22706 bytes", "info", f"{RUN_DIR}/sonnet.txt"),
        ev.Fact(s, "sha256", "verified", "pass", "d58663195ba6780da5f029b920c7ac00cad1e435ee1df7e03bf9ec2470f8dea4"),
        ev.Fact(s, "lines", "518", "info", "lines of text the benchmark samples prompts from"),
        ev.StepFinished(s, "passed", 0.5, "4 checks passed", ts=0.0),
    ]


def _rank_lines(step: str, start_id: int, text: str, ranks: int = 16) -> list[ev.Event]:
    out: list[ev.Event] = []
    for r in range(ranks):
        out.append(ev.LogLine(step, f"(EngineCore_DP0 pid=4242) (Worker_TP{r} pid={5000 + r}) "
                                    f"2026-01-01 12:00:0{min(r, 9)},000 - INFO - model.py:88 - {text}", ts=0.0))
    out.append(ev.CleanLog(step, start_id, text, "INFO", False))
    out.append(ev.LogRanks(step, start_id, ranks))
    return out


def launch_events(step: str, profile: Profile, *, finish: bool = True, fault: bool = False) -> list[ev.Event]:
    spec = step == "eagle3"
    title = ev.STEP_TITLES[step]
    argv = serve_argv(profile, spec, PH)
    cmd = format_command(argv, serve_env(profile, PH))
    out: list[ev.Event] = [ev.StepStarted(step, title, ts=0.0),
                           ev.Command(step, "serve", tuple(argv), cmd),
                           ev.Notice(step, "info", f"launched pid 4242; log: {RUN_DIR}/{step}.serve.log")]
    lid = 0

    def clean(text: str, level: str | None = "INFO", err: bool = False) -> None:
        nonlocal lid
        out.append(ev.LogLine(step, f"(APIServer pid=4242) {level or ''} 01-01 12:00:00 [api_server.py:1] {text}",
                              ts=0.0))
        out.append(ev.CleanLog(step, lid, text, level, err))
        lid += 1

    out.append(ev.Phase(step, "config", "started", ts=0.0))
    clean("vLLM API server version 0.24.0")
    clean(f"non-default args: {{'model': '{profile.models.target}', 'tensor_parallel_size': "
          f"{profile.server.tensor_parallel_size}, 'port': {profile.server.port}}}")
    out.append(ev.Phase(step, "config", "finished", 0.4, ts=0.0))
    out.append(ev.Phase(step, "workers", "started", ts=0.0))
    out += _rank_lines(step, lid, "Initializing Neuron worker, visible cores set by the plugin")
    lid += 1
    out.append(ev.Phase(step, "workers", "finished", 1.1, ts=0.0))
    out.append(ev.Phase(step, "weights", "started", ts=0.0))
    clean("Dequantizing MXFP4 expert weights to BF16 at load time")
    if fault:
        nrt = ("2026-Jan-01 12:00:03.000000 4242:4242 ERROR  TDRV:log_dev_mem    Failed to allocate 3.625GB "
               "(usage: tensors) on ND 0:NC 3")
        out.append(ev.LogLine(step, nrt, ts=0.0))
        out.append(ev.CleanLog(step, lid, "Failed to allocate 3.625GB (usage: tensors) on ND 0:NC 3", "ERROR", True))
        lid += 1
        clean("RuntimeError: Failed to allocate device memory for the model weights", "ERROR", True)
        out.append(ev.Phase(step, "weights", "finished", 3.2, ts=0.0))
        out.append(ev.Diagnosis(**_hbm(step, profile.server.tensor_parallel_size)))
        out.append(ev.Fact(step, "startup", "server exited with code 1", "fail",
                           "root cause: Failed to allocate 3.625GB (usage: tensors) on ND 0:NC 3",
                           f"see {step}.serve.log in the run directory"))
        out.append(ev.Notice(step, "info", "stopping the server (SIGINT, then SIGTERM, then SIGKILL)"))
        out.append(ev.StepFinished(step, "failed", 6.8, "1 of 1 checks failed: startup", ts=0.0))
        return out
    out.append(ev.Phase(step, "weights", "finished", 3.0, "log reports 2.9s", ts=0.0))
    if spec:
        out.append(ev.Phase(step, "draft", "started", ts=0.0))
        clean("Loading EAGLE3 draft RedHatAI/gpt-oss-120b-speculator.eagle3")
        out.append(ev.Phase(step, "draft", "finished", 1.0, ts=0.0))
    out.append(ev.Phase(step, "compile", "started", ts=0.0))
    out.append(ev.CompileCache(step, "MODULE_1a2b3c", False))
    out += _rank_lines(step, lid, "Compiling graph 'context_encoding' for bucket 512")
    lid += 1
    clean("WARNING: compile cache miss; compiling (first launch is slow)", "WARNING")
    if not finish:
        return out
    out.append(ev.Phase(step, "compile", "finished", 4.1, "cache 0 hits, 1 miss", ts=0.0))
    out.append(ev.Phase(step, "warmup", "started", ts=0.0))
    out.append(ev.Phase(step, "warmup", "finished", 1.0, ts=0.0))
    out.append(ev.Phase(step, "ready", "started", ts=0.0))
    out.append(ev.Phase(step, "ready", "finished", 0.0, "Application startup complete.", ts=0.0))
    clean("Application startup complete.")
    out.append(ev.Fact(step, "startup", "ready in 9.6s", "pass", "log: Application startup complete."))
    out.append(ev.Fact(step, "smoke test", "'6 7 8 9 10 '", "pass", "continues the count"))
    if spec:
        out.append(ev.Fact(step, "lossless check", "same as baseline", "pass", "baseline '6 7 8 9 10 '"))
    bench = format_command(bench_argv(profile, f"{RUN_DIR}/{step}.json", f"{RUN_DIR}/sonnet.txt", "0.24.0", PH))
    out.append(ev.Command(step, "bench", (), bench))
    n = profile.benchmark.num_prompts
    run = EAGLE_RUN if spec else BASE_RUN
    out.append(ev.Progress(step, "requests", n // 2, n, "req", 0.9, 17.0, "vllm bench serve"))
    out.append(ev.Progress(step, "tokens", (n // 2) * 128, n * 128, "tok", run["output_throughput"], None,
                           "generated tokens"))
    out.append(ev.Progress(step, "requests", n, n, "req", None, 0, "vllm bench serve", done=True))
    out.append(ev.Fact(step, "requests", f"{n} completed, 0 failed", "pass", f"{run['duration_s']:.1f}s"))
    out.append(ev.Fact(step, "output throughput", f"{run['output_throughput']:.2f} tok/s", "pass"))
    out.append(ev.Fact(step, "median TPOT / TTFT", f"{run['median_tpot_ms']:.2f} ms / {run['median_ttft_ms']:.2f} ms",
                       "pass"))
    if spec:
        out.append(ev.Fact(step, "acceptance", "69.00% (length 1.69)", "pass", "from the /metrics delta"))
    out.append(ev.Notice(step, "info", "stopping the server (SIGINT, then SIGTERM, then SIGKILL)"))
    out.append(ev.StepFinished(step, "passed", 48.2 if spec else 51.7,
                               f"{n} requests, {run['output_throughput']:.2f} tok/s", ts=0.0))
    return out


def _hbm(step: str, tp: int) -> dict:
    d = dg.hbm(step, ["Failed to allocate 3.625GB (usage: tensors) on ND 0:NC 3",
                      "RuntimeError: Failed to allocate device memory for the model weights"], tp)
    return {"step": d.step, "id": d.id, "severity": d.severity, "title": d.title, "evidence": d.evidence,
            "remedy": d.remedy}


def results_events(profile: Profile) -> list[ev.Event]:
    runs = {"baseline": BASE_RUN, "eagle3": EAGLE_RUN}
    comp = comparison(runs)
    rows = comparison_rows({"runs": runs})
    notes = ["ITL is measured per streamed chunk: under EAGLE3 a chunk carries several tokens, so compare the "
             "runs by TPOT and output throughput."]
    snippet = ("output_throughput    baseline=112.13 eagle3=134.53\nmedian_tpot_ms       baseline=7.00 eagle3=5.82\n"
               "median_ttft_ms       baseline=252.33 eagle3=218.21\n\nEAGLE3 output throughput speedup: 1.20x")
    return [
        ev.StepStarted("results", "Results", ts=0.0),
        ev.ComparisonTable("results", tuple(tuple(r) for r in rows), comp, tuple(notes), runs),
        ev.Snippet("results", snippet),
        dg.make("acceptance-low", "results", ["acceptance rate 24.0% (illustrative)"], severity="info"),
        ev.Fact("results", "output throughput speedup", "1.20x", "pass", "baseline 112.13 → EAGLE3 134.53 tok/s"),
        ev.Fact("results", "median TPOT", "7.00 → 5.82 ms", "pass", "ratio 0.83"),
        ev.Fact("results", "acceptance rate", "69.00%", "pass", "acceptance length 1.69 (source: metrics)"),
        ev.StepFinished("results", "passed", 0.1, "EAGLE3 output throughput speedup 1.20x, acceptance 69.0%",
                        ts=0.0),
        ev.RunFinished("", 0, f"{RUN_DIR}/report.json", ts=0.0),
    ]


def full_run(profile: Profile | None = None) -> list[ev.Event]:
    profile = profile or demo_profile()
    return ([ev.RunStarted("", profile.name, RUN_DIR, ev.STEP_IDS, True, ts=0.0)] + env_events()
            + checkpoint_events() + dataset_events() + launch_events("baseline", profile)
            + launch_events("eagle3", profile) + results_events(profile))


def until_baseline_compile(profile: Profile | None = None) -> list[ev.Event]:
    profile = profile or demo_profile()
    return ([ev.RunStarted("", profile.name, RUN_DIR, ev.STEP_IDS, True, ts=0.0)] + env_events()
            + checkpoint_events() + dataset_events() + launch_events("baseline", profile, finish=False))


def tp8_fault(profile: Profile | None = None) -> list[ev.Event]:
    profile = (profile or demo_profile()).with_values({"server.tensor_parallel_size": 8})
    return ([ev.RunStarted("", profile.name, RUN_DIR, ev.STEP_IDS, True, ts=0.0)] + env_events()
            + checkpoint_events() + dataset_events() + launch_events("baseline", profile, fault=True))


def env_tp8_fault(profile: Profile | None = None) -> list[ev.Event]:
    profile = (profile or demo_profile()).with_values({"server.tensor_parallel_size": 8})
    return [ev.RunStarted("", profile.name, RUN_DIR, ev.STEP_IDS, True, ts=0.0)] + env_hbm_fault_events()


REGRESSED_RUN = dict(EAGLE_RUN, output_throughput=58.48, median_tpot_ms=15.46, mean_tpot_ms=15.46,
                     acceptance_rate=76.18, acceptance_length=1.76, per_position_acceptance=[76.18])


def results_regressed_events() -> list[ev.Event]:
    """Speculation does not pay (the real CPU run's numbers): the results step fails on the verdict."""
    runs = {"baseline": dict(BASE_RUN, output_throughput=111.58, median_tpot_ms=7.77, mean_tpot_ms=7.77),
            "eagle3": REGRESSED_RUN}
    comp = comparison(runs)
    rows = comparison_rows({"runs": runs})
    d = dg.throughput_rule("results", runs["baseline"], runs["eagle3"], k=1)[0]
    return [
        ev.StepStarted("results", "Results", ts=0.0),
        ev.ComparisonTable("results", tuple(tuple(r) for r in rows), comp, (), runs),
        d,
        ev.Fact("results", "output throughput speedup", "0.52x", "fail", "baseline 111.58 → EAGLE3 58.48 tok/s"),
        ev.Fact("results", "median TPOT", "7.77 → 15.46 ms", "warn", "ratio 1.99"),
        ev.Fact("results", "acceptance rate", "76.18%", "pass", "acceptance length 1.76 (source: metrics)"),
        ev.StepFinished("results", "failed", 0.1, "EAGLE3 output throughput speedup 0.52x, acceptance 76.2%; "
                        "1 diagnosis", ts=0.0),
        ev.RunFinished("", 1, f"{RUN_DIR}/report.json", ts=0.0),
    ]


def regressed_run(profile: Profile | None = None) -> list[ev.Event]:
    profile = profile or demo_profile()
    return ([ev.RunStarted("", profile.name, RUN_DIR, ev.STEP_IDS, True, ts=0.0)] + env_events()
            + checkpoint_events() + dataset_events() + launch_events("baseline", profile)
            + launch_events("eagle3", profile) + results_regressed_events())
