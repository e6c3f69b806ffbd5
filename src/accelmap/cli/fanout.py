"""`--ray [ADDRESS]`: run a command's points on Ray (``accelmap.fanout``), with a progress bar
on stderr. Without it (and without $ACCELMAP_RAY) nothing here imports Ray or rich."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from accelmap.api import Runner

RayOpt = Annotated[str | None, typer.Option(
    "--ray", envvar="ACCELMAP_RAY", show_default=False, metavar="[ADDRESS]",
    help="Fan the work out on Ray (accelmap's ray extra): bare --ray or 'local' starts "
         "Ray on this machine's cores; 'auto' joins the Ray running here; ray://HOST:10001 "
         "connects to a cluster's head. Also $ACCELMAP_RAY. Same results, same order.")]


def bare_ray(argv: list[str]) -> list[str]:
    """``--ray`` with no value (last, or before another option) means ``--ray local``."""
    out: list[str] = []
    for i, a in enumerate(argv):
        if a == "--":
            return out + argv[i:]
        out.append(a)
        if a == "--ray" and (i + 1 >= len(argv) or argv[i + 1].startswith("-")):
            out.append("local")
    return out


class RichProgress:
    """``accelmap.fanout.Progress`` drawn with rich on stderr (nothing when stderr is not a
    terminal, but the notes: retries and failures, one line each)."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None

    def start(self, total: int, what: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        con = Console(stderr=True)
        self._bar = Progress("[progress.description]{task.description}", BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(), console=con,
                             transient=True, disable=not con.is_terminal)
        self._bar.start()
        self._task = self._bar.add_task(f"{what} on Ray", total=total)

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def note(self, text: str) -> None:
        if self._bar is not None and self._bar.live.is_started:
            self._bar.console.print(f"ray: {text}", highlight=False)
        else:
            sys.stderr.write(f"ray: {text}\n")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def runner(address: str | None) -> Runner | None:
    """The runner for ``--ray`` (None: this process, as without the option)."""
    if not address:
        return None
    from accelmap import api

    return api.runner(address, RichProgress())
