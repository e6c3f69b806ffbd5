"""Speculative decoding: a cheap drafter proposes ``k`` tokens, the target model checks them in
one pass, and every step keeps the accepted prefix plus one token of the target's own.

Expected tokens per target step (Leviathan et al. ICML 2023, "Fast Inference from Transformers
via Speculative Decoding", eq. 1 / Theorem 3.8, acceptance of each draft token i.i.d. with
probability ``alpha``)::

    E(alpha, k) = (1 - alpha^(k+1)) / (1 - alpha)        (alpha -> 1: k + 1)

Two drafters are modelled, both priced by the engine's roofline through the same
``IterationCost`` tables the simulator uses (no second cost model):

- a separate **draft model** (a ``ModelSpec``, e.g. Llama 3.1 8B for Llama 3.1 70B) on the same
  devices and tensor-parallel group as the target, at the workload's precisions: its weights and
  its own KV cache (every sequence's context, through the draft's layers) share the devices;
- **MTP / EAGLE-style heads**: ``layers`` extra transformer layers of the target's width that
  share the target's embedding and LM head (DeepSeek-V3 technical report, Liu et al. 2024,
  sec. 2.2 "Multi-Token Prediction": each MTP module is one transformer block plus a
  2d -> d projection and reuses the main model's embedding and output head; EAGLE, Li et al.
  ICML 2024, sec. 4: one decoder layer plus an FC layer 2d -> d, embedding and LM head taken
  from the target). The head is run autoregressively ``k`` times per step, the way EAGLE drafts
  and the way SGLang and vLLM run DeepSeek-V3's single MTP module for ``k`` > 1. A draft pass
  is priced as the head's ``layers`` layers plus the shared LM head; weights add the head's
  layers and one 2d x d projection per layer (the projection's time is not priced: for a
  Llama-style layer it is about a sixth of the layer's weights); KV adds ``layers`` layers of
  the target's KV per token.

One speculative decode step of a batch of ``B`` sequences at mean context ``c``:

- draft: ``k`` sequential passes of one token per sequence (``IterationCost`` of the drafter at
  ``B`` tokens, context ``c + j`` for the j-th), each paying the framework's per-iteration
  overhead, and the drafter also prefills every prompt (priced as a prefill pass of it);
- verify: one target pass of ``k + 1`` query tokens per sequence (``DecodeStep.verify``), whose
  token-wise operators see ``B (k+1)`` rows: memory-bound (almost free extra rows) at small
  ``B``, compute-bound at large ``B``, which is where speculation stops paying;
- TPOT = (draft + verify) / E; tokens per second = B E / (draft + verify).

Choosing k (``choose``): at a fixed running batch both objectives (throughput, TPOT) rank the
same, so the table over k = 1..``MAX_DRAFT_LEN`` of step time / E is computed with the tables
above and k is its argmin; the plain-decoding row (k = 0) is kept for comparison. The batch is
the scenario's: the fixed batch, or the mean running batch of a plain simulation of the same
load (offline/server).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from accelmap.cost.framework import FrameworkProfile
from accelmap.cost.per_token import tdp_j_per_token
from accelmap.engine.result import ServeStep, fits
from accelmap.engine.serve import rank_geometry, serving_memory
from accelmap.engine.system import System
from accelmap.errors import InputError
from accelmap.mapping.plan import Mapping
from accelmap.memory.budget import MemoryBudget, kv_cache_bytes, weight_bytes_per_param
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec
from accelmap.serving.iteration import IterationCost
from accelmap.serving.simulator import DecodeStep
from accelmap.workload import Inference

# k searched 1..8: gpt-fast's generate.py default speculate_k is 8 (its scripts use 4-6), and
# Leviathan et al. 2023 (sec. 4, Table 2) evaluate draft lengths up to 7.
MAX_DRAFT_LEN = 8
MAX_MTP_LAYERS = 1000  # MTP/EAGLE heads are 1 to a few layers; past this it is a typo


def expected_tokens(alpha: Any, k: Any) -> Any:
    """Tokens accepted per target step, (1 - alpha^(k+1)) / (1 - alpha) (Leviathan et al.
    2023, eq. 1); k + 1 at alpha = 1. Array-friendly in both arguments."""
    a = np.asarray(alpha, dtype=float)
    kk = np.asarray(k, dtype=float)
    safe = np.where(a < 1.0, a, 0.0)
    out = np.where(a < 1.0, (1.0 - safe ** (kk + 1.0)) / (1.0 - safe), kk + 1.0)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class Speculation:
    """A drafter (``draft`` model, or ``mtp_layers`` head layers of the target's width), the
    acceptance rate ``accept`` (alpha, in [0, 1)) and the draft length ``draft_len`` (k; None:
    chosen by :func:`choose`)."""

    accept: float
    draft_len: int | None = None
    draft: ModelSpec | None = None
    mtp_layers: int = 0

    def __post_init__(self) -> None:
        if self.draft is not None and self.mtp_layers:
            raise InputError("speculative decoding takes one drafter: a draft model (--draft "
                             "MODEL) or MTP/EAGLE-style heads (--mtp N), not both")
        if self.draft is None and not 0 < self.mtp_layers <= MAX_MTP_LAYERS:
            raise InputError(f"--mtp must be 1 to {MAX_MTP_LAYERS} head layers (or give "
                             f"--draft MODEL), got {self.mtp_layers}")
        if not (isinstance(self.accept, (int, float)) and 0.0 <= self.accept < 1.0):
            raise InputError(f"--accept is the draft-token acceptance rate alpha, in [0, 1); got "
                             f"{self.accept}")
        if self.draft_len is not None and not 1 <= self.draft_len <= 64:
            raise InputError(f"--draft-len must be a whole number of draft tokens from 1 to 64 "
                             f"(or 'auto'), got {self.draft_len}")

    @property
    def method(self) -> str:
        if self.draft is not None:
            return f"draft model {self.draft.id}"
        return f"MTP/EAGLE-style head of {self.mtp_layers} layer(s) sharing the target's LM head"

    def drafter(self, target: ModelSpec) -> ModelSpec:
        """The model a draft pass runs: the draft model, or the head as a ``mtp_layers``-layer
        model of the target's shape (MoE heads keep the target's experts: DeepSeek-V3's MTP
        module is an MoE block)."""
        if self.draft is not None:
            if self.draft.vocab_size != target.vocab_size:
                raise InputError(f"draft model {self.draft.id} has a vocabulary of "
                                 f"{self.draft.vocab_size:,} tokens, the target {target.id} "
                                 f"{target.vocab_size:,}: a draft must share the target's "
                                 "tokenizer")
            return self.draft
        data = target.model_dump()
        data.update(id=f"{target.id}-mtp{self.mtp_layers}", name=f"{target.name} MTP head",
                    n_layers=self.mtp_layers, published_params=None,
                    published_params_source=None)
        if target.moe is not None:
            data["moe"] = {**target.moe.model_dump(), "dense_layers": 0, "layer_frequency": 1}
        return ModelSpec.model_validate(data)

    def draft_mapping(self, m: Mapping) -> Mapping:
        """The drafter runs on the target's tensor-parallel group (a dense draft without
        expert parallelism or DP attention, which are for MoE models)."""
        if self.draft is not None and self.draft.moe is None and (m.ep > 1 or m.dp_attention):
            return Mapping.serving(int(m.tp), int(m.pp), 1, int(m.replicas))
        return m


@dataclass(frozen=True)
class DraftMemory:
    """What the drafter adds to each device: weights, and KV bytes per token of context."""

    weights_bytes: float
    kv_bytes_per_token: float


def draft_memory(sp: Speculation, target: ModelSpec, wl: Inference, m: Mapping) -> DraftMemory:
    """Per device: the draft model's sharded weights and KV (``serving_memory``, the target's
    own rule), or the heads' layers (embedding and LM head shared, so not counted) plus one
    2d x d projection per layer (DeepSeek-V3 sec. 2.2's M_k, EAGLE's FC layer)."""
    d = sp.drafter(target)
    dm = sp.draft_mapping(m)
    stage = rank_geometry(d, dm).first_layers(math.ceil(d.n_layers / dm.pp))
    per_token = float(kv_cache_bytes(stage, 1, 1, wl.kv_dtype, 1))
    w = float(serving_memory(d, replace(wl, batch=1, prompt_len=1), dm, math.inf, None,
                             tokens=0).items["weights"])
    if sp.draft is None:
        pc = count_params(stage)
        per_param = weight_bytes_per_param(wl.weight_dtype, wl.quant_group)
        w = w * (pc.total - pc.embedding - pc.lm_head) / pc.total
        w += sp.mtp_layers * 2 * target.d_model ** 2 / dm.tp * per_param
    return DraftMemory(w, per_token)


@dataclass(frozen=True)
class DraftPasses:
    """``DecodeStep.extra_s``: ``k`` draft passes of one token per sequence; ``prefill``: the
    drafter's pass over prompt tokens."""

    cost: IterationCost
    k: int

    def __call__(self, seqs: float, context: float) -> float:
        return sum(self.cost.cost(seqs, seqs, 0.0, 0.0, seqs, context + j)
                   for j in range(self.k))

    def prefill(self, tokens: float, context: float) -> float:
        return self.cost.cost(tokens, 1.0, tokens, context, 0.0, 0.0)


def draft_cost(sp: Speculation, target: ModelSpec, system: System, wl: Inference, m: Mapping,
               fw: FrameworkProfile, *, max_tokens: float, max_seqs: int,
               max_context: float) -> IterationCost:
    """The drafter's iteration tables, on the same devices and mapping as the target."""
    return IterationCost(sp.drafter(target), system, wl, sp.draft_mapping(m), fw,
                         max_tokens=max_tokens, max_seqs=max_seqs, max_context=max_context)


def decode_step(sp: Speculation, k: int, draft: IterationCost) -> DecodeStep:
    """The simulator's step: verify k + 1 tokens, advance E, draft k passes (and prefill)."""
    passes = DraftPasses(draft, k)
    return DecodeStep(k + 1, expected_tokens(sp.accept, k), passes, passes.prefill)


@dataclass(frozen=True)
class StepRow:
    """One draft length at a fixed batch and context (k = 0: plain decoding)."""

    k: int
    expected_tokens: float
    draft_s: float
    verify_s: float

    @property
    def step_s(self) -> float:
        return self.draft_s + self.verify_s

    @property
    def tpot_s(self) -> float:
        return self.step_s / self.expected_tokens

    def tokens_per_s(self, batch: float) -> float:
        return batch * self.expected_tokens / self.step_s

    def to_dict(self, batch: float) -> dict[str, float]:
        return {"k": self.k, "expected_tokens": self.expected_tokens, "draft_s": self.draft_s,
                "verify_s": self.verify_s, "step_s": self.step_s, "tpot_s": self.tpot_s,
                "tokens_per_s": self.tokens_per_s(batch)}


@dataclass(frozen=True)
class Choice:
    """The per-k table at ``batch`` sequences and mean ``context``, the chosen row (the given k,
    or the argmin of TPOT = argmax of throughput) and plain decoding's row."""

    batch: float
    context: float
    accept: float
    rows: tuple[StepRow, ...]
    chosen: StepRow
    plain: StepRow
    given: bool
    notes: tuple[str, ...] = field(default=())
    how: str = ""  # how k was chosen when not by the one-step table (e.g. by simulation)

    @property
    def speedup(self) -> float:
        return self.plain.tpot_s / self.chosen.tpot_s

    def to_dict(self) -> dict[str, Any]:
        c, b = self.chosen, self.batch
        return {"accept_rate": self.accept, "draft_len": c.k,
                "draft_len_source": "given" if self.given else self.how or
                f"chosen: argmin TPOT over k = 1..{len(self.rows)} at batch {b:,.0f}",
                "expected_tokens_per_step": c.expected_tokens,
                "draft_s_per_step": c.draft_s, "verify_s_per_step": c.verify_s,
                "step_s": c.step_s, "tpot_s": c.tpot_s, "tokens_per_s": c.tokens_per_s(b),
                "batch": b, "context": self.context,
                "plain": self.plain.to_dict(b), "speedup": self.speedup,
                "table": [r.to_dict(b) for r in self.rows]}


def step_row(target: IterationCost, draft: IterationCost, alpha: float, k: int, batch: float,
             context: float) -> StepRow:
    """One step's draft and verify seconds, priced as the simulator prices them (verify: the
    decode attention at the mean position of the k + 1 queries)."""
    b = float(batch)
    if k == 0:
        return StepRow(0, 1.0, 0.0, target.cost(b, b, 0.0, 0.0, b, context))
    v = b * (k + 1)
    verify = target.cost(v, v, 0.0, 0.0, b, context + k / 2.0)
    return StepRow(k, expected_tokens(alpha, k), DraftPasses(draft, k)(b, context), verify)


def choose(target: IterationCost, draft: IterationCost, alpha: float, batch: float,
           context: float, k: int | None = None) -> Choice:
    """The table over k = 1..MAX_DRAFT_LEN (and ``k`` if larger) and the chosen row."""
    ks = list(range(1, max(MAX_DRAFT_LEN, k or 0) + 1))
    rows = tuple(step_row(target, draft, alpha, j, batch, context) for j in ks)
    best = min(rows, key=lambda r: r.tpot_s) if k is None else rows[k - 1]
    plain = step_row(target, draft, alpha, 0, batch, context)
    notes = []
    if best.tpot_s > plain.tpot_s:
        notes.append(f"warning: speculative decoding (k={best.k}) is slower than plain decoding "
                     f"at {batch:,.0f} running sequences: the verify pass of {best.k + 1} "
                     "tokens per sequence is compute-bound there")
    return Choice(float(batch), float(context), alpha, rows, best, plain, k is not None,
                  tuple(notes))


def batch_step(est: ServeStep, sp: Speculation, spec: ModelSpec, system: System,
               wl: Inference, m: Mapping, fw: FrameworkProfile,
               imbalance: float = 1.0) -> ServeStep:
    """The fixed-batch scenario (``engine.serve.serve_step``'s ``est``) with speculation: TPOT =
    (k draft passes + one verify pass of k + 1 tokens per sequence) / E at the batch and the
    mean decode context (prompt + output / 2), TTFT plus the drafter's prefill of the batch's
    prompts, and the memory plus the drafter's weights and KV. Plain decoding's figures from
    the same tables are under ``speculative.plain``; decode MFU, bandwidth utilization and the
    ops energy describe plain decoding and are left out."""
    if m.pp > 1:
        raise InputError("speculative decoding is modelled for tensor-parallel replicas: use "
                         "--pp 1 with --draft/--mtp")
    if not est.feasible and est.violated_rule:
        return est
    b = wl.batch
    kmax = max(sp.draft_len or 0, MAX_DRAFT_LEN)
    longest = wl.prompt_len + wl.output_len + kmax + 1
    prompts = b * wl.prompt_len
    target = IterationCost(spec, system, wl, m, fw, max_tokens=max(b * (kmax + 1), prompts),
                           max_seqs=b * (kmax + 1), max_context=longest, imbalance=imbalance)
    draft = draft_cost(sp, spec, system, wl, m, fw, max_tokens=max(b, prompts), max_seqs=b,
                       max_context=longest)
    context = wl.prompt_len + wl.output_len / 2.0
    choice = choose(target, draft, sp.accept, b, context, sp.draft_len)
    c = choice.chosen
    ttft = float(est.ttft_s or 0.0) + DraftPasses(draft, c.k).prefill(
        prompts, (wl.prompt_len + 1) / 2.0)
    steps = max(wl.output_len - 1, 0)
    total = ttft + steps * c.tpot_s
    dmem = draft_memory(sp, spec, wl, m)
    items = dict(est.memory.items)
    items["draft_weights"] = dmem.weights_bytes
    items["draft_kv_cache"] = dmem.kv_bytes_per_token * b * (wl.prompt_len + wl.output_len)
    memory = MemoryBudget(items=items, capacity=est.memory.capacity, notes=est.memory.notes)
    feasible, reason = fits(memory)
    out_tokens = b * wl.output_len * m.replicas
    world = int(m.world)
    tdp = system.tdp_w
    info = {"method": sp.method, "drafter": sp.drafter(spec).id, **choice.to_dict(),
            "ttft_draft_prefill_s": ttft - float(est.ttft_s or 0.0),
            "plain_tpot_s": est.tpot_s, "plain_total_time_s": est.total_time_s,
            "plain_tokens_per_s": est.tokens_per_s,
            "draft_weights_bytes_per_device": dmem.weights_bytes,
            "draft_kv_bytes_per_token_per_device": dmem.kv_bytes_per_token}
    note = (f"speculative decoding: {sp.method}, alpha {sp.accept:g}, k={c.k} "
            f"({'given' if choice.given else 'chosen'}), E = {c.expected_tokens:.2f} tokens per "
            f"target step (Leviathan et al. 2023 eq. 1); TPOT = (draft {c.draft_s * 1e3:.2f} ms"
            f" + verify {c.verify_s * 1e3:.2f} ms) / E")
    return replace(
        est, feasible=feasible, reason=reason, memory=memory, ttft_s=ttft, tpot_s=c.tpot_s,
        total_time_s=total,
        tokens_per_s=out_tokens / total if wl.output_len else 0.0,
        tokens_per_s_per_device=out_tokens / total / world if wl.output_len else 0.0,
        decode_mfu=None, decode_bandwidth_utilization=None, energy_j_per_token_ops=None,
        energy_j_per_token_tdp=(tdp_j_per_token(tdp, m.devices_per_replica,
                                                max(b * wl.output_len, 1) / total)
                                if tdp else None),
        max_batch=None, max_context=None, speculative=info,
        assumptions=(note, *choice.notes, *est.assumptions))
