"""Per-operation overhead of eager execution: what one tiny op costs end to end.

The roofline charges each kernel a fixed cost on top of its compute and memory time (the
framework profile's ``kernel_overhead_s``; 5 us for eager GPU launches by default). On the
user's own device that cost is measured instead: a chain of dependent elementwise ops on a
16-element tensor, so that compute and memory are negligible and what is timed is dispatch,
launch and the gap between kernels (``timing.time_kernel``: median of repetitions, device
synchronised through the backend). Only PyTorch is meaningful here (its dispatcher is what
eager training and decoding pay), so the backend is a :class:`TorchBackend`.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelmap.errors import InputError
from accelmap.measure.backends import Backend
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.timing import time_kernel
from accelmap.measure.torch_backend import TorchBackend

OPS_PER_REP = 2000  # long enough that timer resolution and sync cost vanish
# A 64-byte fp32 tensor: one cache line, so each op's compute and traffic are ~ns and what is
# left is the per-op software and launch cost.
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


def measure_overhead(be: Backend, accelerator_id: str | None, reps: int = 7) -> OverheadResult:
    """Seconds one eager PyTorch op costs on ``be``'s device (a torch backend)."""
    if not isinstance(be, TorchBackend):
        raise InputError("per-op overhead is PyTorch's dispatch and launch cost: measure it "
                         "with the torch backend (--backend torch)")
    torch = be.torch
    state = [torch.zeros(TINY_ELEMENTS, device=be.dev)]

    def chain() -> None:
        x = state[0]
        for _ in range(OPS_PER_REP):
            x = x + 1.0  # each op depends on the last: no batching across them
        state[0] = x

    # one warm-up chain (2000 ops) brings up the allocator, dispatcher caches and lazy modules
    t = time_kernel(chain, be.synchronize, warmup=1, reps=reps)
    per_op = t.median / OPS_PER_REP
    env = be.environment(accelerator_id)
    m = Measurement(kind=Kind.OVERHEAD, environment=env, dtype=None,
                    label=f"dependent add on {TINY_ELEMENTS} elements x {OPS_PER_REP}",
                    value=per_op, unit="s", median=per_op, spread=t.spread, repetitions=reps,
                    settings={"ops_per_rep": OPS_PER_REP, "elements": TINY_ELEMENTS})
    return OverheadResult(env.label, per_op, t.spread, (m,))
