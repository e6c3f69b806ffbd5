"""`accelmap frontier`: tokens/s per device against tokens/s per user, per accelerator."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from accelmap import api
from accelmap.cli import report as rep
from accelmap.cli.common import (
    MAX_DEVICES,
    MAX_TOKENS,
    CatalogOpt,
    JsonOpt,
    console,
    emit_json,
    fmt,
    get_catalog,
)
from accelmap.cli.fanout import RayOpt, runner
from accelmap.cli.plan import _progress

if TYPE_CHECKING:
    from accelmap.api.frontiers import Frontier

ModelOpt = Annotated[str, typer.Argument(help="Model preset, config.json or spec YAML.")]
HwOpt = Annotated[str | None, typer.Option(
    "--hw", help="Accelerators, a comma list (b200,h200-sxm,mi355x), or 'any' (every part "
    "with a system preset).", show_default=False)]
ClusterOpt = Annotated[str | None, typer.Option(
    "--cluster", help="One cluster instead: 8xB200, a preset, or a YAML file.",
    show_default=False)]
DevicesOpt = Annotated[int | None, typer.Option(
    "--devices", min=1, max=MAX_DEVICES, help="Devices of each --hw part (default 8).",
    show_default=False)]
IslOpt = Annotated[int, typer.Option("--isl", min=1, max=MAX_TOKENS,
                                     help="Input (prompt) tokens per request.")]
OslOpt = Annotated[int, typer.Option("--osl", min=1, max=MAX_TOKENS,
                                     help="Output tokens per request.")]
WeightsOpt = Annotated[str, typer.Option(
    help="Weight format: bf16, fp8, int8, int4, nvfp4, mxfp4, fp4 (the part's native 4-bit).")]
MoeWeightsOpt = Annotated[str | None, typer.Option(
    "--moe-weights", help="The routed experts' own format (mixed recipes: --weights fp8 "
    "--moe-weights nvfp4).", show_default=False)]
KvOpt = Annotated[str | None, typer.Option(
    "--kv", help="KV-cache format (default: the activations').", show_default=False)]
ConcurrencyOpt = Annotated[str | None, typer.Option(
    "--concurrency", help="Closed-loop clients to sweep, a comma list (default "
    "1,2,4,...,512).", show_default=False)]
MtpOpt = Annotated[int | None, typer.Option(
    "--mtp", help="Also sweep speculative decoding with N MTP head layers (DeepSeek's; needs "
    "--accept).", show_default=False)]
DraftOpt = Annotated[str | None, typer.Option(
    "--draft", help="Also sweep speculative decoding with this draft model (needs --accept).",
    show_default=False)]
AcceptOpt = Annotated[float | None, typer.Option(
    "--accept", help="The drafter's acceptance rate alpha in [0, 1), as measured on your "
    "traffic (DeepSeek-V3 reports 0.85-0.90 for its MTP token).", show_default=False)]
DraftLenOpt = Annotated[str, typer.Option(
    "--draft-len", help="Draft tokens per step, or 'auto' (chosen per point from the "
    "simulated step costs).")]
FrameworkOpt = Annotated[str | None, typer.Option(
    help="Serving stack: vllm, sglang, tensorrt-llm, ... (default: the device class's).",
    show_default=False)]

# options that say where to run or what to write, not what to sweep
CLI_ONLY = frozenset({"catalog", "json_out", "report", "ray"})


def frontier_cmd(
    model: ModelOpt, hw: HwOpt = None, cluster: ClusterOpt = None, devices: DevicesOpt = None,
    isl: IslOpt = 1024, osl: OslOpt = 1024, weights: WeightsOpt = "bf16",
    moe_weights: MoeWeightsOpt = None, kv: KvOpt = None, concurrency: ConcurrencyOpt = None,
    mtp: MtpOpt = None, draft: DraftOpt = None, accept: AcceptOpt = None,
    draft_len: DraftLenOpt = "auto",
    framework: FrameworkOpt = None, catalog: CatalogOpt = None, json_out: JsonOpt = False,
    report: rep.ReportOpt = None, ray: RayOpt = None,
) -> None:
    """The throughput-vs-interactivity frontier of serving: for each accelerator, closed-loop
    concurrency sweeps (N clients, each sending its next request when the last finished, as
    `vllm bench serve --max-concurrency N`) over every tensor/expert-parallel layout, and the
    Pareto front of output tokens/s per device against tokens/s per user, with $/M tokens and
    J/token at TDP beside each point.

    Examples:
      accelmap frontier deepseek-r1 --hw b200,h200-sxm,mi355x --isl 1024 --osl 1024 --weights fp4
      accelmap frontier llama-3.1-70b --hw h100,h200-sxm --weights fp8 --concurrency 1,16,128
      accelmap frontier gpt-oss-120b --cluster 8xB200 --weights mxfp4 --json
      accelmap frontier deepseek-r1 --hw b200 --weights fp4 --mtp 1 --accept 0.85 --draft-len 1
      accelmap frontier llama-3.1-8b --hw any --report frontier.html
    """
    rep.check(report)
    cat = get_catalog(catalog)
    with _progress(not (json_out or ray), "simulating concurrency sweeps") as progress:
        result = api.frontier(model, hw=hw, cluster=cluster, devices=devices, isl=isl, osl=osl,
                              weights=weights, moe_weights=moe_weights, kv=kv,
                              framework=framework, concurrency=concurrency, mtp=mtp,
                              draft=draft, accept=accept, draft_len=draft_len, catalog=cat,
                              runner=runner(ray), progress=progress)
    rep.save(report, lambda: api.reports.report_of("frontier", result.to_dict(),
                                                   inputs=rep.inputs(), command=rep.command()))
    if json_out:
        emit_json(result.to_dict())
    else:
        print_frontier(result)


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def print_frontier(f: Frontier) -> None:
    from rich.table import Table

    con = console()
    for c in f.curves:
        t = Table(title=f"{f.model} on {c.cluster}: the front ({len(c.front)} of "
                        f"{len(c.points)} points), {f.isl} in / {f.osl} out, {f.weights}")
        for col in ("clients", "layout", "tok/s/device", "tok/s/user", "TTFT p50",
                    "TPOT p50", "$/M tok", "J/tok TDP"):
            t.add_column(col, justify="left" if col == "layout" else "right")
        for p in c.front:
            t.add_row(f"{p.concurrency:,}", p.layout, _num(p.tokens_per_s_per_device),
                      _num(p.tokens_per_s_per_user), fmt(p.ttft_p50_s, "time"),
                      fmt(p.tpot_p50_s, "time"), _num(p.usd_per_million_tokens),
                      _num(p.energy_j_per_token_tdp))
        con.print(t)
        if not c.points:
            con.print(f"[red]{c.accelerator}: no layout runs this model[/red]", highlight=False)
        bands = c.error_bands
        if c.front:
            con.print("  expected error: " + ("; ".join(bands) if bands else
                      "no error band (too few similar published runs of this class and "
                      "stack)"), highlight=False, soft_wrap=True)
        for s in c.skipped:
            con.print(f"  not run: {s}", highlight=False, soft_wrap=True)
    for n in f.notes:
        con.print(f"note: {n}", highlight=False, soft_wrap=True)
    con.print(f"{sum(len(c.points) for c in f.curves)} points simulated in {f.seconds:.1f} s",
              highlight=False)
