"""The CLI is thin: its modules import the public API (``accelmap.api`` or the package root),
``accelmap.errors``, the formatting helpers of ``accelmap.units`` and their own ``accelmap.cli``
siblings, nothing else of accelmap; and ``accelmap --help`` loads none of the engine."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import accelmap

CLI_DIR = Path(__file__).resolve().parents[2] / "src" / "accelmap" / "cli"

# CLI modules that may still import accelmap internals: none any more. Keep it empty; a module
# listed here that no longer needs it fails test_exempt_list_is_current.
EXEMPT: frozenset[str] = frozenset()

ALLOWED_MODULES = frozenset({"accelmap", "accelmap.api", "accelmap.errors"})
# accelmap.units: only what formats a quantity for a table cell
ALLOWED_UNITS_NAMES = frozenset({"Dimension", "format_quantity"})
# `from accelmap import X`: the API module or a name the package root re-exports
ALLOWED_ROOT_NAMES = frozenset({"api", "errors", "cli", *accelmap.__all__})


def _imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, module, imported names) for every import in the file, also inside functions and
    ``if TYPE_CHECKING:`` blocks; relative imports resolve against accelmap.cli."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = "accelmap.cli".rsplit(".", node.level - 1)[0]
                module = f"{base}.{module}" if module else base
            out.append((node.lineno, module, tuple(a.name for a in node.names)))
    return out


def _violations(path: Path) -> list[str]:
    bad = []
    for line, module, names in _imports(path):
        if module != "accelmap" and not module.startswith("accelmap."):
            continue  # the standard library, typer, rich ...
        if module == "accelmap.cli" or module.startswith("accelmap.cli."):
            continue  # siblings
        if module == "accelmap.units":
            extra = set(names) - ALLOWED_UNITS_NAMES
            if not names or extra:
                bad.append(f"{path.name}:{line}: accelmap.units {sorted(extra) or '(module)'}")
            continue
        if module == "accelmap" and names:
            extra = set(names) - ALLOWED_ROOT_NAMES
            if extra:
                bad.append(f"{path.name}:{line}: from accelmap import {', '.join(sorted(extra))}")
            continue
        if module not in ALLOWED_MODULES and not module.startswith("accelmap.api."):
            bad.append(f"{path.name}:{line}: {module}")
    return bad


def _checked_modules() -> list[Path]:
    return sorted(p for p in CLI_DIR.glob("*.py") if p.name not in EXEMPT)


@pytest.mark.parametrize("path", _checked_modules(), ids=lambda p: p.name)
def test_cli_module_imports_only_the_public_api(path: Path) -> None:
    assert _violations(path) == [], (
        "the CLI parses, calls accelmap.api and renders: expose what it needs there")


def test_exempt_list_is_current() -> None:
    names = {p.name for p in CLI_DIR.glob("*.py")}
    assert names >= EXEMPT, f"no such CLI module: {sorted(EXEMPT - names)}"
    thin = sorted(n for n in EXEMPT if not _violations(CLI_DIR / n))
    assert not thin, f"{thin} now import(s) only the public API: remove from EXEMPT"


def test_the_checker_catches_internal_imports(tmp_path: Path) -> None:
    src = tmp_path / "bad.py"
    src.write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from accelmap import api, catalog\n"
        "from accelmap.units import DType, format_quantity\n"
        "from accelmap.cli.common import fmt\n"
        "from . import hw\n"
        "import accelmap.lookup\n"
        "if TYPE_CHECKING:\n"
        "    from accelmap.hardware.schema import Accelerator\n"
        "def f() -> None:\n"
        "    from accelmap.search.result import Objective\n"
        "    from accelmap.errors import InputError\n"
        "    from accelmap.api import Catalog\n",
        encoding="utf-8")
    assert _violations(src) == [
        "bad.py:3: from accelmap import catalog",
        "bad.py:4: accelmap.units ['DType']",
        "bad.py:7: accelmap.lookup",
        "bad.py:9: accelmap.hardware.schema",
        "bad.py:11: accelmap.search.result",
    ]


def test_help_loads_no_engine() -> None:
    """`accelmap --help` starts without pydantic, numpy or the catalog: the commands import
    the API's modules when they run."""
    code = ("import sys\n"
            "from accelmap.cli.app import main\n"
            "try:\n"
            "    main(['--help'])\n"
            "except SystemExit:\n"
            "    pass\n"
            "heavy = sorted(m for m in sys.modules if m in ('pydantic', 'numpy', 'yaml') or "
            "m.startswith(('accelmap.engine', 'accelmap.catalog', 'accelmap.hardware.schema',"
            " 'accelmap.models', 'accelmap.validate', 'accelmap.search')))\n"
            "print('HEAVY', heavy, file=sys.stderr)\n")
    src = str(CLI_DIR.parents[1])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       check=True)
    assert "HEAVY []" in r.stderr, r.stderr
