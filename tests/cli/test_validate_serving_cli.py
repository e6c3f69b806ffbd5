"""`accelmap validate` on serving rows: offline rows predicted with numbers, MLPerf rows without
an input length skipped with the reason, serving run files predicted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent.parent / "fixtures"
Run = Callable[..., Any]


def test_serving_rows_json(cli: Run) -> None:
    r = cli("validate", "--cases", str(FIXTURES / "measurements" / "serving.csv"), "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    rows = {row["row_id"]: row for row in data["rows"]}
    for rid in ("S0001", "S0053"):
        assert rows[rid]["status"] == "ok" and rows[rid]["predicted"] > 0
        assert rows[rid]["kind"] == "offline throughput"
    assert rows["S0118"]["kind"] == "server throughput"
    assert rows["S0119"]["kind"] == "latency percentiles"
    assert "input length not stated" in rows["S0117"]["skipped_reason"]
    assert data["summary"]["by_kind"]["offline throughput"]["n"] == 2


def test_serving_run_file(cli: Run) -> None:
    r = cli("validate", "--cases", str(FIXTURES / "runs" / "serving.yaml"), "--json")
    assert r.code == 0, r.err
    rows = {row["row_id"]: row for row in json.loads(r.out)["rows"]}
    assert rows["SV1"]["status"] == "ok" and rows["SV1"]["predicted"] > 0
    assert rows["SV2"]["status"] == "ok" and rows["SV2"]["unit"] == "ms"
    assert any("highest Poisson rate" in n for n in rows["SV2"]["notes"])
