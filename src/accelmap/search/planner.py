"""Training planner: every valid mapping of a model on a cluster, ranked by an objective.

The search evaluates candidates with the same functions as ``accelmap estimate``:
``engine.train.layer_profile`` once per (tp, ep, cp, micro-batch, recompute) group, then
``engine.train.compose`` on a Mapping whose pp, vpp, ZeRO stage and offload are numpy arrays --
no second implementation. Rules come from ``mapping.constraints`` as array masks; each dropped
candidate is counted under the first rule it breaks, or under "memory" when it does not fit.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.cost.per_token import per_token, price_per_device_hour, tdp_w
from accelmap.cost.schedules import Schedule
from accelmap.engine import resolve_framework
from accelmap.engine.error_band import error_band
from accelmap.engine.plan import TrainPlanFigures
from accelmap.engine.profile import LayerProfile
from accelmap.engine.system import System
from accelmap.engine.train import OverlapPolicy, compose, layer_profile, train_step
from accelmap.hardware.cluster import Cluster
from accelmap.mapping.constraints import TRAINING_RULES, TrainingJob, training_masks
from accelmap.mapping.plan import Mapping, balanced_split, default_schedule
from accelmap.memory.band import MEMORY_ERROR_BAND, MemoryFit, is_over, is_tight
from accelmap.models.schema import ModelSpec
from accelmap.search.result import Objective, Plan, PlanResult, pareto_front
from accelmap.search.space import TrainingSpace
from accelmap.units import DType
from accelmap.workload import Recompute, Training

Progress = Callable[[int, int], None]


def _grid(space: TrainingSpace, cluster: Cluster, tp: int, cp: int, ep: int, mb: int,
          recompute: Recompute, n_layers: int) -> Mapping:
    """The candidate table of one (tp, cp, ep, micro-batch, recompute) group: a Mapping whose
    pp, vpp, ZeRO stage, offload, HSDP, TP-comm overlap and schedule run over the space, dp
    filling the cluster. Interleaving takes Megatron's interleaved 1F1B, otherwise 1F1B or
    ZB-H1; the split is the even one, or where Megatron refuses it the balanced uneven one
    (plan.balanced_split). A choice that changes nothing for a candidate (HSDP without ZeRO-3
    or inside one node, TP overlap at tp = 1, ZB-H1 without a pipeline or with interleaving)
    is left out, so no candidate is counted twice."""
    pp, vpp, zero, off, hsdp, tpo, zb = (a.ravel() for a in np.meshgrid(
        np.array(space.pp, dtype=float), np.array(space.vpp, dtype=float),
        np.array(space.zero), np.array(space.offload), np.array(space.hsdp),
        np.array(space.tp_overlap), np.array(space.zero_bubble), indexing="ij"))
    per_node = cluster.devices_per_node
    dp = cluster.devices / (tp * pp * cp)
    keep = ((~hsdp | ((zero >= 3) & (dp > per_node) & (dp % per_node == 0)))
            & (~tpo | (tp > 1)) & (~zb | ((pp > 1) & (vpp <= 1))))
    pp, vpp, zero, off, hsdp, tpo, zb, dp = (a[keep] for a in (pp, vpp, zero, off, hsdp, tpo,
                                                                zb, dp))
    first, last = balanced_split(n_layers, pp, vpp)
    schedule = np.where(zb, Schedule.ZERO_BUBBLE.value, default_schedule(vpp))
    return Mapping.for_world(cluster.devices, tp=tp, pp=pp, cp=cp, ep=ep, zero=zero,
                             micro_batch=mb, virtual_stages=vpp, recompute=recompute,
                             offload_optimizer=off, offload_params=off,
                             force_tp_across_nodes=space.force_tp,
                             schedule=schedule, first_stage_layers=first,
                             last_stage_layers=last,
                             shard_group=np.where(hsdp, float(per_node), dp),
                             tp_comm_overlap=tpo)


@dataclass
class _Tally:
    """What the search counted: candidates dropped under each rule (each under its first),
    evaluated, and left out as tight."""

    rejected: dict[str, int]
    evaluated: int = 0
    tight: int = 0


def _evaluate(job: TrainingJob, cand: Mapping, prof: Callable[[], LayerProfile],
              system: System, wl: Training, fw: FrameworkProfile, overlap: OverlapPolicy,
              tally: _Tally, include_tight: bool) -> list[dict[str, Any]]:
    """One candidate group's rows that pass every rule and fit: the rules as masks, then one
    vectorised ``compose`` over the survivors; the counts go to ``tally``."""
    tally.evaluated += cand.pp.size
    dropped = np.zeros(np.shape(cand.pp), dtype=bool)
    for name, bad in training_masks(job, cand).items():  # each under its first broken rule
        tally.rejected[name] += int(np.sum(bad & ~dropped))
        dropped |= bad
    ok = ~dropped
    if not ok.any():
        return []
    sel = cand.take(ok)
    r = compose(prof(), system, wl, fw, overlap, sel, detail=False)
    shape = np.shape(sel.pp)
    mem = np.broadcast_to(r.memory_total, shape)
    exact = np.broadcast_to(r.memory_exact, shape)
    elastic = np.broadcast_to(r.memory_elastic, shape)
    # over capacity beyond the error band (the allocator's reserve given back), or by exactly
    # counted bytes alone
    over = is_over(mem, system.memory_bytes, exact=exact, elastic=elastic)
    tight = is_tight(mem, system.memory_bytes, exact=exact, elastic=elastic)
    tally.rejected["memory"] += int(np.sum(over))
    tally.tight += int(np.sum(tight))
    fits = ~over & (include_tight | ~tight)
    tally.rejected[TIGHT_RULE] += int(np.sum(~over & ~fits))
    step = np.broadcast_to(r.step_time_s, shape)
    tps = np.broadcast_to(r.tokens_per_s, shape)
    mfu = np.broadcast_to(r.mfu, shape)
    js = np.flatnonzero(fits)
    return [{**row, "step_time_s": float(step[j]), "tokens_per_s": float(tps[j]),
             "mfu": float(mfu[j]), "memory_bytes": float(mem[j]),
             "memory_fit": (MemoryFit.TIGHT if tight[j] else MemoryFit.FITS).value}
            for j, row in zip(js, sel.to_dicts(js), strict=True)]


def _front(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The throughput-vs-memory Pareto front. Over plain figures first, the mapping written
    out for its members only: a validated Mapping per feasible row was 14 % of `plan --hw
    any` (90,000 rows, cProfile)."""
    bare = pareto_front([{"row": k, "tokens_per_s": r["tokens_per_s"],
                          "memory_per_device_bytes": r["memory_bytes"]}
                         for k, r in enumerate(rows)],
                        maximize="tokens_per_s", minimize="memory_per_device_bytes")
    return [{"mapping": _mapping(rows[p["row"]]), "tokens_per_s": p["tokens_per_s"],
             "memory_per_device_bytes": p["memory_per_device_bytes"]} for p in bare]


def _ranked(rows: list[dict[str, Any]]) -> Any:
    """Row indices, best first. On one cluster every objective ranks by tokens/s: time =
    tokens / rate, cost = price x devices x time, energy per token = TDP x devices / rate (the
    TDP bound of cost/energy.py). Ties (to 0.1 %) go to the simpler mapping: less recompute,
    no interleaving, lower ZeRO stage, no offload."""
    if not rows:
        return np.array([], dtype=int)
    score = np.array([r["tokens_per_s"] for r in rows])
    rank = [("none", "selective", "full").index(r["recompute"]) * 1000 + r["vpp"] * 100
            + r["zero"] * 10 + r["offload"] for r in rows]
    rounded = np.round(score / np.max(np.abs(score)) * 1000)
    return np.lexsort((np.array(rank), -rounded))


def plan_training(spec: ModelSpec, cluster: Cluster, seq_len: int, global_batch: int, *,
                  objective: Objective = Objective.THROUGHPUT,
                  framework: Framework | str | FrameworkProfile = Framework.MEGATRON,
                  top: int = 10,
                  tokens_to_train: float = 0.0, dtype: DType = DType.BF16,
                  space: TrainingSpace | None = None, overlap: OverlapPolicy | None = None,
                  progress: Progress | None = None, explain: bool = True,
                  workload: Training | None = None,
                  profile: CalibrationProfile | None = None,
                  include_tight: bool = False) -> PlanResult:
    """``workload`` (optional) carries precision, gradient dtype, flash attention and dropout
    settings; its batch and sequence are replaced by ``global_batch`` and ``seq_len``.
    ``profile``: a measured calibration of the cluster's accelerator (accelmap calibrate).
    Plans within the memory model's error band of capacity (``memory.band``: "tight") are left
    out, and counted in the notes, unless ``include_tight``."""
    start = time.perf_counter()
    space = space or TrainingSpace.default(spec, cluster, seq_len)
    fw = resolve_framework(framework, Framework.MEGATRON)
    system = System.of(cluster, profile)
    dev = system.device
    if workload is not None:
        # the space chooses recompute per candidate (the Mapping owns it)
        wl = replace(workload, batch=global_batch, seq_len=seq_len,
                     tokens_to_train=tokens_to_train, recompute=None)
    else:
        wl = Training(batch=global_batch, seq_len=seq_len, dtype=dtype,
                      tokens_to_train=tokens_to_train)
    job = TrainingJob(spec, cluster, global_batch, seq_len)
    overlap = overlap or OverlapPolicy()
    price, tdp = price_per_device_hour(cluster.accelerator), tdp_w(cluster.accelerator)
    tally = _Tally({r.name: 0 for r in TRAINING_RULES} | {"memory": 0, TIGHT_RULE: 0})
    rows: list[dict[str, Any]] = []
    groups = list(itertools.product(space.tp, space.ep, space.cp, space.micro_batch,
                                    space.recompute))
    interrupted = False
    try:
        for i, (tp, ep, cp, mb, rec) in enumerate(groups):
            if progress:
                progress(i, len(groups))
            cand = _grid(space, cluster, tp, cp, ep, mb, rec, spec.n_layers)
            # the profile is built only when a candidate of the group passes the rules
            prof = partial(layer_profile, spec, dev, fw, wl,
                           Mapping(tp=tp, ep=ep, cp=cp, micro_batch=mb, recompute=rec))
            rows += _evaluate(job, cand, prof, system, wl, fw, overlap, tally, include_tight)
    except KeyboardInterrupt:
        interrupted = True

    for row in rows:  # the one definition of each (cost/per_token.py)
        row["usd_per_million_tokens"], row["energy_j_per_token_tdp"] = per_token(
            cluster.accelerator, cluster.devices, row["tokens_per_s"])
    order = _ranked(rows)
    plans = []
    seen: set[tuple[float, float]] = set()
    for k in order:  # equal-performance twins (e.g. selective recompute under flash) shown once
        key = (round(rows[k]["tokens_per_s"], 3), round(rows[k]["memory_bytes"], -6))
        if key in seen:
            continue
        seen.add(key)
        plans.append(_plan(rows[k], cluster, tokens_to_train, fw.name.value))
        if len(plans) >= top:
            break
    rejected, evaluated, n_tight = tally.rejected, tally.evaluated, tally.tight
    notes = [tight_note(n_tight, include_tight)] if n_tight else []
    if objective is Objective.COST and price is None:
        notes.append(f"{cluster.accelerator.id} has no catalog price: ranked by throughput")
    if objective is Objective.ENERGY and tdp is None:
        notes.append(f"{cluster.accelerator.id} has no catalog TDP: ranked by throughput")
    explanation = (explain_top(spec, cluster, wl, rows, order, framework, overlap, profile,
                               force_tp=space.force_tp)
                   if explain and rows and not interrupted else [])
    return PlanResult(objective=objective, plans=plans, evaluated=evaluated, feasible=len(rows),
                      seconds=time.perf_counter() - start,
                      rejected_by_rule={k: v for k, v in rejected.items() if v},
                      explanation=explanation,
                      pareto={"throughput_vs_memory": _front(rows)[:50]},
                      interrupted=interrupted, notes=notes, calibration=dev.calibration)


# Candidates left out for being within the memory error band of capacity (include_tight off)
TIGHT_RULE = "memory_tight"


def tight_note(n: int, included: bool) -> str:
    """The planners' note on plans within the memory model's error band of capacity."""
    band = f"the memory model's {MEMORY_ERROR_BAND:.1%} error band of capacity"
    if included:
        return f"{n} plans within {band} included, marked memory_fit 'tight'"
    return f"{n} plans within {band} left out; --include-tight to see them"


def _mapping(row: dict[str, Any]) -> dict[str, Any]:
    return Mapping.from_dict(row).to_dict()


def _plan(row: dict[str, Any], cluster: Cluster, tokens: float, stack: str) -> Plan:
    band = error_band("train", stack, cluster.devices, cluster.accelerator.device_class.value)
    usd, joules = row["usd_per_million_tokens"], row["energy_j_per_token_tdp"]
    figures = TrainPlanFigures(
        tokens_per_s=row["tokens_per_s"],
        tokens_per_s_per_device=row["tokens_per_s"] / cluster.devices,
        memory_per_device_bytes=row["memory_bytes"], memory_fit=row["memory_fit"],
        usd_per_million_tokens=usd, energy_j_per_token_tdp=joules,
        error_band=band.to_dict() if band else None,
        mfu=row["mfu"], step_time_s=row["step_time_s"],
        time_to_train_s=tokens / row["tokens_per_s"] if tokens else None,
        cost_to_train_usd=usd * tokens / 1e6 if tokens and usd is not None else None,
        energy_to_train_j=joules * tokens if tokens and joules is not None else None)
    return Plan(mapping=Mapping.from_dict(row), cluster=cluster.name,
                accelerator=cluster.accelerator.id, devices=cluster.devices, feasible=True,
                figures=figures)


def to_mapping(row: dict[str, Any], force_tp: bool = False) -> Mapping:
    return Mapping.from_dict(row).with_(force_tp_across_nodes=force_tp)


ALTERNATIVE_FIELDS = ("tp", "pp", "zero", "recompute", "micro_batch", "cp", "vpp",
                      "tp_comm_overlap")


def explain_top(spec: ModelSpec, cluster: Cluster, wl: Training, rows: list[dict[str, Any]],
                order: Any, framework: Framework | str | FrameworkProfile,
                overlap: OverlapPolicy,
                profile: CalibrationProfile | None = None, force_tp: bool = False) -> list[str]:
    """What limits the best plan, and why the common alternatives lose."""
    best = rows[order[0]]
    est = train_step(spec, System.of(cluster, profile), wl, to_mapping(best, force_tp),
                     resolve_framework(framework, Framework.MEGATRON), overlap)
    step = est.step_time_s or 0.0
    bd = est.time
    out = []
    limits = [f"{k.split('/')[-1].upper()} communication {v / step:.0%}"
              for k, v in bd.items() if k.startswith("exposed_comm/") and v / step >= 0.01]
    limits += [f"pipeline bubble {bd['bubble'] / step:.0%}"] if bd["bubble"] / step >= 0.01 else []
    phases = est.rollup()
    compute = sum(phases.get(k, 0.0) for k in ("forward", "recompute", "backward")) / step
    mem = float(est.memory.total) / 1e9
    cap = est.memory.capacity / 1e9
    out.append(f"best: {to_mapping(best, force_tp).describe()}: compute {compute:.0%} of the step"
               + (", exposed " + ", ".join(limits) if limits else "")
               + f"; memory {mem:.0f} of {cap:.0f} GB")
    for fld in ALTERNATIVE_FIELDS:
        others = [k for k in order if rows[k].get(fld, False) != best.get(fld, False)]
        if not others:
            continue
        alt = rows[others[0]]
        slower = best["tokens_per_s"] / alt["tokens_per_s"] - 1
        out.append(f"best with {fld}={alt.get(fld, False)} instead of {best.get(fld, False)}: "
                   f"{slower:+.0%} step time"
                   f" ({to_mapping(alt, force_tp).describe()})")
    return out
