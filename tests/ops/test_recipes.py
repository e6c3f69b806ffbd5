"""Block-scaled training recipes: which GEMM runs in which format (ops/recipes.py)."""

from __future__ import annotations

import pytest

from accelmap import api
from accelmap.errors import InputError
from accelmap.ops.graph import Stage, Unit
from accelmap.ops.recipes import RECIPES, RHT_FLOPS, ROWWISE_CAST_FACTOR, ROWWISE_RESCALE_BYTES
from accelmap.ops.step import training_ops
from accelmap.units import DType
from accelmap.workload import Fp8Scaling, Training


def _ops(dtype: DType) -> list:  # type: ignore[type-arg]
    return training_ops(api.load_model("llama-3.1-8b"), Training(batch=1, seq_len=4096,
                                                                 dtype=dtype))


def _layer_gemms(ops: list, stage: Stage) -> list:  # type: ignore[type-arg]
    return [o for o in ops if o.gemm is not None and o.name.startswith("layers/")
            and o.stage is stage]


@pytest.mark.parametrize("dtype", [DType.NVFP4, DType.MXFP8, DType.MXFP4])
def test_fprop_dgrad_wgrad_in_the_recipe_format(dtype: DType) -> None:
    ops = _ops(dtype)
    r = RECIPES[dtype]
    for stage, fmt in ((Stage.FORWARD, r.forward), (Stage.BACKWARD_DGRAD, r.dgrad),
                       (Stage.BACKWARD_WGRAD, r.wgrad)):
        gemms = _layer_gemms(ops, stage)
        low = sum(o.count * o.flops for o in gemms if o.dtype is fmt)
        high = sum(o.count * o.flops for o in gemms if o.dtype is DType.BF16)
        assert low > 0
        # the selective high-precision layers: their share of the GEMM work, in bf16
        assert high / (low + high) == pytest.approx(r.high_precision_fraction, abs=1e-9)
    head = [o for o in ops if o.name.startswith("lm_head") and o.gemm is not None]
    assert head and all(o.dtype is DType.BF16 for o in head)
    assert not any(o.name.startswith("lm_head/fp8_cast") for o in ops)


def test_nvfp4_transforms_the_wgrad_inputs_and_mxfp8_does_not() -> None:
    nv, mx = _ops(DType.NVFP4), _ops(DType.MXFP8)
    rht = [o for o in nv if o.name.endswith("/rht")]
    wgrads = [o for o in _layer_gemms(nv, Stage.BACKWARD_WGRAD) if o.dtype is DType.NVFP4]
    assert len(rht) == len(wgrads) and all(o.unit is Unit.VECTOR for o in rht)
    m, n, k = wgrads[0].gemm
    assert rht[0].flops == pytest.approx(RHT_FLOPS * k * (m + n))
    assert not any(o.name.endswith("/rht") for o in mx)


def test_quantize_kernels_write_the_block_scales() -> None:
    """The cast before each GEMM writes the format with its scales: MXFP8's 8.25 bits, twice
    (row- and column-wise copies) in training, against FP8's 8."""
    fp8 = {o.name: o for o in _ops(DType.FP8) if o.name.endswith("/fp8_cast")}
    mx8 = {o.name: o for o in _ops(DType.MXFP8) if o.name.endswith("/fp8_cast")}
    name = "layers/mlp/up/fp8_cast"
    act = DType.BF16.bytes
    per_elem_fp8 = act + 2 * DType.FP8.bytes
    per_elem_mx8 = act + 2 * DType.MXFP8.bytes
    ratio = mx8[name].bytes["activations"] / fp8[name].bytes["activations"]
    assert ratio == pytest.approx(per_elem_mx8 / per_elem_fp8)


def test_fp8_and_bf16_are_untouched() -> None:
    for dtype in (DType.FP8, DType.BF16):
        ops = _ops(dtype)
        assert not any(o.name.endswith(("/rht", "/bf16")) for o in ops)


def _fp8(scaling: Fp8Scaling) -> list:  # type: ignore[type-arg]
    return training_ops(api.load_model("llama-3.1-8b"),
                        Training(batch=1, seq_len=4096, dtype=DType.FP8, fp8_scaling=scaling))


def test_rowwise_rescales_each_fp8_gradient_gemm_output() -> None:
    """torchao's row-wise recipe: cuBLAS writes each dgrad/wgrad output in fp32 and a kernel of
    its own scales it to bf16 (pytorch/ao PR #1325); one dgrad output per fused nn.Linear."""
    tensor, row = _fp8(Fp8Scaling.TENSORWISE), _fp8(Fp8Scaling.ROWWISE)
    assert not any(o.name.endswith("/rowwise_rescale") for o in tensor)
    rescale = {o.name: o for o in row if o.name.endswith("/rowwise_rescale")}
    grads = [o for o in row if o.gemm is not None and o.name.startswith("layers/")
             and o.stage in (Stage.BACKWARD_DGRAD, Stage.BACKWARD_WGRAD)]
    assert grads and {f"{o.name}/rowwise_rescale" for o in grads} == set(rescale)
    qkv = next(o for o in grads if o.name == "layers/attention/qkv/dgrad")
    m, n, _ = qkv.gemm
    assert qkv.parts is not None and len(qkv.parts) == 3  # wq, wk, wv: three dX outputs
    op = rescale["layers/attention/qkv/dgrad/rowwise_rescale"]
    assert op.unit is Unit.VECTOR and not op.fusable and op.stage is Stage.BACKWARD_DGRAD
    assert op.total_bytes == pytest.approx(ROWWISE_RESCALE_BYTES * m * n * 3)
    assert not any(o.name.startswith("lm_head") and o.name.endswith("rowwise_rescale")
                   for o in row)


def test_rowwise_casts_read_their_input_once_more() -> None:
    tensor = {o.name: o for o in _fp8(Fp8Scaling.TENSORWISE) if "/fp8_cast" in o.name}
    row = {o.name: o for o in _fp8(Fp8Scaling.ROWWISE) if "/fp8_cast" in o.name}
    assert set(tensor) == set(row)
    for name, op in tensor.items():
        factor = ROWWISE_CAST_FACTOR if name.startswith("layers/") else 1.0
        assert row[name].total_bytes == pytest.approx(op.total_bytes * factor)
    assert pytest.approx(6 / 4) == ROWWISE_CAST_FACTOR


def test_rowwise_is_slower_than_tensorwise_and_needs_fp8() -> None:
    spec, system = api.load_model("llama-3.1-8b"), api.load_system(hw="h100-sxm5-80gb")
    times = {s: api.estimate(spec, system, Training(batch=4, seq_len=4096, dtype=DType.FP8,
                                                    fp8_scaling=s)).metrics["step_time_s"]
             for s in Fp8Scaling}
    assert times[Fp8Scaling.ROWWISE] > times[Fp8Scaling.TENSORWISE]
    with pytest.raises(InputError, match="--dtype fp8"):
        Training(batch=1, dtype=DType.BF16, fp8_scaling=Fp8Scaling.ROWWISE)
