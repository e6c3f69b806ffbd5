"""Serving rows (offline/server scenarios) through the request-level simulator: how a row
becomes a serving run, the highest-rate search, the canonical round trip, predictions."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.mapping.plan import Mapping
from accelmap.serving.capacity import max_rate, meets
from accelmap.serving.metrics import Slo
from accelmap.serving.scenario import Load, Scenario, run
from accelmap.units import DType
from accelmap.validate.canonical import read_runs, same_run, write_runs
from accelmap.validate.cases import InferenceCase
from accelmap.validate.predict import MetricKind, Status, predict_case
from accelmap.validate.read import read_cases
from accelmap.validate.runs import ServingMetric, ServingRun, ServingScenario
from accelmap.validate.transcribe import is_serving_case, serving_from_case

FIXTURES = Path(__file__).parent.parent / "fixtures"
NONE: frozenset[str] = frozenset()


def serving_rows() -> dict[str, InferenceCase]:
    cases = read_cases(FIXTURES / "measurements" / "serving.csv").cases
    return {c.row_id: c for c in cases if isinstance(c, InferenceCase)}


def test_offline_rows_read_as_offline_runs() -> None:
    rows = serving_rows()
    trt = serving_from_case(rows["S0001"])
    assert trt.scenario is ServingScenario.OFFLINE
    assert trt.framework is Framework.TENSORRT_LLM and trt.version == "0.17"
    assert (trt.tp, trt.dp, trt.device_count) == (1, 1, 1)
    assert trt.metric is ServingMetric.OUTPUT_TOKENS_PER_S  # total over the TP GPUs
    assert (trt.input_len, trt.output_len, trt.requests) == (128, 128, 30000)
    assert trt.kv_fraction == 0.95 and trt.precision is DType.FP8 and trt.length_dist is None
    assert serving_from_case(rows["S0053"]).version == "1.0"
    mlperf = serving_from_case(rows["S0117"])  # 8 GPUs as 4 independent TP2 engines
    assert (mlperf.tp, mlperf.dp, mlperf.device_count) == (2, 4, 8)
    assert mlperf.max_batch == 896 and mlperf.requests == 200640
    assert mlperf.length_dist == "lognormal" and mlperf.input_len is None
    assert mlperf.framework is Framework.TENSORRT_LLM and mlperf.version == ""


def test_server_rows_carry_their_latency_limits() -> None:
    rows = serving_rows()
    tput, ttft = serving_from_case(rows["S0118"]), serving_from_case(rows["S0119"])
    for r in (tput, ttft):
        assert r.scenario is ServingScenario.SERVER and r.rate is None
        assert (r.slo_ttft_ms, r.slo_tpot_ms, r.slo_percentile) == (2000, 200, 99)
    assert tput.metric is ServingMetric.OUTPUT_TOKENS_PER_S
    assert ttft.metric is ServingMetric.TTFT_P99_MS


def test_fixed_batch_rows_stay_fixed_batch() -> None:
    cases = read_cases(FIXTURES / "measurements" / "inference.csv").cases
    assert not any(is_serving_case(c) for c in cases if isinstance(c, InferenceCase))


def test_offline_prediction_and_kind(catalog: Catalog) -> None:
    p = predict_case(serving_rows()["S0001"], catalog, NONE)
    assert p.status is Status.OK, p.skipped_reason
    assert p.kind is MetricKind.OFFLINE and p.framework == "tensorrt-llm 0.17"
    assert p.measured and p.predicted and 0.5 < p.predicted / p.measured < 2


def test_rows_without_input_length_are_skipped_with_the_reason(catalog: Catalog) -> None:
    p = predict_case(serving_rows()["S0119"], catalog, NONE)
    assert p.status is Status.SKIPPED and p.kind is MetricKind.LATENCY
    assert "input length not stated" in (p.skipped_reason or "")


def _small() -> tuple[object, object, object, object]:
    spec = api.load_model("llama-3.1-8b")
    system = api.load_system(hw="h100-sxm5-80gb")
    wl = api.inference(1, prompt=500, output=200, weights="fp8")
    return spec, system, wl, framework_profile(Framework.TENSORRT_LLM)


def test_higher_rate_worse_tail_and_the_search_meets_its_limits() -> None:
    spec, system, wl, fw = _small()
    load = Load(Scenario.OFFLINE, requests=600, max_seqs=128)
    p99 = []
    for rate in (5.0, 20.0, 40.0, 80.0):
        r = run(spec, system, wl, Mapping.serving(), fw,  # type: ignore[arg-type]
                Load(Scenario.SERVER, requests=600, rate=rate, max_seqs=128))
        p99.append((r.metrics["ttft_s"]["p99"], r.metrics["tpot_s"]["p99"]))
    # TTFT's tail grows with the rate; TPOT's grows until the batch is full (at 80/s the
    # queue, not the batch, grows), so the joint check is monotone where the search looks
    assert all(a[0] < b[0] for a, b in pairwise(p99)), p99
    assert all(a[1] < b[1] for a, b in pairwise(p99[:3])), p99
    slo = Slo(ttft_s=1.0, tpot_s=0.03)
    cap = max_rate(spec, system, wl, Mapping.serving(), fw, load, slo)  # type: ignore[arg-type]
    assert cap.rate is not None and cap.run is not None
    assert meets(cap.run.metrics, slo)
    assert cap.rate < cap.offline.metrics["requests_per_s"]
    above = run(spec, system, wl, Mapping.serving(), fw,  # type: ignore[arg-type]
                Load(Scenario.SERVER, requests=600, rate=cap.rate * 1.2, max_seqs=128))
    assert not meets(above.metrics, slo)


def test_canonical_round_trip_with_serving_fields(tmp_path: Path) -> None:
    runs = read_runs(FIXTURES / "runs" / "serving.yaml")
    assert all(isinstance(r, ServingRun) for r in runs)
    server = runs[1]
    assert isinstance(server, ServingRun)
    assert server.scenario is ServingScenario.SERVER and server.slo_tpot_ms == 50
    assert (server.length_dist, server.length_spread, server.max_batch) == ("lognormal", 1.0, 256)
    for name in ("runs.csv", "runs.yaml"):
        write_runs(runs, tmp_path / name)  # type: ignore[arg-type]
        back = read_runs(tmp_path / name)
        assert all(same_run(a, b) for a, b in zip(runs, back, strict=True))  # type: ignore[arg-type]


@pytest.mark.parametrize(("record", "words"), [
    ({"scenario": "offlin"}, "write scenario: batch, offline, server or concurrency"),
    ({"metric": "mfu"}, "is a training metric"),
    ({"kv_fraction": "95"}, "write kv_fraction: 0.95"),
])
def test_serving_fields_say_what_to_write(tmp_path: Path, record: dict[str, str],
                                          words: str) -> None:
    base = {"accelerator": "h100-sxm5-80gb", "model": "llama-3.1-8b", "devices": "1",
            "scenario": "offline", "input_len": "128", "output_len": "128",
            "precision": "fp8", "metric": "output_tokens_per_s", "value": "1000"}
    path = tmp_path / "r.yaml"
    import yaml

    path.write_text(yaml.safe_dump([{**base, **record}]))
    (r,) = read_runs(path)
    assert not isinstance(r, (ServingRun,)) and words in " ".join(p.message for p in r.problems)


def _row_variant(tmp_path: Path, **changes: str) -> InferenceCase:
    """The first fixture serving row with some columns changed, read back as a case."""
    import csv

    src = FIXTURES / "measurements" / "serving.csv"
    with src.open() as f:
        reader = csv.DictReader(f)
        fields, row = reader.fieldnames, next(reader)
    assert fields is not None
    row.update(changes)
    out = tmp_path / "variant.csv"
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerow(row)
    (case,) = [c for c in read_cases(out).cases if isinstance(c, InferenceCase)]
    return case


@pytest.mark.parametrize(("name", "unit", "metric"), [
    ("Output token throughput", "output tokens/s", ServingMetric.OUTPUT_TOKENS_PER_S),
    ("Request throughput", "requests/s", ServingMetric.REQUESTS_PER_S),
    ("Median TTFT", "ms", ServingMetric.TTFT_P50_MS),
    ("P99 ITL", "ms", ServingMetric.ITL_P99_MS),
    ("Mean TPOT", "ms", ServingMetric.TPOT_MEAN_MS),
    ("E2E latency p90", "s", ServingMetric.E2E_P90_MS),
])
def test_serving_metrics_as_benchmarks_name_them(tmp_path: Path, name: str, unit: str,
                                                 metric: ServingMetric) -> None:
    case = _row_variant(tmp_path, metric_name=name, metric_unit=unit, per_device_or_total="total",
                        metric_value="2.5")
    run = serving_from_case(case)
    assert run.metric is metric
    assert run.value == pytest.approx(2500.0 if unit == "s" else 2.5)  # latencies in ms


def test_a_server_row_with_a_stated_rate_and_a_batch_cap(tmp_path: Path) -> None:
    case = _row_variant(tmp_path, scenario="server (Poisson arrivals, continuous batching)",
                        notes="vLLM benchmark_serving.py, request_rate=4", batch_size="256")
    assert is_serving_case(case)
    run = serving_from_case(case)
    assert run.scenario is ServingScenario.SERVER and run.rate == 4.0 and run.max_batch == 256
    static = _row_variant(tmp_path, scenario="static batch, peak throughput (offline)",
                          batch_size="64")
    assert not is_serving_case(static)
