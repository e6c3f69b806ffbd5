"""The run format's 2025-2026 fields (issue 22 part 8): SGLang, Dynamo (with its engine) and
ATOM; dp_attention; disaggregated pools; MTP and acceptance. Each reads; what the run-file
prediction models is predicted (SGLang, ATOM, Dynamo's engine, disaggregated pools and MTP:
tests/validate/test_run_pools_mtp.py), the rest is a clear skip with its reason, so no row is
predicted as something it was not."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap.api import validate_cases
from accelmap.cost.framework import Framework
from accelmap.validate.canonical import read_runs
from accelmap.validate.outcome import Status
from accelmap.validate.runs import ServingRun, UnreadableRun

BASE = """
- id: r
  source: test
  accelerator: h100-sxm5-80gb
  model: llama-3.1-8b
  devices: 1
  precision: bf16
  scenario: concurrency
  concurrency: 4
  requests: 20
  input_len: 256
  output_len: 32
  metric: output_tokens_per_s_per_device
  value: 1000
"""


def _runs(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "runs.yaml"
    path.write_text(BASE.rstrip("\n") + "\n" + "".join(f"  {line}\n" for line in
                                                         extra.strip().splitlines()))
    return path


@pytest.mark.parametrize(("extra", "framework"), [
    ("framework: sglang 0.4.6", Framework.SGLANG),
    ("framework: dynamo 0.3\nengine: tensorrt-llm", Framework.TENSORRT_LLM),
])
def test_predicted_stacks(tmp_path: Path, extra: str, framework: Framework) -> None:
    path = _runs(tmp_path, extra)
    (run,) = read_runs(path)
    assert isinstance(run, ServingRun) and run.framework is framework
    (p,) = validate_cases([path]).predictions
    assert p.status is Status.OK, p.skipped_reason
    assert p.predicted is not None and p.predicted > 0
    if "dynamo" in extra:
        assert any("Dynamo orchestrating tensorrt-llm" in n for n in p.notes)


def test_atom_runs_on_amd_parts(tmp_path: Path) -> None:
    path = tmp_path / "runs.yaml"
    path.write_text(BASE.replace("h100-sxm5-80gb", "mi355x") + "  framework: atom 20260511\n")
    (run,) = read_runs(path)
    assert isinstance(run, ServingRun) and run.framework is Framework.ATOM
    (p,) = validate_cases([path]).predictions
    assert p.status is Status.OK and p.predicted is not None and p.predicted > 0, p.skipped_reason
    assert any("ATOM defaults" in n for n in p.notes), p.notes


@pytest.mark.parametrize(("extra", "reason"), [
    ("framework: atom", "AMD Instinct GPUs only"),
    ("framework: dynamo 0.3", "needs its engine"),
    ("framework: vllm\nengine: sglang", "not dynamo"),
    ("framework: sglang\ndp_attention: true", "dp_attention_moe rule"),  # llama: dense
    ("framework: sglang\ndisaggregated: true\nprefill_devices: 1\ndecode_devices: 1",
     "needs its pools: prefill_tp, decode_tp not stated"),
    ("framework: sglang\nprefill_tp: 2", "without disaggregated: true"),
    ("framework: sglang\nmtp: 3", "without acceptance"),
    ("framework: sglang\nacceptance: 0.7", "without mtp"),
])
def test_unmodelled_facts_are_clear_skips(tmp_path: Path, extra: str, reason: str) -> None:
    (run,) = read_runs(_runs(tmp_path, extra))
    assert isinstance(run, ServingRun)
    (p,) = validate_cases([_runs(tmp_path, extra)]).predictions
    assert p.status is not Status.OK and reason in (p.skipped_reason or ""), p.skipped_reason


def test_dp_attention_rows_are_predicted(tmp_path: Path) -> None:
    """An MoE run with DP attention over its tp group is simulated (issue 22 part 3), and
    differs from the same run with attention split by tp."""
    moe = ("model: qwen3-30b-a3b\ndevices: 2\ntp: 2\nep: 2\nframework: sglang\n"
           "dp_attention: {}")
    got = []
    for flag in ("true", "false"):
        path = _runs(tmp_path, moe.format(flag)).read_text().replace(
            "  model: llama-3.1-8b\n", "").replace("  devices: 1\n", "")
        (tmp_path / "runs.yaml").write_text(path)
        (p,) = validate_cases([tmp_path / "runs.yaml"]).predictions
        assert p.status is Status.OK, p.skipped_reason
        got.append(p.predicted)
    assert got[0] != got[1]


def test_plain_dp_attention_false_is_predicted(tmp_path: Path) -> None:
    (p,) = validate_cases([_runs(tmp_path, "framework: vllm\ndp_attention: false")]).predictions
    assert p.status is Status.OK, p.skipped_reason


@pytest.mark.parametrize(("extra", "field"), [
    ("framework: sglang\nacceptance: 1.5", "acceptance"),
    ("framework: sglang\ndp_attention: maybe", "dp_attention"),
    ("framework: dynamo\nengine: triton", "engine"),
])
def test_bad_values_are_problems(tmp_path: Path, extra: str, field: str) -> None:
    (run,) = read_runs(_runs(tmp_path, extra))
    assert isinstance(run, UnreadableRun) and any(p.field == field for p in run.problems)
