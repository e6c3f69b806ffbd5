"""Reading the user's files: UTF-8 text of bounded size, JSON and YAML of bounded depth and size,
finite numbers only, and one clear ``InputError`` for anything else.

Every file a command reads on the user's behalf (model configs and spec YAMLs, catalog folders,
system YAMLs, plan files, validation CSVs and run files, serving traces, the JSON inside the
measurement store) goes through here, so that a UTF-16 file, a binary file, a FIFO, a
100,000-level nesting, a YAML alias bomb, ``NaN`` or ``1e400`` each give one sentence naming the
file and what to do, never a traceback or a hang.

Light at import: json and stat; yaml loads when a YAML file is read.
"""

from __future__ import annotations

import json
import math
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from accelmap.errors import InputError, clip

MiB = 2**20
MAX_BYTES = 16 * MiB  # a config, spec, catalog entry or plan file is a few kB
MAX_TABLE_BYTES = 256 * MiB  # measurement CSVs and request traces may be long
MAX_DEPTH = 64  # nesting of lists and mappings; real files use under 10
MAX_NODES = 1_000_000  # values after YAML aliases are expanded
MAX_INT_DIGITS = 30  # an integer longer than this is no size, count or id anyone means

_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
         (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def _size(n: int) -> str:
    return f"{n / MiB:,.1f} MiB" if n >= MiB else f"{n:,} bytes"


def is_file(path: str | Path) -> bool:
    """``Path.is_file`` that reads a path the OS refuses (too long, a NUL) as no file."""
    try:
        return Path(path).expanduser().is_file()
    except (OSError, ValueError):
        return False


def exists(path: str | Path) -> bool:
    """``Path.exists`` that reads a path the OS refuses (too long, a NUL) as missing."""
    try:
        return Path(path).expanduser().exists()
    except (OSError, ValueError):
        return False


def read_text(path: str | Path, what: str = "file", max_bytes: int = MAX_BYTES) -> str:
    """The text of a regular file, decoded as UTF-8 (a UTF-8 byte-order mark is dropped).

    Refused with one line each: a missing path, a folder, a device/FIFO/socket (reading one
    could block or never end), a file over ``max_bytes``, UTF-16/32, and bytes that are not
    UTF-8 or hold NUL (a binary file)."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(f"no such {what}: {clip(p, 120)}") from None
    except (OSError, ValueError) as e:  # ValueError: an embedded NUL in the path
        raise InputError(f"cannot read {what} {clip(p, 120)} ({_reason(e)})") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{clip(p, 120)} is a folder; give the {what} itself")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{clip(p, 120)} is not a regular file (a device, pipe or socket); "
                         f"give a {what}")
    if st.st_size > max_bytes:
        raise InputError(f"{clip(p, 120)} is {_size(st.st_size)}, more than the {_size(max_bytes)}"
                         f" a {what} may have; is it the right file?")
    try:
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise InputError(f"cannot read {what} {clip(p, 120)} ({_reason(e)})") from None
    if len(data) > max_bytes:
        raise InputError(f"{clip(p, 120)} is more than the {_size(max_bytes)} a {what} may have")
    return decode(data, str(p))


def _reason(e: BaseException) -> str:
    return getattr(e, "strerror", None) or type(e).__name__


def decode(data: bytes, origin: str) -> str:
    """UTF-8 bytes as text, or one line that says which encoding it looks like and the fix."""
    where = clip(origin, 120)
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise InputError(f"{where}: the file is {name}-encoded, not UTF-8; save it as UTF-8")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if b"\x00" in data[:4096]:
            raise InputError(f"{where}: a binary file, not text; give a UTF-8 text file"
                             ) from None
        raise InputError(f"{where}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                         f"{e.start}); save the file as UTF-8") from None
    if "\x00" in text:
        raise InputError(f"{where}: the text holds NUL bytes (a binary file?); give a UTF-8 "
                         "text file")
    return text


# --- JSON --------------------------------------------------------------------------------------
def _no_constant(origin: str) -> Any:
    def reject(name: str) -> Any:
        raise InputError(f"{origin}: {name} is not a number accelmap accepts; write a finite "
                         "number")
    return reject


def _finite_float(origin: str) -> Any:
    def parse(text: str) -> float:
        v = float(text)
        if not math.isfinite(v):
            raise InputError(f"{origin}: the number {clip(text, 30)} is out of range")
        return v
    return parse


def _bounded_int(origin: str) -> Any:
    def parse(text: str) -> int:
        if len(text.lstrip("-")) > MAX_INT_DIGITS:
            raise InputError(f"{origin}: the integer {clip(text, 30)} ({len(text)} digits) is "
                             "out of range")
        return int(text)
    return parse


def parse_json(text: str, origin: str) -> Any:
    """JSON text to Python values: finite numbers only, nesting and size bounded."""
    where = clip(origin, 120)
    try:
        data = json.loads(text, parse_constant=_no_constant(where),
                          parse_float=_finite_float(where), parse_int=_bounded_int(where))
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise InputError(f"{where}: nested more than {MAX_DEPTH} levels deep; is it the right "
                         "file?") from None
    check_shape(data, origin)
    return data


def load_json(path: str | Path, what: str = "JSON file", max_bytes: int = MAX_BYTES) -> Any:
    """``parse_json(read_text(path))``: the checked values of a JSON file."""
    return parse_json(read_text(path, what, max_bytes), str(Path(path).expanduser()))


# --- YAML --------------------------------------------------------------------------------------
def _yaml_loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml_depth(text: str, origin: str) -> None:
    """Walk the event stream (iterative in libyaml) and refuse deep nesting before the
    recursive composer sees it: libyaml's composer overflows the C stack near 10^4 levels."""
    import yaml

    depth = 0
    for ev in yaml.parse(text, Loader=_yaml_loader()):
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = f":{ev.start_mark.line + 1}" if ev.start_mark is not None else ""
                raise InputError(f"{clip(origin, 120)}{line}: nested more than {MAX_DEPTH} "
                                 "levels deep; is it the right file?")
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1


def parse_yaml(text: str, origin: str, trusted: bool = False) -> Any:
    """YAML text (safe loader: plain data, no Python tags) to Python values. Untrusted text is
    checked for depth before it is built, and for size (aliases expanded) and non-finite
    numbers after; ``trusted`` is for the files bundled with accelmap."""
    import yaml

    try:
        if trusted:
            data = yaml.load(text, Loader=_yaml_loader())
        else:
            _yaml_depth(text, origin)
            loader = _yaml_loader()(text)
            try:
                node = loader.get_single_node()
                if node is not None:
                    _unique_keys(node, origin)
                data = None if node is None else loader.construct_document(node)
            finally:
                loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if "nesting" in problem:
            # libyaml >= 0.2.5 (in PyYAML 6.0.4's wheels) stops at its own depth limit (1000)
            # while scanning ahead, before our event walk sees level 65: same answer either way
            raise InputError(f"{clip(origin, 120)}{where}: nested more than {MAX_DEPTH} levels "
                             "deep; is it the right file?") from None
        raise InputError(f"{clip(origin, 120)}{where}: not valid YAML ({clip(problem, 100)})"
                         ) from None
    except RecursionError:
        raise InputError(f"{clip(origin, 120)}: nested more than {MAX_DEPTH} levels deep; is it "
                         "the right file?") from None
    if not trusted:
        check_shape(data, origin)
    return data


def _unique_keys(root: Any, origin: str) -> None:
    """Refuse a mapping that states one key twice (YAML keeps the last silently): in a user's
    file that is a mistake. Iterative over the distinct nodes (an alias is walked once)."""
    import yaml

    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    line = key.start_mark.line + 1
                    if (key.tag, key.value) in first:
                        raise InputError(f"{clip(origin, 120)}:{line}: key "
                                         f"{clip(key.value, 40)!r} is given twice (first on "
                                         f"line {first[key.tag, key.value]}); keep one")
                    first[key.tag, key.value] = line
                stack += [key, value]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value


def load_yaml(path: str | Path, what: str = "YAML file", trusted: bool = False,
              max_bytes: int = MAX_BYTES) -> Any:
    """``parse_yaml(read_text(path))``: the checked values of a YAML file."""
    return parse_yaml(read_text(path, what, max_bytes), str(Path(path).expanduser()), trusted)


# --- shape ---------------------------------------------------------------------------------
def _children(value: Any, path: str) -> Iterator[tuple[Any, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield v, f"{path}.{k}" if path else str(k)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield v, f"{path}[{i}]"


def check_shape(data: Any, origin: str, max_depth: int = MAX_DEPTH,
                max_nodes: int = MAX_NODES) -> None:
    """Refuse data nested deeper than ``max_depth``, holding more than ``max_nodes`` values
    (a YAML alias bomb expands to billions), or a NaN/infinite float; iterative, and it stops
    at the first finding, so the work is bounded by ``max_nodes``."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    nodes = 0
    while stack:
        value, path, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise InputError(f"{clip(origin, 120)}: more than {max_nodes:,} values (YAML aliases "
                             "expanded); is it the right file?")
        if isinstance(value, float) and not math.isfinite(value):
            field = f" field '{clip(path, 60)}':" if path else ""
            raise InputError(f"{clip(origin, 120)}:{field} {value} is not a finite number")
        if isinstance(value, dict | list | tuple):
            if depth >= max_depth:
                raise InputError(f"{clip(origin, 120)}: nested more than {max_depth} levels "
                                 "deep; is it the right file?")
            stack.extend((v, p, depth + 1) for v, p in _children(value, path))

