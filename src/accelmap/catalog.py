"""The catalog: bundled accelerators, systems and models, plus the user's own YAML folders.

User folders come from ``--catalog DIR`` and the ``ACCELMAP_CATALOG`` environment variable
(several folders separated by ``os.pathsep``). A user file says what it holds with a top-level
``kind: accelerator | system | model``, or by sitting in a folder named ``accelerators``,
``systems`` or ``models``. Every file is validated by the same schema as the bundled ones; an
error names the file and the field. Two entries with the same id fail loudly: a user entry does
not silently shadow a bundled one.

Every accelerator, bundled or the user's, also goes through the plausibility checks
(:mod:`accelmap.hardware.plausibility`): a figure past a physical bound is kept, and the finding
is recorded in ``Catalog.plausibility`` (the CLI prints a user entry's findings on stderr).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from accelmap.cited import Source
from accelmap.errors import CatalogError, validation_message
from accelmap.hardware import plausibility
from accelmap.hardware.plausibility import Implausible
from accelmap.hardware.schema import Accelerator, SystemPreset
from accelmap.models.schema import ModelSpec

ENV_VAR = "ACCELMAP_CATALOG"

class EntryKind(StrEnum):
    ACCELERATOR = "accelerator"
    SYSTEM = "system"
    MODEL = "model"


_FOLDER_KIND = {
    "accelerators": EntryKind.ACCELERATOR,
    "systems": EntryKind.SYSTEM,
    "models": EntryKind.MODEL,
}
_SCHEMA: dict[EntryKind, type[BaseModel]] = {
    EntryKind.ACCELERATOR: Accelerator,
    EntryKind.SYSTEM: SystemPreset,
    EntryKind.MODEL: ModelSpec,
}

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Catalog:
    accelerators: Mapping[str, Accelerator]
    systems: Mapping[str, SystemPreset]
    models: Mapping[str, ModelSpec]
    sources: Mapping[str, Source]  # shared hardware sources (sources.yaml)
    origins: Mapping[tuple[EntryKind, str], str] = field(default_factory=dict)
    # plausibility findings per accelerator id (explained ones included), and which entries came
    # from the user's folders
    plausibility: Mapping[str, tuple[Implausible, ...]] = field(default_factory=dict)
    user_entries: frozenset[tuple[EntryKind, str]] = frozenset()

    def user_warnings(self) -> list[str]:
        """One line per unexplained finding on a user accelerator, naming the file and field."""
        return [f"warning: {self.origins[(EntryKind.ACCELERATOR, aid)]}: {aid}: "
                f"implausible {f.sentence()}"
                for aid, found in self.plausibility.items()
                if (EntryKind.ACCELERATOR, aid) in self.user_entries
                for f in found if not f.explained]

    def source(self, sid: str, local: Mapping[str, Source] | None = None) -> Source | None:
        if local and sid in local:
            return local[sid]
        return self.sources.get(sid)


def read_yaml(path: Path, trusted: bool = False) -> Any:
    """Parse one YAML file; a file that is not UTF-8 text, too big, too deep or malformed
    becomes a CatalogError naming the file (and the line where YAML says). ``trusted``: a file
    bundled with accelmap, parsed without the checks for hostile input."""
    from accelmap.errors import InputError
    from accelmap.files import load_yaml

    try:
        return load_yaml(path, "YAML file", trusted=trusted)
    except InputError as e:
        raise CatalogError(str(e)) from None


def validate_entry(schema: type[M], data: Any, origin: str) -> M:
    """Validate ``data`` against ``schema``; the first error names the file and field path."""
    if not isinstance(data, dict):
        raise CatalogError(f"{origin}: expected a mapping of fields at the top level")
    try:
        return schema.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"] if p != "__root__") or "(top level)"
        msg = validation_message(err)
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise CatalogError(f"{origin}: field '{loc}': {msg}{more}") from None


def user_dirs(extra: Iterable[str | Path] = ()) -> tuple[Path, ...]:
    """Folders from the command line first, then from ACCELMAP_CATALOG."""
    dirs = [Path(p).expanduser() for p in extra]
    env = os.environ.get(ENV_VAR, "")
    dirs += [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()]
    for d in dirs:
        try:
            ok = d.is_dir()
        except (OSError, ValueError):  # a path the OS refuses (too long, a NUL)
            ok = False
        if not ok:
            raise CatalogError(f"catalog folder {d} does not exist (from --catalog or {ENV_VAR})")
    return tuple(dirs)


def _bundled_files() -> Iterator[tuple[EntryKind, Path]]:
    root = resources.files("accelmap")
    for kind, sub in (
        (EntryKind.ACCELERATOR, "hardware/data/accelerators"),
        (EntryKind.SYSTEM, "hardware/data/systems"),
        (EntryKind.MODEL, "models/data"),
    ):
        folder = Path(str(root.joinpath(sub)))
        for path in sorted(folder.glob("*.yaml")):
            yield kind, path


# A user folder is walked to this depth, over at most this many entries: `--catalog /` is a
# mistake to report, not a filesystem to read. Links to folders are not followed (no loops).
MAX_FOLDER_DEPTH = 8
MAX_FOLDER_ENTRIES = 5000


def _user_files(folder: Path) -> Iterator[tuple[EntryKind | None, Path]]:
    seen = 0
    found: list[Path] = []
    root_depth = len(folder.parts)
    for here, dirs, files in os.walk(folder, followlinks=False,
                                     onerror=lambda e: None):
        seen += len(dirs) + len(files)
        if seen > MAX_FOLDER_ENTRIES:
            raise CatalogError(
                f"catalog folder {folder} holds more than {MAX_FOLDER_ENTRIES:,} files and "
                "folders; --catalog (and ACCELMAP_CATALOG) take a folder of YAML files, such as "
                "~/accelmap-catalog")
        if len(Path(here).parts) - root_depth >= MAX_FOLDER_DEPTH:
            dirs[:] = []  # deeper folders are not read
        dirs.sort()
        found += [Path(here) / f for f in files if f.endswith((".yaml", ".yml"))]
    for path in sorted(found):
        if path.is_file():
            yield _FOLDER_KIND.get(path.parent.name), path


@dataclass(frozen=True)
class _Tables:
    """Entries read so far, by kind and id, with the file each came from."""

    sources: dict[str, Source]
    entries: dict[EntryKind, dict[str, Any]]
    origins: dict[tuple[EntryKind, str], str]
    plausibility: dict[str, tuple[Implausible, ...]]  # findings of the bundled accelerators

    def add(self, kind: EntryKind | None, path: Path,
            user: bool = False) -> tuple[EntryKind, str, Any]:
        """Read, validate and add one file's entry; a duplicate id fails loudly. A ``user``
        file is read with the checks for hostile input (files.load_yaml), a bundled one is
        trusted."""
        data = read_yaml(path, trusted=not user)
        if isinstance(data, dict) and "kind" in data:
            data = dict(data)
            declared = data.pop("kind")
            try:
                kind = EntryKind(declared)
            except ValueError:
                raise CatalogError(
                    f"{path}: field 'kind': {declared!r} is not one of "
                    f"{', '.join(k.value for k in EntryKind)}"
                ) from None
        if kind is None:
            raise CatalogError(
                f"{path}: add a top-level 'kind: accelerator', 'kind: system' or 'kind: model' "
                "(or put the file in a folder named accelerators, systems or models)"
            )
        entry = validate_entry(_SCHEMA[kind], data, str(path))
        eid = entry.id  # type: ignore[attr-defined]
        if eid in self.entries[kind]:
            raise CatalogError(
                f"{path}: {kind.value} id {eid!r} is already defined in "
                f"{self.origins[(kind, eid)]}; give the new entry another id"
            )
        self.entries[kind][eid] = entry
        self.origins[(kind, eid)] = str(path)
        return kind, eid, entry


def _read_bundled() -> _Tables:
    """The bundled catalog, parsed and validated, with its accelerators' plausibility findings
    (the bundled parts are the known ones a sparse-as-dense figure is compared with)."""
    root = resources.files("accelmap")
    sources_path = Path(str(root.joinpath("hardware/data/sources.yaml")))
    raw_sources = read_yaml(sources_path, trusted=True) or {}
    sources = {k: validate_entry(Source, v, f"{sources_path} [{k}]") for k, v in
               raw_sources.items()}
    tables = _Tables(sources, {k: {} for k in EntryKind}, {}, {})
    for kind, path in _bundled_files():
        tables.add(kind, path)
    known = list(tables.entries[EntryKind.ACCELERATOR].values())
    for a in known:
        tables.plausibility[a.id] = tuple(plausibility.check(a, known))
    return tables


@lru_cache(maxsize=8)
def _load(dirs: tuple[Path, ...]) -> Catalog:
    from accelmap.cache import cached

    bundled = cached("catalog", _read_bundled)  # parsed once, then from ~/.cache/accelmap
    tables = _Tables(bundled.sources, {k: dict(v) for k, v in bundled.entries.items()},
                     dict(bundled.origins), dict(bundled.plausibility))
    sources = tables.sources
    user_entries: set[tuple[EntryKind, str]] = set()
    for folder in dirs:
        for ukind, path in _user_files(folder):
            kind, eid, entry = tables.add(ukind, path, user=True)
            _check_user_sources(entry, sources, path)
            user_entries.add((kind, eid))

    origins = tables.origins
    for sid, system in tables.entries[EntryKind.SYSTEM].items():
        if system.accelerator not in tables.entries[EntryKind.ACCELERATOR]:
            raise CatalogError(
                f"{origins[(EntryKind.SYSTEM, sid)]}: field 'accelerator': no accelerator with "
                f"id {system.accelerator!r} in the catalog"
            )
    accelerators = tables.entries[EntryKind.ACCELERATOR]
    known = list(bundled.entries[EntryKind.ACCELERATOR].values())
    found = {aid: tables.plausibility[aid] if aid in tables.plausibility
             else tuple(plausibility.check(a, known)) for aid, a in accelerators.items()}
    return Catalog(
        accelerators=accelerators,
        systems=tables.entries[EntryKind.SYSTEM],
        models=tables.entries[EntryKind.MODEL],
        sources=sources,
        origins=origins,
        plausibility={aid: f for aid, f in found.items() if f},
        user_entries=frozenset(user_entries),
    )


def _check_user_sources(entry: Any, sources: Mapping[str, Source], path: Path) -> None:
    cited = entry.cited_ids()
    missing = sorted(cited - set(sources) - set(entry.sources))
    if missing:
        raise CatalogError(
            f"{path}: field 'sources': source id {missing[0]!r} is cited but not defined; add it "
            "under 'sources:' as {title: ..., url: ...}"
        )


def load_catalog(extra_dirs: Iterable[str | Path] = ()) -> Catalog:
    """Bundled catalog plus user folders (``--catalog`` and ``ACCELMAP_CATALOG``), cached."""
    return _load(user_dirs(extra_dirs))
