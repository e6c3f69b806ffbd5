"""The InferenceX converter (``data/inferencex/convert.py``): fixture rows of the dashboard API
snapshot map onto run records by its stated rules, and the converted file reads without
unreadable rows."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from accelmap.units import DType
from accelmap.validate.canonical import read_runs
from accelmap.validate.runs import ServingMetric, ServingRun, ServingScenario, UnreadableRun

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "inferencex_published.yaml"
Run = Callable[..., Any]

# The first row of packages/app/cypress/fixtures/api/benchmarks.json (InferenceX-app commits
# cac6246e and 3a600f1d), metrics trimmed to those the converter reads.
MI355X = {
    "hardware": "mi355x", "framework": "sglang", "model": "dsr1", "precision": "fp4",
    "spec_method": "none", "disagg": False, "is_multinode": False, "prefill_tp": 4,
    "prefill_ep": 1, "prefill_dp_attention": False, "prefill_num_workers": 0, "decode_tp": 4,
    "decode_ep": 1, "decode_dp_attention": False, "decode_num_workers": 0,
    "num_prefill_gpu": 4, "num_decode_gpu": 4, "isl": 1024, "osl": 1024, "conc": 4,
    "image": "lmsysorg/sglang:v0.5.9-rocm700-mi35x",
    "metrics": {"median_tpot": 0.01064601337724555, "median_ttft": 0.10738262953236699,
                "tput_per_gpu": 180.65719659379948, "input_tput_per_gpu": 90.76813862503164,
                "output_tput_per_gpu": 89.88905796876784},
    "date": "2026-02-27",
    "run_url": "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/22469096331/attempts/1",
}
# A disaggregated Dynamo + TensorRT-LLM row (fixture at 528c4146), metrics trimmed.
GB200_DISAGG = {
    "hardware": "gb200", "framework": "dynamo-trt", "model": "dsr1", "precision": "fp4",
    "spec_method": "none", "disagg": True, "is_multinode": True, "prefill_tp": 4,
    "prefill_ep": 4, "prefill_dp_attention": True, "prefill_num_workers": 1, "decode_tp": 8,
    "decode_ep": 8, "decode_dp_attention": False, "decode_num_workers": 4,
    "num_prefill_gpu": 4, "num_decode_gpu": 32, "isl": 1024, "osl": 1024, "conc": 24,
    "image": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2",
    "metrics": {"median_tpot": 0.02, "median_ttft": 0.5, "tput_per_gpu": 169.07090612277543},
    "date": "2026-03-23",
    "run_url": "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/23438524239/attempts/5",
}


@pytest.fixture(scope="module")
def convert() -> ModuleType:
    path = ROOT / "data" / "inferencex" / "convert.py"
    spec = importlib.util.spec_from_file_location("inferencex_convert", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _older(row: dict[str, Any]) -> dict[str, Any]:
    old = copy.deepcopy(row)
    old.update(date="2025-10-06", image=None, conc=8)
    old["metrics"]["output_tput_per_gpu"] = 1.0
    return old


def test_row_maps_to_its_run_record(convert: ModuleType) -> None:
    groups, dropped = convert.convert([MI355X, _older(MI355X)])
    assert not dropped
    (base, points), = groups  # the 2025 row of the same configuration is not the newest
    assert base == {
        "accelerator": "mi355x", "model": "deepseek-r1", "devices": 4, "tp": 4,
        "dp_attention": False, "framework": "sglang 0.5.9", "year": 2026,
        "precision": "bf16", "moe_precision": "mxfp4", "kv_precision": "fp8",
        "scenario": "concurrency", "input_len": 922, "output_len": 922,
        "length_dist": "uniform", "length_spread": 0.1112}
    by_metric = {p["metric"]: p for p in points}
    assert set(by_metric) == {"output_tokens_per_s_per_device", "tokens_per_s_per_user",
                              "ttft_p50_ms"}
    assert by_metric["output_tokens_per_s_per_device"]["value"] == pytest.approx(89.8891)
    assert by_metric["tokens_per_s_per_user"]["value"] == pytest.approx(93.9319, abs=1e-4)
    assert by_metric["ttft_p50_ms"]["value"] == pytest.approx(107.3826, abs=1e-4)
    for p in points:
        assert p["concurrency"] == 4 and p["requests"] == 40
        assert p["source"] == MI355X["run_url"]


def test_disaggregated_row_keeps_its_pools(convert: ModuleType) -> None:
    (base, points), = convert.convert([GB200_DISAGG])[0]
    assert base["framework"] == "dynamo 0.8.1.post2" and base["engine"] == "tensorrt-llm"
    assert (base["devices"], base["prefill_devices"], base["decode_devices"]) == (36, 4, 32)
    assert (base["prefill_tp"], base["prefill_ep"], base["decode_tp"], base["decode_ep"]) \
        == (4, 4, 8, 8)
    assert base["disaggregated"] is True and "dp_attention" not in base
    # DP attention per pool, as the fixture states it (here the prefill pool only)
    assert (base["prefill_dp_attention"], base["decode_dp_attention"]) == (True, False)
    assert (base["precision"], base["moe_precision"]) == ("fp8", "nvfp4")
    assert "tp" not in base and "kv_precision" not in base
    # tput_per_gpu is prompt + output tokens over all GPUs of both pools
    assert points[0]["metric"] == "total_tokens_per_s_per_device"


def test_rows_without_a_stated_fact_are_not_written(convert: ModuleType) -> None:
    atom_mtp = {**MI355X, "framework": "atom", "spec_method": "mtp"}
    rtx = {**MI355X, "hardware": "rtx6000pro"}
    groups, dropped = convert.convert([atom_mtp, rtx])
    assert not groups
    assert sum(dropped.values()) == 2
    assert any("MTP draft tokens" in why for why in dropped)
    assert any("rtx6000pro" in why for why in dropped)


def test_pools_the_dashboard_does_not_describe_are_not_written(convert: ModuleType) -> None:
    """GB200 Dynamo rows of 2025-12 give each pool's GPU count as its tp (20, 72: no tensor-
    parallel group of DeepSeek-R1's 128 heads) and no worker count: the layout is the launch
    script's, not stated. A pool with its workers stated is written."""
    blind = {**GB200_DISAGG, "prefill_tp": 20, "decode_tp": 20, "num_prefill_gpu": 20,
             "num_decode_gpu": 20, "prefill_num_workers": 0, "decode_num_workers": 0,
             "prefill_ep": 1, "decode_ep": 1, "prefill_dp_attention": False}
    groups, dropped = convert.convert([blind])
    assert not groups and any("pool layout not stated" in why for why in dropped)
    assert convert.unstated_pools(blind) and not convert.unstated_pools(GB200_DISAGG)
    assert not convert.unstated_pools(MI355X)  # aggregated: its tp is its GPU count


@pytest.mark.parametrize(("image", "framework", "version"), [
    ("lmsysorg/sglang:v0.5.8.post1-cu130", "sglang", "0.5.8.post1"),
    ("rocm/sgl-dev:sglang-0.5.7-rocm700-mi35x-mori-fp4-0122", "sglang", "0.5.7"),
    ("nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc2.post2", "tensorrt-llm", "1.1.0rc2.post2"),
    ("rocm/atom:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom0.1.3", "atom", "0.1.3"),
    (None, "sglang", ""),
])
def test_version_from_the_image_tag(convert: ModuleType, image: str | None, framework: str,
                                    version: str) -> None:
    assert convert.version(image, framework) == version


def test_written_file_reads_as_serving_runs(convert: ModuleType, tmp_path: Path,
                                            cli: Run) -> None:
    fixture = tmp_path / "benchmarks.json"
    fixture.write_text(json.dumps([MI355X, GB200_DISAGG]))
    out = tmp_path / "ix.yaml"
    assert convert.main([str(fixture), "-o", str(out)]) == 0
    runs = read_runs(out)
    assert len(runs) == 6 and not any(isinstance(r, UnreadableRun) for r in runs)
    run = next(r for r in runs if r.id.endswith("c4-out"))
    assert isinstance(run, ServingRun)
    assert run.scenario is ServingScenario.CONCURRENCY and run.concurrency == 4
    assert (run.precision, run.moe_precision, run.kv_precision) == \
        (DType.BF16, DType.MXFP4, DType.FP8)
    assert run.metric is ServingMetric.OUTPUT_TOKENS_PER_S_PER_DEVICE
    r = cli("validate", "--cases", str(out), "--json")
    assert r.code == 0, r.err
    rows = {row["row_id"]: row for row in json.loads(r.out)["rows"]}
    assert len(rows) == 6
    assert rows[run.id]["status"] == "ok" and rows[run.id]["predicted"] > 0


def test_bad_fixture_one_line(convert: ModuleType, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert convert.main([str(bad)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_committed_file_has_no_unreadable_record() -> None:
    runs = read_runs(DATA)
    assert len(runs) > 500
    assert not [r for r in runs if isinstance(r, UnreadableRun)]
    assert all(isinstance(r, ServingRun) and r.source.startswith(
        "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/") for r in runs)
    accelerators = {r.accelerator for r in runs}
    assert {"b200", "gb200", "mi355x"} <= accelerators
