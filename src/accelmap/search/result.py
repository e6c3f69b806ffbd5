"""What a search returns: ranked plans (``engine.plan.Plan``: the mapping, its figures and their
JSON form), counts of what was dropped and why, explanations."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

# the plan and its JSON vocabulary live one layer down (engine/plan.py), where the exporters read
# them too; imported here under their old names
from accelmap.engine.plan import MAX_MAPPING_COUNT as MAX_MAPPING_COUNT
from accelmap.engine.plan import OPTIONAL_SERVE_KEYS as OPTIONAL_SERVE_KEYS
from accelmap.engine.plan import OPTIONAL_TRAIN_KEYS as OPTIONAL_TRAIN_KEYS
from accelmap.engine.plan import SERVE_MAPPING_KEYS as SERVE_MAPPING_KEYS
from accelmap.engine.plan import TRAIN_MAPPING_KEYS as TRAIN_MAPPING_KEYS
from accelmap.engine.plan import Plan as Plan
from accelmap.engine.plan import PlanKind as PlanKind
from accelmap.engine.plan import ServingChoice as ServingChoice
from accelmap.engine.plan import json_kind as json_kind
from accelmap.engine.plan import plan_mapping_dict as plan_mapping_dict
from accelmap.engine.plan import read_plan_mapping as read_plan_mapping


class Objective(StrEnum):
    THROUGHPUT = "throughput"  # tokens per second, most first
    TIME = "time"  # time to train the requested tokens (training) == throughput on one cluster
    COST = "cost"  # dollars per token
    ENERGY = "energy"  # joules per token
    LATENCY = "latency"  # serving: time per output token, least first
    GOODPUT = "goodput"  # serving scenarios: requests/s that met every SLO, most first

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
    # serving scenarios: the load, the screening and simulation counts and times
    search: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        extra = {} if self.search is None else {"search": self.search}
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
            **extra,
        }

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
