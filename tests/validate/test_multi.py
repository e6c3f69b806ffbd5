"""Multi-device rows through the distributed engine: cluster and mapping from the row, the
stack's defaults, the A100 40GB variant by memory column, sanity bands, not-fit flags, the
fitting split of fitters/fit_training.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.cost.framework import Framework
from accelmap.cost.schedules import Schedule
from accelmap.mapping.plan import ZeroStage
from accelmap.units import DType
from accelmap.validate import layout as lay
from accelmap.validate.cases import Arch, Parallel, TrainingCase
from accelmap.validate.multi import NOT_FIT, training_metric
from accelmap.validate.predict import MetricKind, Status, predict_case, predict_cases
from accelmap.validate.read import read_cases
from accelmap.validate.report import summarize
from accelmap.validate.resolve import resolve_device
from accelmap.validate.stacks import DEFAULTS, Stack, stack_framework, training_stack
from accelmap.workload import Recompute

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "measurements"
NONE: frozenset[str] = frozenset()


def rows(name: str) -> dict[str, Any]:
    return {c.row_id: c for c in read_cases(FIXTURES / name).cases}


@pytest.fixture(scope="module")
def training() -> dict[str, Any]:
    return rows("training.csv")


def _layout(case: TrainingCase, catalog: Catalog, acc_id: str) -> tuple[Any, Any, list[str]]:
    notes: list[str] = []
    stack = training_stack(case.framework)
    assert stack is not None
    cluster = lay.build_cluster(catalog.accelerators[acc_id], case.parallel.devices or 1,
                                case.parallel.nodes, catalog).value
    m = lay.training_mapping(case, cluster, DEFAULTS[stack], notes)
    return cluster, m, notes


def test_nemo_row_cluster_and_mapping(catalog: Catalog, training: dict[str, Any]) -> None:
    cluster, m, notes = _layout(training["T0328"], catalog, "h100-sxm5-80gb")
    assert (cluster.nodes, cluster.devices_per_node) == (8, 8)
    assert cluster.origin == "preset dgx-h100"
    assert (m.dp, m.tp, m.pp, m.cp, m.virtual_stages) == (2, 4, 4, 2, 5)
    assert m.schedule is Schedule.INTERLEAVED and m.micro_batch == 1
    # NeMo launcher defaults where the row is silent: SP, distributed optimizer, no recompute,
    # TP comm overlap; each assumption noted
    assert m.sequence_parallel and m.tp_comm_overlap
    assert m.zero is ZeroStage.OPTIMIZER and m.recompute is Recompute.NONE
    assert any("recompute not stated" in n for n in notes)


def test_megatron_readme_splits_model_parallel_size(catalog: Catalog,
                                                    training: dict[str, Any]) -> None:
    # T0054: 1536 GPUs, DP 24, TP/PP '?': MP = 64 -> TP 8 inside the node x PP 8
    cluster, m, notes = _layout(training["T0054"], catalog, "a100-sxm4-80gb")
    assert (m.dp, m.tp, m.pp) == (24, 8, 8) and cluster.nodes == 192
    assert any("TP/PP split not stated" in n for n in notes)
    assert m.recompute is Recompute.FULL and m.zero is ZeroStage.NONE
    assert not m.sequence_parallel and m.micro_batch == 1
    p = predict_case(training["T0054"], catalog, NONE)
    assert p.metric == "hardware_tflops_per_device"  # Megatron Eq. 3 counts the recompute
    assert any("no FlashAttention" in n for n in p.notes)


def test_llm_foundry_row_fsdp_and_a100_40gb(catalog: Catalog, training: dict[str, Any]) -> None:
    case = training["T0240"]
    assert case.accelerator == "NVIDIA A100" and case.accel_mem_gb == 40
    p = predict_case(case, catalog, NONE)
    assert p.accelerator_id == "a100-sxm4-40gb" and p.framework == "fsdp"
    cluster, m, _ = _layout(case, catalog, "a100-sxm4-40gb")
    assert cluster.origin == "preset dgx-a100-40gb" and cluster.nodes == 8
    assert (m.dp, m.tp, m.zero, m.micro_batch) == (64, 1, ZeroStage.PARAMETERS, 2)
    assert m.recompute is Recompute.FULL
    assert lay.grad_dtype(case.precision, DEFAULTS[Stack.LLM_FOUNDRY]) is DType.BF16  # PURE
    sgo = _layout(training["T0113"], catalog, "h100-sxm5-80gb")[1]
    assert sgo.zero is ZeroStage.GRADIENTS  # SHARD_GRAD_OP


@pytest.mark.parametrize(("name", "mem", "expected"), [
    ("NVIDIA A100", 40.0, "a100-sxm4-40gb"),
    ("NVIDIA A100", 80.0, "a100-sxm4-80gb"),
    ("NVIDIA A100", None, "a100-sxm4-80gb"),
    ("NVIDIA H100 SXM", 40.0, "h100-sxm5-80gb"),  # no 40 GB variant: keep the default
])
def test_memory_column_picks_the_variant(catalog: Catalog, name: str, mem: float | None,
                                         expected: str) -> None:
    dev = resolve_device(name, catalog, memory_gb=mem)
    assert dev.value is not None and dev.value.acc.id == expected


def test_unverified_memory_is_not_used(catalog: Catalog) -> None:
    i = rows("inference.csv")["I0033"]  # accel_mem_GB "80?"
    assert "accel_mem_GB" in i.unverified
    assert predict_case(i, catalog, NONE).accelerator_id == "a100-sxm4-80gb"


@pytest.mark.parametrize(("file", "row_id"), [
    ("training.csv", "T0048"), ("training.csv", "T0058"), ("training.csv", "T0196"),
    ("training.csv", "T0240"), ("inference.csv", "I0009"), ("inference.csv", "I0206"),
])
def test_multi_device_row_within_2x(catalog: Catalog, file: str, row_id: str) -> None:
    p = predict_case(rows(file)[row_id], catalog, NONE)
    assert p.status is Status.OK, p.skipped_reason
    assert p.measured and p.predicted
    assert 0.5 < p.predicted / p.measured < 2.0, (p.predicted, p.measured)
    if p.kind is MetricKind.TRAINING:
        assert sum(p.breakdown.values()) == pytest.approx(1.0, rel=1e-6)
        assert any(n.startswith("step time:") for n in p.notes)


def test_inference_tp_row_uses_serving_mapping(catalog: Catalog) -> None:
    p = predict_case(rows("inference.csv")["I0010"], catalog, NONE)
    assert p.status is Status.OK and p.metric == "output_tokens_per_s_per_device"
    assert any("serving tp=4" in n for n in p.notes)


def _gpt3_on_one_node(**kw: Any) -> TrainingCase:
    base = dict(row_id="T9001", file="t.csv", line=2, source="test",
                accelerator="NVIDIA A100 SXM", model="GPT-3 (175B)",
                arch=Arch(96, 12288, 96, None, None, 51200), parallel=Parallel(8, 8, 1, 1),
                seq_len=2048, global_batch_seqs=8, precision="FP16",
                framework="Megatron-LM (Jan 2021)", achieved_tflops_per_device=100.0)
    return TrainingCase(**{**base, **kw})


def test_published_config_predicted_not_to_fit_is_kept_and_counted(catalog: Catalog) -> None:
    # 175B with Adam on 8 x 80 GB and no sharding cannot fit: predicted, flagged, counted
    p = predict_case(_gpt3_on_one_node(), catalog, NONE)
    assert p.status is Status.OK and p.predicted and p.fits is False
    assert any(n.startswith(NOT_FIT) for n in p.notes)
    s = summarize([p])
    assert s.not_fitting == ("T9001",) and s.by_source["test"].n_not_fit == 1


def test_unreadable_layouts_are_skipped_with_reason(catalog: Catalog,
                                                    training: dict[str, Any]) -> None:
    bad = predict_case(_gpt3_on_one_node(parallel=Parallel(8, 4, 1, 1)), catalog, NONE)
    assert bad.status is Status.SKIPPED and "ran on 8 devices" in str(bad.skipped_reason)
    odd = predict_case(_gpt3_on_one_node(model="GPT (test, 20 heads)",
                                         arch=Arch(24, 2560, 20, 20, 10240, 51200)),
                       catalog, NONE)  # 20 heads do not split over tp=8
    assert odd.status is Status.SKIPPED and "rejects the mapping" in str(odd.skipped_reason)
    no_dims = predict_case(dataclasses.replace(training["T0317"], model="GPT3-7.5T"), catalog, NONE)
    assert "no catalog preset" in str(no_dims.skipped_reason)


def test_multi_device_calibration_rows_are_not_scored(catalog: Catalog) -> None:
    cases = list(read_cases(FIXTURES / "training.csv").cases)
    plain = summarize(predict_cases(cases, catalog, NONE))
    cal = summarize(predict_cases(cases, catalog, frozenset({"T0048"})))
    assert cal.calibration_rows == ("T0048",)
    assert cal.by_phase["training"].n == plain.by_phase["training"].n - 1


def test_stacks_and_metrics() -> None:
    assert training_stack("NeMo 24.07 (Megatron-Core)") is Stack.NEMO
    assert training_stack("Megatron-LM (Jan 2021)") is Stack.MEGATRON_LM
    assert training_stack("MosaicML Composer/llm-foundry (FSDP)") is Stack.LLM_FOUNDRY
    assert training_stack("torchtitan (FSDP)") is Stack.TORCHTITAN
    assert training_stack("DeepSpeed") is Stack.DEEPSPEED
    assert training_stack("JAX (pjit)") is None
    assert stack_framework(Stack.TORCHTITAN, "torchtitan (FSDP + torch.compile)") is \
        Framework.TORCH_COMPILE
    assert stack_framework(Stack.LLM_FOUNDRY, "llm-foundry") is Framework.FSDP
    case = _gpt3_on_one_node()
    assert training_metric(case, Stack.MEGATRON_LM)[0] == "hardware_tflops_per_device"
    model = dataclasses.replace(case, tflops_definition="Model TFLOP/sec/GPU")
    assert training_metric(model, Stack.NEMO)[0] == "tflops_per_device"
    tokens = dataclasses.replace(case, achieved_tflops_per_device=None,
                                 tokens_per_s_per_device=10.0)
    assert training_metric(tokens, Stack.TORCHTITAN)[0] == "tokens_per_s_per_device"


@pytest.fixture(scope="module")
def fit(load_fitter: Callable[[str], ModuleType]) -> ModuleType:
    return load_fitter("fit_training")


def test_fitting_split_and_grid(fit: ModuleType) -> None:
    assert fit.is_fitting_row("T0048") and fit.is_fitting_row("T0392")
    assert not fit.is_fitting_row("T0049") and not fit.is_fitting_row("X")
    g = fit.grid("sustained_gemm_fraction")
    assert g[0] == 0.5 and g[-1] == 1.0 and len(g) == 51
    near = fit.grid("contention", 0.05, 0.0)
    assert near[0] == 0.0 and max(near) <= 0.25


def test_training_profiles_carry_named_features_not_fitted_factors(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-stack GEMM factor is gone: stacks differ by named features (overhead, fusion,
    attention kernel); the fitted physics is one table for every stack."""
    from accelmap.cost import efficiency
    from accelmap.cost import framework as fwmod
    from accelmap.cost.attention import AttentionKernel
    from accelmap.validate.stacks import defaults_for, stack_profile

    monkeypatch.setattr(fwmod, "_calibration", lambda: {"fsdp": {"kernel_overhead_s": 9e-6}})
    p = fwmod.profile("fsdp")
    assert p.kernel_overhead_s == 9e-6 and not p.fuses_elementwise
    assert not hasattr(p, "gemm_efficiency")
    d2023, _ = defaults_for(Stack.LLM_FOUNDRY, "0.3")
    d2024, _ = defaults_for(Stack.LLM_FOUNDRY, "", year=2024)
    assert stack_profile(d2023, Framework.FSDP).attention is AttentionKernel.FA1
    assert stack_profile(d2024, Framework.FSDP).attention is AttentionKernel.FA2
    # Transformer Engine's FusedAttention (cuDNN), which TE prefers on Hopper and later
    assert stack_profile(defaults_for(Stack.NEMO, "24.07")[0],
                         Framework.MEGATRON).attention is AttentionKernel.CUDNN
    monkeypatch.setattr(efficiency, "training_fit", lambda: {})
    assert efficiency.sustained_fraction() == 1.0


@pytest.mark.parametrize(("text", "stage", "group"), [
    ("PyTorch FSDP FULL_SHARD", ZeroStage.PARAMETERS, None),
    ("PyTorch FSDP SHARD_GRAD_OP", ZeroStage.GRADIENTS, None),
    ("FSDP2 (4)", ZeroStage.PARAMETERS, 4),  # shards over 4 of the 16 dp ranks
    ("FSDP2 (16)", ZeroStage.PARAMETERS, None),  # all of dp
    ("HYBRID_SHARD", ZeroStage.PARAMETERS, 8),  # inside the node by default
    ("distributed optimizer", ZeroStage.OPTIMIZER, None),
    ("", ZeroStage.OPTIMIZER, None),  # NeMo's default, noted
])
def test_sharding_words(text: str, stage: ZeroStage, group: int | None) -> None:
    notes: list[str] = []
    assert lay.zero_stage(text, 16, 8, DEFAULTS[Stack.NEMO], notes) == (stage, group)
    assert bool(notes) == (text in ("", "HYBRID_SHARD"))


def test_fit_loss_is_soft_l1_of_the_log_error(fit: ModuleType) -> None:
    """fit_training's objective (module doc), by hand: 0 for exact predictions, 2 (sqrt(2) -
    1) for a log error of one scale (0.1), linear in the error far beyond it."""
    import math
    from types import SimpleNamespace

    def preds(*ratios: float) -> list[Any]:
        return [SimpleNamespace(predicted=r, measured=1.0) for r in ratios]

    assert fit.log_error(preds(1.0, 1.0)) == 0.0
    assert fit.log_error(preds(math.exp(0.1))) == pytest.approx(2 * (math.sqrt(2) - 1))
    far, farther = fit.log_error(preds(math.exp(2.0))), fit.log_error(preds(math.exp(4.0)))
    assert farther / far == pytest.approx(2.0, rel=0.05)  # not 4: an outlier weighs linearly
