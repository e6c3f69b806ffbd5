"""The script folders (issue 25): ``fitters/`` write the bundled data files and import only the
declared dependencies (the core ones and the ``fit`` extra), say in one line what to install
when SciPy is missing, and say in their docstring what they read and write; ``benchmarks/``
only print figures."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
FITTERS = sorted((ROOT / "fitters").glob("*.py"))
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))
IMPORT_NAME = {"pyyaml": "yaml", "tomli-w": "tomli_w"}  # distribution -> module, where they differ


def _imports(path: Path) -> set[str]:
    """Top-level names of every absolute import in ``path``, inside functions too."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def _declared() -> set[str]:
    """Module names of the core dependencies and of the ``fit`` extra (pyproject.toml)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [*project["dependencies"], *project["optional-dependencies"]["fit"]]
    names = {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in reqs}  # type: ignore[union-attr]
    return {IMPORT_NAME.get(n, n.replace("-", "_")) for n in names}


def test_the_folders_hold_their_scripts() -> None:
    assert len(FITTERS) >= 7 and len(BENCHMARKS) >= 15
    assert not {p.name for p in FITTERS} & {p.name for p in BENCHMARKS}
    for folder in ("fitters", "benchmarks", "tests/corpus", "data"):
        assert (ROOT / folder / "README.md").is_file(), folder


@pytest.mark.parametrize("path", FITTERS, ids=lambda p: p.stem)
def test_a_fitter_imports_only_declared_dependencies(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | {"accelmap"} | {p.stem for p in FITTERS} | _declared()
    assert _imports(path) <= allowed, sorted(_imports(path) - allowed)


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    f = tmp_path / "f.py"
    f.write_text("import yaml\n\ndef g():\n    from sklearn.linear_model import Ridge\n")
    assert _imports(f) == {"yaml", "sklearn"} and "sklearn" not in _declared()
    assert {"scipy", "yaml", "numpy"} <= _declared()


@pytest.mark.parametrize("path", [p for p in FITTERS if "scipy" in _imports(p)],
                         ids=lambda p: p.stem)
def test_a_fitter_without_scipy_says_what_to_install(path: Path) -> None:
    code = ("import runpy, sys; sys.modules['scipy'] = None; "
            f"sys.argv = [{str(path)!r}]; runpy.run_path({str(path)!r}, run_name='__main__')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"{path.name} needs SciPy: pip install 'accelmap[fit]'"]


@pytest.mark.parametrize("path", FITTERS, ids=lambda p: p.stem)
def test_a_fitter_says_what_it_reads_and_writes(
        path: Path, load_fitter: Callable[[str], ModuleType]) -> None:
    mod = load_fitter(path.stem)
    out = Path(mod.OUT).resolve().relative_to(ROOT).as_posix()
    assert re.fullmatch(r"src/accelmap/\w+/data/\w+\.yaml", out), out
    doc = mod.__doc__ or ""
    assert "\nReads: " in doc and f"\nWrites: {out}" in doc
    assert f"Run: python fitters/{path.name}" in doc


def _accelmap_names(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every ``from accelmap... import name`` in ``path`` (inside functions
    too), and ("accelmap.api", attr) of every ``api.attr`` it reads."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.split(".")[0] == "accelmap":
            out += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "api":
            out.append(("accelmap.api", node.attr))
    return out


SCRIPTS = [*FITTERS, *BENCHMARKS, *sorted((ROOT / "tests" / "corpus").glob("*.py"))]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_name_a_script_takes_from_accelmap_exists(path: Path) -> None:
    """The scripts are not imported by the package: a renamed API name or internal would
    break them silently; this reads every name they import (and every ``api.x``)."""
    missing = []
    for module, name in _accelmap_names(path):
        mod = importlib.import_module(module)
        if not hasattr(mod, name) and importlib.util.find_spec(f"{module}.{name}") is None:
            missing.append(f"{module}.{name}")
    assert not missing, missing


def test_the_name_check_sees_a_missing_name(tmp_path: Path) -> None:
    f = tmp_path / "s.py"
    f.write_text("from accelmap import api\nfrom accelmap.api import load_catalog, gone\n"
                 "def g():\n    from accelmap.validate import predict\n    api.renamed\n")
    with pytest.raises(AssertionError, match=r"accelmap\.api\.gone.*accelmap\.api\.renamed"):
        test_every_name_a_script_takes_from_accelmap_exists(f)


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.stem)
def test_a_benchmark_writes_no_bundled_data(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "safe_dump(" not in text and ".write_text(" not in text
