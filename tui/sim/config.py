"""Simulation settings: the profile's [simulation] table, passed as JSON in SPECDEC_SIM."""

from __future__ import annotations

import json
import os
from typing import Any

from ..core.versions import DEMO_VLLM  # the served release Neuron SDK 2.33 pins

ENV_VAR = "SPECDEC_SIM"

# Demo-like defaults used when the simulator runs without a profile (ready within about 10 s).
DEFAULTS: dict[str, Any] = {
    "time_scale": 1.0,  # startup phases (weights, compile, warmup)
    "token_time_scale": 1.0,  # serving: TTFT and decode steps
    "vllm_version": DEMO_VLLM,  # one rule: tui/core/versions.py
    "weights_s": 2.0,
    "draft_s": 0.5,
    "hlo_s": 0.5,
    "compile_s": 3.0,
    "warmup_s": 0.5,
    "acceptance": 0.69,
    # Position-0 acceptance on /v1/chat/completions traffic: the tutorial's RedHatAI draft was trained on chat
    # data, so it accepts more on chat-formatted requests than on the raw sonnet completions (acceptance).
    "chat_acceptance": 0.78,
    "acceptance_decay": 0.7,
    # Standard deviation of a prompt's own position-0 acceptance around the mean (0: every prompt the same).
    "acceptance_spread": 0.0,
    "ttft_ms": 252.0,
    "tpot_ms": 7.0,
    # A draft forward as a fraction of a target forward: the draft's prefill and proposals in the first step.
    "draft_prefill_cost": 0.05,
    # Standard deviation of the log of the host's speed factor, drifting over requests (0: no run-to-run spread).
    "run_spread": 0.0,
    # Batching: the added cost of each further token verified in one engine step, relative to a one-token step
    # (0: a step over any batch costs what one sequence's step costs). See tui/sim/model.py step_ms.
    "batch_cost": 0.0,
    # Tokens verified in one step that cost no more than one (the memory-bound region); batch_cost applies past it.
    "batch_knee": 1,
    # Extra cost of an EAGLE3 decode step per draft token, relative to a plain step at batch 1 (the draft's
    # forward and the longer verify; 0.4 fits the tutorial's MoE pairing).
    "draft_step_cost": 0.4,
    # Change of position-0 acceptance per 1000 tokens the server has generated (0: no drift).
    "acceptance_drift": 0.0,
    "fault": "none",
    "hbm_gib_per_core": 24.0,
}


def sim_config(environ: dict[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if environ is None else environ
    cfg = dict(DEFAULTS)
    raw = env.get(ENV_VAR, "")
    if raw:
        try:
            given = json.loads(raw)
        except ValueError:
            given = {}
        if isinstance(given, dict):
            cfg.update({k: v for k, v in given.items() if k in DEFAULTS or k == "hub"})
    return cfg
