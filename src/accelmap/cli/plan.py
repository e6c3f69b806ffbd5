"""`accelmap plan`: search every mapping, rank by an objective, explain the choice."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap.cli.common import (
    CatalogOpt,
    DbOpt,
    JsonOpt,
    ProfileOpt,
    console,
    emit_json,
    fmt,
    get_catalog,
)
from accelmap.cli.measure_store import load_profile

if TYPE_CHECKING:
    from accelmap.catalog import Catalog
    from accelmap.hardware.cluster import Cluster
    from accelmap.search.result import PlanResult

_DURATION = re.compile(r"^\s*([0-9.]+)\s*(ms|s|min|m|h|d|w)?\s*$")
_SECONDS = {"ms": 1e-3, "s": 1.0, None: 1.0, "min": 60.0, "m": 60.0, "h": 3600.0,
            "d": 86400.0, "w": 604800.0}


def parse_duration(text: str) -> float:
    """'500ms' -> 0.5, '60d' -> 5184000.0 (seconds)."""
    from accelmap.errors import InputError

    m = _DURATION.match(text)
    if not m:
        raise InputError(f"cannot read {text!r} as a duration: write e.g. 500ms, 2s, 60d")
    return float(m.group(1)) * _SECONDS[m.group(2)]


def parse_count(text: str) -> float:
    """'16M' -> 1.6e7, '15T' -> 1.5e13, '2e12' -> 2e12."""
    from accelmap.api import count

    return count(text)


def parse_batch_tokens(text: str) -> float:
    """Batch sizes in tokens use binary K/M: '4M' = 4 x 2^20 (GPT-3's '0.5M' is 2^19)."""
    t = text.strip().upper()
    if t and t[-1] in "KM" and t[:-1].replace(".", "", 1).isdigit():
        return float(t[:-1]) * (2**10 if t[-1] == "K" else 2**20)
    return parse_count(text)


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A transient progress bar on a terminal for searches that take more than a moment."""
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True, console=console()) as bar:
        task = bar.add_task("searching mappings", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _clusters(cat: Catalog, cluster: str | None, hw: str | None, devices: int | None,
              train: bool) -> list[Cluster]:
    from accelmap.errors import InputError
    from accelmap.hardware.cluster import parse_cluster

    if cluster and hw:
        raise InputError("give either --cluster or --hw, not both")
    if cluster:
        return [parse_cluster(cluster, cat)]
    if not hw:
        raise InputError("give --cluster SPEC (e.g. 64xH100) or --hw NAME|any|A,B")
    n = devices or (64 if train else 8)
    if hw.strip().lower() == "any":
        ids = sorted({p.accelerator for p in cat.systems.values()})
    elif "," in hw:
        ids = [h.strip() for h in hw.split(",") if h.strip()]
    else:
        ids = [hw]
    out = []
    for name in ids:
        try:
            out.append(parse_cluster(name if name in cat.systems else f"{n}x{name}", cat))
        except InputError:
            if len(ids) == 1:
                raise
    return out


def plan_cmd(
    model: Annotated[str, typer.Argument(help="Model preset, config.json or spec YAML.")],
    cluster: Annotated[str | None, typer.Option(
        "--cluster", help="Cluster: 64xH100, 8x8xh100-sxm5-80gb, tpu-v5p-1024, a YAML file.")
    ] = None,
    hw: Annotated[str | None, typer.Option(
        "--hw", help="Accelerator(s): a name, a comma list, or 'any' (every accelerator that "
                     "has a system preset); with --devices.")] = None,
    devices: Annotated[int | None, typer.Option(min=1, help="Devices per accelerator with "
                                                "--hw (default 64 training, 8 serving).")] = None,
    train: Annotated[bool, typer.Option("--train/--serve", help="Training or serving.")] = True,
    seq: Annotated[int, typer.Option("--seq", min=1, help="Training sequence length.")] = 4096,
    global_batch_tokens: Annotated[str, typer.Option(
        "--global-batch-tokens", help="Tokens per optimizer step (e.g. 4M, 16M; K/M here are "
                                      "binary, 4M = 4 x 2^20, as papers count batches).")] = "4M",
    tokens: Annotated[str | None, typer.Option(help="Tokens to train (e.g. 15T), for time, "
                                               "cost and energy.")] = None,
    deadline: Annotated[str | None, typer.Option(help="Find the smallest cluster that trains "
                                                 "--tokens within this time (e.g. 60d).")] = None,
    prompt: Annotated[int, typer.Option(min=1, help="Serving prompt tokens.")] = 2048,
    output: Annotated[int, typer.Option(min=1, help="Serving output tokens.")] = 256,
    ttft: Annotated[str | None, typer.Option(help="Serving TTFT target (e.g. 500ms).")] = None,
    tpot: Annotated[str | None, typer.Option(help="Serving TPOT target (e.g. 50ms).")] = None,
    objective: Annotated[str, typer.Option(
        help="throughput, time, cost, energy (training); throughput, cost, latency, energy "
             "(serving).")] = "throughput",
    top: Annotated[int, typer.Option(min=1, help="Plans to show.")] = 10,
    framework: Annotated[str | None, typer.Option(
        help="megatron/fsdp (training), vllm/tensorrt-llm (serving).")] = None,
    offload: Annotated[bool, typer.Option("--offload", help="Also try CPU offload.")] = False,
    export: Annotated[str | None, typer.Option(
        "--export", help="Also write the best plan as this format (accelmap export --list).")
    ] = None,
    out: Annotated[str, typer.Option("--out", help="Folder for --export files.")] = ".",
    force_tp: Annotated[bool, typer.Option("--force-tp", help="Allow tp across the scale-up "
                                           "domain.")] = False,
    include_tight: Annotated[bool, typer.Option(
        "--include-tight", help="Also rank plans within the memory model's error band of "
        "capacity (memory_fit 'tight').")] = False,
    profile: ProfileOpt = None,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Search every mapping of a model on a cluster and rank them, with the reasons.

    Examples:
      accelmap plan llama-3.1-70b --cluster 64xH100 --train --seq 8192 --global-batch-tokens 4M
      accelmap plan llama-3.1-405b --cluster 16384xH100 --train --seq 8192 \\
          --global-batch-tokens 16M --tokens 15T
      accelmap plan llama-3.1-8b --hw any --devices 64 --train --tokens 1T --objective cost
      accelmap plan llama-3.1-70b --hw H100 --train --tokens 2T --deadline 30d
      accelmap plan llama-3.1-70b --cluster dgx-h100 --serve --prompt 2048 --output 256 \\
          --tpot 50ms
      accelmap plan llama-3.1-8b --cluster 8xH100 --serve --profile my-h100
    """
    from accelmap.cli.models import load_model
    from accelmap.cost.framework import Framework
    from accelmap.errors import InputError
    from accelmap.export.base import Job, PlanJob, PlanKind
    from accelmap.search.result import Objective
    from accelmap.units import DType

    cat = get_catalog(catalog)
    spec = load_model(model, cat)
    try:
        obj = Objective(objective.lower())
    except ValueError:
        raise InputError(f"unknown objective {objective!r}; use one of "
                         f"{', '.join(o.value for o in Objective)}") from None
    n_tokens = parse_count(tokens) if tokens else 0.0
    if deadline and not (train and n_tokens):
        raise InputError("--deadline needs --train and --tokens (what must be trained by when)")
    clusters = _clusters(cat, cluster, hw, devices, train)
    if not clusters:
        raise InputError(f"no cluster could be built for --hw {hw}")
    cal = load_profile(profile, db)
    if cal is not None:
        other = sorted({c.accelerator.id for c in clusters} - {cal.accelerator_id})
        if other:
            raise InputError(f"calibration profile {cal.name!r} was measured on "
                             f"{cal.accelerator_id}, not {', '.join(other)}: plan on "
                             f"{cal.accelerator_id} or drop --profile")

    def run(cl: Cluster, show_progress: bool) -> PlanResult:
        with _progress(show_progress and not json_out) as progress:
            if train:
                from accelmap.search.planner import plan_training

                batch = max(round(parse_batch_tokens(global_batch_tokens) / seq), 1)
                from accelmap.search.space import TrainingSpace

                space = TrainingSpace.default(spec, cl, seq, offload=offload, force_tp=force_tp)
                return plan_training(spec, cl, seq, batch, objective=obj,
                                     framework=framework or "megatron", top=top,
                                     tokens_to_train=n_tokens, space=space, progress=progress,
                                     profile=cal, include_tight=include_tight)
            from accelmap.search.serve import plan_serving

            return plan_serving(spec, cl, prompt, output,
                                ttft_s=parse_duration(ttft) if ttft else None,
                                tpot_s=parse_duration(tpot) if tpot else None,
                                objective=obj, framework=framework or "vllm", top=top,
                                progress=progress, profile=cal, include_tight=include_tight)

    if deadline:
        _deadline(spec.id, clusters[0], parse_duration(deadline), n_tokens, run, cat, json_out)
        return
    if len(clusters) > 1:
        _compare(clusters, run, json_out, train)
        return
    result = run(clusters[0], True)
    cl = clusters[0]
    job = Job(kind=PlanKind.TRAIN if train else PlanKind.SERVE, model=spec.id,
              accelerator=cl.accelerator.id, devices_per_node=cl.devices_per_node,
              nodes=cl.nodes, seq_len=seq if train else prompt + output,
              global_batch=max(round(parse_batch_tokens(global_batch_tokens) / seq), 1),
              dtype=DType.BF16, prompt_len=prompt, output_len=output,
              framework=Framework(framework or ("megatron" if train else "vllm")))
    if json_out:
        emit_json({"model": spec.id, "cluster": cl.name, "job": job.to_dict(),
                   **result.to_dict()})
    else:
        print_result(spec.id, cl, result, train)
    if export and result.plans:
        from pathlib import Path

        from accelmap.cli.export import write_export

        write_export(export, PlanJob.of(job, result.plans[0]), Path(out), quiet=json_out)


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
    keys = (("mapping", None), ("tokens/s", "tokens_per_s"),
            ("MFU" if train else "TPOT", "mfu" if train else "tpot_s"),
            ("step" if train else "TTFT", "step_time_s" if train else "ttft_s"),
            ("memory/device", "memory_per_device_bytes"),
            ("$/M tokens", "cost_usd_per_million_tokens"),
            ("J/token", "energy_j_per_token"))
    for label, _ in keys:
        t.add_column(label, justify="left" if label == "mapping" else "right")
    for p in r.plans:
        m = p.metrics
        mapping = " ".join(f"{k}={v}" for k, v in p.mapping_dict().items()
                           if v not in (1, False, None, "none") or k in ("dp", "tp", "pp"))
        cells = [mapping]
        for _label, key in keys[1:]:
            v = m.get(key) if key else None
            if v is None:
                cells.append("-")
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
                  + (f", cost ${best['cost_usd']:,.0f}" if best.get("cost_usd") else ""))
    for line in r.explanation:
        con.print(f"- {line}", highlight=False)
    for note in r.notes:
        con.print(f"note: {note}", highlight=False)
    if r.calibration:
        con.print(f"calibration: {r.calibration}", highlight=False)


def _compare(clusters: list[Cluster], run: Callable[[Cluster, bool], PlanResult],
             json_out: bool, train: bool) -> None:
    rows: list[dict[str, Any]] = []
    for cl in clusters:
        res = run(cl, False)
        best = res.plans[0] if res.plans else None
        rows.append({"accelerator": cl.accelerator.id, "cluster": cl.name,
                     "devices": cl.devices, "feasible": best is not None,
                     "plan": best.to_dict() if best else None,
                     "tokens_per_s_per_device": best.metrics["tokens_per_s_per_device"]
                     if best else None,
                     "cost_usd_per_million_tokens": best.metrics.get(
                         "cost_usd_per_million_tokens") if best else None,
                     "energy_j_per_token": best.metrics.get("energy_j_per_token")
                     if best else None,
                     "time_to_train_s": best.metrics.get("time_to_train_s") if best else None})
    rows.sort(key=lambda r: -(r["tokens_per_s_per_device"] or 0))
    if json_out:
        from accelmap.search.result import pareto_front

        front = pareto_front([{"accelerator": r["accelerator"],
                               "tokens_per_s_per_device": r["tokens_per_s_per_device"],
                               "cost_usd_per_million_tokens": r["cost_usd_per_million_tokens"]}
                              for r in rows if r["feasible"]],
                             maximize="tokens_per_s_per_device",
                             minimize="cost_usd_per_million_tokens")
        emit_json({"hardware": rows, "pareto": {"throughput_vs_cost": front}})
        return
    from rich.table import Table

    t = Table(title="Accelerators compared on this job (best plan each)")
    for c in ("accelerator", "devices", "tokens/s/device", "$/M tokens", "J/token",
              "time to train", "best mapping"):
        t.add_column(c)
    for r in rows:
        p = r["plan"]
        t.add_row(r["accelerator"], str(r["devices"]),
                  f"{r['tokens_per_s_per_device']:,.1f}" if p else "does not fit",
                  f"{r['cost_usd_per_million_tokens']:.3g}" if r["cost_usd_per_million_tokens"]
                  else "-",
                  f"{r['energy_j_per_token']:.3g}" if r["energy_j_per_token"] else "-",
                  f"{r['time_to_train_s'] / 86400:,.1f} d" if r["time_to_train_s"] else "-",
                  " ".join(f"{k}={v}" for k, v in p["mapping"].items()) if p else "-")
    console().print(t)


def _deadline(model: str, base: Cluster, seconds: float, tokens: float,
              run: Callable[[Cluster, bool], PlanResult], cat: Catalog, json_out: bool) -> None:
    """Smallest power-of-two node count of the base cluster's nodes that meets the deadline."""
    from accelmap.hardware.cluster import Cluster as ClusterT

    tried: list[dict[str, Any]] = []
    found = None
    nodes = 1
    while nodes <= 8192:
        cl = ClusterT(f"{nodes} x {base.devices_per_node} x {base.accelerator.id}",
                      base.accelerator, base.devices_per_node, nodes, base.tiers, None,
                      base.origin)
        r = run(cl, False)
        best = r.plans[0] if r.plans else None
        t = best.metrics.get("time_to_train_s") if best else None
        tried.append({"devices": cl.devices, "time_to_train_s": t,
                      "plan": best.to_dict() if best else None})
        if t is not None and t <= seconds:
            found = tried[-1]
            break
        nodes *= 2
    if json_out:
        emit_json({"model": model, "deadline_s": seconds, "tokens": tokens, "found": found,
                   "tried": tried})
        return
    con = console()
    for row in tried:
        t = row["time_to_train_s"]
        con.print(f"{row['devices']:>7,} devices: "
                  + (f"{t / 86400:,.1f} days" if t else "no feasible plan"))
    if found:
        con.print(f"[bold]smallest cluster meeting {seconds / 86400:g} days: "
                  f"{found['devices']:,} x {base.accelerator.id}[/bold] "
                  f"({' '.join(f'{k}={v}' for k, v in found['plan']['mapping'].items())})")
    else:
        con.print("[red]no cluster up to 8192 nodes meets the deadline[/red]")
