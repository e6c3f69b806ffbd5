"""One web job in a process of its own (the child side of ``runner``): the job's CPU time and
address space are capped by the kernel (``resource.setrlimit``), so a request cannot compute
or allocate past the app's limits, and the server can end it at once (on a client that left,
at the wall-clock cap, on shutdown) by killing the process: Python threads cannot be stopped.

Imported once by the forkserver (``multiprocessing`` preload), with the catalog loaded, so a
job starts by a fork of a warm process, not a fresh interpreter.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from accelmap import api
from accelmap.errors import AccelmapError
from accelmap.web import jobs

CATALOG = api.load_catalog()  # loaded in the forkserver, shared by every forked job


@dataclass(frozen=True)
class Limits:
    """One job's caps: ``search_s`` the soft cap a search stops at with its best plans so far,
    ``cpu_s`` the kernel's CPU-time cap (SIGXCPU past it), ``memory_bytes`` its address space
    (a MemoryError past it); 0 = no kernel cap."""

    search_s: float
    cpu_s: int
    memory_bytes: int


def _cap(limits: Limits) -> None:
    if limits.cpu_s > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 2))
    if limits.memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))


def figured(rep: api.reports.Report) -> dict[str, Any]:
    """The result and its report's figures (plotly JSON), for the page."""
    return {"result": rep.result, "title": rep.title, "version": rep.version,
            "inputs": rep.inputs, "notes": rep.detail.get("notes") or [],
            "figures": api.reports.report_figures(rep)}


def _report(result: dict[str, Any], cat: api.Catalog, _s: float) -> tuple[str, str]:
    return jobs.report_html(result, cat)


JOBS: dict[str, Callable[[Any, api.Catalog, float], Any]] = {
    "estimate": lambda f, cat, s: jobs.estimate(f, cat)[0],
    "estimate/figures": lambda f, cat, s: figured(jobs.estimate(f, cat)[1]),
    "plan": lambda f, cat, s: jobs.plan(f, cat, s)[0],
    "plan/figures": lambda f, cat, s: figured(jobs.plan(f, cat, s)[1]),
    "compare": lambda f, cat, s: jobs.compare(f, cat, s)[0],
    "compare/figures": lambda f, cat, s: figured(jobs.compare(f, cat, s)[1]),
    "frontier": lambda f, cat, s: jobs.frontier(f, cat, s)[0],
    "frontier/figures": lambda f, cat, s: figured(jobs.frontier(f, cat, s)[1]),
    "validate": lambda f, cat, s: jobs.validate(f, cat)[0],
    "validate/figures": lambda f, cat, s: figured(jobs.validate(f, cat)[1]),
    "export": lambda f, cat, s: jobs.export_zip(f, cat),
    "report": _report,
}


def run(job: str, payload: Any, conn: Connection, limits: Limits) -> None:
    """Run ``job`` under ``limits`` and send ``(status, value)`` back: ``ok`` and the result,
    ``input`` and the sentence of a bad input, ``memory`` past the memory cap, ``internal``
    and the exception otherwise (a bug: the server answers it as one)."""
    _cap(limits)
    try:
        out: tuple[str, Any] = ("ok", JOBS[job](payload, CATALOG, limits.search_s))
    except AccelmapError as e:
        out = ("input", str(e))
    except MemoryError:
        out = ("memory", "")
    except RecursionError:
        out = ("input", "the input is nested too deeply to process")
    except Exception as e:  # a bug: reported as one, never as the user's fault
        out = ("internal", f"{type(e).__name__}: {e}")
    try:
        conn.send(out)
    except MemoryError:
        conn.send(("memory", ""))
    finally:
        conn.close()
