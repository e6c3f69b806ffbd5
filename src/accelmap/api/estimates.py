"""What runs, where, and how fast: systems, workloads, mappings, the estimate and its roofline.

    from accelmap import api
    spec = api.load_model("llama-3.1-70b")
    system = api.load_system(cluster="64xH100")
    wl = api.training(batch=256, seq=8192, recompute="full", tokens="15T")
    est = api.estimate(spec, system, wl, api.mapping(system, wl, tp=8, pp=2, zero=1))
    print(est.step_time_s, est.mfu, est.memory.total)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from accelmap.api.parse import choice, count, dtype
from accelmap.catalog import Catalog, load_catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.execution import streams_training_weights
from accelmap.cost.framework import Framework
from accelmap.cost.schedules import Schedule
from accelmap.engine import OverlapPolicy, System, estimate
from accelmap.engine.layout import default_serving_layout as _default_layout
from accelmap.engine.result import Estimate, ServeStep, TrainStep, op_row
from accelmap.errors import InputError
from accelmap.hardware.cluster import Cluster, of_devices, parse_cluster, resolve_accelerator
from accelmap.hardware.scale_out import ScaleOut, parse_scale_out, with_scale_out
from accelmap.mapping.plan import CpComm, Mapping, Offload, ZeroStage
from accelmap.mapping.plan import cp_comm as parse_cp_comm
from accelmap.models.schema import ModelSpec
from accelmap.units import DType
from accelmap.workload import (
    ALL_LINEAR,
    Adapters,
    Finetune,
    Fp8Scaling,
    GradAccumulation,
    Inference,
    LoraTarget,
    Optimizer,
    Phase,
    PipeSends,
    Recompute,
    Sparsity,
    Training,
)

__all__ = ["Estimate", "OverlapPolicy", "Roofline", "ServeStep", "TrainStep", "adapters",
           "check_one_device", "default_serving_layout", "inference", "load_system",
           "lora_targets", "mapping", "roofline", "serving_mapping", "training"]


def load_system(hw: str | None = None, cluster: str | Cluster | None = None,
                catalog: Catalog | None = None,
                profile: CalibrationProfile | None = None,
                devices: int | None = None, scale_out: str | None = None) -> System:
    """One accelerator (``hw``: id or forgiving name), ``devices`` of it (a cluster built as
    ``NxID`` is: the accelerator's presets, else its own catalog links; see
    ``hardware.cluster.of_devices``), or a cluster (preset id, ``64xH100``, ``2xH100``,
    ``8x8xh100-sxm5-80gb``, ``4xdgx-h100`` or a system YAML file); ``scale_out`` the
    inter-node network in place of the preset's ("4 x 100 Gb/s", "400 Gb/s per GPU":
    ``hardware.scale_out``)."""
    system = _load_system(hw, cluster, catalog, profile, devices)
    if not scale_out:
        return system
    so = parse_scale_out(scale_out)
    if not isinstance(so, ScaleOut):
        raise InputError(f"--{so}" if so else "--scale-out states nothing: write a line rate "
                         "and its scope, e.g. '400 Gb/s per GPU'")
    cl = system.cluster
    if cl.nodes <= 1:
        raise InputError(f"--scale-out {scale_out!r}: the cluster is one node of "
                         f"{cl.devices_per_node}, with no inter-node network; give a --cluster "
                         "of several nodes (64xH100)")
    tiers, _note = with_scale_out(cl.tiers, so, cl.devices_per_node)
    return System.of(replace(cl, tiers=tiers, origin=f"{cl.origin}; scale-out {scale_out}"),
                     profile)


def _load_system(hw: str | None, cluster: str | Cluster | None, catalog: Catalog | None,
                 profile: CalibrationProfile | None, devices: int | None) -> System:
    if (hw is None) == (cluster is None):
        raise InputError("give one accelerator (--hw NAME) or one cluster (--cluster SPEC)")
    if devices is not None and cluster is not None:
        raise InputError("--devices goes with --hw: a --cluster spec gives its own device "
                         "count (write 2xH100 for two)")
    if devices is not None and devices < 1:
        raise InputError(f"--devices {devices}: give a positive device count")
    cat = catalog or load_catalog()
    if cluster is not None:
        cl = cluster if isinstance(cluster, Cluster) else parse_cluster(cluster, cat)
        return System.of(cl, profile)
    acc = resolve_accelerator(str(hw), cat)
    if devices is not None and devices > 1:
        return System.of(of_devices(acc, devices, cat), profile)
    return System.single(acc, profile)


def _tokens(tokens: str | float | None) -> float:
    """Tokens to train from text ('15T'); not given: 0 (time and cost to train not asked)."""
    return count(tokens) if tokens is not None else 0.0


def training(batch: int, seq: int, dtype_: str | DType = "bf16", optimizer: str = "adamw",
             recompute: str | Recompute = "none", flash: bool = True,
             tokens: str | float | None = None, finetune: Adapters | None = None,
             sparsity: str | Sparsity = "none",
             fp8_scaling: str | Fp8Scaling = "tensorwise",
             grad_accumulation: str | GradAccumulation = "fused",
             pp_sends: str | PipeSends = "batched") -> Training:
    """A training job: ``batch`` sequences of ``seq`` tokens per optimizer step; ``finetune``
    the LoRA/QLoRA adapters of a parameter-efficient fine-tune (``adapters``); ``sparsity``
    "2:4" runs the forward and dgrad GEMMs on 2:4-sparse weights (cost/sparsity.py);
    ``fp8_scaling`` "rowwise" is torchao's row-wise FP8 recipe (ops/recipes.py);
    ``grad_accumulation`` the stack's pass adding micro-batch gradients up; ``pp_sends`` how
    its pipeline sends between stages (``workload.PipeSends``); QLoRA's
    dtypes as ``Training.fine_tune`` sets them."""
    return Training.fine_tune(batch, seq, finetune, dtype(dtype_, "training"),
                              optimizer=choice(Optimizer, optimizer, "optimizer"),
                              recompute=choice(Recompute, recompute, "recompute policy"),
                              flash_attention=flash, tokens_to_train=_tokens(tokens),
                              sparsity=choice(Sparsity, sparsity, "sparsity"),
                              fp8_scaling=choice(Fp8Scaling, fp8_scaling, "FP8 scaling"),
                              grad_accumulation=choice(GradAccumulation, grad_accumulation,
                                                       "gradient accumulation"),
                              pp_sends=choice(PipeSends, pp_sends, "pipeline sends"))


# named target sets for ``--lora-targets`` (besides a comma list of q, k, v, o, gate, up,
# down, with or without PEFT's ``_proj`` suffix)
LORA_TARGET_SETS: dict[str, frozenset[LoraTarget]] = {
    "all-linear": ALL_LINEAR,  # PEFT target_modules="all-linear"; QLoRA's choice
    "attention": frozenset({LoraTarget.Q, LoraTarget.K, LoraTarget.V, LoraTarget.O}),
    "mlp": frozenset({LoraTarget.GATE, LoraTarget.UP, LoraTarget.DOWN}),
    # NeMo's default LoRA target (target_modules: [attention_qkv]): the fused QKV projection
    "qkv": frozenset({LoraTarget.Q, LoraTarget.K, LoraTarget.V}),
    "attention_qkv": frozenset({LoraTarget.Q, LoraTarget.K, LoraTarget.V}),
}


def lora_targets(text: str) -> frozenset[LoraTarget]:
    """'all-linear', 'attention', 'mlp', 'qkv' or a comma list such as 'q,v' or
    'q_proj,v_proj'."""
    key = text.strip().lower()
    if key in LORA_TARGET_SETS:
        return LORA_TARGET_SETS[key]
    out: set[LoraTarget] = set()
    for part in key.split(","):
        name = part.strip().removesuffix("_proj")
        if not name:
            continue
        try:
            out.add(LoraTarget(name))
        except ValueError:
            raise InputError(
                f"unknown LoRA target {part.strip()!r}: use {', '.join(LORA_TARGET_SETS)} or a "
                f"comma list of {', '.join(t.value for t in LoraTarget)}") from None
    if not out:
        raise InputError("--lora-targets is empty: e.g. --lora-targets q,v or all-linear")
    return frozenset(out)


def adapters(finetune: str | Finetune = "full", rank: int | None = None,
             targets: str | None = None, double_quant: bool = True,
             paged_optimizer: bool | None = None) -> Adapters | None:
    """The fine-tuning method as a workload part: None for a full fine-tune (every weight
    trains), else LoRA/QLoRA adapters with PEFT's defaults (r = 8, all linear layers) and, for
    QLoRA, its paged optimizer unless told otherwise."""
    method = choice(Finetune, finetune, "fine-tuning method")
    if method is Finetune.FULL:
        if rank is not None or targets is not None:
            raise InputError("--lora-rank and --lora-targets need --finetune lora or qlora")
        return None
    return Adapters(method=method, rank=8 if rank is None else rank,
                    targets=ALL_LINEAR if targets is None else lora_targets(targets),
                    double_quant=double_quant,
                    paged_optimizer=(method is Finetune.QLORA if paged_optimizer is None
                                     else paged_optimizer))


def inference(batch: int, prompt: int, output: int, weights: str | DType = "bf16",
              kv: str | DType | None = None, group: int = 128, flash: bool = True,
              sparsity: str | Sparsity = "none", moe_weights: str | DType | None = None
              ) -> Inference:
    """A serving batch. Activations run in FP8 with FP8 weights (FP8 GEMMs take FP8 inputs:
    TensorRT-LLM and vLLM's fp8 W8A8), else in BF16 (4-bit GEMMs quantize their inputs
    themselves); the KV cache follows the activations unless ``kv`` says otherwise;
    ``sparsity`` "2:4" stores the layers' GEMM weights 2:4-sparse (ops/sparsity.py);
    ``moe_weights`` stores the routed experts in their own format (mixed recipes). How the
    formats run on a part (``fp4``, W4A4 or weight-only) is decided by the estimate
    (engine/formats.py)."""
    w = dtype(weights, "weight")
    act = DType.FP8 if w is DType.FP8 else DType.BF16
    return Inference(batch=batch, prompt_len=prompt, output_len=output, weight_dtype=w,
                     act_dtype=act, kv_dtype=dtype(kv, "KV-cache") if kv is not None else act,
                     quant_group=group, flash_attention=flash,
                     sparsity=choice(Sparsity, sparsity, "sparsity"),
                     moe_weight_dtype=None if moe_weights is None
                     else dtype(moe_weights, "MoE-weight"))


def mapping(system: System, workload: Training, *, tp: int = 1, pp: int = 1,
            dp: int | None = None, cp: int = 1, ep: int = 1, zero: int | None = None,
            micro_batch: int | None = None, vpp: int = 1,
            schedule: str | Schedule | None = None, sequence_parallel: bool = True,
            tp_overlap: bool = False, force_tp: bool = False, shard_group: int | None = None,
            offload: str | Offload | None = None, first_stage_layers: int | None = None,
            last_stage_layers: int | None = None, embedding_in_split: bool = False,
            loss_in_split: bool = False, cp_comm: str | CpComm = CpComm.P2P,
            offload_activations: int = 0) -> Mapping:
    """A training mapping on ``system``: names parsed here, every default applied by
    ``Mapping.training`` (dp filling the system, ZeRO, micro-batch, schedule, a wafer's weight
    streaming); the workload's recompute wish is settled by the engine. The pipeline split
    follows Megatron-LM's arguments (``Mapping.stage_layers``): the first/last stage's layers,
    or the embedding/loss counted as layers; ``offload_activations`` layers of each stage keep
    their activations in host memory (Megatron-Core --cpu-offloading-num-layers)."""
    if zero is not None and int(zero) not in (0, 1, 2, 3):
        raise InputError(f"zero={zero}: the ZeRO stage is 0, 1, 2 or 3")
    return Mapping.training(
        system.devices, workload.batch,
        streams_weights=streams_training_weights(system.accelerator),
        zero=None if zero is None else ZeroStage(int(zero)), micro_batch=micro_batch,
        offload=None if offload is None else choice(Offload, offload, "offload"),
        dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, virtual_stages=vpp,
        schedule=None if schedule is None else choice(Schedule, schedule, "schedule"),
        sequence_parallel=sequence_parallel, tp_comm_overlap=tp_overlap,
        force_tp_across_nodes=force_tp, shard_group=shard_group,
        first_stage_layers=first_stage_layers, last_stage_layers=last_stage_layers,
        embedding_in_split=embedding_in_split, loss_in_split=loss_in_split,
        cp_comm=parse_cp_comm(cp_comm), offload_activations=offload_activations)


def check_one_device(system: System, hw: str | None, **degrees: int | None) -> None:
    """Refuse parallel degrees above 1 on one device named by ``hw`` (no cluster, no
    ``devices``), with the fix: the CLI and the web answer it in the same words."""
    split = [f"--{k} {v}" for k, v in degrees.items() if v is not None and v > 1]
    if split and hw is not None and system.devices == 1:
        raise InputError(f"{' '.join(split)} splits the work over several devices, but "
                         f"--hw {hw} is one device: add --devices N or use --cluster "
                         f"NxDEVICE (e.g. --cluster 8x{system.accelerator.id})")


def default_serving_layout(model: ModelSpec, system: System, workload: Inference
                           ) -> tuple[Mapping, str | None]:
    """The serving layout ``estimate`` takes on ``system`` when none is given, and the sentence
    saying why (``engine.layout``)."""
    return _default_layout(model, system, workload)


def serving_mapping(tp: int | None = 1, pp: int | None = 1, ep: int | None = 1,
                    replicas: int | None = 1, dp_attention: bool = False) -> Mapping | None:
    """``replicas`` copies of tp x pp devices (vLLM expert parallelism splits tp;
    ``dp_attention``: attention data-parallel over the tp group). All four left out (None): no
    mapping, so ``estimate`` chooses a layout that holds the model
    (``engine.layout.default_serving_layout``) and says which; DP attention needs its group
    given (--tp)."""
    if tp is None and pp is None and ep is None and replicas is None:
        if dp_attention:
            raise InputError("--dp-attention runs attention data-parallel over the --tp group: "
                             "give --tp (e.g. --tp 8 --ep 8 --dp-attention)")
        return None
    def given(v: int | None) -> int:  # left out is 1; a given 0 or -1 reaches the check
        return 1 if v is None else v
    return Mapping.serving(given(tp), given(pp), given(ep), given(replicas),
                           dp_attention=dp_attention)


# -- roofline -----------------------------------------------------------------------------------
# The operator passes each phase runs: a training step has three, serving phases one each.
_PASSES = {Phase.TRAIN: ("forward", "backward", "optimizer"), Phase.PREFILL: ("prefill",),
           Phase.DECODE: ("decode",)}


@dataclass(frozen=True)
class Roofline:
    """Per-operator roofline of one phase: FLOPs, bytes, intensity, time and bound per operator
    (``engine.result.op_row``), the device's ridge point at achievable bandwidth, and the
    estimate's calibration and assumptions."""

    model: str
    accelerator: str
    phase: Phase
    ridge_flop_per_byte: float
    total_s: float
    ops: list[dict[str, Any]]
    calibration: str | None
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "accelerator": self.accelerator, "phase": self.phase.value,
                "ridge_flop_per_byte": self.ridge_flop_per_byte, "total_s": self.total_s,
                "ops": self.ops, "calibration": self.calibration,
                "assumptions": list(self.assumptions)}


def roofline(model: ModelSpec, system: System, workload: Training | Inference,
             phase: str | Phase | None = None, mapping: Mapping | None = None, *,
             framework: Framework | str | None = None) -> Roofline:
    """The roofline of ``phase``: train for a Training workload; prefill (the default) or decode
    for an Inference one. ``mapping`` left out is ``default_mapping``'s."""
    ph = choice(Phase, phase or (Phase.TRAIN if isinstance(workload, Training)
                                 else Phase.PREFILL), "phase")
    if (ph is Phase.TRAIN) != isinstance(workload, Training):
        raise InputError(f"phase {ph.value} does not match a "
                         f"{'training' if isinstance(workload, Training) else 'serving'} "
                         "workload: use train for training, prefill or decode for serving")
    est: Estimate = estimate(model, system, workload, mapping, framework=framework)
    rows = [op_row(t) for g in _PASSES[ph] for t in est.ops.get(g, ())]
    return Roofline(model=est.model, accelerator=est.accelerator, phase=ph,
                    ridge_flop_per_byte=system.device.ridge_point,
                    total_s=sum(r["total_s"] for r in rows), ops=rows,
                    calibration=est.calibration, assumptions=tuple(est.assumptions))
