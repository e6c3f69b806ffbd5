"""Run-file rows of disaggregated pools (with their own tp and ep) and of MTP are predicted
(issue 22 parts 4 and 8): each checked against the estimate CLI on the same layout, and the
acceptance conversion against a hand calculation; a row lacking a fact is a clear skip naming
it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.api import validate_cases
from accelmap.serving.disagg import Disaggregation
from accelmap.validate.canonical import read_runs
from accelmap.validate.mtp import ALPHA_CAP, accepted_share, alpha_of_share, speculation_of
from accelmap.validate.outcome import Status
from accelmap.validate.pools import split_of
from accelmap.validate.runs import ServingRun

Run = Callable[..., Any]

DISAGG = """
- id: pd
  source: test
  accelerator: h100-sxm5-80gb
  model: qwen3-30b-a3b
  devices: 8
  framework: vllm
  precision: bf16
  scenario: offline
  requests: 60
  input_len: 1000
  output_len: 100
  disaggregated: true
  prefill_devices: 4
  prefill_tp: 2
  prefill_ep: 2
  decode_devices: 4
  decode_tp: 4
  decode_ep: 4
  metric: output_tokens_per_s_per_device
  value: 500
"""

MTP = """
- id: mtp
  source: test
  accelerator: h100-sxm5-80gb
  model: llama-3.1-8b
  devices: 1
  framework: sglang
  precision: bf16
  scenario: concurrency
  concurrency: 4
  requests: 16
  input_len: 256
  output_len: 64
  mtp: 3
  acceptance: 0.7
  metric: tokens_per_s_per_user
  value: 300
"""


def _file(tmp_path: Path, text: str, drop: tuple[str, ...] = ()) -> Path:
    path = tmp_path / "runs.yaml"
    path.write_text("".join(line + "\n" for line in text.strip("\n").splitlines()
                            if line.strip().split(":")[0] not in drop))
    return path


def _run(path: Path) -> ServingRun:
    (run,) = read_runs(path)
    assert isinstance(run, ServingRun)
    return run


# --- the acceptance conversion ------------------------------------------------------------

def test_alpha_of_share_by_hand() -> None:
    # k = 1: the share is alpha
    assert alpha_of_share(0.7, 1) == pytest.approx(0.7)
    # k = 3, share 0.7: alpha + alpha^2 + alpha^3 = 2.1; 0.832 + 0.692 + 0.576 = 2.100
    assert alpha_of_share(0.7, 3) == pytest.approx(0.832, abs=5e-4)
    assert alpha_of_share(1.0, 4) == ALPHA_CAP
    with pytest.raises(ValueError, match="share"):
        alpha_of_share(0.0, 3)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.01, 0.99), st.integers(1, 8))
def test_alpha_of_share_inverts_the_share(alpha: float, k: int) -> None:
    share = accepted_share(alpha, k)
    assert 0 < share < 1
    assert alpha_of_share(share, k) == pytest.approx(alpha, abs=1e-9)


def test_speculation_of_names_the_missing_fact(tmp_path: Path) -> None:
    from accelmap import api

    spec = api.load_model("deepseek-r1")
    run = _run(_file(tmp_path, MTP, drop=("acceptance",)))
    assert "without acceptance" in str(speculation_of(run, spec, []))
    notes: list[str] = []
    sp = speculation_of(_run(_file(tmp_path, MTP)), spec, notes)
    assert not isinstance(sp, str) and sp is not None
    assert sp.mtp_layers == 1 and sp.draft_len == 3  # DeepSeek-R1's one MTP module, k = 3
    assert "num_nextn_predict_layers" in notes[0]


# --- the pools of a run -------------------------------------------------------------------

def test_split_of_reads_instances_from_devices_and_tp(tmp_path: Path) -> None:
    split = split_of(_run(_file(tmp_path, DISAGG)))
    assert split == Disaggregation(2, 2, 1, 4, 2, 4)
    assert isinstance(split, Disaggregation) and split.devices == 8


@pytest.mark.parametrize(("edit", "says"), [
    (("prefill_tp", "decode_devices"), "decode_devices, prefill_tp not stated"),
    (("prefill_devices: 4", "prefill_devices: 5"), "prefill_devices 5 is not a whole number"),
    (("devices: 8", "devices: 16"), "the run used 16 devices"),
])
def test_split_of_bad_pools_are_reasons(tmp_path: Path, edit: tuple[str, str],
                                        says: str) -> None:
    text = DISAGG
    if ":" in edit[0]:
        text = text.replace(*edit)
        path = _file(tmp_path, text)
    else:
        path = _file(tmp_path, text, drop=edit)
    got = split_of(_run(path))
    assert isinstance(got, list) and says in got[0], got


def test_a_disaggregated_run_without_pools_is_one_clear_skip(tmp_path: Path, cli: Run) -> None:
    path = _file(tmp_path, DISAGG, drop=("prefill_devices", "decode_devices", "prefill_tp",
                                         "decode_tp", "prefill_ep", "decode_ep"))
    (p,) = validate_cases([path]).predictions
    assert p.status is Status.SKIPPED
    assert p.skipped_reason == ("a disaggregated run needs its pools: prefill_devices, "
                                "decode_devices, prefill_tp, decode_tp not stated "
                                "(prefill_devices = prefill instances x prefill_tp, the same "
                                "for decode)")
    r = cli("validate", "--cases", str(path), "--show-skipped")
    assert r.code == 0 and "1 skipped" in r.out


@pytest.mark.parametrize(("extra", "pools"), [
    ("  dp_attention: true", (True, True)),
    ("  decode_dp_attention: true", (False, True)),
    ("  dp_attention: true\n  prefill_dp_attention: false", (False, True)),
])
def test_split_of_reads_dp_attention_per_pool(tmp_path: Path, extra: str,
                                              pools: tuple[bool, bool]) -> None:
    """dp_attention: true is both pools'; prefill_/decode_dp_attention set one pool."""
    text = DISAGG.replace("  prefill_ep: 2", f"  prefill_ep: 2\n{extra}")
    split = split_of(_run(_file(tmp_path, text)))
    assert isinstance(split, Disaggregation), split
    assert (split.prefill_dp_attention, split.decode_dp_attention) == pools
    assert bool(split.decode_mapping.dp_attention) is pools[1]


def test_pool_dp_attention_without_disaggregated_is_a_skip(tmp_path: Path) -> None:
    text = DISAGG.replace("  disaggregated: true\n", "").replace(
        "  prefill_ep: 2", "  prefill_ep: 2\n  decode_dp_attention: true")
    (p,) = validate_cases([_file(tmp_path, text)]).predictions
    assert p.status is Status.SKIPPED and "decode_dp_attention" in str(p.skipped_reason)


# --- predicted as the estimate CLI predicts the same layout --------------------------------

def test_disaggregated_row_is_the_estimate_clis_run(tmp_path: Path, cli: Run) -> None:
    (p,) = validate_cases([_file(tmp_path, DISAGG)]).predictions
    assert p.status is Status.OK, p.skipped_reason
    r = cli("estimate", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--serve", "--scenario",
            "offline", "--requests", "60", "--prompt", "1000", "--output", "100",
            "--framework", "vllm", "--disaggregate", "2:1", "--prefill-tp", "2",
            "--prefill-ep", "2", "--decode-tp", "4", "--decode-ep", "4", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["disaggregation"]["prefill_ep"] == 2 and d["decode_pool"]["ep"] == 4
    assert p.predicted == pytest.approx(d["output_tokens_per_s_per_device"], rel=1e-9)
    assert any("KV transfer inside one scale-up domain" in n for n in p.notes)


def test_dp_attention_pools_row_is_the_estimate_clis_run(tmp_path: Path, cli: Run) -> None:
    text = DISAGG.replace("  prefill_ep: 2", "  prefill_ep: 2\n  decode_dp_attention: true")
    (p,) = validate_cases([_file(tmp_path, text)]).predictions
    assert p.status is Status.OK, p.skipped_reason
    r = cli("estimate", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--serve", "--scenario",
            "offline", "--requests", "60", "--prompt", "1000", "--output", "100",
            "--framework", "vllm", "--disaggregate", "2:1", "--prefill-tp", "2",
            "--prefill-ep", "2", "--decode-tp", "4", "--decode-ep", "4",
            "--decode-dp-attention", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["disaggregation"]["decode_dp_attention"] is True
    assert "prefill_dp_attention" not in d["disaggregation"]
    assert p.predicted == pytest.approx(d["output_tokens_per_s_per_device"], rel=1e-9)


def test_disaggregated_concurrency_row_is_the_estimate_clis_closed_loop(tmp_path: Path,
                                                                      cli: Run) -> None:
    text = DISAGG.replace("scenario: offline", "scenario: concurrency\n  concurrency: 8")
    (p,) = validate_cases([_file(tmp_path, text.replace("requests: 60", "requests: 40"))]
                          ).predictions
    assert p.status is Status.OK, p.skipped_reason
    r = cli("estimate", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--serve", "--scenario",
            "concurrency", "--concurrency", "8", "--requests", "40", "--prompt", "1000",
            "--output", "100", "--framework", "vllm", "--disaggregate", "2:1", "--prefill-tp",
            "2", "--prefill-ep", "2", "--decode-tp", "4", "--decode-ep", "4", "--json")
    assert r.code == 0, r.err
    assert p.predicted == pytest.approx(json.loads(r.out)["output_tokens_per_s_per_device"],
                                        rel=1e-9)


def test_mtp_row_is_the_estimate_clis_speculative_run(tmp_path: Path, cli: Run) -> None:
    (p,) = validate_cases([_file(tmp_path, MTP)]).predictions
    assert p.status is Status.OK, p.skipped_reason
    alpha = alpha_of_share(0.7, 3)
    r = cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve", "--scenario",
            "concurrency", "--concurrency", "4", "--requests", "16", "--prompt", "256",
            "--output", "64", "--framework", "sglang", "--mtp", "1", "--accept", repr(alpha),
            "--draft-len", "3", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert p.predicted == pytest.approx(d["tokens_per_s_per_user"], rel=1e-9)
    # E = 1 + k x share = 1 + 3 x 0.7 tokens per target step (Leviathan et al. eq. 1)
    assert d["speculative"]["expected_tokens_per_step"] == pytest.approx(3.1, rel=1e-6)
    assert any("EAGLE" in n for n in p.notes)  # Llama 3.1 8B has no MTP module
    # and it is faster per user than the same run without MTP
    (plain,) = validate_cases([_file(tmp_path, MTP, drop=("mtp", "acceptance"))]).predictions
    assert plain.predicted is not None and p.predicted > plain.predicted


def test_mtp_on_disaggregated_pools_is_the_estimate_clis_run(tmp_path: Path, cli: Run) -> None:
    path = _file(tmp_path, DISAGG + "  mtp: 2\n  acceptance: 0.6\n")
    (p,) = validate_cases([path]).predictions
    assert p.status is Status.OK, p.skipped_reason
    r = cli("estimate", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--serve", "--scenario",
            "offline", "--requests", "60", "--prompt", "1000", "--output", "100",
            "--framework", "vllm", "--disaggregate", "2:1", "--prefill-tp", "2",
            "--prefill-ep", "2", "--decode-tp", "4", "--decode-ep", "4", "--mtp", "1",
            "--accept", repr(alpha_of_share(0.6, 2)), "--draft-len", "2", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert p.predicted == pytest.approx(d["output_tokens_per_s_per_device"], rel=1e-9)
    # E = 1 + k x share = 1 + 2 x 0.6
    assert d["speculative"]["expected_tokens_per_step"] == pytest.approx(2.2, rel=1e-9)


def test_disaggregated_server_row_at_its_latency_limit_is_predicted(tmp_path: Path) -> None:
    text = DISAGG.replace("scenario: offline", "scenario: server\n  slo_tpot_ms: 40")
    (p,) = validate_cases([_file(tmp_path, text)]).predictions
    assert p.status is Status.OK, p.skipped_reason
    assert any(n.startswith("highest Poisson rate meeting TPOT p99 <= 40 ms") for n in p.notes)


def test_pools_that_do_not_fill_nodes_keep_their_nodes_links(tmp_path: Path) -> None:
    """4 prefill + 8 decode B200 (12 of two 8-GPU nodes): each instance runs on one node, so
    the decode instance of tp 8 keeps its node's NVLink (not the 4-device domains a training
    job of 12 devices on nodes of 8 is given)."""
    text = (DISAGG.replace("accelerator: h100-sxm5-80gb", "accelerator: b200")
            .replace("devices: 8", "devices: 12").replace("prefill_tp: 2", "prefill_tp: 4")
            .replace("prefill_ep: 2", "prefill_ep: 4").replace("decode_devices: 4",
                                                                "decode_devices: 8")
            .replace("decode_tp: 4", "decode_tp: 8").replace("decode_ep: 4", "decode_ep: 8"))
    (p,) = validate_cases([_file(tmp_path, text)]).predictions
    assert p.status is Status.OK, p.skipped_reason
    assert any("take 2 nodes of 8" in n and "4 devices of the last node idle" in n
               for n in p.notes), p.notes
