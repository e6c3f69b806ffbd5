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
  ``use_flash_attention: true``, ``optim: mcore_distributed_optim`` (ZeRO-1 over dp) with
  ``overlap_grad_sync`` / ``overlap_param_sync``, dropout 0.
- **llm-foundry** (MosaicML Composer + PyTorch FSDP; ``scripts/train/yamls/pretrain/
  mpt-*.yaml``): the published MPT benchmark tables were run at llm-foundry v0.0.4 on the
  ``mosaicml/pytorch:2.0.1`` image (``scripts/train/benchmarking/sweep.sh``), where MPT's ALiBi
  needs ``attn_impl: triton`` (Tri Dao's Triton FlashAttention, the FlashAttention-1
  generation: flash-attn CUDA gained ALiBi only in 2.4), so the ``fa1`` attention kernel
  (cost/attention.py); FSDP ``FULL_SHARD`` unless the row says otherwise,
  ``activation_checkpointing`` as the row states (True = full: Composer checkpoints whole
  blocks); Composer mixed precision ``DEFAULT`` reduces gradients in fp32, ``PURE`` in bf16
  (Composer docs, FSDP mixed_precision); eager PyTorch without torch.compile.
- **torchtitan** (``train_configs/llama3_8b.toml``): ``activation_checkpoint.mode = "selective"``,
  FSDP2 over the data-parallel ranks, no gradient accumulation (local batch = micro-batch);
  ``torch.compile`` only where the row says so (then the torch-compile profile: Inductor fusion).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from accelmap.cost.attention import AttentionKernel
from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.cost.framework import profile as framework_profile
from accelmap.mapping.plan import ZeroStage
from accelmap.units import DType
from accelmap.workload import Recompute


class Stack(StrEnum):
    MEGATRON_LM = "megatron-lm"  # Megatron-LM as published in 2020-2021
    NEMO = "nemo"  # NeMo / Megatron-Core
    LLM_FOUNDRY = "llm-foundry"  # MosaicML Composer + PyTorch FSDP
    TORCHTITAN = "torchtitan"  # PyTorch FSDP2 (+ TP/PP/CP)
    FSDP = "fsdp"  # any other PyTorch FSDP run


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
    attention: AttentionKernel = AttentionKernel.FA2  # kernel generation (cost/attention.py)


_NONE, _FULL, _SEL = Recompute.NONE, Recompute.FULL, Recompute.SELECTIVE
DEFAULTS: dict[Stack, StackDefaults] = {d.stack: d for d in (
    StackDefaults(Stack.MEGATRON_LM, Framework.MEGATRON, recompute=_FULL, flash_attention=False,
                  sequence_parallel=False, zero=ZeroStage.NONE, micro_batch=1,
                  tp_comm_overlap=False, dropout=True, grad_dtype=DType.FP32,
                  source="Megatron-LM 2021 defaults: Narayanan et al. 2021, GPT scripts"),
    StackDefaults(Stack.NEMO, Framework.MEGATRON, recompute=_NONE, flash_attention=True,
                  sequence_parallel=True, zero=ZeroStage.OPTIMIZER, micro_batch=1,
                  tp_comm_overlap=True, dropout=False, grad_dtype=DType.FP32,
                  source="NeMo 24.07 defaults: NeMo-Framework-Launcher training configs"),
    StackDefaults(Stack.LLM_FOUNDRY, Framework.FSDP, recompute=_NONE, flash_attention=True,
                  sequence_parallel=False, zero=ZeroStage.PARAMETERS, micro_batch=1,
                  tp_comm_overlap=False, dropout=False, grad_dtype=DType.FP32,
                  source="llm-foundry defaults: mpt-*.yaml at v0.0.4, attn_impl triton (fa1), "
                         "FULL_SHARD", attention=AttentionKernel.FA1),
    StackDefaults(Stack.TORCHTITAN, Framework.FSDP, recompute=_SEL, flash_attention=True,
                  sequence_parallel=True, zero=ZeroStage.PARAMETERS, micro_batch=1,
                  tp_comm_overlap=False, dropout=False, grad_dtype=DType.FP32,
                  source="torchtitan defaults: llama3 train_configs, selective AC, FSDP2"),
    StackDefaults(Stack.FSDP, Framework.FSDP, recompute=_NONE, flash_attention=True,
                  sequence_parallel=False, zero=ZeroStage.PARAMETERS, micro_batch=1,
                  tp_comm_overlap=False, dropout=False, grad_dtype=DType.FP32,
                  source="PyTorch FSDP defaults: FULL_SHARD, no recompute"),
)}


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


def stack_profile(stack: Stack, framework_text: str) -> FrameworkProfile:
    """The stack's cost profile with its named features (the attention kernel generation)."""
    from dataclasses import replace

    return replace(framework_profile(stack_framework(stack, framework_text)),
                   attention=DEFAULTS[stack].attention)


def stack_framework(stack: Stack, framework_text: str) -> Framework:
    """The cost profile: the stack's, except that torch.compile runs (named in the row) get
    Inductor's elementwise fusion (the torch-compile profile)."""
    if "compile" in framework_text.lower() and stack in (Stack.TORCHTITAN, Stack.FSDP):
        return Framework.TORCH_COMPILE
    return DEFAULTS[stack].framework
