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

- ``api.parse``: text to values: ``dtype``, ``choice``, ``count``, ``batch_tokens`` (binary
  K/M), ``sequences_per_step``, ``duration``, ``phase``, ``framework`` (checked against
  training or serving); ``on_resolve`` (``accelmap.lookup``): a hook told what each
  forgiving name resolved to.
- ``api.hardware``: ``find_accelerator``, ``find_system``, ``find_hardware``,
  ``list_accelerators`` (filter, sort by one of ``SORT_KEYS``), ``accelerator_row``,
  ``accelerator_details``, ``derived_figures``, ``sources``, ``compare`` (``Comparison``;
  ``DEFAULT_COMPARE``), ``compare_row``, ``list_systems``, ``system_row``, ``system_details``.
- ``api.models``: ``load_model``, ``list_models``, ``model_summary``, ``model_details``,
  ``context_warnings`` (a sequence past the model's context: serving refused, training warned),
  ``import_model``, ``write_model``.
- ``api.estimates``: ``load_system``, ``training``, ``inference``, ``mapping``,
  ``serving_mapping``, ``default_mapping``, ``estimate`` (``TrainStep`` / ``ServeStep``),
  ``roofline`` (``Roofline``).
- ``api.planning``: ``plan_request`` (``PlanRequest``), ``plan_clusters``, ``check_profile``,
  ``run_plan`` (``PlanResult``), ``plan_job``, ``compare_hardware`` (``HardwareComparison``),
  ``deadline_search`` (``DeadlineSearch``).
- ``api.comparison``: ``compare_accelerators`` (``AcceleratorComparison``; ranked by a
  ``CompareObjective``): every part's devices to hold a model, best mapping, speed, $ and J;
  its steps ``compare_job`` (``CompareJob``), ``select_parts``, ``compare_parts``.
- ``api.requests``: the typed requests the CLI and the web both build, field names the CLI's
  flags: ``EstimateRequest`` (``estimate_inputs``), ``PlanOptions`` (``plan_inputs``: the
  model, clusters and ``PlanRequest``), ``CompareRequest`` (``compare_inputs``).
- ``api.exports``: ``list_exporters``, ``exporter_row``, ``load_plan``, ``plan_export_job``,
  ``export_plan`` (``Export``).
- ``api.measurement``: ``open_store`` (``Store``), ``load_profile``, ``measurement_kind``,
  ``find_run``, ``measure_matmul`` (``MatmulRun``), ``measure_bandwidth`` (``BandwidthRun``),
  ``measure_overhead`` (``OverheadRun``), ``measure_attention`` (``AttentionRun``),
  ``measure_collectives``, ``human_bytes``, ``local_accelerator``, ``calibration_accelerator``,
  ``calibrate`` (``Calibration``), ``measured_device`` (``MeasuredDevice``: ``--hw local`` and
  the profile it implies), ``profile_device``.
- ``api.serving``: ``serving_load`` (``Load``: offline / server, rate, trace, lengths, SLOs,
  scheduler caps), ``serve`` (``ServingRun``: the request-level simulation), ``speculation``
  (``Speculation``: draft model or MTP heads, alpha, k), ``serve_batch`` (the fixed batch,
  with speculation), ``disaggregation`` / ``serve_disaggregated`` (``DisaggRun``: prefill and
  decode pools), ``plan_disaggregation`` (``SplitSearch``: the split for goodput per device).
- ``api.reports``: ``report_estimate``, ``report_plan``, ``report_of``, ``report_from_json``
  (``Report``), ``render_report``, ``write_report``, ``check_report_path``,
  ``report_figures``: a result as one self-contained HTML file of plotly pictures (the
  ``web`` extra); ``plan_estimate``, ``estimate_json``, ``missing_extra``,
  ``accelmap_version``.
- ``api.whatif``: ``what_if`` (``WhatIf``: --set NAME=VALUE, --price), ``apply_whatif``
  (``WhatIfCatalog``), ``whatif_fields``, ``sensitivity`` (d ln time / d ln resource),
  ``sweep`` (one or two parameters).
- ``api.shapes``: ``advise`` (``Advice``: shape issues on the hardware, each costed by
  the engine), ``design`` (``Design``: shapes under a parameter budget and a hardware
  target, with the Pareto front of quality proxy vs speed).
- ``api.energy``: ``energy_report`` (``EnergyReport``: modelled J/token and J/step, power
  against the TDP, a run's kWh and CO2 at a PUE and grid intensity).
- ``api.costs``: ``cost_report`` (``CostReport``: price in use with its date and source,
  $/M tokens at capacity and at a load, a run's time and $, renting vs owning),
  ``ownership``, ``price_info``.
- ``api.claims``: ``check_claim`` (``ClaimCheck``: plausible / implausible / impossible with
  the bound it breaks), ``load_part`` (a catalog part or an accelerator YAML file).
- ``accelmap.fanout``: ``runner`` (``Runner``: --ray ADDRESS or $ACCELMAP_RAY, else this
  process; ``Runner.map(fn, items, context)``), ``Progress``, ``FanoutError``.
- ``api.validation``: ``read_cases``, ``predict_cases``, ``summarize``, ``compress_ids``,
  ``validate_cases`` (``Validation``), ``validate_local`` (``LocalValidation``).

Importing ``accelmap.api`` is cheap: each name loads its module on first use, so a command-line
tool can import the API at the top and still start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelmap.api.claims import ClaimCheck, check_claim, load_part
    from accelmap.api.comparison import (
        AcceleratorComparison,
        CompareObjective,
        compare_accelerators,
        compare_job,
        compare_parts,
        select_parts,
    )
    from accelmap.api.costs import (
        CostReport,
        breakeven_rows,
        cost_report,
        ownership,
        plan_money,
        price_info,
    )
    from accelmap.api.energy import EnergyReport, energy_report
    from accelmap.api.estimates import (
        Roofline,
        adapters,
        check_one_device,
        default_serving_layout,
        inference,
        load_system,
        lora_targets,
        mapping,
        roofline,
        serving_mapping,
        training,
    )
    from accelmap.api.exports import (
        Export,
        export_plan,
        exporter_row,
        list_exporters,
        load_plan,
        plan_export_job,
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
    from accelmap.api.measurement import (
        AttentionRun,
        BandwidthRun,
        Calibration,
        MatmulRun,
        MeasuredDevice,
        OverheadRun,
        calibrate,
        calibration_accelerator,
        find_run,
        human_bytes,
        is_local_name,
        load_profile,
        local_accelerator,
        measure_attention,
        measure_bandwidth,
        measure_collectives,
        measure_matmul,
        measure_overhead,
        measured_device,
        measurement_kind,
        open_store,
        profile_device,
    )
    from accelmap.api.models import (
        catalog_model,
        context_warnings,
        import_model,
        list_models,
        load_model,
        model_details,
        model_summary,
        write_model,
    )
    from accelmap.api.parse import (
        batch_tokens,
        choice,
        count,
        dtype,
        duration,
        framework,
        phase,
        sequences_per_step,
    )
    from accelmap.api.planning import (
        DeadlineSearch,
        HardwareComparison,
        PlanRequest,
        check_profile,
        compare_hardware,
        deadline_search,
        plan_clusters,
        plan_job,
        plan_request,
        run_plan,
    )
    from accelmap.api.reports import (
        Report,
        accelmap_version,
        check_report_path,
        estimate_extras,
        estimate_json,
        missing_extra,
        plan_estimate,
        render_report,
        report_estimate,
        report_figures,
        report_from_json,
        report_of,
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
        DisaggRun,
        Load,
        Scenario,
        ServingRun,
        Slo,
        Speculation,
        SplitSearch,
        disaggregation,
        plan_disaggregation,
        serve,
        serve_batch,
        serve_disaggregated,
        serving_load,
        speculation,
    )
    from accelmap.api.shapes import Advice, Design, advise, design
    from accelmap.api.validation import (
        LocalValidation,
        Validation,
        compress_ids,
        predict_cases,
        read_cases,
        summarize,
        validate_cases,
        validate_local,
    )
    from accelmap.api.whatif import (
        WhatIf,
        WhatIfCatalog,
        apply_whatif,
        sensitivity,
        sweep,
        what_if,
        whatif_fields,
    )
    from accelmap.catalog import Catalog, load_catalog
    from accelmap.cost.calibration import CalibrationProfile
    from accelmap.engine import OverlapPolicy, System, default_mapping, estimate
    from accelmap.engine.result import Estimate, ServeStep, TrainStep
    from accelmap.export.base import Exporter, ExportResult, Job, PlanJob
    from accelmap.fanout import FanoutError, Progress, Runner, runner
    from accelmap.hardware.cluster import Cluster
    from accelmap.hardware.derived import DerivedFigures
    from accelmap.hardware.listing import DEFAULT_COMPARE, NOT_PUBLISHED, SORT_KEYS, unpublished
    from accelmap.hardware.schema import Accelerator, DeviceClass, SystemPreset
    from accelmap.lookup import on_resolve
    from accelmap.mapping.plan import Mapping
    from accelmap.measure.store import Store
    from accelmap.models.schema import ModelSpec
    from accelmap.search.result import Objective, Plan, PlanResult
    from accelmap.units import DType
    from accelmap.validate.cases import CaseFile
    from accelmap.validate.outcome import Prediction, Status
    from accelmap.validate.report import GroupStats, Summary
    from accelmap.workload import Inference, Phase, Training

# name -> the module that defines it (loaded on first use)
_LAZY: dict[str, str] = {
    # text to values
    **dict.fromkeys(("batch_tokens", "choice", "count", "dtype", "duration", "framework",
                     "phase", "sequences_per_step"), "accelmap.api.parse"),
    # what a forgiving name resolved to (the CLI prints it)
    "on_resolve": "accelmap.lookup",
    # hardware
    **dict.fromkeys(("Chooser", "Comparison", "accelerator_details", "accelerator_row",
                     "compare", "compare_row", "derived_figures", "find_accelerator",
                     "find_hardware", "find_system", "list_accelerators", "list_systems",
                     "sources", "system_details", "system_row"), "accelmap.api.hardware"),
    **dict.fromkeys(("DEFAULT_COMPARE", "NOT_PUBLISHED", "SORT_KEYS", "unpublished"),
                    "accelmap.hardware.listing"),
    # models
    **dict.fromkeys(("catalog_model", "context_warnings", "import_model", "list_models",
                     "load_model", "model_details", "model_summary", "write_model"),
                    "accelmap.api.models"),
    # estimates
    **dict.fromkeys(("Roofline", "adapters", "check_one_device", "default_serving_layout",
                     "inference", "load_system",
                     "lora_targets",
                     "mapping", "roofline", "serving_mapping", "training"),
                    "accelmap.api.estimates"),
    **dict.fromkeys(("OverlapPolicy", "System", "default_mapping", "estimate"),
                    "accelmap.engine"),
    # planning
    **dict.fromkeys(("DeadlineSearch", "HardwareComparison", "PlanRequest", "check_profile",
                     "compare_hardware", "deadline_search", "plan_clusters", "plan_job",
                     "plan_request", "run_plan"), "accelmap.api.planning"),
    # comparing accelerators
    **dict.fromkeys(("AcceleratorComparison", "CompareObjective", "compare_accelerators",
                     "compare_job", "compare_parts", "select_parts"),
                    "accelmap.api.comparison"),
    # exports
    **dict.fromkeys(("Export", "export_plan", "exporter_row", "list_exporters", "load_plan",
                     "plan_export_job"), "accelmap.api.exports"),
    # measurement
    **dict.fromkeys(("AttentionRun", "BandwidthRun", "Calibration", "MatmulRun",
                     "MeasuredDevice", "OverheadRun", "calibrate", "calibration_accelerator",
                     "find_run", "human_bytes", "is_local_name", "load_profile",
                     "local_accelerator",
                     "measure_attention", "measure_bandwidth", "measure_collectives",
                     "measure_matmul", "measure_overhead", "measured_device",
                     "measurement_kind", "open_store", "profile_device"),
                    "accelmap.api.measurement"),
    # serving scenarios
    **dict.fromkeys(("DisaggRun", "Disaggregation", "Load", "Scenario", "ServingRun", "Slo",
                     "Speculation", "SplitSearch", "disaggregation", "plan_disaggregation",
                     "serve", "serve_batch", "serve_disaggregated", "serving_load",
                     "speculation"), "accelmap.api.serving"),
    # typed requests shared by the CLI and the web
    **dict.fromkeys(("CompareRequest", "EstimateRequest", "PlanOptions", "compare_inputs",
                     "estimate_inputs", "plan_inputs"), "accelmap.api.requests"),
    # reports
    **dict.fromkeys(("Report", "accelmap_version", "check_report_path", "estimate_extras",
                     "estimate_json", "missing_extra", "plan_estimate", "render_report",
                     "report_estimate",
                     "report_figures", "report_from_json", "report_of", "report_plan",
                     "saved_report_html", "write_report"),
                    "accelmap.api.reports"),
    # validation
    **dict.fromkeys(("LocalValidation", "Validation", "compress_ids", "predict_cases",
                     "read_cases", "summarize", "validate_cases", "validate_local"),
                    "accelmap.api.validation"),
    # model shapes
    **dict.fromkeys(("Advice", "Design", "advise", "design"), "accelmap.api.shapes"),
    # energy
    **dict.fromkeys(("EnergyReport", "energy_report"), "accelmap.api.energy"),
    # money
    **dict.fromkeys(("CostReport", "breakeven_rows", "cost_report", "ownership", "plan_money",
                     "price_info"), "accelmap.api.costs"),
    # claim checks
    **dict.fromkeys(("ClaimCheck", "check_claim", "load_part"), "accelmap.api.claims"),
    # what-ifs, sensitivity and sweeps
    **dict.fromkeys(("WhatIf", "WhatIfCatalog", "apply_whatif", "sensitivity", "sweep",
                     "what_if", "whatif_fields"), "accelmap.api.whatif"),
    # fan-out: a map in this process or on Ray (--ray)
    **dict.fromkeys(("FanoutError", "Progress", "Runner", "runner"), "accelmap.fanout"),
    # the typed values these functions take and return
    **dict.fromkeys(("Catalog", "load_catalog"), "accelmap.catalog"),
    "CalibrationProfile": "accelmap.cost.calibration",
    **dict.fromkeys(("Estimate", "ServeStep", "TrainStep"), "accelmap.engine.result"),
    **dict.fromkeys(("ExportResult", "Exporter", "Job", "PlanJob"), "accelmap.export.base"),
    "Cluster": "accelmap.hardware.cluster",
    "DerivedFigures": "accelmap.hardware.derived",
    **dict.fromkeys(("Accelerator", "DeviceClass", "SystemPreset"), "accelmap.hardware.schema"),
    "Mapping": "accelmap.mapping.plan",
    "Store": "accelmap.measure.store",
    **dict.fromkeys(("Objective", "Plan", "PlanResult"), "accelmap.search.result"),
    "ModelSpec": "accelmap.models.schema",
    "DType": "accelmap.units",
    "CaseFile": "accelmap.validate.cases",
    **dict.fromkeys(("Prediction", "Status"), "accelmap.validate.outcome"),
    **dict.fromkeys(("GroupStats", "Summary"), "accelmap.validate.report"),
    **dict.fromkeys(("Inference", "Phase", "Training"), "accelmap.workload"),
}

__all__ = [
    "DEFAULT_COMPARE",
    "NOT_PUBLISHED",
    "SORT_KEYS",
    "Accelerator",
    "AcceleratorComparison",
    "Advice",
    "AttentionRun",
    "BandwidthRun",
    "Calibration",
    "CalibrationProfile",
    "CaseFile",
    "Catalog",
    "Chooser",
    "ClaimCheck",
    "Cluster",
    "CompareObjective",
    "CompareRequest",
    "Comparison",
    "CostReport",
    "DType",
    "DeadlineSearch",
    "DerivedFigures",
    "Design",
    "DeviceClass",
    "DisaggRun",
    "Disaggregation",
    "EnergyReport",
    "Estimate",
    "EstimateRequest",
    "Export",
    "ExportResult",
    "Exporter",
    "FanoutError",
    "GroupStats",
    "HardwareComparison",
    "Inference",
    "Job",
    "Load",
    "LocalValidation",
    "Mapping",
    "MatmulRun",
    "MeasuredDevice",
    "ModelSpec",
    "Objective",
    "OverheadRun",
    "OverlapPolicy",
    "Phase",
    "Plan",
    "PlanJob",
    "PlanOptions",
    "PlanRequest",
    "PlanResult",
    "Prediction",
    "Progress",
    "Report",
    "Roofline",
    "Runner",
    "Scenario",
    "ServeStep",
    "ServingRun",
    "Slo",
    "Speculation",
    "SplitSearch",
    "Status",
    "Store",
    "Summary",
    "System",
    "SystemPreset",
    "TrainStep",
    "Training",
    "Validation",
    "WhatIf",
    "WhatIfCatalog",
    "accelerator_details",
    "accelerator_row",
    "accelmap_version",
    "adapters",
    "advise",
    "apply_whatif",
    "batch_tokens",
    "breakeven_rows",
    "calibrate",
    "calibration_accelerator",
    "catalog_model",
    "check_claim",
    "check_one_device",
    "check_profile",
    "check_report_path",
    "choice",
    "compare",
    "compare_accelerators",
    "compare_hardware",
    "compare_inputs",
    "compare_job",
    "compare_parts",
    "compare_row",
    "compress_ids",
    "context_warnings",
    "cost_report",
    "count",
    "deadline_search",
    "default_mapping",
    "default_serving_layout",
    "derived_figures",
    "design",
    "disaggregation",
    "dtype",
    "duration",
    "energy_report",
    "estimate",
    "estimate_extras",
    "estimate_inputs",
    "estimate_json",
    "export_plan",
    "exporter_row",
    "find_accelerator",
    "find_hardware",
    "find_run",
    "find_system",
    "framework",
    "human_bytes",
    "import_model",
    "inference",
    "is_local_name",
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
    "local_accelerator",
    "lora_targets",
    "mapping",
    "measure_attention",
    "measure_bandwidth",
    "measure_collectives",
    "measure_matmul",
    "measure_overhead",
    "measured_device",
    "measurement_kind",
    "missing_extra",
    "model_details",
    "model_summary",
    "on_resolve",
    "open_store",
    "ownership",
    "phase",
    "plan_clusters",
    "plan_disaggregation",
    "plan_estimate",
    "plan_export_job",
    "plan_inputs",
    "plan_job",
    "plan_money",
    "plan_request",
    "predict_cases",
    "price_info",
    "profile_device",
    "read_cases",
    "render_report",
    "report_estimate",
    "report_figures",
    "report_from_json",
    "report_of",
    "report_plan",
    "roofline",
    "run_plan",
    "runner",
    "saved_report_html",
    "select_parts",
    "sensitivity",
    "sequences_per_step",
    "serve",
    "serve_batch",
    "serve_disaggregated",
    "serving_load",
    "serving_mapping",
    "sources",
    "speculation",
    "summarize",
    "sweep",
    "system_details",
    "system_row",
    "training",
    "unpublished",
    "validate_cases",
    "validate_local",
    "what_if",
    "whatif_fields",
    "write_model",
    "write_report",
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
