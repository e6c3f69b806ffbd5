"""accelmap.api: every public name resolves, the lazy map agrees with the type-checking imports,
importing the package loads none of the engine, and the levels hold (issue 25: level 2 the
questions, level 3 each area's module, a name asked at the wrong level says where it is)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import accelmap
from accelmap import api

INIT = Path(api.__file__)


def test_all_names_resolve_and_match_the_lazy_map() -> None:
    assert sorted(api.__all__) == sorted([*api._LAZY, *api.AREAS])
    assert len(set(api.__all__)) == len(api.__all__)
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert set(api.__all__) <= set(dir(api))


def test_type_checking_imports_name_the_same_modules() -> None:
    """What mypy sees (the TYPE_CHECKING imports) is what runs (the lazy map)."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If)
                 and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING")
    seen = {a.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
            for a in node.names}
    assert {k: v for k, v in seen.items() if v != "accelmap.api"} == api._LAZY
    assert sorted(k for k, v in seen.items() if v == "accelmap.api") == sorted(api.AREAS)


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        api.no_such_function  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as e:
        assert "no_such_function" in str(e)
    else:
        raise AssertionError("expected AttributeError")


def test_package_root_reexports_reach_the_api() -> None:
    assert accelmap.estimate is api.estimate
    assert accelmap.load_model is api.load_model
    assert accelmap.load_system is api.load_system


def test_importing_the_api_is_cheap() -> None:
    code = ("import sys\n"
            "from accelmap import api\n"
            "names = api.__all__\n"
            "heavy = sorted(m for m in ('pydantic', 'numpy', 'yaml', 'accelmap.engine',"
            " 'accelmap.catalog') if m in sys.modules)\n"
            "print(heavy)\n")
    src = str(INIT.parents[2])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       check=True)
    assert r.stdout.strip() == "[]"


def test_every_area_name_resolves_and_none_is_asked_twice() -> None:
    """Level 3: each area's ``__all__`` resolves; a level-3 name is not also at level 2, and
    asked there it says which area holds it."""
    import importlib

    level2 = set(api._LAZY)
    for area in api.AREAS:
        module = getattr(api, area)
        assert module is importlib.import_module(f"accelmap.api.{area}")
        for name in module.__all__:
            assert getattr(module, name) is not None, (area, name)
            if name not in level2:
                try:
                    getattr(api, name)
                except AttributeError as e:
                    assert f"accelmap.api.{area}.{name}" in str(e) or "; it is" in str(e)
                else:
                    raise AssertionError(f"{name} of {area} answers at level 2")


def test_three_comparisons_three_names() -> None:
    things = {api.compare_specs, api.compare_accelerators, api.compare_clusters}
    assert len(things) == 3
    for old in ("compare", "compare_hardware", "HardwareComparison"):
        assert not hasattr(api, old), old
