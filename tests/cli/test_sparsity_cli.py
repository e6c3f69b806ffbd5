"""`accelmap estimate --sparsity 2:4`: faster than dense but by less than 2x, smaller weights,
notes that name the speedup and its source; one error line where the part has no 2:4 mode."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

Run = Callable[..., Any]
H100 = ("--hw", "h100-sxm5-80gb")


def j(r: Any) -> Any:
    assert r.code == 0, r.err
    return json.loads(r.out)


@pytest.mark.parametrize("batch", ["1", "64"])
def test_serve_2_4_on_h100(cli: Run, batch: str) -> None:
    args = ("estimate", "llama-3.1-8b", *H100, "--serve", "--batch", batch, "--prompt", "1024",
            "--output", "128", "--json")
    dense, sparse = j(cli(*args)), j(cli(*args, "--sparsity", "2:4"))
    for key in ("ttft_s", "tpot_s"):
        assert 1.0 < dense[key] / sparse[key] < 2.0, key
    assert 1.0 < sparse["tokens_per_s"] / dense["tokens_per_s"] < 2.0
    w_dense = dense["memory"]["breakdown"]["weights"]
    w_sparse = sparse["memory"]["breakdown"]["weights"]
    assert 0.5 * w_dense < w_sparse < w_dense
    notes = " ".join(sparse["assumptions"])
    assert "2:4 sparsity:" in notes and "SLIDESPARSE-B" in notes and "H100" in notes
    assert "2:4 sparsity bought" in notes


def test_train_2_4_on_h100(cli: Run) -> None:
    args = ("estimate", "gpt3-1.3b", *H100, "--train", "--batch", "8", "--seq", "2048",
            "--json")
    dense, sparse = j(cli(*args)), j(cli(*args, "--sparsity", "2:4"))
    assert 1.0 < dense["step_time_s"] / sparse["step_time_s"] < 2.0
    # dense parameters, gradients and optimizer states; the compressed copies are activations
    for key in ("weights", "gradients", "optimizer"):
        assert sparse["memory"]["breakdown"][key] == dense["memory"]["breakdown"][key]
    assert (sparse["memory"]["breakdown"]["activations"]["total_bytes"]
            > dense["memory"]["breakdown"]["activations"]["total_bytes"])
    notes = " ".join(sparse["assumptions"])
    assert "wgrad dense" in notes and "SLIDESPARSE-B" in notes


def test_sparsity_in_the_text_report(cli: Run) -> None:
    r = cli("estimate", "llama-3.1-8b", *H100, "--serve", "--sparsity", "2:4")
    assert r.code == 0 and "2:4 sparsity bought" in r.out


@pytest.mark.parametrize("args, text", [
    (("--hw", "tpu-v5e", "--serve"), "2:4 sparsity is not supported on tpu-v5e ("),
    (("--hw", "v100-sxm2-32gb", "--serve"), "2:4 sparsity is not supported on v100-sxm2-32gb ("),
    (("--hw", "gaudi3", "--train"), "2:4 sparsity is not supported on gaudi3 ("),
    (("--hw", "a100-sxm4-80gb", "--serve", "--weights", "fp8"), "for fp8 GEMMs"),
    ((*H100, "--train", "--dtype", "fp8"), "16-bit GEMMs"),
])
def test_unsupported_is_one_error_line_and_exit_2(cli: Run, args: tuple[str, ...],
                                                  text: str) -> None:
    r = cli("estimate", "gpt3-125m", *args, "--sparsity", "2:4")
    assert r.code == 2
    assert text in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_unknown_sparsity_pattern(cli: Run) -> None:
    r = cli("estimate", "gpt3-125m", *H100, "--sparsity", "1:4")
    assert r.code == 2 and "unknown sparsity" in r.err
