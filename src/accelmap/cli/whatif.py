"""`accelmap whatif-names` and `accelmap sweep`: what-if parameters and sweeps over them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from accelmap import api
from accelmap.cli.common import CatalogOpt, JsonOpt, console, emit_json, fmt
from accelmap.cli.estimate import (
    BatchOpt,
    ClusterOpt,
    DtypeOpt,
    FrameworkOpt,
    OptimizerOpt,
    OutputOpt,
    PromptOpt,
    RecomputeOpt,
    SeqOpt,
    TokensOpt,
    WeightsOpt,
    _inputs,
)
from accelmap.cli.fanout import RayOpt, runner


def names_cmd(json_out: JsonOpt = False) -> None:
    """List the names --set and sweep --param take (hardware fields and model dimensions)."""
    rows = api.whatif.whatif_fields()
    if json_out:
        emit_json(rows)
        return
    from rich.table import Table

    t = Table(title="What-if names: --set NAME=VALUE on any command; sweep --param NAME=V1,V2")
    for c in ("name", "kind", "unit", "aliases", "what it changes"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["name"], r["kind"], r["unit"], ", ".join(r["aliases"]), r["help"])
    console().print(t)


_SWEEP_FIGURES = (("step_time_s", "step", "time"), ("tokens_per_s", "tokens/s", None),
                  ("mfu", "MFU", "pct"), ("ttft_s", "TTFT", "time"), ("tpot_s", "TPOT", "time"),
                  ("max_batch", "max batch", "int"),
                  ("energy_j_per_token_tdp", "J/token (TDP)", "j"),
                  ("cost_to_train_usd", "$ to train", "usd"))


def _cell(v: Any, kind: str | None) -> str:
    if v is None:
        return "-"
    if kind == "time":
        return fmt(v, "time")
    if kind == "pct":
        return f"{v:.1%}"
    if kind == "int":
        return f"{int(v):,}"
    if kind == "j":
        return f"{v:.3g}"
    if kind == "usd":
        return f"${v:,.0f}"
    return f"{v:,.1f}"


def sweep_cmd(
    model: Annotated[str, typer.Argument(help="Model preset, config.json or spec YAML.")],
    param: Annotated[list[str], typer.Option(
        "--param", help="NAME=V1,V2,... or NAME=LO..HI:N (N points, linear) or NAME=x0.5,x1,x2; "
        "a hardware field (memory_bandwidth, bf16, scale_up_bandwidth ...) or a model "
        "dimension (n_layers, d_model, vocab_size ...). Once or twice.")],
    hw: Annotated[str | None, typer.Option("--hw", help="Accelerator id or name.")] = None,
    devices: Annotated[int | None, typer.Option("--devices", min=1, help="With --hw: this "
                                                "many devices.")] = None,
    cluster: ClusterOpt = None,
    train: Annotated[bool, typer.Option("--train/--serve", help="Training step or serving.")
                     ] = False,
    batch: BatchOpt = 1,
    seq: SeqOpt = 2048,
    prompt: PromptOpt = 512,
    output: OutputOpt = 128,
    dtype: DtypeOpt = "bf16",
    weights: WeightsOpt = "bf16",
    framework: FrameworkOpt = None,
    optimizer: OptimizerOpt = "adamw",
    recompute: RecomputeOpt = "none",
    tokens: TokensOpt = None,
    tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor parallel size.")] = 1,
    pp: Annotated[int, typer.Option("--pp", min=1, help="Pipeline parallel size.")] = 1,
    ep: Annotated[int, typer.Option("--ep", min=1, help="Expert parallel size.")] = 1,
    zero: Annotated[int | None, typer.Option("--zero", min=0, max=3)] = None,
    micro_batch: Annotated[int | None, typer.Option("--micro-batch", min=1)] = None,
    replicas: Annotated[int, typer.Option(min=1, help="Serving replicas.")] = 1,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="Also write the table as CSV "
                                                 "to this file ('-' for stdout).")] = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
    ray: RayOpt = None,
) -> None:
    """Sweep one or two hardware or model parameters: one estimate per value, as a table/CSV.

    Examples:
      accelmap sweep llama-3.1-8b --hw h100-sxm5-80gb --serve --batch 16 \\
          --param memory_bandwidth=2TB/s..8TB/s:7
      accelmap sweep llama-3.1-70b --cluster dgx-h100 --serve --tp 8 --batch 32 \\
          --param scale_up_bandwidth=x0.25,x0.5,x1,x2 --param bf16=x1,x2
      accelmap sweep gpt2 --hw a100-sxm4-80gb --train --batch 8 --seq 1024 \\
          --param vocab_size=50257,50304 --csv vocab.csv
      accelmap sweep llama-3.1-8b --hw h100-sxm5-80gb --train --batch 8 --ray local \\
          --param memory_bandwidth=1TB/s..8TB/s:200 --param bf16=x0.5,x1,x2 --csv big.csv
    """
    spec, system, wl, m = _inputs(model, hw, cluster, train, batch, seq, prompt, output, dtype,
                                  weights, None, 128, optimizer, recompute, True, tokens,
                                  catalog, None, tp, pp, None, 1, ep, zero, micro_batch,
                                  replicas=replicas, devices=devices)
    sw = api.sweep(spec, system, wl, param, m, framework=framework, runner=runner(ray))
    if csv_out is not None:
        text = sw.to_csv()
        if str(csv_out) == "-":
            typer.echo(text, nl=False)
            return
        csv_out.write_text(text, encoding="utf-8")
    if json_out:
        emit_json(sw.to_dict())
        return
    from rich.table import Table

    t = Table(title=f"Sweep: {sw.model} on {sw.accelerator}")
    figs = [f for f in _SWEEP_FIGURES if any(r.get(f[0]) is not None for r in sw.rows)]
    for p in sw.params:
        t.add_column(p)
    for _, label, _ in figs:
        t.add_column(label, justify="right")
    t.add_column("note")
    for r in sw.rows:
        note = "" if r.get("feasible") else f"cannot run: {r.get('reason') or ''}"
        t.add_row(*(str(r[p]) for p in sw.params),
                  *(_cell(r.get(k), kind) if r.get("feasible") else "-" for k, _, kind in figs),
                  note)
    console().print(t)
    if csv_out is not None:
        console().print(f"wrote {csv_out}")

