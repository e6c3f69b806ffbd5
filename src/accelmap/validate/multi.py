"""Multi-device rows through the distributed engine (``parallel/train.py``, ``parallel/serve.py``).

Training: cluster and mapping from the row (``validate/layout.py``), defaults of the row's
software stack where it is silent (``validate/stacks.py``), the global batch in sequences, and
the metric the row reports, counted the way its source counts it (``tflops_definition``):

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
from accelmap.cost.framework import Framework
from accelmap.engine import estimate
from accelmap.engine.result import Estimate
from accelmap.hardware.cluster import Cluster
from accelmap.hardware.schema import Accelerator
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.units import DType
from accelmap.validate import layout as lay
from accelmap.validate import resolve as rs
from accelmap.validate.cases import TrainingCase
from accelmap.validate.outcome import MetricKind, Prediction, done, skip
from accelmap.validate.stacks import (
    DEFAULTS,
    Stack,
    optimizer_storage,
    stack_framework,
    training_stack,
)
from accelmap.workload import Inference, Training

NOT_FIT = "published configuration predicted NOT to fit"
FP8_NOTE = ("FP8: linear layers at the FP8 rate; attention, vector ops and stored activations "
            "in BF16 (Transformer Engine / torchao float8 recipes)")


def hardware_flops_meant(definition: str, megatron: bool) -> tuple[bool, str | None]:
    """Whether a row's TFLOP/s count hardware FLOPs (recompute included) rather than model
    FLOPs, from its definition column, and a note when the column does not say."""
    d = definition.lower()
    if "model" in d:
        return False, None
    if any(w in d for w in ("hardware", "hfu", "recompute")):
        return True, None
    if megatron:
        return True, ("TFLOP/s definition not stated: Megatron's Eq. 3 counts the recompute "
                      "forward (hardware FLOPs)")
    return False, "TFLOP/s definition not stated: model FLOPs assumed"


def training_metric(case: TrainingCase, stack: Stack | None
                    ) -> tuple[str, str, float | None, float, str | None]:
    """(engine metric, unit, measured value, scale engine -> row unit, note)."""
    if case.achieved_tflops_per_device is not None:
        hardware, note = hardware_flops_meant(case.tflops_definition,
                                              stack is Stack.MEGATRON_LM)
        return ("hardware_tflops_per_device" if hardware else "tflops_per_device", "TFLOP/s",
                case.achieved_tflops_per_device, 1.0, note)
    if case.tokens_per_s_per_device is not None:
        return "tokens_per_s_per_device", "tokens/s", case.tokens_per_s_per_device, 1.0, None
    if case.mfu_pct is not None:
        return ("mfu", "%", case.mfu_pct, 100.0,
                "MFU against the catalog's dense peak of the training dtype")
    return "tflops_per_device", "TFLOP/s", None, 1.0, None


def verified_memory(case: Any) -> float | None:
    """The row's ``accel_mem_GB`` when it is a verified number (not "80?")."""
    return None if "accel_mem_GB" in case.unverified else case.accel_mem_gb


def breakdown(est: Estimate) -> dict[str, float]:
    """Share of the step per phase (forward, backward, bubble, exposed_comm/tp, ...)."""
    step = float(est.metrics.get("step_time_s") or 0.0)
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
    framework: Framework
    metric: str  # key in Estimate.metrics
    scale: float  # engine metric -> the row's unit

    def estimate(self) -> Estimate:
        return estimate(self.spec, self.cluster, self.workload, self.mapping,
                        framework=self.framework)


def plan_training(case: TrainingCase, catalog: Catalog
                  ) -> tuple[Prediction, TrainingPlan | None, list[str], list[str]]:
    """(unscored prediction, plan or None, reasons it cannot be planned, notes)."""
    stack = training_stack(case.framework)
    fw = stack_framework(stack, case.framework) if stack else Framework.EAGER
    key, unit, measured, scale, mnote = training_metric(case, stack)
    base = Prediction(case.row_id, case.file, case.source, case.model, case.accelerator,
                      metric=key, unit=unit, kind=MetricKind.TRAINING, measured=measured,
                      framework=fw.value)
    reasons: list[str] = []
    notes: list[str] = [mnote] if mnote else []
    if stack is None:
        reasons.append(f"framework {case.framework!r} is no known training stack")
    if "lora" in case.model.lower():
        reasons.append("LoRA fine-tuning is not modelled")
    dev = rs.resolve_device(case.accelerator, catalog, memory_gb=verified_memory(case))
    model = rs.resolve_model(case.model, case.arch, catalog, case.seq_len,
                             fw is Framework.MEGATRON)
    for res in (dev, model):
        reasons += [res.reason] if res.reason else []
        notes += res.notes
    if measured is None:
        reasons.append("no TFLOP/s, tokens/s or MFU per device to compare")
    if case.seq_len is None:
        reasons.append("seq_len not stated")
    dtype = rs.training_dtype(case.precision)
    if dtype is None and stack is Stack.MEGATRON_LM and not case.precision.strip():
        dtype = DType.FP16
        notes.append("precision not stated: fp16 (Megatron-LM 2021 GPT scripts, --fp16)")
    if dtype is None:
        reasons.append(f"precision {case.precision!r} is not understood")
    if dtype is DType.FP8:
        notes.append(FP8_NOTE)
    if dev.value is not None and dev.value.fraction != 1.0:
        reasons.append("multi-device runs of part of a device are not modelled")
    if reasons or stack is None or dev.value is None or model.value is None:
        return base, None, reasons, notes
    assert case.seq_len is not None and dtype is not None
    acc: Accelerator = dev.value.acc
    base = replace(base, model_id=model.value.id, accelerator_id=acc.id)
    d = DEFAULTS[stack]
    cluster = lay.build_cluster(acc, case.parallel.devices or 1, case.parallel.nodes, catalog)
    notes += cluster.notes
    if cluster.value is None:
        return base, None, [cluster.reason or "cluster"], notes
    m = lay.training_mapping(case, cluster.value, d, notes)
    if isinstance(m, str):
        return base, None, [m], notes
    opt = optimizer_storage(stack, case.model, case.notes_text)
    if opt.source:
        notes.append(f"optimizer storage: {opt.source}")
    wl = Training(batch=lay.global_batch(case, m, notes), seq_len=case.seq_len, dtype=dtype,
                  grad_dtype=opt.grad_dtype or lay.grad_dtype(case.precision, d),
                  recompute=m.recompute, flash_attention=d.flash_attention, dropout=d.dropout,
                  state_dtype=opt.state_dtype, master_dtype=opt.master_dtype,
                  master_remainders=opt.master_remainders,
                  fp8_params=opt.fp8_params and dtype is DType.FP8, loss=d.loss)
    notes.append(f"mapping {m.describe()}, global batch {wl.batch}, framework {fw.value}"
                 + ("" if d.flash_attention else ", no FlashAttention"))
    return base, TrainingPlan(model.value, cluster.value, wl, m, fw, key, scale), [], notes


def predict_training(case: TrainingCase, catalog: Catalog,
                     calibrated: frozenset[str]) -> Prediction:
    base, plan, reasons, notes = plan_training(case, catalog)
    if plan is None:
        return skip(base, reasons, notes)
    est = plan.estimate()
    if "violated_rule" in est.metrics:
        return skip(base, [f"the engine rejects the mapping: {est.reason}"], notes)
    shares = breakdown(est)
    notes.append(_describe(shares))
    if not est.feasible:
        notes.append(f"{NOT_FIT}: {est.reason}")
    return done(base, float(est.metrics[plan.metric]) * plan.scale, calibrated, notes,
                fits=bool(est.feasible), breakdown=shares)


def serve_estimate(spec: Any, acc: Accelerator, devices: int, case: Any, wl: Inference,
                   fw: Framework, catalog: Catalog, notes: list[str]) -> Estimate | str:
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
