"""The serving frontier (issue 22 part 6): the Pareto rule, the layouts swept, the sweep on a
real model, the CLI's table, --json and report, and one clear line for each bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap import api
from accelmap.api import Catalog
from accelmap.errors import InputError
from accelmap.search.frontier import FrontierPoint, layouts, on_front

Run = Callable[..., Any]


def _p(dev: float, user: float) -> FrontierPoint:
    return FrontierPoint("tp=1 x1", 1, 1, 1, 1, 0, dev, user, None, None, None, None)


@given(st.lists(st.tuples(st.floats(1, 1e4), st.floats(1, 1e3)), min_size=1, max_size=30))
def test_the_front_is_exactly_the_undominated_points(xy: list[tuple[float, float]]) -> None:
    pts = [_p(d, u) for d, u in xy]
    flags = on_front(pts)
    assert any(flags)  # the fastest per device is never dominated
    for p, f in zip(pts, flags, strict=True):
        beaten = any(q.tokens_per_s_per_device >= p.tokens_per_s_per_device
                     and q.tokens_per_s_per_user >= p.tokens_per_s_per_user and q != p
                     and (q.tokens_per_s_per_device, q.tokens_per_s_per_user)
                     != (p.tokens_per_s_per_device, p.tokens_per_s_per_user) for q in pts)
        assert f == (not beaten)


def test_layouts_shard_experts_for_moe_only(catalog: Catalog) -> None:
    [cl] = api.plan_clusters(catalog, cluster="8xH100", train=False)
    dense = layouts(api.load_model("llama-3.1-8b", catalog), cl)
    moe = layouts(api.load_model("mixtral-8x7b", catalog), cl)
    assert {int(m.ep) for m in dense} == {1}
    assert {int(m.ep) for m in moe} > {1}
    # DP attention (issue 22 part 3): MoE only, experts over the whole group
    assert not any(m.dp_attention for m in dense)
    assert {int(m.tp) for m in moe if m.dp_attention} == {max(int(m.tp) for m in moe)}
    assert all(m.ep == m.tp for m in moe if m.dp_attention)
    assert all(int(m.tp) * int(m.replicas) == 8 for m in dense + moe)


def test_a_sweep_trades_interactivity_for_throughput(catalog: Catalog) -> None:
    f = api.frontier("llama-3.1-8b", cluster="2xH100", isl=512, osl=64,
                     concurrency="2,8,32", catalog=catalog)
    [c] = f.curves
    assert c.points and c.front
    front = c.front  # most interactive first
    per_user = [p.tokens_per_s_per_user for p in front]
    per_device = [p.tokens_per_s_per_device for p in front]
    assert per_user == sorted(per_user, reverse=True)
    assert per_device == sorted(per_device)  # a front: giving up speed per user buys throughput
    assert all(p.concurrency % p.replicas == 0 for p in c.points)
    # vLLM on H100 has published runs: every point says how far off it is expected to be
    assert all(p.error_band for p in c.points) and c.error_bands
    d = f.to_dict()
    assert d["frontier"][0]["front"] and d["concurrency"] == [2, 8, 32]
    assert any("not swept" in n for n in d["notes"])


def test_a_drafter_adds_speculative_points(catalog: Catalog) -> None:
    plain = api.frontier("llama-3.1-8b", cluster="2xH100", isl=512, osl=64, concurrency="2,8",
                         catalog=catalog)
    spec = api.frontier("llama-3.1-8b", cluster="2xH100", isl=512, osl=64, concurrency="2,8",
                        mtp=1, accept=0.8, draft_len=2, catalog=catalog)
    [p], [s] = plain.curves, spec.curves
    assert {q.draft_len for q in p.points} == {0}
    assert {q.draft_len for q in s.points} == {0, 2}
    assert len(s.points) == 2 * len(p.points)
    # at a high acceptance the drafted points are more interactive at the same clients
    best = {(q.layout, q.concurrency): q.tokens_per_s_per_user for q in p.points}
    for q in s.points:
        if q.draft_len:
            base = q.layout.removesuffix(" spec k=2")
            assert q.tokens_per_s_per_user > best[(base, q.concurrency)]


@pytest.mark.parametrize(("kw", "words"), [({"accept": 0.8}, "--mtp N or --draft"),
                                           ({"mtp": 1}, "--accept")])
def test_a_drafter_needs_both_halves(catalog: Catalog, kw: dict[str, Any], words: str) -> None:
    with pytest.raises(InputError, match=words):
        api.frontier("llama-3.1-8b", cluster="2xH100", catalog=catalog, **kw)


@pytest.mark.parametrize("bad", ["0", "-4", "x", "1,,y", ""])
def test_bad_concurrency_is_one_line(bad: str) -> None:
    with pytest.raises(InputError, match="--concurrency"):
        api.frontiers.concurrencies(bad)


def test_cli_table_json_and_report(cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "f.html"
    r = cli("frontier", "llama-3.1-8b", "--cluster", "2xH100", "--isl", "256", "--osl", "32",
            "--concurrency", "2,16", "--report", str(out))
    assert r.code == 0, r.err
    assert "tok/s/user" in r.out and "the front" in r.out and "expected error" in r.out
    assert out.exists() and "Throughput vs interactivity" in out.read_text(encoding="utf-8")
    r = cli("frontier", "llama-3.1-8b", "--cluster", "2xh100-sxm5-80gb", "--isl", "256",
            "--osl", "32", "--concurrency", "2,16", "--json")
    assert r.code == 0 and r.err == ""
    assert api.reports.report_from_json(json.loads(r.out)).kind == "frontier"


@pytest.mark.parametrize("args,words", [
    (["--weights", "fp5"], "weight"),
    (["--concurrency", "0"], "--concurrency"),
    (["--hw", "nope-9000"], "nope-9000"),
    (["--framework", "megatron"], "training stack"),
    (["--isl", "300000"], "context"),
])
def test_cli_bad_input_is_one_line(cli: Run, args: list[str], words: str) -> None:
    r = cli("frontier", "llama-3.1-8b", "--cluster", "2xH100", *args) if "--hw" not in args \
        else cli("frontier", "llama-3.1-8b", *args)
    assert r.code == 2, r.out
    assert r.err.startswith("error:") and r.err.count("\n") == 1 and words in r.err, r.err
