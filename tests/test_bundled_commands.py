"""Golden `--show-commands` output of every bundled real-hardware profile, compared exactly.

Each fixture in tests/fixtures/commands/<profile>.sh was generated once through the CLI (see
`show_commands`) and reviewed flag by flag against its source document; REVIEW below records that
review and every intended difference. Machine-specific paths are written as <cache_dir>,
<bundled_data> and <specdec_tools>; {vllm_python} stays a placeholder because no `vllm` is on PATH here.

Regenerate after an intended change with `SPECDEC_REGEN_GOLDENS=1 python -m pytest
tests/test_bundled_commands.py`, then review the diff. `compare_to_golden` is the one place that decides
how blocks are compared: every block exactly, at the vLLM version PINNED_VERSION gives for the profile.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tui.core.plan.commands import BUNDLED_SONNET_SHA256, bundled_data_dir, specdec_tools_dir
from tui.core.profile.model import bundled_profiles, load_profile

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "commands"
RUN = "RUN"

REVIEW = {
    "gpt-oss-120b-eagle3-trn2": (
        "The tutorial (seeds/tutorial-eagle3-gpt-oss-120b.md), unchanged: tests/test_commands.py checks it flag by "
        "flag against the tutorial's text; intended: --host 127.0.0.1, run-dir paths, bench percentile/temperature "
        "flags, the env timeouts."),
    "gpt-oss-120b-stevenabreu7-trn2": (
        "The tutorial's commands with the draft replaced by stevenabreu7/gpt-oss-120b-speculator.eagle3 in "
        "--speculative-config (method eagle3, k 1): every other flag equals the tutorial fixture."),
    "gpt-oss-120b-stevenabreu7-cuda": (
        "Model card: serve openai/gpt-oss-120b --tensor-parallel-size 4, speculative-config model stevenabreu7/"
        "gpt-oss-120b-speculator.eagle3, num_speculative_tokens 5, method eagle3, --no-enable-prefix-caching, "
        "--max-num-seqs 64, --enforce-eager: all present, nothing else on the server line but --host/--port. "
        "The baseline is the same line without --speculative-config. Intended: vLLM's own timeouts in env; "
        "the tutorial's sonnet 512/128 benchmark (the card has none)."),
    "llama-3.1-8b-eagle3-cuda": (
        "vLLM docs, Eagle3 Drafter Example: tensor_parallel_size 2, model RedHatAI/Llama-3.1-8B-Instruct-speculator."
        "eagle3, draft_tensor_parallel_size 2, num_speculative_tokens 2, method eagle3. Intended: target "
        "meta-llama/Llama-3.1-8B-Instruct (the draft's verifier; the docs pair it with Meta-Llama-3-8B-Instruct), "
        "--no-enable-prefix-caching (as the tutorial: the sonnet prompts share a prefix)."),
    "llama-3-8b-eagle-cuda": (
        "vLLM docs, Eagle Drafter Example: meta-llama/Meta-Llama-3-8B-Instruct, tensor_parallel_size 4, model "
        "yuhuili/EAGLE-LLaMA3-Instruct-8B, draft_tensor_parallel_size 1, num_speculative_tokens 2, method eagle. "
        "Intended: --no-enable-prefix-caching."),
    "gpt-oss-20b-eagle3-cuda": (
        "vLLM docs, Pipeline Parallelism: serve openai/gpt-oss-20b --pipeline-parallel-size 2, speculative-config "
        "method eagle3, model RedHatAI/gpt-oss-20b-speculator.eagle3, num_speculative_tokens 3; no TP flag "
        "(1 = vLLM's default is not sent). Intended: --no-enable-prefix-caching."),
    "tune": (
        "The tutorial's Step 3 on the tutorial's profile: the baseline server line equals the tutorial fixture; each "
        "arm's server is the tutorial's EAGLE3 line with num_speculative_tokens 1, 2, 3 in --speculative-config, "
        "plus --per-request-spec-decode-metrics summary (vLLM >= 0.29: the probe's per-request metrics) and "
        "nothing else changed; each benchmark equals the tutorial's with --result-filename <arm>.sonnet.rN.json "
        "and --seed N-1 for repeat N (repeats draw different prompts), r1..r3 each shown."),
    "cpu": (
        "reference/real-vllm-cpu.md: VLLM_CPU_KVCACHE_SPACE=1 vllm serve <target-dir> --dtype bfloat16 "
        "--max-model-len 1024 --max-num-seqs 1 --max-num-batched-tokens 512 --no-enable-prefix-caching, plus "
        "--speculative-config method eagle3, model <draft-dir>, k 1. Models under <cache_dir>/tiny-models/v1 "
        "made by the prepare block (tinymodels.py in vLLM's interpreter); the dataset is the bundled sonnet.txt."),
}


# The bench's dataset flags depend on the vLLM version: the goldens pin one per profile. The Neuron profiles
# at 0.29 (what Neuron SDK 2.33 pins: --dataset-name sonnet), the others at 0.32 (no sonnet: the sonnet
# prompts are built as a custom JSONL, Step 0).
PINNED_VERSION = {"gpt-oss-120b-eagle3-trn2": "0.29.0", "gpt-oss-120b-stevenabreu7-trn2": "0.29.0", "tune": "0.29.0"}


def show_commands(name: str, tmp_path: Path) -> str:
    """`specdec-tui --profile NAME --show-commands --run-dir RUN` in a subprocess, machine paths normalised."""
    cache = tmp_path / "xdg"
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "PATH")}
    env.update(XDG_CACHE_HOME=str(cache), PATH=str(empty_bin))
    version = PINNED_VERSION.get(name, "0.32.0")
    out = subprocess.run([sys.executable, "-m", "tui", "--profile", name, "--show-commands", "--run-dir", RUN,
                          "--vllm-version", version],
                         capture_output=True, text=True, check=True, env=env, stdin=subprocess.DEVNULL,
                         cwd=tmp_path).stdout
    # --run-dir is made absolute as a run would (tui.core.plan.build); the fixtures write it as RUN
    for real, token in ((os.path.join(os.path.realpath(tmp_path), RUN), RUN),
                        (str(cache / "specdec-tui"), "<cache_dir>"), (str(bundled_data_dir()), "<bundled_data>"),
                        (str(specdec_tools_dir()), "<specdec_tools>")):
        out = out.replace(real, token)
    return out


def blocks(text: str) -> dict[str, str]:
    """{heading: command text} of a --show-commands output."""
    out: dict[str, str] = {}
    for chunk in text.strip().split("\n\n"):
        head, _, body = chunk.partition("\n")
        assert head.startswith("# "), chunk
        out[head] = body
    return out


def compare_to_golden(name: str, actual: str) -> None:
    """The one comparison of --show-commands output with its golden fixture (see the module docstring)."""
    fixture = FIXTURES / f"{name}.sh"
    if os.environ.get("SPECDEC_REGEN_GOLDENS") == "1":
        fixture.write_text(actual)
    want = blocks(fixture.read_text())
    got = blocks(actual)
    serve_like = [h for h in want if "benchmark" not in h]
    bench = [h for h in want if "benchmark" in h]
    assert [h for h in got if "benchmark" not in h] == serve_like
    for h in serve_like:
        assert got[h] == want[h], f"{name}: {h} differs from {fixture.name}"
    assert [h for h in got if "benchmark" in h] == bench
    for h in bench:
        assert got[h] == want[h], f"{name}: {h} differs from {fixture.name}"


@pytest.mark.parametrize("name", sorted(REVIEW))
def test_show_commands_golden(name, tmp_path):
    compare_to_golden(name, show_commands(name, tmp_path))


def test_every_real_bundled_profile_has_a_golden():
    real = {n for n in bundled_profiles() if not load_profile(n).simulated}
    assert real == set(REVIEW)
    assert {p.stem for p in FIXTURES.glob("*.sh")} == set(REVIEW)


def test_no_machine_paths_in_goldens():
    for f in FIXTURES.glob("*.sh"):
        text = f.read_text()
        assert "/tmp/" not in text and str(Path.home()) not in text and str(REPO) not in text, f.name


def test_stevenabreu7_trn2_differs_from_the_tutorial_only_in_the_draft(tmp_path):
    """The product's own --show-commands of both profiles (not the two golden files compared with each other)."""
    tut = show_commands("gpt-oss-120b-eagle3-trn2", tmp_path)
    alt = show_commands("gpt-oss-120b-stevenabreu7-trn2", tmp_path)
    assert "RedHatAI/gpt-oss-120b-speculator.eagle3" in tut
    assert alt == tut.replace("RedHatAI/gpt-oss-120b-speculator.eagle3", "stevenabreu7/gpt-oss-120b-speculator.eagle3")


def test_bundled_sonnet_is_the_real_file():
    path = bundled_data_dir() / "sonnet.txt"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == BUNDLED_SONNET_SHA256
    assert load_profile("cpu").dataset.sha256 == BUNDLED_SONNET_SHA256
