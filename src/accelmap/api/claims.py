"""Check a device spec and a throughput claim: plausible, implausible or impossible, with the
bound that decides (``hardware.claims`` states the bounds), and the engine's own prediction
for the same claim beside it.

    from accelmap import api
    r = api.check_claim("groq-lpu-v1", "300 tok/s per user on llama-2-70b on 576 chips")
    print(r.verdict, r.deciding)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelmap.catalog import Catalog, load_catalog
from accelmap.errors import InputError
from accelmap.hardware import claims as hc
from accelmap.hardware import whatif as hw_whatif
from accelmap.hardware.schema import Accelerator

__all__ = ["ClaimCheck", "check_claim", "load_part"]


@dataclass(frozen=True)
class ClaimCheck:
    accelerator: str
    verdict: hc.Verdict
    deciding: hc.Bound | None
    spec: tuple[hc.Bound, ...]
    claim: hc.Claim | None = None
    claim_bounds: tuple[hc.Bound, ...] = ()
    need: hc.Need | None = None
    engine: dict[str, Any] | None = None
    silicon: hc.Silicon | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def reason(self) -> str:
        if self.deciding is None:
            return "no bound is broken"
        return f"{self.deciding.name}: {self.deciding.sentence}"

    def to_dict(self) -> dict[str, Any]:
        n = self.need
        return {
            "accelerator": self.accelerator,
            "verdict": self.verdict.value,
            "bound": self.deciding.name if self.deciding else None,
            "reason": self.reason,
            "claim": self.claim.to_dict() if self.claim else None,
            "claim_bounds": [b.to_dict() for b in self.claim_bounds],
            "spec_bounds": [b.to_dict() for b in self.spec],
            "need": None if n is None else {
                "weight_dtype": n.weight_dtype.value, "weights_bytes": n.weights_bytes,
                "bytes_per_step": n.bytes_per_step, "steps_per_s": n.steps_per_s,
                "tokens_per_s": n.aggregate_tokens_per_s,
                "flops_per_token": n.flops_per_token, "devices": n.devices,
                "notes": list(n.notes)},
            "engine": self.engine,
            "silicon": None if self.silicon is None else {
                "process": self.silicon.process, "node_nm": self.silicon.node_nm,
                "die_area_mm2": self.silicon.die_area_mm2, "source": self.silicon.source},
            "notes": list(self.notes),
        }


def load_part(hw: str, catalog: Catalog | None = None) -> tuple[Accelerator, hc.Silicon | None]:
    """A catalog part (forgiving name) or an accelerator YAML file; a file may carry a
    ``silicon: {process, node_nm, die_area_mm2}`` block. The catalog's what-ifs apply to both."""
    from accelmap.cost.whatif import WhatIfCatalog
    from accelmap.hardware.cluster import resolve_accelerator

    cat = catalog or load_catalog()
    path = Path(hw).expanduser()
    if path.suffix in (".yaml", ".yml"):
        from accelmap.catalog import read_yaml, validate_entry

        if not path.exists():
            raise InputError(f"no such file: {hw}")
        data = read_yaml(path)
        if not isinstance(data, dict):
            raise InputError(f"{hw}: expected a mapping of accelerator fields")
        data = {k: v for k, v in data.items() if k != "kind"}
        si = hc.parse_silicon(data.pop("silicon"), str(path)) if "silicon" in data else None
        acc = validate_entry(Accelerator, data, str(path))
        if isinstance(cat, WhatIfCatalog):
            acc = hw_whatif.apply(acc, cat.whatif.hardware)
        return acc, si
    acc = resolve_accelerator(hw, cat)
    return acc, hc.bundled_silicon(acc.id)


def _engine(spec: Any, acc: Accelerator, claim: hc.Claim, cat: Catalog,
            dtype: Any) -> dict[str, Any]:
    """The engine's prediction at the claim's batch, devices and lengths (tp over the devices,
    or the compiler's layout on an SRAM machine)."""
    from accelmap.api.estimates import inference, serving_mapping
    from accelmap.cost.execution import execution_model
    from accelmap.engine import System, estimate
    from accelmap.hardware.cluster import of_devices

    D = claim.devices or 1
    prompt, output = claim.prompt or 128, claim.output or 128
    batch = claim.batch or 1
    note = [] if claim.prompt else ["no lengths in the claim: prompt 128, output 128"]
    if not claim.batch:
        note.append("no batch in the claim: batch 1")
    system = System.single(acc) if D == 1 else System.of(of_devices(acc, D, cat))
    m = None if execution_model(acc).layer_pipelined else serving_mapping(tp=D)
    w = dtype if dtype.value in ("bf16", "fp16", "fp8", "int8", "int4") else "fp8"
    if w != dtype.value:
        note.append(f"the engine runs {w} weights ({dtype.value} is not simulated)")
    est = estimate(spec, system, inference(batch, prompt, output, w), m)
    if not est.feasible:
        return {"feasible": False, "reason": est.reason, "notes": note}
    agg = float(est.tokens_per_s or 0.0)
    claimed = claim.tokens_per_s * {"total": 1, "user": batch, "device": D}[claim.per]
    best, best_batch, band = agg, batch, est.error_band
    if not claim.batch:  # no batch claimed: the engine's best over the batches that fit
        largest = int(getattr(est, "max_batch", None) or batch)
        for b in sorted({*(2**i for i in range(1, 21) if 2**i < largest), largest} - {1}):
            e = estimate(spec, system, inference(b, prompt, output, w), m)
            if e.feasible and float(e.tokens_per_s or 0.0) > best:
                best, best_batch, band = float(e.tokens_per_s or 0.0), b, e.error_band
    return {"feasible": True, "tokens_per_s": agg, "tokens_per_s_per_user": agg / batch,
            "tpot_s": getattr(est, "tpot_s", None), "ttft_s": getattr(est, "ttft_s", None),
            "claim_over_engine": claimed / agg
            if agg else None, "mapping": f"tp={D}" if m is not None else "layer-pipelined",
            "best_tokens_per_s": best, "best_batch": best_batch,
            "error_band": band.to_dict() if band else None,
            "claimed_tokens_per_s": claimed, "notes": note}


def check_claim(hw: str, claim: str | None = None, catalog: Catalog | None = None, *,
                devices: int | None = None, node_nm: float | None = None,
                die_area_mm2: float | None = None, engine: bool = True) -> ClaimCheck:
    """Check ``hw``'s spec (and ``claim``, 'N tok/s on MODEL at batch B ...'); ``devices``
    overrides the claim's device count; ``node_nm`` and ``die_area_mm2`` give the silicon a
    spec lacks."""
    from accelmap.api.models import load_model
    from accelmap.models.params import count_params

    cat = catalog or load_catalog()
    acc, si = load_part(hw, cat)
    if (node_nm is None) != (die_area_mm2 is None):
        raise InputError("--node and --die-area go together (the node's density needs an area)")
    if node_nm is not None and die_area_mm2 is not None:
        if node_nm <= 0 or die_area_mm2 <= 0:
            raise InputError("--node and --die-area must be positive")
        si = hc.Silicon(f"{node_nm:g} nm", node_nm, die_area_mm2, "given on the command line")
    known = list(cat.accelerators.values())
    spec_b = hc.spec_bounds(acc, known, si)
    notes = [] if si is not None else [
        "no die area or process node: the FLOP/s-per-mm2 and SRAM-density bounds are not "
        "checked (give --node and --die-area, or a 'silicon' block in the spec file)"]
    if claim is None:
        v = hc.verdict(spec_b)
        return ClaimCheck(acc.id, v, hc.deciding(spec_b), tuple(spec_b), silicon=si,
                          notes=tuple(notes))
    c = hc.parse_claim(claim)
    if devices is not None:
        c = hc.Claim(**{**c.__dict__, "devices": devices})
    spec = load_model(c.model, cat)
    cb, n = hc.claim_bounds(acc, spec, c, count_params(spec), si, known)
    allb = [*cb, *spec_b]
    eng = None
    if engine:
        try:
            eng = _engine(spec, acc, c, cat, n.weight_dtype)
        except InputError as e:
            eng = {"feasible": False, "reason": str(e), "notes": []}
    if eng and eng.get("feasible"):
        cb.append(hc.engine_bound(eng["claimed_tokens_per_s"], eng["best_tokens_per_s"],
                                  eng["best_batch"], (eng["error_band"] or {}).get("pct"),
                                  c.speculative))
        allb = [*cb, *spec_b]
    return ClaimCheck(acc.id, hc.verdict(allb), hc.deciding(allb), tuple(spec_b), c,
                      tuple(cb), n, eng, si, tuple(notes))
