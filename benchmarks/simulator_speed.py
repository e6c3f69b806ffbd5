"""Request-level simulator speed: wall time to simulate 10,000 requests (goal, issue 12: <= 5 s).

Cases (one replica each, so every request is simulated; the engine's iteration tables are built
once per case and counted in "build"):

- offline, Llama 3.1 70B FP8 TP2 on 2 x H100, TensorRT-LLM, 1000/1000 tokens (the issue's
  command, 10,000 requests instead of the default 2,000);
- offline, Llama 3.1 8B on 1 x H100, vLLM, 128/2048 tokens (long outputs: many iterations,
  on-demand KV with preemptions);
- server, Llama 3.1 70B TP8 on a DGX H100, vLLM, Poisson at 8 requests/s, 2000/300 tokens,
  lognormal lengths (cv 0.5).

Run: python benchmarks/simulator_speed.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from accelmap import api
from accelmap.api import Load, Scenario
from accelmap.serving.requests import LengthDist

N = 10_000
CASES = (
    ("70B TP2 H100 trt offline 1000/1000", "llama-3.1-70b", "1x2xh100-sxm5-80gb", 2,
     "tensorrt-llm", 1000, 1000, "fp8", Load(Scenario.OFFLINE, requests=N)),
    ("8B H100 vllm offline 128/2048", "llama-3.1-8b", "1x1xh100-sxm5-80gb", 1, "vllm", 128,
     2048, "bf16", Load(Scenario.OFFLINE, requests=N)),
    ("70B TP8 DGX vllm server 8 req/s 2000/300", "llama-3.1-70b", "dgx-h100", 8, "vllm", 2000,
     300, "bf16", Load(Scenario.SERVER, requests=N, rate=8.0, dist=LengthDist.LOGNORMAL,
                       spread=0.5)),
)


def main() -> None:
    print(f"{'case':44s} {'requests':>8s} {'iterations':>10s} {'build s':>8s} "
          f"{'simulate s':>10s} {'output tok/s':>12s}")
    for name, model, cluster, tp, fw, prompt, output, weights, load in CASES:
        spec, system = api.load_model(model), api.load_system(cluster=cluster)
        wl = api.inference(1, prompt, output, weights)
        t0 = time.perf_counter()
        r = api.serve(spec, system, wl, api.serving_mapping(tp=tp), framework=fw, load=load)
        total = time.perf_counter() - t0
        m = r.metrics
        print(f"{name:44s} {m['requests']:8,d} {m['iterations']:10,d} "
              f"{total - r.simulated_s:8.2f} {r.simulated_s:10.2f} "
              f"{m['output_tokens_per_s']:12,.0f}")


if __name__ == "__main__":
    main()
