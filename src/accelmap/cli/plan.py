"""`accelmap plan`: search every mapping, rank by an objective, explain the choice."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from accelmap import api
from accelmap.cli import report as rep
from accelmap.cli.common import (
    MAX_COUNT,
    MAX_DEVICES,
    MAX_REQUESTS,
    MAX_TOKENS,
    CatalogOpt,
    DbOpt,
    FinetuneOpt,
    ForceTpOpt,
    JsonOpt,
    LoraRankOpt,
    LoraTargetsOpt,
    ProfileOpt,
    console,
    emit_json,
    fmt,
    get_catalog,
)
from accelmap.cli.costs import print_money
from accelmap.cli.fanout import RayOpt, runner

if TYPE_CHECKING:
    from accelmap.api import Catalog, Cluster, ModelSpec, PlanRequest
    from accelmap.api.exports import Job
    from accelmap.api.planning import ClusterComparison, DeadlineSearch, PlanResult


@contextmanager
def _progress(enabled: bool, label: str = "searching mappings"
              ) -> Iterator[Callable[[int, int], None] | None]:
    """A transient progress bar on a terminal for searches that take more than a moment."""
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, TimeElapsedColumn

    # on stderr: stdout may be --json
    with Progress(*Progress.get_default_columns(), TimeElapsedColumn(), transient=True,
                  console=Console(stderr=True)) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


ModelOpt = Annotated[str, typer.Argument(help="Model preset, config.json or spec YAML.")]
ClusterOpt = Annotated[str | None, typer.Option(
    "--cluster", help="Cluster: 64xH100, 8x8xh100-sxm5-80gb, tpu-v5p-1024, a YAML file.")
]
HwOpt = Annotated[str | None, typer.Option(
    "--hw", help="Accelerator(s): a name, a comma list, or 'any' (every accelerator that "
                 "has a system preset); with --devices.")]
DevicesOpt = Annotated[int | None, typer.Option(min=1, max=MAX_DEVICES,
                                                help="Devices per accelerator with "
                                                "--hw (default 64 training, 8 serving).")]
TrainOpt = Annotated[bool, typer.Option("--train/--serve", help="Training or serving.")]
SeqOpt = Annotated[int, typer.Option("--seq", min=1, max=MAX_TOKENS,
                                     help="Training sequence length.")]
GlobalBatchTokensOpt = Annotated[str, typer.Option(
    "--global-batch-tokens", help="Tokens per optimizer step (e.g. 4M, 16M; K/M here are "
                                  "binary, 4M = 4 x 2^20, as papers count batches).")]
TokensOpt = Annotated[str | None, typer.Option(help="Tokens to train (e.g. 15T), for time, "
                                               "cost and energy.")]
DeadlineOpt = Annotated[str | None, typer.Option(help="Find the smallest cluster that trains "
                                                 "--tokens within this time (e.g. 60d).")]
PromptOpt = Annotated[int, typer.Option(min=1, max=MAX_TOKENS,
                                        help="Serving prompt tokens.")]
OutputOpt = Annotated[int, typer.Option(min=1, max=MAX_TOKENS,
                                        help="Serving output tokens.")]
ScenarioOpt = Annotated[str | None, typer.Option(
    "--scenario", help="Serving scenario: offline (every request queued at once; the "
    "default without --rate), server (Poisson arrivals at --rate; the default with it), "
    "both simulated request by request under the framework's scheduler; concurrency "
    "(--concurrency N closed-loop clients); batch (one fixed "
    "batch prefilled at once, the batch searched).")]
RateOpt = Annotated[float | None, typer.Option(
    "--rate", help="Server: requests per second over the whole cluster.")]
ConcurrencyOpt = Annotated[int | None, typer.Option(
    "--concurrency", help="Concurrency scenario: N closed-loop clients over the cluster, "
    "each sending its next request when the previous one finishes.")]
RequestsOpt = Annotated[int | None, typer.Option(
    "--requests", min=1, max=MAX_REQUESTS,
    help="Requests per simulation (offline/server; default 2000).")
]
MaxSeqsOpt = Annotated[int | None, typer.Option(
    "--max-seqs", min=1, max=MAX_COUNT,
    help="Fix the cap on running requests per replica (vLLM "
    "max_num_seqs); default: the framework's, lowered when a TPOT SLO's p99 is missed.")
]
TtftOpt = Annotated[str | None, typer.Option(
    "--ttft", "--slo-ttft", help="TTFT target (e.g. 2s): offline/server, the SLO of each "
    "request (p99 for throughput; per request for goodput), needs --rate; batch, the "
    "fixed batch's TTFT.")]
TpotOpt = Annotated[str | None, typer.Option(
    "--tpot", "--slo-tpot", help="TPOT target (e.g. 50ms), read as --ttft is.")]
ObjectiveOpt = Annotated[str | None, typer.Option(
    help="throughput, time, cost, energy (training); goodput (requests/s meeting the "
    "SLOs; default for server), throughput (default otherwise), cost, latency, energy "
    "(serving).", show_default=False)]
TopOpt = Annotated[int, typer.Option(min=1, max=MAX_COUNT, help="Plans to show.")]
FrameworkOpt = Annotated[str | None, typer.Option(
    help="megatron/fsdp (training), vllm/tensorrt-llm (serving).")]
OffloadOpt = Annotated[bool, typer.Option("--offload", help="Also try CPU offload.")]
ExportOpt = Annotated[str | None, typer.Option(
    "--export", help="Also write the best plan as this format (accelmap export --list).")
]
OutOpt = Annotated[str, typer.Option("--out", help="Folder for --export files.")]
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="With --export: overwrite files in --out that hold other content.")
]
IncludeTightOpt = Annotated[bool, typer.Option(
    "--include-tight", help="Also rank plans within the memory model's error band of "
    "capacity (memory_fit 'tight').")]
AllowQuantizationOpt = Annotated[bool, typer.Option(
    "--allow-quantization", help="Serving: also search fp8/int8/int4 weights and an fp8 KV "
    "cache (default: the model's 16-bit weights and KV only).")]


# The options that are not fields of api.PlanOptions (so not of the web's form): they say where
# to run and what to write or print rather than what to plan. --ray (a Ray cluster), --report,
# --export/--out/--force (files here), --profile/--db (this machine's measurement store),
# --catalog (a catalog folder), --json (the output's form; the web always answers JSON).
CLI_ONLY = frozenset({"ray", "report", "export", "out", "force", "profile", "db", "catalog",
                      "json_out"})


def plan_cmd(
    model: ModelOpt, cluster: ClusterOpt = None, hw: HwOpt = None, devices: DevicesOpt = None,
    train: TrainOpt = True, seq: SeqOpt = 4096, global_batch_tokens: GlobalBatchTokensOpt = "4M",
    tokens: TokensOpt = None, deadline: DeadlineOpt = None, prompt: PromptOpt = 2048,
    output: OutputOpt = 256, scenario: ScenarioOpt = None, rate: RateOpt = None,
    concurrency: ConcurrencyOpt = None, requests: RequestsOpt = None, max_seqs: MaxSeqsOpt = None,
    ttft: TtftOpt = None, tpot: TpotOpt = None, objective: ObjectiveOpt = None, top: TopOpt = 10,
    framework: FrameworkOpt = None, offload: OffloadOpt = False, export: ExportOpt = None,
    out: OutOpt = ".", force: ForceOpt = False, force_tp: ForceTpOpt = False,
    include_tight: IncludeTightOpt = False, allow_quantization: AllowQuantizationOpt = False,
    finetune: FinetuneOpt = "full", lora_rank: LoraRankOpt = None,
    lora_targets: LoraTargetsOpt = None, profile: ProfileOpt = None, db: DbOpt = None,
    catalog: CatalogOpt = None, json_out: JsonOpt = False, report: rep.ReportOpt = None,
    ray: RayOpt = None,
) -> None:
    """Search every mapping of a model on a cluster and rank them, with the reasons.

    Examples:
      accelmap plan llama-3.1-70b --cluster 64xH100 --train --seq 8192 --global-batch-tokens 4M
      accelmap plan llama-3.1-405b --cluster 16384xH100 --train --seq 8192 \\
          --global-batch-tokens 16M --tokens 15T
      accelmap plan llama-3.1-8b --hw any --devices 64 --train --tokens 1T --objective cost
      accelmap plan llama-3.1-70b --hw H100 --train --tokens 2T --deadline 30d
      accelmap plan llama-3.1-70b --cluster dgx-h100 --serve --scenario server --rate 4 \\
          --prompt 2000 --output 300 --slo-ttft 2s --slo-tpot 50ms
      accelmap plan llama-3.1-70b --cluster dgx-h100 --serve --prompt 2000 --output 300 \\
          --slo-tpot 50ms        # offline: best throughput under a TPOT p99 SLO
      accelmap plan llama-3.1-70b --cluster dgx-h100 --serve --scenario batch --tpot 50ms
      accelmap plan llama-3.1-8b --cluster 8xH100 --serve --profile my-h100
      accelmap plan llama-2-70b --cluster 2xH100 --train --finetune qlora --lora-rank 64 \
          --seq 2048 --global-batch-tokens 32K
    """
    opts = api.PlanOptions.of(locals())  # the first statement: locals() is the parameters
    rep.check(report)
    measured = api.measured_device(hw, profile, db, get_catalog(catalog))  # --hw local
    cat = measured.catalog
    # the one typed request the web builds too (api/requests.py); the rest is CLI_ONLY
    spec, clusters, req = api.plan_inputs(opts, cat, measured.profile)
    if req.deadline_s is not None:
        _plan_deadline(spec, clusters[0], req, report, json_out)
    elif len(clusters) > 1:
        _plan_clusters(spec, clusters, req, report, json_out, ray)
    else:
        if ray:
            sys.stderr.write("note: --ray fans plans out over several clusters (--hw any or a "
                             "list); one cluster's search runs here\n")
        result, job = _plan_one(spec, clusters[0], req, report, cat)
        _show_plan(spec.id, clusters[0], result, job, cat, json_out, train,
                   simulated=req.load is not None)
        if export and result.plans:
            from accelmap.cli.export import write_export

            write_export(export, api.exports.plan_export_job(job, result.plans[0]), out,
                         quiet=json_out,
                         force=force)


def _plan_deadline(spec: ModelSpec, base: Cluster, req: PlanRequest, report: Path | None,
                   json_out: bool) -> None:
    """--deadline: the smallest cluster that trains the tokens in time, saved and shown."""
    with _progress(True, "doubling the cluster until the deadline is met") as progress:
        search = api.deadline_search(spec, base, req, progress)
    rep.save(report, lambda: api.reports.report_of("deadline", search.to_dict(),
                                           inputs=rep.inputs(), command=rep.command()))
    _print_deadline(search, json_out)


def _plan_clusters(spec: ModelSpec, clusters: list[Cluster], req: PlanRequest,
                   report: Path | None, json_out: bool, ray: str | None) -> None:
    """Several clusters (--hw any or a list): the best plan on each, compared."""
    with _progress(not ray, f"planning on {len(clusters)} clusters") as progress:
        cmp = api.compare_clusters(spec, clusters, req, progress, runner(ray))
    rep.save(report, lambda: api.reports.report_of("hardware", cmp.to_dict(), inputs=rep.inputs(),
                                           command=rep.command()))
    _print_comparison(cmp, json_out, req.train)


def _plan_one(spec: ModelSpec, cl: Cluster, req: PlanRequest, report: Path | None,
              cat: Catalog) -> tuple[PlanResult, Job]:
    """One cluster's search (simulated where the request has a load) and its job, saved."""
    simulated = req.load is not None
    with _progress(True, "simulating the shortlisted configurations" if simulated
                   else "searching mappings") as progress:
        result = api.run_plan(spec, cl, req, progress)
    job = api.planning.plan_job(spec, cl, req)
    rep.save(report, lambda: api.report_plan(spec, cl, result, job, profile=req.profile,
                                             inputs=rep.inputs(), command=rep.command(),
                                             catalog=cat))
    return result, job


def _show_plan(model: str, cl: Cluster, result: PlanResult, job: Job, cat: Catalog,
               json_out: bool, train: bool, simulated: bool) -> None:
    """One cluster's plans as JSON or tables, with what the best one costs."""
    money = api.costs.plan_money(cl, result.plans[0].metrics if result.plans else {}, cat)
    if json_out:
        emit_json({"model": model, "cluster": cl.name, "job": job.to_dict(),
                   **result.to_dict(), "money": money})
    elif simulated:
        print_scenario(model, cl, result)
        print_money(money)
    else:
        print_result(model, cl, result, train)
        print_money(money)


# The per-token figure each catalog field feeds: shown as 'not published' when it is missing.
_NEEDS = {"usd_per_million_tokens": "price_usd_per_hour",
          "energy_j_per_token_tdp": "tdp_w"}


def _missing(key: str | None, missing: dict[str, str]) -> str:
    """A blank cell: 'not published' when the catalog lacks the price/TDP it needs, else '-'."""
    return api.hardware.NOT_PUBLISHED if key in _NEEDS and _NEEDS[key] in missing else "-"


def print_result(model: str, cl: Cluster, r: PlanResult, train: bool) -> None:
    from rich.table import Table

    con = console()
    con.print(f"[bold]{model}[/bold] on {cl.name}: {r.evaluated:,} mappings evaluated, "
              f"{r.feasible:,} feasible, {r.seconds:.2f} s"
              + (" [yellow](interrupted: best so far)[/yellow]" if r.interrupted else ""))
    if r.rejected_by_rule:
        con.print("dropped: " + ", ".join(f"{k} {v:,}" for k, v in
                                          sorted(r.rejected_by_rule.items(),
                                                 key=lambda kv: -kv[1])))
    if not r.plans:
        con.print("[red]no feasible mapping[/red]")
        return
    t = Table(title=f"Top plans by {r.objective.value}")
    missing = api.hardware.unpublished(cl.accelerator)
    keys = (("mapping", None), ("tokens/s", "tokens_per_s"),
            ("MFU" if train else "TPOT", "mfu" if train else "tpot_s"),
            ("step" if train else "TTFT", "step_time_s" if train else "ttft_s"),
            ("memory/device", "memory_per_device_bytes"),
            ("$/M tokens", "usd_per_million_tokens"),
            ("J/token at TDP", "energy_j_per_token_tdp"))
    for label, _ in keys:
        t.add_column(label, justify="left" if label == "mapping" else "right")
    for p in r.plans:
        m = p.metrics
        mapping = " ".join(f"{k}={v}" for k, v in p.mapping_dict().items()
                           if v is True or v not in (1, False, None, "none")
                           or k in ("dp", "tp", "pp"))
        cells = [mapping]
        for _label, key in keys[1:]:
            v = m.get(key) if key else None
            if v is None:
                cells.append(_missing(key, missing))
            elif key == "mfu":
                cells.append(f"{v:.1%}")
            elif key in ("tpot_s", "ttft_s", "step_time_s"):
                cells.append(fmt(v, "time"))
            elif key == "memory_per_device_bytes":  # "tight": within the memory error band
                cells.append(fmt(v, "bytes") + (" tight" if m.get("memory_fit") == "tight"
                                                else ""))
            elif key == "tokens_per_s":
                cells.append(f"{v:,.0f}")
            else:
                cells.append(f"{v:.3g}")
        t.add_row(*cells)
    con.print(t)
    best = r.plans[0].metrics
    if best.get("error_band"):
        con.print(f"expected error of these figures: {best['error_band']['text']}",
                  highlight=False)
    if best.get("time_to_train_s"):
        con.print(f"time to train: {best['time_to_train_s'] / 86400:,.1f} days"
                  + (f", cost ${best['cost_to_train_usd']:,.0f}" if best.get("cost_to_train_usd")
                     else ""))
    for line in r.explanation:
        con.print(f"- {line}", highlight=False)
    for note in r.notes:
        con.print(f"note: {note}", highlight=False)
    if r.calibration:
        con.print(f"calibration: {r.calibration}", highlight=False)


def print_scenario(model: str, cl: Cluster, r: PlanResult) -> None:
    """A plan of the offline/server scenarios: the simulated figures of each plan."""
    from rich.table import Table

    con = console()
    s = r.search or {}
    con.print(f"[bold]{model}[/bold] on {cl.name}, {s.get('scenario')} scenario: "
              f"{s.get('configurations', 0):,} configurations screened, "
              f"{s.get('simulated_configurations', 0)} simulated "
              f"({s.get('simulation_runs', 0)} runs), {r.seconds:.2f} s"
              + (" [yellow](interrupted: best so far)[/yellow]" if r.interrupted else ""))
    if r.rejected_by_rule:
        con.print("ruled out (configurations): " + ", ".join(
            f"{k} {v:,}" for k, v in sorted(r.rejected_by_rule.items(), key=lambda kv: -kv[1])))
    if not r.plans:
        con.print("[red]no serving plan meets the objective[/red]")
    else:
        t = Table(title=f"Top plans by {r.objective.value} (simulated)")
        for c in ("mapping", "goodput req/s", "SLO met", "out tokens/s", "TTFT p50/p99",
                  "TPOT p50/p99", "peak running", "KV tokens/replica", "$/M tokens"):
            t.add_column(c, justify="left" if c == "mapping" else "right")
        for p in r.plans:
            m = p.metrics
            d = p.mapping_dict()
            mapping = (f"tp={d['tp']}" + (f" pp={d['pp']}" if d["pp"] > 1 else "")
                       + (f" ep={d['ep']}" if d["ep"] > 1 else "")
                       + f" x{d['replicas']} {d['weight_dtype']}/{d['kv_dtype']} KV"
                       + f" max_seqs={d['batch']}")
            cost = m.get("usd_per_million_tokens")
            t.add_row(mapping, f"{m['goodput_requests_per_s']:.2f}", f"{m['slo_attainment']:.0%}",
                      f"{m['tokens_per_s']:,.0f}",
                      f"{fmt(m['ttft_s'].get('p50'), 'time')} / {fmt(m['ttft_p99_s'], 'time')}",
                      f"{fmt(m['tpot_s'].get('p50'), 'time')} / {fmt(m['tpot_p99_s'], 'time')}",
                      f"{m['peak_running']}", f"{m['kv_capacity_tokens']:,.0f}",
                      f"{cost:.3g}" if cost else _missing("usd_per_million_tokens",
                                                          api.hardware.unpublished(cl.accelerator)))
        con.print(t)
        band = r.plans[0].metrics.get("error_band")
        if band:
            con.print(f"expected error of these figures: {band['text']}", highlight=False)
    for line in r.explanation:
        con.print(f"- {line}", highlight=False)
    for note in r.notes:
        con.print(f"note: {note}", highlight=False)
    if r.calibration:
        con.print(f"calibration: {r.calibration}", highlight=False)


def _print_comparison(cmp: ClusterComparison, json_out: bool, train: bool = True) -> None:
    if json_out:
        emit_json(cmp.to_dict())
        return
    from rich.table import Table

    t = Table(title=f"Accelerators compared on this job (best plan each, {cmp.ranked_by})")
    for c in ("accelerator", "devices", "tokens/s/device", "$/M tokens", "even $/h",
              "J/token at TDP", "time to train", "best mapping"):
        t.add_column(c)
    rows = api.costs.breakeven_rows([r.to_dict() for r in cmp.rows], "usd_per_million_tokens",
                              "tokens_per_s_per_device")
    for r in rows:
        p = r["plan"]
        missing = r.get("not_published") or {}
        t.add_row(r["accelerator"], str(r["devices"]),
                  f"{r['tokens_per_s_per_device']:,.1f}" if p else "does not fit",
                  f"{r['usd_per_million_tokens']:.3g}" if r["usd_per_million_tokens"]
                  else _missing("usd_per_million_tokens", missing) if p else "-",
                  f"{r['breakeven_usd_per_h']:.3g}" if r.get("breakeven_usd_per_h") else "-",
                  f"{r['energy_j_per_token_tdp']:.3g}" if r["energy_j_per_token_tdp"]
                  else _missing("energy_j_per_token_tdp", missing) if p else "-",
                  f"{r['time_to_train_s'] / 86400:,.1f} d" if r["time_to_train_s"] else "-",
                  " ".join(f"{k}={v}" for k, v in p["mapping"].items()) if p else "-")
    con = console()
    con.print(t)
    con.print(cmp.ranked_by + "; parts without that figure after them, plans that do not fit "
              "last", highlight=False)
    ref = next((r["breakeven_vs"] for r in rows if r.get("breakeven_vs")), None)
    if ref is not None:
        con.print(f"even $/h: the price per device-hour at which an accelerator matches {ref}'s "
                  "$/M tokens (the cheapest)", highlight=False)
    if not train:
        con.print("each accelerator gets its best plan here, precision included; "
                  "`accelmap compare MODEL --serve` compares every catalog part at one "
                  "precision in about a second", highlight=False)


def _print_deadline(search: DeadlineSearch, json_out: bool) -> None:
    if json_out:
        emit_json(search.to_dict())
        return
    con = console()
    for row in search.tried:
        t = row["time_to_train_s"]
        con.print(f"{row['devices']:>7,} devices: "
                  + (f"{t / 86400:,.1f} days" if t else "no feasible plan"))
    found = search.found
    if found:
        con.print(f"[bold]smallest cluster meeting {search.deadline_s / 86400:g} days: "
                  f"{found['devices']:,} x {search.base.accelerator.id}[/bold] "
                  f"({' '.join(f'{k}={v}' for k, v in found['plan']['mapping'].items())})")
    else:
        con.print("[red]no cluster up to 8192 nodes meets the deadline[/red]")
