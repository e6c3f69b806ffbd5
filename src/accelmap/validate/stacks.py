"""Training software stacks named in the measurement rows, and the defaults each one documents.

When a row leaves a setting out, the stack's own documented default is used and the prediction's
notes say so (DESIGN: "when a published run omits micro-batch size or interleaving, use the
framework's documented defaults"). One table, never a per-row choice:

- **Megatron-LM 2020-2021** (README tables, Narayanan et al. 2021 "Efficient Large-Scale Language
  Model Training on GPU Clusters Using Megatron-LM"): activation recomputation on (the GPT
  example scripts' ``--checkpoint-activations``); no FlashAttention (Dao et al. 2022 came
  later: Megatron's fused softmax over materialised scores); no sequence parallelism
  (Korthikanti et al. 2022) and no distributed optimizer (Megatron-LM 2022), so plain data
  parallel all-reduce; dropout 0.1 (``--hidden-dropout``/``--attention-dropout`` defaults);
  micro-batch 1 and no interleaving unless stated; an unstated split of the model-parallel size
  puts tensor parallelism inside the node and pipelines across (sec. 3.3, takeaway #1).
- **NeMo 24.07 / Megatron-Core** (NeMo-Framework-Launcher ``conf/training/llama/llama3_70b.yaml``
  and siblings, the performance-summary configs): ``sequence_parallel: true``,
  ``activations_checkpoint_granularity: null`` (no recompute), ``ub_tp_comm_overlap: true``,
  ``use_flash_attention: true``, ZeRO-1 over dp with ``overlap_grad_sync`` /
  ``overlap_param_sync``, dropout 0. The optimizer of the 24.07 configs is
  ``distributed_fused_adam`` (Apex; ``conf/training/gpt3/175b.yaml`` and
  ``llama/llama2_70b.yaml`` at launcher 24c3d6bb, 2024-09-06; mcore's came in 3dd35614,
  2024-12-05): with bf16 weights and an fp32 optimizer NeMo stores the master weights as 16-bit
  remainders (``megatron_base_model.py`` L802-812). Gradients are reduced in bf16: Apex's
  ``grad_sync_dtype`` would default to the optimizer's fp32, but every H100 example of the
  launcher for GPT-3 and Llama (``examples/training/{gpt,llama}/h100/*.sh``, BF16 and FP8 alike)
  sets ``+training.model.optim.grad_sync_dtype=bf16``. Supervised fine-tuning follows the
  launcher's ``conf/peft/llama/sft.yaml`` (``peft_scheme: null`` is SFT; L248-256: optimizer
  ``dtype: bf16``, ``grad_sync_dtype: bf16``), and its H100 FP8 example
  ``examples/peft/llama/h100/70b_2node.sh`` adds ``fp8_params=true``: bf16 moments and a bf16
  master copy (``store_params`` with FP8 parameters, ``megatron_base_model.py`` L804-805),
  bf16 gradients, FP8 weights.
- **llm-foundry** (MosaicML Composer + PyTorch FSDP; ``scripts/train/yamls/pretrain/
  mpt-*.yaml``): ``attn_impl: flash``, FSDP ``FULL_SHARD`` unless the row says otherwise,
  ``activation_checkpointing`` as the row states (True = full: Composer checkpoints whole
  blocks); Composer mixed precision ``DEFAULT`` reduces gradients in fp32, ``PURE`` in bf16
  (Composer docs, FSDP mixed_precision); eager PyTorch without torch.compile.
- **torchtitan** (``train_configs/llama3_8b.toml``): ``activation_checkpoint.mode = "selective"``,
  FSDP2 over the data-parallel ranks, no gradient accumulation (local batch = micro-batch);
  the loss is torch ``cross_entropy`` on fp32 logits (``train.py`` L131-134 at 9dec370);
  ``torch.compile`` only where the row says so (then the torch-compile profile: Inductor fusion).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from accelmap.cost.framework import Framework
from accelmap.mapping.plan import ZeroStage
from accelmap.units import DType
from accelmap.workload import Loss, Recompute


class Stack(StrEnum):
    MEGATRON_LM = "megatron-lm"  # Megatron-LM as published in 2020-2021
    NEMO = "nemo"  # NeMo / Megatron-Core
    LLM_FOUNDRY = "llm-foundry"  # MosaicML Composer + PyTorch FSDP
    TORCHTITAN = "torchtitan"  # PyTorch FSDP2 (+ TP/PP/CP)
    FSDP = "fsdp"  # any other PyTorch FSDP run


@dataclass(frozen=True)
class OptimizerStorage:
    """How a recipe stores what the optimizer owns (memory only; ``workload.Training``)."""

    grad_dtype: DType | None = None  # None: the stack's grad_dtype
    state_dtype: DType = DType.FP32
    master_dtype: DType = DType.FP32
    master_remainders: bool = False
    fp8_params: bool = False  # FP8 primary weights, when the row trains in FP8
    source: str = ""


@dataclass(frozen=True)
class StackDefaults:
    stack: Stack
    framework: Framework  # cost profile
    recompute: Recompute
    flash_attention: bool
    sequence_parallel: bool  # with tp > 1
    zero: ZeroStage
    micro_batch: int  # when the row does not state it
    tp_comm_overlap: bool
    dropout: bool
    grad_dtype: DType  # gradient reduction precision
    source: str
    optimizer: OptimizerStorage = OptimizerStorage()
    loss: Loss = Loss.FUSED


_NONE, _FULL, _SEL = Recompute.NONE, Recompute.FULL, Recompute.SELECTIVE
DEFAULTS: dict[Stack, StackDefaults] = {d.stack: d for d in (
    StackDefaults(Stack.MEGATRON_LM, Framework.MEGATRON, recompute=_FULL, flash_attention=False,
                  sequence_parallel=False, zero=ZeroStage.NONE, micro_batch=1,
                  tp_comm_overlap=False, dropout=True, grad_dtype=DType.FP32,
                  source="Megatron-LM 2021 defaults: Narayanan et al. 2021, GPT scripts"),
    StackDefaults(Stack.NEMO, Framework.MEGATRON, recompute=_NONE, flash_attention=True,
                  sequence_parallel=True, zero=ZeroStage.OPTIMIZER, micro_batch=1,
                  tp_comm_overlap=True, dropout=False, grad_dtype=DType.BF16,
                  source="NeMo 24.07 defaults: NeMo-Framework-Launcher training configs",
                  optimizer=OptimizerStorage(master_remainders=True, source=(
                      "NeMo 24.07 distributed_fused_adam: fp32 master kept as bf16 weights + "
                      "16-bit remainders; bf16 gradients (launcher H100 examples)"))),
    StackDefaults(Stack.LLM_FOUNDRY, Framework.FSDP, recompute=_NONE, flash_attention=True,
                  sequence_parallel=False, zero=ZeroStage.PARAMETERS, micro_batch=1,
                  tp_comm_overlap=False, dropout=False, grad_dtype=DType.FP32,
                  source="llm-foundry defaults: mpt-*.yaml, attn_impl flash, FULL_SHARD"),
    StackDefaults(Stack.TORCHTITAN, Framework.FSDP, recompute=_SEL, flash_attention=True,
                  sequence_parallel=True, zero=ZeroStage.PARAMETERS, micro_batch=1,
                  tp_comm_overlap=False, dropout=False, grad_dtype=DType.FP32,
                  source="torchtitan defaults: llama3 train_configs, selective AC, FSDP2",
                  loss=Loss.EAGER),
    StackDefaults(Stack.FSDP, Framework.FSDP, recompute=_NONE, flash_attention=True,
                  sequence_parallel=False, zero=ZeroStage.PARAMETERS, micro_batch=1,
                  tp_comm_overlap=False, dropout=False, grad_dtype=DType.FP32,
                  source="PyTorch FSDP defaults: FULL_SHARD, no recompute"),
)}


# NeMo 24.07 supervised fine-tuning (launcher conf/peft/llama/sft.yaml with the H100 FP8
# examples' fp8_params=true)
NEMO_SFT = OptimizerStorage(grad_dtype=DType.BF16, state_dtype=DType.BF16,
                            master_dtype=DType.BF16, fp8_params=True, source=(
                                "NeMo 24.07 SFT recipe (launcher peft/llama/sft.yaml): bf16 "
                                "Adam moments, master copy and gradients; FP8 weights"))


def optimizer_storage(stack: Stack, model: str, notes: str) -> OptimizerStorage:
    """The optimizer storage of a row: NeMo's SFT recipe for NeMo fine-tuning rows (their model
    or notes say SFT), else the stack's."""
    if stack is Stack.NEMO and "sft" in f"{model} {notes}".lower():
        return NEMO_SFT
    return DEFAULTS[stack].optimizer


def training_stack(framework_text: str) -> Stack | None:
    """The stack a row's framework column names, or None (single-device engine only)."""
    t = framework_text.lower()
    if "nemo" in t or "megatron-core" in t:
        return Stack.NEMO
    if "megatron" in t:
        return Stack.MEGATRON_LM
    if "llm-foundry" in t or "composer" in t:
        return Stack.LLM_FOUNDRY
    if "torchtitan" in t:
        return Stack.TORCHTITAN
    if "fsdp" in t:
        return Stack.FSDP
    return None


def stack_framework(stack: Stack, framework_text: str) -> Framework:
    """The cost profile: the stack's, except that torch.compile runs (named in the row) get
    Inductor's elementwise fusion (the torch-compile profile)."""
    if "compile" in framework_text.lower() and stack in (Stack.TORCHTITAN, Stack.FSDP):
        return Framework.TORCH_COMPILE
    return DEFAULTS[stack].framework
