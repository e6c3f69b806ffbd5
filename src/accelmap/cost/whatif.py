"""The catalog with what-ifs applied: ``--set`` on accelerators (``hardware.whatif``: their
figures and a ``what_if`` list), on the network tiers of the system presets built on them, and
on models (``models.whatif``), and ``--own`` (``cost.ownership``): a part paid for by owning it
is priced at its owned cost per useful device-hour, its rental quote kept beside it. It sits in
cost/ because that last step turns a purchase into $ per device-hour; ``api.whatif`` parses the
texts and re-exports these names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from accelmap.catalog import Catalog
from accelmap.cost.ownership import Ownership, owned_cost
from accelmap.errors import InputError
from accelmap.hardware import plausibility
from accelmap.hardware import whatif as hw_whatif
from accelmap.hardware.schema import Accelerator, PriceQuote
from accelmap.hardware.whatif import Override
from accelmap.models import whatif as model_whatif
from accelmap.models.schema import ModelSpec

__all__ = ["WhatIf", "WhatIfCatalog", "apply_whatif", "with_model_whatif"]


@dataclass(frozen=True)
class WhatIf:
    hardware: tuple[Override, ...] = ()
    model: tuple[model_whatif.ModelOverride, ...] = ()
    # --own: every part (or own_target) is paid for by owning it, at this cost model
    ownership: Ownership | None = None
    own_target: str | None = None
    own_text: str | None = None

    def __bool__(self) -> bool:
        return bool(self.hardware or self.model or self.ownership)

    def texts(self) -> list[str]:
        own = [f"own {self.own_text}"] if self.own_text is not None else []
        return [o.text for o in self.hardware] + [o.text for o in self.model] + own


@dataclass(frozen=True)
class WhatIfCatalog(Catalog):
    """A catalog with what-ifs applied; ``api.load_model`` applies the model what-ifs to a
    model read from a file too; ``rent`` keeps the rental quote of every part whose price
    became an owning cost (--own)."""

    whatif: WhatIf = WhatIf()
    rent: Mapping[str, PriceQuote | None] = dataclasses.field(default_factory=dict)

    def apply_model(self, spec: ModelSpec) -> ModelSpec:
        if not self.whatif.model or model_whatif.what_if_notes(spec):
            return spec  # a catalog model is already changed
        return model_whatif.apply_model(spec, self.whatif.model)


def apply_whatif(catalog: Catalog, wi: WhatIf) -> Catalog:
    """The catalog with every what-if applied: accelerators (their figures and a ``what_if``
    list), the network tiers of system presets built on them, and the models."""
    if not wi:
        return catalog
    known = list(catalog.accelerators.values())
    accs = {k: hw_whatif.apply(a, wi.hardware) for k, a in catalog.accelerators.items()}
    for o in wi.hardware:
        if o.target is not None and o.target in accs and not any(
                o.text in w for w in accs[o.target].what_if):
            raise InputError(f"--set {o.text}: could not apply it to {o.target}")
    systems = {k: (s.model_copy(update={"tiers": hw_whatif.apply_tiers(
        s.accelerator, s.tiers, wi.hardware)}) if hw_whatif.overrides_for(
        s.accelerator, wi.hardware) else s) for k, s in catalog.systems.items()}
    found = dict(catalog.plausibility)
    for k, a in accs.items():
        if a is not catalog.accelerators[k]:
            found[k] = tuple(plausibility.check(a, known))
    rent: dict[str, PriceQuote | None] = {}
    if wi.ownership is not None:
        for k, a in list(accs.items()):
            if wi.own_target is None or wi.own_target == k:
                owned = _owned(a, wi)
                if owned is not None:
                    rent[k] = a.price
                    accs[k] = owned
    fields = {f.name: getattr(catalog, f.name) for f in dataclasses.fields(Catalog)}
    fields.update(accelerators=accs, systems=systems, plausibility=found)
    return WhatIfCatalog(**fields, whatif=wi, rent=rent)


def _owned(acc: Accelerator, wi: WhatIf) -> Accelerator | None:
    """``acc`` priced at its owned cost per useful device-hour (None: no purchase price)."""
    assert wi.ownership is not None
    try:
        c = owned_cost(acc.id, acc.tdp.value if acc.tdp else None, wi.ownership)
    except ValueError:
        return None
    o = hw_whatif.Override(hw_whatif.lookup_field("price"), f"own {wi.own_text}",
                           value=c.usd_per_hour)
    new = hw_whatif.apply(acc, [o])
    assert new.price is not None
    quote = new.price.model_copy(update={
        "market": f"owned: ${c.purchase_usd:,.0f} over {wi.ownership.years:g} y, "
                  f"{c.power_w:,.0f} W, utilization {c.utilization:.0%}"})
    return new.model_copy(update={"price": quote})


def with_model_whatif(cat: Catalog | None, spec: ModelSpec) -> ModelSpec:
    """``spec`` with the catalog's model what-ifs (``load_model`` calls this)."""
    return cat.apply_model(spec) if isinstance(cat, WhatIfCatalog) else spec
