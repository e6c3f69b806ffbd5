"""The parsed-catalog cache (accelmap/cache.py): the same catalog as parsing the YAML, rebuilt on
any change, and never an error of its own."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelmap import cache
from accelmap.catalog import Catalog, _load, load_catalog


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.DIR_ENV, str(folder))
    monkeypatch.delenv(cache.OFF_ENV, raising=False)
    monkeypatch.delenv("ACCELMAP_CATALOG", raising=False)
    _load.cache_clear()
    yield folder
    _load.cache_clear()


def _fresh() -> Catalog:
    _load.cache_clear()
    return load_catalog()


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("catalog-*.pickle"))


def test_cached_catalog_equals_the_parsed_one(cache_dir: Path, catalog: Catalog,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    first = _fresh()  # parses and writes the entry
    assert len(_entries(cache_dir)) == 1
    second = _fresh()  # reads it
    assert second == first == catalog
    assert list(second.accelerators) == list(catalog.accelerators)
    assert second.plausibility == catalog.plausibility
    monkeypatch.setenv(cache.OFF_ENV, "1")
    assert _fresh() == second


def test_a_read_entry_is_not_parsed_again(cache_dir: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh()
    import accelmap.catalog as catalog_mod

    def fail() -> None:
        raise AssertionError("parsed the YAML although the cache holds it")

    monkeypatch.setattr(catalog_mod, "_read_bundled", fail)
    assert _fresh().accelerators


@pytest.mark.parametrize("damage", [b"", b"not a pickle", pickle.dumps(("other-key", {}))])
def test_a_damaged_entry_is_rebuilt(cache_dir: Path, catalog: Catalog, damage: bytes) -> None:
    _fresh()
    (entry,) = _entries(cache_dir)
    entry.write_bytes(damage)
    assert _fresh() == catalog
    assert entry.read_bytes() != damage  # rewritten


def test_a_changed_package_file_makes_a_new_entry(cache_dir: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh()
    (old,) = _entries(cache_dir)
    other_copy = cache_dir / "catalog-0123abcd-0000.pickle"  # another checkout's entry
    other_copy.write_bytes(b"")
    files = cache._package_files(str(cache._PACKAGE))
    assert any(p.endswith("h100-sxm5-80gb.yaml") for p, _, _ in files)
    assert any(p.endswith("schema.py") for p, _, _ in files)
    edited = [(p, s + 1 if p.endswith("h100-sxm5-80gb.yaml") else s, m) for p, s, m in files]
    monkeypatch.setattr(cache, "_package_files", lambda root: edited)
    _fresh()
    (new,) = set(_entries(cache_dir)) - {other_copy}  # the stale entry is gone
    assert new != old and other_copy.exists()  # another copy's entry stays


def test_unwritable_or_missing_cache_folder_still_loads(tmp_path: Path, catalog: Catalog,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(cache.DIR_ENV, str(blocker / "cache"))  # a folder under a file
    assert _fresh() == catalog
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        monkeypatch.setenv(cache.DIR_ENV, str(ro))
        assert _fresh() == catalog
    _load.cache_clear()


def test_no_cache_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.DIR_ENV, str(tmp_path))
    monkeypatch.setenv(cache.OFF_ENV, "1")
    assert cache.cache_dir() is None
    _fresh()
    assert not list(tmp_path.iterdir())
    _load.cache_clear()


def test_default_folder_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(cache.DIR_ENV, raising=False)
    monkeypatch.delenv(cache.OFF_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "accelmap"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / ".cache" / "accelmap"
