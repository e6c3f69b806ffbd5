"""Rules a mapping must satisfy, one function each, with the reason it exists.

A broken rule is a result (``Violation``: rule name + sentence), never an exception. References:
Megatron-LM ``megatron/training/arguments.py`` (validate_args) for the training rules; vLLM
``vllm/config.py`` (verify_with_parallel_config) for serving; Korthikanti et al. 2022 and the
Megatron-Core context-parallel docs for sequence and context parallelism.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from accelmap.hardware.cluster import Cluster
from accelmap.mapping.plan import Mapping, ServeMapping
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


Rule = Callable[[TrainingJob, Mapping], Violation | None]


def world_size(job: TrainingJob, m: Mapping) -> Violation | None:
    if m.world != job.cluster.devices:
        return Violation("world_size", f"dp x tp x pp x cp = {m.world} but the cluster has "
                                       f"{job.cluster.devices} devices")
    return None


def heads_divisible(job: TrainingJob, m: Mapping) -> Violation | None:
    # Megatron: num_attention_heads % tensor_model_parallel_size == 0 (each rank owns whole heads)
    if job.spec.n_heads % m.tp:
        return Violation("heads_divisible", f"{job.spec.n_heads} attention heads do not split "
                                            f"over tp={m.tp}")
    return None


def kv_heads_split(job: TrainingJob, m: Mapping) -> Violation | None:
    # GQA: KV heads are split when kv % tp == 0 and replicated when tp % kv == 0 (vLLM and
    # Megatron-Core both need one of the two).
    kv = job.spec.kv_heads
    if job.spec.mla is None and kv % m.tp and m.tp % kv:
        return Violation("kv_heads", f"{kv} KV heads can be neither split nor replicated evenly "
                                     f"over tp={m.tp}")
    return None


def ffn_divisible(job: TrainingJob, m: Mapping) -> Violation | None:
    s = job.spec
    ffn = [s.ffn_dim] + ([s.moe.expert_ffn_dim] if s.moe else [])
    bad = [f for f in ffn if f % m.tp]
    if bad:
        return Violation("ffn_divisible", f"FFN width {bad[0]} does not split over tp={m.tp}")
    return None


def layers_over_stages(job: TrainingJob, m: Mapping) -> Violation | None:
    L = job.spec.n_layers
    if m.pp > L:
        return Violation("layers_over_stages", f"pp={m.pp} stages for only {L} layers")
    if m.virtual_stages > 1 and L % (m.pp * m.virtual_stages):
        # Megatron: interleaved schedule needs num_layers % (pp * vpp) == 0
        return Violation("virtual_stages", f"{L} layers do not split into pp={m.pp} x "
                                           f"vpp={m.virtual_stages} chunks")
    return None


def experts_divisible(job: TrainingJob, m: Mapping) -> Violation | None:
    moe = job.spec.moe
    if m.ep == 1:
        return None
    if moe is None:
        return Violation("experts_divisible", f"ep={m.ep} on a dense model")
    if moe.num_experts % m.ep:
        return Violation("experts_divisible", f"{moe.num_experts} experts do not split over "
                                              f"ep={m.ep}")
    if (m.dp * m.cp) % m.ep:
        # Megatron-Core: expert parallelism is carved out of data x context parallelism
        return Violation("ep_within_dp", f"ep={m.ep} must divide dp x cp = {m.dp * m.cp}")
    return None


def tp_in_scale_up(job: TrainingJob, m: Mapping) -> Violation | None:
    dom = job.cluster.scale_up_domain
    if m.tp > dom and not m.force_tp_across_nodes:
        return Violation("tp_in_scale_up", f"tp={m.tp} crosses the {dom}-device scale-up domain "
                                           "(tensor parallelism needs the fast links; force it "
                                           "with --force-tp)")
    return None


def batch_divisible(job: TrainingJob, m: Mapping) -> Violation | None:
    per_step = m.dp * m.micro_batch
    if job.global_batch % per_step:
        return Violation("batch_divisible", f"global batch {job.global_batch} is not a multiple "
                                            f"of dp x micro-batch = {per_step}")
    micro_batches = job.global_batch // per_step
    if m.virtual_stages > 1 and micro_batches % m.pp:
        # Megatron: the interleaved schedule needs micro-batches divisible by pp
        return Violation("interleave_micro_batches", f"{micro_batches} micro-batches do not "
                                                     f"divide by pp={m.pp} (interleaved)")
    return None


def context_parallel(job: TrainingJob, m: Mapping) -> Violation | None:
    # load-balanced ring attention splits the sequence into 2 x cp chunks
    if m.cp > 1 and job.seq_len % (2 * m.cp):
        return Violation("cp_divides_seq", f"sequence {job.seq_len} does not split into "
                                           f"2 x cp = {2 * m.cp} chunks")
    return None


def zero_groups(job: TrainingJob, m: Mapping) -> Violation | None:
    if m.shard_group is not None and (m.shard_group <= 0 or m.dp % m.shard_group):
        return Violation("shard_group", f"HSDP shard group {m.shard_group} does not divide "
                                        f"dp={m.dp}")
    return None


TRAINING_RULES: tuple[Rule, ...] = (
    world_size, heads_divisible, kv_heads_split, ffn_divisible, layers_over_stages,
    experts_divisible, tp_in_scale_up, batch_divisible, context_parallel, zero_groups,
)


def check_training(job: TrainingJob, m: Mapping) -> list[Violation]:
    return [v for rule in TRAINING_RULES if (v := rule(job, m)) is not None]


def check_serving(spec: ModelSpec, cluster: Cluster, m: ServeMapping) -> list[Violation]:
    out: list[Violation] = []
    if m.world > cluster.devices:
        out.append(Violation("world_size", f"{m.replicas} replicas x tp={m.tp} x pp={m.pp} need "
                                           f"{m.world} devices; the cluster has "
                                           f"{cluster.devices}"))
    if spec.n_heads % m.tp:
        out.append(Violation("heads_divisible", f"{spec.n_heads} heads do not split over "
                                                f"tp={m.tp}"))
    kv = spec.kv_heads
    if spec.mla is None and kv % m.tp and m.tp % kv:
        out.append(Violation("kv_heads", f"{kv} KV heads can be neither split nor replicated "
                                         f"over tp={m.tp}"))
    if m.pp > spec.n_layers:
        out.append(Violation("layers_over_stages", f"pp={m.pp} for {spec.n_layers} layers"))
    if m.ep > 1 and (spec.moe is None or spec.moe.num_experts % m.ep):
        out.append(Violation("experts_divisible", f"ep={m.ep} does not split the experts"))
    if m.tp > cluster.scale_up_domain:
        out.append(Violation("tp_in_scale_up", f"tp={m.tp} crosses the "
                                               f"{cluster.scale_up_domain}-device scale-up "
                                               "domain"))
    return out
