"""A few schema-driven requests per endpoint (schemathesis over the app's OpenAPI schema, in
process): no 5xx, every 4xx in the app's error shape. The full run, a few hundred per
endpoint, is benchmarks/web_fuzz.py."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="the fuzz extra is not installed")

from hypothesis import HealthCheck, Phase, settings  # noqa: E402

from accelmap import api  # noqa: E402
from accelmap.web.app import create_app  # noqa: E402
from accelmap.web.runner import Pool  # noqa: E402

APP = create_app(catalog=api.load_catalog(), hosts=("testserver",),
                 pool=Pool(search_s=1.0, wall_s=5.0))
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)


@SCHEMA.parametrize()
@settings(max_examples=3, deadline=None, database=None, derandomize=True,
          phases=[Phase.generate], suppress_health_check=list(HealthCheck))
def test_no_5xx(case: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = case.call()
    assert r.status_code < 500, (r.status_code, r.text[:300], case.as_curl_command()[:300])
    if r.status_code >= 400:
        body = json.loads(r.text)
        assert isinstance(body.get("error"), str) and "\n" not in body["error"]


def test_the_schema_lists_every_endpoint() -> None:
    names = {f"{r.ok().method.upper()} {r.ok().path}" for r in SCHEMA.get_all_operations()}
    assert len(names) >= 12 and "POST /api/report" in names
