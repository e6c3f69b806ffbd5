"""Compare accelerators on one job: for each part, the devices that hold the model, the best
mapping on them (or on a fixed count or budget), and per-user, per-system and per-device speed,
latency, $/M tokens and J/token, with the reason for every missing number.

Rules (bounded, so all 54 catalog parts take a few seconds):

- **Device counts** lie on a grid: powers of two below the part's node (8 devices, or the
  devices per node of its single-node system preset: 16 for Trainium2, 72 for GB200 NVL72), then
  whole nodes (8, 16, 24 ...; SRAM machines need hundreds of chips for a 70B model). Training
  uses powers of two only (data parallelism must divide the global batch).
- **Devices needed** (serving): the smallest grid count whose most-sharded single replica fits
  in memory (``engine.serve.serving_memory``: weights, the batch's KV over prompt + output, the
  runtime): tp = the largest power of two inside the scale-up domain (the cluster's, capped by
  the part's catalog ``scale_up_domain``) that the heads allow, then
  pipeline stages up to one layer each. Found by bisection over the grid, which assumes more
  devices never need more memory per device. Training: ZeRO-3 data parallelism over N devices
  (tp=1, micro-batch 1, full recompute), judged by the training estimate's memory.
- **Best mapping** on N devices (serving): for each valid tp (powers of two inside the
  scale-up domain), the fewest pipeline stages that fit; replicas = N // (tp x pp) fill the
  rest; the best by the objective. Expert parallelism is not searched (ep=1).
- **Clusters**: ``N x part`` as ``hardware.cluster.parse_cluster`` builds it; where that cannot
  (fewer devices than the preset's node), one node of N with tiers from the part's own links,
  and the row says so.
- **Precision**: the same for every part (default bf16): the requested format where the part
  computes it, else the other 16-bit format, else int8 (W8A8) where only int8 exists; each
  fallback is noted. ``best_precision``: each part's smallest native matrix format (fp8, else
  int8 W8A8, else 16-bit).
- **Money and energy**: ``usd_per_million_tokens`` = N x price per device-hour / tokens per
  hour (the catalog's price quote); ``energy_j_per_token_tdp`` = N x TDP / tokens per second,
  the upper bound (both ``cost/per_token.py``, the keys every result uses). Missing quotes leave
  the number empty with a note.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

import numpy as np

from accelmap.catalog import Catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.execution import execution_model as execution_model_of
from accelmap.cost.execution import streams_training_weights
from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.cost.per_token import per_token, price_per_device_hour, tdp_w
from accelmap.engine import resolve_framework
from accelmap.engine.dataflow import dataflow_serve
from accelmap.engine.layout import fewest_stages, tp_options
from accelmap.engine.result import ServeStep, TrainStep
from accelmap.engine.serve import serve_step, serving_memory
from accelmap.engine.system import System
from accelmap.engine.train import train_step
from accelmap.errors import AccelmapError
from accelmap.fanout import Runner
from accelmap.hardware.cluster import Cluster, parse_cluster
from accelmap.hardware.schema import Accelerator
from accelmap.mapping.plan import Mapping, Offload, ZeroStage
from accelmap.models.schema import ModelSpec
from accelmap.search.space import powers_of_two
from accelmap.units import Dimension, DType, format_quantity
from accelmap.workload import Inference, Recompute, Training

Progress = Callable[[int, int], None]

MAX_DEVICES = 16384  # the largest count searched for one part
NODE = 8  # devices per node without a single-node preset (parse_cluster's default)
QUANT_GROUP = 128  # weights per scale for weight-only int8/int4 (AWQ/GPTQ default)
HALF = (DType.BF16, DType.FP16)


class CompareObjective(StrEnum):
    """What ranks the rows (and picks each part's mapping): a figure of ``CompareRow``."""

    TOKENS_PER_S_PER_USER = "tokens_per_s_per_user"
    TOKENS_PER_S = "tokens_per_s"
    TOKENS_PER_S_PER_DEVICE = "tokens_per_s_per_device"
    USD_PER_MILLION_TOKENS = "usd_per_million_tokens"
    ENERGY_J_PER_TOKEN_TDP = "energy_j_per_token_tdp"

    @property
    def higher_is_better(self) -> bool:
        return self.value.startswith("tokens")

    @classmethod
    def _missing_(cls, value: object) -> CompareObjective | None:
        """The names before one vocabulary (issue 25) still read: usd_per_mtok, j_per_token."""
        return {"usd_per_mtok": cls.USD_PER_MILLION_TOKENS,
                "j_per_token": cls.ENERGY_J_PER_TOKEN_TDP}.get(str(value))


@dataclass(frozen=True)
class CompareRow:
    """One part of a comparison: the devices (and the rule that chose them), the best mapping
    on them, its figures under the keys every result uses (``engine/result.py``,
    ``cost/per_token.py``), or ``feasible`` False and the ``reason``. Serving rows carry TTFT,
    TPOT and speed per user, training rows step time and MFU; ``notes`` say every fallback
    and every missing number's cause."""

    accelerator: str
    device_class: str  # "class" in JSON
    precision: str
    price_usd_per_h: float | None
    tdp_w: float | None
    notes: list[str] = field(default_factory=list)  # appended to while the row is built
    feasible: bool = False
    reason: str | None = None
    devices: int | None = None
    devices_rule: str | None = None
    cluster: str | None = None
    mapping: str | None = None
    tokens_per_s_per_user: float | None = None
    tokens_per_s: float | None = None
    tokens_per_s_per_device: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    step_time_s: float | None = None
    mfu: float | None = None
    usd_per_million_tokens: float | None = None
    energy_j_per_token_tdp: float | None = None
    memory_per_device_bytes: float | None = None
    execution_model: str | None = None
    error_band: str | None = None
    # the price per device-hour at which this part matches the cheapest part's $/M tokens
    breakeven_usd_per_h: float | None = None
    breakeven_vs: str | None = None

    def figure(self, objective: CompareObjective) -> float | None:
        value: float | None = getattr(self, objective.value)
        return value

    def to_dict(self) -> dict[str, Any]:
        out = {("class" if f.name == "device_class" else f.name): getattr(self, f.name)
               for f in fields(self)}
        out["notes"] = list(self.notes)
        return out


@dataclass(frozen=True)
class CompareJob:
    """The job every part runs: serving (batch per replica, prompt, output) or training
    (sequence length, global batch in sequences); the precision rule; the device count rule
    (None: devices needed; ``devices``: exactly N; ``budget_usd_h``: what the budget buys)."""

    train: bool = False
    batch: int = 1
    prompt: int = 2048
    output: int = 256
    seq: int = 4096
    global_batch: int = 1024
    precision: DType = DType.BF16
    best_precision: bool = False
    devices: int | None = None
    budget_usd_h: float | None = None
    objective: CompareObjective = CompareObjective.TOKENS_PER_S_PER_USER
    framework: str | None = None
    # a measured calibration of one part (accelmap calibrate): used for that part only
    profile: CalibrationProfile | None = None

    def system(self, cl: Cluster) -> System:
        """``cl`` as a System, with the profile where it was measured on ``cl``'s part."""
        p = self.profile
        return System.of(cl, p if p is not None and p.accelerator_id == cl.accelerator.id
                         else None)


# -- precision --------------------------------------------------------------------------------

def _native(acc: Accelerator, d: DType) -> bool:
    return acc.peak(d) is not None


def serving_precision(acc: Accelerator, job: CompareJob) -> tuple[DType, DType, list[str]]:
    """(weights, activations) for this part, and notes on any fallback. Weight-only int8/int4
    keep 16-bit activations (AWQ/GPTQ); a part without a 16-bit path runs int8 W8A8."""
    half = next((h for h in HALF if _native(acc, h)), None)
    notes: list[str] = []
    if job.best_precision:
        for d in (DType.FP8, DType.INT8):
            if _native(acc, d):
                return d, d, [f"best precision: {d.value} W8A8 (the first native of fp8, "
                              "int8, 16-bit; fp4 not searched)"]
        if half:
            return half, half, [f"best precision: {half.value} (no 8-bit matrix path)"]
    want = job.precision
    if want in HALF:
        if _native(acc, want):
            return want, want, notes
        if half:
            return half, half, [f"{want.value} -> {half.value}: no {want.value} path"]
    elif want is DType.FP8:
        if _native(acc, want):
            return want, want, notes
        if _native(acc, DType.INT8):
            return DType.INT8, DType.INT8, ["fp8 -> int8 W8A8: no fp8 path (same 8 bits)"]
        if half:
            return half, half, [f"fp8 -> {half.value}: no 8-bit path"]
    elif want in (DType.INT8, DType.INT4) and half:
        return want, half, notes  # weight-only: the matmuls run at the activations' 16 bits
    if _native(acc, DType.INT8):
        return DType.INT8, DType.INT8, [f"{want.value} -> int8 W8A8: the part computes int8 "
                                        "only"]
    d = acc.dtypes[0]
    return d, d, [f"{want.value} -> {d.value}: the only format the part computes"]


# -- device counts and clusters ---------------------------------------------------------------

def node_size(acc: Accelerator, cat: Catalog) -> int:
    """Devices per node: the part's single-node preset, else eight (parse_cluster's rule)."""
    per = [p.devices_per_node for p in cat.systems.values()
           if p.accelerator == acc.id and p.nodes == 1]
    return max(per) if per else NODE


def grid(acc: Accelerator, cat: Catalog, train: bool) -> list[int]:
    """Device counts tried: powers of two below a node, then whole nodes (training: powers of
    two only)."""
    if train:
        return list(powers_of_two(MAX_DEVICES))
    unit = node_size(acc, cat)
    return [n for n in powers_of_two(unit) if n < unit] + list(
        range(unit, MAX_DEVICES + 1, unit))


def buildable(counts: list[int], acc: Accelerator, cat: Catalog) -> list[int]:
    """The counts a cluster can be built for: a part whose catalog gives no link beyond its
    scale-up domain stops there (hardware/cluster.py refuses larger clusters), so the largest
    buildable count is found by bisection (buildability falls off once, as the count grows)."""

    def ok(i: int) -> bool:
        try:
            cluster_for(acc, counts[i], cat)
        except AccelmapError:
            return False
        return True

    if not counts or ok(len(counts) - 1):
        return counts
    lo, hi = 0, len(counts) - 1  # counts[0] = 1 device is always buildable
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return counts[:lo + 1]


def cluster_for(acc: Accelerator, n: int, cat: Catalog) -> tuple[Cluster, str | None]:
    """N devices of ``acc``: one device alone, else ``parse_cluster('Nxid')``; where that
    cannot build it (fewer devices than the preset's node, or not whole nodes), one node of N
    (or nodes of eight) with tiers from the part's links, and a note saying so."""
    if n == 1:
        return Cluster(acc.id, acc, 1, 1, (), None, "one device"), None
    try:
        return parse_cluster(f"{n}x{acc.id}", cat), None
    except AccelmapError as e:
        shape = f"1x{n}" if n <= node_size(acc, cat) else f"{n // NODE}x{NODE}"
        if n > node_size(acc, cat) and n % NODE:
            raise
        cl = parse_cluster(f"{shape}x{acc.id}", cat)
        why = str(e).split(": ", 1)[-1].split(";")[0]
        return cl, f"{n}x{acc.id} is no catalog cluster today ({why}): used {cl.name}, " \
                   "tiers from the part's own links"


def _holds(spec: ModelSpec, wl: Inference, acc: Accelerator, n: int, cat: Catalog,
           chunk: int | None) -> bool:
    """Whether N devices hold one replica, sharded as far as allowed."""
    widest = _widest_tp(spec, acc, n, cat)
    return widest is not None and fewest_stages(
        spec, wl, widest[1], n // widest[1], acc, chunk) is not None


def _widest_tp(spec: ModelSpec, acc: Accelerator, n: int, cat: Catalog
               ) -> tuple[Cluster, int] | None:
    """The cluster of N devices and its widest valid tensor-parallel degree, if any."""
    try:
        cl, _ = cluster_for(acc, n, cat)
    except AccelmapError:
        return None
    tps = tp_options(spec, cl, n)
    return (cl, tps[-1]) if tps else None


def _smallest(counts: list[int], ok: Callable[[int], bool]) -> int | None:
    """The first count for which ``ok`` holds, by bisection (``ok`` assumed monotone)."""
    if not counts or not ok(counts[-1]):
        return None
    lo, hi = -1, len(counts) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(counts[mid]):
            hi = mid
        else:
            lo = mid
    return counts[hi]


# -- one part ---------------------------------------------------------------------------------

def _serving_workload(acc: Accelerator, job: CompareJob) -> tuple[Inference, list[str]]:
    w, act, notes = serving_precision(acc, job)
    return Inference(batch=job.batch, prompt_len=job.prompt, output_len=job.output,
                     weight_dtype=w, act_dtype=act, kv_dtype=act,
                     quant_group=QUANT_GROUP), notes


def _count(acc: Accelerator, job: CompareJob, counts: list[int],
           needed: Callable[[], int | None], notes: list[str]
           ) -> tuple[int | None, str | None, str]:
    """(devices, reason if none, rule) under the job's device rule; ``counts`` the grid."""
    if job.devices is not None:
        return job.devices, None, "fixed"
    if job.budget_usd_h is not None:
        if acc.price is None:
            return None, "not priced: the catalog has no price quote, so a budget buys no " \
                         "count of it", "budget"
        price = acc.price.usd_per_hour.value
        can = int(job.budget_usd_h // price)
        fit = [c for c in counts if c <= can]
        if not fit:
            return None, (f"${job.budget_usd_h:g}/h buys {can} devices at ${price:g}/h; "
                          "not even one"), "budget"
        if fit[-1] != can:
            notes.append(f"${job.budget_usd_h:g}/h buys {can} at ${price:g}/h; "
                         f"{fit[-1]} used (whole nodes)")
        return fit[-1], None, "budget"
    n = needed()
    if n is None:
        cap = (f" (ZeRO-3 data parallelism; at most the {job.global_batch:,} sequences per "
               "step)") if job.train else ""
        return None, (f"does not fit on up to {counts[-1]:,} devices{cap} (memory "
                      "rule)"), "needed"
    return n, None, "needed"


def _price_energy(acc: Accelerator, n: int, tokens_per_s: float | None,
                  notes: list[str]) -> tuple[float | None, float | None]:
    """(usd_per_million_tokens, energy_j_per_token_tdp) of ``n`` devices (``cost/per_token.py``),
    a note for each the catalog cannot give."""
    if acc.price is None:
        notes.append("no price published: $/M tokens not computed")
    if acc.tdp is None:
        notes.append("no TDP published: J/token not computed")
    return per_token(acc, n, tokens_per_s)


def _finite(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _better(job: CompareJob, a: ServeStep, b: ServeStep | None) -> bool:
    if b is None:
        return True
    if job.objective is CompareObjective.TOKENS_PER_S_PER_USER:
        return (a.tpot_s or math.inf) < (b.tpot_s or math.inf)
    return (a.tokens_per_s or 0.0) > (b.tokens_per_s or 0.0)  # the same N: also $ and J


def serve_row(spec: ModelSpec, acc: Accelerator, job: CompareJob, cat: Catalog
              ) -> CompareRow:
    """One part's serving row."""
    ex = execution_model_of(acc)
    fw = resolve_framework(job.framework, ex.serving, acc.vendor).for_model(
        spec, serving=True)
    chunk = fw.prefill_chunk_tokens
    wl, notes = _serving_workload(acc, job)
    row = _row(acc, job, wl.weight_dtype, notes)
    counts = buildable(grid(acc, cat, False), acc, cat)

    def holds(c: int) -> bool:
        if not ex.layer_pipelined:
            return _holds(spec, wl, acc, c, cat, chunk)
        try:  # the dataflow model's own rule: the chips hold the model's state
            cl, _ = cluster_for(acc, c, cat)
        except AccelmapError:
            return False
        return bool(dataflow_serve(spec, job.system(cl), wl, Mapping.serving(), fw).feasible)

    n, reason, rule = _count(acc, job, counts, lambda: _smallest(counts, holds), notes)
    if n is None and rule == "needed" and len(counts) < len(grid(acc, cat, False)):
        reason = (f"does not fit on {counts[-1]} device(s), and the catalog gives {acc.id} no "
                  "link to join more (add a scale-up or scale-out link to its YAML) "
                  "(memory rule)")
    row = replace(row, devices_rule=rule)
    if n is None:
        if rule == "needed":
            reason = _most_sharded(spec, wl, acc, cat, chunk) or reason
        return replace(row, reason=reason)
    row = replace(row, devices=n)
    try:
        cl, note = cluster_for(acc, n, cat)
    except AccelmapError as e:
        return replace(row, reason=f"no cluster of {n} x {acc.id}: {e}")
    if note:
        notes.append(note)
    row = replace(row, cluster=cl.name)
    system = job.system(cl)
    best: ServeStep | None = None
    timeless: list[str] = []
    # a layer-pipelined class (SRAM machines) places the model over all its chips itself
    # (engine/dataflow.py); other classes try each tp with the fewest stages that fit
    options = ([(1, 1)] if ex.layer_pipelined else
               [(tp, pp) for tp in tp_options(spec, cl, n)
                if (pp := fewest_stages(spec, wl, tp, n // tp, acc, chunk)) is not None])
    for tp, pp in options:
        m = Mapping.serving(tp=tp, pp=pp, replicas=1 if ex.layer_pipelined else n // (tp * pp))
        est = (dataflow_serve(spec, system, wl, m, fw) if ex.layer_pipelined
               else serve_step(spec, system, wl, m, fw, limits=False))
        if not est.feasible:
            continue
        if _finite(est.tpot_s) is None or _finite(est.ttft_s) is None:
            timeless.append(f"tp={tp} pp={pp}")
        elif _better(job, est, best):
            best = est
    if best is None and timeless:
        return replace(row, reason=f"{', '.join(timeless)} fits in {n} x {acc.id}, but the "
                                 f"catalog gives no link joining those devices ({cl.name}: "
                                 f"{_tiers(cl)}), so no time can be predicted")
    if best is None:
        return replace(row, reason=f"no mapping of {spec.id} fits in {n} x {acc.id} "
                                 "(memory rule)")
    m = best.mapping
    used = n if ex.layer_pipelined else int(m.world)  # a dataflow model spans every chip
    if used < n:
        notes.append(f"{n - used} of {n} devices idle (replicas of tp x pp = "
                     f"{int(m.devices_per_replica)} devices)")
    tps = _finite(best.tokens_per_s)
    usd, j = _price_energy(acc, n, tps, notes)
    return replace(row, feasible=True, reason=None,
            mapping=f"tp={m.tp} pp={m.pp} x{m.replicas}",
            tokens_per_s_per_user=1.0 / best.tpot_s if best.tpot_s else None,
            tokens_per_s=tps, tokens_per_s_per_device=tps / n if tps else None,
            ttft_s=_finite(best.ttft_s), tpot_s=_finite(best.tpot_s),
            usd_per_million_tokens=usd, energy_j_per_token_tdp=j,
            memory_per_device_bytes=float(best.memory.total),
            execution_model=f"{ex.name} ({fw.name.value} profile)",
            error_band=best.error_band.text if best.error_band else None)


def _tiers(cl: Cluster) -> str:
    return ", ".join(f"{t.role.value} over {t.domain_size:,}" for t in cl.tiers) or "no tiers"


def _most_sharded(spec: ModelSpec, wl: Inference, acc: Accelerator, cat: Catalog,
                  chunk: int | None) -> str | None:
    """Why nothing holds the model: the most-sharded replica (tp across the scale-up domain,
    one layer per stage) and what one device of it still needs."""
    n = node_size(acc, cat) * spec.n_layers
    widest = _widest_tp(spec, acc, n, cat)
    if widest is None:
        return None
    cl, tp = widest
    mem = serving_memory(spec, wl, Mapping.serving(tp=tp, pp=spec.n_layers),
                         acc.memory_bytes, chunk, runtime=execution_model_of(acc))
    top = sorted(((float(v), k) for k, v in mem.items.items()), reverse=True)[:2]
    return (f"does not fit even one layer per stage: tp={tp} (scale-up domain "
            f"{cl.scale_up_domain}) x pp={spec.n_layers} needs "
            f"{format_quantity(float(mem.total), Dimension.BYTES)} per device, the part has "
            f"{format_quantity(acc.memory_bytes, Dimension.BYTES)} ("
            + ", ".join(f"{k} {format_quantity(v, Dimension.BYTES)}" for v, k in top) + ")")


def _row(acc: Accelerator, job: CompareJob, dtype: DType, notes: list[str]) -> CompareRow:
    return CompareRow(acc.id, acc.device_class.value, dtype.value,
                      price_per_device_hour(acc), tdp_w(acc), notes)


def train_row(spec: ModelSpec, acc: Accelerator, job: CompareJob, cat: Catalog
              ) -> CompareRow:
    """One part's training row: ZeRO-3 data parallelism, tp=1, micro-batch 1, full
    recompute."""
    w, _, notes = serving_precision(acc, replace(job, precision=job.precision
                                                 if job.precision in (*HALF, DType.FP8)
                                                 else DType.BF16))
    dtype = w if w in (*HALF, DType.FP8) else next((h for h in HALF if _native(acc, h)), w)
    row = _row(acc, job, dtype, notes)
    if dtype not in (*HALF, DType.FP8):
        return replace(row, reason=f"no 16-bit or fp8 matrix path to train in (the part computes "
                                 f"{', '.join(d.value for d in acc.dtypes)})",
                notes=[n for n in notes if "W8A8" not in n])
    wl = Training(batch=job.global_batch, seq_len=job.seq, dtype=dtype,
                  recompute=Recompute.FULL)
    ex = execution_model_of(acc)
    fw = resolve_framework(job.framework, Framework.FSDP if ex.training is Framework.MEGATRON
                           else ex.training).for_model(spec)
    cache: dict[int, TrainStep | None] = {}
    streaming = streams_training_weights(acc)

    def est(n: int) -> TrainStep | None:
        if n not in cache:
            cache[n] = None
            if n <= job.global_batch and job.global_batch % n == 0:
                try:
                    cl, _ = cluster_for(acc, n, cat)
                    cache[n] = (_streamed(spec, job.system(cl), wl, n, fw) if streaming else
                                train_step(spec, job.system(cl), wl, Mapping.for_world(
                                    n, zero=ZeroStage(3 if n > 1 else 0), micro_batch=1,
                                    recompute=Recompute.FULL), fw))
                except AccelmapError:
                    cache[n] = None
        return cache[n]

    counts = [c for c in grid(acc, cat, True) if c <= job.global_batch]
    n, reason, rule = _count(acc, job, counts, lambda: _smallest(
        counts, lambda c: bool((e := est(c)) is not None and e.feasible)), notes)
    row = replace(row, devices_rule=rule)
    if n is None:
        return replace(row, reason=reason)
    row = replace(row, devices=n)
    e = est(n)
    if e is None:
        return replace(row, reason=f"no training mapping on {n} x {acc.id} (the global batch of "
                                 f"{job.global_batch} sequences must split over {n})")
    if not e.feasible:
        return replace(row, reason=e.reason)
    try:
        cl, note = cluster_for(acc, n, cat)
        row = replace(row, cluster=cl.name)
        if note:
            notes.append(note)
    except AccelmapError:
        pass
    tps = _finite(e.tokens_per_s)
    if tps is None:
        return replace(row, reason="the engine gives no finite step time (no link between "
                                 "these devices in the catalog)")
    if streaming:
        fetch = (e.communication_s or {}).get("offload", 0.0)
        notes.append(f"one device is a whole wafer system; streaming the weights over its "
                     f"system I/O is {min(fetch / (e.step_time_s or 1), 1):.0%} of the step "
                     "(compute runs under it); no published training run of the class checks "
                     "it")
    usd, j = _price_energy(acc, n, tps, notes)
    return replace(row, feasible=True,
            mapping=(f"dp={n} weight-streaming mb={e.mapping.micro_batch} recompute=full"
                        if streaming else f"dp={n} zero={3 if n > 1 else 0} mb=1 "
                                          "recompute=full"),
            tokens_per_s=tps, tokens_per_s_per_device=tps / n,
            step_time_s=_finite(e.step_time_s), mfu=_finite(e.mfu),
            usd_per_million_tokens=usd, energy_j_per_token_tdp=j,
            memory_per_device_bytes=float(e.memory.total),
            execution_model=f"{ex.name} ({fw.name.value} profile)",
            error_band=e.error_band.text if e.error_band else None)


def _streamed(spec: ModelSpec, system: System, wl: Training, n: int, fw: FrameworkProfile
              ) -> TrainStep | None:
    """A weight-streaming part's training (cost/execution.py ``streams_training_weights``):
    data parallelism over the wafers, weights and optimizer in the external tier (``offload``),
    and the micro-batch that gives the fastest step among those whose activations fit on the
    wafer: weights stream once per micro-batch, so larger ones amortise them."""
    best: TrainStep | None = None
    for mb in powers_of_two(wl.batch // n):
        m = Mapping.for_world(n, zero=ZeroStage(0), micro_batch=mb, recompute=Recompute.FULL,
                              offload_params=Offload.CPU, offload_optimizer=Offload.CPU)
        r = train_step(spec, system, wl, m, fw)
        if not r.feasible:
            if best is None:
                best = r  # the smallest micro-batch's reason, when none fits
            break
        if best is None or not best.feasible or (r.step_time_s or math.inf) < (
                best.step_time_s or math.inf):
            best = r
    return best


def compare_row(spec: ModelSpec, acc: Accelerator, job: CompareJob, cat: Catalog
                ) -> CompareRow:
    """One part's row; a part the engine cannot predict (no bandwidth in the catalog, no
    cluster) is a row with the reason, not an error."""
    with np.errstate(all="ignore"):
        try:
            return (train_row if job.train else serve_row)(spec, acc, job, cat)
        except AccelmapError as e:
            w, _, notes = serving_precision(acc, job)
            return replace(_row(acc, job, w, notes), reason=str(e))


def rank_key(job: CompareJob) -> Callable[[CompareRow], tuple[int, float, str]]:
    """Feasible rows with the objective's number first (best first), then feasible rows
    without it, then the rest; ties by id."""
    obj = job.objective

    def key(r: CompareRow) -> tuple[int, float, str]:
        v = r.figure(obj)
        if not r.feasible:
            return (2, 0.0, r.accelerator)
        if v is None:
            return (1, 0.0, r.accelerator)
        return (0, -v if obj.higher_is_better else v, r.accelerator)

    return key


def compare(spec: ModelSpec, parts: list[Accelerator], job: CompareJob, cat: Catalog,
            progress: Progress | None = None, runner: Runner | None = None
            ) -> tuple[list[CompareRow], float]:
    """Every part's row, ranked, and the wall time in seconds; ``runner`` (--ray) fans the
    parts out (``accelmap.fanout``, the catalog shipped once): the same rows."""
    t0 = time.perf_counter()
    if runner is not None and runner.distributed:
        rows = runner.map(_compare_point, parts, (spec, job, cat), "parts")
    else:
        rows = []
        for i, acc in enumerate(parts):
            rows.append(compare_row(spec, acc, job, cat))
            if progress:
                progress(i + 1, len(parts))
    rows.sort(key=rank_key(job))
    return rows, time.perf_counter() - t0


def _compare_point(ctx: tuple[ModelSpec, CompareJob, Catalog], acc: Accelerator
                   ) -> CompareRow:
    spec, job, cat = ctx
    return compare_row(spec, acc, job, cat)
