"""Imported by the job forkserver only (``runner``): the modules every job needs and one small
estimate, plan and report run once, so each forked job starts warm (imports and caches done)
instead of paying seconds of imports per request."""

from __future__ import annotations

import contextlib
import gc
import importlib

from accelmap.errors import AccelmapError
from accelmap.web import jobs
from accelmap.web.forms import EstimateForm, PlanForm
from accelmap.web.worker import CATALOG, figured

MODULES = ("accelmap.api.estimates", "accelmap.api.planning", "accelmap.api.reports",
           "accelmap.api.comparison", "accelmap.api.validation", "accelmap.api.exports",
           "accelmap.search.planner", "accelmap.search.serve", "accelmap.search.serve_scenario",
           "plotly.graph_objects", "plotly.io")


def warm() -> None:
    for name in MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    with contextlib.suppress(AccelmapError, ImportError):
        figured(jobs.estimate(EstimateForm(model="llama-3.2-1b", hw="h100-sxm5-80gb"),
                              CATALOG)[1])
        figured(jobs.estimate(EstimateForm(model="llama-3.2-1b", cluster="2xH100", train=True,
                                           batch=8, seq=512), CATALOG)[1])
        jobs.plan(PlanForm(model="llama-3.2-1b", cluster="1xH100", global_batch_tokens="64K",
                           seq=512, top=1), CATALOG, 5.0)
    # the warm objects out of the collector's reach: a forked job's collections then neither
    # walk them nor touch (copy) their pages
    gc.collect()
    gc.freeze()


warm()
