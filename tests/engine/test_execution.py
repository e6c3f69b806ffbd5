"""An execution model per accelerator class (cost/execution.py, engine/dataflow.py)."""

from __future__ import annotations

import pytest

from accelmap.catalog import load_catalog
from accelmap.cost.efficiency import geometry, matmul_efficiency, shape_efficiency
from accelmap.cost.execution import execution_model
from accelmap.cost.framework import Framework
from accelmap.engine import estimate
from accelmap.hardware.cluster import parse_cluster
from accelmap.memory.allocator import CUDA_CONTEXT_BYTES
from accelmap.units import DType
from accelmap.workload import Inference

CAT = load_catalog()
ACC = CAT.accelerators
L8 = CAT.models["llama-3.1-8b"]
L70 = CAT.models["llama-3.1-70b"]
ONE = Inference(batch=1, prompt_len=128, output_len=128)


def test_tpu_runs_xla_without_launches_and_pads_to_the_mxu() -> None:
    e = estimate(L8, ACC["tpu-v5p"], ONE)
    assert "framework xla" in " ".join(e.assumptions)
    assert all(float(t.overhead_s) == 0.0 for t in e.ops["decode"])
    assert e.memory.items["runtime/context"] == 0.0  # no CUDA context on a TPU
    # 129 columns on a 128-wide MXU cost two passes; v6e's 256-wide MXU pads further
    assert shape_efficiency(512, 129, 128, geometry(ACC["tpu-v5p"])) == pytest.approx(129 / 256)
    assert shape_efficiency(512, 128, 128, geometry(ACC["tpu-v6e"])) == pytest.approx(0.25)


def test_groq_576_chips_hold_70b_in_8_bits_and_say_when_16_bits_do_not() -> None:
    groq = parse_cluster("576xgroq-lpu-v1", CAT)
    int8 = estimate(L70, groq, Inference(batch=1, weight_dtype=DType.INT8))
    assert int8.feasible
    assert int8.memory.items["runtime/context"] == 0.0
    bf16 = estimate(L70, groq, Inference(batch=1))
    assert not bf16.feasible and "chips" in (bf16.reason or "")


def test_chips_needed_and_pipelined_latency() -> None:
    few = estimate(L8, parse_cluster("8xgroq-lpu-v1", CAT), ONE)
    assert not few.feasible and "needs" in (few.reason or "")
    wl = Inference(batch=1, prompt_len=128, output_len=128, weight_dtype=DType.INT8)
    e = estimate(L8, parse_cluster("64xgroq-lpu-v1", CAT), wl)
    assert e.feasible
    # 64 chips, 32 layers: 2 chips per layer, 31 hand-offs and 2 all-reduces per layer
    comm = e.metrics["communication_s"]["decode_step"]
    assert comm["pp"] > 0 and comm["tp"] > 0
    assert e.metrics["tpot_s"] > comm["pp"] + comm["tp"]
    # a full pipeline serves many requests per traversal: 32 requests, one per stage, advance
    # a token each in little more than one request's traversal
    many = estimate(L8, parse_cluster("64xgroq-lpu-v1", CAT),
                    Inference(batch=32, prompt_len=128, output_len=128,
                              weight_dtype=DType.INT8))
    assert 32 / many.metrics["tpot_s"] > 10 / e.metrics["tpot_s"]


def test_wse3_8b_batch1_is_bounded_by_the_layer_pipeline_not_the_aggregate() -> None:
    e = estimate(L8, ACC["wse-3"], ONE)
    assert e.feasible and e.memory.items["runtime/context"] == 0.0
    tpot = e.metrics["tpot_s"]
    aggregate = 16.06e9 / 21e15  # all weights once at the wafer's aggregate bandwidth
    # one layer per region: each token sees 1/32 of the bandwidth per layer
    assert tpot > 0.9 * L8.n_layers * aggregate
    # the mechanism is a lower bound on latency (fabric traversal not charged): faster than
    # Cerebras' published ~1,800 tokens/s per user, but not the 100x the aggregate implied
    assert 1 / 1800 / 30 < tpot < 1 / 1800


def test_fpga_gets_its_own_profile() -> None:
    e = estimate(L8, ACC["vck5000"], Inference(weight_dtype=DType.INT8))
    assert "framework fpga-overlay" in " ".join(e.assumptions)
    assert execution_model(ACC["alveo-u280"]).serving is Framework.FPGA_OVERLAY


def test_coral_says_plainly() -> None:
    e = estimate(L8, ACC["coral-edge-tpu"], Inference(weight_dtype=DType.INT4))
    assert not e.feasible and "does not fit" in (e.reason or "")


def test_h200_at_least_h100_in_bf16() -> None:
    h100, h200 = ACC["h100-sxm5-80gb"], ACC["h200-sxm"]
    assert (matmul_efficiency(h200, DType.BF16).value
            >= matmul_efficiency(h100, DType.BF16).value)
    wl = Inference(batch=16, prompt_len=1024, output_len=256)
    assert (estimate(L8, h200, wl).metrics["tokens_per_s"]
            >= estimate(L8, h100, wl).metrics["tokens_per_s"])


def test_gpus_keep_the_gpu_model() -> None:
    ex = execution_model(ACC["h100-sxm5-80gb"])
    assert ex.serving is Framework.VLLM and ex.training is Framework.MEGATRON
    e = estimate(L8, ACC["h100-sxm5-80gb"], ONE)
    assert e.memory.items["runtime/context"] == CUDA_CONTEXT_BYTES
    assert "framework vllm" in " ".join(e.assumptions)
    # Jetson runs CUDA: it keeps the context
    assert execution_model(ACC["jetson-orin-nano-8gb-super"]).runtime_context_bytes > 0


def test_apple_silicon_runs_llama_cpp_over_metal_without_a_cuda_context() -> None:
    """Apple parts are class gpu but run llama.cpp over Metal: the llama.cpp profile, no CUDA
    context and no caching-allocator fragmentation (cost/execution.py, _METAL_NOTE); other
    GPUs keep vLLM and the CUDA context."""
    for aid in ("m2-ultra", "m1-max-24c", "m4-max"):
        ex = execution_model(ACC[aid])
        assert ex.name == "metal" and ex.serving is Framework.LLAMA_CPP, aid
        assert ex.runtime_context_bytes == 0.0 and not ex.fragments, aid
        assert "Metal" in ex.note
    e = estimate(L8, ACC["m2-ultra"], Inference(batch=1, prompt_len=128, output_len=128,
                                                weight_dtype=DType.INT4))
    assert e.feasible
    assert e.memory.items["runtime/context"] == 0.0
    assert "framework llama.cpp" in " ".join(e.assumptions)
    assert execution_model(ACC["rtx-4090"]).serving is Framework.VLLM


def test_dataflow_layer_floor_is_fitted_on_a_named_row_and_charged_per_layer() -> None:
    """The per-layer floor of a dataflow pipeline (cost/execution.py layer_floor) comes from
    fitters/fit_classes.py with the row it was fitted on; a machine without a published
    figure is uncalibrated and says its latency is a lower bound; every pass pays L floors."""
    from accelmap import api
    from accelmap.cost.execution import layer_floor

    cat = api.load_catalog()
    wse3, wse2 = cat.accelerators["wse-3"], cat.accelerators["wse-2"]
    f3, f2 = layer_floor(wse3), layer_floor(wse2)
    assert f3.seconds > 0 and "fitted on V0001" in f3.source
    assert f2.seconds == f3.seconds and "borrowed from wse-3" in f2.source  # same vendor
    ipu = layer_floor(cat.accelerators["ipu-gc200"])
    assert ipu.seconds == 0 and "lower bound" in ipu.source
    spec = cat.models["llama-3.1-8b"]
    est = api.estimate(spec, api.load_system(hw="wse-3"), api.inference(1, 512, 64))
    assert est.time["decode/layer_floor"] == pytest.approx(spec.n_layers * f3.seconds)
    assert any("per-layer floor" in a for a in est.assumptions)


def test_gpu_like_asics_run_their_vendor_stack_with_its_fitted_host_time() -> None:
    """Gaudi runs optimum-habana (host time per step fitted on a named published latency,
    fitters/fit_classes.py), AWS parts Neuron, Tenstorrent TT-Metal; an ASIC without a
    vendor stack keeps the generic compiled graph with its host time uncalibrated."""
    from accelmap.cost.framework import profile

    cat = load_catalog()
    assert execution_model(cat.accelerators["gaudi2"]).serving is Framework.HABANA
    assert execution_model(cat.accelerators["trainium1"]).serving is Framework.NEURON
    assert execution_model(cat.accelerators["wormhole-n300"]).serving is Framework.TT_METAL
    assert execution_model(cat.accelerators["sn40l"]).serving is Framework.GRAPH
    habana = profile(Framework.HABANA)
    assert habana.step_overhead_s > 0 and "fitted on V0087" in habana.overhead_source
    assert habana.kernel_overhead_s == 0.0  # a compiled recipe, no per-op launch
    assert "step_overhead_s" in profile(Framework.GRAPH).not_calibrated
