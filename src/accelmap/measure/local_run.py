"""Local ground truth (`accelmap validate --local`): run a real transformer built from a ModelSpec
on this machine's device and put its time and peak memory next to accelmap's prediction.

Three phases, each timed as the median of ``steps`` runs after ``warmup`` untimed ones, with a
device synchronisation around every timed region:

- ``train``: forward, cross-entropy over all positions, backward, AdamW step, zero_grad
  (set_to_none) on ``batch`` sequences of ``seq`` tokens; compared with the training estimate's
  ``step_time_s`` (framework profile ``eager``: PyTorch launches every op);
- ``prefill``: one forward over the ``batch x seq`` prompt that fills the KV cache and computes
  the last position's logits; compared with ``ttft_s``;
- ``decode``: ``decode_tokens`` one-token steps with the cache (greedy next token); the median
  step sits at the middle of the generated context, which is where ``tpot_s`` is evaluated.

Precision: fp32 on a CPU; on a GPU bf16 autocast over fp32 parameters for training (fp32
weights + fp32 gradients + two fp32 Adam states + bf16 weight copies = the estimate's 18 B per
parameter of bf16 training with fp32 master weights) and bf16 weights for inference.

Memory: the peak above the phase start (:mod:`accelmap.measure.peak_memory`), compared with the
estimate's memory total less its CUDA-context and fragmentation allowances (neither is a tensor).

Load: what other processes took of the CPUs during the timed passes
(:mod:`accelmap.measure.contention`) is kept with the run and said next to the rows, because on a
shared machine it, not the model, sets the time.

Large presets are shrunk (``scale``): ``tiny`` and ``small`` keep the architecture (attention
kind, norms, FFN kind, positions, MoE structure, tying, biases) and set the sizes; the scaled
spec is what is both built and estimated, and the rows say so.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from accelmap.errors import InputError
from accelmap.measure.backends import torch_backend
from accelmap.measure.contention import Load, LoadMeter
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec

if TYPE_CHECKING:
    from accelmap.measure.peak_memory import PeakMemory
    from accelmap.measure.torch_backend import TorchBackend

SCALES = ("auto", "tiny", "small", "full")
IMPLS = ("accelmap", "hf")
# torch.compile(mode="reduce-overhead") compiles on the first call and records its CUDA graph on
# a later one: untimed decode steps before the compiled loop is timed
COMPILED_WARMUP_STEPS = 3
AUTO_FULL_MAX_PARAMS = 50e6  # `auto` keeps presets up to this size, shrinks the rest to tiny


@dataclass(frozen=True)
class Dims:
    n_layers: int
    d_model: int
    n_heads: int
    vocab: int
    max_seq: int
    experts: int
    mla: tuple[int, int, int, int, int]  # q_lora, kv_lora, qk_nope, qk_rope, v_head


DIMS = {
    "tiny": Dims(2, 256, 4, 4096, 2048, 4, (64, 64, 32, 16, 32)),  # ~2-8 M parameters
    "small": Dims(4, 512, 8, 16384, 2048, 8, (128, 128, 64, 32, 64)),  # ~20-30 M
    "micro": Dims(1, 64, 4, 512, 64, 4, (16, 16, 8, 8, 8)),  # primes the run (internal)
}


def _round(x: float, to: int = 32) -> int:
    return max(to, round(x / to) * to)


def scale_spec(spec: ModelSpec, scale: str = "auto") -> tuple[ModelSpec, str]:
    """The spec to build and estimate, and a sentence on what changed."""
    if scale not in (*SCALES, "micro"):
        raise InputError(f"unknown scale {scale!r}; use one of {', '.join(SCALES)}")
    total = count_params(spec).total
    if scale == "full" or (scale == "auto" and total <= AUTO_FULL_MAX_PARAMS):
        return spec, f"{spec.id} at full size ({total / 1e6:.1f} M parameters)"
    dims = DIMS["tiny" if scale == "auto" else scale]
    ratio = dims.d_model / spec.d_model  # FFN widths keep their ratio to d_model
    kv = {1: 1, spec.n_heads: dims.n_heads}.get(spec.kv_heads, max(1, dims.n_heads // 2))
    upd: dict[str, Any] = {
        "id": f"{spec.id}.{scale if scale != 'auto' else 'tiny'}",
        "name": f"{spec.name} (scaled)", "aliases": (), "published_params": None,
        "published_params_source": None,
        "n_layers": min(spec.n_layers, dims.n_layers), "d_model": dims.d_model,
        "n_heads": dims.n_heads, "n_kv_heads": kv, "head_dim": None,
        "ffn_dim": _round(spec.ffn_dim * ratio), "vocab_size": min(spec.vocab_size, dims.vocab),
        "max_seq_len": min(spec.max_seq_len, dims.max_seq),
    }
    if spec.mla is not None:
        q, r, nope, rope, v = dims.mla
        upd["mla"] = spec.mla.model_copy(update={
            "q_lora_rank": q if spec.mla.q_lora_rank else None, "kv_lora_rank": r,
            "qk_nope_head_dim": nope, "qk_rope_head_dim": rope, "v_head_dim": v})
    if spec.moe is not None:
        m = spec.moe
        experts = min(m.num_experts, dims.experts)
        upd["moe"] = m.model_copy(update={
            "num_experts": experts, "top_k": max(1, min(m.top_k, experts // 2)),
            "expert_ffn_dim": _round(m.expert_ffn_dim * ratio),
            "shared_expert_ffn_dim": (_round(m.shared_expert_ffn_dim * ratio)
                                      if m.shared_expert_ffn_dim else None),
            "num_shared_experts": min(m.num_shared_experts, 1),
            "dense_layers": min(m.dense_layers, 1)})
    data = {**spec.model_dump(), **upd}
    for key in ("mla", "moe"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            data[key] = data[key].model_dump()
    scaled = ModelSpec.model_validate(data)
    new = count_params(scaled).total
    return scaled, (f"{spec.id} scaled to {scale if scale != 'auto' else 'tiny'}: "
                    f"{scaled.n_layers} layers, d_model {scaled.d_model}, {scaled.n_heads} heads "
                    f"({scaled.kv_heads} KV), FFN {scaled.ffn_dim}, vocab {scaled.vocab_size}; "
                    f"{new / 1e6:.2f} M parameters instead of {total / 1e6:.1f} M")


@dataclass(frozen=True)
class LocalSettings:
    device: str = "cpu"
    dtype: str = "fp32"  # fp32 or bf16 (bf16: autocast for training, bf16 weights for serving)
    batch: int = 2
    seq: int = 128  # training sequence and prompt length
    steps: int = 5
    warmup: int = 2
    decode_tokens: int = 16
    # whose model runs: "accelmap" (measure/torch_model.py) or "hf" (Hugging Face transformers,
    # measure/hf_model.py)
    impl: str = "accelmap"
    # --impl hf: also time decode over a StaticCache under torch.compile(mode="reduce-overhead")
    compiled_decode: bool = False

    def __post_init__(self) -> None:
        for name in ("batch", "seq", "steps", "decode_tokens"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1")
        if self.warmup < 0:
            raise InputError("--warmup must be zero or more")
        if self.dtype not in ("fp32", "bf16", "fp16"):
            raise InputError(f"unknown dtype {self.dtype!r}; use fp32, bf16 or fp16")
        if self.impl not in IMPLS:
            raise InputError(f"unknown --impl {self.impl!r}; use {' or '.join(IMPLS)}")
        if self.compiled_decode and self.impl != "hf":
            raise InputError("--compiled-decode times transformers' StaticCache + torch.compile "
                             "loop: give it with --impl hf")


@dataclass(frozen=True)
class PhaseResult:
    times: tuple[float, ...]  # seconds per timed run

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def spread(self) -> float:
        return (max(self.times) - min(self.times)) / self.median if self.median else 0.0


@dataclass(frozen=True)
class LocalRun:
    spec: ModelSpec  # as built (scaled)
    scale_note: str
    settings: LocalSettings
    environment: Environment  # the device it ran on, software, host (no catalog entry yet)
    params: int  # counted on the PyTorch model
    train: PhaseResult
    prefill: PhaseResult
    decode: PhaseResult
    train_peak_bytes: int | None
    inference_peak_bytes: int | None
    memory_method: str | None
    threads: int
    load: Load | None = None  # other processes' CPU use during the timed passes
    notes: tuple[str, ...] = field(default=())
    decode_compiled: PhaseResult | None = None  # --impl hf --compiled-decode

    @property
    def device(self) -> str:
        """'cpu Intel(R) Xeon(R) ...', 'cuda:0 NVIDIA H100 80GB HBM3'."""
        return self.environment.label


def _timed(fn: Callable[[], Any], sync: Callable[[], None]) -> float:
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


# Bytes per parameter of an fp32 AdamW step: weights, gradients and two moments (activations
# come on top): a model past the device's memory at this rate cannot run, and trying would
# swap or be killed rather than answer.
TRAIN_BYTES_PER_PARAM = 16


def _check_fits(spec: ModelSpec, memory_bytes: float | None, scale: str) -> None:
    if not memory_bytes:
        return
    need = count_params(spec).total * TRAIN_BYTES_PER_PARAM
    if need > memory_bytes:
        raise InputError(f"{spec.id} at --scale {scale} needs about {need / 1e9:,.0f} GB for a "
                         f"training step ({TRAIN_BYTES_PER_PARAM} bytes per parameter) but the "
                         f"device has {memory_bytes / 1e9:,.0f} GB: use --scale tiny or small")


def not_built(spec: ModelSpec) -> str | None:
    """What the reference PyTorch model (measure/torch_model.py) does not build for ``spec``,
    or None: a timed run of another network would be compared with this one's prediction."""
    if spec.attention_sinks:
        return "attention sinks (a learned logit per head in the softmax, gpt-oss)"
    if spec.dsa is not None:
        return "DeepSeek sparse attention (the indexer and top-k selection of DeepSeek-V3.2)"
    return None


def run_local(spec: ModelSpec, settings: LocalSettings, scale: str = "auto") -> LocalRun:
    """Build the (scaled) model on the device and time training, prefill and decode."""
    from accelmap.measure.peak_memory import PeakMemory

    missing = not_built(spec) if settings.impl == "accelmap" else None
    if missing:
        raise InputError(f"validate --local cannot run {spec.id}: the reference PyTorch model "
                         f"does not build {missing}; pick a model without it")
    be = torch_backend(settings.device, "validate --local")
    built, note = scale_spec(spec, scale)
    if settings.impl == "hf":
        from accelmap.measure import hf_model

        hf_model.hf_config(built)  # refuse an unbuildable shape before any run
        note = f"{note}; {hf_model.describe(built)}"
    _check_fits(built, be.environment().memory_bytes, scale)
    s = settings
    if s.seq + s.decode_tokens > built.max_seq_len:
        raise InputError(f"--seq {s.seq} + {s.decode_tokens} decode tokens exceed the model's "
                         f"max_seq_len {built.max_seq_len}")
    # Memory pass first, untimed (see measure/peak_memory.py for why it is apart from the timed
    # pass on a CPU); a micro model of the same architecture pays the one-time costs before it
    # (libraries loaded on first use, thread pools, kernel caches: ~100 MB of RSS on a CPU).
    mem = PeakMemory(be)
    try:
        micro, _ = scale_spec(built, "micro")
        prime = LocalSettings(s.device, s.dtype, batch=1, seq=8, steps=1, warmup=1,
                              decode_tokens=2)
        _train(be, micro, prime, mem)
        _infer(be, micro, prime, mem)
        _, _, train_peak = _train(be, built, replace(s, warmup=1, steps=1), mem)
        _, _, infer_peak = _infer(be, built, replace(s, warmup=0, steps=1), mem)
    finally:
        mem.close()
    meter = LoadMeter()
    params, train, _ = _train(be, built, s, None, meter)
    prefill, decode, _ = _infer(be, built, s, None, meter)
    compiled = _infer(be, built, s, None, meter, compiled=True)[1] if s.compiled_decode else None
    env = be.environment()
    load = meter.load()
    return LocalRun(spec=built, scale_note=note, settings=s, environment=env,
                    params=params, train=train, prefill=prefill, decode=decode,
                    train_peak_bytes=train_peak, inference_peak_bytes=infer_peak,
                    memory_method=mem.method,
                    threads=0 if env.device_type == "cuda" else env.threads or 0,
                    load=load, decode_compiled=compiled,
                    notes=(note, f"{params:,} parameters in the PyTorch model",
                           *((f"load: {load.sentence(env.compute_units)}",) if load else ())))


def _tokens(be: TorchBackend, spec: ModelSpec, s: LocalSettings) -> Any:
    torch = be.torch
    gen = torch.Generator(device="cpu").manual_seed(0)
    return torch.randint(0, spec.vocab_size, (s.batch, s.seq + 1), generator=gen).to(be.dev)


def _half(torch: Any, s: LocalSettings) -> Any:
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(s.dtype)


def _train(be: TorchBackend, spec: ModelSpec, s: LocalSettings, mem: PeakMemory | None,
           meter: LoadMeter | None = None) -> tuple[int, PhaseResult, int | None]:
    from accelmap.measure.torch_model import parameter_count

    torch = be.torch
    tokens = _tokens(be, spec, s)
    half = _half(torch, s)
    build, forward = _impl(s)
    if mem is not None:
        mem.start()
    model = build(spec, be.dev, torch.float32)
    opt = _adamw(torch, model)
    x, y = tokens[:, :-1], tokens[:, 1:]

    def loss_of() -> Any:  # the logits are not kept past the loss (one fp32 buffer, as estimated)
        with torch.autocast(be.dev.type, dtype=half or torch.float32,
                            enabled=half is not None):
            logits = forward(model, x)
        return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), y.flatten())

    def step() -> None:
        loss = loss_of()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(s.warmup):
        step()
    with meter or contextlib.nullcontext():
        times = tuple(_timed(step, be.synchronize) for _ in range(s.steps))
    peak = mem.peak() if mem is not None else None
    return parameter_count(model), PhaseResult(times), peak


def _impl(s: LocalSettings) -> tuple[Callable[..., Any], Callable[[Any, Any], Any]]:
    """The model builder and its logits call of ``s.impl``."""
    if s.impl == "hf":
        from accelmap.measure import hf_model

        return hf_model.build, hf_model.logits
    from accelmap.measure.torch_model import build

    return build, lambda model, x: model(x)


def _loop(spec: ModelSpec, model: Any, prompt: Any, s: LocalSettings, dtype: Any, dev: Any,
          compiled: bool) -> Any:
    """The prefill + decode loop of ``s.impl`` (hf_model.Loop)."""
    from accelmap.measure import hf_model

    total = s.seq + s.decode_tokens
    if s.impl == "hf":
        return (hf_model.static_loop if compiled else hf_model.eager_loop)(model, prompt, total)
    from accelmap.measure.torch_model import KVCache

    cache = KVCache.empty(spec, s.batch, total, dtype, dev)
    state: dict[str, Any] = {}

    def prefill() -> None:
        state["next"] = model(prompt, 0, cache, last_only=True)[:, -1].argmax(-1, keepdim=True)

    def step(pos: int) -> None:
        state["next"] = model(state["next"], pos, cache)[:, -1].argmax(-1, keepdim=True)

    return hf_model.Loop(prefill, step, state)


def _adamw(torch: Any, model: Any) -> Any:
    """Fused AdamW where this PyTorch has it for the device (CPU since 2.4): one kernel over all
    parameters and no parameter-sized temporaries, as Megatron's fused Adam; the foreach
    implementation otherwise (its sqrt of the second moment is one more fp32 copy of the
    parameters at the step, above the estimate's 16 B per parameter)."""
    try:
        return torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(model.parameters(), lr=1e-4)


def _infer(be: TorchBackend, spec: ModelSpec, s: LocalSettings, mem: PeakMemory | None,
           meter: LoadMeter | None = None, compiled: bool = False
           ) -> tuple[PhaseResult, PhaseResult, int | None]:
    torch, sync = be.torch, be.synchronize
    prompt = _tokens(be, spec, s)[:, :s.seq]
    dtype = _half(torch, s) or torch.float32
    build, _ = _impl(s)
    if mem is not None:
        mem.start()
    model = build(spec, be.dev, dtype).eval()
    loop = _loop(spec, model, prompt, s, dtype, be.dev, compiled)
    prefill = loop.prefill

    def decode_at(pos: int) -> Callable[[], None]:
        return lambda: loop.step(pos)

    pre: list[float] = []
    dec: list[float] = []
    warm_steps = COMPILED_WARMUP_STEPS if compiled else 2
    with torch.inference_mode():
        for _ in range(max(s.warmup, 1 if compiled else 0)):
            prefill()
            for i in range(min(warm_steps, s.decode_tokens)):
                decode_at(s.seq + i)()
        with meter or contextlib.nullcontext():
            for _ in range(s.steps):
                pre.append(_timed(prefill, sync))
                dec += [_timed(decode_at(s.seq + i), sync) for i in range(s.decode_tokens)]
    peak = mem.peak() if mem is not None else None
    return PhaseResult(tuple(pre)), PhaseResult(tuple(dec)), peak


def measurements(run: LocalRun, accelerator_id: str | None,
                 predicted: dict[str, float]) -> list[Measurement]:
    """Kind.LOCAL_RUN rows for the store: one per phase time, one per peak memory."""
    s = run.settings
    base = {"model": run.spec.id, "impl": s.impl, "batch": s.batch, "seq": s.seq, "steps": s.steps,
            "warmup": s.warmup, "decode_tokens": s.decode_tokens, "params": run.params,
            "scale": run.scale_note, "threads": run.threads, "memory": run.memory_method,
            "others_busy_cores": run.load.others_cores if run.load else None}
    env = run.environment.compared_with(accelerator_id)
    out = []
    label = f"{run.spec.id} b{s.batch} s{s.seq}"
    phases = [("train", run.train), ("prefill", run.prefill), ("decode", run.decode)]
    if run.decode_compiled is not None:
        phases.append(("decode_compiled", run.decode_compiled))
    for phase, res in phases:
        out.append(Measurement(
            kind=Kind.LOCAL_RUN, environment=env, dtype=s.dtype, label=f"{phase} {label}",
            value=res.median, unit="s", median=res.median, spread=res.spread,
            repetitions=len(res.times),
            settings={**base, "phase": phase, "predicted_s": predicted.get(phase)}))
    for phase, peak in (("train", run.train_peak_bytes), ("inference", run.inference_peak_bytes)):
        if peak is not None:
            out.append(Measurement(
                kind=Kind.LOCAL_RUN, environment=env, dtype=s.dtype,
                label=f"{phase} peak memory {label}", value=float(peak), unit="B",
                median=float(peak), spread=0.0, repetitions=1,
                settings={**base, "phase": phase,
                          "predicted_bytes": predicted.get(f"{phase}_memory")}))
    return out
