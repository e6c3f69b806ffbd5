"""Layers point one way (docs/ARCHITECTURE.md): a module may import only from its own layer or
the layers below it. The check reads every module's runtime imports with ``ast`` (imports under
``if TYPE_CHECKING:`` are annotations only and do not count) and fails on the first new upward
import, naming it. Within a layer, the order of the table below decides too (e.g. measure sits
below validate: validation compares measurements with predictions, never the other way)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "accelmap"

# (module prefix, rank): the longest matching prefix decides; lower ranks are lower layers.
LAYERS: tuple[tuple[str, int], ...] = (
    # foundation
    ("accelmap.errors", 0), ("accelmap.units", 0), ("accelmap.cited", 0), ("accelmap.lookup", 0),
    ("accelmap.cache", 0),  # a pickle of a built value, keyed by the package files
    ("accelmap.files", 0),  # reading the user's files: UTF-8, bounded size and depth
    ("accelmap.fanout", 0),  # mapping a pure function in this process or on Ray
    # what the model, the hardware and the job are
    ("accelmap.models", 1), ("accelmap.hardware", 1), ("accelmap.workload", 1),
    ("accelmap.catalog", 2),  # loads both catalogs (models/, hardware/ schemas)
    ("accelmap.hardware.cluster", 3),  # clusters from catalog presets and shorthands
    # what one step costs: operators, memory, time
    ("accelmap.ops", 4), ("accelmap.memory", 5), ("accelmap.cost", 5),
    # how the work is split and where the axes land
    ("accelmap.mapping", 6),
    # the one estimate
    ("accelmap.engine", 7),
    # producers and consumers of estimates
    ("accelmap.measure", 8), ("accelmap.export", 8), ("accelmap.serving", 8),
    ("accelmap.search", 8),
    ("accelmap.validate", 9), ("accelmap.report", 9),
    # the public API and the faces
    ("accelmap.api", 10), ("accelmap", 10),
    ("accelmap.cli", 11), ("accelmap.web", 11),
)


def rank(module: str) -> tuple[str, int] | None:
    best: tuple[str, int] | None = None
    for prefix, r in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and (
                best is None or len(prefix) > len(best[0])):
            best = (prefix, r)
    return best


def _runtime_imports(tree: ast.AST) -> list[str]:
    out: list[str] = []

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            t = node.test
            if (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
                    isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"):
                for n in node.orelse:
                    self.visit(n)
                return
            self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.module and node.module.split(".")[0] == "accelmap":
                out.append(node.module)

        def visit_Import(self, node: ast.Import) -> None:
            out.extend(a.name for a in node.names if a.name.split(".")[0] == "accelmap")

    Visitor().visit(tree)
    return out


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def upward_imports() -> list[str]:
    bad = []
    for name, path in modules().items():
        own = rank(name)
        assert own is not None, f"{name} is in no layer: add it to LAYERS"
        for dep in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            theirs = rank(dep)
            if theirs is not None and theirs[1] > own[1]:
                bad.append(f"{name} (layer {own[0]}) imports {dep} (layer {theirs[0]})")
    return bad


def test_every_module_has_a_layer() -> None:
    missing = [m for m in modules() if rank(m) is None]
    assert not missing


def test_layers_point_one_way() -> None:
    assert upward_imports() == []


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The check itself can fail: an ops module importing the engine is reported."""
    tree = ast.parse("from accelmap.engine import estimate\nif TYPE_CHECKING:\n"
                     "    from accelmap.search import planner\n")
    deps = _runtime_imports(tree)
    assert deps == ["accelmap.engine"]
    own, theirs = rank("accelmap.ops.graph"), rank(deps[0])
    assert own is not None and theirs is not None and theirs[1] > own[1]
