"""`accelmap estimate --pp-sends` (how pipeline stages send to each other, workload.PipeSends):
DeepSpeed's blocking sends slow a pipelined step across nodes, the whole gradient more; one
error line where the word or the mode is wrong."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Run = Callable[..., Any]
# 16 A100 nodes, the pipeline's stages in different nodes
TRAIN = ("estimate", "gpt3-13b", "--cluster", "128xa100-sxm4-80gb", "--train", "--batch",
         "512", "--seq", "2048", "--tp", "8", "--pp", "4", "--micro-batch", "1", "--json")


def _step(cli: Run, *extra: str) -> float:
    r = cli(*TRAIN, *extra)
    assert r.code == 0, r.err
    return float(json.loads(r.out)["step_time_s"])


def test_blocking_sends_slow_the_step(cli: Run) -> None:
    base = _step(cli, "--pp-sends", "batched")
    assert base == _step(cli)  # the default
    blocking = _step(cli, "--pp-sends", "blocking")
    assert base < blocking < _step(cli, "--pp-sends", "blocking-whole-grad")


def test_refusals_are_one_line(cli: Run) -> None:
    word = cli(*TRAIN, "--pp-sends", "async")
    serve = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve",
                "--pp-sends", "blocking")
    assert word.code == 2 and "batched, blocking, blocking-whole-grad" in word.err
    assert serve.code == 2 and "training option" in serve.err
    assert all(len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
               for r in (word, serve))
