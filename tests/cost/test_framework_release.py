"""TensorRT-LLM's release picks its profile: 1.0 and later run the PyTorch-backend profile
(``tensorrt-llm-1``), the TensorRT-engine releases keep the v0.x fit; no other stack moves."""

from __future__ import annotations

import pytest

from accelmap.cost.framework import (
    CUSTOM_ALL_REDUCE,
    GRAPH_STACKS,
    PREFILL_CHUNK,
    Framework,
    profile,
    release_stack,
)
from accelmap.serving.scheduler import defaults
from accelmap.units import DType
from accelmap.validate.resolve import inference_profile

T1, T0 = Framework.TENSORRT_LLM_1, Framework.TENSORRT_LLM


@pytest.mark.parametrize(("version", "stack"), [
    ("1.1.0rc1", T1), ("1.0", T1), ("v1.2", T1), ("2.0", T1),
    ("0.17", T0), ("v0.6.1", T0), ("0.21.0", T0), ("", T0), ("rc", T0),
])
def test_release_picks_the_trtllm_profile(version: str, stack: Framework) -> None:
    assert release_stack(T0, version) is stack


def test_other_stacks_keep_their_profile_at_any_release() -> None:
    assert release_stack(Framework.VLLM, "1.0") is Framework.VLLM
    assert release_stack(Framework.SGLANG, "0.5.2") is Framework.SGLANG


@pytest.mark.parametrize(("text", "stack"), [
    ("TensorRT-LLM 1.0 (PyTorch backend)", T1),
    ("TensorRT-LLM v0.17", T0),
    # a number later in the text is not the release: an MLPerf harness keeps the v0.x profile
    ("TensorRT-LLM (NVIDIA MLPerf Inference v5.1 harness; TensorRT 10.11, CUDA 12.9)", T0),
])
def test_a_csv_rows_framework_text_reads_the_release_after_the_name(
        text: str, stack: Framework) -> None:
    assert inference_profile(text)[0].name is stack


def test_the_1x_profile_is_a_trtllm_profile_with_its_own_figures() -> None:
    p1, p0 = profile(T1), profile(T0)
    # its 4-bit streaming figures are its own (fitters/fit_trtllm1_profile.py); v0.x has none
    assert set(p1.quantized_weight_efficiency) == {DType.NVFP4, DType.MXFP4}
    assert not set(p0.quantized_weight_efficiency) & {DType.NVFP4, DType.MXFP4}
    assert T1 in GRAPH_STACKS and T1 in CUSTOM_ALL_REDUCE
    assert PREFILL_CHUNK[T1] == PREFILL_CHUNK[T0] == 8192
    assert p1.fuses_elementwise and p1.custom_all_reduce
    a = defaults(T1, offline=True, device_bytes=180e9)
    b = defaults(T0, offline=True, device_bytes=180e9)
    assert (a.max_seqs, a.max_batched_tokens, a.block_tokens) == (
        b.max_seqs, b.max_batched_tokens, b.block_tokens) == (2048, 8192, 32)
