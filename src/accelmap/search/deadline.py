"""The smallest cluster that trains a model's tokens by a deadline: node counts doubled from
the first whose time floor (every device at its dense peak) can meet it, each planned
(``search.run.run_plan``), until one does or doubling stops helping."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from accelmap.errors import InputError
from accelmap.hardware.cluster import Cluster
from accelmap.models.flops import forward_flops_per_token, training_flops_per_token
from accelmap.models.schema import ModelSpec
from accelmap.search.run import PlanRequest, Progress, run_plan
from accelmap.units import Dimension, DType, format_quantity

# The largest node count the deadline search tries (powers of two from 1).
MAX_DEADLINE_NODES = 8192


@dataclass(frozen=True)
class DeadlineSearch:
    """The node counts tried (devices, time to train, best plan) and the first that met the
    deadline, or None."""

    model: str
    base: Cluster
    deadline_s: float
    tokens: float
    tried: tuple[dict[str, Any], ...]
    found: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "deadline_s": self.deadline_s, "tokens": self.tokens,
                "found": self.found, "tried": list(self.tried)}


def time_floor_s(spec: ModelSpec, devices: int, request: PlanRequest,
                 accelerator: Any) -> float | None:
    """The least time ``devices`` of ``accelerator`` can train ``request.tokens`` in: the
    model FLOPs (6N + attention per token, models/flops.py; a fine-tune's forward only, a
    bound for any adapter recipe) at the part's best dense 16- or 8-bit peak, every device
    busy all the time. No plan beats it, so a deadline it misses is refused before any
    search. None where the part publishes neither peak."""
    peaks = [p for p in (accelerator.peak(DType.BF16), accelerator.peak(DType.FP16),
                         accelerator.peak(DType.FP8)) if p]
    if not peaks:
        return None
    per_token = (forward_flops_per_token(spec, request.seq) if request.finetune is not None
                 else training_flops_per_token(spec, request.seq))
    return float(request.tokens * per_token / (devices * max(peaks)))


def first_possible_nodes(spec: ModelSpec, base: Cluster, request: PlanRequest) -> int:
    """The smallest power-of-two node count (up to ``MAX_DEADLINE_NODES``) whose time floor
    (``time_floor_s``) meets the deadline; an InputError, with the floor, where even the
    largest misses it."""
    seconds = request.deadline_s or 0.0
    nodes = 1
    while nodes <= MAX_DEADLINE_NODES:
        floor = time_floor_s(spec, nodes * base.devices_per_node, request, base.accelerator)
        if floor is None or floor <= seconds:
            return nodes
        nodes *= 2
    most = MAX_DEADLINE_NODES * base.devices_per_node
    floor = time_floor_s(spec, most, request, base.accelerator) or 0.0
    raise InputError(
        f"--deadline {format_quantity(seconds, Dimension.TIME)} cannot be met: "
        f"{request.tokens:.3g} tokens of {spec.id} take at least "
        f"{format_quantity(floor, Dimension.TIME)} on {most:,} {base.accelerator.id} "
        f"({MAX_DEADLINE_NODES} nodes, every one at its dense peak); give a later deadline "
        "or fewer --tokens")


def deadline_search(spec: ModelSpec, base: Cluster, request: PlanRequest,
                    progress: Progress | None = None) -> DeadlineSearch:
    """The smallest power-of-two count of ``base``'s nodes (1 to ``MAX_DEADLINE_NODES``) whose
    best plan trains ``request.tokens`` within ``request.deadline_s``; ``progress`` counts
    the node counts tried."""
    seconds = request.deadline_s
    if seconds is None or not (request.train and request.tokens):
        raise InputError("--deadline needs --train and --tokens (what must be trained by when)")
    nodes = first_possible_nodes(spec, base, request)
    tried: list[dict[str, Any]] = []
    found = None
    best_t = math.inf
    while nodes <= MAX_DEADLINE_NODES:
        if progress:
            progress(len(tried), MAX_DEADLINE_NODES.bit_length())
        cl = Cluster(f"{nodes} x {base.devices_per_node} x {base.accelerator.id}",
                     base.accelerator, base.devices_per_node, nodes, base.tiers, None,
                     base.origin)
        r = run_plan(spec, cl, request)
        best = r.plans[0] if r.plans else None
        t = getattr(best.figures, "time_to_train_s", None) if best else None
        tried.append({"devices": cl.devices, "time_to_train_s": t,
                      "plan": best.to_dict() if best else None})
        if t is not None and t <= seconds:
            found = tried[-1]
            break
        if t is not None and t >= best_t:
            break  # doubling no longer shortens training (the global batch caps dp): stop
        best_t = min(best_t, t if t is not None else math.inf)
        nodes *= 2
    return DeadlineSearch(spec.id, base, seconds, request.tokens, tuple(tried), found)
