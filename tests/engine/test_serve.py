"""Distributed serving estimate."""

from __future__ import annotations

from accelmap.catalog import load_catalog
from accelmap.engine import estimate
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping
from accelmap.workload import Inference

CAT = load_catalog()
NODE = parse_cluster("dgx-h100", CAT)
L70 = CAT.models["llama-2-70b"]
WL = Inference(batch=8, prompt_len=1024, output_len=128)


def test_70b_needs_tensor_parallelism() -> None:
    assert not estimate(L70, NODE, WL, Mapping.serving(tp=1)).feasible
    assert estimate(L70, NODE, WL, Mapping.serving(tp=8)).feasible


def test_more_tp_lowers_latency_but_not_linearly() -> None:
    t2 = estimate(L70, NODE, WL, Mapping.serving(tp=2)).metrics["tpot_s"]
    t8 = estimate(L70, NODE, WL, Mapping.serving(tp=8)).metrics["tpot_s"]
    assert t8 < t2 < 4 * t8  # faster, but 4x the devices buy less than 4x


def test_tp_communication_counted() -> None:
    e = estimate(L70, NODE, WL, Mapping.serving(tp=8))
    assert e.metrics["communication_s"]["decode_step"]["tp"] > 0
    assert "scale-up" in e.metrics["axes"]["tp"] or "NVLink" in e.metrics["axes"]["tp"]


def test_replicas_multiply_throughput() -> None:
    one = estimate(CAT.models["llama-2-7b"], NODE, WL, Mapping.serving(tp=1))
    eight = estimate(CAT.models["llama-2-7b"], NODE, WL, Mapping.serving(tp=1,
                                                                                replicas=8))
    assert eight.metrics["tokens_per_s"] == 8 * one.metrics["tokens_per_s"]


def test_bad_serving_mapping_is_a_result() -> None:
    e = estimate(L70, NODE, WL, Mapping.serving(tp=3))
    assert not e.feasible and "heads" in (e.reason or "")


def test_fp8_runs_communicate_their_16_bit_residual_stream() -> None:
    """FP8 activations exist only as a GEMM's quantized input; the row-parallel GEMMs write 16
    bits and the tensor-parallel all-reduce adds those (Inference.stream_dtype), so an FP8
    run's TP communication is the BF16 run's, not half of it."""
    from accelmap.units import DType

    fp8 = Inference(batch=8, prompt_len=1024, output_len=128, weight_dtype=DType.FP8,
                    act_dtype=DType.FP8, kv_dtype=DType.FP8)
    assert fp8.stream_dtype is DType.BF16 and WL.stream_dtype is DType.BF16
    comm = [estimate(L70, NODE, w, Mapping.serving(tp=8)).metrics["communication_s"]
            for w in (WL, fp8)]
    assert comm[1]["prefill"]["tp"] == comm[0]["prefill"]["tp"] > 0
    assert comm[1]["decode_step"]["tp"] == comm[0]["decode_step"]["tp"]
    assert Inference(act_dtype=DType.FP32).stream_dtype is DType.FP32
