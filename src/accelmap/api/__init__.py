"""The public Python API, in three levels named for what each thing is.

1. ``accelmap``, the package root: the quick start (``load_model``, ``load_system``,
   ``estimate`` and the values they take and return).
2. ``accelmap.api`` (this module): one function per question a user asks, and the values one
   builds to ask it. Names and text are resolved here, with one clear ``InputError`` (or
   ``NotFoundError``, ``AmbiguousNameError``) for each mistake, so the CLI, the web app and
   notebooks only parse arguments, call these functions and render what they return.
3. ``accelmap.api.<area>``: everything else of one area: the types of its results, the rows and
   details the faces render, parsers and constants. Each area's ``__all__`` lists its names.

    from accelmap import api
    spec = api.load_model("llama-3.1-70b")
    system = api.load_system(cluster="64xH100")
    wl = api.training(batch=256, seq=8192, recompute="full", tokens="15T")
    est = api.estimate(spec, system, wl, api.mapping(system, wl, tp=8, pp=2, zero=1))
    print(est.step_time_s, est.mfu, est.memory.total)
    row = api.hardware.accelerator_row(api.find_accelerator("h100"))   # level 3

Level 2, by question:

- what things are: ``load_catalog``, ``load_model``, ``import_model``, ``list_models``,
  ``load_system``, ``find_accelerator``, ``find_system``, ``find_hardware``, ``list_accelerators``,
  ``list_systems``, ``load_part``, ``SORT_KEYS`` (the columns ``list_accelerators`` sorts by)
- the job and its split: ``training``, ``inference``, ``adapters``, ``mapping``,
  ``serving_mapping``, ``default_mapping``, ``default_serving_layout``, ``EstimateRequest``,
  ``estimate_inputs``, ``PlanOptions``, ``plan_inputs``, ``CompareRequest``, ``compare_inputs``
  (the typed requests the CLI and the web both build, field names the CLI's flags),
  ``PlanRequest``, ``plan_request``, ``plan_clusters``
- how fast, how big, what it costs: ``estimate``, ``roofline``, ``energy_report``, ``cost_report``
- the best split: ``run_plan``, ``compare_clusters``, ``deadline_search``
- which accelerator: ``compare_accelerators`` (its steps: ``compare_inputs``, ``compare_parts``),
  ``compare_specs``, ``check_claim``
- serving under load: ``serving_load``, ``scenario_layout``, ``serve``, ``serve_batch``,
  ``speculation``, ``disaggregation``, ``serve_disaggregated``, ``plan_disaggregation``,
  ``frontier`` (tokens/s per device against tokens/s per user, over concurrency and layouts)
- what if: ``what_if``, ``sensitivity``, ``sweep``, ``advise``, ``design``
- real hardware: ``measure_matmul``, ``measure_bandwidth``, ``measure_overhead``,
  ``measure_attention``, ``measure_collectives``, ``calibrate``, ``load_profile``,
  ``measured_device``, ``open_store``
- checking predictions: ``validate_cases``, ``validate_local``
- reports and launch files: ``report_estimate``, ``report_plan``, ``report_from_json``,
  ``saved_report_html``, ``render_report``, ``write_report``, ``load_plan``, ``export_plan``,
  ``list_exporters``
- fan-out: ``runner``, ``Runner``, ``Progress``, ``FanoutError``
- values to ask with: ``Accelerator``, ``CalibrationProfile``, ``Catalog``, ``Cluster``,
  ``CompareObjective``, ``DType``, ``Disaggregation``, ``Inference``, ``Load``, ``Mapping``,
  ``ModelSpec``, ``Objective``, ``Phase``, ``Scenario``, ``Slo``, ``Speculation``, ``System``,
  ``Training``

Three comparisons, three names: ``compare_specs`` puts datasheets side by side (no workload),
``compare_accelerators`` runs one job on every catalog part by fixed sizing rules (fast),
``compare_clusters`` searches every mapping on each of a few clusters and ranks their best plans.

The areas (level 3): ``claims``, ``comparison``, ``costs``, ``energy``, ``estimates``, ``exports``,
``frontiers``, ``hardware``, ``measurement``, ``models``, ``parse``, ``planning``, ``reports``,
``requests``, ``serving``, ``shapes``, ``validation``, ``whatif``.
A name asked of the wrong level says where it lives.

Importing ``accelmap.api`` is cheap: each name loads its module on first use, so a command-line
tool can import the API at the top and still start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelmap.api import (
        claims,
        comparison,
        costs,
        energy,
        estimates,
        exports,
        frontiers,
        hardware,
        measurement,
        models,
        parse,
        planning,
        reports,
        requests,
        serving,
        shapes,
        validation,
        whatif,
    )
    from accelmap.api.claims import check_claim, load_part
    from accelmap.api.comparison import CompareObjective, compare_accelerators, compare_parts
    from accelmap.api.costs import cost_report
    from accelmap.api.energy import energy_report
    from accelmap.api.estimates import (
        adapters,
        default_serving_layout,
        inference,
        load_system,
        mapping,
        roofline,
        serving_mapping,
        training,
    )
    from accelmap.api.exports import export_plan, list_exporters, load_plan
    from accelmap.api.frontiers import frontier
    from accelmap.api.hardware import (
        compare_specs,
        find_accelerator,
        find_hardware,
        find_system,
        list_accelerators,
        list_systems,
    )
    from accelmap.api.measurement import (
        calibrate,
        load_profile,
        measure_attention,
        measure_bandwidth,
        measure_collectives,
        measure_matmul,
        measure_overhead,
        measured_device,
        open_store,
    )
    from accelmap.api.models import import_model, list_models, load_model
    from accelmap.api.planning import (
        PlanRequest,
        compare_clusters,
        deadline_search,
        plan_clusters,
        plan_request,
        run_plan,
    )
    from accelmap.api.reports import (
        render_report,
        report_estimate,
        report_from_json,
        report_plan,
        saved_report_html,
        write_report,
    )
    from accelmap.api.requests import (
        CompareRequest,
        EstimateRequest,
        PlanOptions,
        compare_inputs,
        estimate_inputs,
        plan_inputs,
    )
    from accelmap.api.serving import (
        Disaggregation,
        Load,
        Scenario,
        Slo,
        Speculation,
        disaggregation,
        plan_disaggregation,
        scenario_layout,
        serve,
        serve_batch,
        serve_disaggregated,
        serving_load,
        speculation,
    )
    from accelmap.api.shapes import advise, design
    from accelmap.api.validation import validate_cases, validate_local
    from accelmap.api.whatif import sensitivity, sweep, what_if
    from accelmap.catalog import Catalog, load_catalog
    from accelmap.cost.calibration import CalibrationProfile
    from accelmap.engine import System, default_mapping, estimate
    from accelmap.fanout import FanoutError, Progress, Runner, runner
    from accelmap.hardware.cluster import Cluster
    from accelmap.hardware.listing import SORT_KEYS
    from accelmap.hardware.schema import Accelerator
    from accelmap.mapping.plan import Mapping
    from accelmap.models.schema import ModelSpec
    from accelmap.search.result import Objective
    from accelmap.units import DType
    from accelmap.workload import Inference, Phase, Training

# the areas of level 3, each a module of this package
AREAS = ("claims", "comparison", "costs", "energy", "estimates", "exports", "frontiers",
         "hardware",
         "measurement", "models", "parse", "planning", "reports", "requests",
         "serving", "shapes", "validation", "whatif")

# level 2: name -> the module that defines it (loaded on first use)
_LAZY: dict[str, str] = {
    # what things are
    "load_catalog": "accelmap.catalog",
    "load_model": "accelmap.api.models",
    "import_model": "accelmap.api.models",
    "list_models": "accelmap.api.models",
    "load_system": "accelmap.api.estimates",
    "find_accelerator": "accelmap.api.hardware",
    "find_system": "accelmap.api.hardware",
    "find_hardware": "accelmap.api.hardware",
    "list_accelerators": "accelmap.api.hardware",
    "list_systems": "accelmap.api.hardware",
    "SORT_KEYS": "accelmap.hardware.listing",
    "load_part": "accelmap.api.claims",
    # the job and its split
    "training": "accelmap.api.estimates",
    "inference": "accelmap.api.estimates",
    "adapters": "accelmap.api.estimates",
    "mapping": "accelmap.api.estimates",
    "serving_mapping": "accelmap.api.estimates",
    "default_mapping": "accelmap.engine",
    "default_serving_layout": "accelmap.api.estimates",
    "EstimateRequest": "accelmap.api.requests",
    "estimate_inputs": "accelmap.api.requests",
    "PlanRequest": "accelmap.api.planning",
    "plan_request": "accelmap.api.planning",
    "plan_clusters": "accelmap.api.planning",
    "PlanOptions": "accelmap.api.requests",
    "plan_inputs": "accelmap.api.requests",
    "CompareRequest": "accelmap.api.requests",
    "compare_inputs": "accelmap.api.requests",
    # how fast, how big, what it costs
    "estimate": "accelmap.engine",
    "roofline": "accelmap.api.estimates",
    "energy_report": "accelmap.api.energy",
    "cost_report": "accelmap.api.costs",
    # the best split
    "run_plan": "accelmap.api.planning",
    "compare_clusters": "accelmap.api.planning",
    "deadline_search": "accelmap.api.planning",
    # which accelerator
    "compare_accelerators": "accelmap.api.comparison",
    "compare_parts": "accelmap.api.comparison",
    "compare_specs": "accelmap.api.hardware",
    "check_claim": "accelmap.api.claims",
    # serving under load
    "serving_load": "accelmap.api.serving",
    "serve": "accelmap.api.serving",
    "serve_batch": "accelmap.api.serving",
    "speculation": "accelmap.api.serving",
    "disaggregation": "accelmap.api.serving",
    "serve_disaggregated": "accelmap.api.serving",
    "plan_disaggregation": "accelmap.api.serving",
    "scenario_layout": "accelmap.api.serving",
    "frontier": "accelmap.api.frontiers",
    # what if
    "what_if": "accelmap.api.whatif",
    "sensitivity": "accelmap.api.whatif",
    "sweep": "accelmap.api.whatif",
    "advise": "accelmap.api.shapes",
    "design": "accelmap.api.shapes",
    # real hardware
    "measure_matmul": "accelmap.api.measurement",
    "measure_bandwidth": "accelmap.api.measurement",
    "measure_overhead": "accelmap.api.measurement",
    "measure_attention": "accelmap.api.measurement",
    "measure_collectives": "accelmap.api.measurement",
    "calibrate": "accelmap.api.measurement",
    "load_profile": "accelmap.api.measurement",
    "measured_device": "accelmap.api.measurement",
    "open_store": "accelmap.api.measurement",
    # checking predictions
    "validate_cases": "accelmap.api.validation",
    "validate_local": "accelmap.api.validation",
    # reports and launch files
    "report_estimate": "accelmap.api.reports",
    "report_plan": "accelmap.api.reports",
    "report_from_json": "accelmap.api.reports",
    "saved_report_html": "accelmap.api.reports",
    "render_report": "accelmap.api.reports",
    "write_report": "accelmap.api.reports",
    "load_plan": "accelmap.api.exports",
    "export_plan": "accelmap.api.exports",
    "list_exporters": "accelmap.api.exports",
    # fan-out
    "runner": "accelmap.fanout",
    "Runner": "accelmap.fanout",
    "Progress": "accelmap.fanout",
    "FanoutError": "accelmap.fanout",
    # values to ask with
    "Accelerator": "accelmap.hardware.schema",
    "CalibrationProfile": "accelmap.cost.calibration",
    "Catalog": "accelmap.catalog",
    "Cluster": "accelmap.hardware.cluster",
    "CompareObjective": "accelmap.api.comparison",
    "DType": "accelmap.units",
    "Disaggregation": "accelmap.api.serving",
    "Inference": "accelmap.workload",
    "Load": "accelmap.api.serving",
    "Mapping": "accelmap.mapping.plan",
    "ModelSpec": "accelmap.models.schema",
    "Objective": "accelmap.search.result",
    "Phase": "accelmap.workload",
    "Scenario": "accelmap.api.serving",
    "Slo": "accelmap.api.serving",
    "Speculation": "accelmap.api.serving",
    "System": "accelmap.engine",
    "Training": "accelmap.workload",
}

__all__ = [
    "SORT_KEYS",
    "Accelerator",
    "CalibrationProfile",
    "Catalog",
    "Cluster",
    "CompareObjective",
    "CompareRequest",
    "DType",
    "Disaggregation",
    "EstimateRequest",
    "FanoutError",
    "Inference",
    "Load",
    "Mapping",
    "ModelSpec",
    "Objective",
    "Phase",
    "PlanOptions",
    "PlanRequest",
    "Progress",
    "Runner",
    "Scenario",
    "Slo",
    "Speculation",
    "System",
    "Training",
    "adapters",
    "advise",
    "calibrate",
    "check_claim",
    "claims",
    "compare_accelerators",
    "compare_clusters",
    "compare_inputs",
    "compare_parts",
    "compare_specs",
    "comparison",
    "cost_report",
    "costs",
    "deadline_search",
    "default_mapping",
    "default_serving_layout",
    "design",
    "disaggregation",
    "energy",
    "energy_report",
    "estimate",
    "estimate_inputs",
    "estimates",
    "export_plan",
    "exports",
    "find_accelerator",
    "find_hardware",
    "find_system",
    "frontier",
    "frontiers",
    "hardware",
    "import_model",
    "inference",
    "list_accelerators",
    "list_exporters",
    "list_models",
    "list_systems",
    "load_catalog",
    "load_model",
    "load_part",
    "load_plan",
    "load_profile",
    "load_system",
    "mapping",
    "measure_attention",
    "measure_bandwidth",
    "measure_collectives",
    "measure_matmul",
    "measure_overhead",
    "measured_device",
    "measurement",
    "models",
    "open_store",
    "parse",
    "plan_clusters",
    "plan_disaggregation",
    "plan_inputs",
    "plan_request",
    "planning",
    "render_report",
    "report_estimate",
    "report_from_json",
    "report_plan",
    "reports",
    "requests",
    "roofline",
    "run_plan",
    "runner",
    "saved_report_html",
    "scenario_layout",
    "sensitivity",
    "serve",
    "serve_batch",
    "serve_disaggregated",
    "serving",
    "serving_load",
    "serving_mapping",
    "shapes",
    "speculation",
    "sweep",
    "training",
    "validate_cases",
    "validate_local",
    "validation",
    "what_if",
    "whatif",
    "write_report",
]


def __getattr__(name: str) -> Any:
    if name in AREAS:
        value = importlib.import_module(f"accelmap.api.{name}")
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'accelmap.api' has no attribute {name!r}"
                             + "".join(f"; it is accelmap.api.{a}.{name}" for a in _home(name)))
    globals()[name] = value  # later lookups skip __getattr__
    return value


def _home(name: str) -> list[str]:
    """The level-3 area(s) that hold ``name``, for the error of a name asked at level 2."""
    return [a for a in AREAS if name in getattr(importlib.import_module(f"accelmap.api.{a}"),
                                                "__all__", ())][:1]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
