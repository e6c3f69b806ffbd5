"""Megatron-LM / Megatron-Core: ``pretrain_gpt.py`` arguments for the plan, and its torchrun line.

``megatron_args.sh`` defines bash arrays (one ``--flag value`` per line): ``MEGATRON_ARGS`` carries
the plan (parallel degrees, batch, recompute, ZeRO-like sharding, offload, precision) and the
model shape; ``RUN_ARGS`` holds runnable placeholders (mock data, null tokenizer, a short
iteration count and a learning rate) to replace for a real run. ``launch_megatron.sh`` sources it
and runs torchrun on each node.

ZeRO stages: 1 is Megatron's distributed optimizer (``--use-distributed-optimizer``: optimizer
state sharded over data-parallel ranks, gradients reduce-scattered); 2 and 3 use Megatron-FSDP
(``--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads | optim_grads_params``, which
needs ``--ckpt-format fsdp_dtensor``). Offload maps to ``--optimizer-cpu-offload`` (optimizer state
only; parameters stay on the GPU), which needs ``--use-precision-aware-optimizer``.

LoRA/QLoRA plans: Megatron-LM has no adapters, so its arguments would train every weight. The
export says so (unsupported, and in the args file's header) and adds ``nemo_peft.yaml``, the
NeMo (Megatron-Core) PEFT overrides that do train the adapters (export/nemo.py). NeMo's QLoRA
has no tensor parallelism, so a QLoRA plan with tp > 1 is refused.

Every flag is from megatron/training/arguments.py of NVIDIA/Megatron-LM at commit
``MEGATRON_COMMIT`` (the ``_add_*_args`` group is named in each comment).
"""

from __future__ import annotations

import re
import shlex

from accelmap.export import nemo
from accelmap.export.base import (
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
from accelmap.export.formats.launch import (
    batch_split,
    parse_torchrun,
    shell_block,
    shell_word,
    torchrun_command,
)
from accelmap.export.lora import has_adapters, refuse
from accelmap.mapping.plan import Mapping, ZeroStage, cp_comm, default_schedule
from accelmap.models.schema import Activation, FFNKind, ModelSpec, NormKind, PositionKind
from accelmap.units import DType
from accelmap.workload import Finetune, Recompute

MEGATRON_COMMIT = "000c4ac24f61159c138b0975def722c65245983c"
MEGATRON_URL = (f"https://github.com/NVIDIA/Megatron-LM/blob/{MEGATRON_COMMIT}/"
                "megatron/training/arguments.py")

ARGS_FILE = "megatron_args.sh"
LAUNCH_FILE = "launch_megatron.sh"

# Placeholders that make the args file runnable as a short throughput check; replace them.
SMOKE_TRAIN_ITERS = 20
SMOKE_LR = 1.0e-4

# --data-parallel-sharding-strategy choices (_add_distributed_args) for ZeRO stages 2 and 3;
# Megatron-FSDP's ShardingStrategy docs equate optim_grads with ZeRO-2, optim_grads_params with 3.
FSDP_STRATEGY = {ZeroStage.GRADIENTS: "optim_grads", ZeroStage.PARAMETERS: "optim_grads_params"}

# plan fields pretrain_gpt.py has no argument for (base.Exporter.not_exported)
NOT_EXPORTED = {
    "framework": FRAMEWORK_REASON,
    "schedule": "pretrain_gpt.py runs 1F1B or interleaved 1F1B (--num-virtual-stages-per-"
                "pipeline-rank); zero-bubble (zb-h1) is in sail-sg/zero-bubble-pipeline-"
                "parallelism's fork, not Megatron-LM",
}

Flag = tuple[str, str | None]  # (--flag, value or None for store_true)


def pipeline_layout(n_layers: int, pp: int, vpp: int, first: int | None,
                    last: int | None) -> str:
    """Megatron-Core's ``--pipeline-model-parallel-layout`` for an uneven split whose ends do
    not divide by vpp (megatron/core/transformer/pipeline_parallel_layer_layout.py: one entry
    per virtual stage, vpp-major -- entry a * pp + b is virtual stage a of rank b; 'E' the
    embedding, 't' a decoder layer, 'L' the loss). A stage's layers go to its vpp chunks as
    evenly as whole layers allow, the smaller chunks first on the first stage (beside the
    embedding) and last on the last stage (beside the loss)."""
    middle_stages = pp - bool(first) - bool(last)
    middle = (n_layers - (first or 0) - (last or 0)) // max(middle_stages, 1)
    counts = [first or middle] + [middle] * max(pp - 2, 0) + ([last or middle] if pp > 1 else [])

    def chunks(n: int, rank: int) -> list[int]:
        small, extra = divmod(n, vpp)
        out = [small] * (vpp - extra) + [small + 1] * extra  # smaller first
        return out[::-1] if rank == pp - 1 and rank > 0 else out

    per_rank = [chunks(n, r) for r, n in enumerate(counts)]
    entries = []
    for a in range(vpp):
        for b in range(pp):
            text = "t" * per_rank[b][a]
            if a == 0 and b == 0:
                text = "E" + text
            if a == vpp - 1 and b == pp - 1:
                text += "L"
            entries.append(text)
    return "|".join(entries)


def read_layout(layout: str, pp: int) -> tuple[int, dict[str, int]]:
    """vpp and the first/last stage layers of a layout string (the inverse of
    :func:`pipeline_layout` for what accelmap writes: no multiplications); an end holding as
    many layers as a middle stage is left unset."""
    entries = layout.replace(",", "").split("|")
    vpp = max(len(entries) // max(pp, 1), 1)
    rank = [sum(entries[a * pp + b].count("t") for a in range(vpp)) for b in range(pp)]
    middle = rank[1] if pp > 2 else None
    ends = {"first_stage_layers": rank[0], "last_stage_layers": rank[-1]}
    return vpp, {k: v for k, v in ends.items() if v != middle}


def _offload_flags(m: Mapping, unsupported: list[str]) -> list[Flag]:
    """What goes to host memory: the optimizer state (_add_training_args
    --optimizer-cpu-offload; validate_args requires --use-precision-aware-optimizer,
    _add_experimental_args, with it) and the activations of some layers (--cpu-offloading
    with --cpu-offloading-num-layers: Transformer Engine's offload, Mapping.
    offload_activations); parameters never do."""
    flags: list[Flag] = []
    if m.offloads_optimizer:
        flags += [("--optimizer-cpu-offload", None), ("--use-precision-aware-optimizer", None)]
    if m.offloads_params:
        unsupported.append("offload=True: Megatron offloads only the optimizer state "
                           "(--optimizer-cpu-offload); parameters stay on the GPU")
    if m.offload_activations:
        flags += [("--cpu-offloading", None),
                  ("--cpu-offloading-num-layers", str(m.offload_activations))]
    return flags


def _parallel_flags(job: PlanJob, n_layers: int) -> tuple[list[Flag], list[str]]:
    batch_split(job)  # the global batch must split into dp x micro-batches (validate_args)
    m = job.mapping
    flags: list[Flag] = [
        ("--tensor-model-parallel-size", str(m.tp)),  # _add_distributed_args
        ("--pipeline-model-parallel-size", str(m.pp)),  # _add_distributed_args
        ("--context-parallel-size", str(m.cp)),  # _add_distributed_args
        ("--expert-model-parallel-size", str(m.ep)),  # _add_moe_args
        # _add_distributed_args --cp-comm-type: p2p (default), a2a, allgather or a2a+p2p
        *([("--cp-comm-type", str(m.cp_comm))] if m.cp > 1 and m.cp_comm != "p2p" else []),
    ]
    unsupported: list[str] = []
    m = public_recompute(m, "Megatron-LM", unsupported)
    ends = [v for v in (m.first_stage_layers, m.last_stage_layers) if v]
    if m.interleaved and any(v % m.virtual_stages for v in ends):
        # validate_args/TransformerConfig refuse --decoder-first/last-pipeline-num-layers that
        # do not divide by vpp; the layout gives any layers per virtual stage (and sets vpp;
        # no other vpp flag may come with it)
        flags.append(("--pipeline-model-parallel-layout", pipeline_layout(
            n_layers, m.pp, m.virtual_stages, m.first_stage_layers, m.last_stage_layers)))
        ends = []
    elif m.interleaved:
        # _add_distributed_args: stages per rank directly (validate_args turns it into
        # virtual_pipeline_model_parallel_size); the other spelling counts layers per stage.
        flags.append(("--num-virtual-stages-per-pipeline-rank", str(m.virtual_stages)))
    # _add_distributed_args: uneven pipeline splits (Mapping.stage_layers)
    for value, flag in ((m.first_stage_layers, "--decoder-first-pipeline-num-layers"),
                        (m.last_stage_layers, "--decoder-last-pipeline-num-layers")):
        if value and ends:
            flags.append((flag, str(value)))
    for on, flag in ((m.embedding_in_split, "--account-for-embedding-in-pipeline-split"),
                     (m.loss_in_split, "--account-for-loss-in-pipeline-split")):
        if on:
            flags.append((flag, None))
    if m.tp > 1 and m.sequence_parallel:
        flags.append(("--sequence-parallel", None))  # _add_training_args
    if m.tp_comm_overlap:
        # _add_training_args --tp-comm-overlap (Transformer Engine userbuffers); validate_args
        # asserts sequence parallelism with it
        if m.tp > 1 and m.sequence_parallel:
            flags.append(("--tp-comm-overlap", None))
        else:
            unsupported.append(f"tp_comm_overlap=True: Megatron overlaps TP communication only "
                               f"with tp > 1 and sequence parallelism (tp={m.tp})")
    if m.zero is ZeroStage.OPTIMIZER:
        flags.append(("--use-distributed-optimizer", None))  # _add_distributed_args
    elif m.zero in FSDP_STRATEGY:
        flags += [("--use-megatron-fsdp", None),  # _add_distributed_args
                  ("--data-parallel-sharding-strategy", FSDP_STRATEGY[m.zero]),
                  # _add_checkpointing_args; validate_args: "Megatron FSDP only supports
                  # fsdp_dtensor checkpoint format"
                  ("--ckpt-format", "fsdp_dtensor")]
    if m.policy is Recompute.PER_OP:
        unsupported.append("recompute=per-op: torchtitan's per-op checkpointing is no Megatron "
                           "option (selective recomputes the attention core, full each layer); "
                           "exported as selective")
    if m.policy is not Recompute.NONE:  # _add_training_args
        flags.append(("--recompute-granularity",
                      "selective" if m.policy is Recompute.PER_OP else m.policy.value))
    if m.recompute is Recompute.FULL:
        # _add_training_args: recompute each layer's input (uniform chunks of one layer)
        flags += [("--recompute-method", "uniform"), ("--recompute-num-layers", "1")]
    flags += _offload_flags(m, unsupported)
    flags += [
        ("--micro-batch-size", str(m.micro_batch)),  # _add_training_args
        ("--global-batch-size", str(job.global_batch)),  # _add_training_args
        ("--seq-length", str(job.seq_len)),  # _add_data_args
    ]
    # _add_mixed_precision_args --bf16/--fp16; _add_transformer_engine_args --fp8-format
    # (e4m3|hybrid; hybrid = E4M3 forward, E5M2 gradients).
    flags.append(("--fp16", None) if job.dtype is DType.FP16 else ("--bf16", None))
    if job.dtype is DType.FP8:
        flags.append(("--fp8-format", "hybrid"))
    return flags, unsupported


def _moe_layer_freq(spec: ModelSpec) -> str:
    """--moe-layer-freq: an int N (every N-th layer) or a list pattern (1 = MoE layer)."""
    moe = spec.moe
    assert moe is not None
    if moe.dense_layers == 0:
        return str(moe.layer_frequency)
    return "[" + ",".join("1" if spec.is_moe_layer(i) else "0"
                          for i in range(spec.n_layers)) + "]"


def _model_flags(job: PlanJob, spec: ModelSpec) -> tuple[list[Flag], list[str]]:
    flags: list[Flag] = [  # _add_network_size_args unless noted
        ("--num-layers", str(spec.n_layers)),
        ("--hidden-size", str(spec.d_model)),
        ("--ffn-hidden-size", str(spec.ffn_dim)),
        ("--num-attention-heads", str(spec.n_heads)),
        # validate_args asserts max_position_embeddings >= seq_length
        ("--max-position-embeddings", str(max(spec.max_seq_len, job.seq_len))),
        ("--normalization", "RMSNorm" if spec.norm == NormKind.RMSNORM else "LayerNorm"),
    ]
    notes: list[str] = []
    if spec.mla is not None:
        mla = spec.mla
        flags.append(("--multi-latent-attention", None))
        # _add_mla_args: q_head_dim = qk_head_dim + qk_pos_emb_head_dim
        if mla.q_lora_rank is not None:
            flags.append(("--q-lora-rank", str(mla.q_lora_rank)))
        flags += [("--kv-lora-rank", str(mla.kv_lora_rank)),
                  ("--qk-head-dim", str(mla.qk_nope_head_dim)),
                  ("--qk-pos-emb-head-dim", str(mla.qk_rope_head_dim)),
                  ("--v-head-dim", str(mla.v_head_dim))]
    else:
        if spec.head_size != spec.d_model // spec.n_heads:
            flags.append(("--kv-channels", str(spec.head_size)))
        if spec.kv_heads < spec.n_heads:
            flags += [("--group-query-attention", None),
                      ("--num-query-groups", str(spec.kv_heads))]
    if spec.ffn_kind == FFNKind.GATED:
        if spec.activation == Activation.SILU:
            flags.append(("--swiglu", None))
        else:
            notes.append(f"model={spec.id}: gated {spec.activation.value} FFN has no "
                         "pretrain_gpt.py flag (only --swiglu); exported with --swiglu")
            flags.append(("--swiglu", None))
    elif spec.activation not in (Activation.GELU, Activation.GELU_TANH):
        notes.append(f"model={spec.id}: a plain {spec.activation.value} FFN has no "
                     "pretrain_gpt.py flag (the default is GeLU); exported with GeLU")
    if spec.parallel_block:
        notes.append(f"model={spec.id}: parallel attention + MLP blocks have no "
                     "pretrain_gpt.py flag; exported as sequential blocks")
    position = {PositionKind.ROPE: "rope", PositionKind.LEARNED: "learned_absolute",
                PositionKind.NONE: "none"}.get(spec.position)
    if position is None:
        notes.append(f"model={spec.id}: {spec.position.value} positions have no "
                     "--position-embedding-type choice; exported without positions")
        position = "none"
    flags.append(("--position-embedding-type", position))
    if spec.position == PositionKind.ROPE and spec.rope_fraction < 1:
        flags.append(("--rotary-percent", str(spec.rope_fraction)))
    if not spec.tied_embeddings:
        flags.append(("--untie-embeddings-and-output-weights", None))
    if not (spec.qkv_bias or spec.attn_out_bias or spec.mlp_bias):
        flags.append(("--disable-bias-linear", None))  # _add_training_args
    elif spec.qkv_bias and not (spec.attn_out_bias or spec.mlp_bias):
        flags += [("--disable-bias-linear", None), ("--add-qkv-bias", None)]
    if spec.qk_norm:
        flags.append(("--qk-layernorm", None))  # _add_vision_args (generic q/k norm)
    if spec.moe is not None:
        moe = spec.moe
        flags += [("--num-experts", str(moe.num_experts)),  # _add_moe_args
                  ("--moe-router-topk", str(moe.top_k)),
                  ("--moe-ffn-hidden-size", str(moe.expert_ffn_dim)),
                  ("--moe-layer-freq", _moe_layer_freq(spec))]
        if moe.num_shared_experts:
            # "num_shared_experts * ffn_size_of_each_shared_expert"
            flags.append(("--moe-shared-expert-intermediate-size",
                          str(moe.num_shared_experts * moe.shared_ffn)))
        if moe.router_bias:
            flags.append(("--moe-router-enable-expert-bias", None))
        if job.mapping.ep > 1:
            # help text: "We recommend using 'alltoall' when applying expert parallelism"
            flags.append(("--moe-token-dispatcher-type", "alltoall"))
        if moe.shared_expert_gate:
            notes.append(f"model={spec.id}: the shared-expert sigmoid gate has no "
                         "pretrain_gpt.py flag at this version")
    if spec.sliding_window is not None:
        notes.append(f"model={spec.id}: sliding-window attention is not exported; set "
                     "--window-size and --window-attn-skip-freq by hand")
    return flags, notes


def _run_flags(spec: ModelSpec) -> list[Flag]:
    return [("--mock-data", None),  # _add_data_args
            ("--tokenizer-type", "NullTokenizer"),  # _add_tokenizer_args
            ("--vocab-size", str(spec.vocab_size)),  # _add_tokenizer_args
            ("--train-iters", str(SMOKE_TRAIN_ITERS)),  # _add_training_args
            ("--lr", str(SMOKE_LR))]  # _add_learning_rate_args


def _array(name: str, flags: list[Flag]) -> str:
    lines = [f"{name}=("]
    for flag, value in flags:
        lines.append(f"    {flag}" + ("" if value is None else f" {shell_word(value)}"))
    return "\n".join(lines) + "\n)\n"


def export(job: PlanJob, spec: ModelSpec) -> ExportResult:
    adapters = has_adapters(job)
    if adapters and job.finetune is Finetune.QLORA and job.mapping.tp > 1:
        refuse(job, "Megatron-LM/NeMo",
               f"Megatron-LM has no adapters and NeMo's QLoRA NF4 layers do not support "
               f"tensor parallelism (tp={job.mapping.tp}; NeMo adapters/qlora.py)",
               "deepspeed or torchtune, or plan with tp=1,")
    plan_flags, unsupported = _parallel_flags(job, spec.n_layers)
    model_flags, notes = _model_flags(job, spec)
    warning = ("# finetune=" + job.finetune.value + ": Megatron-LM has no LoRA; these arguments "
               f"train EVERY weight.\n# Train the adapters with NeMo: see {nemo.NEMO_FILE}.\n"
               if adapters else "")
    args = (
        f"# Megatron-LM pretrain_gpt.py arguments: {job.model} on {job.nodes} x "
        f"{job.devices_per_node} {job.accelerator} (accelmap export megatron)\n"
        + warning +
        f"# flags: NVIDIA/Megatron-LM megatron/training/arguments.py @ {MEGATRON_COMMIT[:12]}\n"
        "# Rotary base and RoPE scaling are not in accelmap's ModelSpec: add --rotary-base /\n"
        "# --use-rope-scaling to match a checkpoint.\n"
        + _array("MEGATRON_ARGS", plan_flags + model_flags)
        + "# Placeholders for a short run on mock data: replace with your data, tokenizer,\n"
        "# schedule and optimizer settings.\n"
        + _array("RUN_ARGS", _run_flags(spec))
    )
    m = job.mapping
    model_parallel = m.tp > 1 or m.cp > 1
    # validate_args (before Blackwell): TP/CP without FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS=1;
    # FSDP asserts it is not 1.
    env = ("export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
           if model_parallel and m.zero not in FSDP_STRATEGY else "")
    command = torchrun_command(job, ["pretrain_gpt.py", '${MEGATRON_ARGS[@]}',
                                     '${RUN_ARGS[@]}'])
    launch_script = (
        "#!/bin/bash\n"
        f"# Run on each of the {job.nodes} node(s), e.g. srun --ntasks-per-node=1 bash "
        f"{LAUNCH_FILE}, from the Megatron-LM checkout.\n"
        "set -euo pipefail\n"
        ': "${MASTER_ADDR:?set MASTER_ADDR to the address of node 0}"\n'
        f'source "$(dirname "$0")/{ARGS_FILE}"\n'
        + env
        + shell_block(command) + "\n"
    )
    launch = f"source {ARGS_FILE} && " + " ".join(shell_word(w) for w in command)
    files = {ARGS_FILE: args, LAUNCH_FILE: launch_script}
    adapter_notes: list[str] = []
    if adapters:
        files[nemo.NEMO_FILE] = nemo.text(job, spec)
        unsupported = nemo.unsupported(job, spec) + unsupported
        adapter_notes = nemo.notes(job)
    return ExportResult(files=files, launch=launch, unsupported=unsupported + notes,
                        notes=adapter_notes)


def parse_args_file(text: str) -> dict[str, str | None]:
    """Every ``--flag [value]`` in the bash arrays of ``megatron_args.sh``."""
    words: list[str] = []
    for body in re.findall(r"^\w+=\((.*?)^\)", text, re.MULTILINE | re.DOTALL):
        words += shlex.split(body, comments=True)
    flags: dict[str, str | None] = {}
    for i, word in enumerate(words):
        if word.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            flags[word] = None if nxt is None or nxt.startswith("--") else nxt
    return flags


def read_back(files: dict[str, str]) -> ReadBack:
    flags = parse_args_file(files[ARGS_FILE])
    cluster = parse_torchrun(files[LAUNCH_FILE])

    def degree(flag: str) -> int:
        return int(flags.get(flag) or 1)

    tp, pp, cp = (degree(f"--{k}-parallel-size") for k in ("tensor-model", "pipeline-model",
                                                              "context"))
    if "--use-megatron-fsdp" in flags:
        by_strategy = {v: k for k, v in FSDP_STRATEGY.items()}
        zero = by_strategy[str(flags["--data-parallel-sharding-strategy"])]
    else:
        zero = (ZeroStage.OPTIMIZER if "--use-distributed-optimizer" in flags
                else ZeroStage.NONE)
    # dp fills the torchrun world, as Megatron derives its data-parallel size
    world = cluster["nodes"] * cluster["gpus_per_node"]
    mapping = training_mapping(
        dp=Mapping.for_world(world, tp=tp, pp=pp, cp=cp).dp, tp=tp, pp=pp, cp=cp,
        ep=degree("--expert-model-parallel-size"), zero=zero,
        micro_batch=int(flags["--micro-batch-size"] or 0),
        virtual_stages=degree("--num-virtual-stages-per-pipeline-rank"),
        recompute=flags.get("--recompute-granularity") or Recompute.NONE,
        offload_optimizer="--optimizer-cpu-offload" in flags, offload_params=False,
        sequence_parallel="--sequence-parallel" in flags or tp == 1)
    split = {key: int(str(flags[flag])) for key, flag in (
        ("first_stage_layers", "--decoder-first-pipeline-num-layers"),
        ("last_stage_layers", "--decoder-last-pipeline-num-layers")) if flag in flags}
    split |= {key: True for key, flag in (
        ("embedding_in_split", "--account-for-embedding-in-pipeline-split"),
        ("loss_in_split", "--account-for-loss-in-pipeline-split")) if flag in flags}
    layout = flags.get("--pipeline-model-parallel-layout")
    if layout:
        vpp, ends = read_layout(str(layout), pp)
        split |= ends
        mapping = mapping.with_(virtual_stages=vpp, schedule=default_schedule(vpp))
    if "--tp-comm-overlap" in flags:
        split["tp_comm_overlap"] = True
    if split:
        mapping = mapping.with_(**split)
    if flags.get("--cp-comm-type"):
        mapping = mapping.with_(cp_comm=cp_comm(str(flags["--cp-comm-type"])))
    if "--cpu-offloading" in flags:
        mapping = mapping.with_(offload_activations=int(str(flags.get(
            "--cpu-offloading-num-layers") or 0)))
    finetune, rank, targets = nemo.read_back(files)
    return ReadBack(mapping, nodes=cluster["nodes"], devices_per_node=cluster["gpus_per_node"],
                    finetune=finetune, lora_rank=rank, lora_targets=targets)


EXPORTER = register(Exporter(
    name="megatron",
    framework="Megatron-LM",
    version=f"Megatron-LM @ {MEGATRON_COMMIT[:12]} (megatron/training/arguments.py)",
    url=MEGATRON_URL,
    kinds=(PlanKind.TRAIN,),
    not_exported=NOT_EXPORTED,
    export=export,
    read_back=read_back,
))
