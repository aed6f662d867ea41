"""Common-issues diagnostics: one catalogue of ids, titles and remedies, and the rules that raise them.

Every diagnosis has a stable id, a severity (error / warning / info), a title, evidence (the numbers or
log lines that triggered it) and a remedy. Log-signature diagnoses are raised by the server steps from
the log pipeline; number rules (acceptance, throughput, agreement, failures) are pure functions here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .events import Diagnosis, Severity


@dataclass(frozen=True)
class Entry:
    severity: Severity
    title: str
    remedy: str


CATALOG: dict[str, Entry] = {
    "acceptance-near-zero": Entry(
        "error", "Acceptance rate is 0% or near 0%",
        "The draft is not predicting this target: confirm both models are accurate against a known reference and "
        "that the draft checkpoint was trained against this exact target (speculators_config.verifier), and that "
        "speculative.method matches the draft type (eagle3)."),
    "acceptance-low": Entry(
        "warning", "Acceptance rate is below 30%",
        "Stop tuning: validate the draft and target implementations against a known reference before sweeping "
        "num_speculative_tokens. If the models are right, use a draft trained on data closer to your traffic "
        "(this draft was trained on chat-templated prompts)."),
    "hbm-allocation-failure": Entry(
        "error", "Server failed with a device-memory (HBM) allocation failure",
        "GPT-OSS-120B in BF16 does not fit at tensor-parallel-size {tp} on trn2.48xlarge (≈234 GB of weights, "
        "24 GiB per logical core). Use tensor-parallel-size 16 or higher ({fix_key} = 16), and make sure no other "
        "process holds the NeuronCores."),
    "bf16-checkpoint-not-needed": Entry(
        "warning", "No separate BF16 checkpoint is needed",
        "Use the stock openai/gpt-oss-120b checkpoint (MXFP4 experts) with "
        "--hf-overrides '{{\"quantization_config\": {{}}}}' and neuron_config.quantization = \"bf16\": the BF16 "
        "loader dequantizes the expert weights at load time."),
    "throughput-regressed": Entry(
        "error", "Throughput regressed with EAGLE3 enabled",
        "The acceptance rate is not high enough to pay for the draft and verification compute. Check the "
        "Speculative Decoding numbers; if acceptance is low, use a draft trained on data closer to your serving "
        "distribution, or keep num_speculative_tokens = 1."),
    "greedy-output-mismatch": Entry(
        "warning", "EAGLE3 greedy output differs from the baseline (losslessness broken)",
        "Under greedy sampling EAGLE3 must not change the target's output. Check that both servers used the same "
        "target revision and sampling settings (temperature 0, on_device_sampling_config all_greedy); a difference "
        "points at an inaccurate target or draft implementation."),
    "draft-target-mismatch": Entry(
        "error", "Draft checkpoint does not match the target",
        "Use a draft trained against this exact target with a matching method: for openai/gpt-oss-120b, "
        "RedHatAI/gpt-oss-120b-speculator.eagle3 with speculative.method = \"eagle3\". A mismatched pair gives an "
        "acceptance rate near 0% after a long compile."),
    "compile-failed": Entry(
        "error", "neuronx-cc compilation failed",
        "Read the compiler log in the cache entry (log-neuron-cc.txt next to command.txt under "
        "$VLLM_CACHE_ROOT/neuron/compile_cache/<key>/). Check the bucket settings in additional_config and that "
        "the compiler matches the plugin's SDK release."),
    "compile-oom-killed": Entry(
        "error", "The compiler was killed by the out-of-memory killer",
        "neuronx-cc ran out of host memory. Stop other memory-hungry processes, lower "
        "NEURON_LIBTORCH_PARALLEL_COMPILE_WORKERS / VLLM_NEURON_PARALLEL_COMPILE_WORKERS (e.g. 2), or compile "
        "fewer buckets at once, then relaunch (completed graphs are cached)."),
    "neuron-cores-busy": Entry(
        "error", "NeuronCores are held by another process",
        "Stop the process that holds the cores (`neuron-ls` lists it with its pid), then relaunch."),
    "engine-startup-timeout": Entry(
        "error", "The engine did not become ready in time",
        "A cold gpt-oss-120b + EAGLE3 compile can take longer than vLLM's 600 s default. Raise "
        "VLLM_ENGINE_READY_TIMEOUT_S and server.startup_timeout_s (e.g. 5400); a relaunch with a warm compile "
        "cache is much faster."),
    "port-in-use": Entry(
        "error", "The server port is already in use",
        "Another process listens on {host}:{port}. Stop it (a previous `vllm serve`?) or choose another "
        "server.port."),
    "neuron-rt-visible-cores-set": Entry(
        "error", "NEURON_RT_VISIBLE_CORES is set",
        "vllm-neuron sets NEURON_RT_VISIBLE_CORES per worker itself: `unset NEURON_RT_VISIBLE_CORES` and use "
        "NEURON_VISIBLE_DEVICES to choose devices."),
    "placeholder-vllm-neuron": Entry(
        "error", "The PyPI placeholder 'vllm-neuron' is installed, not the real plugin",
        "`pip uninstall vllm-neuron`, then install the plugin from the Neuron repository or use the Neuron DLAMI "
        "vLLM venv (/opt/aws_neuronx_venv_*vllm*)."),
    "sdk-too-old": Entry(
        "error", "Neuron SDK is older than the tutorial needs",
        "EAGLE3 with gpt-oss-120b on trn2 needs Neuron SDK 2.31 or later (vllm-neuron ≥ 0.21.0.1.0.0). Use a "
        "current Neuron DLAMI or upgrade the SDK packages."),
    "sonnet-removed-in-vllm": Entry(
        "error", "This vLLM no longer has the sonnet dataset",
        "`vllm bench serve --dataset-name sonnet` was removed in vLLM 0.32. Run the benchmark with the vLLM that "
        "vllm-neuron pins (0.21–0.24), or convert sonnet.txt with vllm.benchmarks.datasets.create_txt_slices_dataset "
        "and use --dataset-name custom (different prompts, so not comparable with the tutorial)."),
    "bench-requests-failed": Entry(
        "error", "Benchmark requests failed",
        "`vllm bench serve` exits 0 even when requests fail, so the run is judged by its result file. Read the "
        "server log ({name}.serve.log in the run directory) around the failures (did the server die or reject "
        "the requests?) and the bench output ({name}.bench.log); fix the cause and rerun: throughput figures with failed "
        "requests are not comparable."),
    "acceptance-stats-disagree": Entry(
        "warning", "Bench and /metrics acceptance figures disagree",
        "Other traffic reached the server during the run, or the counters reset. Re-run with no other clients; "
        "the report uses the /metrics delta."),
    "server-exposed": Entry(
        "warning", "The server API is open to the network",
        "vLLM has no authentication by default. Bind server.host = \"127.0.0.1\" and reach it through an SSH tunnel "
        "(ssh -L 8000:127.0.0.1:8000 …)."),
    "engine-failed": Entry(
        "error", "The engine failed to start",
        "Read the root cause quoted above the generic 'Engine core initialization failed' line in the server log."),
    "server-exited": Entry(
        "error", "The server exited during startup",
        "Read the last lines of the server log; the command and environment are in the run directory."),
    "smoke-test-failed": Entry(
        "error", "The smoke test did not continue the count",
        "The server answered but the greedy output is wrong: check the target checkpoint, dtype and "
        "hf_overrides, and compare with the tutorial's expected reply \"6 7 8 9 10 \"."),
}


def make(diag_id: str, step: str, evidence: Iterable[str], severity: Severity | None = None, **fmt: Any) -> Diagnosis:
    """Build a Diagnosis from the catalogue; `fmt` fills placeholders in the remedy."""
    e = CATALOG[diag_id]
    remedy = e.remedy.format(**fmt) if fmt else e.remedy.replace("{{", "{").replace("}}", "}")
    return Diagnosis(step, diag_id, severity or e.severity, e.title, tuple(str(x) for x in evidence), remedy)


def hbm(step: str, evidence: Iterable[str], tp: int) -> Diagnosis:
    d = make("hbm-allocation-failure", step, evidence, tp=tp, fix_key="server.tensor_parallel_size")
    if tp >= 16:
        remedy = ("The model does not fit in device memory at this configuration. Lower max_model_len or the bucket "
                  "sizes, check no other process holds NeuronCores, or raise tensor-parallel-size.")
        d = Diagnosis(d.step, d.id, d.severity, d.title, d.evidence, remedy)
    return d


def from_log_signatures(step: str, signatures: list[tuple[str, str, list[str]]], root_cause: str | None,
                        last_lines: list[str], exit_code: int | None, tp: int, host: str, port: int) -> list[Diagnosis]:
    """Diagnoses for a server that exited during startup, from the log pipeline's error signatures
    (kind, line, context). The generic `engine-failed` wrapper is reported only when nothing more specific
    was found, quoting the root cause found above it."""
    out: list[Diagnosis] = []
    for kind, line, context in signatures:
        if kind == "engine-failed" or kind not in CATALOG:
            continue
        if kind == "hbm-allocation-failure":
            out.append(hbm(step, list(context) + [line], tp))
        elif kind == "port-in-use":
            out.append(make(kind, step, [line], host=host, port=port))
        else:
            out.append(make(kind, step, list(context) + [line]))
    if not out:
        if any(k == "engine-failed" for k, _, _ in signatures):
            out.append(make("engine-failed", step, [root_cause] if root_cause else last_lines[-5:]))
        else:
            out.append(make("server-exited", step, [f"exit code {exit_code}"] + last_lines[-8:]))
    return out


# -------------------------------------------------------------------------------------------------
# Number rules (pure functions; tested with evidence that triggers and evidence that must not)
# -------------------------------------------------------------------------------------------------

def acceptance_rules(step: str, acceptance_rate: float | None, acceptance_length: float | None,
                     per_position: list[float] | None = None) -> list[Diagnosis]:
    if acceptance_rate is None:
        return []
    ev = [f"acceptance rate {acceptance_rate:.2f}%"]
    if acceptance_length is not None:
        ev.append(f"acceptance length {acceptance_length:.2f}")
    if per_position:
        ev.append("per-position acceptance " + ", ".join(f"{p:.1f}%" for p in per_position))
    if acceptance_rate < 5.0:
        return [make("acceptance-near-zero", step, ev)]
    if acceptance_rate < 30.0:
        return [make("acceptance-low", step, ev)]
    return []


def throughput_rule(step: str, baseline: dict[str, Any] | None, eagle3: dict[str, Any] | None) -> list[Diagnosis]:
    if not baseline or not eagle3:
        return []
    b, e = baseline.get("output_throughput"), eagle3.get("output_throughput")
    if b is None or e is None or b != b or e != e or b <= 0:
        return []
    if e > b:
        return []
    ev = [f"output throughput baseline {b:.2f} tok/s, EAGLE3 {e:.2f} tok/s ({e / b:.2f}x)"]
    if eagle3.get("acceptance_rate") is not None:
        ev.append(f"acceptance rate {eagle3['acceptance_rate']:.2f}%")
    bt, et = baseline.get("median_tpot_ms"), eagle3.get("median_tpot_ms")
    if bt is not None and et is not None:
        ev.append(f"median TPOT baseline {bt:.2f} ms, EAGLE3 {et:.2f} ms")
    return [make("throughput-regressed", step, ev)]


def failed_requests_rule(step: str, bench: dict[str, Any] | None) -> list[Diagnosis]:
    """`bench-requests-failed` (an error: the step fails) from the result file's counts, never from the bench's
    exit code (vLLM 0.32 exits 0 when every request failed). `bench` holds completed, failed and optionally
    first_error (the first `Error 0: ...` the bench printed); the remedy names <step>.serve.log."""
    if not bench:
        return []
    failed = bench.get("failed") or 0
    completed = bench.get("completed") or 0
    if failed <= 0:
        return []
    ev = [f"{completed} completed, {failed} failed (of {failed + completed} requests)"]
    if bench.get("first_error"):
        ev.append(f"first error: {bench['first_error']}")
    ev += [str(x) for x in bench.get("errors", [])[:3]]
    return [make("bench-requests-failed", step, ev, name=step)]


def agreement_rule(step: str, bench_rate: float | None, metrics_rate: float | None,
                   tolerance_pct_points: float = 1.0) -> list[Diagnosis]:
    if bench_rate is None or metrics_rate is None:
        return []
    if abs(bench_rate - metrics_rate) <= tolerance_pct_points:
        return []
    return [make("acceptance-stats-disagree", step,
                 [f"vllm bench serve: {bench_rate:.2f}%", f"/metrics delta: {metrics_rate:.2f}%"])]


def greedy_rule(step: str, baseline_text: str | None, eagle3_text: str | None) -> list[Diagnosis]:
    if baseline_text is None or eagle3_text is None or baseline_text == eagle3_text:
        return []
    return [make("greedy-output-mismatch", step, [f"baseline: {baseline_text!r}", f"EAGLE3:   {eagle3_text!r}"])]


def server_exposed_rule(step: str, host: str) -> list[Diagnosis]:
    if host in ("0.0.0.0", "::", ""):
        return [make("server-exposed", step, [f"server.host = {host!r} listens on every interface"])]
    return []


def bf16_rule(step: str, target: str, hf_overrides: dict[str, Any], quantization_config_present: bool | None) -> list[Diagnosis]:
    """A separate BF16 checkpoint, or the MXFP4 quantization_config left in place."""
    ev: list[str] = []
    low = target.lower()
    if "gpt-oss" in low and ("bf16" in low or "bfloat16" in low):
        ev.append(f"models.target = {target!r} looks like a separately converted BF16 checkpoint")
    cleared = isinstance(hf_overrides.get("quantization_config"), dict) and not hf_overrides["quantization_config"]
    if quantization_config_present and not cleared:
        ev.append("the target's config.json has an MXFP4 quantization_config and server.hf_overrides does not "
                  "clear it")
    return [make("bf16-checkpoint-not-needed", step, ev)] if ev else []


# Env-step facts that map to a diagnosis: fact name → (statuses that trigger, diagnosis id).
ENV_FACT_DIAGNOSES: dict[str, tuple[tuple[str, ...], str]] = {
    "Neuron SDK": (("fail",), "sdk-too-old"),
    "sonnet dataset": (("fail",), "sonnet-removed-in-vllm"),
    "NEURON_RT_VISIBLE_CORES": (("fail",), "neuron-rt-visible-cores-set"),
    "server port": (("fail",), "port-in-use"),
    "Neuron cores free": (("fail",), "neuron-cores-busy"),
    "bind address": (("warn", "fail"), "server-exposed"),
}


def from_env_facts(step: str, facts: Iterable[Any], host: str = "", port: int = 0) -> list[Diagnosis]:
    """Diagnoses for env-step facts (objects with name, value, status, detail)."""
    out: list[Diagnosis] = []
    for f in facts:
        ev = [f"{f.name}: {f.value}" + (f" — {f.detail}" if f.detail else "")]
        if f.name == "vllm-neuron" and f.status == "fail" and "placeholder" in f"{f.value} {f.detail}".lower():
            out.append(make("placeholder-vllm-neuron", step, ev))
            continue
        hit = ENV_FACT_DIAGNOSES.get(f.name)
        if hit is None or f.status not in hit[0]:
            continue
        diag_id = hit[1]
        if diag_id == "sdk-too-old" and "unknown" in f.value.lower():
            continue
        if diag_id == "port-in-use":
            out.append(make(diag_id, step, ev, host=host, port=port))
        else:
            out.append(make(diag_id, step, ev))
    return out
