"""W4A4 on FP4 tensor cores vs W4A16 weight-only, fp4 as the part's own format, mixed recipes,
KV formats and the refusals (engine/formats.py)."""

from __future__ import annotations

import pytest

from accelmap import api
from accelmap.engine import estimate
from accelmap.engine.formats import resolve_inference, resolve_training
from accelmap.errors import InputError
from accelmap.memory.budget import routed_expert_params, weight_storage_bytes
from accelmap.models.geometry import Geometry
from accelmap.models.params import count_params
from accelmap.units import DType
from accelmap.workload import Inference, Training


def _acc(part: str):  # type: ignore[no-untyped-def]
    return api.load_system(hw=part).accelerator


@pytest.mark.parametrize(("part", "native", "dequantized"), [
    ("b200", DType.NVFP4, False), ("gb300", DType.NVFP4, False),
    ("mi355x", DType.MXFP4, False),
    ("h100-sxm5-80gb", DType.NVFP4, True), ("mi300x", DType.MXFP4, True),
])
def test_fp4_is_the_parts_own_format(part: str, native: DType, dequantized: bool) -> None:
    wl, notes = resolve_inference(_acc(part), Inference(weight_dtype=DType.FP4))
    assert wl.weight_dtype is native
    assert (native in wl.dequantized_formats) is dequantized
    assert wl.compute_dtype is (DType.BF16 if dequantized else native)
    assert ("weight-only" in notes[0]) is dequantized


def test_nvfp4_on_cdna4_is_weight_only_but_mxfp4_is_not() -> None:
    acc = _acc("mi355x")
    nv, _ = resolve_inference(acc, Inference(weight_dtype=DType.NVFP4))
    mx, _ = resolve_inference(acc, Inference(weight_dtype=DType.MXFP4))
    assert nv.compute_dtype is DType.BF16 and mx.compute_dtype is DType.MXFP4


def _serve(part: str, weights: str, batch: int = 1) -> object:
    spec = api.load_model("llama-3.1-8b")
    return estimate(spec, api.load_system(hw=part), api.inference(batch, 2048, 128, weights))


def test_w4a16_on_hopper_reads_4_5_bits_but_computes_at_16() -> None:
    bf16, fp4 = _serve("h100-sxm5-80gb", "bf16", 8), _serve("h100-sxm5-80gb", "nvfp4", 8)
    # decode streams the weights: 4.5 bits instead of 16 is faster, not 3.6x (KV, overheads)
    assert 1.5 < bf16.tpot_s / fp4.tpot_s < 16 / 4.5  # type: ignore[attr-defined]
    # prefill is compute-bound at the 16-bit rate plus the dequantization: never faster
    assert fp4.ttft_s >= bf16.ttft_s  # type: ignore[attr-defined]
    w16 = bf16.memory.items["weights"]  # type: ignore[attr-defined]
    w4 = fp4.memory.items["weights"]  # type: ignore[attr-defined]
    assert w4 / w16 == pytest.approx(4.5 / 16, rel=1e-3)


def test_w4a4_on_blackwell_runs_the_gemms_at_the_fp4_rate() -> None:
    est = _serve("b200", "nvfp4", 8)
    gemms = [t for t in est.ops["prefill"] if t.op.gemm is not None  # type: ignore[attr-defined]
             and t.op.name.startswith("layers/")]
    assert gemms and all(t.op.dtype is DType.NVFP4 for t in gemms)
    assert all(t.op.dequant_flops == 0 for t in gemms)
    casts = [t.op for t in est.ops["prefill"]  # type: ignore[attr-defined]
             if t.op.name.endswith("/fp8_cast")]
    # the activations are quantized before each W4A4 GEMM, scales included in what is written
    assert casts and all(c.bytes for c in casts)


def test_weight_only_gemms_carry_their_dequantization() -> None:
    est = _serve("h100-sxm5-80gb", "nvfp4", 8)
    gemm = next(t.op for t in est.ops["prefill"]  # type: ignore[attr-defined]
                if t.op.name == "layers/mlp/up")
    assert gemm.dtype is DType.BF16 and gemm.dequant_flops > 0


# nvidia/DeepSeek-R1-FP4 (TensorRT Model Optimizer): routed experts NVFP4 (uint8 pairs + FP8
# E4M3 scales per 16), the rest as DeepSeek-R1 shipped it (FP8 or BF16: one stored element
# per weight either way); Hugging Face's safetensors metadata counts 396.8B stored elements
# (the model page; reproduced by llmrun.dev/model/nvidia-deepseek-r1-nvfp4). With FP8 for the
# rest, stored elements = bytes. The checkpoint also holds DeepSeek's MTP module (one more
# MoE block + its 2d x d eh_proj, unquantized), which the deepseek-v3 preset does not serve.
PUBLISHED_R1_FP4_ELEMENTS = 396.8e9


def test_mixed_recipe_weight_bytes_match_the_published_deepseek_r1_fp4_checkpoint() -> None:
    spec = api.load_model("deepseek-v3")
    wl = Inference(weight_dtype=DType.FP8, moe_weight_dtype=DType.NVFP4)
    main = weight_storage_bytes(spec, wl)
    geo = Geometry.of(spec)
    moe_block = next(g for g in geo.groups if g.moe)
    mtp = sum(t.params for t in moe_block.tensors) + 2 * geo.d_model * geo.d_model
    predicted = main + mtp
    assert predicted == pytest.approx(PUBLISHED_R1_FP4_ELEMENTS, rel=0.005)
    # without the block scales (4 bits flat) it would be 10 % short: the scales are counted
    flat = (count_params(spec).total - routed_expert_params(spec)) + routed_expert_params(
        spec) * 0.5 + mtp
    assert flat < 0.92 * PUBLISHED_R1_FP4_ELEMENTS


def test_mixed_recipe_runs_experts_and_the_rest_in_their_formats() -> None:
    spec = api.load_model("deepseek-v3")
    est = estimate(spec, api.load_system(cluster="8xb200"),
                   api.inference(32, 1024, 256, "fp8", moe_weights="nvfp4"),
                   api.serving_mapping(8, 1, 1, 1))
    by_name = {t.op.name: t.op.dtype for t in est.ops["decode"]}  # type: ignore[attr-defined]
    assert by_name["layers/moe/experts/up"] is DType.NVFP4
    assert by_name["layers/moe/shared/up"] is DType.FP8
    assert by_name["layers/attention/out"] is DType.FP8
    assert by_name["layers/mlp/up"] is DType.FP8  # the first dense blocks
    assert any("mixed recipe" in a for a in est.assumptions)


def test_kv_formats() -> None:
    b200, h100 = _acc("b200"), _acc("h100-sxm5-80gb")
    wl, _ = resolve_inference(b200, Inference(kv_dtype=DType.NVFP4))
    assert wl.kv_dtype.bytes == pytest.approx(4.5 / 8)
    with pytest.raises(InputError, match="Blackwell"):
        resolve_inference(h100, Inference(kv_dtype=DType.NVFP4))
    with pytest.raises(InputError, match="no public serving stack"):
        resolve_inference(b200, Inference(kv_dtype=DType.MXFP4))
    assert resolve_inference(h100, Inference(kv_dtype=DType.FP8))[0].kv_dtype is DType.FP8


@pytest.mark.parametrize(("part", "dtype"), [("h100-sxm5-80gb", DType.NVFP4),
                                             ("mi300x", DType.MXFP8),
                                             ("mi355x", DType.NVFP4)])
def test_training_recipes_the_part_cannot_run_are_one_line(part: str, dtype: DType) -> None:
    with pytest.raises(InputError) as e:
        resolve_training(_acc(part), Training(dtype=dtype))
    assert "\n" not in str(e.value) and "fp8" in str(e.value) and part in str(e.value)


def test_training_fp4_is_the_parts_own() -> None:
    assert resolve_training(_acc("gb200"), Training(dtype=DType.FP4)).dtype is DType.NVFP4
    assert resolve_training(_acc("mi355x"), Training(dtype=DType.FP4)).dtype is DType.MXFP4


def test_expert_format_on_a_dense_model_is_refused() -> None:
    """--moe-weights on a dense model once printed 'mixed recipe: routed experts in nvfp4'
    and ran every GEMM in the dense format: a recipe said but not run."""
    wl = Inference(moe_weight_dtype=DType.NVFP4)
    with pytest.raises(InputError, match=r"llama-3\.1-8b has no routed experts"):
        resolve_inference(_acc("b200"), wl, "llama-3.1-8b", has_experts=False)
    spec = api.load_model("llama-3.1-8b")
    with pytest.raises(InputError, match="no routed experts"):
        estimate(spec, api.load_system(hw="b200"), wl)
    _, notes = resolve_inference(_acc("b200"), wl, "mixtral-8x7b", has_experts=True)
    assert any(n.startswith("mixed recipe") for n in notes)
