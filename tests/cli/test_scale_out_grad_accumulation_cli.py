"""`accelmap estimate --scale-out` (the inter-node network as published), `--grad-accumulation`
(a stack's own accumulation pass) and `--pp-sends` (DeepSpeed's blocking stage sends,
workload.PipeSends): slower where they should be, one error line where they mean nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Run = Callable[..., Any]
# 16 A100 nodes, data parallel over the scale-out network
TRAIN = ("estimate", "gpt3-13b", "--cluster", "128xa100-sxm4-80gb", "--train", "--batch",
         "512", "--seq", "2048", "--tp", "8", "--pp", "2", "--micro-batch", "1", "--json")
# four stages in different nodes: a middle stage waits on both neighbours
PP4 = tuple("4" if a == "2" and TRAIN[i - 1] == "--pp" else a for i, a in enumerate(TRAIN))


def _step(cli: Run, *extra: str, train: tuple[str, ...] = TRAIN) -> float:
    r = cli(*train, *extra)
    assert r.code == 0, r.err
    return float(json.loads(r.out)["step_time_s"])


def test_a_slower_network_and_an_fp32_copy_pass_slow_the_step(cli: Run) -> None:
    base = _step(cli)
    assert _step(cli, "--scale-out", "8 x 200 Gb/s") == base  # the DGX A100 preset's own
    assert _step(cli, "--scale-out", "25 Gb/s per node") > base
    assert _step(cli, "--grad-accumulation", "fp32-copy") > base


def test_refusals_are_one_line(cli: Run) -> None:
    one = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--train",
              "--scale-out", "400 Gb/s per GPU")
    bad = cli(*TRAIN, "--scale-out", "fast")
    word = cli(*TRAIN, "--grad-accumulation", "fp16")
    serve = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve",
                "--grad-accumulation", "autograd")
    assert one.code == 2 and "several nodes" in one.err
    assert bad.code == 2 and "per GPU" in bad.err
    assert word.code == 2 and "fused, autograd, fp32-copy" in word.err
    assert serve.code == 2 and "training option" in serve.err
    assert all(len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
               for r in (one, bad, word, serve))


def test_blocking_pipeline_sends_slow_the_step(cli: Run) -> None:
    base = _step(cli, "--pp-sends", "batched", train=PP4)
    assert base == _step(cli, train=PP4)  # the default
    blocking = _step(cli, "--pp-sends", "blocking", train=PP4)
    assert base < blocking < _step(cli, "--pp-sends", "blocking-whole-grad", train=PP4)


def test_pp_sends_refusals_are_one_line(cli: Run) -> None:
    word = cli(*PP4, "--pp-sends", "async")
    serve = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve",
                "--pp-sends", "blocking")
    assert word.code == 2 and "batched, blocking, blocking-whole-grad" in word.err
    assert serve.code == 2 and "training option" in serve.err
    assert all(len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
               for r in (word, serve))
