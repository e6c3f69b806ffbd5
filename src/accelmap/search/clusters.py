"""The best plan on each of a few clusters (``accelmap plan --hw A,B``, ``--hw any``), ranked by
the objective compared like with like, and the throughput-vs-cost front. (``search.compare``
is the fast comparison of every catalog part by fixed sizing rules.)"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from accelmap.hardware.cluster import Cluster
from accelmap.hardware.listing import unpublished
from accelmap.models.schema import ModelSpec
from accelmap.search.result import Objective, Plan, pareto_front
from accelmap.search.run import PlanRequest, Progress, run_plan

# What each objective ranks accelerators by, compared like with like (the same job on each;
# throughput and goodput per device, so clusters of different sizes compare fairly): the
# best plan's figure (``engine.plan.PlanFigures``), whether more is better, and the words the
# output says.
RANK_BASIS: dict[Objective, tuple[str, bool, str]] = {
    Objective.THROUGHPUT: ("tokens_per_s", True, "tokens/s per device, most first"),
    Objective.TIME: ("time_to_train_s", False, "time to train --tokens, least first"),
    Objective.COST: ("usd_per_million_tokens", False, "$ per million tokens, least first"),
    Objective.ENERGY: ("energy_j_per_token_tdp", False,
                       "J per token at TDP (the upper bound), least first"),
    Objective.LATENCY: ("tpot_s", False, "time per output token, least first"),
    Objective.GOODPUT: ("goodput_requests_per_s", True,
                        "goodput (requests/s meeting every SLO) per device, most first"),
}
PER_DEVICE = (Objective.THROUGHPUT, Objective.GOODPUT)


@dataclass(frozen=True)
class ClusterRow:
    """One cluster of ``compare_clusters``: its best plan (None: nothing fits) and, where the
    catalog lacks the price or TDP behind a missing figure, what is not published and why
    (``hardware.listing.unpublished``). Figures are the plan's, in its vocabulary."""

    accelerator: str
    cluster: str
    devices: int
    plan: Plan | None
    not_published: dict[str, str] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.plan is not None

    def figure(self, key: str) -> Any:
        """The best plan's figure ``key`` (None without a plan or that figure)."""
        return getattr(self.plan.figures, key, None) if self.plan is not None else None

    def rank_value(self, objective: Objective) -> float | None:
        """The value this row is ranked by under ``objective`` (None: no plan, or a part
        without a price or TDP); a simulated TPOT ranks by its p99, the per-device objectives
        divide by the devices."""
        key = RANK_BASIS[objective][0]
        value = self.figure(key)
        if isinstance(value, dict):  # a simulated distribution: its p99
            value = self.figure(f"{key.removesuffix('_s')}_p99_s")
        if value is None or not math.isfinite(float(value)):
            return None
        return float(value) / self.devices if objective in PER_DEVICE else float(value)

    def to_dict(self) -> dict[str, Any]:
        return {"accelerator": self.accelerator, "cluster": self.cluster,
                "devices": self.devices, "feasible": self.feasible,
                "plan": self.plan.to_dict() if self.plan is not None else None,
                **{k: self.figure(k) for k in ROW_FIGURES},
                "not_published": self.not_published}


# the plan figures a comparison row repeats beside its plan
ROW_FIGURES = ("tokens_per_s_per_device", "usd_per_million_tokens", "energy_j_per_token_tdp",
               "time_to_train_s")


def rank_rows(rows: list[ClusterRow], objective: Objective) -> list[ClusterRow]:
    """Rows by the objective (best first); rows without its value after them, fastest per
    device first; rows that do not fit last."""
    more = RANK_BASIS[objective][1]

    def key(r: ClusterRow) -> tuple[int, float]:
        v = r.rank_value(objective)
        if v is not None:
            return (0, -v if more else v)
        return (1 if r.feasible else 2, -(r.figure("tokens_per_s_per_device") or 0.0))

    return sorted(rows, key=key)


@dataclass(frozen=True)
class ClusterComparison:
    """The best plan per cluster, ranked by the objective (``RANK_BASIS``, said in
    ``ranked_by``), and the throughput-vs-cost Pareto front of the feasible ones."""

    rows: tuple[ClusterRow, ...]
    objective: Objective = Objective.THROUGHPUT

    @property
    def ranked_by(self) -> str:
        return f"ranked by {self.objective.value}: {RANK_BASIS[self.objective][2]}"

    @property
    def pareto(self) -> list[dict[str, Any]]:
        return pareto_front([{"accelerator": r.accelerator,
                              "tokens_per_s_per_device": r.figure("tokens_per_s_per_device"),
                              "usd_per_million_tokens": r.figure("usd_per_million_tokens")}
                             for r in self.rows if r.feasible],
                            maximize="tokens_per_s_per_device",
                            minimize="usd_per_million_tokens")

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective.value, "ranked_by": self.ranked_by,
                "hardware": [r.to_dict() for r in self.rows],
                "pareto": {"throughput_vs_cost": self.pareto}}


def compare_clusters(spec: ModelSpec, clusters: list[Cluster], request: PlanRequest,
                     progress: Progress | None = None, runner: Any = None
                     ) -> ClusterComparison:
    """Plan on each cluster; one row each with its best plan under ``request.objective`` (or
    no plan), the rows ranked by that objective (``rank_rows``); ``progress``
    counts clusters. ``runner`` (``api.runner``, --ray): one task per cluster or a few, the
    same rows. (``compare_accelerators`` is the fast, same-precision comparison over every
    catalog part.)"""
    if runner is not None and runner.distributed:
        rows = runner.map(_cluster_row, clusters, (spec, request), "clusters")
    else:
        rows = []
        for i, cl in enumerate(clusters):
            if progress:
                progress(i, len(clusters))
            # the caller's progress reaches each search, so a time cap stops inside one as well
            inner = (lambda _d, _t, i=i: progress(i, len(clusters))) if progress else None
            rows.append(_cluster_row((spec, request), cl, inner))
    return ClusterComparison(tuple(rank_rows(rows, request.objective)), request.objective)


def _cluster_row(ctx: tuple[ModelSpec, PlanRequest], cl: Cluster,
                  progress: Progress | None = None) -> ClusterRow:
    """The best plan on one cluster, as a row of ``compare_clusters``."""
    spec, request = ctx
    res = run_plan(spec, cl, request, progress)
    return ClusterRow(cl.accelerator.id, cl.name, cl.devices,
                       res.plans[0] if res.plans else None, unpublished(cl.accelerator))
