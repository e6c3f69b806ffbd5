"""LoRA / QLoRA fine-tuning: adapter counts against PEFT's published figures, frozen weights in
the operator graph and the memory tree, the published QLoRA and LoRA cases, the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.models.geometry import Geometry
from accelmap.ops.adapters import adapter_params
from accelmap.ops.graph import Stage
from accelmap.workload import (
    ALL_LINEAR,
    NF4_BITS,
    Adapters,
    Finetune,
    LoraTarget,
    Training,
)

QV = frozenset({LoraTarget.Q, LoraTarget.V})


def _params(catalog: Catalog, model: str) -> float:
    from accelmap.models.params import count_params

    return float(count_params(Geometry.of(catalog.models[model])).total)


def test_adapter_counts_match_peft(catalog: Catalog) -> None:
    # PEFT's print_trainable_parameters(): Llama-2-7B with r=8 on q_proj, v_proj gives
    # "trainable params: 4,194,304" (PEFT README / LoRA guide); Llama-3-8B with r=8 on every
    # linear layer of the blocks, 20,971,520
    assert adapter_params(Geometry.of(catalog.models["llama-2-7b"]), QV, 8) == 4_194_304
    assert adapter_params(Geometry.of(catalog.models["llama-3.1-8b"]), ALL_LINEAR, 8) \
        == 20_971_520


def test_adapters_split_with_tensor_parallelism(catalog: Catalog) -> None:
    geo = Geometry.of(catalog.models["llama-3.1-70b"])
    whole = adapter_params(geo, ALL_LINEAR, 16)
    shard = adapter_params(geo.shard(8, 1), ALL_LINEAR, 16)
    # one side of each adapter is split, the other whole: more than 1/8 of the total, less
    # than all of it
    assert whole / 8 < shard < whole / 2


def test_qlora_base_bytes() -> None:
    ad = Adapters(method=Finetune.QLORA)
    # Dettmers et al. 2023 sec. 3: double quantization brings the constants from 0.5 to
    # 0.127 bit per parameter
    assert ad.base_bytes_per_param == pytest.approx((NF4_BITS + 0.127) / 8, abs=1e-4)
    assert Adapters(method=Finetune.QLORA, double_quant=False).base_bytes_per_param == 4.5 / 8
    assert Adapters().base_bytes_per_param is None


def _train(catalog: Catalog, model: str, hw: str, ad: Adapters | None, **kw: Any) -> Any:
    system = api.load_system(hw, catalog=catalog)
    wl = api.training(kw.pop("batch", 4), kw.pop("seq", 2048), finetune=ad, **kw)
    return api.estimate(catalog.models[model], system, wl, api.mapping(system, wl))


def test_frozen_base_has_no_weight_gradients(catalog: Catalog) -> None:
    est = _train(catalog, "llama-3.1-8b", "h100-sxm5-80gb", Adapters(targets=QV))
    wgrads = [t.op.name for t in est.ops["backward"] if t.op.stage is Stage.BACKWARD_WGRAD]
    assert wgrads and all("/lora_" in n for n in wgrads)
    dgrads = {t.op.name for t in est.ops["backward"] if t.op.stage is Stage.BACKWARD_DGRAD}
    assert "layers/mlp/down/dgrad" in dgrads  # the activation gradient still flows
    items = est.memory.items
    assert items["frozen_weights"] == pytest.approx(
        2 * _params(catalog, "llama-3.1-8b"), rel=0.01)
    # gradients and optimizer states of the 3.4M adapters only
    assert items["gradients"] < 0.1e9 and items["optimizer/states"] < 0.1e9


def test_lora_is_faster_than_full_but_not_by_more_than_the_saved_wgrad(
        catalog: Catalog) -> None:
    full = _train(catalog, "llama-3.1-8b", "h100-sxm5-80gb", None, batch=2)
    lora = _train(catalog, "llama-3.1-8b", "h100-sxm5-80gb", Adapters(targets=QV), batch=2)
    assert lora.step_time_s < full.step_time_s

    def compute(est: Any) -> float:
        return sum(float(t.total_s) for t in (*est.ops["forward"], *est.ops["backward"]))

    # forward + backward: 6 -> 4 FLOPs per parameter at most (the optimizer step, which LoRA
    # all but drops, comes on top)
    assert 1.1 < compute(full) / compute(lora) < 1.5
    assert lora.memory.total < full.memory.total / 2


def test_qlora_dequantizes_in_forward_and_backward(catalog: Catalog) -> None:
    est = _train(catalog, "llama-3.1-8b", "h100-sxm5-80gb", Adapters(method=Finetune.QLORA))
    names = [t.op.name for t in est.ops["forward"]] + [t.op.name for t in est.ops["backward"]]
    assert "layers/mlp/up/dequant" in names and "layers/mlp/up/dequant/backward" in names
    assert not any(n.startswith("lm_head/dequant") for n in names)  # the head stays 16-bit
    # 8B in NF4 + the 16-bit embedding and head: ~5.7 GB
    assert 5.0e9 < est.memory.items["frozen_weights"] < 6.5e9


def test_qlora_65b_fits_one_48gb_gpu(catalog: Catalog) -> None:
    # Dettmers et al. 2023, abstract: "finetune a 65B parameter model on a single 48GB GPU"
    # (r = 64 on all linear layers, paged AdamW, gradient checkpointing, batch 1)
    est = _train(catalog, "llama-65b", "l40s", Adapters(method=Finetune.QLORA, rank=64,
                                                         paged_optimizer=True),
                 batch=1, seq=512, recompute="full")
    assert est.feasible
    assert est.memory.total < est.memory.capacity
    # and a 16-bit LoRA of the same model does not
    lora = _train(catalog, "llama-65b", "l40s", Adapters(rank=64), batch=1, seq=512,
                  recompute="full")
    assert not lora.feasible


def test_finetune_model_flops_follow_nemo(catalog: Catalog) -> None:
    full = _train(catalog, "llama-2-7b", "h100-sxm5-80gb", None, batch=1)
    lora = _train(catalog, "llama-2-7b", "h100-sxm5-80gb", Adapters(targets=QV), batch=1)
    per_tok = lora.model_flops_per_step / (1 * 2048)
    n = _params(catalog, "llama-2-7b")
    assert per_tok == pytest.approx(full.model_flops_per_step / 2048 - 2 * (n - 32000 * 4096),
                                    rel=0.02)


@settings(max_examples=40, deadline=None)
@given(rank=st.sampled_from([1, 4, 8, 16, 64, 256]),
       targets=st.sets(st.sampled_from(list(LoraTarget)), min_size=1),
       method=st.sampled_from([Finetune.LORA, Finetune.QLORA]))
def test_adapters_never_cost_more_memory_than_full(catalog: Catalog, rank: int,
                                                    targets: set[LoraTarget],
                                                    method: Finetune) -> None:
    ad = Adapters(method=method, rank=rank, targets=frozenset(targets))
    full = _train(catalog, "llama-2-7b", "a100-sxm4-80gb", None, batch=1, seq=1024)
    tuned = _train(catalog, "llama-2-7b", "a100-sxm4-80gb", ad, batch=1, seq=1024)
    assert tuned.memory.total < full.memory.total
    assert tuned.step_time_s > 0 and tuned.tokens_per_s > 0
    if method is Finetune.LORA:
        assert tuned.step_time_s < full.step_time_s


def test_nemo_lora_row_is_predicted() -> None:
    from accelmap.validate.resolve import NEMO_LORA, run_adapters
    from accelmap.validate.runs import TrainingRun
    from accelmap.validate.stacks import Stack

    run = TrainingRun(id="a", model="LLAMA2-7B LoRA (SQuAD v1.1 packed)")
    assert run_adapters(run)[0] == Adapters()
    nemo = TrainingRun(id="b", model="LLAMA2-7B LoRA", framework=Stack.NEMO)
    assert run_adapters(nemo)[0] == NEMO_LORA
    assert run_adapters(TrainingRun(id="c", model="LLAMA2-7B"))[0] is None


def test_lora_name_resolves_to_its_base_model(catalog: Catalog) -> None:
    from accelmap.validate.resolve import model_preset

    assert model_preset("LLAMA2-7B LoRA (SQuAD v1.1 packed)", catalog)[0] == "llama-2-7b"


def test_cli_finetune(cli: Callable[..., Any]) -> None:
    r = cli("estimate", "llama-3.1-8b", "--hw", "a10g", "--train", "--finetune", "qlora",
            "--lora-rank", "64", "--batch", "2", "--seq", "1024", "--recompute", "full",
            "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    items = data["memory"]["items"] if "items" in data["memory"] else data["memory"]
    assert "frozen_weights" in json.dumps(items)
    bad = cli("estimate", "llama-3.1-8b", "--hw", "a10g", "--serve", "--finetune", "lora")
    assert bad.code == 2 and "--train" in bad.err and "Traceback" not in bad.err
    bad = cli("estimate", "llama-3.1-8b", "--hw", "a10g", "--train", "--finetune", "lora",
              "--lora-targets", "q,bogus")
    assert bad.code == 2 and "bogus" in bad.err
    bad = cli("estimate", "llama-3.1-8b", "--hw", "a10g", "--train", "--lora-rank", "4")
    assert bad.code == 2 and "--finetune" in bad.err


def test_plan_carries_the_finetune(cli: Callable[..., Any]) -> None:
    r = cli("plan", "llama-2-7b", "--cluster", "2xH100", "--train", "--finetune", "lora",
            "--lora-targets", "q_proj,v_proj", "--seq", "2048", "--global-batch-tokens", "16K",
            "--top", "2", "--json")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    assert job["finetune"] == "lora" and job["lora_rank"] == 8
    assert job["lora_targets"] == ["q", "v"]


def test_training_rejects_adapters_without_a_method() -> None:
    with pytest.raises(Exception, match="lora or qlora"):
        Adapters(method=Finetune.FULL)
    assert Training().finetune is Finetune.FULL


@pytest.mark.parametrize("layout", [dict(tp=2, pp=2), dict(tp=1, pp=1, zero=3),
                                    dict(tp=2, pp=2, zero=1)])
def test_lora_under_every_mapping(catalog: Catalog, layout: dict[str, int]) -> None:
    system = api.load_system(cluster="8xH100", catalog=catalog)
    spec = catalog.models["llama-2-13b"]
    wl_full = api.training(32, 2048)
    wl = api.training(32, 2048, finetune=Adapters(rank=16))
    full = api.estimate(spec, system, wl_full, api.mapping(system, wl_full, **layout))
    lora = api.estimate(spec, system, wl, api.mapping(system, wl, **layout))
    assert lora.feasible and lora.step_time_s < full.step_time_s
    frozen = lora.memory.items["frozen_weights"]
    # each device holds its share of the 16-bit base: 1/(tp x pp), or 1/8 under ZeRO-3
    share = 1 / (layout["tp"] * layout["pp"]) if layout.get("zero", 0) < 3 else 1 / 8
    assert frozen == pytest.approx(2 * _params(catalog, "llama-2-13b") * share, rel=0.15)
    # only the adapters' gradients are reduced across data parallelism; ZeRO-3 still gathers
    # the frozen base layer by layer, so it saves only the reduce-scatters
    dp_full, dp_lora = (e.communication_s.get("dp", 0.0) for e in (full, lora))
    assert dp_lora < (0.8 if layout.get("zero", 0) >= 3 else 0.2) * max(dp_full, 1e-9)
