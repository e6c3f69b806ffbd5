"""`accelmap compare`: every accelerator on one model, ranked, with the reason for each gap."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap import api
from accelmap.cli import report as rep
from accelmap.cli.common import (
    MAX_COUNT,
    MAX_DEVICES,
    MAX_TOKENS,
    CatalogOpt,
    DbOpt,
    JsonOpt,
    ProfileOpt,
    console,
    emit_json,
    fmt,
    get_catalog,
)
from accelmap.cli.fanout import RayOpt, runner
from accelmap.cli.plan import _progress

if TYPE_CHECKING:
    from accelmap.api.comparison import AcceleratorComparison


ModelOpt = Annotated[str, typer.Argument(help="Model preset, config.json or spec YAML.")]
TrainOpt = Annotated[bool, typer.Option("--train/--serve", help="Training or serving "
                                        "(default serving).")]
HwOpt = Annotated[str, typer.Option(
    "--hw", help="'all' (every catalog part, the default) or a comma list: H100,MI300X.")
]
DeviceClassOpt = Annotated[str | None, typer.Option(
    "--class", help="Only this class: gpu, tpu, asic, sram-machine, fpga, edge-npu, cpu.",
    show_default=False)]
BatchOpt = Annotated[int, typer.Option(min=1, max=MAX_COUNT,
                                       help="Serving: requests per replica, decoded "
                                       "together.")]
PromptOpt = Annotated[int, typer.Option(min=1, max=MAX_TOKENS,
                                        help="Serving prompt tokens.")]
OutputOpt = Annotated[int, typer.Option(min=1, max=MAX_TOKENS,
                                        help="Serving output tokens.")]
SeqOpt = Annotated[int, typer.Option(min=1, max=MAX_TOKENS,
                                     help="Training sequence length.")]
GlobalBatchTokensOpt = Annotated[str, typer.Option(
    "--global-batch-tokens", help="Training tokens per step (binary K/M: 4M = 4 x 2^20).")
]
PrecisionOpt = Annotated[str | None, typer.Option(
    "--precision", help="One format for every part: bf16 (default), fp16, fp8 (W8A8), "
    "int8/int4 (weight-only, 16-bit activations). A part without it falls back (16-bit, "
    "then int8) and its row says so.", show_default=False)]
BestPrecisionOpt = Annotated[bool, typer.Option(
    "--best-precision", help="Each part its smallest native matrix format (fp8, else "
    "int8 W8A8, else 16-bit), noted per row.")]
DevicesOpt = Annotated[int | None, typer.Option(
    "--devices", min=1, max=MAX_DEVICES,
    help="Exactly N devices of each part (default: the fewest that "
    "hold the model).", show_default=False)]
BudgetOpt = Annotated[float | None, typer.Option(
    "--budget-usd-h", help="As many devices as $X per hour buys at each part's catalog "
    "price (parts without a price are listed as not priced).", show_default=False)
]
ObjectiveOpt = Annotated[str | None, typer.Option(
    help="tokens_per_s_per_user (serving default), tokens_per_s (training default), "
    "tokens_per_s_per_device, usd_per_million_tokens, energy_j_per_token_tdp (every device "
    "at its TDP: the upper bound).", show_default=False)]
FrameworkOpt = Annotated[str | None, typer.Option(
    help="Software profile: vllm (serving default), tensorrt-llm, sglang; fsdp "
    "(training default), megatron.", show_default=False)]
TopOpt = Annotated[int | None, typer.Option(min=1, max=MAX_COUNT, help="Rows to show in the table "
                                            "(default all).", show_default=False)]


# The options that are not fields of api.CompareRequest (so not of the web's form): they say
# where to run and what to print rather than what to compare. --top (rows of the table; the
# JSON has every row), --ray (a Ray cluster), --report (a file here), --profile/--db (this
# machine's measurement store), --catalog (a catalog folder), --json (the web always answers JSON).
CLI_ONLY = frozenset({"top", "ray", "report", "profile", "db", "catalog", "json_out"})


def compare_cmd(
    model: ModelOpt, train: TrainOpt = False, hw: HwOpt = "all",
    device_class: DeviceClassOpt = None, batch: BatchOpt = 1, prompt: PromptOpt = 2048,
    output: OutputOpt = 256, seq: SeqOpt = 4096, global_batch_tokens: GlobalBatchTokensOpt = "4M",
    precision: PrecisionOpt = None, best_precision: BestPrecisionOpt = False,
    devices: DevicesOpt = None, budget_usd_h: BudgetOpt = None, objective: ObjectiveOpt = None,
    framework: FrameworkOpt = None, top: TopOpt = None, catalog: CatalogOpt = None,
    profile: ProfileOpt = None, db: DbOpt = None, json_out: JsonOpt = False,
    report: rep.ReportOpt = None, ray: RayOpt = None,
) -> None:
    """Compare every accelerator on one model: the devices that hold it, the best mapping on
    them, tokens/s per user, per system and per device, TTFT, TPOT, $/M tokens and J/token.

    Devices: the fewest on a grid (powers of two within a node, then whole nodes) whose
    most-sharded replica fits in memory, or --devices N, or what --budget-usd-h buys.
    Mapping (serving): for each tensor-parallel degree inside the scale-up domain, the fewest
    pipeline stages that fit; replicas fill the devices; the best by the objective. Training:
    ZeRO-3 data parallelism, micro-batch 1, full recompute. Every part runs the same precision
    unless --best-precision. Each row names its execution model and why a number is missing.

    Examples:
      accelmap compare llama-3.1-8b --serve --batch 1 --hw all --json
      accelmap compare llama-3.1-70b --serve --hw all
      accelmap compare llama-3.1-70b --serve --batch 32 --objective usd_per_million_tokens
      accelmap compare llama-3.1-70b --serve --hw H100,MI300X,gaudi3 --devices 8
      accelmap compare llama-3.1-70b --serve --budget-usd-h 50 --objective tokens_per_s
      accelmap compare llama-3.1-8b --serve --class sram-machine --best-precision
      accelmap compare llama-3.1-8b --train --seq 4096 --global-batch-tokens 1M
      accelmap compare llama-3.2-1b --serve --hw local,xeon-8480plus   # this machine, measured
    """
    req = api.CompareRequest.of(locals())  # the first statement: locals() is the parameters
    rep.check(report)
    # a measured local device ('local' or its id in --hw) and the profile it implies
    local = next((h.strip() for h in hw.split(",") if api.measurement.is_local_name(h)), None)
    measured = api.measured_device(local, profile, db, get_catalog(catalog))
    cat = measured.catalog
    # the one typed request the web builds too (api/requests.py); the rest is CLI_ONLY
    spec, parts, job = api.compare_inputs(req, cat, measured.profile)
    with _progress(not ray, "comparing accelerators") as progress:
        result = api.compare_parts(spec, parts, job, cat, progress, runner(ray))
    rep.save(report, lambda: api.reports.report_of("compare", result.to_dict(), inputs=rep.inputs(),
                                           command=rep.command()))
    if json_out:
        emit_json(result.to_dict())
    else:
        print_comparison(result, top)


def _num(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"


def print_comparison(cmp: AcceleratorComparison, top: int | None = None) -> None:
    from rich.table import Table

    con = console()
    j = cmp.to_dict()["job"]
    rows = [r.to_dict() for r in (cmp.rows[:top] if top else cmp.rows)]
    what = (f"training, seq {j['seq']}, {j['global_batch']} sequences per step" if cmp.job.train
            else f"serving, batch {j['batch']} per replica, {j['prompt']} + {j['output']} "
                 "tokens")
    devs = (f"{j['devices']} devices each" if j["devices"] else
            f"${j['budget_usd_h']:g}/h each" if j["budget_usd_h"] else
            "the fewest devices that hold it")
    t = Table(title=f"{cmp.model}: {what}, precision {j['precision']}, {devs}; ranked by "
                    f"{j['objective']}")
    train = cmp.job.train
    cols = ["#", "accelerator", "class", "dev", "mapping", "prec",
            *(["tok/s", "tok/s/dev", "MFU", "step"] if train else
              ["tok/s/user", "tok/s", "tok/s/dev", "TTFT", "TPOT"]),
            "$/M tok", "even $/h", "J/tok TDP", "notes"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("accelerator", "class", "mapping", "prec",
                                                "notes") else "right")
    footnotes: list[str] = []
    # the catalog's missing price quotes and TDPs: one line each, not one per row
    unpriced = [r["accelerator"] for r in rows if any(n.startswith(_NO_PRICE) for n in r["notes"])]
    no_tdp = [r["accelerator"] for r in rows if any(n.startswith(_NO_TDP) for n in r["notes"])]
    for i, r in enumerate(rows, 1):
        if train:
            speed = [_num(r["tokens_per_s"]), _num(r["tokens_per_s_per_device"]),
                     f"{r['mfu']:.1%}" if r.get("mfu") else "-",
                     fmt(r.get("step_time_s"), "time")]
        else:
            speed = [_num(r["tokens_per_s_per_user"]), _num(r["tokens_per_s"]),
                     _num(r["tokens_per_s_per_device"]), fmt(r["ttft_s"], "time"),
                     fmt(r["tpot_s"], "time")]
        text = _notes(r)
        mark = ""
        if text:
            footnotes.append(f"[{len(footnotes) + 1}] {r['accelerator']}: {text}")
            mark = f"[{len(footnotes)}]" + ("" if r["feasible"] else " not priced"
                                             if (r["reason"] or "").startswith("not priced")
                                             else " does not run")
        t.add_row(str(i), r["accelerator"], r["class"], _num(r["devices"]),
                  r["mapping"] or "-", r["precision"], *speed, _num(r["usd_per_million_tokens"]),
                  _num(r.get("breakeven_usd_per_h")), _num(r["energy_j_per_token_tdp"]), mark)
    con.print(t)
    ref = next((r["breakeven_vs"] for r in rows if r.get("breakeven_vs")), None)
    if ref is not None:
        con.print(f"even $/h: the price per device-hour at which a part matches {ref}'s $/M "
                  "tokens (the cheapest priced row; parts without a quote: what they would "
                  "need to cost)", highlight=False, soft_wrap=True)
    models: dict[str, list[str]] = {}
    for r in rows:
        if r["execution_model"]:
            models.setdefault(r["execution_model"], []).append(r["accelerator"])
    for name, parts in models.items():
        con.print(f"execution model {name}: {', '.join(parts)}", highlight=False,
                  soft_wrap=True)
    for f in footnotes:
        con.print(f, highlight=False, soft_wrap=True)
    if unpriced:
        con.print(f"$/M tokens missing, no price quote in the catalog: {', '.join(unpriced)}",
                  highlight=False, soft_wrap=True)
    if no_tdp:
        con.print(f"J/token missing, no TDP in the catalog: {', '.join(no_tdp)}",
                  highlight=False, soft_wrap=True)
    bands = {r["error_band"] for r in rows if r.get("error_band")}
    if bands:
        con.print("expected error: " + "; ".join(sorted(bands)), highlight=False,
                  soft_wrap=True)
    unbanded = [r["accelerator"] for r in rows if r.get("feasible") and not r.get("error_band")]
    if unbanded:
        con.print("no error band (too few similar published runs of their class): "
                  + ", ".join(unbanded), highlight=False, soft_wrap=True)
    con.print(f"{len(cmp.rows)} accelerators in {cmp.seconds:.1f} s", highlight=False)


_NO_PRICE = "no price published"
_NO_TDP = "no TDP published"


def _notes(r: dict[str, Any]) -> str:
    """The row's reason and notes, less the price/TDP notes (summarised below the table)."""
    parts = ([r["reason"]] if r["reason"] else []) + [
        n for n in r["notes"] if not n.startswith((_NO_PRICE, _NO_TDP))]
    return "; ".join(parts)
