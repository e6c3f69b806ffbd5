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

# Upper bounds of the integer options: past any real job, so that a typo such as
# --batch 99999999999999999999999 is one "not in the range" line instead of an overflow or a
# hang. The library checks its own inputs too; these keep the CLI's answers uniform.
MAX_COUNT = 10**9  # batches, caps, indices
MAX_TOKENS = 10**9  # tokens of one sequence (models.schema.MAX_SEQ)
MAX_DEVICES = 10**7  # devices and parallel degrees (hardware.schema.MAX_DEVICES)
MAX_LAYERS = 10_000  # layers (models.schema.MAX_LAYERS)
MAX_REQUESTS = 200_000  # simulated requests (serving.requests.MAX_REQUESTS)
MAX_SEED = 2**63 - 1
MAX_RANK = 1_000_000  # LoRA rank (models.schema.MAX_WIDTH)
MAX_REPS = 10_000  # timed repetitions and steps of a measurement
MAX_PROCS = 1024  # processes of one collectives run
MAX_LOCAL_BATCH = 4096  # validate --local runs the model here
MAX_LOCAL_SEQ = 1_048_576

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
                      "datasheet-derived defaults; looked up in --db. With --hw local (or a "
                      "local-... id) the newest profile of that device unless named.",
    show_default=False)]


# What-ifs of this run: every `--set NAME=VALUE` and `--price X` on the command line, lifted
# out of the arguments by ``lift_whatif`` (main() calls it) so that every command takes them;
# ``get_catalog`` applies them.
WHATIF: list[str] = []
OWN: list[str] = []  # --own: pay by owning (cost/ownership.py)


def lift_whatif(argv: list[str]) -> list[str]:
    """Take every --set/--price/--own (and --set=... forms) out of ``argv`` into WHATIF and
    OWN; the rest goes to typer. Arguments after '--' are left alone."""
    WHATIF.clear()
    OWN.clear()
    _CATALOGS.clear()
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out += argv[i:]
            break
        for opt, prefix, into in (("--set", "", WHATIF), ("--price", "price=", WHATIF),
                                  ("--own", "", OWN)):
            if a == opt:
                if i + 1 >= len(argv):
                    from accelmap.errors import InputError

                    example = {"--set": "memory_bandwidth=6.7TB/s", "--price": "2.5",
                               "--own": "purchase=30000,utilization=0.7"}[opt]
                    raise InputError(f"{opt} needs a value, e.g. {opt} {example}")
                into.append(prefix + argv[i + 1])
                i += 2
                break
            if a.startswith(opt + "="):
                into.append(prefix + a[len(opt) + 1:])
                i += 1
                break
        else:
            out.append(a)
            i += 1
    return out


_CATALOGS: dict[tuple[object, ...], Catalog] = {}  # one load per run and set of folders


def get_catalog(dirs: list[Path] | None) -> Catalog:
    """The catalog with the user's folders; a user accelerator that breaks a physical bound is
    kept, and each finding goes to stderr as one line naming the file and the field. The
    run's what-ifs (--set, --price) are applied, and said on stderr."""
    import os

    from accelmap import api

    key = (tuple(dirs or ()), os.environ.get("ACCELMAP_CATALOG"), tuple(WHATIF), tuple(OWN))
    if key in _CATALOGS:
        return _CATALOGS[key]
    cat = api.load_catalog(dirs or ())
    for line in cat.user_warnings():
        sys.stderr.write(line + "\n")
    if WHATIF or OWN:
        wi = api.what_if(WHATIF, catalog=cat, own=OWN[-1] if OWN else None)
        cat = api.whatif.apply_whatif(cat, wi)
        sys.stderr.write(f"what-if: {'; '.join(wi.texts())}\n")
    _CATALOGS[key] = cat
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


# tensor parallelism past the fast links (training: estimate and plan)
ForceTpOpt = Annotated[bool, typer.Option("--force-tp", help="Allow tp across the scale-up "
                                          "domain.")]
# fine-tuning (training: estimate and plan)
FinetuneOpt = Annotated[str, typer.Option(
    "--finetune", help="Training: full (every weight), lora (frozen base + adapters, Hu et al. "
    "2021) or qlora (4-bit NF4 base, Dettmers et al. 2023).")]
LoraRankOpt = Annotated[int | None, typer.Option(
    "--lora-rank", min=1, max=MAX_RANK, help="LoRA/QLoRA adapter rank r (default 8, HF PEFT's).")]
LoraTargetsOpt = Annotated[str | None, typer.Option(
    "--lora-targets", help="Projections with adapters: all-linear (default, PEFT's "
    "'all-linear'), attention, mlp, qkv, or a list such as q,v or q_proj,v_proj.")]
