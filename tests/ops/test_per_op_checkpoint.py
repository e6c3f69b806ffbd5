"""torchtitan's per-op selective activation checkpointing (issue 24 part 5): which outputs a
Llama block keeps and which ops re-run, checked by hand on Llama 3.1 8B, and its place between
the other policies; the torchtitan stack reads its "selective" as this policy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from accelmap.catalog import Catalog
from accelmap.memory.budget import activation_bytes
from accelmap.ops.graph import Stage
from accelmap.ops.step import training_ops
from accelmap.ops.training import per_op_split
from accelmap.validate.predict import Status, predict_cases
from accelmap.validate.read import read_cases
from accelmap.validate.resolve import parse_recompute
from accelmap.workload import Recompute, Training

T = 4096  # one sequence of 4,096 tokens
# Llama 3.1 8B: d 4096, 32 query heads and 8 KV heads of 128, SwiGLU width 14336, 32 layers
D, KV, F, L = 4096, 1024, 14336, 32


def _forward(catalog: Catalog, model: str = "llama-3.1-8b") -> list:
    ops = training_ops(catalog.models[model], Training(batch=1, seq_len=T))
    return [o for o in ops if o.stage is Stage.FORWARD]


def test_kept_outputs_by_hand(catalog: Catalog) -> None:
    # the block calls wq, wk, wv, wo, w1, w3, w2: the 1st, 3rd, 5th and 7th are kept (wq, wv,
    # w1, w2), plus SDPA's output O: (4096 + 1024 + 14336 + 4096 + 4096) bf16 values per token
    kept, _ = per_op_split(_forward(catalog), 2.0)
    assert kept == pytest.approx(T * (D + KV + F + D + D) * 2.0 * L)


def test_recompute_reruns_the_even_linears_and_the_elementwise_ops(catalog: Catalog) -> None:
    fwd = _forward(catalog)
    _, ops = per_op_split(fwd, 2.0)
    gemm = sum(o.flops * o.count for o in ops if o.gemm is not None)
    # wk (4096 x 1024), wo (4096 x 4096) and w3 (4096 x 14336), 2 FLOPs per multiply-add
    assert gemm == pytest.approx(2 * T * D * (KV + D + F) * L)
    names = {o.name for o in ops}
    assert {"layers/attention/norm/recompute", "layers/attention/rope/recompute",
            "layers/mlp/act/recompute"} <= names
    assert not any("attention/core" in n for n in names)  # SDPA's output is kept
    assert all(o.stage is Stage.RECOMPUTE and o.model_flops == 0.0 for o in ops)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b", "qwen3-30b-a3b"])
def test_per_op_memory_lies_between_full_and_none(catalog: Catalog, model: str) -> None:
    fwd = _forward(catalog, model)
    spec = catalog.models[model]
    got = {r: activation_bytes(fwd, r, spec, T, 2.0, working_set=False)
           for r in (Recompute.NONE, Recompute.PER_OP, Recompute.FULL)}
    assert got[Recompute.FULL] < got[Recompute.PER_OP] < got[Recompute.NONE]


def test_routed_experts_are_recomputed_whole(catalog: Catalog) -> None:
    # torch._grouped_mm is not aten.mm: the routed experts keep nothing and re-run in full
    fwd = _forward(catalog, "mixtral-8x7b")
    _, ops = per_op_split(fwd, 2.0)
    experts = {o.name: o for o in fwd if "/experts/" in o.name and o.gemm is not None}
    again = {o.name.removesuffix("/recompute"): o for o in ops}
    for name, o in experts.items():
        assert again[name].flops == pytest.approx(o.flops)


def test_words_and_the_torchtitan_stack(tmp_path: Path, catalog: Catalog) -> None:
    assert parse_recompute("per-op selective activation checkpointing") is Recompute.PER_OP
    assert parse_recompute("selective activation checkpointing") is Recompute.SELECTIVE
    run = {"id": "tt", "source": "test", "accelerator": "h100-sxm5-80gb",
           "model": "llama-3.1-8b", "devices": 16, "nodes": 2, "dp": 2, "pp": 8,
           "precision": "bf16", "framework": "torchtitan", "year": 2024, "seq_len": 8192,
           "global_batch": 64, "micro_batch": 1, "zero": 3, "recompute": "selective",
           "metric": "tokens_per_s_per_device", "value": 1000}
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump([run]))
    (p,) = predict_cases(read_cases(path).cases, catalog, frozenset())
    assert p.status is Status.OK, p.skipped_reason
    notes = " ".join(p.notes)
    assert "recompute selective: per-op" in notes
    # FSDP under pp: gathered once a step (torchtitan reshard_after_forward = not pp_enabled)
    assert "ZeRO-2's traffic" in notes and "zero=2" in notes
