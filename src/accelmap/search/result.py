"""What a search returns: ranked plans, counts of what was dropped and why, explanations."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np


class Objective(StrEnum):
    THROUGHPUT = "throughput"  # tokens per second, most first
    TIME = "time"  # time to train the requested tokens (training) == throughput on one cluster
    COST = "cost"  # dollars per token
    ENERGY = "energy"  # joules per token
    LATENCY = "latency"  # serving: time per output token, least first


@dataclass(frozen=True)
class Plan:
    mapping: dict[str, Any]
    cluster: str
    accelerator: str
    devices: int
    feasible: bool
    metrics: dict[str, Any]
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"mapping": self.mapping, "cluster": self.cluster,
                "accelerator": self.accelerator, "devices": self.devices,
                "feasible": self.feasible, "reason": self.reason,
                **{k: _plain(v) for k, v in self.metrics.items()}}


@dataclass(frozen=True)
class PlanResult:
    objective: Objective
    plans: list[Plan]
    evaluated: int
    feasible: int
    seconds: float
    rejected_by_rule: dict[str, int]
    explanation: list[str] = field(default_factory=list)
    pareto: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    calibration: str | None = None  # Device.calibration: datasheet defaults or measured profile

    def to_dict(self) -> dict[str, Any]:
        return {
            "objective": self.objective.value,
            "plans": [p.to_dict() for p in self.plans],
            "evaluated": self.evaluated,
            "feasible": self.feasible,
            "seconds": self.seconds,
            "rejected_by_rule": self.rejected_by_rule,
            "explanation": self.explanation,
            "pareto": self.pareto,
            "interrupted": self.interrupted,
            "notes": self.notes,
            "calibration": self.calibration,
        }


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def pareto_front(points: list[dict[str, Any]], maximize: str, minimize: str
                 ) -> list[dict[str, Any]]:
    """Points not dominated on (max ``maximize``, min ``minimize``), sorted by ``minimize``."""
    pts = sorted((p for p in points if p.get(maximize) is not None and p.get(minimize)
                  is not None), key=lambda p: (p[minimize], -p[maximize]))
    front: list[dict[str, Any]] = []
    best = -np.inf
    for p in pts:
        if p[maximize] > best:
            front.append(p)
            best = p[maximize]
    return front
