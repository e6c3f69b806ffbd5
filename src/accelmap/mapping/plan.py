"""Mapping: how the model and the batch are split over devices and links. One value for
training and serving, for one mapping and for the planner's table of candidates.

In the spirit of torchtitan's ``ParallelDims`` (torchtitan/distributed/parallel_dims.py): the
degrees are validated once, and everything derived from them -- data-parallel degree from the
world size, world size, ZeRO shard group, expert groups, rank order -- is worked out here and
nowhere else.

Training: dp x tp x pp x cp devices (world size). Expert parallelism is carved out of the
dense ranks as in Megatron-Core (``initialize_model_parallel``): each expert layer runs on
etp x ep x edp = tp x cp x dp ranks of a stage, where etp (tensor parallelism inside an expert)
is tp by default (Megatron-Core's ``--expert-tensor-parallel-size`` default). ZeRO stage 0-3
shards over dp x cp (stage 3 = FSDP; ``shard_group`` < dp = HSDP: shard inside groups of that
size, replicate across them). Micro-batch and gradient accumulation, virtual pipeline stages and
the schedule, recompute, CPU/NVMe offload.

Pipeline split (``stage_layers``), as Megatron-LM builds it (megatron/core/transformer/
transformer_block.py, get_num_layers_to_build): by default every stage holds L / pp layers
(Megatron asserts that pp divides L: megatron/training/arguments.py, validate_args);
``first_stage_layers`` / ``last_stage_layers`` (``--decoder-first-pipeline-num-layers`` /
``--decoder-last-pipeline-num-layers``) fix the first and last stage and split the rest evenly
over the middle ones; ``embedding_in_split`` / ``loss_in_split``
(``--account-for-embedding-in-pipeline-split`` / ``--account-for-loss-in-pipeline-split``) count
the embedding / the loss as one more layer, so the first / last stage holds one layer fewer
(Llama 3 405B's 126 layers over 16 stages: 7, 8 x 14, 7). Which splits Megatron accepts is
mapping.constraints' ``pipeline_split`` and ``virtual_stages``.

Serving: the same degrees; dp counts replicas, each of tp x pp devices. vLLM's expert
parallelism (``--enable-expert-parallel``) splits the tensor-parallel group itself: ep divides
tp and each expert is tensor-parallel over etp = tp / ep ranks (``Mapping.serving``).

Attention data parallelism (``dp_attention``, serving MoE models only): the tp group of G = tp
devices runs the attention block data-parallel -- each device holds the whole attention
weights and only its own requests' KV cache, and runs attention over its own 1/G of the
batch -- while the rest of the layer (dense FFN, experts, LM head) stays split over the group
as tp/ep say, on the tokens gathered from all G devices. This is SGLang's
``--enable-dp-attention`` with ``--dp-size`` = ``--tp-size`` (SGLang docs, "DeepSeek Usage";
LMSYS blog 2024-12-04 "SGLang v0.4: ... Data Parallelism Attention for DeepSeek Models"; LMSYS
blog 2025-05-05 "Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism
on 96 H100 GPUs"), TensorRT-LLM's ``enable_attention_dp`` and vLLM's ``--data-parallel-size``
with ``--enable-expert-parallel`` (attention tp 1 in each data-parallel rank). SGLang's flag
says it in one line: "Enabling data parallelism for attention and tensor parallelism for FFN.
The dp size should be equal to the tp size. Currently DeepSeek-V2 and Qwen 2/3 MoE models are
supported." (``enable_dp_attention``, python/sglang/srt/arg_groups/fields/parallel.py, read at
commit 00ac7105); the dense MLP and the LM head stay split over the whole tp group unless
``--enable-dense-mlp-attn-tp`` / ``--enable-dp-lm-head`` (not modelled). A bool rather than a
degree: dp = tp is SGLang's rule, TensorRT-LLM's switch and the run format's ``dp_attention``
are all-or-nothing; an attention-tp between 1 and tp is not modelled.

Degrees may be ints (one mapping) or numpy arrays of equal shape (the planner's candidates):
every derived property is array-friendly, so constraints, composition and the planner take the
same value.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace
from enum import IntEnum, StrEnum
from typing import Any

import numpy as np

from accelmap.cost.schedules import Schedule
from accelmap.errors import InputError
from accelmap.units import Num
from accelmap.workload import Recompute


class ZeroStage(IntEnum):
    NONE = 0
    OPTIMIZER = 1  # ZeRO-1: optimizer states sharded over dp (Rajbhandari et al. 2020, sec. 5)
    GRADIENTS = 2  # ZeRO-2: + gradients
    PARAMETERS = 3  # ZeRO-3 / FSDP: + parameters (gathered per layer when used)


class CpComm(StrEnum):
    """How context-parallel ranks exchange K and V (Megatron-Core ``--cp-comm-type``).

    P2P: ring attention, each of the cp - 1 steps sends this rank's K/V chunk on while
    attention runs on the chunk in hand, so the exchange hides behind attention (Liu et al.
    2023, "Ring Attention", sec. 3; Megatron-Core's default ``p2p``).
    ALL_GATHER: K and V are all-gathered before attention runs on the local queries, and
    dK/dV reduce-scattered after it: "the all-gather communication latency is exposed in the
    critical path" (Dubey et al. 2024, "The Llama 3 Herd of Models", sec. 3.3.2, Llama 3's
    long-context training; Megatron-Core ``allgather``)."""

    P2P = "p2p"
    ALL_GATHER = "allgather"


# CpComm's words: Megatron's (``p2p``, ``allgather``) and as people write them; the CLI, the
# API, plan files and the run format (validate/canonical.py) read these
CP_COMM_WORDS: dict[str, CpComm] = {
    "p2p": CpComm.P2P, "ring": CpComm.P2P, "allgather": CpComm.ALL_GATHER,
    "all-gather": CpComm.ALL_GATHER, "all_gather": CpComm.ALL_GATHER}


class Offload(StrEnum):
    NONE = "none"
    CPU = "cpu"  # ZeRO-Offload (Ren et al. 2021)
    NVME = "nvme"  # ZeRO-Infinity (Rajbhandari et al. 2021)


# Rank order, innermost first: Megatron-Core's default ``order="tp-cp-ep-dp-pp"``
# (parallel_state.initialize_model_parallel); torchtitan nests its device mesh the same way
# (pp outermost, then dp, cp, tp). Expert parallelism is carved out of cp x dp next to tp.
class Axis(StrEnum):
    """A parallel axis as placement and the mesh name it (a str, so "tp" still finds it)."""

    TP = "tp"
    CP = "cp"
    EP = "ep"
    DP = "dp"
    PP = "pp"
    SHARD = "shard"  # ZeRO-3 / FSDP's shard group inside dp (HSDP: shard_group)
    REPLICA = "replica"  # HSDP's replicas across the shard groups


RANK_ORDER: tuple[Axis, ...] = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)

_DEGREES = ("dp", "tp", "pp", "cp", "ep", "micro_batch", "virtual_stages")
_SPLIT = ("first_stage_layers", "last_stage_layers")


@dataclass(frozen=True)
class Mapping:
    dp: Num = 1  # data-parallel ranks (training) or replicas (serving)
    tp: Num = 1
    pp: Num = 1
    cp: Num = 1
    ep: Num = 1
    etp: Num | None = None  # tensor parallelism inside an expert; None = tp (Megatron-Core)
    sequence_parallel: bool = True  # with tp > 1 (Korthikanti et al. 2022 sec. 4.2.2)
    zero: Num = ZeroStage.NONE
    shard_group: Num | None = None  # HSDP: ZeRO shards over this many dp ranks (None = all dp)
    micro_batch: Num = 1
    virtual_stages: Num = 1
    schedule: Schedule | Num | None = None  # None: Megatron-LM's for the vpp (_default_schedule)
    # None: not chosen by the mapping; the workload's wish, else none (``with_recompute``)
    recompute: Recompute | None = None
    offload_optimizer: Offload | Num = Offload.NONE  # an Offload, or bools in a candidate table
    offload_params: Offload | Num = Offload.NONE
    tp_comm_overlap: bool = False  # Megatron --tp-comm-overlap (userbuffers)
    cp_comm: CpComm = CpComm.P2P  # Megatron --cp-comm-type; one value for a candidate table
    force_tp_across_nodes: Num = False  # allow tp beyond the scale-up domain
    # Uneven pipeline splits (Megatron-LM's arguments; ``stage_layers``). In a candidate table
    # 0 stands for "not set" (Megatron refuses 0 layers on a stage).
    first_stage_layers: Num | None = None  # --decoder-first-pipeline-num-layers
    last_stage_layers: Num | None = None  # --decoder-last-pipeline-num-layers
    embedding_in_split: Num = False  # --account-for-embedding-in-pipeline-split
    loss_in_split: Num = False  # --account-for-loss-in-pipeline-split
    # serving: attention data-parallel over the tp group (module doc; ``attention_tp``)
    dp_attention: Num = False
    # Megatron-Core --cpu-offloading --cpu-offloading-num-layers N (Transformer Engine's
    # get_cpu_offload_context): the saved activations of N layers of a stage go to host
    # memory in the forward and come back before their backward; one value for a table
    offload_activations: int = 0

    def __post_init__(self) -> None:
        # the schedule left open is Megatron-LM's for the vpp, in one place (_default_schedule)
        if self.schedule is None:
            object.__setattr__(self, "schedule", default_schedule(self.virtual_stages))
        object.__setattr__(self, "cp_comm", cp_comm(self.cp_comm))  # one word for all rows
        n = self.offload_activations
        if isinstance(n, bool) or not float(n).is_integer() or n < 0:
            raise InputError(f"offload_activations={n!r}: the layers whose activations go to "
                             "host memory are a whole number >= 0 (Megatron-Core "
                             "--cpu-offloading-num-layers)")
        object.__setattr__(self, "offload_activations", int(n))
        # Candidate tables are built by the planner and checked by mapping.constraints as
        # masks; a single mapping comes from a user and is checked here, with the fix.
        if not self.is_scalar:
            return
        for name in _DEGREES:
            v = getattr(self, name)
            if isinstance(v, bool) or not float(v).is_integer() or v < 1:
                raise InputError(f"{name}={v!r}: parallel degrees and the micro-batch are "
                                 "whole numbers >= 1")
        if int(self.zero) not in (0, 1, 2, 3):
            raise InputError(f"zero={self.zero!r}: the ZeRO stage is 0, 1, 2 or 3")
        if self.shard_group is not None and self.shard_group < 1:
            raise InputError(f"shard_group={self.shard_group!r} must be >= 1 (or left out)")
        object.__setattr__(self, "zero", ZeroStage(int(self.zero)))
        for name in _DEGREES:
            object.__setattr__(self, name, int(getattr(self, name)))
        for name in _SPLIT:
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, bool) or not float(v).is_integer() or v < 1:
                raise InputError(f"{name}={v!r}: a pipeline stage holds a whole number >= 1 of "
                                 "layers (Megatron-LM refuses 0); leave it out for an even split")
            object.__setattr__(self, name, int(v))
        for name in ("embedding_in_split", "loss_in_split", "dp_attention"):
            object.__setattr__(self, name, bool(getattr(self, name)))
        try:
            object.__setattr__(self, "schedule", Schedule(str(self.schedule)))
        except ValueError:
            raise InputError(f"schedule={self.schedule!r}: one of "
                             f"{', '.join(s.value for s in Schedule)}") from None

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def for_world(cls, world: int, **degrees: Any) -> Mapping:
        """A mapping whose data-parallel degree fills ``world`` devices (``dp`` left out), as
        ParallelDims derives dp_shard = -1; an InputError says what does not divide. With
        array degrees (the planner's table) dp is world / (tp x pp x cp), and the rule
        ``world_size`` of mapping.constraints masks the candidates where that is no integer."""
        if any(np.ndim(v) for v in degrees.values()):
            degrees.pop("dp", None)
            inner = (np.asarray(degrees.get("tp", 1)) * np.asarray(degrees.get("pp", 1))
                     * np.asarray(degrees.get("cp", 1)))
            return cls(dp=world / inner, **degrees)
        if degrees.get("dp") is not None:
            m = cls(**degrees)
            if m.world != world:
                raise InputError(f"dp x tp x pp x cp = {m.world} but the cluster has {world} "
                                 "devices; leave --dp out to fill the cluster")
            return m
        degrees.pop("dp", None)
        inner = int(np.prod([degrees.get(k, 1) for k in ("tp", "pp", "cp")]))
        if inner < 1 or world % inner:
            raise InputError(f"tp x pp x cp = {inner} does not divide the cluster's {world} "
                             "devices")
        return cls(dp=world // inner, **degrees)

    @classmethod
    def training(cls, world: int, batch: int, *, streams_weights: bool = False,
                 zero: Num | None = None, micro_batch: Num | None = None,
                 offload: Offload | None = None, **degrees: Any) -> Mapping:
        """A training mapping on ``world`` devices for a global batch of ``batch`` sequences,
        with every default applied here, once (the CLI, the web, the API, ``estimate``'s
        default and a hand-built mapping all come through this or the plain constructor):

        - dp fills the world (``for_world``); the schedule is Megatron-LM's for the vpp;
        - ZeRO stage 1 on more than one device (Megatron-LM's distributed optimizer, the
          common DeepSpeed setting), 0 on one, where there is nothing to shard over;
        - micro-batch: the whole batch on one device (no accumulation), 1 on a cluster
          (Megatron-LM's ``--micro-batch-size`` example value);
        - a part that trains by weight streaming (``streams_weights``: a Cerebras wafer,
          cost/execution.py) keeps weights and optimizer in its external tier: offload, no
          ZeRO;
        - recompute, left out, is settled against the workload's wish by the engine
          (``with_recompute``)."""
        if offload is None:
            offload = Offload.CPU if streams_weights else Offload.NONE
        if zero is None:
            zero = 0 if streams_weights or world == 1 else 1
        if micro_batch is None:
            micro_batch = batch if world == 1 and not streams_weights else 1
        return cls.for_world(world, zero=zero, micro_batch=micro_batch,
                             offload_optimizer=offload, offload_params=offload, **degrees)

    @classmethod
    def serving(cls, tp: int = 1, pp: int = 1, ep: int = 1, replicas: int | None = 1,
                world: int | None = None, dp_attention: bool = False) -> Mapping:
        """A serving mapping: ``replicas`` copies of tp x pp devices (``replicas=None``: as many
        as fit in ``world`` devices); vLLM expert parallelism splits the tensor-parallel group
        (etp = tp / ep); ``dp_attention``: attention data-parallel over the tp group."""
        if replicas is None:
            replicas = max((world or 1) // (tp * pp), 1)
        return cls(dp=replicas, tp=tp, pp=pp, ep=ep, etp=max(tp // max(ep, 1), 1),
                   sequence_parallel=False, dp_attention=dp_attention)

    # -- derived once -----------------------------------------------------------------------
    @property
    def is_scalar(self) -> bool:
        return all(_is_scalar(getattr(self, name)) for name in _field_names())

    @property
    def world(self) -> Num:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def replicas(self) -> Num:
        """Serving: copies of the model, one per data-parallel rank."""
        return self.dp

    @property
    def devices_per_replica(self) -> Num:
        return self.tp * self.pp * self.cp

    @property
    def attention_tp(self) -> Num:
        """Ranks one attention block is split over: tp, or 1 under DP attention (each device
        runs its own requests' attention with the whole attention weights; SGLang's
        attn_tp_size = tp_size / dp_size)."""
        return np.where(self.dp_attention, 1, self.tp) if np.ndim(self.dp_attention) else (
            1 if self.dp_attention else self.tp)

    @property
    def attention_dp(self) -> Num:
        """Devices of a replica's tp group that run attention on different requests: G = tp
        under DP attention, else 1."""
        return self.tp // self.attention_tp

    @property
    def expert_tp(self) -> Num:
        return self.tp if self.etp is None else self.etp

    @property
    def zero_stage(self) -> Num:
        return np.asarray(self.zero) if not self.is_scalar else int(self.zero)

    @property
    def zero_group(self) -> Num:
        """HSDP shard group in data-parallel ranks (all of dp when not hybrid)."""
        return self.dp if self.shard_group is None else self.shard_group

    @property
    def zero_shards(self) -> Num:
        """Ranks one ZeRO shard group spans (HSDP shards inside a group, replicates across).
        Context-parallel ranks hold the same weights, so they shard too: Megatron-Core's
        distributed optimizer uses the data-parallel group with context parallel, torchtitan
        flattens dp_shard x cp into one FSDP mesh dimension."""
        return self.zero_group * self.cp

    @property
    def grad_group(self) -> Num:
        """Ranks that reduce one gradient shard: dp x cp (Megatron-Core's data-parallel group
        with context parallel)."""
        return self.dp * self.cp

    @property
    def interleaved(self) -> Num:
        return np.asarray(self.virtual_stages) > 1

    def split_fields(self) -> tuple[Num, Num, Num, Num]:
        """The split as arrays: first and last stage layers (0 = not set), and whether the
        embedding and the loss count as a layer (0 or 1)."""
        first, last = (np.asarray(0.0 if v is None else v, dtype=float)
                       for v in (self.first_stage_layers, self.last_stage_layers))
        emb, loss = (np.asarray(v, dtype=float) for v in (self.embedding_in_split,
                                                           self.loss_in_split))
        return first, last, emb, loss

    def stage_layers(self, n_layers: int) -> tuple[Num, Num, Num]:
        """Transformer layers on the first, each middle and the last pipeline stage, as
        Megatron-LM's get_num_layers_to_build (transformer_block.py) gives them:

        - first/last set: those, and the other L - first - last layers evenly over the
          pp - (number set) middle stages (a stage left unset is a middle one);
        - otherwise (L + embedding + loss) / pp each, the first stage one fewer when the
          embedding counts as a layer, the last one fewer when the loss does;
        - pp = 1: all L on the one stage.

        Splits Megatron refuses (mapping.constraints) come out fractional, never raise."""
        L = float(n_layers)
        pp = np.asarray(self.pp, dtype=float)
        first, last, emb, loss = self.split_fields()
        has_first, has_last = first > 0, last > 0
        # one expression for both: an uneven split counts no embedding/loss (the rule
        # split_conflict refuses the mix), an even one sets neither end
        mid = (L + emb + loss - first - last) / np.maximum(pp - has_first - has_last, 1.0)
        f = np.where(has_first, first, mid - emb)
        la = np.where(has_last, last, mid - loss)
        single = pp <= 1
        return (np.where(single, L, f), np.where(single, L, mid), np.where(single, L, la))

    @property
    def offloads_optimizer(self) -> Num:
        return _offloaded(self.offload_optimizer)

    @property
    def offloads_params(self) -> Num:
        return _offloaded(self.offload_params)

    def micro_batches(self, global_batch: Num) -> Num:
        """Gradient-accumulation steps: the global batch over dp x micro-batch."""
        return global_batch / (self.dp * self.micro_batch)

    # -- tables -------------------------------------------------------------------------------
    def take(self, index: Any) -> Mapping:
        """The candidates at ``index`` (a mask or integer index) of a candidate table; an int
        index gives a plain, validated mapping."""
        out: dict[str, Any] = {}
        for name in _field_names():
            v = getattr(self, name)
            out[name] = np.asarray(v)[index] if np.ndim(v) else v
        if np.ndim(index) == 0:
            out = {k: _item(v) for k, v in out.items()}
            out["zero"] = ZeroStage(int(out["zero"]))
            out["schedule"] = Schedule(str(out["schedule"]))
            for key in _SPLIT:
                out[key] = out[key] or None  # 0 in a table: not set
            for key in ("offload_optimizer", "offload_params"):
                if isinstance(out[key], bool):
                    out[key] = Offload.CPU if out[key] else Offload.NONE
        return Mapping(**out)

    def with_(self, **changes: Any) -> Mapping:
        return replace(self, **changes)

    def with_recompute(self, wish: Recompute | None) -> Mapping:
        """The mapping with its recompute policy settled, once, before anything is costed: its
        own, else the workload's ``wish``, else none. Both given and different is refused, so
        a hand-built Mapping never silently drops a workload's recompute (issue 25)."""
        if self.recompute is None:
            return replace(self, recompute=wish or Recompute.NONE)
        if wish is not None and Recompute(wish) is not Recompute(self.recompute):
            raise InputError(f"recompute is given twice and disagrees: the mapping says "
                             f"{Recompute(self.recompute).value}, the workload "
                             f"{Recompute(wish).value}; give it once, on the mapping")
        return self

    @property
    def policy(self) -> Recompute:
        """The recompute policy (none where the mapping leaves it open)."""
        return Recompute.NONE if self.recompute is None else Recompute(self.recompute)

    # -- text and JSON ------------------------------------------------------------------------
    def describe(self) -> str:
        parts = [f"dp={self.dp}", f"tp={self.tp}", f"pp={self.pp}"]
        if self.cp > 1:
            parts.append(f"cp={self.cp}")
        if self.ep > 1:
            parts.append(f"ep={self.ep}")
        if self.shard_group is not None and self.shard_group != self.dp:
            parts.append(f"shard_group={self.shard_group}")
        parts.append(f"zero={int(self.zero)}")
        parts.append(f"mb={self.micro_batch}")
        if self.virtual_stages > 1:
            parts.append(f"vpp={self.virtual_stages}")
        if self.schedule is not _default_schedule(self.virtual_stages):
            parts.append(f"schedule={Schedule(str(self.schedule)).value}")
        parts += [f"{k}={v}" for k, v in self._split_dict().items()]
        if self.tp_comm_overlap:
            parts.append("tp-overlap")
        if self.cp_comm is not CpComm.P2P:
            parts.append(f"cp-comm={self.cp_comm.value}")
        parts.append(f"recompute={self.policy.value}")
        if self.offloads_optimizer or self.offloads_params:
            parts.append("offload")
        if self.offload_activations:
            parts.append(f"act-offload={self.offload_activations}")
        return " ".join(parts)

    def describe_serving(self) -> str:
        dpa = " dp-attention" if self.dp_attention else ""
        return f"tp={self.tp} pp={self.pp} ep={self.ep}{dpa} x {self.replicas} replicas"

    def to_dict(self) -> dict[str, Any]:
        """The training plan's ``mapping`` object (``accelmap plan --json``)."""
        out: dict[str, Any] = {
            "dp": self.dp, "tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep,
            "zero": int(self.zero), "micro_batch": self.micro_batch,
            "vpp": self.virtual_stages, "recompute": self.policy.value,
            "offload": bool(self.offloads_optimizer or self.offloads_params)}
        if self.schedule is not _default_schedule(self.virtual_stages):
            out["schedule"] = Schedule(str(self.schedule)).value
        if self.shard_group is not None and self.shard_group != self.dp:
            out["shard_group"] = self.shard_group
        if self.tp_comm_overlap:
            out["tp_comm_overlap"] = True
        if self.cp_comm is not CpComm.P2P:
            out["cp_comm"] = self.cp_comm.value
        if self.offload_activations:
            out["offload_activations"] = self.offload_activations
        return out | self._split_dict()

    def to_dicts(self, index: Any) -> list[dict[str, Any]]:
        """``[self.take(int(j)).to_dict() for j in index]`` for a candidate table, built column
        by column: the planner writes one row per feasible candidate (~90,000 in `plan --hw
        any`), and a validated one-candidate Mapping per row was the plan's largest cost
        (cProfile). ``tests/mapping/test_plan.py`` holds it equal to the one-by-one way."""
        idx = np.asarray(index, dtype=int).ravel()
        n = idx.size

        def col(name: str) -> list[Any]:
            v = getattr(self, name)
            return (np.asarray(v)[idx].tolist() if np.ndim(v) else [v] * n)

        ints = {key: [int(x) for x in col(name)] for key, name in (
            ("dp", "dp"), ("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("ep", "ep"),
            ("zero", "zero"), ("micro_batch", "micro_batch"), ("vpp", "virtual_stages"))}
        rec = [Recompute(r or Recompute.NONE).value for r in col("recompute")]
        off = [bool(_offloaded(a) or _offloaded(b))
               for a, b in zip(col("offload_optimizer"), col("offload_params"), strict=True)]
        sched = [Schedule(str(x)) for x in col("schedule")]
        shard = [None if x is None else _item(x) for x in col("shard_group")]
        tpo = [bool(x) for x in col("tp_comm_overlap")]
        split = {k: [(_item(x) or None) if x is not None else None for x in col(k)]
                 for k in _SPLIT}
        flags = {k: [bool(x) for x in col(k)] for k in ("embedding_in_split", "loss_in_split")}
        out = []
        for i in range(n):
            row: dict[str, Any] = {k: v[i] for k, v in ints.items()}
            row["recompute"], row["offload"] = rec[i], off[i]
            if sched[i] is not _default_schedule(row["vpp"]):
                row["schedule"] = sched[i].value
            if shard[i] is not None and shard[i] != row["dp"]:
                row["shard_group"] = shard[i]
            if tpo[i]:
                row["tp_comm_overlap"] = True
            if self.cp_comm is not CpComm.P2P:
                row["cp_comm"] = self.cp_comm.value
            if self.offload_activations:
                row["offload_activations"] = self.offload_activations
            row |= {k: v[i] for k, v in split.items() if v[i] is not None}
            row |= {k: True for k, v in flags.items() if v[i]}
            out.append(row)
        return out

    def _split_dict(self) -> dict[str, Any]:
        """The split fields that are set (none: Megatron's even split)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in _SPLIT
                               if getattr(self, k) is not None}
        out |= {k: True for k in ("embedding_in_split", "loss_in_split") if getattr(self, k)}
        return out

    def to_serving_dict(self) -> dict[str, Any]:
        out = {"tp": self.tp, "pp": self.pp, "ep": self.ep, "replicas": self.replicas}
        return out | ({"dp_attention": True} if self.dp_attention else {})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Mapping:
        """Inverse of ``to_dict`` and ``to_serving_dict`` (plan files, exporters)."""
        try:
            if "replicas" in data:
                return cls.serving(int(data.get("tp", 1)), int(data.get("pp", 1)),
                                   int(data.get("ep", 1)), int(data["replicas"]),
                                   dp_attention=bool(data.get("dp_attention", False)))
            vpp = int(data.get("vpp", data.get("virtual_stages", 1)))
            off = Offload.CPU if data.get("offload") else Offload.NONE
            return cls(dp=int(data.get("dp", 1)), tp=int(data.get("tp", 1)),
                       pp=int(data.get("pp", 1)), cp=int(data.get("cp", 1)),
                       ep=int(data.get("ep", 1)), zero=ZeroStage(int(data.get("zero", 0))),
                       micro_batch=int(data.get("micro_batch", 1)), virtual_stages=vpp,
                       schedule=data.get("schedule"),
                       recompute=Recompute(str(data.get("recompute", "none"))),
                       offload_optimizer=off, offload_params=off,
                       first_stage_layers=_opt_int(data.get("first_stage_layers")),
                       last_stage_layers=_opt_int(data.get("last_stage_layers")),
                       embedding_in_split=bool(data.get("embedding_in_split", False)),
                       loss_in_split=bool(data.get("loss_in_split", False)),
                       shard_group=_opt_int(data.get("shard_group")),
                       tp_comm_overlap=bool(data.get("tp_comm_overlap", False)),
                       cp_comm=data.get("cp_comm", CpComm.P2P),
                       offload_activations=int(data.get("offload_activations", 0)))
        except (TypeError, ValueError) as e:
            raise InputError(f"cannot read the mapping {data!r}: {e}") from None


def cp_comm(value: object) -> CpComm:
    """A CpComm from its word (``CP_COMM_WORDS``, any case); an InputError names the words."""
    if isinstance(value, CpComm):
        return value
    word = CP_COMM_WORDS.get(str(value).strip().lower())
    if word is None:
        raise InputError(f"--cp-comm {value!r}: the context-parallel K/V exchange is p2p (ring "
                         "attention) or all-gather (Llama 3's; Megatron --cp-comm-type)")
    return word


@functools.cache
def _field_names() -> tuple[str, ...]:
    """Mapping's field names, once: dataclasses.fields() rebuilds its tuple on every call, and
    the planner makes ~90,000 one-candidate mappings per `plan --hw any` (cProfile)."""
    return tuple(f.name for f in fields(Mapping))


def _is_scalar(v: Any) -> bool:
    # plain numbers, enums, strings and None without numpy's conversion (the planner builds
    # hundreds of one-candidate mappings per search)
    return isinstance(v, (int, float, str, type(None))) or np.ndim(v) == 0


def powers_of_two(limit: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to ``limit``: the parallel degrees the searches and the layouts try
    (tensor, pipeline, expert and micro-batch sizes divide power-of-two device counts)."""
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return tuple(out)


def _default_schedule(vpp: Num) -> Schedule:
    """Megatron-LM's schedule for a vpp: interleaved 1F1B with virtual stages, else 1F1B."""
    return Schedule.INTERLEAVED if vpp > 1 else Schedule.ONE_F_ONE_B


def default_schedule(vpp: Num) -> Num:
    """``_default_schedule`` for a scalar or an array of vpp (the planner's candidates)."""
    if np.ndim(vpp) == 0:
        return _default_schedule(vpp)
    return np.where(np.asarray(vpp) > 1, Schedule.INTERLEAVED.value,
                    Schedule.ONE_F_ONE_B.value)


def balanced_split(n_layers: int, pp: Num, vpp: Num = 1) -> tuple[Num, Num]:
    """First and last stage layers (0 = leave unset) for the planner: nothing where Megatron's
    even split works (pp divides L, vpp divides L / pp); elsewhere the middle stages take
    ceil(L / (pp vpp)) vpp layers, the rest go to the first and last stage, the first taking
    the larger half (the last also runs the head and loss), each a multiple of vpp -- the
    split Llama 3 405B used (126 layers, pp = 16: 7, 8 x 14, 7; Dubey et al. 2024 sec.
    3.3.2). Where no such split has at least one layer on each end, 0 (the candidate stays
    refused by mapping.constraints)."""
    L = float(n_layers)
    pp, v = np.asarray(pp, dtype=float), np.asarray(vpp, dtype=float)
    even = (L % pp == 0) & ((L / pp) % v == 0)
    mid = np.ceil(L / (pp * v)) * v
    ends = L - np.maximum(pp - 2, 0) * mid
    first = np.ceil(ends / (2 * v)) * v
    last = ends - first
    ok = ~even & (pp > 1) & (first >= 1) & (last >= 1) & (last % v == 0)
    return np.where(ok, first, 0.0), np.where(ok, last, 0.0)


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def _offloaded(v: Any) -> Any:
    if isinstance(v, Offload):
        return v is not Offload.NONE
    return np.asarray(v, dtype=bool) if np.ndim(v) else bool(v)


def _item(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v
