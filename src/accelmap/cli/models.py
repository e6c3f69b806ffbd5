"""`accelmap models ...`: browse model presets and import Hugging Face configs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap import api
from accelmap.cli.common import (
    MAX_TOKENS,
    CatalogOpt,
    JsonOpt,
    console,
    emit_json,
    fmt,
    fmt_count,
    get_catalog,
)

if TYPE_CHECKING:
    from accelmap.api import Catalog, ModelSpec

app = typer.Typer(help="Browse model presets and import Hugging Face configs.",
                  no_args_is_help=True)

SeqOpt = Annotated[
    int | None,
    typer.Option("--seq", min=1, max=MAX_TOKENS,
                 help="Sequence length for attention FLOPs (default: min(model "
                 "max, 4096))."),
]


@app.command("list")
def list_cmd(
    family: Annotated[str | None, typer.Option(help="Only this family (part of the name).")] = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List model presets with total and active parameters.

    Examples:
      accelmap models list
      accelmap models list --family llama --json
    """
    rows = api.list_models(family, get_catalog(catalog))
    if json_out:
        emit_json(rows)
        return
    from rich.table import Table

    t = Table(title=f"{len(rows)} models")
    for c, j in (("id", "left"), ("family", "left"), ("params", "right"), ("active", "right"),
                 ("attention", "left"), ("layers", "right"), ("d_model", "right"),
                 ("exact count", "left")):
        t.add_column(c, justify=j)  # type: ignore[arg-type]
    for r in rows:
        exact = "-" if r["published_params"] is None else (
            "matches" if r["published_params"] == r["params"] else "DIFFERS")
        t.add_row(r["id"], r["family"], fmt_count(r["params"]), fmt_count(r["active_params"]),
                  r["attention"] + ("+moe" if r["moe"] else ""), str(r["layers"]),
                  str(r["d_model"]), exact)
    console().print(t)


def load_model(name_or_path: str, cat: Catalog) -> ModelSpec:
    """``api.load_model`` (kept for the CLI modules that still call it here)."""
    return api.load_model(name_or_path, cat)


@app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(help="Preset id/alias, a config.json, or a spec YAML.")],
    seq: SeqOpt = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show a model: parameters (total, active), per-layer shapes, FLOPs per token.

    Examples:
      accelmap models show llama-3.1-8b
      accelmap models show deepseek-v3 --seq 8192 --json
      accelmap models show ./config.json
    """
    spec = api.load_model(name, get_catalog(catalog))
    for line in api.models.context_warnings(spec, seq=seq):
        sys.stderr.write(line + "\n")
    data = api.models.model_details(spec, seq)
    if json_out:
        emit_json(data)
        return
    _print_details(spec, data)


def _print_details(spec: ModelSpec, data: dict[str, Any]) -> None:
    from rich.table import Table

    con = console()
    con.print(f"[bold]{spec.name}[/bold]  ({spec.id}, {spec.family})")
    params_line = (f"params {data['params']:,} ({fmt_count(data['params'])}); active per token "
                   f"{data['active_params']:,} ({fmt_count(data['active_params'])})")
    if spec.published_params is not None:
        verdict = "matches" if spec.published_params == data["params"] else "DIFFERS from"
        params_line += f"; {verdict} published {spec.published_params:,}"
    con.print(params_line)
    s = spec
    con.print(f"{s.n_layers} layers, d_model {s.d_model}, {s.n_heads} heads x {s.head_size}"
              f" ({s.attention_kind.value}, {s.kv_heads} kv heads), {s.ffn_kind.value} FFN "
              f"{s.ffn_dim} ({s.activation.value}), vocab {s.vocab_size}, "
              f"{s.position.value} positions, max seq {s.max_seq_len}"
              + (", tied embeddings" if s.tied_embeddings else ""))
    if s.moe:
        m = s.moe
        con.print(f"MoE: {m.num_experts} experts x {m.expert_ffn_dim}, top-{m.top_k}, "
                  f"{m.num_shared_experts} shared, first {m.dense_layers} layers dense")
    if s.sliding_window:
        con.print(f"sliding window {s.sliding_window} on pattern {list(s.sliding_window_pattern)}")
    f = data["flops_per_token"]
    con.print(f"FLOPs per token at seq {data['seq_len']}: forward {fmt(f['forward'], 'flop')}, "
              f"training {fmt(f['training'], 'flop')} ({f['definition']})")
    t = Table(title="Layers")
    for c in ("layers", "kind", "params/layer", "matrices (in x out, x copies)"):
        t.add_column(c)
    for g in data["layers_detail"]:
        mats = ", ".join(f"{m['name']} {m['shape'][0]}x{m['shape'][1]}"
                         + (f" x{m['copies']}" if m["copies"] > 1 else "") for m in g["matrices"])
        t.add_row(f"{g['layers'][0]}-{g['layers'][1]}", g["kind"],
                  fmt_count(g["params_per_layer"]), mats)
    con.print(t)
    t = Table(title="Parameters by part")
    t.add_column("part")
    t.add_column("params", justify="right")
    for k, v in data["param_breakdown"].items():
        t.add_row(k, f"{v:,}")
    con.print(t)
    for note in s.notes:
        con.print(f"note: {note}")
    for sid, src in data["sources"].items():
        con.print(f"  {sid}: {src['title']}" + (f" <{src['url']}>" if src.get("url") else ""),
                  highlight=False)


@app.command("import")
def import_cmd(
    config: Annotated[str, typer.Argument(help="config.json, a folder holding one, or a Hub "
                                          "repo id (needs the 'hf' extra and network).")],
    name: Annotated[str | None, typer.Option(help="Name for the imported model.")] = None,
    out: Annotated[Path | None, typer.Option(help="Write the spec as YAML here, ready for "
                                             "a --catalog folder.")] = None,
    seq: SeqOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Import a Hugging Face config.json (never runs remote code).

    Examples:
      accelmap models import ./Llama-3.1-8B/config.json
      accelmap models import config.json --out my-models/llama.yaml
      accelmap models import meta-llama/Llama-3.1-8B     # with accelmap[hf], online
    """
    spec = api.import_model(config, name)
    if out is not None:
        api.models.write_model(spec, out)
    for line in api.models.context_warnings(spec, seq=seq):
        sys.stderr.write(line + "\n")
    data = api.models.model_details(spec, seq)
    if json_out:
        emit_json(data)
        return
    _print_details(spec, data)
    if out is not None:
        console().print(f"wrote {out}")
