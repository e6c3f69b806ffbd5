"""Shape advice: the model's shape issues on this hardware, each costed by the engine.

Every finding names the dimension, the rule it breaks, the fix (the nearest shape that keeps
the rule) and what the engine predicts for the model as it is and for the fixed shape, with the
parameter change, so a fix that buys speed with parameters says so:

- **vocabulary padding**: a vocabulary that is not a multiple of 64 (GPUs: 16-byte aligned
  GEMMs, 128 bytes best on A100; cost/alignment.py) or of the MXU side (TPUs, 128/256) pads or
  runs unaligned; frameworks that pad it themselves (Megatron 128, vLLM 64) are said to;
- **tile / MXU multiples**: d_model, the FFN width and heads x head_dim against the device's
  matrix tile (TPU MXU 128 or 256; a GPU's 16-byte alignment and its 128-wide CTA tile);
- **heads and KV heads vs TP**: tensor parallelism splits heads, so tp must divide n_heads, and
  KV heads are replicated when tp exceeds them (the KV cache per device stops shrinking);
- **experts vs EP**: expert parallelism needs ep to divide the number of experts;
- **sequence length vs attention**: the attention kernel's efficiency ramps with keys per
  query (cost/attention.py); short sequences leave it below its plateau.

The engine runs once per candidate shape (a few estimates: milliseconds each).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelmap.cost.alignment import ALIGN_BYTES, VOCAB_PADDING
from accelmap.cost.attention import attention_ramp
from accelmap.cost.efficiency import geometry
from accelmap.cost.framework import Framework
from accelmap.engine import System
from accelmap.engine.result import Estimate
from accelmap.errors import InputError
from accelmap.hardware.schema import DeviceClass
from accelmap.models import whatif as mw
from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec

Run = Callable[[ModelSpec], Estimate]


@dataclass(frozen=True)
class Finding:
    kind: str  # vocab | tile | tp-heads | ep-experts | attention
    dimension: str
    value: int
    rule: str
    fix: str | None = None
    fixed_value: int | None = None
    time_s: float | None = None  # the figure as the model is (step, or TTFT+decode)
    fixed_time_s: float | None = None
    params_change: float | None = None  # relative
    note: str | None = None

    @property
    def speedup(self) -> float | None:
        if self.time_s and self.fixed_time_s:
            return self.time_s / self.fixed_time_s
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "dimension": self.dimension, "value": self.value,
                "rule": self.rule, "fix": self.fix, "fixed_value": self.fixed_value,
                "time_s": self.time_s, "fixed_time_s": self.fixed_time_s,
                "speedup": self.speedup, "params_change": self.params_change,
                "note": self.note}


@dataclass(frozen=True)
class Advice:
    model: str
    accelerator: str
    framework: str
    time_figure: str
    base_time_s: float | None
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    fine: tuple[str, ...] = ()  # rules the model keeps

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "accelerator": self.accelerator,
                "framework": self.framework, "time_figure": self.time_figure,
                "base_time_s": self.base_time_s,
                "findings": [f.to_dict() for f in self.findings], "fine": list(self.fine)}


def _time(est: Estimate) -> float | None:
    m = est.metrics
    if not est.feasible:
        return None
    if "step_time_s" in m:
        return float(m["step_time_s"])
    return float(m.get("total_time_s") or 0.0) or None


def _up(x: int, q: int) -> int:
    return int(math.ceil(x / q) * q)


def _with(spec: ModelSpec, **dims: int) -> ModelSpec:
    ovs = [mw.ModelOverride(k, f"{k}={v}", value=v) for k, v in dims.items()]
    return mw.apply_model(spec, ovs)


def advise(spec: ModelSpec, system: System, run: Run, framework: Framework, *,
           tp: int = 1, ep: int = 1, seq: int | None = None) -> Advice:
    """The findings for ``spec`` on ``system``; ``run`` estimates a shape (same workload and
    mapping), ``framework`` the stack it runs under, ``tp``/``ep`` the mapping's degrees,
    ``seq`` the tokens per sequence (for the attention finding)."""
    acc = system.accelerator
    base = run(spec)
    c = _Costing(spec, run, _time(base), count_params(spec).total)
    out: list[Finding] = []
    fine: list[str] = []
    quantum, why = _quantum(acc.device_class, geometry(acc).systolic)
    _check_vocab(c, framework, quantum, why, out, fine)  # 1. vocabulary
    # 2. tile multiples of the widths
    q = quantum if acc.device_class is not DeviceClass.GPU else ALIGN_BYTES // 2
    _check_tiles(c, q, quantum, why, out, fine)
    _check_heads(spec, tp, c.t0, out, fine)  # 3. heads vs TP
    _check_experts(spec, ep, c.t0, out, fine)  # 4. experts vs EP
    if seq:  # 5. sequence length vs attention efficiency
        _check_attention(base, seq, c.t0, out, fine)
    return Advice(spec.id, acc.id, framework.value,
                  "step time" if "step_time_s" in base.metrics else "batch time (TTFT + "
                  "decode)", c.t0, tuple(out), tuple(fine))


@dataclass(frozen=True)
class _Costing:
    """Costs a fix: the model as it is (``t0``, ``params0``) against it with one dimension
    changed, through the same ``run``."""

    spec: ModelSpec
    run: Run
    t0: float | None
    params0: float

    def costed(self, kind: str, dim: str, value: int, rule: str, fixed: int,
               note: str | None = None) -> Finding:
        try:
            alt = _with(self.spec, **{dim: fixed})
        except InputError as e:
            return Finding(kind, dim, value, rule, None, None, self.t0, None, None, str(e))
        t1 = _time(self.run(alt))
        dp = count_params(alt).total / self.params0 - 1
        return Finding(kind, dim, value, rule, f"{dim}={fixed}", fixed, self.t0, t1, dp, note)


def _quantum(device_class: DeviceClass, systolic: int) -> tuple[int, str]:
    """The quantum a dimension should be a multiple of on this device, and why (0: none)."""
    if device_class is DeviceClass.TPU:
        return systolic, f"the {systolic}x{systolic} MXU pads k and n"
    if device_class is DeviceClass.GPU:
        return 64, ("16-byte aligned GEMMs, 128 bytes (64 x 16-bit) best on A100 and "
                    "later (NVIDIA matrix-multiplication guide)")
    if systolic:
        return systolic, f"the {systolic}-wide matrix unit pads k and n"
    return 0, ""


def _check_vocab(c: _Costing, framework: Framework, quantum: int, why: str,
                 out: list[Finding], fine: list[str]) -> None:
    """The vocabulary against the quantum (a stack that pads it itself is said to)."""
    V = c.spec.vocab_size
    pads = VOCAB_PADDING.get(framework)
    if quantum and V % quantum:
        note = (f"{framework.value} pads the vocabulary to a multiple of {pads} itself: no "
                "loss here, but a stack that does not pad pays it" if pads else None)
        out.append(c.costed("vocab", "vocab_size", V, f"vocabulary {V:,} is not a multiple of "
                            f"{quantum} ({why})", _up(V, quantum), note))
    elif quantum:
        fine.append(f"vocab_size {V:,} is a multiple of {quantum}")


def _check_tiles(c: _Costing, q: int, quantum: int, why: str, out: list[Finding],
                 fine: list[str]) -> None:
    """d_model, the FFN width and an expert's FFN width against the tile ``q`` (the quantum,
    or 16-byte alignment on GPUs)."""
    spec = c.spec
    for dim, value in (("d_model", spec.d_model), ("ffn_dim", spec.ffn_dim)):
        if q and value % q:
            out.append(c.costed("tile", dim, value, f"{dim} {value:,} is not a multiple of {q} "
                                f"({why if q == quantum else '16-byte alignment'})",
                                _up(value, q)))
        elif q:
            fine.append(f"{dim} {value:,} is a multiple of {q}")
    if spec.moe is not None:
        e_ffn = spec.moe.expert_ffn_dim
        if q and e_ffn % q:
            out.append(c.costed("tile", "expert_ffn_dim", e_ffn, f"expert FFN {e_ffn:,} is not "
                                f"a multiple of {q}", _up(e_ffn, q)))


def _check_heads(spec: ModelSpec, tp: int, t0: float | None, out: list[Finding],
                 fine: list[str]) -> None:
    """Heads and KV heads against tensor parallelism."""
    H, KV = spec.n_heads, spec.kv_heads
    if tp > 1:
        if H % tp:
            fix = max((t for t in range(1, tp + 1) if H % t == 0), default=1)
            out.append(Finding("tp-heads", "n_heads", H, f"tp={tp} does not divide {H} heads "
                               "(Megatron and vLLM refuse it)", f"tp={fix}", fix, t0, None,
                               None, "or give the model a head count tp divides"))
        elif tp > KV:
            out.append(Finding("tp-heads", "n_kv_heads", KV, f"{KV} KV heads < tp={tp}: each "
                               f"KV head is replicated {tp // KV}x, so the KV cache per device "
                               f"is {tp // KV}x an even split", f"n_kv_heads={tp}", tp, t0,
                               None, None, "the KV cache stops shrinking past tp = n_kv_heads"))
        else:
            fine.append(f"tp={tp} divides {H} heads and {KV} KV heads")
    else:
        divs = [t for t in (2, 4, 8, 16) if H % t == 0 and (KV % t == 0 or t % KV == 0)]
        fine.append(f"heads {H} / KV heads {KV} split evenly at tp in {divs or [1]}")


def _check_experts(spec: ModelSpec, ep: int, t0: float | None, out: list[Finding],
                   fine: list[str]) -> None:
    """The number of experts against expert parallelism (MoE models only)."""
    if spec.moe is None:
        return
    E = spec.moe.num_experts
    if ep > 1 and E % ep:
        fix = max(e for e in range(1, ep + 1) if E % e == 0)
        out.append(Finding("ep-experts", "num_experts", E, f"ep={ep} does not divide {E} "
                           "experts", f"ep={fix}", fix, t0, None, None, None))
    else:
        ok = [e for e in (2, 4, 8, 16, 32, 64) if E % e == 0]
        fine.append(f"{E} experts split evenly at ep in {ok}")


def _check_attention(base: Estimate, seq: int, t0: float | None, out: list[Finding],
                     fine: list[str]) -> None:
    """The attention kernel's efficiency at ``seq`` keys per query, and its share of time."""
    ramp = float(attention_ramp(float(seq)))
    att = sum(v for k, v in base.time.items() if "attention/core" in k) if base.time else 0
    share = att / sum(base.time.values()) if base.time else 0.0
    if ramp < 0.9 and share > 0.01:
        out.append(Finding("attention", "sequence", seq, f"at {seq:,} keys per query the "
                           f"attention kernel runs at {ramp:.0%} of its plateau "
                           f"(cost/attention.py ramp); attention is {share:.0%} of the time",
                           None, None, t0, None, None,
                           "pack short documents into longer sequences, or batch more"))
    else:
        fine.append(f"attention at {seq:,} keys per query: {ramp:.0%} of the kernel's "
                    f"plateau, {share:.0%} of the time")
