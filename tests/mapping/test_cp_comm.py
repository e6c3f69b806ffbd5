"""Context parallelism's K/V exchange (mapping.plan.CpComm, Megatron --cp-comm-type): a ring
(p2p) hides behind attention, Llama 3's all-gather (Dubey et al. 2024 sec. 3.3.2) is exposed;
the same bytes either way. Expressible from the CLI, the run format and a plan file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelmap.catalog import load_catalog
from accelmap.engine import estimate
from accelmap.errors import InputError
from accelmap.export.base import PlanJob
from accelmap.export.registry import exporters
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import CpComm, Mapping, cp_comm
from accelmap.validate.read import read_cases
from accelmap.validate.runs import TrainingRun, UnreadableRun
from accelmap.workload import Recompute, Training

CAT = load_catalog()
Run = Callable[..., Any]


@pytest.mark.parametrize(("word", "want"), [
    ("p2p", CpComm.P2P), ("ring", CpComm.P2P), ("allgather", CpComm.ALL_GATHER),
    ("all-gather", CpComm.ALL_GATHER), ("ALL_GATHER", CpComm.ALL_GATHER)])
def test_words(word: str, want: CpComm) -> None:
    assert cp_comm(word) is want
    assert Mapping(cp=2, cp_comm=word).cp_comm is want


def test_unknown_word_is_one_line_naming_the_flag() -> None:
    with pytest.raises(InputError, match=r"--cp-comm 'a2a'.*p2p.*all-gather"):
        cp_comm("a2a")


def _est(comm: CpComm, cp: int) -> Any:
    spec = CAT.models["llama-3.1-70b"]
    cl = parse_cluster("4xdgx-h100", CAT)
    wl = Training(batch=8, seq_len=32768, recompute=Recompute.FULL)
    return estimate(spec, cl, wl, Mapping(tp=8, cp=cp, dp=32 // (8 * cp), cp_comm=comm))


def test_all_gather_moves_the_ring_bytes_and_hides_none() -> None:
    ring, gather = _est(CpComm.P2P, 4), _est(CpComm.ALL_GATHER, 4)
    r, g = ring.metrics["communication_s"]["cp"], gather.metrics["communication_s"]["cp"]
    assert r == pytest.approx(g, rel=1e-12) and g > 0
    exposed = gather.metrics["time_breakdown_s"]["exposed_comm/cp"]
    assert exposed > ring.metrics["time_breakdown_s"].get("exposed_comm/cp", 0.0)
    assert gather.metrics["step_time_s"] > ring.metrics["step_time_s"]
    assert "cp-comm=allgather" in gather.assumptions[0]


def test_no_context_parallelism_no_difference() -> None:
    a, b = _est(CpComm.P2P, 1), _est(CpComm.ALL_GATHER, 1)
    assert a.metrics["step_time_s"] == b.metrics["step_time_s"]


def test_run_format_reads_the_word(tmp_path: Path) -> None:
    row = {"id": "r", "accelerator": "h100-sxm5-80gb", "model": "llama-3.1-70b",
           "devices": 32, "tp": 8, "cp": 4, "seq_len": 32768, "global_batch": 8,
           "metric": "tflops_per_device_model", "value": 300}
    path = tmp_path / "runs.yaml"
    path.write_text(json.dumps([row | {"cp_comm": "all-gather"},
                                row | {"id": "bad", "cp_comm": "a2a"}]))
    cases = read_cases(path)
    good, bad = cases.cases
    assert isinstance(good, TrainingRun) and good.cp_comm is CpComm.ALL_GATHER
    assert isinstance(bad, UnreadableRun)
    assert any("cp_comm" in str(p) and "all-gather" in str(p) for p in bad.problems)


def test_megatron_export_writes_and_reads_back_the_flag() -> None:
    job = PlanJob.from_dict({
        "kind": "train", "model": "llama-3.1-8b", "accelerator": "h100-sxm5-80gb",
        "devices_per_node": 8, "nodes": 2, "seq_len": 32768, "global_batch": 8,
        "dtype": "bf16", "prompt_len": 0, "output_len": 0, "framework": "megatron",
        "mapping": {"dp": 2, "tp": 2, "pp": 1, "cp": 4, "ep": 1, "zero": 1, "micro_batch": 1,
                    "vpp": 1, "recompute": "full", "offload": False, "cp_comm": "allgather"}})
    ex = exporters()["megatron"]
    out = ex.run(job, CAT.models["llama-3.1-8b"])
    assert any("--cp-comm-type allgather" in text for text in out.files.values())
    assert ex.read_back(out.files).mapping.cp_comm is CpComm.ALL_GATHER
    titan = exporters()["torchtitan"].run(job, CAT.models["llama-3.1-8b"])
    assert any("cp_comm" in line for line in titan.unsupported)


TRAIN = ("estimate", "llama-3.1-8b", "--cluster", "2xdgx-h100", "--train", "--batch", "8",
         "--seq", "32768", "--tp", "4", "--json")


def test_cli_flag_and_refusals(cli: Run) -> None:
    runs = {w: cli(*TRAIN, "--cp", "4", "--cp-comm", w) for w in ("p2p", "all-gather")}
    assert all(r.code == 0 for r in runs.values()), [r.err for r in runs.values()]
    steps = {w: json.loads(r.out)["step_time_s"] for w, r in runs.items()}
    assert steps["all-gather"] > steps["p2p"]
    bad = [cli(*TRAIN, "--cp", "4", "--cp-comm", "ulysses"),
           cli(*TRAIN, "--cp-comm", "allgather"),
           cli("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve",
               "--cp-comm", "allgather")]
    assert all(r.code == 2 and "--cp-comm" in r.err and "Traceback" not in r.err
               and len(r.err.strip().splitlines()) == 1 for r in bad), [r.err for r in bad]
