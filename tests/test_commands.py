"""Golden test: the tutorial profile's --show-commands equals the tutorial flag for flag.

The only differences allowed are listed in INTENDED below, each with its reason.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from tui.core.commands import bench_argv, format_command, serve_argv
from tui.core.profile import load_profile

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


def test_show_commands_matches_tutorial_flag_for_flag():
    out = subprocess.run(
        [sys.executable, "-m", "tui", "--profile", "gpt-oss-120b-eagle3-trn2", "--show-commands", "--run-dir", RUN],
        capture_output=True, text=True, check=True,
    ).stdout
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
