"""The precision words on the command line and in run files: nvfp4/mxfp4/fp4/mxfp8 weights,
--moe-weights, KV formats, training recipes; one line and exit 2 for what cannot be."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., Any]
RUNS = Path(__file__).parent.parent / "fixtures" / "runs" / "formats.yaml"
KNOWN = "fp64, fp32, tf32, bf16, fp16, fp8, int8, fp4, int4, nvfp4, mxfp4, mxfp6, mxfp8"


@pytest.mark.parametrize("args", [
    ("--serve", "--weights", "nvfp5"),
    ("--serve", "--weights", "fp8", "--moe-weights", "fp5"),
    ("--serve", "--kv", "int3"),
    ("--train", "--dtype", "nvfp"),
])
def test_unknown_precision_word_is_one_line_naming_the_known(cli: Run, args: tuple[str, ...]
                                                             ) -> None:
    r = cli("estimate", "llama-3.1-8b", "--hw", "b200", *args)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert r.code == 2 and len(lines) == 1 and KNOWN in lines[0], r.err


@pytest.mark.parametrize(("hw", "args", "why"), [
    ("h100-sxm5-80gb", ("--serve", "--kv", "nvfp4"), "Blackwell"),
    ("b200", ("--serve", "--kv", "mxfp4"), "no public serving stack"),
    ("h100-sxm5-80gb", ("--train", "--dtype", "nvfp4"), "cannot run"),
    ("mi355x", ("--train", "--dtype", "nvfp4"), "runs mxfp4, mxfp6, mxfp8"),
])
def test_a_format_the_part_cannot_run_is_one_line(cli: Run, hw: str, args: tuple[str, ...],
                                                  why: str) -> None:
    r = cli("estimate", "llama-3.1-8b", "--hw", hw, *args)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert r.code == 2 and len(lines) == 1 and why in lines[0], r.err
    assert "Traceback" not in r.err


def test_fp4_serving_says_how_it_runs(cli: Run) -> None:
    r = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve", "--weights", "fp4",
            "--json")
    assert r.code == 0, r.err
    notes = " ".join(json.loads(r.out)["assumptions"])
    assert "nvfp4 weights" in notes and "weight-only" in notes and "4.5 bits" in notes


def test_mixed_recipe_on_the_command_line(cli: Run) -> None:
    base = ("estimate", "deepseek-v3", "--cluster", "8xb200", "--serve", "--tp", "8",
            "--prompt", "1024", "--output", "256", "--batch", "16", "--json")
    fp8 = json.loads(cli(*base, "--weights", "fp8").out)
    mixed = json.loads(cli(*base, "--weights", "fp8", "--moe-weights", "nvfp4").out)
    w8, w4 = (x["memory"]["breakdown"]["weights"] for x in (fp8, mixed))
    assert 0.55 < w4 / w8 < 0.6  # experts (97 % of the weights) at 4.5 of 8 bits
    assert mixed["tpot_s"] < fp8["tpot_s"]


def test_run_files_with_the_new_words(cli: Run) -> None:
    r = cli("validate", "--cases", str(RUNS), "--json")
    assert r.code == 0, r.err
    rows = {row["row_id"]: row for row in json.loads(r.out)["rows"]}
    assert rows["F1"]["status"] == "ok" and rows["F1"]["predicted"] > 0  # NVFP4 serving
    assert rows["F3"]["status"] == "ok" and rows["F3"]["predicted"] > 0  # NVFP4 training
    assert any("nvfp4 training recipe" in n for n in rows["F3"]["notes"])
    assert any("nvfp4 weights" in n and "block-scaled" in n for n in rows["F1"]["notes"])
    assert "NVFP4 KV cache" in rows["F2"]["skipped_reason"]
    assert "nvfp4, mxfp4, fp4, mxfp8" in rows["F4"]["skipped_reason"]
    assert rows["F5"]["status"] == "ok" and rows["F5"]["predicted"] > 0  # moe_precision
