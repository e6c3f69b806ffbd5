"""The throughput-vs-interactivity frontier of serving (issue 22 part 6): for each accelerator,
closed-loop concurrency sweeps (``serving.scenario``, the ``concurrency`` scenario: N clients,
each sending its next request when the last one finished, as ``vllm bench serve
--max-concurrency N`` and genai-perf do) over every layout, and the Pareto front of output
tokens/s per device against tokens/s per user.

The two axes are the ones public GPU-comparison dashboards and NVIDIA's AIConfigurator plot:
output tokens/s per device (throughput, what a device-hour buys) and tokens/s per user (1 /
median TPOT, interactivity). A point is on the front when no other point of its accelerator is
at least as good on both and better on one.

Layouts swept: every tensor-parallel degree inside the scale-up domain that the heads allow
(``engine.layout.tp_options``), replicas filling the devices; for an MoE model also experts
sharded over the same group (ep = tp), and at the widest tp that layout with DP attention
(attention data-parallel over the group, SGLang ``--enable-dp-attention``:
``Mapping.dp_attention``; the published DP-attention deployments span the node, dp = tp = 8,
and one DP-attention layout per part keeps ``--hw any`` near its time goal);
with a drafter (``speculation``: MTP heads or a draft
model, at the acceptance rate the user gives), every layout also with speculative decoding, its
draft length chosen per point (``serving.speculative``). A layout runs the concurrencies that
give each replica the same whole number of clients (fewer clients than replicas would leave
replicas idle). Not swept yet, and said in the notes: pipeline stages and disaggregated
prefill/decode pools (issue 22 part 4).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelmap.cost.framework import FrameworkProfile
from accelmap.cost.per_token import per_token
from accelmap.engine import class_framework, resolve_framework
from accelmap.engine.layout import tp_options
from accelmap.engine.system import System
from accelmap.errors import AccelmapError, InputError
from accelmap.fanout import Runner
from accelmap.hardware.cluster import Cluster
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.serving.scenario import MAX_CONCURRENCY, Load, Scenario, ServingRun, run
from accelmap.serving.speculative import Speculation
from accelmap.workload import Inference

Progress = Callable[[int, int], None]

# Concurrencies swept by default: powers of two, as published sweeps step them (1 to 512
# clients over the system)
DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# Requests simulated per point: enough for each client to send several (the closed loop
# reaches its steady state after the first round; vllm bench serve sends 10 per client, the
# concurrency scenario's default), at least MIN, at most MAX
REQUESTS_PER_CLIENT = 4
MIN_REQUESTS = 64
MAX_REQUESTS = 2048
NOT_SWEPT = ("pipeline stages and disaggregated prefill/decode pools are not swept yet "
             "(issue 22); speculative decoding only with --mtp/--accept")


@dataclass(frozen=True)
class FrontierPoint:
    """One simulated point: a layout at a concurrency, its speed per device and per user,
    latencies (medians, seconds) and money and energy per token (``cost/per_token.py``)."""

    layout: str
    tp: int
    ep: int
    replicas: int
    concurrency: int
    draft_len: int  # draft tokens per step of speculative decoding (0: plain decoding)
    tokens_per_s_per_device: float
    tokens_per_s_per_user: float
    ttft_p50_s: float | None
    tpot_p50_s: float | None
    usd_per_million_tokens: float | None
    energy_j_per_token_tdp: float | None
    # expected error of the throughput and of the latencies, from validation residuals of
    # similar published runs (engine/error_band.py); None: too few such runs
    error_band: str | None = None
    latency_error_band: str | None = None
    on_front: bool = False
    dp_attention: bool = False  # attention data-parallel over the tp group

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class FrontierCurve:
    """One accelerator's points (every feasible layout x concurrency), which of them are on
    its front, and the layouts that did not run with their reasons."""

    accelerator: str
    cluster: str
    devices: int
    points: tuple[FrontierPoint, ...]
    skipped: tuple[str, ...] = ()

    @property
    def error_bands(self) -> list[str]:
        """The expected errors its front's figures carry (throughput, then latency)."""
        return sorted({b for p in self.front for b in (p.error_band, p.latency_error_band)
                       if b})

    @property
    def front(self) -> list[FrontierPoint]:
        """The front, from the most interactive point to the highest throughput."""
        return sorted((p for p in self.points if p.on_front),
                      key=lambda p: -p.tokens_per_s_per_user)

    def to_dict(self) -> dict[str, Any]:
        return {"accelerator": self.accelerator, "cluster": self.cluster,
                "devices": self.devices, "front": [p.to_dict() for p in self.front],
                "points": [p.to_dict() for p in self.points], "skipped": list(self.skipped)}


@dataclass(frozen=True)
class Frontier:
    """The frontier of ``model`` on each cluster, for requests of ``isl`` prompt and ``osl``
    output tokens at the given precisions."""

    model: str
    isl: int
    osl: int
    weights: str
    concurrency: tuple[int, ...]
    curves: tuple[FrontierCurve, ...]
    seconds: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "isl": self.isl, "osl": self.osl, "weights": self.weights,
                "concurrency": list(self.concurrency), "seconds": round(self.seconds, 3),
                "frontier": [c.to_dict() for c in self.curves], "notes": list(self.notes)}


def check_concurrency(values: Sequence[int]) -> tuple[int, ...]:
    """The concurrencies to sweep, each a whole number of clients from 1 to MAX_CONCURRENCY."""
    out = tuple(sorted(set(values)))
    bad = [v for v in out if isinstance(v, bool) or not 1 <= v <= MAX_CONCURRENCY]
    if not out or bad:
        raise InputError(f"--concurrency takes whole numbers of clients from 1 to "
                         f"{MAX_CONCURRENCY:,}, e.g. 1,8,64; got "
                         f"{', '.join(str(v) for v in bad) or 'none'}")
    return out


def layouts(spec: ModelSpec, cluster: Cluster) -> list[Mapping]:
    """The layouts swept on ``cluster`` (module doc): every tp the heads and the scale-up
    domain allow, replicas filling the devices; ep = tp too for an MoE model."""
    out = []
    tps = tp_options(spec, cluster, cluster.devices)
    for tp in tps:
        eps = (1, tp) if spec.is_moe and tp > 1 else (1,)
        out += [Mapping.serving(tp=tp, ep=ep, replicas=cluster.devices // tp) for ep in eps]
    if spec.is_moe and tps and tps[-1] > 1:  # DP attention over the widest group
        tp = tps[-1]
        out.append(Mapping.serving(tp=tp, ep=tp, replicas=cluster.devices // tp,
                                   dp_attention=True))
    return out


def _label(m: Mapping, draft_len: int = 0) -> str:
    return (f"tp={m.tp}" + (f" ep={m.ep}" if m.ep > 1 else "")
            + (" dp-attn" if m.dp_attention else "") + f" x{m.replicas}"
            + (f" spec k={draft_len}" if draft_len else ""))


def _point(r: ServingRun, m: Mapping, c: int, cluster: Cluster) -> FrontierPoint | None:
    met = r.metrics
    k = int((met.get("speculative") or {}).get("draft_len") or 0)
    per_user = met.get("tokens_per_s_per_user")
    out_tps = met.get("output_tokens_per_s")
    if not per_user or not out_tps or not math.isfinite(float(per_user)):
        return None
    usd, joules = per_token(cluster.accelerator, cluster.devices, float(out_tps))
    return FrontierPoint(_label(m, k), int(m.tp), int(m.ep), int(m.replicas), c, k,
                         float(out_tps) / cluster.devices, float(per_user),
                         (met.get("ttft_s") or {}).get("p50"),
                         (met.get("tpot_s") or {}).get("p50"), usd, joules,
                         r.error_band.text if r.error_band else None,
                         r.latency_error_band.text if r.latency_error_band else None,
                         dp_attention=bool(m.dp_attention))


def on_front(points: Sequence[FrontierPoint]) -> list[bool]:
    """For each point, whether no other point is at least as good on both axes (tokens/s per
    device and per user) and better on one."""
    return [not any(q.tokens_per_s_per_device >= p.tokens_per_s_per_device
                    and q.tokens_per_s_per_user >= p.tokens_per_s_per_user
                    and (q.tokens_per_s_per_device > p.tokens_per_s_per_device
                         or q.tokens_per_s_per_user > p.tokens_per_s_per_user)
                    for q in points) for p in points]


Context = tuple[ModelSpec, Inference, FrameworkProfile | str | None, tuple[int, ...],
                Speculation | None]


def curve(ctx: Context, cluster: Cluster, progress: Progress | None = None) -> FrontierCurve:
    """One accelerator's sweep: every layout at every concurrency (and with the drafter, if
    one is given), simulated."""
    spec, wl, framework, concurrency, speculation = ctx
    system = System.of(cluster)
    fw = resolve_framework(framework, class_framework(system, training=False),
                           system.accelerator.vendor)
    points: list[FrontierPoint] = []
    skipped: list[str] = []
    maps = layouts(spec, cluster)
    if not maps:
        skipped.append(f"no tensor-parallel degree fits the heads of {spec.id} within the "
                       f"scale-up domain of {cluster.name}")
    for i, m in enumerate(maps):
        for sp in (None, speculation) if speculation is not None else (None,):
            points += _sweep(spec, system, wl, m, fw, concurrency, sp, skipped)
        if progress:
            progress(i + 1, len(maps))
    flags = on_front(points)
    marked = tuple(FrontierPoint(**{**p.to_dict(), "on_front": f})
                   for p, f in zip(points, flags, strict=True))
    return FrontierCurve(cluster.accelerator.id, cluster.name, cluster.devices, marked,
                         tuple(skipped))


def _sweep(spec: ModelSpec, system: System, wl: Inference, m: Mapping, fw: FrameworkProfile,
           concurrency: tuple[int, ...], sp: Speculation | None, skipped: list[str]
           ) -> list[FrontierPoint]:
    """One layout (with the drafter or without) at every concurrency; why it cannot run is
    added to ``skipped``."""
    out: list[FrontierPoint] = []
    what = _label(m) + (f" with {sp.method}" if sp is not None else "")
    # fewer clients than replicas leaves replicas idle, and the scenario splits clients evenly
    # over replicas: a layout's points start at one client per replica
    for c in (c for c in concurrency if c % int(m.replicas) == 0):
        load = Load(Scenario.CONCURRENCY, concurrency=c,
                    requests=min(max(REQUESTS_PER_CLIENT * c, MIN_REQUESTS), MAX_REQUESTS))
        try:
            r = run(spec, system, wl, m, fw, load, speculation=sp)
        except AccelmapError as e:
            skipped.append(f"{what}: {e}")
            break
        if not r.feasible:
            skipped.append(f"{what}: {r.reason}")
            break  # the layout's memory does not depend on the clients
        p = _point(r, m, c, system.cluster)
        if p is not None:
            out.append(p)
    return out


def frontier(spec: ModelSpec, clusters: Sequence[Cluster], wl: Inference, *,
             framework: FrameworkProfile | str | None = None,
             concurrency: Sequence[int] = DEFAULT_CONCURRENCY, weights: str = "",
             speculation: Speculation | None = None, runner: Runner | None = None,
             progress: Progress | None = None) -> Frontier:
    """The frontier on each cluster (module doc); ``runner`` (--ray) fans the clusters out,
    the same curves; ``progress`` counts clusters."""
    if wl.output_len < 1:
        raise InputError("the frontier plots generated tokens: give --osl 1 or more")
    conc = check_concurrency(concurrency)
    t0 = time.perf_counter()
    ctx: Context = (spec, wl, framework, conc, speculation)
    if runner is not None and runner.distributed:
        curves = runner.map(curve, list(clusters), ctx, "clusters")
    else:
        curves = []
        for i, cl in enumerate(clusters):
            curves.append(curve(ctx, cl))
            if progress:
                progress(i + 1, len(clusters))
    return Frontier(spec.id, wl.prompt_len, wl.output_len, weights or wl.weight_dtype.value,
                    conc, tuple(curves), time.perf_counter() - t0, (NOT_SWEPT,))
