"""Where training software stacks lay memory out differently, as named behaviour (DESIGN: a
framework profile, never a per-case constant). Every field cites the code that does it.

- **Megatron-Core / NeMo with Transformer Engine** (``Framework.MEGATRON``):
  - FP8 GEMMs keep, per weight, an FP8 copy and its FP8 transpose from the first micro-batch of
    a step to the last (TE ``module/linear.py`` ``get_fp8_workspace(cache_name="weight",
    with_transpose=...)`` L1004-1015 and ``module/base.py`` L806 at TE 8e039fd (1.9.0.dev0);
    Megatron-Core passes ``is_first_microbatch`` so the cache is kept:
    ``transformer/custom_layers/transformer_engine.py`` L167-171 at 96d6aba, with
    ``disable_parameter_transpose_cache = False`` by default, ``transformer_config.py`` L277):
    2 bytes per GEMM weight; with FP8 primary weights the weight itself is the FP8 copy and
    only its transpose is cached, 1 byte;
  - an FP8 GEMM keeps the FP8 cast of its input for the weight gradient (TE
    ``module/linear.py`` L299-311 ``saved_inputmat``; ``module/layernorm_linear.py`` L137 makes
    ``ln_out`` FP8 and L317-326 saves it);
  - a pipeline stage sends its output split over the tensor-parallel group: each rank sends
    1/t of it and the next stage all-gathers it over NVLink (Narayanan et al. 2021 sec. 4.1,
    "scatter/gather communication optimization"; Megatron-LM ``--no-scatter-gather-tensors-in-
    pipeline`` turns it off), and under sequence parallelism the output is already the rank's
    1/t sequence shard (Megatron-Core ``p2p_communication.py``: the tensor shape is
    (seq_length / tp, micro_batch, hidden)); under an interleaved schedule the sends run
    beside the compute (``megatron/training/arguments.py``: ``--no-overlap-p2p-communication``
    is ``store_false``, so overlap_p2p_comm is on unless the schedule is not interleaved);
- **PyTorch FSDP / torchtitan / llm-foundry** (``Framework.FSDP``, ``TORCH_COMPILE``, eager):
  - ZeRO-3 through FSDP mixed precision keeps one sharded fp32 parameter that is also the
    optimizer's: the 16-bit parameters exist only gathered (PyTorch ``fully_shard``
    ``MixedPrecisionPolicy(param_dtype=bf16)``: the sharded parameter keeps its dtype;
    torchtitan ``parallelisms/parallelize_llama.py`` L320 at 9dec370);
  - under pipelining torchtitan does not reshard after forward, so a stage keeps its layers'
    16-bit parameters gathered for the whole step (``parallelize_llama.py`` L325-331);
  - torchao ``Float8Linear`` scales dynamically (``Float8LinearConfig`` tensorwise/rowwise:
    the scale is the current tensor's amax; torchtitan's ``float8`` converter keeps that
    default), where Transformer Engine's default ``DelayedScaling`` takes it from an amax
    history: torchao's casts are kernels of their own (``fp8_dynamic_scaling``; cost, not memory);
  - FP8 (torchao ``Float8Linear``) adds no persistent copy: it casts the weights in every forward
    (torchao ``float8/float8_linear.py`` L355-385 at eab345c). Its saved FP8 input and weight
    transpose are not counted either: the published bf16/Float8 pairs measured the same peak
    (torchtitan Llama 3.1 8B: 77.0 vs 76.8 GiB on 8 GPUs, 62.0 vs 61.8 GiB on 128; memory.csv
    Y0090/Y0091, Y0097/Y0098).

The loss's memory depends on the training script rather than the stack (torchtitan and
llm-foundry both run on FSDP): ``workload.Loss``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelmap.cost.framework import Framework
from accelmap.units import DType
from accelmap.workload import Training


@dataclass(frozen=True)
class MemoryStack:
    """How one software stack lays out training memory where stacks differ."""

    name: str
    fp8_weight_cache: bool  # FP8 copies of the GEMM weights kept across micro-batches (TE)
    fp8_saved_input: DType | None  # what an FP8 GEMM keeps of its input; None = 16 bits
    fsdp_params: bool  # ZeRO-3 keeps one fp32 shard that is also the master (FSDP)
    gather_stage_under_pp: bool  # ZeRO-3 with pp > 1 keeps the stage's layers gathered
    # stage-to-stage sends split over the tp group (Megatron's scatter/gather), else each tp
    # rank sends the whole activation
    p2p_over_tp: bool = False
    # under an interleaved schedule the sends run beside the compute (Megatron-Core's
    # --overlap-p2p-communication, on by default; engine.train.OverlapPolicy.pp_p2p)
    p2p_overlap: bool = False
    # FP8 scales from the tensor being cast (ops.op.Precision.fp8_dynamic_scaling): the cast is
    # a kernel of its own, not folded into its producer
    fp8_dynamic_scaling: bool = False


MEGATRON = MemoryStack("megatron-core + transformer engine", fp8_weight_cache=True,
                       fp8_saved_input=DType.FP8, fsdp_params=False,
                       gather_stage_under_pp=False, p2p_over_tp=True, p2p_overlap=True)
PYTORCH = MemoryStack("pytorch fsdp / torchtitan / torchao float8", fp8_weight_cache=False,
                      fp8_saved_input=None, fsdp_params=True, gather_stage_under_pp=True,
                      fp8_dynamic_scaling=True)


# JAX / MaxText on TPUs: FSDP shards as PyTorch's does, but under pipeline parallelism it
# gathers a layer's weights for each micro-batch's pass unless told otherwise (MaxText
# base.yml / configs ``pipeline_fsdp_ag_once: False``, the default; True "all-gather[s] FSDP
# weights once before pipeline execution" at the cost of unsharded weights and gradients)
XLA = replace(PYTORCH, name="jax / maxtext (xla)", gather_stage_under_pp=False)


def memory_stack(framework: Framework | str) -> MemoryStack:
    """The memory layout of a training framework profile (serving profiles: PyTorch's)."""
    fw = Framework(framework)
    return MEGATRON if fw is Framework.MEGATRON else XLA if fw is Framework.XLA else PYTORCH


@dataclass(frozen=True)
class FP8Weights:
    """Bytes per GEMM weight that FP8 training adds (``cache``) and what the weight itself is
    stored in (``storage``; None = the 16-bit storage dtype)."""

    cache: float = 0.0
    storage: float | None = None


def fp8_weights(wl: Training, stack: MemoryStack) -> FP8Weights:
    """Transformer Engine: an FP8 copy and an FP8 transpose of every 16-bit GEMM weight, or
    the transpose alone of an FP8 primary weight; nothing outside FP8 training."""
    if wl.dtype is not DType.FP8 or not stack.fp8_weight_cache:
        return FP8Weights()
    fp8 = DType.FP8.bytes
    if wl.fp8_params:
        return FP8Weights(cache=fp8, storage=fp8)
    return FP8Weights(cache=2 * fp8)
