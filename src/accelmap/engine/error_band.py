"""The expected error of an estimate, learned from validation residuals of similar published
runs (DESIGN: "every estimate states its expected error").

``fitters/derive_error_bands.py`` predicts every shared published run that was not used to
fit a parameter, and records per group of similar runs the 80th percentile of the absolute
error and how many runs it rests on (``engine/data/error_bands.yaml``). A group is (phase,
stack, scale). A band comes only from runs like the one estimated -- same device class (the
stack's runs; GPU rows only for a GPU), same phase, same scale: when (phase, stack, scale)
holds fewer than ``MIN_RUNS`` runs, a GPU estimate on a GPU stack falls back to (phase, scale)
over all GPU stacks, and otherwise there is no band, which the estimate says. A band from runs
of another class (a GPU cluster's for a laptop CPU) or another scale (multi-node runs for one
device) would state an error nobody measured. The band is what the model got wrong on data it
had not seen, not a confidence interval of a fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from accelmap.cost.framework import COMPILED_STACKS

MIN_RUNS = 8  # fewer similar runs than this: use the next wider group
QUANTILE = 0.8


@dataclass(frozen=True)
class ErrorBand:
    pct: float  # +- this many percent
    quantile: float
    runs: int
    group: str  # which similar runs, e.g. "train / fsdp / 9-64 devices"

    @property
    def text(self) -> str:
        return (f"±{self.pct:.0f} % (p{self.quantile * 100:.0f} of {self.runs} similar "
                f"published runs: {self.group})")

    def to_dict(self) -> dict[str, Any]:
        return {"pct": round(self.pct, 1), "quantile": self.quantile, "runs": self.runs,
                "group": self.group, "text": self.text}


def scale(devices: int) -> str:
    """The scale bucket of a run: one device, one node, a few nodes, many, very many."""
    for hi, name in ((1, "1"), (8, "2-8"), (64, "9-64"), (512, "65-512")):
        if devices <= hi:
            return name
    return "513+"


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, Any]]:
    path = Path(str(resources.files("accelmap").joinpath("engine/data/error_bands.yaml")))
    if not path.exists():
        return {}
    return dict((yaml.safe_load(path.read_text()) or {}).get("groups", {}))


def key(*parts: str) -> str:
    return " / ".join(parts)


_CLASS_STACKS = frozenset(f.value for f in COMPILED_STACKS)


def error_band(phase: str, stack: str, devices: int,
               device_class: str = "gpu") -> ErrorBand | None:
    """The band of the narrowest group of runs like this one (class, phase, scale) with at
    least MIN_RUNS runs; None when there is none."""
    table = _table()
    sc = f"{scale(devices)} devices"
    # a non-GPU class, or a class's own stack (XLA, dataflow, a vendor graph compiler, eager
    # on a CPU), only takes its own runs: the GPU rows say nothing about how far off its
    # execution model is; no group drops the scale
    gpu = str(device_class).lower() == "gpu" and stack not in _CLASS_STACKS
    wide = (key(phase, sc),) if gpu else ()
    for k in (key(phase, stack, sc), *wide):
        g = table.get(k)
        if g and int(g["runs"]) >= MIN_RUNS:
            return ErrorBand(float(g["pct"]), QUANTILE, int(g["runs"]), k)
    return None
