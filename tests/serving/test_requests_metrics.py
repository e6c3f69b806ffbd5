"""Request streams (Poisson arrivals, length distributions, traces) and the benchmark figures
computed from a simulation (weighted percentiles, goodput)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from accelmap.errors import InputError
from accelmap.serving.metrics import Slo, distribution
from accelmap.serving.requests import LengthDist, make, read_trace


def test_offline_requests_all_arrive_at_once() -> None:
    r = make(10, 100, 20)
    assert np.all(r.arrival_s == 0) and np.all(r.prompt == 100) and np.all(r.output == 20)


def test_poisson_arrivals_have_the_rate() -> None:
    r = make(20000, 100, 20, rate=8.0, seed=5)
    assert r.arrival_s[0] == 0.0
    assert len(r) / r.arrival_s[-1] == pytest.approx(8.0, rel=0.03)
    gaps = np.diff(r.arrival_s)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, rel=0.05)  # exponential


@pytest.mark.parametrize("dist", [LengthDist.UNIFORM, LengthDist.LOGNORMAL])
def test_length_distributions_keep_the_mean(dist: LengthDist) -> None:
    r = make(20000, 1000, 200, dist=dist, spread=0.5, seed=2)
    assert r.mean_prompt == pytest.approx(1000, rel=0.02)
    assert r.mean_output == pytest.approx(200, rel=0.02)
    assert np.min(r.prompt) >= 1


def test_prefix_hits_leave_a_token_to_compute() -> None:
    r = make(3, 10, 5, prefix_hit=0.95)
    assert np.all(r.cached == 9)


@pytest.mark.parametrize("kwargs,match", [({"n": 0}, "--requests"), ({"n": 10**7}, "--requests"),
                                          ({"dist": LengthDist.LOGNORMAL, "spread": float("inf")},
                                           "--spread"),
                                          ({"rate": -1.0}, "--rate"),
                                          ({"prefix_hit": 1.0}, "--prefix-hit")])
def test_bad_streams_are_one_line(kwargs: dict, match: str) -> None:  # type: ignore[type-arg]
    args = {"n": 5, "prompt": 10, "output": 5, **kwargs}
    with pytest.raises(InputError, match=match):
        make(args.pop("n"), args.pop("prompt"), args.pop("output"), **args)


def test_traces_in_csv_and_json_lines(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("timestamp,input_len,output_len\n2.0,100,10\n1.0,50,5\n")
    r = read_trace(csv)
    assert list(r.arrival_s) == [0.0, 1.0] and list(r.prompt) == [50, 100]
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"arrival_s": 0, "prompt_len": 7, "output_len": 3}\n')
    assert list(read_trace(jl).output) == [3]
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_len\n0,5\n")
    with pytest.raises(InputError, match="output_len"):
        read_trace(bad)
    with pytest.raises(InputError, match="no such trace"):
        read_trace(tmp_path / "missing.csv")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InputError, match="not UTF-8"):
        read_trace(binary)


def test_weighted_percentiles_count_each_entry_its_weight() -> None:
    d = distribution(np.array([1.0, 10.0]), np.array([99, 1]))
    assert d["p50"] == 1.0 and d["p90"] == 1.0 and d["mean"] == pytest.approx(1.09)
    assert distribution(np.array([np.nan])) == {}


def test_slo_attainment() -> None:
    slo = Slo(ttft_s=1.0, tpot_s=0.05)
    met = slo.met(np.array([0.5, 2.0, 0.5]), np.array([0.01, 0.01, np.nan]))
    assert list(met) == [True, False, True]
