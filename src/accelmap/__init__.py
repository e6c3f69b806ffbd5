"""accelmap: map large language models onto accelerators.

The public API is small; everything else is an implementation detail that may move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Accelerator",
    "Catalog",
    "Device",
    "Estimate",
    "Inference",
    "ModelSpec",
    "SystemPreset",
    "Training",
    "count_params",
    "estimate_inference",
    "estimate_training",
    "load_catalog",
    "load_hf_config",
]

if TYPE_CHECKING:
    from accelmap.catalog import Catalog, load_catalog
    from accelmap.cost.roofline import Device
    from accelmap.estimate import Estimate, estimate_inference, estimate_training
    from accelmap.hardware.schema import Accelerator, SystemPreset
    from accelmap.models.hf import load_hf_config
    from accelmap.models.params import count_params
    from accelmap.models.schema import ModelSpec
    from accelmap.workload import Inference, Training

_LAZY = {
    "Device": "accelmap.cost.roofline",
    "Estimate": "accelmap.estimate",
    "estimate_inference": "accelmap.estimate",
    "estimate_training": "accelmap.estimate",
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
