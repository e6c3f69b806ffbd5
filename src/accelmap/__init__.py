"""accelmap: map large language models onto accelerators.

The public API lives in ``accelmap.api`` (everything the CLI can do); the names below are its
most used values and functions, importable from the package root. Everything else is an
implementation detail that may move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Accelerator",
    "Catalog",
    "Cluster",
    "Device",
    "Estimate",
    "Inference",
    "Mapping",
    "ModelSpec",
    "ServeStep",
    "System",
    "SystemPreset",
    "TrainStep",
    "Training",
    "count_params",
    "estimate",
    "load_catalog",
    "load_hf_config",
    "load_model",
    "load_system",
]

if TYPE_CHECKING:
    from accelmap.api import estimate, load_model, load_system
    from accelmap.catalog import Catalog, load_catalog
    from accelmap.cost.roofline import Device
    from accelmap.engine import ServeStep, System, TrainStep
    from accelmap.engine.result import Estimate
    from accelmap.hardware.cluster import Cluster
    from accelmap.hardware.schema import Accelerator, SystemPreset
    from accelmap.mapping.plan import Mapping
    from accelmap.models.hf import load_hf_config
    from accelmap.models.params import count_params
    from accelmap.models.schema import ModelSpec
    from accelmap.workload import Inference, Training

_LAZY = {
    "estimate": "accelmap.api",
    "load_model": "accelmap.api",
    "load_system": "accelmap.api",
    "Device": "accelmap.cost.roofline",
    "Estimate": "accelmap.engine.result",
    "ServeStep": "accelmap.engine",
    "System": "accelmap.engine",
    "TrainStep": "accelmap.engine",
    "Mapping": "accelmap.mapping.plan",
    "Cluster": "accelmap.hardware.cluster",
    "Inference": "accelmap.workload",
    "Training": "accelmap.workload",
    "Catalog": "accelmap.catalog",
    "load_catalog": "accelmap.catalog",
    "Accelerator": "accelmap.hardware.schema",
    "SystemPreset": "accelmap.hardware.schema",
    "ModelSpec": "accelmap.models.schema",
    "count_params": "accelmap.models.params",
    "load_hf_config": "accelmap.models.hf",
}


def __getattr__(name: str) -> Any:
    # Lazy so that `import accelmap` (and `accelmap --help`) does not load pydantic and numpy.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'accelmap' has no attribute {name!r}")
