"""validate --local: the PyTorch transformer built from a ModelSpec (exact parameter counts,
KV-cache correctness), scaling, a tiny real run with its rows, and the clear errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.errors import InputError
from accelmap.measure.local_run import LocalSettings, run_local, scale_spec
from accelmap.measure.records import Kind
from accelmap.measure.store import Store
from accelmap.models.params import count_params
from accelmap.models.schema import AttentionKind
from accelmap.units import DType

torch = pytest.importorskip("torch")

from accelmap.measure.torch_model import KVCache, Transformer, build, parameter_count  # noqa: E402

# Full-size presets cheap to build on the meta device (one per architecture family)
FULL = ("gpt3-125m", "llama-2-7b", "gemma-2-9b", "mixtral-8x7b", "gpt-j-6b", "phi-3-mini",
        "qwen3-8b", "mpt-7b")
# One preset per structural feature: learned positions + biases + tying, GQA + RoPE + gated,
# sliding window + 4 norms, MoE, MLA + shared experts + dense layers, parallel block + partial
# RoPE, ALiBi, qk-norm, MoE with shared-expert gate
KINDS = ("gpt3-125m", "llama-3.1-8b", "gemma-2-9b", "mixtral-8x7b", "deepseek-v3", "gpt-j-6b",
         "bloom-176b", "qwen3-8b", "qwen2-57b-a14b")


def _meta(spec: Any) -> Transformer:
    with torch.device("meta"):
        return Transformer(spec)


def test_parameter_count_equals_count_params_for_every_scaled_preset(catalog: Catalog) -> None:
    for mid, spec in catalog.models.items():
        tiny, _ = scale_spec(spec, "tiny")
        assert parameter_count(_meta(tiny)) == count_params(tiny).total, mid


@pytest.mark.parametrize("mid", FULL)
def test_parameter_count_equals_count_params_at_full_size(catalog: Catalog, mid: str) -> None:
    spec = catalog.models[mid]
    assert parameter_count(_meta(spec)) == count_params(spec).total
    if spec.published_params:
        assert parameter_count(_meta(spec)) == spec.published_params


def test_scale_keeps_the_architecture(catalog: Catalog) -> None:
    for mid in KINDS:
        spec = catalog.models[mid]
        tiny, note = scale_spec(spec, "tiny")
        assert count_params(tiny).total < 10e6, mid
        assert "scaled to tiny" in note
        assert tiny.ffn_kind is spec.ffn_kind and tiny.norm is spec.norm
        assert tiny.position is spec.position and tiny.tied_embeddings == spec.tied_embeddings
        assert (tiny.moe is None) == (spec.moe is None) and (tiny.mla is None) == (
            spec.mla is None)
        if spec.mla is None:
            assert tiny.attention_kind is spec.attention_kind
        if spec.moe is not None:
            assert tiny.n_moe_layers >= 1
    small, _ = scale_spec(catalog.models["llama-2-7b"], "small")
    assert 10e6 < count_params(small).total < 40e6
    assert small.attention_kind is AttentionKind.MHA
    gqa, _ = scale_spec(catalog.models["llama-3.1-8b"], "tiny")
    assert gqa.attention_kind is AttentionKind.GQA
    same, note = scale_spec(catalog.models["gpt3-125m"], "full")
    assert same is catalog.models["gpt3-125m"] and "full size" in note
    auto, _ = scale_spec(catalog.models["gpt3-125m"], "auto")
    assert auto.d_model == 256
    with pytest.raises(InputError, match="unknown scale"):
        scale_spec(same, "huge")


@pytest.mark.parametrize("mid", KINDS)
def test_kv_cache_decode_matches_the_full_forward(catalog: Catalog, mid: str) -> None:
    """Prefill n tokens, decode one: the logits equal a full forward over n + 1 tokens."""
    spec, _ = scale_spec(catalog.models[mid], "micro")
    model = build(spec).eval()
    tokens = torch.randint(0, spec.vocab_size, (2, 9), generator=torch.Generator().manual_seed(1))
    cache = KVCache.empty(spec, 2, 9, torch.float32, "cpu")
    with torch.inference_mode():
        full = model(tokens)[:, -1]
        model(tokens[:, :8], 0, cache, last_only=True)
        step = model(tokens[:, 8:], 8, cache)[:, -1]
    assert torch.allclose(full, step, atol=1e-4, rtol=1e-4)
    assert cache.bytes > 0


def _local_profile(store: Store) -> str:
    from accelmap.hardware.local import local_cpu

    store.save_profile(CalibrationProfile(
        name="test-cpu", accelerator_id=local_cpu().id, matmul_efficiency={DType.FP32: 0.5},
        bandwidth=10e9, source="synthetic, for the test"))
    return "test-cpu"


TINY_RUN = ("--scale", "tiny", "--steps", "2", "--warmup", "1", "--seq", "64", "--batch", "2",
            "--decode-tokens", "4", "--device", "cpu")


def test_validate_local_json_rows(cli: Callable[..., Any], tmp_path: Path,
                                  catalog: Catalog) -> None:
    db = tmp_path / "m.sqlite"
    profile = _local_profile(Store(db))
    r = cli("validate", "--local", "gpt3-125m", *TINY_RUN, "--db", str(db), "--profile",
            profile, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    rows = {row["row_id"]: row for row in data["rows"]}
    assert set(rows) == {"local/train", "local/train/memory", "local/prefill", "local/decode",
                         "local/inference/memory"}
    for row in rows.values():
        assert row["measured"] > 0 and row["predicted"] > 0, row
        assert row["abs_pct_error"] is not None and row["status"] == "ok"
        assert row["model_id"] == "gpt3-125m.tiny"
    assert rows["local/train"]["metric"] == "step_time_s" and rows["local/train"]["unit"] == "s"
    assert any("test-cpu" in n for n in rows["local/decode"]["notes"])
    summary = data["summary"]
    assert summary["n"] == 5 and set(summary["by_quantity"]) == {"time", "memory"}
    tiny, _ = scale_spec(catalog.models["gpt3-125m"], "tiny")
    assert data["run"]["params"] == count_params(tiny).total
    stored = Store(db).query(kind=Kind.LOCAL_RUN)
    assert sorted(m.unit for m in stored) == ["B", "B", "s", "s", "s"]
    assert {m.label.split()[0] for m in stored} == {"train", "prefill", "decode", "inference"}


def test_validate_local_table(cli: Callable[..., Any], tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    r = cli("validate", "--local", "gpt3-125m", *TINY_RUN, "--db", str(db), "--hw",
            "xeon-8480plus")
    assert r.code == 0, r.err
    assert "local/train" in r.out and "local/decode" in r.out and "3,152,896 parameters" in r.out


def test_local_cpu_without_bandwidth_fails_before_running(cli: Callable[..., Any],
                                                          tmp_path: Path) -> None:
    r = cli("validate", "--local", "gpt3-125m", *TINY_RUN, "--db", str(tmp_path / "m.sqlite"))
    assert r.code == 2 and "accelmap measure bandwidth" in r.err


def test_unknown_profile_and_both_inputs(cli: Callable[..., Any], tmp_path: Path) -> None:
    r = cli("validate", "--local", "gpt3-125m", "--db", str(tmp_path / "m.sqlite"),
            "--profile", "nope")
    assert r.code == 2 and "nope" in r.err
    r = cli("validate", "--local", "gpt3-125m", "--cases", "x.csv")
    assert r.code == 2 and "not both" in r.err


def test_missing_torch_names_the_extra(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(InputError, match=r"accelmap\[measure\]"):
        run_local(catalog.models["gpt3-125m"], LocalSettings(), "tiny")


def test_settings_and_lengths_are_checked(catalog: Catalog) -> None:
    with pytest.raises(InputError, match="batch"):
        LocalSettings(batch=0)
    with pytest.raises(InputError, match="max_seq_len"):
        run_local(catalog.models["gpt3-125m"], LocalSettings(seq=2040, decode_tokens=16), "tiny")


@pytest.mark.parametrize(("name", "gib", "expected"), [
    ("NVIDIA H100 80GB HBM3", 79.19, "h100-sxm5-80gb"),
    ("NVIDIA H100 PCIe", 79.6, "h100-pcie-80gb"),
    ("NVIDIA H100 NVL", 93.1, "h100-nvl"), ("NVIDIA H200", 139.8, "h200-sxm"),
    ("NVIDIA A100-SXM4-40GB", 39.4, "a100-sxm4-40gb"), ("NVIDIA A10", 22.0, "a10"),
    ("NVIDIA B200", 178.0, "b200"), ("AMD Instinct MI300X", 191.5, "mi300x"),
    ("Quadro RTX 8000", 48.0, None)])
def test_gpu_names_map_to_catalog_ids(catalog: Catalog, name: str, gib: float,
                                      expected: str | None) -> None:
    from accelmap.measure.torch_env import match_gpu

    acc = match_gpu(name, gib * 2**30, catalog)
    assert (acc.id if acc else None) == expected
