"""Rules a mapping must satisfy, one function each, with the reason it exists.

A broken rule is a result (``Violation``: rule name + sentence), never an exception. References:
Megatron-LM ``megatron/training/arguments.py`` (validate_args) for the training rules, and for
the pipeline split and the schedule ``megatron/core/transformer/transformer_config.py``
(TransformerConfig.__post_init__), ``megatron/core/transformer/transformer_block.py``
(get_num_layers_to_build) and ``megatron/core/pipeline_parallel/schedules.py``
(NVIDIA/Megatron-LM, read at commit d98e8a64); vLLM
``vllm/config.py`` (verify_with_parallel_config) for serving; Korthikanti et al. 2022 and the
Megatron-Core context-parallel docs for sequence and context parallelism.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelmap.hardware.cluster import Cluster
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec


@dataclass(frozen=True)
class Violation:
    rule: str
    sentence: str


@dataclass(frozen=True)
class TrainingJob:
    """What a training mapping is checked against."""

    spec: ModelSpec
    cluster: Cluster
    global_batch: int  # sequences per optimizer step
    seq_len: int


@dataclass(frozen=True)
class Rule:
    """One rule: an array-friendly predicate (``bad``: True where the mapping breaks it) and the
    sentence that says why (for one mapping). ``m`` is a Mapping, or any object with the same
    degrees held in numpy arrays (the planner's candidate table)."""

    name: str
    bad: Callable[[TrainingJob, Any], Any]
    sentence: Callable[[TrainingJob, Any], str]


def _kv_bad(job: TrainingJob, m: Any) -> Any:
    tp = np.asarray(m.tp)
    kv = job.spec.kv_heads
    if job.spec.mla is not None:
        return np.zeros_like(tp, dtype=bool)
    return (kv % tp != 0) & (tp % kv != 0)


def _ffn_bad(job: TrainingJob, m: Any) -> Any:
    s = job.spec
    bad = s.ffn_dim % np.asarray(m.tp) != 0
    if s.moe:
        bad = bad | (s.moe.expert_ffn_dim % np.asarray(_expert_tp(m)) != 0)
    return bad


def _expert_tp(m: Any) -> Any:
    """Tensor parallelism inside an expert: the mapping's etp, tp when left out."""
    etp = getattr(m, "etp", None)
    return np.asarray(m.tp) if etp is None else np.asarray(etp)


def _experts_bad(job: TrainingJob, m: Any) -> Any:
    ep = np.asarray(m.ep)
    moe = job.spec.moe
    if moe is None:
        return ep > 1
    # Megatron-Core: etp x ep x edp = tp x cp x dp ranks of a stage, so etp x ep divides
    # tp x dp x cp (with etp = tp: ep divides dp x cp, Mapping.grad_group), and etp <= tp x cp x dp
    etp = _expert_tp(m)
    ranks = np.asarray(m.tp) * np.asarray(m.grad_group)
    return ((ep > 1) & (moe.num_experts % ep != 0)) | (ranks % (ep * etp) != 0)


def _batch_bad(job: TrainingJob, m: Any) -> Any:
    per_step = np.asarray(m.dp) * np.asarray(m.micro_batch)
    bad = job.global_batch % per_step != 0
    micro = job.global_batch // np.maximum(per_step, 1)
    # Megatron (schedules.py, forward_backward_pipelining_with_interleaving): micro-batches run
    # in groups of microbatch_group_size_per_vp_stage (default pp), which must lie in [pp, m],
    # and the last group may not be shorter than pp: m is a multiple of pp
    return bad | ((np.asarray(m.virtual_stages) > 1) & (micro % np.asarray(m.pp) != 0))


def _split_args(m: Any) -> tuple[Any, Any, Any, Any]:
    """First/last stage layers (0 = not set) and the embedding/loss flags, as arrays; for the
    planner's tables and for objects that predate the split fields alike."""
    first, last = (np.asarray(0.0 if getattr(m, k, None) is None else getattr(m, k),
                              dtype=float) for k in ("first_stage_layers", "last_stage_layers"))
    emb, loss = (np.asarray(getattr(m, k, False), dtype=float)
                 for k in ("embedding_in_split", "loss_in_split"))
    return first, last, emb, loss


def _split_conflict_bad(job: TrainingJob, m: Any) -> Any:
    # TransformerConfig.__post_init__: "num_layers_in_first_pipeline_stage and
    # num_layers_in_last_pipeline_stage cannot be set at the same time with
    # account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split"
    first, last, emb, loss = _split_args(m)
    return ((first > 0) | (last > 0)) & ((emb > 0) | (loss > 0))


def _split_bad(job: TrainingJob, m: Any) -> Any:
    """Megatron's checks on the layers per stage. Uneven (first and/or last set;
    TransformerConfig.__post_init__, "Uneven PP"): the L - first - last layers left must be
    none exactly when no middle stage is left, and divide evenly over the middle stages (more
    layers on the ends than the model has is refused here too; Megatron would build a stage
    with a negative count). Even (arguments.py validate_args; get_num_layers_to_build): pp
    divides L, plus one for each of the embedding and the loss counted as a layer."""
    L = job.spec.n_layers
    pp = np.asarray(m.pp, dtype=float)
    first, last, emb, loss = _split_args(m)
    middle_stages = pp - (first > 0) - (last > 0)
    left = L - first - last
    uneven_bad = ((middle_stages < 0) | (left < 0) | ((middle_stages == 0) != (left == 0))
                  | ((middle_stages > 0) & (left % np.maximum(middle_stages, 1) != 0)))
    even_bad = (L + emb + loss) % pp != 0
    return np.where((first > 0) | (last > 0), uneven_bad, even_bad)


def _split_sentence(job: TrainingJob, m: Any) -> str:
    L = job.spec.n_layers
    first, last, emb, loss = (float(x) for x in _split_args(m))
    if first or last:
        middle = m.pp - (first > 0) - (last > 0)
        return (f"{int(first) or '-'} layers on the first stage and {int(last) or '-'} on the "
                f"last leave {L - int(first + last)} for {middle} middle stage(s) of pp={m.pp}: "
                "Megatron-LM needs them to split evenly (none left exactly when no middle "
                "stage is); change --first-stage-layers/--last-stage-layers "
                "(first_stage_layers, last_stage_layers) or --pp")
    counted = L + int(emb + loss)
    extra = " (with the embedding/loss counted as layers)" if emb or loss else ""
    return (f"{counted} layers{extra} do not split evenly over pp={m.pp} stages: Megatron-LM "
            "asserts that pp divides them; give the first/last stage's layers "
            "(--first-stage-layers/--last-stage-layers; Megatron's "
            "--decoder-first/last-pipeline-num-layers) or count the embedding and loss as "
            "layers (--embedding-in-split/--loss-in-split; Megatron's "
            "--account-for-embedding/loss-in-pipeline-split)")


def _chunks(job: TrainingJob, m: Any) -> tuple[Any, Any, Any, Any, Any]:
    """vpp, pp, whether the split is uneven, the layers of each middle stage, and how many
    middle stages there are (the even split's layers per stage when not uneven)."""
    v = np.asarray(m.virtual_stages, dtype=float)
    pp = np.asarray(m.pp, dtype=float)
    first, last, emb, loss = _split_args(m)
    L = job.spec.n_layers
    uneven = (first > 0) | (last > 0)
    middle_stages = pp - (first > 0) - (last > 0)
    middle = np.where(uneven, (L - first - last) / np.maximum(middle_stages, 1),
                      (L + emb + loss) / np.maximum(pp, 1))
    return v, pp, uneven, middle, np.where(uneven, middle_stages, pp)


def _virtual_bad(job: TrainingJob, m: Any) -> Any:
    """Interleaving needs pp > 1 (arguments.py: pp > 1 with --overlap-p2p-communication, its
    default; pp > 2 without) and whole layers in every model chunk of the stages that split
    evenly: the middle stages' layers divide by vpp (TransformerConfig.__post_init__, "Uneven
    PP"), and with an even split every stage's (L + embedding + loss) / pp (get_num_layers_to_
    build; the account-for-embedding/loss branch). First/last stages whose layers do not divide
    by vpp (Llama 3 405B: 7 on each end of pp = 16, interleaved; Dubey et al. 2024 sec. 3.3.2)
    are what Megatron-Core's ``--pipeline-model-parallel-layout`` expresses
    (transformer_config.py: any layer count per virtual stage, validate_layer_layout checks only
    the totals), so they are accepted: their chunks hold ceil or floor of layers / vpp, never
    more than a middle chunk when the ends hold fewer layers than the middle (the exporter
    writes the layout then: export/formats/megatron.py)."""
    v, pp, _uneven, middle, middle_stages = _chunks(job, m)
    chunks_bad = (middle_stages > 0) & (middle % v != 0)
    return (v > 1) & ((pp <= 1) | chunks_bad)


def _virtual_sentence(job: TrainingJob, m: Any) -> str:
    _v, pp, uneven, middle, _ = (np.asarray(x).item() for x in _chunks(job, m))
    if pp <= 1:
        return (f"vpp={m.virtual_stages} needs a pipeline: virtual stages split each of pp > 1 "
                "stages into model chunks (set --pp)")
    which = "each middle stage" if uneven else "each stage"
    fits = [d for d in range(2, int(middle) + 1) if middle == int(middle) and middle % d == 0]
    hint = (f"vpp of {', '.join(map(str, fits))} would" if fits else "no vpp > 1 would")
    return (f"{which} of pp={m.pp} holds {middle:g} layers, which do not split into "
            f"vpp={m.virtual_stages} model chunks of whole layers (Megatron-LM: the layers on "
            f"each pipeline rank must be divisible by the virtual pipeline degree); {hint}; "
            "uneven ends are given with --first-stage-layers/--last-stage-layers "
            "(--decoder-first/last-pipeline-num-layers, or Megatron-Core's "
            "--pipeline-model-parallel-layout when they do not divide by vpp) or "
            "--embedding-in-split/--loss-in-split (--account-for-embedding/loss-in-pipeline-"
            "split)")


def _schedule_bad(job: TrainingJob, m: Any) -> Any:
    """A schedule flag changes the result or is refused: interleaving (vpp > 1) is the
    interleaved 1F1B schedule (Narayanan et al. 2021 sec. 2.2.2; Megatron-LM runs
    forward_backward_pipelining_with_interleaving exactly when vpp is set, schedules.py
    get_forward_backward_func); GPipe, 1F1B, ZB-H1 and DualPipe place one chunk per device
    (DualPipe one of each model copy; its own needs: ``_dualpipe_bad``). And
    interleaved-1f1b with one chunk per device is plain 1F1B (arguments.py sets vpp = 1 to
    None), so it is refused rather than silently the same."""
    names = np.asarray(getattr(m, "schedule", "1f1b")).astype(str)
    interleaved = names == "interleaved-1f1b"
    v = np.asarray(m.virtual_stages)
    return ((v > 1) & ~interleaved) | ((v <= 1) & interleaved) | (
        (names == "dualpipe") & _dualpipe_bad(job, m))


def _dualpipe_bad(job: TrainingJob, m: Any) -> Any:
    """DualPipe feeds half the micro-batches from each end: it needs an even pp >= 2 and an
    even number of micro-batches, at least 2 pp (deepseek-ai/DualPipe ``dualpipe.py``
    ``step``: ``num_ranks % 2 == 0``, ``num_chunks % 2 == 0 and num_chunks >= num_ranks * 2``)."""
    pp = np.asarray(m.pp)
    micro = job.global_batch / (np.asarray(m.dp) * np.asarray(m.micro_batch))
    return (pp < 2) | (pp % 2 != 0) | (micro % 2 != 0) | (micro < 2 * pp)


def _schedule_sentence(job: TrainingJob, m: Any) -> str:
    if str(m.schedule) == "dualpipe":
        micro = job.global_batch / (m.dp * m.micro_batch)
        return (f"dualpipe feeds half the micro-batches from each end of the pipeline: it needs "
                f"an even pp (pp={m.pp}) and an even number of micro-batches, at least 2 x pp "
                f"(global batch / (dp x micro-batch) = {micro:g}); change --pp, --batch or "
                "--micro-batch, or use --schedule zb-h1")
    if m.virtual_stages > 1:
        return (f"vpp={m.virtual_stages}: interleaving needs the interleaved-1f1b schedule, "
                f"not {m.schedule!s} (which runs one model chunk per device); use --schedule "
                "interleaved-1f1b, or --vpp 1")
    return ("interleaved-1f1b needs vpp >= 2 model chunks per device; with one it is plain "
            "1F1B (use --schedule 1f1b)")


TRAINING_RULES: tuple[Rule, ...] = (
    Rule("world_size",
         lambda j, m: (np.asarray(m.world) != j.cluster.devices)
         | (np.asarray(m.dp) % 1 != 0) | (np.asarray(m.dp) < 1),
         lambda j, m: f"dp x tp x pp x cp = {m.world} but the cluster has "
                      f"{j.cluster.devices} devices; give --dp, --tp, --pp, --cp (run format: "
                      "dp, tp, pp, cp) whose product is the device count"),
    # Megatron: num_attention_heads % tensor_model_parallel_size == 0 (whole heads per rank)
    Rule("heads_divisible", lambda j, m: j.spec.n_heads % np.asarray(m.tp) != 0,
         lambda j, m: f"{j.spec.n_heads} attention heads do not split over tp={m.tp}; "
                      "--tp (tp) must divide them"),
    # GQA: KV heads split when kv % tp == 0, replicated when tp % kv == 0 (vLLM, Megatron-Core)
    Rule("kv_heads", _kv_bad,
         lambda j, m: f"{j.spec.kv_heads} KV heads can be neither split nor replicated evenly "
                      f"over tp={m.tp}; --tp (tp) must divide them or be a multiple of them"),
    Rule("ffn_divisible", _ffn_bad,
         lambda j, m: f"an FFN width does not split over tp={m.tp}"
                      + (f" (experts over etp={m.etp})" if getattr(m, "etp", None) else "")
                      + "; choose a --tp (tp) that divides it"),
    Rule("layers_over_stages", lambda j, m: np.asarray(m.pp) > j.spec.n_layers,
         lambda j, m: f"pp={m.pp} stages for only {j.spec.n_layers} layers; --pp (pp) can be "
                      f"at most {j.spec.n_layers}"),
    Rule("split_conflict", _split_conflict_bad,
         lambda j, m: "the first/last stage's layers cannot be given together with the "
                      "embedding/loss counted as layers (Megatron-LM refuses the mix); drop "
                      "--first-stage-layers/--last-stage-layers or --embedding-in-split/"
                      "--loss-in-split"),
    Rule("pipeline_split", _split_bad, _split_sentence),
    Rule("virtual_stages", _virtual_bad, _virtual_sentence),
    Rule("schedule", _schedule_bad, _schedule_sentence),
    # Megatron-Core: expert parallelism is carved out of data x context parallelism
    Rule("experts_divisible", _experts_bad,
         lambda j, m: f"ep={m.ep} does not split the experts within dp x cp = {m.dp * m.cp}; "
                      "--ep (ep) must divide both" if getattr(m, "etp", None) is None else
                      f"etp={m.etp} x ep={m.ep} does not divide tp x dp x cp = "
                      f"{m.tp * m.dp * m.cp} ranks (Megatron-Core: etp x ep x edp); change --ep "
                      "(ep)"),
    Rule("tp_in_scale_up",
         lambda j, m: (np.asarray(m.tp) > j.cluster.scale_up_domain)
         & ~np.asarray(getattr(m, "force_tp_across_nodes", False)),
         lambda j, m: f"tp={m.tp} crosses the {j.cluster.scale_up_domain}-device scale-up "
                      "domain (tensor parallelism needs the fast links; force it with "
                      "--force-tp)"),
    Rule("batch_divisible", _batch_bad,
         lambda j, m: f"global batch {j.global_batch} does not split into dp x micro-batch = "
                      f"{m.dp * m.micro_batch} (or, interleaved, into micro-batches divisible "
                      f"by pp={m.pp}); change --batch or --micro-batch (run format: "
                      "global_batch, micro_batch)"),
    # load-balanced ring attention splits the sequence into 2 x cp chunks
    Rule("cp_divides_seq",
         lambda j, m: (np.asarray(m.cp) > 1) & (j.seq_len % (2 * np.asarray(m.cp)) != 0),
         lambda j, m: f"sequence {j.seq_len} does not split into 2 x cp = {2 * m.cp} chunks; "
                      "change --seq or --cp (seq_len, cp)"),
    # Megatron-Core TransformerConfig: "CPU offloading can be done only for layers less than
    # num_layers" (cpu_offloading_num_layers in [0, num_layers))
    Rule("offload_activations",
         lambda j, m: np.asarray(getattr(m, "offload_activations", 0)) >= j.spec.n_layers,
         lambda j, m: f"offload_activations={m.offload_activations} is not fewer than the "
                      f"model's {j.spec.n_layers} layers (Megatron-Core offloads at most "
                      f"{j.spec.n_layers - 1}); lower --offload-activations (run format: "
                      "offload_activations)"),
    Rule("shard_group",
         lambda j, m: (np.asarray(m.zero_group) <= 0)
         | (np.asarray(m.dp) % np.maximum(np.asarray(m.zero_group), 1) != 0),
         lambda j, m: f"HSDP shard group {m.shard_group} does not divide dp={m.dp}; the run "
                      "format's shard_group must divide dp"),
)


def check_training(job: TrainingJob, m: Mapping) -> list[Violation]:
    return [Violation(r.name, r.sentence(job, m)) for r in TRAINING_RULES
            if bool(np.any(r.bad(job, m)))]


def training_masks(job: TrainingJob, candidates: Mapping) -> dict[str, Any]:
    """For a table of candidate mappings (a Mapping of arrays), where each rule is broken."""
    return {r.name: np.asarray(r.bad(job, candidates), dtype=bool) for r in TRAINING_RULES}


def check_serving(spec: ModelSpec, cluster: Cluster, m: Mapping) -> list[Violation]:
    """Rules for a serving mapping: ``m.replicas`` copies of tp x pp devices."""
    out: list[Violation] = []
    if m.world > cluster.devices:
        out.append(Violation("world_size", f"{m.replicas} replicas x tp={m.tp} x pp={m.pp} need "
                                           f"{m.world} devices; the cluster has "
                                           f"{cluster.devices}"))
    atp = m.attention_tp  # 1 under DP attention: the heads are not split
    if spec.n_heads % atp:
        out.append(Violation("heads_divisible", f"{spec.n_heads} heads do not split over "
                                                f"tp={m.tp}"))
    kv = spec.kv_heads
    if spec.mla is None and kv % atp and atp % kv:
        out.append(Violation("kv_heads", f"{kv} KV heads can be neither split nor replicated "
                                         f"over tp={m.tp}"))
    out += _dp_attention(spec, m)
    if m.pp > spec.n_layers:
        out.append(Violation("layers_over_stages", f"pp={m.pp} for {spec.n_layers} layers"))
    if m.ep > 1 and (spec.moe is None or spec.moe.num_experts % m.ep):
        out.append(Violation("experts_divisible", f"ep={m.ep} does not split the experts"))
    if m.cp > 1:
        out.append(Violation("no_cp_serving", f"cp={m.cp}: context parallelism is not "
                                              "modelled for serving"))
    if m.ep > 1 and m.tp % m.ep:
        # vLLM expert parallelism splits the tensor-parallel group: ep must divide tp
        out.append(Violation("ep_within_tp", f"ep={m.ep} must divide tp={m.tp} (serving)"))
    # Under DP attention with ep = tp (wide expert parallelism) no GEMM is split over the
    # group: attention runs per device, each expert whole on one device, and the group only
    # gathers and scatters tokens, which crosses nodes over RDMA as the published wide-EP
    # deployments do (LMSYS, "Deploying DeepSeek with PD Disaggregation and Large-Scale Expert
    # Parallelism on 96 H100 GPUs", 2025-05-05: DP attention and EP over 2-12 nodes); those
    # collectives are priced on the tiers the group spans (engine/serve.py serving_links).
    wide_ep = bool(m.dp_attention) and m.ep == m.tp
    if m.tp > cluster.scale_up_domain and not wide_ep:
        out.append(Violation("tp_in_scale_up", f"tp={m.tp} crosses the "
                                               f"{cluster.scale_up_domain}-device scale-up "
                                               "domain"))
    return out


def _dp_attention(spec: ModelSpec, m: Mapping) -> list[Violation]:
    """DP attention's rules as the frameworks state them: SGLang's ``--enable-dp-attention``
    is for MoE models ("Currently DeepSeek-V2 and Qwen 2/3 MoE models are supported"; "The dp
    size should be equal to the tp size": python/sglang/srt/arg_groups/fields/parallel.py),
    TensorRT-LLM's ``enable_attention_dp`` likewise pairs it with MoE expert/tensor
    parallelism; over a group of one device it is plain serving."""
    if not m.dp_attention:
        return []
    out = []
    if spec.moe is None:
        out.append(Violation("dp_attention_moe", f"DP attention is for MoE models; {spec.id} "
                                                  "is dense"))
    if m.tp < 2:
        out.append(Violation("dp_attention_group", f"DP attention runs over the tp group, and "
                                                    f"tp={m.tp} is one device"))
    return out
