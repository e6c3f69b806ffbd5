"""Serving planner for the offline and server scenarios: the fixed-batch model screens, the
request-level simulator decides.

The fixed-batch planner (``search.serve``) prefills a whole batch at once, so its throughput-best
plan can have a TTFT of tens of seconds (issue 12); no server runs that way. Here the same
configurations are ranked by what a continuous-batching server does with them:

1. **Screen** every configuration of ``search.serve``'s space (tp x pp x ep x weight/KV
   precision; replicas fill the cluster; same rules, same rule names) with ``serve_step``, batch
   1, 2, 4 ... up to the scheduler's cap on running requests, stopping at the first batch that
   breaks memory or the TPOT SLO. A configuration is rejected when batch 1 already breaks a
   rule: a lone request decodes fastest (no scheduler beats batch-1 TPOT) and is prefilled
   fastest (no scheduler beats batch-1 TTFT). Its *screening estimate* is the fixed-batch
   throughput at its best batch under the TPOT SLO: an estimate of its best case, used only to
   order the configurations, never reported as a result.
2. **Shortlist** (the rule): the ``SHORTLIST`` configurations with the highest screening estimate,
   plus the best-screened configuration of every tp x pp x ep shape not among them, so that a
   latency-favouring shape (wide tp: fastest prefill) is always simulated.
3. **Simulate** each shortlisted configuration with ``serving.scenario.run`` under the load
   (the framework's documented scheduler caps). Batch size is not a knob: the scheduler picks it.
   With a TPOT SLO whose p99 the run misses, the cap on running requests (vLLM
   ``max_num_seqs``) is lowered, a power of two below the run's peak of running requests,
   halving up to ``CAP_TRIES`` times until the p99 TPOT meets the SLO: fewer requests per decode
   step make each step shorter (and, under load, queues longer, which goodput counts). Each
   configuration keeps its best run for the objective.
4. **Rank**: goodput (requests/s meeting every SLO per request; DistServe, Zhong et al. OSDI
   2024, sec. 2), or output tokens/s (throughput; cost and energy per token, on one cluster,
   rank the same way) or TPOT p99 (latency) among the runs whose TTFT and TPOT p99 meet the
   SLOs (MLPerf Inference's server constraint is a p99 TTFT and TPOT).

``rejected_by_rule`` counts configurations here (not configuration x batch points): the rule
that ruled each out at screening or in its simulation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.framework import Framework, FrameworkProfile
from accelmap.cost.per_token import per_token, price_per_device_hour, tdp_w
from accelmap.engine import class_framework, resolve_framework
from accelmap.engine.plan import PlanFigures, ScenarioPlanFigures
from accelmap.engine.serve import serve_step
from accelmap.engine.system import System
from accelmap.errors import InputError
from accelmap.hardware.cluster import Cluster
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.search.result import Objective, Plan, PlanResult, ServingChoice, pareto_front
from accelmap.search.serve import (
    Config,
    _configs,
    _dtypes,
    _half,
    _label,
    _Score,
    _workload,
)
from accelmap.search.space import powers_of_two
from accelmap.serving.scenario import Load, Scenario, ServingRun, run
from accelmap.serving.scheduler import SchedulerConfig, defaults

SHORTLIST = 12  # configurations simulated by screening estimate (plus one per shape)
CAP_TRIES = 5  # halvings of the running-request cap under a missed TPOT SLO
MIN_CAP = 8  # smallest cap tried


@dataclass
class _Screen:
    """One configuration after screening: its rule (None: passed), the screening estimate and
    the fixed-batch view at its best batch."""

    config: Config
    rule: str | None = None
    reason: str = ""
    tokens_per_s: float = 0.0  # fixed-batch throughput at the best batch under the TPOT SLO
    batch: int = 0
    batch_ttft_s: float = 0.0  # serve_step's TTFT at that batch: the whole batch prefilled


@dataclass
class _Sim:
    """A simulated configuration: every run (default caps first) and the one it keeps."""

    config: Config
    runs: list[ServingRun]
    best: ServingRun | None = None
    rule: str | None = None
    reason: str = ""


class _SimScore(_Score):
    """The objective over simulated metrics: goodput too, and TPOT at its p99."""

    FIELDS: ClassVar[dict[Objective, tuple[str, str, bool]]] = {
        **_Score.FIELDS,
        Objective.GOODPUT: ("goodput", "goodput_requests_per_s", True),
        Objective.LATENCY: ("TPOT p99", "tpot_p99_s", False)}

    @staticmethod
    def base(objective: Objective) -> Objective:
        return Objective.THROUGHPUT if objective is Objective.TIME else objective

    @property
    def constrained(self) -> bool:
        """Whether the SLO percentiles are a hard constraint (all but goodput)."""
        return self.objective is not Objective.GOODPUT

    def ratio(self, alt: PlanFigures, best: PlanFigures) -> str:
        a, b = float(getattr(alt, self.field)), float(getattr(best, self.field))
        if self.higher_better:
            return f"{b / a:.2f}x the {self.name} of" if a > 0 else f"a {self.name} above 0 vs"
        return f"{a / b:.2f}x less {self.name} than" if b > 0 else f"the same {self.name} as"


def plan_serving_scenario(spec: ModelSpec, cluster: Cluster, prompt_len: int, output_len: int,
                          load: Load, *, objective: Objective | str | None = None,
                          framework: Framework | str | FrameworkProfile = "vllm", top: int = 10,
                          weight_dtypes: Sequence[DTypeLike] | None = None,
                          kv_dtypes: Sequence[DTypeLike] | None = None,
                          shortlist: int = SHORTLIST,
                          progress: Callable[[int, int], None] | None = None,
                          profile: CalibrationProfile | None = None,
                          quantize: bool = False) -> PlanResult:
    """Best serving mappings of ``spec`` on ``cluster`` under ``load`` (offline or server): the
    fixed-batch model screens every configuration, the ``shortlist`` most promising (plus one
    per shape) are simulated, and the runs are ranked by ``objective`` (default: goodput in
    the server scenario, throughput offline). ``progress(done, total)`` counts simulated
    configurations."""
    if load.scenario is Scenario.BATCH:
        raise InputError("the batch scenario is search.serve.plan_serving")
    if output_len < 1:
        raise InputError("serving plans rank generated tokens: give output_len >= 1")
    if shortlist < 1:
        raise InputError(f"shortlist must be at least 1, got {shortlist}")
    start = time.perf_counter()
    obj = Objective(objective) if objective is not None else (
        Objective.GOODPUT if load.scenario is Scenario.SERVER else Objective.THROUGHPUT)
    acc = cluster.accelerator
    score = _SimScore(obj, price_per_device_hour(acc), tdp_w(acc))
    ws, kvs, notes = _dtypes(cluster, weight_dtypes, kv_dtypes, quantize)
    system = System.of(cluster, profile)
    fw = resolve_framework(framework, class_framework(system, training=False),
                           system.accelerator.vendor)
    half = _half(cluster)
    configs = _configs(spec, cluster, ws, kvs)
    sched = defaults(fw.name, offline=load.scenario is Scenario.OFFLINE,
                     device_bytes=system.memory_bytes).with_caps(
        load.max_seqs, load.max_tokens, load.chunked_prefill)
    at = _Setting(spec, cluster, system, fw, sched, load, prompt_len, output_len, half)
    screens, evaluated = _screen_all(at, configs)
    screen_s = time.perf_counter() - start
    passed, chosen = _shortlist(screens, shortlist)
    t_sim = time.perf_counter()
    sims, runs, interrupted = _simulate_all(at, chosen, score, notes, progress)
    sim_s = time.perf_counter() - t_sim
    rejected = _rule_counts([*screens.values(), *sims.values()])
    ranked = sorted((s for s in sims.values() if s.best is not None),
                    key=lambda s: score.key(_metrics(s.best, cluster)))
    plans = [_plan(s, screens[s.config], cluster) for s in ranked[:top]]
    rows = [{"mapping": p.mapping_dict(), "tokens_per_s": p.figures.tokens_per_s,
             "tpot_p99_s": getattr(p.figures, "tpot_p99_s", None)} for p in plans]
    search = {
        "scenario": load.scenario.value,
        "load": _load_dict(load, prompt_len, output_len),
        "scheduler": {"max_seqs": sched.max_seqs, "max_batched_tokens": sched.max_batched_tokens,
                      "source": sched.source},
        "configurations": len(configs),
        "screened_feasible": len(passed),
        "serve_step_evaluations": evaluated,
        "simulated_configurations": len(sims),
        "simulation_runs": runs,
        "shortlist_rule": _shortlist_rule(shortlist),
        "screen_s": screen_s,
        "simulate_s": sim_s,
    }
    if ranked:
        explanation = _explain(ranked, sims, screens, score, load, cluster)
    else:
        explanation = _explain_none(rejected, score)
    explanation.append(
        f"screened {len(configs)} configurations with the fixed-batch model "
        f"({evaluated} serve_step evaluations, {screen_s:.2f} s); simulated {len(sims)} "
        f"of the {len(passed)} that passed ({runs} scheduler runs, {sim_s:.2f} s)")
    notes += _ranking_notes(score, ranked, load)
    return PlanResult(score.objective, plans, evaluated + runs, len(ranked),
                      time.perf_counter() - start,
                      dict(sorted(rejected.items(), key=lambda kv_: -kv_[1])), explanation,
                      {"throughput_vs_tpot_p99": pareto_front(rows, "tokens_per_s",
                                                              "tpot_p99_s")},
                      interrupted, notes + score.notes, system.device.calibration, search)


DTypeLike = Any  # a DType or its name (search.serve._dtype reads both)


@dataclass(frozen=True)
class _Setting:
    """What every screened and simulated configuration shares: the model, the cluster as a
    system, the framework and its scheduler, the load, the request lengths and the 16-bit
    activation dtype (``_half``)."""

    spec: ModelSpec
    cluster: Cluster
    system: System
    fw: FrameworkProfile
    sched: SchedulerConfig
    load: Load
    prompt_len: int
    output_len: int
    half: Any

    def mapping(self, config: Config) -> Mapping:
        tp, pp, ep, _w, _kv = config
        return Mapping.serving(tp=tp, pp=pp, ep=ep, replicas=None, world=self.cluster.devices)


def _screen_all(at: _Setting, configs: list[Config]) -> tuple[dict[Config, _Screen], int]:
    """Step 1: every configuration screened (``_screen``); the serve_step evaluations made."""
    screens: dict[Config, _Screen] = {}
    evaluated = 0
    for config in configs:
        screens[config] = _Screen(config)
        evaluated += _screen(at, screens[config])
    return screens, evaluated


def _screen(at: _Setting, sc: _Screen) -> int:
    """One configuration's fixed-batch screen at batch 1, 2, 4 ... up to the scheduler's cap,
    stopping at the first batch that breaks a rule (at batch 1: the configuration's rule);
    ``sc`` keeps the best throughput. Returns the serve_step evaluations made."""
    _tp, _pp, _ep, w, kv = sc.config
    slo = at.load.slo
    m = at.mapping(sc.config)
    bad = check_serving(at.spec, at.cluster, m)
    if bad:
        sc.rule, sc.reason = bad[0].rule, bad[0].sentence
        return 0
    evaluated = 0
    for b in powers_of_two(at.sched.max_seqs):
        est = serve_step(at.spec, at.system,
                         _workload(at.prompt_len, at.output_len, b, w, kv, at.half), m, at.fw,
                         limits=False)
        evaluated += 1
        rule, reason = None, ""
        if not est.feasible:
            rule, reason = str(est.violated_rule or "memory"), est.reason or ""
        elif slo.tpot_s is not None and float(est.tpot_s or 0.0) > slo.tpot_s:
            rule, reason = "tpot_slo", (f"TPOT {float(est.tpot_s or 0.0) * 1e3:.1f} ms at "
                                        f"batch {b} exceeds the {slo.tpot_s * 1e3:.0f} ms "
                                        "SLO")
        elif b == 1 and slo.ttft_s is not None and float(est.ttft_s or 0.0) > slo.ttft_s:
            rule, reason = "ttft_slo", (f"a lone request's TTFT {float(est.ttft_s or 0.0):.2f}"
                                        f" s exceeds the {slo.ttft_s:g} s SLO")
        if rule:
            if b == 1:
                sc.rule, sc.reason = rule, reason
            break
        tps = float(est.tokens_per_s or 0.0)
        if tps > sc.tokens_per_s:
            sc.tokens_per_s, sc.batch = tps, b
            sc.batch_ttft_s = float(est.ttft_s or 0.0)
    return evaluated


def _rule_counts(items: Sequence[_Screen | _Sim]) -> dict[str, int]:
    """Configurations ruled out per rule, at screening or in simulation."""
    rejected: dict[str, int] = {}
    for it in items:
        if it.rule:
            rejected[it.rule] = rejected.get(it.rule, 0) + 1
    return rejected


def _shortlist(screens: dict[Config, _Screen], shortlist: int
               ) -> tuple[list[_Screen], list[_Screen]]:
    """Step 2: the screens that passed (best estimate first) and the shortlist among them:
    the ``shortlist`` best plus the best of every tp x pp x ep shape not among them."""
    passed = sorted((s for s in screens.values() if s.rule is None),
                    key=lambda s: -s.tokens_per_s)
    chosen = passed[:shortlist]
    shapes = {s.config[:3] for s in chosen}
    for s in passed[shortlist:]:
        if s.config[:3] not in shapes:
            chosen.append(s)
            shapes.add(s.config[:3])
    return passed, chosen


def _shortlist_rule(shortlist: int) -> str:
    return (f"the {shortlist} configurations with the highest fixed-batch "
            "throughput under the TPOT SLO, plus the best of every tp x pp x ep "
            "shape not among them")


def _simulate_all(at: _Setting, chosen: list[_Screen], score: _SimScore, notes: list[str],
                  progress: Callable[[int, int], None] | None
                  ) -> tuple[dict[Config, _Sim], int, bool]:
    """Step 3: each shortlisted configuration simulated and settled; the simulations, the
    scheduler runs made and whether the user interrupted them (said in ``notes``)."""
    sims: dict[Config, _Sim] = {}
    interrupted = False
    try:
        for i, sc in enumerate(chosen):
            sims[sc.config] = _Sim(sc.config, [])
            _simulate(at, sims[sc.config])
            _settle(sims[sc.config], score, at.load.slo, at.cluster)
            if progress:
                progress(i + 1, len(chosen))
    except KeyboardInterrupt:
        interrupted = True
        sims = {c: sim for c, sim in sims.items() if sim.runs}  # a first run cut short
        notes.append(f"interrupted after {_runs(sims)} simulations: best plans found so far")
    return sims, _runs(sims), interrupted


def _runs(sims: dict[Config, _Sim]) -> int:
    """The scheduler runs completed."""
    return sum(len(sim.runs) for sim in sims.values())


def _simulate(at: _Setting, sim: _Sim) -> None:
    """One configuration under the load at the default caps, then with the cap on running
    requests halved (up to ``CAP_TRIES`` times) while a TPOT SLO's p99 is missed; each run
    appended to ``sim.runs`` as it completes."""
    _tp, _pp, _ep, w, kv = sim.config
    m = at.mapping(sim.config)
    load, slo = at.load, at.load.slo
    wl = _workload(at.prompt_len, at.output_len, 1, w, kv, at.half)
    sim.runs.append(run(at.spec, at.system, wl, m, at.fw, load))
    first = sim.runs[0]
    if first.feasible and slo.tpot_s is not None and load.max_seqs is None:
        cap = _below(int(first.metrics["peak_running"]))
        for _ in range(CAP_TRIES):
            last = sim.runs[-1]
            if cap < MIN_CAP or not last.feasible or (
                    last.metrics["tpot_s"].get("p99", 0.0) <= slo.tpot_s):
                break
            sim.runs.append(run(at.spec, at.system, wl, m, at.fw, replace(load, max_seqs=cap)))
            cap //= 2


def _ranking_notes(score: _SimScore, ranked: list[_Sim], load: Load) -> list[str]:
    """What the ranking cannot tell apart in the server scenario."""
    notes = []
    if (score.objective is Objective.GOODPUT and len(ranked) > 1
            and load.scenario is Scenario.SERVER and ranked[1].best is not None
            and ranked[1].best.metrics["goodput_requests_per_s"]
            >= 0.99 * ranked[0].best.metrics["goodput_requests_per_s"]):  # type: ignore[union-attr]
        notes.append("the top plans' goodput is within 1%: at this rate they all keep up and the "
                     "latency tail decides; raise --rate to rank them by capacity")
    if score.objective is Objective.THROUGHPUT and load.scenario is Scenario.SERVER:
        notes.append("server scenario: every plan that keeps up with --rate serves about the "
                     "same throughput; --objective goodput (the default here) separates them")
    return notes


def _below(peak: int) -> int:
    """The largest power of two strictly below ``peak`` (the first cap that binds)."""
    cap = 1
    while cap * 2 < peak:
        cap *= 2
    return cap


def _p99(r: ServingRun, key: str) -> float:
    return float(r.metrics[key].get("p99", 0.0))


def _settle(sim: _Sim, score: _SimScore, slo: Any, cluster: Cluster) -> None:
    """The run a configuration keeps, or the rule that rules it out."""
    ok = [r for r in sim.runs if r.feasible]
    if not ok:
        sim.rule = "memory"
        sim.reason = sim.runs[0].reason or "infeasible"
        return
    if score.constrained:
        meet = [r for r in ok if (slo.ttft_s is None or _p99(r, "ttft_s") <= slo.ttft_s)
                and (slo.tpot_s is None or _p99(r, "tpot_s") <= slo.tpot_s)]
        if not meet:
            r = ok[-1]
            cap = r.scheduler.max_seqs if r.scheduler is not None else "default"
            if slo.tpot_s is not None and _p99(r, "tpot_s") > slo.tpot_s:
                sim.rule, sim.reason = "tpot_slo", (
                    f"TPOT p99 {_p99(r, 'tpot_s') * 1e3:.1f} ms exceeds the "
                    f"{slo.tpot_s * 1e3:.0f} ms SLO even at max_seqs {cap}")
            else:
                sim.rule, sim.reason = "ttft_slo", (
                    f"TTFT p99 {_p99(r, 'ttft_s'):.2f} s exceeds the {slo.ttft_s:g} s SLO")
            return
        ok = meet
    sim.best = min(ok, key=lambda r: score.key(_metrics(r, cluster)))


def _metrics(r: ServingRun | None, cluster: Cluster) -> ScenarioPlanFigures:
    """The plan's figures: the scenario's metrics, flattened where the ranking reads them."""
    assert r is not None and r.scheduler is not None and r.memory is not None
    m = r.metrics
    tps = float(m["output_tokens_per_s"])
    usd, joules = per_token(cluster.accelerator, cluster.devices, tps)

    def pct(key: str) -> dict[str, float]:
        return {k: m[key][k] for k in ("p50", "p90", "p99") if k in m[key]}

    return ScenarioPlanFigures(
        tokens_per_s=tps, tokens_per_s_per_device=tps / cluster.devices,
        memory_per_device_bytes=float(r.memory.total), memory_fit=r.memory.fit.value,
        usd_per_million_tokens=usd, energy_j_per_token_tdp=joules,
        error_band=r.error_band.to_dict() if r.error_band else None,
        scenario=r.scenario.value, total_tokens_per_s=float(m["total_tokens_per_s"]),
        requests_per_s=float(m["requests_per_s"]),
        goodput_requests_per_s=float(m["goodput_requests_per_s"]),
        slo_attainment=float(m["slo_attainment"]), slo=m["slo"],
        ttft_s=pct("ttft_s"), tpot_s=pct("tpot_s"), itl_s=pct("itl_s"), e2e_s=pct("e2e_s"),
        ttft_p99_s=_p99(r, "ttft_s"), tpot_p99_s=_p99(r, "tpot_s"),
        kv_capacity_tokens=float(m["kv_capacity_tokens"]),
        peak_running=int(m["peak_running"]), mean_running=float(m["mean_running"]),
        preemptions=int(m["preemptions"]), max_seqs=r.scheduler.max_seqs,
        max_batched_tokens=r.scheduler.max_batched_tokens, replicas=int(r.mapping.replicas),
        memory_capacity_bytes=float(r.memory.capacity),
        latency_error_band=(r.latency_error_band.to_dict() if r.latency_error_band
                            else None),
        simulated_s=r.simulated_s)


def _plan(sim: _Sim, sc: _Screen, cluster: Cluster) -> Plan:
    r = sim.best
    assert r is not None and r.scheduler is not None
    _, _, _, w, kv = sim.config
    figures = replace(_metrics(r, cluster), weight_dtype=w.value, kv_dtype=kv.value,
                      screen_tokens_per_s=sc.tokens_per_s, screen_batch=sc.batch,
                      batch_ttft_s=sc.batch_ttft_s)
    choice = ServingChoice(r.scheduler.max_seqs, w, kv, r.scheduler.max_batched_tokens)
    return Plan(r.mapping, cluster.name, cluster.accelerator.id, cluster.devices, True, figures,
                serving=choice)


def _load_dict(load: Load, prompt_len: int, output_len: int) -> dict[str, Any]:
    return {"requests": load.requests, "rate": load.rate, "prompt": prompt_len,
            "output": output_len, "lengths": load.dist.value, "slo": load.slo.to_dict(),
            "max_seqs": load.max_seqs, "max_tokens": load.max_tokens, "seed": load.seed}


def _describe(load: Load) -> str:
    slo = [f"TTFT p99 <= {load.slo.ttft_s:g} s" if load.slo.ttft_s is not None else "",
           f"TPOT p99 <= {load.slo.tpot_s * 1e3:g} ms" if load.slo.tpot_s is not None else ""]
    head = ("offline (every request queued at once)" if load.scenario is Scenario.OFFLINE
            else f"closed loop of {load.concurrency:,} clients" if load.concurrency is not None
            else f"server load ({load.rate:g} requests/s Poisson)" if load.rate is not None
            else "server load (trace)")
    slos = ", ".join(s for s in slo if s)
    return head + (f", SLO {slos}" if slos else "")


def _figures(r: ServingRun) -> str:
    m, s = r.metrics, r.scheduler
    assert s is not None
    return (f"{m['goodput_requests_per_s']:.2f} requests/s meet the SLOs "
            f"({m['slo_attainment']:.0%} of {m['requests_per_s']:.2f} served), "
            f"{m['output_tokens_per_s']:,.0f} output tokens/s; TTFT p50 "
            f"{m['ttft_s'].get('p50', 0):.2f} s / p99 {_p99(r, 'ttft_s'):.2f} s, TPOT p50 "
            f"{m['tpot_s'].get('p50', 0) * 1e3:.1f} ms / p99 {_p99(r, 'tpot_s') * 1e3:.1f} ms; "
            f"peak {m['peak_running']} running (cap {s.max_seqs}), KV pool "
            f"{m['kv_capacity_tokens']:,.0f} tokens per replica, {m['preemptions']} "
            "preemptions")


def _label_run(sim: _Sim) -> str:
    r = sim.best
    assert r is not None
    reps = int(r.mapping.replicas)
    return _label(sim.config) + (f" x {reps} replicas" if reps > 1 else "")


def _why(best: ServingRun, alt: ServingRun, load: Load) -> str:
    """What separates two runs, in the SLO's and the scheduler's terms."""
    slo = load.slo
    bits = []
    a_att, b_att = alt.metrics["slo_attainment"], best.metrics["slo_attainment"]
    if b_att - a_att > 0.005:
        bits.append(f"it meets the SLOs for {a_att:.0%} of requests vs {b_att:.0%}")
    for key, name, unit, target in (("ttft_s", "TTFT", 1.0, slo.ttft_s),
                                    ("tpot_s", "TPOT", 1e3, slo.tpot_s)):
        a, b = _p99(alt, key), _p99(best, key)
        if target is not None and a > target >= b:
            u = "s" if unit == 1.0 else "ms"
            bits.append(f"its {name} p99 {a * unit:.3g} {u} breaks the {target * unit:g} {u} SLO "
                        f"({b * unit:.3g} {u} here)")
    if not bits:
        bits.append(f"TTFT p99 {_p99(alt, 'ttft_s'):.2f} s vs {_p99(best, 'ttft_s'):.2f} s, "
                    f"TPOT p99 {_p99(alt, 'tpot_s') * 1e3:.1f} ms vs "
                    f"{_p99(best, 'tpot_s') * 1e3:.1f} ms, "
                    f"{alt.metrics['output_tokens_per_s']:,.0f} vs "
                    f"{best.metrics['output_tokens_per_s']:,.0f} output tokens/s")
    return "; ".join(bits)


def _explain(ranked: list[_Sim], sims: dict[Config, _Sim], screens: dict[Config, _Screen],
             score: _SimScore, load: Load, cluster: Cluster) -> list[str]:
    top = ranked[0]
    r = top.best
    assert r is not None and r.scheduler is not None
    caps = f"max_seqs {r.scheduler.max_seqs}, max_batched_tokens {r.scheduler.max_batched_tokens}"
    first = top.runs[0].scheduler
    if first is not None and r is not top.runs[0]:
        caps += f"; cap lowered from the default {first.max_seqs} to meet the TPOT SLO"
    out = [f"best by {score.name} under {_describe(load)}: {_label_run(top)} ({caps})",
           _figures(r)]

    def m(s: _Sim) -> ScenarioPlanFigures:
        return _metrics(s.best, cluster)

    if len(ranked) > 1:
        alt = ranked[1]
        assert alt.best is not None
        a, b = float(getattr(m(alt), score.field)), float(getattr(m(top), score.field))
        big = (b > 1.05 * a) if score.higher_better else (a > 1.05 * b)
        out.append(f"runner-up {_label_run(alt)}: {_versus(m(alt), m(top), score)}"
                   + (f" (the winner has {score.ratio(m(alt), m(top))} it)" if big else "")
                   + f"; {_why(r, alt.best, load)}")
    sc = screens[top.config]
    head = (f"the fixed-batch model's best batch for this configuration ({sc.batch}) would "
            f"prefill the whole batch at once, a {sc.batch_ttft_s:.2f} s TTFT (and stall); ")
    if load.scenario in (Scenario.SERVER, Scenario.CONCURRENCY):
        out.append(head + f"under the scheduler the TTFT p99 is {_p99(r, 'ttft_s'):.2f} s")
    else:
        out.append(head + "under the scheduler prompts are chunked into iterations of at most "
                   f"{r.scheduler.max_batched_tokens} tokens (ITL p99 "
                   f"{_p99(r, 'itl_s') * 1e3:.0f} ms); offline TTFT counts the wait in the "
                   f"queue (every request arrives at once): p50 "
                   f"{r.metrics['ttft_s'].get('p50', 0):.1f} s")
    tp, pp, ep, w, kv = top.config
    # each neighbour changes one thing of the winner; the precision neighbours keep its tp, so
    # their label says so (an int4 row at another tp may be in the table beside it)
    for name, c in ((f"tp={tp // 2}", (tp // 2, pp, min(ep, tp // 2), w, kv)),
                    (f"tp={tp * 2}", (tp * 2, pp, ep, w, kv)),
                    *((f"{x.value} weights at tp={tp}", (tp, pp, ep, x, kv))
                      for x in dict.fromkeys(s[3] for s in screens) if x is not w),
                    *((f"{x.value} KV at tp={tp}", (tp, pp, ep, w, x))
                      for x in dict.fromkeys(s[4] for s in screens) if x is not kv)):
        if c[0] < 1:
            continue
        out.append(f"{name}: " + _neighbour(c, sims, screens, top, score, m, load))
    same = _same_screen(top.config, screens)
    if same:
        out.append(f"{', '.join(same)} weights screen the same as each other at tp={tp}: "
                   "weight-only formats dequantize to 16-bit for the matmul, and at the "
                   "screened batch the step is set by compute or KV reads, not by weight "
                   "bytes (the smaller formats fit larger batches, which the SLO or the batch "
                   "cap rules out here)")
    return out


def _same_screen(config: Config, screens: dict[Config, _Screen]) -> list[str]:
    """The weight formats whose fixed-batch estimate at the winner's tp, pp, ep and KV format
    is the same (within 0.5 %) as another's: said once, so equal figures are not read as a
    format left unmodelled."""
    tp, pp, ep, _, kv = config
    tps = {c[3].value: s.tokens_per_s for c, s in screens.items()
           if c[:3] == (tp, pp, ep) and c[4] is kv and s.rule is None and s.tokens_per_s > 0}
    return [n for n, v in tps.items()
            if any(k != n and abs(v - u) <= 0.005 * max(v, u) for k, u in tps.items())]


def _neighbour(c: Config, sims: dict[Config, _Sim], screens: dict[Config, _Screen], top: _Sim,
               score: _SimScore, m: Callable[[_Sim], PlanFigures], load: Load) -> str:
    if c in sims:
        s = sims[c]
        if s.best is None:
            return f"simulated, ruled out: {s.reason} ({s.rule} rule)"
        assert top.best is not None
        return f"simulated: {_versus(m(s), m(top), score)}; {_why(top.best, s.best, load)}"
    if c in screens:
        sc = screens[c]
        if sc.rule:
            return f"ruled out at screening: {sc.reason} ({sc.rule} rule)"
        cut = min((screens[k].tokens_per_s for k in sims), default=0.0)
        return (f"not simulated: its fixed-batch estimate {sc.tokens_per_s:,.0f} tokens/s is "
                f"below the shortlist's ({cut:,.0f})")
    return "outside the search space (pp > 1 only with the largest tp; tp within the scale-up " \
           "domain; tp x pp <= devices)"


def _versus(alt: PlanFigures, best: PlanFigures, score: _SimScore) -> str:
    a, b = float(getattr(alt, score.field)), float(getattr(best, score.field))
    if b == a:
        return f"same {score.name}"
    pct = abs(a - b) / abs(b) * 100 if b else 100.0
    if pct < 0.5:
        return f"{score.name} within {pct:.1f}%"
    worse = a < b if score.higher_better else a > b
    word = ("lower" if score.higher_better else "higher") if worse else (
        "higher" if score.higher_better else "lower")
    return f"{pct:.0f}% {word} {score.name}"


def _explain_none(rejected: dict[str, int], score: _SimScore) -> list[str]:
    if not rejected:
        return ["no configuration was simulated"]
    rules = ", ".join(f"{k}: {v}" for k, v in sorted(rejected.items(), key=lambda kv: -kv[1]))
    return [f"no serving plan meets the objective ({score.name}); configurations ruled out by "
            f"rule: {rules}"]
