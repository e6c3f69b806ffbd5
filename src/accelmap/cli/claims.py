"""`accelmap check-claim`: is a spec, and a throughput claimed on it, possible?"""

from __future__ import annotations

from typing import Annotated

import typer

from accelmap import api
from accelmap.cli.common import CatalogOpt, JsonOpt, console, emit_json, get_catalog

_STYLE = {"plausible": "green", "implausible": "yellow", "impossible": "red"}


def check_claim_cmd(
    hw: Annotated[str, typer.Option("--hw", help="Accelerator id or name, or an accelerator "
                                    "YAML file (may carry silicon: {process, node_nm, "
                                    "die_area_mm2}).")],
    claim: Annotated[str | None, typer.Option(
        "--claim", help="'N tok/s on MODEL at batch B', optionally 'per user' / 'per device', "
        "'with fp8', 'on 8 chips', 'prompt 2048 output 128', 'input+output' (the rate counts "
        "both), 'speculative'.")] = None,
    devices: Annotated[int | None, typer.Option("--devices", min=1, help="Devices the claim "
                                                "runs on (overrides the claim's).")] = None,
    node: Annotated[float | None, typer.Option("--node", help="Process node in nm (with "
                                               "--die-area) for the silicon bounds.")] = None,
    die_area: Annotated[float | None, typer.Option("--die-area", help="Die area in mm2 of "
                                                   "the compute die(s).")] = None,
    no_engine: Annotated[bool, typer.Option("--no-engine", help="Skip the engine's own "
                                            "prediction of the claim.")] = False,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Check a device spec and a throughput claim: plausible, implausible or impossible, with
    the bound it breaks (HBM stacks x per-stack bandwidth, FLOP/s per mm2 and per watt by
    process node, SRAM density, the bandwidth and FLOP/s the claimed tok/s needs).

    Examples:
      accelmap check-claim --hw h100-sxm5-80gb --claim "1000 tok/s per user on llama-2-70b \\
          with fp8 on 8 GPUs"
      accelmap check-claim --hw groq-lpu-v1 --claim "300 tok/s per user on llama-2-70b on \\
          576 chips"
      accelmap check-claim --hw h100-sxm5-80gb --set memory_bandwidth=20TB/s
      accelmap check-claim --hw my-chip.yaml --node 4 --die-area 800 --json
    """
    r = api.check_claim(hw, claim, get_catalog(catalog), devices=devices, node_nm=node,
                        die_area_mm2=die_area, engine=not no_engine)
    if json_out:
        emit_json(r.to_dict())
        return
    from rich.table import Table

    con = console()
    v = r.verdict.value
    con.print(f"[bold]{r.accelerator}[/bold]: [{_STYLE[v]}]{v}[/]"
              + (f" ({r.reason})" if r.deciding else ""), highlight=False)
    d = r.to_dict()
    t = Table(title="Bounds")
    for c in ("check", "verdict", "need / stated", "have / bound", "ratio", "why"):
        t.add_column(c, justify="right" if c in ("ratio",) else "left")
    for b in [*d["claim_bounds"], *d["spec_bounds"]]:
        t.add_row(b["bound"], f"[{_STYLE[b['verdict']]}]{b['verdict']}[/]", _num(b["need"]),
                  _num(b["have"]), f"{b['ratio']:.2f}", b["message"])
    con.print(t)
    eng = d["engine"]
    if eng:
        if eng.get("feasible"):
            con.print(f"the engine predicts {eng['tokens_per_s']:,.0f} tok/s "
                      f"({eng['tokens_per_s_per_user']:,.1f} per user, {eng['mapping']}); the "
                      f"claim is {eng['claim_over_engine']:.2f}x that", highlight=False)
            if eng.get("best_batch") not in (None, eng.get("batch")):
                con.print(f"the engine's best over the batches that fit: "
                          f"{eng['best_tokens_per_s']:,.0f} tok/s at batch "
                          f"{eng['best_batch']:,}", highlight=False)
        else:
            con.print(f"the engine cannot run the claim: {eng['reason']}", highlight=False)
        for n in eng.get("notes", []):
            con.print(f"assumption: {n}", highlight=False)
    for n in (d["need"] or {}).get("notes", []):
        con.print(f"assumption: {n}", highlight=False)
    for n in d["notes"]:
        con.print(f"note: {n}", highlight=False)


def _num(v: float) -> str:
    for scale, s in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{s}"
    return f"{v:.3g}"
