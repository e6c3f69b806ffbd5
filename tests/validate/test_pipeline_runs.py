"""Runs as frameworks split their pipelines and as in-house stacks ran them (issue 24): the run
format's split fields, ``vpp: interleaved`` with the stack's recipe, the stacks' silent-split
defaults, partial racks and the generic in-house stack -- each predicted, never refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from accelmap.catalog import Catalog
from accelmap.memory.band import MemoryFit
from accelmap.validate.canonical import read_runs, same_run, write_runs
from accelmap.validate.multi import plan_run
from accelmap.validate.predict import Status, predict_cases
from accelmap.validate.read import read_cases
from accelmap.validate.runs import TrainingRun, UnreadableRun
from accelmap.validate.stacks import Stack, recipe_vpp, silent_split

NONE: frozenset[str] = frozenset()
# Dubey et al. 2024 "The Llama 3 Herd of Models", sec. 3.3.2 and Table 4: 405B on 8,192 H100
# (TP 8, CP 1, PP 16, DP 64, seq 8192, 16M tokens per batch = 2048 sequences, 32 per DP rank),
# one layer fewer on the first and the last stage, interleaved in one-layer chunks (vpp 8), no
# activation checkpointing; 430 TFLOP/s per GPU (BF16).
LLAMA3_405B = {
    "id": "llama3-405b-8k", "source": "Dubey et al. 2024 Table 4",
    "accelerator": "h100-sxm5-80gb", "model": "llama-3.1-405b", "devices": 8192,
    "nodes": 1024, "tp": 8, "pp": 16, "cp": 1, "dp": 64, "vpp": 8, "recompute": "none",
    "first_stage_layers": 7, "last_stage_layers": 7, "precision": "bf16",
    "framework": "meta", "year": 2024, "seq_len": 8192, "global_batch": 2048,
    "micro_batch": 1, "metric": "tflops_per_device_model", "value": 430}


def _write(tmp_path: Path, *records: dict[str, object]) -> Path:
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(list(records), sort_keys=False))
    return path


def _predict(path: Path, catalog: Catalog) -> dict[str, object]:
    return {p.row_id: p for p in predict_cases(read_cases(path).cases, catalog, NONE)}


def test_llama3_405b_flagship_as_published(tmp_path: Path, catalog: Catalog) -> None:
    """Expressed exactly as published: predicted (not refused), the split the paper gives, the
    in-house stack's physics said, and the published 430 TFLOP/s compared (within 15 %)."""
    preds = _predict(_write(tmp_path, LLAMA3_405B), catalog)
    p = preds["llama3-405b-8k"]
    assert p.status is Status.OK, p.skipped_reason  # type: ignore[attr-defined]
    notes = " ".join(p.notes)  # type: ignore[attr-defined]
    assert "first_stage_layers=7 last_stage_layers=7" in notes and "vpp=8" in notes
    assert "in-house stack" in notes
    assert abs(p.signed_pct_error) <= 15, p.signed_pct_error  # type: ignore[attr-defined]


def test_split_fields_round_trip(tmp_path: Path) -> None:
    path = _write(tmp_path, LLAMA3_405B | {"id": "a", "vpp": "interleaved",
                                           "first_stage_layers": None,
                                           "last_stage_layers": None,
                                           "embedding_in_split": True, "loss_in_split": True})
    (run,) = read_runs(path)
    assert isinstance(run, TrainingRun), run
    assert run.interleaved and run.vpp is None and run.embedding_in_split and run.loss_in_split
    assert run.framework is Stack.OTHER and run.version == "meta"
    for suffix in (".yaml", ".csv"):
        (back,) = read_runs(write_runs([run], tmp_path / f"back{suffix}"))
        assert isinstance(back, TrainingRun) and same_run(run, back)


def test_misspelt_public_stack_is_refused_with_the_fix(tmp_path: Path) -> None:
    (run,) = read_runs(_write(tmp_path, LLAMA3_405B | {"framework": "megatorn 0.9"}))
    assert isinstance(run, UnreadableRun)
    assert "framework" in " ".join(run.lines())


def test_interleaved_without_a_count_takes_the_nemo_recipe(tmp_path: Path,
                                                          catalog: Catalog) -> None:
    """NeMo recipes/llama31_70b.py: pp 4, vpp 5; at pp 8 the recipe's 4 layers per chunk give
    vpp 2 (10 layers per stage: the largest vpp whose chunks hold >= 4 layers)."""
    assert recipe_vpp("llama-3.1-70b", 80, 4) == (5, "NeMo recipe llama31_70b.py (pp=4, vpp=5)")
    got = recipe_vpp("llama-3.1-70b", 80, 8)
    assert not isinstance(got, str) and got[0] == 2
    assert isinstance(recipe_vpp("llama-3.1-8b", 32, 4), str)  # no recipe: write vpp
    run = {"id": "nemo70", "source": "t", "accelerator": "h100-sxm5-80gb",
           "model": "llama-3.1-70b", "devices": 64, "nodes": 8, "tp": 4, "pp": 4, "cp": 2,
           "vpp": "interleaved", "precision": "bf16", "framework": "nemo 24.09",
           "seq_len": 8192, "global_batch": 128, "micro_batch": 1,
           "metric": "tflops_per_device_model", "value": 500}
    p = _predict(_write(tmp_path, run), catalog)["nemo70"]
    assert p.status is Status.OK, p.skipped_reason  # type: ignore[attr-defined]
    assert any("vpp=5 (NeMo recipe llama31_70b.py" in n for n in p.notes)  # type: ignore


def test_silent_split_defaults_per_stack() -> None:
    """126 layers over pp 8: torchtitan counts the embedding and output (128 / 8), NeMo's
    405B recipe sets account_for_embedding/loss, an in-house stack takes Llama 3's split,
    Megatron-LM without a recipe has none (the pipeline_split rule names the flags)."""
    both = {"embedding_in_split": True, "loss_in_split": True}
    assert silent_split(Stack.TORCHTITAN, "llama-3.1-405b", 126, 8, 1)[0] == both  # type: ignore
    assert silent_split(Stack.NEMO, "llama-3.1-405b", 126, 8, 2)[0] == both  # type: ignore
    assert silent_split(Stack.OTHER, "x", 126, 16, 1)[0] == {  # type: ignore[index]
        "first_stage_layers": 7, "last_stage_layers": 7}
    assert silent_split(Stack.MEGATRON_LM, "x", 126, 8, 1) is None
    assert silent_split(Stack.NEMO, "llama-3.1-70b", 80, 8, 1) is None  # even


def test_partial_rack_run_is_predicted(tmp_path: Path, catalog: Catalog) -> None:
    """256 GB200 of NVL72 racks (3 x 72 + 40) is a cluster, not a refusal."""
    run = {"id": "gb", "source": "t", "accelerator": "gb200", "model": "llama-3.1-70b",
           "devices": 256, "tp": 8, "pp": 1, "precision": "bf16",
           "framework": "megatron-lm 0.10", "seq_len": 8192, "global_batch": 256,
           "micro_batch": 1, "recompute": "full", "metric": "tflops_per_device_model",
           "value": 900}
    p = _predict(_write(tmp_path, run), catalog)["gb"]
    assert p.status is Status.OK, p.skipped_reason  # type: ignore[attr-defined]
    assert any("do not fill nodes of 72" in n for n in p.notes)  # type: ignore[attr-defined]


def test_in_house_fsdp_under_pipeline_runs_as_torchtitan(tmp_path: Path,
                                                         catalog: Catalog) -> None:
    """Llama 3's data parallelism is FSDP. Megatron-Core (the in-house stack's physics) has no
    FSDP under pp, so the run takes torchtitan's: parameters gathered once a step, gradients
    reduced on the last micro-batch, ZeRO-2's memory. Read as ZeRO-3 (gathered parameters and
    unsharded gradients on top of the sharded states) the 405B run was called "does not fit"
    at 104 GB of 85.5; plain 1F1B now fits."""
    run = {**LLAMA3_405B, "id": "llama3-405b-fsdp", "zero": "fsdp", "vpp": 1}
    p = _predict(_write(tmp_path, run), catalog)["llama3-405b-fsdp"]
    assert p.status is Status.OK, p.skipped_reason  # type: ignore[attr-defined]
    notes = " ".join(p.notes)  # type: ignore[attr-defined]
    assert "ZeRO-2's traffic" in notes and "zero=2" in notes
    assert p.fits is True  # type: ignore[attr-defined]


def test_flagship_file_is_predicted_and_fits(catalog: Catalog) -> None:
    """data/flagship_training.yaml (benchmarks/flagship_training.py): every flagship run,
    written as published (Llama 3 405B, MT-NLG 530B, BLOOM 176B, PaLM 540B, DeepSeek-V3,
    Nemotron-4 340B), is predicted and
    called fitting but the known gaps below (NOT_FIT), DeepSeek-V3 with its DualPipe; the
    Llama 3 rows (vpp 8 from sec. 3.3.2's
    one-slot chunks) within 15 % of Table 4 but the long-context one (a strict xfail below). The
    other rows' error is the benchmark's to print."""
    path = Path(__file__).resolve().parents[2] / "data" / "flagship_training.yaml"
    preds = _predict(path, catalog)
    assert len(preds) >= 12
    # DeepSeek-V3 runs DualPipe and its norm and up-projection recompute as published: it fits
    # (two stages' weights and gradients, 17 micro-batches of 4 layers on a middle device)
    ds = " ".join(preds["deepseek-v3-2048-h800"].notes)  # type: ignore[attr-defined]
    assert "schedule=dualpipe" in ds and "recompute=norm-up" in ds
    for rid, p in preds.items():
        assert p.status is Status.OK, (rid, p.skipped_reason)  # type: ignore[attr-defined]
        if rid not in NOT_FIT:
            assert p.fits is True, rid  # type: ignore[attr-defined]
    for rid in ("llama3-405b-8k-gpus", "llama3-405b-16k-gpus", "llama3-405b-16k-gpus-cp16"):
        assert "vpp=8" in " ".join(preds[rid].notes)  # type: ignore[attr-defined]
    for rid in ("llama3-405b-8k-gpus", "llama3-405b-16k-gpus"):
        assert abs(preds[rid].signed_pct_error) <= 15, rid  # type: ignore[attr-defined]


def test_flagship_long_context_run_within_15_percent(catalog: Catalog) -> None:
    """The 128K-sequence Llama 3 run (CP 16): within 15 % of Table 4's 380 TFLOP/s once its
    all-gather context parallelism is exposed as sec. 3.3.2 says (cp_comm: all-gather; it was
    +15.3 % with the K/V exchange hidden behind attention as a ring's is)."""
    pred = _flagship(catalog, "llama3-405b-16k-gpus-cp16")
    assert "cp-comm=allgather" in " ".join(pred.notes)  # type: ignore[attr-defined]
    assert abs(pred.signed_pct_error) <= 15


def test_flagship_8k_run_fits_with_the_allocator_reserve_given_back(catalog: Catalog) -> None:
    """The 8K-GPU run (32 micro-batches) holds 141 one-layer chunks on stage 1 under Megatron's
    depth-first interleaving (75 GB) plus the allocator reserve fitted on FSDP rows (17 GB):
    100 GB of 85.5 GB, 83 GB of live tensors. The reserve is what PyTorch's allocator keeps
    when it has room and gives back (free cached blocks, retry) when it has not
    (memory.band): the run is tight, not over."""
    est = _plan("llama3-405b-8k-gpus", catalog).estimate()
    assert float(est.memory.total) > est.memory.capacity * (1 + est.memory.band)  # reserve in
    assert est.memory_fit is MemoryFit.TIGHT and est.memory.reclaims and est.feasible
    assert _flagship(catalog, "llama3-405b-8k-gpus").fits is True


def test_megatron_deepspeed_flagships_add_gradients_up_as_their_deepspeed_did(
        catalog: Catalog) -> None:
    """BLOOM (2022, bf16) runs DeepSpeed's BF16_Optimizer, MT-NLG (2021) autograd's 16-bit
    accumulation; BLOOM was +16 % with Megatron-LM's fused accumulation and is within 15 %
    with its fp32 copies."""
    preds = _predict(Path(__file__).resolve().parents[2] / "data" / "flagship_training.yaml",
                     catalog)
    bloom = " ".join(preds["bloom-176b"].notes)  # type: ignore[attr-defined]
    mtnlg = " ".join(preds["mt-nlg-530b-280-nodes"].notes)  # type: ignore[attr-defined]
    assert "gradient accumulation fp32-copy" in bloom and "DeepSpeed >= 0.6.2" in bloom
    assert "gradient accumulation autograd" in mtnlg and "DeepSpeed < 0.6.2" in mtnlg
    assert "pipeline sends blocking:" in bloom  # split gradients from DeepSpeed 0.5.4
    assert abs(preds["bloom-176b"].signed_pct_error) <= 15  # type: ignore[attr-defined]


NOT_FIT: tuple[str, ...] = ()  # flagships predicted not to fit: none


def _plan(rid: str, catalog: Catalog) -> Any:
    """One row of data/flagship_training.yaml as the engine's plan."""
    path = Path(__file__).resolve().parents[2] / "data" / "flagship_training.yaml"
    run = next(r for r in read_cases(path).cases if r.id == rid)
    _base, plan, reasons, _notes = plan_run(run, catalog)
    assert plan is not None, reasons
    return plan


def _flagship(catalog: Catalog, rid: str) -> Any:
    """One row of data/flagship_training.yaml, predicted."""
    return _predict(Path(__file__).resolve().parents[2] / "data" / "flagship_training.yaml",
                    catalog)[rid]


# torchtitan's Table 5 (405B, FSDP 8 x TP 8 x PP 8 on 512 Grand Teton H100, local batch 32)
TORCHTITAN_PP = {
    "id": "tt-405b-pp8", "source": "torchtitan benchmarks Table 5",
    "accelerator": "h100-sxm5-96gb-hbm2e", "model": "llama-3.1-405b", "devices": 512,
    "nodes": 64, "tp": 8, "pp": 8, "cp": 1, "dp": 8, "zero": "fsdp", "precision": "bf16",
    "framework": "torchtitan", "year": 2024, "seq_len": 8192, "global_batch": 256,
    "recompute": "full", "metric": "tokens_per_s_per_device", "value": 100}


@pytest.mark.parametrize(("extra", "mb", "into"), [
    # December 2024 (torchtitan 9dec370): pp-degree micro-batches, interleaved or not
    ({}, 4, "into 8 micro-batches (torchtitan 2024: pp degree) = 4"),
    ({"vpp": 2}, 4, "into 8 micro-batches (torchtitan 2024: pp degree) = 4"),
    # PR #781 .. #1073 (2025-01 .. 2025-04): pp x stages per rank
    ({"vpp": 2, "framework": "torchtitan 25.02"}, 2,
     "into 16 micro-batches (torchtitan 2025-01..2025-04: pp x stages per rank) = 2"),
    # v0.1 on: pipeline_parallel_microbatch_size defaults to 1
    ({"framework": "torchtitan 0.1"}, 1, "micro-batch not stated: 1"),
])
def test_torchtitan_splits_the_local_batch_as_its_release_did(
        tmp_path: Path, catalog: Catalog, extra: dict[str, object], mb: int, into: str) -> None:
    """torchtitan build_pipeline_schedule with no micro-batch setting: a local batch of 32 runs
    as 8 micro-batches of 4 in the December 2024 benchmarks (n_microbatches = pp degree), not
    16 of 2 (the later pp x stages per rank rule) or 32 of 1 (the micro-batch size of v0.1 on)."""
    p = _predict(_write(tmp_path, TORCHTITAN_PP | extra), catalog)["tt-405b-pp8"]
    assert p.status is Status.OK, p.skipped_reason  # type: ignore[attr-defined]
    notes = " ".join(p.notes)  # type: ignore[attr-defined]
    assert into in notes
    assert f" mb={mb} " in notes


def test_torchtitan_interleaving_without_a_count_is_two_stages_per_rank(
        tmp_path: Path, catalog: Catalog) -> None:
    """torchtitan's own rule (generate_split_points: 2 stages per rank for a multi-stage
    schedule without split points), not a NeMo recipe's."""
    p = _predict(_write(tmp_path, TORCHTITAN_PP | {"schedule": "interleaved"}),
                 catalog)["tt-405b-pp8"]
    notes = " ".join(p.notes)  # type: ignore[attr-defined]
    assert "vpp=2 (torchtitan 2024: 2 stages per rank when no split is given)" in notes
    assert "NeMo" not in notes


def test_torchtitan_local_batch_that_does_not_split_over_the_stages_says_so(
        tmp_path: Path, catalog: Catalog) -> None:
    """20 sequences per rank do not split into 8 micro-batches: torchtitan raises; the row
    says why and falls back to the stack's micro-batch."""
    p = _predict(_write(tmp_path, TORCHTITAN_PP | {"global_batch": 160}),
                 catalog)["tt-405b-pp8"]
    assert "does not split over dp 8 into 8 micro-batches" in " ".join(p.notes)  # type: ignore[attr-defined]


def test_schedule_is_read_written_and_used(tmp_path: Path, catalog: Catalog) -> None:
    """schedule: the published pipeline schedule reaches the mapping and survives a round trip;
    interleaved without vpp takes the recipe's count; a one-chunk schedule with vpp > 1 is a
    row-level reason naming what to write; DeepSeek-V3's DualPipe reaches the mapping."""
    rows = [LLAMA3_405B | {"id": "zb", "schedule": "zero-bubble", "vpp": 1},
            LLAMA3_405B | {"id": "il", "schedule": "interleaved", "vpp": None,
                           "first_stage_layers": None, "last_stage_layers": None,
                           "model": "llama-3.1-70b", "pp": 4, "tp": 8, "dp": 256},
            LLAMA3_405B | {"id": "bad", "schedule": "gpipe"},
            LLAMA3_405B | {"id": "dual", "schedule": "dualpipe", "vpp": 1}]
    path = _write(tmp_path, *rows)
    runs = {r.id: r for r in read_runs(path)}
    assert isinstance(runs["zb"], TrainingRun) and runs["zb"].schedule == "zb-h1"
    assert isinstance(runs["il"], TrainingRun) and runs["il"].interleaved
    assert isinstance(runs["bad"], UnreadableRun)
    assert "write schedule: interleaved-1f1b, or vpp: 1" in " ".join(runs["bad"].lines())
    (back,) = read_runs(write_runs([runs["zb"]], tmp_path / "back.yaml"))
    assert isinstance(back, TrainingRun) and same_run(runs["zb"], back)
    preds = _predict(path, catalog)
    assert "schedule=zb-h1" in " ".join(preds["zb"].notes)  # type: ignore[attr-defined]
    assert "vpp=5" in " ".join(preds["il"].notes)  # type: ignore[attr-defined]
    assert "schedule=dualpipe" in " ".join(preds["dual"].notes)  # type: ignore[attr-defined]


def test_in_house_whole_local_batch_accumulates_when_it_does_not_fit(catalog: Catalog) -> None:
    """An in-house stack runs each rank's batch as one micro-batch (no gradient accumulation)
    unless that does not fit: PaLM written without its rematerialization holds 4 sequences a
    chip in one micro-batch only if it recomputes; with selective recompute it accumulates
    over micro-batches of 2, noted, and fits."""
    import dataclasses

    path = Path(__file__).resolve().parents[2] / "data" / "flagship_training.yaml"
    palm = next(r for r in read_cases(path).cases if r.id == "palm-540b")
    _base, full, _r, _full_notes = plan_run(palm, catalog)
    assert full is not None and int(full.mapping.micro_batch) == 4
    _base, sel, _r, notes = plan_run(dataclasses.replace(palm, recompute=None), catalog)
    assert sel is not None and int(sel.mapping.micro_batch) == 2
    assert any("does not fit: micro-batches of 2" in n for n in notes)
    assert sel.estimate().feasible


@pytest.mark.parametrize("rid", ["mt-nlg-530b-280-nodes", "mt-nlg-530b-350-nodes",
                                 "mt-nlg-530b-420-nodes"])
def test_mt_nlg_within_15_percent(catalog: Catalog, rid: str) -> None:
    """MT-NLG 530B on DeepSpeed's 2021 pipeline engine: its blocking sends, each tp rank's
    whole input gradient over the NIC (workload.PipeSends), were +18 ... +24 % without them."""
    pred = _flagship(catalog, rid)
    assert "pipeline sends blocking-whole-grad" in " ".join(pred.notes)  # type: ignore[attr-defined]
    assert abs(pred.signed_pct_error) <= 15
