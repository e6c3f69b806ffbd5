"""`accelmap estimate` and `accelmap roofline`: JSON contract and bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

Run = Callable[..., Any]


def j(r: Any) -> Any:
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_estimate_serve_json_keys(cli: Run) -> None:
    d = j(cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve", "--batch", "8",
              "--prompt", "1024", "--output", "64", "--json"))
    for key in ("feasible", "ttft_s", "tpot_s", "tokens_per_s", "max_batch", "max_context",
                "energy_j_per_token_tdp", "energy_j_per_token_ops"):
        assert key in d, key
    assert d["memory"]["total_bytes"] == pytest.approx(d["memory"]["breakdown"]["total_bytes"])
    assert d["feasible"] is True and d["ttft_s"] > d["tpot_s"] > 0


def test_estimate_train_json_keys(cli: Run) -> None:
    d = j(cli("estimate", "gpt3-1.3b", "--hw", "a100-sxm4-80gb", "--train", "--batch", "4",
              "--seq", "2048", "--tokens", "300B", "--json"))
    for key in ("feasible", "step_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_device",
                "time_to_train_s", "cost_to_train_usd"):
        assert key in d, key
    assert 0 < d["mfu"] <= 1
    assert d["time_to_train_s"] == pytest.approx(300e9 / d["tokens_per_s"])


def test_estimate_infeasible_is_reported_not_raised(cli: Run) -> None:
    d = j(cli("estimate", "llama-3.1-405b", "--hw", "h100-sxm5-80gb", "--json"))
    assert d["feasible"] is False and " GB " in d["reason"] and "GiB" not in d["reason"]


def test_roofline_json(cli: Run) -> None:
    d = j(cli("roofline", "llama-2-7b", "--hw", "a100-sxm4-80gb", "--phase", "decode", "--json"))
    assert d["ridge_flop_per_byte"] > 100
    qkv = next(o for o in d["ops"] if o["name"] == "layers/attention/qkv")
    assert qkv["bound"] == "memory" and qkv["count"] == 32
    assert {"time_s", "intensity_flop_per_byte", "flops", "bytes"} <= set(qkv)


def test_roofline_train_table(cli: Run) -> None:
    r = cli("roofline", "gpt3-125m", "--hw", "h100-sxm5-80gb", "--phase", "train", "--batch", "2")
    assert r.code == 0 and "backward/dgrad" in r.out and "optimizer" in r.out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("estimate", "llama-2-7b", "--hw", "h100-sxm5-80gb", "--batch", "0"), "--batch"),
        (("estimate", "llama-2-7b", "--hw", "h100-sxm5-80gb", "--weights", "int3"),
         "unknown weight dtype"),
        (("estimate", "llama-2-7b", "--hw", "a100"), "matches 3 accelerators"),
        (("estimate", "llama-2-7b", "--hw", "h100-sxm5-80gb", "--train", "--tokens", "lots"),
         "token count"),
        (("estimate", "llama-2-7b", "--hw", "h100-sxm5-80gb", "--train", "--tokens", "-5"),
         "positive token count"),
        # --dtype only drives training, but a typo in it is refused in serving mode too
        (("estimate", "llama-2-7b", "--hw", "h100-sxm5-80gb", "--dtype", "fp7"),
         "unknown training dtype"),
        (("estimate", "llama-2-7b", "--cluster", "8xH100", "--dtype", "fp7"),
         "unknown training dtype"),
        (("plan", "llama-2-7b", "--cluster", "8xH100", "--train", "--global-batch-tokens", "0"),
         "positive token count"),
        (("roofline", "llama-2-7b", "--hw", "h100-sxm5-80gb", "--phase", "sideways"),
         "unknown phase"),
        (("estimate", "llama-2-7b"), "--hw"),
        (("frobnicate",), "No such command"),
    ],
)
def test_bad_input_is_one_line(cli: Run, args: tuple[str, ...], needle: str) -> None:
    r = cli(*args)
    assert r.code == 2
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], r.err
    assert "Traceback" not in r.err


def test_context_past_the_models_window_is_refused_or_warned(cli: Run) -> None:
    # Llama 2 was trained with a 4,096-token context (Touvron et al. 2023, section 2.2)
    inside = j(cli("estimate", "llama-2-7b", "--hw", "h100-sxm5-80gb", "--prompt", "4000",
                   "--output", "96", "--json"))
    past = cli("estimate", "llama-2-7b", "--hw", "h100-sxm5-80gb", "--prompt", "4000",
               "--output", "97", "--json")
    assert not any("exceed" in a for a in inside["assumptions"])
    # serving past the context is refused (issue 27), naming it and the flag that extends it
    assert past.code == 2 and "4,097 tokens" in past.err and "4,096" in past.err
    assert "--set context=4097" in past.err
    train = j(cli("estimate", "llama-2-7b", "--cluster", "8xH100", "--train", "--seq", "8192",
                  "--batch", "8", "--json"))
    assert any("8,192 tokens" in a for a in train["assumptions"])


def test_estimate_cluster_training_json(cli: Run) -> None:
    d = j(cli("estimate", "llama-3.1-70b", "--cluster", "64xH100", "--train", "--tp", "8",
              "--pp", "2", "--zero", "1", "--batch", "256", "--seq", "8192", "--recompute",
              "full", "--json"))
    assert d["feasible"] and 0 < d["mfu"] < 1
    assert {"tp", "pp", "dp"} <= set(d["communication_s"])
    assert "NVLink" in d["axes"]["tp"] or "scale-up" in d["axes"]["tp"]


def test_estimate_cluster_rule_violation(cli: Run) -> None:
    d = j(cli("estimate", "llama-3.1-70b", "--cluster", "64xH100", "--train", "--tp", "16",
              "--json"))
    assert d["feasible"] is False and "scale-up domain" in d["reason"]


PIPELINE = ("estimate", "llama-3.1-70b", "--cluster", "64xH100", "--train", "--tp", "8", "--pp",
            "4", "--batch", "64", "--seq", "8192", "--recompute", "full", "--json")


def test_a_schedule_flag_changes_the_result_or_is_refused(cli: Run) -> None:
    """--vpp 2 is modelled only as interleaved 1F1B (the default with --vpp > 1); with gpipe,
    1f1b or zb-h1 it is refused with the reason, as is interleaved-1f1b with one chunk."""
    steps = {s: j(cli(*PIPELINE, "--schedule", s))["step_time_s"]
             for s in ("gpipe", "1f1b", "zb-h1")}
    inter = j(cli(*PIPELINE, "--vpp", "2"))
    assert inter["feasible"] and inter == j(cli(*PIPELINE, "--vpp", "2", "--schedule",
                                                "interleaved-1f1b"))
    assert len({*steps.values(), inter["step_time_s"]}) == 3  # GPipe = 1F1B in time only
    assert inter["step_time_s"] < steps["1f1b"] and steps["zb-h1"] < steps["1f1b"]
    for s in ("gpipe", "1f1b", "zb-h1"):
        d = j(cli(*PIPELINE, "--vpp", "2", "--schedule", s))
        assert d["feasible"] is False
        assert "interleaving needs the interleaved-1f1b schedule" in d["reason"]
    d = j(cli(*PIPELINE, "--schedule", "interleaved-1f1b"))
    assert d["feasible"] is False and "needs vpp >= 2" in d["reason"]


def test_an_uneven_split_from_the_cli(cli: Run) -> None:
    """126 layers over 8 stages: refused without a split, as Megatron-LM does; modelled with
    the first/last stage's layers or the embedding and loss counted as layers."""
    base = ("estimate", "llama-3.1-405b", "--cluster", "1024xH100", "--train", "--tp", "8",
            "--pp", "8", "--batch", "512", "--seq", "8192", "--recompute", "full", "--json")
    d = j(cli(*base))
    assert d["feasible"] is False and "pipeline_split" in d["reason"]
    a = j(cli(*base, "--first-stage-layers", "15", "--last-stage-layers", "15"))
    b = j(cli(*base, "--embedding-in-split", "--loss-in-split"))
    assert a["feasible"] and a["step_time_s"] == pytest.approx(b["step_time_s"])
    assert any("15 + 6 x 16 + 15" in x for x in a["assumptions"])


def test_estimate_cluster_bad_shorthand(cli: Run) -> None:
    r = cli("estimate", "llama-2-7b", "--cluster", "lots of gpus")
    assert r.code == 2 and "cannot read cluster" in r.err


def test_plan_training_json_contract(cli: Run) -> None:
    d = j(cli("plan", "llama-2-13b", "--cluster", "64xH100", "--train", "--seq", "4096",
              "--global-batch-tokens", "2M", "--tokens", "1T", "--top", "3", "--json"))
    for key in ("plans", "evaluated", "feasible", "seconds", "rejected_by_rule"):
        assert key in d
    p = d["plans"][0]
    for key in ("mapping", "feasible", "tokens_per_s", "mfu", "step_time_s",
                "memory_per_device_bytes", "cost_to_train_usd", "energy_to_train_j"):
        assert key in p, key
    assert p["cost_to_train_usd"] > 0 and p["time_to_train_s"] > 0


def test_plan_bad_objective(cli: Run) -> None:
    r = cli("plan", "llama-2-13b", "--cluster", "64xH100", "--objective", "vibes")
    assert r.code == 2 and "unknown objective" in r.err


def test_plan_needs_a_target(cli: Run) -> None:
    r = cli("plan", "llama-2-13b")
    assert r.code == 2 and "--cluster" in r.err


def test_plan_serving_json(cli: Run) -> None:
    d = j(cli("plan", "llama-2-7b", "--cluster", "dgx-h100", "--serve", "--scenario", "batch",
              "--prompt", "512", "--output", "64", "--tpot", "50ms", "--top", "3", "--json"))
    assert d["plans"] and all(p["tpot_s"] <= 0.05 for p in d["plans"])
    assert "latency_vs_throughput" in d["pareto"]


def test_plan_server_scenario_json(cli: Run) -> None:
    d = j(cli("plan", "llama-2-7b", "--cluster", "dgx-h100", "--serve", "--rate", "20",
              "--prompt", "512", "--output", "64", "--slo-ttft", "1s", "--slo-tpot", "50ms",
              "--requests", "200", "--top", "3", "--json"))
    assert d["objective"] == "goodput" and d["search"]["scenario"] == "server"
    assert d["search"]["simulated_configurations"] <= d["search"]["screened_feasible"]
    p = d["plans"][0]
    assert set(p["mapping"]) >= {"tp", "pp", "ep", "replicas", "batch", "max_batched_tokens"}
    for key in ("tokens_per_s", "goodput_requests_per_s", "kv_capacity_tokens",
                "peak_running"):
        assert p[key] > 0, key
    assert {"p50", "p99"} <= set(p["ttft_s"]) and {"p50", "p99"} <= set(p["tpot_s"])
    goodputs = [q["goodput_requests_per_s"] for q in d["plans"]]
    assert goodputs == sorted(goodputs, reverse=True)


def test_plan_scenario_errors(cli: Run) -> None:
    r = cli("plan", "llama-2-7b", "--cluster", "dgx-h100", "--serve", "--scenario", "server")
    assert r.code == 2 and "--scenario server needs --rate" in r.err
    r = cli("plan", "llama-2-7b", "--cluster", "dgx-h100", "--serve", "--slo-ttft", "2s")
    assert r.code == 2 and "a TTFT SLO needs arrivals" in r.err
    r = cli("plan", "llama-2-7b", "--cluster", "dgx-h100", "--serve", "--rate", "-1")
    assert r.code == 2 and "--rate must be a positive" in r.err


def test_plan_hw_list_compares(cli: Run) -> None:
    d = j(cli("plan", "llama-2-7b", "--hw", "h100-sxm5-80gb,mi300x", "--devices", "16",
              "--train", "--seq", "4096", "--global-batch-tokens", "1M", "--json"))
    assert {r["accelerator"] for r in d["hardware"]} == {"h100-sxm5-80gb", "mi300x"}
    assert d["pareto"]["throughput_vs_cost"]


def test_plan_deadline(cli: Run) -> None:
    d = j(cli("plan", "llama-2-7b", "--hw", "h100-sxm5-80gb", "--train", "--seq", "4096",
              "--global-batch-tokens", "1M", "--tokens", "100B", "--deadline", "30d", "--json"))
    assert d["found"] and d["found"]["time_to_train_s"] <= 30 * 86400
    sizes = [t["devices"] for t in d["tried"]]
    assert sizes == sorted(sizes) and d["found"]["devices"] == sizes[-1]


def test_device_without_bandwidth_is_refused_in_one_line(cli: Run) -> None:
    # the Coral Edge TPU's datasheet gives no memory bandwidth; a 0 B/s roofline would divide
    # by zero: the estimate is an infeasible result that says why (here: 8 MB holds no GPT-3)
    r = cli("estimate", "gpt3-125m", "--hw", "coral-edge-tpu")
    assert "cannot run" in r.out and "does not fit" in r.out and "Traceback" not in r.err


def test_serving_batch_that_cannot_fit_has_a_reason_not_figures(cli: Run) -> None:
    """Issue 27: Llama 3.1 8B on a TPU v5e printed 'tight', margin -183 MB, 'largest batch that
    fits 0' and serving figures; its bf16 weights alone exceed the 16 GB."""
    d = j(cli("estimate", "llama-3.1-8b", "--hw", "tpu-v5e", "--serve", "--json"))
    assert d["feasible"] is False and d["memory"]["fit"] == "over" and d["max_batch"] == 0
    assert "weights" in d["reason"] and "GiB" not in d["reason"]
    for key in ("ttft_s", "tpot_s", "tokens_per_s", "total_time_s"):
        assert key not in d, key
    text = cli("estimate", "llama-3.1-8b", "--hw", "tpu-v5e", "--serve").out
    assert "does not fit" in text and "TPOT" not in text and "tight" not in text
    assert "no batch fits" in text


def test_dp_attention_on_a_dense_model_is_one_line(cli: Run) -> None:
    """Issue 22 part 3: DP attention is for MoE models; a dense one is refused in one line
    that names the rule and the flag to drop."""
    r = cli("estimate", "llama-3.1-8b", "--cluster", "2xH100", "--serve", "--tp", "2",
            "--dp-attention")
    assert r.code == 2 and r.err.count("\n") == 1 and r.err.startswith("error:")
    assert "dp_attention_moe" in r.err and "--dp-attention" in r.err


def test_dp_attention_estimate_says_its_layout(cli: Run) -> None:
    d = j(cli("estimate", "qwen3-30b-a3b", "--cluster", "2xH100", "--serve", "--tp", "2",
              "--ep", "2", "--dp-attention", "--batch", "16", "--json"))
    assert d["feasible"] and any("dp-attention" in a for a in d["assumptions"])
