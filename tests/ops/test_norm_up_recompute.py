"""DeepSeek-V3's activation policy (``Recompute.NORM_UP``, arXiv:2412.19437 sec. 3.2.3 and
3.3.4): the norms, MLA's up-projections and the MoE SwiGLU re-run in the backward; what each
layer keeps, checked by hand on DeepSeek-V3's dimensions, and its place among the policies."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.memory.budget import activation_bytes
from accelmap.ops.graph import Stage
from accelmap.ops.step import training_ops
from accelmap.ops.training import norm_up_split, recompute_ops
from accelmap.validate.resolve import parse_recompute
from accelmap.workload import Recompute, Training

T = 4096  # one sequence


def _forward(catalog: Catalog, model: str) -> list:
    ops = training_ops(catalog.models[model], Training(batch=1, seq_len=T))
    return [o for o in ops if o.stage is Stage.FORWARD]


def _kept(fwd: list, name: str, fp8: bool = False) -> float:
    """What one op keeps under the policy."""
    kept, _ = norm_up_split([o for o in fwd if o.name == name], fp8)
    return kept


def test_mla_keeps_the_attention_output_and_the_latents(catalog: Catalog) -> None:
    """DeepSeek-V3: 128 heads, v_head_dim 128: the core keeps O (T x 16384 bf16) where it kept
    Q, K (192 wide a head), V and O; the down-projections a norm feeds keep nothing; the
    up-projections keep their latent inputs (1536 and 512 wide)."""
    fwd = _forward(catalog, "deepseek-v3")
    spec = catalog.models["deepseek-v3"]
    up, core, out = (next(o for o in fwd if o.name == f"layers/attention/{n}")
                     for n in ("kv_up", "core", "out"))  # the first group's
    kept, _ = norm_up_split([up, core, out])  # MLA: the up-projections are in the graph
    others = float(up.saved) * up.count + float(out.saved) * out.count
    assert kept - others == pytest.approx(T * 128 * 128 * 2 * core.count)
    assert float(core.saved) > 4 * T * 128 * 128 * 2  # Q, K, V and O before
    for name in ("layers/attention/q_down", "layers/attention/kv_down", "layers/moe/router",
                 "layers/moe/experts/down", "layers/mlp/up"):
        assert _kept(fwd, name) == 0.0, name
    for name in ("layers/attention/q_up", "layers/attention/kv_up", "layers/attention/norm"):
        # the 3 dense and the 58 MoE layers are two groups of the graph
        saved = sum(float(x.saved) * x.count for x in fwd if x.name == name)
        assert _kept(fwd, name) == pytest.approx(saved), name
    act = next(o for o in fwd if o.name == "layers/moe/experts/act")
    assert _kept(fwd, act.name, fp8=True) == pytest.approx(float(act.saved) * act.count / 2)
    assert spec.n_layers == 61


def test_recompute_reruns_norms_up_projections_and_swiglu(catalog: Catalog) -> None:
    fwd = _forward(catalog, "deepseek-v3")
    ops = recompute_ops(fwd, Recompute.NORM_UP, flash=True)
    names = {o.name.removesuffix("/recompute") for o in ops}
    assert names == {"layers/attention/norm", "layers/mlp/norm", "layers/attention/q_up",
                     "layers/attention/kv_up", "layers/moe/experts/act",
                     "layers/moe/shared/act"}
    assert all(o.stage is Stage.RECOMPUTE and o.model_flops == 0.0 for o in ops)


@pytest.mark.parametrize("model", ["deepseek-v3", "llama-3.1-8b", "mixtral-8x7b"])
def test_norm_up_keeps_less_than_no_recompute(catalog: Catalog, model: str) -> None:
    """Below keeping everything; for DeepSeek-V3 below selective recompute too (Q, K and V are
    most of what MLA's flash attention keeps); other attention keeps its Q, K and V."""
    fwd = _forward(catalog, model)
    spec = catalog.models[model]
    got = {r: activation_bytes(fwd, r, spec, T, 2.0, working_set=False)
           for r in (Recompute.NONE, Recompute.SELECTIVE, Recompute.NORM_UP, Recompute.FULL)}
    assert got[Recompute.FULL] < got[Recompute.NORM_UP] < got[Recompute.NONE]
    if model == "deepseek-v3":
        assert got[Recompute.NORM_UP] < 0.6 * got[Recompute.SELECTIVE]


def test_the_word(catalog: Catalog) -> None:
    assert parse_recompute("norm-up") is Recompute.NORM_UP
    assert Recompute("norm-up") is Recompute.NORM_UP
