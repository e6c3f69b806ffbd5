"""Ranking = objective (issue 27: `plan --hw any --objective cost` was ordered by throughput):
every ranked list of accelerators is sorted by the objective it states, compared like with
like (throughput and goodput per device), rows without the figure after, rows that do not fit
last. A hypothesis property over random rows and every objective."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.api.planning import RANK_BASIS, ClusterComparison, ClusterRow, rank_rows
from accelmap.engine.plan import (
    AnyPlanFigures,
    Plan,
    ScenarioPlanFigures,
    ServePlanFigures,
    TrainPlanFigures,
)
from accelmap.mapping.plan import Mapping
from accelmap.search.result import Objective

value = st.one_of(st.none(), st.floats(1e-6, 1e9, allow_nan=False))


def _figures(kind: str, tps: float, devices: int, usd: float | None, j: float | None,
             time_s: float | None, tpot: float | None, goodput: float | None
             ) -> AnyPlanFigures:
    common = {"tokens_per_s": tps * devices, "tokens_per_s_per_device": tps,
              "memory_per_device_bytes": 1e9, "memory_fit": "fits",
              "usd_per_million_tokens": usd, "energy_j_per_token_tdp": j, "error_band": None}
    if kind == "train":
        return TrainPlanFigures(**common, time_to_train_s=time_s)
    if kind == "serve":
        return ServePlanFigures(**common, tpot_s=tpot or 0.0)
    return ScenarioPlanFigures(**common, goodput_requests_per_s=goodput or 0.0,
                               tpot_s={"p50": tpot or 0.0, "p99": tpot or 0.0},
                               tpot_p99_s=tpot)


def _row(name: str, devices: int, figures: AnyPlanFigures | None) -> ClusterRow:
    plan = None if figures is None else Plan(Mapping(), "c", name, devices, True, figures)
    return ClusterRow(name, "c", devices, plan)


@st.composite
def rows(draw: st.DrawFn) -> list[ClusterRow]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        devices = draw(st.sampled_from([1, 8, 32, 64]))
        figures = None
        if draw(st.booleans()):
            figures = _figures(draw(st.sampled_from(["train", "serve", "scenario"])),
                               draw(st.floats(1.0, 1e6)), devices, draw(value), draw(value),
                               draw(value), draw(value), draw(value))
        out.append(_row(f"a{i}", devices, figures))
    return out


@settings(max_examples=300, deadline=None)
@given(rows(), st.sampled_from(list(Objective)))
def test_every_ranked_list_is_sorted_by_its_stated_objective(
        table: list[ClusterRow], objective: Objective) -> None:
    ranked = rank_rows(table, objective)
    assert sorted(r.accelerator for r in ranked) == sorted(r.accelerator for r in table)
    values = [r.rank_value(objective) for r in ranked]
    scored = [v for v in values if v is not None]
    assert values[:len(scored)] == scored  # rows with the figure come first
    more = RANK_BASIS[objective][1]
    assert scored == sorted(scored, reverse=more)
    tail = ranked[len(scored):]
    fits = [r.feasible for r in tail]
    assert fits == sorted(fits, reverse=True)  # then the rest, the ones that do not fit last
    cmp = ClusterComparison(tuple(ranked), objective)
    assert objective.value in cmp.ranked_by and cmp.to_dict()["objective"] == objective.value


def test_cost_ranks_the_cheapest_first_not_the_fastest() -> None:
    fast = _row("fast", 64, _figures("train", 2.0, 64, 9.0, None, None, None, None))
    cheap = _row("cheap", 64, _figures("train", 1.0, 64, 1.0, None, None, None, None))
    assert [r.accelerator for r in rank_rows([fast, cheap], Objective.COST)] == [
        "cheap", "fast"]
    assert [r.accelerator for r in rank_rows([cheap, fast], Objective.THROUGHPUT)] == [
        "fast", "cheap"]


def test_a_simulated_tpot_ranks_by_its_p99() -> None:
    slow = _row("slow", 8, _figures("scenario", 1.0, 8, None, None, None, 0.05, None))
    quick = _row("quick", 8, _figures("scenario", 1.0, 8, None, None, None, 0.01, None))
    assert quick.rank_value(Objective.LATENCY) == 0.01
    assert [r.accelerator for r in rank_rows([slow, quick], Objective.LATENCY)] == [
        "quick", "slow"]
