"""api.exports: the exporter list, plan files, and writing one launch configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.errors import InputError


def test_list_exporters_and_rows() -> None:
    found = api.list_exporters()
    names = [e.name for e in found]
    assert names == sorted(names) and {"megatron", "vllm", "deepspeed"} <= set(names)
    row = api.exports.exporter_row(next(e for e in found if e.name == "vllm"))
    assert set(row) == {"name", "framework", "version", "url", "plans"}
    assert row["plans"] == ["serve"]


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cat = api.load_catalog()
    spec = api.load_model("llama-3.1-8b", cat)
    [cl] = api.plan_clusters(cat, cluster="8xH100")
    req = api.plan_request(global_batch_tokens="1M", top=2)
    res = api.run_plan(spec, cl, req)
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(json.dumps({"model": spec.id, "cluster": cl.name,
                                "job": api.planning.plan_job(spec, cl, req).to_dict(),
                                **res.to_dict()}), encoding="utf-8")
    return path


def test_load_plan_and_export(plan_file: Path, tmp_path: Path, catalog: Catalog) -> None:
    job = api.load_plan(plan_file)
    assert job.model == "llama-3.1-8b" and job.kind.value == "train"
    second = api.load_plan(str(plan_file), 1)
    assert second.model == job.model and second.mapping_dict() != job.mapping_dict()
    done = api.export_plan("megatron", job, tmp_path / "out", catalog)
    assert done.exporter.name == "megatron" and done.out == tmp_path / "out"
    assert done.paths and all(p.is_file() for p in done.paths)
    assert {p.name for p in done.paths} == set(done.result.files)
    assert done.result.launch


def test_export_errors(plan_file: Path, tmp_path: Path, catalog: Catalog) -> None:
    job = api.load_plan(plan_file)
    with pytest.raises(InputError, match="vllm exports serve plans, not train plans"):
        api.export_plan("vllm", job, tmp_path, catalog)
    with pytest.raises(InputError, match="unknown export format 'nope'"):
        api.export_plan("nope", job, tmp_path, catalog)
    with pytest.raises(InputError, match="no such plan file"):
        api.load_plan(tmp_path / "none.json")
    with pytest.raises(InputError):
        api.load_plan(plan_file, 99)
