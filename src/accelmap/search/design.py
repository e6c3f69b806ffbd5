"""Shape search: d_model, layers, heads, KV heads, FFN width and experts under a parameter
budget and a hardware target, with the Pareto front of a quality proxy against speed.

Candidates keep the template's architecture (norms, activation, positions, vocabulary) and
vary the shape on a grid: d_model on multiples of 256, head_dim 64 or 128 (heads = d_model /
head_dim), KV heads as a fraction of the heads (MHA, 4, 8 query heads per KV head, MQA), a
gated FFN of 2.5-4x d_model (multiples of 256), and optionally experts (E routed, top-k). The
layer count is solved for the budget: L = round((budget - embeddings) / parameters of one
layer); a shape whose exact count (models.params) misses the budget by more than the
tolerance is dropped, and so is one whose aspect ratio d_model / n_layers leaves Kaplan et
al.'s 20-200 (loss within a few percent there; ``ASPECT_RATIO``). Each candidate is estimated
on the same system, workload and mapping.

The quality proxy is the parameter count (active parameters for MoE: what a token computes
with) or the training FLOPs per token; speed is tokens/s (training, or serving throughput)
or 1 / TPOT (serving latency). The Pareto front keeps the shapes no other shape beats on both;
a latency target (TPOT <= x) filters first. Chinchilla-style quality at equal parameters is not
modelled: shapes of one budget differ in speed here, not in loss.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from accelmap.engine.result import Estimate
from accelmap.errors import InputError
from accelmap.fanout import Runner
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec

MAX_CANDIDATES = 400
# Kaplan et al. 2020 (arXiv:2001.08361, sec. 3.1, Fig. 5): at a fixed non-embedding parameter
# count the loss changes by only a few percent for aspect ratios d_model / n_layer from ~20 to
# ~200 (Llama 2 7B: 128; GPT-3 175B: 128). Outside it a shape buys speed with quality the
# parameter count does not show, so it is not offered.
ASPECT_RATIO = (20.0, 200.0)


@dataclass(frozen=True)
class Space:
    d_models: tuple[int, ...]
    head_dims: tuple[int, ...] = (64, 128)
    q_per_kv: tuple[int, ...] = (1, 4, 8, 0)  # 0 = MQA (one KV head)
    ffn_mults: tuple[float, ...] = (2.5, 3.0, 3.5, 4.0)
    experts: tuple[tuple[int, int], ...] = ((0, 0),)  # (E, top-k); (0, 0) = dense


def default_space(budget: float, experts: Sequence[tuple[int, int]] = ((0, 0),)) -> Space:
    """d_model around the widths published models of this size use (d ~ 1.8 x N^(1/3)...
    spanning Llama 2 7B's 4096 at 7B and Llama 3.1 70B's 8192 at 70B), a factor of two
    either way, on multiples of 256."""
    centre = 0.85 * budget ** (1 / 3) * 2.3  # 7e9 -> ~3,700; 70e9 -> ~8,000
    lo, hi = max(256, centre / 2), centre * 1.6
    ds = tuple(d for d in range(256, int(hi) + 256, 256) if lo <= d <= hi)
    step = max(1, len(ds) // 8)
    return Space(d_models=ds[::step] or (256,), experts=tuple(experts))


def _shape(template: ModelSpec, d: int, hd: int, qkv: int, fm: float, moe: tuple[int, int],
           layers: int) -> ModelSpec | None:
    heads = d // hd
    if heads < 1 or d % hd:
        return None
    kv = 1 if qkv == 0 else heads // qkv
    if kv < 1 or heads % kv:
        return None
    ffn = max(256, round(fm * d / 256) * 256)
    data = template.model_dump()
    data.update(d_model=d, n_heads=heads, n_kv_heads=kv, head_dim=hd, ffn_dim=ffn,
                n_layers=max(layers, 1), published_params=None, published_params_source=None,
                id=f"{template.id}-d{d}-l{max(layers, 1)}-h{heads}-kv{kv}-f{ffn}"
                   + (f"-e{moe[0]}k{moe[1]}" if moe[0] else ""),
                name=f"design from {template.id}", aliases=(), mla=None,
                sliding_window=None, notes=("design candidate",))
    if moe[0]:
        data["moe"] = {"num_experts": moe[0], "top_k": moe[1], "expert_ffn_dim": ffn}
    else:
        data["moe"] = None
    try:
        return ModelSpec.model_validate(data)
    except Exception:
        return None


def candidates(template: ModelSpec, budget: float, tolerance: float, space: Space
               ) -> list[ModelSpec]:
    """Shapes of ~``budget`` parameters (within ``tolerance``, relative)."""
    out: list[ModelSpec] = []
    for d, hd, qkv, fm, moe in itertools.product(space.d_models, space.head_dims,
                                                 space.q_per_kv, space.ffn_mults, space.experts):
        one = _shape(template, d, hd, qkv, fm, moe, 1)
        two = _shape(template, d, hd, qkv, fm, moe, 2)
        if one is None or two is None:
            continue
        p1, p2 = count_params(one).total, count_params(two).total
        per_layer, fixed = p2 - p1, p1 - (p2 - p1)
        layers = round((budget - fixed) / per_layer) if per_layer > 0 else 0
        if layers < 2:
            continue
        if not ASPECT_RATIO[0] <= d / layers <= ASPECT_RATIO[1]:
            continue
        spec = _shape(template, d, hd, qkv, fm, moe, layers)
        if spec is None:
            continue
        if abs(count_params(spec).total / budget - 1) <= tolerance:
            out.append(spec)
    return out[:MAX_CANDIDATES] if len(out) <= MAX_CANDIDATES else out[:: math.ceil(
        len(out) / MAX_CANDIDATES)]


def design_point(ctx: tuple[Callable[[ModelSpec], Estimate], str, str, float | None],
                 spec: ModelSpec) -> dict[str, Any]:
    """The row of one shape: its parameters, the engine's speed, whether it meets the
    target."""
    run, quality, speed, tpot_max_s = ctx
    pc = count_params(spec)
    est = run(spec)
    tpot = getattr(est, "tpot_s", None)
    ok = bool(est.feasible) and (tpot_max_s is None or (tpot is not None
                                                         and float(tpot) <= tpot_max_s))
    q = float(pc.active if spec.moe else pc.total)
    if quality == "flops":
        q = 6.0 * float(pc.active - pc.embedding)  # training FLOPs per token (6N)
    return {
        "shape": spec.id, "d_model": spec.d_model, "n_layers": spec.n_layers,
        "n_heads": spec.n_heads, "n_kv_heads": spec.kv_heads, "head_dim": spec.head_size,
        "ffn_dim": spec.ffn_dim, "experts": spec.moe.num_experts if spec.moe else 0,
        "top_k": spec.moe.top_k if spec.moe else 0, "params": pc.total,
        "active_params": pc.active, "quality": q, "speed": _speed(est, speed),
        "tpot_s": float(tpot) if tpot is not None else None,
        "step_time_s": getattr(est, "step_time_s", None), "feasible": bool(est.feasible),
        "meets_target": ok, "reason": est.reason if not est.feasible else (
            None if ok else f"TPOT {float(tpot or 0) * 1e3:.1f} ms over the target"),
    }


@dataclass(frozen=True)
class Design:
    template: str
    accelerator: str
    budget: float
    quality: str
    speed: str
    rows: tuple[dict[str, Any], ...]

    @property
    def front(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("pareto")]

    def to_dict(self) -> dict[str, Any]:
        return {"template": self.template, "accelerator": self.accelerator,
                "budget_params": self.budget, "quality": self.quality, "speed": self.speed,
                "rows": list(self.rows)}


def _speed(est: Estimate, speed: str) -> float | None:
    m = est.metrics
    if speed == "1/tpot":
        t = m.get("tpot_s")
        return 1.0 / float(t) if t else None
    v = m.get("tokens_per_s")
    return float(v) if v else None


def run_design(template: ModelSpec, shapes: Sequence[ModelSpec],
               run: Callable[[ModelSpec], Estimate], *, budget: float, quality: str = "params",
               speed: str = "tokens/s", tpot_max_s: float | None = None,
               accelerator: str = "", runner: Runner | None = None) -> Design:
    """Estimate every shape; mark the Pareto front of (quality, speed) among those that run
    and meet ``tpot_max_s``. ``runner`` (default: this process) fans the shapes out
    (``accelmap.fanout``): the same rows."""
    if quality not in ("params", "flops"):
        raise InputError(f"--quality {quality}: params or flops")
    rows: list[dict[str, Any]] = (runner or Runner()).map(
        design_point, list(shapes), (run, quality, speed, tpot_max_s), "shapes")
    live = [r for r in rows if r["meets_target"] and r["speed"]]
    for r in live:
        r["pareto"] = not any(o is not r and o["quality"] >= r["quality"]
                              and o["speed"] >= r["speed"]
                              and (o["quality"] > r["quality"] or o["speed"] > r["speed"])
                              for o in live)
    rows.sort(key=lambda r: (not r.get("pareto", False), -(r["speed"] or 0.0)))
    return Design(template.id, accelerator, budget, quality, speed, tuple(rows))
