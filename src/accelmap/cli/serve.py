"""`accelmap serve`: the local web app (FastAPI under uvicorn; needs the web extra)."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from accelmap import api
from accelmap.errors import InputError

# uvicorn imports the app by name: the CLI itself never imports the web layer
APP = "accelmap.web.app:create_app"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve_cmd(
    host: Annotated[str, typer.Option(help="Address to bind; loopback by default (other "
                                      "addresses expose the app to the network).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port.")] = 8000,
    search_s: Annotated[float, typer.Option(
        "--search-s", min=0.1, help="Search time cap per request, seconds (a plan stops there "
        "with its best so far).")] = 20.0,
    max_body: Annotated[int, typer.Option(
        "--max-body", min=1024, help="Largest request body accepted, bytes.")] = 2 * 2**20,
) -> None:
    """Run the local web app: a page at / (pick a model, hardware and workload; plan or
    estimate; charts, the plan table, the HTML report and launch files to download), the JSON
    API under /api and its documentation at /docs.

    Examples:
      accelmap serve                      # http://127.0.0.1:8000
      accelmap serve --port 8080 --search-s 60
    """
    missing = api.reports.missing_extra("fastapi", "uvicorn", "plotly", "multipart")
    if missing:
        raise InputError(missing)
    import uvicorn

    os.environ["ACCELMAP_WEB_SEARCH_S"] = str(search_s)
    os.environ["ACCELMAP_WEB_MAX_BODY"] = str(max_body)
    os.environ["ACCELMAP_WEB_HOST"] = host  # the app answers this Host besides loopback names
    if host not in LOOPBACK:
        sys.stderr.write(f"warning: serving on {host}: anyone who can reach this address can "
                         "use the app (no authentication)\n")
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"accelmap web app on http://{shown}:{port}/ (API docs at /docs); "
                     "Ctrl-C stops it\n")
    uvicorn.run(APP, factory=True, host=host, port=port, log_level="warning")
