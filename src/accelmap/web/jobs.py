"""What each endpoint runs: the forms as calls of the public API, the same calls the CLI makes,
returning the object its ``--json`` prints and the report that draws it. Plain functions, run
in a capped process per job (``runner``, ``worker``). A web input never opens a server path:
models are catalog presets (``api.models.catalog_model``), clusters catalog presets or specs such as
8xH100, never a YAML file."""

from __future__ import annotations

import io
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelmap import api
from accelmap.errors import InputError
from accelmap.web.forms import CompareForm, EstimateForm, ExportForm, FrontierForm, PlanForm

if TYPE_CHECKING:
    from accelmap.api import Catalog
    from accelmap.api.reports import Report


class TimeCap:
    """A progress callback that stops a search once ``seconds`` have passed: the planners stop
    at an interrupt and return the best plans found so far (``interrupted``)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.monotonic()
        self.hit = False

    def __call__(self, done: int, total: int) -> None:
        if time.monotonic() - self.start > self.seconds:
            self.hit = True
            raise KeyboardInterrupt  # the planners' "stop and keep the best so far"

    def note(self) -> str:
        return f"stopped at the web app's {self.seconds:g} s search cap: best plans so far"


def capped(cap: TimeCap, run: Callable[[], Any]) -> Any:
    """Run a search under the cap; one that cannot stop early is an error past it."""
    try:
        return run()
    except KeyboardInterrupt:
        raise InputError(f"the search took longer than the web app's {cap.seconds:g} s cap: "
                         "narrow it (one accelerator, fewer devices) or use the CLI") from None


def estimate(form: EstimateForm, cat: Catalog) -> tuple[dict[str, Any], Report]:
    """`accelmap estimate --json` of the form, and its report."""
    f = form
    model = preset(f.model, cat).id  # by its catalog id: no name reaches a server file
    no_path(f.cluster)
    # the one typed request the CLI builds too (api/requests.py): same input, same answer
    spec, system, wl, m = api.estimate_inputs(replace(api.EstimateRequest.of(f), model=model),
                                              cat)
    est = api.estimate(spec, system, wl, m, framework=f.framework, imbalance=f.moe_imbalance)
    m = est.mapping  # the layout the engine ran (its own choice where none was given)
    extras = api.reports.estimate_extras(spec, system, wl, m, est, framework=f.framework,
                                 imbalance=f.moe_imbalance, catalog=cat)
    rep = api.report_estimate(est, system, m, tokens=f.tokens, inputs=_inputs(f),
                              command="POST /api/estimate", extras=extras)
    return rep.result, rep


def plan(form: PlanForm, cat: Catalog, cap_s: float) -> tuple[dict[str, Any], Report]:
    """`accelmap plan --json` of the form (a comparison of accelerators for several, the
    smallest cluster for a deadline), and its report; the search stops at ``cap_s`` seconds
    with the best plans so far."""
    f = form
    model = preset(f.model, cat).id  # by its catalog id: no name reaches a server file
    no_path(f.cluster)
    # the one typed request the CLI builds too (api/requests.py): same input, same answer
    opts = replace(api.PlanOptions.of(f), model=model)
    spec, clusters, req = api.plan_inputs(opts, cat)
    cap = TimeCap(cap_s)
    if req.deadline_s is not None:  # the CLI's --deadline: doubling the first cluster
        search = capped(cap, lambda: api.deadline_search(spec, clusters[0], req, cap))
        rep = api.reports.report_of("deadline", search.to_dict(), inputs=_inputs(f),
                            command="POST /api/plan")
        return rep.result, rep
    if len(clusters) > 1:
        cmp = capped(cap, lambda: api.compare_clusters(spec, clusters, req, cap))
        rep = api.reports.report_of("hardware", cmp.to_dict(), inputs=_inputs(f),
                            command="POST /api/plan")
        return rep.result, rep
    cl = clusters[0]
    result = capped(cap, lambda: api.run_plan(spec, cl, req, cap))
    if cap.hit:
        result.notes.append(cap.note())
    job = api.planning.plan_job(spec, cl, req)
    rep = api.report_plan(spec, cl, result, job, inputs=_inputs(f), command="POST /api/plan",
                          catalog=cat)
    # the CLI's plan --json carries the money block (api.costs.plan_money) after the plan
    rep.result["money"] = api.costs.plan_money(cl, result.plans[0].metrics if result.plans else {},
                                         cat)
    return rep.result, rep


def compare(form: CompareForm, cat: Catalog, cap_s: float) -> tuple[dict[str, Any], Report]:
    """`accelmap compare --json` of the form, and its report."""
    f = form
    cap = TimeCap(cap_s)
    model = preset(f.model, cat).id  # by its catalog id: no name reaches a server file
    # the one typed request the CLI builds too (api/requests.py): same input, same answer
    req = replace(api.CompareRequest.of(f), model=model)
    spec, parts, job = api.compare_inputs(req, cat)
    result = capped(cap, lambda: api.compare_parts(spec, parts, job, cat, cap))
    rep = api.reports.report_of("compare", result.to_dict(), inputs=_inputs(f),
                        command="POST /api/compare")
    return rep.result, rep


def frontier(form: FrontierForm, cat: Catalog, cap_s: float) -> tuple[dict[str, Any], Report]:
    """`accelmap frontier --json` of the form, and its report; the sweep stops at ``cap_s``
    seconds between accelerators."""
    f = form
    cap = TimeCap(cap_s)
    model = preset(f.model, cat).id  # by its catalog id: no name reaches a server file
    result = capped(cap, lambda: api.frontier(
        model, hw=f.hw, cluster=no_path(f.cluster), devices=f.devices, isl=f.isl, osl=f.osl,
        weights=f.weights, moe_weights=f.moe_weights, kv=f.kv, framework=f.framework,
        concurrency=f.concurrency, mtp=f.mtp, accept=f.accept, draft_len=f.draft_len,
        catalog=cat, progress=cap,
        draft=preset(f.draft, cat).id if f.draft else None))
    rep = api.reports.report_of("frontier", result.to_dict(), inputs=_inputs(f),
                                command="POST /api/frontier")
    return rep.result, rep


def validate(files: list[tuple[str, bytes]], cat: Catalog) -> tuple[dict[str, Any], Report]:
    """`accelmap validate --cases ... --json` of uploaded CSV files, and its report."""
    if not files:
        raise InputError("no measurements given: upload one or more CSV files as 'cases'")
    with tempfile.TemporaryDirectory(prefix="accelmap-validate-") as tmp:
        paths = []
        for i, (name, data) in enumerate(files):
            safe = "".join(c for c in Path(name or "cases.csv").name
                           if c.isalnum() or c in "._-") or "cases.csv"
            path = Path(tmp) / (safe if not (Path(tmp) / safe).exists() else f"{i}-{safe}")
            path.write_bytes(data)
            paths.append(path)
        try:
            result = api.validate_cases(paths, catalog=cat)
        except InputError as e:  # name the upload, not the temporary folder
            raise InputError(str(e).replace(str(Path(tmp)) + "/", "")) from None
    rep = api.reports.report_of("validate", result.to_dict(),
                        inputs={"cases": [n for n, _ in files]}, command="POST /api/validate")
    return rep.result, rep


def export_zip(form: ExportForm, cat: Catalog) -> tuple[bytes, str]:
    """The plan's launch files as one zip (one folder per format when no format is named),
    and the zip's file name."""
    with tempfile.TemporaryDirectory(prefix="accelmap-export-") as tmp:
        src = Path(tmp) / "plan.json"
        import json

        src.write_text(json.dumps(form.plan), encoding="utf-8")
        try:
            job = api.load_plan(src, form.index)
        except InputError as e:
            raise InputError(str(e).replace(f"{src}: ", "plan: ")) from None
        kind = job.kind.value
        names = [form.format] if form.format else [
            e.name for e in api.list_exporters() if kind in api.exports.exporter_row(e)["plans"]]
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            skipped: list[str] = []
            for name in names:
                out = Path(tmp) / "out" / str(name)
                try:
                    done = api.export_plan(str(name), job, out, cat)
                except InputError as e:
                    if form.format:  # the one format asked for: its refusal is the answer
                        raise
                    skipped.append(f"{name}: {e}")  # every format: say which cannot
                    continue
                for p in done.paths:
                    z.write(p, f"{name}/{p.name}" if not form.format else p.name)
                z.writestr(f"{name}/LAUNCH.txt" if not form.format else "LAUNCH.txt",
                           done.result.launch + "\n")
            if skipped:
                z.writestr("NOT_EXPORTED.txt", "\n".join(skipped) + "\n")
    stem = f"{job.model}-{form.format or 'all'}".replace("/", "_")
    return buf.getvalue(), f"{stem}.zip"


def report_html(result: dict[str, Any], cat: Catalog) -> tuple[str, str]:
    """A saved ``--json`` result as the HTML report and its file name (damaged fields are a
    bad input, as in the CLI's ``report``)."""
    rep, html = api.saved_report_html(result, cat)
    return html, rep.kind + "-report.html"


PATH_SUFFIXES = (".yaml", ".yml", ".json")


def preset(model: str, cat: Catalog) -> Any:
    """The catalog's model by (forgiving) name; a file path or Hub id is refused unopened."""
    if any(c in model for c in "/\\\x00") or model.strip().lower().endswith(PATH_SUFFIXES):
        raise InputError("model: the web app takes a catalog preset id (GET /api/catalog lists "
                         "them), not a file path or Hub id (use the CLI for those)")
    return api.models.catalog_model(model, cat)


def no_path(cluster: str | None) -> str | None:
    """The cluster spec, refused when it names a file: the web app takes catalog presets and
    specs such as 8xH100 only, never a path on the server."""
    if cluster is not None and (any(c in cluster for c in "/\\\x00")
                                or cluster.strip().lower().endswith(PATH_SUFFIXES)
                                or cluster.strip().startswith(("~", "."))):
        raise InputError("cluster: the web app takes a preset id or a spec such as 8xH100 or "
                         "2x8xmi300x, not a file path (use the CLI for system YAML files)")
    return cluster


def catalog_listing(cat: Catalog) -> dict[str, Any]:
    """The models, accelerators, system presets and exporters the forms can name."""
    return {"models": api.list_models(catalog=cat),
            "accelerators": [api.hardware.accelerator_row(a)
                             for a in api.list_accelerators(catalog=cat)],
            "systems": [api.hardware.system_row(s) for s in api.list_systems(cat)],
            "exporters": [api.exports.exporter_row(e) for e in api.list_exporters()]}


def _inputs(form: Any) -> dict[str, Any]:
    """The fields the request set (its inputs, for the report)."""
    return form.model_dump(exclude_unset=True, by_alias=True)
