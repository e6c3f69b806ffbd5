"""Schema-driven fuzz of every web endpoint: schemathesis draws requests from the app's own
OpenAPI schema (valid bodies and, as many again, bodies that break it: wrong types, missing
fields, out-of-bounds numbers, odd strings) and calls the app in process (ASGI); prints the
tally of answers per endpoint and every 5xx (which must be none). The app runs with short caps
(a search stops at --search-s, a job is killed at --wall-s) so a valid heavy body costs
seconds, and its lanes and processes as served.

    pip install -e '.[web,fuzz]'
    python3 benchmarks/web_fuzz.py                    # 200 requests per endpoint
    python3 benchmarks/web_fuzz.py --examples 300 --json

Exit status 1 on any 5xx.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


TIMEOUT_S = 120.0  # a request's read timeout (the app's own caps end every job before)
MODELS = ["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "gpt3-1.3b", "llama-3.2-1b"]
CLUSTERS = ["8xH100", "9xmi300x", "2xH100", "dgx-h100", "64xtpu-v5e", "3xmi300x", "1xb200"]
HWS = ["h100-sxm5-80gb", "mi300x", "any", "H100,MI300X", "tpu-v5e", "b200", "all"]


def _catalog_names(body: dict[str, Any], rnd: Any) -> None:
    """Catalog names in place of random text (half the time), so valid bodies get past the
    name lookup into the engine."""
    if rnd.random() < 0.5:
        return
    if body.get("cluster") is not None and body.get("hw") is not None:
        del body[rnd.choice(["cluster", "hw"])]
    if "model" in body:
        body["model"] = rnd.choice(MODELS)
    if "cluster" in body and body["cluster"] is not None:
        body["cluster"] = rnd.choice(CLUSTERS)
    if "hw" in body and body["hw"] is not None:
        body["hw"] = rnd.choice(HWS)


def _app_error(text: str) -> bool:
    try:
        body = json.loads(text)
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("error"), str)


def fuzz(examples: int, search_s: float, wall_s: float, only: str | None
         ) -> dict[str, Any]:
    try:
        import schemathesis
        from hypothesis.errors import Unsatisfiable
        from schemathesis import GenerationMode
    except ImportError:
        raise SystemExit("the fuzz needs schemathesis: pip install -e '.[fuzz]'") from None
    from accelmap import api
    from accelmap.web.app import create_app
    from accelmap.web.runner import Pool

    app = create_app(catalog=api.load_catalog(), hosts=("testserver",),
                     pool=Pool(search_s=search_s, wall_s=wall_s))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    tally: dict[str, collections.Counter[str]] = {}
    failures: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    for result in schema.get_all_operations():
        op = result.ok()
        name = f"{op.method.upper()} {op.path}"
        if only and only not in name:
            continue
        count = tally.setdefault(name, collections.Counter())
        t0 = time.perf_counter()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                _endpoint(op, mode, max(examples // 2, 1), name, count, failures)()
            except Unsatisfiable:  # no way to break it (GET /api/version takes nothing)
                count[f"no {mode.value} requests"] += 1
        seconds[name] = time.perf_counter() - t0
    if not only or "mutated" in only:
        t0 = time.perf_counter()
        tally["mutated saved results"] = _mutated(app, max(examples // 4, 3), failures)
        seconds["mutated saved results"] = time.perf_counter() - t0
    return {"tally": {k: dict(v) for k, v in tally.items()}, "seconds": seconds,
            "failures": failures, "examples_per_endpoint": examples,
            "search_s": search_s, "wall_s": wall_s}


def _endpoint(op: Any, mode: Any, n: int, name: str, count: collections.Counter[str],
              failures: list[dict[str, Any]]) -> Any:
    """The hypothesis test of one endpoint in one generation mode, tallying into ``count``."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st
    from schemathesis import GenerationMode

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy(generation_mode=mode), names=st.randoms())
    def one(case: Any, names: Any) -> None:
        if mode is GenerationMode.POSITIVE and isinstance(case.body, dict):
            _catalog_names(case.body, names)  # half the valid bodies reach the engine
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                r = case.call(timeout=TIMEOUT_S)
            except Exception as e:  # no answer at all: tallied, never a crash of the run
                count[f"no answer ({type(e).__name__})"] += 1
                count["requests"] += 1
                return
        count[f"{r.status_code // 100}xx"] += 1
        count["requests"] += 1
        if r.status_code >= 500:
            failures.append({"endpoint": name, "mode": mode.value,
                             "status": r.status_code, "answer": r.text[:300],
                             "request": case.as_curl_command()[:600]})
        elif r.status_code >= 400 and not _app_error(r.text):
            count["not the app's error shape"] += 1

    return one


def _paths(obj: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a JSON value (lists: their first three items)."""
    out = [at]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*at, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            out += _paths(v, (*at, i))
    return out


def _mutated(app: Any, examples: int, failures: list[dict[str, Any]]
             ) -> collections.Counter[str]:
    """Saved results (a plan, an estimate, a comparison) with one field deleted or replaced by
    a value of another type, posted to /api/report and /api/export: the damaged-file cases
    (a quarter of --examples)."""
    import copy
    import random

    from fastapi.testclient import TestClient

    count: collections.Counter[str] = collections.Counter()
    rnd = random.Random(27)
    odd = [None, "a string", 0, -1, 1e308, [], {}, [1, 2], {"x": 1}, True, "dp=8"]
    with TestClient(app, base_url="http://testserver") as c:
        saved = [c.post("/api/plan", json={"model": "llama-3.1-8b", "cluster": "8xH100",
                                           "global_batch_tokens": "1M"}).json(),
                 c.post("/api/estimate", json={"model": "llama-3.1-8b",
                                               "hw": "h100-sxm5-80gb"}).json(),
                 c.post("/api/compare", json={"model": "llama-3.1-8b", "hw": "H100"}).json()]
        for i in range(examples):
            base = saved[i % len(saved)]
            data = copy.deepcopy(base)
            path = rnd.choice(_paths(data)[1:])
            holder = data
            for k in path[:-1]:
                holder = holder[k]
            if rnd.random() < 0.4:
                del holder[path[-1]]
            else:
                holder[path[-1]] = rnd.choice(odd)
            url, body = (("/api/report", data) if i % 2 else
                         ("/api/export", {"plan": data}))
            r = c.post(url, json=body)
            count[f"{r.status_code // 100}xx"] += 1
            count["requests"] += 1
            if r.status_code >= 500:
                failures.append({"endpoint": f"POST {url}", "mode": f"mutated {path}",
                                 "status": r.status_code, "answer": r.text[:300],
                                 "request": json.dumps(body)[:600]})
            elif r.status_code >= 400 and not _app_error(r.text):
                count["not the app's error shape"] += 1
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=200, help="requests per endpoint")
    ap.add_argument("--search-s", type=float, default=2.0)
    ap.add_argument("--wall-s", type=float, default=8.0)
    ap.add_argument("--only", help="endpoints whose 'METHOD /path' contains this")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = fuzz(a.examples, a.search_s, a.wall_s, a.only)
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        total: collections.Counter[str] = collections.Counter()
        for name, c in out["tally"].items():
            total.update(c)
            print(f"{name:32s} {c['requests']:5d} requests: " + ", ".join(
                f"{k} {v}" for k, v in sorted(c.items()) if k != "requests")
                + f" ({out['seconds'][name]:.0f} s)")
        print(f"{'all':32s} {total['requests']:5d} requests: " + ", ".join(
            f"{k} {v}" for k, v in sorted(total.items()) if k != "requests"))
        for f in out["failures"][:20]:
            print(f"5xx: {f['endpoint']} ({f['mode']}): {f['status']} {f['answer']}\n"
                  f"     {f['request']}")
    bad = len(out["failures"]) + sum(v for c in out["tally"].values() for k, v in c.items()
                                     if k == "not the app's error shape"
                                     or k.startswith("no answer"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
