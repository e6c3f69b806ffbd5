"""The public Python API: everything the CLI can do, as functions over typed values.

Names and text are resolved here, with one clear ``InputError`` (or ``NotFoundError``,
``AmbiguousNameError``) for each mistake, so the CLI, the web app and notebooks only parse
arguments, call these functions and render what they return.

    from accelmap import api
    spec = api.load_model("llama-3.1-70b")
    system = api.load_system(cluster="64xH100")
    wl = api.training(batch=256, seq=8192, recompute="full", tokens="15T")
    est = api.estimate(spec, system, wl, api.mapping(system, wl, tp=8, pp=2, zero=1))
    print(est.step_time_s, est.mfu, est.memory.total)

One module per area, every name re-exported here:

- ``api.parse``: text to values: ``dtype``, ``choice``, ``count``, ``phase``.
- ``api.hardware``: ``find_accelerator``, ``find_system``, ``find_hardware``,
  ``list_accelerators`` (filter, sort by one of ``SORT_KEYS``), ``accelerator_row``,
  ``accelerator_details``, ``derived_figures``, ``sources``, ``compare`` (``Comparison``;
  ``DEFAULT_COMPARE``), ``compare_row``, ``list_systems``, ``system_row``, ``system_details``.
- ``api.models``: ``load_model``, ``list_models``, ``model_summary``, ``model_details``,
  ``import_model``, ``write_model``.
- ``api.estimates``: ``load_system``, ``training``, ``inference``, ``mapping``,
  ``serving_mapping``, ``default_mapping``, ``estimate`` (``TrainStep`` / ``ServeStep``),
  ``roofline`` (``Roofline``).
- ``api.validation``: ``read_cases``, ``predict_cases``, ``summarize``, ``compress_ids``,
  ``validate_cases`` (``Validation``).

Importing ``accelmap.api`` is cheap: each name loads its module on first use, so a command-line
tool can import the API at the top and still start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelmap.api.estimates import (
        Roofline,
        inference,
        load_system,
        mapping,
        roofline,
        serving_mapping,
        training,
    )
    from accelmap.api.hardware import (
        Chooser,
        Comparison,
        accelerator_details,
        accelerator_row,
        compare,
        compare_row,
        derived_figures,
        find_accelerator,
        find_hardware,
        find_system,
        list_accelerators,
        list_systems,
        sources,
        system_details,
        system_row,
    )
    from accelmap.api.models import (
        import_model,
        list_models,
        load_model,
        model_details,
        model_summary,
        write_model,
    )
    from accelmap.api.parse import choice, count, dtype, phase
    from accelmap.api.validation import (
        Validation,
        compress_ids,
        predict_cases,
        read_cases,
        summarize,
        validate_cases,
    )
    from accelmap.catalog import Catalog, load_catalog
    from accelmap.cost.calibration import CalibrationProfile
    from accelmap.engine import OverlapPolicy, System, default_mapping, estimate
    from accelmap.engine.result import Estimate, ServeStep, TrainStep
    from accelmap.hardware.derived import DerivedFigures
    from accelmap.hardware.listing import DEFAULT_COMPARE, SORT_KEYS
    from accelmap.hardware.schema import Accelerator, DeviceClass, SystemPreset
    from accelmap.mapping.plan import Mapping
    from accelmap.models.schema import ModelSpec
    from accelmap.units import DType
    from accelmap.validate.cases import CaseFile
    from accelmap.validate.outcome import Prediction, Status
    from accelmap.validate.report import GroupStats, Summary
    from accelmap.workload import Inference, Phase, Training

# name -> the module that defines it (loaded on first use)
_LAZY: dict[str, str] = {
    # text to values
    **dict.fromkeys(("choice", "count", "dtype", "phase"), "accelmap.api.parse"),
    # hardware
    **dict.fromkeys(("Chooser", "Comparison", "accelerator_details", "accelerator_row",
                     "compare", "compare_row", "derived_figures", "find_accelerator",
                     "find_hardware", "find_system", "list_accelerators", "list_systems",
                     "sources", "system_details", "system_row"), "accelmap.api.hardware"),
    **dict.fromkeys(("DEFAULT_COMPARE", "SORT_KEYS"), "accelmap.hardware.listing"),
    # models
    **dict.fromkeys(("import_model", "list_models", "load_model", "model_details",
                     "model_summary", "write_model"), "accelmap.api.models"),
    # estimates
    **dict.fromkeys(("Roofline", "inference", "load_system", "mapping", "roofline",
                     "serving_mapping", "training"), "accelmap.api.estimates"),
    **dict.fromkeys(("OverlapPolicy", "System", "default_mapping", "estimate"),
                    "accelmap.engine"),
    # validation
    **dict.fromkeys(("Validation", "compress_ids", "predict_cases", "read_cases", "summarize",
                     "validate_cases"), "accelmap.api.validation"),
    # the typed values these functions take and return
    **dict.fromkeys(("Catalog", "load_catalog"), "accelmap.catalog"),
    "CalibrationProfile": "accelmap.cost.calibration",
    **dict.fromkeys(("Estimate", "ServeStep", "TrainStep"), "accelmap.engine.result"),
    "DerivedFigures": "accelmap.hardware.derived",
    **dict.fromkeys(("Accelerator", "DeviceClass", "SystemPreset"), "accelmap.hardware.schema"),
    "Mapping": "accelmap.mapping.plan",
    "ModelSpec": "accelmap.models.schema",
    "DType": "accelmap.units",
    "CaseFile": "accelmap.validate.cases",
    **dict.fromkeys(("Prediction", "Status"), "accelmap.validate.outcome"),
    **dict.fromkeys(("GroupStats", "Summary"), "accelmap.validate.report"),
    **dict.fromkeys(("Inference", "Phase", "Training"), "accelmap.workload"),
}

__all__ = [
    "DEFAULT_COMPARE", "SORT_KEYS", "Accelerator", "CalibrationProfile", "CaseFile", "Catalog",
    "Chooser", "Comparison", "DType", "DerivedFigures", "DeviceClass", "Estimate", "GroupStats",
    "Inference", "Mapping", "ModelSpec", "OverlapPolicy", "Phase", "Prediction", "Roofline",
    "ServeStep", "Status", "Summary", "System", "SystemPreset", "TrainStep", "Training",
    "Validation", "accelerator_details", "accelerator_row", "choice", "compare", "compare_row",
    "compress_ids", "count", "default_mapping", "derived_figures", "dtype", "estimate",
    "find_accelerator", "find_hardware", "find_system", "import_model", "inference",
    "list_accelerators", "list_models", "list_systems", "load_catalog", "load_model",
    "load_system", "mapping", "model_details", "model_summary", "phase", "predict_cases",
    "read_cases", "roofline", "serving_mapping", "sources", "summarize", "system_details",
    "system_row", "training", "validate_cases", "write_model",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'accelmap.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
