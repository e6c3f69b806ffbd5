"""Load test of the web app on loopback: N concurrent POST /api/estimate requests against a
uvicorn server on 127.0.0.1 (a free port, started and stopped here), in R rounds; prints the
latency p50/p99 and the error count (which must be 0). Traffic goes to 127.0.0.1 only, and the
run is bounded in requests and time.

With --mixed P,E: P clients plan (one search after another) while E clients estimate, for
--seconds; prints the estimates' p50/p99 under that planning load (long searches must not
starve short requests) and the plans done. --src runs another checkout's accelmap (its src/
folder), to measure before and after a change on the same machine.

    python3 benchmarks/web_load.py                  # 50 concurrent, 4 rounds
    python3 benchmarks/web_load.py --concurrency 50 --rounds 10 --json
    python3 benchmarks/web_load.py --mixed 10,50 --seconds 60
    python3 benchmarks/web_load.py --mixed 10,50 --seconds 60 --src /tmp/before/src

Prints figures, asserts nothing about wall time (the exit status is 1 only on errors).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
if "--src" in sys.argv:  # another checkout's accelmap, for a before/after comparison
    SRC = Path(sys.argv[sys.argv.index("--src") + 1]).resolve()
sys.path.insert(0, str(SRC))

BODIES = [  # a mix of serving and training estimates, one or many devices
    {"model": "llama-3.1-8b", "hw": "h100-sxm5-80gb", "batch": 16, "prompt": 2048},
    {"model": "llama-3.1-70b", "cluster": "dgx-h100", "tp": 8, "batch": 32},
    {"model": "llama-3.1-70b", "cluster": "64xH100", "train": True, "tp": 8, "pp": 2,
     "batch": 512, "seq": 8192, "recompute": "full"},
    {"model": "mixtral-8x7b", "hw": "mi300x", "batch": 8},
]
TIMEOUT_S = 120.0  # the whole run stops by itself past this
PLAN = {"model": "llama-3.1-70b", "cluster": "64xH100", "train": True,
        "global_batch_tokens": "4M"}  # a search of seconds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int) -> tuple[object, threading.Thread]:
    import uvicorn

    from accelmap.web.app import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("the server did not start")
        time.sleep(0.05)
    return server, thread


async def one_round(client: object, url: str, n: int, offset: int
                    ) -> list[tuple[float, int | str]]:
    async def one(i: int) -> tuple[float, int | str]:
        t0 = time.perf_counter()
        try:
            r = await client.post(url, json=BODIES[(offset + i) % len(BODIES)])  # type: ignore[attr-defined]
            status: int | str = r.status_code
        except Exception as e:  # a refused or dropped connection counts as an error
            status = type(e).__name__
        return time.perf_counter() - t0, status

    return await asyncio.gather(*(one(i) for i in range(n)))


async def load(base: str, concurrency: int, rounds: int) -> list[tuple[float, int | str]]:
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=60.0, limits=limits) as client:
        await client.post("/api/estimate", json=BODIES[0])  # warm: catalog, imports
        out: list[tuple[float, int | str]] = []
        for r in range(rounds):
            out += await one_round(client, "/api/estimate", concurrency, r * concurrency)
        return out


async def mixed(base: str, planners: int, estimators: int, seconds: float
                ) -> dict[str, list[Any]]:
    """P planning and E estimating clients, each posting one request after another until
    ``seconds`` have passed; the latencies of each kind and the failed answers."""
    import httpx

    out: dict[str, list[Any]] = {"plan": [], "estimate": [], "errors": []}
    n = planners + estimators
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT_S, limits=limits) as client:
        await client.post("/api/estimate", json=BODIES[0])  # warm: catalog, imports
        stop = time.monotonic() + seconds

        async def loop(kind: str, url: str, body: dict[str, Any]) -> None:
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                try:
                    r = await client.post(url, json=body)
                    status: int | str = r.status_code
                except Exception as e:
                    status = type(e).__name__
                if status == 200:
                    out[kind].append(time.perf_counter() - t0)
                else:
                    said = r.text[:100] if isinstance(status, int) else ""
                    out["errors"].append(f"{kind} {status} {said}".strip())

        await asyncio.gather(*(loop("plan", "/api/plan", PLAN) for _ in range(planners)),
                             *(loop("estimate", "/api/estimate", BODIES[i % len(BODIES)])
                               for i in range(estimators)))
    return out


def run_mixed(spec: str, seconds: float, as_json: bool) -> int:
    planners, estimators = (int(x) for x in spec.split(","))
    port = _free_port()
    server, thread = start_server(port)
    try:
        res = asyncio.run(mixed(f"http://127.0.0.1:{port}", planners, estimators, seconds))
    finally:
        server.should_exit = True  # type: ignore[attr-defined]
        thread.join(timeout=30)
    est, plans = res["estimate"], res["plan"]
    fig = {"planners": planners, "estimators": estimators, "seconds": seconds,
           "src": str(SRC), "cpus": os.cpu_count(), "estimates": len(est),
           "estimate_p50_s": statistics.median(est) if est else None,
           "estimate_p99_s": pct(est, 99) if est else None, "plans": len(plans),
           "plan_p50_s": statistics.median(plans) if plans else None,
           "errors": len(res["errors"]), "error_kinds": sorted(set(res["errors"]))}
    if as_json:
        print(json.dumps(fig, indent=2))
    else:
        f = fig
        print(f"{planners} planning + {estimators} estimating clients for {seconds:g} s on "
              f"127.0.0.1 ({f['cpus']} CPUs, {SRC}): {f['estimates']} estimates, p50 "
              + (f"{f['estimate_p50_s']:.2f} s, p99 {f['estimate_p99_s']:.2f} s" if est
                 else "- (none finished)")
              + f"; {f['plans']} plans" + (f", p50 {f['plan_p50_s']:.1f} s" if plans else "")
              + f"; errors {f['errors']}" + (f" {f['error_kinds']}" if res["errors"] else ""))
    return 0


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--mixed", metavar="P,E", help="P planning and E estimating clients")
    ap.add_argument("--seconds", type=float, default=60.0, help="--mixed: run this long")
    ap.add_argument("--src", help="the src/ folder of the accelmap to serve (default: this "
                    "checkout's)")
    a = ap.parse_args()
    if a.mixed:
        return run_mixed(a.mixed, a.seconds, a.json)
    port = _free_port()
    server, thread = start_server(port)
    t0 = time.perf_counter()
    try:
        results = asyncio.run(asyncio.wait_for(
            load(f"http://127.0.0.1:{port}", a.concurrency, a.rounds), TIMEOUT_S))
    finally:
        server.should_exit = True  # type: ignore[attr-defined]
        thread.join(timeout=10)
    wall = time.perf_counter() - t0
    lat = [t for t, s in results if s == 200]
    errors = [s for _, s in results if s != 200]
    figures = {"requests": len(results), "concurrency": a.concurrency, "rounds": a.rounds,
               "errors": len(errors), "p50_ms": 1e3 * statistics.median(lat) if lat else None,
               "p99_ms": 1e3 * pct(lat, 99) if lat else None,
               "max_ms": 1e3 * max(lat) if lat else None,
               "requests_per_s": len(results) / wall, "cpus": os.cpu_count()}
    if a.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"{figures['requests']} POST /api/estimate, {a.concurrency} concurrent x "
              f"{a.rounds} rounds on 127.0.0.1 ({figures['cpus']} CPUs): p50 "
              f"{figures['p50_ms']:.0f} ms, p99 {figures['p99_ms']:.0f} ms, max "
              f"{figures['max_ms']:.0f} ms, {figures['requests_per_s']:.1f} requests/s, "
              f"errors {figures['errors']}" + (f" ({sorted(set(map(str, errors)))})"
                                                 if errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
