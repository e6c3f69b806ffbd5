"""Multi-device rows through the one engine (``engine/train.py``, ``engine/serve.py``).

Training (one :class:`~accelmap.validate.runs.TrainingRun`, from a run file or the
transcription's adapter): cluster and mapping from the run (``validate/layout.py``), defaults of
its software stack for its release where it is silent (``validate/stacks.py``: the overlap of
the gradient reduction too), the global batch in sequences, and the metric the run reports,
counted the way its source counts it (``runs.METRICS``; the transcription's
``tflops_definition``):

- model TFLOP/s per device (NeMo, llm-foundry "Model TFLOP": MFU x peak) -> ``tflops_per_device``;
- hardware TFLOP/s with the recompute forward counted (Megatron papers, Eq. 3; also assumed
  when a Megatron row leaves the definition blank) -> ``hardware_tflops_per_device``;
- tokens/s per device (torchtitan) -> ``tokens_per_s_per_device``;
- MFU only -> ``mfu`` against the catalog's dense peak of the training dtype.

A published configuration the engine finds too big for memory is still predicted, flagged
``fits=False`` with the sentence "published configuration predicted NOT to fit" (the summary
counts them; the goal is none). A mapping the engine rejects outright (a broken rule) cannot be
timed and is skipped with the rule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from accelmap.catalog import Catalog
from accelmap.cost.execution import execution_model
from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.engine import OverlapPolicy, estimate
from accelmap.engine.result import Estimate
from accelmap.errors import InputError
from accelmap.hardware.cluster import Cluster
from accelmap.hardware.schema import Accelerator
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.units import DType
from accelmap.validate import layout as lay
from accelmap.validate import resolve as rs
from accelmap.validate.cases import TrainingCase
from accelmap.validate.outcome import MetricKind, Prediction, done, skip
from accelmap.validate.runs import METRICS, Metric, TrainingRun
from accelmap.validate.stacks import (
    FRAMEWORK_NAMES,
    OTHER_NOTE,
    Stack,
    StackDefaults,
    compiled_framework,
    defaults_for,
    optimizer_storage,
    stack_profile,
)
from accelmap.validate.transcribe import from_case, read_metric
from accelmap.validate.transcribe import hardware_flops_meant as hardware_flops_meant
from accelmap.workload import Fp8Scaling, GradAccumulation, Inference, PipeSends, Training

NOT_FIT = "published configuration predicted NOT to fit"
FP8_NOTE = ("FP8: linear layers at the FP8 rate; attention, vector ops and stored activations "
            "in BF16 (Transformer Engine / torchao float8 recipes)")


def training_metric(case: TrainingCase, stack: Stack | None
                    ) -> tuple[str, str, float | None, float, str | None]:
    """(engine metric, unit, measured value, scale engine -> row unit, note) of a transcription
    row (read by :func:`accelmap.validate.transcribe.read_metric`)."""
    metric, value, note = read_metric(case, stack)
    spec = METRICS[metric or Metric.TFLOPS_MODEL]
    return spec.engine_key, spec.unit, value, spec.scale, note


def verified_memory(case: Any) -> float | None:
    """The row's ``accel_mem_GB`` when it is a verified number (not "80?")."""
    return None if "accel_mem_GB" in case.unverified else case.accel_mem_gb


def breakdown(est: Estimate) -> dict[str, float]:
    """Share of the step per phase (forward, backward, bubble, exposed_comm/tp, ...)."""
    step = float(getattr(est, "step_time_s", None) or 0.0)
    tree = est.rollup(depth=1)
    tree.update({k: v for k, v in est.rollup(depth=2).items() if k.startswith("exposed_comm/")})
    tree.pop("exposed_comm", None)
    return {k: float(v) / step for k, v in tree.items()} if step else {}


def _describe(shares: dict[str, float]) -> str:
    parts = [f"{k} {v:.0%}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1])
             if v >= 0.005]
    return "step time: " + ", ".join(parts)


@dataclass(frozen=True)
class TrainingPlan:
    """Everything the distributed engine needs for one row, and what was assumed on the way."""

    spec: ModelSpec
    cluster: Cluster
    workload: Training
    mapping: Mapping
    framework: FrameworkProfile  # the release's profile with its named features
    metric: str  # key in Estimate.metrics
    scale: float  # engine metric -> the row's unit
    overlap: OverlapPolicy | None = None  # None: the engine's default for the mapping

    def estimate(self) -> Estimate:
        return estimate(self.spec, self.cluster, self.workload, self.mapping,
                        framework=self.framework, overlap=self.overlap)


def run_base(run: TrainingRun, framework: Framework) -> Prediction:
    """The unscored prediction of a run: its metric and measured value."""
    spec = METRICS[run.metric] if run.metric else METRICS[Metric.TFLOPS_MODEL]
    return Prediction(run.id, run.file, run.source, run.model or "(dimensions)",
                      run.accelerator, metric=spec.engine_key, unit=spec.unit,
                      kind=MetricKind.TRAINING, measured=run.value,
                      higher_is_better=spec.higher_is_better, framework=framework.value)


def _problems(run: TrainingRun, fields: tuple[str, ...]) -> list[str]:
    return [str(p) for p in run.problems if p.field in fields]


def _overlap(d: StackDefaults, m: Mapping) -> OverlapPolicy | None:
    """The stack's overlap of data-parallel and stage-to-stage communication (None: the
    engine's default)."""
    if d.overlap_grad_reduce and d.overlap_p2p is None:
        return None
    return OverlapPolicy(tp=m.tp_comm_overlap, dp_grad_reduce=d.overlap_grad_reduce,
                         dp_param_gather=d.overlap_grad_reduce, pp_p2p=d.overlap_p2p)


def _silent_shape(run: TrainingRun, d: StackDefaults | None, notes: list[str]) -> TrainingRun:
    """A model built from its dimensions whose sequence length or vocabulary the run leaves
    out: the release's example scripts' (StackDefaults.seq_len / vocab), noted."""
    if d is None or run.arch.layers is None:
        return run
    if run.seq_len is None and d.seq_len:
        run = replace(run, seq_len=d.seq_len)
        notes.append(f"seq_len not stated: {d.seq_len} ({d.release} example scripts)")
    if run.arch.vocab is None and d.vocab:
        run = replace(run, arch=replace(run.arch, vocab=d.vocab))
        notes.append(f"vocabulary not stated: {d.vocab:,} ({d.release} example scripts)")
    return run


def _in_house_framework(acc: Accelerator | None, fw: Framework) -> Framework:
    """An in-house stack's cost profile: Megatron-Core's on a GPU, else the device class's own
    compiled stack (cost/execution.py: XLA on a TPU for T5X/Pathways)."""
    if acc is None:
        return fw
    return execution_model(acc).training


def plan_run(run: TrainingRun, catalog: Catalog
             ) -> tuple[Prediction, TrainingPlan | None, list[str], list[str]]:
    """(unscored prediction, plan or None, reasons it cannot be planned, notes) of a run on
    more than one device."""
    stack = run.framework
    d, release_note = defaults_for(stack, run.version, run.year) if stack else (None, None)
    fw = compiled_framework(stack, bool(run.compile)) if stack else Framework.EAGER
    base = run_base(run, fw)
    reasons: list[str] = _problems(run, ("framework",))
    if stack is None and not reasons:
        reasons.append(f"framework not stated; write framework: one of {', '.join(FRAMEWORK_NAMES)}"
                       " (with its version, e.g. megatron-lm 0.9)")
    notes: list[str] = list(run.reading_notes) + ([release_note] if release_note else [])
    run = _silent_shape(run, d, notes)
    dev, model, more, resolved = rs.resolve_run(run, catalog, fw is Framework.MEGATRON)
    reasons += more
    notes += resolved
    if stack is Stack.OTHER:
        fw = _in_house_framework(dev.value.acc if dev.value is not None else None, fw)
        notes.append(f"framework {run.version or 'other'!r} is an in-house stack: "
                     f"{OTHER_NOTE}; cost profile {fw.value}")
    dtype = run.precision
    unread = _problems(run, ("precision",))
    if dtype is None and not unread and d is not None and d.precision is not None:
        dtype = d.precision
        notes.append(f"precision not stated: {dtype.value} ({d.source})")
    if dtype is None:
        reasons += unread or ["precision not stated"]
    if dtype is DType.FP8:
        notes.append(FP8_NOTE)
        if run.fp8_scaling is Fp8Scaling.ROWWISE:
            notes.append("FP8 row-wise scaling (torchao rowwise): each gradient GEMM writes "
                         "fp32 and a kernel rescales it (pytorch/ao PR #1325)")
    elif run.fp8_scaling is Fp8Scaling.ROWWISE and dtype is not None:
        reasons.append(f"fp8_scaling rowwise needs precision fp8 (the run is in {dtype.value})")
    if dev.value is not None and dev.value.fraction != 1.0:
        reasons.append("multi-device runs of part of a device are not modelled")
    reasons += [str(p) for p in run.problems if p.field not in ("framework", "precision")]
    if reasons or d is None or dev.value is None or model.value is None:
        return base, None, reasons, notes
    assert run.seq_len is not None and dtype is not None and run.metric is not None
    acc: Accelerator = dev.value.acc
    base = replace(base, model_id=model.value.id, accelerator_id=acc.id)
    cluster = lay.build_cluster(acc, run.device_count or 1, run.nodes, catalog, run.scale_out)
    notes += cluster.notes
    if cluster.value is None:
        return base, None, [cluster.reason or "cluster"], notes
    m = lay.run_mapping(run, cluster.value, d, notes, model.value)
    if isinstance(m, str):
        return base, None, [m], notes
    flash = d.flash_attention if run.flash_attention is None else run.flash_attention
    opt = optimizer_storage(d, run.model, run.notes)
    if opt.source:
        notes.append(f"optimizer storage: {opt.source}")
    adapters, lora_note = rs.run_adapters(run)
    notes += [lora_note] if lora_note else []
    wl = Training(batch=lay.run_global_batch(run, m, notes), seq_len=run.seq_len, dtype=dtype,
                  adapters=adapters,
                  grad_dtype=run.grad_reduce or opt.grad_dtype or d.gradient_dtype(dtype),
                  grad_accumulation=d.accumulation(dtype), pp_sends=d.pp_sends,
                  recompute=m.recompute, flash_attention=flash, dropout=d.dropout,
                  state_dtype=opt.state_dtype, master_dtype=opt.master_dtype,
                  master_remainders=opt.master_remainders,
                  fp8_params=opt.fp8_params and dtype is DType.FP8, loss=d.loss,
                  fp8_scaling=run.fp8_scaling or Fp8Scaling.TENSORWISE)
    notes += _accumulation_note(wl, d) + _sends_note(wl, m, d)
    overlap = _overlap(d, m)
    prof = stack_profile(d, fw, model.value)
    notes.append(f"mapping {m.describe()}, global batch {wl.batch}, framework {fw.value}"
                 + (f", attention kernel {prof.attention.value}" if flash
                    else ", no FlashAttention")
                 + ("" if overlap is None else ", gradient reduction after the backward"))
    spec = METRICS[run.metric]
    plan = TrainingPlan(model.value, cluster.value, wl, m, prof, spec.engine_key, spec.scale,
                        overlap)
    if d.stack is Stack.OTHER and run.micro_batch is None and m.micro_batch > 1:
        plan = _accumulate_to_fit(plan, notes)
    return base, plan, [], notes


def _accumulation_note(wl: Training, d: StackDefaults) -> list[str]:
    """The stack's own gradient-accumulation pass, when it has one (workload.GradAccumulation)."""
    if wl.grad_accumulation is GradAccumulation.FUSED:
        return []
    return [f"gradient accumulation {wl.grad_accumulation.value}: a pass of "
            f"{wl.grad_accumulation.bytes_per_param:g} bytes per parameter per micro-batch "
            f"({d.source})"]


def _sends_note(wl: Training, m: Mapping, d: StackDefaults) -> list[str]:
    """The stack's blocking pipeline sends, when it has them (workload.PipeSends)."""
    if wl.pp_sends is PipeSends.BATCHED or m.pp <= 1:
        return []
    whole = ", each tp rank sending the whole input gradient back" \
        if wl.pp_sends is PipeSends.BLOCKING_WHOLE_GRAD else ""
    return [f"pipeline sends {wl.pp_sends.value}: every send and receive a blocking call of "
            f"its own, each transfer waited for on both of its stages{whole} ({d.release})"]


def _accumulate_to_fit(plan: TrainingPlan, notes: list[str]) -> TrainingPlan:
    """An in-house stack's unstated micro-batch is the rank's whole batch (no gradient
    accumulation, validate/stacks.py OTHER_NOTE); where that does not fit, the stack would
    accumulate: the largest micro-batch dividing the local batch that fits, noted."""
    est = plan.estimate()
    if est.feasible or est.violated_rule is not None:
        return plan
    whole = int(plan.mapping.micro_batch)
    for mb in range(whole - 1, 0, -1):
        if whole % mb:
            continue
        smaller = replace(plan, mapping=replace(plan.mapping, micro_batch=mb))
        if smaller.estimate().feasible:
            notes.append(f"the whole local batch of {whole} does not fit: micro-batches of {mb} "
                         f"with gradient accumulation, as the stack would run it")
            return smaller
    return plan


def plan_training(case: TrainingCase, catalog: Catalog
                  ) -> tuple[Prediction, TrainingPlan | None, list[str], list[str]]:
    """:func:`plan_run` of a transcription row."""
    return plan_run(from_case(case), catalog)


def predict_run(run: TrainingRun, catalog: Catalog, calibrated: frozenset[str]) -> Prediction:
    """A multi-device run through the distributed engine."""
    base, plan, reasons, notes = plan_run(run, catalog)
    if plan is None:
        return skip(base, reasons, notes)
    try:
        est = plan.estimate()
    except InputError as e:  # a format recipe the part cannot run (engine/formats.py)
        return skip(base, [str(e)], notes)
    if "violated_rule" in est.metrics:
        return skip(base, [f"the engine rejects the mapping: {est.reason}"], notes)
    shares = breakdown(est)
    notes.append(_describe(shares))
    if not est.feasible:
        notes.append(f"{NOT_FIT}: {est.reason}")
    return done(base, float(est.metrics[plan.metric]) * plan.scale, calibrated, notes,
                fits=bool(est.feasible), breakdown=shares)


def predict_training(case: TrainingCase, catalog: Catalog,
                     calibrated: frozenset[str]) -> Prediction:
    return predict_run(from_case(case), catalog, calibrated)


def serve_estimate(spec: Any, acc: Accelerator, devices: int, case: Any, wl: Inference,
                   fw: Framework | FrameworkProfile, catalog: Catalog, notes: list[str]
                   ) -> Estimate | str:
    """The multi-device inference estimate for a row, or why it cannot be made."""
    cluster = lay.build_cluster(acc, devices, None, catalog)
    notes += cluster.notes
    if cluster.value is None:
        return cluster.reason or "cluster"
    m = lay.serve_mapping(case, notes)
    if isinstance(m, str):
        return m
    est = estimate(spec, cluster.value, wl, m, framework=fw)
    if "violated_rule" in est.metrics:
        return f"the engine rejects the mapping: {est.reason}"
    return est
