"""advise: shape issues costed by the engine; the 16-byte alignment rule behind them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.cost import alignment


def test_alignment_rule_and_vocab_padding_frameworks(catalog: Catalog) -> None:
    spec = api.load_model("gpt2", catalog)
    system = api.load_system(hw="a100-sxm4-80gb", catalog=catalog)
    padded = api.whatif.apply_whatif(catalog, api.what_if(["vocab_size=50304"]))
    spec64 = api.load_model("gpt2", padded)
    wl = api.training(12, 1024)
    for fw, faster in (("torch-compile", True), ("megatron", False)):
        t = api.estimate(spec, system, wl, framework=fw).step_time_s
        t64 = api.estimate(spec64, system, wl, framework=fw).step_time_s
        assert (t / t64 > 1.1) is faster, fw  # Megatron pads the vocabulary itself
    # a TPU pads to its MXU instead: the GPU rule leaves it alone
    tpu = catalog.accelerators["tpu-v5e"]
    est = api.estimate(spec, api.load_system(hw="tpu-v5e", catalog=catalog), wl)
    head = next(t.op for t in est.ops["forward"] if t.op.name == "lm_head")
    from accelmap.cost.framework import profile

    assert alignment.alignment_efficiency(head, tpu, profile("xla")) == 1.0


def test_advise_findings(catalog: Catalog) -> None:
    spec = api.load_model("gpt2", catalog)
    system = api.load_system(hw="a100-sxm4-80gb", catalog=catalog)
    adv = api.advise(spec, system, api.training(12, 1024), framework="torch-compile")
    vocab = next(f for f in adv.findings if f.kind == "vocab")
    assert vocab.fixed_value == 50304 and vocab.speedup and 1.1 < vocab.speedup < 1.5
    assert vocab.params_change == pytest.approx((50304 - 50257) * 768 / 124439808, rel=0.01)
    mix = api.load_model("mixtral-8x7b", catalog)
    tpu = api.load_system(hw="tpu-v5e", devices=8, catalog=catalog)
    adv = api.advise(mix, tpu, api.inference(16, 512, 128), api.serving_mapping(tp=8, ep=3))
    assert any(f.kind == "ep-experts" and f.fixed_value == 2 for f in adv.findings)
    assert any("multiple of 128" in ok for ok in adv.fine)  # the MXU side of a TPU


def test_cli_advise(cli: Callable[..., Any]) -> None:
    r = cli("advise", "gpt2", "--hw", "a100-sxm4-80gb", "--train", "--batch", "12", "--seq",
            "1024", "--framework", "torch-compile", "--json")
    assert r.code == 0, r.err
    kinds = [f["kind"] for f in json.loads(r.out)["findings"]]
    assert "vocab" in kinds
