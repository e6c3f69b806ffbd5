"""Memory a device spends beyond the tensors: the CUDA context outside PyTorch, and what the
caching allocator reserves beyond the live tensors, fitted on measured peaks.

- ``CUDA_CONTEXT_BYTES`` (``cost.execution``): the CUDA context (driver state and loaded kernels)
  sits outside PyTorch's caching allocator, so the measured peaks below cannot see it. PyTorch has
  loaded kernels lazily since 1.13 (``CUDA_MODULE_LOADING=LAZY``); the pull request that made it the
  default measured a context of 287,047,680 bytes lazy against 666,632,192 eager
  (pytorch/pytorch#86509; "~300MB" with lazy loading, pytorch/pytorch#107667). cuBLAS workspaces go
  through the caching allocator and are inside the fit; NCCL's buffers are counted apart
  (``memory.training.COMM_BUFFER_BYTES``).
- ``ALLOCATOR_FRAGMENTATION``: what the caching allocator holds beyond the live tensors at the
  peak, reserved - tensors = f x dynamic memory (``DYNAMIC_ITEMS``: activations, logits, the
  full-recompute working layer, ZeRO-3's gathered parameters and unsharded gradients: what is
  allocated and freed within a step; the model states stay put and do not fragment). Fitted by
  least squares on the measured peaks of memory.csv whose row number is even (torchtitan reports
  ``reserved_bytes.all.peak``: torchtitan 9dec370 ``metrics.py`` L62, ``train.py`` L393); the
  odd rows are held out and give the error band (``memory.band``). Only the rows whose setup the
  engine models enter: full activation checkpointing (torchtitan's "selective" is its op-level
  policy, which the engine does not model). There is no fixed part: the fit rows all hold
  50-60 GiB of dynamic memory, so they cannot tell a fixed reserve from a proportional one, and a
  fixed reserve of the size they would give (~12 GiB) would charge a small job on a small
  device gigabytes it never reserves; fragmentation grows with the bytes allocated and freed.
  What the fraction absorbs besides fragmentation: transients the tree does not itemise
  (FSDP's all-gather and reduce-scatter buffers in flight, the bf16 cast of the loss gradient,
  compiler temporaries). Refit with ``python benchmarks/memory_error.py --fit``;
  ``tests/memory/test_published.py`` checks that the constant is that fit.
"""

from __future__ import annotations

# the context is the GPU class's runtime memory: defined with the execution model one layer
# below (cost.execution); the memory tree (budget.py, training.py) reads it from here
from accelmap.cost.execution import CUDA_CONTEXT_BYTES as CUDA_CONTEXT_BYTES
from accelmap.units import Num

# Fitted on memory.csv Y0092, Y0094, Y0100, Y0102, Y0104, Y0106 (benchmarks/memory_error.py
# --fit)
ALLOCATOR_FRAGMENTATION = 0.2297

# Items of the memory tree that the caching allocator does not hold.
NON_PYTORCH_ITEMS = ("runtime/context", "runtime/comm_buffers")
# Items allocated and freed within a step (slash-key prefixes): what fragments.
DYNAMIC_ITEMS = ("activations/", "zero3/")


def allocator_bytes(dynamic: Num) -> Num:
    """Reserved but unallocated bytes of the caching allocator at the peak."""
    return ALLOCATOR_FRAGMENTATION * dynamic
