"""measure/ sits below the engine: it may import units, hardware, models, ops, cost and lookup,
never the layers that consume it (validate compares measured with predicted, not measure)."""

from __future__ import annotations

import ast
from pathlib import Path

import accelmap.measure

ABOVE = ("validate", "estimate", "parallel", "search", "export", "cli", "web", "report")


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_measure_imports_nothing_above_it() -> None:
    folder = Path(accelmap.measure.__file__).parent
    bad = {f"{p.name}: {m}" for p in folder.glob("*.py") for m in _imports(p)
           if m.split(".")[:2] in (["accelmap", a] for a in ABOVE)}
    assert not bad, sorted(bad)
