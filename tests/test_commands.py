"""Golden test: the tutorial profile's --show-commands equals the tutorial flag for flag.

The only differences allowed are listed in INTENDED below, each with its reason.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tui.core.plan.commands import bench_argv, format_command, serve_argv
from tui.core.profile.model import load_profile

FIXTURE = Path(__file__).parent / "fixtures" / "tutorial_commands.sh"
JSON_FLAGS = {"--hf-overrides", "--additional-config", "--speculative-config"}
RUN = "RUN"


def split_blocks(text: str) -> list[list[str]]:
    """Commands of a shell text (comments dropped, `\\` continuations joined), as argv lists."""
    blocks, cur = [], []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if cur:
                blocks.append(shlex.split(" ".join(cur)))
                cur = []
            continue
        cur.append(line.rstrip("\\").strip())
    if cur:
        blocks.append(shlex.split(" ".join(cur)))
    out = []
    for argv in blocks:
        while argv and "=" in argv[0] and not argv[0].startswith("-"):
            argv = argv[1:]  # env assignments
        out.append(argv)
    return out


def flag_pairs(argv: list[str]) -> list[tuple[str, object]]:
    """[(flag, value)] in order, JSON values parsed; positional head kept as ('', head)."""
    i = 0
    head = []
    while i < len(argv) and not argv[i].startswith("--"):
        head.append(argv[i])
        i += 1
    pairs: list[tuple[str, object]] = [("", tuple(head))]
    while i < len(argv):
        flag = argv[i]
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            val: object = argv[i + 1]
            if flag in JSON_FLAGS:
                val = json.loads(val)  # JSON values equal after parsing
            pairs.append((flag, val))
            i += 2
        else:
            pairs.append((flag, None))
            i += 1
    return pairs


# Intended differences, per command kind: flags we add (with their value) and flags whose value differs.
INTENDED_ADDED = {
    # Servers bind 127.0.0.1 by default; the tutorial leaves vLLM's default (all interfaces).
    "serve": {("--host", "127.0.0.1")},
    # Version-aware bench flags (the tutorial means greedy; percentile metrics make the report complete).
    "bench": {("--percentile-metrics", "ttft,tpot,itl,e2el"), ("--metric-percentiles", "50,90,99"),
              ("--temperature", "0")},
}
INTENDED_CHANGED = {
    # The bench base URL follows the bound host; dataset and results live in the run directory.
    "--base-url": ("http://localhost:8000", "http://127.0.0.1:8000"),
    "--dataset-path": ("./sonnet.txt", f"{RUN}/sonnet.txt"),
    "--result-filename": (None, None),  # baseline.json -> RUN/baseline.json, eagle3.json -> RUN/eagle3.json
}


def compare(tutorial: list[str], ours: list[str]) -> None:
    kind = "bench" if tutorial[1] == "bench" else "serve"
    t, o = flag_pairs(tutorial), flag_pairs(ours)
    added = [p for p in o if p[0] not in {q[0] for q in t}]
    assert set(added) == INTENDED_ADDED[kind], added
    o_common = [p for p in o if p not in added]
    assert [p[0] for p in o_common] == [p[0] for p in t], "flag order differs from the tutorial"
    for (tf, tv), (of, ov) in zip(t, o_common):
        if tf in INTENDED_CHANGED:
            before, after = INTENDED_CHANGED[tf]
            if tf == "--result-filename":
                assert ov == f"{RUN}/{tv}"
            else:
                assert (tv, ov) == (before, after)
        else:
            assert tv == ov, (tf, tv, ov)


def test_show_commands_matches_tutorial_flag_for_flag(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "tui", "--profile", "gpt-oss-120b-eagle3-trn2", "--show-commands", "--run-dir", RUN],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout
    out = out.replace(os.path.join(os.path.realpath(tmp_path), RUN), RUN)  # --run-dir is shown absolute
    ours = split_blocks(out)
    tutorial = split_blocks(FIXTURE.read_text())
    assert len(ours) == len(tutorial) == 4
    for t, o in zip(tutorial, ours):
        assert o[:2] == t[:2]
        compare(t, o)


def test_show_commands_lists_env_vars():
    prof = load_profile("gpt-oss-120b-eagle3-trn2")
    out = subprocess.run([sys.executable, "-m", "tui", "--profile", "gpt-oss-120b-eagle3-trn2", "--show-commands"],
                         capture_output=True, text=True, check=True).stdout
    assert f"VLLM_ENGINE_READY_TIMEOUT_S={int(prof.server.startup_timeout_s)} \\" in out
    assert "VLLM_NEURON_COMPILATION_TIMEOUT=" in out


def test_format_command_round_trips_through_shell_parsing():
    prof = load_profile("gpt-oss-120b-eagle3-trn2")
    argv = serve_argv(prof, speculative=True)
    text = format_command(argv, {"A": "x y"})
    parsed = shlex.split(text.replace("\\\n", " "))
    assert parsed[0] == "A=x y"
    assert parsed[1:] == argv


def test_bench_version_awareness():
    prof = load_profile("gpt-oss-120b-eagle3-trn2")
    old = bench_argv(prof, "b.json", "s.txt", vllm_version="0.11.0")
    new = bench_argv(prof, "b.json", "s.txt", vllm_version="0.24.0")
    assert "--model" in old and "--model" in new
    assert "--temperature" not in old  # 0.11 forces temperature 0 itself and has no such flag
    assert new[new.index("--temperature") + 1] == "0"


def test_host_zero_uses_loopback_base_url():
    prof = load_profile("gpt-oss-120b-eagle3-trn2").with_values({"server.host": "0.0.0.0", "server.port": 9001})
    argv = bench_argv(prof, "b.json", "s.txt")
    assert argv[argv.index("--base-url") + 1] == "http://127.0.0.1:9001"
    assert serve_argv(prof, False)[-4:] == ["--host", "0.0.0.0", "--port", "9001"]


# ---------------------------------------------------------------------------------------------
# Issue 8: platforms, new flags, placeholders
# ---------------------------------------------------------------------------------------------

from tui.core.plan.commands import (  # noqa: E402
    Placeholders,
    bundled_data_dir,
    prepare_argv,
    serve_env,
    specdec_tools_dir,
    speculative_config,
)
from tui.core.profile.model import profile_from_dict  # noqa: E402


def _spec(argv: list[str]) -> dict:
    return json.loads(argv[argv.index("--speculative-config") + 1])


def test_new_server_flags_only_when_asked():
    base = load_profile("gpt-oss-120b-eagle3-trn2")
    argv = serve_argv(base, True)
    assert "--pipeline-parallel-size" not in argv and "--enforce-eager" not in argv
    assert "draft_tensor_parallel_size" not in _spec(argv)
    prof = base.with_values({"server.pipeline_parallel_size": 2, "server.enforce_eager": True,
                             "speculative.draft_tensor_parallel_size": 1})
    argv = serve_argv(prof, True)
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "2"
    assert argv.index("--pipeline-parallel-size") == argv.index("--tensor-parallel-size") + 2
    assert argv.index("--enforce-eager") == argv.index("--no-enable-prefix-caching") + 1
    assert _spec(argv)["draft_tensor_parallel_size"] == 1
    assert "--speculative-config" not in serve_argv(prof, False)


def test_vllm_defaults_are_not_sent():
    prof = profile_from_dict({"platform": "cuda", "models": {"target": "a/b", "draft": "c/d"},
                              "server": {"dtype": "auto", "max_num_seqs": 0, "max_model_len": 0,
                                         "max_num_batched_tokens": 0}})
    argv = serve_argv(prof, False)
    assert argv == ["vllm", "serve", "a/b", "--no-enable-prefix-caching", "--host", "127.0.0.1", "--port", "8000"]


def test_placeholders_in_model_paths_argv_and_env():
    raw = {"platform": "cpu",
           "models": {"target": "{cache_dir}/m/target", "draft": "{cache_dir}/m/draft",
                      "prepare": ["{vllm_python}", "{specdec_tools}/tinymodels.py", "--out", "{cache_dir}/m",
                                  "--sonnet", "{bundled_data}/sonnet.txt"]},
           "server": {"command": ["{python}", "-m", "vllm.entrypoints.cli.main"],
                      "env": {"HOME_OF_RUN": "{run_dir}/h"}, "hf_overrides": {"path": "{cache_dir}/x"}},
           "dataset": {"path": "{bundled_data}/sonnet.txt"}}
    prof = profile_from_dict(raw)
    ph = Placeholders(python="PY", cache_dir="CACHE", run_dir="RUNDIR", vllm_python="VPY",
                      specdec_tools="TOOLS", bundled_data="DATA")
    argv = serve_argv(prof, True, ph)
    assert argv[:5] == ["PY", "-m", "vllm.entrypoints.cli.main", "serve", "CACHE/m/target"]
    assert _spec(argv)["model"] == "CACHE/m/draft"
    assert json.loads(argv[argv.index("--hf-overrides") + 1]) == {"path": "CACHE/x"}
    assert speculative_config(prof, ph)["model"] == "CACHE/m/draft"
    assert serve_env(prof, ph)["HOME_OF_RUN"] == "RUNDIR/h"
    assert prepare_argv(prof, ph) == ["VPY", "TOOLS/tinymodels.py", "--out", "CACHE/m", "--sonnet", "DATA/sonnet.txt"]
    bench = bench_argv(prof, "{run_dir}/b.json", "{bundled_data}/sonnet.txt", ph=ph)
    assert bench[bench.index("--model") + 1] == "CACHE/m/target"
    assert bench[bench.index("--dataset-path") + 1] == "DATA/sonnet.txt"
    assert bench[bench.index("--result-filename") + 1] == "RUNDIR/b.json"
    assert not [a for a in argv + bench if re.search(r"\{[a-z_]+\}", a)]


def test_placeholder_values_resolve_inside_json_safely():
    prof = profile_from_dict({"platform": "cpu", "models": {"target": "t/t", "draft": "{cache_dir}/d"}})
    ph = Placeholders(cache_dir='/odd "dir"')
    assert _spec(serve_argv(prof, True, ph))["model"] == '/odd "dir"/d'


def test_placeholder_defaults():
    ph = Placeholders()
    assert ph.vllm_python == ""
    assert Path(ph.specdec_tools) == specdec_tools_dir() and specdec_tools_dir().name == "tools"
    assert specdec_tools_dir().parent.name == "tui"
    assert (bundled_data_dir() / "sonnet.txt").is_file() and ph.bundled_data == str(bundled_data_dir())
    assert ph.resolve("{vllm_python}|{specdec_tools}|{bundled_data}") == f"|{ph.specdec_tools}|{ph.bundled_data}"
    assert ph.resolve("no placeholders") == "no placeholders"


def test_neuron_compile_timeouts_only_on_neuron():
    neuron = serve_env(load_profile("gpt-oss-120b-eagle3-trn2"))
    assert {"VLLM_NEURON_COMPILATION_TIMEOUT", "NEURON_LIBTORCH_COMPILATION_TIMEOUT"} <= set(neuron)
    for name in ("cpu", "gpt-oss-120b-stevenabreu7-cuda"):
        env = serve_env(load_profile(name))
        assert "VLLM_NEURON_COMPILATION_TIMEOUT" not in env and "NEURON_LIBTORCH_COMPILATION_TIMEOUT" not in env
        assert "VLLM_ENGINE_READY_TIMEOUT_S" in env and "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" in env
    assert serve_env(load_profile("cpu"))["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_show_commands_prepare_block_only_with_prepare():
    from tui.core.plan.build import show_commands_text

    assert "# Checkpoints: prepare" not in show_commands_text(load_profile("gpt-oss-120b-eagle3-trn2"))
    text = show_commands_text(load_profile("cpu"))
    blocks = text.split("\n\n")
    assert blocks[0].startswith("# vLLM") and "# Dataset:" in blocks[0]  # the version header comes first
    assert blocks[1].startswith("# Checkpoints: prepare the local models")
    assert "tinymodels.py" in blocks[1]
