"""Compare accelerators on one model: for every part of the catalog (or a list, or a class), the
devices that hold the model, the best mapping on them, speed per user, per system and per
device, TTFT/TPOT, $/M tokens and J/token, ranked by an objective (``search.compare`` states
the rules).

    from accelmap import api
    cmp = api.compare_accelerators("llama-3.1-70b", batch=1)
    for row in cmp.rows[:5]:
        print(row.accelerator, row.devices, row.mapping, row.tokens_per_s_per_user)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from accelmap.api.parse import batch_tokens, choice, dtype, sequences_per_step
from accelmap.api.parse import framework as parse_framework
from accelmap.catalog import Catalog, load_catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.ownership import breakeven_rows
from accelmap.errors import InputError
from accelmap.hardware.cluster import resolve_accelerator
from accelmap.hardware.schema import Accelerator, DeviceClass
from accelmap.models.schema import ModelSpec
from accelmap.search.compare import CompareJob, CompareObjective, CompareRow, compare
from accelmap.units import DType

__all__ = ["AcceleratorComparison", "CompareObjective", "CompareRow", "compare_accelerators",
           "compare_job", "compare_parts", "select_parts"]

# formats --precision takes: 16-bit, fp8 (W8A8), int8/int4 weight-only
PRECISIONS = (DType.BF16, DType.FP16, DType.FP8, DType.INT8, DType.INT4)


@dataclass(frozen=True)
class AcceleratorComparison:
    """One row per part, best first (``search.compare.rank_key``), and the job they ran."""

    model: str
    job: CompareJob
    rows: tuple[CompareRow, ...]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        j = self.job
        job: dict[str, Any] = {"kind": "train" if j.train else "serve",
                               "objective": j.objective.value,
                               "precision": "best" if j.best_precision else j.precision.value,
                               "devices": j.devices, "budget_usd_h": j.budget_usd_h}
        job.update({"seq": j.seq, "global_batch": j.global_batch} if j.train else
                   {"batch": j.batch, "prompt": j.prompt, "output": j.output})
        return {"model": self.model, "job": job, "seconds": round(self.seconds, 3),
                "rows": [r.to_dict() for r in self.rows]}


def select_parts(catalog: Catalog, hw: str, device_class: str | None) -> list[Accelerator]:
    """The parts ``--hw`` names ('all'/'any' or a comma list of forgiving names), of
    ``device_class`` only where one is given."""
    text = (hw if hw is not None else "all").strip()
    if not text:
        raise InputError("--hw is empty: give all, or accelerator ids separated by commas")
    if text.lower() in ("all", "any"):
        parts = list(catalog.accelerators.values())
    else:
        names = [h.strip() for h in text.split(",") if h.strip()]
        if not names:
            raise InputError("--hw needs 'all' or a comma list of accelerators")
        parts = list({p.id: p for p in (resolve_accelerator(n, catalog) for n in names)}.values())
    if device_class is not None:
        cls = choice(DeviceClass, device_class, "device class")
        parts = [p for p in parts if p.device_class is cls]
        if not parts:
            raise InputError(f"no accelerator of class {cls.value} in --hw {text}")
    return parts


def compare_accelerators(model: str | ModelSpec, *, train: bool = False, hw: str = "all",
                         device_class: str | None = None, batch: int = 1, prompt: int = 2048,
                         output: int = 256, seq: int = 4096,
                         global_batch_tokens: str | float = "4M",
                         precision: str | DType | None = None, best_precision: bool = False,
                         devices: int | None = None, budget_usd_h: float | None = None,
                         objective: str | CompareObjective | None = None,
                         framework: str | None = None, catalog: Catalog | None = None,
                         progress: Callable[[int, int], None] | None = None,
                         profile: CalibrationProfile | None = None, runner: Any = None
                         ) -> AcceleratorComparison:
    """Rows for ``model`` on every part in ``hw`` ('all' or a comma list; ``device_class``
    filters). Serving: ``batch`` requests per replica of ``prompt`` + ``output`` tokens;
    training: ``seq`` and ``global_batch_tokens`` (binary K/M). Devices: the fewest that hold
    the model, or exactly ``devices``, or what ``budget_usd_h`` buys at the part's price.
    ``precision`` is the same for every part (default bf16; a part without it falls back with a
    note); ``best_precision`` lets each part take its smallest native format. ``objective``
    (``CompareObjective``) ranks: default tokens per second per user for serving, tokens per
    second for training. ``profile``: a measured calibration, used for the part it was
    measured on (``api.measured_device`` adds a measured local device to ``catalog``).
    ``runner`` (``api.runner``, --ray): where the parts are estimated, the same rows.

    The keyword face of ``compare_job`` + ``select_parts`` + ``compare_parts``; the CLI and
    the web build an ``api.CompareRequest`` instead (``api.compare_inputs``)."""
    from accelmap.api.models import load_model

    cat = catalog or load_catalog()
    spec = model if isinstance(model, ModelSpec) else load_model(model, cat)
    job = compare_job(train=train, batch=batch, prompt=prompt, output=output, seq=seq,
                      global_batch_tokens=global_batch_tokens, precision=precision,
                      best_precision=best_precision, devices=devices,
                      budget_usd_h=budget_usd_h, objective=objective, framework=framework,
                      profile=profile)
    return compare_parts(spec, select_parts(cat, hw, device_class), job, cat, progress, runner)


def compare_job(*, train: bool = False, batch: int = 1, prompt: int = 2048, output: int = 256,
                seq: int = 4096, global_batch_tokens: str | float = "4M",
                precision: str | DType | None = None, best_precision: bool = False,
                devices: int | None = None, budget_usd_h: float | None = None,
                objective: str | CompareObjective | None = None, framework: str | None = None,
                profile: CalibrationProfile | None = None) -> CompareJob:
    """The job every part runs, from text, every value checked before any part is estimated
    (``compare_accelerators`` says what each means)."""
    if precision is not None and best_precision:
        raise InputError("give --precision P or --best-precision, not both")
    if devices is not None and budget_usd_h is not None:
        raise InputError("give --devices N or --budget-usd-h X, not both")
    if devices is not None and devices < 1:
        raise InputError(f"--devices must be at least 1, got {devices}")
    if budget_usd_h is not None and not (budget_usd_h > 0 and math.isfinite(budget_usd_h)):
        raise InputError(f"--budget-usd-h must be a positive $ per hour, got {budget_usd_h}")
    for name, v in (("--batch", batch), ("--prompt", prompt), ("--output", output),
                    ("--seq", seq)):
        if v < 1:
            raise InputError(f"{name} must be at least 1, got {v}")
    p = _precision(precision, train)
    framework = parse_framework(framework, train)
    # like with like: rows that each take the fewest devices that hold the job differ in device
    # count (1 B200 beside 32 Wormholes), so training ranks them per device; with --devices or
    # --budget-usd-h every row has the same count or the same money, and the total compares
    default = (CompareObjective.TOKENS_PER_S_PER_USER if not train
               else CompareObjective.TOKENS_PER_S if devices is not None or budget_usd_h
               else CompareObjective.TOKENS_PER_S_PER_DEVICE)
    obj = (choice(CompareObjective, objective, "objective") if objective is not None
           else default)
    if train and obj is CompareObjective.TOKENS_PER_S_PER_USER:
        raise InputError("--objective tokens_per_s_per_user is for serving; training ranks by "
                         "tokens_per_s, tokens_per_s_per_device, usd_per_million_tokens or "
                         "energy_j_per_token_tdp")
    gb = (sequences_per_step(global_batch_tokens, seq) if train
          else max(round(batch_tokens(global_batch_tokens) / seq), 1))
    if framework is not None:
        from accelmap.cost.framework import Framework

        choice(Framework, framework, "framework")
    return CompareJob(train=train, batch=batch, prompt=prompt, output=output, seq=seq,
                      global_batch=gb, precision=p, best_precision=best_precision,
                      devices=devices, budget_usd_h=budget_usd_h, objective=obj,
                      framework=framework, profile=profile)


def _precision(precision: str | DType | None, train: bool) -> DType:
    """--precision as one of ``PRECISIONS`` (default bf16); int8/int4 serving only."""
    try:
        p = dtype(precision, "precision") if precision is not None else DType.BF16
    except InputError:
        p = DType.FP64  # not a format compare takes: the message below lists them
    if p not in PRECISIONS:
        raise InputError(f"--precision {precision}: use one of "
                         f"{', '.join(d.value for d in PRECISIONS)}")
    if train and p in (DType.INT8, DType.INT4):
        raise InputError(f"--precision {p.value} is a serving format (weight-only); train in "
                         "bf16, fp16 or fp8")
    return p


def compare_parts(spec: ModelSpec, parts: list[Accelerator], job: CompareJob,
                  catalog: Catalog, progress: Callable[[int, int], None] | None = None,
                  runner: Any = None) -> AcceleratorComparison:
    """Every part of ``parts`` on ``job`` (``search.compare``), ranked, each feasible row with
    its break-even price (``breakevens``)."""
    rows, seconds = compare(spec, parts, job, catalog, progress, runner)
    return AcceleratorComparison(spec.id, job, tuple(breakevens(rows)), seconds)


def breakevens(rows: list[CompareRow]) -> list[CompareRow]:
    """Each feasible row with ``breakeven_usd_per_h``: the price per device-hour at which it
    matches the cheapest priced row's $/M tokens (``cost.ownership.breakeven_price``); a part
    without a price quote gets the price it would need."""
    even = breakeven_rows([r.to_dict() if r.feasible else
                           {**r.to_dict(), "tokens_per_s_per_device": None} for r in rows],
                          "usd_per_million_tokens", "tokens_per_s_per_device",
                          "price_usd_per_h")
    return [replace(r, breakeven_usd_per_h=e.get("breakeven_usd_per_h"),
                    breakeven_vs=e.get("breakeven_vs")) for r, e in zip(rows, even, strict=True)]
