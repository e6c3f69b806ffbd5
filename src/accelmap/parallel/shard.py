"""The slice of the model one device holds under tensor and expert parallelism.

Megatron-style tensor parallelism (Shoeybi et al. 2019, sec. 3): QKV and the MLP's first matrix
split by columns, the output projection and the MLP's second matrix by rows, so each rank owns
heads/tp heads and ffn/tp of the MLP; the LM head and embedding are vocabulary-parallel
(vocab/tp rows per rank). GQA KV heads are split while kv >= tp and replicated (one per rank)
beyond. MLA's latent down-projections are replicated, its up-projections split by heads.
Expert parallelism gives each rank E/ep whole experts (expert tensor parallelism = tp, the
Megatron-Core default); every rank still routes its tokens over all E experts, so the load per
local expert is ep * T * k / E (balanced), which the sliced spec reproduces by keeping top_k and
dividing the expert count.
"""

from __future__ import annotations

import math

from accelmap.models.schema import ModelSpec


def shard_spec(spec: ModelSpec, tp: int, ep: int = 1, expert_tp: int | None = None
               ) -> ModelSpec:
    """A ModelSpec whose operators are one rank's share (not a real model: not re-validated).

    ``expert_tp`` is the tensor-parallel degree inside each expert: tp in Megatron-Core training
    (expert parallelism carved out of data parallelism), tp / ep in serving, where vLLM's expert
    parallelism splits the tensor-parallel group itself (``--enable-expert-parallel``)."""
    etp = tp if expert_tp is None else expert_tp
    update: dict[str, object] = {
        "n_heads": spec.n_heads // tp,
        "head_dim": spec.head_size,
        "ffn_dim": max(spec.ffn_dim // tp, 1),
        "vocab_size": math.ceil(spec.vocab_size / tp),
    }
    if spec.mla is None:
        update["n_kv_heads"] = max(spec.kv_heads // tp, 1)
    if spec.moe is not None:
        moe = spec.moe
        update["moe"] = moe.model_copy(update={
            "num_experts": max(moe.num_experts // ep, 1),
            "expert_ffn_dim": max(moe.expert_ffn_dim // etp, 1),
            "shared_expert_ffn_dim": max(moe.shared_ffn // tp, 1),
        })
    return spec.model_copy(update=update)
