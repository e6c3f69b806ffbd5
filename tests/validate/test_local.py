"""validate --local end to end: a tiny real run on this CPU next to accelmap's prediction (rows,
summary, stored measurements), and the errors that come before any run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.hardware.local import local_cpu
from accelmap.measure.local_run import scale_spec
from accelmap.measure.records import Kind
from accelmap.measure.store import Store
from accelmap.models.params import count_params
from accelmap.units import DType

pytest.importorskip("torch")


def _local_profile(store: Store) -> str:
    store.save_profile(CalibrationProfile(
        name="test-cpu", accelerator_id=local_cpu().id, matmul_efficiency={DType.FP32: 0.5},
        bandwidth=10e9, source="synthetic, for the test"))
    return "test-cpu"


TINY_RUN = ("--scale", "tiny", "--steps", "2", "--warmup", "1", "--seq", "64", "--batch", "2",
            "--decode-tokens", "4", "--device", "cpu")


def test_validate_local_json_rows(cli: Callable[..., Any], tmp_path: Path,
                                  catalog: Catalog) -> None:
    db = tmp_path / "m.sqlite"
    profile = _local_profile(Store(db))
    r = cli("validate", "--local", "gpt3-125m", *TINY_RUN, "--db", str(db), "--profile",
            profile, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    rows = {row["row_id"]: row for row in data["rows"]}
    assert set(rows) == {"local/train", "local/train/memory", "local/prefill", "local/decode",
                         "local/inference/memory"}
    for row in rows.values():
        assert row["measured"] > 0 and row["predicted"] > 0, row
        assert row["abs_pct_error"] is not None and row["status"] == "ok"
        assert row["model_id"] == "gpt3-125m.tiny"
    assert rows["local/train"]["metric"] == "step_time_s" and rows["local/train"]["unit"] == "s"
    assert any("test-cpu" in n for n in rows["local/decode"]["notes"])
    summary = data["summary"]
    assert summary["n"] == 5 and set(summary["by_quantity"]) == {"time", "memory"}
    tiny, _ = scale_spec(catalog.models["gpt3-125m"], "tiny")
    assert data["run"]["params"] == count_params(tiny).total
    stored = Store(db).query(kind=Kind.LOCAL_RUN)
    assert sorted(m.unit for m in stored) == ["B", "B", "s", "s", "s"]
    assert {m.label.split()[0] for m in stored} == {"train", "prefill", "decode", "inference"}
    env = stored[0].environment
    assert env.backend == "torch" and env.device == "cpu" and env.threads
    assert env.accelerator_id == local_cpu().id and data["run"]["device"] == env.label


def test_validate_local_table(cli: Callable[..., Any], tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    r = cli("validate", "--local", "gpt3-125m", *TINY_RUN, "--db", str(db), "--hw",
            "xeon-8480plus")
    assert r.code == 0, r.err
    assert "local/train" in r.out and "local/decode" in r.out and "3,152,896 parameters" in r.out


def test_local_cpu_without_bandwidth_fails_before_running(cli: Callable[..., Any],
                                                          tmp_path: Path) -> None:
    r = cli("validate", "--local", "gpt3-125m", *TINY_RUN, "--db", str(tmp_path / "m.sqlite"))
    assert r.code == 2 and "accelmap measure bandwidth" in r.err


def test_unknown_profile_and_both_inputs(cli: Callable[..., Any], tmp_path: Path) -> None:
    r = cli("validate", "--local", "gpt3-125m", "--db", str(tmp_path / "m.sqlite"),
            "--profile", "nope")
    assert r.code == 2 and "nope" in r.err
    r = cli("validate", "--local", "gpt3-125m", "--cases", "x.csv")
    assert r.code == 2 and "not both" in r.err
