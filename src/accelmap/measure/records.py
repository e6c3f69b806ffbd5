"""One measurement, as stored: what was measured, in which environment (device, catalog entry,
software, host), with which settings, and the statistics of its repetitions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from accelmap.measure.environment import Environment


class Kind(StrEnum):
    MATMUL = "matmul"  # achieved FLOP/s of one GEMM shape
    BANDWIDTH = "bandwidth"  # achieved bytes/s of one copy/read/write kernel and size
    COLLECTIVE = "collective"  # bus bandwidth of one collective, size and world size
    LOCAL_RUN = "local_run"  # a validate --local training step / prefill / decode timing
    OVERHEAD = "overhead"  # seconds one tiny eager op costs: dispatch + launch + gap
    ATTENTION = "attention"  # achieved FLOP/s of fused causal attention (SDPA), one pass/shape


@dataclass(frozen=True)
class Measurement:
    kind: Kind
    environment: Environment  # device, catalog entry, software, host, settings
    dtype: str | None
    label: str  # shape "MxNxK", "copy 1 GiB", "all_reduce 64 MiB x 2"
    value: float  # SI: FLOP/s, B/s (bus bandwidth for collectives), s for local runs
    unit: str  # "FLOP/s", "B/s", "s"
    median: float
    spread: float  # (max - min) / median of the repetitions
    repetitions: int
    settings: dict[str, Any] = field(default_factory=dict)  # sizes, warm-up, backend ...
    run_id: str = ""  # groups the measurements of one `accelmap measure` invocation
    created_at: str = ""  # ISO 8601, UTC

    @property
    def device(self) -> str:
        """'cuda:0 NVIDIA H100 80GB HBM3', 'cpu Intel Xeon ...' (the environment's label)."""
        return self.environment.label

    @property
    def accelerator_id(self) -> str | None:
        """The catalog id the measurement is compared with, when known."""
        return self.environment.accelerator_id

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "device": self.device,
                "accelerator_id": self.accelerator_id, "dtype": self.dtype, "label": self.label,
                "value": self.value, "unit": self.unit, "median": self.median,
                "spread": self.spread, "repetitions": self.repetitions,
                "settings": dict(self.settings), "environment": self.environment.to_dict(),
                "run_id": self.run_id, "created_at": self.created_at}
