"""Training software stacks, and the defaults each documents, per release range.

When a run leaves a setting out, the stack's own documented default for the release the run
used is taken, and the prediction's notes say so (DESIGN: "when a published run omits
micro-batch size or interleaving, use the framework's documented defaults"). The release comes
from the run's framework version, or from the run's year when the version is absent (a year
alone is read as its middle, month 6); with neither, the stack's latest range is taken and the
note says so. One table (:data:`ERAS`), never a per-row choice.

Versions are read in each stack's own numbering and placed in time (:func:`release_date`):
Megatron-LM ``1.x`` (2020), ``2.x`` (2021), ``3.x`` (2022) and Megatron-Core ``0.x`` (the
``core_r0.x`` tags, 2023 on); NeMo container releases ``YY.MM`` and NeMo ``2.x`` (24.09 on);
torchtitan ``0.1``/``0.2`` (its tags, 2025-06 and 2025-10; the pre-release ``0.0.x`` dates nothing
and the run's year picks); a ``YY.MM`` version of any stack is a container release of that month.

- **Megatron-LM 2020-2021** (v1-v2; README tables, Narayanan et al. 2021 "Efficient Large-Scale
  Language Model Training on GPU Clusters Using Megatron-LM"): activation recomputation on (the
  GPT example scripts' ``--checkpoint-activations``); no FlashAttention (Dao et al. 2022 came
  later: Megatron's fused softmax over materialised scores); no sequence parallelism and no
  distributed optimizer, so plain data-parallel all-reduce, after the backward pass
  (``--DDP-impl local`` reduces the gradient buffer once the backward is done); dropout 0.1
  (``--hidden-dropout``/``--attention-dropout`` defaults); fp16 (``--fp16`` in the GPT scripts);
  micro-batch 1 and no interleaving unless stated, except in v1.x (2020), which had no gradient
  accumulation: its ``--batch-size`` is each data-parallel rank's whole batch
  (``whole_local_batch``); an unstated split of the model-parallel size
  puts tensor parallelism inside the node and pipelines across (sec. 3.3, takeaway #1).
- **Megatron-LM 2022** (v3; Korthikanti et al. 2022 "Reducing Activation Recomputation in Large
  Transformer Models"): ``--sequence-parallel`` with ``--recompute-activations`` (selective);
  ``--use-distributed-optimizer`` exists but is opt-in; still no FlashAttention and no overlap of
  the gradient reduction.
- **Megatron-Core 2023 on** (``core_r0.x``; Megatron-LM README "Training Speed and Scalability"
  and "Activation Checkpointing and Recomputation", 2024): attention through Transformer Engine
  (``--transformer-impl transformer_engine``, fused/flash attention; ``--use-flash-attn`` for
  the local implementation); "selective recomputation is the default" (``--recompute-
  activations``); the scaling runs overlap data-parallel (``--overlap-grad-reduce
  --overlap-param-gather``, so the distributed optimizer: ZeRO-1) and tensor-parallel
  communication (``--tp-comm-overlap``, with sequence parallelism); dropout stays 0.1 (argparse
  default).
- **NeMo before 23.08** (NeMo-Framework-Launcher ``conf/training/gpt3/*.yaml``, tags 23.03 to
  23.07): ``activations_checkpoint_granularity: selective``, ``sequence_parallel: True``,
  ``optim: distributed_fused_adam`` (ZeRO-1), no ``use_flash_attention`` yet, dropout 0.1;
  ``ub_tp_comm_overlap`` and ``overlap_grad_sync`` on from 23.05 (Transformer Engine).
- **NeMo 23.08 on / Megatron-Core** (launcher ``conf/training/llama/*.yaml`` 23.08 to 24.12,
  the performance-summary configs; NeMo 2.0 recipes keep them): ``sequence_parallel: true``,
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
  mpt-*.yaml``). Releases 0.0-0.3 (2023): the published MPT benchmark tables were run at
  v0.0.4 on the ``mosaicml/pytorch:2.0.1`` image (``scripts/train/benchmarking/sweep.sh``),
  where MPT's ALiBi needs ``attn_impl: triton`` (Tri Dao's Triton FlashAttention, the
  FlashAttention-1 generation; flash-attn CUDA gained ALiBi only in 2.4), hence the ``fa1``
  attention kernel (cost/attention.py); from 0.4 (2024) ``attn_impl: flash`` on flash-attn 2.
  FSDP ``FULL_SHARD`` unless the row says otherwise,
  ``activation_checkpointing`` as the row states (True = full: Composer checkpoints whole
  blocks); Composer mixed precision ``DEFAULT`` reduces gradients in fp32, ``PURE`` in bf16
  (Composer docs, FSDP mixed_precision); eager PyTorch without torch.compile.
- **torchtitan** (``train_configs/llama3_8b.toml``): ``activation_checkpoint.mode = "selective"``
  with ``selective_ac_option = "op"``, so its "selective" is the per-op policy
  (``Recompute.PER_OP``, ops/training.py), not Korthikanti et al.'s,
  FSDP2 over the data-parallel ranks, no gradient accumulation (local batch = micro-batch);
  ``torch.compile`` only where the row says so (then the torch-compile profile: Inductor fusion).
- **other** (an in-house stack whose code is not public: Meta's Llama 3 stack, Google's
  T5X/Pathways, DeepSeek's HAI-LLM, ...): the physics of the closest public stack with the same
  4D parallelism, Megatron-Core (:data:`OTHER_NOTE` says which overlaps and kernels that
  assumes); the device class's own compiled stack where the part is no GPU (cost/execution.py:
  XLA on a TPU). TP-communication overlap is off unless the run says so: no in-house stack
  documents it as a default, and Megatron-Core itself needs ``--tp-comm-overlap``.
- **Megatron-DeepSpeed** (Megatron-LM's model code and tensor parallelism under DeepSpeed's
  ``PipelineEngine`` and optimizer: MT-NLG 530B, BLOOM 176B, GPT-NeoX): Megatron's fused
  kernels without sequence parallelism or FlashAttention (the forks of 2021-2022), DeepSpeed
  activation checkpointing of every layer (``recompute: full``), ZeRO-1, the pipeline's
  blocking sends (``workload.PipeSends``: every send and receive a call of its own, four
  transfers a micro-batch in series; before DeepSpeed 0.5.4 each tp rank sends the whole input
  gradient back), the gradient reduction after the backward. Its gradient accumulation is a
  pass of its own per micro-batch (``workload.GradAccumulation``): before DeepSpeed 0.6.2
  (2022-04) the 16-bit ``.grad`` by autograd, reduced in 16 bits; from PR #1801 (v0.6.2) a
  bf16 run's ``BF16_Optimizer`` adds each micro-batch's gradients into fp32 copies and
  reduces those in fp32 (``runtime/pipe/engine.py _exec_backward_pass``, ``_bf16_reduce_grads``).
- **DeepSpeed** (DeepSpeed configuration docs): ``zero_optimization.stage`` 0, activation
  checkpointing off, ``overlap_comm`` false; attention is the model's own code (PyTorch >= 2.0
  ``scaled_dot_product_attention`` takes the flash kernel for 16-bit inputs); eager PyTorch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from accelmap.cost.attention import AttentionKernel
from accelmap.cost.framework import Framework, FrameworkProfile, eager_passes_for
from accelmap.cost.framework import profile as framework_profile
from accelmap.mapping.plan import ZeroStage, balanced_split
from accelmap.units import DType
from accelmap.workload import GradAccumulation, Loss, PipeSends, Recompute


class Stack(StrEnum):
    MEGATRON_LM = "megatron-lm"  # Megatron-LM, and Megatron-Core from 2023 on
    NEMO = "nemo"  # NeMo (NeMo-Megatron, then Megatron-Core)
    LLM_FOUNDRY = "llm-foundry"  # MosaicML Composer + PyTorch FSDP
    TORCHTITAN = "torchtitan"  # PyTorch FSDP2 (+ TP/PP/CP)
    DEEPSPEED = "deepspeed"  # DeepSpeed ZeRO
    MEGATRON_DEEPSPEED = "megatron-deepspeed"  # Megatron's model + DeepSpeed's pipeline/optimizer
    FSDP = "fsdp"  # any other PyTorch FSDP run
    OTHER = "other"  # an in-house stack (Meta's, T5X/Pathways, HAI-LLM, ...): OTHER_NOTE


class StageMicrobatches(StrEnum):
    """torchtitan's micro-batch count under pipeline parallelism when the run sets none; the
    local batch splits into that many (the batch must divide by it, else it raises)."""

    # ``build_pipeline_schedule`` before PR #781 (2025-01-07): "if n_microbatches is None:
    # n_microbatches = job_config.experimental.pipeline_parallel_degree" (pipelining_utils.py
    # @9dec370, the commit of the December 2024 benchmarks), interleaved or not
    PP_DEGREE = "pp degree"
    # PR #781 (2025-01-07) until PR #1073 (2025-04-07): ``num_total_stages`` = pp x the stages
    # of each rank
    TOTAL_STAGES = "pp x stages per rank"


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
    overlap_grad_reduce: bool = True  # data-parallel reduction hidden behind the backward
    precision: DType | None = None  # when the row does not state it (None: it must)
    split_model_parallel: bool = False  # unstated TP/PP split: TP inside the node, PP across
    release: str = ""  # the release range these defaults belong to
    attention: AttentionKernel = AttentionKernel.FA2  # kernel generation (cost/attention.py)
    optimizer: OptimizerStorage = OptimizerStorage()
    loss: Loss = Loss.FUSED
    # what the stack's "selective" activation checkpointing is: Korthikanti et al.'s (Megatron,
    # NeMo), or torchtitan's per-op policy
    selective: Recompute = Recompute.SELECTIVE
    # FSDP (ZeRO-3) under pipeline parallelism as the stack runs it: torchtitan keeps the
    # gathered parameters across the micro-batches (``reshard_after_forward = not pp_enabled``,
    # ``apply_fsdp`` in models/llama3/infra/parallelize.py) and PyTorch's pipeline stages sync
    # gradients on the last micro-batch only (``backward_maybe_with_nosync``), which is ZeRO-2's
    # traffic: one parameter all-gather and one gradient reduce-scatter per step
    zero_with_pp: ZeroStage | None = None
    # a GPT run built from its dimensions that leaves these out (the release's example scripts)
    seq_len: int | None = None
    vocab: int | None = None
    # the release had no gradient accumulation: a micro-batch, when not stated, is the data-
    # parallel rank's whole batch (global batch / dp)
    whole_local_batch: bool = False
    # under pipeline parallelism, how many micro-batches the local batch splits into when the run
    # states none (StageMicrobatches); None: the stack's micro_batch
    stage_microbatches: StageMicrobatches | None = None
    # virtual stages of an interleaved run that states none: this many per rank (None: the NeMo
    # recipe's, recipe_vpp)
    interleaved_vpp: int | None = None
    # the model's elementwise ops are written out in PyTorch as the reference eager model's are
    # (cost/eager_passes.py): run eagerly, each line is a kernel and a memory pass of its own
    written_out: bool = False
    # stage-to-stage sends beside the compute under an interleaved schedule (engine.train.
    # OverlapPolicy.pp_p2p); None: the engine's stack default, which is Megatron-Core's
    # (--overlap-p2p-communication on; NeMo's launcher training configs for Megatron-Core set
    # ``overlap_p2p_comm: true``, e.g. conf/training/llama/llama3_70b.yaml)
    overlap_p2p: bool | None = None
    # how the stack adds micro-batch gradients up (workload.GradAccumulation), and how it does
    # for a bf16 run when that differs (None: the same)
    grad_accumulation: GradAccumulation = GradAccumulation.FUSED
    bf16_grad_accumulation: GradAccumulation | None = None
    bf16_grad_dtype: DType | None = None  # a bf16 run's gradient reduction, when it differs
    # how the pipeline engine sends between stages (workload.PipeSends)
    pp_sends: PipeSends = PipeSends.BATCHED

    def accumulation(self, dtype: DType | None) -> GradAccumulation:
        """The stack's gradient accumulation for a run in ``dtype``."""
        if dtype is DType.BF16 and self.bf16_grad_accumulation is not None:
            return self.bf16_grad_accumulation
        return self.grad_accumulation

    def gradient_dtype(self, dtype: DType | None) -> DType:
        """The stack's gradient reduction precision for a run in ``dtype``."""
        if dtype is DType.BF16 and self.bf16_grad_dtype is not None:
            return self.bf16_grad_dtype
        return self.grad_dtype


_NONE, _FULL, _SEL = Recompute.NONE, Recompute.FULL, Recompute.SELECTIVE
_MEGATRON_2021 = StackDefaults(
    Stack.MEGATRON_LM, Framework.MEGATRON, recompute=_FULL, flash_attention=False,
    sequence_parallel=False, zero=ZeroStage.NONE, micro_batch=1, tp_comm_overlap=False,
    dropout=True, grad_dtype=DType.FP32,
    source="Megatron-LM 2021 defaults: Narayanan et al. 2021, GPT scripts",
    overlap_grad_reduce=False, precision=DType.FP16, split_model_parallel=True,
    release="Megatron-LM 2021 (v2)",
    # blocking batched sends (schedules.py send_forward_recv_forward ...: isend/irecv waited
    # before the next chunk); overlap_p2p_comm came with Megatron-Core
    overlap_p2p=False,
    # README of 2020 (commit 52819194, the scaling tables): "All models use a vocabulary size
    # of 51,200 and a sequence length of 1024" (examples/pretrain_gpt.sh: --seq-length 1024;
    # the GPT-2 BPE vocabulary padded to 51,200)
    seq_len=1024, vocab=51200)
# Megatron-LM v1.x (2020) had no gradient accumulation and no pipeline: ``--batch-size`` is the
# "Batch size per model instance (local batch size). Global batch size is local batch size
# times data parallel size." (megatron/arguments.py, add_training_args, v1.1); v2 (2021) added
# --micro-batch-size and --global-batch-size.
_MEGATRON_2020 = replace(
    _MEGATRON_2021, release="Megatron-LM 2020 (v1.x)", whole_local_batch=True,
    source="Megatron-LM 2020 defaults: v1.x GPT scripts, --batch-size per model instance, no "
           "gradient accumulation")
_MEGATRON_2022 = StackDefaults(
    Stack.MEGATRON_LM, Framework.MEGATRON, recompute=_SEL, flash_attention=False,
    sequence_parallel=True, zero=ZeroStage.NONE, micro_batch=1, tp_comm_overlap=False,
    dropout=True, grad_dtype=DType.FP32,
    source="Megatron-LM 2022 defaults: Korthikanti et al. 2022, --sequence-parallel "
           "--recompute-activations",
    overlap_grad_reduce=False, split_model_parallel=True, release="Megatron-LM 2022 (v3)",
    overlap_p2p=False)
_MEGATRON_CORE = StackDefaults(
    Stack.MEGATRON_LM, Framework.MEGATRON, recompute=_SEL, flash_attention=True,
    sequence_parallel=True, zero=ZeroStage.OPTIMIZER, micro_batch=1, tp_comm_overlap=True,
    dropout=True, grad_dtype=DType.FP32,
    source="Megatron-Core defaults: Megatron-LM README 2024, Transformer Engine attention, "
           "selective recompute, --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap",
    split_model_parallel=True, release="Megatron-Core 2023 on (core_r0.x)",
    attention=AttentionKernel.CUDNN)
_NEMO_2023 = StackDefaults(
    Stack.NEMO, Framework.MEGATRON, recompute=_SEL, flash_attention=False,
    sequence_parallel=True, zero=ZeroStage.OPTIMIZER, micro_batch=1, tp_comm_overlap=True,
    dropout=True, grad_dtype=DType.FP32,
    source="NeMo 23.05-23.07 defaults: NeMo-Framework-Launcher gpt3 training configs",
    release="NeMo before 23.08",
    # NeMo's megatron_gpt_config.yaml: "overlap_p2p_comm: False # Overlap p2p communication
    # with computes"
    overlap_p2p=False)
_NEMO_MCORE = StackDefaults(
    Stack.NEMO, Framework.MEGATRON, recompute=_NONE, flash_attention=True,
    sequence_parallel=True, zero=ZeroStage.OPTIMIZER, micro_batch=1, tp_comm_overlap=True,
    dropout=False, grad_dtype=DType.BF16,
    source="NeMo 24.07 defaults: NeMo-Framework-Launcher training configs",
    release="NeMo 23.08 on (Megatron-Core)", attention=AttentionKernel.CUDNN,
    optimizer=OptimizerStorage(master_remainders=True, source=(
        "NeMo 24.07 distributed_fused_adam: fp32 master kept as bf16 weights + 16-bit "
        "remainders; bf16 gradients (launcher H100 examples)")))
_LLM_FOUNDRY_2023 = StackDefaults(
    Stack.LLM_FOUNDRY, Framework.FSDP, recompute=_NONE, flash_attention=True,
    sequence_parallel=False, zero=ZeroStage.PARAMETERS, micro_batch=1, tp_comm_overlap=False,
    dropout=False, grad_dtype=DType.FP32,
    source="llm-foundry 0.0-0.3 defaults: mpt-*.yaml, attn_impl triton (FlashAttention-1 "
           "generation), FULL_SHARD",
    release="llm-foundry 0.0-0.3 (2023)", attention=AttentionKernel.FA1)
_LLM_FOUNDRY = replace(
    _LLM_FOUNDRY_2023, source="llm-foundry 0.4+ defaults: mpt-*.yaml, attn_impl flash "
    "(flash-attn 2), FULL_SHARD", release="llm-foundry 0.4+ (2024)",
    attention=AttentionKernel.FA2)
# torchtitan from PR #1073 (2025-04-07, v0.1 on): ``pipeline_parallel_microbatch_size``
# defaults to 1, so an unstated micro-batch is 1 (n_microbatches = local batch); an interleaved
# schedule without a split has 2 stages per rank ("For multi-stage schedules, default is 2
# virtual stages per rank", distributed/pipeline_parallel.py), as before
# Its Llama is written out (torchtitan/models/norms.py RMSNorm: ``self._norm(x.float())
# .type_as(x) * self.weight`` with pow, mean and rsqrt; models/llama/model.py: rotary embedding
# as a complex product in fp32, ``w2(F.silu(w1(x)) * w3(x))``, residual adds), so an eager run
# pays the reference eager model's passes (its half-rotation RoPE moves 18 bytes per element
# where torchtitan's fp32 complex product moves 20: the reference's stand in)
_TORCHTITAN = StackDefaults(
    Stack.TORCHTITAN, Framework.FSDP, recompute=Recompute.PER_OP, selective=Recompute.PER_OP,
    zero_with_pp=ZeroStage.GRADIENTS, interleaved_vpp=2, written_out=True,
    flash_attention=True,
    sequence_parallel=True, zero=ZeroStage.PARAMETERS, micro_batch=1, tp_comm_overlap=False,
    dropout=False, grad_dtype=DType.FP32,
    source="torchtitan defaults: llama3 train_configs, selective AC, FSDP2",
    release="torchtitan 2025-04+ (v0.1+)", loss=Loss.EAGER)
_TORCHTITAN_2025Q1 = replace(
    _TORCHTITAN, stage_microbatches=StageMicrobatches.TOTAL_STAGES,
    release="torchtitan 2025-01..2025-04")
# before 2025-01-07: the pipeline's degree, and 2 stages per rank for a multi-stage schedule
# without split points (generate_split_points, pipelining_utils.py @9dec370)
_TORCHTITAN_2024 = replace(
    _TORCHTITAN, stage_microbatches=StageMicrobatches.PP_DEGREE, release="torchtitan 2024")
OTHER_NOTE = (
    "in-house stack: Megatron-Core's physics assumed (the closest public stack with the same "
    "TP/PP/CP/DP): fused Transformer-Engine-style kernels and FlashAttention-2-generation "
    "attention, sequence parallel with tp, ZeRO-1 with the gradient reduce-scatter and "
    "parameter all-gather overlapped with compute, no TP-communication overlap, selective "
    "recompute unless the run says otherwise; without pipeline parallelism no gradient "
    "accumulation (each rank's batch is one micro-batch, as MaxText, T5X and metaseq default "
    "to); FSDP with pp as torchtitan runs it (parameters gathered once a step, gradients "
    "reduced on the last micro-batch)")
_OTHER = StackDefaults(
    Stack.OTHER, Framework.MEGATRON, recompute=_SEL, flash_attention=True,
    sequence_parallel=True, zero=ZeroStage.OPTIMIZER, micro_batch=1, tp_comm_overlap=False,
    dropout=False, grad_dtype=DType.FP32, split_model_parallel=True,
    # FSDP under pipeline parallelism: Megatron-Core has no such combination, so the closest
    # public stack that runs it, torchtitan (parameters kept gathered across the micro-batches,
    # gradients reduced on the last: ZeRO-2's traffic and memory)
    zero_with_pp=ZeroStage.GRADIENTS,
    # without a pipeline, the rank's whole batch in one micro-batch: the in-house stacks that
    # publish their defaults accumulate no gradients unless told to (MaxText
    # gradient_accumulation_steps: 1, T5X/Pax without accumulation, metaseq update_freq 1),
    # and under FSDP each extra micro-batch would gather the parameters again
    whole_local_batch=True,
    source="in-house stack: Megatron-Core's physics (validate/stacks.py OTHER_NOTE)",
    release="in-house (Megatron-Core physics)")
_DEEPSPEED = StackDefaults(
    Stack.DEEPSPEED, Framework.FSDP, recompute=_NONE, flash_attention=True,
    sequence_parallel=False, zero=ZeroStage.NONE, micro_batch=1, tp_comm_overlap=False,
    dropout=False, grad_dtype=DType.FP32,
    source="DeepSpeed defaults: config docs, zero_optimization.stage 0, overlap_comm false",
    overlap_grad_reduce=False, release="DeepSpeed 0.x")
# Megatron-DeepSpeed before DeepSpeed 0.6.2: fp16 with DeepSpeed's ZeRO-1 optimizer under the
# pipeline engine; gradients accumulate in the 16-bit .grad and are reduced in 16 bits; the
# engine's sends block, and before 0.5.4 each tp rank sends the whole input gradient back
# (runtime/pipe/engine.py: is_grad_partitioned = False until PR #1407, 2021-09-29)
_MEGATRON_DEEPSPEED_2021 = StackDefaults(
    Stack.MEGATRON_DEEPSPEED, Framework.MEGATRON, recompute=_FULL, flash_attention=False,
    sequence_parallel=False, zero=ZeroStage.OPTIMIZER, micro_batch=1, tp_comm_overlap=False,
    dropout=True, grad_dtype=DType.FP16,
    source="Megatron-DeepSpeed 2021 defaults: DeepSpeed PipelineEngine with ZeRO-1, fp16, "
           "DeepSpeed activation checkpointing, Megatron's fused kernels",
    overlap_grad_reduce=False, precision=DType.FP16, split_model_parallel=True,
    release="Megatron-DeepSpeed with DeepSpeed < 0.6.2", overlap_p2p=False,
    grad_accumulation=GradAccumulation.AUTOGRAD, bf16_grad_dtype=DType.BF16,
    pp_sends=PipeSends.BLOCKING_WHOLE_GRAD)
# DeepSpeed 0.5.4 (2021-10-06) to 0.6.1: gradients sent split over the tp group as well
_MEGATRON_DEEPSPEED_2021_Q4 = replace(
    _MEGATRON_DEEPSPEED_2021, release="Megatron-DeepSpeed with DeepSpeed 0.5.4 to 0.6.1",
    pp_sends=PipeSends.BLOCKING)
# from DeepSpeed 0.6.2 (PR #1801, 2022-04-19, built for BLOOM): bf16 through BF16_Optimizer,
# fp32 gradient copies added up per micro-batch and all-reduced in fp32
_MEGATRON_DEEPSPEED_2022 = replace(
    _MEGATRON_DEEPSPEED_2021_Q4, precision=DType.BF16,
    source="Megatron-DeepSpeed 2022 defaults: DeepSpeed PipelineEngine, BF16_Optimizer (its "
           "own ZeRO-1) for bf16, DeepSpeed activation checkpointing, Megatron's fused kernels",
    release="Megatron-DeepSpeed with DeepSpeed >= 0.6.2",
    bf16_grad_accumulation=GradAccumulation.FP32_COPY, bf16_grad_dtype=DType.FP32)
_FSDP = StackDefaults(
    Stack.FSDP, Framework.FSDP, recompute=_NONE, flash_attention=True,
    sequence_parallel=False, zero=ZeroStage.PARAMETERS, micro_batch=1, tp_comm_overlap=False,
    dropout=False, grad_dtype=DType.FP32,
    source="PyTorch FSDP defaults: FULL_SHARD, no recompute", release="PyTorch FSDP")


@dataclass(frozen=True)
class Era:
    """Defaults of one stack from ``since`` (year, month; None: from the start) until the next
    era of the same stack."""

    since: tuple[int, int] | None
    defaults: StackDefaults


ERAS: dict[Stack, tuple[Era, ...]] = {
    Stack.MEGATRON_LM: (Era(None, _MEGATRON_2020), Era((2021, 1), _MEGATRON_2021),
                        Era((2022, 1), _MEGATRON_2022),
                        Era((2023, 1), _MEGATRON_CORE)),
    Stack.NEMO: (Era(None, _NEMO_2023), Era((2023, 8), _NEMO_MCORE)),
    Stack.LLM_FOUNDRY: (Era(None, _LLM_FOUNDRY_2023), Era((2024, 1), _LLM_FOUNDRY)),
    Stack.TORCHTITAN: (Era(None, _TORCHTITAN_2024), Era((2025, 1), _TORCHTITAN_2025Q1),
                       Era((2025, 4), _TORCHTITAN)),
    Stack.DEEPSPEED: (Era(None, _DEEPSPEED),),
    Stack.MEGATRON_DEEPSPEED: (Era(None, _MEGATRON_DEEPSPEED_2021),
                               Era((2021, 10), _MEGATRON_DEEPSPEED_2021_Q4),
                               Era((2022, 4), _MEGATRON_DEEPSPEED_2022)),
    Stack.FSDP: (Era(None, _FSDP),),
    Stack.OTHER: (Era(None, _OTHER),),
}

# The defaults of each stack as the shared transcription's rows were first read with them
# (kept for callers that name a stack without a release).
DEFAULTS: dict[Stack, StackDefaults] = {
    Stack.MEGATRON_LM: _MEGATRON_2021, Stack.NEMO: _NEMO_MCORE,
    Stack.LLM_FOUNDRY: _LLM_FOUNDRY_2023, Stack.TORCHTITAN: _TORCHTITAN,
    Stack.DEEPSPEED: _DEEPSPEED, Stack.FSDP: _FSDP, Stack.OTHER: _OTHER,
    Stack.MEGATRON_DEEPSPEED: _MEGATRON_DEEPSPEED_2022,
}

# Canonical framework names (the run format's vocabulary) -> stack.
FRAMEWORK_NAMES: dict[str, Stack] = {
    "megatron-lm": Stack.MEGATRON_LM, "megatron-core": Stack.MEGATRON_LM, "nemo": Stack.NEMO,
    "llm-foundry": Stack.LLM_FOUNDRY, "torchtitan": Stack.TORCHTITAN,
    "deepspeed": Stack.DEEPSPEED, "fsdp": Stack.FSDP, "other": Stack.OTHER,
    "megatron-deepspeed": Stack.MEGATRON_DEEPSPEED,
    # EleutherAI's GPT-NeoX: Megatron's model parallelism on DeepSpeed's pipeline engine and
    # ZeRO (Black et al. 2022 sec. 3.1; its releases are dated by the run's year)
    "gpt-neox": Stack.MEGATRON_DEEPSPEED,
}

# In-house stacks named in publications (lowercase words of the name) -> the generic stack, with
# a note saying so (``in_house``).
IN_HOUSE_NAMES: tuple[str, ...] = (
    "meta", "llama", "t5x", "pathways", "paxml", "pax", "hai-llm", "hai", "megascale",
    # TII's Gigatron (Falcon, Almazrouei et al. 2023 sec. 4), Meta's metaseq (OPT: FairScale
    # FSDP with Megatron's tensor parallelism, Zhang et al. 2022 sec. 2.4)
    "gigatron", "metaseq",
    "in-house", "inhouse", "internal", "proprietary", "other")


def in_house(name: str) -> str | None:
    """The note for a framework name that is an in-house stack (None: not one we know)."""
    words = set(re.split(r"[^a-z0-9-]+", name.lower()))
    if words & set(IN_HOUSE_NAMES) or "in-house" in name.lower():
        return f"framework {name!r}: {OTHER_NOTE}"
    return None

_VERSION = re.compile(r"^v?(?:core_r)?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[a-z]+\d*)?$")
MID_YEAR = 6  # a year without a month is read as its middle


def _release_scheme(stack: Stack) -> str:
    if stack is Stack.MEGATRON_LM:
        return "1.x-3.x (Megatron-LM 2020-2022), 0.x (Megatron-Core) or YY.MM"
    if stack is Stack.NEMO:
        return "a container release YY.MM such as 24.07, or 2.x"
    if stack is Stack.LLM_FOUNDRY:
        return "0.x such as 0.3 or 0.10"
    if stack is Stack.TORCHTITAN:
        return ("a release such as 0.1 or 0.2, or the pre-release 0.0.x with the run's year "
                "(earlier runs: leave it out and give the year)")
    if stack is Stack.MEGATRON_DEEPSPEED:
        return "the DeepSpeed release it ran on, 0.x.y such as 0.5.8 or 0.6.2"
    return "numbers such as 0.9"


def release_date(stack: Stack, version: str) -> tuple[int, int] | str | None:
    """(year, month) of a stack's release, None for a real version that dates no release
    (torchtitan's pre-release 0.0.x: the run's year picks), or a sentence saying what versions
    look like."""
    m = _VERSION.match(version.strip().lower())
    if not m:
        return f"{stack.value} version {version!r} is not a version ({_release_scheme(stack)})"
    major, minor = int(m.group(1)), int(m.group(2) or 0)
    if major >= 20 and 1 <= minor <= 12:  # YY.MM container release
        return 2000 + major, minor
    if stack is Stack.MEGATRON_LM:
        if major == 0:
            return 2023, 1  # Megatron-Core core_r0.x
        if major in (1, 2, 3):
            return 2019 + major, MID_YEAR
    elif stack is Stack.NEMO:
        if major == 2:
            return 2024, 9  # NeMo 2.0 came with the 24.09 container
    elif stack is Stack.LLM_FOUNDRY:
        if major == 0:  # 0.0-0.3 released in 2023, 0.4 in January 2024 (GitHub releases)
            return (2023, MID_YEAR) if minor < 4 else (2024, 1)
    elif stack is Stack.MEGATRON_DEEPSPEED:
        if major == 0:  # DeepSpeed's own tags: PR #1407 (split gradient sends) in v0.5.4,
            # PR #1801 (bf16 + pipeline) after v0.6.1
            patch = int(m.group(3) or 0)
            return ((2021, MID_YEAR) if (minor, patch) < (5, 4) else
                    (2021, 10) if (minor, patch) < (6, 2) else (2022, 4))
    elif stack is Stack.TORCHTITAN:
        if major == 0 and minor >= 1:  # v0.1.0 2025-06-17, v0.2.0 2025-10-17 (git tags)
            return (2025, 6) if minor == 1 else (2025, 10)
        if major == 0 and minor == 0:  # pyproject's 0.0.x before the first tag (2024-2025)
            return None
    else:
        return 0, 0  # single-range stacks: any version
    return f"{stack.value} version {version!r} is not one this table knows " \
           f"({_release_scheme(stack)})"


def defaults_for(stack: Stack, version: str = "", year: int | None = None
                 ) -> tuple[StackDefaults, str | None]:
    """The stack's defaults for a release, and a note naming the release range and how it was
    chosen (None for a stack with one range). An unreadable version counts as not given; the
    canonical reader rejects those first."""
    eras = ERAS[stack]
    if len(eras) == 1:
        return eras[0].defaults, None
    when = release_date(stack, version) if version else None
    if isinstance(when, tuple):
        how = f"{version}:"
    elif year is not None:
        said = ("version not stated" if not version or isinstance(when, str) else
                f"{version} dates no release")
        when, how = (year, MID_YEAR), f"{said}: the run's year {year} picks"
    else:
        when, how = (9999, 12), "version and year not stated: the latest release range,"
    chosen = eras[0].defaults
    for era in eras:
        if era.since is None or when >= era.since:
            chosen = era.defaults
    return chosen, f"{stack.value} {how} {chosen.release} defaults"


def training_stack(framework_text: str) -> Stack | None:
    """The stack a row's framework column names, or None (single-device engine only)."""
    t = framework_text.lower()
    if "nemo" in t:
        return Stack.NEMO
    if ("megatron" in t and "deepspeed" in t) or "neox" in t:  # Megatron-DeepSpeed, GPT-NeoX
        return Stack.MEGATRON_DEEPSPEED
    if "megatron" in t:
        return Stack.MEGATRON_LM
    if "llm-foundry" in t or "composer" in t:
        return Stack.LLM_FOUNDRY
    if "torchtitan" in t:
        return Stack.TORCHTITAN
    if "deepspeed" in t:
        return Stack.DEEPSPEED
    if "fsdp" in t:
        return Stack.FSDP
    if in_house(framework_text):
        return Stack.OTHER
    return None


def stack_framework(stack: Stack, framework_text: str) -> Framework:
    """The cost profile: the stack's, except that torch.compile runs (named in the row) get
    Inductor's elementwise fusion (the torch-compile profile)."""
    return compiled_framework(stack, "compile" in framework_text.lower())


# NeMo 24.07 supervised fine-tuning (launcher conf/peft/llama/sft.yaml with the H100 FP8
# examples' fp8_params=true)
NEMO_SFT = OptimizerStorage(grad_dtype=DType.BF16, state_dtype=DType.BF16,
                            master_dtype=DType.BF16, fp8_params=True, source=(
                                "NeMo 24.07 SFT recipe (launcher peft/llama/sft.yaml): bf16 "
                                "Adam moments, master copy and gradients; FP8 weights"))


def optimizer_storage(d: StackDefaults, model: str, notes: str) -> OptimizerStorage:
    """The optimizer storage of a run: NeMo's SFT recipe for NeMo fine-tuning runs (their model
    or notes say SFT), else the release's."""
    if d.stack is Stack.NEMO and "sft" in f"{model} {notes}".lower():
        return NEMO_SFT
    return d.optimizer


def stack_profile(d: StackDefaults, framework: Framework, spec: Any = None) -> FrameworkProfile:
    """The cost profile a run is predicted with: its framework's, with the release's named
    features (the attention kernel generation), and, for a stack whose model is written out
    run without fusion, the written-out elementwise passes of ``spec`` (cost/eager_passes.py)."""
    prof = replace(framework_profile(framework), attention=d.attention)
    if d.written_out and spec is not None and not prof.fuses_elementwise:
        prof = replace(prof, passes=eager_passes_for(spec))
    return prof


def compiled_framework(stack: Stack, compiled: bool) -> Framework:
    if compiled and stack in (Stack.TORCHTITAN, Stack.FSDP):
        return Framework.TORCH_COMPILE
    return DEFAULTS[stack].framework


# -- pipeline defaults of the stacks, for runs that leave them out --------------------------------
@dataclass(frozen=True)
class Recipe:
    """A NeMo 2.0 recipe's pipeline (``trainer()`` defaults of
    nemo/collections/llm/recipes/<file>.py, NVIDIA/NeMo @8cfedd72)."""

    pp: int
    vpp: int
    embedding_in_split: bool = False  # account_for_embedding_in_pipeline_split
    loss_in_split: bool = False  # account_for_loss_in_pipeline_split
    file: str = ""


NEMO_RECIPES: dict[str, Recipe] = {
    "gpt3-175b": Recipe(8, 6, file="gpt3_175b.py"),
    "llama-3.1-405b": Recipe(8, 2, True, True, file="llama31_405b.py"),
    "llama-3.1-70b": Recipe(4, 5, file="llama31_70b.py"),
    "mixtral-8x22b": Recipe(4, 14, file="mixtral_8x22b.py"),
    "mixtral-8x7b": Recipe(4, 8, file="mixtral_8x7b.py"),
    # read at NVIDIA/NeMo @01d03c17: pretrain_recipe(pipeline_parallelism=12,
    # virtual_pipeline_parallelism=8), the Nemotron-4 340B report's 12-way pipeline
    "nemotron-4-340b": Recipe(12, 8, file="nemotron4_340b.py"),
}


def recipe_vpp(model_id: str, n_layers: int, pp: int) -> tuple[int, str] | str:
    """Virtual stages of an interleaved NeMo/Megatron run that does not state them: the NeMo
    recipe's for its pp; for another pp, the recipe's layers per model chunk kept (the largest
    vpp whose chunks hold at least as many layers); or the reason there is none."""
    r = NEMO_RECIPES.get(model_id)
    if r is None:
        return (f"interleaved schedule without the number of virtual stages, and no NeMo recipe "
                f"for {model_id} defines it; write vpp: the number of virtual pipeline stages")
    extra = int(r.embedding_in_split) + int(r.loss_in_split)
    src = f"NeMo recipe {r.file} (pp={r.pp}, vpp={r.vpp})"
    if pp == r.pp:
        return r.vpp, src
    chunk = (n_layers + extra) / (r.pp * r.vpp)
    stage = (n_layers + extra) / pp
    fits = [d for d in range(2, int(stage) + 1)
            if stage == int(stage) and stage % d == 0 and stage / d >= chunk]
    if not fits:
        return (f"interleaved with pp={pp}: {src} keeps {chunk:g} layers per model chunk, "
                f"which no vpp > 1 gives; write vpp")
    return max(fits), f"{src}: {chunk:g} layers per model chunk at pp={pp}"


def silent_split(stack: Stack, model_id: str, n_layers: int, pp: int,
                 vpp: int) -> tuple[dict[str, object], str] | None:
    """The pipeline split a stack uses when the run names none and Megatron's even split does
    not work (pp does not divide the layers, or vpp the layers per stage), with its source; None
    where the even split works or the stack has no such default (then mapping.constraints'
    pipeline_split refusal names the flags)."""
    if pp <= 1 or (n_layers % pp == 0 and (n_layers // pp) % vpp == 0):
        return None
    both: dict[str, object] = {"embedding_in_split": True, "loss_in_split": True}
    if stack is Stack.TORCHTITAN and (n_layers + 2) % (pp * vpp) == 0:
        return both, ("torchtitan's split counts the embedding and the output as one layer "
                      "each (generate_llm_fqn_per_model_part, input_weight = output_weight = 1)")
    r = NEMO_RECIPES.get(model_id)
    if (stack in (Stack.NEMO, Stack.MEGATRON_LM) and r is not None and r.embedding_in_split
            and (n_layers + 2) % pp == 0 and ((n_layers + 2) // pp) % vpp == 0):
        return both, (f"NeMo recipe {r.file}: account_for_embedding/loss_in_pipeline_split")
    if stack is Stack.OTHER:
        first, last = (int(x) for x in balanced_split(n_layers, pp, vpp))
        if first:
            return ({"first_stage_layers": first, "last_stage_layers": last},
                    "Llama 3's split for an in-house stack: the first and last stage hold fewer "
                    "layers (Dubey et al. 2024 sec. 3.3.2; mapping.plan.balanced_split)")
    return None
