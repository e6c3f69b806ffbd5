"""PlanJob: the typed plan the exporters take, parsed from and written to the JSON of
`accelmap plan --json`; malformed input is one InputError line naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelmap.cost.framework import Framework
from accelmap.cost.schedules import Schedule
from accelmap.errors import InputError
from accelmap.export.base import Job, PlanJob, PlanKind, ServingChoice, load_plan_file
from accelmap.mapping.plan import Mapping, Offload, ZeroStage
from accelmap.units import DType
from accelmap.workload import Recompute

# The JSON forms as the previous version of `accelmap plan --json` wrote them (key order too).
TRAIN = {"kind": "train", "model": "llama-3.1-70b", "accelerator": "h100-sxm5-80gb",
         "devices_per_node": 8, "nodes": 8,
         "mapping": {"dp": 4, "tp": 4, "pp": 2, "cp": 2, "ep": 1, "zero": 2, "micro_batch": 1,
                     "vpp": 4, "recompute": "selective", "offload": True},
         "seq_len": 8192, "global_batch": 256, "dtype": "bf16", "prompt_len": 2048,
         "output_len": 256, "framework": "megatron"}
SERVE = {"kind": "serve", "model": "mixtral-8x7b", "accelerator": "h100-sxm5-80gb",
         "devices_per_node": 8, "nodes": 2,
         "mapping": {"tp": 4, "pp": 1, "ep": 4, "replicas": 4, "batch": 512,
                     "weight_dtype": "fp8", "kv_dtype": "bf16"},
         "seq_len": 2304, "global_batch": 1024, "dtype": "bf16", "prompt_len": 2048,
         "output_len": 256, "framework": "vllm"}


def test_training_job_typed_values() -> None:
    job = PlanJob.from_dict(TRAIN)
    assert job.kind is PlanKind.TRAIN and job.dtype is DType.BF16
    assert job.framework is Framework.MEGATRON and job.serving is None
    assert job.mapping == Mapping(dp=4, tp=4, pp=2, cp=2, zero=ZeroStage.GRADIENTS,
                                  virtual_stages=4, schedule=Schedule.INTERLEAVED,
                                  recompute=Recompute.SELECTIVE, offload_optimizer=Offload.CPU,
                                  offload_params=Offload.CPU)
    assert job.mapping.world == job.devices == 64
    assert job.mapping.micro_batches(job.global_batch) == 64


def test_serving_job_typed_values() -> None:
    job = PlanJob.from_dict(SERVE)
    assert job.kind is PlanKind.SERVE
    assert job.mapping == Mapping.serving(tp=4, pp=1, ep=4, replicas=4)
    assert job.mapping.replicas == 4 and job.mapping.expert_tp == 1
    assert job.serving == ServingChoice(batch=512, weight_dtype=DType.FP8, kv_dtype=DType.BF16)


@pytest.mark.parametrize("data", [TRAIN, SERVE], ids=["train", "serve"])
def test_same_json_back(data: dict[str, Any]) -> None:
    job = PlanJob.from_dict(data)
    assert json.dumps(job.to_dict()) == json.dumps(data)  # same keys, order and values
    block = {k: v for k, v in data.items() if k != "mapping"}
    assert json.dumps(job.job.to_dict()) == json.dumps(block)  # the plan file's job block
    assert json.dumps(job.mapping_dict()) == json.dumps(data["mapping"])
    assert PlanJob.from_dict(job.to_dict()) == job
    assert Job.from_dict(block) == job.job


def test_optional_job_fields_default() -> None:
    data = {k: TRAIN[k] for k in ("kind", "model", "accelerator", "devices_per_node", "nodes",
                                  "mapping")}
    job = PlanJob.from_dict(data)
    assert (job.seq_len, job.global_batch, job.dtype, job.framework) == (4096, 1, DType.BF16,
                                                                         None)
    assert job.to_dict()["framework"] == ""


def _with(data: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``data`` with job keys changed; a ``mapping`` dict of changes is merged (None drops)."""
    out = {**data, **{k: v for k, v in changes.items() if k != "mapping"}}
    if "mapping" in changes:
        out["mapping"] = {**data["mapping"], **changes["mapping"]}
    return {k: v for k, v in out.items() if v is not None} | {
        "mapping": {k: v for k, v in out["mapping"].items() if v is not None}}


BAD = {
    "tp-word": (_with(TRAIN, mapping={"tp": "eight"}), "tp='eight' is not a whole number >= 1"),
    "tp-zero": (_with(TRAIN, mapping={"tp": 0}), "tp=0 is not a whole number >= 1"),
    "tp-fraction": (_with(TRAIN, mapping={"tp": 2.5}), "tp=2.5"),
    "tp-bool": (_with(TRAIN, mapping={"tp": True}), "tp=True"),
    "dp-null": ({**TRAIN, "mapping": {**TRAIN["mapping"], "dp": None}}, "dp=None"),
    "zero-4": (_with(TRAIN, mapping={"zero": 4}), "zero=4 is not a ZeRO stage"),
    "recompute": (_with(TRAIN, mapping={"recompute": "some"}),
                  "recompute='some' is not one of none, selective, full"),
    "offload": (_with(TRAIN, mapping={"offload": "yes"}), "offload='yes' is not true or false"),
    "no-vpp": (_with(TRAIN, mapping={"vpp": None}), "train plan's mapping has no vpp"),
    "serving-key-in-train": (_with(TRAIN, mapping={"replicas": 8}), "unknown key(s) replicas"),
    "no-replicas": (_with(SERVE, mapping={"replicas": None}),
                    "serve plan's mapping has no replicas"),
    "train-mapping-in-serve": ({**SERVE, "mapping": TRAIN["mapping"]}, "has no replicas"),
    "weight-dtype": (_with(SERVE, mapping={"weight_dtype": "fp9"}), "weight_dtype='fp9'"),
    "batch": (_with(SERVE, mapping={"batch": -1}), "batch=-1"),
    "mapping-list": ({**TRAIN, "mapping": [4, 4, 2]}, "mapping is not a JSON object"),
    "no-mapping": ({k: v for k, v in TRAIN.items() if k != "mapping"}, "has no mapping"),
    "kind": (_with(TRAIN, kind="finetune"), "kind='finetune' is not one of train, serve"),
    "dtype": (_with(TRAIN, dtype="bf17"), "dtype='bf17'"),
    "nodes": (_with(TRAIN, nodes="8"), "nodes='8' is not a whole number >= 1"),
    "no-model": (_with(TRAIN, model=None), "the plan job has no model"),
    "framework": (_with(TRAIN, framework="megatronx"), "framework='megatronx'"),
    "job-list": ([TRAIN], "is not a JSON object"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_plan_is_one_input_error_line(case: str) -> None:
    data, message = BAD[case]
    with pytest.raises(InputError) as err:
        PlanJob.from_dict(data)
    text = str(err.value)
    assert message in text and "\n" not in text, text


def test_plan_file_errors_name_the_file_and_plan(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    job = {k: v for k, v in SERVE.items() if k != "mapping"}
    ok = {"mapping": SERVE["mapping"]}
    bad = {"mapping": {k: v for k, v in SERVE["mapping"].items() if k != "replicas"}}
    path.write_text(json.dumps({"job": job, "plans": [ok, bad]}))
    assert load_plan_file(path, 0) == PlanJob.from_dict(SERVE)
    with pytest.raises(InputError, match=rf"^{path}: plan 1: the serve plan's mapping has no "
                                         "replicas; it takes tp, pp, ep, replicas, batch"):
        load_plan_file(path, 1)
    path.write_text(json.dumps({"job": job, "plans": [{"tp": 2}]}))
    with pytest.raises(InputError, match="plans with a mapping"):
        load_plan_file(path, 0)
    path.write_text(json.dumps(_with(TRAIN, mapping={"tp": "eight"})))  # a bare job object
    with pytest.raises(InputError, match=rf"^{path}: the train plan's mapping: tp='eight'"):
        load_plan_file(path)


def test_typed_job_is_checked() -> None:
    job = PlanJob.from_dict(TRAIN)
    with pytest.raises(InputError, match="serve plan needs its serving choices"):
        PlanJob(**{**vars(job.job), "kind": PlanKind.SERVE}, mapping=job.mapping)
    with pytest.raises(InputError, match="train plan has no serving choices"):
        PlanJob(**vars(job.job), mapping=job.mapping,
                serving=ServingChoice(1, DType.BF16, DType.BF16))
    with pytest.raises(InputError, match="not a table of candidates"):
        PlanJob(**vars(job.job), mapping=Mapping(dp=np.array([8, 4]), tp=np.array([1, 2])))


@pytest.mark.parametrize("field", ["model", "accelerator"])
@pytest.mark.parametrize("value", ["h100\ntouch INJECTED\n#", "llama$(touch x)", "a'b", 'a"b',
                                   "a b", "x;rm -rf /", "", "-rf", "a\\b", "é"])
def test_names_that_would_inject_into_exports_are_refused(field: str, value: str) -> None:
    """A plan file's model and accelerator end up in shell scripts, TOML and YAML: anything but
    a catalog or Hub name is one InputError line (issue 16: shell injection through export)."""
    data = {"kind": "train", "model": "llama-3.1-8b", "accelerator": "h100-sxm5-80gb",
            "devices_per_node": 8, "nodes": 1, field: value}
    with pytest.raises(InputError, match=r"is not a (catalog or Hub )?name") as err:
        Job.from_dict(data)
    assert "\n" not in str(err.value)


def test_hub_and_catalog_names_are_accepted() -> None:
    for model in ("meta-llama/Llama-3.1-8B", "llama-3.1-8b", "Qwen2.5-72B+custom", "gpt_j"):
        job = Job.from_dict({"kind": "train", "model": model, "accelerator": "h100-sxm5-80gb",
                             "devices_per_node": 8, "nodes": 1})
        assert job.model == model
