"""`accelmap advise` and `accelmap design`: hardware-aware model shapes."""

from __future__ import annotations

from typing import Annotated

import typer

from accelmap import api
from accelmap.cli.common import CatalogOpt, JsonOpt, console, emit_json, fmt
from accelmap.cli.estimate import (
    BatchOpt,
    ClusterOpt,
    DtypeOpt,
    FrameworkOpt,
    OutputOpt,
    PromptOpt,
    RecomputeOpt,
    SeqOpt,
    WeightsOpt,
    _inputs,
)
from accelmap.cli.fanout import RayOpt, runner


def advise_cmd(
    model: Annotated[str, typer.Argument(help="Model preset, config.json or spec YAML.")],
    hw: Annotated[str | None, typer.Option("--hw", help="Accelerator id or name.")] = None,
    devices: Annotated[int | None, typer.Option("--devices", min=1)] = None,
    cluster: ClusterOpt = None,
    train: Annotated[bool, typer.Option("--train/--serve", help="Training step or serving.")
                     ] = True,
    batch: BatchOpt = 8,
    seq: SeqOpt = 2048,
    prompt: PromptOpt = 512,
    output: OutputOpt = 128,
    dtype: DtypeOpt = "bf16",
    weights: WeightsOpt = "bf16",
    framework: FrameworkOpt = None,
    recompute: RecomputeOpt = "none",
    tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor parallel size.")] = 1,
    pp: Annotated[int, typer.Option("--pp", min=1)] = 1,
    ep: Annotated[int, typer.Option("--ep", min=1, help="Expert parallel size.")] = 1,
    micro_batch: Annotated[int | None, typer.Option("--micro-batch", min=1)] = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """The model's shape issues on this hardware, each costed by the engine: vocabulary
    padding, dimensions off the tile/MXU, heads and KV heads vs TP, experts vs EP, sequence
    length vs attention efficiency.

    Examples:
      accelmap advise gpt2 --hw a100-sxm4-80gb --train --batch 12 --seq 1024 \\
          --framework torch-compile
      accelmap advise llama-3.1-70b --cluster dgx-h100 --serve --tp 8 --batch 32
      accelmap advise mixtral-8x7b --hw tpu-v5e --devices 8 --serve --tp 8 --batch 16
    """
    spec, system, wl, m = _inputs(model, hw, cluster, train, batch, seq, prompt, output, dtype,
                                  weights, None, 128, "adamw", recompute, True, None, catalog,
                                  None, tp, pp, None, 1, ep, None, micro_batch,
                                  devices=devices)
    adv = api.advise(spec, system, wl, m, framework=framework)
    if json_out:
        emit_json(adv.to_dict())
        return
    from rich.table import Table

    con = console()
    con.print(f"[bold]{adv.model}[/bold] on {adv.accelerator} ({adv.framework}): "
              f"{adv.time_figure} {fmt(adv.base_time_s, 'time')}")
    if not adv.findings:
        con.print("no shape issue found")
    else:
        t = Table(title="Shape issues, costed by the engine")
        for c in ("issue", "fix", "time as is", "time fixed", "speed-up", "params"):
            t.add_column(c, justify="right" if c not in ("issue", "fix") else "left")
        for f in adv.findings:
            t.add_row(f.rule, f.fix or "-", fmt(f.time_s, "time"), fmt(f.fixed_time_s, "time"),
                      f"{f.speedup:.2f}x" if f.speedup else "-",
                      f"{f.params_change:+.2%}" if f.params_change is not None else "-")
        con.print(t)
        for f in adv.findings:
            if f.note:
                con.print(f"note ({f.dimension}): {f.note}", highlight=False)
    for line in adv.fine:
        con.print(f"ok: {line}", highlight=False)


def design_cmd(
    template: Annotated[str, typer.Argument(help="Template model: its architecture (norms, "
                                            "activation, vocabulary) is kept.")],
    params: Annotated[str, typer.Option("--params", help="Parameter budget, e.g. 7B.")],
    hw: Annotated[str | None, typer.Option("--hw", help="Accelerator id or name.")] = None,
    devices: Annotated[int | None, typer.Option("--devices", min=1)] = None,
    cluster: ClusterOpt = None,
    train: Annotated[bool, typer.Option("--train/--serve", help="Training step or serving.")
                     ] = True,
    batch: BatchOpt = 8,
    seq: SeqOpt = 2048,
    prompt: PromptOpt = 512,
    output: OutputOpt = 128,
    dtype: DtypeOpt = "bf16",
    weights: WeightsOpt = "bf16",
    framework: FrameworkOpt = None,
    recompute: RecomputeOpt = "none",
    tp: Annotated[int, typer.Option("--tp", min=1)] = 1,
    pp: Annotated[int, typer.Option("--pp", min=1)] = 1,
    zero: Annotated[int | None, typer.Option("--zero", min=0, max=3)] = None,
    micro_batch: Annotated[int | None, typer.Option("--micro-batch", min=1)] = None,
    tolerance: Annotated[float, typer.Option(help="How far from --params a shape may land "
                                             "(fraction).")] = 0.1,
    quality: Annotated[str, typer.Option(help="Quality proxy: params (active for MoE) or "
                                         "flops (6N per token).")] = "params",
    tpot: Annotated[str | None, typer.Option("--tpot", help="Serving latency target, e.g. "
                                             "20ms (speed becomes 1/TPOT).")] = None,
    experts: Annotated[str | None, typer.Option(
        "--experts", help="MoE variants E:k, comma-separated; 0 keeps dense shapes (default "
        "dense only).")] = None,
    top: Annotated[int, typer.Option(min=1, help="Rows shown.")] = 15,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
    ray: RayOpt = None,
) -> None:
    """Search d_model, layers, heads, KV heads, FFN width (and experts) under a parameter
    budget on this hardware; print the Pareto front of quality proxy vs speed.

    Examples:
      accelmap design llama-2-7b --params 7B --cluster 64xH100 --train --batch 512 \\
          --seq 4096 --zero 1 --micro-batch 1
      accelmap design llama-3.1-8b --params 8B --hw h100-sxm5-80gb --serve --batch 1 \\
          --tpot 20ms
      accelmap design mixtral-8x7b --params 47B --cluster dgx-h100 --serve --tp 8 \\
          --experts 0,8:2,16:4
    """
    spec, system, wl, m = _inputs(template, hw, cluster, train, batch, seq, prompt, output,
                                  dtype, weights, None, 128, "adamw", recompute, True, None,
                                  catalog, None, tp, pp, None, 1, 1, zero, micro_batch,
                                  devices=devices)
    d = api.design(spec, system, wl, params, m, framework=framework, tolerance=tolerance,
                   quality=quality, tpot=tpot, experts=experts, runner=runner(ray))
    if json_out:
        emit_json(d.to_dict())
        return
    from rich.table import Table

    t = Table(title=f"{len(d.rows)} shapes of ~{d.budget / 1e9:.3g}B parameters from "
                    f"{d.template} on {d.accelerator}: Pareto front of {d.quality} vs "
                    f"{d.speed} first")
    for c in ("pareto", "d_model", "layers", "heads", "kv", "head_dim", "ffn", "experts",
              "params", d.speed, "note"):
        t.add_column(c, justify="left" if c in ("pareto", "note") else "right")
    for r in d.rows[:top]:
        sp = r["speed"]
        t.add_row("*" if r.get("pareto") else "", str(r["d_model"]), str(r["n_layers"]),
                  str(r["n_heads"]), str(r["n_kv_heads"]), str(r["head_dim"]),
                  f"{r['ffn_dim']:,}", f"{r['experts']}:{r['top_k']}" if r["experts"] else "-",
                  f"{r['params'] / 1e9:.2f}B",
                  "-" if sp is None else f"{sp:,.1f}", r["reason"] or "")
    console().print(t)
    console().print("speed differences only: the quality of shapes with equal parameters is not "
                    "modelled (shapes stay within Kaplan et al.'s aspect ratios 20-200)",
                    highlight=False)
