"""Pure model of the simulated target/draft pair: greedy text, timing and EAGLE3 acceptance.

Everything here is deterministic and free of I/O, so it can be unit-tested and reused.

Calibration (the tutorial, trn2.48xlarge TP16, sonnet 512 in / 128 out):
- TTFT ≈ ``ttft_ms`` at 512 prompt tokens: a small constant plus a part proportional to the prompt
  length. Under EAGLE3 the first step is vLLM's: the target's prefill samples the first token, then the
  draft proposes k tokens for the next step (its prefill over the prompt's hidden states, then k − 1
  single-token passes), and the first token leaves the server when that step ends. So speculative TTFT =
  prefill × (1 + ``draft_prefill_cost``) + (k − 1) × ``draft_prefill_cost`` × tpot: never below the
  baseline's, and it grows with the draft's cost and with k. (The tutorial's single run reported
  252 → 218 ms median TTFT; the simulator does not reproduce a drop that the first step cannot have.)
  Acceptance reaches TTFT only through queueing: a request that waits for a slot waits for the steps of the
  requests ahead of it (see Batching).
- A baseline decode step costs ``tpot_ms`` and emits one token.
- An EAGLE3 step with k draft tokens costs ``tpot_ms × (1 + v·k)`` (v = ``draft_step_cost``, 0.4) and emits
  1 + (accepted drafts) tokens. Draft position i is accepted with conditional probability ``acceptance × decay**i``; drafting
  stops at the first rejection. So k = 1 at 69 % gives 9.8 ms / 1.69 ≈ 5.80 ms per token, and k = 2, 3
  are slower than k = 1 for this MoE pairing (tutorial Step 3).
- Batching (``batch_cost`` = g, default 0): the server runs one engine step for every sequence in flight
  (tui/sim/serve/batch.py). A decode step over b sequences verifies b × (k + 1) tokens and costs
  ``step_ms = tpot_ms × (1 + v·k) × (1 + g·(b·(k + 1) − 1))``: g is the added cost of each further token
  verified in a step, relative to a one-token step. A baseline step at b verifies b tokens. With
  ``batch_knee`` = n0 (default 1) the first n0 tokens of a step cost what one does (the memory-bound region of
  a roofline): the factor is 1 + g·max(0, b·(k + 1) − n0), so speculation stops paying sharply once b·(k + 1)
  passes the knee while the baseline's b does not. So the per-token
  cost of the baseline falls with b while speculation's extra k·b verified tokens grow with it: the speedup
  at concurrency b, AL·(1 + g·(b − 1)) / ((1 + v·k)(1 + g·(b·(k + 1) − 1))), falls with b and crosses 1
  where g sets it (``crossover_batch``); with g = 0 every batch costs what one sequence costs, as before.
  A step that admits new requests also runs their prefills (chunked prefill): it lasts the decode cost plus
  each new request's TTFT above, so queueing for a slot and other requests' prefills show in TTFT.
- Synthetic rejection sampling (vLLM's ``rejection_sample_method = "synthetic"``, tui/sim/specconfig.py):
  position i is accepted with conditional probability a_i / a_{i−1} of the configured marginal rates a.
- Drift (``acceptance_drift``, default 0): position-0 acceptance moves by that much per 1000 tokens the
  server has generated (clamped to [0, 1]); synthetic rates do not drift.
- Acceptance varies with the prompt: each prompt's position-0 acceptance is a Beta draw around the
  route's mean with standard deviation ``acceptance_spread``, seeded by the prompt text
  (``prompt_acceptance``), so the same prompts give the same acceptance (greedy decoding is
  deterministic) and prompts drawn with another bench ``--seed`` give another.
- Run-to-run spread: a host speed factor (``HostNoise``) multiplies every delay of a request; its log is
  a seeded AR(1) walk over the server's requests (correlation ``HOST_NOISE_CORRELATION`` per request, about
  ten requests) with standard deviation ``run_spread``, so consecutive bench runs against one server see
  different speeds, reproducibly for the same server and request sequence.

Text: greedy output is the same with and without speculation (lossless), except under the
``lossless-broken`` fault. A prompt ending in a counting sequence continues it token by token
("6", " ", "7", " ", ...); any other prompt continues with pseudo-English seeded by a hash of the prompt.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass, field
from typing import Iterator

from .tokens import tokenize

# --- timing constants ------------------------------------------------------------------------
REFERENCE_PROMPT_TOKENS = 512
TTFT_CONST_FRACTION = 0.04  # share of ttft_ms that does not scale with the prompt
DRAFT_PREFILL_COST = 0.05  # default [simulation] draft_prefill_cost: a draft forward / a target forward
VERIFY_COST_PER_DRAFT = 0.4  # default [simulation] draft_step_cost: extra step cost per draft token at batch 1
DRAFT_MISMATCH_ACCEPTANCE = 0.005
HOST_NOISE_CORRELATION = 0.9  # AR(1) coefficient of the host speed factor's log, per request


def prefill_ms(prompt_tokens: int, base_ttft_ms: float) -> float:
    """The target's prefill plus its first-token sampling (simulated ms): the baseline TTFT."""
    const = TTFT_CONST_FRACTION * base_ttft_ms
    per_token = (base_ttft_ms - const) / REFERENCE_PROMPT_TOKENS
    return const + per_token * max(int(prompt_tokens), 1)


def ttft_ms(prompt_tokens: int, base_ttft_ms: float, speculative: bool = False, *, k: int = 1,
            draft_cost: float = DRAFT_PREFILL_COST, tpot_ms: float = 7.0) -> float:
    """Time to first token (simulated ms) for a prompt of prompt_tokens tokens.

    Speculative (k draft tokens): the first step also runs the draft's prefill over the prompt (draft_cost ×
    the target's prefill) and k − 1 further single-token draft passes (draft_cost × tpot_ms each) before the
    first token is returned, as vLLM's EAGLE proposer does."""
    t = prefill_ms(prompt_tokens, base_ttft_ms)
    if not speculative:
        return t
    cost = max(float(draft_cost), 0.0)
    return t * (1.0 + cost) + max(int(k) - 1, 0) * cost * float(tpot_ms)


def step_ms(tpot_ms: float, k: int, batch: int = 1, batch_cost: float = 0.0,
            draft_cost: float = VERIFY_COST_PER_DRAFT, knee: int = 1) -> float:
    """Cost of one decode step over `batch` sequences: baseline (k = 0) or an EAGLE3 draft+verify step with k
    drafts each. The step verifies batch × (k + 1) tokens; up to `knee` tokens cost what one does (the
    memory-bound region), each further token adds batch_cost (g) of a one-token step:
    tpot × (1 + v·k) × (1 + g·max(0, batch·(k + 1) − knee)), v = draft_cost ([simulation] draft_step_cost, 0.4
    by default). knee = 1 ([simulation] batch_knee's default): tpot × (1 + v·k) × (1 + g·(batch·(k + 1) − 1))."""
    k = max(int(k), 0)
    tokens = max(int(batch), 1) * (k + 1)
    extra = max(0, tokens - max(int(knee), 1))
    return tpot_ms * (1.0 + max(float(draft_cost), 0.0) * k) * (1.0 + max(float(batch_cost), 0.0) * extra)


def decode_speedup(acceptance: float, decay: float, k: int, batch: int = 1, batch_cost: float = 0.0,
                   draft_cost: float = VERIFY_COST_PER_DRAFT, knee: int = 1,
                   rates: list[float] | None = None) -> float:
    """Steady-state decode speedup of k drafts over the baseline at the same batch (prefill left out): tokens
    per step over the step's cost ratio. rates: per-position marginals (synthetic) instead of acceptance/decay."""
    if k <= 0:
        return 1.0
    al = 1.0 + (sum(rates[:k]) if rates is not None else sum(per_position_acceptance(acceptance, decay, k)))
    return al * step_ms(1.0, 0, batch, batch_cost, knee=knee) / step_ms(1.0, k, batch, batch_cost, draft_cost, knee)


def crossover_batch(acceptance: float, decay: float, k: int, batch_cost: float,
                    draft_cost: float = VERIFY_COST_PER_DRAFT, knee: int = 1, max_batch: int = 4096) -> int | None:
    """The smallest batch at which k drafts decode slower than the baseline (decode_speedup < 1), or None."""
    for b in range(1, max_batch + 1):
        if decode_speedup(acceptance, decay, k, b, batch_cost, draft_cost, knee) < 1.0:
            return b
    return None


def conditional_acceptance(acceptance: float, decay: float, position: int) -> float:
    """P(draft position i accepted | positions < i accepted)."""
    return min(1.0, max(0.0, acceptance * decay ** position))


def per_position_acceptance(acceptance: float, decay: float, k: int) -> list[float]:
    """Unconditional acceptance rate of each draft position 0..k-1 (what per_pos/num_drafts measures)."""
    rates: list[float] = []
    p = 1.0
    for i in range(k):
        p *= conditional_acceptance(acceptance, decay, i)
        rates.append(p)
    return rates


def expected_tokens_per_step(acceptance: float, decay: float, k: int) -> float:
    """Mean acceptance length: 1 + expected accepted drafts per step."""
    return 1.0 + sum(per_position_acceptance(acceptance, decay, k))


def expected_tpot_ms(tpot_ms: float, acceptance: float, decay: float, k: int) -> float:
    """Steady-state time per output token (ms) with k draft tokens (k = 0: baseline)."""
    if k <= 0:
        return tpot_ms
    return step_ms(tpot_ms, k) / expected_tokens_per_step(acceptance, decay, k)


def draw_accepted(rng: random.Random, k: int, acceptance: float, decay: float,
                  conditionals: list[float] | None = None) -> int:
    """Number of accepted drafts in one step (stops at the first rejection). conditionals: the per-position
    conditional rates to use instead of acceptance × decay**i (synthetic sampling: a_i / a_{i-1})."""
    n = 0
    for i in range(k):
        p = conditionals[i] if conditionals is not None else conditional_acceptance(acceptance, decay, i)
        if rng.random() < p:
            n += 1
        else:
            break
    return n


def effective_acceptance(acceptance: float, fault: str) -> float:
    return DRAFT_MISMATCH_ACCEPTANCE if fault == "draft-mismatch" else acceptance


def seed_of(text: str) -> int:
    return int.from_bytes(hashlib.md5(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")


def prompt_acceptance(prompt: str, mean: float, spread: float) -> float:
    """This prompt's position-0 acceptance: a Beta draw with the given mean and standard deviation, seeded
    by the prompt text (the same prompt always gets the same value). spread ≤ 0, or a mean at 0 or 1: the mean.
    The variance is capped at a quarter of mean × (1 − mean), which keeps the Beta unimodal."""
    m = float(mean)
    if spread <= 0 or not 0.0 < m < 1.0:
        return min(1.0, max(0.0, m))
    var = min(float(spread) ** 2, m * (1.0 - m) / 4.0)
    conc = m * (1.0 - m) / var - 1.0
    rng = random.Random(seed_of("acceptance\0" + prompt))
    return rng.betavariate(m * conc, (1.0 - m) * conc)


class HostNoise:
    """The host's speed over a server's life: factor(i) for its i-th request is exp(spread·z_i − spread²/2)
    with z an AR(1) walk (coefficient HOST_NOISE_CORRELATION, unit variance) from random.Random(seed), so the
    mean factor is 1 and a run of requests drifts as a whole. spread ≤ 0: always 1."""

    def __init__(self, spread: float, seed: int, correlation: float = HOST_NOISE_CORRELATION):
        self.spread = max(float(spread), 0.0)
        self.rho = min(max(float(correlation), 0.0), 0.999)
        self.rng = random.Random(seed)
        self.z = self.rng.gauss(0.0, 1.0)

    def next(self) -> float:
        if self.spread <= 0:
            return 1.0
        f = math.exp(self.spread * self.z - self.spread ** 2 / 2.0)
        self.z = self.rho * self.z + math.sqrt(1.0 - self.rho ** 2) * self.rng.gauss(0.0, 1.0)
        return f


# --- text ------------------------------------------------------------------------------------
_SEQ_RE = re.compile(r"(\d+(?:[ \t,;]+\d+)+)([ \t,;]*)$")

_WORDS = (
    "the of and to in that is was he for it with as his on be at by had not are but from or have an they "
    "which one you were her all she there would their we him been has when who will more no if out so said "
    "what up its about into than them can only other new some could time these two may then do first any my "
    "now such like our over man me even most made after also did many before must through back years where "
    "much your way well down should because each just those people how too little state good very make world "
    "still own see men work long get here between both life being under never day same another know while "
    "last might us great old year off come since against go came right used take three light summer beauty "
    "love heart eyes night morning river music silver garden memory water stone winter golden quiet distant "
    "gentle bright shadow voice road sea fire rose truth sweet time praise youth glass face spring sun"
).split()


def _counting(prompt: str) -> Iterator[str] | None:
    """Tokens continuing a trailing arithmetic sequence (≥ 3 terms, or ≥ 2 counting by one), else None."""
    m = _SEQ_RE.search(prompt)
    if not m:
        return None
    body, trailing = m.group(1), m.group(2)
    nums = [int(x) for x in re.findall(r"\d+", body)]
    seps = re.findall(r"[^\d]+", body)
    step = nums[-1] - nums[-2]
    if step <= 0:
        return None
    run = 2
    while run < len(nums) and nums[-run] - nums[-run - 1] == step:
        run += 1
    if run < 3 and step != 1:
        return None
    sep_tokens = tokenize(seps[-1])

    def gen() -> Iterator[str]:
        n = nums[-1]
        if not trailing:
            yield from sep_tokens
        while True:
            n += step
            yield from tokenize(str(n))
            yield from sep_tokens

    return gen()


def _english(seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    start = True
    while True:
        length = rng.randint(4, 14)
        for i in range(length):
            w = rng.choice(_WORDS)
            if start:
                w = w.capitalize()
                start = False
            yield " " + w
            if i < length - 1 and rng.random() < 0.08:
                yield ","
        yield rng.choice((".", ".", ".", ";", "!", "?"))
        start = True
        if rng.random() < 0.15:
            yield "\n"


def greedy_stream(prompt: str) -> Iterator[str]:
    """The target model's greedy continuation of prompt, one token string at a time (infinite)."""
    return _counting(prompt) or _english(seed_of(prompt))


def greedy_tokens(prompt: str, n: int) -> list[str]:
    it = greedy_stream(prompt)
    return [next(it) for _ in range(max(int(n), 0))]


def corrupt_token(tok: str) -> str:
    """A plausible but different token (what a broken verifier lets through)."""
    if tok.isdigit():
        return str(int(tok) + 1)
    stripped = tok.strip()
    if not stripped:
        return "," + tok
    if stripped.isalpha():
        lead = tok[: len(tok) - len(tok.lstrip())]
        low = stripped.lower()
        i = _WORDS.index(low) if low in _WORDS else seed_of(low) % len(_WORDS)
        alt = _WORDS[(i + 7) % len(_WORDS)]
        if alt == low:
            alt = _WORDS[(i + 8) % len(_WORDS)]
        return lead + (alt.capitalize() if stripped[0].isupper() else alt)
    return ";" if tok != ";" else ","


# --- request plan ----------------------------------------------------------------------------
@dataclass
class Step:
    """One engine step of a request: wait delay_ms (simulated) after the previous step, emit tokens."""

    delay_ms: float
    tokens: list[str]
    drafted: int = 0  # draft tokens verified in this step (0: no speculation in this step)
    accepted: int = 0  # drafts accepted (as drawn; counted by the spec-decode metrics)


@dataclass
class Plan:
    prompt_tokens: int
    steps: list[Step] = field(default_factory=list)

    @property
    def tokens(self) -> list[str]:
        return [t for s in self.steps for t in s.tokens]

    @property
    def text(self) -> str:
        return "".join(self.tokens)

    @property
    def duration_ms(self) -> float:
        return sum(s.delay_ms for s in self.steps)


class Decoder:
    """One sequence's decode state: its greedy tokens and what each engine step emits (shared by plan_request
    and the batched server). step(k) is one decode step with k drafts (k = 0: a plain step)."""

    def __init__(self, prompt: str, prompt_tokens: int, max_tokens: int, *, acceptance: float = 0.69,
                 decay: float = 0.7, conditionals: list[float] | None = None, max_model_len: int | None = None,
                 lossless_broken: bool = False, seed: int | None = None):
        self.n = max(int(max_tokens), 0)
        self.tokens = greedy_tokens(prompt, self.n)
        self.prompt_tokens = prompt_tokens
        self.acceptance = acceptance
        self.decay = decay
        self.conditionals = conditionals
        self.max_model_len = max_model_len
        self.lossless_broken = lossless_broken
        self.rng = random.Random(seed if seed is not None else seed_of(prompt))
        self.pos = 0
        self.corrupted = False
        self.speculated = False

    @property
    def done(self) -> bool:
        return self.pos >= self.n

    def first(self, delay_ms: float = 0.0) -> Step:
        """The prefill's token."""
        self.pos = min(1, self.n)
        return Step(delay_ms, self.tokens[:self.pos])

    def step(self, k: int, delay_ms: float = 0.0, shift: float = 0.0) -> Step:
        """One decode step with k drafts (skipped at max_model_len - k, vLLM's rule); shift moves this step's
        position-0 acceptance (drift)."""
        pos, n = self.pos, self.n
        can_spec = k > 0 and (self.max_model_len is None or self.prompt_tokens + pos < self.max_model_len - k)
        if can_spec:
            self.speculated = True
            acc = draw_accepted(self.rng, k, min(1.0, max(0.0, self.acceptance + shift)), self.decay,
                                self.conditionals)
            emit = min(1 + acc, n - pos)
            if self.lossless_broken and acc >= 1:
                self.tokens[pos] = corrupt_token(self.tokens[pos])
                self.corrupted = True
            step = Step(delay_ms, self.tokens[pos:pos + emit], k, acc)
        else:
            emit = 1
            step = Step(delay_ms, self.tokens[pos:pos + 1])
        self.pos = pos + emit
        if self.done and self.lossless_broken and self.speculated and not self.corrupted and n > 1:
            step.tokens[-1] = corrupt_token(step.tokens[-1])
            self.corrupted = True
        return step


def plan_request(prompt: str, prompt_tokens: int, max_tokens: int, *, ttft: float, tpot: float,
                 k: int = 0, acceptance: float = 0.69, decay: float = 0.7,
                 max_model_len: int | None = None, lossless_broken: bool = False,
                 seed: int | None = None, draft_cost: float = DRAFT_PREFILL_COST,
                 speed: float = 1.0, conditionals: list[float] | None = None) -> Plan:
    """The engine steps of one greedy request producing exactly max_tokens tokens, alone on the server.

    ttft/tpot are the *baseline* calibration (ms at 512 prompt tokens, ms per decode step). With k > 0
    the request runs under EAGLE3: the first step adds the draft's prefill and proposals (ttft_ms), and each
    decode step verifies k drafts accepted at `acceptance` (this request's position-0 rate, see
    prompt_acceptance). Speculation is skipped once the sequence reaches max_model_len - k (vLLM's rule).
    speed multiplies every delay (the host factor, HostNoise).
    """
    dec = Decoder(prompt, prompt_tokens, max_tokens, acceptance=acceptance, decay=decay, conditionals=conditionals,
                  max_model_len=max_model_len, lossless_broken=lossless_broken, seed=seed)
    plan = Plan(prompt_tokens=prompt_tokens)
    if dec.n == 0:
        return plan
    speed = float(speed) if speed > 0 else 1.0
    first = ttft_ms(prompt_tokens, ttft, k > 0, k=k, draft_cost=draft_cost, tpot_ms=tpot) * speed
    plan.steps.append(dec.first(first))
    while not dec.done:
        step = dec.step(k)
        step.delay_ms = step_ms(tpot * speed, step.drafted)  # a step past max_model_len - k is a plain one
        plan.steps.append(step)
    return plan
