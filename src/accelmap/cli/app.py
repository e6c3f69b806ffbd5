"""The `accelmap` command: a thin typer layer over the public API.

Errors caused by input (unknown names, malformed files, bad sizes) print one line and exit 2;
a bug prints one line too, and the traceback only with ACCELMAP_DEBUG=1.

A command line builds only the command it runs (``main``): typer reads every option of every
command it is given, and importing and reading all of them is a tenth of a short command's
start. ``accelmap --help``, an unknown name and ``app`` (the full typer app) have them all.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable
from typing import Any

import typer

HELP = ("Map large language models onto accelerators: will it fit, how to split it, how fast, "
        "at what cost.\n\n"
        "Start with: accelmap compare MODEL · accelmap hw compare · accelmap hw list · "
        "accelmap models list · accelmap validate --cases FILE.csv\n\n"
        "What-ifs on any command: --set NAME=VALUE (memory_bandwidth=6.7TB/s, bf16=2.5PFLOP/s, "
        "sram=500MB, scale_up_bandwidth=900GB/s, price=2.5USD/h, vocab_size=50304; x2 = twice "
        "the part's figure; ID:NAME=VALUE for one part), --price USD/h per device-hour, and "
        "--own purchase=30000,kwh=0.08,pue=1.3,years=5,utilization=0.7 (pay by owning). "
        "`accelmap whatif-names` lists the names.")
MEASURE_HELP = (
    "Measure the hardware and manage the measurement store. This CPU, for `validate --local` "
    "and `--hw local`: measure matmul --dtype fp32, bandwidth, overhead, attention, then "
    "`accelmap calibrate`. Needs PyTorch; on a machine without a GPU install the CPU wheel "
    "(pip install torch --index-url https://download.pytorch.org/whl/cpu).")


def version() -> None:
    """Print the accelmap version."""
    from importlib.metadata import version as pkg_version

    typer.echo(pkg_version("accelmap"))


def _cli(module: str) -> Any:
    return importlib.import_module(f"accelmap.cli.{module}")


def _command(module: str, func: str, doc_help: bool = False) -> Callable[[typer.Typer, str], None]:
    """Register ``accelmap.cli.<module>.<func>`` as a command (imported when registered)."""

    def add(app: typer.Typer, name: str) -> None:
        fn = getattr(_cli(module), func)
        app.command(name, help=fn.__doc__ if doc_help else None)(fn)

    return add


def _group(module: str) -> Callable[[typer.Typer, str], None]:
    def add(app: typer.Typer, name: str) -> None:
        app.add_typer(_cli(module).app, name=name)

    return add


def _measure(app: typer.Typer, name: str) -> None:
    measure_app = typer.Typer(help=MEASURE_HELP, no_args_is_help=True)
    for sub, module, func, doc_help in (
            ("matmul", "measure_hw", "matmul_cmd", True),
            ("bandwidth", "measure_hw", "bandwidth_cmd", True),
            ("overhead", "measure_hw", "overhead_cmd", False),
            ("attention", "measure_hw", "attention_cmd", False),
            ("collectives", "measure_coll", "collectives_cmd", True),
            ("list", "measure_store", "list_cmd", False),
            ("show", "measure_store", "show_cmd", False),
            ("export", "measure_store", "export_cmd", False)):
        _command(module, func, doc_help)(measure_app, sub)
    app.add_typer(measure_app, name=name)


def _version(app: typer.Typer, name: str) -> None:
    app.command(name)(version)


# Every top-level command and group, in the order --help lists them.
COMMANDS: dict[str, Callable[[typer.Typer, str], None]] = {
    "hw": _group("hw"),
    "models": _group("models"),
    "validate": _command("validate", "validate_cmd", doc_help=True),
    "estimate": _command("estimate", "estimate_cmd"),
    "roofline": _command("estimate", "roofline_cmd"),
    "plan": _command("plan", "plan_cmd"),
    "compare": _command("compare", "compare_cmd"),
    "frontier": _command("frontier", "frontier_cmd"),
    "export": _command("export", "export_cmd"),
    "report": _command("report", "report_cmd"),
    "serve": _command("serve", "serve_cmd"),
    "sweep": _command("whatif", "sweep_cmd"),
    "whatif-names": _command("whatif", "names_cmd"),
    "check-claim": _command("claims", "check_claim_cmd"),
    "advise": _command("shapes", "advise_cmd"),
    "design": _command("shapes", "design_cmd"),
    "measure": _measure,
    "calibrate": _command("measure_store", "calibrate_cmd"),
    "version": _version,
}


def build_app(only: str | None = None) -> typer.Typer:
    """The typer app with every command, or with the one named ``only``."""
    app = typer.Typer(
        name="accelmap",
        help=HELP,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    for name, add in COMMANDS.items():
        if only is None or name == only:
            add(app, name)
    if only is not None:
        # typer runs an app of one command as that command, with no name to type: a callback
        # (no options, nothing to do) keeps `accelmap NAME ...` a group with one command
        app.callback()(_nothing)
    return app


def _nothing() -> None:
    pass


app: typer.Typer  # the full typer app, built on first use (module __getattr__)


def __getattr__(name: str) -> Any:
    """``app``: the full typer app, built on first use."""
    if name == "app":
        global app
        app = build_app()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _click_exceptions() -> Any:
    """Typer >= 0.20 vendors click as typer._click; older releases use click itself."""
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click import exceptions  # type: ignore[no-redef]
    return exceptions


ECHO = 80  # characters of an input echoed in an error
MAX_MESSAGE = 600  # characters of one error line


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

    # an argument that was not valid UTF-8 reaches Python as lone surrogates (PEP 383); written
    # as escapes, so the sentence prints on any stream (a strict one raised while printing it)
    text = " ".join(str(message).encode("utf-8", "backslashreplace").decode("utf-8").split())
    text = _QUOTED.sub(quoted, text)
    text = _RUN.sub(lambda m: _clip(m.group(0), 2 * ECHO), text)
    return _clip(text, MAX_MESSAGE)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"



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


def _guard_stdio() -> None:
    """A stream the shell closed (``>&-``, ``2>&-``) is None in Python (docs.python.org,
    sys.__stdout__: "may be None ... when the process is started with the stream closed"):
    what would be printed there is discarded, and said on stderr when stdout is the one closed,
    so commands that write files (``export -o``) still run."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (lives as long as the process)
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        sys.stderr.write("warning: standard output is closed; what this command prints is "
                         "discarded (redirect it to a file or /dev/null instead)\n")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from accelmap import api
    from accelmap.errors import AccelmapError

    click = _click_exceptions()
    _guard_stdio()

    notes = _Notes()
    try:
        from accelmap.cli.common import lift_whatif
        from accelmap.cli.fanout import bare_ray

        args = bare_ray(lift_whatif(list(sys.argv[1:] if argv is None else argv)))
        first = args[0] if args else None
        with api.parse.on_resolve(notes):
            result = build_app(first if first in COMMANDS else None)(args=args,
                                                                    standalone_mode=False)
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
