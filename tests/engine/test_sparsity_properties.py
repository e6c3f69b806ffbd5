"""2:4 sparsity never makes an estimate slower, nor its weights bigger, on a part that has the
mode (hypothesis): the compressed weights stream fewer bytes and the compute-bound speedups are
at least 1 (cost/sparsity.py)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.catalog import load_catalog
from accelmap.engine import System, estimate
from accelmap.units import DType
from accelmap.workload import Inference, Recompute, Sparsity, Training

CAT = load_catalog()
MODELS = ["gpt3-125m", "llama-2-7b", "mixtral-8x7b", "qwen3-8b", "gemma-2-9b"]
DEVICES = ["h100-sxm5-80gb", "a100-sxm4-80gb", "l4", "b200", "mi300x", "rtx-4090"]
SLACK = 1 + 1e-9


def dev(name: str) -> System:
    return System.single(CAT.accelerators[name])


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(DEVICES), st.integers(1, 256),
       st.integers(1, 4096), st.integers(1, 512),
       st.sampled_from([DType.BF16, DType.FP8, DType.INT8, DType.INT4]),
       st.sampled_from(["vllm", "eager", "tensorrt-llm"]))
def test_serving_never_slower_never_heavier(model: str, device: str, batch: int, prompt: int,
                                            output: int, weights: DType, fw: str) -> None:
    acc = CAT.accelerators[device]
    if weights is DType.FP8 and acc.peak(DType.FP8) is None:
        weights = DType.BF16  # no FP8 path on this part
    act = DType.FP8 if weights is DType.FP8 else DType.BF16
    wl = Inference(batch=batch, prompt_len=prompt, output_len=output, weight_dtype=weights,
                   act_dtype=act, kv_dtype=act)
    d = estimate(CAT.models[model], dev(device), wl, framework=fw)
    s = estimate(CAT.models[model], dev(device), replace(wl, sparsity=Sparsity.TWO_FOUR),
                 framework=fw)
    assert s.ttft_s <= d.ttft_s * SLACK and s.tpot_s <= d.tpot_s * SLACK
    assert s.tokens_per_s * SLACK >= d.tokens_per_s
    assert s.memory.items["weights"] < d.memory.items["weights"]
    assert float(s.memory.total) < float(d.memory.total)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["gpt3-125m", "gpt3-1.3b", "llama-2-7b", "mixtral-8x7b"]),
       st.sampled_from(DEVICES), st.integers(1, 16), st.sampled_from([128, 1024, 4096]),
       st.sampled_from(list(Recompute)))
def test_training_never_slower_weights_unchanged(model: str, device: str, batch: int,
                                                 seq: int, recompute: Recompute) -> None:
    wl = Training(batch=batch, seq_len=seq, recompute=recompute)
    d = estimate(CAT.models[model], dev(device), wl)
    s = estimate(CAT.models[model], dev(device), replace(wl, sparsity=Sparsity.TWO_FOUR))
    assert s.step_time_s <= d.step_time_s * SLACK
    assert s.memory.items["weights"] == d.memory.items["weights"]
    assert s.mfu * SLACK >= d.mfu  # MFU counts the dense model's FLOPs
