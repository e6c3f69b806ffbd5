"""Workloads: how much work, in which precision. Training or inference, kept apart from the model
and the hardware (DESIGN: ModelSpec x System x Workload x Mapping -> Estimate).

Sizes are plain numbers here; the formulas that consume them are written so that batch and
sequence lengths may also be numpy arrays (the planner evaluates many at once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from accelmap.errors import InputError
from accelmap.units import DType


class Phase(StrEnum):
    TRAIN = "train"  # forward + backward + optimizer step
    PREFILL = "prefill"  # inference: the prompt in one forward pass
    DECODE = "decode"  # inference: one new token per sequence per step


class Optimizer(StrEnum):
    SGD = "sgd"  # with momentum: 1 state per parameter
    ADAMW = "adamw"  # Loshchilov & Hutter 2019: 2 states (m, v)
    ADAFACTOR = "adafactor"  # Shazeer & Stern 2018: factored second moment, ~0 states
    LION = "lion"  # Chen et al. 2023: 1 state (momentum)

    @property
    def fp32_states(self) -> int:
        """Full-size fp32 state tensors per parameter (Adafactor's factored ones are ~0)."""
        return {Optimizer.ADAMW: 2, Optimizer.SGD: 1, Optimizer.LION: 1}.get(self, 0)


class Loss(StrEnum):
    """How the cross-entropy over the vocabulary is computed, which sets its memory peak."""

    # one buffer of the logits' size, turned into the softmax and the gradient in place:
    # Megatron-Core's vocab-parallel cross-entropy (tensor_parallel/cross_entropy.py), flash-attn's
    # fused CrossEntropyLoss (llm-foundry's default loss_fn 'fused_crossentropy')
    FUSED = "fused"
    # torch cross_entropy on fp32 logits (torchtitan train.py: cross_entropy(pred.float(), ...)):
    # log-softmax keeps its fp32 output; its backward holds that output, the incoming and the
    # outgoing fp32 gradient at once
    EAGER = "eager"

    @property
    def bytes_per_logit(self) -> float:
        """Peak bytes per logit element (fp32 buffers: one fused, three eager)."""
        return 4.0 if self is Loss.FUSED else 3 * 4.0


class Sparsity(StrEnum):
    """Structured weight sparsity. 2:4: two of every four consecutive weights along the input
    dimension are zero, the pattern of NVIDIA's sparse tensor cores from Ampere on (Mishra et al.
    2021, arXiv 2104.08378) and of AMD's CDNA3 matrix cores; ops/sparsity.py and
    cost/sparsity.py say what it changes."""

    NONE = "none"
    TWO_FOUR = "2:4"


class GradAccumulation(StrEnum):
    """How a stack adds each micro-batch's weight gradients into the step's accumulator.

    - ``fused``: the wgrad GEMM writes into the accumulator (Megatron's
      ``--gradient-accumulation-fusion``, FSDP's reduce-scatter into the sharded gradient): no
      pass of its own (``ops/training.py`` counts the accumulator's read and write in the GEMM).
    - ``autograd``: PyTorch's AccumulateGrad adds each fresh 16-bit gradient into ``.grad``
      after the first micro-batch, a kernel of its own: read both, write one, 3 x 2 bytes per
      parameter (DeepSpeed's fp16 pipeline, whose ``PipelineEngine`` runs
      ``torch.autograd.backward`` and reduces ``.grad`` once a step).
    - ``fp32-copy``: DeepSpeed's ``BF16_Optimizer`` (bf16 + pipeline parallelism, DeepSpeed PR
      #1801, 2022-04) calls ``update_hp_grads`` after every micro-batch's backward:
      ``hp_grad.add_(lp.grad.to(float32))``, a cast (read 2, write 4 bytes) and an add (read
      4 + 4, write 4): 18 bytes per parameter (``deepspeed/runtime/bf16_optimizer.py``,
      ``runtime/pipe/engine.py _exec_backward_pass``; the bf16 gradients are cleared, not
      accumulated, before each backward).
    """

    FUSED = "fused"
    AUTOGRAD = "autograd"
    FP32_COPY = "fp32-copy"

    @property
    def bytes_per_param(self) -> float:
        """Bytes one accumulation pass moves per parameter (0: no pass of its own)."""
        return {GradAccumulation.FUSED: 0.0, GradAccumulation.AUTOGRAD: 6.0,
                GradAccumulation.FP32_COPY: 18.0}[self]

    @property
    def first_micro_batch(self) -> bool:
        """Whether the first micro-batch of a step pays the pass too (autograd's first
        gradient is the GEMM's own output)."""
        return self is GradAccumulation.FP32_COPY


class PipeSends(StrEnum):
    """How a pipeline stage sends its output on and its input gradient back.

    - ``batched``: Megatron-LM's ``p2p_communication.py``: a stage's send and the receive it
      waits for next (``send_forward_recv_backward`` ...) go out as one batched exchange, two a
      micro-batch, each rank sending its 1/t of the tensor (``scatter_gather_tensors_in_
      pipeline``) when the stack splits them (``memory.stack.MemoryStack.p2p_over_tp``).
    - ``blocking``: DeepSpeed's ``PipelineEngine`` (``runtime/pipe/p2p.py``: ``send``/``recv``
      assert ``async_op == False``; ``schedule.py`` ``TrainSchedule``): every send and every
      receive is a blocking call of its own, issued in the schedule's order, so a stage's
      stream waits for each neighbour in turn -- four transfers a micro-batch in series on a
      busy stage, the activation's two and the gradient's two. Activations and gradients go
      split over the tensor-parallel group (``PartitionedTensor``, all-gathered on arrival):
      DeepSpeed from 0.5.4 (PR #1407, 2021-09-29, ``is_grad_partitioned``).
    - ``blocking-whole-grad``: the same engine before DeepSpeed 0.5.4: the activation split,
      but every tensor-parallel rank sends the whole input gradient back.
    """

    BATCHED = "batched"
    BLOCKING = "blocking"
    BLOCKING_WHOLE_GRAD = "blocking-whole-grad"

    @property
    def blocking(self) -> bool:
        return self is not PipeSends.BATCHED


class Fp8Scaling(StrEnum):
    """How an FP8 training recipe scales each GEMM input (torchao ``Float8LinearRecipeName``).

    - ``tensorwise``: one scale per tensor (Transformer Engine's delayed and current scaling,
      torchao's default); the GEMMs are cuBLAS's scaled FP8 kernels.
    - ``rowwise``: one scale per row of each input, along the dimension its GEMM reduces over
      (torchao ``rowwise``). The forward GEMM is PyTorch's CUTLASS row-wise kernel with fast
      accumulation; the gradient GEMMs accumulate slowly (torchao ``Float8LinearConfig``
      defaults), which that kernel runs so slowly that torchao calls cuBLAS with unit scales,
      an fp32 output, and scales the output afterwards (pytorch/ao PR #1325,
      ``addmm_float8_unwrapped``); the column-scaled copy of each input costs one more read
      (ops/recipes.py ``rowwise_scaling``).
    """

    TENSORWISE = "tensorwise"
    ROWWISE = "rowwise"


class Recompute(StrEnum):
    NONE = "none"
    SELECTIVE = "selective"  # Korthikanti et al. 2022 sec. 5: recompute attention core only
    FULL = "full"  # keep each layer's input, recompute the whole layer in backward
    # torchtitan's per-op selective checkpointing (``selective_ac_option = "op"``): keep the
    # outputs of attention and of every other nn.Linear of a block, recompute the rest
    # (ops/training.py ``per_op_split``)
    PER_OP = "per-op"
    # DeepSeek-V3's (arXiv:2412.19437 sec. 3.2.3 and 3.3.4): recompute every RMSNorm and MLA
    # up-projection and the MoE SwiGLU's output, keep the rest (ops/training.py
    # ``norm_up_split``)
    NORM_UP = "norm-up"


class Finetune(StrEnum):
    """Which weights a fine-tune trains."""

    FULL = "full"  # every weight, as in pre-training
    LORA = "lora"  # frozen base + low-rank adapters (Hu et al. 2021, LoRA, sec. 4.1)
    # frozen base stored in 4-bit NormalFloat with double quantization, dequantized to 16 bits
    # for each matmul, adapters in 16 bits (Dettmers et al. 2023, QLoRA, sec. 3)
    QLORA = "qlora"


class LoraTarget(StrEnum):
    """The projections an adapter can sit on (HF PEFT ``target_modules`` names, minus
    ``_proj``)."""

    Q = "q"
    K = "k"
    V = "v"
    O = "o"
    GATE = "gate"
    UP = "up"
    DOWN = "down"


# PEFT ``target_modules="all-linear"``: every linear layer but the output head -- the attention
# and MLP projections, as QLoRA trains them (Dettmers et al. 2023 sec. 4: "LoRA on all linear
# transformer block layers")
ALL_LINEAR = frozenset(LoraTarget)

# NF4 (Dettmers et al. 2023 sec. 3): 4-bit values in blocks of 64 with one fp32 absmax each
# (32/64 = 0.5 bit per parameter); double quantization stores those constants in 8 bits in
# blocks of 256 with fp32 second-level constants: 8/64 + 32/(64*256) = 0.127 bit per parameter
NF4_BITS = 4.0
NF4_CONSTANT_BITS = 32.0 / 64
NF4_DOUBLE_QUANT_CONSTANT_BITS = 8.0 / 64 + 32.0 / (64 * 256)


@dataclass(frozen=True)
class Adapters:
    """Parameter-efficient fine-tuning: the base weights are frozen (no gradients, no optimizer
    states, no weight-gradient GEMMs) and rank-``rank`` adapters B A (Hu et al. 2021 eq. 3) sit
    beside each targeted projection. Defaults are HF PEFT's ``LoraConfig`` (r = 8,
    lora_dropout = 0) with ``all-linear`` targets; QLoRA adds the 4-bit base and bitsandbytes'
    paged optimizer (Dettmers et al. 2023 sec. 3, "Paged Optimizers")."""

    method: Finetune = Finetune.LORA
    rank: int = 8
    targets: frozenset[LoraTarget] = ALL_LINEAR
    double_quant: bool = True  # QLoRA's default (qlora.py --double_quant True)
    paged_optimizer: bool = False

    def __post_init__(self) -> None:
        if self.method is Finetune.FULL:
            raise InputError("adapters need --finetune lora or qlora; a full fine-tune has none")
        _positive("lora rank", self.rank)
        if not self.targets:
            raise InputError("--lora-targets is empty: name at least one of "
                             + ", ".join(t.value for t in LoraTarget))

    @property
    def quantized_base(self) -> bool:
        return self.method is Finetune.QLORA

    @property
    def base_bytes_per_param(self) -> float | None:
        """Bytes per frozen matrix parameter of a 4-bit base (NF4 + its constants); None when
        the base keeps the training dtype."""
        if not self.quantized_base:
            return None
        constants = (NF4_DOUBLE_QUANT_CONSTANT_BITS if self.double_quant
                     else NF4_CONSTANT_BITS)
        return (NF4_BITS + constants) / 8


# The largest batch (sequences) and sequence (tokens) a workload may hold: past any real job,
# so an overflow-sized number is one clear line, not a numpy overflow deep in the engine.
MAX_SIZE = 10**9


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise InputError(f"{name} must be positive, got {value}")
    if value > MAX_SIZE:
        raise InputError(f"{name} {value} is more than {MAX_SIZE:,}")


# Weight formats a GEMM can take as its own input (FP8 W8A8; the 4-bit and microscaling formats
# W4A4/MXFP8 on parts whose tensor cores run them, engine/formats.py)
LOW_PRECISION_GEMM = (DType.FP4, DType.NVFP4, DType.MXFP4, DType.MXFP6, DType.MXFP8)


@dataclass(frozen=True)
class Training:
    """One optimizer step on one device (single-device engine; sharding comes with a Mapping).

    ``batch`` sequences of ``seq_len`` tokens per step (micro-batch x accumulation folded in).
    """

    batch: int = 1
    seq_len: int = 2048
    dtype: DType = DType.BF16  # compute and activation precision
    master_dtype: DType = DType.FP32  # master weights kept by mixed-precision training
    grad_dtype: DType = DType.FP32  # gradient accumulation buffer (Megatron default fp32)
    optimizer: Optimizer = Optimizer.ADAMW
    # Precision of the optimizer's moment tensors (Apex DistributedFusedAdam ``dtype``; NeMo's
    # SFT recipe keeps them in bf16)
    state_dtype: DType = DType.FP32
    # Apex DistributedFusedAdam ``store_param_remainders``: the fp32 master weight is the bf16
    # weight plus the 16 low bits kept by the optimizer, so the master costs 4 - 2 bytes
    master_remainders: bool = False
    # FP8 primary weights (Transformer Engine Float8Tensor parameters, NeMo ``fp8_params``):
    # the weights of the FP8 GEMMs are stored in FP8 instead of 16 bits
    fp8_params: bool = False
    loss: Loss = Loss.FUSED
    # The recompute policy belongs to the Mapping (mapping/plan.py); this is the job's wish
    # when the mapping leaves it open (None: the mapping's, else none). The engine resolves
    # the two once (Mapping.with_recompute) and refuses them when they disagree.
    recompute: Recompute | None = None
    flash_attention: bool = True
    dropout: bool = False  # dropout masks add activation memory (Korthikanti et al. 2022)
    tokens_to_train: float = 0.0  # for time and cost to train; 0 = not asked
    adapters: Adapters | None = None  # LoRA / QLoRA fine-tuning; None: every weight trains
    sparsity: Sparsity = Sparsity.NONE  # 2:4 weights in the forward and dgrad GEMMs
    fp8_scaling: Fp8Scaling = Fp8Scaling.TENSORWISE  # of the FP8 GEMM inputs (dtype fp8)
    # a pass of its own per micro-batch adding the weight gradients up (GradAccumulation)
    grad_accumulation: GradAccumulation = GradAccumulation.FUSED
    # how the pipeline's stage-to-stage sends run (PipeSends): the stack's engine
    pp_sends: PipeSends = PipeSends.BATCHED

    def __post_init__(self) -> None:
        _positive("batch", self.batch)
        _positive("seq_len", self.seq_len)
        if self.fp8_scaling is not Fp8Scaling.TENSORWISE and self.dtype is not DType.FP8:
            raise InputError(f"FP8 scaling {self.fp8_scaling.value} needs FP8 GEMMs: add "
                             f"--dtype fp8, or drop --fp8-scaling (the job is in "
                             f"{self.dtype.value})")
        if not (math.isfinite(self.tokens_to_train) and 0 <= self.tokens_to_train <= 1e18):
            raise InputError(f"tokens to train must be 0 to 1e18, got {self.tokens_to_train}")

    @classmethod
    def fine_tune(cls, batch: int, seq_len: int, adapters: Adapters | None,
                  dtype: DType = DType.BF16, **fields: Any) -> Training:
        """A training job with ``adapters`` (None: every weight trains). QLoRA keeps its
        adapters, and so their gradients, in 16 bits with no fp32 master copy (qlora.py casts
        the LoRA modules to bf16 under --bf16); its paged 32-bit AdamW states stay fp32."""
        if adapters is not None and adapters.quantized_base:
            store = dtype if dtype.bytes >= 2 else DType.BF16
            fields = {"master_dtype": store, "grad_dtype": store, **fields}
        return cls(batch=batch, seq_len=seq_len, dtype=dtype, adapters=adapters, **fields)

    @property
    def finetune(self) -> Finetune:
        return self.adapters.method if self.adapters else Finetune.FULL

    @property
    def tokens_per_step(self) -> float:
        return float(self.batch * self.seq_len)

    @property
    def storage_dtype(self) -> DType:
        """Weights and activations are kept in 16 bits when the GEMMs run in FP8."""
        return DType.BF16 if self.dtype.bytes < 2 else self.dtype


@dataclass(frozen=True)
class Inference:
    """Serving a batch: prefill ``prompt_len`` tokens, then decode ``output_len`` tokens each.

    ``weight_dtype`` INT8/INT4 means weight-only quantization with one ``act_dtype`` scale per
    ``quant_group`` weights (gpt-fast, AWQ/GPTQ style); FP8 means FP8 weights and activations.
    """

    batch: int = 1
    prompt_len: int = 512
    output_len: int = 128
    weight_dtype: DType = DType.BF16
    act_dtype: DType = DType.BF16
    kv_dtype: DType = DType.BF16
    quant_group: int = 128  # weights per scale for weight-only INT8/INT4
    flash_attention: bool = True
    kv_block: int = 16  # paged-KV block size in tokens (vLLM default)
    sparsity: Sparsity = Sparsity.NONE  # 2:4-sparse weights in the layers' GEMMs
    # The routed experts' weights when they differ from the rest (``--moe-weights``): the
    # published FP4 checkpoints of DeepSeek-R1 keep attention and dense GEMMs in FP8 and the
    # experts in NVFP4. None: the experts are stored as ``weight_dtype``.
    moe_weight_dtype: DType | None = None
    # Microscaling/FP4 weight formats the part's matrix units do not run: dequantized to 16
    # bits inside the GEMM (W4A16, Marlin-style) instead of a W4A4 GEMM on FP4 tensor cores.
    # Set by ``engine/formats.py`` from the part's catalog support.
    dequantized_formats: frozenset[DType] = frozenset()

    def __post_init__(self) -> None:
        _positive("batch", self.batch)
        _positive("prompt_len", self.prompt_len)
        if not 0 <= self.output_len <= MAX_SIZE:
            raise InputError(f"output_len must be 0 to {MAX_SIZE:,}, got {self.output_len}")
        _positive("quant_group", self.quant_group)
        _positive("kv_block", self.kv_block)

    @property
    def compute_dtype(self) -> DType:
        """Matmul precision: FP8 weights run FP8 GEMMs, NVFP4/MXFP4 weights W4A4 GEMMs on FP4
        tensor cores; weight-only formats (int8/int4, and microscaling weights on a part
        without the format) dequantize to the activation dtype, so their matmuls run at it."""
        return self.gemm_dtype(self.weight_dtype)

    @property
    def stream_dtype(self) -> DType:
        """The residual stream's format, the one tensor-, data-attention- and pipeline-parallel
        communication carries: 8-bit activations exist only as a GEMM's quantized input, every
        GEMM writes 16 bits and the all-reduce adds those (SGLang's and vLLM's
        ``RowParallelLinear`` reduce their output in the model's 16-bit dtype, TensorRT-LLM's
        ``AllReduce`` the hidden states'), as attention runs in 16 bits under FP8."""
        return self.act_dtype if self.act_dtype.bytes >= 2 else DType.BF16

    @property
    def expert_weight_dtype(self) -> DType:
        return self.moe_weight_dtype or self.weight_dtype

    @property
    def expert_compute_dtype(self) -> DType:
        return self.gemm_dtype(self.expert_weight_dtype)

    def gemm_dtype(self, weights: DType) -> DType:
        """The format a GEMM over weights stored as ``weights`` runs in."""
        if weights is DType.FP8 or (weights in LOW_PRECISION_GEMM
                                    and weights not in self.dequantized_formats):
            return weights
        if weights in LOW_PRECISION_GEMM:
            # dequantized in the kernel to 16 bits (vLLM's Marlin FP4 kernels on Hopper/Ampere)
            return self.stream_dtype
        return self.act_dtype

    def dequantized(self, weights: DType) -> bool:
        """Whether GEMMs over ``weights`` dequantize them (weight-only), rather than run them."""
        return weights.is_integer or weights in self.dequantized_formats

    @property
    def weight_only_quantized(self) -> bool:
        return self.dequantized(self.weight_dtype)
