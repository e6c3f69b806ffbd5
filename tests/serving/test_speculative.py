"""Speculative decoding: the expected-tokens formula, the drafter's memory, the choice of k, the
physics (wins at small batch, loses where verify is compute-bound), the CLI and its errors."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.cost.framework import Framework
from accelmap.engine import resolve_framework
from accelmap.errors import InputError
from accelmap.serving.iteration import IterationCost
from accelmap.serving.scenario import kv_pool
from accelmap.serving.scheduler import defaults
from accelmap.serving.speculative import (
    MAX_DRAFT_LEN,
    Speculation,
    choose,
    draft_cost,
    draft_memory,
    expected_tokens,
)

alphas = st.floats(min_value=0.0, max_value=0.999, allow_nan=False)
lens = st.integers(min_value=1, max_value=32)


def test_expected_tokens_limits() -> None:
    assert expected_tokens(0.0, 5) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert expected_tokens(0.5, 1) == pytest.approx(1.5)
    assert expected_tokens(1 - 1e-9, 3) == pytest.approx(4.0, rel=1e-6)
    arr = expected_tokens(np.array([0.0, 0.8, 1.0]), 4)
    assert arr.shape == (3,) and arr[2] == 5.0


@settings(max_examples=60, deadline=None)
@given(alphas, alphas, lens)
def test_expected_tokens_monotone_in_alpha(a: float, b: float, k: int) -> None:
    lo, hi = min(a, b), max(a, b)
    assert 1.0 <= expected_tokens(lo, k) <= expected_tokens(hi, k) + 1e-12 <= k + 1 + 1e-9


@settings(max_examples=60, deadline=None)
@given(alphas, lens)
def test_expected_tokens_monotone_in_k(a: float, k: int) -> None:
    assert expected_tokens(a, k) <= expected_tokens(a, k + 1) + 1e-12


@pytest.fixture(scope="module")
def setup(catalog: Catalog) -> dict[str, Any]:
    spec = catalog.models["llama-3.1-70b"]
    return {"spec": spec, "draft": catalog.models["llama-3.1-8b"],
            "system": api.load_system(cluster="dgx-h100", catalog=catalog),
            "m": api.serving_mapping(tp=8), "fw": resolve_framework(None, Framework.VLLM)}


def test_memory_of_the_draft_reduces_the_kv_pool(setup: dict[str, Any]) -> None:
    spec, system, m = setup["spec"], setup["system"], setup["m"]
    wl = api.inference(1, prompt=2000, output=300)
    sched = defaults(Framework.VLLM, offline=False, device_bytes=system.memory_bytes)
    plain = kv_pool(spec, wl, m, system.memory_bytes, sched)
    sp = Speculation(0.8, None, setup["draft"])
    dm = draft_memory(sp, spec, wl, m)
    with_draft = kv_pool(spec, wl, m, system.memory_bytes, sched, dm)
    # 8B bf16 over tp=8: about 2 GB per device; 32 layers x 8 KV heads x 128 x 2 x 2 B / 8
    assert dm.weights_bytes == pytest.approx(8.03e9 * 2 / 8, rel=0.02)
    assert dm.kv_bytes_per_token == 32 * 2 * 128 * 2  # one KV head per device
    assert with_draft.pool_bytes == pytest.approx(plain.pool_bytes - dm.weights_bytes)
    assert with_draft.tokens < plain.tokens * (1 - 0.25)  # 32 of 112 layers' KV per token
    # MTP heads: one layer of the target's width, and one layer of its KV per token
    mtp = draft_memory(Speculation(0.8, None, None, 1), spec, wl, m)
    assert mtp.kv_bytes_per_token == pytest.approx(plain.bytes_per_token / spec.n_layers)
    layer = plain.other.items["weights"] / spec.n_layers  # embedding and head spread: rough
    assert 0.8 * layer < mtp.weights_bytes < 1.5 * layer


def _tables(setup: dict[str, Any], sp: Speculation, batch: int) -> tuple[Any, Any]:
    spec, system, m, fw = setup["spec"], setup["system"], setup["m"], setup["fw"]
    wl = api.inference(batch, prompt=1000, output=200)
    t = IterationCost(spec, system, wl, m, fw, max_tokens=batch * (MAX_DRAFT_LEN + 1),
                      max_seqs=batch * (MAX_DRAFT_LEN + 1), max_context=1300)
    d = draft_cost(sp, spec, system, wl, m, fw, max_tokens=batch, max_seqs=batch,
                   max_context=1300)
    return t, d


def test_chosen_k_is_the_argmax_of_the_table(setup: dict[str, Any]) -> None:
    sp = Speculation(0.8, None, setup["draft"])
    t, d = _tables(setup, sp, 4)
    c = choose(t, d, 0.8, 4, 1100.0)
    rows = c.to_dict()["table"]
    assert [r["k"] for r in rows] == list(range(1, MAX_DRAFT_LEN + 1))
    best = max(rows, key=lambda r: r["tokens_per_s"])
    assert c.chosen.k == best["k"] == min(rows, key=lambda r: r["tpot_s"])["k"]
    assert choose(t, d, 0.8, 4, 1100.0, k=2).chosen.k == 2


def test_faster_at_small_batch_not_at_large(setup: dict[str, Any]) -> None:
    sp = Speculation(0.8, None, setup["draft"])
    t, d = _tables(setup, sp, 512)
    small = choose(t, d, 0.8, 1, 1100.0)
    assert small.speedup > 1.5 and not small.notes
    # the physics: verifying k+1 tokens costs almost nothing more at batch 1 (memory-bound) ...
    one = small.rows[3]
    assert one.verify_s < 1.05 * small.plain.verify_s
    # ... but at 512 sequences the verify pass is compute-bound: k+1 tokens cost about k+1 times
    large = choose(t, d, 0.8, 512, 1100.0)
    assert large.speedup < 1.0 and large.notes and "compute-bound" in large.notes[0]
    assert large.rows[3].verify_s > 3 * large.plain.verify_s
    # a lower acceptance rate chooses a shorter draft
    assert choose(t, d, 0.5, 1, 1100.0).chosen.k < small.chosen.k


def test_batch_scenario_tpot_formula(setup: dict[str, Any]) -> None:
    spec, system, m = setup["spec"], setup["system"], setup["m"]
    wl = api.inference(1, prompt=2000, output=300)
    plain = api.estimate(spec, system, wl, m)
    est = api.serve_batch(spec, system, wl, m,
                          speculation=api.speculation(0.8, draft="llama-3.1-8b", draft_len=4))
    s = est.speculative
    assert s is not None and s["draft_len"] == 4
    assert s["expected_tokens_per_step"] == pytest.approx((1 - 0.8**5) / 0.2)
    assert est.tpot_s == pytest.approx(
        (s["draft_s_per_step"] + s["verify_s_per_step"]) / s["expected_tokens_per_step"])
    assert s["plain"]["tpot_s"] == pytest.approx(plain.tpot_s, rel=1e-6)  # same tables
    assert est.tpot_s < plain.tpot_s and est.ttft_s > plain.ttft_s  # the draft's prefill
    assert est.tokens_per_s > plain.tokens_per_s
    assert est.memory.items["draft_weights"] > 0 and est.memory.total > plain.memory.total


def test_server_run_with_speculation(setup: dict[str, Any]) -> None:
    spec, system, m = setup["spec"], setup["system"], setup["m"]
    wl = api.inference(1, prompt=1000, output=200)
    load = api.serving_load("server", rate=2, requests=200)
    run = api.serve(spec, system, wl, m, load=load,
                    speculation=api.speculation(0.8, draft="llama-3.1-8b"))
    s = run.metrics["speculative"]
    assert 1 <= s["draft_len"] <= MAX_DRAFT_LEN
    pr = s["plain_run"]
    assert run.metrics["tpot_s"]["p50"] < pr["tpot_s"]["p50"]
    assert run.metrics["kv_capacity_tokens"] < pr["kv_capacity_tokens"]


def test_offline_draft_length_is_the_best_simulated_one(setup: dict[str, Any]) -> None:
    """Under heavy offline load the one-step table is not trusted: its best k values are
    simulated and the highest throughput kept; the run says when plain decoding beats it."""
    spec, system, m = setup["spec"], setup["system"], setup["m"]
    wl = api.inference(1, prompt=1000, output=300)
    load = api.serving_load("offline", requests=600)
    run = api.serve(spec, system, wl, m, load=load,
                    speculation=api.speculation(0.8, draft="llama-3.1-8b"))
    s = run.metrics["speculative"]
    assert s["draft_len_source"].startswith("chosen: best throughput of k = ")
    listed = s["draft_len_source"].split("k = ")[1].split(" simulated")[0]
    tried = [int(k) for k in listed.split(", ")]
    assert s["draft_len"] in tried and len(tried) >= 2
    for k in tried:
        given = api.serve(spec, system, wl, m, load=load,
                          speculation=api.speculation(0.8, draft="llama-3.1-8b", draft_len=k))
        assert given.output_tokens_per_s <= run.output_tokens_per_s * (1 + 1e-9)
    if run.output_tokens_per_s < s["plain_run"]["output_tokens_per_s"]:
        assert any("below plain decoding" in a for a in run.assumptions)


def test_cli_json(cli: Any) -> None:
    r = cli("estimate", "llama-3.1-70b", "--cluster", "dgx-h100", "--serve", "--tp", "8",
            "--prompt", "1000", "--output", "100", "--draft", "llama-3.1-8b", "--accept", "0.6",
            "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)["speculative"]
    for key in ("draft_len", "accept_rate", "expected_tokens_per_step", "draft_s_per_step",
                "verify_s_per_step", "table", "plain"):
        assert key in s
    assert s["accept_rate"] == 0.6
    r = cli("estimate", "llama-3.1-70b", "--cluster", "dgx-h100", "--serve", "--tp", "8",
            "--rate", "2", "--requests", "100", "--mtp", "1", "--accept", "0.7",
            "--draft-len", "3", "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)["speculative"]
    assert s["draft_len"] == 3 and s["draft_len_source"] == "given"
    r = cli("estimate", "llama-3.1-70b", "--cluster", "dgx-h100", "--serve", "--tp", "8",
            "--draft", "llama-3.1-8b", "--accept", "0.8")
    assert r.code == 0 and "speculative" in r.out and "plain decoding" in r.out


@pytest.mark.parametrize(("args", "match"), [
    (("--draft", "llama-3.1-8b"), "--accept ALPHA"),
    (("--draft", "llama-3.1-8b", "--accept", "1"), "[0, 1)"),
    (("--draft", "llama-3.1-8b", "--accept", "-0.1"), "[0, 1)"),
    (("--draft", "llama-3.1-8b", "--accept", "x"), "--accept takes a number"),
    (("--draft", "llama-3.1-8b", "--accept", "0.8", "--draft-len", "0"), "--draft-len"),
    (("--draft", "llama-3.1-8b", "--accept", "0.8", "--draft-len", "many"), "--draft-len"),
    (("--draft", "no-such-model-xyz", "--accept", "0.8"), "no-such-model-xyz"),
    (("--draft", "llama-2-7b", "--accept", "0.8"), "tokenizer"),
    (("--draft", "llama-3.1-8b", "--mtp", "1", "--accept", "0.8"), "not both"),
    (("--mtp", "0", "--accept", "0.8"), "--mtp"),
    (("--accept", "0.8"), "needs a drafter"),
])
def test_bad_input_one_line(cli: Any, args: tuple[str, ...], match: str) -> None:
    r = cli("estimate", "llama-3.1-70b", "--cluster", "dgx-h100", "--serve", "--tp", "8", *args)
    assert r.code != 0
    assert "Traceback" not in r.err + r.out
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1, r.err
    assert match in lines[0]


def test_speculation_value_errors(catalog: Catalog) -> None:
    with pytest.raises(InputError, match=r"\[0, 1\)"):
        Speculation(1.0, 4, catalog.models["llama-3.1-8b"])
    with pytest.raises(InputError, match="draft-len"):
        Speculation(0.5, 0, catalog.models["llama-3.1-8b"])
