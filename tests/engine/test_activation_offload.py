"""Activation offload to host memory (Mapping.offload_activations, Megatron-Core
--cpu-offloading-num-layers): the offloaded layers' saved activations leave the device, the
transfers hide behind their pass's compute unless the host link is too slow, and the knob is
expressible from the CLI, the run format and a plan file (Megatron export and read-back).
Megatron-Bridge's GB200/GB300 Llama 3 70B FSDP recipes run with it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelmap.catalog import load_catalog
from accelmap.cost.framework import Framework
from accelmap.cost.framework import profile as framework_profile
from accelmap.engine import estimate
from accelmap.engine.train import offloaded_layers
from accelmap.errors import InputError
from accelmap.export.base import PlanJob
from accelmap.export.registry import exporters
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import Mapping
from accelmap.units import DType
from accelmap.validate.predict import predict_cases
from accelmap.validate.read import read_cases
from accelmap.validate.runs import TrainingRun, UnreadableRun
from accelmap.workload import Training

CAT = load_catalog()
Run = Callable[..., Any]
BRIDGE = Path(__file__).resolve().parents[2] / "data" / "megatron_bridge_perf.yaml"


def _est(cluster: str, n: int, pp: int = 1) -> Any:
    cl = parse_cluster(cluster, CAT)
    wl = Training(batch=256, seq_len=8192, dtype=DType.FP8)
    m = Mapping(dp=cl.devices // pp, pp=pp, zero=3 if pp == 1 else 1, micro_batch=2,
                offload_activations=n)
    return estimate(CAT.models["llama-3.1-70b"], cl, wl, m,
                    framework=framework_profile(Framework.MEGATRON))


def test_offloaded_layers_leave_the_device() -> None:
    """Each offloaded layer takes one layer's saved activations off the device: the drop is
    linear in the count (40 of 79 offloadable layers take 40/79 of the most that can go), and
    the stage's last layer never goes (its backward follows its forward at once)."""
    acts = {n: float(_est("64xgb200", n).memory.items["activations/layers"])
            for n in (0, 40, 79)}
    drop40, drop79 = acts[0] - acts[40], acts[0] - acts[79]
    assert drop40 > 0 and drop40 / drop79 == pytest.approx(40 / 79, rel=1e-9)
    assert acts[79] > 0  # the last layer's and the working buffers stay
    assert int(offloaded_layers(Mapping(offload_activations=500), 80)) == 79
    assert int(offloaded_layers(Mapping(offload_activations=3), 80)) == 3
    none, half = _est("64xgb200", 0), _est("64xgb200", 40)
    assert none.feasible is False and half.feasible  # Megatron-Bridge's GB200 recipe


def test_transfers_hide_unless_the_host_link_is_too_slow() -> None:
    """Over NVLink-C2C, 40 layers' activations leave within the forward; all 79 outlast it."""
    half, most = _est("64xgb200", 40), _est("64xgb200", 79)
    assert "exposed_comm/act_offload" not in half.time
    assert most.time["exposed_comm/act_offload"] > 0
    assert most.step_time_s > half.step_time_s
    assert sum(most.time.values()) == pytest.approx(most.step_time_s, rel=1e-9)
    assert "act-offload=40" in half.mapping.describe()


def test_mapping_refuses_a_negative_count() -> None:
    with pytest.raises(InputError, match="cpu-offloading-num-layers"):
        Mapping(offload_activations=-1)
    m = Mapping(dp=2, offload_activations=4).with_recompute(None)
    assert Mapping.from_dict(m.to_dict()) == m


def test_run_format_reads_it(tmp_path: Path) -> None:
    row = {"id": "r", "accelerator": "gb200", "model": "llama-3.1-70b", "devices": 64,
           "zero": "fsdp", "micro_batch": 2, "precision": "fp8", "framework": "nemo 25.11",
           "seq_len": 8192, "global_batch": 256, "metric": "tokens_per_s_per_device",
           "value": 4312}
    path = tmp_path / "runs.yaml"
    path.write_text(json.dumps([row | {"offload_activations": 40},
                                row | {"id": "bad", "offload_activations": "some"}]))
    good, bad = read_cases(path).cases
    assert isinstance(good, TrainingRun) and good.offload_activations == 40
    assert isinstance(bad, UnreadableRun)
    assert any("offload_activations" in str(p) for p in bad.problems)


def test_megatron_bridge_fsdp_rows_fit_with_their_offload() -> None:
    """The GB200/GB300 Llama 3 70B rows as Megatron-Bridge's recipes run them are predicted to
    fit (before activation offload and the FSDP-sharded FP8 weight copies: 'does not fit')."""
    runs = [r for r in read_cases(BRIDGE).cases
            if isinstance(r, TrainingRun) and r.offload_activations]
    assert len(runs) == 2
    for p in predict_cases(runs, CAT, frozenset()):
        assert p.fits is not False and abs(float(p.signed_pct_error or 0)) <= 25, p


def test_megatron_export_writes_and_reads_back_the_flags() -> None:
    job = PlanJob.from_dict({
        "kind": "train", "model": "llama-3.1-8b", "accelerator": "h100-sxm5-80gb",
        "devices_per_node": 8, "nodes": 1, "seq_len": 8192, "global_batch": 16,
        "dtype": "bf16", "prompt_len": 0, "output_len": 0, "framework": "megatron",
        "mapping": {"dp": 8, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "zero": 1, "micro_batch": 1,
                    "vpp": 1, "recompute": "none", "offload": False,
                    "offload_activations": 8}})
    ex = exporters()["megatron"]
    out = ex.run(job, CAT.models["llama-3.1-8b"])
    text = "\n".join(out.files.values())
    assert "--cpu-offloading" in text and "--cpu-offloading-num-layers 8" in text
    assert ex.read_back(out.files).mapping.offload_activations == 8
    titan = exporters()["torchtitan"].run(job, CAT.models["llama-3.1-8b"])
    assert any("offload_activations" in line for line in titan.unsupported)


TRAIN = ("estimate", "llama-3.1-70b", "--cluster", "64xgb200", "--train", "--batch", "256",
         "--seq", "8192", "--zero", "3", "--micro-batch", "2", "--dtype", "fp8", "--json")


def test_cli_flag_and_refusals(cli: Run) -> None:
    on = cli(*TRAIN, "--offload-activations", "40")
    assert on.code == 0, on.err
    assert json.loads(on.out)["feasible"] is True
    over = cli(*TRAIN, "--offload-activations", "80")  # 80 layers: at most 79
    assert over.code == 0 and json.loads(over.out)["feasible"] is False
    assert "offload_activations=80" in json.loads(over.out)["reason"]
    bad = [cli(*TRAIN, "--offload-activations", "-2"),
           cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve",
               "--offload-activations", "4")]
    assert all(r.code == 2 and "--offload-activations" in r.err and "Traceback" not in r.err
               and len(r.err.strip().splitlines()) == 1 for r in bad), [r.err for r in bad]
