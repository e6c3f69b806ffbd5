"""What-ifs on any command: ``--set NAME=VALUE`` and ``--price USD/h`` applied to the catalog.

    from accelmap import api
    wi = api.what_if(["memory_bandwidth=6.7TB/s", "h100-sxm5-80gb:bf16=2.5PFLOP/s"])
    cat = api.apply_whatif(api.load_catalog(), wi)
    est = api.estimate(api.load_model("llama-3.1-8b", cat),
                       api.load_system(hw="h100", catalog=cat), api.inference(16, 512, 128))

Hardware names (``hardware.whatif.FIELDS``) change every accelerator of the catalog, or one
(``ID:NAME=VALUE``), and the network tiers of the system presets built on it; model names
(``models.whatif.MODEL_FIELDS``: n_layers, d_model, vocab_size ...) change the model the
command loads (``api.load_model``), preset or file alike. A wrong name is one line with the
closest names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from accelmap.catalog import Catalog
from accelmap.cost.ownership import as_ownership
from accelmap.cost.whatif import WhatIf, WhatIfCatalog, apply_whatif
from accelmap.errors import InputError
from accelmap.hardware import whatif as hw_whatif
from accelmap.hardware.whatif import Override
from accelmap.models import whatif as model_whatif
from accelmap.models.schema import ModelSpec

# WhatIf, WhatIfCatalog, apply_whatif and with_model_whatif live in cost/whatif.py (the catalog
# with the what-ifs applied); this module parses the texts
__all__ = ["WhatIf", "WhatIfCatalog", "apply_whatif", "sensitivity", "sweep", "what_if",
           "whatif_fields"]


def _unknown(name: str) -> InputError:
    import difflib

    names = [*hw_whatif._BY_NAME, *model_whatif.all_names()]
    key = name.strip().lower().replace("-", "_")
    near = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
    canon = list(dict.fromkeys(
        hw_whatif._BY_NAME[n].name if n in hw_whatif._BY_NAME else model_whatif._BY_NAME[n]
        for n in near))
    hint = f"; did you mean {', '.join(canon)}?" if canon else ""
    return InputError(f"unknown --set name {name.strip()!r}{hint} (hardware: "
                      f"{', '.join(f.name for f in hw_whatif.FIELDS if '.' not in f.name)}; "
                      f"model: {', '.join(model_whatif.model_names())})")


def what_if(sets: Sequence[str] = (), price: str | float | None = None,
            catalog: Catalog | None = None, own: str | None = None) -> WhatIf:
    """Parse ``--set`` texts (and ``--price``, the same as ``--set price=...``); a target id
    (``ID:NAME=VALUE``) is resolved against ``catalog`` (forgiving names). ``own``: pay by
    owning ('[ID:]purchase=30000,kwh=0.08,pue=1.3,years=5,utilization=0.7', keys optional;
    ``cost.ownership``): the price of every part with a purchase price (published or given)
    becomes its owned cost per useful device-hour."""
    hw: list[Override] = []
    model: list[model_whatif.ModelOverride] = []
    texts = list(sets)
    if price is not None:
        p = str(price).strip()
        texts.append(f"price={p}" if any(c.isalpha() for c in p.replace('x', '')) or "$" in p
                     else f"price={p} USD/h")
    for text in texts:
        if "=" not in text:
            raise InputError(f"--set {text!r}: write NAME=VALUE, e.g. memory_bandwidth=6.7TB/s")
        name, _, raw = text.partition("=")
        bare = name.partition(":")[2] if ":" in name else name
        key = bare.strip().lower().replace("-", "_")
        if key in hw_whatif._BY_NAME:
            o = hw_whatif.parse_override(text)
            if o.target is not None:
                o = dataclasses.replace(o, target=_resolve(o.target, catalog))
            hw.append(o)
        elif model_whatif.is_model_field(bare):
            if ":" in name:
                raise InputError(f"--set {text}: a model field applies to the model the "
                                 "command loads; write it without an id")
            model.append(model_whatif.parse_model_override(bare, raw, text.strip()))
        else:
            raise _unknown(bare)
    own_model, own_target = None, None
    if own is not None:
        body = own
        head = own.split(",", 1)[0]
        if ":" in head:
            own_target, _, body = own.partition(":")
            own_target = _resolve(own_target.strip(), catalog)
        own_model = as_ownership(body)
    return WhatIf(tuple(hw), tuple(model), own_model, own_target, own)


def _resolve(target: str, catalog: Catalog | None) -> str:
    from accelmap.catalog import load_catalog
    from accelmap.hardware.cluster import resolve_accelerator

    # 'h100' means the variant systems are built from, as in compare and plan
    return resolve_accelerator(target, catalog or load_catalog()).id


def whatif_fields() -> list[dict[str, Any]]:
    """Every name ``--set`` takes, with what it changes and its unit."""
    from accelmap.units import base_symbol

    rows: list[dict[str, Any]] = [
        {"name": f.name, "kind": "hardware", "unit": base_symbol(f.dimension) if f.dimension
         else "factor (x2)", "aliases": list(f.aliases), "help": f.help}
        for f in hw_whatif.FIELDS]
    rows += [{"name": n, "kind": "model", "unit": "count or factor (x2)",
              "aliases": list(model_whatif.MODEL_FIELDS[n][1]),
              "help": f"model {'.'.join(model_whatif.MODEL_FIELDS[n][0])}"}
             for n in model_whatif.model_names()]
    return rows


# -- sensitivity and sweeps ----------------------------------------------------------------------
def sensitivity(model: ModelSpec, system: Any, workload: Any, mapping: Any = None, *,
                framework: Any = None, imbalance: float = 1.0, base: Any = None) -> Any:
    """Which resource binds: d ln time / d ln resource for compute, memory bandwidth,
    scale-up and scale-out bandwidth (``search.sensitivity``); None when the estimate cannot
    run. ``base``: the estimate already made with these inputs (saves one run)."""
    from accelmap.engine import estimate
    from accelmap.search.sensitivity import sensitivity as _sens

    def run(s: Any) -> Any:
        return estimate(model, s, workload, mapping, framework=framework, imbalance=imbalance)

    return _sens(run, system, base)


def sweep(model: ModelSpec, system: Any, workload: Any, params: Sequence[str],
          mapping: Any = None, *, framework: Any = None, imbalance: float = 1.0,
          runner: Any = None, max_points: int | None = None) -> Any:
    """One estimate per combination of one or two ``params`` ('memory_bandwidth=2TB/s,4TB/s',
    'n_layers=24..48:7', 'bf16=x0.5,x1,x2'): a ``search.sweep.Sweep`` (rows, CSV).
    ``runner`` (``api.runner``, --ray): where the points run, the same rows in the same order;
    at most ``search.sweep.MAX_POINTS`` points in this process, ``MAX_POINTS_RAY`` on Ray,
    unless ``max_points`` says otherwise."""
    from accelmap.engine import estimate
    from accelmap.search.sweep import MAX_POINTS, MAX_POINTS_RAY, parse_param, run_sweep

    def run(spec: ModelSpec, s: Any) -> Any:
        return estimate(spec, s, workload, mapping, framework=framework, imbalance=imbalance)

    cap = max_points or (MAX_POINTS_RAY if runner is not None and runner.distributed
                         else MAX_POINTS)
    return run_sweep(model, system, [parse_param(p) for p in params], run, runner=runner,
                     max_points=cap)
