"""The pictures of a report, as plotly figures: one function per picture, each from the plain
``--json`` objects (and the report's detail), so a saved result and a live one draw alike.

Every figure has a title, axes with units and hover text with the exact figures. Which of
them a report holds depends on what its result has (``figures``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import plotly.graph_objects as go

from accelmap.report.document import Report
from accelmap.units import Dimension, format_quantity

Figure: TypeAlias = Any  # plotly.graph_objects.Figure (plotly ships no type hints)

# one colour per kind of thing, kept across pictures
COLORS = {"compute": "#4C78A8", "memory": "#F58518", "comm": "#E45756", "bubble": "#BAB0AC",
          "optimizer": "#54A24B", "other": "#B279A2", "chosen": "#D62728", "front": "#72B7B2",
          "F": "#4C78A8", "B": "#F58518", "W": "#54A24B"}
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B", "#B279A2",
           "#FF9DA6", "#9D755D", "#BAB0AC")


def q(value: float | None, dim: str, digits: int = 4) -> str:
    """An SI quantity for hover text and labels ('1.234 ms', '42.5 GB'); '-' when missing."""
    if value is None:
        return "-"
    return format_quantity(float(value), Dimension(dim), digits)


def _layout(fig: Figure, title: str, x: str, y: str, **kw: Any) -> Figure:
    height = kw.pop("height", 440)
    fig.update_layout(title={"text": title, "x": 0.01}, template="plotly_white",
                      xaxis_title=x, yaxis_title=y, height=height,
                      margin={"l": 70, "r": 30, "t": 60, "b": 60},
                      legend={"orientation": "h", "y": -0.18 if height >= 400 else -0.45},
                      **kw)
    return fig


# -- roofline -----------------------------------------------------------------------------------


def roofline(roof: dict[str, Any]) -> Figure:
    """Operators as points (arithmetic intensity, achieved FLOP/s per device) under the device's
    roof: bandwidth x intensity up to the ridge point, the dense BF16 peak after it."""
    ops = [o for o in roof["ops"] if o.get("flops", 0) > 0 and o.get("time_s", 0) > 0]
    peak, bw = float(roof["peak_flops"]), float(roof["bandwidth_bytes_per_s"])
    ridge = float(roof.get("ridge_flop_per_byte") or (peak / bw if bw else 0.0))
    fig = go.Figure()
    xs = [max(o["intensity_flop_per_byte"], 1e-3) for o in ops]
    lo = min([*xs, ridge / 100]) / 2 if xs else ridge / 100
    hi = max([*xs, ridge * 100]) * 2 if xs else ridge * 100
    fig.add_trace(go.Scatter(
        x=[lo, ridge, hi], y=[bw * lo, peak, peak], mode="lines", name="roof (achievable)",
        line={"color": "#333", "width": 2},
        hovertemplate="intensity %{x:.4g} FLOP/B<br>roof %{y:.4g} FLOP/s<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=[ridge], y=[peak], mode="markers+text", name=f"ridge {ridge:.4g} FLOP/B",
        marker={"symbol": "diamond", "size": 11, "color": "#333"},
        text=[f"ridge {ridge:.0f} FLOP/B"], textposition="top left",
        hovertemplate=(f"ridge point {ridge:.4g} FLOP/B<br>peak {q(peak, 'flops')}<br>"
                       f"bandwidth {q(bw, 'bandwidth')}<extra></extra>")))
    for bound, color in (("compute", COLORS["compute"]), ("memory", COLORS["memory"]),
                         ("fused", COLORS["other"])):
        mine = [o for o in ops if o.get("bound") == bound]
        if not mine:
            continue
        fig.add_trace(go.Scatter(
            x=[max(o["intensity_flop_per_byte"], 1e-3) for o in mine],
            y=[o["flops"] / o["time_s"] for o in mine], mode="markers", name=f"{bound}-bound",
            marker={"color": color, "size": 9, "opacity": 0.85, "line": {"width": 0.5}},
            text=[_op_hover(o) for o in mine], hovertemplate="%{text}<extra></extra>"))
    where = roof.get("accelerator", "")
    return _layout(fig, f"Roofline: operators of one {roof.get('phase', '')} step on {where} "
                        "(per device)", "arithmetic intensity (FLOP/byte, log)",
                   "achieved FLOP/s per device (log)", xaxis_type="log", yaxis_type="log")


def _op_hover(o: dict[str, Any]) -> str:
    moved = sum(o["bytes"].values()) if isinstance(o.get("bytes"), dict) else 0.0
    return (f"<b>{o['name']}</b> ({o.get('stage', '')}, x{o.get('count', 1)})<br>"
            f"FLOPs {q(o['flops'], 'flop')} · bytes {q(moved, 'bytes')}<br>"
            f"intensity {o['intensity_flop_per_byte']:.4g} FLOP/B<br>"
            f"achieved {q(o['flops'] / o['time_s'], 'flops')} "
            f"(achievable {q(o.get('achievable_flops'), 'flops')})<br>"
            f"time {q(o['time_s'], 'time')} each, {q(o.get('total_s'), 'time')} in all · "
            f"{o.get('bound', '')}-bound")


# -- memory -------------------------------------------------------------------------------------


def _leaves(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for k, v in tree.items():
        if k == "total_bytes":
            continue
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out += _leaves(v, key + "/")
        elif isinstance(v, int | float) and v:
            out.append((key, float(v)))
    return out


def memory(columns: list[tuple[str, dict[str, Any]]], title: str) -> Figure:
    """Memory per device, stacked by item, one column per device kind or pipeline stage
    (``columns``: label and the ``memory`` object of an estimate), with its capacity and the
    memory model's error band."""
    fig = go.Figure()
    items: dict[str, list[float]] = {}
    for i, (_, mem) in enumerate(columns):
        for key, v in _leaves(mem.get("breakdown") or {}):
            items.setdefault(key, [0.0] * len(columns))[i] = v
    labels = [c[0] for c in columns]
    for j, (key, vals) in enumerate(items.items()):
        fig.add_trace(go.Bar(
            x=labels, y=[v / 1e9 for v in vals], name=key,
            marker_color=PALETTE[j % len(PALETTE)],
            text=[q(v, "bytes") for v in vals], textposition="none",
            hovertemplate=f"<b>{key}</b><br>%{{text}} (%{{y:.4f}} GB)<extra>%{{x}}</extra>"))
    for n, (label, mem) in enumerate(columns):
        cap, band = mem.get("capacity_bytes"), mem.get("error_band") or 0.0
        if cap:
            fig.add_shape(type="line", x0=n - 0.45, x1=n + 0.45, y0=cap / 1e9, y1=cap / 1e9,
                          line={"color": "#D62728", "dash": "dash"})
            fig.add_annotation(x=n, y=cap / 1e9, yanchor="bottom", showarrow=False,
                               text=f"capacity {q(cap, 'bytes')}")
        total = mem.get("total_bytes")
        if total:
            fig.add_trace(go.Scatter(
                x=[label], y=[total / 1e9], mode="markers", showlegend=False,
                marker={"color": "#333", "symbol": "line-ew-open", "size": 28},
                error_y={"type": "data", "array": [total * band / 1e9], "visible": True},
                hovertemplate=(f"total {q(total, 'bytes')} ± {band:.1%} (memory model's error "
                               f"band)<br>fit: {mem.get('fit', '')}<extra>{label}</extra>")))
    return _layout(fig, title, "", "memory per device (GB, 10^9 bytes)", barmode="stack",
                   bargap=0.7 if len(columns) == 1 else 0.3)


# -- step time ----------------------------------------------------------------------------------

_TRAIN_GROUPS: tuple[tuple[str, str, str], ...] = (
    ("forward/", "compute: forward", "compute"), ("backward/", "compute: backward", "compute"),
    ("recompute/", "compute: recompute", "compute"), ("bubble", "pipeline bubble", "bubble"),
    ("optimizer", "optimizer step", "optimizer"),
    ("contention", "overlap contention", "other"))


def step_groups(tree: dict[str, float]) -> dict[str, tuple[float, str]]:
    """A training step's time tree rolled up: compute (forward, backward, recompute), each
    collective's exposed time, the bubble, the optimizer, the rest; seconds and colour key."""
    out: dict[str, tuple[float, str]] = {}
    for key, v in tree.items():
        if key.startswith("exposed_comm/"):
            name, kind = f"exposed {key.split('/', 1)[1]} communication", "comm"
        else:
            name, kind = next(((n, k) for p, n, k in _TRAIN_GROUPS if key.startswith(p)),
                              (key.split("/")[0], "other"))
        t, _ = out.get(name, (0.0, kind))
        out[name] = (t + float(v), kind)
    return out


def _serve_group(key: str) -> str:
    parts = key.split("/")
    if "layers" in parts:
        i = parts.index("layers")
        return "/".join(parts[i + 1:i + 2]) or "layers"
    return parts[-1] if parts[1:2] != ["forward"] else parts[2] if len(parts) > 2 else parts[-1]


def step_time(est: dict[str, Any]) -> Figure:
    """Where the step goes: one stacked bar (training) or one bar each for the prefill (TTFT)
    and one decode step (TPOT), by component, with exact seconds and shares on hover."""
    tree = est.get("time_breakdown_s") or {}
    fig = go.Figure()
    if est.get("phase") == "train":
        total = sum(tree.values()) or 1.0
        comm_i = 0
        for name, (t, kind) in step_groups(tree).items():
            if not t:
                continue
            color = COLORS[kind]
            if kind == "comm":
                color = ("#E45756", "#FF9DA6", "#9D755D", "#EECA3B", "#B279A2")[comm_i % 5]
                comm_i += 1
            elif name != "compute: forward" and kind == "compute":
                color = "#72B7B2" if name == "compute: backward" else "#9ecae9"
            fig.add_trace(go.Bar(
                y=["step"], x=[t], name=name, orientation="h", marker_color=color,
                hovertemplate=(f"<b>{name}</b><br>{q(t, 'time')} ({t / total:.1%} of the "
                               f"{q(total, 'time')} step)<extra></extra>")))
        return _layout(fig, f"Step time: {q(est.get('step_time_s'), 'time')} per optimizer "
                            "step, by component", "seconds per step", "", barmode="stack",
                       height=340)
    phases = [p for p in ("prefill", "decode") if any(k.startswith(p + "/") for k in tree)]
    labels = {"prefill": "prefill (TTFT)", "decode": "one decode step (TPOT)"}
    by_op: dict[str, list[float]] = {}
    for i, ph in enumerate(phases):
        for key, v in tree.items():
            if key.startswith(ph + "/"):
                g = _serve_group(key)
                by_op.setdefault(g, [0.0] * len(phases))[i] += float(v)
    totals = [sum(v for k, v in tree.items() if k.startswith(ph + "/")) or 1.0 for ph in phases]
    for j, (g, vals) in enumerate(by_op.items()):
        fig.add_trace(go.Bar(
            y=[labels[p] for p in phases], x=[v * 1e3 for v in vals], name=g, orientation="h",
            marker_color=PALETTE[j % len(PALETTE)],
            text=[f"{q(v, 'time')} ({v / t:.1%} of {q(t, 'time')})"
                  for v, t in zip(vals, totals, strict=True)], textposition="none",
            hovertemplate=f"<b>{g}</b><br>%{{text}}<extra>%{{y}}</extra>"))
    return _layout(fig, f"Serving step time: TTFT {q(est.get('ttft_s'), 'time')}, TPOT "
                        f"{q(est.get('tpot_s'), 'time')}, by component", "milliseconds", "",
                   barmode="stack", height=320)


# -- pipeline -----------------------------------------------------------------------------------


def pipeline(pipe: dict[str, Any]) -> Figure:
    """A Gantt chart of one step's passes per stage: forward, backward (and ZB-H1's weight
    gradient) of every micro-batch; the gaps are the bubble."""
    passes = pipe["passes"]
    fig = go.Figure()
    names = {"F": "forward", "B": "backward" if pipe["schedule"] != "zb-h1"
             else "backward (input gradient)", "W": "weight gradient"}
    for kind in ("F", "B", "W"):
        mine = [x for x in passes if x["kind"] == kind]
        if not mine:
            continue
        fig.add_trace(go.Bar(
            y=[f"stage {x['stage']}" for x in mine], x=[(x["end"] - x["start"]) for x in mine],
            base=[x["start"] for x in mine], orientation="h", name=names[kind],
            marker={"color": COLORS[kind], "line": {"color": "white", "width": 0.5}},
            text=[str(x["micro_batch"]) for x in mine] if len(passes) <= 400 else None,
            textposition="inside", insidetextanchor="middle",
            customdata=[[x["micro_batch"], x["chunk"], q(x["start"], "time"),
                         q(x["end"], "time"), q(x["end"] - x["start"], "time")] for x in mine],
            hovertemplate=(f"<b>{names[kind]}</b> micro-batch %{{customdata[0]}}, chunk "
                           "%{customdata[1]}<br>%{customdata[2]} to %{customdata[3]} "
                           "(%{customdata[4]})<extra>%{y}</extra>")))
    span = max((x["end"] for x in passes), default=0.0)
    busy = sum(x["end"] - x["start"] for x in passes)
    p = int(pipe["pp"])
    idle = 1.0 - busy / (p * span) if span else 0.0
    fig.update_yaxes(autorange="reversed")
    v = f", {pipe['vpp']} chunks per stage" if int(pipe.get("vpp", 1)) > 1 else ""
    m, of = pipe["micro_batches"], pipe.get("step_micro_batches", pipe["micro_batches"])
    mb = f"{m} micro-batches" if m == of else f"{m} of the step's {of} micro-batches"
    return _layout(fig, f"Pipeline timeline: {pipe['schedule']}, {p} stages, {mb}{v}; "
                        f"{q(span, 'time')} drawn, idle (bubble) {idle:.1%} of it",
                   "time within the step (s)", "", barmode="overlay", bargap=0.25,
                   height=max(260, 60 + 34 * p))


# -- plans: Pareto fronts -----------------------------------------------------------------------

_METRIC = {"tokens_per_s": ("throughput", "tokens/s", ""),
           "tokens_per_s_per_device": ("throughput per device", "tokens/s/device", ""),
           "memory_per_device_bytes": ("memory per device", "GB", "bytes"),
           "usd_per_million_tokens": ("cost", "$ per million tokens", ""),
           "tpot_s": ("time per output token", "ms", "time"),
           "tpot_p99_s": ("TPOT p99", "ms", "time"),
           "step_time_s": ("step time", "s", "time"),
           "ttft_s": ("time to first token", "ms", "time"),
           "energy_j_per_token_tdp": ("energy at TDP", "J/token", "")}


def _axis_value(key: str, v: float) -> float:
    unit = _METRIC.get(key, ("", "", ""))[1]
    return v / 1e9 if unit == "GB" else v * 1e3 if unit == "ms" else v


def _label(key: str) -> str:
    name, unit, _ = _METRIC.get(key, (key, "", ""))
    return f"{name} ({unit})" if unit else name


def _mapping_text(m: Any) -> str:
    if isinstance(m, dict):
        return " ".join(f"{k}={v}" for k, v in m.items()
                        if v is True or v not in (1, False, None, "none")
                        or k in ("dp", "tp", "pp"))
    return str(m)


def pareto(result: dict[str, Any]) -> list[Figure]:
    """Each Pareto front the search kept (throughput against memory, cost or latency), and the
    ranked plans as throughput vs cost coloured by latency, with the chosen plan marked."""
    figs: list[Figure] = []
    plans = [p for p in result.get("plans") or [] if p.get("feasible", True)]
    best = plans[0] if plans else None
    for name, front in (result.get("pareto") or {}).items():
        if not front:
            continue
        keys = [k for k in front[0] if k not in ("mapping", "accelerator")]
        speed = next((k for k in keys if k.startswith("tokens_per_s")), None)
        other = next((k for k in keys if k != speed), None)
        if speed is None or other is None:
            continue
        pts = sorted((p for p in front if p.get(other) is not None and p.get(speed)),
                     key=lambda p: p[other])
        fig = go.Figure()
        fig.add_trace(go.Scatter(
            x=[_axis_value(other, p[other]) for p in pts], y=[p[speed] for p in pts],
            mode="lines+markers", name="Pareto front", line={"shape": "hv"},
            marker={"color": COLORS["front"], "size": 8},
            text=[_mapping_text(p.get("mapping") or p.get("accelerator")) for p in pts],
            hovertemplate=(f"%{{text}}<br>{_label(speed)} %{{y:,.4g}}<br>{_label(other)} "
                           "%{x:,.4g}<extra></extra>")))
        if best and best.get(other) is not None and best.get(speed):
            fig.add_trace(_chosen(_axis_value(other, best[other]), best[speed], best))
        nice = name.replace("_vs_", " vs ").replace("_", " ")
        figs.append(_layout(fig, f"Pareto front: {nice} (every point is best in one way)",
                            _label(other), _label(speed)))
    costed = [p for p in plans if p.get("usd_per_million_tokens")]
    if len(costed) > 1:
        lat = "step_time_s" if "step_time_s" in costed[0] else (
            "tpot_p99_s" if "tpot_p99_s" in costed[0] else "tpot_s")
        fig = go.Figure()
        fig.add_trace(go.Scatter(
            x=[p["usd_per_million_tokens"] for p in costed],
            y=[p["tokens_per_s"] for p in costed], mode="markers", name="ranked plans",
            marker={"size": 11, "color": [_axis_value(lat, p.get(lat) or 0) for p in costed],
                    "colorscale": "Viridis", "showscale": True,
                    "colorbar": {"title": _label(lat)}},
            text=[f"#{i + 1} {_mapping_text(p['mapping'])}<br>{_label(lat)} "
                  f"{q(p.get(lat), 'time')}" for i, p in enumerate(costed)],
            hovertemplate=("%{text}<br>throughput %{y:,.4g} tokens/s<br>cost $%{x:.4g} per "
                           "million tokens<extra></extra>")))
        top: dict[str, Any] = costed[0]
        if best is not None and top["mapping"] == best["mapping"]:
            fig.add_trace(_chosen(top["usd_per_million_tokens"], top["tokens_per_s"], top))
        figs.append(_layout(fig, "Ranked plans: throughput vs cost, coloured by "
                                 f"{_METRIC[lat][0]}", _label("usd_per_million_tokens"),
                            _label("tokens_per_s")))
    return figs


def _chosen(x: float, y: float, plan: dict[str, Any]) -> Any:
    return go.Scatter(x=[x], y=[y], mode="markers", name="chosen plan",
                      marker={"symbol": "star", "size": 18, "color": COLORS["chosen"],
                              "line": {"color": "black", "width": 1}},
                      text=[_mapping_text(plan.get("mapping"))],
                      hovertemplate="<b>chosen</b>: %{text}<extra></extra>")


# -- accelerators compared ----------------------------------------------------------------------


def comparison(result: dict[str, Any]) -> list[Figure]:
    """``accelmap compare``: the objective per accelerator (ranked), and speed against cost."""
    rows = [r for r in result.get("rows") or [] if r.get("feasible")]
    job = result.get("job") or {}
    key = job.get("objective") or "tokens_per_s"
    figs: list[Figure] = []
    ranked = [r for r in rows if r.get(key) is not None]
    if ranked:
        classes = sorted({str(r.get("class", "")) for r in ranked})
        fig = go.Figure()
        for i, cls in enumerate(classes):  # one colour per device class
            mine = [r for r in ranked if str(r.get("class", "")) == cls]
            fig.add_trace(go.Bar(
                y=[r["accelerator"] for r in mine], x=[r[key] for r in mine], orientation="h",
                name=cls, marker_color=PALETTE[i % len(PALETTE)],
                text=[_compare_hover(r) for r in mine], textposition="none",
                hovertemplate="%{text}<extra></extra>"))
        fig.update_yaxes(categoryorder="array",
                         categoryarray=[r["accelerator"] for r in ranked])
        fig.update_yaxes(autorange="reversed")
        unit = {"tokens_per_s_per_user": "tokens/s per user", "tokens_per_s": "tokens/s",
                "tokens_per_s_per_device": "tokens/s per device",
                "usd_per_million_tokens": "$ per million tokens",
                "energy_j_per_token_tdp": "J per token at TDP"}
        figs.append(_layout(fig, f"Accelerators ranked by {key} ({job.get('kind', '')}, "
                                 f"precision {job.get('precision', '')})", unit.get(key, key),
                            "", height=max(360, 28 * len(ranked) + 120)))
    priced = [r for r in rows
              if r.get("usd_per_million_tokens") and r.get("tokens_per_s_per_device")]
    if priced:
        fig = go.Figure(go.Scatter(
            x=[r["usd_per_million_tokens"] for r in priced],
            y=[r["tokens_per_s_per_device"] for r in priced],
            mode="markers+text", text=[r["accelerator"] for r in priced],
            textposition="top center", marker={"size": 10, "color": COLORS["compute"]},
            customdata=[_compare_hover(r) for r in priced],
            hovertemplate="%{customdata}<extra></extra>"))
        figs.append(_layout(fig, "Speed per device against cost", "$ per million tokens (log)",
                            "tokens/s per device (log)", xaxis_type="log", yaxis_type="log"))
    return figs


def _compare_hover(r: dict[str, Any]) -> str:
    parts = [f"<b>{r['accelerator']}</b> ({r.get('class', '')}), {r.get('devices')} devices, "
             f"{r.get('mapping') or ''} {r.get('precision', '')}"]
    for k, label, dim in (("tokens_per_s_per_user", "tokens/s per user", ""),
                          ("tokens_per_s", "tokens/s", ""),
                          ("tokens_per_s_per_device", "tokens/s per device", ""),
                          ("ttft_s", "TTFT", "time"), ("tpot_s", "TPOT", "time"),
                          ("step_time_s", "step", "time"),
                          ("usd_per_million_tokens", "$/M tokens", ""),
                          ("energy_j_per_token_tdp", "J/token at TDP", ""),
                          ("memory_per_device_bytes", "memory/device", "bytes")):
        v = r.get(k)
        if v is not None:
            parts.append(f"{label} {q(v, dim) if dim else f'{v:,.4g}'}")
    return "<br>".join(parts)


def hardware(result: dict[str, Any]) -> list[Figure]:
    """``accelmap plan --hw A,B``: the best plan on each accelerator, and the
    throughput-vs-cost front."""
    rows = [r for r in result.get("hardware") or [] if r.get("feasible")]
    figs: list[Figure] = []
    if rows:
        fig = go.Figure(go.Bar(
            y=[r["accelerator"] for r in rows], x=[r["tokens_per_s_per_device"] for r in rows],
            orientation="h", marker_color=COLORS["compute"],
            text=[f"<b>{r['accelerator']}</b> x{r['devices']}<br>"
                  f"{_mapping_text(r['plan']['mapping'])}<br>$/M tokens "
                  f"{r.get('usd_per_million_tokens') or '-'}" for r in rows],
            textposition="none", hovertemplate="%{text}<br>%{x:,.4g} tokens/s/device"
                                               "<extra></extra>"))
        fig.update_yaxes(autorange="reversed")
        figs.append(_layout(fig, "Best plan per accelerator", "tokens/s per device", "",
                            height=max(320, 28 * len(rows) + 120)))
    return figs + pareto({"pareto": result.get("pareto")})


def deadline(result: dict[str, Any]) -> Figure:
    """``accelmap plan --deadline``: time to train against cluster size, and the deadline."""
    tried = [r for r in result.get("tried") or [] if r.get("time_to_train_s")]
    fig = go.Figure(go.Scatter(
        x=[r["devices"] for r in tried], y=[r["time_to_train_s"] / 86400 for r in tried],
        mode="lines+markers", name="best plan",
        text=[_mapping_text((r.get("plan") or {}).get("mapping")) for r in tried],
        hovertemplate="%{x:,} devices: %{y:,.2f} days<br>%{text}<extra></extra>"))
    days = float(result["deadline_s"]) / 86400
    fig.add_hline(y=days, line_dash="dash", line_color=COLORS["chosen"],
                  annotation_text=f"deadline {days:g} days")
    return _layout(fig, "Time to train against cluster size", "devices (log)",
                   "time to train (days, log)", xaxis_type="log", yaxis_type="log")


# -- validation ---------------------------------------------------------------------------------


def validation(result: dict[str, Any]) -> list[Figure]:
    """Predicted against measured, one colour per source, with the y = x line and the p90 error
    band of the scored rows; and the signed error per source."""
    plotted = [r for r in result.get("rows") or []
               if r.get("predicted") and r.get("measured") and r.get("status") != "skipped"]
    rows = [r for r in plotted if r.get("status") != "calibration"]  # the scored rows
    fitted = [r for r in plotted if r.get("status") == "calibration"]
    summary = result.get("summary") or {}
    band = float(summary.get("p90_abs_pct_error") or 0.0) / 100
    fig = go.Figure()
    if plotted:
        lo = min(min(r["measured"], r["predicted"]) for r in plotted) / 2
        hi = max(max(r["measured"], r["predicted"]) for r in plotted) * 2
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="predicted = "
                                 "measured", line={"color": "#333"}, hoverinfo="skip"))
        if band:
            fig.add_trace(go.Scatter(
                x=[lo, hi, hi, lo], y=[lo * (1 + band), hi * (1 + band), hi * (1 - band),
                                       lo * (1 - band)], fill="toself", mode="lines",
                line={"width": 0}, fillcolor="rgba(114,183,178,0.25)",
                name=f"±{band:.0%} (p90 abs error)", hoverinfo="skip"))
    sources = sorted({r.get("source") or "?" for r in rows})
    for i, src in enumerate(sources):
        mine = [r for r in rows if (r.get("source") or "?") == src]
        fig.add_trace(go.Scatter(
            x=[r["measured"] for r in mine], y=[r["predicted"] for r in mine], mode="markers",
            name=src, marker={"color": PALETTE[i % len(PALETTE)], "size": 8, "opacity": 0.85},
            text=[f"<b>{r['row_id']}</b> {r.get('model', '')} on {r.get('accelerator', '')}<br>"
                  f"{r.get('metric', '')} ({r.get('unit', '')})<br>measured "
                  f"{r['measured']:,.5g}, predicted {r['predicted']:,.5g}<br>error "
                  f"{r.get('signed_pct_error') or 0:+.1f} % ({r.get('status', '')})"
                  for r in mine], hovertemplate="%{text}<extra></extra>"))
    if fitted:
        fig.add_trace(go.Scatter(
            x=[r["measured"] for r in fitted], y=[r["predicted"] for r in fitted],
            mode="markers", name="calibration rows (fitted on, not scored)",
            marker={"color": "#999", "size": 8, "symbol": "circle-open"},
            text=[f"<b>{r['row_id']}</b> {r.get('model', '')} on {r.get('accelerator', '')}"
                  f"<br>{r.get('metric', '')} ({r.get('unit', '')}): measured "
                  f"{r['measured']:,.5g}, predicted {r['predicted']:,.5g}" for r in fitted],
            hovertemplate="%{text}<extra></extra>"))
    figs = [_layout(fig, f"Predicted vs measured: {len(rows)} scored rows, median abs error "
                         f"{summary.get('median_abs_pct_error') or 0:.1f} %, p90 "
                         f"{summary.get('p90_abs_pct_error') or 0:.1f} %",
                    "measured (each row's unit, log)", "predicted (same unit, log)",
                    xaxis_type="log", yaxis_type="log", height=520)]
    if rows:
        box = go.Figure()
        for i, src in enumerate(sources):
            mine = [r for r in rows if (r.get("source") or "?") == src]
            box.add_trace(go.Box(
                y=[r.get("signed_pct_error") or 0.0 for r in mine], name=src, boxpoints="all",
                jitter=0.4, marker_color=PALETTE[i % len(PALETTE)],
                text=[r["row_id"] for r in mine],
                hovertemplate="%{text}: %{y:+.1f} %<extra></extra>"))
        box.add_hline(y=0, line_color="#333")
        figs.append(_layout(box, "Signed error per source (+ = accelmap optimistic)", "source",
                            "signed error (%)", showlegend=False))
    return figs


# -- serving simulation -------------------------------------------------------------------------


def serving(result: dict[str, Any]) -> Figure:
    """A simulated serving run: TTFT, TPOT and end-to-end latency percentiles."""
    fig = go.Figure()
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "end-to-end")):
        d = result.get(key) or {}
        qs = [k for k in ("p50", "p90", "p99") if d.get(k) is not None]
        if qs:
            fig.add_trace(go.Bar(x=qs, y=[d[k] * 1e3 for k in qs], name=label,
                                 text=[q(d[k], "time") for k in qs], textposition="none",
                                 hovertemplate=f"{label} %{{x}}: %{{text}}<extra></extra>"))
    return _layout(fig, f"Serving latency percentiles ({result.get('scenario')} scenario, "
                        f"{result.get('requests')} requests)", "percentile", "milliseconds",
                   barmode="group", yaxis_type="log")


def frontier(result: dict[str, Any]) -> Figure | None:
    """``accelmap frontier``: each accelerator's points (faint) and its Pareto front (a line),
    output tokens/s per device against tokens/s per user, both on log axes."""
    curves = [c for c in result.get("frontier") or [] if c.get("points")]
    if not curves:
        return None
    fig = go.Figure()
    for i, c in enumerate(curves):
        color = PALETTE[i % len(PALETTE)]
        name = str(c.get("accelerator"))
        for pts, front in ((c["points"], False), (c.get("front") or [], True)):
            fig.add_trace(go.Scatter(
                x=[p["tokens_per_s_per_user"] for p in pts],
                y=[p["tokens_per_s_per_device"] for p in pts],
                mode="lines+markers" if front else "markers", name=name,
                legendgroup=name, showlegend=front,
                marker={"color": color, "size": 8 if front else 5,
                        "opacity": 1.0 if front else 0.35},
                text=[f"<b>{name}</b> {p['layout']}, {p['concurrency']:,} clients<br>"
                      f"$/M tokens {p.get('usd_per_million_tokens') or '-'}" for p in pts],
                hovertemplate="%{text}<br>%{x:,.4g} tok/s/user, %{y:,.4g} tok/s/device"
                              "<extra></extra>"))
    return _layout(fig, f"Throughput vs interactivity: {result.get('model')}, "
                        f"{result.get('isl')} in / {result.get('osl')} out, "
                        f"{result.get('weights')}", "tokens/s per user (log)",
                   "output tokens/s per device (log)", xaxis_type="log", yaxis_type="log")


# -- which pictures a report holds --------------------------------------------------------------


def figures(report: Report) -> list[tuple[str, Figure]]:
    """(id, figure) for every picture this report's result and detail allow."""
    r, d = report.result, report.detail
    out: list[tuple[str, Figure]] = []

    def add(name: str, make: Callable[[], Figure | list[Figure] | None]) -> None:
        got = make()
        for i, f in enumerate(got if isinstance(got, list) else [got] if got else []):
            out.append((f"{name}-{i}" if i else name, f))

    est = d.get("estimate") or (r if report.kind == "estimate" else None)
    if report.kind == "roofline":
        add("roofline", lambda: roofline({**r, **(d.get("roofline") or {})})
            if (d.get("roofline") or {}).get("peak_flops") else None)
    if d.get("roofline"):
        add("roofline", lambda: roofline(d["roofline"]))
    if est and est.get("feasible") and est.get("time_breakdown_s"):
        add("step-time", lambda: step_time(est))
    if est and est.get("memory", {}).get("breakdown"):
        add("memory", lambda: memory(
            [(str(est.get("accelerator") or "device"), est["memory"])],
            f"Memory per device: {q(est['memory'].get('total_bytes'), 'bytes')} of "
            f"{q(est['memory'].get('capacity_bytes'), 'bytes')} ({est['memory'].get('fit')})"
            + (" on the stage that holds the most" if (d.get("pipeline") or {}).get("pp", 1)
               and int((d.get("pipeline") or {}).get("pp", 1)) > 1 else "")))
    if d.get("pipeline"):
        add("pipeline", lambda: pipeline(d["pipeline"]))
    if report.kind == "plan":
        add("pareto", lambda: pareto(r))
    elif report.kind == "hardware":
        add("hardware", lambda: hardware(r))
    elif report.kind == "deadline":
        add("deadline", lambda: deadline(r))
    elif report.kind == "compare":
        add("compare", lambda: comparison(r))
    elif report.kind == "validate":
        add("validation", lambda: validation(r))
    elif report.kind == "serving":
        add("serving", lambda: serving(r))
    elif report.kind == "frontier":
        add("frontier", lambda: frontier(r))
    return out
