"""The FastAPI app: JSON endpoints over the public API, OpenAPI docs at /docs, and one page at /.

Endpoints (the bodies are ``forms``; every result is what the CLI's ``--json`` prints):

- ``GET /api/catalog``: models, accelerators, system presets, exporters;
- ``POST /api/estimate``, ``/api/plan``, ``/api/compare``: the ``--json`` object;
- ``POST /api/validate``: upload CSV files as ``cases`` (multipart);
- ``POST /api/export``: a plan's launch files as a zip;
- ``POST /api/{estimate,plan,compare,validate}/figures``: the result and its report's figures
  (plotly JSON), for the page;
- ``POST /api/report``: any saved ``--json`` result as the HTML report (``accelmap report``).

Bounded work: a body over ``max_body`` bytes is refused (413), a search stops at ``search_s``
seconds (with its best plans so far), and bad input is a 400 (422 for a malformed body) whose
``error`` is the sentence the CLI prints. Handlers are plain functions, run in the threadpool,
so requests are served concurrently.
"""

from __future__ import annotations

import os
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, File, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from accelmap import api
from accelmap.errors import AccelmapError
from accelmap.web import jobs
from accelmap.web.forms import CompareForm, EstimateForm, ExportForm, PlanForm

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from accelmap.api import Catalog, Report

SEARCH_S = 20.0  # default search cap per request, seconds ($ACCELMAP_WEB_SEARCH_S)
MAX_BODY = 2 * 2**20  # default request size limit, bytes ($ACCELMAP_WEB_MAX_BODY)
STATIC = Path(str(resources.files("accelmap.web") / "static"))


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with a 413, by its Content-Length or, without
    one, as it streams in."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._refuse(send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            msg = await receive()
            seen += len(msg.get("body", b""))
            if seen > self.limit:
                raise _TooLarge
            return msg

        async def tracked(msg: Message) -> None:
            nonlocal started
            started = started or msg["type"] == "http.response.start"
            await send(msg)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        await JSONResponse({"error": f"request body over the {self.limit:,}-byte limit"},
                           status_code=413)({"type": "http"}, _no_receive, send)


class _TooLarge(Exception):
    pass


async def _no_receive() -> Message:  # pragma: no cover - a response never reads
    return {"type": "http.disconnect"}


def _sentence(exc: RequestValidationError) -> str:
    """A malformed body as one sentence: the first problem, named by its field."""
    errs = exc.errors()
    if not errs:
        return "malformed request body"
    e = errs[0]
    loc = [str(x) for x in e.get("loc", ()) if x != "body"]
    field = ".".join(loc) or "body"
    if e.get("type") == "extra_forbidden":
        return (f"unknown field {field!r}: the fields are named as the CLI's flags "
                "(--global-batch-tokens is global_batch_tokens; see /docs)")
    if e.get("type") == "missing":
        return f"missing field {field!r} (see /docs)"
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"{field}: {e.get('msg', 'invalid')}{more}"


def create_app(search_s: float | None = None, max_body: int | None = None,
               catalog: Catalog | None = None) -> FastAPI:
    """The app; ``search_s`` and ``max_body`` default to $ACCELMAP_WEB_SEARCH_S and
    $ACCELMAP_WEB_MAX_BODY, else 20 s and 2 MiB. The catalog loads once, on first use."""
    cap = float(search_s if search_s is not None
                else os.environ.get("ACCELMAP_WEB_SEARCH_S", SEARCH_S))
    limit = int(max_body if max_body is not None
                else os.environ.get("ACCELMAP_WEB_MAX_BODY", MAX_BODY))
    app = FastAPI(title="accelmap", version=api.accelmap_version(),
                  summary="Map large language models onto accelerators: will it fit, how to "
                  "split it, how fast, at what cost.")
    app.add_middleware(BodyLimit, limit=limit)
    state: dict[str, Any] = {"catalog": catalog}
    lock = threading.Lock()

    def cat() -> Catalog:
        with lock:
            if state["catalog"] is None:
                state["catalog"] = api.load_catalog()
            return state["catalog"]

    @app.exception_handler(AccelmapError)
    async def _input_error(request: Request, exc: AccelmapError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def _bad_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _sentence(exc)}, status_code=422)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> Response:
        """plotly.js from the installed plotly package: the page needs no CDN."""
        from plotly.offline import get_plotlyjs

        return Response(get_plotlyjs(), media_type="application/javascript",
                        headers={"Cache-Control": "public, max-age=86400"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/api/version", tags=["catalog"])
    def version() -> dict[str, Any]:
        """The accelmap version and the app's limits."""
        return {"version": app.version, "search_s": cap, "max_body_bytes": limit}

    @app.get("/api/catalog", tags=["catalog"])
    def catalog_listing() -> dict[str, Any]:
        """Models, accelerators, system presets and exporters (as `models list`, `hw list`,
        `hw systems` and `export --list` print them with --json)."""
        return jobs.catalog_listing(cat())

    @app.post("/api/estimate", tags=["estimate"])
    def estimate(form: EstimateForm) -> dict[str, Any]:
        """`accelmap estimate --json`: one model on one accelerator or cluster."""
        return jobs.estimate(form, cat())[0]

    @app.post("/api/plan", tags=["plan"])
    def plan(form: PlanForm) -> dict[str, Any]:
        """`accelmap plan --json`: every mapping searched and ranked (stops at the search cap
        with the best so far, marked interrupted)."""
        return jobs.plan(form, cat(), cap)[0]

    @app.post("/api/compare", tags=["compare"])
    def compare(form: CompareForm) -> dict[str, Any]:
        """`accelmap compare --json`: every accelerator on one model."""
        return jobs.compare(form, cat(), cap)[0]

    @app.post("/api/validate", tags=["validate"])
    def validate(cases: list[UploadFile] = File(...)) -> dict[str, Any]:
        """`accelmap validate --cases FILE.csv --json` of uploaded measurement CSVs."""
        return jobs.validate(_read(cases), cat())[0]

    @app.post("/api/export", tags=["export"],
              responses={200: {"content": {"application/zip": {}}}})
    def export(form: ExportForm) -> Response:
        """A plan (the object /api/plan returned) as launch files, in one zip."""
        data, name = jobs.export_zip(form, cat())
        return Response(data, media_type="application/zip",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    def figured(rep: Report) -> dict[str, Any]:
        return {"result": rep.result, "title": rep.title, "version": rep.version,
                "inputs": rep.inputs, "notes": rep.detail.get("notes") or [],
                "figures": api.report_figures(rep)}

    @app.post("/api/estimate/figures", tags=["estimate"])
    def estimate_figures(form: EstimateForm) -> dict[str, Any]:
        """The estimate and its report's figures (plotly JSON)."""
        return figured(jobs.estimate(form, cat())[1])

    @app.post("/api/plan/figures", tags=["plan"])
    def plan_figures(form: PlanForm) -> dict[str, Any]:
        """The plan and its report's figures (plotly JSON)."""
        return figured(jobs.plan(form, cat(), cap)[1])

    @app.post("/api/compare/figures", tags=["compare"])
    def compare_figures(form: CompareForm) -> dict[str, Any]:
        """The comparison and its report's figures (plotly JSON)."""
        return figured(jobs.compare(form, cat(), cap)[1])

    @app.post("/api/validate/figures", tags=["validate"])
    def validate_figures(cases: list[UploadFile] = File(...)) -> dict[str, Any]:
        """The validation and its report's figures (plotly JSON)."""
        return figured(jobs.validate(_read(cases), cat())[1])

    @app.post("/api/report", tags=["report"], response_class=HTMLResponse)
    def report(result: dict[str, Any]) -> HTMLResponse:
        """Any saved --json result as the self-contained HTML report (`accelmap report`)."""
        rep = api.report_from_json(result, cat())
        name = rep.kind + "-report.html"
        return HTMLResponse(api.render_report(rep),
                            headers={"Content-Disposition": f'attachment; filename="{name}"'})

    return app


def _read(files: list[UploadFile]) -> list[tuple[str, bytes]]:
    return [(f.filename or "cases.csv", f.file.read()) for f in files]
