"""Concurrency runs in the run format (issue 22 part 8): ``scenario: concurrency`` with
``concurrency``, the metrics ``tokens_per_s_per_user`` and ``input_tokens_per_s_per_device``,
and rows lacking a fact kept as clear skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap.api import validate_cases
from accelmap.validate.canonical import read_runs
from accelmap.validate.outcome import MetricKind, Status
from accelmap.validate.runs import ServingMetric, ServingRun, ServingScenario, UnreadableRun

ROW = """
- id: c8
  source: test
  accelerator: h100-sxm5-80gb
  model: llama-3.1-8b
  devices: 1
  framework: vllm
  precision: bf16
  scenario: concurrency
  concurrency: 8
  requests: 40
  input_len: 512
  output_len: 64
  metric: {metric}
  value: {value}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "runs.yaml"
    path.write_text(text)
    return path


def test_concurrency_row_reads(tmp_path: Path) -> None:
    (run,) = read_runs(_write(tmp_path, ROW.format(metric="tokens_per_s_per_user", value=90)))
    assert isinstance(run, ServingRun)
    assert run.scenario is ServingScenario.CONCURRENCY and run.concurrency == 8
    assert run.metric is ServingMetric.TOKENS_PER_S_PER_USER


@pytest.mark.parametrize("metric", ["tokens_per_s_per_user", "input_tokens_per_s_per_device",
                                    "output_tokens_per_s_per_device", "tpot_p50_ms"])
def test_concurrency_rows_are_predicted(tmp_path: Path, metric: str) -> None:
    (p,) = validate_cases([_write(tmp_path, ROW.format(metric=metric, value=100))]).predictions
    assert p.status is Status.OK, p.skipped_reason
    assert p.predicted is not None and p.predicted > 0
    kind = MetricKind.LATENCY if metric.endswith("_ms") else MetricKind.CONCURRENCY
    assert p.kind is kind
    assert any("closed loop: 8 clients" in n for n in p.notes)


def test_per_user_is_one_over_the_median_tpot(tmp_path: Path) -> None:
    text = ROW.format(metric="tokens_per_s_per_user", value=1) + ROW.replace(
        "id: c8", "id: c8-tpot").format(metric="tpot_p50_ms", value=1)
    user, tpot = validate_cases([_write(tmp_path, text)]).predictions
    assert user.predicted == pytest.approx(1000.0 / tpot.predicted)


@pytest.mark.parametrize(("edit", "reason"), [
    (("  concurrency: 8\n", ""), "needs its number of clients"),
    (("  input_len: 512\n", ""), "input_len"),
    (("precision: bf16", "precision: fp3"), "fp3"),
    (("concurrency: 8", "concurrency: 0"), "concurrency"),
])
def test_rows_lacking_a_fact_are_clear_skips(tmp_path: Path, edit: tuple[str, str],
                                             reason: str) -> None:
    text = ROW.format(metric="output_tokens_per_s", value=100).replace(*edit)
    (p,) = validate_cases([_write(tmp_path, text)]).predictions
    assert p.status is Status.SKIPPED
    assert reason in (p.skipped_reason or ""), p.skipped_reason


def test_concurrency_needs_its_scenario(tmp_path: Path) -> None:
    text = ROW.format(metric="output_tokens_per_s", value=100).replace(
        "scenario: concurrency", "scenario: offline")
    (p,) = validate_cases([_write(tmp_path, text)]).predictions
    assert p.status is Status.SKIPPED
    assert "scenario is not concurrency" in (p.skipped_reason or "")


def test_unknown_scenario_word_lists_concurrency(tmp_path: Path) -> None:
    text = ROW.format(metric="output_tokens_per_s", value=100).replace(
        "scenario: concurrency", "scenario: closedloop")
    (run,) = read_runs(_write(tmp_path, text))
    assert isinstance(run, UnreadableRun)
    assert any("concurrency" in str(p) for p in run.problems)


def test_published_points_file_reads() -> None:
    path = Path(__file__).resolve().parents[2] / "data" / \
        "concurrency_published.yaml"
    runs = read_runs(path)
    assert len(runs) >= 10
    fp4 = [r for r in runs if r.id == "deepseek-r1-8xb200-c1-nomtp"]
    # the NVFP4 row reads now that the run format knows the word (it was a skip before)
    assert fp4 and not isinstance(fp4[0], UnreadableRun)


def test_sglang_receive_interval_is_read_and_other_stacks_skip_it(tmp_path: Path) -> None:
    """scheduler_recv_interval (SGLang --scheduler-recv-interval) reaches the scheduler of an
    SGLang run (its TTFT grows: arrivals wait for the poll); a vLLM run that states it is a
    clear skip naming the flag."""
    # uniform lengths: clients finish apart, so a new request finds the batch decoding
    base = ROW.format(metric="ttft_p50_ms", value=100).replace(
        "concurrency: 8", "concurrency: 16\n  length_dist: uniform\n  length_spread: 0.2")
    sglang = base.replace("framework: vllm", "framework: sglang")
    polled = sglang.replace("id: c8", "id: polled") + "  scheduler_recv_interval: 30\n"
    runs = read_runs(_write(tmp_path, sglang + polled))
    assert isinstance(runs[1], ServingRun) and runs[1].scheduler_recv_interval == 30
    rows = {p.row_id: p for p in validate_cases([_write(tmp_path, sglang + polled)]).predictions}
    assert rows["polled"].status is Status.OK and rows["c8"].status is Status.OK
    assert rows["polled"].predicted > rows["c8"].predicted  # type: ignore[operator]
    assert any("scheduler receive interval 30" in n for n in rows["polled"].notes)
    vllm = base.replace("id: c8", "id: v") + "  scheduler_recv_interval: 30\n"
    skip = validate_cases([_write(tmp_path, vllm)]).predictions[0]
    assert skip.status is not Status.OK
    assert "SGLang's --scheduler-recv-interval" in (skip.skipped_reason or "")


# a server run at a stated rate: the concurrency row with its scenario, rate and metric
SERVER = ROW.format(metric="output_tokens_per_s", value=100).replace("id: c8", "id: {id}").replace(
    "scenario: concurrency\n  concurrency: 8\n  requests: 40\n", "scenario: server\n  rate: 2\n"
).replace("input_len: 512", "input_len: 256")


def test_a_server_runs_throughput_is_counted_over_its_own_queries(tmp_path: Path) -> None:
    """MLPerf's LoadGen divides what completed by the time from the first query sent to the
    last answer: a long run (many queries) reads the steady state, rate x output tokens; a short
    one loses the last answer's latency in its span; unstated, the steady state."""
    text = (SERVER.format(id="long") + "  requests: 1000000\n"
            + SERVER.format(id="short") + "  requests: 20\n" + SERVER.format(id="unstated"))
    rows = {p.row_id: p for p in validate_cases([_write(tmp_path, text)]).predictions}
    assert all(p.status is Status.OK for p in rows.values())
    steady = 2 * 64.0
    assert rows["long"].predicted == pytest.approx(steady, rel=1e-3)
    assert rows["unstated"].predicted == pytest.approx(steady, rel=1e-9)
    assert rows["short"].predicted < 0.99 * steady  # type: ignore[operator]
    assert any("over the run's 20 queries" in n for n in rows["short"].notes)
