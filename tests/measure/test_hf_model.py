"""`validate --local --impl hf` (issue 23 part 5): the presets as Hugging Face transformers
builds them, counted against accelmap's parameter count, the two decode loops checked against
each other, and the refusals that come before any run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.errors import InputError
from accelmap.measure.local_run import LocalSettings, scale_spec
from accelmap.models.params import count_params

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from accelmap.measure import hf_model  # noqa: E402  (needs transformers)


@pytest.mark.parametrize(("model", "cls"), [
    ("llama-3.1-8b", "LlamaConfig"), ("llama-3.2-1b", "LlamaConfig"),
    ("qwen2.5-7b", "Qwen2Config"), ("qwen3-8b", "Qwen3Config"),
    ("mistral-7b", "MistralConfig")])
def test_config_class_and_shape(catalog: Catalog, model: str, cls: str) -> None:
    spec = catalog.models[model]
    cfg = hf_model.hf_config(spec)
    assert type(cfg).__name__ == cls
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size,
            cfg.num_attention_heads, cfg.num_key_value_heads) == (
        spec.n_layers, spec.d_model, spec.ffn_dim, spec.n_heads, spec.kv_heads)


@pytest.mark.parametrize("model", ["llama-3.2-1b", "qwen3-8b", "qwen2.5-7b", "mistral-7b"])
def test_built_parameters_equal_accelmaps_count(catalog: Catalog, model: str) -> None:
    # the tiny scale keeps the architecture (biases, q/k norms, tying): transformers' module
    # tree must hold exactly the parameters accelmap counts for that spec
    spec, _ = scale_spec(catalog.models[model], "tiny")
    built = hf_model.build(spec, torch.device("cpu"), torch.float32)
    unique = {id(p): p.numel() for p in built.parameters()}
    assert sum(unique.values()) == count_params(spec).total


@pytest.mark.parametrize("model", ["gpt3-125m", "mixtral-8x7b", "deepseek-v3", "gpt-oss-20b"])
def test_shapes_transformers_llama_family_does_not_build(catalog: Catalog, model: str) -> None:
    with pytest.raises(InputError, match="--impl accelmap") as e:
        hf_model.hf_config(catalog.models[model])
    assert "\n" not in str(e.value)


def test_static_compiled_loop_decodes_the_eager_loops_tokens(catalog: Catalog) -> None:
    """Greedy decode over a StaticCache under torch.compile must produce the tokens the eager
    DynamicCache loop produces from the same weights (compiled with the 'eager' backend here:
    the loop and the cache positions are what is checked, not Inductor's code)."""
    spec, _ = scale_spec(catalog.models["llama-3.2-1b"], "micro")
    torch.manual_seed(0)
    model = hf_model.build(spec, torch.device("cpu"), torch.float32).eval()
    prompt = torch.randint(0, spec.vocab_size, (2, 8))
    eager, static = (hf_model.eager_loop(model, prompt, 14),
                     hf_model.static_loop(model, prompt, 14, backend="eager"))
    tokens = []
    for loop in (eager, static):
        out = []
        with torch.inference_mode():
            loop.prefill()
            for pos in range(8, 14):
                loop.step(pos)
                out.append(loop.state["next"].clone())
        tokens.append(torch.stack(out))
    assert torch.equal(tokens[0], tokens[1])


def test_settings_refuse_compiled_decode_without_hf() -> None:
    with pytest.raises(InputError, match="--impl hf"):
        LocalSettings(compiled_decode=True)
    with pytest.raises(InputError, match="unknown --impl"):
        LocalSettings(impl="vllm")


def test_cli_runs_transformers_and_refuses_other_shapes(cli: Callable[..., Any],
                                                        tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    tiny = ("--scale", "tiny", "--steps", "1", "--warmup", "1", "--seq", "32", "--batch", "1",
            "--decode-tokens", "2", "--device", "cpu", "--hw", "xeon-8480plus", "--db", str(db))
    r = cli("validate", "--local", "gpt3-125m", "--impl", "hf", *tiny)
    assert r.code == 2 and "--impl accelmap" in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("validate", "--local", "llama-3.2-1b", "--impl", "hf", *tiny, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    rows = {row["row_id"]: row for row in data["rows"]}
    assert {"local/train", "local/prefill", "local/decode"} <= set(rows)
    assert all(rows[k]["measured"] > 0 for k in ("local/train", "local/prefill", "local/decode"))
    assert data["run"]["settings"]["impl"] == "hf"
    assert any("Hugging Face transformers" in n for n in rows["local/decode"]["notes"])


def test_compiled_decode_is_predicted_faster_than_eager_on_a_gpu(catalog: Catalog) -> None:
    """A 1B model's batch-1 decode on an H200 is host-bound eager (hundreds of dispatched ops
    per step); one CUDA-graph replay per step removes the dispatches, so the compiled row's
    prediction is the faster one, even though it attends over the padded cache length."""
    from accelmap.validate.local import compiled_tpot, device_for, local_estimates

    spec = catalog.models["llama-3.2-1b"]
    s = LocalSettings(device="cuda", dtype="bf16", batch=1, seq=512, decode_tokens=64,
                      impl="hf", compiled_decode=True)
    acc = catalog.accelerators["h200-sxm"]
    _, _, predicted, _ = local_estimates(spec, s, acc, "cuda")
    compiled = compiled_tpot(spec, s, device_for(acc))
    assert 0 < compiled < predicted["decode"]
