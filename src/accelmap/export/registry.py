"""Every exporter by name: importing ``export.formats`` registers them all (each format module
calls ``export.base.register``). This module sits above the formats, so the registry and its
formats import each other in one direction only."""

from __future__ import annotations

from accelmap.errors import InputError
from accelmap.export import formats  # noqa: F401  (registers every exporter)
from accelmap.export.base import Exporter, registered

__all__ = ["exporters", "get_exporter"]


def exporters() -> dict[str, Exporter]:
    return registered()


def get_exporter(name: str) -> Exporter:
    table = exporters()
    if name not in table:
        raise InputError(f"unknown export format {name!r}; use one of {', '.join(table)} "
                         "(accelmap export --list)")
    return table[name]
