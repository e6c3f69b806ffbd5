"""`accelmap models ...`: browse model presets and import Hugging Face configs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap.cli.common import CatalogOpt, JsonOpt, console, emit_json, fmt, fmt_count, get_catalog

if TYPE_CHECKING:
    from accelmap.catalog import Catalog
    from accelmap.models.schema import ModelSpec

app = typer.Typer(help="Browse model presets and import Hugging Face configs.",
                  no_args_is_help=True)

SeqOpt = Annotated[
    int | None,
    typer.Option("--seq", min=1, help="Sequence length for attention FLOPs (default: min(model "
                 "max, 4096))."),
]


def _summary(spec: ModelSpec) -> dict[str, Any]:
    from accelmap.models.params import count_params

    pc = count_params(spec)
    return {
        "id": spec.id,
        "name": spec.name,
        "family": spec.family,
        "params": pc.total,
        "active_params": pc.active,
        "attention": spec.attention_kind.value,
        "moe": spec.is_moe,
        "layers": spec.n_layers,
        "d_model": spec.d_model,
        "published_params": spec.published_params,
    }


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
    cat = get_catalog(catalog)
    specs = sorted(cat.models.values(), key=lambda s: (s.family, _summary(s)["params"]))
    if family:
        specs = [s for s in specs if family.lower() in s.family.lower()]
    rows = [_summary(s) for s in specs]
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
    """A preset by (forgiving) name, or a file: HF config.json or a ModelSpec YAML."""
    from accelmap.lookup import find, resolve

    path = Path(name_or_path).expanduser()
    looks_like_path = path.suffix in (".json", ".yaml", ".yml") or "/" in name_or_path
    if path.exists() and (looks_like_path or not find(name_or_path, cat.models)):
        if path.suffix in (".yaml", ".yml"):
            from accelmap.catalog import read_yaml, validate_entry
            from accelmap.models.schema import ModelSpec

            data = read_yaml(path)
            if isinstance(data, dict):
                data = {k: v for k, v in data.items() if k != "kind"}
            return validate_entry(ModelSpec, data, str(path))
        from accelmap.models.hf import load_hf_config

        return load_hf_config(str(path))
    if looks_like_path and not path.exists() and name_or_path.count("/") != 1:
        from accelmap.errors import InputError

        raise InputError(f"no such file: {name_or_path}")
    if name_or_path.count("/") == 1 and not path.exists() and not find(name_or_path, cat.models):
        from accelmap.models.hf import load_hf_config

        return load_hf_config(name_or_path)  # a Hub repo id such as meta-llama/Llama-3.1-8B
    return resolve(name_or_path, cat.models, "model", "accelmap models list")


def model_details(spec: ModelSpec, seq: int | None) -> dict[str, Any]:
    from accelmap.models.flops import (
        forward_flops_per_token,
        layer_groups,
        training_flops_per_token,
    )
    from accelmap.models.params import count_params

    seq_len = seq or min(spec.max_seq_len, 4096)
    pc = count_params(spec)
    data = _summary(spec)
    data.update({
        "spec": spec.model_dump(mode="json", exclude={"sources"}),
        "param_breakdown": pc.breakdown,
        "embedding_params": pc.embedding,
        "non_embedding_params": pc.non_embedding,
        "seq_len": seq_len,
        "flops_per_token": {
            "forward": forward_flops_per_token(spec, seq_len),
            "training": training_flops_per_token(spec, seq_len),
            "definition": "model FLOPs; causal attention over seq_len; training = 3x forward "
                          "(no recompute)",
        },
        "layers_detail": [
            {
                "layers": [g.first, g.last],
                "count": g.count,
                "kind": g.kind,
                "params_per_layer": g.params // g.count,
                "matrices": [{"name": m.name, "shape": [m.rows, m.cols], "copies": m.copies}
                             for m in g.matrices],
            }
            for g in layer_groups(spec)
        ],
        "sources": {k: v.model_dump(mode="json") for k, v in spec.sources.items()},
    })
    return data


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
    spec = load_model(name, get_catalog(catalog))
    data = model_details(spec, seq)
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
    from accelmap.models.hf import load_hf_config

    spec = load_hf_config(config, name)
    if out is not None:
        import yaml

        data = {"kind": "model", **spec.model_dump(mode="json", exclude_defaults=True)}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    data = model_details(spec, seq)
    if json_out:
        emit_json(data)
        return
    _print_details(spec, data)
    if out is not None:
        console().print(f"wrote {out}")
