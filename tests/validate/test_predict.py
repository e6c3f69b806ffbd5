"""Predictions per row: sanity bands, leave-one-out matmul, skips with reasons, the summary."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.cost import efficiency
from accelmap.validate.cases import Arch, Parallel, TrainingCase
from accelmap.validate.predict import (
    MetricKind,
    Prediction,
    Status,
    predict_case,
    predict_cases,
)
from accelmap.validate.read import read_cases
from accelmap.validate.report import compress_ids, summarize

FIXTURES = Path(__file__).parent.parent / "fixtures" / "measurements"
NONE: frozenset[str] = frozenset()


def rows(name: str) -> dict[str, Any]:
    return {c.row_id: c for c in read_cases(FIXTURES / name).cases}


@pytest.mark.parametrize("row_id", ["I0005", "I0038", "I0198", "I0223"])
def test_single_device_inference_within_3x(catalog: Catalog, row_id: str) -> None:
    p = predict_case(rows("inference.csv")[row_id], catalog, NONE)
    assert p.status is Status.OK, p.skipped_reason
    assert p.measured and p.predicted
    assert 1 / 3 < p.predicted / p.measured < 3, (p.predicted, p.measured)


def test_metric_kinds_and_gpt_fast_default_output(catalog: Catalog) -> None:
    r = rows("inference.csv")
    kinds = {rid: predict_case(r[rid], catalog, NONE) for rid in ("I0005", "I0038", "I0198")}
    assert kinds["I0005"].kind is MetricKind.THROUGHPUT
    assert kinds["I0038"].kind is MetricKind.TTFT and not kinds["I0038"].higher_is_better
    assert kinds["I0198"].kind is MetricKind.DECODE
    assert any("max_new_tokens 200" in n for n in kinds["I0198"].notes)


def test_unknown_rows_skipped_with_reason(catalog: Catalog) -> None:
    t = rows("training.csv")
    mystery = predict_case(dataclasses.replace(t["T0368"], accelerator="Mystery GPU"), catalog,
                           NONE)
    assert "not in the catalog" in str(mystery.skipped_reason)
    assert "seq_len not stated" in str(predict_case(t["T0059"], catalog, NONE).skipped_reason)


def test_speculative_row_predicted_through_the_speculative_path(catalog: Catalog) -> None:
    """I0225 (gpt-fast, Llama 2 70B int4 verified, Llama 2 7B int4 draft): one device and
    k = 4 from the linked script, alpha from Leviathan et al. Table 3 (stated, not fitted)."""
    p = predict_case(rows("inference.csv")["I0225"], catalog, NONE)
    assert p.status is Status.OK and p.kind is MetricKind.DECODE and p.fits
    assert any("acceptance rate 0.75" in n for n in p.notes)
    assert any("device count not stated: 1" in n for n in p.notes)
    plain = predict_case(rows("inference.csv")["I0201"], catalog, NONE)  # 70B int8, no draft
    assert p.predicted is not None and plain.predicted is not None
    assert p.predicted > plain.predicted


def test_matmul_is_leave_one_out(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    m = rows("matmul.csv")["M0005"]  # H100 SXM BF16
    base = predict_case(m, catalog, NONE)
    assert base.status is Status.OK and base.predicted
    # 1. the row's own value plays no part
    changed = dataclasses.replace(m, measured_value=1.0)
    assert predict_case(changed, catalog, NONE).predicted == base.predicted
    # 2. the device's own efficiency entry is excluded: making it absurd changes nothing ...
    table = efficiency.measured_matmul()
    own = {k: {d: {**e, "efficiency": 0.01} for d, e in v.items()} if k == "h100-sxm5-80gb"
           else v for k, v in table.items()}
    monkeypatch.setattr(efficiency, "measured_matmul", lambda: own)
    assert predict_case(m, catalog, NONE).predicted == pytest.approx(base.predicted)
    # ... while a peer's entry does move it (so the check above can fail)
    peer = {k: {d: {**e, "efficiency": 0.01} for d, e in v.items()} if k != "h100-sxm5-80gb"
            else v for k, v in table.items()}
    monkeypatch.setattr(efficiency, "measured_matmul", lambda: peer)
    assert predict_case(m, catalog, NONE).predicted != pytest.approx(base.predicted)


def test_bandwidth_row_is_calibration(catalog: Catalog) -> None:
    p = predict_case(rows("matmul.csv")["M0021"], catalog)
    assert p.status is Status.CALIBRATION and p.kind is MetricKind.BANDWIDTH
    assert p.predicted == pytest.approx(1700, rel=1e-3)


def _training_case(**kw: Any) -> TrainingCase:
    base = dict(row_id="T9", file="t.csv", line=2, source="test",
                accelerator="NVIDIA A100 SXM", model="GPT (1.7B)",
                arch=Arch(24, 2304, 24, 24, 9216, 51200), parallel=Parallel(1, 1, 1, 1),
                seq_len=2048, global_batch_seqs=8, precision="BF16",
                framework="Megatron-LM", achieved_tflops_per_device=150.0)
    return TrainingCase(**{**base, **kw})


def test_training_honours_tflops_definition(catalog: Catalog) -> None:
    hw = predict_case(_training_case(recompute="full activation checkpointing"), catalog, NONE)
    model = predict_case(_training_case(recompute="full activation checkpointing",
                                        tflops_definition="Model TFLOP/sec/GPU"), catalog, NONE)
    assert hw.status is Status.OK and model.status is Status.OK
    assert hw.predicted and model.predicted
    assert any("Eq. 3" in n for n in hw.notes)
    assert hw.predicted > model.predicted  # the recompute forward is counted only by HFU
    assert 0 < hw.predicted <= 312  # A100 dense BF16 peak
    nobatch = predict_case(_training_case(global_batch_seqs=None), catalog, NONE)
    assert "batch not stated" in str(nobatch.skipped_reason)


def test_calibration_rows_are_excluded_from_the_summary(catalog: Catalog) -> None:
    cases = list(read_cases(FIXTURES / "inference.csv").cases)
    plain = summarize(predict_cases(cases, catalog, NONE))
    cal = summarize(predict_cases(cases, catalog, frozenset({"I0005"})))
    assert cal.calibration_rows == ("I0005",)
    assert cal.overall.n == plain.overall.n - 1
    assert "I0005" not in {rid for ids in cal.skipped.values() for rid in ids}


def _pred(rid: str, measured: float, predicted: float, higher: bool = True,
          status: Status = Status.OK) -> Prediction:
    return Prediction(rid, "f.csv", "src", "m", "a", kind=MetricKind.THROUGHPUT,
                      measured=measured, predicted=predicted, status=status,
                      higher_is_better=higher)


def test_summary_statistics_and_optimism_sign() -> None:
    preds = [_pred("A1", 100, 110), _pred("A2", 100, 80), _pred("A3", 100, 130),
             _pred("L1", 10, 8, higher=False),  # latency predicted lower: optimistic
             _pred("C1", 100, 100, status=Status.CALIBRATION)]
    assert preds[3].signed_pct_error == pytest.approx(20.0)
    s = summarize(preds)
    assert s.overall.n == 4
    assert s.overall.median_abs_pct_error == pytest.approx(20.0)
    assert s.overall.p90_abs_pct_error == pytest.approx(27.0)  # numpy linear interpolation
    assert s.overall.median_signed_pct_error == pytest.approx(15.0)
    assert s.calibration_rows == ("C1",)
    d = s.to_dict()
    assert {"n", "median_abs_pct_error", "p90_abs_pct_error", "by_source", "by_kind"} <= set(d)


def test_compress_ids() -> None:
    assert compress_ids(["I0009", "I0010", "I0011", "I0013", "T0001"]) == \
        "I0009-I0011, I0013, T0001"


def test_first_reason_keeps_quoted_names_whole() -> None:
    from accelmap.validate.report import first_reason

    p = dataclasses.replace(_pred("X1", 1, 1), status=Status.SKIPPED,
                            skipped_reason="accelerator 'H100 (96GB; 500W)' unknown; no seq_len")
    assert first_reason(p) == "accelerator 'H100 (96GB; 500W)' unknown"
