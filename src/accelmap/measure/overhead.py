"""Per-operation overhead of eager execution: what one tiny op costs end to end.

The roofline charges each kernel a fixed cost on top of its compute and memory time (the
framework profile's ``kernel_overhead_s``; 5 us for eager GPU launches by default). On the
user's own device that cost is measured instead: a chain of dependent elementwise ops on a
16-element tensor, so that compute and memory are negligible and what is timed is dispatch,
launch and the gap between kernels (median of repetitions, device synchronised). Only PyTorch
is meaningful here (its dispatcher is what eager training and decoding pay).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from accelmap.errors import InputError
from accelmap.measure.records import Kind, Measurement

OPS_PER_REP = 2000  # long enough that timer resolution and sync cost vanish
TINY_ELEMENTS = 16


@dataclass(frozen=True)
class OverheadResult:
    device: str
    seconds_per_op: float
    spread: float
    measurements: tuple[Measurement, ...]

    def to_dict(self) -> dict[str, object]:
        return {"device": self.device, "seconds_per_op": self.seconds_per_op,
                "spread": self.spread}


def measure_overhead(device: str, accelerator_id: str | None, reps: int = 7,
                     environment: dict[str, str] | None = None) -> OverheadResult:
    try:
        import torch
    except ImportError:
        raise InputError("measuring per-op overhead needs PyTorch: pip install "
                         "'accelmap[measure]'") from None
    dev = torch.device(device)
    mod = getattr(torch, dev.type, None)

    def sync() -> None:
        fn = getattr(mod, "synchronize", None) if dev.type != "cpu" else None
        if fn is not None:
            fn()

    x = torch.zeros(TINY_ELEMENTS, device=dev)
    for _ in range(200):  # warm-up: allocator, dispatcher caches, lazy module loading
        x = x + 1.0
    sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(OPS_PER_REP):
            x = x + 1.0  # each op depends on the last: no batching across them
        sync()
        times.append((time.perf_counter() - start) / OPS_PER_REP)
    med = statistics.median(times)
    spread = (max(times) - min(times)) / med
    label = f"{device}"
    m = Measurement(kind=Kind.OVERHEAD, device=label, accelerator_id=accelerator_id, dtype=None,
                    label=f"dependent add on {TINY_ELEMENTS} elements x {OPS_PER_REP}",
                    value=med, unit="s", median=med, spread=spread, repetitions=reps,
                    settings={"ops_per_rep": OPS_PER_REP, "elements": TINY_ELEMENTS},
                    environment=environment or {"torch": torch.__version__},
                    created_at=datetime.now(UTC).isoformat(timespec="seconds"))
    return OverheadResult(label, med, spread, (m,))
