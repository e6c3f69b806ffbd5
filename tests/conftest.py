"""Shared fixtures: the bundled catalog (loaded once), a CLI runner that uses main(), and a
loader for the benchmark scripts the tests exercise."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

from accelmap.catalog import Catalog, load_catalog
from accelmap.cli.app import main

# The parsed-catalog cache (accelmap/cache.py) of a test run lives in a folder of its own, also
# for the CLI subprocesses some tests start: nothing is written to the user's ~/.cache.
if "ACCELMAP_CACHE_DIR" not in os.environ:
    os.environ["ACCELMAP_CACHE_DIR"] = tempfile.mkdtemp(prefix="accelmap-test-cache-")
    atexit.register(shutil.rmtree, os.environ["ACCELMAP_CACHE_DIR"], True)

# Hypothesis: CI draws the same examples every run (derandomize: seeded by a hash of each test
# function), keeps no example database and puts no deadline on an example (an estimate's time
# varies with the machine's load). `HYPOTHESIS_PROFILE=explore` draws fresh random examples
# each run and remembers failures in .hypothesis/, to look for new counterexamples.
settings.register_profile("ci", deadline=None, derandomize=True, database=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    os.environ.pop("ACCELMAP_CATALOG", None)
    return load_catalog()


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> Callable[..., CliResult]:
    """Run `accelmap ARGS` in-process through the real entry point (error handling included)."""
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("ACCELMAP_CATALOG", raising=False)

    def run(*args: str) -> CliResult:
        code = 0
        try:
            main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def _load_script(folder: str, name: str) -> ModuleType:
    """Import ``<folder>/<name>.py`` (a script folder, not a package) as module ``name``."""
    path = Path(__file__).resolve().parents[1] / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def load_benchmark() -> Callable[[str], ModuleType]:
    """A script of ``benchmarks/`` (prints figures) by name."""
    return lambda name: _load_script("benchmarks", name)


@pytest.fixture(scope="session")
def load_fitter() -> Callable[[str], ModuleType]:
    """A script of ``fitters/`` (writes a bundled data file) by name."""
    return lambda name: _load_script("fitters", name)
