"""The FastAPI app: JSON endpoints over the public API, OpenAPI docs at /docs, and one page at /.

Endpoints (the bodies are ``forms``; every result is what the CLI's ``--json`` prints):

- ``GET /api/catalog``: models, accelerators, system presets, exporters;
- ``POST /api/estimate``, ``/api/plan``, ``/api/compare``: the ``--json`` object;
- ``POST /api/validate``: upload CSV files as ``cases`` (multipart);
- ``POST /api/export``: a plan's launch files as a zip;
- ``POST /api/{estimate,plan,compare,validate}/figures``: the result and its report's figures
  (plotly JSON), for the page;
- ``POST /api/report``: any saved ``--json`` result as the HTML report (``accelmap report``).

Bounded work: a body over ``max_body`` bytes is refused (413), every field is checked against
the schema before any work (422), a search stops at ``search_s`` seconds (with its best plans
so far), and every job runs in a capped process of its own (``runner``: two lanes so searches
cannot starve estimates, killed on disconnect, at its cap and on shutdown). Bad input is a 4xx
whose ``error`` is the sentence the CLI prints; every error, 404s included, has that shape,
with any echoed input cut. ``guard`` checks Host and Origin and sends the security headers.
The model and cluster fields name catalog entries (or cluster specs such as 8xH100), never
server files. /docs is Swagger UI from the fastapi-offline package (no CDN).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, File, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from accelmap import api
from accelmap.errors import AccelmapError
from accelmap.web import jobs
from accelmap.web.forms import CompareForm, EstimateForm, ExportForm, FrontierForm, PlanForm
from accelmap.web.guard import Guard, Headers
from accelmap.web.runner import Busy, Gone, Internal, Lane, Pool, Runner, Stopping, on_signals

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from accelmap.api import Catalog

SEARCH_S = 20.0  # default search cap per request, seconds ($ACCELMAP_WEB_SEARCH_S)
MAX_BODY = 2 * 2**20  # default request size limit, bytes ($ACCELMAP_WEB_MAX_BODY)
ERROR_CHARS = 400  # an error sentence's length, any echoed input cut to fit
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


def clip(text: str, most: int = ERROR_CHARS) -> str:
    """One line of at most ``most`` characters: an unbroken run over 80 characters (echoed
    input) cut to 60 and an ellipsis, then the whole cut to fit."""
    text = re.sub(r"\S{81,}", lambda m: m.group(0)[:60] + "…", " ".join(text.split()))
    return text if len(text) <= most else text[:most - 1] + "…"


def error(text: str, status: int, headers: dict[str, str] | None = None) -> JSONResponse:
    """The app's error shape: ``{"error": sentence}``."""
    return JSONResponse({"error": clip(text)}, status_code=status, headers=headers)



def _env(name: str, given: float | None, default: float) -> float:
    return float(given if given is not None else os.environ.get(name, default))


def create_app(search_s: float | None = None, max_body: int | None = None,
               catalog: Catalog | None = None, pool: Pool | None = None,
               hosts: tuple[str, ...] = ()) -> FastAPI:
    """The app; ``search_s`` and ``max_body`` default to $ACCELMAP_WEB_SEARCH_S and
    $ACCELMAP_WEB_MAX_BODY, else 20 s and 2 MiB; ``pool`` the job lanes and caps (default:
    ``Pool`` with that search cap); ``hosts`` the host names answered besides loopback (and
    $ACCELMAP_WEB_HOST, the address ``accelmap serve`` binds)."""
    cap = _env("ACCELMAP_WEB_SEARCH_S", search_s, SEARCH_S)
    limit = int(_env("ACCELMAP_WEB_MAX_BODY", max_body, MAX_BODY))
    runner = Runner(pool or Pool(search_s=cap, wall_s=max(2 * cap, cap + 25)))
    cat = catalog or api.load_catalog()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        runner.start()
        undo = on_signals(runner.stop)  # SIGTERM ends running jobs, not after them
        try:
            yield
        finally:
            runner.stop()
            undo()

    app = FastAPI(title="accelmap", version=api.reports.accelmap_version(), docs_url=None,
                  redoc_url=None, lifespan=lifespan,
                  summary="Map large language models onto accelerators: will it fit, how to "
                  "split it, how fast, at what cost.")
    app.state.runner = runner
    app.add_middleware(BodyLimit, limit=limit)
    bound = {h for h in (os.environ.get("ACCELMAP_WEB_HOST"), *hosts) if h}
    app.add_middleware(Guard, hosts=frozenset(bound))
    app.add_middleware(Headers)
    _errors(app)
    _pages(app)

    _info_routes(app, runner, cap, limit, cat)
    _job_routes(app, runner)
    _figure_routes(app, runner)
    return app


def _info_routes(app: FastAPI, runner: Runner, cap: float, limit: int, cat: Catalog) -> None:
    """The version with the app's limits, and the catalog's listing."""

    @app.get("/api/version", tags=["catalog"])
    def version() -> dict[str, Any]:
        """The accelmap version and the app's limits."""
        p = runner.pool
        return {"version": app.version, "search_s": cap, "max_body_bytes": limit,
                "wall_s": p.wall_s, "memory_bytes": p.memory_bytes,
                "searches_at_once": p.searches, "quick_at_once": p.quick}

    @app.get("/api/catalog", tags=["catalog"])
    def catalog_listing() -> dict[str, Any]:
        """Models, accelerators, system presets and exporters (as `models list`, `hw list`,
        `hw systems` and `export --list` print them with --json)."""
        return jobs.catalog_listing(cat)


def _job_routes(app: FastAPI, runner: Runner) -> None:
    """The CLI's commands as JSON endpoints, each a job on the runner's lanes."""

    async def job(request: Request, lane: Lane, name: str, payload: Any) -> Any:
        return await runner.run(lane, name, payload, request.is_disconnected)

    @app.post("/api/estimate", tags=["estimate"])
    async def estimate(form: EstimateForm, request: Request) -> dict[str, Any]:
        """`accelmap estimate --json`: one model on one accelerator or cluster."""
        return await job(request, Lane.QUICK, "estimate", form)

    @app.post("/api/plan", tags=["plan"])
    async def plan(form: PlanForm, request: Request) -> dict[str, Any]:
        """`accelmap plan --json`: every mapping searched and ranked (stops at the search cap
        with the best so far, marked interrupted)."""
        return await job(request, Lane.SEARCH, "plan", form)

    @app.post("/api/compare", tags=["compare"])
    async def compare(form: CompareForm, request: Request) -> dict[str, Any]:
        """`accelmap compare --json`: every accelerator on one model."""
        return await job(request, Lane.SEARCH, "compare", form)

    @app.post("/api/frontier", tags=["frontier"])
    async def frontier(form: FrontierForm, request: Request) -> dict[str, Any]:
        """`accelmap frontier --json`: tokens/s per device against tokens/s per user."""
        return await job(request, Lane.SEARCH, "frontier", form)

    @app.post("/api/validate", tags=["validate"])
    async def validate(request: Request, cases: list[UploadFile] = File(...)
                       ) -> dict[str, Any]:
        """`accelmap validate --cases FILE.csv --json` of uploaded measurement CSVs."""
        return await job(
            request, Lane.SEARCH, "validate", await _read(cases))

    @app.post("/api/export", tags=["export"],
              responses={200: {"content": {"application/zip": {}}}})
    async def export(form: ExportForm, request: Request) -> Response:
        """A plan (the object /api/plan returned) as launch files, in one zip."""
        data, name = await job(request, Lane.QUICK, "export", form)
        return Response(data, media_type="application/zip",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})


def _figure_routes(app: FastAPI, runner: Runner) -> None:
    """The results with their report's figures, and a saved result as the HTML report."""

    async def job(request: Request, lane: Lane, name: str, payload: Any) -> Any:
        return await runner.run(lane, name, payload, request.is_disconnected)

    @app.post("/api/estimate/figures", tags=["estimate"])
    async def estimate_figures(form: EstimateForm, request: Request) -> dict[str, Any]:
        """The estimate and its report's figures (plotly JSON)."""
        return await job(
            request, Lane.QUICK, "estimate/figures", form)

    @app.post("/api/plan/figures", tags=["plan"])
    async def plan_figures(form: PlanForm, request: Request) -> dict[str, Any]:
        """The plan and its report's figures (plotly JSON)."""
        return await job(request, Lane.SEARCH, "plan/figures", form)

    @app.post("/api/compare/figures", tags=["compare"])
    async def compare_figures(form: CompareForm, request: Request) -> dict[str, Any]:
        """The comparison and its report's figures (plotly JSON)."""
        return await job(
            request, Lane.SEARCH, "compare/figures", form)

    @app.post("/api/frontier/figures", tags=["frontier"])
    async def frontier_figures(form: FrontierForm, request: Request) -> dict[str, Any]:
        """The frontier and its report's figures (plotly JSON)."""
        return await job(request, Lane.SEARCH, "frontier/figures", form)

    @app.post("/api/validate/figures", tags=["validate"])
    async def validate_figures(request: Request, cases: list[UploadFile] = File(...)
                               ) -> dict[str, Any]:
        """The validation and its report's figures (plotly JSON)."""
        return await job(
            request, Lane.SEARCH, "validate/figures", await _read(cases))

    @app.post("/api/report", tags=["report"], response_class=HTMLResponse)
    async def report(result: dict[str, Any], request: Request) -> HTMLResponse:
        """Any saved --json result as the self-contained HTML report (`accelmap report`)."""
        html, name = await job(request, Lane.QUICK, "report", result)
        return HTMLResponse(html,
                            headers={"Content-Disposition": f'attachment; filename="{name}"'})


def _errors(app: FastAPI) -> None:
    """Every error in the app's shape, ``{"error": one sentence}``."""

    @app.exception_handler(AccelmapError)
    async def _input_error(request: Request, exc: AccelmapError) -> JSONResponse:
        return error(str(exc), 400)

    @app.exception_handler(RequestValidationError)
    async def _bad_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(_sentence(exc), 422)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        text = {404: f"no such page: {request.url.path} (the API is listed at /docs)",
                405: f"{request.method} is not allowed on {request.url.path} (see /docs)"}
        return error(text.get(exc.status_code, str(exc.detail)), exc.status_code,
                     dict(exc.headers or {}))

    @app.exception_handler(Busy)
    async def _busy(request: Request, exc: Busy) -> JSONResponse:
        return error("the app is busy (its queue of waiting jobs is full): try again in a few "
                     "seconds", 429, {"Retry-After": "5"})

    @app.exception_handler(Stopping)
    async def _stopping(request: Request, exc: Stopping) -> JSONResponse:
        return error("the app is shutting down: the job was stopped", 503)

    @app.exception_handler(Gone)
    async def _gone(request: Request, exc: Gone) -> JSONResponse:
        return error("the client disconnected: the job was stopped", 400)

    @app.exception_handler(Internal)
    async def _internal(request: Request, exc: Internal) -> JSONResponse:
        return error(f"internal error: {exc} (please report it)", 500)


def _pages(app: FastAPI) -> None:
    """The page, its static files, plotly.js and the API docs, all from this machine."""

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
    assets = swagger_assets()
    if assets is not None:
        app.mount("/docs-assets", StaticFiles(directory=assets), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        """Swagger UI from the fastapi-offline package (the web extra), no CDN."""
        if assets is None:
            return HTMLResponse("<p>The API docs need the fastapi-offline package: pip "
                                "install 'accelmap[web]'. The schema is at "
                                "<a href=/openapi.json>/openapi.json</a>.</p>")
        return get_swagger_ui_html(openapi_url="/openapi.json", title="accelmap API",
                                   swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                                   swagger_css_url="/docs-assets/swagger-ui.css",
                                   swagger_favicon_url="/docs-assets/favicon.png")


def swagger_assets() -> Path | None:
    """The folder of Swagger UI's files (5.x: it reads OpenAPI 3.1) shipped by the
    fastapi-offline package, None without it."""
    try:
        import fastapi_offline
    except ImportError:
        return None
    path = Path(fastapi_offline.__file__).parent / "static"
    return path if (path / "swagger-ui-bundle.js").is_file() else None


async def _read(files: list[UploadFile]) -> list[tuple[str, bytes]]:
    return [(f.filename or "cases.csv", await f.read()) for f in files]
