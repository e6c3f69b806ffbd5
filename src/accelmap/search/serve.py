"""Serving planner: search tp x pp x ep x replicas x batch x weight/KV precision for one model on
one cluster, score every candidate with ``engine.serve.serve_step`` (the formulas of ``accelmap
estimate``; no second implementation) and rank by an objective.

Search space (documented rules, all powers of two):

- tp: 1, 2, 4 ... up to the cluster's scale-up domain; candidates that break a ``check_serving``
  rule (heads not divisible, KV heads neither split nor replicated) are counted under that rule.
- pp: 1, and 2 ... min(8, layers) only together with the largest valid tp. In
  ``serve_step`` a lone batch visits the stages one after the other (no speed-up), so
  swapping pipeline stages for tensor ranks or replicas never loses while tp can still grow;
  pipeline parallelism is for when tp is capped by the scale-up domain (multi-node replicas).
- ep (MoE only): 1 and each power of two <= tp dividing the expert count: the expert-parallel
  group is the tensor-parallel group of one stage (vLLM ``--enable-expert-parallel``), never across
  stages, which hold different layers.
- replicas = devices // (tp x pp): the whole cluster serves.
- batch per replica: 1, 2, 4 ... <= ``max_batch``.
- weights: the 16-bit format (bf16, fp16 where the device lacks bf16), fp8 where the accelerator has
  an FP8 peak, int8 and int4 weight-only (group 128); KV cache: 16-bit and fp8 (fp8 devices only).
  Activations are fp8 with fp8 weights, else 16-bit.

Pruning (exact, not heuristic): memory, TTFT and TPOT all grow with the batch, so once a
configuration breaks one of them at batch b, every larger batch is counted under the same rule
without being evaluated. ``rejected_by_rule`` therefore counts every candidate of the space that is
not feasible, whether evaluated or pruned; ``evaluated`` counts ``serve_step`` calls.

Ranking: one plan per configuration (tp, pp, ep, weights, KV), at the batch that is best for the
objective, so the top list shows distinct mappings; the Pareto fronts keep every batch.
Cost counts every device of the cluster (rented whether used or not); energy counts the devices in
use at TDP.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.cost.per_token import per_token, price_per_device_hour, tdp_w
from accelmap.engine import class_framework, resolve_framework
from accelmap.engine.plan import PlanFigures, ServePlanFigures
from accelmap.engine.result import Estimate, ServeStep
from accelmap.engine.serve import serve_step
from accelmap.engine.system import System
from accelmap.hardware.cluster import Cluster
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.plan import Mapping
from accelmap.memory.band import MemoryFit
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import ByteKind
from accelmap.search.planner import TIGHT_RULE, tight_note
from accelmap.search.result import (
    Objective,
    Plan,
    PlanResult,
    ServingChoice,
    pareto_front,
    plan_mapping_dict,
)
from accelmap.search.space import powers_of_two
from accelmap.units import Dimension, DType, format_quantity
from accelmap.workload import Inference

QUANT_GROUP = 128  # weights per scale for weight-only int8/int4 (AWQ/GPTQ default)
MAX_PP = 8  # deepest pipeline searched

Config = tuple[int, int, int, DType, DType]  # tp, pp, ep, weight dtype, KV dtype


@dataclass
class _Point:
    """One candidate: a configuration at one batch; ``rule`` is None when it is feasible."""

    config: Config
    batch: int
    rule: str | None
    reason: str = ""
    figures: ServePlanFigures | None = None
    est: Estimate | None = None


def _half(cluster: Cluster) -> DType:
    """The 16-bit format: bf16, or fp16 on devices without a bf16 path."""
    acc = cluster.accelerator
    return DType.BF16 if acc.peak(DType.BF16) or not acc.peak(DType.FP16) else DType.FP16


def _dtype(text: DType | str) -> DType:
    from accelmap.errors import InputError

    try:
        return DType(str(text).lower())
    except ValueError:
        raise InputError(f"unknown dtype {text!r}; use one of "
                         f"{', '.join(d.value for d in DType)}") from None


def _dtypes(cluster: Cluster, weight_dtypes: Sequence[DType | str] | None,
            kv_dtypes: Sequence[DType | str] | None, quantize: bool = False
            ) -> tuple[list[DType], list[DType], list[str]]:
    """The weight and KV formats searched: the lists given, else the 16-bit format only, and
    with ``quantize`` (``--allow-quantization``) fp8 (where the part has an FP8 path), int8 and
    int4 weights and an fp8 KV cache too: a plan never changes the model's numerics unasked,
    and says which formats it searched."""
    acc = cluster.accelerator
    half = _half(cluster)
    fp8 = acc.peak(DType.FP8) is not None
    if quantize:
        ws = [_dtype(w) for w in weight_dtypes] if weight_dtypes else (
            [half, *([DType.FP8] if fp8 else []), DType.INT8, DType.INT4])
        kvs = ([_dtype(k) for k in kv_dtypes] if kv_dtypes
               else [half, *([DType.FP8] if fp8 else [])])
    else:
        ws = [_dtype(w) for w in weight_dtypes] if weight_dtypes else [half]
        kvs = [_dtype(k) for k in kv_dtypes] if kv_dtypes else [half]
    notes = [] if weight_dtypes and kv_dtypes else [  # formats the caller did not name: said
        f"weights {'/'.join(w.value for w in ws)}, KV cache {'/'.join(k.value for k in kvs)} "
        "searched" + ("" if quantize else " (--allow-quantization adds fp8/int8/int4 weights "
                                          "and an fp8 KV cache)")]
    if not fp8 and (DType.FP8 in ws or DType.FP8 in kvs):
        notes.append(f"{acc.id} has no FP8 path: fp8 weights/KV left out of the search")
        ws = [w for w in ws if w is not DType.FP8]
        kvs = [k for k in kvs if k is not DType.FP8]
    return ws, kvs, notes


def _configs(spec: ModelSpec, cluster: Cluster, ws: list[DType], kvs: list[DType]
             ) -> list[Config]:
    tps = powers_of_two(cluster.scale_up_domain)
    valid = [t for t in tps if not check_serving(spec, cluster, Mapping.serving(tp=t))]
    tp_max = max(valid, default=1)
    out: list[Config] = []
    for tp in tps:
        pps = [p for p in powers_of_two(min(MAX_PP, spec.n_layers)) if tp * p <= cluster.devices]
        for pp in pps if tp == tp_max else [1]:
            # vLLM's --enable-expert-parallel spreads the experts over all tp ranks of a replica
            # (EP size = TP x DP), so a replica runs ep = 1 or ep = tp, nothing between
            eps = [e for e in sorted({1, tp}) if spec.moe and spec.moe.num_experts % e == 0] or [1]
            out += [(tp, pp, ep, w, kv) for ep in eps for w in ws for kv in kvs]
    return out


def _workload(prompt_len: int, output_len: int, batch: int, w: DType, kv: DType,
              half: DType) -> Inference:
    act = DType.FP8 if w is DType.FP8 else (w if w in (DType.BF16, DType.FP16) else half)
    return Inference(batch=batch, prompt_len=prompt_len, output_len=output_len, weight_dtype=w,
                     act_dtype=act, kv_dtype=kv, quant_group=QUANT_GROUP)


class _Score:
    """The objective: a sort key (smaller is better) and a value with its name for sentences.
    ``FIELDS``: objective -> (name, metric key, higher is better); throughput otherwise."""

    FIELDS: ClassVar[dict[Objective, tuple[str, str, bool]]] = {
        Objective.COST: ("cost per token", "usd_per_million_tokens", False),
        Objective.ENERGY: ("energy per token (TDP bound)", "energy_j_per_token_tdp", False),
        Objective.LATENCY: ("TPOT", "tpot_s", False),
    }

    def __init__(self, objective: Objective, price: float | None, tdp: float | None) -> None:
        self.notes: list[str] = []
        obj = self.base(objective)
        if obj is Objective.COST and price is None:
            self.notes.append("no price in the catalog for this accelerator: ranked by throughput")
            obj = Objective.THROUGHPUT
        if obj is Objective.ENERGY and tdp is None:
            self.notes.append("no TDP in the catalog for this accelerator: ranked by throughput")
            obj = Objective.THROUGHPUT
        self.objective = obj
        self.name, self.field, self.higher_better = self.FIELDS.get(
            obj, ("throughput", "tokens_per_s", True))

    @staticmethod
    def base(objective: Objective) -> Objective:
        return objective

    def key(self, f: PlanFigures) -> tuple[float, float]:
        v = float(getattr(f, self.field))
        return (-v if self.higher_better else v, -f.tokens_per_s)

    def compare(self, alt: PlanFigures, best: PlanFigures) -> str:
        a, b = float(getattr(alt, self.field)), float(getattr(best, self.field))
        pct = abs(a - b) / b * 100 if b else 0.0
        worse = a < b if self.higher_better else a > b
        word = ("lower" if self.higher_better else "higher") if worse else (
            "higher" if self.higher_better else "lower")
        if pct < 0.05:
            return f"same {self.name}"
        return f"{pct:.0f}% {word} {self.name}"


def plan_serving(spec: ModelSpec, cluster: Cluster, prompt_len: int, output_len: int, *,
                 ttft_s: float | None = None, tpot_s: float | None = None,
                 objective: Objective | str = Objective.THROUGHPUT,
                 framework: Framework | str | FrameworkProfile = "vllm", top: int = 10,
                 weight_dtypes: Sequence[DType | str] | None = None,
                 kv_dtypes: Sequence[DType | str] | None = None, max_batch: int = 1024,
                 progress: Callable[[int, int], None] | None = None,
                 profile: CalibrationProfile | None = None,
                 include_tight: bool = False, quantize: bool = False) -> PlanResult:
    """Best serving mappings of ``spec`` on ``cluster`` for requests of ``prompt_len`` prompt and
    ``output_len`` generated tokens, under optional TTFT/TPOT targets (seconds); ``profile`` is
    a measured calibration of the cluster's accelerator (accelmap calibrate). Points within the
    memory model's error band of capacity ("tight", ``memory.band``) are left out, and counted
    in the notes, unless ``include_tight``."""
    from accelmap.errors import InputError

    if output_len < 1:
        raise InputError("serving plans rank generated tokens: give output_len >= 1")
    if max_batch < 1:
        raise InputError(f"max_batch must be at least 1, got {max_batch}")
    start = time.perf_counter()
    obj = Objective(objective)
    acc = cluster.accelerator
    price, tdp = price_per_device_hour(acc), tdp_w(acc)
    score = _Score(obj, price, tdp)
    ws, kvs, notes = _dtypes(cluster, weight_dtypes, kv_dtypes, quantize)
    system = System.of(cluster, profile)  # also checks the profile's device
    calibration = system.device.calibration
    fw = resolve_framework(framework, class_framework(system, training=False), acc.vendor)
    configs = _configs(spec, cluster, ws, kvs)
    half = _half(cluster)
    batches = powers_of_two(max_batch)
    at = _SweepSetting(spec, cluster, system, fw, prompt_len, output_len, half, ttft_s, tpot_s,
                       include_tight, progress, len(configs) * len(batches))
    sw = _Sweep(batches)
    interrupted = False
    try:
        for config in configs:
            _sweep(at, sw, config)
    except KeyboardInterrupt:
        interrupted = True
        notes.append(f"interrupted after {sw.evaluated} evaluations: best plans found so far")
    points, rejected, evaluated, n_tight = sw.points, sw.rejected, sw.evaluated, sw.n_tight

    feasible = [p for ps in points.values() for p in ps if p.rule is None]
    best = {c: min((p for p in ps if p.rule is None), key=lambda p: score.key(_m(p)))
            for c, ps in points.items() if any(p.rule is None for p in ps)}
    ranked = sorted(best.values(), key=lambda p: score.key(_m(p)))[:top]
    plans = [_plan(p, cluster) for p in ranked]
    pareto = {"latency_vs_throughput": _front(feasible, "tokens_per_s", "tpot_s")}
    if price is not None:
        pareto["throughput_vs_cost"] = _front(feasible, "tokens_per_s",
                                              "usd_per_million_tokens")
    explanation = _explain(ranked[0], points, best, score, cluster, batches,
                           ttft_s, tpot_s) if ranked else _explain_none(rejected)
    if n_tight:
        notes.append(tight_note(n_tight, include_tight))
    return PlanResult(obj, plans, evaluated, len(feasible), time.perf_counter() - start,
                      dict(sorted(rejected.items(), key=lambda kv_: -kv_[1])), explanation,
                      pareto, interrupted, notes + score.notes, calibration)


@dataclass(frozen=True)
class _SweepSetting:
    """What every configuration's batch sweep shares: model, cluster as a system, framework,
    request lengths, 16-bit dtype, TTFT/TPOT targets (s), whether tight points rank, and the
    progress callback with its total of points."""

    spec: ModelSpec
    cluster: Cluster
    system: System
    fw: FrameworkProfile
    prompt_len: int
    output_len: int
    half: DType
    ttft_s: float | None
    tpot_s: float | None
    include_tight: bool
    progress: Callable[[int, int], None] | None
    total: int


@dataclass
class _Sweep:
    """The sweep so far: every point per configuration, rejected points per rule, serve_step
    evaluations, points done (for progress) and tight points met."""

    batches: tuple[int, ...]
    points: dict[Config, list[_Point]] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    evaluated: int = 0
    done: int = 0
    n_tight: int = 0

    def reject(self, config: Config, from_batch: int, rule: str, reason: str) -> None:
        """The configuration's batches from ``from_batch`` on, ruled out by ``rule``."""
        for b in self.batches[from_batch:]:
            self.points[config].append(_Point(config, b, rule, reason))
        n = len(self.batches) - from_batch
        self.rejected[rule] = self.rejected.get(rule, 0) + n
        self.done += n


def _sweep(at: _SweepSetting, sw: _Sweep, config: Config) -> None:
    """One configuration at batch 1, 2, 4 ...: each point evaluated until a rule breaks (that
    batch and the larger ones rejected by it); tight points left out unless they rank."""
    tp, pp, ep, w, kv = config
    sw.points[config] = []
    m = Mapping.serving(tp=tp, pp=pp, ep=ep, replicas=None, world=at.cluster.devices)
    bad = check_serving(at.spec, at.cluster, m)
    if bad:
        sw.reject(config, 0, bad[0].rule, bad[0].sentence)
    for i, b in enumerate([] if bad else sw.batches):
        est = serve_step(at.spec, at.system,
                         _workload(at.prompt_len, at.output_len, b, w, kv, at.half), m, at.fw,
                         limits=False)
        sw.evaluated += 1
        rule, reason = _violation(est, at.ttft_s, at.tpot_s)
        if rule:
            sw.reject(config, i, rule, reason)
            break
        if est.memory_fit is MemoryFit.TIGHT:
            sw.n_tight += 1
            if not at.include_tight:  # left out; a larger batch may be tight too
                sw.points[config].append(_Point(
                    config, b, TIGHT_RULE, "memory within the memory model's error "
                    "band of capacity (tight)"))
                sw.rejected[TIGHT_RULE] = sw.rejected.get(TIGHT_RULE, 0) + 1
                sw.done += 1
                continue
        sw.points[config].append(_Point(config, b, None, "", _figures(
            est, m, b, w, kv, at.cluster), est))
        sw.done += 1
        if at.progress:
            at.progress(sw.done, at.total)
    if at.progress:
        at.progress(sw.done, at.total)


def _serving(p: _Point) -> ServingChoice:
    _, _, _, w, kv = p.config
    return ServingChoice(batch=p.batch, weight_dtype=w, kv_dtype=kv)


def _plan(p: _Point, cluster: Cluster) -> Plan:
    assert p.est is not None
    return Plan(p.est.mapping, cluster.name, cluster.accelerator.id, cluster.devices, True,
                _m(p), serving=_serving(p))


def _m(p: _Point) -> ServePlanFigures:
    assert p.figures is not None
    return p.figures


def _violation(est: ServeStep, ttft: float | None, tpot: float | None
               ) -> tuple[str | None, str]:
    if not est.feasible:
        return str(est.violated_rule or "memory"), est.reason or ""
    est_ttft, est_tpot = float(est.ttft_s or 0.0), float(est.tpot_s or 0.0)
    if ttft is not None and est_ttft > ttft:
        return "ttft_target", (f"TTFT {est_ttft * 1e3:.0f} ms exceeds the "
                               f"{ttft * 1e3:.0f} ms target")
    if tpot is not None and est_tpot > tpot:
        return "tpot_target", (f"TPOT {est_tpot * 1e3:.1f} ms exceeds the "
                               f"{tpot * 1e3:.1f} ms target")
    return None, ""


def _figures(est: Estimate, m: Mapping, batch: int, w: DType, kv: DType, cluster: Cluster
             ) -> ServePlanFigures:
    assert isinstance(est, ServeStep)
    tps = float(est.tokens_per_s or 0.0)
    usd, joules = per_token(cluster.accelerator, cluster.devices, tps)
    return ServePlanFigures(
        tokens_per_s=tps, tokens_per_s_per_device=tps / cluster.devices,
        memory_per_device_bytes=float(est.memory.total), memory_fit=est.memory_fit.value,
        usd_per_million_tokens=usd, energy_j_per_token_tdp=joules,
        error_band=est.error_band.to_dict() if est.error_band else None,
        ttft_s=float(est.ttft_s or 0.0), tpot_s=float(est.tpot_s or 0.0),
        latency_error_band=(est.latency_error_band.to_dict() if est.latency_error_band
                            else None),
        batch=batch, replicas=int(m.replicas), memory_capacity_bytes=float(est.memory.capacity),
        weight_dtype=w.value, kv_dtype=kv.value)


def _front(points: list[_Point], maximize: str, minimize: str) -> list[dict[str, Any]]:
    rows = [{"mapping": plan_mapping_dict(p.est.mapping if p.est else Mapping.serving(),
                                          _serving(p)),
             maximize: getattr(_m(p), maximize), minimize: getattr(_m(p), minimize)}
            for p in points]
    return pareto_front(rows, maximize, minimize)


def _label(c: Config, batch: int | None = None) -> str:
    tp, pp, ep, w, kv = c
    s = f"tp={tp}" + (f" pp={pp}" if pp > 1 else "") + (f" ep={ep}" if ep > 1 else "")
    s += f", {w.value} weights, {kv.value} KV"
    return s + (f", batch {batch}" if batch is not None else "")


def _limits(p: _Point, cluster: Cluster) -> list[str]:
    """What bounds the top plan's decode step and memory (from its own Estimate)."""
    est, m = p.est, _m(p)
    assert est is not None
    tpot = m.tpot_s
    dec = est.times.get("decode", [])
    mem_s = sum(float(t.total_s) for t in dec if t.bound == "memory")
    cmp_s = sum(float(t.total_s) for t in dec if t.bound == "compute")
    over_s = sum(float(t.overhead_s) * float(t.op.count) for t in dec)
    streamed = {k: sum(float(t.op.bytes.get(k, 0.0)) * float(t.op.count) for t in dec)
                for k in (ByteKind.WEIGHTS, ByteKind.KV_CACHE)}
    kind = "memory-bound" if mem_s >= cmp_s else "compute-bound"
    out = [f"decode is {kind}: memory-bound kernels (weights {streamed[ByteKind.WEIGHTS] / 1e9:.1f}"
           f" GB + KV {streamed[ByteKind.KV_CACHE] / 1e9:.1f} GB per step per device) take "
           f"{mem_s / tpot:.0%} of the {tpot * 1e3:.1f} ms step, compute-bound ones "
           f"{cmp_s / tpot:.0%}" + (f", kernel overheads {over_s / tpot:.0%}" if over_s else "")]
    assert isinstance(est, ServeStep)
    comm = (est.communication_s or {}).get("decode_step", {})
    for axis, what in (("tp", "TP all-reduce"), ("ep", "EP all-to-all"), ("pp", "PP send")):
        if comm.get(axis, 0.0) > 0:
            out.append(f"{what} is {comm[axis] / tpot:.0%} of TPOT "
                       f"({(est.axes or {})[axis]})")
    kv_bytes = float(est.memory.items.get("kv_cache", 0.0))
    gb = Dimension.BYTES  # SI bytes, as every memory table prints them
    out.append(f"memory {format_quantity(m.memory_per_device_bytes, gb)} of "
               f"{format_quantity(m.memory_capacity_bytes, gb)} per device "
               f"(KV cache {format_quantity(kv_bytes, gb)})")
    out.append(f"TTFT {m.ttft_s * 1e3:.0f} ms, TPOT {tpot * 1e3:.1f} ms, "
               f"{m.tokens_per_s:,.0f} tokens/s over {m.replicas} replica(s) on "
               f"{cluster.devices} devices")
    return out


def _alt(name: str, config: Config, points: dict[Config, list[_Point]],
         best: dict[Config, _Point], top: _Point, score: _Score, why_missing: str) -> str:
    if config in best:
        alt = best[config]
        return f"{name}: {score.compare(_m(alt), _m(top))} (at its best batch, {alt.batch})"
    if points.get(config):
        first = points[config][0]
        why = first.reason if "rule)" in first.reason else f"{first.reason} ({first.rule} rule)"
        return f"{name}: infeasible at every batch: {why}"
    return f"{name}: {why_missing}"


def _explain(top: _Point, points: dict[Config, list[_Point]], best: dict[Config, _Point],
             score: _Score, cluster: Cluster, batches: Sequence[int], ttft: float | None,
             tpot: float | None) -> list[str]:
    out = [f"best by {score.name}: {_label(top.config, top.batch)}", *_limits(top, cluster)]
    tp, pp, ep, w, kv = top.config
    for new_tp in (tp // 2, tp * 2):
        if new_tp < 1:
            continue
        c = (new_tp, pp, min(ep, new_tp), w, kv)
        why = (f"crosses the {cluster.scale_up_domain}-device scale-up domain"
               if new_tp > cluster.scale_up_domain else
               "outside the search space (pp > 1 only with the largest tp; tp x pp <= devices)")
        out.append(_alt(f"tp={new_tp}", c, points, best, top, score, why))
    for other_pp in [q for q in dict.fromkeys(c[1] for c in points if c[0] == tp) if q != pp]:
        out.append(_alt(f"pp={other_pp}", (tp, other_pp, ep, w, kv), points, best, top, score,
                        "not searched"))
    for other_ep in [e for e in dict.fromkeys(c[2] for c in points if c[0] == tp) if e != ep]:
        out.append(_alt(f"ep={other_ep}", (tp, pp, other_ep, w, kv), points, best, top, score,
                        "not searched"))
    for other in [x for x in dict.fromkeys(c[3] for c in points) if x is not w]:
        out.append(_alt(f"{other.value} weights", (tp, pp, ep, other, kv), points, best, top,
                        score, "not searched"))
    for other in [x for x in dict.fromkeys(c[4] for c in points) if x is not kv]:
        out.append(_alt(f"{other.value} KV", (tp, pp, ep, w, other), points, best, top, score,
                        "not searched"))
    by_batch = {p.batch: p for p in points[top.config]}
    for b in (top.batch // 2, top.batch * 2):
        p = by_batch.get(b)
        if p is None:
            if b > batches[-1]:
                out.append(f"batch {b}: above max_batch {batches[-1]}")
            continue
        if p.rule is not None:
            out.append(f"batch {b}: {p.reason or p.rule}")
        else:
            out.append(f"batch {b}: {score.compare(_m(p), _m(top))}")
    return out


def _explain_none(rejected: dict[str, int]) -> list[str]:
    if not rejected:
        return ["no candidate was evaluated"]
    rules = ", ".join(f"{k}: {v}" for k, v in sorted(rejected.items(), key=lambda kv: -kv[1]))
    return [f"no feasible serving plan; candidates rejected by rule: {rules}"]
