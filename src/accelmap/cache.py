"""A cache of the parsed bundled catalog, so that a command starts without parsing YAML.

Reading the ~130 bundled YAML files and validating them takes ~50 ms, an eighth of
``accelmap hw list``. The validated values are pickled once under ``$ACCELMAP_CACHE_DIR``, else
``$XDG_CACHE_HOME/accelmap``, else ``~/.cache/accelmap``, with a fingerprint of everything they
depend on: the path, size and modification time of every ``.py`` and ``.yaml`` file of the
installed package (the data, and the classes the pickle refers to), and the Python and pydantic
versions. The file is named by a checksum of the fingerprint, and the whole fingerprint is
compared when the entry is read: any edit, upgrade or reinstall makes a new one, so a stale
entry is never read; it is rebuilt from the YAML and replaces the old file of the same copy of the
package (several checkouts or environments keep one entry each).

Anything wrong with the cache -- a missing or unwritable folder, a corrupt or truncated file,
a pickle from another version -- falls back to parsing the YAML, silently. ``ACCELMAP_NO_CACHE=1``
turns the cache off. The user's own catalog folders are never cached: they are read every time.
The folder is created private to the user (a pickle is code to whoever can write it).
"""

from __future__ import annotations

import os
import pickle
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

DIR_ENV = "ACCELMAP_CACHE_DIR"
OFF_ENV = "ACCELMAP_NO_CACHE"
FORMAT = 1  # bump when what a cached entry holds changes shape
_PACKAGE = Path(__file__).resolve().parent


def cache_dir() -> Path | None:
    """Where entries live; None when the cache is turned off."""
    if os.environ.get(OFF_ENV, "").strip() not in ("", "0"):
        return None
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "accelmap"


def fingerprint(name: str) -> tuple[object, ...]:
    """What an entry depends on (see the module docstring), compared whole when it is read."""
    import pydantic

    return (name, FORMAT, sys.version, pydantic.VERSION, str(_PACKAGE),
            tuple(_package_files(str(_PACKAGE))))


def _crc(value: object) -> str:
    return f"{zlib.crc32(repr(value).encode()):08x}"


def _package_files(root: str) -> list[tuple[str, int, int]]:
    out = []
    stack = [root]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif entry.name.endswith((".py", ".yaml")):
                    st = entry.stat()
                    out.append((entry.path[len(root):], st.st_size, st.st_mtime_ns))
    return sorted(out)


def cached(name: str, build: Callable[[], T]) -> T:
    """``build()``'s value, from the cache when an entry with the current fingerprint exists;
    else built, stored (best effort) and returned."""
    folder = cache_dir()
    if folder is None:
        return build()
    key = fingerprint(name)
    # one entry per installed copy of the package (several checkouts share the folder), named
    # by its folder; a new fingerprint of the same copy replaces the old entry
    stem = f"{name}-{_crc(_PACKAGE)}"
    path = folder / f"{stem}-{_crc(key)}.pickle"
    try:
        with path.open("rb") as f:
            stored_key, value = pickle.load(f)
        if stored_key == key:
            return value
    except Exception:  # absent, unreadable, corrupt, or pickled by other code: rebuild
        pass
    value = build()
    _store(folder, stem, path, (key, value))
    return value


def _store(folder: Path, stem: str, path: Path, payload: object) -> None:
    """Write atomically (a reader sees the old file or the new one, never half), then drop the
    entries of earlier fingerprints. Failure leaves everything as it was."""
    import tempfile

    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{stem}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(payload, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        for old in folder.glob(f"{stem}-*.pickle"):
            if old != path:
                old.unlink(missing_ok=True)
    except Exception:  # read-only home, full disk, unpicklable value: run uncached
        pass
