"""The `accelmap` command: a thin typer layer over the public API.

Errors caused by input (unknown names, malformed files, bad sizes) print one line and exit 2;
a bug prints one line too, and the traceback only with ACCELMAP_DEBUG=1.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import typer

from accelmap.cli import (
    compare,
    estimate,
    export,
    hw,
    measure_coll,
    measure_hw,
    measure_store,
    models,
    plan,
    validate,
)

ECHO = 80  # characters of an input echoed in an error
MAX_MESSAGE = 600  # characters of one error line

app = typer.Typer(
    name="accelmap",
    help=(
        "Map large language models onto accelerators: will it fit, how to split it, how fast, "
        "at what cost.\n\n"
        "Start with: accelmap compare MODEL · accelmap hw compare · accelmap hw list · "
        "accelmap models list · accelmap validate --cases FILE.csv"
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

measure_app = typer.Typer(help="Measure the hardware and manage the measurement store.",
                          no_args_is_help=True)
measure_app.command("matmul", help=measure_hw.matmul_cmd.__doc__)(measure_hw.matmul_cmd)
measure_app.command("bandwidth", help=measure_hw.bandwidth_cmd.__doc__)(measure_hw.bandwidth_cmd)
measure_app.command("overhead")(measure_hw.overhead_cmd)
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


# An error echoes what the user typed; a 100,000-character argument or file line is cut here,
# in one place, so that every message stays one readable line.
_QUOTED = re.compile("'([^'\\n]{%s,})'|\"([^\"\\n]{%s,})\"".replace("%s", str(ECHO + 1)))
_RUN = re.compile(r"\S{%s,}".replace("%s", str(2 * ECHO + 1)))


def one_line(message: str) -> str:
    """``message`` on one line, each long quoted value and each long word cut to about ECHO
    characters with an ellipsis, and the whole to MAX_MESSAGE. A quoted span with spaces is
    cut only past 4 x ECHO: between two quoted values of a sentence there may be prose."""
    def quoted(m: re.Match[str]) -> str:
        q = "'" if m.group(1) is not None else '"'
        inner = m.group(1) if m.group(1) is not None else m.group(2)
        if " " in inner and len(inner) <= 4 * ECHO:
            return m.group(0)
        return q + _clip(inner, ECHO) + q

    text = " ".join(str(message).split())
    text = _QUOTED.sub(quoted, text)
    text = _RUN.sub(lambda m: _clip(m.group(0), 2 * ECHO), text)
    return _clip(text, MAX_MESSAGE)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


_BUILT: list[tuple[typer.Typer, Any]] = []  # (app, its click command): built once per app


def _command(typer_app: typer.Typer) -> Any:
    """The click command of ``typer_app``, built on first use: typer rebuilds it from the
    signatures on every call (~25 ms), which a process that runs many commands (the tests, a
    notebook) pays each time. A different app object (a test's) gets its own."""
    if not _BUILT or _BUILT[0][0] is not typer_app:
        _BUILT[:] = [(typer_app, typer.main.get_command(typer_app))]
    return _BUILT[0][1]


class _Notes:
    """A lookup hook that collects, once per name, what a name that is not an exact id resolved
    to; ``main`` says them on stderr (stdout stays clean for --json) when the command succeeds.
    An error stays the one line it is."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, what: str, query: str, eid: str) -> None:
        line = f"note: {what} {one_line(repr(query))} → {eid}"
        if line not in self.lines:
            self.lines.append(line)

    def say(self) -> None:
        for line in self.lines:
            sys.stderr.write(line + "\n")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from accelmap import api
    from accelmap.errors import AccelmapError

    click = _click_exceptions()

    notes = _Notes()
    try:
        with api.on_resolve(notes):
            result = _command(app)(args=argv, standalone_mode=False)
        if isinstance(result, int) and result:
            raise SystemExit(result)
        notes.say()
    except click.NoArgsIsHelpError as e:
        # typer's rich formatter has already printed the help; plain click only returns it
        text = e.format_message()
        if text.strip():
            sys.stdout.write(text + "\n")
        raise SystemExit(0) from None
    except click.UsageError as e:  # bad option values, unknown commands: one line, with a hint
        where = e.ctx.command_path if e.ctx else "accelmap"
        sys.stderr.write(f"error: {one_line(e.format_message())} (see '{where} --help')\n")
        raise SystemExit(2) from None
    except typer.Exit as e:
        if not e.exit_code:
            notes.say()
        raise SystemExit(e.exit_code) from None
    except typer.Abort:
        sys.stderr.write("aborted\n")
        raise SystemExit(130) from None
    except AccelmapError as e:
        sys.stderr.write(f"error: {one_line(str(e))}\n")
        raise SystemExit(e.exit_code) from None
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    except OSError as e:  # a path the user gave that the OS refuses: their input, not a bug
        if os.environ.get("ACCELMAP_DEBUG"):
            raise
        what = f" {one_line(repr(str(e.filename)))}" if e.filename is not None else ""
        sys.stderr.write(f"error: cannot use{what}: {e.strerror or type(e).__name__}; check "
                         "the path\n")
        raise SystemExit(2) from None
    except Exception as e:  # a bug: one line by default, the traceback on request
        if os.environ.get("ACCELMAP_DEBUG"):
            raise
        sys.stderr.write(
            f"internal error: {type(e).__name__}: {one_line(str(e))} (set ACCELMAP_DEBUG=1 for "
            "the traceback, "
            "and please report it)\n"
        )
        raise SystemExit(1) from None


if __name__ == "__main__":  # pragma: no cover
    main()
