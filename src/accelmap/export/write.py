"""Writing an exporter's files: into a folder that is a real directory (created when missing),
each file written to a temporary name beside its target and renamed over it (``os.replace`` is
atomic within one file system, POSIX rename(2)), so a reader never sees half a file and an
interrupted export leaves the old file whole.

What is never replaced: a device, FIFO or socket (``--out /dev/stdout`` must not swap out the
link or the device), a symbolic link (it would redirect the write anywhere), a directory where
a file belongs, or a folder that is a file. An existing regular file with other content is
kept unless ``force``: a second export into the same folder says which files it would
overwrite instead of silently replacing someone's edited launch script.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from accelmap.errors import InputError


def _kind(path: Path) -> str | None:
    """What ``path`` is, without following a link: None when nothing is there."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a file"
    return "a device, FIFO or socket"


def check_folder(folder: Path) -> None:
    """``folder`` must be a real directory or not exist yet (one InputError line)."""
    kind = _kind(folder)
    if kind not in (None, "a directory"):
        raise InputError(f"--out {str(folder)[:120]!r} is {kind}, not a folder: name a new or "
                         "existing directory for the exported files")
    for parent in folder.parents:  # a parent that is a file makes mkdir fail obscurely
        pkind = _kind(parent)
        if pkind not in (None, "a directory", "a symbolic link"):
            raise InputError(f"--out {str(folder)[:120]!r}: {str(parent)[:120]!r} is {pkind}, "
                             "not a folder")


def write_files(folder: Path, files: dict[str, str], force: bool = False) -> list[Path]:
    """Write ``files`` (name -> text) into ``folder`` atomically; the paths written. Refuses,
    before writing anything, a target that is a link, a directory or a special file, and (unless
    ``force``) a regular file whose content would change."""
    check_folder(folder)
    targets = {name: folder / name for name in files}
    changed: list[str] = []
    for name, path in targets.items():
        if Path(name).name != name or name in ("", ".", ".."):
            raise InputError(f"an exporter named a file {name!r} outside its folder")
        kind = _kind(path)
        if kind in ("a symbolic link", "a directory", "a device, FIFO or socket"):
            raise InputError(f"{str(path)[:160]} is {kind}: not replaced (remove it, or choose "
                             "another --out folder)")
        if kind == "a file" and not force:
            try:
                same = path.read_text(encoding="utf-8") == files[name]
            except (OSError, UnicodeDecodeError):
                same = False
            if not same:
                changed.append(name)
    if changed:
        raise InputError(f"--out {str(folder)[:120]!r} already has {', '.join(changed)} with "
                         "other content: add --force to overwrite, or choose another folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create --out {str(folder)[:120]!r}: {e.strerror}") from None
    written = []
    for name, path in targets.items():
        written.append(_atomic_write(path, files[name]))
    return written


def _atomic_write(path: Path, text: str) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if path.suffix == ".sh":
            os.chmod(tmp, 0o755)  # launch scripts are run directly
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"cannot write {str(path)[:160]}: {e.strerror}") from None
    return path
