"""`validate --local`: accelmap's prediction for a local run (``measure/local_run.py``), as
rows in the format of `validate --cases`, and the accelerator and profile it predicts with.

The same (scaled) spec, batch, lengths and precision as the run, the eager framework profile
(PyTorch launches every op; on a CPU ``eager-cpu``, where the host's dispatch of every aten op
runs in series with the arithmetic: ``cost/eager_cpu.py``), flash attention (PyTorch's fused
SDPA), PyTorch's cross-entropy on fp32 logits (``Loss.EAGER``: three fp32 buffers of the logits'
size in its backward), AdamW with fp32 states, and a KV cache allocated exactly (block of 1
token: the run's static cache). Memory is compared without the estimate's CUDA-context and
fragmentation allowances (see ``measure/local_run.py``).

Rows (errors signed as in ``validate --cases``: positive = accelmap predicts faster or smaller):

    local/train             step_time_s        estimate(Training) step_time_s
    local/train/memory      peak_memory_bytes  training memory (tensors)
    local/prefill           ttft_s             estimate(Inference) ttft_s
    local/decode            tpot_s             estimate(Inference) tpot_s
    local/inference/memory  peak_memory_bytes  inference memory (tensors)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from accelmap.errors import InputError
from accelmap.validate.outcome import MetricKind, Prediction, Status

if TYPE_CHECKING:
    from accelmap.catalog import Catalog
    from accelmap.cost.calibration import CalibrationProfile
    from accelmap.cost.roofline import Device
    from accelmap.engine.result import Estimate
    from accelmap.hardware.schema import Accelerator
    from accelmap.measure.local_run import LocalRun
    from accelmap.measure.store import Store
    from accelmap.memory.budget import MemoryBudget

NOT_TENSORS = ("runtime/context", "runtime/fragmentation")  # allowances, not tensor bytes


@dataclass(frozen=True)
class LocalComparison:
    rows: list[Prediction]
    predicted: dict[str, float]  # train/prefill/decode seconds, *_memory bytes
    training: Estimate
    inference: Estimate


def tensor_bytes(memory: MemoryBudget) -> float:
    return float(sum(v for k, v in memory.items.items() if k not in NOT_TENSORS))


def device_for(acc: Accelerator, fraction: float = 1.0,
               profile: CalibrationProfile | None = None) -> Device:
    """The roofline device to predict with; an InputError (before any run) where it cannot."""
    from accelmap.cost.roofline import Device

    dev = Device.of(acc, fraction=fraction, profile=profile)
    if not dev.bandwidth:
        raise InputError(f"{acc.id} has no memory bandwidth to predict with (the local CPU's is "
                         "not visible from the OS): measure it with `accelmap measure bandwidth`, "
                         "make a profile with `accelmap calibrate` (validate --local then uses "
                         "the newest profile of this device), or pass --hw with a catalog id")
    return dev


def local_estimates(spec: Any, s: Any, acc: Accelerator, device_type: str,
                    fraction: float = 1.0, profile: CalibrationProfile | None = None
                    ) -> tuple[Estimate, Estimate, dict[str, float], Any]:
    """The training and inference estimates of a local run's settings (``LocalSettings``) on
    ``device_type`` ('cpu', 'cuda'), and the five predicted figures of its rows."""
    from accelmap.cost.framework import Framework
    from accelmap.cost.framework import profile as framework_profile
    from accelmap.engine import ServeStep, System, TrainStep, estimate
    from accelmap.units import DType
    from accelmap.workload import Inference, Loss, Optimizer, Recompute, Training

    dtype = DType(s.dtype)
    dev = device_for(acc, fraction, profile)
    fw = Framework.EAGER_CPU if device_type == "cpu" else Framework.EAGER
    # the run trains fp32 parameters under autocast: its residual stream and norms are fp32
    train_fw = replace(framework_profile(fw), stream_dtype=DType.FP32)
    train = estimate(
        spec, System.on(dev),
        Training(batch=s.batch, seq_len=s.seq, dtype=dtype, master_dtype=DType.FP32,
                 grad_dtype=DType.FP32, optimizer=Optimizer.ADAMW, recompute=Recompute.NONE,
                 flash_attention=True, loss=Loss.EAGER),
        framework=train_fw)
    infer = estimate(
        spec, System.on(dev),
        Inference(batch=s.batch, prompt_len=s.seq, output_len=s.decode_tokens,
                  weight_dtype=dtype, act_dtype=dtype, kv_dtype=dtype, flash_attention=True,
                  kv_block=1),
        framework=fw)
    assert isinstance(train, TrainStep) and isinstance(infer, ServeStep)
    predicted = {
        "train": float(train.step_time_s or 0.0),
        "prefill": float(infer.ttft_s or 0.0),
        "decode": float(infer.tpot_s or 0.0),
        "train_memory": max(tensor_bytes(train.memory), build_peak_bytes(spec)),
        "inference_memory": max(tensor_bytes(infer.memory), build_peak_bytes(spec)),
    }
    return train, infer, predicted, (dev, fw)


def predict_local(run: LocalRun, acc: Accelerator, fraction: float = 1.0,
                  profile: CalibrationProfile | None = None,
                  how: str = "") -> LocalComparison:
    from accelmap.cost.framework import Framework

    train, infer, predicted, (dev, fw) = local_estimates(
        run.spec, run.settings, acc, run.environment.device_type, fraction, profile)
    notes = (*run.notes, f"device {run.device}" + (f", {run.threads} threads"
                                                   if run.threads else ""),
             f"accelerator: {how or acc.id}", f"calibration: {dev.calibration}",
             f"memory measured as: {run.memory_method or 'not measurable on this platform'}",
             "peak memory includes the model's construction: "
             f"{build_peak_bytes(run.spec) / 1e9:.3g} GB (fp32 build, tied head allocated "
             "before tying)",
             *_thread_note(profile, run))
    base: dict[str, Any] = {
        "file": "local", "source": "local run", "model": run.spec.id,
        "accelerator": acc.id, "status": Status.OK, "higher_is_better": False,
        "model_id": run.spec.id, "accelerator_id": acc.id, "framework": fw.value,
        "notes": notes,
    }
    rows = [
        Prediction(row_id="local/train", metric="step_time_s", unit="s",
                   kind=MetricKind.TRAINING, measured=run.train.median,
                   predicted=predicted["train"], fits=bool(train.memory.fits), **base),
        _memory_row("local/train/memory", run.train_peak_bytes, predicted["train_memory"],
                    bool(train.memory.fits), base),
        Prediction(row_id="local/prefill", metric="ttft_s", unit="s", kind=MetricKind.TTFT,
                   measured=run.prefill.median, predicted=predicted["prefill"],
                   fits=bool(infer.memory.fits), **base),
        Prediction(row_id="local/decode", metric="tpot_s", unit="s", kind=MetricKind.DECODE,
                   measured=run.decode.median, predicted=predicted["decode"],
                   fits=bool(infer.memory.fits), **base),
        _memory_row("local/inference/memory", run.inference_peak_bytes,
                    predicted["inference_memory"], bool(infer.memory.fits), base),
    ]
    if run.decode_compiled is not None:
        predicted["decode_compiled"] = compiled_tpot(run.spec, run.settings, dev)
        rows.insert(4, Prediction(
            row_id="local/decode/compiled", metric="tpot_s", unit="s", kind=MetricKind.DECODE,
            measured=run.decode_compiled.median, predicted=predicted["decode_compiled"],
            fits=bool(infer.memory.fits),
            **{**base, "framework": Framework.TORCH_COMPILE.value,
               "notes": (*notes, "compiled decode: torch.compile(mode='reduce-overhead') over a "
                         "StaticCache, predicted with the torch-compile profile (fused kernels, "
                         "one CUDA-graph replay per step) at the cache's padded length")}))
    return LocalComparison(rows, predicted, train, infer)


def compiled_tpot(spec: Any, s: Any, dev: Any) -> float:
    """TPOT of a graph-captured decode over a static cache: every step attends over the cache's
    whole padded length (``seq + decode_tokens``: transformers' StaticCache masks, it does not
    shorten), so the step is evaluated there, with the torch-compile profile."""
    from accelmap.cost.framework import Framework
    from accelmap.cost.framework import profile as framework_profile
    from accelmap.engine import ServeStep, System, estimate
    from accelmap.units import DType
    from accelmap.workload import Inference

    dtype = DType(s.dtype)
    est = estimate(spec, System.on(dev),
                   Inference(batch=s.batch, prompt_len=s.seq + s.decode_tokens, output_len=1,
                             weight_dtype=dtype, act_dtype=dtype, kv_dtype=dtype,
                             flash_attention=True, kv_block=1),
                   framework=framework_profile(Framework.TORCH_COMPILE))
    assert isinstance(est, ServeStep)
    return float(est.tpot_s or 0.0)


# The reference model is built in fp32 on the device and then cast (``measure/torch_model.py``
# ``build``: modules constructed under ``torch.device``, then ``model.to(dtype)``).
BUILD_BYTES_PER_PARAM = 4


def build_peak_bytes(spec: Any, bytes_per_param: int = BUILD_BYTES_PER_PARAM) -> float:
    """Bytes live while the reference model is constructed, before any phase runs: every
    parameter at the build precision, plus, with tied embeddings, the LM head's own
    vocab x d weight, which ``nn.Linear`` allocates before ``head.weight = embed.weight`` frees
    it. The cast to bf16 afterwards goes parameter by parameter (``nn.Module._apply``), so it
    never holds more. On the H200 run of llama-3.2-1b this is 4 x 1,235,814,400 + 4 x 128,256
    x 2,048 = 5,993,930,752 B: the inference peak measured there to the byte (the inference
    phases themselves need ~3.1 GB; data/gpu)."""
    from accelmap.models.params import count_params

    extra = spec.vocab_size * spec.d_model if spec.tied_embeddings else 0
    return float((count_params(spec).total + extra) * bytes_per_param)


def _thread_note(profile: CalibrationProfile | None, run: LocalRun) -> tuple[str, ...]:
    """A warning where the profile was measured with other host threads than the run used
    (a CPU profile holds for the threads it was measured with)."""
    if profile is None or not profile.threads or not run.threads or profile.threads == run.threads:
        return ()
    return (f"warning: profile {profile.name!r} was measured with {profile.threads} threads, the "
            f"run used {run.threads}: measure and calibrate with the same threads",)


def _memory_row(row_id: str, measured: int | None, predicted: float, fits: bool,
                base: dict[str, Any]) -> Prediction:
    if measured is None:
        return Prediction(row_id=row_id, metric="peak_memory_bytes", unit="B",
                          **{**base, "status": Status.SKIPPED},
                          skipped_reason="peak memory is not measurable on this platform",
                          predicted=predicted)
    return Prediction(row_id=row_id, metric="peak_memory_bytes", unit="B",
                      measured=float(measured), predicted=predicted, fits=fits, **base)


def summary(rows: list[Prediction]) -> dict[str, Any]:
    """`validate --cases`' summary, plus the time and memory rows apart."""
    from accelmap.validate.report import stats, summarize

    out = summarize(rows).to_dict()
    out["by_quantity"] = {
        "time": stats(r for r in rows if r.unit == "s").to_dict(),
        "memory": stats(r for r in rows if r.unit == "B").to_dict(),
    }
    return out


def profile_for(name: str | None, store: Store) -> CalibrationProfile | None:
    """The named profile from the store (an InputError naming the saved ones when it is not
    there); None when no name was given."""
    return store.load_profile(name) if name is not None else None


def local_accelerator(device: str, hw: str | None, catalog: Catalog
                      ) -> tuple[Accelerator, float, str]:
    """The catalog/local description of the device: (accelerator, fraction in use, how). A GPU
    is the catalog entry its name and memory match, a CPU the local description (derived peaks
    of all its cores); ``--hw`` names either, and a catalog CPU is scaled to the threads in
    use."""
    from accelmap.hardware.local import local_cpu
    from accelmap.lookup import resolve
    from accelmap.measure.backends import torch_backend
    from accelmap.measure.catalog_match import match_gpu

    env = torch_backend(device, "validate --local").environment()
    kind = env.device_type
    if hw:
        acc = resolve(hw, catalog.accelerators, "accelerator", "accelmap hw list")
        fraction = 1.0
        cores = acc.compute_units.count.value if acc.compute_units else None
        if kind == "cpu" and str(acc.device_class) == "cpu" and cores and env.threads:
            fraction = min(1.0, env.threads / cores)
        return acc, fraction, f"--hw {acc.id} (fraction {fraction:.3g} of it in use)"
    if kind == "cuda":
        found = match_gpu(env.device_name, env.memory_bytes or 0.0, catalog)
        if found is None:
            raise InputError(f"{env.device_name} is not in the catalog; pass --hw with the "
                             "closest accelerator id (accelmap hw list)")
        return found, 1.0, f"catalog {found.id} from the device name"
    if kind != "cpu":
        raise InputError(f"no description of device {device!r}; pass --hw ACCELERATOR_ID")
    acc = local_cpu()
    return acc, 1.0, f"local CPU description ({acc.id})"
