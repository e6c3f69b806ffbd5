"""The `accelmap` command: a thin typer layer over the public API.

Errors caused by input (unknown names, malformed files, bad sizes) print one line and exit 2;
a bug prints one line too, and the traceback only with ACCELMAP_DEBUG=1.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from accelmap.cli import (
    claims,
    compare,
    estimate,
    export,
    hw,
    measure_coll,
    measure_hw,
    measure_store,
    models,
    plan,
    report,
    serve,
    shapes,
    validate,
    whatif,
)

app = typer.Typer(
    name="accelmap",
    help=(
        "Map large language models onto accelerators: will it fit, how to split it, how fast, "
        "at what cost.\n\n"
        "Start with: accelmap compare MODEL · accelmap hw compare · accelmap hw list · "
        "accelmap models list · accelmap validate --cases FILE.csv\n\n"
        "What-ifs on any command: --set NAME=VALUE (memory_bandwidth=6.7TB/s, bf16=2.5PFLOP/s, "
        "sram=500MB, scale_up_bandwidth=900GB/s, price=2.5USD/h, vocab_size=50304; x2 = twice "
        "the part's figure; ID:NAME=VALUE for one part), --price USD/h per device-hour, and "
        "--own purchase=30000,kwh=0.08,pue=1.3,years=5,utilization=0.7 (pay by owning). "
        "`accelmap whatif-names` lists the names."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(hw.app, name="hw")
app.add_typer(models.app, name="models")
app.command("validate", help=validate.validate_cmd.__doc__)(validate.validate_cmd)
app.command("estimate")(estimate.estimate_cmd)
app.command("roofline")(estimate.roofline_cmd)
app.command("plan")(plan.plan_cmd)
app.command("compare")(compare.compare_cmd)
app.command("export")(export.export_cmd)
app.command("report")(report.report_cmd)
app.command("serve")(serve.serve_cmd)
app.command("sweep")(whatif.sweep_cmd)
app.command("whatif-names")(whatif.names_cmd)
app.command("check-claim")(claims.check_claim_cmd)
app.command("advise")(shapes.advise_cmd)
app.command("design")(shapes.design_cmd)

measure_app = typer.Typer(
    help="Measure the hardware and manage the measurement store. This CPU, for `validate "
    "--local` and `--hw local`: measure matmul --dtype fp32, bandwidth, overhead, attention, "
    "then `accelmap calibrate`. Needs PyTorch; on a machine without a GPU install the CPU wheel "
    "(pip install torch --index-url https://download.pytorch.org/whl/cpu).",
    no_args_is_help=True)
measure_app.command("matmul", help=measure_hw.matmul_cmd.__doc__)(measure_hw.matmul_cmd)
measure_app.command("bandwidth", help=measure_hw.bandwidth_cmd.__doc__)(measure_hw.bandwidth_cmd)
measure_app.command("overhead")(measure_hw.overhead_cmd)
measure_app.command("attention")(measure_hw.attention_cmd)
measure_app.command("collectives", help=measure_coll.collectives_cmd.__doc__)(
    measure_coll.collectives_cmd)
measure_app.command("list")(measure_store.list_cmd)
measure_app.command("show")(measure_store.show_cmd)
measure_app.command("export")(measure_store.export_cmd)
app.add_typer(measure_app, name="measure")
app.command("calibrate")(measure_store.calibrate_cmd)


@app.command("version")
def version() -> None:
    """Print the accelmap version."""
    from importlib.metadata import version as pkg_version

    typer.echo(pkg_version("accelmap"))


def _click_exceptions() -> Any:
    """Typer >= 0.20 vendors click as typer._click; older releases use click itself."""
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click import exceptions  # type: ignore[no-redef]
    return exceptions


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from accelmap.errors import AccelmapError

    click = _click_exceptions()

    try:
        from accelmap.cli.common import lift_whatif

        argv = lift_whatif(list(sys.argv[1:] if argv is None else argv))
        result = app(args=argv, standalone_mode=False)
        if isinstance(result, int) and result:
            raise SystemExit(result)
    except click.NoArgsIsHelpError as e:
        # typer's rich formatter has already printed the help; plain click only returns it
        text = e.format_message()
        if text.strip():
            sys.stdout.write(text + "\n")
        raise SystemExit(0) from None
    except click.UsageError as e:  # bad option values, unknown commands: one line, with a hint
        where = e.ctx.command_path if e.ctx else "accelmap"
        sys.stderr.write(f"error: {e.format_message()} (see '{where} --help')\n")
        raise SystemExit(2) from None
    except typer.Exit as e:
        raise SystemExit(e.exit_code) from None
    except typer.Abort:
        sys.stderr.write("aborted\n")
        raise SystemExit(130) from None
    except AccelmapError as e:
        sys.stderr.write(f"error: {e}\n")
        raise SystemExit(e.exit_code) from None
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    except Exception as e:  # a bug: one line by default, the traceback on request
        if os.environ.get("ACCELMAP_DEBUG"):
            raise
        sys.stderr.write(
            f"internal error: {type(e).__name__}: {e} (set ACCELMAP_DEBUG=1 for the traceback, "
            "and please report it)\n"
        )
        raise SystemExit(1) from None


if __name__ == "__main__":  # pragma: no cover
    main()
