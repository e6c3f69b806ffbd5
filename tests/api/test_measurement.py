"""api.measurement: the store, run lookup, calibration from stored measurements, and a real
(tiny) measurement on this CPU through NumPy."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.errors import InputError, NotFoundError
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.store import ENV_DB
from accelmap.units import DType

H100 = "h100-sxm5-80gb"


def point(value: float, kind: Kind = Kind.MATMUL, dtype: str | None = "bf16",
          label: str = "8192x8192x8192", acc: str = H100) -> Measurement:
    env = Environment("torch", "cuda:0", "NVIDIA H100 80GB HBM3", acc)
    return Measurement(kind=kind, environment=env, dtype=dtype, label=label, value=value,
                       unit="FLOP/s" if kind is Kind.MATMUL else "B/s", median=value,
                       spread=0.02, repetitions=10)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "m.sqlite"
    s = api.open_store(path)
    s.add([point(400e12, label="4096x4096x4096"), point(600e12)], run_id="aaa111")
    s.add([point(2.2e12, Kind.BANDWIDTH, None, "read 4 GiB")], run_id="aab222")
    return path


def test_open_store_default_and_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DB, str(tmp_path / "env.sqlite"))
    assert api.open_store().path == tmp_path / "env.sqlite"
    with pytest.raises(InputError, match=r"no measurement store at .*none\.sqlite"):
        api.open_store(tmp_path / "none.sqlite", must_exist=True)
    assert api.open_store(str(tmp_path / "new.sqlite")).path == tmp_path / "new.sqlite"


def test_measurement_kind() -> None:
    assert api.measurement.measurement_kind("MatMul") is Kind.MATMUL
    assert api.measurement.measurement_kind(None) is None
    assert api.measurement.measurement_kind(Kind.BANDWIDTH)
    with pytest.raises(InputError, match="unknown measurement kind 'flops'; use one of matmul"):
        api.measurement.measurement_kind("flops")


def test_find_run_by_prefix(db: Path) -> None:
    store = api.open_store(db, must_exist=True)
    assert api.measurement.find_run(store, "aaa111") == "aaa111"
    assert api.measurement.find_run(store, "aab") == "aab222"
    with pytest.raises(InputError, match="matches 2 runs"):
        api.measurement.find_run(store, "aa")
    with pytest.raises(InputError, match=r"no run 'zz'.*recent runs: aaa111, aab222"):
        api.measurement.find_run(store, "zz")


def test_calibrate_and_load_profile(db: Path, catalog: Catalog) -> None:
    store = api.open_store(db)
    with pytest.raises(InputError, match="give --hw ACCELERATOR"):
        api.measurement.calibration_accelerator(None, api.open_store(db.parent / "empty.sqlite"),
                                                catalog)
    # the only one stored
    assert api.measurement.calibration_accelerator(None, store, catalog).id == H100
    cal = api.calibrate(store, "h100 sxm5", "lab", catalog)
    assert cal.accelerator.id == H100 and cal.profile.name == "lab"
    assert cal.matmul[DType.BF16].value == 600e12 and cal.bandwidth is not None
    assert cal.bandwidth.value == 2.2e12
    d = cal.to_dict()
    assert d["store"] == str(db) and d["matmul"]["bf16"]["best_flops"] == 600e12
    assert CalibrationProfile.from_dict(d["profile"]) == cal.profile
    assert api.load_profile("lab", db) == cal.profile
    assert api.load_profile(None, db) is None
    with pytest.raises(NotFoundError):
        api.measurement.calibration_accelerator("no-such-chip", store, catalog)


def test_local_accelerator_describes_this_cpu() -> None:
    acc = api.measurement.local_accelerator()
    assert acc is None or acc.id.startswith("local-")


def test_human_bytes() -> None:
    assert api.measurement.human_bytes(1024) == "1K"
    assert api.measurement.human_bytes(64 * 2**20) == "64M"


def test_measure_matmul_and_bandwidth_store_a_run(tmp_path: Path, catalog: Catalog) -> None:
    db = tmp_path / "m.sqlite"
    with pytest.raises(InputError, match="unknown dtype"):
        api.measure_matmul(dtypes=["fp33"], db=db, catalog=catalog)
    assert not db.exists()  # bad input fails before the store is opened
    run = api.measure_matmul(dtypes=["fp32"], budget=0.2, backend="numpy", reps=1, db=db,
                             catalog=catalog)
    assert run.results[0].dtype is DType.FP32 and run.results[0].best_flops_per_s > 0
    d = run.to_dict()
    assert d["run_id"] == run.run_id and d["db"] == str(db)
    assert [r.run_id for r in api.open_store(db).runs()] == [run.run_id]
    bw = api.measure_bandwidth(kernels=["copy"], budget=0.2, backend="numpy", sizes=["8 MiB"],
                               reps=1, flush=False, db=db, catalog=catalog)
    assert bw.result.points and bw.to_dict()["run_id"] == bw.run_id
    assert {r.kind for r in api.open_store(db).runs()} == {"matmul", "bandwidth"}


def test_a_cpu_run_is_not_stored_or_calibrated_as_an_h100(tmp_path: Path,
                                                           catalog: Catalog) -> None:
    """`measure matmul --hw h100-sxm5-80gb` on a CPU is refused; with force it is stored with a
    warning, and calibrate still refuses to make an H100 profile of it."""
    db = tmp_path / "m.sqlite"
    with pytest.raises(InputError, match=r"is a CPU, not h100-sxm5-80gb.*--force"):
        api.measure_matmul(dtypes=["fp32"], hw=H100, budget=0.2, backend="numpy", reps=1,
                           db=db, catalog=catalog)
    run = api.measure_matmul(dtypes=["fp32"], hw=H100, budget="0.2s", backend="numpy", reps=1,
                             db=db, catalog=catalog, force=True)
    assert run.warnings and "because of --force" in run.warnings[0]
    with pytest.raises(InputError, match=r"ran on cpu.*not on a NVIDIA H100"):
        api.calibrate(api.open_store(db), H100, catalog=catalog)


@pytest.mark.parametrize("budget", [float("inf"), float("nan"), 0.0, -1.0, 1e400, "inf", "1e9s",
                                    "30 parsecs"])
def test_budget_is_a_finite_positive_time(tmp_path: Path, catalog: Catalog,
                                          budget: float | str) -> None:
    with pytest.raises(InputError, match=r"budget|duration"):
        api.measure_matmul(dtypes=["fp32"], budget=budget, backend="numpy",
                           db=tmp_path / "m.sqlite", catalog=catalog)


@pytest.mark.parametrize("size", ["-1 GiB", "0 GiB", "1 EiB", "2 GB/s"])
def test_bandwidth_buffer_is_bounded(tmp_path: Path, catalog: Catalog, size: str) -> None:
    with pytest.raises(InputError):
        api.measure_bandwidth(kernels=["copy"], budget=0.2, backend="numpy", sizes=[size],
                              db=tmp_path / "m.sqlite", catalog=catalog)
