"""From a multi-device row to the distributed engine's inputs: a Cluster and a Mapping.

Every choice is general (the row's columns, else the stack's documented default from
``validate/stacks.py``) and leaves a note; a row whose layout cannot be read is skipped with the
reason. Cluster: ``num_devices`` devices, ``num_devices / num_nodes`` per node where the row
says so, else the catalog's single-node preset for the accelerator (8 per DGX/HGX); the network
tiers come from that preset (``from_preset``), or from the accelerator's own links when the
catalog has none (``parse_cluster``, which says so). Fewer devices than a node are that many
devices of one node (same NVLink/NVSwitch tier). A row that uses part of each node or rack
(``num_nodes`` racks of 64 of an NVL72's 72) has that many devices per scale-up domain; one
whose devices do not fill whole nodes (256 GPUs of NVL72 racks) is ``of_devices``'s model:
equal scale-up domains of gcd(node, remainder) devices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from accelmap.catalog import Catalog
from accelmap.cost.schedules import Schedule
from accelmap.hardware.cluster import (
    Cluster,
    from_preset,
    of_devices,
    parse_cluster,
    shrink_tiers,
)
from accelmap.hardware.scale_out import ScaleOut, parse_scale_out, with_scale_out
from accelmap.hardware.schema import Accelerator, SystemPreset
from accelmap.mapping.plan import CpComm, Mapping, ZeroStage
from accelmap.models.schema import ModelSpec
from accelmap.units import DType
from accelmap.validate.cases import InferenceCase, TrainingCase
from accelmap.validate.resolve import Resolved, parse_recompute
from accelmap.validate.runs import TrainingRun
from accelmap.validate.stacks import StackDefaults, StageMicrobatches, recipe_vpp, silent_split
from accelmap.validate.transcribe import from_case, fsdp_off, read_zero
from accelmap.workload import Recompute

DEFAULT_NODE = 8  # devices per node when neither the row nor a catalog preset says


def node_preset(acc: Accelerator, catalog: Catalog) -> SystemPreset | None:
    """The single-node system preset built on this accelerator (most devices per node)."""
    same = [p for p in catalog.systems.values() if p.accelerator == acc.id and p.nodes == 1]
    return max(same, key=lambda p: p.devices_per_node) if same else None


def _host_of_rack(per_node: int, node: int) -> bool:
    """A row's "node" that is one host (compute tray) of a rack-scale scale-up domain (GB200
    NVL72: 18 trays of 4 GPUs in one NVLink domain): the rack, not the tray, is the node."""
    return node > DEFAULT_NODE and per_node <= DEFAULT_NODE


def build_cluster(acc: Accelerator, devices: int, nodes: int | None,
                  catalog: Catalog, scale_out: str = "") -> Resolved:
    """A cluster of exactly ``devices`` devices (see the module docstring), its scale-out
    tier the run's stated network where it states one (``hardware.scale_out``)."""
    built = _build_cluster(acc, devices, nodes, catalog)
    so = parse_scale_out(scale_out)
    if not isinstance(so, ScaleOut) or built.value is None or built.value.nodes <= 1:
        return built
    tiers, note = with_scale_out(built.value.tiers, so, built.value.devices_per_node)
    return Resolved(replace(built.value, tiers=tiers), (*built.notes, note))


def _build_cluster(acc: Accelerator, devices: int, nodes: int | None,
                   catalog: Catalog) -> Resolved:
    preset = node_preset(acc, catalog)
    notes: list[str] = []
    node = preset.devices_per_node if preset else DEFAULT_NODE
    if nodes and devices % nodes == 0 and not _host_of_rack(devices // nodes, node):
        per_node = devices // nodes
    else:
        per_node = min(devices, node)
        if nodes and devices % nodes == 0:
            notes.append(f"the row's {nodes} nodes of {devices // nodes} are hosts of "
                         f"{node}-device scale-up domains: domains of {node}")
        elif devices >= node:
            notes.append(f"node count not stated: nodes of {node} assumed")
    if devices % per_node:
        # a job on part of its last node or rack (256 GPUs of NVL72 racks: 3 x 72 + 40):
        # hardware.cluster.of_devices models it as equal scale-up domains of gcd(node,
        # remainder) devices, so no group is given a scale-up link that its ranks lack
        partial = of_devices(acc, devices, catalog)
        notes.append(f"{devices} devices do not fill nodes of {per_node}: {partial.origin}")
        return Resolved(partial, tuple(notes))
    n = devices // per_node
    cluster: Cluster
    if preset and per_node <= preset.devices_per_node:
        cluster = from_preset(preset, catalog, nodes=n)
        if per_node < preset.devices_per_node:
            # part of each node or rack: its scale-up domain holds only the devices used
            cluster = replace(cluster, devices_per_node=per_node,
                              tiers=shrink_tiers(cluster.tiers, per_node) if n > 1
                              else cluster.tiers,
                              name=f"{per_node} of the {preset.devices_per_node} devices of "
                                   f"{n} x {preset.name}")
            notes.append(f"{per_node} devices of one {preset.id} node" if n == 1 else
                         f"{per_node} devices of each of {n} {preset.id} nodes")
        else:
            notes.append(f"cluster {n} x {per_node} x {acc.id}, tiers of preset {preset.id}")
    else:
        cluster = parse_cluster(f"{n}x{per_node}x{acc.id}", catalog)
        notes.append(f"cluster {cluster.name}: {cluster.origin}")
    return Resolved(cluster, tuple(notes))


@dataclass(frozen=True)
class Degrees:
    dp: int
    tp: int
    pp: int
    cp: int
    ep: int


def run_degrees(run: TrainingRun, per_node: int, split_model_parallel: bool,
                notes: list[str]) -> Degrees | str:
    """The run's parallel degrees; unstated ones from the others and the device count."""
    n = run.device_count or 1
    cp, ep = run.cp or 1, run.ep or 1
    tp, pp, dp = run.tp, run.pp, run.dp
    if tp is None and pp is None and split_model_parallel and dp:
        mp = n // (dp * cp)
        tp = math.gcd(mp, per_node)
        pp = mp // tp
        notes.append(f"TP/PP split not stated: model-parallel size {mp} = devices / DP split as "
                     f"TP={tp} inside the node x PP={pp} across (Narayanan et al. 2021 sec. 3.3)")
    if tp is None:
        tp = 1
        notes.append("TP not stated: 1 assumed")
    if pp is None:
        pp = 1
        notes.append("PP not stated: 1 assumed")
    if dp is None:
        dp = n // (tp * pp * cp)
        notes.append(f"DP not stated: devices / (TP x PP x CP) = {dp}")
    if dp * tp * pp * cp != n:
        return (f"DP x TP x PP x CP = {dp * tp * pp * cp} but the row ran on {n} devices")
    return Degrees(dp, tp, pp, cp, ep)


def _degrees(case: TrainingCase, per_node: int, split_model_parallel: bool,
             notes: list[str]) -> Degrees | str:
    return run_degrees(from_case(case), per_node, split_model_parallel, notes)


def run_zero(run: TrainingRun, dp: int, per_node: int, d: StackDefaults,
             notes: list[str]) -> tuple[ZeroStage, int | None]:
    """ZeRO stage and HSDP shard group (None = all of dp) of a run: a stated group as large as
    dp is all of dp; "the node" is the node's devices when dp spans more than one node."""
    if run.zero is None:
        notes.append(f"sharding not stated: ZeRO-{int(d.zero)} ({d.source})")
        return d.zero, None
    group = run.shard_group if run.shard_group is not None and run.shard_group < dp else None
    if run.shard_in_node and per_node < dp:
        group = per_node
        notes.append(f"HSDP shard group: the node ({per_node} devices)")
    return run.zero, group


def zero_stage(text: str, dp: int, per_node: int, d: StackDefaults,
               notes: list[str]) -> tuple[ZeroStage, int | None]:
    """``sharding_zero`` words -> ZeRO stage and HSDP shard group (None = all of dp); the
    words are read by :func:`accelmap.validate.transcribe.read_zero`."""
    zero, group, in_node = read_zero(text)
    run = TrainingRun("", zero=zero, shard_group=group, shard_in_node=in_node)
    if zero is None and text and not fsdp_off(text):
        notes.append(f"sharding {text!r} not understood: read as not stated")
    return run_zero(run, dp, per_node, d, notes)


def as_stack(stated: Recompute, d: StackDefaults, notes: list[str]) -> Recompute:
    """A stated policy in the stack's own meaning: torchtitan's "selective" is per-op."""
    if stated is Recompute.SELECTIVE and d.selective is not stated:
        notes.append(f"recompute selective: {d.selective.value} in this stack ({d.source})")
        return d.selective
    return stated


def recompute(text: str, d: StackDefaults, notes: list[str]) -> Recompute:
    stated = parse_recompute(text)
    if stated is not None:
        return as_stack(stated, d, notes)
    notes.append(f"recompute {'not stated' if not text else repr(text)}: {d.recompute.value} "
                 f"({d.source})")
    return d.recompute


def _stated(value: bool | None, default: bool) -> bool:
    return default if value is None else value


def run_vpp(run: TrainingRun, pp: int, d: StackDefaults, spec: ModelSpec | None,
            notes: list[str]) -> int | str:
    """Virtual stages: the run's; interleaved without a count, the stack's rule
    (``StackDefaults.interleaved_vpp``) or its recipe (stacks.recipe_vpp); not stated, none."""
    if run.vpp is not None:
        return run.vpp
    if run.interleaved and pp > 1:
        if d.interleaved_vpp is not None:
            notes.append(f"interleaved, virtual stages not stated: vpp={d.interleaved_vpp} "
                         f"({d.release}: {d.interleaved_vpp} stages per rank when no split is "
                         "given)")
            return d.interleaved_vpp
        if spec is None:
            return "interleaved schedule without the number of virtual stages; write vpp"
        got = recipe_vpp(spec.id, spec.n_layers, pp)
        if isinstance(got, str):
            return got
        notes.append(f"interleaved, virtual stages not stated: vpp={got[0]} ({got[1]})")
        return got[0]
    if pp > 1:
        notes.append("interleaving not stated: none (plain 1F1B)")
    return 1


def run_split(run: TrainingRun, d: StackDefaults, spec: ModelSpec | None, pp: int, vpp: int,
              notes: list[str]) -> dict[str, Any]:
    """The pipeline split: the run's fields, else the stack's (stacks.silent_split) where the
    even split does not work, noted."""
    stated = {k: getattr(run, k) for k in ("first_stage_layers", "last_stage_layers",
                                           "embedding_in_split", "loss_in_split")
              if getattr(run, k) is not None}
    if stated or spec is None:
        return stated
    got = silent_split(d.stack, spec.id, spec.n_layers, pp, vpp)
    if got is None:
        return {}
    split, source = got
    notes.append(f"pipeline split not stated and {spec.n_layers} layers do not split evenly "
                 f"over pp={pp}" + (f" x vpp={vpp}" if vpp > 1 else "") + f": {source}")
    return split


def _local_micro_batch(global_batch: int, dp: int, parts: int, d: StackDefaults,
                       notes: list[str], rule: str = "") -> int | None:
    """The micro-batch of a stack that splits each data-parallel rank's batch into ``parts``
    micro-batches when the run states none: 1 where the release had no gradient accumulation
    (``StackDefaults.whole_local_batch``), torchtitan's count under pipelining
    (``StackDefaults.stage_microbatches``, named by ``rule``). None (noted) where the batch does
    not split so, which the stack refuses."""
    into = "the whole local batch" if parts == 1 else \
        f"{parts} micro-batches" + (f" ({rule})" if rule else "")
    if global_batch % (dp * parts):
        notes.append(f"global batch {global_batch} does not split over dp {dp} into {into}, "
                     f"as {d.release} needs when the micro-batch is not given")
        return None
    mb = global_batch // (dp * parts)
    notes.append(f"micro-batch not stated: global batch {global_batch} / dp {dp} into {into} "
                 f"= {mb} ({d.source})")
    return mb


def run_mapping(run: TrainingRun, cluster: Cluster, d: StackDefaults,
                notes: list[str], spec: ModelSpec | None = None) -> Mapping | str:
    """The run's Mapping, or the reason it cannot be built; unstated settings are the stack's
    defaults ``d``, each noted (the model ``spec`` picks its recipe's pipeline defaults)."""
    per_node = cluster.devices_per_node
    deg = run_degrees(run, per_node, d.split_model_parallel, notes)
    if isinstance(deg, str):
        return deg
    zero, group = run_zero(run, deg.dp, per_node, d, notes)
    if zero is ZeroStage.PARAMETERS and deg.pp > 1 and d.zero_with_pp is not None:
        zero = d.zero_with_pp
        notes.append(f"FSDP with pp={deg.pp}: parameters gathered once a step and gradients "
                     f"reduced on the last micro-batch (ZeRO-{int(zero)}'s traffic; {d.source})")
    vpp = run_vpp(run, deg.pp, d, spec, notes)
    if isinstance(vpp, str):
        return vpp
    split = run_split(run, d, spec, deg.pp, vpp, notes)
    mb = run.micro_batch
    if mb is None and run.global_batch and d.whole_local_batch and deg.pp == 1:
        mb = _local_micro_batch(run.global_batch, deg.dp, 1, d, notes)
    if mb is None and run.global_batch and d.stage_microbatches is not None and deg.pp > 1:
        parts = deg.pp if d.stage_microbatches is StageMicrobatches.PP_DEGREE else deg.pp * vpp
        mb = _local_micro_batch(run.global_batch, deg.dp, parts, d, notes,
                                f"{d.release}: {d.stage_microbatches.value}")
    if mb is None:
        mb = d.micro_batch
        notes.append(f"micro-batch not stated: {mb} ({d.source})")
    tp_overlap = _stated(run.tp_comm_overlap, d.tp_comm_overlap)
    sp = _stated(run.sequence_parallel, d.sequence_parallel)
    if deg.tp > 1:
        notes.append(f"sequence parallel {'on' if sp else 'off'}, TP comm overlap "
                     f"{'on' if tp_overlap else 'off'} ({d.source})")
    policy = None if run.recompute is None else as_stack(run.recompute, d, notes)
    if policy is None:
        policy = d.recompute
        notes.append(f"recompute not stated: {policy.value} ({d.source})")
    schedule = (Schedule(run.schedule) if run.schedule is not None else
                Schedule.INTERLEAVED if vpp > 1 else Schedule.ONE_F_ONE_B)
    return Mapping(dp=deg.dp, tp=deg.tp, pp=deg.pp, cp=deg.cp, ep=deg.ep,
                   sequence_parallel=sp, zero=zero, shard_group=group, micro_batch=mb,
                   virtual_stages=vpp, schedule=schedule,
                   recompute=policy, tp_comm_overlap=tp_overlap,
                   cp_comm=run.cp_comm or CpComm.P2P,
                   offload_activations=run.offload_activations, **split)


def training_mapping(case: TrainingCase, cluster: Cluster, d: StackDefaults,
                     notes: list[str]) -> Mapping | str:
    """The Mapping of a transcription row (read by ``validate/transcribe.py``), or the reason
    it cannot be built."""
    run = from_case(case)
    vpp = [p for p in run.problems if p.field == "vpp"]
    if vpp:
        return str(vpp[0])
    return run_mapping(run, cluster, d, notes)


def run_global_batch(run: TrainingRun, m: Mapping, notes: list[str]) -> int:
    if run.global_batch is not None:
        return run.global_batch
    accum = run.grad_accum or 1
    notes.append(f"global batch not stated: micro-batch x DP x accumulation "
                 f"= {m.micro_batch} x {m.dp} x {accum}")
    return m.micro_batch * m.dp * accum


def global_batch(case: TrainingCase, m: Mapping, notes: list[str]) -> int:
    return run_global_batch(from_case(case), m, notes)


def grad_dtype(precision: str, d: StackDefaults) -> DType:
    """Composer ``PURE`` mixed precision reduces gradients in bf16 (``DEFAULT``: fp32)."""
    return DType.BF16 if "pure" in precision.lower() else d.grad_dtype


def serve_mapping(case: InferenceCase, notes: list[str]) -> Mapping | str:
    p = case.parallel
    tp, pp, ep, dp = p.tp or 1, p.pp or 1, p.ep or 1, p.dp or 1
    n = p.devices or 1
    if tp * pp * dp != n:
        return f"TP x PP x DP = {tp * pp * dp} but the row ran on {n} devices"
    notes.append(f"serving tp={tp} pp={pp}" + (f" ep={ep}" if ep > 1 else "")
                 + (f" x {dp} replicas" if dp > 1 else ""))
    return Mapping.serving(tp=tp, pp=pp, ep=ep, replicas=dp)
