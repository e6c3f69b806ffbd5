"""Shared fixtures: the bundled catalog (loaded once) and a CLI runner that uses main()."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from accelmap.catalog import Catalog, load_catalog
from accelmap.cli.app import main


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
