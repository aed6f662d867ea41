"""Step `env` against fake sysroots, a fake `neuron-ls`, fake package tools and real throwaway vLLM venvs.

Nothing under test is mocked: the step reads a fake DMI/dev/sysfs tree (SPECDEC_SYSROOT), runs executable
scripts found on a private PATH, and probes real `python -m venv` interpreters whose site-packages hold
fake `vllm` / `vllm-neuron` *.dist-info directories. The fake packages raise on import, which proves the
probe reads metadata only.
"""


from __future__ import annotations

import errno
import json
import os
import socket

import pytest

from tui.core.plan.commands import Placeholders
from tui.core.events import Artifact
from tui.core.host.interpreter import find_server_interpreter, probe_vllm_version, run_probe
from tui.core.profile.model import load_profile
from tui.core.host.sysinfo import parse_neuron_ls, version_tuple
from tui.core.steps.env import settled_bind_error

from env_util import (
    FIXTURES,
    PY,
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
)


# ---------------------------------------------------------------------------------------------
# whole-step scenarios
# ---------------------------------------------------------------------------------------------


async def test_tutorial_profile_without_neuron_fails_with_readable_list(tmp_path):
    prof = load_profile("gpt-oss-120b-eagle3-trn2")
    ctx, ev = make_ctx(tmp_path, prof)
    res, facts = await run_env(ctx, ev)
    assert res.status == "failed"
    failed = {n for n, f in facts.items() if f.status == "fail"}
    assert {"instance type", "Neuron devices", "vLLM interpreter"} <= failed
    assert "`vllm` not found on PATH" in facts["vLLM interpreter"].detail
    for n in failed:
        assert facts[n].remedy, n  # every failure says what to do
    assert res.summary.startswith(f"{len(failed)} of {len(facts)} checks failed: ")
    assert "instance type" in res.summary and "Neuron devices" in res.summary
    assert facts["neuron-ls"].status == "warn"
    assert facts["Neuron SDK"].status == "warn" and facts["Neuron SDK"].value == "unknown"
    assert res.facts["vllm_version"] is None and res.facts["simulated"] is False
    doc = json.loads((tmp_path / "run" / "env.json").read_text())
    assert [f["name"] for f in doc["facts"]] == list(facts)
    assert doc["stored"]["vllm_version"] is None
    assert any(isinstance(e, Artifact) and e.name == "env.json" for e in ev)


async def test_trn2_idle_with_good_plugin_passes(tmp_path):
    root, path = good_setup(tmp_path, vllm="0.29.0", plugin="0.29.0.1.2.0")  # Neuron SDK 2.33's: a served release
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    res, facts = await run_env(ctx, ev)
    assert res.status == "passed", [(f.name, f.status, f.detail) for f in facts.values() if f.status != "pass"]
    assert facts["instance type"].value == "trn2.48xlarge"
    assert facts["Neuron devices"].value.startswith("16 ")
    assert facts["neuron-ls"].value == "16 devices, 64 logical cores, LNC=2, 96.0 GiB HBM per device"
    assert facts["logical cores"].status == "pass" and "cores 0-15 on device(s) 0-3" in facts["logical cores"].detail
    assert facts["Neuron cores free"].status == "pass"
    assert facts["Neuron SDK"].value == "2.32" and "aws-neuronx-tools 2.32.28.0" in facts["Neuron SDK"].detail
    assert facts["vLLM"].value == "0.29.0" and "vLLM release" not in facts
    assert facts["vllm-neuron"].value == "0.29.0.1.2.0"
    assert facts["neuron platform plugin"].value == "neuron = vllm_neuron:register"
    assert facts["vllm_neuron module"].status == "pass"
    assert facts["vLLM pin"].status == "pass"
    assert facts["sonnet dataset"].status == "pass"
    assert facts["spec-decode stats"].status == "pass"
    assert facts["Python (vLLM)"].status == "pass"
    f = res.facts
    assert f["vllm_version"] == "0.29.0" and f["vllm_neuron_version"] == "0.29.0.1.2.0"
    assert f["neuron_sdk"] == "2.32" and f["logical_cores"] == 64 and f["lnc"] == 2 and f["neuron_devices"] == 16
    # The HBM fit's inputs and the busy cores, for the Profile pane's as-you-type checks (tui/core/host/livecheck.py):
    # 96 GiB per device over 4 logical cores; org/tiny-target has no known size; no process holds a core.
    assert f["hbm_per_core"] == 24 * 1024**3 and f["weights_bytes"] is None and f["busy_cores"] == []
    assert f["sonnet_available"] is True and f["bench_prints_spec_decode"] is True
    assert f["python"] == str(path[0] / "python")
    doc = json.loads((tmp_path / "run" / "env.json").read_text())
    assert doc["probe"]["data"]["packages"]["vllm"] == "0.29.0"
    assert doc["neuron_ls"]["parsed"]["logical_cores"] == 64


async def test_an_sdk_232_vllm_still_runs_but_is_said_to_be_outside_the_served_releases(tmp_path):
    root, path = good_setup(tmp_path)  # vLLM 0.24 with vllm-neuron 0.24.0.1.1.0 (Neuron SDK 2.32)
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    res, facts = await run_env(ctx, ev)
    rel = facts["vLLM release"]
    assert rel.status == "warn" and "vLLM 0.24.0 is outside the releases specdec-tui serves on platform 'neuron' " \
        "(0.29 to 0.33)" in rel.detail
    assert res.status == "warned" and facts["vLLM pin"].status == "pass"


async def test_env_shebang_launcher_is_followed(tmp_path):
    root, path = good_setup(tmp_path, launcher="env")
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    res, facts = await run_env(ctx, ev)
    assert facts["vLLM interpreter"].status == "pass"
    assert "env shebang" in facts["vLLM interpreter"].detail
    assert res.facts["vllm_version"] == "0.24.0"


async def test_busy_cores_on_needed_device_fail_naming_pid_and_command(tmp_path):
    devs = idle_devices()
    devs[0]["neuron_processes"] = [{"pid": 4242, "command": "python3 -m vllm.entrypoints.openai.api_server",
                                    "neuron_runtime_version": "2.34.10"}]
    root, path = good_setup(tmp_path, devs)
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    res, facts = await run_env(ctx, ev)
    f = facts["Neuron cores free"]
    assert f.status == "fail" and res.status == "failed"
    assert "pid 4242" in f.detail and "python3 -m vllm.entrypoints.openai.api_server" in f.detail
    assert "device 0 (cores 0-3)" in f.detail
    assert "kill 4242" in f.remedy


async def test_process_on_cores_outside_tp_passes(tmp_path):
    devs = idle_devices()
    devs[15]["neuron_processes"] = [{"pid": 777, "command": "neuron-bench exec", "neuron_runtime_version": "2.0.0"}]
    root, path = good_setup(tmp_path, devs)
    ctx, ev = make_ctx(tmp_path, make_profile(server={"tensor_parallel_size": 16}), root, path)
    _, facts = await run_env(ctx, ev)
    f = facts["Neuron cores free"]
    assert f.status == "pass"
    assert "pid 777" in f.detail and "cores 60-63" in f.detail


async def test_real_sdk232_shape_with_empty_command(tmp_path):
    devs = json.loads((FIXTURES / "neuron-ls-trn2-sdk232.json").read_text())
    root, path = good_setup(tmp_path, devs)
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    _, facts = await run_env(ctx, ev)
    assert facts["neuron-ls"].status == "pass"
    assert facts["neuron-ls"].detail == "instance type trn2.48xlarge"
    assert facts["Neuron cores free"].status == "pass"  # the holder sits on device 15
    # Now the same shape with this test process holding device 0 and no command reported.
    devs[0]["neuron_processes"] = [{"pid": os.getpid(), "command": "", "neuron_runtime_version": "2.34.10"}]
    fake_neuron_ls(tmp_path / "bin", devs)
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    _, facts = await run_env(ctx, ev)
    f = facts["Neuron cores free"]
    assert f.status == "fail"
    assert f"pid {os.getpid()}" in f.detail and f"kill {os.getpid()}" in f.remedy
    assert "(command not reported)" not in f.detail  # filled in from the local process table


async def test_tp_larger_than_logical_cores_fails(tmp_path):
    root, path = good_setup(tmp_path)
    prof = make_profile(server={"tensor_parallel_size": 128})
    ctx, ev = make_ctx(tmp_path, prof, root, path)
    _, facts = await run_env(ctx, ev)
    f = facts["logical cores"]
    assert f.status == "fail" and "cores 64-127 do not exist" in f.detail


async def test_neuron_ls_found_in_sysroot_neuron_bin(tmp_path):
    root = trn2_root(tmp_path)
    fake_neuron_ls(root / "opt/aws/neuron/bin", idle_devices())
    ctx, ev = make_ctx(tmp_path, make_profile(), root)
    _, facts = await run_env(ctx, ev)
    assert facts["neuron-ls"].status == "pass"


async def test_placeholder_plugin_is_wrong_package(tmp_path):
    root, path = good_setup(tmp_path, placeholder=True)
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    res, facts = await run_env(ctx, ev)
    f = facts["vllm-neuron"]
    assert f.status == "fail" and f.value == "0.1.0 (placeholder)"
    assert "WRONG PACKAGE placeholder from PyPI" in f.detail
    assert "/opt/aws_neuronx_venv_*vllm*" in f.remedy and "Neuron repository" in f.remedy
    assert "neuron platform plugin" not in facts  # one fact for one cause
    assert res.facts["vllm_neuron_version"] == "0.1.0"
    # With a DLAMI venv present the remedy names it (found by glob under the sysroot).
    (root / "opt/aws_neuronx_venv_pytorch_inference_vllm_0_24_0_1_1_0/bin").mkdir(parents=True)
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    _, facts = await run_env(ctx, ev)
    assert "aws_neuronx_venv_pytorch_inference_vllm_0_24_0_1_1_0/bin/activate" in facts["vllm-neuron"].remedy


async def test_mismatched_vllm_pin_fails(tmp_path):
    root, path = good_setup(tmp_path, vllm="0.23.0", plugin="0.24.0.1.1.0")
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    res, facts = await run_env(ctx, ev)
    f = facts["vLLM pin"]
    assert f.status == "fail" and f.value == "vllm 0.23.0 ≠ 0.24.0"
    assert "vllm==0.24.0" in f.remedy
    assert res.status == "failed"


async def test_missing_plugin_fails(tmp_path):
    root, path = good_setup(tmp_path, plugin=None)
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    res, facts = await run_env(ctx, ev)
    f = facts["vllm-neuron"]
    assert f.status == "fail" and f.value == "not installed"
    assert "vLLM pin" not in facts
    assert res.facts["vllm_version"] == "0.24.0"


async def test_old_plugin_version_fails(tmp_path):
    root, path = good_setup(tmp_path, vllm="0.11.0", plugin="0.11.0.0.2.0")
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    _, facts = await run_env(ctx, ev)
    assert facts["vllm-neuron"].status == "fail" and "0.21.0.1.0.0" in facts["vllm-neuron"].detail
    assert facts["spec-decode stats"].status == "info"
    assert "scrapes /metrics itself" in facts["spec-decode stats"].detail


async def test_vllm_033_has_no_sonnet(tmp_path):
    root, path = good_setup(tmp_path, vllm="0.33.0", plugin="0.33.0.1.0.0")
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path)
    res, facts = await run_env(ctx, ev)
    f = facts["sonnet dataset"]
    assert f.status == "info" and "0.32" in f.detail and "custom JSONL" in f.detail
    assert facts["vLLM pin"].status == "pass"
    assert res.facts["sonnet_available"] is False and res.facts["vllm_version"] == "0.33.0"
    # The custom JSONL route needs pandas (and transformers) in the vLLM interpreter: the fake venv has neither.
    b = facts["bench dataset support"]
    assert b.status == "fail" and "pandas" in b.value and "transformers" in b.value
    assert b.remedy == f"{path[0] / 'python'} -m pip install pandas transformers"
    assert res.facts["bench_has_pandas"] is False and res.facts["bench_has_transformers"] is False
    assert res.facts["vllm_python"] == str(path[0] / "python") and res.facts["platform"] == "neuron"
    assert res.status == "failed"


async def test_neuron_rt_visible_cores_fails_with_plugin_message(tmp_path):
    root, path = good_setup(tmp_path)
    ctx, ev = make_ctx(tmp_path, make_profile(), root, path, {"NEURON_RT_VISIBLE_CORES": "0-15"})
    res, facts = await run_env(ctx, ev)
    f = facts["NEURON_RT_VISIBLE_CORES"]
    assert f.status == "fail"
    assert f.detail == ("NEURON_RT_VISIBLE_CORES cannot be used with multi-processing execution on vLLM. "
                        "Set NEURON_VISIBLE_DEVICES to control device visibility.")
    assert f.remedy.startswith("unset NEURON_RT_VISIBLE_CORES")
    assert res.status == "failed"
    # Also when only the profile sets it.
    prof = make_profile(server={"env": {"NEURON_RT_VISIBLE_CORES": "0-15"}})
    ctx, ev = make_ctx(tmp_path, prof, root, path)
    _, facts = await run_env(ctx, ev)
    assert facts["NEURON_RT_VISIBLE_CORES"].status == "fail" and "[server.env]" in facts["NEURON_RT_VISIBLE_CORES"].value


async def test_engine_ready_timeout_below_startup_timeout_warns(tmp_path):
    prof = make_profile(server={"startup_timeout_s": 5400.0})
    ctx, ev = make_ctx(tmp_path, prof, extra_env={"VLLM_ENGINE_READY_TIMEOUT_S": "600"})
    _, facts = await run_env(ctx, ev)
    f = facts["VLLM_ENGINE_READY_TIMEOUT_S"]
    assert f.status == "warn" and "600" in f.value and "5400" in f.detail and "5400" in f.remedy
    ctx, ev = make_ctx(tmp_path, prof)
    _, facts = await run_env(ctx, ev)
    assert facts["VLLM_ENGINE_READY_TIMEOUT_S"].status == "pass"
    ctx, ev = make_ctx(tmp_path, make_profile(server={"env": {"VLLM_ENGINE_READY_TIMEOUT_S": "7200"}}),
                      extra_env={"VLLM_ENGINE_READY_TIMEOUT_S": "600"})
    _, facts = await run_env(ctx, ev)
    assert facts["VLLM_ENGINE_READY_TIMEOUT_S"].status == "pass"  # the profile's value wins at launch


async def env_with_port_held(tmp_path, **runtime):
    """The env step with server.port held by a listener of this process: (port, result, facts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        ctx, ev = make_ctx(tmp_path, make_profile(server={"port": port}))
        ctx.runtime.update(runtime)
        res, facts = await run_env(ctx, ev)
    return port, res, facts


async def test_port_in_use_names_the_holder(tmp_path):
    port, res, facts = await env_with_port_held(tmp_path)
    f = facts["server port"]
    assert f.status == "fail" and f.value == f"127.0.0.1:{port} in use"
    assert f"pid {os.getpid()}" in f.detail and f"kill {os.getpid()}" in f.remedy
    assert res.facts["port_free"] is False


async def test_port_in_use_on_a_fleet_node_is_where_the_search_starts(tmp_path):
    """On a fleet node each server takes the first free port from server.port up (exec/ports.py): a busy
    server.port there is told, not failed (CI saw two nodes on one host fail each other's probe)."""
    port, res, facts = await env_with_port_held(tmp_path, node_port_span=200)
    f = facts["server port"]
    assert f.status == "info" and f.value == f"127.0.0.1:{port} in use on this node"
    assert f"pid {os.getpid()}" in f.detail and f"from {port} to {min(port + 200, 65536) - 1}" in f.detail
    assert "server port" not in res.summary and res.facts["port_free"] is False


async def test_a_port_taken_for_a_moment_is_probed_again():
    """A bind that fails while nobody is seen listening (another probe, e.g. a second node's env step on the same
    host) is tried again; a visible listener, or a failure that lasts every retry, stays in use."""
    busy = OSError(errno.EADDRINUSE, "Address already in use")
    calls: list[int] = []

    def probe(answers):
        def bind(host, port):
            calls.append(port)
            return answers.pop(0) if answers else None
        return bind

    nobody = lambda port: ([], "psutil.net_connections")  # noqa: E731
    assert await settled_bind_error("127.0.0.1", 5, (0, 0, 0), probe([busy, busy]), nobody) is None
    assert len(calls) == 3
    calls.clear()
    assert await settled_bind_error("127.0.0.1", 5, (0, 0), probe([busy] * 5), nobody) is busy
    assert len(calls) == 3
    calls.clear()
    listener = lambda port: ([(4242, "vllm serve")], "psutil.net_connections")  # noqa: E731
    assert await settled_bind_error("127.0.0.1", 5, (0, 0), probe([busy, busy]), listener) is busy
    assert len(calls) == 1


async def test_host_all_interfaces_warns(tmp_path):
    ctx, ev = make_ctx(tmp_path, make_profile(server={"host": "0.0.0.0"}))
    _, facts = await run_env(ctx, ev)
    f = facts["bind address"]
    assert f.status == "warn" and "open to the network" in f.detail
    assert 'host = "127.0.0.1"' in f.remedy and "SSH tunnel" in f.remedy
    assert facts["server port"].status == "pass"


async def test_simulator_command_without_stand_in_is_checked_like_any_vllm(tmp_path):
    """No simulated special case: `{python} -m tui.sim` on a bare machine has no vLLM and no Neuron."""
    prof = make_profile(server={"command": ["{python}", "-m", "tui.sim"]}, simulation={"vllm_version": "0.13.0"})
    assert prof.simulated
    ctx, ev = make_ctx(tmp_path, prof)
    res, facts = await run_env(ctx, ev)
    assert facts["vLLM interpreter"].status == "pass"
    assert facts["vLLM"].status == "fail" and facts["instance type"].status == "fail"
    assert res.status == "failed" and res.facts["simulated"] is True


async def test_simulated_profile_with_broken_interpreter_fails(tmp_path):
    prof = make_profile(server={"command": [str(tmp_path / "nope" / "python3"), "-m", "tui.sim"]}, simulation={})
    ctx, ev = make_ctx(tmp_path, prof)
    res, facts = await run_env(ctx, ev)
    assert facts["vLLM interpreter"].status == "fail" and res.status == "failed"


async def test_warm_compile_cache_is_counted(tmp_path):
    cache = tmp_path / "vcache"
    cc = cache / "neuron" / "compile_cache"
    for i, complete in enumerate([True, True, False]):
        d = cc / f"{i:032x}"
        d.mkdir(parents=True)
        (d / "graph.hlo").write_text("")
        if complete:
            (d / ".compilation_complete").write_text("")
    (cc / "cache.lock").write_text("")  # lock files live in the root, not counted
    ctx, ev = make_ctx(tmp_path, make_profile(), extra_env={"VLLM_CACHE_ROOT": str(cache)})
    res, facts = await run_env(ctx, ev)
    f = facts["compile cache"]
    assert f.value == "2 complete entries" and "relaunch will skip compilation" in f.detail
    assert "1 incomplete" in f.detail
    assert res.facts["compile_cache_entries"] == 2 and res.facts["compile_cache_dir"] == str(cc)
    ctx, ev = make_ctx(tmp_path, make_profile(), extra_env={"VLLM_CACHE_ROOT": str(tmp_path / "empty")})
    _, facts = await run_env(ctx, ev)
    assert facts["compile cache"].value == "cold" and "first launch compiles" in facts["compile cache"].detail


async def test_tutorial_checkpoints_already_cached_need_no_space(tmp_path):
    hub = tmp_path / "hub"
    blobs = hub / "models--openai--gpt-oss-120b" / "blobs"
    blobs.mkdir(parents=True)
    with open(blobs / ("0" * 64), "wb") as f:
        f.truncate(70 * 1000**3)  # sparse: takes no real space
    prof = make_profile(models={"target": "openai/gpt-oss-120b", "draft": "RedHatAI/gpt-oss-120b-speculator.eagle3"})
    ctx, ev = make_ctx(tmp_path, prof, extra_env={"HF_HUB_CACHE": str(hub)})
    res, facts = await run_env(ctx, ev)
    f = facts["disk (HF cache)"]
    assert f.status == "pass" and "room for the tutorial pair" in f.detail and "70.0 GB cached" in f.detail
    assert f"HF cache {hub}" in f.detail
    assert res.facts["hf_hub_cache"] == str(hub)


async def test_wrong_instance_type_and_no_devices(tmp_path):
    root = trn2_root(tmp_path, product="m7i.48xlarge", devices=0)
    ctx, ev = make_ctx(tmp_path, make_profile(), root)
    res, facts = await run_env(ctx, ev)
    f = facts["instance type"]
    assert f.status == "fail" and f.value == "m7i.48xlarge" and "expected trn2.48xlarge" in f.detail
    assert facts["Neuron devices"].status == "fail" and facts["Neuron devices"].value == "0"
    # An empty expected instance type skips the check.
    ctx, ev = make_ctx(tmp_path, make_profile(environment={"instance_type": ""}), root)
    _, facts = await run_env(ctx, ev)
    assert facts["instance type"].status == "info"


async def test_devices_hidden_from_container_are_explained(tmp_path):
    root = trn2_root(tmp_path)
    for p in (root / "dev").iterdir():
        p.unlink()
    ctx, ev = make_ctx(tmp_path, make_profile(), root)
    _, facts = await run_env(ctx, ev)
    f = facts["Neuron devices"]
    assert f.status == "fail" and "sysfs lists 16 devices" in f.detail and "--device" in f.remedy


async def test_sdk_older_than_profile_minimum_fails(tmp_path):
    root = trn2_root(tmp_path)
    fake_dpkg_query(tmp_path / "bin", "2.30.10.0-1")
    ctx, ev = make_ctx(tmp_path, make_profile(), root)
    _, facts = await run_env(ctx, ev)
    f = facts["Neuron SDK"]
    assert f.status == "fail" and f.value == "2.30" and "2.31 or later" in f.detail


async def test_sdk_from_plugin_version_when_no_tools(tmp_path):
    root = trn2_root(tmp_path)
    vbin = make_vllm_venv(tmp_path, vllm="0.21.0", plugin="0.21.0.1.0.0")
    ctx, ev = make_ctx(tmp_path, make_profile(), root, [vbin])
    _, facts = await run_env(ctx, ev)
    f = facts["Neuron SDK"]
    assert f.status == "pass" and f.value == "2.31" and "vllm-neuron 0.21.0.1.0.0 → 2.31" in f.detail


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def test_parse_neuron_ls_defensively():
    ls = parse_neuron_ls([
        {"neuron_device": "1", "nc_count": "4", "logical_neuroncore_config": 2},
        {"neuron_device": 0, "nc_count": 4, "memory_size": 103079215104, "neuron_processes": [{"pid": "12"}], "extra": 1},
        "junk",
    ])
    assert [d.index for d in ls.devices] == [0, 1]
    assert ls.devices[0].core_ids == [0, 1, 2, 3] and ls.devices[1].core_ids == [4, 5, 6, 7]
    assert ls.devices[0].processes[0].pid == 12 and ls.devices[0].processes[0].command == ""
    assert ls.logical_cores == 8 and ls.hbm_per_device == 103079215104
    with pytest.raises(ValueError):
        parse_neuron_ls([])
    with pytest.raises(ValueError):
        parse_neuron_ls("nope")


def test_version_tuple():
    assert version_tuple("0.24.0.1.1.0") == (0, 24, 0, 1, 1, 0)
    assert version_tuple("2.27.5334.0+f702b353") == (2, 27, 5334, 0)
    assert version_tuple("1:2.32.28.0-1") == (2, 32, 28, 0)
    assert version_tuple("0.11.0rc1") == (0, 11, 0)
    assert version_tuple("") is None


async def test_interpreter_from_pip_sh_trampoline(tmp_path):
    vbin = make_vllm_venv(tmp_path)
    tramp = write_exe(tmp_path / "t" / "vllm", "#!/bin/sh\n"
                      f"'''exec' \"{vbin / 'python'}\" \"$0\" \"$@\"\n' '''\nimport sys\n")
    it = find_server_interpreter("vllm", {}, str(tramp.parent))
    assert it.python == str(vbin / "python") and it.how == "sh trampoline"
    probe = await run_probe(it, {"PATH": str(vbin)})
    assert probe.ok and probe.data["packages"]["vllm-neuron"] == "0.24.0.1.1.0"
    assert probe.data["find_spec"]["vllm_neuron"]


def test_interpreter_errors(tmp_path):
    d = tmp_path / "b"
    write_exe(d / "vllm", "#!/usr/bin/env python3-nonexistent\n")
    write_exe(d / "tool", "#!/bin/sh\necho hi\n")
    assert "not on PATH" in find_server_interpreter("vllm", {}, str(d)).error
    assert "shell script" in find_server_interpreter("tool", {}, str(d)).error
    assert "not found on PATH" in find_server_interpreter("missing", {}, str(d)).error


def test_probe_vllm_version_blocking(tmp_path):
    vbin = make_vllm_venv(tmp_path, vllm="0.21.0", plugin="0.21.0.1.0.0")
    env = {"PATH": str(vbin)}
    ph = Placeholders(python=PY)
    assert probe_vllm_version(make_profile(), ph, env) == "0.21.0"
    assert probe_vllm_version(make_profile(), ph, {"PATH": str(tmp_path)}) is None
    # A simulated profile gets no special answer: the probe reads the `vllm` of the run's environment.
    sim = make_profile(server={"command": ["{python}", "-m", "tui.sim"]}, simulation={"vllm_version": "0.31.0"})
    assert probe_vllm_version(sim, ph, {"PATH": str(tmp_path)}) is None


async def test_bench_probes_the_vllm_version_when_the_env_step_did_not_run(tmp_path):
    """`--steps baseline` alone: the benchmark's version-aware flags come from a fresh probe."""
    from tui.core.steps.bench import vllm_version

    vbin = make_vllm_venv(tmp_path, vllm="0.21.0", plugin="0.21.0.1.0.0")
    ctx, _ = make_ctx(tmp_path, make_profile(), path=[vbin])
    assert await vllm_version(ctx) == "0.21.0"
    ctx.shared["env"] = {"vllm_version": "0.24.0"}  # the env step's answer wins when present
    assert await vllm_version(ctx) == "0.24.0"
