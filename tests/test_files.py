"""Reading the user's files (accelmap.files): UTF-8 only, bounded size and depth, finite numbers,
no duplicate YAML keys; each refusal one InputError naming the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from accelmap import files
from accelmap.errors import InputError


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return p


@pytest.mark.parametrize(("data", "message"), [
    ('{"a": 1}'.encode("utf-16"), "UTF-16"),
    ('{"a": "modèle"}'.encode("latin-1"), r"not UTF-8 text \(byte 0xe8"),
    (bytes(range(256)) * 4, "binary file"),
    (b'{"a": "\x00"}', "NUL"),
])
def test_text_that_is_not_utf8_is_refused(tmp_path: Path, data: bytes, message: str) -> None:
    p = _write(tmp_path, "x.json", data)
    with pytest.raises(InputError, match=message) as info:
        files.read_text(p)
    assert str(p) in str(info.value)


def test_utf8_with_a_byte_order_mark_reads(tmp_path: Path) -> None:
    assert files.read_text(_write(tmp_path, "x.json", b"\xef\xbb\xbf{}")) == "{}"


def test_missing_folder_device_and_big_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no such config\.json"):
        files.read_text(tmp_path / "none.json", "config.json")
    with pytest.raises(InputError, match="is a folder"):
        files.read_text(tmp_path)
    with pytest.raises(InputError, match="not a regular file"):
        files.read_text("/dev/zero")  # would never end
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        files.read_text(fifo)  # would block on open
    big = _write(tmp_path, "big.json", b" " * 2048)
    with pytest.raises(InputError, match="more than the 1,000 bytes"):
        files.read_text(big, max_bytes=1000)


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": NaN}', "NaN is not a number"),
    ('{"a": Infinity}', "Infinity is not a number"),
    ('{"a": -Infinity}', "-Infinity is not a number"),
    ('{"a": 1e400}', "1e400 is out of range"),
    ('{"a": ' + "9" * 5000 + "}", "5000 digits"),
    ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels"),
    ("[" * 70 + "]" * 70, "nested more than 64 levels"),
    ('{"a": 1', "not valid JSON"),
])
def test_json_is_finite_and_shallow(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        files.parse_json(text, "f.json")


def test_json_within_the_limits_reads() -> None:
    assert files.parse_json('{"a": [1, 2.5, {"b": null}]}', "f.json") == {
        "a": [1, 2.5, {"b": None}]}


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True))


@pytest.mark.parametrize(("text", "message"), [
    ("a: " + "[" * 50_000 + "]" * 50_000, "nested more than 64"),  # libyaml would crash
    ("".join("  " * i + f"k{i}:\n" for i in range(100)) + "  " * 100 + "v\n", "nested more"),
    (BOMB, "more than 1,000,000 values"),
    ("a: .nan\n", "field 'a': nan is not a finite number"),
    ("a: [1, -.inf]\n", r"field 'a\[1\]': -inf is not a finite number"),
    ("a: 1\nb: 2\na: 3\n", "key 'a' is given twice"),
    ("{a: 1, a: 2}\n", "key 'a' is given twice"),
    ("!!python/object/apply:os.system ['true']\n", "not valid YAML"),
    ("a: [\n", "not valid YAML"),
])
def test_untrusted_yaml_is_checked(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        files.parse_yaml(text, "f.yaml")


def test_yaml_aliases_that_stay_small_read() -> None:
    assert files.parse_yaml("a: &x [1, 2]\nb: *x\n", "f.yaml") == {"a": [1, 2], "b": [1, 2]}


def test_clip() -> None:
    assert files.clip("abc", 5) == "abc"
    assert files.clip("a" * 100, 10) == "a" * 9 + "…"
