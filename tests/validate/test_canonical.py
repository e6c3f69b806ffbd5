"""The canonical run format: CSV and YAML read the same runs, both round-trip, unreadable records
say which field to write and how, the reader tells the formats apart by their keys, and the
example file predicts exactly what the transcription rows it rewrites predict."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap.catalog import Catalog
from accelmap.errors import InputError
from accelmap.mapping.plan import ZeroStage
from accelmap.units import DType
from accelmap.validate.canonical import (
    FIELDS,
    dumps,
    problem_lines,
    read_runs,
    run_of,
    same_run,
    to_record,
    write_runs,
)
from accelmap.validate.cases import CaseFormat, TrainingCase
from accelmap.validate.predict import Status, predict_case, predict_cases
from accelmap.validate.read import read_cases
from accelmap.validate.report import summarize
from accelmap.validate.runs import Family, Metric, TrainingRun, UnreadableRun
from accelmap.validate.stacks import Stack
from accelmap.validate.training import predict_run
from accelmap.validate.transcribe import from_case
from accelmap.workload import Fp8Scaling, Recompute

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
RUNS = FIX / "runs"
EXAMPLE = ROOT / "docs" / "examples" / "validate-runs.yaml"
NONE: frozenset[str] = frozenset()


def runs(path: Path) -> list[TrainingRun]:
    out = read_runs(path)
    assert all(isinstance(r, TrainingRun) for r in out), problem_lines(out)
    return [r for r in out if isinstance(r, TrainingRun)]


def test_yaml_and_csv_read_the_same_runs() -> None:
    ys, cs = runs(RUNS / "runs.yaml"), runs(RUNS / "runs.csv")
    assert len(ys) == 3 and all(same_run(y, c) for y, c in zip(ys, cs, strict=True))
    r1, r2, r3 = ys
    assert r1.framework is Stack.NEMO and r1.version == "24.07" and r1.vpp == 5
    assert r1.precision is DType.FP8 and r1.metric is Metric.TFLOPS_MODEL and r1.value == 734
    assert r2.zero is ZeroStage.OPTIMIZER and r2.recompute is Recompute.SELECTIVE
    assert r3.family is Family.LLAMA and r3.arch.ffn_hidden == 14336 and r3.model == ""
    assert r3.zero is ZeroStage.PARAMETERS and r3.shard_in_node and r3.shard_group is None
    assert (r3.compile, r3.sequence_parallel, r3.grad_reduce) == (True, False, DType.BF16)
    assert r3.metric is Metric.STEP_TIME_S and r3.year == 2025
    assert (r1.file, r1.line, r3.line) == ("runs.yaml", 1, 3)


@pytest.mark.parametrize("suffix", [".yaml", ".csv"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    original = runs(RUNS / "runs.yaml")
    back = runs(write_runs(original, tmp_path / f"again{suffix}"))
    assert all(same_run(a, b) for a, b in zip(original, back, strict=True))
    assert [to_record(r) for r in back] == [to_record(r) for r in original]


def test_every_transcription_row_round_trips_to_the_same_prediction(
        tmp_path: Path, catalog: Catalog) -> None:
    """What the adapter reads from a transcription row, the canonical format can carry: written
    out and read back, each row predicts the same number."""
    cases = [c for c in read_cases(FIX / "measurements" / "training.csv").cases
             if isinstance(c, TrainingCase)]
    adapted = [from_case(c) for c in cases]
    clean = [r for r in adapted if not r.problems and r.seq_len and r.value]
    back = {r.id: r for r in read_runs(write_runs(clean, tmp_path / "t.yaml"))}
    assert len(back) == len(clean) >= 10
    for case, run in zip(cases, adapted, strict=True):
        if run.id not in back:
            continue
        assert isinstance(back[run.id], TrainingRun)
        want, got = predict_case(case, catalog, NONE), predict_case(back[run.id], catalog, NONE)
        assert (got.status, got.metric, got.measured) == (want.status, want.metric, want.measured)
        assert got.predicted == want.predicted, run.id


def test_example_file_predicts_as_the_transcription(catalog: Catalog) -> None:
    example = read_cases(EXAMPLE)
    assert example.format is CaseFormat.RUNS and len(example.cases) == 10
    rows = {c.row_id: c for c in read_cases(FIX / "measurements" / "training.csv").cases}
    for run in example.cases:
        assert isinstance(run, TrainingRun), run
        mine, theirs = predict_case(run, catalog, NONE), predict_case(rows[run.id], catalog, NONE)
        assert mine.status is Status.OK and theirs.status is Status.OK, (
            mine.skipped_reason, theirs.skipped_reason)
        assert (mine.metric, mine.measured, mine.model_id, mine.accelerator_id) == (
            theirs.metric, theirs.measured, theirs.model_id, theirs.accelerator_id)
        assert mine.predicted == pytest.approx(theirs.predicted, rel=1e-12), run.id


def test_unreadable_records_say_which_field_and_how() -> None:
    read = read_runs(RUNS / "unreadable.yaml")
    assert all(isinstance(r, UnreadableRun) for r in read)
    lines = problem_lines(read)
    assert lines[0] == ("row U1: field 'zero': 'FSDP=0' is not one of 0, 1, 2, 3, fsdp; "
                        "write zero: 0, 1, 2, 3 or fsdp")
    assert "row U1: field 'vpp': 'n/a' is not a whole number >= 1; write vpp: 1" in lines
    expect = [
        "field 'framework': 'Megatron-LM (Jan 2021)' is not a framework name and version; "
        "write framework: megatron-lm and year: 2021",
        "write precision: fp16", "write recompute: per-op",
        "field 'tp': '? (MP=2)' is not a whole number >= 1; write tp: a whole number >= 1, "
        "or leave it out when not stated",
        "field 'value' is missing; write value: the measured number",
        "nemo version '1.22' is not one this table knows",
        "field 'zer0' is not a field of the run format; did you mean 'zero'?",
        "MFU is in percent, so 0.41 reads as 0.41 %; write value: 41",
        "field 'id': 'U1' appears twice (first in record 1); write a unique id",
        "row unreadable:5: field 'metric': 'MFU %' is not one of mfu,",
        "row unreadable:5: field 'model' is missing",
        "row unreadable:5: field 'seq_len' is missing",
    ]
    for text in expect:
        assert any(text in line for line in lines), text
    assert all(line.count("; write ") <= 1 and "Traceback" not in line for line in lines)


def test_unreadable_records_are_skipped_with_their_fix(catalog: Catalog) -> None:
    preds = predict_cases(read_cases(RUNS / "unreadable.yaml").cases, catalog, NONE)
    assert all(p.status is Status.SKIPPED for p in preds)
    assert preds[0].skipped_reason is not None
    assert preds[0].skipped_reason.startswith("field 'zero': 'FSDP=0'")
    # the summary groups by the first problem and keeps its fix with it
    first = next(iter(summarize(preds).skipped))
    assert first == ("field 'zero': 'FSDP=0' is not one of 0, 1, 2, 3, fsdp; "
                     "write zero: 0, 1, 2, 3 or fsdp")


def test_canonical_runs_predict(catalog: Catalog) -> None:
    preds = {p.row_id: p for p in predict_cases(read_cases(RUNS / "runs.yaml").cases, catalog,
                                                NONE)}
    assert all(p.status is Status.OK for p in preds.values()), [
        p.skipped_reason for p in preds.values()]
    assert preds["R1"].model_id == "llama-3.1-70b" and preds["R1"].accelerator_id == \
        "h100-sxm5-80gb"
    assert preds["R2"].accelerator_id == "gb200" and preds["R2"].metric == "mfu"
    assert preds["R2"].unit == "%" and 1 < (preds["R2"].predicted or 0) < 100
    r3 = preds["R3"]
    assert r3.metric == "step_time_s" and not r3.higher_is_better
    assert any("Llama style" in n for n in r3.notes)
    assert any("HSDP shard group: the node (8 devices)" in n for n in r3.notes)


def test_format_detection_and_bad_files(tmp_path: Path) -> None:
    assert read_cases(RUNS / "runs.csv").format is CaseFormat.RUNS
    assert read_cases(RUNS / "heldout_transcription.csv").format is CaseFormat.TRAINING
    bad_col = tmp_path / "bad.csv"
    bad_col.write_text("accelerator,metric,value,zer0\nh100,mfu,40,1\n")
    with pytest.raises(InputError, match=r"column 'zer0'.*did you mean 'zero'"):
        read_cases(bad_col)
    not_list = tmp_path / "x.yaml"
    not_list.write_text("accelerator: h100\n")
    with pytest.raises(InputError, match="list of runs"):
        read_cases(not_list)
    broken = tmp_path / "y.yml"
    broken.write_text("- id: [\n")
    with pytest.raises(InputError, match="not valid YAML"):
        read_cases(broken)
    empty = tmp_path / "z.yaml"
    empty.write_text("[]\n")
    with pytest.raises(InputError, match="holds no runs"):
        read_cases(empty)


def test_fields_documented() -> None:
    doc = (ROOT / "docs" / "validate-format.md").read_text()
    for name in FIELDS:
        assert f"`{name}`" in doc, name
    for m in Metric:
        assert f"`{m.value}`" in doc
    assert "```yaml" in doc and "```csv" in doc
    assert dumps([], True).strip() == "[]"


def test_fp8_scaling_field(catalog: Catalog) -> None:
    """``fp8_scaling: rowwise`` is read, costs more than tensor-wise scaling, needs fp8, and a
    wrong word is refused with the words that work."""
    base = {"id": "r1", "accelerator": "h100-sxm5-80gb", "model": "llama-3.1-8b",
            "devices": 8, "dp": 8, "zero": "fsdp", "precision": "fp8", "seq_len": 8192,
            "global_batch": 16, "framework": "torchtitan 0.1", "compile": "true",
            "metric": "tokens_per_s_per_device", "value": 5000}
    row = run_of({**base, "fp8_scaling": "rowwise"}, "r1", "x.yaml", 1)
    assert isinstance(row, TrainingRun) and row.fp8_scaling is Fp8Scaling.ROWWISE
    tensor = run_of(base, "r1", "x.yaml", 1)
    assert isinstance(tensor, TrainingRun) and tensor.fp8_scaling is None
    fast, slow = (predict_run(r, catalog, frozenset()) for r in (tensor, row))
    assert fast.predicted and slow.predicted and slow.predicted < fast.predicted
    bad = run_of({**base, "fp8_scaling": "colwise"}, "r1", "x.yaml", 1)
    assert any("tensorwise" in p.message for p in bad.problems)
    bf16 = run_of({**base, "precision": "bf16", "fp8_scaling": "rowwise"}, "r1", "x.yaml", 1)
    assert isinstance(bf16, TrainingRun)
    skipped = predict_run(bf16, catalog, frozenset())
    assert skipped.predicted is None and "needs precision fp8" in (skipped.skipped_reason or "")
