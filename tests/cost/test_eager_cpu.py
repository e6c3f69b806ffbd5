"""Eager PyTorch on a CPU (cost/eager_cpu.py): dispatch counts per graph op, which the reference
eager transformer really dispatches; the measured seconds per dispatch in series with the
roofline; the measured attention and skinny-GEMM curves; eager cross-entropy and unfused
transients in memory; a measured CPU keeps no GPU tile or power corrections. Profiles are
recorded or synthetic: nothing here times anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.eager_cpu import DISPATCHES, KV_CACHE, RMSNORM, ROPE, Dispatches, for_model
from accelmap.cost.execution import execution_model
from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.cost.roofline import Device, host_dispatch_s, time_op
from accelmap.engine import System, estimate
from accelmap.measure.local_run import scale_spec
from accelmap.ops.graph import ByteKind, Op, Stage, Unit
from accelmap.units import DType
from accelmap.workload import Inference, Loss, Optimizer, Recompute, Training

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "measurements" / \
    "local_cpu_profile.json"


def recorded() -> CalibrationProfile:
    return CalibrationProfile.from_dict(json.loads(FIXTURE.read_text()))


def recorded_device() -> Device:
    """The recorded CPU, described again from the facts its profile carries."""
    from accelmap.hardware.local import describe, facts_from_dict

    prof = recorded()
    assert prof.device is not None
    return Device.of(describe(facts_from_dict(prof.device["cpu"])), profile=prof)


def test_dispatch_table_matches_graph_names() -> None:
    d = Dispatches()
    assert d.of("layers/attention/qkv", backward=False) == DISPATCHES["attention/qkv"][0]
    assert d.of("layers/attention/qkv/wgrad", backward=True) == DISPATCHES["attention/qkv"][1]
    assert d.of("layers/mlp/norm/backward", backward=True) == DISPATCHES["norm"][1]
    assert d.of("final_norm", backward=False) == DISPATCHES["final_norm"][0]
    assert d.of("optimizer/adamw", backward=True) == DISPATCHES["optimizer"][1]
    core = DISPATCHES["attention/core"][0]
    assert d.of("layers/attention/core", False, serving=True) == core + KV_CACHE
    assert d.of("something/new", backward=False) == 1.0


def test_table_follows_the_implementation(catalog: Catalog) -> None:
    gpt = for_model(catalog.models["gpt3-125m"])
    llama = for_model(catalog.models["llama-3.1-8b"])
    assert gpt.table["norm"] == DISPATCHES["norm"] and llama.table["norm"] == RMSNORM
    assert "attention/rope" not in gpt.table and llama.table["attention/rope"] == ROPE
    assert gpt.table["embedding"][0] > DISPATCHES["embedding"][0]  # learned positions
    assert llama.table["attention/core"][0] > DISPATCHES["attention/core"][0]  # GQA repeat


def _graph_dispatches(spec: Any, training: bool) -> float:
    """Dispatches the table gives for one decode step (serving) or one training step."""
    fw = framework_profile(Framework.EAGER_CPU).for_model(spec, serving=not training)
    dev = recorded_device()
    if training:
        est = estimate(spec, System.single(dev.acc, dev.profile),
                       Training(batch=1, seq_len=8, dtype=DType.FP32,
                                master_dtype=DType.FP32, grad_dtype=DType.FP32,
                                recompute=Recompute.NONE, loss=Loss.EAGER), framework=fw)
        ops = [t.op for ts in est.ops.values() for t in ts]
    else:
        est = estimate(spec, System.single(dev.acc, dev.profile),
                       Inference(batch=1, prompt_len=8, output_len=2, weight_dtype=DType.FP32,
                                 act_dtype=DType.FP32, kv_dtype=DType.FP32), framework=fw)
        ops = [t.op for t in est.ops["decode"]]
    assert fw.dispatches is not None
    back = (Stage.BACKWARD_DGRAD, Stage.BACKWARD_WGRAD, Stage.OPTIMIZER)
    return float(sum(fw.dispatches.of(o.name, o.stage in back, fw.serving) * float(o.count)
                     for o in ops))


@pytest.mark.parametrize(("mid", "rel"), [("gpt3-125m", 0.1), ("llama-3.1-8b", 0.1),
                                          ("qwen3-8b", 0.1), ("mixtral-8x7b", 0.25)])
def test_table_counts_what_pytorch_dispatches(catalog: Catalog, mid: str, rel: float) -> None:
    """The whole model's dispatches by the table are within ``rel`` of a TorchDispatchMode
    count of the reference transformer (measure/torch_model.py) at micro scale (an MoE decode
    step runs only the experts its token chose; the table charges them all)."""
    torch = pytest.importorskip("torch")
    from accelmap.measure.local_run import _adamw
    from accelmap.measure.overhead import count_dispatches
    from accelmap.measure.torch_model import KVCache, build

    spec, _ = scale_spec(catalog.models[mid], "micro")
    model = build(spec)
    opt = _adamw(torch, model)
    tokens = torch.randint(0, spec.vocab_size, (1, 9))
    x, y = tokens[:, :-1], tokens[:, 1:]

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(x).float().flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    cache = KVCache.empty(spec, 1, 10, torch.float32, "cpu")

    def decode() -> None:
        with torch.inference_mode():
            model(x[:, :1], 8, cache)[:, -1].argmax(-1, keepdim=True)

    real_train, real_decode = count_dispatches(torch, step), count_dispatches(torch, decode)
    assert _graph_dispatches(spec, True) == pytest.approx(real_train, rel=rel)
    assert _graph_dispatches(spec, False) == pytest.approx(real_decode, rel=rel)


def test_host_dispatch_is_counted_in_series() -> None:
    dev = recorded_device()
    fw = framework_profile(Framework.EAGER_CPU)
    op = Op(name="layers/attention/qkv", unit=Unit.MATRIX, dtype=DType.FP32, flops=2.0,
            bytes={ByteKind.WEIGHTS: 4.0}, gemm=(1, 1, 1))
    t = time_op(op, dev, fw)
    assert dev.profile is not None
    expected = DISPATCHES["attention/qkv"][0] * dev.profile.dispatch_s["forward"]
    assert host_dispatch_s(op, dev, fw) == pytest.approx(expected)
    assert float(t.overhead_s) == pytest.approx(expected)
    assert float(t.time_s) == pytest.approx(max(float(t.compute_s), float(t.memory_s))
                                            + expected)
    # unmeasured: the documented default per dispatch
    bare = Device.of(dev.acc, profile=CalibrationProfile("x", dev.acc.id, bandwidth=1e10))
    assert host_dispatch_s(op, bare, fw) == pytest.approx(
        DISPATCHES["attention/qkv"][0] * fw.kernel_overhead_s)


def test_measured_attention_and_skinny_curves_are_used() -> None:
    dev = recorded_device()
    prof = dev.profile
    assert prof is not None and prof.attention_curve and prof.skinny_curve
    fw = framework_profile(Framework.EAGER_CPU)
    core = Op(name="layers/attention/core", unit=Unit.MATRIX, dtype=DType.FP32, flops=1e9,
              bytes={ByteKind.ACTIVATIONS: 1.0}, attention_keys=128.5, head_dim=64)
    peak, _ = dev.peak(DType.FP32, Unit.MATRIX)
    eff = prof.attention_at(False, 64, 128.5)
    assert float(time_op(core, dev, fw).compute_s) == pytest.approx(1e9 / (peak * eff))
    back = Op(name="layers/attention/core/backward", unit=Unit.MATRIX, dtype=DType.FP32,
              flops=2.5e9, bytes={ByteKind.ACTIVATIONS: 1.0}, attention_keys=128.5,
              head_dim=64, stage=Stage.BACKWARD_DGRAD)
    beff = prof.attention_at(True, 64, 128.5)
    assert float(time_op(back, dev, fw).compute_s) == pytest.approx(2.5e9 / (peak * beff))
    # a 4-row GEMM (decode) takes the skinny curve of 4 rows, not the square shapes' curve
    m, n, k = 4, 768, 256
    gemm = Op(name="layers/attention/qkv", unit=Unit.MATRIX, dtype=DType.FP32,
              flops=2.0 * m * n * k, bytes={ByteKind.WEIGHTS: 4.0 * n * k}, gemm=(m, n, k))
    skinny = prof.skinny_at(DType.FP32, m, n * k)
    assert float(time_op(gemm, dev, fw).compute_s) == pytest.approx(
        2.0 * m * n * k / (peak * skinny))
    assert skinny < 0.5 * prof.efficiency_at(DType.FP32, 2e9)


def test_skinny_interpolates_in_rows_and_size() -> None:
    prof = CalibrationProfile("p", "x", skinny_curve={DType.FP32: {
        1: ((1e5, 0.1), (1e6, 0.2)), 4: ((1e5, 0.3), (1e6, 0.4))}})
    assert prof.skinny_at(DType.FP32, 1, 1e5) == pytest.approx(0.1)
    assert prof.skinny_at(DType.FP32, 2, 1e6) == pytest.approx(0.3)  # halfway in log m
    assert prof.skinny_at(DType.FP32, 4, 1e7) == pytest.approx(0.4)  # flat beyond
    assert prof.skinny_at(DType.FP32, 8, 1e6) is None  # above the measured rows
    assert prof.skinny_at(DType.BF16, 1, 1e6) is None
    back = CalibrationProfile.from_dict(json.loads(json.dumps(prof.to_dict())))
    assert back.skinny_curve == prof.skinny_curve


def test_profile_round_trips_with_the_cpu_fields() -> None:
    prof = recorded()
    back = CalibrationProfile.from_dict(json.loads(json.dumps(prof.to_dict())))
    assert back == prof
    assert prof.threads == 1 and prof.attention_kernel == "flash (cpu)"
    assert set(prof.dispatch_s) == {"forward", "backward"}


def test_measured_cpu_drops_the_gpu_gemm_corrections(catalog: Catalog) -> None:
    """A measured CPU's GEMM runs at its curve: no GPU tile quantization, no GPU power fit."""
    dev = recorded_device()
    fw = framework_profile(Framework.EAGER_CPU)
    m, n, k = 1000, 1000, 1000
    op = Op(name="layers/mlp/up", unit=Unit.MATRIX, dtype=DType.FP32, flops=2.0 * m * n * k,
            bytes={ByteKind.WEIGHTS: 4.0}, gemm=(m, n, k))
    assert dev.profile is not None
    peak, _ = dev.peak(DType.FP32, Unit.MATRIX)
    eff = dev.profile.efficiency_at(DType.FP32, 2.0 * m * n * k)
    assert float(time_op(op, dev, fw).compute_s) == pytest.approx(2.0 * m * n * k / (peak * eff))
    # the catalog CPU without a profile keeps them (unchanged behaviour)
    xeon = Device.of(catalog.accelerators["xeon-8480plus"])
    eff0, _ = xeon.matmul_efficiency(DType.BF16)
    t = time_op(op.__class__(**{**op.__dict__, "dtype": DType.BF16}), xeon, fw)
    assert float(t.achievable_flops) < xeon.peak(DType.BF16, Unit.MATRIX)[0] * eff0


def test_cpu_trains_eagerly_and_keeps_eager_transients(catalog: Catalog) -> None:
    dev = recorded_device()
    assert execution_model(dev.acc).training is Framework.EAGER_CPU
    spec, _ = scale_spec(catalog.models["gpt3-125m"], "tiny")
    system = System.single(dev.acc, dev.profile)
    wl = Inference(batch=4, prompt_len=256, output_len=32, weight_dtype=DType.FP32,
                   act_dtype=DType.FP32, kv_dtype=DType.FP32, kv_block=1)
    eager = estimate(spec, system, wl, framework=Framework.EAGER_CPU)
    fused = estimate(spec, system, wl, framework=Framework.LLAMA_CPP)
    # plain GELU MLP: up(x) and gelu(up(x)) both alive, one ffn more per prompt token
    extra = 4 * 256 * spec.ffn_dim * 4.0
    assert float(eager.memory.items["activations/peak"]) == pytest.approx(
        float(fused.memory.items["activations/peak"]) + extra)
    train = Training(batch=4, seq_len=256, dtype=DType.FP32, master_dtype=DType.FP32,
                     grad_dtype=DType.FP32, optimizer=Optimizer.ADAMW, loss=Loss.EAGER)
    eager_loss = estimate(spec, system, train)
    fused_loss = estimate(spec, system, Training(**{**train.__dict__, "loss": Loss.FUSED}))
    logits = 4 * 256 * spec.vocab_size * 4.0
    assert float(eager_loss.memory.items["activations/logits"]) == pytest.approx(3 * logits)
    assert float(fused_loss.memory.items["activations/logits"]) == pytest.approx(logits)
