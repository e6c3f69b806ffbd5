"""The transcription adapter: each misreading of the held-out runs as a case (fixture
tests/fixtures/runs/heldout_transcription.csv, transcription columns in plain words), and the
shared rows still read as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.mapping.plan import ZeroStage
from accelmap.units import DType
from accelmap.validate.cases import TrainingCase
from accelmap.validate.predict import Status, predict_case
from accelmap.validate.read import read_cases
from accelmap.validate.resolve import inference_precision
from accelmap.validate.runs import Metric, Problem
from accelmap.validate.stacks import Stack
from accelmap.validate.transcribe import from_case, read_framework, read_interleave, read_zero
from accelmap.workload import Fp8Scaling, Recompute

FIX = Path(__file__).parent.parent / "fixtures"
NONE: frozenset[str] = frozenset()


@pytest.fixture(scope="module")
def heldout() -> dict[str, Any]:
    return {c.row_id: c for c in read_cases(FIX / "runs" / "heldout_transcription.csv").cases}


@pytest.mark.parametrize(("text", "stage", "group", "in_node"), [
    # was ZeRO-3 (the word FSDP); FSDP off leaves the stack's default optimizer sharding
    ("Megatron FSDP=0", None, None, False),
    ("FSDP=0", None, None, False),
    ("fsdp: off", None, None, False),
    ("zero=0", ZeroStage.NONE, None, False),
    ("ZeRO stage 0", ZeroStage.NONE, None, False),
    ("none", ZeroStage.NONE, None, False),
    ("DDP", ZeroStage.NONE, None, False),
    ("FSDP=1", ZeroStage.PARAMETERS, None, False),
    ("zero: 2", ZeroStage.GRADIENTS, None, False),
    ("ZeRO-1", ZeroStage.OPTIMIZER, None, False),
    ("PyTorch FSDP FULL_SHARD", ZeroStage.PARAMETERS, None, False),
    ("PyTorch FSDP SHARD_GRAD_OP", ZeroStage.GRADIENTS, None, False),
    ("FSDP2 (8)", ZeroStage.PARAMETERS, 8, False),
    ("HYBRID_SHARD", ZeroStage.PARAMETERS, None, True),
    ("distributed optimizer", ZeroStage.OPTIMIZER, None, False),
    ("", None, None, False),
    ("some sharding", None, None, False),
])
def test_sharding_words(text: str, stage: ZeroStage | None, group: int | None,
                        in_node: bool) -> None:
    assert read_zero(text) == (stage, group, in_node)


@pytest.mark.parametrize(("text", "vpp"), [
    ("n/a", 1), ("N/A", 1), ("none", 1), ("-", 1), ("1F1B", 1), ("1", 1), ("5", 5),
    ("", None),  # not stated: the stack's default, noted
])
def test_interleave_words(text: str, vpp: int | None) -> None:
    assert read_interleave(text) == vpp


def test_interleaved_without_a_number_is_a_reason() -> None:
    p = read_interleave("Interleaved 1F1B")
    assert isinstance(p, Problem) and "without the number of virtual stages" in p.message


@pytest.mark.parametrize(("text", "stack", "version", "year"), [
    ("Megatron-LM (Jan 2021)", Stack.MEGATRON_LM, "", 2021),
    ("NeMo 24.07 (Megatron-Core)", Stack.NEMO, "24.07", None),
    ("Megatron-LM 0.10", Stack.MEGATRON_LM, "0.10", None),
    ("torchtitan (torch 2.8.0a0, compile)", Stack.TORCHTITAN, "", None),  # torch's, not its own
])
def test_framework_words(text: str, stack: Stack, version: str, year: int | None) -> None:
    assert read_framework(text) == (stack, version, year)


def test_heldout_names_resolve(catalog: Catalog, heldout: dict[str, TrainingCase]) -> None:
    preds = {rid: predict_case(c, catalog, NONE) for rid, c in heldout.items()}
    assert all(p.status is Status.OK for p in preds.values()), [
        p.skipped_reason for p in preds.values()]
    assert preds["H001"].accelerator_id == "h100-sxm5-80gb"  # NVIDIA H100-SXM5-80GB
    assert preds["H002"].accelerator_id == "gb200"  # NVIDIA GB200 (per GPU)
    # LLAMA3_70B with its dimensions: the Llama preset, not a GPT-style build
    assert preds["H001"].model_id == "llama-3.1-70b"
    assert preds["H002"].model_id == "llama-3-8b"  # its own preset (3.1 8B's shapes, 8K context)


def test_heldout_settings(heldout: dict[str, TrainingCase]) -> None:
    h1, h2, h3 = (from_case(heldout[k]) for k in ("H001", "H002", "H003"))
    assert h1.zero is None and h3.zero is None  # FSDP off: the stack's default sharding
    assert h2.zero is ZeroStage.NONE  # zero=0 is explicit
    assert any("FSDP off" in n for n in h1.reading_notes)
    assert (h1.vpp, h2.vpp, h3.vpp) == (1, 1, 1)  # n/a, none, -
    assert h1.metric is Metric.TFLOPS_MODEL and h1.year == 2024 and h2.version == "0.10"
    assert not h1.problems


def test_heldout_megatron_gets_its_releases_defaults(catalog: Catalog,
                                                     heldout: dict[str, TrainingCase]) -> None:
    # Megatron-LM run of 2024, no version: Megatron-Core defaults, not 2021's
    p = predict_case(heldout["H001"], catalog, NONE)
    notes = " | ".join(p.notes)
    assert "the run's year 2024 picks Megatron-Core" in notes
    assert "recompute not stated: selective" in notes
    assert "no FlashAttention" not in notes and "TP comm overlap on" in notes
    old = predict_case(read_cases(FIX / "measurements" / "training.csv").cases[0], catalog, NONE)
    assert "year 2021 picks Megatron-LM 2021 (v2)" in " | ".join(old.notes)
    assert any("no FlashAttention" in n for n in old.notes)


def test_shared_rows_read_as_before(catalog: Catalog) -> None:
    cases = {c.row_id: c for c in read_cases(FIX / "measurements" / "training.csv").cases}
    t48 = from_case(cases["T0048"])  # "? (MP=1)", "?" -> not stated
    assert (t48.tp, t48.pp, t48.dp, t48.vpp, t48.zero) == (None, None, 32, None, None)
    assert t48.framework is Stack.MEGATRON_LM and t48.year == 2021
    t240 = from_case(cases["T0240"])
    assert t240.recompute is Recompute.FULL and t240.grad_reduce is not None  # PURE
    t392 = from_case(cases["T0392"])
    assert t392.compile and t392.shard_group == 32 and t392.zero is ZeroStage.PARAMETERS
    assert t392.metric is Metric.TOKENS_PER_S_PER_DEVICE


def _shared_rows(tmp_path: Path, *ids: str) -> dict[str, Any]:
    """These rows of the bundled shared training transcription (data/reference), by id."""
    shared = FIX.parents[1] / "data" / "reference" / "measurements" / "training.csv"
    lines = shared.read_text().splitlines()
    rows = tmp_path / "training.csv"
    rows.write_text("\n".join([lines[0], *(x for x in lines if x.startswith(
        tuple(f"{i}," for i in ids)))]))
    return {c.row_id: c for c in read_cases(rows).cases}


def test_torchtitan_local_batch_gives_the_global_batch(tmp_path: Path) -> None:
    """torchtitan's Table 6 rows state "? (local batch size 8)" in the micro-batch cell and no
    global batch: 8 sequences per data-parallel rank, so 8 x dp (context-parallel ranks share
    them). It was read as no batch at all: 1 micro-batch under pp=8, an 85 % bubble."""
    cases = _shared_rows(tmp_path, "T0374", "T0377")
    t377 = cases["T0377"]  # dp 4, cp 2
    assert t377.micro_batch is None and t377.local_batch == 8
    run = from_case(t377)
    assert run.global_batch == 32 and run.micro_batch is None
    assert any("local batch size 8 x dp 4 = 32" in n for n in run.reading_notes)
    t374 = from_case(cases["T0374"])  # its global batch is stated (256 = 32 x 8): kept
    assert t374.global_batch == 256 and not any("local batch" in n for n in t374.reading_notes)


@pytest.mark.parametrize(("weights", "kv", "want_w", "want_kv"), [
    ("FP4", "FP8", DType.FP4, DType.FP8),        # NVIDIA MLPerf v5.1 "precision: fp4"
    ("MXFP4", "FP8", DType.MXFP4, DType.FP8),    # AMD MLPerf v5.1 open, W MXFP4 A MXFP4
    ("NVFP4", "FP8?", DType.NVFP4, DType.FP8),
    ("FP8", "FP8?", DType.FP8, DType.FP8),
])
def test_four_bit_precision_words(weights: str, kv: str, want_w: DType, want_kv: DType) -> None:
    prec = inference_precision(weights, kv, 8192)
    assert not isinstance(prec, str)
    assert (prec.weight, prec.act, prec.kv) == (want_w, want_w, want_kv)


def test_unknown_precision_word_is_a_reason() -> None:
    assert inference_precision("FP5", "FP8", 8192) == "precision 'FP5' is not understood"
    assert isinstance(inference_precision("fp4x", "", 8192), str)  # a word, not a prefix


def test_megatron_2020_runs_take_the_whole_local_batch(tmp_path: Path, catalog: Catalog) -> None:
    """Megatron-LM v1.x had no gradient accumulation (``--batch-size`` per model instance): the
    2020 README's 8B run on 1,024 A100 (tp 8, dp 128, batch 2048) ran 16 sequences per rank in
    one micro-batch, not 16 micro-batches of one. The 2021 (v2) rows keep micro-batch 1."""
    cases = _shared_rows(tmp_path, "T0070", "T0049")
    notes = " | ".join(predict_case(cases["T0070"], catalog, NONE).notes)
    assert "year 2020 picks Megatron-LM 2020 (v1.x)" in notes
    assert "global batch 2048 / dp 128 into the whole local batch = 16" in notes
    notes = " | ".join(predict_case(cases["T0049"], catalog, NONE).notes)
    assert "Megatron-LM 2021 (v2)" in notes and "micro-batch not stated: 1 " in notes


def test_a_local_batch_out_of_range_skips_its_row(tmp_path: Path) -> None:
    """"local batch size 0" was read as a global batch of 0 and stopped the whole validate run
    with "batch must be positive"; now the row is skipped with its reason."""
    shared = FIX.parents[1] / "data" / "reference" / "measurements" / "training.csv"
    lines = shared.read_text().splitlines()
    row = next(x for x in lines if x.startswith("T0377,"))
    rows = tmp_path / "training.csv"
    rows.write_text("\n".join([lines[0], row.replace("local batch size 8", "local batch size 0")]))
    (case,) = read_cases(rows).cases
    assert case.local_batch is None  # type: ignore[union-attr]
    assert any("local batch size 0 is not a whole number" in m for _, m in case.problems)


def test_a_captions_compile_is_the_runs(tmp_path: Path) -> None:
    """torchtitan's tables state torch.compile in the caption ("Table 4 (FSDP 32 x TP 8 +
    compile + Float8, ...)") and name only the compared variant in the framework cell
    ("torchtitan (2D)"): the run is compiled. A row that says compile nowhere is not."""
    cases = _shared_rows(tmp_path, "T0362", "T0372", "T0386")
    assert from_case(cases["T0372"]).compile and from_case(cases["T0386"]).compile
    assert not from_case(cases["T0362"]).compile  # Table 1, "torchtitan (FSDP)": eager


def test_torchtitan_eager_pays_its_written_out_passes(tmp_path: Path, catalog: Catalog) -> None:
    """torchtitan's Llama is written out (RMSNorm with x.float(), pow, mean, rsqrt; fp32 RoPE):
    eager, each line is a kernel and a pass, so its eager run is slower than its compiled one,
    as Table 1 measured (5,762 vs 6,667 tokens/s). Before, both were predicted alike."""
    cases = _shared_rows(tmp_path, "T0362", "T0363")
    eager = predict_case(cases["T0362"], catalog, NONE)
    compiled = predict_case(cases["T0363"], catalog, NONE)
    assert eager.predicted is not None and compiled.predicted is not None
    assert 1.1 < compiled.predicted / eager.predicted < 1.3


def test_torchao_recipe_names_give_the_fp8_scaling() -> None:
    """torchtitan's float8 tables name torchao's recipe in the precision column."""
    shared = FIX.parents[1] / "data" / "reference" / "measurements" / "training.csv"
    cases = {c.row_id: c for c in read_cases(shared).cases if isinstance(c, TrainingCase)}
    runs = {rid: from_case(cases[rid]) for rid in ("T0380", "T0382", "T0384")}
    assert [runs[r].fp8_scaling for r in ("T0380", "T0382", "T0384")] == [
        None, Fp8Scaling.TENSORWISE, Fp8Scaling.ROWWISE]
    assert runs["T0384"].precision is DType.FP8
