"""One row's outcome: what was measured, what accelmap predicted, or why it could not.

Errors are signed as optimism: positive means accelmap predicts *faster* than measured (a higher
rate, or a lower latency); see :attr:`Prediction.signed_pct_error`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any


class MetricKind(StrEnum):
    DECODE = "decode"  # per-user decode rate at batch 1 (gpt-fast)
    TTFT = "ttft"  # first-token latency (prefill)
    THROUGHPUT = "throughput"  # output tokens/s per device, static batch
    MATMUL = "matmul"  # maximum achievable matmul TFLOP/s
    BANDWIDTH = "bandwidth"  # achievable HBM bandwidth
    TRAINING = "training"  # achieved TFLOP/s (or tokens/s) per device
    OFFLINE = "offline throughput"  # serving, all requests queued, the server picks the batch
    SERVER = "server throughput"  # serving at the highest Poisson rate meeting latency SLOs
    CONCURRENCY = "concurrency throughput"  # serving N closed-loop clients (per device, per user)
    LATENCY = "latency percentiles"  # TTFT/TPOT percentiles of a serving scenario run


class Status(StrEnum):
    OK = "ok"
    SKIPPED = "skipped"
    CALIBRATION = "calibration"


@dataclass(frozen=True)
class Prediction:
    row_id: str
    file: str
    source: str
    model: str
    accelerator: str
    metric: str = ""
    unit: str = ""
    kind: MetricKind | None = None
    measured: float | None = None
    predicted: float | None = None
    status: Status = Status.SKIPPED
    skipped_reason: str | None = None
    higher_is_better: bool = True
    fits: bool | None = None  # None: no memory check for this kind of row
    model_id: str | None = None
    accelerator_id: str | None = None
    framework: str | None = None
    notes: tuple[str, ...] = field(default=())
    # share of the predicted step per term (compute/forward, bubble, exposed_comm/tp, ...)
    breakdown: dict[str, float] = field(default_factory=dict, hash=False)

    @property
    def abs_pct_error(self) -> float | None:
        if self.predicted is None or not self.measured:
            return None
        return abs(self.predicted - self.measured) / self.measured * 100.0

    @property
    def signed_pct_error(self) -> float | None:
        """(predicted - measured) / measured in %, sign flipped for latencies, so that a
        positive value always means "accelmap is optimistic" (predicts faster)."""
        if self.predicted is None or not self.measured:
            return None
        raw = (self.predicted - self.measured) / self.measured * 100.0
        return raw if self.higher_is_better else -raw

    def to_dict(self) -> dict[str, Any]:
        return {
            "row_id": self.row_id, "file": self.file, "source": self.source,
            "kind": self.kind.value if self.kind else None, "metric": self.metric,
            "unit": self.unit, "model": self.model, "accelerator": self.accelerator,
            "measured": self.measured, "predicted": self.predicted,
            "abs_pct_error": self.abs_pct_error, "signed_pct_error": self.signed_pct_error,
            "status": self.status.value, "skipped_reason": self.skipped_reason,
            "fits": self.fits, "model_id": self.model_id,
            "accelerator_id": self.accelerator_id, "framework": self.framework,
            "notes": list(self.notes), "breakdown": dict(self.breakdown),
        }


def skip(base: Prediction, reasons: list[str], notes: list[str]) -> Prediction:
    return replace(base, status=Status.SKIPPED, skipped_reason="; ".join(reasons),
                   notes=tuple(notes))


def done(base: Prediction, predicted: float, calibrated: frozenset[str], notes: list[str],
          **extra: Any) -> Prediction:
    status = Status.CALIBRATION if base.row_id in calibrated else Status.OK
    if status is Status.CALIBRATION:
        notes = [*notes, "calibration row: a general parameter was fitted to it; not scored"]
    return replace(base, predicted=float(predicted), status=status, notes=tuple(notes), **extra)
