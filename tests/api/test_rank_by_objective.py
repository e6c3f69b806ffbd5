"""Ranking = objective (issue 27: `plan --hw any --objective cost` was ordered by throughput):
every ranked list of accelerators is sorted by the objective it states, compared like with
like (throughput and goodput per device), rows without the figure after, rows that do not fit
last. A hypothesis property over random rows and every objective."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.api.planning import RANK_BASIS, HardwareComparison, rank_rows, rank_value
from accelmap.search.result import Objective

value = st.one_of(st.none(), st.floats(1e-6, 1e9, allow_nan=False))


@st.composite
def rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        devices = draw(st.sampled_from([1, 8, 32, 64]))
        feasible = draw(st.booleans())
        tps = draw(st.floats(1.0, 1e6))
        plan = None
        if feasible:
            plan = {"tokens_per_s": tps * devices, "tokens_per_s_per_device": tps,
                    "cost_usd_per_million_tokens": draw(value),
                    "energy_j_per_token": draw(value), "time_to_train_s": draw(value),
                    "tpot_s": draw(value), "goodput_requests_per_s": draw(value)}
        out.append({"accelerator": f"a{i}", "devices": devices, "feasible": feasible,
                    "plan": plan, "tokens_per_s_per_device": tps if feasible else None,
                    "cost_usd_per_million_tokens": None})
    return out


@settings(max_examples=300, deadline=None)
@given(rows(), st.sampled_from(list(Objective)))
def test_every_ranked_list_is_sorted_by_its_stated_objective(
        table: list[dict[str, Any]], objective: Objective) -> None:
    ranked = rank_rows(table, objective)
    assert sorted(r["accelerator"] for r in ranked) == sorted(r["accelerator"] for r in table)
    values = [rank_value(r, objective) for r in ranked]
    scored = [v for v in values if v is not None]
    assert values[:len(scored)] == scored  # rows with the figure come first
    more = RANK_BASIS[objective][1]
    assert scored == sorted(scored, reverse=more)
    tail = ranked[len(scored):]
    fits = [r["feasible"] for r in tail]
    assert fits == sorted(fits, reverse=True)  # then the rest, the ones that do not fit last
    cmp = HardwareComparison(tuple(ranked), objective)
    assert objective.value in cmp.ranked_by and cmp.to_dict()["objective"] == objective.value


def test_cost_ranks_the_cheapest_first_not_the_fastest() -> None:
    fast = {"accelerator": "fast", "devices": 64, "feasible": True,
            "tokens_per_s_per_device": 2.0,
            "plan": {"tokens_per_s": 128.0, "cost_usd_per_million_tokens": 9.0}}
    cheap = {"accelerator": "cheap", "devices": 64, "feasible": True,
             "tokens_per_s_per_device": 1.0,
             "plan": {"tokens_per_s": 64.0, "cost_usd_per_million_tokens": 1.0}}
    assert [r["accelerator"] for r in rank_rows([fast, cheap], Objective.COST)] == [
        "cheap", "fast"]
    assert [r["accelerator"] for r in rank_rows([cheap, fast], Objective.THROUGHPUT)] == [
        "fast", "cheap"]
