"""trtllm-bench's own scheduler caps (serving/trtllm_bench.py), checked by hand against the
heuristic of TensorRT-LLM's bench/build/tuning.py, and their use by offline TensorRT-LLM >= 1.0
runs."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from accelmap import api
from accelmap.cost.framework import Framework
from accelmap.engine import resolve_framework
from accelmap.mapping.plan import Mapping
from accelmap.models.params import count_mtp_params, count_params
from accelmap.serving.scenario import Load, Scenario, run
from accelmap.serving.trtllm_bench import (
    BUILD_DEFAULTS,
    _round_batch,
    _round_tokens,
    bench_caps,
    checkpoint_elements,
)
from accelmap.units import DType

GIB = 1024**3


@pytest.mark.parametrize(("raw", "batch"), [
    (10, 64), (58, 64), (70, 96), (255, 256), (262, 384), (1000, 1024), (1024, 1024),
    (1025, 1280), (4096, 4096)])
def test_batch_rounding(raw: float, batch: int) -> None:
    assert _round_batch(raw) == batch


@pytest.mark.parametrize(("raw", "tokens"), [
    (10, 2048), (524, 2048), (2100, 2304), (5000, 5120), (9000, 9216), (32768, 32768)])
def test_token_rounding(raw: float, tokens: int) -> None:
    assert _round_tokens(raw) == tokens


def test_deepseek_r1_fp8_on_eight_h200_by_hand() -> None:
    """config.json lists 128 kv heads and no head_dim: 2 x 61 x 128 x 56 bytes a token in FP8;
    the FP8 checkpoint (MTP module included) at one byte an element."""
    spec = api.load_model("deepseek-r1")
    wl = replace(api.inference(1, 1024, 1024, "fp8"), kv_dtype=DType.FP8)
    mem = api.load_system(hw="h200-sxm").memory_bytes
    per_token = 2 * 61 * 128 * (7168 // 128) * 1
    engine = count_params(spec).total + count_mtp_params(spec).stored
    requests = (8 * mem - engine) * 0.9 / (per_token * 2048)
    assert 256 <= requests < 1024  # so max_batch_size rounds up to 128s
    caps = bench_caps(spec, wl, tp=8, pp=1, device_bytes=mem, max_prompt=1024)
    assert caps.max_batch == 128 * math.ceil(requests / 128) == 384
    # raw tokens = requests x (1 + 1024/1024) < 4096: the 2048 floor; no chunking, and a whole
    # prompt plus the batch fits in it
    assert caps.max_tokens == 2048 and not caps.chunked
    assert "384" in caps.note and "tuning.py" in caps.note


def test_long_outputs_shrink_the_batch() -> None:
    spec = api.load_model("deepseek-r1")
    wl = replace(api.inference(1, 1024, 8192, "fp8"), kv_dtype=DType.FP8)
    mem = api.load_system(hw="h200-sxm").memory_bytes
    short = bench_caps(spec, replace(wl, output_len=1024), 8, 1, mem, 1024)
    long = bench_caps(spec, wl, 8, 1, mem, 1024)
    assert long.max_batch < short.max_batch and long.max_batch % 32 == 0


def test_nvfp4_experts_count_half_an_element_a_value() -> None:
    spec = api.load_model("deepseek-r1")
    fp8 = api.inference(1, 1024, 1024, "fp8")
    fp4 = replace(fp8, moe_weight_dtype=DType.NVFP4)
    moe = count_params(spec).breakdown["layers/moe"]
    assert checkpoint_elements(spec, fp8) - checkpoint_elements(spec, fp4) == pytest.approx(
        moe * (1 - 0.5 - 1 / 16))


def test_untuned_formats_keep_the_build_defaults_and_long_prompts_raise_the_tokens() -> None:
    spec = api.load_model("gpt-oss-120b")
    wl = replace(api.inference(1, 32768, 1024, "bf16"), moe_weight_dtype=DType.MXFP4)
    caps = bench_caps(spec, wl, 1, 1, api.load_system(hw="b200").memory_bytes, 32768)
    assert caps.max_batch == BUILD_DEFAULTS[0]
    assert caps.max_tokens == 32768 + BUILD_DEFAULTS[0]  # a whole prompt next to the batch


def test_offline_tensorrt_llm_1_runs_take_the_caps_and_a_stated_cap_wins() -> None:
    spec = api.load_model("llama-3.1-8b")
    system = api.load_system(hw="h100-sxm5-80gb")
    wl = api.inference(1, 1024, 1024, "fp8")
    fw = resolve_framework("tensorrt-llm-1", Framework.VLLM)
    m = Mapping.serving(tp=1)
    got = run(spec, system, wl, m, fw, Load(Scenario.OFFLINE, requests=64))
    assert got.feasible and any("trtllm-bench's own caps" in n for n in got.assumptions)
    expect = bench_caps(spec, wl, 1, 1, system.memory_bytes, 1024)
    assert got.scheduler is not None and got.scheduler.max_seqs == expect.max_batch
    assert not got.scheduler.chunked_prefill
    stated = run(spec, system, wl, m, fw, Load(Scenario.OFFLINE, requests=64, max_seqs=32))
    assert stated.scheduler is not None and stated.scheduler.max_seqs == 32
    assert any("the stated --max-seqs (max_batch) replaces its max_batch_size" in n
               for n in stated.assumptions)
    # the v0.x stack and other scenarios keep the framework's documented defaults
    old = run(spec, system, wl, m, resolve_framework("tensorrt-llm", Framework.VLLM),
              Load(Scenario.OFFLINE, requests=64))
    assert not any("trtllm-bench" in n for n in old.assumptions)
    server = run(spec, system, wl, m, fw, Load(Scenario.SERVER, requests=64, rate=2.0))
    assert not any("trtllm-bench" in n for n in server.assumptions)
