"""Reading measurement CSVs: format detection, robust numbers, malformed files, name tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap.catalog import Catalog
from accelmap.errors import InputError
from accelmap.units import DType
from accelmap.validate.cases import (
    Arch,
    CaseFormat,
    InferenceCase,
    MatmulCase,
    Parallel,
    TrainingCase,
    parse_int,
    parse_number,
)
from accelmap.validate.read import read_cases
from accelmap.validate.resolve import (
    inference_framework,
    inference_precision,
    parse_recompute,
    recompute_policy,
    resolve_device,
    resolve_model,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "measurements"


@pytest.mark.parametrize(("text", "expected"), [
    ("26150", (26150.0, True)),
    ("2,657", (2657.0, True)),
    ("80.3%", (80.3, True)),
    ("128256 (HF)", (128256.0, True)),
    ("8192?", (8192.0, False)),
    ("8192 (torchtitan llama3_8b default; not restated)?", (8192.0, False)),
    ("~32", (32.0, False)),
    ("2039 (A100 80GB SXM spec; not stated in source)?", (2039.0, False)),
    ("", (None, False)),
    ("?", (None, False)),
    ("n/a", (None, False)),
    ("? (MP=8)", (None, False)),
    ("? (not stated)", (None, False)),
    ("40 or 80 ?", (None, False)),
    ("FSDP2 (8)", (None, False)),
    (None, (None, False)),
])
def test_parse_number(text: str | None, expected: tuple[float | None, bool]) -> None:
    assert parse_number(text) == expected


def test_parse_int_rejects_fractions() -> None:
    assert parse_int("32") == (32, True)
    assert parse_int("1.5") == (None, False)


@pytest.mark.parametrize(("name", "fmt", "kind"), [
    ("inference.csv", CaseFormat.INFERENCE, InferenceCase),
    ("training.csv", CaseFormat.TRAINING, TrainingCase),
    ("matmul.csv", CaseFormat.MATMUL, MatmulCase),
])
def test_format_detected_from_header(name: str, fmt: CaseFormat, kind: type) -> None:
    cf = read_cases(FIXTURES / name)
    assert cf.format is fmt
    assert cf.cases and all(isinstance(c, kind) for c in cf.cases)


def test_inference_row_fields() -> None:
    rows = {c.row_id: c for c in read_cases(FIXTURES / "inference.csv").cases}
    r = rows["I0001"]
    assert isinstance(r, InferenceCase)
    assert (r.batch, r.input_len, r.output_len, r.metric_value) == (1024, 128, 128, 26150.0)
    assert r.parallel.devices == 1 and r.source == "trtllm_perf_v061"
    assert r.arch == Arch(28, 4096, 16, 16, None, 50400)
    spec = rows["I0225"]
    assert isinstance(spec, InferenceCase)
    assert spec.parallel.devices is None and spec.output_len is None


def test_unverified_cells_are_remembered() -> None:
    rows = {c.row_id: c for c in read_cases(FIXTURES / "training.csv").cases}
    t = rows["T0362"]
    assert isinstance(t, TrainingCase)
    assert t.seq_len == 8192 and "seq_len" in t.unverified
    m = {c.row_id: c for c in read_cases(FIXTURES / "matmul.csv").cases}["M0021"]
    assert "theoretical_peak" in m.unverified


def test_unknown_header_names_file_and_layouts(tmp_path: Path) -> None:
    f = tmp_path / "odd.csv"
    f.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InputError, match=r"odd\.csv: unknown measurement format: a inference "
                                         r"CSV needs the columns row_id, .*training: .*matmul: "
                                         ) as info:
        read_cases(f)
    assert len(str(info.value)) - len(str(f)) < 250


@pytest.mark.parametrize(("text", "match"), [
    ("", "empty"),
    ("row_id,accelerator,dtype,kind,measured_value,measured_unit\nM1,x,BF16,k,1\n",
     r":2: the row does not have the header's 6 fields"),
    ("row_id,accelerator,dtype,kind,measured_value,measured_unit\nM1,x,BF16,k,1,T,extra\n",
     r":2: the row does not have"),
    ("row_id,accelerator,dtype,kind,measured_value,measured_unit\nM1,x,B,k,1,T\nM1,x,B,k,1,T\n",
     "appears twice"),
    ("row_id,accelerator,dtype,kind,measured_value,measured_unit\n,x,B,k,1,T\n", "no row_id"),
])
def test_malformed_files(tmp_path: Path, text: str, match: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(InputError, match=match):
        read_cases(f)


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_cases(tmp_path / "nope.csv")
    b = tmp_path / "bin.csv"
    b.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(InputError, match="UTF-8"):
        read_cases(b)


def test_device_names_resolve_with_fraction(catalog: Catalog) -> None:
    gcd = resolve_device("AMD MI250X (one GCD)", catalog)
    assert gcd.value.acc.id == "mi250x" and gcd.value.fraction == 0.5
    assert resolve_device("NVIDIA A100 (80GB?)", catalog).value.acc.id == "a100-sxm4-80gb"
    assert "not in the catalog" in str(resolve_device("Mystery GPU", catalog).reason)
    grand_teton = resolve_device(
        "NVIDIA H100 (HBM2e 96GB variant, 500W power limit; Grand Teton)", catalog)
    assert grand_teton.value.acc.id == "h100-sxm5-96gb-hbm2e"
    assert any("uncertain" in n for n in grand_teton.notes)


def test_model_names_resolve_to_presets(catalog: Catalog) -> None:
    for name, pid in [("GPT-J 6B", "gpt-j-6b"), ("Llama 2 7B", "llama-2-7b"),
                      ("Llama-2-7B", "llama-2-7b"), ("Llama-3.1-8B", "llama-3.1-8b"),
                      ("Llama 2 70B", "llama-2-70b"), ("Llama 2 13B", "llama-2-13b")]:
        r = resolve_model(name, Arch(), catalog, None, megatron=False)
        assert r.value is not None and r.value.id == pid, name


def test_model_built_from_row_columns(catalog: Catalog) -> None:
    mpt = resolve_model("MPT-1b", Arch(24, 2048, 16, 16, 8192, 50368), catalog, 2048, False)
    assert mpt.value is not None and mpt.value.position.value == "alibi"
    assert mpt.value.tied_embeddings and "MPT style" in mpt.notes[0]
    gpt = resolve_model("GPT (291B)", Arch(90, 16384, 128, 128, 65536, 51200), catalog, 2048,
                        megatron=True)
    assert gpt.value is not None and gpt.value.tied_embeddings
    assert gpt.value.position.value == "learned" and gpt.value.ffn_kind.value == "plain"
    no_ffn = resolve_model("Some GPT", Arch(2, 64, 4, None, None, 100), catalog, None, False)
    assert no_ffn.value is not None and no_ffn.value.ffn_dim == 256
    assert any("4 x hidden" in n for n in no_ffn.notes)
    missing = resolve_model("GPT (1B, 1.16B)", Arch(24, 1920, 15, 15, 7680, None), catalog,
                            None, True)
    assert missing.value is None and "lacks vocab" in str(missing.reason)
    bad = resolve_model("Odd", Arch(2, 100, 3, None, 400, 10), catalog, None, False)
    assert bad.value is None and "invalid" in str(bad.reason)


def test_precision_and_framework_words() -> None:
    fp8 = inference_precision("FP8", "FP8?", 4096)
    assert not isinstance(fp8, str)
    assert (fp8.weight, fp8.act, fp8.kv) == (DType.FP8, DType.FP8, DType.FP8)
    assert any("unverified" in n for n in fp8.notes)
    int4 = inference_precision("int4 weight-only g32", "", 4096)
    assert not isinstance(int4, str)
    assert (int4.weight, int4.act, int4.quant_group) == (DType.INT4, DType.BF16, 32)
    int8 = inference_precision("int8 weight-only", "", 4096)
    assert not isinstance(int8, str) and int8.quant_group == 4096
    fp16 = inference_precision("FP16", "FP16", 4096)
    assert not isinstance(fp16, str) and fp16.kv is DType.FP16
    assert isinstance(inference_precision("mxfp6", "", 4096), str)
    assert inference_framework("TensorRT-LLM v0.6.1").value == "tensorrt-llm"
    assert inference_framework("gpt-fast (torch.compile, ROCm)").value == "torch-compile"
    assert inference_framework("vLLM 0.4").value == "vllm"
    assert inference_framework("HF transformers").value == "eager"


def test_devices_from_degrees_do_not_multiply_expert_parallelism() -> None:
    # EP=8 inside DP=8 is 8 GPUs (Megatron-Core carves expert groups out of data parallel)
    assert Parallel(tp=1, pp=1, dp=8, ep=8).devices == 8
    assert Parallel(tp=2, pp=4, dp=2, cp=2).devices == 32
    assert Parallel(num_devices=64, tp=8).devices == 64
    assert Parallel(tp=8, pp=1).devices is None


@pytest.mark.parametrize(("text", "want"), [
    ("selective", "selective"), ("Full", "full"), ("none", "none"), ("False", "none"),
    ("no", "none"), ("full?", None), ("", None),
])
def test_recompute_column_parsed_once(text: str, want: str | None) -> None:
    got = parse_recompute(text)
    assert (got.value if got else None) == want
    # a stated "False" is no recompute even for Megatron rows, whose unstated default is full
    if want is not None:
        assert recompute_policy(text, megatron=True)[0].value == want


@pytest.mark.parametrize(("column", "value", "message"), [
    ("metric_value", "-5", "metric_value '-5' is not a positive finite number"),
    ("metric_value", "1e400", "metric_value '1e400' is not a positive finite number"),
    ("metric_value", "0", "metric_value '0' is not a positive finite number"),
    ("num_devices", "0", "num_devices '0' is not a whole number in 1..1,000,000,000"),
    ("num_devices", "1e400", "num_devices '1e400' is not a whole number"),
    ("num_devices", "2.5", "num_devices '2.5' is not a whole number"),
])
def test_impossible_cells_skip_the_row_with_their_reason(
        tmp_path: Path, catalog: Catalog, column: str, value: str, message: str) -> None:
    """A negative, zero or overflowing measurement is never scored, and 0 devices is not 'not
    stated': the row is skipped, and the reason names the cell."""
    import csv
    import io

    from accelmap.validate.outcome import Status
    from accelmap.validate.predict import predict_case

    rows = list(csv.reader(io.StringIO((FIXTURES / "inference.csv").read_text())))
    rows[1][rows[0].index(column)] = value
    f = tmp_path / "x.csv"
    with f.open("w", newline="") as out:
        csv.writer(out).writerows(rows[:2])
    (case,) = read_cases(f).cases
    p = predict_case(case, catalog)
    assert p.status is Status.SKIPPED and message in (p.skipped_reason or "")
