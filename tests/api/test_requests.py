"""api.requests: the typed plan and compare requests (``PlanOptions``, ``CompareRequest``) and
the one function that resolves each; the CLI-vs-web table is tests/web/test_cli_web.py."""

from __future__ import annotations

from typing import Any

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.errors import InputError
from accelmap.hardware.schema import DeviceClass


def test_plan_inputs_resolve_like_plan_request(catalog: Catalog) -> None:
    opts = api.PlanOptions(model="llama-3.1-8b", cluster="8xH100", seq=8192,
                           global_batch_tokens="2M", tokens="2T", deadline="30d",
                           objective="Cost", finetune="lora", lora_rank=16)
    spec, clusters, req = api.plan_inputs(opts, catalog)
    assert spec.id == "llama-3.1-8b" and [c.devices for c in clusters] == [8]
    assert req == api.plan_request(seq=8192, global_batch_tokens="2M", tokens="2T",
                                   deadline="30d", objective="Cost",
                                   finetune=api.adapters("lora", 16, None))
    assert req.deadline_s == 30 * 86400 and req.finetune is not None


def test_plan_inputs_take_the_device_class_stack(catalog: Catalog) -> None:
    """No --framework: each cluster's class's stack, the one estimate runs (xla on a TPU)."""
    _, [tpu], req = api.plan_inputs(api.PlanOptions(model="llama-3.2-1b",
                                                    cluster="tpu-v5e-8"), catalog)
    assert req.framework is None and req.framework_for(tpu) == "xla"
    _, [gpu], serve = api.plan_inputs(api.PlanOptions(model="llama-3.2-1b", cluster="8xH100",
                                                      train=False), catalog)
    assert serve.framework_for(gpu) == "vllm"


def test_plan_inputs_check_every_option(catalog: Catalog) -> None:
    def bad(**kw: Any) -> None:
        api.plan_inputs(api.PlanOptions(model="llama-3.2-1b", cluster="1xH100", **kw),
                        catalog)

    with pytest.raises(InputError, match="--deadline needs --train and --tokens"):
        bad(deadline="30d")
    with pytest.raises(InputError, match="--allow-quantization searches serving"):
        bad(allow_quantization=True)
    with pytest.raises(InputError, match="--concurrency must be a whole number"):
        bad(train=False, concurrency=0)
    with pytest.raises(InputError, match="give either --cluster or --hw"):
        bad(hw="H100")
    other = CalibrationProfile(name="cpu", accelerator_id="local-cpu", matmul_efficiency={},
                               bandwidth=None, source="test")
    with pytest.raises(InputError, match="measured on local-cpu"):
        api.plan_inputs(api.PlanOptions(model="llama-3.2-1b", cluster="1xH100"), catalog,
                        other)
    ok = CalibrationProfile(name="lab", accelerator_id="h100-sxm5-80gb",
                            matmul_efficiency={}, bandwidth=None, source="test")
    assert api.plan_inputs(api.PlanOptions(model="llama-3.2-1b", cluster="1xH100"), catalog,
                           ok)[2].profile is ok


def test_compare_inputs(catalog: Catalog) -> None:
    req = api.CompareRequest(model="llama-3.1-8b", device_class="tpu", precision="fp8",
                             budget_usd_h=40.0)
    spec, parts, job = api.compare_inputs(req, catalog)
    assert spec.id == "llama-3.1-8b" and parts
    assert all(p.device_class is DeviceClass.TPU for p in parts)
    assert job == api.comparison.compare_job(precision="fp8", budget_usd_h=40.0)
    with pytest.raises(InputError, match="no accelerator of class gpu in --hw tpu-v5e"):
        api.compare_inputs(api.CompareRequest(model="llama-3.1-8b", hw="tpu-v5e",
                                              device_class="gpu"), catalog)
    with pytest.raises(InputError, match="--budget-usd-h must be a positive"):
        api.compare_inputs(api.CompareRequest(model="llama-3.1-8b", budget_usd_h=0.0),
                           catalog)


def test_compare_request_and_keywords_give_the_same_rows(catalog: Catalog) -> None:
    """compare_accelerators (the keyword face) is the request's steps: the same rows."""
    kw: dict[str, Any] = dict(hw="h100-sxm5-80gb,mi300x", batch=4, precision="fp8")
    spec, parts, job = api.compare_inputs(api.CompareRequest(model="llama-3.1-8b", **kw),
                                          catalog)
    by_request = api.compare_parts(spec, parts, job, catalog)
    by_keywords = api.compare_accelerators("llama-3.1-8b", catalog=catalog, **kw)
    assert by_request.job == by_keywords.job and by_request.rows == by_keywords.rows
