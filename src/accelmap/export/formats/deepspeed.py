"""DeepSpeed: the plan as ``ds_config.json`` plus the ``deepspeed`` launcher line.

What the JSON can say: the batch split, bf16/fp16, the ZeRO stage, CPU offload of optimizer state
and (stage 3 only) parameters, activation checkpointing settings, AutoTP tensor parallelism and
AutoEP expert parallelism. What it cannot: pipeline stages (built in code with
``deepspeed.pipe.PipelineModule``), interleaved stages, context/sequence parallel degrees, and a
selective (attention-only) recompute policy; those are reported in ``unsupported``.

Two caveats a user should know (not plan fields, so not in ``unsupported``):
``activation_checkpointing`` only configures ``deepspeed.checkpointing.checkpoint``; the model code
(or Hugging Face ``gradient_checkpointing_enable()``) must wrap each layer. AutoTP and AutoEP
partition Hugging Face models by their module names.

LoRA/QLoRA plans: the launched script is a Hugging Face one (Trainer or Accelerate over
DeepSpeed), so the adapters travel as PEFT's ``adapter_config.json`` and, for QLoRA, the
``BitsAndBytesConfig`` of the 4-bit base as ``bnb_config.json`` (export/peft.py); ds_config.json
is the same as for full training (the frozen base simply has no gradients or optimizer state).

Every key below is from docs/_pages/config-json.md of deepspeedai/DeepSpeed at commit
``DS_COMMIT`` (section named in each comment); the launcher flags are from
deepspeed/launcher/runner.py (``--hostfile``, ``--num_nodes``, ``--num_gpus``).
"""

from __future__ import annotations

import json
from typing import Any

from accelmap.export import peft
from accelmap.export.base import (
    ACCELERATOR_REASON,
    ACT_OFFLOAD_REASON,
    CP_COMM_REASON,
    FRAMEWORK_REASON,
    MODEL_REASON,
    PIPE_REASON,
    SEQ_REASON,
    Exporter,
    ExportResult,
    PlanJob,
    PlanKind,
    ReadBack,
    public_recompute,
    register,
    training_mapping,
)
from accelmap.export.formats.launch import batch_split
from accelmap.export.lora import alpha_note, has_adapters
from accelmap.mapping.plan import ZeroStage
from accelmap.models.schema import FFNKind
from accelmap.units import DType
from accelmap.workload import Finetune, Recompute

DS_COMMIT = "00376da49967bc6a15d70a550200ac67277b1fb4"
DS_URL = f"https://github.com/deepspeedai/DeepSpeed/blob/{DS_COMMIT}/docs/_pages/config-json.md"

CONFIG_FILE = "ds_config.json"
HOSTFILE = "hostfile"

# "Gradient Clipping": gradient_clipping, documented default 1.0 (written out so it is visible).
GRADIENT_CLIPPING = 1.0


def _config(job: PlanJob, spec: Any) -> tuple[dict[str, Any], list[str]]:
    m = job.mapping
    _, micro, accum = batch_split(job)
    tp, zero = m.tp, m.zero
    unsupported: list[str] = []
    m = public_recompute(m, "DeepSpeed", unsupported)
    cfg: dict[str, Any] = {
        # "Batch Size Related Parameters": train_batch_size = micro * accumulation * dp ranks
        "train_batch_size": job.global_batch,
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accum,
        "gradient_clipping": GRADIENT_CLIPPING,  # "Gradient Clipping"
    }
    # "FP16 training options" fp16.enabled / "BFLOAT16 training options" bf16.enabled
    if job.dtype is DType.FP16:
        cfg["fp16"] = {"enabled": True}
    else:
        cfg["bf16"] = {"enabled": True}
        if job.dtype is DType.FP8:
            unsupported.append("dtype=fp8: ds_config.json has no FP8 training switch (FP8 "
                               "GEMMs come from Transformer Engine in the model code); "
                               "exported as bf16")
    # "ZeRO Optimizations for FP16 Training": zero_optimization.stage 0-3
    zero_cfg: dict[str, Any] = {"stage": int(zero)}
    # "Optimizer offloading": offload_optimizer.device cpu, valid for stages 1, 2, 3
    # "Parameter offloading": offload_param.device cpu, valid only with stage 3
    if m.offloads_optimizer and zero >= ZeroStage.OPTIMIZER:
        zero_cfg["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if m.offloads_params and zero is ZeroStage.PARAMETERS:
        zero_cfg["offload_param"] = {"device": "cpu", "pin_memory": True}
    if zero is ZeroStage.NONE and (m.offloads_optimizer or m.offloads_params):
        unsupported.append("offload=True: ZeRO offload needs zero >= 1 (offload_optimizer "
                           "is valid for stages 1-3); nothing is offloaded at zero=0")
    elif m.offloads_params and zero is not ZeroStage.PARAMETERS:
        unsupported.append(f"offload=True: DeepSpeed offloads parameters only under ZeRO "
                           f"stage 3 (offload_param); with zero={int(zero)} "
                           + ("only the optimizer state goes to the CPU"
                              if m.offloads_optimizer else "nothing is offloaded"))
    cfg["zero_optimization"] = zero_cfg
    if m.recompute is Recompute.FULL:
        # "Activation Checkpointing"; partition_activations splits the saved layer inputs over
        # the tensor-parallel group, so it is on only when there is one.
        cfg["activation_checkpointing"] = {
            "partition_activations": tp > 1,
            "cpu_checkpointing": False,
            "contiguous_memory_optimization": False,
            "synchronize_checkpoint_boundary": False,
            "profile": False,
        }
    elif m.recompute in (Recompute.SELECTIVE, Recompute.PER_OP):
        unsupported.append(f"recompute={m.policy.value}: DeepSpeed's activation_checkpointing "
                           "checkpoints whole functions the model wraps; attention-only "
                           "(selective) recompute has to be written in the model code")
    if tp > 1:
        # "Tensor Parallel (AutoTP)": tensor_parallel.autotp_size (ZeRO 0-3 at this commit)
        cfg["tensor_parallel"] = {"autotp_size": tp}
    if m.ep > 1:
        if tp > 1:
            unsupported.append(f"ep={m.ep}: AutoEP cannot be combined with AutoTP "
                               "(tensor_parallel.autotp_size > 1) at this DeepSpeed version")
        else:
            # "Expert Parallel (AutoEP)": expert_parallel.enabled, expert_parallel.autoep_size
            cfg["expert_parallel"] = {"enabled": True, "autoep_size": m.ep}
    if m.pp > 1:
        unsupported.append(f"pp={m.pp}: ds_config.json has no pipeline degree; build the "
                           f"pipeline in code (deepspeed.pipe.PipelineModule(num_stages={m.pp}))"
                           f" or use Megatron-DeepSpeed; the batch keys assume the plan's "
                           f"dp={m.dp} data-parallel ranks, as with that pipeline")
    if m.interleaved:
        unsupported.append(f"vpp={m.virtual_stages}: DeepSpeed's pipeline engine has no "
                           "interleaved (virtual) stages")
    if m.cp > 1:
        unsupported.append(f"cp={m.cp}: ds_config.json has no context-parallel degree; "
                           "DeepSpeed-Ulysses sequence parallelism is set up in code "
                           "(deepspeed.sequence.layer.DistributedAttention) and must take "
                           f"{m.cp} ranks out of the data-parallel group")
    return cfg, unsupported


def _hostfile(job: PlanJob) -> str:
    # runner.py: MPI-style hostfile, one "<host> slots=<gpus>" line per node
    lines = [f"# {job.nodes} node(s) x {job.devices_per_node} GPUs: replace the names with your "
             "hosts (deepspeed --hostfile)"]
    lines += [f"node-{i} slots={job.devices_per_node}" for i in range(job.nodes)]
    return "\n".join(lines) + "\n"


def _adapter_notes(job: PlanJob, spec: Any) -> list[str]:
    """How train.py uses the PEFT files, and the values the plan does not set."""
    qlora = job.finetune is Finetune.QLORA
    load = (f"loads the base with transformers' BitsAndBytesConfig(**json.load(open("
            f"'{peft.BNB_FILE}'))) and " if qlora else "")
    notes = [f"train.py {load}wraps the model with peft.get_peft_model(model, "
             f"LoraConfig.from_pretrained(folder)), which reads {peft.ADAPTER_FILE}",
             alpha_note("lora_alpha")]
    if qlora:
        notes.append("the plan's QLoRA optimizer is bitsandbytes' paged AdamW: ds_config.json "
                     f"names no optimizer, so give the HF Trainer optim=\"{peft.PAGED_OPTIMIZER}\""
                     " (TrainingArguments)")
        if job.mapping.zero is ZeroStage.PARAMETERS:
            notes.append("ZeRO-3 with a 4-bit base: bnb_4bit_quant_storage packs the NF4 "
                         "weights in the compute dtype so DeepSpeed can shard them; load the "
                         "model with that torch dtype too (PEFT's DeepSpeed guide)")
    if spec.moe is not None or spec.mla is not None or spec.ffn_kind != FFNKind.GATED:
        notes.append(f"target_modules uses Llama-family module names (q_proj ... down_proj); "
                     f"{job.model}'s Hugging Face modules may be named otherwise: check with "
                     "print(model)")
    return notes


def export(job: PlanJob, spec: Any) -> ExportResult:
    cfg, unsupported = _config(job, spec)
    launch = (f"deepspeed --hostfile {HOSTFILE} --num_nodes {job.nodes} "
              f"--num_gpus {job.devices_per_node} train.py --deepspeed "
              f"--deepspeed_config {CONFIG_FILE}")
    files = {CONFIG_FILE: json.dumps(cfg, indent=2) + "\n", HOSTFILE: _hostfile(job)}
    notes: list[str] = []
    if has_adapters(job):
        files |= peft.files(job, zero3=job.mapping.zero is ZeroStage.PARAMETERS)
        notes = _adapter_notes(job, spec)
    return ExportResult(files=files, launch=launch, unsupported=unsupported, notes=notes)


def read_back(files: dict[str, str]) -> ReadBack:
    cfg = json.loads(files[CONFIG_FILE])
    micro = int(cfg["train_micro_batch_size_per_gpu"])
    accum = int(cfg["gradient_accumulation_steps"])
    zero_cfg = cfg.get("zero_optimization", {})
    ep_cfg = cfg.get("expert_parallel", {})
    hosts = [line for line in files[HOSTFILE].splitlines()
             if line.strip() and not line.startswith("#")]
    slots = {int(line.rsplit("slots=", 1)[1]) for line in hosts}
    mapping = training_mapping(
        # "Batch Size Related Parameters": train_batch_size = micro x accumulation x dp ranks
        dp=int(cfg["train_batch_size"]) // (micro * accum),
        tp=int(cfg.get("tensor_parallel", {}).get("autotp_size", 0)) or 1,
        pp=1, cp=1, virtual_stages=1,  # no pipeline or context parallelism in a ds_config.json
        ep=int(ep_cfg.get("autoep_size", 1)) if ep_cfg.get("enabled") else 1,
        zero=int(zero_cfg.get("stage", 0)),
        micro_batch=micro,
        recompute=Recompute.FULL if "activation_checkpointing" in cfg else Recompute.NONE,
        offload_optimizer=zero_cfg.get("offload_optimizer", {}).get("device") == "cpu",
        offload_params=zero_cfg.get("offload_param", {}).get("device") == "cpu")
    finetune, rank, targets = peft.read_back(files)
    return ReadBack(mapping, nodes=len(hosts),
                    devices_per_node=slots.pop() if len(slots) == 1 else None,
                    finetune=finetune, lora_rank=rank, lora_targets=targets)


EXPORTER = register(Exporter(
    name="deepspeed",
    framework="DeepSpeed",
    version=f"DeepSpeed @ {DS_COMMIT[:12]} (docs/_pages/config-json.md)",
    url=DS_URL,
    kinds=(PlanKind.TRAIN,),
    not_exported={
        "model": MODEL_REASON, "accelerator": ACCELERATOR_REASON, "seq_len": SEQ_REASON,
        "dtype": "ds_config.json's bf16/fp16 sections set 16-bit training; fp8 comes from "
                 "Transformer Engine layers in the training script",
        "cp_comm": CP_COMM_REASON, "offload_activations": ACT_OFFLOAD_REASON,
        "framework": FRAMEWORK_REASON,
        "ep": "DeepSpeed-MoE sets expert parallelism in the model code (deepspeed.moe.layer."
              "MoE ep_size), not in ds_config.json",
        "vpp": PIPE_REASON, "schedule": PIPE_REASON,
        "first_stage_layers": PIPE_REASON, "last_stage_layers": PIPE_REASON,
        "embedding_in_split": PIPE_REASON, "loss_in_split": PIPE_REASON,
        "tp_comm_overlap": "DeepSpeed's config has no TP communication overlap; tensor "
                           "parallelism lives in the model code (Megatron-DeepSpeed)"},
    export=export,
    read_back=read_back,
))
