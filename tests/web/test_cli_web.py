"""CLI = web: the same input gives the same answer (the --json object) or the same error
sentence, on a small table of estimate, plan and compare inputs."""

from __future__ import annotations

import json
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
]
VOLATILE = ("seconds",)  # wall time of the run


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
    return {k: v for k, v in obj.items() if k not in VOLATILE} if isinstance(obj, dict) else obj


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
