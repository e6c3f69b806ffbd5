"""What an estimate returns: typed, frozen results with fixed fields plus the memory and time
trees. JSON comes from them (``to_dict``), so every face prints the same keys.

- ``TrainStep``: one optimizer step of a training job (PaLM's model-FLOPs MFU, Chowdhery et al.
  2022 App. B; HFU = those model FLOPs plus what recompute runs again, in the same
  full-attention convention, Korthikanti et al. 2022 sec. 6, so HFU >= MFU; see
  ``engine/profile.py`` ``_recompute_flops``).
- ``ServeStep``: a serving batch: TTFT (prefill of the whole prompt batch), TPOT (one decode
  step at the mean context), throughput = batch x output / (TTFT + (output - 1) x TPOT).

Both carry the memory tree of one device (``memory.budget.MemoryBudget``, slash keys such as
``optimizer/states``) and a time tree with one shape: phase -> operator or collective, seconds
(``forward/layers/attention/qkv``, ``backward/dgrad/...``, ``exposed_comm/tp``, ``bubble``;
serving prefixes ``prefill/`` and ``decode/``). An infeasible mapping is a result too:
``feasible=False`` with the broken rule and one sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from accelmap.cost.roofline import OpTime
from accelmap.engine.error_band import ErrorBand
from accelmap.engine.shapes import CALIBRATION_NOTE
from accelmap.mapping.plan import Mapping
from accelmap.memory.band import BAND_SOURCE, MemoryFit
from accelmap.memory.budget import MemoryBudget
from accelmap.units import Dimension, format_quantity
from accelmap.workload import Phase

_COMMON = ("model", "accelerator", "system", "mapping", "feasible", "reason", "violated_rule",
           "memory", "time", "ops", "assumptions", "error_band", "latency_error_band")


@dataclass(frozen=True)
class _Step:
    model: str
    accelerator: str
    system: str
    mapping: Mapping
    feasible: bool
    reason: str | None
    memory: MemoryBudget
    time: dict[str, float] = field(default_factory=dict)  # phase/op -> s (see module doc)
    ops: dict[str, tuple[OpTime, ...]] = field(default_factory=dict)  # op times per pass
    assumptions: tuple[str, ...] = ()
    violated_rule: str | None = None
    # expected error of the throughput / step time, from validation residuals of similar
    # published runs (engine/error_band.py)
    error_band: ErrorBand | None = None

    @property
    def calibration(self) -> str | None:
        """'datasheet-derived defaults ...' or 'measured profile ...' (the Device's word)."""
        return next((a.removeprefix(CALIBRATION_NOTE) for a in self.assumptions
                     if a.startswith(CALIBRATION_NOTE)), None)

    @property
    def metrics(self) -> dict[str, Any]:
        """The fixed figures of this result (None where not applicable), plus the time tree
        under ``time_breakdown_s``."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _COMMON}
        out = {k: v for k, v in out.items() if v is not None}
        if self.violated_rule:
            out["violated_rule"] = self.violated_rule
        if self.time:
            out["time_breakdown_s"] = self.time
        return out

    def rollup(self, depth: int = 1) -> dict[str, float]:
        """The time tree summed to its first ``depth`` key levels (``forward``, ``bubble``,
        ``exposed_comm/tp`` ...)."""
        out: dict[str, float] = {}
        for key, v in self.time.items():
            top = "/".join(key.split("/")[:depth])
            out[top] = out.get(top, 0.0) + v
        return out

    @property
    def memory_fit(self) -> MemoryFit:
        """fits / tight (within the memory model's error band of capacity) / over."""
        return self.memory.fit

    @property
    def times(self) -> dict[str, list[OpTime]]:
        return {k: list(v) for k, v in self.ops.items()}

    @property
    def phase(self) -> Phase:
        raise NotImplementedError

    def to_dict(self, ops: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "phase": self.phase.value,
            "model": self.model,
            "accelerator": self.accelerator,
            "system": self.system,
            "feasible": bool(self.feasible),
            "reason": self.reason,
            **{k: plain(v) for k, v in self.metrics.items()},
            "memory": {
                "total_bytes": float(self.memory.total),
                "capacity_bytes": self.memory.capacity,
                "margin_bytes": float(self.memory.margin),
                "fits": bool(self.memory.fits),
                "fit": self.memory_fit.value,
                "error_band": self.memory.band,
                "exact_bytes": float(np.max(self.memory.exact)),
                "band_allowance_bytes": float(np.max(self.memory.allowance)),
                "error_band_source": BAND_SOURCE,
                "breakdown": self.memory.tree(),
            },
            "calibration": self.calibration,
            "error_band": self.error_band.to_dict() if self.error_band else None,
            "assumptions": list(self.assumptions),
        }
        if ops:
            out["ops"] = {group: [op_row(t) for t in ts] for group, ts in self.ops.items()}
        return out


@dataclass(frozen=True)
class TrainStep(_Step):
    step_time_s: float | None = None
    tokens_per_s: float | None = None
    tokens_per_s_per_device: float | None = None
    mfu: float | None = None
    hfu: float | None = None
    tflops_per_device: float | None = None
    hardware_tflops_per_device: float | None = None
    model_flops_per_step: float | None = None
    hardware_flops_per_step: float | None = None
    micro_batches: int | None = None
    bubble_fraction: float | None = None
    communication_s: dict[str, float] | None = None
    axes: dict[str, str] | None = None
    overlap_policy: dict[str, bool] | None = None
    energy_j_per_token_tdp: float | None = None
    energy_j_per_token_ops: float | None = None
    time_to_train_s: float | None = None
    cost_to_train_usd: float | None = None

    @property
    def phase(self) -> Phase:
        return Phase.TRAIN


@dataclass(frozen=True)
class ServeStep(_Step):
    output_len: int = 0
    ttft_s: float | None = None
    tpot_s: float | None = None
    total_time_s: float | None = None
    tokens_per_s: float | None = None
    tokens_per_s_per_device: float | None = None
    prefill_tokens_per_s: float | None = None
    decode_mfu: float | None = None
    decode_bandwidth_utilization: float | None = None
    energy_j_per_token_tdp: float | None = None
    energy_j_per_token_ops: float | None = None
    communication_s: dict[str, dict[str, float]] | None = None
    axes: dict[str, str] | None = None
    max_batch: int | None = None
    max_context: int | None = None
    latency_error_band: ErrorBand | None = None  # of TTFT and TPOT
    # speculative decoding (serving/speculative.py batch_step): k, alpha, E, draft and verify
    # seconds per step, the per-k table and plain decoding's figures
    speculative: dict[str, Any] | None = None

    @property
    def phase(self) -> Phase:
        return Phase.DECODE if self.output_len else Phase.PREFILL

    def to_dict(self, ops: bool = True) -> dict[str, Any]:
        out = super().to_dict(ops)
        out["latency_error_band"] = (self.latency_error_band.to_dict()
                                     if self.latency_error_band else None)
        return out

    @property
    def metrics(self) -> dict[str, Any]:
        out = super().metrics
        out.pop("output_len", None)
        return out


Estimate = TrainStep | ServeStep


def plain(v: Any) -> Any:
    """JSON-ready: numpy scalars and arrays become Python numbers and lists."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v


def op_row(t: OpTime) -> dict[str, Any]:
    op = t.op
    return {
        "name": op.name,
        "stage": op.stage.value,
        "unit": op.unit.value,
        "dtype": op.dtype.value,
        "count": op.count,
        "flops": float(op.flops),
        "bytes": {k.value: float(v) for k, v in op.bytes.items()},
        "intensity_flop_per_byte": float(op.intensity),
        "compute_s": float(t.compute_s),
        "memory_s": float(t.memory_s),
        "overhead_s": float(t.overhead_s),
        "time_s": float(t.time_s),
        "total_s": float(t.total_s),
        "bound": t.bound,
        "achievable_flops": float(t.achievable_flops),
        "sparse": op.sparse,  # on 2:4-sparse weights (achievable_flops in dense FLOPs)
    }


def fits(memory: MemoryBudget) -> tuple[bool, str | None]:
    """Whether the budget fits every device, and if not one sentence saying by how much. Only
    a total over capacity by more than the memory model's error band, the caching allocator's
    reserve given back, does not fit; within the band it is "tight" (``memory.band``) and still
    feasible."""
    if not np.any(memory.over):
        return True, None
    need, have = float(np.max(memory.total)), memory.capacity
    exact = float(np.max(memory.exact))
    if exact > have:  # no error band makes room for bytes counted exactly
        what = " + ".join(k for k in ("weights", "gradients", "optimizer", "kv_cache")
                          if any(i.split("/")[0] == k for i in memory.items))
        return False, (f"{what.replace('_', ' ')} alone need {_bytes(exact)} per device (counted "
                       f"exactly, no error band) but the device has {_bytes(have)}; "
                       f"{_bytes(need)} in all (memory rule; {_memory_flags(memory)})")
    elastic = float(np.max(memory.elastic))
    live = (f" ({_bytes(need - elastic)} without the caching allocator's reserve, which it gives "
            "back under pressure)" if elastic > 0 else "")
    return False, (f"needs {_bytes(need)} per device{live} but the device has {_bytes(have)}, "
                   f"over by more than the memory model's {memory.band:.1%} error band "
                   f"(memory rule; {_memory_flags(memory)})")


# the largest memory item -> the flags that shrink it (training and serving)
_SHRINK = {
    "activations": "--recompute full, a smaller --micro-batch, more --tp/--cp, or "
                   "(training) --offload-activations N to host memory",
    "weights": "more --tp/--pp, --zero 3, or --weights int8/fp8 when serving",
    "gradients": "--zero 2/3 over more devices, or more --tp/--pp",
    "optimizer": "--zero 1-3 over more devices, or more --tp/--pp",
    "kv_cache": "a smaller --batch or context, --kv fp8, or more --tp",
    "zero3": "more --tp/--pp or a smaller --micro-batch",
}


def _memory_flags(memory: MemoryBudget) -> str:
    """The flags that shrink the budget's largest item (its top-level key)."""
    tops: dict[str, float] = {}
    for k, v in memory.items.items():
        tops[k.split("/")[0]] = tops.get(k.split("/")[0], 0.0) + float(np.max(v))
    big = max((k for k in tops if k in _SHRINK), key=lambda k: tops[k], default=None)
    return (f"the largest item, {big.replace('_', ' ')}, shrinks with {_SHRINK[big]}" if big
            else "more --tp/--pp or a smaller batch shrink it")


def _bytes(b: float) -> str:
    """Bytes as every memory table prints them: SI prefixes, three digits ('85.5 GB'; an edge
    NPU's 8 MiB is '8.39 MB', not '0.0 GB'), so a sentence and the table beside it agree."""
    return format_quantity(b, Dimension.BYTES)
