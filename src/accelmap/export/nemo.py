"""NeMo 1.x PEFT overrides for a LoRA/QLoRA plan (the Megatron exporter's adapter route).

Megatron-LM's ``pretrain_gpt.py`` has no adapters: its arguments train every weight. NeMo's
Megatron-Core GPT fine-tuning script does LoRA and QLoRA:
``examples/nlp/language_modeling/tuning/megatron_gpt_finetuning.py`` with Hydra overrides of
``conf/megatron_gpt_finetuning_config.yaml``. This module writes those overrides
(``nemo_peft.yaml``, a partial config with the same nesting, plus the command line in its
header, where keys the config lacks take Hydra's ``++``) from the plan: cluster shape,
tensor/pipeline parallel, batch, sequence length, recompute and the adapters.

Sources (NVIDIA/NeMo):
  megatron_gpt_finetuning_config.yaml @ ``CONFIG_COMMIT``: ``trainer.num_nodes``,
      ``trainer.devices``, ``trainer.precision``, ``model.tensor_model_parallel_size``,
      ``model.pipeline_model_parallel_size``, ``model.sequence_parallel``,
      ``model.global_batch_size``, ``model.micro_batch_size``,
      ``model.activations_checkpoint_{granularity,method,num_layers}``,
      ``model.data.train_ds.max_seq_length``, ``model.peft.peft_scheme``,
      ``model.peft.lora_tuning.{variant,target_modules,adapter_dim,alpha,adapter_dropout}``.
  nemo/collections/nlp/parts/peft_config.py @ ``PEFT_CONFIG_COMMIT``: target modules
      attention_qkv (the fused QKV projection), attention_dense (output), mlp_fc1 (gate and up,
      fused), mlp_fc2 (down); ``variant: canonical`` gives q, k and v (and gate and up) separate
      adapters (LoraUnfusedKQVAdapter, LoraUnfusedHto4HAdapter), as HF PEFT and the plan count
      them; the unfused fc1 adapter splits its output in halves, so it is used for gated MLPs
      only.
  nemo/collections/nlp/parts/megatron_trainer_builder.py @ ``TRAINER_COMMIT``:
      ``trainer.precision`` in 16, bf16, 16-mixed, bf16-mixed.
  nemo/collections/nlp/modules/common/megatron/adapters/qlora.py @ ``QLORA_COMMIT``: QLoRA
      (``peft_scheme: qlora``) stores the targeted linear layers in NF4 (blocks of 64,
      8-bit scales in blocks of 256: double quantization) and dequantizes them for each matmul;
      "Tensor Parallel is not supported"; only the layers that carry adapters are quantized.
  NeMo QLoRA guide (docs.nvidia.com/nemo-framework/user-guide/24.09/sft_peft/qlora.html):
      QLoRA from the 24.07 container; ``++model.dist_ckpt_load_on_device=False`` and
      ``++model.use_cpu_initialization=True`` keep the 16-bit checkpoint off the GPU.
"""

from __future__ import annotations

import shlex
from typing import Any

import yaml

from accelmap.export.base import PlanJob
from accelmap.export.lora import LORA_ALPHA, LORA_DROPOUT, adapter_fields, ordered, targets_field
from accelmap.models.schema import FFNKind, ModelSpec
from accelmap.units import DType
from accelmap.workload import Finetune, LoraTarget, Recompute

CONFIG_COMMIT = "5d5919fe8a4877d260a22cd80690b7ef3acde7a0"
PEFT_CONFIG_COMMIT = "f7f901f0d9647fa8206b78add7d8eb42dc1cf7c4"
TRAINER_COMMIT = "cda8681c9588fbfa596342af28cd562a97e87c48"
QLORA_COMMIT = "c155d67fce4a50924fea4c30d242b32ea5e79c84"
SCRIPT = "examples/nlp/language_modeling/tuning/megatron_gpt_finetuning.py"

NEMO_FILE = "nemo_peft.yaml"

# peft_config.py PEFT_MODULE_MAP values: which planned projections each NeMo target adapts
MODULES: dict[str, frozenset[LoraTarget]] = {
    "attention_qkv": frozenset({LoraTarget.Q, LoraTarget.K, LoraTarget.V}),
    "attention_dense": frozenset({LoraTarget.O}),
    "mlp_fc1": frozenset({LoraTarget.GATE, LoraTarget.UP}),
    "mlp_fc2": frozenset({LoraTarget.DOWN}),
}

# Keys the fine-tuning config does not have: Hydra adds them with "++" (the QLoRA guide's form)
ADDED = frozenset({"model.dist_ckpt_load_on_device", "model.use_cpu_initialization"})

PRECISION = {DType.BF16: "bf16-mixed", DType.FP16: "16-mixed", DType.FP32: 32,
             DType.FP8: "bf16-mixed"}


def modules(chosen: frozenset[LoraTarget]) -> list[str]:
    """NeMo target_modules covering the planned projections (each fused group whole)."""
    return [name for name, group in MODULES.items() if group & chosen]


def covered(names: list[str]) -> frozenset[LoraTarget]:
    """The projections NeMo's target_modules adapt."""
    return frozenset(t for name in names for t in MODULES[name])


def _recompute(job: PlanJob) -> dict[str, Any]:
    policy = job.mapping.recompute
    if policy is Recompute.FULL:  # each layer's input kept, the layer recomputed
        return {"activations_checkpoint_granularity": "full",
                "activations_checkpoint_method": "uniform",
                "activations_checkpoint_num_layers": 1}
    return {"activations_checkpoint_granularity":
            "selective" if policy in (Recompute.SELECTIVE, Recompute.PER_OP, Recompute.NORM_UP)
            else None}


def overrides(job: PlanJob, spec: ModelSpec) -> dict[str, Any]:
    """The nested overrides of megatron_gpt_finetuning_config.yaml for the plan."""
    m = job.mapping
    names = modules(frozenset(job.lora_targets))
    gated = spec.ffn_kind == FFNKind.GATED
    model: dict[str, Any] = {
        "tensor_model_parallel_size": m.tp,
        "pipeline_model_parallel_size": m.pp,
        "sequence_parallel": bool(m.tp > 1 and m.sequence_parallel),
        "global_batch_size": job.global_batch,
        "micro_batch_size": m.micro_batch,
        **_recompute(job),
        "data": {"train_ds": {"max_seq_length": job.seq_len}},
        "peft": {
            "peft_scheme": job.finetune.value,  # "lora" or "qlora"
            "lora_tuning": {
                # unfused (per-projection) adapters as the plan counts them; the unfused fc1
                # adapter assumes a gated MLP's gate and up halves
                "variant": "canonical" if gated else "nemo",
                "target_modules": names,
                "adapter_dim": job.lora_rank,
                "alpha": LORA_ALPHA,
                "adapter_dropout": LORA_DROPOUT,
            },
        },
    }
    if job.finetune is Finetune.QLORA:  # the QLoRA guide's memory settings
        model["dist_ckpt_load_on_device"] = False
        model["use_cpu_initialization"] = True
    return {"trainer": {"num_nodes": job.nodes, "devices": job.devices_per_node,
                        "precision": PRECISION[job.dtype]},
            "model": model}


def dotlist(tree: dict[str, Any], prefix: str = "") -> list[str]:
    """Hydra ``key=value`` overrides of a nested dict (lists as [a,b], None as null)."""
    out: list[str] = []
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out += dotlist(value, f"{name}.")
            continue
        if name in ADDED:
            name = "++" + name
        if isinstance(value, list):
            out.append(f"{name}=[{','.join(str(v) for v in value)}]")
        elif isinstance(value, bool):
            out.append(f"{name}={'true' if value else 'false'}")
        elif value is None:
            out.append(f"{name}=null")
        else:
            out.append(f"{name}={value}")
    return out


def command(tree: dict[str, Any]) -> list[str]:
    """argv of the NeMo fine-tuning script with the plan's overrides (base model and data are
    the user's: placeholders)."""
    return ["python3", SCRIPT, "model.restore_from_path=BASE_MODEL.nemo",
            "model.data.train_ds.file_names=[TRAIN.jsonl]",
            "model.data.validation_ds.file_names=[VALIDATION.jsonl]", *dotlist(tree)]


def text(job: PlanJob, spec: ModelSpec) -> str:
    """nemo_peft.yaml: a header with the command line, then the overrides as YAML."""
    tree = overrides(job, spec)
    words = [shlex.quote(w) for w in command(tree)]
    head = [f"# NeMo 1.x PEFT overrides for {job.model} on {job.nodes} x {job.devices_per_node} "
            f"{job.accelerator} (accelmap export megatron).",
            "# Megatron-LM has no LoRA: megatron_args.sh alone trains every weight. NeMo "
            "(Megatron-Core) trains the adapters:",
            f"# keys of {SCRIPT.rsplit('/', 1)[0]}/conf/megatron_gpt_finetuning_config.yaml "
            f"(NVIDIA/NeMo @ {CONFIG_COMMIT[:12]}).",
            "# Run from the NeMo checkout, with your base checkpoint and data:",
            "#   " + words[0] + " " + words[1] + " \\"]
    head += [f"#     {w} \\" for w in words[2:-1]] + [f"#     {words[-1]}"]
    return "\n".join(head) + "\n" + yaml.safe_dump(tree, sort_keys=False)


def read_back(files: dict[str, str]) -> tuple[Finetune | None, int | None,
                                               frozenset[LoraTarget] | None]:
    """(method, rank, adapted projections) that nemo_peft.yaml sets up."""
    if NEMO_FILE not in files:
        return None, None, None
    tree = yaml.safe_load(files[NEMO_FILE])
    peft = tree["model"]["peft"]
    lora = peft["lora_tuning"]
    return Finetune(peft["peft_scheme"]), int(lora["adapter_dim"]), covered(
        list(lora["target_modules"]))


def unsupported(job: PlanJob, spec: ModelSpec) -> list[str]:
    """What the Megatron export of an adapter plan cannot do as planned."""
    out = [f"{adapter_fields(job)}: Megatron-LM has no LoRA, so megatron_args.sh and "
           f"launch_megatron.sh train every weight (a full fine-tune: gradients and optimizer "
           f"state for the whole model, far more memory than planned); {NEMO_FILE} holds the "
           "NeMo (Megatron-Core) PEFT overrides that train the adapters"]
    planned = frozenset(job.lora_targets)
    adapted = covered(modules(planned))
    if adapted != planned:
        out.append(f"{targets_field(planned)}: NeMo's adapters sit on whole fused projections "
                   "(attention_qkv: q, k and v; mlp_fc1: gate and up); exported as "
                   f"{','.join(t.value for t in ordered(adapted))}, more adapters than planned")
    if job.finetune is Finetune.QLORA and planned != frozenset(LoraTarget):
        out.append(f"{targets_field(planned)}: NeMo's QLoRA stores only the layers that carry "
                   "adapters in NF4 (qlora.py); the other linear layers stay in 16 bits, more "
                   "weight memory than the plan's all-NF4 base")
    if job.dtype is DType.FP8:
        out.append("dtype=fp8: the NeMo overrides train in bf16 (trainer.precision "
                   "bf16-mixed); FP8 needs NeMo's Transformer Engine settings")
    return out


def notes(job: PlanJob) -> list[str]:
    """Plan fields nemo_peft.yaml leaves to the user, and the defaults it chose."""
    m = job.mapping
    left = [f"{k}={v}" for k, v, default in (
        ("cp", m.cp, 1), ("ep", m.ep, 1), ("vpp", m.virtual_stages, 1),
        ("zero", int(m.zero), 0), ("offload", m.offloads_optimizer or m.offloads_params, False))
        if v != default]
    out = [f"{NEMO_FILE}: alpha = {LORA_ALPHA} and adapter_dropout 0.0 are HF PEFT's "
           "LoraConfig defaults (the plan does not set them; NeMo's own default alpha is the "
           "rank); they change only the update's scale, not the estimated time or memory"]
    if left:
        out.append(f"{NEMO_FILE} carries the cluster, tp, pp, batch, sequence, recompute and "
                   f"adapters; {', '.join(left)} are in megatron_args.sh only: set their NeMo "
                   "keys by hand")
    return out
