"""One self-contained HTML page of a report: plotly's JavaScript embedded once (no remote
script: the file opens from disk with no network), the figures, the headline numbers, the
inputs, the version, and the result itself as JSON."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any

from accelmap.report.document import KINDS, Report
from accelmap.report.figures import figures, q

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;
background:#fafafa}
header{background:#1f3b57;color:#fff;padding:18px 28px}
header h1{margin:0;font-size:22px} header p{margin:6px 0 0;opacity:.85;font-size:13px}
main{max-width:1200px;margin:0 auto;padding:18px 28px}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;margin:16px 0;
padding:12px 16px}
h2{font-size:17px;margin:6px 0 10px}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
ul{font-size:13px;margin:4px 0 4px 18px;padding:0}
details pre{font-size:11px;max-height:480px;overflow:auto;background:#f4f4f4;padding:8px}
.note{color:#8a5a00}
"""


def _table(rows: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                               for k, v in rows) + "</table>"


def headline(report: Report) -> list[tuple[str, str]]:
    """The few numbers a reader looks for first, as (label, text)."""
    r = report.result
    est = report.detail.get("estimate") or (r if report.kind == "estimate" else {})
    rows: list[tuple[str, str]] = []
    if report.kind == "plan" and r.get("plans"):
        best = r["plans"][0]
        rows.append(("chosen plan", " ".join(f"{k}={v}" for k, v in best["mapping"].items())))
        rows.append(("search", f"{r.get('evaluated', 0):,} mappings evaluated, "
                               f"{r.get('feasible', 0):,} feasible, {r.get('seconds', 0):.2f} s"
                               + (" (stopped early: best so far)" if r.get("interrupted")
                                  else "")))
    if est:
        for key, label, dim in (("step_time_s", "step time", "time"),
                                ("ttft_s", "TTFT", "time"), ("tpot_s", "TPOT", "time")):
            if isinstance(est.get(key), int | float):
                rows.append((label, q(est[key], dim)))
        if est.get("tokens_per_s"):
            rows.append(("tokens/s", f"{est['tokens_per_s']:,.1f}"))
        if est.get("mfu"):
            rows.append(("MFU (model FLOPs)", f"{est['mfu']:.1%}"))
        mem = est.get("memory") or {}
        if mem.get("total_bytes"):
            rows.append(("memory per device", f"{q(mem['total_bytes'], 'bytes')} of "
                                              f"{q(mem.get('capacity_bytes'), 'bytes')} "
                                              f"({mem.get('fit', '')})"))
        band = est.get("error_band") or {}
        if band.get("text"):
            rows.append(("expected error", band["text"]))
        if not est.get("feasible", True):
            rows.append(("feasible", f"no: {est.get('reason')}"))
    if report.kind == "validate":
        s = r.get("summary") or {}
        rows.append(("rows scored", f"{s.get('n', 0)} of {s.get('n_rows', 0)}"))
        rows.append(("abs error median / p90 / max",
                     f"{s.get('median_abs_pct_error') or 0:.1f} % / "
                     f"{s.get('p90_abs_pct_error') or 0:.1f} % / "
                     f"{s.get('max_abs_pct_error') or 0:.1f} %"))
    if report.kind == "compare":
        rows.append(("accelerators", f"{len(r.get('rows') or [])} in {r.get('seconds', 0)} s"))
    return rows


def _lines(report: Report) -> list[tuple[str, list[str]]]:
    r = report.result
    est = report.detail.get("estimate") or (r if report.kind == "estimate" else {})
    out = []
    if r.get("explanation"):
        out.append(("Why this plan", list(r["explanation"])))
    notes = list(r.get("notes") or []) if isinstance(r.get("notes"), list) else []
    notes += list(report.detail.get("notes") or [])
    if notes:
        out.append(("Notes", notes))
    if est and est.get("assumptions"):
        out.append(("Assumptions", list(est["assumptions"])))
    return out


def render(report: Report, generated: datetime | None = None) -> str:
    """The report as one HTML document (about 4 MB: plotly's JavaScript is embedded)."""
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    figs = figures(report)
    parts: list[str] = []
    for i, (name, fig) in enumerate(figs):
        div = fig.to_html(full_html=False, include_plotlyjs=(i == 0), div_id=f"fig-{name}",
                          config={"displaylogo": False, "responsive": True})
        parts.append(f'<section class="figure" id="sec-{name}">{div}</section>')
    if not figs:
        parts.append("<section><p>This result has nothing to draw (no feasible plan or "
                     "estimate).</p></section>")
    head = headline(report)
    inputs = [(k, _text(v)) for k, v in report.inputs.items() if v not in (None, False, "")]
    made = f"accelmap {report.version}" + (f" · {report.command}" if report.command else "")
    body = [f"<header><h1>{html.escape(report.title)}</h1><p>made by {html.escape(made)} on "
            f"{when} · from {html.escape(KINDS[report.kind])} --json</p></header><main>"]
    if head:
        body.append(f"<section><h2>Summary</h2>{_table(head)}</section>")
    body += parts
    for title, lines in _lines(report):
        body.append(f"<section><h2>{html.escape(title)}</h2><ul>"
                    + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul></section>")
    if report.kind == "plan" and report.result.get("plans"):
        body.append(f"<section><h2>Ranked plans</h2>{plan_table(report.result)}</section>")
    body.append(f"<section><h2>Inputs</h2>{_table(inputs or [('(none recorded)', '')])}"
                f"{_table([('accelmap version', report.version)])}</section>")
    raw = html.escape(json.dumps(report.result, indent=1, default=str))
    body.append(f"<section><details><summary>The result as JSON</summary><pre>{raw}</pre>"
                "</details></section></main>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(report.title)}</title><style>{_STYLE}</style></head><body>"
            + "".join(body) + "</body></html>\n")


def plan_table(result: dict[str, Any]) -> str:
    """The ranked plans as an HTML table (the terminal's columns)."""
    cols = [("mapping", None), ("tokens/s", "tokens_per_s"), ("MFU", "mfu"),
            ("step", "step_time_s"), ("TTFT", "ttft_s"), ("TPOT", "tpot_s"),
            ("memory/device", "memory_per_device_bytes"),
            ("$/M tokens", "usd_per_million_tokens"), ("J/token at TDP", "energy_j_per_token_tdp")]
    plans = result.get("plans") or []
    cols = [c for c in cols if c[1] is None or any(
        isinstance(p.get(c[1]), int | float) for p in plans)]
    head = "".join(f"<th>{c}</th>" for c, _ in cols)
    rows = []
    for p in plans:
        cells = []
        for _, key in cols:
            if key is None:
                cells.append(f"<td>{html.escape(_mapping(p['mapping']))}</td>")
                continue
            v = p.get(key)
            cells.append(f'<td class="n">{html.escape(_cell(key, v))}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table class=\"plans\"><tr><th>#</th>{head}</tr>" + "".join(
        r.replace("<tr>", f"<tr><td>{i + 1}</td>", 1) for i, r in enumerate(rows)) + "</table>"


def _mapping(m: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in m.items()
                    if v is True or v not in (1, False, None, "none") or k in ("dp", "tp", "pp"))


def _cell(key: str, v: Any) -> str:
    if not isinstance(v, int | float):
        return "-"
    if key == "mfu":
        return f"{v:.1%}"
    if key.endswith("_s"):
        return q(v, "time")
    if key.endswith("_bytes"):
        return q(v, "bytes")
    return f"{v:,.0f}" if key == "tokens_per_s" else f"{v:.3g}"


def _text(v: Any) -> str:
    if isinstance(v, list | tuple):
        return ", ".join(str(x) for x in v)
    return str(v)
