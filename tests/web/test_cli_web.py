"""CLI = web: the same input gives the same answer (the --json object) or the same error
sentence, on a small table of estimate, plan and compare inputs."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from accelmap import api
from accelmap.cli.app import main
from accelmap.errors import InputError
from accelmap.web.app import create_app

# (endpoint, body, CLI arguments); every one either answers or fails in both
TABLE: list[tuple[str, dict[str, Any], list[str]]] = [
    ("estimate", {"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb", "batch": 8},
     ["estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--serve", "--batch", "8"]),
    ("estimate", {"model": "llama-3.1-8b", "cluster": "8xH100", "train": True, "batch": 64,
                  "seq": 2048},
     ["estimate", "llama-3.1-8b", "--cluster", "8xH100", "--train", "--batch", "64", "--seq",
      "2048"]),
    ("estimate", {"model": "llama-9", "hw": "h100-sxm5-80gb"},
     ["estimate", "llama-9", "--hw", "h100-sxm5-80gb"]),
    ("estimate", {"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb", "dtype": "fp7"},
     ["estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--dtype", "fp7"]),
    ("estimate", {"model": "llama-3.1-8b", "cluster": "8xH100", "train": True, "tp": 3},
     ["estimate", "llama-3.1-8b", "--cluster", "8xH100", "--train", "--tp", "3"]),
    # issue 25: the web's serve form gave an infeasible row, its train form another sentence
    ("estimate", {"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb", "tp": 2},
     ["estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--tp", "2"]),
    ("estimate", {"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb", "tp": 2, "train": True},
     ["estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--tp", "2", "--train"]),
    # one typed request (api.EstimateRequest): the web did not refuse serving past the context
    ("estimate", {"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb", "prompt": 300000},
     ["estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--prompt", "300000"]),
    # no layout on 8 devices: the engine's layout that holds the model, in both
    ("estimate", {"model": "llama-3.1-70b", "cluster": "8xH100", "batch": 8},
     ["estimate", "llama-3.1-70b", "--cluster", "8xH100", "--batch", "8"]),
    ("estimate", {"model": "llama-3.1-8b", "hw": "h100", "batch": 8},
     ["estimate", "llama-3.1-8b", "--hw", "h100", "--batch", "8"]),
    ("plan", {"model": "llama-3.1-8b", "cluster": "8xH100", "objective": "fastest"},
     ["plan", "llama-3.1-8b", "--cluster", "8xH100", "--objective", "fastest"]),
    ("plan", {"model": "llama-3.1-8b", "cluster": "8xH100", "train": True, "rate": 2.0},
     ["plan", "llama-3.1-8b", "--cluster", "8xH100", "--train", "--rate", "2"]),
    ("plan", {"model": "llama-3.1-8b", "cluster": "8xH100", "global_batch_tokens": "1M"},
     ["plan", "llama-3.1-8b", "--cluster", "8xH100", "--global-batch-tokens", "1M"]),
    ("plan", {"model": "llama-3.1-8b", "cluster": "7xNOPE"},
     ["plan", "llama-3.1-8b", "--cluster", "7xNOPE"]),
    ("compare", {"model": "llama-3.1-8b", "hw": "H100,MI300X"},
     ["compare", "llama-3.1-8b", "--hw", "H100,MI300X"]),
    ("compare", {"model": "llama-3.1-8b", "devices": 8, "budget_usd_h": 50.0},
     ["compare", "llama-3.1-8b", "--devices", "8", "--budget-usd-h", "50"]),
    ("compare", {"model": "llama-3.1-8b", "objective": "cheapest"},
     ["compare", "llama-3.1-8b", "--objective", "cheapest"]),
    # a layout the model's shape refuses (issue 22): one line in both, not a "cannot run" row
    ("estimate", {"model": "deepseek-r1", "cluster": "8xb200", "weights": "fp4", "tp": 8,
                  "ep": 3},
     ["estimate", "deepseek-r1", "--cluster", "8xb200", "--weights", "fp4", "--tp", "8",
      "--ep", "3"]),
    # AMD's ATOM on an NVIDIA part: one line in both; on an AMD part, the same answer
    ("estimate", {"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb", "framework": "atom"},
     ["estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--framework", "atom"]),
    ("estimate", {"model": "llama-3.1-8b", "hw": "mi355x", "framework": "atom"},
     ["estimate", "llama-3.1-8b", "--hw", "mi355x", "--framework", "atom"]),
    # DP attention on a dense model (issue 22 part 3): one line in both, naming the flag
    ("estimate", {"model": "llama-3.1-8b", "cluster": "2xH100", "tp": 2, "dp_attention": True},
     ["estimate", "llama-3.1-8b", "--cluster", "2xH100", "--tp", "2", "--dp-attention"]),
    # the serving frontier (issue 22 part 6): answered or refused alike
    ("frontier", {"model": "llama-3.1-8b", "cluster": "2xh100-sxm5-80gb", "isl": 256, "osl": 32,
                  "concurrency": "2,16"},
     ["frontier", "llama-3.1-8b", "--cluster", "2xh100-sxm5-80gb", "--isl", "256", "--osl",
      "32", "--concurrency", "2,16"]),
    ("frontier", {"model": "llama-3.1-8b", "cluster": "2xh100-sxm5-80gb", "concurrency": "0"},
     ["frontier", "llama-3.1-8b", "--cluster", "2xh100-sxm5-80gb", "--concurrency", "0"]),
    ("frontier", {"model": "llama-3.1-8b", "cluster": "2xh100-sxm5-80gb", "weights": "fp5"},
     ["frontier", "llama-3.1-8b", "--cluster", "2xh100-sxm5-80gb", "--weights", "fp5"]),
    # one typed request per command (api.PlanOptions, api.CompareRequest): the options the web
    # did not pass before, answered or refused alike
    *[("plan", {"model": "llama-3.2-1b", **body}, ["plan", "llama-3.2-1b", *args])
      for body, args in [
          # --deadline: the web had no such field, then passed none
          ({"cluster": "1xH100", "deadline": "30d"},
           ["--cluster", "1xH100", "--deadline", "30d"]),
          ({"cluster": "1xH100", "train": False, "tokens": "1B", "deadline": "30d"},
           ["--cluster", "1xH100", "--serve", "--tokens", "1B", "--deadline", "30d"]),
          ({"cluster": "1xH100", "tokens": "1B", "deadline": "soon"},
           ["--cluster", "1xH100", "--tokens", "1B", "--deadline", "soon"]),
          ({"cluster": "8xH100", "tokens": "1T", "deadline": "1s"},
           ["--cluster", "8xH100", "--tokens", "1T", "--deadline", "1s"]),
          # --concurrency
          ({"cluster": "1xH100", "train": False, "concurrency": 4, "requests": 50},
           ["--cluster", "1xH100", "--serve", "--concurrency", "4", "--requests", "50"]),
          ({"cluster": "1xH100", "train": False, "concurrency": 0},
           ["--cluster", "1xH100", "--serve", "--concurrency", "0"]),
          ({"cluster": "1xH100", "concurrency": 4},
           ["--cluster", "1xH100", "--train", "--concurrency", "4"]),
          # --allow-quantization
          ({"cluster": "1xH100", "train": False, "scenario": "batch",
            "allow_quantization": True},
           ["--cluster", "1xH100", "--serve", "--scenario", "batch", "--allow-quantization"]),
          ({"cluster": "1xH100", "allow_quantization": True},
           ["--cluster", "1xH100", "--train", "--allow-quantization"]),
          # a rate of 0: the API's sentence in both (the form's own bound said another)
          ({"cluster": "1xH100", "train": False, "rate": 0.0},
           ["--cluster", "1xH100", "--serve", "--rate=0"]),
          ({"cluster": "1xH100", "train": False, "finetune": "lora"},
           ["--cluster", "1xH100", "--serve", "--finetune", "lora"]),
          ({"cluster": "1xH100", "train": False, "scenario": "nope"},
           ["--cluster", "1xH100", "--serve", "--scenario", "nope"]),
          # the device class's stack (xla on a TPU slice, PlanRequest.framework_for)
          ({"cluster": "tpu-v5e-8", "global_batch_tokens": "64K"},
           ["--cluster", "tpu-v5e-8", "--train", "--global-batch-tokens", "64K"]),
          # several accelerators: the comparison of their best plans
          ({"hw": "H100,MI300X", "devices": 1, "train": False, "scenario": "batch"},
           ["--hw", "H100,MI300X", "--devices", "1", "--serve", "--scenario", "batch"]),
      ]],
    ("plan", {"model": "llama-3.1-8b", "cluster": "8xH100", "tokens": "10B",
              "deadline": "30d"},
     ["plan", "llama-3.1-8b", "--cluster", "8xH100", "--train", "--tokens", "10B",
      "--deadline", "30d"]),
    *[("compare", {"model": "llama-3.1-8b", **body}, ["compare", "llama-3.1-8b", *args])
      for body, args in [
          # --class (the form's "class")
          ({"class": "tpu"}, ["--class", "tpu"]),
          ({"class": "quantum"}, ["--class", "quantum"]),
          ({"hw": "tpu-v5e", "class": "gpu"}, ["--hw", "tpu-v5e", "--class", "gpu"]),
          # --precision, --best-precision
          ({"hw": "H100,MI300X", "precision": "fp8"},
           ["--hw", "H100,MI300X", "--precision", "fp8"]),
          ({"hw": "H100,MI300X", "precision": "fp7"},
           ["--hw", "H100,MI300X", "--precision", "fp7"]),
          ({"train": True, "precision": "int4"}, ["--train", "--precision", "int4"]),
          ({"precision": "fp8", "best_precision": True},
           ["--precision", "fp8", "--best-precision"]),
          ({"hw": "H100,MI300X", "best_precision": True},
           ["--hw", "H100,MI300X", "--best-precision"]),
          # --budget-usd-h: 0 or less is the API's sentence in both
          ({"hw": "H100,MI300X", "budget_usd_h": 50.0},
           ["--hw", "H100,MI300X", "--budget-usd-h", "50"]),
          ({"hw": "H100,MI300X", "budget_usd_h": 0.0},
           ["--hw", "H100,MI300X", "--budget-usd-h", "0"]),
          ({"hw": "H100,MI300X", "budget_usd_h": -5.0},
           ["--hw", "H100,MI300X", "--budget-usd-h=-5"]),
          # training, a framework
          ({"hw": "H100,MI300X", "train": True, "precision": "fp8", "devices": 8},
           ["--hw", "H100,MI300X", "--train", "--precision", "fp8", "--devices", "8"]),
          ({"train": True, "global_batch_tokens": "1K"},
           ["--train", "--global-batch-tokens", "1K"]),
          ({"framework": "nope"}, ["--framework", "nope"]),
          ({"hw": "H100,MI300X", "framework": "tensorrt-llm"},
           ["--hw", "H100,MI300X", "--framework", "tensorrt-llm"]),
      ]],
]
# wall times of the run (the search's, a simulation's), at any depth, and said in a sentence
VOLATILE = ("seconds", "screen_s", "simulate_s", "simulated_s")
WALL_TIME = re.compile(r"\d+(\.\d+)? s\)")


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(catalog=api.load_catalog()), base_url="http://127.0.0.1") as c:
        yield c


def cli(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    try:
        main([*args, "--json"])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def stable(obj: Any) -> Any:
    """``obj`` without its wall times: what the same input must give twice."""
    if isinstance(obj, dict):
        return {k: stable(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [stable(v) for v in obj]
    return WALL_TIME.sub("T s)", obj) if isinstance(obj, str) else obj


@pytest.mark.parametrize(("endpoint", "body", "args"), TABLE,
                         ids=[f"{e}-{i}" for i, (e, _, _) in enumerate(TABLE)])
def test_cli_and_web_agree(client: TestClient, capsys: pytest.CaptureFixture[str],
                           endpoint: str, body: dict[str, Any], args: list[str]) -> None:
    r = client.post(f"/api/{endpoint}", json=body)
    code, out, err = cli(capsys, args)
    if code == 0:
        assert r.status_code == 200, r.text[:300]
        assert stable(r.json()) == stable(json.loads(out))
    else:
        assert code == 2, err
        assert 400 <= r.status_code < 500, r.text[:300]
        assert err.strip() == f"error: {r.json()['error']}"


def test_every_estimate_form_field_reaches_the_request() -> None:
    """The web form and the CLI build one EstimateRequest: a form field the request does not
    know is a field the web would silently drop (moe_imbalance and framework go to the
    estimate call itself)."""
    import dataclasses

    from accelmap.web.forms import EstimateForm

    known = {f.name for f in dataclasses.fields(api.EstimateRequest)}
    extra = set(EstimateForm.model_fields) - known - {"no_sp", "moe_imbalance", "framework"}
    assert not extra, extra


@pytest.mark.parametrize(("request_type", "form_name"),
                         [(api.PlanOptions, "PlanForm"), (api.CompareRequest, "CompareForm")])
def test_the_web_form_is_the_request(request_type: type, form_name: str) -> None:
    """The form's fields are the typed request's, no more and no fewer: a field only the form
    had would be dropped, one only the request had would be an option the web cannot give
    (the web's plan form lacked deadline, concurrency and allow_quantization)."""
    import dataclasses

    from accelmap.web import forms

    form = getattr(forms, form_name)
    assert set(form.model_fields) == {f.name for f in dataclasses.fields(request_type)}


@pytest.mark.parametrize(("command", "request_type"),
                         [("plan", api.PlanOptions), ("compare", api.CompareRequest)])
def test_every_cli_option_is_in_the_request_or_cli_only(command: str,
                                                        request_type: type) -> None:
    """Each of the command's parameters is a field of its typed request (so of the web's form)
    or named in the module's CLI_ONLY, never silently neither."""
    import dataclasses
    import importlib
    import inspect

    mod = importlib.import_module(f"accelmap.cli.{command}")
    params = set(inspect.signature(getattr(mod, f"{command}_cmd")).parameters)
    fields = {f.name for f in dataclasses.fields(request_type)}
    assert params - mod.CLI_ONLY == fields
    assert not (mod.CLI_ONLY & fields)
    assert params >= mod.CLI_ONLY


def test_cli_options_and_form_give_equal_requests() -> None:
    """``.of`` of the CLI's parameters (every option, CLI-only ones included) and of the web's
    form with the same values are equal requests."""
    from types import SimpleNamespace

    from accelmap.web.forms import CompareForm, PlanForm

    plan = dict(model="llama-3.1-70b", cluster=None, hw="H100,MI300X", devices=16, train=True,
                seq=8192, global_batch_tokens="2M", tokens="1T", deadline="30d", prompt=1000,
                output=100, scenario=None, rate=None, concurrency=None, requests=None,
                max_seqs=None, ttft=None, tpot=None, objective="cost", top=3,
                framework="megatron", offload=True, force_tp=True, include_tight=True,
                allow_quantization=False, finetune="lora", lora_rank=16, lora_targets="qkv")
    cli_only = dict(ray=None, report=None, export="megatron", out=".", force=False,
                    profile=None, db=None, catalog=None, json_out=True)
    from_cli = api.PlanOptions.of({**plan, **cli_only})  # the command's locals()
    assert from_cli == api.PlanOptions.of(SimpleNamespace(**plan, **cli_only))
    assert from_cli == api.PlanOptions.of(PlanForm(**plan))
    assert from_cli == api.PlanOptions(**plan)

    cmp = dict(model="llama-3.1-8b", train=True, hw="all", device_class="gpu", batch=4,
               prompt=100, output=10, seq=2048, global_batch_tokens="1M", precision="fp8",
               best_precision=False, devices=None, budget_usd_h=40.0, objective="tokens_per_s",
               framework="fsdp")
    from_cli_c = api.CompareRequest.of({**cmp, "top": 5, "ray": None, "json_out": False})
    body = {("class" if k == "device_class" else k): v for k, v in cmp.items()}
    assert from_cli_c == api.CompareRequest.of(CompareForm.model_validate(body))
    assert from_cli_c == api.CompareRequest(**cmp)


def test_the_web_estimate_takes_the_fp8_scaling(catalog: Any) -> None:
    """POST /api/estimate with fp8_scaling rowwise answers as `estimate --fp8-scaling rowwise`
    (a slower step than tensor-wise scaling), and a wrong word is one line, not a crash."""
    from accelmap.web import jobs
    from accelmap.web.forms import EstimateForm

    base = dict(model="llama-3.2-1b", cluster="2xH100", train=True, dtype="fp8", batch=8,
                seq=2048, tp=1)
    tensor, _ = jobs.estimate(EstimateForm(**base), catalog)
    row, _ = jobs.estimate(EstimateForm(**base, fp8_scaling="rowwise"), catalog)
    assert row["step_time_s"] > tensor["step_time_s"]
    with pytest.raises(InputError, match="unknown FP8 scaling"):
        jobs.estimate(EstimateForm(**base, fp8_scaling="colwise"), catalog)
