"""The web app under bad, hostile and heavy input: a 4xx with one sentence (never a 5xx, never
the server's files), Host/Origin checks and security headers, and bounded work (caps on every
path, lanes, killed jobs)."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import anyio

from accelmap import api
from accelmap.web.app import clip, create_app
from accelmap.web.runner import Gone, Lane, Pool, Runner, Stopping

BASE = "http://127.0.0.1"
PLAN = {"model": "llama-3.1-8b", "cluster": "8xH100", "train": True, "seq": 4096,
        "global_batch_tokens": "1M"}
# many clusters, thousands of mappings each: it holds the search lane for longer than the test
SLOW = {"model": "llama-3.1-70b", "hw": "any", "devices": 64, "train": True, "seq": 8192,
        "global_batch_tokens": "4M"}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(catalog=api.load_catalog()), base_url=BASE) as c:
        yield c


@pytest.fixture(scope="module")
def good_plan(client: TestClient) -> dict[str, Any]:
    return dict(client.post("/api/plan", json=PLAN).json())


def small(pool: Pool) -> TestClient:
    return TestClient(create_app(catalog=api.load_catalog(), pool=pool), base_url=BASE)


def one_sentence(r: Any, status: int, *words: str) -> str:
    assert r.status_code == status, (r.status_code, r.text[:300])
    text = r.json()["error"]
    assert "\n" not in text and len(text) <= 400
    for w in words:
        assert w in text, text
    return str(text)


# -- a 4xx, never a 5xx ---------------------------------------------------------------------

@pytest.mark.parametrize("plan", [
    {"model": "llama-3.1-8b", "job": {"model": "llama-3.1-8b"}, "plans": [{"metrics": {}}]},
    {"model": "llama-3.1-8b", "job": {"model": "llama-3.1-8b"}, "plans": ["a string"]},
    {"model": "llama-3.1-8b", "job": "not an object", "plans": [{"mapping": "dp=8"}]},
])
def test_report_of_a_damaged_plan_is_a_400(client: TestClient, good_plan: dict[str, Any],
                                           plan: dict[str, Any]) -> None:
    damaged = {**good_plan, **plan}
    one_sentence(client.post("/api/report", json=damaged), 400, "result")


def test_partial_node_cluster_plans(client: TestClient) -> None:
    """9 x MI300X: a node of 8 and one of 1 (a 1-device scale-up domain has no links)."""
    r = client.post("/api/plan/figures", json={**PLAN, "cluster": "9xmi300x"})
    assert r.status_code == 200, r.text[:300]
    assert r.json()["result"]["cluster"]


@pytest.mark.parametrize(("body", "field"), [
    ({"model": "llama-3.1-8b", "budget_usd_h": 1e308}, "budget_usd_h"),
    ({"model": "llama-3.1-8b", "devices": 10**30}, "devices"),
    ({"model": "x" * 100_000}, "model"),
])
def test_numbers_and_names_out_of_bounds_are_422(client: TestClient, body: dict[str, Any],
                                                 field: str) -> None:
    one_sentence(client.post("/api/compare", json=body), 422, field)


def test_every_error_has_the_apps_shape(client: TestClient) -> None:
    one_sentence(client.get("/api/nothing"), 404, "no such page")
    one_sentence(client.get("/api/plan"), 405, "not allowed")
    one_sentence(client.post("/api/plan", content=b"{", headers={"content-type":
                                                                 "application/json"}), 422)


def test_echoed_input_is_cut(client: TestClient) -> None:
    r = client.post("/api/export", json={"plan": {"model": "m" * 100_000, "job": "j" * 50_000}})
    text = one_sentence(r, 400)
    assert "m" * 100 not in text
    assert len(clip("x" * 100_000)) <= 400 and clip("a\nb") == "a b"


# -- no server paths --------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["/etc/shadow", "/etc/passwd", "../../etc/hostname",
                                   "pyproject.toml", "README.md", "meta-llama/Llama-3.1-8B",
                                   "spec.yaml"])
def test_model_names_a_preset_never_a_file(client: TestClient, model: str) -> None:
    text = one_sentence(client.post("/api/estimate", json={"model": model,
                                                           "hw": "h100-sxm5-80gb"}), 400)
    assert "model" in text
    for leak in ("Permission", "denied", "directory", "line ", "no such file", "YAML"):
        assert leak not in text, text


@pytest.mark.parametrize("cluster", ["/etc/passwd.yaml", "./x.yml", "~/sys.yaml", "a\\b"])
def test_cluster_names_a_preset_never_a_file(client: TestClient, cluster: str) -> None:
    one_sentence(client.post("/api/plan", json={**PLAN, "cluster": cluster}), 400,
                 "not a file path")


# -- Host, Origin, headers ------------------------------------------------------------------

def test_foreign_host_is_refused(client: TestClient) -> None:
    """DNS rebinding: a hostile name resolved to 127.0.0.1 still carries its own Host."""
    one_sentence(client.get("/api/catalog", headers={"host": "evil.example"}), 403, "host")
    one_sentence(client.post("/api/estimate", json=PLAN, headers={"host": "evil.example:80"}),
                 403)
    assert client.get("/api/version", headers={"host": "localhost:8000"}).status_code == 200
    assert client.get("/api/version", headers={"host": "[::1]:8000"}).status_code == 200


def test_cross_site_writes_are_refused(client: TestClient) -> None:
    body = {"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb"}
    one_sentence(client.post("/api/estimate", json=body,
                             headers={"origin": "https://evil.example"}), 403, "cross-site")
    one_sentence(client.post("/api/validate", files=[("cases", ("x.csv", b"a\n", "text/csv"))],
                             headers={"origin": "null"}), 403)
    one_sentence(client.post("/api/estimate", json=body,
                             headers={"sec-fetch-site": "cross-site"}), 403)
    same = client.post("/api/estimate", json=body, headers={"origin": BASE,
                                                           "sec-fetch-site": "same-origin"})
    assert same.status_code == 200


def test_security_headers(client: TestClient) -> None:
    for path in ("/", "/api/catalog", "/api/nothing", "/docs"):
        h = client.get(path).headers
        assert "frame-ancestors 'none'" in h["content-security-policy"]
        assert h["x-frame-options"] == "DENY"
        assert h["x-content-type-options"] == "nosniff"
        assert h["referrer-policy"] == "no-referrer"
    assert "'unsafe-inline'" not in client.get("/").headers["content-security-policy"].split(
        "style-src")[0]


def test_docs_are_served_locally(client: TestClient) -> None:
    pytest.importorskip("fastapi_offline", reason="the web extra's fastapi-offline")
    page = client.get("/docs").text
    assert "/docs-assets/swagger-ui-bundle.js" in page and "cdn" not in page.lower()
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200


# -- bounded work -----------------------------------------------------------------------------

def test_serving_estimate_says_which_devices_it_uses(client: TestClient) -> None:
    r = client.post("/api/estimate/figures", json={"model": "llama-3.1-8b", "cluster": "8xH100",
                                                   "batch": 8, "tp": 1})
    assert r.status_code == 200
    assert any("uses 1 of the 8 devices" in a for a in r.json()["result"]["assumptions"])
    # no layout given: the engine's, over every device (one replica each: one holds 8B)
    r = client.post("/api/estimate/figures", json={"model": "llama-3.1-8b", "cluster": "8xH100",
                                                   "batch": 8})
    assert r.status_code == 200
    assert not any("uses 1 of" in a for a in r.json()["result"]["assumptions"])


def test_the_cap_reaches_the_multi_accelerator_search() -> None:
    """hw=any with serving ran past 15 minutes: the cap now stops it."""
    t0 = time.monotonic()
    with small(Pool(search_s=1.0, wall_s=20.0)) as c:
        r = c.post("/api/plan", json=SLOW)
    assert r.status_code in (200, 400), r.text[:300]
    if r.status_code == 400:
        assert "cap" in r.json()["error"]
    assert time.monotonic() - t0 < 60


def test_a_heavy_validation_is_killed_at_the_wall_cap() -> None:
    """A 278-byte run of 50,000 requests at batch 1 took 239 s and 5.7 GB."""
    run = (b"- id: heavy\n  source: test\n  accelerator: h100-sxm5-80gb\n  model: llama-3.1-8b\n"
           b"  devices: 1\n  framework: vllm\n  precision: bf16\n  scenario: offline\n"
           b"  input_len: 1024\n  output_len: 1024\n  requests: 50000\n  max_batch: 1\n"
           b"  metric: output_tokens_per_s\n  value: 100\n")
    t0 = time.monotonic()
    with small(Pool(search_s=1.0, wall_s=3.0)) as c:
        r = c.post("/api/validate", files=[("cases", ("run.yaml", run, "text/yaml"))])
    one_sentence(r, 400, "cap")
    assert time.monotonic() - t0 < 30


def test_searches_wait_in_their_lane_and_estimates_pass() -> None:
    """One search at a time, no queue: a second search is refused (429, Retry-After) while an
    estimate still runs."""
    with small(Pool(searches=1, queue=0, search_s=30.0, wall_s=30.0)) as c:
        out: dict[str, Any] = {}
        slow = threading.Thread(target=lambda: out.update(r=c.post("/api/plan", json=SLOW)))
        slow.start()
        try:
            # the slow search must hold the lane first: wait until its job runs (under load
            # the thread can start late, and a plan sent first would take the lane instead)
            runner = c.app.state.runner  # type: ignore[attr-defined]
            deadline = time.monotonic() + 20
            while not runner.live and "r" not in out and time.monotonic() < deadline:
                time.sleep(0.05)
            assert runner.live, ("the slow search never ran", out.get("r"))
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                r = c.post("/api/plan", json=PLAN)
                if r.status_code == 429:
                    break
                time.sleep(0.2)
            one_sentence(r, 429, "busy")
            assert r.headers["retry-after"]
            est = c.post("/api/estimate", json={"model": "llama-3.1-8b",
                                                "hw": "h100-sxm5-80gb"})
            assert est.status_code == 200
        finally:
            c.app.state.runner.stop()  # type: ignore[attr-defined]
            slow.join(timeout=30)


def test_a_job_is_killed_when_its_client_leaves_and_on_stop() -> None:
    runner = Runner(Pool(search_s=60.0, wall_s=60.0))
    form = _form()
    calls = 0

    async def gone_after_two() -> bool:
        nonlocal calls
        calls += 1
        return calls > 2

    async def never() -> bool:
        return False

    async def main() -> None:
        with pytest.raises(Gone):
            await runner.run(Lane.SEARCH, "plan", form, gone_after_two)
        assert not runner.live

        async def stop_soon() -> None:
            await anyio.sleep(1.0)
            runner.stop()

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_soon)
            with pytest.raises(Stopping):
                await runner.run(Lane.SEARCH, "plan", form, never)
        assert not runner.live

    t0 = time.monotonic()
    anyio.run(main)
    assert time.monotonic() - t0 < 30


def _form() -> Any:
    from accelmap.web.forms import PlanForm

    return PlanForm(**SLOW)
