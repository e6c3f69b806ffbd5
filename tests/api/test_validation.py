"""api.validation: read measurement files, predict each row, summarize the errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.errors import InputError

FIX = Path(__file__).parent.parent / "fixtures" / "measurements"


def test_read_and_predict(catalog: Catalog) -> None:
    f = api.validation.read_cases(FIX / "matmul.csv")
    assert f.path == FIX / "matmul.csv" and f.format.value == "matmul" and f.cases
    preds = api.validation.predict_cases(f, catalog)
    assert [p.row_id for p in preds] == [c.row_id for c in f.cases]
    assert api.validation.predict_cases(list(f.cases), catalog) == preds  # a file or its cases
    assert {p.status for p in preds} <= set(api.validation.Status)
    scored = [p for p in preds if p.status is api.validation.Status.OK]
    assert scored and all(p.predicted and p.predicted > 0 for p in scored)


def test_read_cases_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        api.validation.read_cases(tmp_path / "missing.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="empty"):
        api.validation.read_cases(empty)


def test_summarize(catalog: Catalog) -> None:
    preds = api.validation.predict_cases(api.validation.read_cases(FIX / "inference.csv"), catalog)
    s = api.validation.summarize(preds)
    assert isinstance(s, api.validation.Summary) and s.n_rows == len(preds)
    assert s.overall.n == sum(p.status is api.validation.Status.OK and p.abs_pct_error is not None
                              for p in preds)
    skipped = sum(len(v) for v in s.skipped.values())
    assert skipped == sum(p.status is api.validation.Status.SKIPPED for p in preds)
    assert s.to_dict()["n_rows"] == len(preds)


def test_compress_ids() -> None:
    assert api.validation.compress_ids(["I0009", "I0010", "I0011", "I0013"]) == "I0009-I0011, I0013"
    assert api.validation.compress_ids([]) == ""


def test_validate_cases_keeps_file_order(catalog: Catalog) -> None:
    paths = [FIX / "training.csv", FIX / "matmul.csv"]
    v = api.validate_cases(paths, catalog)
    assert [p for p, _ in v.files] == paths
    n = sum(len(api.validation.read_cases(p).cases) for p in paths)
    assert len(v.predictions) == n == v.summary.n_rows
    data = v.to_dict()
    assert set(data) == {"rows", "summary"} and len(data["rows"]) == n
    assert [r["row_id"] for r in data["rows"]] == [p.row_id for p in v.predictions]


def test_validate_cases_reads_every_file_first(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    import accelmap.api.validation as validation

    def no_prediction(*args: object, **kwargs: object) -> list[object]:
        raise AssertionError("predicted before every file was read")

    monkeypatch.setattr(validation, "_predict_cases", no_prediction)
    with pytest.raises(InputError, match=r"missing\.csv: no such file"):
        api.validate_cases([FIX / "matmul.csv", tmp_path / "missing.csv"])


def test_validate_local_tiny_cpu_run(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from accelmap.cost.calibration import CalibrationProfile

    db = tmp_path / "m.sqlite"
    with pytest.raises(InputError, match="unknown dtype 'fp7'"):
        api.validate_local("gpt3-125m", "cpu", dtype="fp7", db=db)
    with pytest.raises(InputError, match="unknown calibration profile 'nope'"):
        api.validate_local("gpt3-125m", "cpu", profile="nope", db=db)
    cpu = api.measurement.local_accelerator()
    assert cpu is not None
    api.open_store(db).save_profile(CalibrationProfile(  # the OS does not give its bandwidth
        name="cpu", accelerator_id=cpu.id, matmul_efficiency={api.DType.FP32: 0.5},
        bandwidth=10e9, source="synthetic, for the test"))
    v = api.validate_local("gpt3-125m", "cpu", steps=1, warmup=0, batch=1, seq=32,
                           decode_tokens=2, scale="tiny", profile="cpu", db=db)
    assert {r.row_id for r in v.rows} == {"local/train", "local/train/memory", "local/prefill",
                                         "local/decode", "local/inference/memory"}
    assert v.settings.dtype == "fp32" and v.run.spec.id == "gpt3-125m.tiny"
    d = v.to_dict()
    assert d["run"]["run_id"] == v.run_id and d["run"]["db"] == str(db) == v.db
    assert d["summary"]["n"] == 5 and d["run"]["settings"]["seq"] == 32
    assert [r.run_id for r in api.open_store(db).runs()] == [v.run_id]
