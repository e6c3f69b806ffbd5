"""Shared CLI pieces: options, output (rich tables or JSON), and quantity formatting.

Kept free of heavy imports so ``accelmap --help`` stays fast; the catalog and pydantic load only
when a command runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from accelmap.api import Catalog

CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog",
        help="Extra catalog folder with your own YAML (repeatable); also $ACCELMAP_CATALOG.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
DbOpt = Annotated[Path | None, typer.Option(
    "--db", help="Measurement store (SQLite file); default $ACCELMAP_DB, else "
                 "~/.local/share/accelmap/measurements.sqlite.", show_default=False)]
ProfileOpt = Annotated[str | None, typer.Option(
    "--profile", help="Measured calibration profile (made by `accelmap calibrate`) instead of "
                      "datasheet-derived defaults; looked up in --db.", show_default=False)]


# What-ifs of this run: every `--set NAME=VALUE` and `--price X` on the command line, lifted
# out of the arguments by ``lift_whatif`` (main() calls it) so that every command takes them;
# ``get_catalog`` applies them.
WHATIF: list[str] = []
WHATIF_HELP = ("What-ifs on any command: --set NAME=VALUE (e.g. memory_bandwidth=6.7TB/s, "
               "bf16=2.5PFLOP/s, sram=500MB, scale_up_bandwidth=900GB/s, price=2.5USD/h, "
               "vocab_size=50304, x2 for twice the part's own figure; ID:NAME=VALUE for one "
               "part) and --price USD/h; `accelmap whatif-names` lists the names.")


def lift_whatif(argv: list[str]) -> list[str]:
    """Take every --set/--price (and --set=.../--price=...) out of ``argv`` into WHATIF; the
    rest goes to typer. Arguments after '--' are left alone."""
    WHATIF.clear()
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out += argv[i:]
            break
        for opt, prefix in (("--set", ""), ("--price", "price=")):
            if a == opt:
                if i + 1 >= len(argv):
                    from accelmap.errors import InputError

                    raise InputError(f"{opt} needs a value, e.g. {opt} "
                                     f"{'memory_bandwidth=6.7TB/s' if opt == '--set' else '2.5'}")
                WHATIF.append(prefix + argv[i + 1])
                i += 2
                break
            if a.startswith(opt + "="):
                WHATIF.append(prefix + a[len(opt) + 1:])
                i += 1
                break
        else:
            out.append(a)
            i += 1
    return out


def get_catalog(dirs: list[Path] | None) -> Catalog:
    """The catalog with the user's folders; a user accelerator that breaks a physical bound is
    kept, and each finding goes to stderr as one line naming the file and the field. The
    run's what-ifs (--set, --price) are applied, and said on stderr."""
    from accelmap import api

    cat = api.load_catalog(dirs or ())
    for line in cat.user_warnings():
        sys.stderr.write(line + "\n")
    if WHATIF:
        wi = api.what_if(WHATIF, catalog=cat)
        cat = api.apply_whatif(cat, wi)
        sys.stderr.write(f"what-if: {'; '.join(wi.texts())}\n")
    return cat


def console() -> Console:
    from rich.console import Console

    # A pipe or a file gets a wide table rather than 80 columns of truncated ids.
    width = None if sys.stdout.isatty() else 200
    return Console(soft_wrap=False, width=width)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json", by_alias=True)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def fmt(value: float | None, dim: str, digits: int = 3, integer_ops: bool = False) -> str:
    """Format an SI value for a table cell; '-' when missing. Integer peaks read as OP/s."""
    if value is None:
        return "-"
    from accelmap.units import Dimension, format_quantity

    text = format_quantity(value, Dimension(dim), digits)
    return text.replace("FLOP/s", "OP/s") if integer_ops else text


def fmt_count(n: float) -> str:
    """12,345,678,901 -> '12.35B' (parameter counts)."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.4g}{suffix}"
    return f"{n:g}"


# fine-tuning (training: estimate and plan)
FinetuneOpt = Annotated[str, typer.Option(
    "--finetune", help="Training: full (every weight), lora (frozen base + adapters, Hu et al. "
    "2021) or qlora (4-bit NF4 base, Dettmers et al. 2023).")]
LoraRankOpt = Annotated[int | None, typer.Option(
    "--lora-rank", min=1, help="LoRA/QLoRA adapter rank r (default 8, HF PEFT's).")]
LoraTargetsOpt = Annotated[str | None, typer.Option(
    "--lora-targets", help="Projections with adapters: all-linear (default, PEFT's "
    "'all-linear'), attention, mlp, qkv, or a list such as q,v or q_proj,v_proj.")]
