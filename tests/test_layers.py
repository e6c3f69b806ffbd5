"""Layers point one way (docs/ARCHITECTURE.md): the contract is pyproject.toml's
``[tool.importlinter]`` and this test runs it with import-linter, the tool CI runs
(``lint-imports`` in .ci/run). grimp reads every import, those inside functions too; imports under
``if TYPE_CHECKING:`` are annotations only and do not count. Three contracts:

- ``layers``: a module imports only its own layer and the layers below (within a layer, "|"
  siblings never import each other);
- ``faces``: cli/ and web/ import only ``accelmap.api`` (and ``errors``, ``units``' formatting);
- ``acyclic``: no two modules or packages of one package import each other in a circle.

The tests below also check that the contract covers every module (a new package must be given
a layer) and that the checker can fail: a cycle through an import inside a function is found."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

import accelmap

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "accelmap"
PYPROJECT = ROOT / "pyproject.toml"

# Packages whose __init__ sits in no layer because their modules sit in two: hardware/ (what a
# device is, layer "hardware.*"; cluster.py, the systems built from the catalog, above the
# catalog). Their __init__ must stay empty of imports. The package root re-exports lazily.
SPLIT_PACKAGES = ("accelmap.hardware",)
# what cli/ and web/ may import besides their own package
FACES_MAY_IMPORT = ("accelmap.api", "accelmap.errors", "accelmap.units")


def _config() -> dict[str, Any]:
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    assert isinstance(data, dict)
    return data


def _contract(cid: str) -> dict[str, Any]:
    (found,) = [c for c in _config()["contracts"] if c["id"] == cid]
    return found


def layer_modules() -> list[list[str]]:
    """The layers contract, highest first: the modules of each layer."""
    return [[m.strip() for m in line.replace(":", "|").split("|")]
            for line in _contract("layers")["layers"]]


def modules() -> list[str]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _covered(module: str, prefixes: list[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _lint(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[bool, str]:
    import importlinter.api  # noqa: F401  (configures import-linter's adapters)
    from importlinter.application.use_cases import lint_imports

    ok = lint_imports(str(config), cache_dir=None, no_logo=True)
    return ok, capsys.readouterr().out


def test_the_package_checked_is_this_tree() -> None:
    """grimp finds accelmap on sys.path: it must be this checkout's (run with PYTHONPATH=src or
    an editable install), not another copy."""
    assert Path(accelmap.__file__).resolve().parent == SRC, (
        f"accelmap imports from {accelmap.__file__}; run the tests with PYTHONPATH=src")


def test_every_module_has_a_layer() -> None:
    prefixes = [m for layer in layer_modules() for m in layer]
    missing = [m for m in modules()
               if not _covered(m, prefixes) and m != "accelmap" and m not in SPLIT_PACKAGES]
    assert missing == [], "add these to a layer of [tool.importlinter] in pyproject.toml"


def test_split_packages_import_nothing() -> None:
    for pkg in SPLIT_PACKAGES:
        init = SRC.joinpath(*pkg.split(".")[1:], "__init__.py")
        assert "import" not in init.read_text(encoding="utf-8"), init


def test_faces_contract_forbids_every_other_package() -> None:
    """A new package is forbidden to cli/ and web/ as soon as it exists."""
    faces = _contract("faces")
    top = {".".join(m.split(".")[:2]) for m in modules() if m != "accelmap"}
    allowed = {*faces["source_modules"], *FACES_MAY_IMPORT}
    assert set(faces["forbidden_modules"]) == top - allowed


def test_contracts_kept(capsys: pytest.CaptureFixture[str]) -> None:
    ok, out = _lint(PYPROJECT, capsys)
    assert ok, out


def test_the_check_catches_a_cycle_inside_a_function(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The check can fail: ``low`` importing ``high`` inside a function is an upward import and,
    with ``high`` importing ``low``, a cycle; the same import under TYPE_CHECKING is neither."""
    pkg = tmp_path / "layerprobe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "high.py").write_text("from layerprobe import low\n")
    (pkg / "low.py").write_text("def f():\n    from layerprobe import high\n    return high\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from layerprobe import high\n")
    config = tmp_path / "probe.toml"
    config.write_text('[tool.importlinter]\nroot_package = "layerprobe"\n'
                      "exclude_type_checking_imports = true\n"
                      '[[tool.importlinter.contracts]]\nid = "layers"\nname = "layers"\n'
                      'type = "layers"\nlayers = ["layerprobe.high", '
                      '"layerprobe.low | layerprobe.typed"]\n'
                      '[[tool.importlinter.contracts]]\nid = "acyclic"\nname = "acyclic"\n'
                      'type = "acyclic_siblings"\nancestors = ["layerprobe"]\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        ok, out = _lint(config, capsys)
    finally:
        sys.modules.pop("layerprobe", None)
    assert not ok
    assert "layerprobe.low -> layerprobe.high (l.2)" in out  # the upward import, in a function
    assert "No cycles are allowed in layerprobe" in out
    assert "typed" not in out.split("Broken contracts")[1]
