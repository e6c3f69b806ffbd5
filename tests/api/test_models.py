"""api.models: load, list, show and import models."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.errors import AmbiguousNameError, InputError, NotFoundError

HF = Path(__file__).parent.parent / "fixtures" / "hf"


def test_load_model_preset_and_forgiving_name(catalog: Catalog) -> None:
    assert api.load_model("llama-3.1-8b", catalog).id == "llama-3.1-8b"
    assert api.load_model("Llama 3.1 8B", catalog).id == "llama-3.1-8b"
    with pytest.raises(AmbiguousNameError, match="matches 3 models"):
        api.load_model("llama-3.1", catalog)
    with pytest.raises(NotFoundError, match="accelmap models list"):
        api.load_model("no-such-model-xyz", catalog)


def test_load_model_files(catalog: Catalog, tmp_path: Path) -> None:
    spec = api.load_model(str(HF / "llama-2-7b.json"), catalog)
    assert spec.n_layers == 32 and spec.d_model == 4096
    with pytest.raises(InputError, match="no such file"):
        api.load_model(str(tmp_path / "missing" / "config.json"), catalog)


def test_write_model_round_trips(catalog: Catalog, tmp_path: Path) -> None:
    spec = api.import_model(str(HF / "mixtral-8x7b-v0.1.json"), "my-mixtral")
    assert spec.id == "my-mixtral" and spec.is_moe
    out = api.models.write_model(spec, tmp_path / "deep" / "mix.yaml")
    data = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert data["kind"] == "model" and data["id"] == "my-mixtral"
    assert api.load_model(str(out), catalog) == spec


def test_list_models_sorted_and_filtered(catalog: Catalog) -> None:
    rows = api.list_models(catalog=catalog)
    assert len(rows) == len(catalog.models)
    assert [(r["family"], r["params"]) for r in rows] == sorted(
        (r["family"], r["params"]) for r in rows)
    llamas = api.list_models("LLAMA", catalog)
    assert llamas and all("llama" in r["family"] for r in llamas)
    assert [r["id"] for r in llamas] == [r["id"] for r in rows if "llama" in r["family"]]


def test_model_summary(catalog: Catalog) -> None:
    s = api.models.model_summary(catalog.models["deepseek-v3"])
    assert list(s) == ["id", "name", "family", "params", "active_params", "attention", "moe",
                       "layers", "d_model", "published_params"]
    assert s["moe"] and s["attention"] == "mla" and s["active_params"] < s["params"]
    assert s["params"] == api.models.model_summary(catalog.models["deepseek-v3"])["params"]


def test_model_details(catalog: Catalog) -> None:
    spec = catalog.models["llama-3.1-8b"]
    d = api.models.model_details(spec)
    assert d["seq_len"] == 4096  # min(max_seq_len, 4096)
    assert api.models.model_details(catalog.models["gpt3-125m"])["seq_len"] == 2048
    d8 = api.models.model_details(spec, 8192)
    assert d8["seq_len"] == 8192
    f = d8["flops_per_token"]
    assert f["training"] == pytest.approx(3 * f["forward"])
    assert f["forward"] > d["flops_per_token"]["forward"]  # attention grows with the context
    assert sum(d["param_breakdown"].values()) == d["params"]
    assert d["embedding_params"] + d["non_embedding_params"] == d["params"]
    assert sum(g["count"] for g in d["layers_detail"]) == spec.n_layers
    assert d["spec"]["id"] == "llama-3.1-8b" and "sources" not in d["spec"]


def test_model_details_layer_groups(catalog: Catalog) -> None:
    d = api.models.model_details(catalog.models["deepseek-v3"])
    kinds = [(g["layers"], g["kind"]) for g in d["layers_detail"]]
    assert kinds[0] == ([0, 2], "dense") and kinds[1][1] == "moe"
