"""The operators of one whole training step on one device (no sharding): forward, recompute,
backward and optimizer, in the precision the workload trains in. The engine composes the same
pieces per layer and per pipeline stage (``engine.train.layer_profile``); this list is the
reference the operator tests check against the papers' formulas.
"""

from __future__ import annotations

from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import Op, Precision, Shape, causal_shape_context, forward_ops
from accelmap.ops.recipes import training_formats
from accelmap.ops.sparsity import sparse_training_ops
from accelmap.ops.training import backward_ops, optimizer_ops, recompute_ops
from accelmap.workload import Recompute, Sparsity, Training


def training_precision(wl: Training) -> Precision:
    """FP8 training (Transformer Engine, torchao float8) runs the GEMMs in FP8 and keeps weights,
    activations, attention and vector ops in BF16 (NVIDIA Transformer Engine docs, "Using FP8"):
    everything but the GEMMs in the workload's storage dtype."""
    store = wl.storage_dtype
    return Precision(act=store, weight=store, compute=wl.dtype, kv=store, attention=store)


def training_ops(spec: ModelSpec, wl: Training, imbalance: float = 1.0) -> list[Op]:
    """Every operator of one step over ``wl.batch`` sequences in one micro-batch."""
    s = wl.seq_len
    shape = Shape(
        tokens=wl.batch * s,
        **causal_shape_context(spec, float(s), wl.flash_attention),
        kv_tokens=wl.batch * s,
        sequences=wl.batch,
        logits_tokens=wl.batch * s,
        dropout=wl.dropout,
    )
    p = training_precision(wl)
    fwd = forward_ops(spec, shape, p, flash=wl.flash_attention, imbalance=imbalance,
                      training=True)
    # the workload's wish stands in for a mapping's policy here (no mapping: one device)
    bwd = recompute_ops(fwd, wl.recompute or Recompute.NONE, wl.flash_attention) \
        + backward_ops(fwd, wl.grad_dtype)
    fwd, bwd = training_formats(fwd, bwd, wl)  # ops/recipes.py
    if wl.sparsity is not Sparsity.NONE:  # forward and dgrad on 2:4 weights
        fwd, bwd = sparse_training_ops(fwd, bwd, p)
    return fwd + bwd + optimizer_ops(float(count_params(spec).total), wl)
