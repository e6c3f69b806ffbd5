"""The one estimate: model x system x workload x mapping -> TrainStep or ServeStep.

One device is a one-device system with the trivial mapping; training, prefill, decode and
serving all compose through ``engine.train`` and ``engine.serve``, and the planner calls the
same functions on tables of candidate mappings.
"""

from __future__ import annotations

from dataclasses import replace

from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.execution import execution_model, streams_training_weights
from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.cost.framework import profile as framework_profile
from accelmap.engine import sparsity
from accelmap.engine.dataflow import dataflow_serve
from accelmap.engine.formats import resolve_formats
from accelmap.engine.layout import default_serving_layout
from accelmap.engine.result import Estimate, ServeStep, TrainStep
from accelmap.engine.serve import serve_step
from accelmap.engine.system import System
from accelmap.engine.train import OverlapPolicy, train_step
from accelmap.hardware.cluster import Cluster
from accelmap.hardware.schema import Accelerator
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.workload import Inference, Sparsity, Training

__all__ = ["Estimate", "OverlapPolicy", "ServeStep", "System", "TrainStep", "class_framework",
           "default_mapping",
           "estimate", "resolve_framework", "system_of"]


def system_of(where: System | Cluster | Accelerator,
              profile: CalibrationProfile | None = None) -> System:
    """A System from a cluster, one accelerator, or a System as it is."""
    if isinstance(where, System):
        return where
    if isinstance(where, Cluster):
        return System.of(where, profile)
    return System.single(where, profile)


def default_mapping(system: System, workload: Training | Inference) -> Mapping:
    """What a job runs as when no mapping is given. Training: data parallelism over the whole
    system with ``Mapping.training``'s defaults (the whole batch in one micro-batch on one
    device, one sequence per micro-batch on a cluster, a wafer's weight streaming), the
    workload's recompute wish. Serving: one replica per device; on an SRAM dataflow machine
    one model over all chips."""
    if isinstance(workload, Inference):
        if execution_model(system.accelerator).layer_pipelined:
            return Mapping.serving(replicas=1)  # the compiler lays one model over all chips
        return Mapping.serving(replicas=system.devices)
    return Mapping.training(system.devices, workload.batch, recompute=workload.recompute,
                            streams_weights=streams_training_weights(system.accelerator))


def estimate(model: ModelSpec, system: System | Cluster | Accelerator,
             workload: Training | Inference, mapping: Mapping | None = None, *,
             framework: Framework | str | FrameworkProfile | None = None,
             overlap: OverlapPolicy | None = None,
             imbalance: float = 1.0, profile: CalibrationProfile | None = None) -> Estimate:
    """Predict one training step or one serving batch of ``model`` on ``system`` split by
    ``mapping``. ``framework`` defaults to the device class's stack (cost/execution.py:
    megatron and vllm on GPUs, xla on TPUs, dataflow on SRAM machines, ...);
    ``imbalance`` is the MoE busiest-expert load over the mean; ``profile`` a measured
    calibration of the device (``accelmap calibrate``). A FrameworkProfile may be passed for
    ``framework`` to set a stack's named features (e.g. its attention kernel)."""
    _check_imbalance(model, imbalance)
    sys_ = system_of(system, profile)
    # fp4 resolved to the part's format, W4A4 or weight-only: said in the assumptions
    workload, format_notes = resolve_formats(sys_.accelerator, workload, model.id,
                                             model.is_moe)
    est = _sparse_or_dense(model, sys_, workload, mapping, framework=framework,
                           overlap=overlap, imbalance=imbalance)
    return replace(est, assumptions=(*est.assumptions, *format_notes)) if format_notes else est


def _sparse_or_dense(model: ModelSpec, sys_: System, workload: Training | Inference,
                     mapping: Mapping | None, *,
                     framework: Framework | str | FrameworkProfile | None,
                     overlap: OverlapPolicy | None, imbalance: float) -> Estimate:
    layout_note: tuple[str, ...] = ()
    if mapping is not None:
        m = mapping
    elif isinstance(workload, Inference):  # a layout that holds the model (engine/layout.py)
        m, note = default_serving_layout(model, sys_, workload)
        layout_note = (note,) if note else ()
    else:
        m = default_mapping(sys_, workload)
    if workload.sparsity is not Sparsity.NONE:  # what 2:4 bought, against the dense twin
        sparsity.check(sys_.accelerator, workload)
        est = _estimate(model, sys_, workload, m, framework=framework, overlap=overlap,
                        imbalance=imbalance)
        dense = _estimate(model, sys_, replace(workload, sparsity=Sparsity.NONE), m,
                          framework=framework, overlap=overlap, imbalance=imbalance)
        est = sparsity.with_notes(est, sparsity.notes(sys_.accelerator, workload, est, dense))
    else:
        est = _estimate(model, sys_, workload, m, framework=framework, overlap=overlap,
                        imbalance=imbalance)
    return sparsity.with_notes(est, (*layout_note, *idle_devices(sys_, workload, m)))


def idle_devices(sys_: System, workload: Training | Inference, m: Mapping) -> tuple[str, ...]:
    """A serving mapping on fewer devices than the system has: say which it uses and how to
    use the rest (replicas), so 8 GPUs at tp=1 is never silently one GPU."""
    if not isinstance(workload, Inference) or not m.is_scalar:
        return ()
    used, have = int(m.world), sys_.devices
    if used >= have:
        return ()
    per = int(m.devices_per_replica)
    return (f"uses {used} of the {have} devices (tp {int(m.tp)} x pp {int(m.pp)} x "
            f"{int(m.replicas)} replica(s)), and the figures are for those: give "
            f"--replicas {have // per} to serve on {have // per * per}",)


def _estimate(model: ModelSpec, sys_: System, workload: Training | Inference, m: Mapping, *,
              framework: Framework | str | FrameworkProfile | None,
              overlap: OverlapPolicy | None, imbalance: float) -> Estimate:
    ex = execution_model(sys_.accelerator)
    if isinstance(workload, Training):
        fw = resolve_framework(framework, ex.training).for_model(model)
        return train_step(model, sys_, workload, m, fw, overlap, imbalance)
    fw = resolve_framework(framework, ex.serving, sys_.accelerator.vendor).for_model(
        model, serving=True)
    if ex.layer_pipelined:
        return dataflow_serve(model, sys_, workload, m, fw, imbalance)
    return serve_step(model, sys_, workload, m, fw, imbalance)


def class_framework(where: System | Cluster | Accelerator, training: bool) -> Framework:
    """The stack a device class runs when no framework is named (cost/execution.py): vLLM and
    Megatron on GPUs, XLA on TPUs, a compiled graph on GPU-like ASICs, ..."""
    ex = execution_model(system_of(where).accelerator)
    return ex.training if training else ex.serving


def resolve_framework(framework: Framework | str | FrameworkProfile | None,
             default: Framework, vendor: str | None = None) -> FrameworkProfile:
    """A framework name (or None: the default) as its profile on a GPU of ``vendor`` (the
    stack's platform block, cost/framework.py); a profile as it is."""
    if isinstance(framework, FrameworkProfile):
        return framework
    return framework_profile(framework or default, vendor)


def _check_imbalance(model: ModelSpec, imbalance: float) -> None:
    """The busiest expert's load over the mean lies between 1 (balanced) and experts / top_k
    (every token routed to the same top_k experts)."""
    import math

    from accelmap.errors import InputError

    if model.moe is None and imbalance != 1.0:
        raise InputError(f"MoE imbalance {imbalance!r} applies to mixture-of-experts models; "
                         f"{model.id} is dense: leave --moe-imbalance out")
    limit = model.moe.num_experts / model.moe.top_k if model.moe else math.inf
    if not (math.isfinite(imbalance) and 1.0 <= imbalance <= limit):
        bound = f"{limit:g} (experts / top_k)" if model.moe else "any finite number"
        raise InputError(f"MoE imbalance {imbalance!r} must be a number from 1 (balanced) to "
                         f"{bound}")
