"""torchtune: a LoRA/QLoRA plan as overrides of a shipped torchtune recipe config.

torchtune (the PyTorch fine-tuning library; FSDP2 like torchtitan, which has no adapters at the
version the torchtitan exporter targets) trains LoRA and QLoRA with
``tune run lora_finetune_distributed --config <model>/<size>_lora`` (one GPU:
``lora_finetune_single_device``). The model builders ``lora_<model>`` / ``qlora_<model>`` take
``lora_attn_modules`` (q_proj, k_proj, v_proj, output_proj), ``apply_lora_to_mlp`` (gate, up and
down together), ``apply_lora_to_output``, ``lora_rank``, ``lora_alpha`` and ``lora_dropout``;
``qlora_`` builders store every linear layer of the blocks in NF4 (torchao ``to_nf4``: blocks of
64 with double-quantized scales), as the plan's QLoRA memory model does.

``torchtune_overrides.yaml`` holds the plan's keys with the config's nesting (merge them into a
copy of the shipped config: ``tune cp``), and ``launch_torchtune.sh`` runs the recipe on the
shipped config with the same keys as ``key=value`` overrides (torchtune's config parser merges
them with OmegaConf). Only the model, adapters, batch split, precision, activation checkpointing
and FSDP settings are written: tokenizer, checkpoint and dataset paths stay the shipped config's.

The recipe shards with FSDP2 over every rank (no tensor, pipeline, context or expert
parallelism): ``batch_size`` is the per-GPU micro-batch, ``gradient_accumulation_steps`` makes
up the global batch over all ranks. ``fsdp_reshard_after_forward`` false is ZeRO-2-like
(SHARD_GRAD_OP), true ZeRO-3; ``fsdp_cpu_offload`` moves parameters, gradients and optimizer
state together. ``dtype: bf16`` trains in pure bf16 (the recipe has no fp16).

Everything here is from the torchtune 0.6.1 wheel (PyPI): recipes/lora_finetune_distributed.py,
recipes/lora_finetune_single_device.py, recipes/configs/*, torchtune/models/*/_model_builders.py,
torchtune/modules/peft/_utils.py (LORA_ATTN_MODULES), torchtune/_cli/run.py (``tune run`` takes
torchrun's flags).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from accelmap.errors import InputError
from accelmap.export.base import (
    ACT_OFFLOAD_REASON,
    CP_COMM_REASON,
    FRAMEWORK_REASON,
    Exporter,
    ExportResult,
    PlanJob,
    PlanKind,
    ReadBack,
    public_recompute,
    register,
    training_mapping,
)
from accelmap.export.formats.launch import RDZV_PORT, parse_torchrun, shell_block, shell_line
from accelmap.export.lora import (
    LORA_ALPHA,
    LORA_DROPOUT,
    MLP,
    alpha_note,
    has_adapters,
    ordered,
    targets,
    targets_field,
)
from accelmap.mapping.plan import ZeroStage
from accelmap.units import DType
from accelmap.workload import Finetune, LoraTarget, Recompute

VERSION = "0.6.1"
URL = "https://pypi.org/project/torchtune/0.6.1/"

CONFIG_FILE = "torchtune_overrides.yaml"
LAUNCH_FILE = "launch_torchtune.sh"
DISTRIBUTED = "lora_finetune_distributed"
SINGLE = "lora_finetune_single_device"

# catalog model -> (builder module, builder suffix, distributed config, single-GPU config)
# (recipes/configs/ of 0.6.1; 405B ships a QLoRA config only, its model key is overridden)
MODELS: dict[str, tuple[str, str, str, str | None]] = {
    "llama-2-7b": ("llama2", "llama2_7b", "llama2/7B_lora", "llama2/7B_lora_single_device"),
    "llama-2-13b": ("llama2", "llama2_13b", "llama2/13B_lora",
                    "llama2/13B_qlora_single_device"),
    "llama-2-70b": ("llama2", "llama2_70b", "llama2/70B_lora", None),
    "llama-3.1-8b": ("llama3_1", "llama3_1_8b", "llama3_1/8B_lora",
                     "llama3_1/8B_lora_single_device"),
    "llama-3.1-70b": ("llama3_1", "llama3_1_70b", "llama3_1/70B_lora", None),
    "llama-3.1-405b": ("llama3_1", "llama3_1_405b", "llama3_1/405B_qlora", None),
    "mistral-7b": ("mistral", "mistral_7b", "mistral/7B_lora", "mistral/7B_lora_single_device"),
}

# LORA_ATTN_MODULES (torchtune/modules/peft/_utils.py)
ATTN_MODULES = {LoraTarget.Q: "q_proj", LoraTarget.K: "k_proj", LoraTarget.V: "v_proj",
                LoraTarget.O: "output_proj"}
DTYPES = {DType.BF16: "bf16", DType.FP32: "fp32"}


def _recipe(job: PlanJob) -> tuple[str, str]:
    """(recipe, shipped config) for the plan's model and GPU count."""
    if job.model not in MODELS:
        raise InputError(f"torchtune {VERSION}: no LoRA model builder for {job.model!r} here; "
                         f"use one of {', '.join(MODELS)}, or export deepspeed")
    _, _, distributed, single = MODELS[job.model]
    if job.devices > 1:
        return DISTRIBUTED, distributed
    if single is None:
        raise InputError(f"torchtune {VERSION} ships no single-GPU LoRA config for {job.model} "
                         f"and {DISTRIBUTED} needs 2 or more GPUs; export deepspeed")
    return SINGLE, single


def _model(job: PlanJob) -> tuple[dict[str, Any], list[str]]:
    module, suffix, _, _ = MODELS[job.model]
    chosen = targets(job)
    builder = "qlora" if job.finetune is Finetune.QLORA else "lora"
    unsupported: list[str] = []
    mlp = bool(chosen & MLP)
    if mlp and chosen & MLP != MLP:
        unsupported.append(f"{targets_field(chosen)}: torchtune's apply_lora_to_mlp adapts "
                           "gate, up and down together; exported with all three, more adapters "
                           "than planned")
    return {
        "_component_": f"torchtune.models.{module}.{builder}_{suffix}",
        "lora_attn_modules": [ATTN_MODULES[t] for t in ordered(chosen) if t in ATTN_MODULES],
        "apply_lora_to_mlp": mlp,
        "apply_lora_to_output": False,  # LoraTarget has no output head
        "lora_rank": job.lora_rank,
        "lora_alpha": float(LORA_ALPHA),
        "lora_dropout": LORA_DROPOUT,
    }, unsupported


def overrides(job: PlanJob) -> tuple[dict[str, Any], list[str]]:
    """The recipe keys of the plan, and the plan fields the recipe cannot express."""
    recipe, _ = _recipe(job)
    model, unsupported = _model(job)
    m = public_recompute(job.mapping, "torchtune", unsupported)
    for name, degree in (("tp", m.tp), ("pp", m.pp), ("cp", m.cp), ("ep", m.ep)):
        if degree > 1:
            unsupported.append(f"{name}={degree}: {recipe} shards with FSDP2 over all "
                               f"{job.devices} GPUs, without {name}; exported as "
                               f"{job.devices}-way data parallel")
    per_step = m.micro_batch * job.devices
    if job.global_batch % per_step:
        raise InputError(f"global batch {job.global_batch} is not a multiple of "
                         f"{job.devices} GPUs x micro-batch {m.micro_batch}: torchtune's "
                         "recipe runs one micro-batch per GPU per step")
    keys: dict[str, Any] = {
        "model": model,
        "batch_size": m.micro_batch,
        "gradient_accumulation_steps": job.global_batch // per_step,
        "dtype": DTYPES.get(job.dtype, "bf16"),
        "enable_activation_checkpointing": m.recompute is not Recompute.NONE,
    }
    if job.dtype not in DTYPES:
        unsupported.append(f"dtype={job.dtype.value}: the recipe trains in bf16 or fp32 "
                           "(no fp16, no FP8); exported as bf16")
    if m.recompute in (Recompute.SELECTIVE, Recompute.PER_OP):
        unsupported.append(f"recompute={m.policy.value}: torchtune checkpoints whole layers "
                           "(enable_activation_checkpointing); exported as full recompute")
    if recipe == DISTRIBUTED:
        if m.zero in (ZeroStage.NONE, ZeroStage.OPTIMIZER):
            unsupported.append(f"zero={int(m.zero)}: FSDP2 always shards gradients and optimizer "
                               "state; exported as its ZeRO-2 equivalent "
                               "(fsdp_reshard_after_forward false)")
        keys["fsdp_reshard_after_forward"] = m.zero is ZeroStage.PARAMETERS
        keys["fsdp_cpu_offload"] = bool(m.offloads_optimizer or m.offloads_params)
        if m.offloads_optimizer != m.offloads_params:
            unsupported.append("offload=True: FSDP's CPU offload (fsdp_cpu_offload) moves "
                               "parameters, gradients and optimizer state together; exported "
                               "with all of them on the CPU")
    elif m.offloads_optimizer or m.offloads_params:
        unsupported.append(f"offload=True: {SINGLE} has no CPU offload of parameters or "
                           "optimizer state; exported without")
    return keys, unsupported


def _dotlist(tree: dict[str, Any], prefix: str = "") -> list[str]:
    """``key=value`` overrides (config._utils._merge_yaml_and_cli_args: an OmegaConf dotlist)."""
    out: list[str] = []
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out += _dotlist(value, f"{name}.")
        elif isinstance(value, list):
            out.append(f"{name}=[{','.join(value)}]")
        elif isinstance(value, bool):
            out.append(f"{name}={'true' if value else 'false'}")
        else:
            out.append(f"{name}={value}")
    return out


def command(job: PlanJob, keys: dict[str, Any]) -> list[str]:
    """argv of ``tune run`` on one node (distributed: torchrun's flags, c10d rendezvous)."""
    recipe, config = _recipe(job)
    tail = [recipe, "--config", config, *_dotlist(keys)]
    if recipe == SINGLE:
        return ["tune", "run", *tail]
    return ["tune", "run",
            "--nnodes", str(job.nodes),  # torchrun flags, which tune run accepts (run.py)
            "--nproc-per-node", str(job.devices_per_node),
            "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"${{MASTER_ADDR}}:${{MASTER_PORT:-{RDZV_PORT}}}",
            "--rdzv-id", "${RDZV_ID:-accelmap}", *tail]


def export(job: PlanJob, spec: Any) -> ExportResult:
    if not has_adapters(job):
        raise InputError("torchtune exports LoRA and QLoRA fine-tunes (lora_finetune_"
                         "distributed); this plan trains every weight: export torchtitan, "
                         "megatron or deepspeed")
    keys, unsupported = overrides(job)
    recipe, config = _recipe(job)
    argv = command(job, keys)
    header = (f"# torchtune {VERSION} overrides for {job.model} on {job.nodes} x "
              f"{job.devices_per_node} {job.accelerator} (accelmap export torchtune).\n"
              f"# Recipe {recipe}, shipped config {config}: merge these keys into a copy "
              f"(tune cp {config} my.yaml)\n# or run {LAUNCH_FILE}, which passes them as "
              "key=value overrides.\n")
    distributed = recipe == DISTRIBUTED
    script = ("#!/bin/bash\n"
              + (f"# Run on each of the {job.nodes} node(s).\n" if distributed else "")
              + "set -euo pipefail\n"
              + (': "${MASTER_ADDR:?set MASTER_ADDR to the address of node 0}"\n'
                 if distributed else "")
              + "tune " + shell_block(argv[1:]) + "\n")  # "tune run" on one line
    notes = [alpha_note("model.lora_alpha"),
             "dtype bf16 in torchtune keeps the adapters' AdamW states in bf16 too (the plan "
             "counts fp32 states; a small difference for adapters)"]
    if job.finetune is Finetune.QLORA:
        notes.append("the plan's QLoRA optimizer is bitsandbytes' paged AdamW; the shipped "
                     "config's torch.optim.AdamW is not paged (its states stay on the GPU)")
    return ExportResult(files={CONFIG_FILE: header + yaml.safe_dump(keys, sort_keys=False),
                               LAUNCH_FILE: script},
                        launch=shell_line(argv), unsupported=unsupported, notes=notes)


def read_back(files: dict[str, str]) -> ReadBack:
    """Adapters from the overrides; GPUs from the launch script (FSDP over every rank)."""
    keys = yaml.safe_load(files[CONFIG_FILE])
    model = keys["model"]
    chosen = {t for t, name in ATTN_MODULES.items() if name in model["lora_attn_modules"]}
    if model["apply_lora_to_mlp"]:
        chosen |= MLP
    method = (Finetune.QLORA if re.search(r"\.qlora_\w+$", model["_component_"])
              else Finetune.LORA)
    cluster = parse_torchrun(files[LAUNCH_FILE])
    nodes, gpus = cluster.get("nodes", 1), cluster.get("gpus_per_node", 1)
    reshard = keys.get("fsdp_reshard_after_forward")
    offload = bool(keys.get("fsdp_cpu_offload", False))
    mapping = training_mapping(
        dp=nodes * gpus, tp=1, pp=1, cp=1, ep=1, virtual_stages=1,  # FSDP2 over every rank
        zero=(ZeroStage.NONE if reshard is None else
              ZeroStage.PARAMETERS if reshard else ZeroStage.GRADIENTS),
        micro_batch=int(keys["batch_size"]),
        recompute=Recompute.FULL if keys["enable_activation_checkpointing"] else Recompute.NONE,
        offload_optimizer=offload, offload_params=offload)
    return ReadBack(mapping, nodes=nodes, devices_per_node=gpus, finetune=method,
                    lora_rank=int(model["lora_rank"]), lora_targets=frozenset(chosen))


FSDP_ONLY_REASON = ("torchtune's LoRA recipes shard with FSDP2 over every rank (dp is the world "
                    "size): no tensor, pipeline or context parallelism, no pipeline schedules")

EXPORTER = register(Exporter(
    name="torchtune",
    framework="torchtune",
    version=f"{VERSION} (recipes lora_finetune_distributed / lora_finetune_single_device)",
    url=URL,
    kinds=(PlanKind.TRAIN,),
    not_exported={
        **dict.fromkeys(("dp", "cp", "vpp", "schedule", "first_stage_layers",
                         "last_stage_layers", "embedding_in_split", "loss_in_split",
                         "tp_comm_overlap"), FSDP_ONLY_REASON),
        "seq_len": "the recipe's dataset sets max_seq_len (tokenizer.max_seq_len); the "
                   "overrides leave it to the dataset you choose",
        "dtype": "the recipe trains in bf16 or fp32 (dtype); fp8 has no recipe key",
        "cp_comm": CP_COMM_REASON, "offload_activations": ACT_OFFLOAD_REASON,
        "framework": FRAMEWORK_REASON},
    export=export,
    read_back=read_back,
))

