"""tui/core/plan/workloads.py without a server: workloads, the bundled chat conversations, the bench JSONL,
own-prompt validation, version-aware bench/serve flags, and the sim's acceptance calibration per k."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.core.plan import commands, workloads as W
from tui.core.profile.model import load_profile
from tui.sim import model

PROFILE = "gpt-oss-120b-eagle3-trn2"


@pytest.fixture(scope="module")
def prof():
    return load_profile(PROFILE)


# --------------------------------------------------------------------------------------------------
# workloads and the bundled conversations


def test_resolve_workloads(tmp_path):
    s = W.resolve_workload("sonnet", sonnet_path="/x/sonnet.txt")
    assert (s.name, s.endpoint, s.path, s.backend, s.label) == (
        "sonnet", "completions", "/v1/completions", "openai", "sonnet /v1/completions")
    c = W.resolve_workload("chat")
    assert (c.endpoint, c.path, c.backend, c.label) == (
        "chat", "/v1/chat/completions", "openai-chat", "chat /v1/chat/completions")
    assert Path(c.dataset).is_file() and c.bench_jsonl == "chat.custom.jsonl"
    own = tmp_path / "mine.jsonl"
    own.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    o = W.resolve_workload("own", prompts_file=str(own))
    assert (o.endpoint, o.label, o.dataset) == ("chat", "own /v1/chat/completions", str(own))
    own.write_text('{"prompt": "hi"}\n')
    assert W.resolve_workload("own", prompts_file=str(own)).endpoint == "completions"
    with pytest.raises(W.WorkloadError, match="tune.prompts_file"):
        W.resolve_workload("own")
    with pytest.raises(W.WorkloadError, match="unknown workload 'poems'"):
        W.resolve_workload("poems")


def test_bundled_conversations_are_varied_multi_turn_and_end_with_the_user():
    convs = W.load_conversations(str(W.bundled_chat_path()))
    assert len(convs) >= 40
    firsts = set()
    for c in convs:
        assert c[-1]["role"] == "user"
        assert 1 <= len(c) - 1 <= 3, c  # 1-3 earlier turns
        assert all(m["role"] in ("system", "user", "assistant") for m in c)
        firsts.add(next(m["content"] for m in c if m["role"] == "user"))
    assert len(firsts) == len(convs), "every conversation is different"
    assert sum(len(c) >= 3 for c in convs) >= 20, "most are multi-turn"
    assert sum(c[0]["role"] == "system" for c in convs) >= 5


def test_fold_messages_and_bench_jsonl(tmp_path):
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"},
            {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Tell me a joke."}]
    assert W.fold_messages(conv) == ("Conversation so far:\nSystem: Be brief.\nUser: Hi?\nAssistant: Hello.\n\n"
                                     "Latest message from the user:\nTell me a joke.")
    assert W.fold_messages([{"role": "user", "content": "Only this."}]) == "Only this."
    chat = W.resolve_workload("chat")
    out = W.write_bench_jsonl(chat, tmp_path / chat.bench_jsonl)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    convs = W.load_conversations(chat.dataset)
    assert len(rows) == len(convs)
    assert all(set(r) == {"prompt"} and isinstance(r["prompt"], str) for r in rows)
    assert rows[0]["prompt"] == W.fold_messages(convs[0])
    assert rows[0]["prompt"].endswith(convs[0][-1]["content"])
    assert not list(tmp_path.glob("*.tmp"))
    # The probe sends the same content, as one user message.
    inputs = W.probe_inputs(chat, 3)
    assert inputs == [[{"role": "user", "content": r["prompt"]}] for r in rows[:3]]
    assert W.probe_inputs(W.resolve_workload("sonnet"), 2, ["a", "b", "c"]) == ["a", "b"]


# --------------------------------------------------------------------------------------------------
# own prompts: one paragraph naming the file, the line and the fix


def _own(tmp_path: Path, text: str) -> str:
    p = tmp_path / "prompts.jsonl"
    p.write_text(text)
    return str(p)


def test_own_prompts_load(tmp_path):
    assert W.load_own_prompts(_own(tmp_path, '{"prompt": "a"}\n\n{"prompt": "b", "output_tokens": 9}\n')) == (
        "completions", ["a", "b"])
    kind, items = W.load_own_prompts(_own(tmp_path, json.dumps(
        {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}) + "\n"))
    assert kind == "chat" and items == [[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]]


@pytest.mark.parametrize("text, line, needle", [
    ('{"prompt": "a"}\nnot json\n', 2, "is not JSON"),
    ('["a"]\n', 1, "JSON list, not an object"),
    ('{"prompt": "a", "messages": []}\n', 1, 'both "prompt" and "messages"'),
    ('{"text": "a"}\n', 1, 'neither "prompt" and "messages"'),
    ('{"prompt": "a"}\n{"messages": [{"role": "user", "content": "b"}]}\n', 2, "mixes kinds"),
    ('{"prompt": "   "}\n', 1, "non-empty string"),
    ('{"prompt": "a", "temperature": 1}\n', 1, "unknown keys (temperature)"),
    ('{"messages": []}\n', 1, "non-empty list"),
    ('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n', 1,
     "the last message must be the user's"),
    ('{"messages": [{"role": "robot", "content": "a"}]}\n', 1, "role 'robot'"),
    ('{"messages": [{"role": "user", "content": ""}]}\n', 1, "has no text"),
    ('{"messages": [{"role": "user"}]}\n', 1, 'exactly "role" and "content"'),
])
def test_own_prompts_errors_name_file_line_and_fix(tmp_path, text, line, needle):
    path = _own(tmp_path, text)
    with pytest.raises(W.WorkloadError) as e:
        W.load_own_prompts(path)
    msg = str(e.value)
    assert f"{path}, line {line}" in msg
    assert needle in msg
    assert "\n" not in msg
    assert 'Each line of tune.prompts_file must be one JSON object' in msg


def test_own_prompts_file_problems(tmp_path):
    with pytest.raises(W.WorkloadError, match="does not exist: check the path"):
        W.load_own_prompts(str(tmp_path / "nope.jsonl"))
    with pytest.raises(W.WorkloadError, match="has no prompts"):
        W.load_own_prompts(_own(tmp_path, "\n\n"))
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(W.WorkloadError, match="UTF-8"):
        W.load_own_prompts(str(tmp_path / "bin.jsonl"))


# --------------------------------------------------------------------------------------------------
# argv


def test_bench_argv_without_workload_is_unchanged(prof):
    for version in (None, "0.24.0", "0.29.0", "0.32.0"):
        ds = "/r/sonnet.custom.jsonl" if version == "0.32.0" else "/r/sonnet.txt"
        old = commands.bench_argv(prof, "/r/b.json", ds, version)
        assert commands.bench_argv(prof, "/r/b.json", ds, version, workload=None) == old
        assert commands.bench_argv(prof, "/r/b.json", ds, version, workload=W.resolve_workload("sonnet")) == old
        assert "--backend" not in old and "--endpoint" not in old


def test_bench_dataset_args_chat_by_version(prof):
    chat = W.resolve_workload("chat")
    out = prof.benchmark.output_len
    full = ["--dataset-name", "custom", "--dataset-path", "/r/chat.custom.jsonl", "--custom-output-len", str(out),
            "--skip-chat-template", "--disable-shuffle"]
    for v in ("0.32.0", "0.33.0", "0.29.0", "0.24.0", "0.11.2", None):
        assert W.bench_dataset_args(chat, prof, "/r/chat.custom.jsonl", v) == full, v
    assert W.bench_dataset_args(chat, prof, "/r/c.jsonl", "0.11.0")[-1] == "--skip-chat-template"
    assert W.bench_dataset_args(chat, prof, "/r/c.jsonl", "0.10.2")[-1] == "--custom-skip-chat-template"


def test_bench_argv_chat(prof, tmp_path):
    chat = W.resolve_workload("chat")
    argv = commands.bench_argv(prof, "/r/eagle3-k1.chat.r0.json", "/r/chat.custom.jsonl", "0.29.0", workload=chat)
    i = argv.index("serve")
    assert argv[i - 1] == "bench"
    assert argv[i + 1:i + 5] == ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"]
    assert "--skip-chat-template" in argv and "--disable-shuffle" in argv
    assert not any(a.startswith("--sonnet") for a in argv)
    assert argv[argv.index("--dataset-name") + 1] == "custom"
    assert argv[argv.index("--temperature") + 1] == "0"
    own = W.resolve_workload("own", prompts_file=_own(tmp_path, '{"prompt": "x"}\n'))
    argv = commands.bench_argv(prof, "/r/o.json", "/r/own.custom.jsonl", "0.32.0", workload=own)
    assert "--backend" not in argv and "--skip-chat-template" in argv


def test_serve_flags_for_per_request():
    flag = ["--per-request-spec-decode-metrics", "summary"]
    for v in ("0.29.0", "0.30.1", "0.32.0", "0.33.0", "0.33.0+cpu"):
        assert W.serve_flags_for_per_request(v, True) == flag, v
        assert W.serve_flags_for_per_request(v, False) == [], "never on the baseline (ValueError in vLLM)"
    for v in ("0.11.0", "0.24.0", "0.28.9", None, ""):
        assert W.serve_flags_for_per_request(v, True) == [], v


# --------------------------------------------------------------------------------------------------
# the simulator's calibration: chain drafting per position, k = 1 wins on throughput


@pytest.mark.parametrize("acceptance", [0.69, 0.78])
def test_sim_marginals_non_increasing_and_k1_fastest(acceptance):
    decay = 0.7
    for k in (1, 2, 3):
        marg = model.per_position_acceptance(acceptance, decay, k)
        assert marg[0] == pytest.approx(acceptance)
        assert all(a >= b for a, b in zip(marg, marg[1:])), marg
        assert model.expected_tokens_per_step(acceptance, decay, k) == pytest.approx(1 + sum(marg))
        # one run at k predicts the acceptance length at every k' <= k
        for kk in range(1, k + 1):
            assert model.expected_tokens_per_step(acceptance, decay, kk) == pytest.approx(1 + sum(marg[:kk]))
    tpot = {k: model.expected_tpot_ms(7.0, acceptance, decay, k) for k in (0, 1, 2, 3)}
    assert min(tpot, key=tpot.get) == 1, tpot  # a k = 2/3 step costs more than its extra accepted tokens
    assert tpot[1] < tpot[2] < tpot[3], tpot


def test_sim_chat_acceptance_default_is_higher():
    from tui.sim.config import DEFAULTS, sim_config

    assert DEFAULTS["chat_acceptance"] > DEFAULTS["acceptance"]
    assert sim_config({"SPECDEC_SIM": json.dumps({"chat_acceptance": 0.9})})["chat_acceptance"] == 0.9


def test_planned_bench_argv_for_show_commands(prof):
    from tui.core.plan import build as plan
    from tui.core.plan.commands import Placeholders

    ph = Placeholders(run_dir="RUN")
    chat = plan.planned_workload(prof, "chat", ph)
    argv = plan.bench_argv(prof, "RUN/eagle3-k1.chat.r1.json", f"RUN/{chat.bench_jsonl}", "0.29.0", ph, workload=chat)
    assert argv == commands.bench_argv(prof, "RUN/eagle3-k1.chat.r1.json", "RUN/chat.custom.jsonl", "0.29.0",
                                       workload=W.resolve_workload("chat"))
    # own before its file exists (or without [tune]): planned as {"prompt"} lines to /v1/completions
    own = plan.planned_workload(prof, "own", ph)
    assert own.endpoint == "completions" and own.bench_jsonl == "own.custom.jsonl"
