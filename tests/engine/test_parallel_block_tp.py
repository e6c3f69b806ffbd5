"""A parallel attention + MLP block reduces its tensor-parallel activations fewer times than a
sequential one (engine/profile.py tp_collectives): PaLM and GPT-J one forward and one
backward reduction a layer, GPT-NeoX (a norm per branch) one and two, sequential blocks two and
two."""

from __future__ import annotations

import pytest

from accelmap.catalog import load_catalog
from accelmap.engine import estimate
from accelmap.engine.profile import tp_collectives
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping
from accelmap.workload import Recompute, Training

CAT = load_catalog()


def test_counts_by_block_shape() -> None:
    assert tp_collectives(CAT.models["palm-540b"]) == (1.0, 1.0)
    assert tp_collectives(CAT.models["gpt-j-6b"]) == (1.0, 1.0)
    assert tp_collectives(CAT.models["gpt-neox-20b"]) == (1.0, 2.0)
    assert tp_collectives(CAT.models["llama-3.1-8b"]) == (2.0, 2.0)


@pytest.mark.parametrize("recompute", [Recompute.NONE, Recompute.FULL])
def test_parallel_block_halves_the_tp_traffic(recompute: Recompute) -> None:
    """GPT-J as it is and as the same model with sequential blocks: the TP traffic of the
    parallel one is half (the recompute's re-run forward collectives included)."""
    spec = CAT.models["gpt-j-6b"]
    seq = spec.model_copy(update={"parallel_block": False})
    cl = parse_cluster("8xa100-sxm4-80gb", CAT)
    wl = Training(batch=8, seq_len=2048, recompute=recompute)
    m = Mapping(tp=8, micro_batch=1)
    par, ser = estimate(spec, cl, wl, m), estimate(seq, cl, wl, m)
    assert par.metrics["communication_s"]["tp"] == pytest.approx(
        ser.metrics["communication_s"]["tp"] / 2, rel=1e-9)
