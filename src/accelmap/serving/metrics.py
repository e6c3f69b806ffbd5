"""What serving benchmarks report, from a simulation: throughput (output tokens/s, total
tokens/s, requests/s, per device and in all), latency percentiles (TTFT; TPOT per request,
vLLM benchmark_serving.py's definition: (end-to-end - TTFT) / (output - 1); ITL per token,
here the duration of the iteration that produced it; end-to-end), and goodput: requests per
second that met every SLO (DistServe, Zhong et al. OSDI 2024, sec. 2).

Interactivity, as the public throughput-vs-interactivity dashboards define it: tokens/s per
user = 1 / median TPOT (1000 / median TPOT in ms); the mean over requests of 1 / TPOT is given
beside it (``tokens_per_s_per_user_mean``).

Throughput is over the whole run, first arrival to last finish (how trtllm-bench and
benchmark_throughput.py divide), so an offline run's ramp-up and tail are inside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from accelmap.serving.simulator import SimResult

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Slo:
    """Latency objectives of one request: TTFT and TPOT ceilings (seconds); None = none."""

    ttft_s: float | None = None
    tpot_s: float | None = None

    def met(self, ttft: np.ndarray, tpot: np.ndarray) -> np.ndarray:
        ok = np.ones(len(ttft), dtype=bool)
        if self.ttft_s is not None:
            ok &= ttft <= self.ttft_s
        if self.tpot_s is not None:
            ok &= np.nan_to_num(tpot, nan=0.0) <= self.tpot_s
        return ok

    def to_dict(self) -> dict[str, float | None]:
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s}


def distribution(x: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float]:
    """mean and p50/p90/p99 (weighted: each entry counts ``weights`` times)."""
    x = np.asarray(x, dtype=float)
    keep = ~np.isnan(x)
    if weights is not None:
        keep &= np.asarray(weights) > 0
    x = x[keep]
    if x.size == 0:
        return {}
    if weights is None:
        out = {"mean": float(np.mean(x))}
        out.update({f"p{q}": float(np.percentile(x, q)) for q in PERCENTILES})
        return out
    w = np.asarray(weights, dtype=float)[keep]
    order = np.argsort(x)
    xs, cw = x[order], np.cumsum(w[order])
    out = {"mean": float(np.sum(xs * w[order]) / cw[-1])}
    for q in PERCENTILES:
        out[f"p{q}"] = float(xs[min(np.searchsorted(cw, q / 100 * cw[-1]), len(xs) - 1)])
    return out


def summarize(sim: SimResult, replicas: int, devices: int, slo: Slo) -> dict[str, Any]:
    """The report of ``replicas`` identical replicas, each running ``sim`` (the requests are
    split evenly between them; ``devices`` in all)."""
    ttft = sim.first_token_s - sim.arrival_s
    e2e = sim.finish_s - sim.arrival_s
    out_tok = sim.output.astype(float)
    tpot = np.where(out_tok > 1, (e2e - ttft) / np.maximum(out_tok - 1, 1), np.nan)
    span = float(np.nanmax(sim.finish_s) - np.min(sim.arrival_s))
    n = len(sim.arrival_s)
    out_rate = float(out_tok.sum()) / span * replicas
    in_rate = float(sim.prompt.sum()) / span * replicas
    ok = slo.met(ttft, tpot)
    valid = tpot[~np.isnan(tpot) & (tpot > 0)]
    per_user = 1.0 / float(np.median(valid)) if valid.size else None
    per_user_mean = float(np.mean(1.0 / valid)) if valid.size else None
    return {
        "requests": n * replicas,
        "duration_s": span,
        "output_tokens_per_s": out_rate,
        "output_tokens_per_s_per_device": out_rate / devices,
        "total_tokens_per_s": out_rate + in_rate,
        "total_tokens_per_s_per_device": (out_rate + in_rate) / devices,
        "input_tokens_per_s_per_device": in_rate / devices,
        "tokens_per_s_per_user": per_user,
        "tokens_per_s_per_user_mean": per_user_mean,
        "requests_per_s": n / span * replicas,
        "ttft_s": distribution(ttft),
        "tpot_s": distribution(tpot),
        "itl_s": distribution(sim.step_s, sim.step_decodes),
        "e2e_s": distribution(e2e),
        "goodput_requests_per_s": float(ok.sum()) / span * replicas,
        "slo_attainment": float(ok.mean()),
        "slo": slo.to_dict(),
        "mean_running": float(np.mean(sim.step_decodes)) if len(sim.step_decodes) else 0.0,
        "peak_running": sim.peak_running,
        "iterations": len(sim.step_s),
        "preemptions": sim.preemptions,
        "kv_capacity_tokens": sim.kv_capacity_tokens,
        "busy_fraction": sim.busy_s / span if span else 0.0,
    }
