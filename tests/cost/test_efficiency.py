"""Tile and wave quantization, achievable efficiency provenance."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.cost.efficiency import GemmGeometry, matmul_efficiency, shape_efficiency
from accelmap.units import DType


def test_wave_quantization_133_tiles_on_132_sms() -> None:
    """DESIGN / NVIDIA matmul guide: 133 tiles on 132 SMs take two waves."""
    geo = GemmGeometry(tile=(128, 128), units=132, systolic=0)
    m, n, k = 128 * 7, 128 * 19, 128  # 133 tiles; k too small to split
    assert shape_efficiency(m, n, k, geo) == pytest.approx(133 / 264)


def test_tile_quantization_4097_costs_like_4224() -> None:
    geo = GemmGeometry(tile=(128, 128), units=0, systolic=0)
    assert shape_efficiency(4096, 4097, 4096, geo) == pytest.approx(4097 / 4224)


def test_systolic_padding() -> None:
    geo = GemmGeometry(tile=(128, 128), units=0, systolic=128)
    assert shape_efficiency(1000, 129, 128, geo) == pytest.approx(129 / 256)


def test_measured_and_default_provenance(catalog: Catalog) -> None:
    h100 = matmul_efficiency(catalog.accelerators["h100-sxm5-80gb"], DType.BF16)
    assert h100.measured and "M0005" in h100.source
    loo = matmul_efficiency(catalog.accelerators["h100-sxm5-80gb"], DType.BF16,
                            exclude="h100-sxm5-80gb")
    assert not loo.measured and "median" in loo.source
    l4 = matmul_efficiency(catalog.accelerators["l4"], DType.BF16)
    assert not l4.measured and "NVIDIA gpu" in l4.source


def test_b200_fp4_best_shape_is_the_cublaslt_8192_cube(catalog: Catalog) -> None:
    """DeepGEMM PR #348's table: cuBLASLt 13.3, FP4 8192x8192x8192 on one B200, 5239 TFLOP/s
    against the 9000 TFLOP/s dense FP4 peak; NVFP4 runs the same mxf4nvf4 MMA and takes it."""
    b200 = catalog.accelerators["b200"]
    for fmt in (DType.NVFP4, DType.MXFP4):
        e = matmul_efficiency(b200, fmt)
        assert e.measured and "DeepGEMM PR 348" in e.source
        assert e.value == pytest.approx(5239 / 9000, abs=1e-4)
    # a part without its own FP4 row borrows the format's measured rows (GB200: the same die)
    gb = matmul_efficiency(catalog.accelerators["gb200"], DType.NVFP4)
    assert not gb.measured and gb.value == pytest.approx(5239 / 9000, abs=1e-4)


def test_fp4_best_shape_with_waves_stays_near_the_mid_size_measurement(catalog: Catalog) -> None:
    """FlashInfer PR #1979 measured NVFP4 m=1024 n=7168 k=4608 at 3370.4 of 9000 TFLOP/s (0.374).
    By hand: 256x128 tiles -> 4 x 56 = 224 tiles on 148 SMs = 2 waves, 224/296 = 0.757 useful;
    0.5821 x 0.757 = 0.441, within 18 % of the measurement (the model may not undercut it)."""
    b200 = catalog.accelerators["b200"]
    geo = GemmGeometry(tile=(256, 128), units=148, systolic=0)
    wave = float(shape_efficiency(1024, 7168, 4608, geo))
    assert wave == pytest.approx(224 / 296)
    modelled = matmul_efficiency(b200, DType.NVFP4).value * wave
    assert modelled == pytest.approx(0.4406, abs=5e-4)
    assert 3370.4 / 9000 <= modelled <= 1.18 * 3370.4 / 9000


def test_every_hopper_board_takes_flashattention2s_hopper_plateau(catalog: Catalog) -> None:
    """Grand Teton's 96 GB HBM2e H100 is a GH100 like the SXM: FlashAttention-2's Hopper
    plateau (37 % of peak, FA3 paper Fig. 7), not the GEMM-relative rule that gave it ~67 %."""
    from accelmap.cost.attention import attention_plateau, generation

    acc = catalog.accelerators
    for part in ("h100-sxm5-96gb-hbm2e", "h100-sxm5-80gb", "h200-sxm", "h20", "gh200"):
        assert generation(acc[part]) == "hopper"
        assert attention_plateau(acc[part]) == attention_plateau(acc["h100-sxm5-80gb"])
    assert generation(acc["a100-sxm4-80gb"]) == "ampere"
    for part in ("a10", "rtx-3090", "b200", "mi300x"):  # not measured: the GEMM-relative rule
        assert attention_plateau(acc[part]) is None


def test_flashattention2_backward_runs_at_its_own_hopper_plateau(catalog: Catalog) -> None:
    """FA3 paper, backward speed (H100 SXM5, head dim 128): FlashAttention-2's backward peaks at
    322 TFLOP/s where its forward reaches 370; Ampere has no separate figure (the same)."""
    from accelmap.cost.attention import attention_plateau

    h100, a100 = catalog.accelerators["h100-sxm5-80gb"], catalog.accelerators["a100-sxm4-80gb"]
    fwd, bwd = attention_plateau(h100), attention_plateau(h100, backward=True)
    assert fwd is not None and bwd is not None
    assert fwd[0] * 989.4 == pytest.approx(370) and bwd[0] * 989.4 == pytest.approx(322)
    assert attention_plateau(a100, backward=True) == attention_plateau(a100)
