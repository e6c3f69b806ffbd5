"""Speculative decoding (MTP / EAGLE-style heads or a draft model) on disaggregated pools.

Both pools load the drafter: NVIDIA Dynamo's guide for SGLang ("Speculative Decoding with
SGLang", docs.nvidia.com/dynamo, "Disaggregated Serving with KV-Aware Routing": "Pass the same
speculative decoding flags to the prefill and decode workers"). So, per pool, with the same
pieces colocated serving uses (``serving/speculative.py``, ``scenario.instance``):

- memory: the drafter's weights and its KV per token on every device of both pools
  (``draft_memory``), taken from each pool's KV cache;
- prefill pool: each prompt's pass also runs the drafter over the prompt (``DecodeStep``'s
  ``prefill_s``, the drafter's prefill priced by its own iteration tables), so the first draft
  can start on the decode side; its one output token is the target's;
- decode pool: every decode step verifies k + 1 tokens per sequence and advances E of them,
  after k draft passes (``decode_step``), k the run's draft length (given: a disaggregated run
  is not searched over k).

Not modelled: the drafter's own KV of the prompt crossing with the target's (one or a few
layers against the model's tens; the transfer counts the target's layers only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelmap.cost.framework import FrameworkProfile
from accelmap.engine.system import System
from accelmap.errors import InputError
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.serving.requests import Requests
from accelmap.serving.scenario import Instance, Unfit, instance
from accelmap.serving.scheduler import SchedulerConfig
from accelmap.serving.simulator import DecodeStep
from accelmap.serving.speculative import (
    DraftPasses,
    Speculation,
    decode_step,
    draft_cost,
    draft_memory,
    expected_tokens,
)
from accelmap.workload import Inference


@dataclass(frozen=True)
class SpeculativePool:
    """One pool's instance with the drafter's memory, and the step its iterations run."""

    instance: Instance | Unfit
    step: DecodeStep


def draft_length(sp: Speculation) -> int:
    """The draft length a disaggregated run uses: the one given."""
    if sp.draft_len is None:
        raise InputError("speculative decoding on disaggregated pools takes a given draft "
                         "length: add --draft-len K (k is searched on colocated runs only)")
    return sp.draft_len


def speculative_pool(spec: ModelSpec, system: System, wl: Inference, m: Mapping,
                     fw: FrameworkProfile, sched: SchedulerConfig, reqs: Requests,
                     sp: Speculation, decode: bool) -> SpeculativePool:
    """The prefill (``decode`` False) or decode pool's instance of ``m`` with the drafter."""
    k = draft_length(sp)
    verify = k + 1 if decode else 1
    bad = check_serving(sp.drafter(spec), system.cluster, sp.draft_mapping(m))
    if bad:
        return SpeculativePool(Unfit(f"draft {sp.drafter(spec).id}: {bad[0].sentence} "
                                     f"({bad[0].rule} rule)"), DecodeStep())
    inst = instance(spec, system, wl, m, fw, sched, reqs, DecodeStep(), 1.0,
                    draft_memory(sp, spec, wl, m), verify)
    if isinstance(inst, Unfit):
        return SpeculativePool(inst, DecodeStep())
    dcost = draft_cost(sp, spec, system, wl, m, fw, max_tokens=inst.max_tokens,
                       max_seqs=sched.max_seqs, max_context=inst.longest + verify)
    if decode:
        return SpeculativePool(inst, decode_step(sp, k, dcost))
    return SpeculativePool(inst, DecodeStep(1, 1.0, None, DraftPasses(dcost, k).prefill))


def figures(sp: Speculation, spec: ModelSpec) -> tuple[dict[str, Any], str]:
    """The run's ``speculative`` figures and its note."""
    k = draft_length(sp)
    e = float(expected_tokens(sp.accept, k))
    return ({"method": sp.method, "drafter": sp.drafter(spec).id, "accept_rate": sp.accept,
             "draft_len": k, "expected_tokens_per_step": e},
            f"speculative decoding on both pools: {sp.method}, alpha {sp.accept:g}, k={k} "
            f"(given), E = {e:.2f} tokens per decode step (Leviathan et al. 2023 eq. 1); the "
            "prefill pool also runs the drafter over each prompt")


__all__ = ["SpeculativePool", "draft_length", "figures", "speculative_pool"]
