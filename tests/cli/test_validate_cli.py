"""`accelmap validate`: JSON schema, table output, calibration rows apart, bad input one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelmap.validate.predict import calibration_rows

FIX = Path(__file__).parent.parent / "fixtures" / "measurements"
ALL = ("--cases", str(FIX / "inference.csv"), "--cases", str(FIX / "matmul.csv"),
       "--cases", str(FIX / "training.csv"))

Run = Callable[..., Any]


def one_line_error(result: Any) -> str:
    assert result.code != 0
    assert "Traceback" not in result.err + result.out
    lines = [ln for ln in result.err.splitlines() if ln.strip()]
    assert len(lines) == 1, result.err
    return lines[0]


def test_json_schema(cli: Run) -> None:
    r = cli("validate", *ALL, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert set(data) == {"rows", "summary"}
    need = {"row_id", "metric", "measured", "predicted", "abs_pct_error", "skipped_reason"}
    assert data["rows"] and all(need <= set(row) for row in data["rows"])
    assert {"n", "median_abs_pct_error", "p90_abs_pct_error"} <= set(data["summary"])
    by_id = {row["row_id"]: row for row in data["rows"]}
    # multi-device rows go through the distributed engine and carry their step breakdown
    assert by_id["I0009"]["skipped_reason"] is None and by_id["I0009"]["predicted"] > 0
    assert by_id["I0005"]["predicted"] > 0 and by_id["I0005"]["abs_pct_error"] >= 0
    assert by_id["T0048"]["breakdown"]["backward"] > 0
    assert {"training", "inference"} <= set(data["summary"]["by_phase"])
    assert "n_not_fit" in data["summary"]["by_source"]["megatron_readme_jan2021"]


def test_calibration_rows_listed_apart_not_scored(cli: Run) -> None:
    data = json.loads(cli("validate", *ALL, "--json").out)
    rows = data["rows"]
    cal = {r["row_id"] for r in rows if r["status"] == "calibration"}
    assert "M0021" in cal
    assert cal == calibration_rows() & {r["row_id"] for r in rows}
    scored = [r for r in rows if r["status"] == "ok"]
    assert data["summary"]["n"] == len(scored)
    assert sorted(data["summary"]["calibration_rows"]) == sorted(cal)


def test_table_output(cli: Run) -> None:
    r = cli("validate", *ALL)
    assert r.code == 0, r.err
    assert "I0005" in r.out and "M0002" in r.out and "Error summary" in r.out
    assert "phase: training" in r.out and "not fit" in r.out
    assert "no catalog preset" in r.out  # skipped rows, grouped by reason
    shown = cli("validate", *ALL, "--show-skipped")
    assert "T0317" in shown.out


@pytest.mark.parametrize(("args", "match"), [
    ((), "pass --cases"),
    (("--cases", "/no/such/file.csv"), "no such file"),
])
def test_bad_input_one_line(cli: Run, args: tuple[str, ...], match: str) -> None:
    assert match in one_line_error(cli("validate", *args))


def test_bad_files_one_line(cli: Run, tmp_path: Path) -> None:
    odd = tmp_path / "odd.csv"
    odd.write_text("x,y\n1,2\n")
    assert "unknown measurement format" in one_line_error(cli("validate", "--cases", str(odd)))
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("row_id,accelerator,dtype,kind,measured_value,measured_unit\nM1,x\n")
    assert "ragged.csv:2" in one_line_error(cli("validate", "--cases", str(ragged)))
