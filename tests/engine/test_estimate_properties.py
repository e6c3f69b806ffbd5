"""Invariants of the single-device estimate (hypothesis), and the roofline's regimes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.catalog import Catalog, load_catalog
from accelmap.engine import System, estimate
from accelmap.hardware.schema import DeviceClass
from accelmap.ops.graph import Unit
from accelmap.units import DType
from accelmap.workload import Inference, Recompute, Training

CAT = load_catalog()
MODELS = ["gpt3-125m", "llama-2-7b", "mixtral-8x7b", "gemma-2-9b", "deepseek-v3", "qwen3-8b"]
DEVICES = ["h100-sxm5-80gb", "a100-sxm4-80gb", "mi300x", "tpu-v5p", "l4", "gaudi3"]

models = st.sampled_from(MODELS)
devices = st.sampled_from(DEVICES)
frameworks = st.sampled_from(["eager", "torch-compile", "tensorrt-llm", "vllm"])


def dev(name: str) -> System:
    return System.single(CAT.accelerators[name])


def finite_positive(x: float) -> bool:
    return math.isfinite(x) and x > 0


@settings(max_examples=40, deadline=None)
@given(models, devices, st.integers(1, 64), st.integers(1, 4096), st.integers(1, 512),
       frameworks)
def test_inference_finite_positive_and_monotone_in_batch(model: str, device: str, batch: int,
                                                         prompt: int, output: int,
                                                         fw: str) -> None:
    spec, d = CAT.models[model], dev(device)
    wl = Inference(batch=batch, prompt_len=prompt, output_len=output)
    e = estimate(spec, d, wl, framework=fw)
    for key in ("ttft_s", "tpot_s", "total_time_s", "tokens_per_s"):
        assert finite_positive(float(e.metrics[key])), key
    assert finite_positive(float(e.memory.total))
    bigger = estimate(spec, d, Inference(batch=batch * 2, prompt_len=prompt,
                                                   output_len=output), framework=fw)
    assert bigger.metrics["ttft_s"] >= e.metrics["ttft_s"]
    assert bigger.metrics["tpot_s"] >= e.metrics["tpot_s"]
    assert float(bigger.memory.total) > float(e.memory.total)
    longer = estimate(spec, d, Inference(batch=batch, prompt_len=prompt * 2,
                                                   output_len=output), framework=fw)
    assert longer.metrics["ttft_s"] >= e.metrics["ttft_s"]
    assert longer.metrics["tpot_s"] >= e.metrics["tpot_s"]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["gpt3-125m", "gpt3-1.3b", "llama-2-7b"]), devices, st.integers(1, 16),
       st.sampled_from([512, 1024, 2048, 4096]), st.sampled_from(list(Recompute)))
def test_training_mfu_at_most_one_and_monotone(model: str, device: str, batch: int, seq: int,
                                               recompute: Recompute) -> None:
    spec, d = CAT.models[model], dev(device)
    e = estimate(spec, d, Training(batch=batch, seq_len=seq, recompute=recompute))
    assert 0 < e.metrics["mfu"] <= 1 and 0 < e.metrics["hfu"] <= 1
    assert finite_positive(e.metrics["step_time_s"])
    more = estimate(spec, d, Training(batch=batch + 1, seq_len=seq,
                                               recompute=recompute))
    assert more.metrics["step_time_s"] > e.metrics["step_time_s"]
    assert float(more.memory.total) > float(e.memory.total)


def test_bigger_model_is_slower_and_larger() -> None:
    d = dev("h100-sxm5-80gb")
    wl = Inference(batch=4, prompt_len=512, output_len=64)
    small = estimate(CAT.models["llama-2-7b"], d, wl)
    big = estimate(CAT.models["llama-2-13b"], d, wl)
    assert big.metrics["tpot_s"] > small.metrics["tpot_s"]
    assert float(big.memory.total) > float(small.memory.total)


def weight_gemms(e: object, group: str) -> list:  # type: ignore[type-arg]
    return [t for t in e.times[group]  # type: ignore[attr-defined]
            if t.op.unit is Unit.MATRIX and t.op.gemm is not None]


@pytest.mark.parametrize("acc_id", sorted(a.id for a in CAT.accelerators.values()
                                          if a.device_class == DeviceClass.GPU))
def test_batch1_decode_memory_bound_on_every_gpu(acc_id: str) -> None:
    e = estimate(CAT.models["llama-2-7b"], dev(acc_id),
                           Inference(batch=1, prompt_len=128, output_len=16))
    assert all(t.bound == "memory" for t in weight_gemms(e, "decode"))


@pytest.mark.parametrize("acc_id", DEVICES)
def test_large_batch_prefill_compute_bound(acc_id: str) -> None:
    e = estimate(CAT.models["llama-2-7b"], dev(acc_id),
                           Inference(batch=16, prompt_len=2048, output_len=1))
    assert all(t.bound == "compute" for t in weight_gemms(e, "prefill") if t.op.name != "lm_head")


def test_infeasible_is_a_result_not_an_exception(catalog: Catalog) -> None:
    e = estimate(catalog.models["llama-3.1-405b"], dev("h100-sxm5-80gb"),
                           Inference(batch=1, prompt_len=128, output_len=16))
    # one unit convention: the sentence prints bytes as the memory table does (SI, '85.5 GB')
    assert not e.feasible and " GB " in (e.reason or "") and "GiB" not in (e.reason or "")
    assert e.metrics["max_batch"] == 0


def test_fp8_serving_faster_than_bf16_on_h100(catalog: Catalog) -> None:
    spec, d = catalog.models["llama-3.1-8b"], dev("h100-sxm5-80gb")
    bf16 = estimate(spec, d, Inference(batch=8, prompt_len=1024, output_len=128))
    fp8 = estimate(spec, d, Inference(batch=8, prompt_len=1024, output_len=128,
                                                weight_dtype=DType.FP8, act_dtype=DType.FP8,
                                                kv_dtype=DType.FP8))
    assert fp8.metrics["ttft_s"] < bf16.metrics["ttft_s"]
    assert fp8.metrics["tpot_s"] < bf16.metrics["tpot_s"]


@pytest.mark.parametrize("imbalance", [float("inf"), float("nan"), 0.5, 4.5])
def test_moe_imbalance_outside_its_physical_range_is_one_line(imbalance: float) -> None:
    """Mixtral routes top-2 of 8: the busiest expert carries at most 8/2 = 4x the mean."""
    from accelmap.errors import InputError

    with pytest.raises(InputError, match="MoE imbalance"):
        estimate(CAT.models["mixtral-8x7b"], dev("h100-sxm5-80gb"),
                 Inference(batch=1, prompt_len=128, output_len=8), imbalance=imbalance)
