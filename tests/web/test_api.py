"""The web app's JSON API (FastAPI's TestClient): the same objects as the CLI's --json, bad
input as one sentence with a 4xx, bounded requests, downloads."""

from __future__ import annotations

import io
import json
import threading
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed")

with warnings.catch_warnings():  # starlette's note on its httpx-based client
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from accelmap import api
from accelmap.cli.app import main
from accelmap.web.app import create_app

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "measurements"
PLAN = {"model": "llama-3.1-8b", "cluster": "8xH100", "train": True, "seq": 4096,
        "global_batch_tokens": "1M"}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """One client (one event loop, as a server has) on the loopback name the app answers."""
    with TestClient(create_app(catalog=api.load_catalog()), base_url="http://127.0.0.1") as c:
        yield c


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    main([*args, "--json"])
    return json.loads(capsys.readouterr().out)


def test_catalog_lists_what_the_forms_name(client: TestClient) -> None:
    r = client.get("/api/catalog")
    assert r.status_code == 200
    body = r.json()
    assert {"llama-3.1-8b"} <= {m["id"] for m in body["models"]}
    assert {"h100-sxm5-80gb"} <= {a["id"] for a in body["accelerators"]}
    assert {"dgx-h100"} <= {s["id"] for s in body["systems"]}
    assert {"megatron", "vllm"} <= {e["name"] for e in body["exporters"]}


def test_plan_is_the_cli_plan_json(client: TestClient, capsys: pytest.CaptureFixture[str]
                                   ) -> None:
    r = client.post("/api/plan", json=PLAN)
    assert r.status_code == 200, r.text
    web = r.json()
    cli = cli_json(capsys, "plan", "llama-3.1-8b", "--cluster", "8xH100", "--train", "--seq",
                   "4096", "--global-batch-tokens", "1M")
    web.pop("seconds"), cli.pop("seconds")
    assert web == cli


def _same_as_cli(client: TestClient, capsys: pytest.CaptureFixture[str],
                 body: dict[str, Any]) -> dict[str, Any]:
    """The web's estimate of ``body`` and the CLI's --json of the same options: equal."""
    r = client.post("/api/estimate", json=body)
    assert r.status_code == 200, r.text
    argv = ["estimate", body["model"]]
    for key, value in body.items():
        if key != "model":
            flag = "--" + key.replace("_", "-")
            argv += [flag] if value is True else [flag, str(value)]
    cli = cli_json(capsys, *argv)
    assert r.json() == cli
    return cli


def test_estimate_is_the_cli_estimate_json(client: TestClient,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    _same_as_cli(client, capsys, {"model": "llama-3.1-70b", "cluster": "64xH100", "train": True,
                                  "tp": 8, "pp": 2, "batch": 256, "seq": 4096,
                                  "recompute": "full"})
    serve = client.post("/api/estimate", json={"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb",
                                               "batch": 8})
    assert serve.status_code == 200 and serve.json()["ttft_s"] > 0


def test_cp_comm_is_the_cli_flag(client: TestClient, capsys: pytest.CaptureFixture[str]) -> None:
    """Llama 3's all-gather context parallelism (--cp-comm all-gather) from the web form."""
    cli = _same_as_cli(client, capsys, {"model": "llama-3.1-8b", "cluster": "2xdgx-h100",
                                        "train": True, "tp": 4, "cp": 4, "batch": 8,
                                        "seq": 32768, "cp_comm": "all-gather"})
    assert "cp-comm=allgather" in " ".join(cli["assumptions"])


def test_stack_knobs_are_the_cli_flags(client: TestClient,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSpeed's blocking pipeline sends and Megatron's activation offload from the web form
    give the CLI's answer."""
    sends = _same_as_cli(client, capsys, {"model": "gpt3-13b", "cluster": "128xa100-sxm4-80gb",
                                          "train": True, "tp": 8, "pp": 4, "batch": 512,
                                          "pp_sends": "blocking-whole-grad"})
    assert "stage sends blocking-whole-grad" in " ".join(sends["assumptions"])
    off = _same_as_cli(client, capsys, {"model": "llama-3.1-70b", "cluster": "64xgb200",
                                        "train": True, "zero": 3, "micro_batch": 2,
                                        "batch": 256, "seq": 8192, "dtype": "fp8",
                                        "offload_activations": 40})
    assert off["feasible"] is True and "act-offload=40" in " ".join(off["assumptions"])


@pytest.mark.parametrize(("body", "status", "sentence"), [
    ({"model": "llama-9", "hw": "h100-sxm5-80gb"}, 400, "unknown model 'llama-9'"),
    ({"model": "llama-3.1-8b", "hw": "a100"}, 400, "'a100' matches 3 accelerators"),
    ({"model": "llama-3.1-8b"}, 400, "give one accelerator (--hw NAME) or one cluster"),
    ({"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb", "sq": 3}, 422, "unknown field 'sq'"),
    ({"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb", "seq": 0}, 422, "seq: Input should be"),
    ({"hw": "h100-sxm5-80gb"}, 422, "missing field 'model'"),
    ({"model": "llama-3.1-8b", "cluster": "2xdgx-h100", "train": True, "cp": 4,
      "cp_comm": "ulysses"}, 400, "--cp-comm 'ulysses'"),
])
def test_bad_estimate_input_is_one_sentence(client: TestClient, body: dict[str, Any],
                                            status: int, sentence: str) -> None:
    r = client.post("/api/estimate", json=body)
    assert r.status_code == status
    assert sentence in r.json()["error"]
    assert "\n" not in r.json()["error"]


def test_bad_plan_input_says_what_the_cli_says(client: TestClient,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    r = client.post("/api/plan", json={**PLAN, "objective": "fastest"})
    assert r.status_code == 400
    with pytest.raises(SystemExit):
        main(["plan", "llama-3.1-8b", "--cluster", "8xH100", "--objective", "fastest"])
    assert capsys.readouterr().err.strip() == f"error: {r.json()['error']}"


def test_plan_figures_for_the_page(client: TestClient) -> None:
    r = client.post("/api/plan/figures", json=PLAN)
    assert r.status_code == 200
    body = r.json()
    ids = [f["id"] for f in body["figures"]]
    assert {"roofline", "step-time", "memory", "pareto"} <= set(ids)
    assert all(f["figure"]["data"] and f["title"] for f in body["figures"])
    assert body["result"]["plans"][0]["mapping"]["dp"] >= 1
    assert body["version"] == api.reports.accelmap_version()


def test_search_cap_returns_the_best_so_far(client: TestClient) -> None:
    with TestClient(create_app(search_s=1e-9, catalog=api.load_catalog()),
                    base_url="http://127.0.0.1") as capped:
        r = capped.post("/api/plan", json=PLAN)
    assert r.status_code == 200
    body = r.json()
    assert body["interrupted"] is True
    assert any("search cap" in n for n in body["notes"])


def test_request_size_limit() -> None:
    with TestClient(create_app(max_body=1024, catalog=api.load_catalog()),
                    base_url="http://127.0.0.1") as small:
        r = small.post("/api/plan", content=b"{" + b" " * 4096 + b"}",
                       headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert "limit" in r.json()["error"]


def test_export_zip_of_a_plan(client: TestClient) -> None:
    plan = client.post("/api/plan", json=PLAN).json()
    r = client.post("/api/export", json={"plan": plan, "format": "megatron"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(r.content)).namelist()
    assert "LAUNCH.txt" in names and len(names) >= 2
    every = zipfile.ZipFile(io.BytesIO(client.post("/api/export", json={"plan": plan}).content))
    assert {n.split("/")[0] for n in every.namelist()} >= {"megatron", "deepspeed"}
    bad = client.post("/api/export", json={"plan": plan, "format": "vllm"})
    assert bad.status_code == 400 and "exports serve plans" in bad.json()["error"]
    junk = client.post("/api/export", json={"plan": {"x": 1}})
    assert junk.status_code == 400 and junk.json()["error"].startswith("plan: ")


def test_validate_an_uploaded_csv(client: TestClient, capsys: pytest.CaptureFixture[str]
                                  ) -> None:
    csv = CASES / "inference.csv"
    with csv.open("rb") as f:
        r = client.post("/api/validate", files=[("cases", (csv.name, f, "text/csv"))])
    assert r.status_code == 200, r.text
    cli = cli_json(capsys, "validate", "--cases", str(csv))
    assert r.json()["summary"] == cli["summary"]
    bad = client.post("/api/validate", files=[("cases", ("x.csv", b"a,b\n1,2\n", "text/csv"))])
    assert bad.status_code == 400
    assert bad.json()["error"].startswith("x.csv: unknown measurement format")


def test_report_of_a_saved_result(client: TestClient) -> None:
    plan = client.post("/api/plan", json=PLAN).json()
    r = client.post("/api/report", json=plan)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "<script src=" not in r.text and "Pareto front" in r.text
    bad = client.post("/api/report", json={"nothing": 1})
    assert bad.status_code == 400 and "not a result accelmap can report" in bad.json()["error"]


def test_page_and_local_plotly(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and 'src="/static/plotly.min.js"' in page.text
    assert "http" not in page.text.split("<body>")[0]  # no CDN in the head
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/estimate", "/api/plan", "/api/compare", "/api/export", "/api/validate",
            "/api/catalog"} <= set(paths)


def test_concurrent_requests(client: TestClient) -> None:
    body = {"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb", "batch": 4}
    out: list[int] = []

    def one() -> None:
        out.append(client.post("/api/estimate", json=body).status_code)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [200] * 8


def test_frontier(client: TestClient) -> None:
    body = {"model": "llama-3.1-8b", "cluster": "2xh100-sxm5-80gb", "isl": 256, "osl": 32,
            "concurrency": "2,16"}
    r = client.post("/api/frontier", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["frontier"][0]["front"]
    fig = client.post("/api/frontier/figures", json=body)
    assert fig.status_code == 200 and fig.json()["figures"]
    bad = client.post("/api/frontier", json={**body, "concurrency": "0"})
    assert bad.status_code == 400 and "--concurrency" in bad.json()["error"]


def test_compare(client: TestClient) -> None:
    r = client.post("/api/compare", json={"model": "llama-3.1-8b", "hw": "H100,MI300X",
                                          "class": "gpu"})
    assert r.status_code == 200, r.text
    assert {row["accelerator"] for row in r.json()["rows"]} >= {"h100-sxm5-80gb"}
    fig = client.post("/api/compare/figures", json={"model": "llama-3.1-8b", "hw": "H100"})
    assert fig.status_code == 200 and fig.json()["figures"]
