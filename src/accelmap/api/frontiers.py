"""The serving frontier (``accelmap frontier``): tokens/s per device against tokens/s per user
for each accelerator, from closed-loop concurrency sweeps over every layout
(``search.frontier`` states the rules).

    from accelmap import api
    f = api.frontier("deepseek-r1", hw="b200,h200-sxm,mi355x", isl=1024, osl=1024,
                     weights="fp4")
    for c in f.curves:
        print(c.accelerator, [(p.concurrency, p.tokens_per_s_per_device) for p in c.front])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelmap.api.estimates import inference
from accelmap.api.models import context_warnings, load_model
from accelmap.api.parse import framework as parse_framework
from accelmap.api.planning import plan_clusters
from accelmap.api.serving import speculation
from accelmap.catalog import Catalog, load_catalog
from accelmap.errors import InputError
from accelmap.models.schema import ModelSpec
from accelmap.search.frontier import (
    DEFAULT_CONCURRENCY,
    Frontier,
    FrontierCurve,
    FrontierPoint,
    Progress,
    check_concurrency,
)
from accelmap.search.frontier import frontier as _frontier

__all__ = ["DEFAULT_CONCURRENCY", "Frontier", "FrontierCurve", "FrontierPoint", "concurrencies",
           "frontier"]

MAX_POINTS = 64  # concurrencies one sweep takes


def concurrencies(text: str | Sequence[int] | None) -> tuple[int, ...]:
    """'1,8,64' or a list (None: ``DEFAULT_CONCURRENCY``), each a whole number of clients."""
    if text is None:
        return DEFAULT_CONCURRENCY
    if isinstance(text, str):
        parts = [t.strip() for t in text.split(",") if t.strip()]
        try:
            values = [int(t) for t in parts]
        except ValueError:
            raise InputError(f"--concurrency {text!r}: give whole numbers of clients separated "
                             "by commas, e.g. 1,8,64") from None
    else:
        values = list(text)
    if len(values) > MAX_POINTS:
        raise InputError(f"--concurrency takes at most {MAX_POINTS} values, got {len(values)}")
    return check_concurrency(values)


def frontier(model: str | ModelSpec, *, hw: str | None = None, cluster: str | None = None,
             devices: int | None = None, isl: int = 1024, osl: int = 1024,
             weights: str = "bf16", moe_weights: str | None = None, kv: str | None = None,
             framework: str | None = None, concurrency: str | Sequence[int] | None = None,
             mtp: int | None = None, draft: str | None = None, accept: float | None = None,
             draft_len: int | str | None = "auto",
             catalog: Catalog | None = None, runner: Any = None,
             progress: Progress | None = None) -> Frontier:
    """The frontier of ``model`` on each accelerator of ``hw`` ('a,b', or 'any': every part
    with a system preset; ``devices`` each, default 8) or on one ``cluster``, for requests of
    ``isl`` prompt and ``osl`` output tokens at the given precisions; with ``mtp`` head layers
    or a ``draft`` model and the acceptance rate ``accept`` (``api.speculation``), every layout
    also with speculative decoding. Every value is checked before any simulation: one clear
    InputError for each mistake."""
    cat = catalog or load_catalog()
    spec = model if isinstance(model, ModelSpec) else load_model(model, cat)
    for name, v in (("--isl", isl), ("--osl", osl)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"{name} must be a whole number of tokens, 1 or more; got {v!r}")
    wl = inference(1, isl, osl, weights, kv, moe_weights=moe_weights)
    context_warnings(spec, prompt=isl, output=osl)  # serving past the context: refused
    conc = concurrencies(concurrency)
    fw = parse_framework(framework, False)
    sp = (speculation(accept, draft=draft, mtp=mtp, draft_len=draft_len, catalog=cat)
          if mtp is not None or draft is not None else None)
    if sp is None and accept is not None:
        raise InputError("--accept is the acceptance rate of a drafter: add --mtp N or "
                         "--draft MODEL")
    clusters = plan_clusters(cat, cluster, hw, devices, train=False)
    return _frontier(spec, clusters, wl, framework=fw, concurrency=conc, weights=weights,
                     speculation=sp, runner=runner, progress=progress)
