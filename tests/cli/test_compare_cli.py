"""`accelmap compare`: the issue's exact --json command, every class, a table, one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Run = Callable[..., Any]

FIELDS = {"accelerator", "class", "devices", "mapping", "tokens_per_s_per_user",
          "tokens_per_s", "ttft_s", "tpot_s", "usd_per_million_tokens", "energy_j_per_token_tdp",
          "notes"}
CLASSES = {"gpu", "tpu", "asic", "sram-machine", "fpga", "edge-npu", "cpu"}


def test_the_issue_command(cli: Run) -> None:
    r = cli("compare", "llama-3.1-8b", "--serve", "--batch", "1", "--hw", "all", "--json")
    assert r.code == 0, r.err
    assert r.err == ""  # no progress bar or chatter in --json
    out = json.loads(r.out)
    rows = out["rows"]
    assert len(rows) >= 50
    assert all(set(row) >= FIELDS for row in rows)
    assert {row["class"] for row in rows} == CLASSES
    for row in rows:
        # a number or the reason it is missing
        assert row["feasible"] or row["reason"]
        if row["feasible"]:
            assert row["tokens_per_s"] > 0 and row["tpot_s"] > 0 and row["devices"] >= 1
            assert row["execution_model"]
        if row["feasible"] and row["usd_per_million_tokens"] is None:
            assert any("price" in n for n in row["notes"])
        # the same precision everywhere unless the row says why not
        assert row["precision"] == "bf16" or any("->" in n for n in row["notes"])
    feasible = [row for row in rows if row["feasible"]]
    assert {row["class"] for row in feasible} >= {"gpu", "tpu", "asic", "sram-machine",
                                                  "fpga", "edge-npu", "cpu"}
    speeds = [row["tokens_per_s_per_user"] for row in feasible]
    assert speeds == sorted(speeds, reverse=True)
    assert rows[-1]["feasible"] is False  # infeasible rows last


def test_text_table(cli: Run) -> None:
    r = cli("compare", "llama-3.1-70b", "--hw", "h100-sxm5-80gb,gaudi3,coral-edge-tpu")
    assert r.code == 0, r.err
    for text in ("h100-sxm5-80gb", "gaudi3", "coral-edge-tpu", "execution model",
                 "no price quote in the catalog: gaudi3", "does not run"):
        assert text in r.out


def test_bad_input_is_one_line(cli: Run) -> None:
    for args, text in ((("--hw", "nosuch"), "unknown accelerator"),
                       (("--objective", "fast"), "unknown objective"),
                       (("--devices", "8", "--budget-usd-h", "10"), "not both"),
                       (("--budget-usd-h", "inf"), "positive $ per hour"),
                       (("--hw", ""), "--hw is empty")):
        r = cli("compare", "llama-3.1-8b", *args)
        assert r.code != 0
        lines = [ln for ln in r.err.splitlines() if ln.strip()]
        assert len(lines) == 1 and text in lines[0] and "Traceback" not in r.err


def test_figures_without_an_error_band_say_so(cli: Run) -> None:
    """A class with too few published runs gets no band, and the output says it has none."""
    r = cli("compare", "llama-3.1-8b", "--serve", "--hw", "wse-3,h100-sxm5-80gb")
    assert r.code == 0, r.err
    assert "expected error:" in r.out
    assert "no error band" in r.out and "wse-3" in r.out.split("no error band")[1]
    e = cli("estimate", "llama-3.1-8b", "--hw", "wse-3", "--serve")
    assert e.code == 0 and "no error band" in e.out
