"""torchtitan: the plan as a job-config TOML, and the torchrun line that trains with it.

Mapping onto torchtitan's FSDP2-based parallelism:

* ZeRO 3 -> ``data_parallel_shard_degree = dp`` with ``fsdp_reshard_after_forward = "always"``
  (parameters re-gathered for backward). ZeRO 2 -> the same sharding with ``"never"``: parameters
  stay gathered from forward to backward, gradients and optimizer state are sharded. FSDP2 has no
  optimizer-only mode, so ZeRO 1 is exported as that ZeRO-2 equivalent and reported.
* ZeRO 0 -> ``data_parallel_replicate_degree = dp`` (DDP), which torchtitan allows only when no
  other parallelism is on (parallelize.py raises "DDP has not supported > 1D parallelism");
  otherwise it is exported as the ZeRO-2 equivalent and reported.
* Pipeline: ``pipeline_parallel_degree``; vpp 1 -> schedule ``1F1B``, vpp > 1 ->
  ``Interleaved1F1B``, with ``module_fqns_per_model_part`` listing pp * vpp even chunks of
  layers. Pipeline micro-batches come from ``local_batch_size`` (= micro * accumulation) split into
  ``pipeline_parallel_microbatch_size`` pieces; without PP, ``local_batch_size`` is the micro-batch
  and torchtitan accumulates ``global_batch_size / (local_batch_size * dp)`` steps.
* ``expert_parallel_degree`` borrows from dp x cp; ``expert_tensor_parallel_degree = tp`` keeps
  experts tensor-parallel like Megatron-Core's default.

LoRA/QLoRA plans are refused: the job config at ``TITAN_COMMIT`` has no adapters, so job.toml
would train every weight. (torchtitan gained a LoRA converter, torchtitan/components/lora.py, in
May 2026, commit 74181b1e, with a new Python config system this exporter does not target, and
no 4-bit base.) The torchtune exporter writes the same FSDP2 job as a LoRA/QLoRA recipe.

Keys: torchtitan/config/job_config.py of pytorch/torchtitan at ``TITAN_COMMIT`` (the dataclass is
named in each comment); the torchrun entry point ``-m torchtitan.train --job.config_file`` is
that version's run_train.sh. The architecture comes from a registered model flavor, not the TOML.
"""

from __future__ import annotations

import tomllib
from typing import Any

from accelmap.export.base import (
    ACT_OFFLOAD_REASON,
    CP_COMM_REASON,
    FRAMEWORK_REASON,
    SPLIT_REASON,
    Exporter,
    ExportResult,
    PlanJob,
    PlanKind,
    ReadBack,
    public_recompute,
    register,
    training_mapping,
)
from accelmap.export.formats.launch import (
    batch_split,
    parse_torchrun,
    shell_block,
    shell_line,
    torchrun_command,
)
from accelmap.export.lora import has_adapters, refuse
from accelmap.mapping.plan import ZeroStage
from accelmap.models.schema import ModelSpec
from accelmap.units import DType
from accelmap.workload import Recompute

TITAN_COMMIT = "038d5fd1bb3056e3c676d261fd720e1dfbc04bfe"
TITAN_URL = (f"https://github.com/pytorch/torchtitan/blob/{TITAN_COMMIT}/"
             "torchtitan/config/job_config.py")

CONFIG_FILE = "job.toml"
LAUNCH_FILE = "launch_torchtitan.sh"

# Catalog model -> (Model.name, Model.flavor) registered in torchtitan/models/llama3/__init__.py.
FLAVORS = {
    "llama-3.1-8b": ("llama3", "8B"),
    "llama-3.1-70b": ("llama3", "70B"),
    "llama-3.1-405b": ("llama3", "405B"),
}

# Training.max_norm: gradient clipping norm, job_config.py default 1.0 (written out).
MAX_NORM = 1.0

# Parallelism.fsdp_reshard_after_forward per ZeRO stage expressed with FSDP2.
RESHARD = {ZeroStage.PARAMETERS: "always", ZeroStage.GRADIENTS: "never"}


def _toml(sections: dict[str, dict[str, Any]]) -> str:
    """The job config through tomli-w (TOML 1.0; strings escaped by the library, never by
    string formatting), one table per section, arrays of arrays one row per line."""
    import tomli_w

    return tomli_w.dumps(sections, multiline_strings=False, indent=2)


def _model_parts(n_layers: int, parts: int) -> list[list[str]]:
    """Module FQNs per pipeline chunk: layers split as evenly as possible, embeddings first,
    final norm and output last (the names torchtitan's llama3 model uses)."""
    base, extra = divmod(n_layers, parts)
    chunks: list[list[str]] = []
    start = 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        chunks.append([f"layers.{j}" for j in range(start, start + size)])
        start += size
    chunks[0].insert(0, "tok_embeddings")
    chunks[-1] += ["norm", "output"]
    return chunks


def _data_parallel(job: PlanJob) -> tuple[dict[str, Any], list[str]]:
    m = job.mapping
    dp, zero, offload = m.dp, m.zero, _offload(job)
    others = any(d > 1 for d in (m.tp, m.pp, m.cp, m.ep))
    unsupported: list[str] = []
    if m.offloads_optimizer != m.offloads_params:
        unsupported.append("offload=True: torchtitan's FSDP CPU offload "
                           "(Training.enable_cpu_offload) moves parameters, gradients and "
                           "optimizer state together; exported with all of them on the CPU")
    if offload and m.dp == 1 and m.cp == 1:
        unsupported.append("offload=True: torchtitan offloads through FSDP "
                           "(Training.enable_cpu_offload), which is not applied with dp=1 and "
                           "cp=1")
    if zero is ZeroStage.NONE and (dp == 1 or not (others or offload)):
        # Parallelism.data_parallel_replicate_degree > 1 alone = DDP
        return {"data_parallel_replicate_degree": dp,
                "data_parallel_shard_degree": 1}, unsupported
    if zero is ZeroStage.NONE:
        unsupported.append("zero=0: torchtitan's DDP (data_parallel_replicate_degree) runs only "
                           "without TP/PP/CP/EP and without CPU offload; exported as FSDP2 "
                           "without resharding (ZeRO-2 equivalent)")
    elif zero is ZeroStage.OPTIMIZER:
        unsupported.append("zero=1: FSDP2 has no optimizer-only sharding; exported as the "
                           "ZeRO-2 equivalent (fsdp_reshard_after_forward = \"never\": "
                           "gradients and optimizer state sharded, parameters gathered from "
                           "forward to backward)")
    return {
        "data_parallel_replicate_degree": 1,  # Parallelism
        "data_parallel_shard_degree": dp,  # Parallelism: FSDP2 over the dp ranks
        "fsdp_reshard_after_forward": RESHARD.get(zero, "never"),  # Parallelism
    }, unsupported


def _sections(job: PlanJob, spec: ModelSpec) -> tuple[dict[str, dict[str, Any]], list[str]]:
    m = job.mapping
    _, micro, accum = batch_split(job)
    tp, pp, vpp = m.tp, m.pp, m.virtual_stages
    unsupported: list[str] = []
    m = public_recompute(m, "torchtitan", unsupported)
    name, flavor = FLAVORS.get(job.model, (job.model, job.model))
    if job.model not in FLAVORS:
        unsupported.append(
            f"model={job.model}: torchtitan builds the network from a registered flavor "
            "(torchtitan/models/*/__init__.py); none matches, so register one with "
            f"n_layers={spec.n_layers}, dim={spec.d_model}, n_heads={spec.n_heads}, "
            f"n_kv_heads={spec.kv_heads}, vocab_size={spec.vocab_size} and set [model]")
    model: dict[str, Any] = {"name": name, "flavor": flavor}  # Model
    if job.dtype is DType.FP8:
        model["converters"] = ["float8"]  # Model.converters: Float8Linear via torchao
    if job.dtype is DType.FP16:
        unsupported.append("dtype=fp16: Training.mixed_precision_param takes bfloat16 or "
                           "float32 only; exported as bfloat16")
    training = {  # Training
        # with PP the local batch holds all micro-batches of a step; without, one micro-batch
        "local_batch_size": micro * accum if pp > 1 else micro,
        "global_batch_size": job.global_batch,
        "seq_len": job.seq_len,
        "max_norm": MAX_NORM,
        "mixed_precision_param": "bfloat16",
        "enable_cpu_offload": _offload(job),  # FSDP CPU offload: params, grads, optimizer
    }
    parallelism, notes = _data_parallel(job)
    unsupported += notes
    parallelism["tensor_parallel_degree"] = tp  # Parallelism
    parallelism["pipeline_parallel_degree"] = pp  # Parallelism
    if pp > 1:
        parallelism["pipeline_parallel_schedule"] = "Interleaved1F1B" if vpp > 1 else "1F1B"
        parallelism["pipeline_parallel_microbatch_size"] = micro
        parallelism["module_fqns_per_model_part"] = _model_parts(spec.n_layers, pp * vpp)
    elif vpp > 1:
        unsupported.append(f"vpp={vpp}: virtual stages need pipeline_parallel_degree > 1")
    parallelism["context_parallel_degree"] = m.cp  # Parallelism
    parallelism["expert_parallel_degree"] = m.ep  # Parallelism
    if m.ep > 1:
        parallelism["expert_tensor_parallel_degree"] = tp  # Parallelism: "etp = tp" mode
    if m.tp_comm_overlap and tp > 1:
        # Parallelism.enable_async_tensor_parallel: "Whether to apply async tensor parallel
        # (currently only effective when compile is enabled)"
        parallelism["enable_async_tensor_parallel"] = True
    elif m.tp_comm_overlap:
        unsupported.append("tp_comm_overlap=True: async tensor parallelism needs "
                           "tensor_parallel_degree > 1")
    # torchtitan's "selective" with option "op" is the per-op policy (Recompute.PER_OP)
    recompute = "selective" if m.policy is Recompute.PER_OP else m.policy.value
    if m.policy is Recompute.SELECTIVE:
        unsupported.append("recompute=selective: torchtitan has no attention-only recompute; "
                           "exported as its per-op selective checkpointing (recompute=per-op)")
    return {
        "job": {"description": f"accelmap plan for {job.model} on {job.nodes} x "
                               f"{job.devices_per_node} {job.accelerator}"},  # Job
        "model": model,
        "training": training,
        "parallelism": parallelism,
        # ActivationCheckpoint.mode none|selective|full; "op" = per-op selective AC
        "activation_checkpoint": ({"mode": recompute, "selective_ac_option": "op"}
                                  if m.policy in (Recompute.SELECTIVE, Recompute.PER_OP)
                                  else {"mode": recompute}),
    }, unsupported


def _read_recompute(ac: dict[str, Any]) -> Recompute:
    """ActivationCheckpoint back: "selective" with option "op" is the per-op policy (an integer
    option, every n-th layer, is not a policy accelmap models: read as full)."""
    mode = str(ac.get("mode", "selective"))
    if mode != "selective":
        return Recompute(mode)
    return Recompute.PER_OP if str(ac.get("selective_ac_option", "op")) == "op" \
        else Recompute.FULL


def export(job: PlanJob, spec: ModelSpec) -> ExportResult:
    if has_adapters(job):
        refuse(job, f"torchtitan @ {TITAN_COMMIT[:12]}",
               "its job config has no LoRA or QLoRA, so job.toml would train every weight "
               "(torchtitan's later LoRA converter uses a config system this exporter does not "
               "target)", "torchtune, deepspeed or megatron (NeMo)")
    sections, unsupported = _sections(job, spec)
    header = (f"# torchtitan job config (accelmap export torchtitan); keys: pytorch/torchtitan "
              f"torchtitan/config/job_config.py @ {TITAN_COMMIT[:12]}\n")
    command = torchrun_command(job, ["-m", "torchtitan.train", "--job.config_file",
                                     CONFIG_FILE])
    script = (
        "#!/bin/bash\n"
        f"# Run on each of the {job.nodes} node(s) from the torchtitan checkout.\n"
        "set -euo pipefail\n"
        ': "${MASTER_ADDR:?set MASTER_ADDR to the address of node 0}"\n'
        + shell_block(command) + "\n"
    )
    return ExportResult(files={CONFIG_FILE: header + _toml(sections), LAUNCH_FILE: script},
                        launch=shell_line(command), unsupported=unsupported)


def read_back(files: dict[str, str]) -> ReadBack:
    cfg = tomllib.loads(files[CONFIG_FILE])
    par, training = cfg["parallelism"], cfg["training"]
    replicate = int(par.get("data_parallel_replicate_degree", 1))
    shard = int(par.get("data_parallel_shard_degree", 1))
    pp = int(par.get("pipeline_parallel_degree", 1))
    policy = par.get("fsdp_reshard_after_forward")
    parts = par.get("module_fqns_per_model_part")
    offload = bool(training.get("enable_cpu_offload", False))
    mapping = training_mapping(
        dp=replicate * shard,  # Parallelism: DDP replicas x FSDP shards
        tp=int(par.get("tensor_parallel_degree", 1)),
        pp=pp,
        cp=int(par.get("context_parallel_degree", 1)),
        ep=int(par.get("expert_parallel_degree", 1)),
        zero={v: k for k, v in RESHARD.items()}.get(str(policy), ZeroStage.NONE),
        micro_batch=int(par["pipeline_parallel_microbatch_size"] if pp > 1
                        else training["local_batch_size"]),
        virtual_stages=len(parts) // pp if parts else 1,
        recompute=_read_recompute(cfg.get("activation_checkpoint", {})),
        offload_optimizer=offload, offload_params=offload)
    if par.get("enable_async_tensor_parallel"):
        mapping = mapping.with_(tp_comm_overlap=True)
    cluster = parse_torchrun(files[LAUNCH_FILE])
    return ReadBack(mapping, nodes=cluster.get("nodes"),
                    devices_per_node=cluster.get("gpus_per_node"))


def _offload(job: PlanJob) -> bool:
    """FSDP2's CPUOffloadPolicy moves parameters, gradients and optimizer state together."""
    return bool(job.mapping.offloads_optimizer or job.mapping.offloads_params)


EXPORTER = register(Exporter(
    name="torchtitan",
    framework="torchtitan",
    version=f"torchtitan @ {TITAN_COMMIT[:12]} (torchtitan/config/job_config.py)",
    url=TITAN_URL,
    kinds=(PlanKind.TRAIN,),
    not_exported={
        "cp_comm": CP_COMM_REASON, "offload_activations": ACT_OFFLOAD_REASON,
        "framework": FRAMEWORK_REASON,
        "schedule": "the export writes 1F1B or Interleaved1F1B; set "
                    "pipeline_parallel_schedule for another (torchtitan's ZBVZeroBubble is "
                    "a V-schedule, not zb-h1)",
        "first_stage_layers": SPLIT_REASON, "last_stage_layers": SPLIT_REASON,
        "embedding_in_split": SPLIT_REASON, "loss_in_split": SPLIT_REASON},
    export=export,
    read_back=read_back,
))
