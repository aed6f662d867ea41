"""The simulated vLLM engine-core process (``EngineCore_DP0``), spawned by the simulated API server.

``python -m tui.sim.engine_core --parent-pid P --ready-fd N`` with the engine arguments as JSON in
``SPECDEC_SIM_ENGINE_ARGS`` and the simulation settings in ``SPECDEC_SIM``. It prints the engine-core
and per-rank worker lines of a vllm-neuron ≥ 0.21 startup (weights, draft, HBM, graph extraction,
compilation with a real on-disk compile cache, warmup), then writes one JSON line to the ready fd:
``{"status": "ready", ...}`` and idles until its stdin reaches EOF (the API server went away) or it
is signalled. On a fault it prints the root cause and vLLM's ``EngineCore failed to start.`` lines and
exits 1 without reporting ready. PR_SET_PDEATHSIG ties its life to the API server on Linux.

NeuronCores: the engine uses the logical cores of NEURON_VISIBLE_DEVICES (default 0..TP-1, as the plugin's
worker sets it). On the stand-in platform it claims them in the sysroot (tui/sim/cores.py) for as long as it
runs, so the stand-in's neuron-ls lists it, and a second server on an overlapping range fails with the
runtime's busy-cores error, as on real hardware.

Durations printed in the log are simulated seconds (wall time / time_scale).
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import hashlib
import json
import math
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ..core.versions import DEMO_VLLM
from . import cores as core_claims
from .config import sim_config
from .specconfig import NEURON_SCHEDULE_ERROR, SCHEDULE_KEY
from .logs import (ProcessLog, WorkerGroup, color_enabled, neuronx_cc_format, nrt_format, red_if,
                   traceback_lines)

ENGINE_ARGS_ENV = "SPECDEC_SIM_ENGINE_ARGS"
PROCESS_NAME = "EngineCore_DP0"
NEURONX_CC_VERSION = "2.27.5334.0+f702b353"

RT_VISIBLE_CORES_ERROR = ("NEURON_RT_VISIBLE_CORES cannot be used with multi-processing execution on vLLM. "
                          "Set NEURON_VISIBLE_DEVICES to control device visibility.")
CORES_BUSY_ERROR = "Neuron runtime cannot be initialized; cannot determine the number of available NeuronCores"
VISIBLE_VAR = "NEURON_VISIBLE_DEVICES"
ROOT_COMM_PORT_BASE = 61234
FAULT_HELD_CORES = range(0, 16)  # [simulation] fault = "cores-busy": another process holds devices 0-3
HBM_ALLOC_ERROR = 'nrt_tensor_allocate status=4 message="Allocation Failure"'
SIGKILL_TEXT = ("The neuronx-cc (neuron compiler) process was killed (SIG_KILL).  This typically happens when there "
                "is insufficient memory to compile and the linux Out Of Memory (OOM) killer terminates the compiler. "
                "Reduce VLLM_NEURON_PARALLEL_COMPILE_WORKERS or use an instance with more host memory.")


class EngineFailure(Exception):
    def __init__(self, message: str, exc_type: str = "RuntimeError", frames: list | None = None,
                 from_worker: bool = True):
        super().__init__(message)
        self.message = message
        self.exc_type = exc_type
        self.frames = frames or []
        self.from_worker = from_worker


# --- model facts -------------------------------------------------------------------------------
def model_params_billion(model: str) -> float:
    """Rough parameter count from the repo name (gpt-oss-120b is really 116.8 B)."""
    name = model.rstrip("/").split("/")[-1].lower()
    if "gpt-oss-120b" in name:
        return 116.8
    if "gpt-oss-20b" in name:
        return 20.9
    m = re.findall(r"(\d+(?:\.\d+)?)b(?![a-z])", name)
    return float(m[-1]) if m else 1.0


def num_layers(model: str) -> int:
    name = model.lower()
    if "gpt-oss-120b" in name:
        return 36
    if "gpt-oss-20b" in name:
        return 24
    return 32


def cache_root(environ: dict[str, str] | None = None) -> Path:
    """$VLLM_CACHE_ROOT/neuron/compile_cache (VLLM_CACHE_ROOT defaults to ${XDG_CACHE_HOME:-~/.cache}/vllm)."""
    env = os.environ if environ is None else environ
    root = env.get("VLLM_CACHE_ROOT")
    if not root:
        xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "vllm")
    return Path(os.path.expanduser(root)) / "neuron" / "compile_cache"


def _pow2_buckets(lo: int, hi: int) -> list[int]:
    out, b = [], lo
    while b < hi:
        out.append(b)
        b *= 2
    out.append(hi)
    return sorted(set(x for x in out if x <= hi)) or [hi]


def buckets(ea: dict[str, Any]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(prefill buckets [(num_batched_tokens, kv_segment_size)], decode targets [(num_seqs, max_model_len)])."""
    nc = (ea.get("additional_config") or {}).get("neuron_config") or {}
    mbt = int(ea["max_num_batched_tokens"])
    nbt = [int(x) for x in (nc.get("num_batched_tokens_buckets") or _pow2_buckets(min(128, mbt), mbt))]
    seqs = [int(x) for x in (nc.get("num_seqs_buckets") or _pow2_buckets(1, int(ea["max_num_seqs"])))]
    kvseg = nc.get("kv_segment_size_buckets") or []
    prefill = [(b, int(kvseg[0]) if kvseg else b) for b in nbt]
    decode = [(s, int(ea["max_model_len"])) for s in seqs]
    return prefill, decode


def graph_plan(ea: dict[str, Any]) -> list[tuple[str, float]]:
    """[(graph name, share of compile_s)]: target prefill/decode; + verify and draft graphs when speculative."""
    prefill, decode = buckets(ea)
    graphs: list[tuple[str, float]] = []
    graphs += [(f"target_prefill_{b}_{kv}", 0.5 / len(prefill)) for b, kv in prefill]
    graphs += [(f"target_decode_{s}_{ln}", 0.5 / len(decode)) for s, ln in decode]
    spec = ea.get("speculative_config")
    if spec:
        k = int(spec.get("num_speculative_tokens") or 1)
        graphs += [(f"target_verify_{s * (1 + k)}", 0.25 / len(decode)) for s, _ in decode]
        graphs += [(f"draft_prefill_{b}", 0.125 / len(prefill)) for b, _ in prefill]
        graphs += [(f"draft_decode_{s}", 0.125 / len(decode)) for s, _ in decode]
    return graphs


def cache_key(ea: dict[str, Any], vllm_version: str, graph: str) -> str:
    material = {
        "model": ea.get("model"), "tp": ea.get("tensor_parallel_size"), "dtype": ea.get("dtype"),
        "max_model_len": ea.get("max_model_len"), "max_num_seqs": ea.get("max_num_seqs"),
        "max_num_batched_tokens": ea.get("max_num_batched_tokens"),
        "additional_config": ea.get("additional_config") or {},
        "speculative_config": ea.get("speculative_config") or None,
        "vllm_version": vllm_version, "neuronx_cc": NEURONX_CC_VERSION, "target": "trn2", "graph": graph,
    }
    return hashlib.md5(json.dumps(material, sort_keys=True).encode()).hexdigest()


def entry_complete(entry: Path) -> bool:
    return (entry / ".compilation_complete").is_file()


def write_entry(entry: Path, key: str, graph: str, tp: int, failed_log: str | None = None) -> None:
    entry.mkdir(parents=True, exist_ok=True)
    neff_hash = hashlib.md5((key + ":neff").encode()).hexdigest()[:16]
    (entry / "graph.hlo").write_text(f"HloModule {graph}, entry_computation_layout={{}}\n// simulated by specdec-tui\n")
    args = ["neuronx-cc", "compile", str(entry / "graph.hlo"), "--framework", "XLA", "--target", "trn2",
            "--output", str(entry / f"graph_{neff_hash}.neff"), "--logfile", str(entry / "log-neuron-cc.txt"),
            "--auto-cast=none", "--verbose=35", "-O1", "--logical-nc-config=2"]
    (entry / "command.txt").write_text(" ".join(args) + "\n")
    if failed_log is not None:
        (entry / "log-neuron-cc.txt").write_text(failed_log + "\n")
        return
    (entry / "log-neuron-cc.txt").write_text("Compiler status PASS\n")
    (entry / f"graph_{neff_hash}.neff").write_bytes(b"NEFF\x00sim\x00" + key.encode())
    meta = {"version": 0, "cache_key": key, "graph": graph, "neff": f"graph_{neff_hash}.neff",
            "neuronx_cc_version": NEURONX_CC_VERSION, "tp_degree": tp, "created": time.time()}
    (entry / ".artifact_metadata_v0.json").write_text(json.dumps(meta, indent=2) + "\n")
    (entry / ".compilation_complete").write_text("")


# --- process plumbing --------------------------------------------------------------------------
def _prctl(option: int, arg: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _set_pdeathsig() -> None:
    _prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


def _set_comm(name: str) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


# --- the engine ---------------------------------------------------------------------------------
class EngineSim:
    def __init__(self, ea: dict[str, Any], cfg: dict[str, Any], log: ProcessLog, environ: dict[str, str]):
        self.ea = ea
        self.cfg = cfg
        self.log = log
        self.env = environ
        self.scale = float(cfg.get("time_scale") or 1.0)
        self.fault = str(cfg.get("fault") or "none")
        self.tp = int(ea["tensor_parallel_size"])
        self.spec = ea.get("speculative_config") or None
        self.k = int((self.spec or {}).get("num_speculative_tokens") or 1) if self.spec else 0
        pid = os.getpid()
        self.workers = WorkerGroup(log, [pid + 1 + r for r in range(self.tp)])
        self.visible = (environ.get(VISIBLE_VAR) or "").strip()
        self.claims: Path | None = None  # set once this engine holds its cores in the stand-in's claims dir
        self.t0 = time.monotonic()
        self.compile_times: dict[str, float] = {}
        self.hits = 0
        self.misses = 0

    # time -----------------------------------------------------------------------------------------
    def sleep(self, sim_s: float) -> None:
        if sim_s > 0:
            time.sleep(sim_s * self.scale)

    def since(self, t: float) -> float:
        """Simulated seconds since monotonic time t."""
        return (time.monotonic() - t) / self.scale

    # phases ----------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        ea, w, log = self.ea, self.workers, self.log
        model = ea["model"]
        version = self.cfg.get("vllm_version", DEMO_VLLM)
        spec_txt = "None"
        if self.spec:
            spec_txt = (f"SpeculativeConfig(method='{self.spec.get('method', 'eagle3')}', "
                        f"model='{self.spec.get('model', '')}', num_spec_tokens={self.k})")
        log.info("core.py", 93,
                 f"Initializing a V1 LLM engine (v{version}) with config: model='{model}', "
                 f"speculative_config={spec_txt}, tokenizer='{model}', skip_tokenizer_init=False, "
                 f"tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.{ea.get('dtype', 'bfloat16')}, "
                 f"max_seq_len={ea['max_model_len']}, download_dir=None, load_format=auto, "
                 f"tensor_parallel_size={self.tp}, pipeline_parallel_size=1, data_parallel_size=1, "
                 f"disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=auto, "
                 f"device_config=cpu, seed={ea.get('seed', 0)}, served_model_name={ea['served_model_name']}, "
                 f"enable_prefix_caching={ea.get('enable_prefix_caching', True)}, enable_chunked_prefill=True")
        if self.env.get("NEURON_RT_VISIBLE_CORES"):
            raise EngineFailure(RT_VISIBLE_CORES_ERROR, from_worker=False, frames=[
                ("vllm/v1/executor/multiproc_executor.py", 97, "_init_executor",
                 "current_platform.check_and_update_config(self.vllm_config)"),
                ("vllm_neuron/vllm/platform.py", 312, "check_and_update_config",
                 "raise RuntimeError("),
            ])
        if self.spec and self.spec.get(SCHEDULE_KEY) is not None:
            # vllm-neuron compiles fixed-k draft/verify graphs: its platform refuses a batch-size schedule.
            raise EngineFailure(NEURON_SCHEDULE_ERROR, exc_type="ValueError", from_worker=False, frames=[
                ("vllm/v1/executor/multiproc_executor.py", 97, "_init_executor",
                 "current_platform.check_and_update_config(self.vllm_config)"),
                ("vllm_neuron/vllm/platform.py", 241, "check_and_update_config", "raise ValueError("),
            ])
        cores = self.visible_cores()  # NEURON_VISIBLE_DEVICES, else 0..TP-1
        prefill, decode = buckets(ea)
        mbt = int(ea["max_num_batched_tokens"])
        if max(b for b, _ in prefill) != mbt:
            raise EngineFailure(
                f"Largest num_batched_tokens_buckets value ({max(b for b, _ in prefill)}) must equal "
                f"max_num_batched_tokens ({mbt}).", exc_type="ValueError", from_worker=False, frames=[
                    ("vllm_neuron/vllm/platform.py", 268, "check_and_update_config", "raise ValueError(")])

        log.warning("multiproc_executor.py", 720,
                    "Reducing Torch parallelism from 192 threads to 1 to avoid unnecessary CPU contention. "
                    "Set OMP_NUM_THREADS in the external environment to tune this value as needed.")
        w.vllm_each("INFO", "parallel_state.py", 1208,
                    lambda r: f"rank {r} in world size {self.tp} is assigned as DP rank 0, PP rank 0, "
                              f"TP rank {r}, EP rank {r}")
        w.each("INFO", "neuron_worker.py", 118, fmt=lambda r: f"Initialized NeuronWorker with rank {r}, local_rank {r}")
        comm = ROOT_COMM_PORT_BASE + (cores[0] if self.visible else 0)
        w.each("INFO", "neuron_worker.py", 164,
               fmt=lambda r: f"CCOM bootstrap rendezvous: NEURON_RT_ROOT_COMM_ID=localhost:{comm} (rank {r}/{self.tp})")
        self.claim_cores(cores)

        # -- weights --------------------------------------------------------------------------------
        w.info("neuron_worker.py", 201, "Loading model on NeuronWorker")
        w.info("neuron_model_runner.py", 402, "Starting NeuronModel loading process")
        t = time.monotonic()
        w.info("neuron_model_runner.py", 431, f"Loading weights from {model}")
        if self.fault == "engine-timeout":
            while True:  # weight loading never finishes; the API server gives up
                time.sleep(3600)
        self.sleep(float(self.cfg.get("weights_s", 0)))
        load_s = self.since(t)
        w.info("neuron_model_runner.py", 447, f"Weight loading completed in {load_s:.2f} seconds")
        w.each("INFO", "neuron_model_runner.py", 455, fmt=lambda r: f"Moving model to device: neuron:{r}")
        if self.spec:
            L = num_layers(model)
            w.info("neuron_model_runner.py", 470, f"Using model's default auxiliary layers: (2, {L // 2}, {L - 3})")
        w.info("neuron_model_runner.py", 488, "Compiling model with vllm_neuron backend")
        w.info("neuron_model_runner.py", 492, "neuronx-cc optlevel -O1 (from vLLM optimization_level)")
        w.info("neuron_model_runner.py", 501, "NeuronModel loading complete (moved to device and compiled)")

        draft_s = 0.0
        if self.spec:
            t = time.monotonic()
            w.info("neuron_model_runner.py", 517, "Spec decode enabled. Loading draft model ...")
            self.sleep(float(self.cfg.get("draft_s", 0)))
            w.each("INFO", "eagle.py", 142, fmt=lambda r: f"Moving draft model to device: neuron:{r}")
            w.info("eagle.py", 151, "Compiling draft model with vllm_neuron backend")
            w.info("eagle.py", 160, "Completed compilation for draft model.")
            w.info("neuron_model_runner.py", 531, "Draft model loading complete (moved to device and compiled)")
            draft_s = self.since(t)

        # -- HBM / KV ---------------------------------------------------------------------------------
        hbm = float(self.cfg.get("hbm_gib_per_core", 24.0))
        weights_gib = model_params_billion(model) * 1e9 * 2 / self.tp / 2 ** 30
        draft_gib = (0.855e9 * 2 / self.tp / 2 ** 30) if self.spec else 0.0
        needed = weights_gib + draft_gib + 0.6
        oom = needed > hbm
        used = min(needed, hbm - 0.19) if oom else needed
        w.info("neuron_worker.py", 288, f"Neuron HBM: {used:.2f} GiB used, {max(hbm - used, 0.0):.2f} GiB free")
        block = 32
        kv_tokens = int(math.ceil(int(ea["max_model_len"]) / block) * block) * int(ea["max_num_seqs"])
        log.info("kv_cache_utils.py", 1087, f"GPU KV cache size: {kv_tokens:,} tokens")
        log.info("kv_cache_utils.py", 1091,
                 f"Maximum concurrency for {int(ea['max_model_len']):,} tokens per request: "
                 f"{kv_tokens / int(ea['max_model_len']):.2f}x")

        # -- graph extraction -------------------------------------------------------------------------
        hlo_s = float(self.cfg.get("hlo_s", 0))
        w.info("neuron_worker.py", 322, f"Extracting graphs for {len(prefill)} prefill buckets: {prefill}")
        self.sleep(hlo_s * (0.4 if self.spec else 0.6))
        w.info("neuron_worker.py", 341, f"Extracting {len(decode)} decode compile targets: {decode}")
        self.sleep(hlo_s * (0.3 if self.spec else 0.4))
        if self.spec:
            for b, _ in prefill:
                w.info("eagle.py", 388, f"Capturing EAGLE3 prefill graphs for bucket size: {b}")
                w.info("eagle.py", 402, f"EAGLE3 graph capture: num_tokens={b}, num_reqs=1")
            for s, _ in decode:
                w.info("eagle.py", 415, f"Capturing EAGLE3 decode graphs for batch size: {s}")
                w.info("eagle.py", 402, f"EAGLE3 graph capture: num_tokens={s * (1 + self.k)}, num_reqs={s}")
            self.sleep(hlo_s * 0.3)
        w.info("neuron_worker.py", 360, "Barrier: waiting for all ranks to finish graph extraction")

        # -- compilation --------------------------------------------------------------------------------
        self.compile_all(version)
        w.info("neuron_worker.py", 377, "Barrier: waiting for all ranks to finish compilation")

        # -- warmup ---------------------------------------------------------------------------------
        warm = float(self.cfg.get("warmup_s", 0))
        nbt = [b for b, _ in prefill]
        w.info("neuron_model_runner.py", 1498, f"Warming up model for {len(nbt)} num_batched_tokens_buckets: {nbt}")
        for i, (b, kv) in enumerate(prefill, 1):
            w.info("neuron_model_runner.py", 1512,
                   f"[{i}/{len(prefill)}] Warming up for prefill: bucket_size={b}, kv_segment_size={kv}")
            if oom and i == 1:
                self.hbm_oom(needed, hbm, b, kv)
            self.sleep(warm * 0.5 / len(prefill))
            w.info("neuron_model_runner.py", 1530,
                   f"  Successfully warmed up for prefill bucket {b} with kv_segment_size {kv}")
        w.info("neuron_model_runner.py", 1548, f"Warming up {len(decode)} decode compile targets: {decode}")
        for i, (s, ln) in enumerate(decode, 1):
            w.info("neuron_model_runner.py", 1556, f"[{i}/{len(decode)}] Warming up decode (batch={s}, seq={ln})")
            self.sleep(warm * (0.3 if self.spec else 0.5) / len(decode))
            w.info("neuron_model_runner.py", 1570, f"  Warmed up decode (batch={s}, seq={ln})")
        if self.spec:
            for b in nbt:
                w.info("eagle.py", 455, f"EAGLE3 warmup: num_tokens={b}, num_reqs=1")
            for s, _ in decode:
                w.info("eagle.py", 455, f"EAGLE3 warmup: num_tokens={s * (1 + self.k)}, num_reqs={s}")
            self.sleep(warm * 0.2)
        w.info("neuron_model_runner.py", 1590, "=" * 80)
        w.info("neuron_model_runner.py", 1591,
               f"Model warmup completed: {len(nbt)} num_batched_tokens_buckets, {len(decode)} num_seqs_buckets")
        w.info("neuron_model_runner.py", 1592, "=" * 80)
        startup_s = self.since(self.t0)
        log.info("core.py", 210, f"init engine (profile, create kv cache, warmup model) took {startup_s:.2f} seconds")
        return {"status": "ready", "kv_cache_tokens": kv_tokens, "model_load_time_s": load_s + draft_s,
                "model_load_size_bytes": int((weights_gib + draft_gib) * 2 ** 30 * self.tp),
                "compile_times": self.compile_times, "startup_time_s": startup_s,
                "cache_hits": self.hits, "cache_misses": self.misses}

    def compile_all(self, version: str) -> None:
        w, root = self.workers, cache_root(self.env)
        compile_s = float(self.cfg.get("compile_s", 0))
        first = True
        for graph, share in graph_plan(self.ea):
            key = cache_key(self.ea, version, graph)
            entry = root / key
            w.info("backend.py", 212, f"Compilation cache key: {key}")
            force_fail = first and self.fault in ("compile-failed", "compile-oom")
            first = False
            if entry_complete(entry) and not force_fail:
                self.hits += 1
                w.info("cache.py", 88, f"Local cache hit for key: {key}")
                self.compile_times[graph] = 0.0
                continue
            self.misses += 1
            w.info("cache.py", 94, f"Local cache miss for key: {key}")
            root.mkdir(parents=True, exist_ok=True)
            meta = root / f".{key}.compilation_metadata"
            lock = root / f".{key}.compilation_metadata.lock"
            try:
                lock.write_text("")
                meta.write_text(f"pid: {w.pids[0]}\nprocess_name: VLLM::Worker_TP0\ncmdline: python3 -m vllm.entrypoints.cli.main serve\n"
                                f"rank: 0\ntimestamp: {time.time():.3f}\n")
                w.rank(0, "INFO", "cache.py", 141, f"Acquired compilation lock for cache: {entry}")
                for r in range(1, self.tp):
                    w.rank(r, "INFO", "cache.py", 163,
                           f"Waiting for shared compilation by process {w.pids[0]} (VLLM::Worker_TP0)")
                w.rank(0, "INFO", "backend.py", 240, "Compiling...")
                if force_fail:
                    self.compile_failure(entry, key, graph)
                t = time.monotonic()
                self.sleep(compile_s * share)
                took = self.since(t)
                write_entry(entry, key, graph, self.tp)
            finally:
                for p in (meta, lock):
                    try:
                        p.unlink()
                    except OSError:
                        pass
            self.compile_times[graph] = took
            fx = min(0.35, took * 0.05)
            total = took + fx
            w.rank(0, "INFO", "backend.py", 251, f"Compilation complete in {took:.2f} seconds")
            c = self.log.color
            w.rank(0, "INFO", "backend.py", 258,
                   f"Compilation time split - FX to HLO: {red_if(f'{fx:.2f}s', fx > 1, c)} | "
                   f"Compile: {red_if(f'{took:.2f}s', took > 1, c)} | Total: {red_if(f'{total:.2f}s', total > 1, c)}")
            w.rank(0, "INFO", "cache.py", 187, f"Stored compilation artifacts in local cache: {entry}")
            for r in range(1, self.tp):
                w.rank(r, "INFO", "cache.py", 171, f"Shared compilation completed: {entry}")

    # NeuronCores ------------------------------------------------------------------------------------
    def visible_cores(self) -> list[int]:
        """The logical cores rank 0..TP-1 use: NEURON_VISIBLE_DEVICES, else 0..TP-1 (what the worker sets)."""
        if not self.visible:
            return list(range(self.tp))
        cores: list[int] = []
        for part in self.visible.replace(" ", "").split(","):
            a, sep, b = part.partition("-")
            if not (a.isdigit() and (not sep or b.isdigit())) or (sep and int(b) < int(a)):
                raise EngineFailure(f"Invalid {VISIBLE_VAR}={self.visible!r}: expected a core list such as 0-15",
                                    exc_type="ValueError", from_worker=False, frames=[
                                        ("vllm_neuron/vllm/platform.py", 201, "check_and_update_config",
                                         "raise ValueError(")])
            cores.extend(range(int(a), int(b if sep else a) + 1))
        if len(cores) != self.tp:
            msg = (f"Resolved {len(cores)} Neuron cores {cores} for this replica, but local_world_size={self.tp} "
                   f"({VISIBLE_VAR}={self.visible}, assigned_physical_gpu_ids={cores})")
            raise EngineFailure(msg, from_worker=False, frames=[
                ("vllm_neuron/vllm/platform.py", 229, "check_and_update_config", "raise RuntimeError(")])
        return cores

    def claim_cores(self, cores: list[int]) -> None:
        """Take the cores as the runtime does (one process per core until it exits). On the stand-in platform
        (SPECDEC_SYSROOT with a claims dir) the claim is recorded for its neuron-ls and refused when a live
        process holds any of the cores; without it only [simulation] fault = "cores-busy" holds cores 0-15."""
        root = self.env.get("SPECDEC_SYSROOT")
        cdir = core_claims.claims_dir(root) if root else None
        if cdir is not None and cdir.is_dir():
            ok, clash = core_claims.claim(cdir, cores, command=_own_command())
            if ok:
                self.claims = cdir
                return
            held = {c for h in clash for c in h["cores"]}
        elif self.fault == "cores-busy":
            held = set(FAULT_HELD_CORES)
        else:
            return
        busy = [(r, c) for r, c in enumerate(cores) if c in held]
        w = self.workers
        for r, c in busy:
            self.log.unprefixed([nrt_format(
                "ERROR", "NRT:nrt_allocate_neuron_cores",
                f"Logical Neuron Core(s) not available - Requested:lnc{c}-lnc{c} Available:0 Logical Core size:2 "
                "(cores busy, ret=-16)", w.pids[r])])
            w.rank(r, "ERROR", "neuron_worker.py", 131, CORES_BUSY_ERROR)
        raise EngineFailure(CORES_BUSY_ERROR, frames=[
            ("vllm_neuron/vllm/worker/neuron_worker.py", 131, "init_device", "raise RuntimeError(")])

    def release_cores(self) -> None:
        if self.claims is not None:
            core_claims.release(self.claims)
            self.claims = None

    # faults ----------------------------------------------------------------------------------------
    def compile_failure(self, entry: Path, key: str, graph: str) -> None:
        w = self.workers
        self.sleep(float(self.cfg.get("compile_s", 0)) * 0.1)
        if self.fault == "compile-oom":
            status = -9
            w.rank(0, "ERROR", "backend.py", 301, SIGKILL_TEXT)
            cc_log = "neuronx-cc terminated by signal 9 (SIG_KILL)"
        else:
            status = 1
            ncc = ("[INTERNAL_ERROR] [NCC_ITEN406] Unhandled exception with message: "
                   f"tensorizer failed to lower operator in {graph} (internal shape check)")
            lines = [neuronx_cc_format("ERROR", w.pids[0] + 1000, "neuronxcc.driver.CommandDriver",
                                       "***************************************************************"),
                     neuronx_cc_format("ERROR", w.pids[0] + 1000, "neuronxcc.driver.CommandDriver",
                                       " An Internal Compiler Error has occurred"),
                     neuronx_cc_format("ERROR", w.pids[0] + 1000, "neuronxcc.driver.CommandDriver",
                                       "***************************************************************"),
                     neuronx_cc_format("ERROR", w.pids[0] + 1000, "neuronxcc.driver.CommandDriver", ncc)]
            self.log.unprefixed(lines)
            cc_log = "\n".join(lines)
        write_entry(entry, key, graph, self.tp, failed_log=cc_log)
        msg = f"neuronx-cc compilation failed with {status}. Check compiler logs."
        w.rank(0, "ERROR", "backend.py", 322, f"Compilation failed - terminating process for cleanup: {msg}")
        w.rank(0, "ERROR", "backend.py", 325, f"FATAL: {msg}")
        raise EngineFailure(msg, frames=[
            ("vllm_neuron/vllm/worker/neuron_worker.py", 371, "compile_or_warm_up_model",
             "self.model_runner.compile_graphs()"),
            ("vllm_neuron/vllm/compile/backend.py", 318, "_compile_hlo", "raise RuntimeError("),
        ])

    def hbm_oom(self, needed: float, hbm: float, b: int, kv: int) -> None:
        w = self.workers
        pid = w.pids[0]
        short = min(8.0, max(1.0, math.ceil(needed - hbm + 0.5)))
        tensors = hbm - 0.4
        self.log.unprefixed([
            nrt_format("INFO", "TDRV:print_lnc_hbm_details", "LNC size is 2. Neuron Cores using this HBM: 4", pid),
            nrt_format("ERROR", "TDRV:log_dev_mem",
                       f"Failed to allocate {short:.3f}GB (alignment: none, usage: tensors) on ND 0:NC 4", pid),
            nrt_format("ERROR", "TDRV:log_dev_mem_usage_table", "Displaying Current Memory Utilization:", pid),
            "| TOTAL     | Model Code | Model Constants | Tensors   | Shared Scratchpad | Runtime  | DMA Rings |",
            f"| {hbm - 0.05:.3f}GB | 152.000MB  | 4.000MB         | {tensors:.3f}GB | 128.000MB         | 64.000MB | 43.000MB  |",
            nrt_format("ERROR", "TDRV:log_dev_mem_usage_table", "NEFF id to name mapping:", pid),
            f"    1001: target_prefill_{b}_{kv}",
            nrt_format("ERROR", "NRT:nrt_tensor_allocate", "Failed to allocate tensor (status=4)", pid),
        ])
        w.each("ERROR", "neuron_model_runner.py", 1541,
               f"Model warmup failed for prefill bucket {b} with kv_segment_size {kv}. Error: {HBM_ALLOC_ERROR}")
        raise EngineFailure(HBM_ALLOC_ERROR, frames=[
            ("vllm_neuron/vllm/worker/neuron_worker.py", 412, "compile_or_warm_up_model",
             "self.model_runner.warmup_model()"),
            ("vllm_neuron/vllm/worker/neuron_model_runner.py", 1535, "warmup_model",
             "self._run_prefill_warmup(bucket_size, kv_segment_size)"),
            ("libtorch_neuronx_lite/runtime.py", 221, "allocate", "raise RuntimeError("),
        ])

    def report_failure(self, f: EngineFailure) -> None:
        log = self.log
        exc_line = f"{f.exc_type}: {f.message}"
        core_frames = [
            ("vllm/v1/engine/core.py", 699, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
            ("vllm/v1/engine/core.py", 498, "__init__", "super().__init__(vllm_config, executor_class, log_stats,"),
        ]
        if f.from_worker:
            # The worker's own traceback, then the executor's wrapper in the engine core.
            wtb = traceback_lines([("vllm/v1/executor/multiproc_executor.py", 671, "worker_busy_loop",
                                    "output = func(*args, **kwargs)")] + f.frames, exc_line)
            self.workers.engine.write_lines(
                [f"{self.workers.prefix(0)}ERROR {time.strftime('%m-%d %H:%M:%S')} "
                 f"[multiproc_executor.py:676] WorkerProc hit an exception."]
                + [f"{self.workers.prefix(0)}{ln}" for ln in wtb], prefix="")
            frames = core_frames + [
                ("vllm/v1/engine/core.py", 190, "_initialize_kv_caches",
                 "self.model_executor.initialize_from_config(kv_cache_configs)"),
                ("vllm/v1/executor/multiproc_executor.py", 284, "collective_rpc", "raise RuntimeError("),
            ]
            exc_line = (f"RuntimeError: Worker failed with error '{f.message}', please check the stack trace "
                        "above for the root cause")
        else:
            frames = core_frames + [("vllm/v1/engine/core.py", 92, "__init__",
                                     "self.model_executor = executor_class(vllm_config)")] + f.frames
            exc_line = f"{f.exc_type}: {f.message}"
        tb = traceback_lines(frames, exc_line)
        log.error("core.py", 708, "EngineCore failed to start.\n" + "\n".join(tb))
        proc_tb = traceback_lines([
            ("stdlib/multiprocessing/process.py", 314, "_bootstrap", "self.run()"),
            ("stdlib/multiprocessing/process.py", 108, "run", "self._target(*self._args, **self._kwargs)"),
            ("vllm/v1/engine/core.py", 712, "run_engine_core", "raise e"),
        ] + frames, exc_line)
        log.write_lines(["Process EngineCore_DP0:"] + proc_tb, stream=sys.stderr)


def _own_command() -> str:
    """This process's command line, as neuron-ls reports it ("" when unreadable, as in some containers)."""
    try:
        return Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _idle_until_parent_gone() -> None:
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tui.sim.engine_core")
    p.add_argument("--parent-pid", type=int, default=0)
    p.add_argument("--ready-fd", type=int, default=-1)
    a = p.parse_args(argv)
    _set_pdeathsig()
    if a.parent_pid and os.getppid() != a.parent_pid:
        return 1  # the API server already died before PR_SET_PDEATHSIG took effect
    _set_comm("VLLM::EngineCor")
    # Ctrl+C reaches the whole foreground process group: the API server decides, then terminates us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    engine: EngineSim | None = None

    def _exit_now(*_: Any) -> None:
        if engine is not None:
            engine.release_cores()  # the runtime frees the cores when the process exits
        os._exit(0)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_now)

    environ = dict(os.environ)
    ea = json.loads(environ.get(ENGINE_ARGS_ENV, "{}"))
    cfg = sim_config(environ)
    log = ProcessLog(PROCESS_NAME, os.getpid(), sys.stdout, color_enabled(environ))
    engine = EngineSim(ea, cfg, log, environ)
    atexit.register(engine.release_cores)

    def report(obj: dict[str, Any]) -> None:
        if a.ready_fd >= 0:
            os.write(a.ready_fd, (json.dumps(obj) + "\n").encode())

    try:
        info = engine.run()
    except EngineFailure as f:
        engine.report_failure(f)
        report({"status": "failed", "error": f.message})
        return 1
    report(info)
    if a.ready_fd >= 0:
        os.close(a.ready_fd)
    _idle_until_parent_gone()
    return 0


if __name__ == "__main__":
    sys.exit(main())
