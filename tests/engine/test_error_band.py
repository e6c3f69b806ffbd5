"""Every estimate states its expected error, from residuals of similar published runs."""

from __future__ import annotations

import pytest

from accelmap.catalog import load_catalog
from accelmap.engine import error_band as eb
from accelmap.engine import estimate
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping
from accelmap.workload import Inference, Training

CAT = load_catalog()


def test_scale_buckets() -> None:
    assert [eb.scale(n) for n in (1, 8, 9, 64, 512, 16384)] == [
        "1", "2-8", "9-64", "9-64", "65-512", "513+"]


def test_narrowest_group_with_enough_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    table = {"train / fsdp / 2-8 devices": {"pct": 9.0, "runs": 20},
             "train / fsdp": {"pct": 12.0, "runs": 30},
             "train / megatron / 2-8 devices": {"pct": 5.0, "runs": 3},  # too few
             "train": {"pct": 14.0, "runs": 60}, "all": {"pct": 20.0, "runs": 99}}
    monkeypatch.setattr(eb, "_table", lambda: table)
    table["train / 2-8 devices"] = {"pct": 11.0, "runs": 40}
    assert eb.error_band("train", "fsdp", 8).group == "train / fsdp / 2-8 devices"
    # no group drops the scale: a 64-device run takes no band from 2-8 device runs
    assert eb.error_band("train", "fsdp", 64) is None
    band = eb.error_band("train", "megatron", 8)  # too few of its stack: its phase and scale
    assert band is not None and band.group == "train / 2-8 devices" and "40 similar" in band.text
    assert eb.error_band("serve-latency", "vllm", 1) is None  # never 'all' runs
    monkeypatch.setattr(eb, "_table", lambda: {})
    assert eb.error_band("train", "fsdp", 8) is None


def test_no_band_from_another_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU (or any non-GPU class) takes no band from GPU clusters' runs: its own stack's
    runs at its scale, or none (issue 27: '±10 % (p80 of 181 ... train)' on a laptop CPU)."""
    table = {"train / 1 devices": {"pct": 9.0, "runs": 50},
             "train / eager-cpu / 1 devices": {"pct": 30.0, "runs": 3},
             "train": {"pct": 10.0, "runs": 181}, "all": {"pct": 13.0, "runs": 385}}
    monkeypatch.setattr(eb, "_table", lambda: table)
    assert eb.error_band("train", "eager-cpu", 1, "cpu") is None
    assert eb.error_band("train", "eager", 1, "cpu") is None
    assert eb.error_band("train", "eager", 1, "gpu").group == "train / 1 devices"
    table["train / eager-cpu / 1 devices"]["runs"] = 9
    assert eb.error_band("train", "eager-cpu", 1, "cpu").pct == 30.0


def test_cpu_estimate_says_it_has_no_band() -> None:
    cpu = CAT.accelerators["epyc-9654"]
    e = estimate(CAT.models["llama-2-7b"], cpu, Training(batch=1, seq_len=512))
    assert e.error_band is None or "cpu" in e.error_band.group


def test_estimates_carry_their_band_in_json() -> None:
    train = estimate(CAT.models["llama-2-7b"], parse_cluster("dgx-h100", CAT),
                     Training(batch=64, seq_len=4096), Mapping(dp=8))
    assert train.error_band is not None and train.error_band.pct > 0
    assert train.to_dict(ops=False)["error_band"]["text"].startswith("±")
    serve = estimate(CAT.models["llama-2-7b"], CAT.accelerators["h100-sxm5-80gb"],
                     Inference(batch=8, prompt_len=512, output_len=64))
    d = serve.to_dict(ops=False)
    assert d["error_band"]["runs"] >= eb.MIN_RUNS and d["latency_error_band"]["pct"] > 0
