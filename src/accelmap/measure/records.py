"""One measurement, as stored: what was measured, on which device and software, with which
settings, and the statistics of its repetitions."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    MATMUL = "matmul"  # achieved FLOP/s of one GEMM shape
    BANDWIDTH = "bandwidth"  # achieved bytes/s of one copy/read/write kernel and size
    COLLECTIVE = "collective"  # bus bandwidth of one collective, size and world size
    LOCAL_RUN = "local_run"  # a validate --local training step / prefill / decode timing
    OVERHEAD = "overhead"  # seconds one tiny eager op costs: dispatch + launch + gap


@dataclass(frozen=True)
class Measurement:
    kind: Kind
    device: str  # "cuda:0 NVIDIA H100 80GB HBM3", "cpu Intel Xeon ..."
    accelerator_id: str | None  # catalog id when known
    dtype: str | None
    label: str  # shape "MxNxK", "copy 1 GiB", "all_reduce 64 MiB x 2"
    value: float  # SI: FLOP/s, B/s (bus bandwidth for collectives), s for local runs
    unit: str  # "FLOP/s", "B/s", "s"
    median: float
    spread: float  # (max - min) / median of the repetitions
    repetitions: int
    settings: dict[str, Any] = field(default_factory=dict)  # sizes, warm-up, backend ...
    environment: dict[str, str] = field(default_factory=dict)  # driver, torch, numpy, host
    run_id: str = ""  # groups the measurements of one `accelmap measure` invocation
    created_at: str = ""  # ISO 8601, UTC

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"] = self.kind.value
        return d
