"""What 2:4 sparsity bought, in every sparse estimate's assumptions: the GEMM speedup used and
its source, the weight compression, and the figures against the same job with dense weights.

``engine.estimate`` checks the part first (one InputError line when it has no 2:4 mode for the
GEMMs' dtype) and runs the dense twin of the job for the comparison.
"""

from __future__ import annotations

from dataclasses import replace

from accelmap.cost.sparsity import check_supported, sparse_speedup
from accelmap.engine.result import Estimate, ServeStep, TrainStep
from accelmap.errors import InputError
from accelmap.hardware.schema import Accelerator
from accelmap.ops.sparsity import compressed_bytes_per_param, compressed_fraction
from accelmap.units import DType
from accelmap.workload import Inference, Sparsity, Training


def gemm_dtype(wl: Training | Inference) -> DType:
    """The dtype the weight GEMMs run in (the sparse tensor cores' input)."""
    return wl.dtype if isinstance(wl, Training) else wl.compute_dtype


def check(acc: Accelerator, wl: Training | Inference) -> None:
    """InputError (exit 2) when the job's sparsity cannot run on ``acc``."""
    if wl.sparsity is Sparsity.NONE:
        return
    check_supported(acc, gemm_dtype(wl))
    if isinstance(wl, Training) and wl.dtype.bytes < 2:
        raise InputError(f"2:4 sparse training is modelled for 16-bit GEMMs (torchao's "
                         f"SemiSparseLinear runs fp16/bf16), not {wl.dtype.value}: train in "
                         "bf16 or drop --sparsity")


def _ratio(dense: float | None, sparse: float | None) -> str:
    if not dense or not sparse:
        return "n/a"
    return f"{dense / sparse:.2f}x"


def _stored(wl: Training | Inference) -> DType:
    return wl.weight_dtype if isinstance(wl, Inference) else wl.storage_dtype


def usage(acc: Accelerator, wl: Training | Inference) -> str:
    """The speedup used, its source and the weight compression (one assumption line)."""
    dt = gemm_dtype(wl)
    s = sparse_speedup(acc, dt)
    stored = _stored(wl)
    return (f"2:4 sparsity: the layers' weight GEMMs run {s.value:.2f}x faster when "
            f"compute-bound ({dt.value}: {s.source}); their {stored.value} weights weigh "
            f"{compressed_fraction(stored.bytes * 8):.4g} of dense (half the values + a 2-bit "
            "index per kept value, ops/sparsity.py); attention, embedding, LM head and router "
            "stay dense")


def notes(acc: Accelerator, wl: Training | Inference, est: Estimate, dense: Estimate
          ) -> tuple[str, ...]:
    """The assumption lines of a 2:4-sparse estimate, ``dense`` the same job without it."""
    stored = _stored(wl)
    out = [usage(acc, wl)]
    w_sparse = est.memory.items.get("weights", 0.0)
    w_dense = dense.memory.items.get("weights", 0.0)
    if isinstance(est, ServeStep) and isinstance(dense, ServeStep):
        out.append(f"2:4 sparsity bought: TTFT {_ratio(dense.ttft_s, est.ttft_s)}, TPOT "
                   f"{_ratio(dense.tpot_s, est.tpot_s)} faster, throughput "
                   f"{_ratio(est.tokens_per_s, dense.tokens_per_s)}, weights "
                   f"{(w_dense - w_sparse) / 1e9:.2f} GB smaller per device than dense")
    elif isinstance(est, TrainStep) and isinstance(dense, TrainStep):
        acts = (sum(v for k, v in est.memory.items.items() if k.startswith("activations"))
                - sum(v for k, v in dense.memory.items.items() if k.startswith("activations")))
        out.append(f"2:4 sparsity bought: step {_ratio(dense.step_time_s, est.step_time_s)} "
                   f"faster than dense; forward and dgrad GEMMs sparse, wgrad dense (a dense "
                   f"gradient, torchao SemiSparseLinear); weights, gradients and optimizer "
                   f"states stay dense, and each forward keeps W and W^T compressed "
                   f"({compressed_bytes_per_param(stored):.3g} B/param each) for its "
                   f"backward: {acts / 1e9:+.2f} GB activations; MFU counts the dense "
                   "model's FLOPs")
    return tuple(out)


def with_notes(est: Estimate, extra: tuple[str, ...]) -> Estimate:
    return replace(est, assumptions=(*est.assumptions, *extra))
