"""The stored GPU ground truth (data/gpu/): every validate --local row re-predicted
with today's model, within issue 23's tolerances (15 % with the GPU's profile, 30 % without).
CI has no GPU: the rows are the stored measurements of a real one."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap.validate.gpu_truth import runs, truth_rows

ROOT = Path(__file__).resolve().parents[2] / "data" / "gpu"
ROWS = [r for f in runs(ROOT) for r in truth_rows(f)]
# Known short: the eager decode step is host-bound, and the measured seconds per dispatch of
# the profile's micro transformer (9.07 us) is below what the 1B model's decode step costs per
# dispatched op on the same host (20.8 ms / ~1,400 ops = ~14.8 us). Not tuned away; see the
# report of issue 23.
SHORT = {("h200-sxm-2026-11", "local/decode")}


def test_there_is_ground_truth() -> None:
    assert {r.row_id for r in ROWS} >= {"local/train", "local/prefill", "local/decode",
                                        "local/train/memory", "local/inference/memory"}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.run}:{r.row_id}")
def test_row_within_tolerance(row) -> None:  # type: ignore[no-untyped-def]
    if (row.run, row.row_id) in SHORT:
        pytest.xfail("host-bound eager decode: per-dispatch cost of the micro model too low")
    assert abs(row.error(row.with_profile)) <= 0.15
    assert abs(row.error(row.without_profile)) <= 0.30


def test_decode_is_said_host_bound() -> None:
    decode = next(r for r in ROWS if r.row_id == "local/decode")
    assert "host-bound" in decode.note and "dispatched ops x" in decode.note
    prefill = next(r for r in ROWS if r.row_id == "local/prefill")
    assert "device-bound" in prefill.note
