"""Reports: a command's result as one self-contained HTML file of pictures.

    from accelmap import api
    rep = api.report_from_json("plan.json")        # what `accelmap plan --json` wrote
    api.write_report(rep, "plan.html")

The live commands build richer reports (``report_estimate``, ``report_plan``): they know the
per-operator roofline and, for a plan, re-estimate the chosen plan for its memory, step-time
and pipeline pictures. A saved plan is re-estimated too, from its job and mapping, where its
model and accelerator are in the catalog. ``report_figures`` returns the figures as plotly JSON
(the web app draws them in the page).
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import Any

from accelmap.catalog import Catalog, load_catalog
from accelmap.engine import System, estimate
from accelmap.engine.result import Estimate, op_row
from accelmap.errors import InputError, NotFoundError
from accelmap.export.base import PlanJob
from accelmap.files import MAX_TABLE_BYTES, load_json
from accelmap.hardware.cluster import Cluster, parse_cluster
from accelmap.hardware.listing import unpublished
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.report.document import Report, kind_of
from accelmap.search.result import PlanResult
from accelmap.units import DType
from accelmap.workload import Finetune, Inference, Training

__all__ = ["Report", "accelmap_version", "check_report_path", "current_keys", "estimate_extras",
           "estimate_json", "missing_extra", "plan_estimate", "render_report", "report_estimate",
           "report_figures", "report_from_json", "report_of", "report_plan", "saved_report_html",
           "write_report"]

EXTRA_HINT = "pip install 'accelmap[web]'"
SHOWN_PER_STAGE = 2  # micro-batches per pipeline stage drawn in a timeline


def accelmap_version() -> str:
    """The installed accelmap's version."""
    try:
        return _dist_version("accelmap")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "unknown"


def missing_extra(*modules: str) -> str | None:
    """A one-line message naming the first of ``modules`` that is not installed, or None."""
    import importlib.util

    for name in modules:
        if importlib.util.find_spec(name) is None:
            return (f"{name} is not installed: reports and the web app need the web extra "
                    f"({EXTRA_HINT})")
    return None


def _require_plotly() -> None:
    msg = missing_extra("plotly")
    if msg:
        raise InputError(msg)


# what a serving estimate times, left out when its batch cannot be held (no figures for a
# batch that does not run; its memory, reason and largest batch stay)
SERVING_FIGURES = frozenset({
    "ttft_s", "tpot_s", "total_time_s", "tokens_per_s", "tokens_per_s_per_device",
    "prefill_tokens_per_s", "decode_mfu", "decode_bandwidth_utilization",
    "energy_j_per_token_tdp", "energy_j_per_token_ops", "communication_s",
    "time_breakdown_s", "error_band", "latency_error_band", "sensitivity", "cost", "energy"})


def estimate_json(est: Estimate, system: System, tokens: str | float | None = None,
                  extras: dict[str, Any] | None = None) -> dict[str, Any]:
    """The object ``accelmap estimate --json`` prints for a batch estimate; ``extras`` (the
    sensitivity, cost and energy blocks of ``estimate_extras``) follow the estimate's own
    keys."""
    missing = unpublished(system.accelerator)
    out = est.to_dict(ops=False)
    out.update(extras or {})
    train = est.phase.value == "train"
    if not est.feasible and not train:  # a batch that cannot be held: the reason, no figures
        out = {k: v for k, v in out.items() if k not in SERVING_FIGURES}
    if est.feasible and "tdp_w" in missing:
        out.setdefault("energy_j_per_token_tdp", None)
    if est.feasible and train and tokens and "price_usd_per_hour" in missing:
        out.setdefault("cost_to_train_usd", None)
    out["not_published"] = missing
    if system.devices > 1:
        out["cluster_layout"] = system.cluster.origin
    return out


def estimate_extras(spec: ModelSpec, system: System, workload: Any, mapping: Mapping,
                    est: Estimate, *, framework: Any = None, imbalance: float = 1.0,
                    catalog: Any = None, load_tokens_per_s: float | None = None,
                    pue: float | None = None, grid_kg_per_kwh: float | None = None,
                    speculative: bool = False) -> dict[str, Any]:
    """What ``accelmap estimate --json`` adds to an estimate (and ``POST /api/estimate``
    too): which resource binds (d ln time / d ln resource; plain feasible estimates only), the
    cost and the energy blocks."""
    from accelmap.api.costs import cost_report
    from accelmap.api.energy import energy_report
    from accelmap.api.whatif import sensitivity

    sens = (sensitivity(spec, system, workload, mapping, framework=framework,
                        imbalance=imbalance, base=est)
            if not speculative and est.feasible else None)
    energy_kw: dict[str, Any] = {}
    if pue is not None:
        energy_kw["pue"] = pue
    if grid_kg_per_kwh is not None:
        energy_kw["grid_kg_per_kwh"] = grid_kg_per_kwh
    return {"sensitivity": sens.to_dict() if sens is not None else None,
            "cost": cost_report(est, system, catalog=catalog,
                                load_tokens_per_s=load_tokens_per_s).to_dict(),
            "energy": energy_report(est, system, **energy_kw).to_dict()}


def _roofline_detail(est: Estimate, system: System) -> dict[str, Any] | None:
    groups = (("forward", "backward", "optimizer") if est.phase.value == "train"
              else ("decode",) if "decode" in est.ops else ("prefill",))
    rows = [op_row(t) for g in groups for t in est.ops.get(g, ())]
    if not rows or not system.device.bandwidth:
        return None
    from accelmap.cost.roofline import Unit

    peak, _ = system.device.peak(DType.BF16, Unit.MATRIX)
    return {"accelerator": est.accelerator, "phase": "/".join(groups), "peak_flops": peak,
            "bandwidth_bytes_per_s": system.device.bandwidth,
            "ridge_flop_per_byte": system.device.ridge_point, "ops": rows}


def _pipeline_detail(est: Estimate, mapping: Mapping) -> tuple[dict[str, Any] | None, str | None]:
    """The passes of one step of a pipelined training estimate, stages alike, each taking the
    critical stage's forward and backward time per micro-batch (stage-to-stage sends not
    drawn); or why there is none."""
    if est.phase.value != "train" or int(mapping.pp) <= 1 or not est.feasible:
        return None, None
    from accelmap.cost.timeline import pipeline_timeline

    m = int(getattr(est, "micro_batches", None) or 1)
    tree = est.time
    fwd = sum(v for k, v in tree.items() if k.startswith("forward/")) / m
    bwd = sum(v for k, v in tree.items() if k.startswith(("backward/", "recompute/"))) / m
    wgrad = sum(v for k, v in tree.items() if k.startswith("backward/wgrad/")) / m
    sched = str(getattr(mapping.schedule, "value", mapping.schedule))
    p = int(mapping.pp)
    # past a few micro-batches per stage the steady state only repeats and the bubbles, at the
    # two ends, shrink to slivers: draw 2p of them (a multiple of p, as interleaving needs)
    shown = m if m <= SHOWN_PER_STAGE * p else SHOWN_PER_STAGE * p
    try:
        passes = pipeline_timeline(sched, p, shown, int(mapping.virtual_stages),
                                   t_f=fwd, t_b=bwd,
                                   w_share=wgrad / (fwd + bwd) if fwd + bwd else 0.0)
    except InputError as e:
        return None, f"pipeline timeline not drawn: {e}"
    note = ("pipeline timeline: every stage drawn with the critical stage's forward and "
            "backward time per micro-batch; stage-to-stage sends are in the step time, not in "
            "the picture")
    if shown < m:
        note += (f"; {shown} of the step's {m} micro-batches drawn (the steady state repeats; "
                 f"the step's bubble is {est.metrics.get('bubble_fraction', 0.0):.1%})")
    return {"schedule": sched, "pp": p, "micro_batches": shown, "step_micro_batches": m,
            "vpp": int(mapping.virtual_stages), "t_f": fwd, "t_b": bwd,
            "passes": [x.to_dict() for x in passes]}, note


def _estimate_detail(est: Estimate, system: System, mapping: Mapping) -> dict[str, Any]:
    detail: dict[str, Any] = {"notes": []}
    roof = _roofline_detail(est, system)
    if roof:
        detail["roofline"] = roof
    pipe, note = _pipeline_detail(est, mapping)
    if pipe:
        detail["pipeline"] = pipe
    if note:
        detail["notes"].append(note)
    return detail


def report_estimate(est: Estimate, system: System, mapping: Mapping, *,
                    tokens: str | float | None = None, inputs: dict[str, Any] | None = None,
                    command: str = "", extras: dict[str, Any] | None = None) -> Report:
    """The report of one estimate: its ``--json`` object (with ``estimate_extras``), roofline
    and pipeline timeline."""
    return Report("estimate", estimate_json(est, system, tokens, extras),
                  _estimate_detail(est, system, mapping), dict(inputs or {}),
                  accelmap_version(), command)


def plan_estimate(job: PlanJob, catalog: Catalog | None = None,
                  cluster: Cluster | None = None, profile: Any = None
                  ) -> tuple[Estimate, System]:
    """The full estimate of one plan (a training plan or a serving plan's batch), from its job
    and mapping: what the planner ranked, with every breakdown."""
    from accelmap.api.estimates import adapters, inference, training
    from accelmap.lookup import resolve

    cat = catalog or load_catalog()
    spec: ModelSpec = resolve(job.model, cat.models, "model", "accelmap models list")
    cl = cluster or parse_cluster(f"{job.nodes}x{job.devices_per_node}x{job.accelerator}", cat)
    system = System.of(cl, profile)
    fw = job.framework.value if job.framework is not None else None
    if job.serving is None:
        ad = None
        if job.finetune is not Finetune.FULL:
            ad = adapters(job.finetune.value, job.lora_rank or None,
                          ",".join(t.value for t in job.lora_targets) or None)
        wl: Training | Inference = training(job.global_batch, job.seq_len, job.dtype,
                                            recompute=job.mapping.policy, finetune=ad)
    else:
        s = job.serving
        wl = inference(s.batch, job.prompt_len, job.output_len, s.weight_dtype, s.kv_dtype)
    return estimate(spec, system, wl, job.mapping, framework=fw), system


def report_plan(spec: ModelSpec, cluster: Cluster, result: PlanResult, job: Any, *,
                profile: Any = None, inputs: dict[str, Any] | None = None,
                command: str = "", catalog: Catalog | None = None) -> Report:
    """The report of a plan: the ranked plans, the Pareto fronts, and the chosen plan's
    estimate (memory, step time, roofline, pipeline timeline)."""
    data = {"model": spec.id, "cluster": cluster.name, "job": job.to_dict(),
            **result.to_dict()}
    detail: dict[str, Any] = {"notes": []}
    best = result.plans[0] if result.plans else None
    simulated = (result.search or {}).get("scenario") in ("offline", "server")
    if best is not None and not simulated:
        pj = PlanJob.of(job, best)
        est, system = plan_estimate(pj, catalog, cluster, profile)
        detail = _estimate_detail(est, system, best.mapping)
        detail["estimate"] = estimate_json(est, system)
    elif simulated:
        detail["notes"].append("simulated serving plans: the table and fronts hold the "
                               "simulated figures; no single-step breakdown is drawn")
    return Report("plan", data, detail, dict(inputs or {}), accelmap_version(), command)


def report_of(kind: str, result: dict[str, Any], *, inputs: dict[str, Any] | None = None,
              command: str = "") -> Report:
    """A report of a result that needs no detail (compare, validate, a comparison of
    accelerators, a deadline search, a serving simulation, a roofline)."""
    return Report(kind, result, {}, dict(inputs or {}), accelmap_version(), command)


def report_from_json(source: str | Path | dict[str, Any],
                     catalog: Catalog | None = None) -> Report:
    """A report of a saved ``--json`` result (a path or the parsed object). A plan's chosen
    plan is re-estimated from its job and mapping for its breakdowns when the catalog knows
    its model and accelerator; otherwise the report says why they are missing."""
    if isinstance(source, dict):
        data, where = source, "the result"
    else:
        path = Path(source)
        # one reader for every file a user names: size, encoding, depth, finite numbers
        data = load_json(path, "saved --json result", MAX_TABLE_BYTES)
        where = str(path)
    try:
        kind = kind_of(data)
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    data = current_keys(data)
    detail: dict[str, Any] = {}
    simulated = (data.get("search") or {}).get("scenario") in ("offline", "server")
    if kind == "plan" and data.get("plans") and "job" in data and not simulated:
        try:
            pj = PlanJob.from_dict({**data["job"], "mapping": data["plans"][0]["mapping"]})
            est, system = plan_estimate(pj, catalog)
            detail = _estimate_detail(est, system, pj.mapping)
            detail["estimate"] = estimate_json(est, system)
            detail["notes"].append(f"the chosen plan was re-estimated by accelmap "
                                   f"{accelmap_version()} from the saved job and mapping")
        except (InputError, NotFoundError) as e:  # a model or chip this catalog lacks
            detail = {"notes": [f"the chosen plan's breakdowns are not drawn: {e}"]}
    if kind == "roofline":
        detail = {"notes": ["a saved roofline has the ridge point but not the device's peak: "
                            "the picture is in `accelmap estimate --report`"]}
    return Report(kind, data, detail, {"from": where}, accelmap_version(),
                  f"accelmap report {where}" if where != "the result" else "")


def render_report(report: Report) -> str:
    """The report as one self-contained HTML document."""
    _require_plotly()
    from accelmap.report.html import render

    return render(report)


def check_report_path(path: str | Path, option: str = "--report") -> Path:
    """The report's path, checked before any work: an .html name in an existing folder, and
    plotly installed; ``option`` names it in the message."""
    out = Path(path)
    if out.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"{option} {out}: give a file name ending in .html")
    if not out.parent.is_dir():
        raise InputError(f"{option} {out}: no such folder {out.parent}")
    _require_plotly()
    return out


# what a saved result of the right kind but with damaged fields raises while it is read
_SHAPE_ERRORS = (KeyError, AttributeError, TypeError, ValueError, IndexError)
_SHAPE_HINT = "give a result that accelmap --json (or the web API) wrote, unchanged"


# figure keys of plan, compare and hardware rows saved before one vocabulary (issue 25), read
# under today's names (cost/per_token.py): a plan row's J/token was the TDP bound then too
_OLD_KEYS = {"cost_usd_per_million_tokens": "usd_per_million_tokens",
             "usd_per_mtok": "usd_per_million_tokens",
             "energy_j_per_token": "energy_j_per_token_tdp",
             "j_per_token": "energy_j_per_token_tdp"}


def current_keys(data: dict[str, Any]) -> dict[str, Any]:
    """A saved result with its rows' old figure keys renamed (``_OLD_KEYS``); the rest as it
    was."""
    def row(r: Any) -> Any:
        if not isinstance(r, dict):
            return r
        out = {_OLD_KEYS.get(k, k): v for k, v in r.items()}
        if isinstance(out.get("plan"), dict):  # a hardware row's best plan
            out["plan"] = row(out["plan"])
        return out

    lists: dict[str, Any] = {k: [row(r) for r in v] for k in ("plans", "rows", "hardware")
                             if isinstance(v := data.get(k), list)}
    if isinstance(fronts := data.get("pareto"), dict):
        lists["pareto"] = {name: [row(p) for p in v] if isinstance(v, list) else v
                           for name, v in fronts.items()}
    return {**data, **lists} if lists else data


def saved_report_html(source: str | Path | dict[str, Any],
                      catalog: Catalog | None = None) -> tuple[Report, str]:
    """A saved ``--json`` result's report and its HTML. A result whose fields are missing or
    of the wrong type (a plan row without 'mapping', a string where an object belongs) is a
    bad input named by what failed, never an internal error; the CLI's ``report`` and the
    web's ``POST /api/report`` both come here so they answer alike."""
    where = "the result" if isinstance(source, dict) else str(source)
    try:
        rep = report_from_json(source, catalog)
        return rep, render_report(rep)
    except InputError:
        raise
    except KeyError as e:
        raise InputError(f"{where}: lacks the field {e.args[0]!r}: {_SHAPE_HINT}") from None
    except _SHAPE_ERRORS as e:
        raise InputError(f"{where}: a field has the wrong type ({type(e).__name__}: "
                         f"{str(e)[:120]}): {_SHAPE_HINT}") from None


def write_report(report: Report | tuple[Report, str], path: str | Path,
                 option: str = "--report") -> Path:
    """Write the report's HTML to ``path`` (its folder must exist); ``report`` may come with
    its HTML already rendered (``saved_report_html``)."""
    out = check_report_path(path, option)
    text = report[1] if isinstance(report, tuple) else render_report(report)
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as e:
        raise InputError(f"--report {out}: cannot write it ({e.strerror})") from None
    return out


def report_figures(report: Report) -> list[dict[str, Any]]:
    """The report's figures as plotly JSON: [{"id", "title", "figure"}]."""
    _require_plotly()
    from accelmap.report.figures import figures

    out = []
    for name, fig in figures(report):
        spec = json.loads(fig.to_json())
        out.append({"id": name, "title": fig.layout.title.text or name, "figure": spec})
    return out
