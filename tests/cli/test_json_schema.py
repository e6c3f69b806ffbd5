"""The `--json` output of every command keeps its shape: the keys and the type of each value
(not the values) of estimate (train and serve, one device and a cluster), plan (train and
serve), compare, export, validate, hw list/show/systems and models list/show are checked
against a golden file, tests/fixtures/json_schemas.json. A scripted consumer breaks when a key
goes, is renamed or changes type; this test breaks first.

After a deliberate change, regenerate the golden file and review its diff:

    ACCELMAP_UPDATE_SCHEMAS=1 python3 -m pytest tests/cli/test_json_schema.py

The shape of a value: a dict is its keys' shapes; a list the merged shape of its elements (the
union of their keys, ``int|null`` where elements differ); a scalar its JSON type. A dict whose
keys are data rather than fields -- operator paths (``time_breakdown_s``), dtypes
(``peak_flops``), source ids, rule or group names, the ``MAPS`` below -- collapses to one
``<key>`` holding the merged shape of its values, so a new operator, dtype or catalog entry is
not a change of shape.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelmap.export.base import PlanJob, PlanKind
from accelmap.mapping.plan import Mapping, ZeroStage
from accelmap.workload import Recompute

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOLDEN = FIXTURES / "json_schemas.json"
UPDATE = os.environ.get("ACCELMAP_UPDATE_SCHEMAS", "") not in ("", "0")
PLAN = "{plan}"  # stands for a plan file written by the test
OUT = "{out}"  # stands for an output folder
CASES = "{cases}"  # the bundled fixture, wherever the checkout is

COMMANDS: dict[str, list[str]] = {
    "estimate-train": ["estimate", "llama-3.2-1b", "--hw", "h100-sxm5-80gb", "--train",
                       "--batch", "8", "--seq", "2048", "--json"],
    "estimate-train-cluster": ["estimate", "llama-3.2-1b", "--cluster", "16xH100", "--train",
                               "--tp", "2", "--pp", "2", "--batch", "64", "--seq", "2048",
                               "--tokens", "1B", "--json"],
    "estimate-serve": ["estimate", "llama-3.2-1b", "--hw", "h100-sxm5-80gb", "--serve",
                       "--batch", "8", "--prompt", "512", "--output", "64", "--json"],
    "estimate-serve-cluster": ["estimate", "mixtral-8x7b", "--cluster", "8xH100", "--serve",
                               "--tp", "4", "--ep", "4", "--replicas", "2", "--batch", "16",
                               "--prompt", "512", "--output", "64", "--json"],
    "plan-train": ["plan", "llama-3.2-1b", "--cluster", "8xH100", "--train", "--seq", "2048",
                   "--global-batch-tokens", "256K", "--top", "2", "--json"],
    "plan-serve": ["plan", "llama-3.2-1b", "--cluster", "8xH100", "--serve", "--prompt", "512",
                   "--output", "64", "--top", "2", "--json"],
    "compare": ["compare", "llama-3.2-1b", "--class", "tpu", "--top", "3", "--json"],
    "frontier": ["frontier", "llama-3.2-1b", "--cluster", "2xh100-sxm5-80gb", "--isl", "256",
                 "--osl", "32", "--concurrency", "2,8", "--json"],
    "export": ["export", "deepspeed", "--from", PLAN, "--out", OUT, "--json"],
    "export-list": ["export", "--list", "--json"],
    "validate": ["validate", "--cases", CASES, "--json"],
    "hw-list": ["hw", "list", "--json"],
    "hw-show": ["hw", "show", "h100-sxm5-80gb", "--json"],
    "hw-systems": ["hw", "systems", "--json"],
    "models-list": ["models", "list", "--json"],
    "models-show": ["models", "show", "llama-3.1-8b", "--json"],
}


def _type(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str"}[type(v)]


# dicts keyed by data: dtypes, source ids, rule names, validation groups, unpublished fields
MAPS = frozenset({"peak_flops", "ridge_flop_per_byte", "matrix", "vector", "sources",
                  "not_published", "rejected_by_rule", "by_kind", "by_phase", "by_source"})


def shape(v: Any, key: str = "") -> Any:
    """Keys and value types of a JSON value (module docstring)."""
    if isinstance(v, dict):
        if key in MAPS or any("/" in k for k in v):  # keys that are data (or operator paths)
            return {"<key>": merge([shape(x) for x in v.values()])} if v else {}
        return {k: shape(x, k) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [merge([shape(x, key) for x in v])] if v else []
    return _type(v)


def merge(shapes: list[Any]) -> Any:
    """One shape for several: dicts merge key by key, lists element-wise, scalars by union."""
    if not shapes:
        return "empty"
    if all(isinstance(s, dict) for s in shapes):
        keys = sorted({k for s in shapes for k in s})
        return {k: merge([s[k] for s in shapes if k in s]) for k in keys}
    if all(isinstance(s, list) for s in shapes):
        inner = [x for s in shapes for x in s]
        return [merge(inner)] if inner else []
    names: set[str] = set()
    for s in shapes:
        names |= set(s.split("|")) if isinstance(s, str) else {json.dumps(s, sort_keys=True)}
    return "|".join(sorted(names))


def diff(want: Any, got: Any, path: str = "$") -> list[str]:
    """Readable differences between two shapes, one line each."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{path}.{k}: removed" for k in want if k not in got]
        out += [f"{path}.{k}: added ({json.dumps(got[k])[:80]})" for k in got if k not in want]
        for k in want:
            if k in got:
                out += diff(want[k], got[k], f"{path}.{k}")
        return out
    if isinstance(want, list) and isinstance(got, list) and want and got:
        return diff(want[0], got[0], f"{path}[]")
    return [] if want == got else [f"{path}: {json.dumps(want)[:80]} -> {json.dumps(got)[:80]}"]


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.exists() else {}


@pytest.fixture(scope="module")
def found() -> dict[str, Any]:
    return {}


def _plan_file(folder: Path) -> Path:
    """A training plan as `accelmap plan --json` writes one (a bare job object)."""
    job = PlanJob(kind=PlanKind.TRAIN, model="llama-3.1-8b", accelerator="h100-sxm5-80gb",
                  devices_per_node=8, nodes=2, seq_len=4096, global_batch=64,
                  mapping=Mapping(dp=8, tp=2, zero=ZeroStage.OPTIMIZER,
                                  recompute=Recompute.SELECTIVE))
    path = folder / "plan.json"
    path.write_text(json.dumps(job.to_dict()), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_json_shape_is_the_golden_one(name: str, cli: Callable[..., Any], tmp_path: Path,
                                      golden: dict[str, Any], found: dict[str, Any]) -> None:
    places = {PLAN: str(_plan_file(tmp_path)), OUT: str(tmp_path / "out"),
              CASES: str(FIXTURES / "measurements" / "inference.csv")}
    argv = [places.get(a, a) for a in COMMANDS[name]]
    r = cli(*argv)
    assert r.code == 0, r.err
    got = shape(json.loads(r.out))
    found[name] = {"argv": COMMANDS[name], "shape": got}
    if UPDATE:
        return
    assert name in golden, f"{name} has no golden shape: regenerate (module docstring)"
    assert golden[name]["argv"] == COMMANDS[name], "the command changed: regenerate"
    changes = diff(golden[name]["shape"], got)
    assert not changes, (f"`accelmap {' '.join(COMMANDS[name])}` changed its JSON shape "
                         "(regenerate with ACCELMAP_UPDATE_SCHEMAS=1 if deliberate):\n"
                         + "\n".join(changes))


def test_golden_file_lists_every_command(golden: dict[str, Any], found: dict[str, Any]) -> None:
    """Runs last in this module: writes the golden file when regenerating; otherwise checks it
    holds no command this test no longer runs."""
    if UPDATE:
        assert set(found) == set(COMMANDS), "run the whole module to regenerate"
        GOLDEN.write_text(json.dumps(dict(sorted(found.items())), indent=1) + "\n",
                          encoding="utf-8")
        return
    assert sorted(golden) == sorted(COMMANDS)
