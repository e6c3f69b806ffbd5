"""`accelmap validate` on canonical run files (docs/validate-format.md): predicted through the
same path, unreadable records skipped with their fix, a file that is no run file one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

RUNS = Path(__file__).parent.parent / "fixtures" / "runs"
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "validate-runs.yaml"

Run = Callable[..., Any]


def test_run_files_are_predicted(cli: Run) -> None:
    r = cli("validate", "--cases", str(RUNS / "runs.yaml"), "--cases", str(EXAMPLE), "--json")
    assert r.code == 0, r.err
    rows = {row["row_id"]: row for row in json.loads(r.out)["rows"]}
    assert rows["R1"]["predicted"] > 0 and rows["R1"]["model_id"] == "llama-3.1-70b"
    assert rows["R3"]["metric"] == "step_time_s"
    assert rows["T0328"]["status"] == "calibration"  # a calibration row stays one


def test_unreadable_records_show_their_fix(cli: Run) -> None:
    r = cli("validate", "--cases", str(RUNS / "unreadable.yaml"))
    assert r.code == 0, r.err
    out = " ".join(r.out.split())
    assert "field 'zero': 'FSDP=0' is not one of 0, 1, 2, 3, fsdp; write zero: 0" in out
    assert "Traceback" not in r.out + r.err


def test_not_a_run_file_is_one_line(cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "runs.yaml"
    bad.write_text("accelerator: h100\n")
    r = cli("validate", "--cases", str(bad))
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert r.code != 0 and len(lines) == 1 and "list of runs" in lines[0]
