"""`accelmap estimate --train --dtype fp8 --fp8-scaling rowwise`: torchao's row-wise recipe costs
more than tensor-wise scaling (ops/recipes.py); one error line where it means nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Run = Callable[..., Any]
TRAIN = ("estimate", "llama-3.1-8b", "--cluster", "8xH100", "--train", "--batch", "32",
         "--seq", "4096", "--zero", "3", "--json")


def test_rowwise_is_slower_than_tensorwise(cli: Run) -> None:
    runs = {s: cli(*TRAIN, "--dtype", "fp8", "--fp8-scaling", s) for s in ("tensorwise",
                                                                          "rowwise")}
    assert all(r.code == 0 for r in runs.values()), [r.err for r in runs.values()]
    steps = {s: json.loads(r.out)["step_time_s"] for s, r in runs.items()}
    assert steps["tensorwise"] < steps["rowwise"] < 1.5 * steps["tensorwise"]


def test_fp8_scaling_refusals_are_one_line(cli: Run) -> None:
    bf16 = cli(*TRAIN, "--fp8-scaling", "rowwise")
    assert bf16.code == 2 and "--dtype fp8" in bf16.err and "Traceback" not in bf16.err
    word = cli(*TRAIN, "--dtype", "fp8", "--fp8-scaling", "row")
    assert word.code == 2 and "tensorwise, rowwise" in word.err
    serve = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve",
                "--fp8-scaling", "rowwise")
    assert serve.code == 2 and "training option" in serve.err
    assert all(len(r.err.strip().splitlines()) == 1 for r in (bf16, word, serve))


def test_the_default_word_in_any_case_is_no_refusal(cli: Run) -> None:
    """Serving with the default written as a user might (TENSORWISE) is no training option:
    the same case-blind reading as the training path's."""
    r = cli("estimate", "llama-3.2-1b", "--hw", "h100-sxm5-80gb", "--serve",
            "--fp8-scaling", "TENSORWISE", "--json")
    assert r.code == 0, r.err
    assert cli(*TRAIN, "--dtype", "fp8", "--fp8-scaling", "ROWWISE").code == 0
