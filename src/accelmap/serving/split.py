"""Choosing the split of a cluster between a prefill pool and a decode pool for a request rate,
lengths and SLOs, and comparing it with colocated serving on the same devices.

Objective (DistServe, Zhong et al. OSDI 2024, sec. 3): goodput per device, the requests per
second that meet every SLO divided by the devices that serve them, among the layouts that meet
the SLO attainment goal (DistServe's goodput is the rate served at, e.g., 90 % attainment;
``ATTAINMENT`` is that example, the caller may set another; layouts below it rank after all
that reach it). Every candidate serves the
same request stream (same seed, same arrivals and lengths), so goodput here is the offered rate
x the fraction of requests meeting the SLOs (not divided by each run's own tail, which would
rank candidates by the noise of their last request). Ties, e.g. several candidates meeting
every SLO, go to the one with the most headroom: the smaller of SLO / p90 for TTFT and TPOT
(the candidate that would keep meeting them under the most extra load).

Candidates, kept few so the search runs in seconds (DistServe sec. 4 likewise sizes each
pool apart and replicates instances until the rate is met):

- colocated: for each tensor-parallel size that fits the model (powers of two up to the
  scale-up domain, leaving memory for KV), 1, 2, ... replicas up to the cluster, each replica a
  ``scenario`` instance on its round-robin share of the stream (what ``scenario.run``
  simulates for one replica); more replicas stop once every request meets the SLOs, since
  further devices can only lower goodput per device;
- disaggregated: for each (prefill tp, decode tp) of those sizes, 1, 2, ... prefill instances
  and, for each, 1, 2, ... decode instances on the rest of the cluster. Decode instances stop
  being added once the requests meeting the SLOs are all those whose TTFT (fixed by the
  prefill pool and the transfer) meets its SLO; prefill instances stop once every TTFT does.
  Both pool sizes are tried on a grid of at most ``STEPS`` sizes when the cluster allows more.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from accelmap.cost.framework import FrameworkProfile
from accelmap.engine.system import System
from accelmap.errors import InputError
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.serving.disagg import (
    Disaggregation,
    Instances,
    all_requests,
    run_disaggregated,
    simulate_pool,
    with_requests,
)
from accelmap.serving.metrics import Slo, summarize
from accelmap.serving.scenario import (
    Load,
    Scenario,
    Unfit,
    instance,
    kv_pool,
    scheduler_for,
)
from accelmap.serving.simulator import CapacityError, SimResult
from accelmap.workload import Inference

STEPS = 8  # most prefill-pool sizes tried per (prefill tp, decode tp) pair: bounds the search
ATTAINMENT = 0.9  # SLO attainment goal, DistServe sec. 2's example ("90 % of requests")
SEARCH_REQUESTS = 600  # requests per candidate run unless the load says otherwise
MAX_SEARCH_REQUESTS = 20_000  # per candidate: dozens of layouts are simulated


@dataclass(frozen=True)
class Candidate:
    """One layout tried: colocated (``tp`` x ``replicas``) or disaggregated (``split``)."""

    kind: str  # "colocated" | "disaggregated"
    label: str
    devices: int
    feasible: bool
    reason: str | None
    goodput_per_s: float  # offered rate x SLO attainment
    attainment: float
    slack: float  # min over the SLOs of SLO / p90 (higher: more headroom)
    metrics: dict[str, Any]
    split: Disaggregation | None = None
    tp: int = 0
    replicas: int = 0
    goal: float = ATTAINMENT

    @property
    def goodput_per_device(self) -> float:
        return self.goodput_per_s / self.devices if self.feasible and self.devices else 0.0

    @property
    def meets_goal(self) -> bool:
        return self.feasible and self.attainment >= self.goal

    def key(self) -> tuple[bool, float, float]:
        return (self.meets_goal, self.goodput_per_device, self.slack)

    def row(self) -> dict[str, Any]:
        m = self.metrics
        p90 = (lambda k: (m.get(k) or {}).get("p90"))  # noqa: E731
        out: dict[str, Any] = {
            "kind": self.kind, "layout": self.label, "devices": self.devices,
            "feasible": self.feasible, "reason": self.reason,
            "goodput_requests_per_s": self.goodput_per_s,
            "goodput_per_device": self.goodput_per_device,
            "slo_attainment": self.attainment, "meets_attainment_goal": self.meets_goal,
            "slack": self.slack,
            "ttft_p90_s": p90("ttft_s"), "tpot_p90_s": p90("tpot_s")}
        if self.split is not None:
            out["disaggregation"] = self.split.to_dict()
            out["kv_transfer_mean_s"] = (m.get("kv_transfer_s") or {}).get("mean")
            for pool in ("prefill_pool", "decode_pool"):
                out[f"{pool}_busy"] = (m.get(pool) or {}).get("busy_fraction")
        else:
            out.update(tp=self.tp, replicas=self.replicas)
        return out


@dataclass(frozen=True)
class SplitSearch:
    """The candidates (all of them, failed ones with their reason), the best colocated and the
    best disaggregated layout, which one wins and why, and how long the search took."""

    rate: float
    requests: int
    slo: Slo
    attainment_goal: float
    candidates: tuple[Candidate, ...]
    best_colocated: Candidate | None
    best_disaggregated: Candidate | None
    winner: Candidate | None
    why: str
    searched_s: float

    def to_dict(self) -> dict[str, Any]:
        def row(c: Candidate | None) -> dict[str, Any] | None:
            return None if c is None else c.row()

        return {"rate_requests_per_s": self.rate, "requests_per_candidate": self.requests,
                "slo": self.slo.to_dict(), "attainment_goal": self.attainment_goal,
                "winner": row(self.winner), "why": self.why,
                "best_colocated": row(self.best_colocated),
                "best_disaggregated": row(self.best_disaggregated),
                "candidates": [c.row() for c in sorted(self.candidates, key=Candidate.key,
                                                       reverse=True)],
                "searched_s": self.searched_s}


def slack(metrics: dict[str, Any], slo: Slo) -> float:
    """min over the SLOs of SLO / p90 (inf without SLOs)."""
    out = math.inf
    for limit, key in ((slo.ttft_s, "ttft_s"), (slo.tpot_s, "tpot_s")):
        p90 = (metrics.get(key) or {}).get("p90")
        if limit is not None and p90:
            out = min(out, limit / p90)
    return out


def tp_sizes(spec: ModelSpec, system: System, wl: Inference, fw: FrameworkProfile,
             load: Load) -> tuple[list[int], list[tuple[int, str]]]:
    """Powers of two up to the scale-up domain whose instance can hold the model and some KV,
    and the others with the reason they cannot."""
    dom = system.cluster.scale_up_domain
    sched = scheduler_for(system, fw, load)
    ok, dropped = [], []
    for tp in (1 << i for i in range(int(math.log2(max(dom, 1))) + 1)):
        m = Mapping.serving(tp)
        bad = check_serving(spec, system.cluster, m)
        if bad:
            dropped.append((tp, f"{bad[0].sentence} ({bad[0].rule} rule)"))
        elif kv_pool(spec, wl, m, system.memory_bytes, sched).pool_bytes <= 0:
            dropped.append((tp, "the weights and activations leave no memory for the KV cache "
                                f"under {fw.name.value}'s memory rule (memory rule)"))
        else:
            ok.append(tp)
    return ok, dropped


def _colocated(spec: ModelSpec, system: System, wl: Inference, fw: FrameworkProfile,
               load: Load, tp: int, replicas: int, reqs: Any, rate: float) -> Candidate:
    label = f"colocated tp={tp} x {replicas}"
    sched = scheduler_for(system, fw, load)
    inst = instance(spec, system, wl, Mapping.serving(tp, replicas=replicas), fw, sched, reqs)
    if isinstance(inst, Unfit):
        return Candidate("colocated", label, tp * replicas, False, inst.reason, 0.0, 0.0, 0.0,
                         {}, tp=tp, replicas=replicas)
    try:
        picks, sims = simulate_pool(reqs, replicas, inst)
    except CapacityError as e:
        return Candidate("colocated", label, tp * replicas, False, f"{e} (memory rule)", 0.0,
                         0.0, 0.0, {}, tp=tp, replicas=replicas)
    first = np.full(len(reqs), np.nan)
    finish = np.full(len(reqs), np.nan)
    for pick, sim in zip(picks, sims, strict=True):
        first[pick], finish[pick] = sim.first_token_s, sim.finish_s
    whole = SimResult(reqs.arrival_s, first, finish, reqs.prompt, reqs.output,
                      np.concatenate([s.step_s for s in sims]),
                      np.concatenate([s.step_decodes for s in sims]),
                      np.concatenate([s.step_tokens for s in sims]),
                      sum(s.preemptions for s in sims), max(s.peak_running for s in sims),
                      inst.pool.tokens, sum(s.busy_s for s in sims) / len(sims))
    m = summarize(whole, 1, tp * replicas, load.slo)
    return Candidate("colocated", label, tp * replicas, True, None,
                     rate * m["slo_attainment"], m["slo_attainment"], slack(m, load.slo), m,
                     tp=tp, replicas=replicas)


def sizes(top: int) -> list[int]:
    """1 .. top, or ``STEPS`` of them evenly spread (1 and top included)."""
    if top <= STEPS:
        return list(range(1, top + 1))
    return sorted({round(x) for x in np.linspace(1, top, STEPS)})


def _disaggregated(spec: ModelSpec, system: System, wl: Inference, fw: FrameworkProfile,
                   load: Load, rate: float, d: Disaggregation, cache: Instances,
                   layerwise: bool) -> Candidate:
    r = run_disaggregated(spec, system, wl, d, fw, load, layerwise=layerwise, cache=cache)
    att = float(r.metrics.get("slo_attainment", 0.0))
    return Candidate("disaggregated", d.describe(), d.devices, r.feasible, r.reason,
                     rate * att if r.feasible else 0.0, att,
                     slack(r.metrics, load.slo) if r.feasible else 0.0, r.metrics, split=d)


def search_split(spec: ModelSpec, system: System, wl: Inference, fw: FrameworkProfile,
                 load: Load, *, layerwise: bool = False,
                 attainment: float = ATTAINMENT) -> SplitSearch:
    """Try the colocated and disaggregated layouts of the cluster under ``load`` and pick the
    one with the most goodput per device among those meeting the SLOs for ``attainment`` of
    the requests (module docstring)."""
    if not 0 < attainment <= 1:
        raise InputError(f"the SLO attainment goal is a fraction in (0, 1], got {attainment}")
    if load.scenario is not Scenario.SERVER or load.rate is None:
        raise InputError("--disaggregate auto searches for a request rate: use --scenario "
                         "server --rate R")
    if load.slo.ttft_s is None and load.slo.tpot_s is None:
        raise InputError("--disaggregate auto maximises goodput under SLOs: give --slo-ttft "
                         "and/or --slo-tpot")
    if load.requests is not None and load.requests > MAX_SEARCH_REQUESTS:
        raise InputError(f"--disaggregate auto simulates every candidate layout: give at most "
                         f"--requests {MAX_SEARCH_REQUESTS:,} (got {load.requests:,})")
    offered = float(load.rate)
    t0 = time.perf_counter()
    load = with_requests(load, load.requests or SEARCH_REQUESTS)
    reqs = all_requests(load, wl)
    span = float(reqs.arrival_s[-1] - reqs.arrival_s[0])
    rate = (len(reqs) - 1) / span if span > 0 else offered
    tps, dropped = tp_sizes(spec, system, wl, fw, load)
    n_dev = system.devices
    cands = [Candidate("excluded", f"tp={tp} (either kind)", tp, False, why, 0.0, 0.0, 0.0, {},
                       tp=tp) for tp, why in dropped]
    for tp in tps:
        for replicas in sizes(n_dev // tp):
            cands.append(_colocated(spec, system, wl, fw, load, tp, replicas, reqs, rate))
            if cands[-1].attainment >= 1.0:
                break
    cache: Instances = {}
    for tp_p in tps:
        for tp_d in tps:
            for n_p in sizes((n_dev - tp_d) // tp_p):
                ttft_ok = 0.0
                for n_d in sizes((n_dev - n_p * tp_p) // tp_d):
                    c = _disaggregated(spec, system, wl, fw, load, rate,
                                       Disaggregation(n_p, tp_p, n_d, tp_d), cache, layerwise)
                    cands.append(c)
                    ttft_ok = float(c.metrics.get("ttft_slo_attainment", 0.0))
                    if not c.feasible or c.attainment >= ttft_ok:
                        break
                if ttft_ok >= 1.0:
                    break
    ok = [replace(c, goal=attainment) for c in cands if c.feasible]
    cands = [c if not c.feasible else replace(c, goal=attainment) for c in cands]
    best_c = max((c for c in ok if c.kind == "colocated"), key=Candidate.key, default=None)
    best_d = max((c for c in ok if c.kind == "disaggregated"), key=Candidate.key, default=None)
    winner = max(ok, key=Candidate.key, default=None)
    return SplitSearch(rate, len(reqs), load.slo, attainment, tuple(cands), best_c, best_d,
                       winner,
                       explain(winner, best_c, best_d, load.slo),
                       time.perf_counter() - t0)


def _figures(c: Candidate) -> str:
    m = c.metrics
    text = (f"{c.label}: {c.goodput_per_device:.3f} good requests/s per device "
            f"({c.attainment:.0%} within the SLOs; p90 TTFT "
            f"{(m.get('ttft_s') or {}).get('p90', math.nan):.3g} s, p90 TPOT "
            f"{(m.get('tpot_s') or {}).get('p90', math.nan) * 1e3:.3g} ms)")
    if c.split is not None:
        text += (f", prefill busy {m['prefill_pool']['busy_fraction']:.0%}, KV transfer "
                 f"{(m.get('kv_transfer_s') or {}).get('mean', 0.0) * 1e3:.2g} ms")
    return text


def explain(winner: Candidate | None, best_c: Candidate | None, best_d: Candidate | None,
            slo: Slo) -> str:
    """Why the winner won, in a sentence or two."""
    if winner is None:
        return "no candidate could run (see each candidate's reason)"
    other = best_d if winner is best_c else best_c
    text = f"winner {_figures(winner)}"
    if not winner.meets_goal:
        text += (f" [no layout meets the SLOs for {winner.goal:.0%} of the requests: the "
                 "cluster is short of devices for this rate]")
    if other is None:
        return text + "; no layout of the other kind could run"
    text += f"; best {other.kind}: {_figures(other)}"
    if winner.meets_goal and not other.meets_goal:
        return text + (f": the {other.kind} layouts fall short of the {winner.goal:.0%} "
                       "attainment goal")
    if winner.goodput_per_device > other.goodput_per_device:
        return text + ": more of the requests meet the SLOs per device"
    if math.isinf(winner.slack):
        return text + ": equal goodput per device"
    return text + (f": both meet the SLOs for the same share of requests, and the winner keeps "
                   f"more headroom (p90 within {1 / winner.slack:.0%} of the tightest SLO vs "
                   f"{1 / other.slack:.0%})" if other.slack > 0 else "")
