"""Sweeps: one estimate per value (or pair of values) of one or two what-if parameters.

A parameter is a hardware field (``memory_bandwidth``, ``bf16``, ``scale_up_bandwidth`` ...,
hardware/whatif.py) or a model dimension (``n_layers``, ``d_model``, ``vocab_size`` ...,
models/whatif.py). Values are a list (``2TB/s,3TB/s``), an inclusive linear range
(``1TB/s..8TB/s:8`` = 8 points) or factors (``x0.5,x1,x2``). Every combination is estimated
with the same workload and mapping; a combination that cannot run is a row with its reason,
as the planner keeps failed candidates.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from accelmap.engine import System
from accelmap.engine.result import Estimate
from accelmap.errors import InputError
from accelmap.fanout import Runner
from accelmap.hardware import whatif
from accelmap.models import whatif as model_whatif
from accelmap.models.schema import ModelSpec
from accelmap.search.sensitivity import system_with
from accelmap.units import format_quantity

MAX_POINTS = 400  # combinations in one sweep: a CLI answer, not a batch job
MAX_POINTS_RAY = 200_000  # with --ray: a batch job on a cluster (about 6 KB a row)

# figures each row carries (None where the phase has none)
ROW_FIGURES = ("step_time_s", "tokens_per_s", "mfu", "ttft_s", "tpot_s", "max_batch",
               "energy_j_per_token_tdp", "energy_j_per_token_ops", "cost_to_train_usd",
               "time_to_train_s")


@dataclass(frozen=True)
class Param:
    name: str  # canonical
    kind: str  # 'hardware' or 'model'
    values: tuple[Any, ...]  # Override or ModelOverride, one per point
    labels: tuple[str, ...]


def _split_values(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def _range(lo: str, hi: str, n: int, parse: Callable[[str], float]) -> list[float]:
    a, b = parse(lo), parse(hi)
    if n < 2:
        raise InputError(f"a range {lo}..{hi}:{n} needs at least 2 points")
    return [a + (b - a) * i / (n - 1) for i in range(n)]


def parse_param(text: str) -> Param:
    """'memory_bandwidth=2TB/s,3TB/s' or 'n_layers=24..48:7' or 'bf16=x0.5,x1,x2'."""
    if "=" not in text:
        raise InputError(f"--param {text!r}: write NAME=V1,V2,... or NAME=LO..HI:N, e.g. "
                         "memory_bandwidth=2TB/s,3.35TB/s,5TB/s")
    name, _, raw = text.partition("=")
    items = _split_values(raw)
    if not items:
        raise InputError(f"--param {text!r}: no values")
    if model_whatif.is_model_field(name):
        canon = model_whatif._BY_NAME[name.strip().lower().replace("-", "_")]
        vals: list[str] = []
        for it in items:
            if ".." in it:
                lo, _, rest = it.partition("..")
                hi, _, n = rest.partition(":")
                vals += [str(round(v)) for v in _range(lo, hi, _count(n, text),
                                                         lambda s: float(int(s)))]
            else:
                vals.append(it)
        ovs = tuple(model_whatif.parse_model_override(canon, v, f"{canon}={v}") for v in vals)
        return Param(canon, "model", ovs, tuple(vals))
    f = whatif.lookup_field(name)
    labels: list[str] = []
    hw: list[whatif.Override] = []
    for it in items:
        if ".." in it:
            lo, _, rest = it.partition("..")
            hi, _, n = rest.partition(":")
            ends = [whatif.parse_value(f, s, text) for s in (lo, hi)]
            if all(v is None for v, _ in ends):  # a range of factors: x0.5..x2:7
                for k in _range(lo, hi, _count(n, text),
                                lambda s: whatif.parse_value(f, s, text)[1] or 0.0):
                    label = f"x{k:.4g}"
                    hw.append(whatif.Override(f, f"{f.name}={label}", factor=k))
                    labels.append(label)
                continue
            if any(v is None for v, _ in ends) or f.dimension is None:
                raise InputError(f"--param {text}: a range is two values with units "
                                 f"(1TB/s..8TB/s:8) or two factors (x0.5..x2:7), not one of each")
            dim = f.dimension
            for v in _range(lo, hi, _count(n, text),
                            lambda s: whatif.parse_value(f, s, text)[0] or 0.0):
                hw.append(whatif.Override(f, f"{f.name}={format_quantity(v, dim)}", value=v))
                labels.append(format_quantity(v, dim, digits=4))
        else:
            value, factor = whatif.parse_value(f, it, f"{f.name}={it}")
            hw.append(whatif.Override(f, f"{f.name}={it}", value=value, factor=factor))
            labels.append(it)
    return Param(f.name, "hardware", tuple(hw), tuple(labels))


def _count(n: str, text: str) -> int:
    try:
        return int(n) if n else 5
    except ValueError:
        raise InputError(f"--param {text}: the point count after ':' is a whole number") \
            from None


@dataclass(frozen=True)
class Sweep:
    model: str
    accelerator: str
    params: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "accelerator": self.accelerator,
                "params": list(self.params), "rows": list(self.rows)}

    def columns(self) -> list[str]:
        used = [k for k in ROW_FIGURES if any(r.get(k) is not None for r in self.rows)]
        return [*self.params, *(f"{p}_si" for p in self.params), "feasible", *used,
                "memory_bytes", "reason"]

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=self.columns(), extrasaction="ignore")
        w.writeheader()
        for r in self.rows:
            w.writerow(r)
        return buf.getvalue()


def run_sweep(spec: ModelSpec, system: System, params: Sequence[Param],
              run: Callable[[ModelSpec, System], Estimate], *, runner: Runner | None = None,
              max_points: int = MAX_POINTS) -> Sweep:
    """Every combination of the parameters' values, estimated by ``run``; ``runner`` (default:
    this process) fans the points out (``accelmap.fanout``), in the same order."""
    if not 1 <= len(params) <= 2:
        raise InputError("sweep one or two parameters (--param NAME=VALUES, at most twice)")
    if len({p.name for p in params}) < len(params):
        raise InputError("the two --param names are the same parameter")
    points = 1
    for p in params:
        points *= len(p.values)
    if points > max_points:
        raise InputError(f"{points} combinations: sweep at most {max_points}"
                         + ("" if runner and runner.distributed else
                            f" (with --ray, {MAX_POINTS_RAY})"))
    combos = list(itertools.product(*(range(len(p.values)) for p in params)))
    rows = (runner or Runner()).map(sweep_point, combos, (spec, system, tuple(params), run))
    return Sweep(spec.id, system.accelerator.id, tuple(p.name for p in params), tuple(rows))


def sweep_point(ctx: tuple[ModelSpec, System, tuple[Param, ...],
                           Callable[[ModelSpec, System], Estimate]],
                combo: tuple[int, ...]) -> dict[str, Any]:
    """The row of one combination (value indices, one per parameter)."""
    spec, system, params, run = ctx
    hw = [p.values[i] for p, i in zip(params, combo, strict=True) if p.kind == "hardware"]
    mo = [p.values[i] for p, i in zip(params, combo, strict=True) if p.kind == "model"]
    row: dict[str, Any] = {p.name: p.labels[i] for p, i in zip(params, combo, strict=True)}
    try:
        sys2 = system_with(system, hw) if hw else system
        spec2 = model_whatif.apply_model(spec, mo) if mo else spec
        for p, i in zip(params, combo, strict=True):
            o = p.values[i]
            row[f"{p.name}_si"] = (whatif.figure(sys2.accelerator, o.field.name)
                                   if p.kind == "hardware" else _model_value(spec2, p.name))
        est = run(spec2, sys2)
    except InputError as e:
        row.update(feasible=False, reason=str(e))
        return row
    m = est.metrics
    row.update(feasible=bool(est.feasible), reason=est.reason,
               memory_bytes=float(est.memory.total))
    for k in ROW_FIGURES:
        v = m.get(k)
        row[k] = float(v) if isinstance(v, int | float) and k != "max_batch" else v
    return row


def _model_value(spec: ModelSpec, name: str) -> float | None:
    path = model_whatif.MODEL_FIELDS[name][0]
    obj: Any = spec
    for p in path:
        obj = getattr(obj, p, None)
    if obj is None and name == "n_kv_heads":
        return float(spec.kv_heads)
    return float(obj) if obj is not None else None
