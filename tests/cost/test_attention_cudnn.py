"""Transformer Engine's FusedAttention (cuDNN SDPA) on Hopper: the cuDNN series of Shah et al.
2024's H100 figures (head dim 128), plateau and ramp; FlashAttention-2's figures on Ampere,
where TE does not prefer it; the GEMM-relative rule where nothing is measured."""

from __future__ import annotations

import pytest

from accelmap.catalog import load_catalog
from accelmap.cost.attention import AttentionKernel, attention_efficiency

CAT = load_catalog()
H100 = CAT.accelerators["h100-sxm5-80gb"]
# Shah et al. 2024, cuDNN series (TFLOP/s) at 512 ... 16k keys; peak 989.4
FORWARD = {512: 497, 1024: 574, 2048: 617, 4096: 609, 8192: 600, 16384: 595}
BACKWARD = {512: 305, 1024: 408, 2048: 465, 4096: 499, 8192: 518, 16384: 516}


@pytest.mark.parametrize(("backward", "series"), [(False, FORWARD), (True, BACKWARD)])
def test_cudnn_on_h100_follows_the_published_series(backward: bool,
                                                    series: dict[int, int]) -> None:
    for keys, tflops in series.items():
        eff = float(attention_efficiency(H100, keys, backward, AttentionKernel.CUDNN) or 0)
        assert eff * 989.4 == pytest.approx(tflops, rel=0.2), keys


def test_cudnn_beats_fa2_on_hopper_and_equals_it_on_ampere() -> None:
    for keys in (1024, 8192):
        for bwd in (False, True):
            cudnn = attention_efficiency(H100, keys, bwd, AttentionKernel.CUDNN)
            fa2 = attention_efficiency(H100, keys, bwd, AttentionKernel.FA2)
            assert cudnn is not None and fa2 is not None and cudnn > 1.4 * fa2
    a100 = CAT.accelerators["a100-sxm4-80gb"]
    assert attention_efficiency(a100, 4096, False, AttentionKernel.CUDNN) == \
        attention_efficiency(a100, 4096, False, AttentionKernel.FA2)
    assert attention_efficiency(CAT.accelerators["b200"], 4096, False,
                                AttentionKernel.CUDNN) is None
