"""What attention data parallelism (``--dp-attention``, issue 22 part 3) changes for DeepSeek-R1
on one 8 x H200 node (FP8 weights, TP8 x EP8), against the same layout with attention split
by tensor parallelism; prints figures, checks nothing, fits nothing.

1. fixed batches (``accelmap estimate --serve --batch B``, 2,000 in / 500 out, vLLM's stack):
   the largest batch that fits, TPOT, output tokens/s per GPU over the whole batch (its
   prefill included) and decode-only tokens/s per GPU (B / TPOT / 8);
2. closed-loop concurrency (``--scenario concurrency --concurrency N``, SGLang's stack,
   2,000 in / 500 out): output tokens/s per GPU, median TPOT, tokens/s per user;
3. the published figures it can be set beside (not predicted rows: none of them is a run
   accelmap can lay out the same way; see the printed notes).

Run: PYTHONPATH=src python benchmarks/dp_attention.py
"""

from __future__ import annotations

from accelmap import api
from accelmap.engine.result import ServeStep
from accelmap.serving.scenario import Load, Scenario

MODEL, CLUSTER, ISL, OSL = "deepseek-r1", "1x8xh200", 2000, 500
BATCHES = (16, 64, 256, 1024)
CONCURRENCY = (16, 64, 256, 1024)


def _layouts() -> list[tuple[str, api.Mapping]]:
    return [(name, api.Mapping.serving(tp=8, ep=8, dp_attention=dpa))
            for name, dpa in (("TP8 EP8", False), ("TP8 EP8 + DP attention", True))]


def batches() -> None:
    spec = api.load_model(MODEL)
    system = api.load_system(cluster=CLUSTER)
    print(f"{MODEL} on {CLUSTER}, fp8 weights, {ISL} in / {OSL} out, fixed batch (vLLM stack)")
    print("cells: TPOT ms / output tok/s per GPU (whole batch) / decode-only tok/s per GPU")
    print(f"{'layout':24}{'max batch':>10}" + "".join(f"{f'B={b}':>22}" for b in BATCHES))
    for name, m in _layouts():
        cells, top = [], None
        for b in BATCHES:
            e = api.estimate(spec, system, api.inference(b, ISL, OSL, "fp8"), m)
            assert isinstance(e, ServeStep)
            top, tpot = e.max_batch, e.tpot_s
            cells.append("does not fit" if not e.feasible or tpot is None else
                         f"{tpot * 1e3:.1f} / {e.tokens_per_s_per_device:.0f} / "
                         f"{b / tpot / 8:.0f}")
        print(f"{name:24}{top:>10}" + "".join(f"{c:>22}" for c in cells))


def concurrency() -> None:
    spec = api.load_model(MODEL)
    system = api.load_system(cluster=CLUSTER)
    wl = api.inference(1, ISL, OSL, "fp8")
    print("\nclosed loop, SGLang stack: output tok/s per GPU / median TPOT ms / tok/s per user "
          "(KV capacity, tokens per replica)")
    print(f"{'layout':24}" + "".join(f"{f'N={c}':>26}" for c in CONCURRENCY))
    for name, m in _layouts():
        cells, kv = [], 0.0
        for c in CONCURRENCY:
            load = Load(Scenario.CONCURRENCY, concurrency=c, requests=max(2 * c, 64))
            r = api.serve(spec, system, wl, m, framework="sglang", load=load)
            if not r.feasible:
                cells.append("infeasible")
                continue
            met = r.metrics
            kv = float(met["kv_capacity_tokens"])
            cells.append(f"{met['output_tokens_per_s_per_device']:.0f} / "
                         f"{met['tpot_s']['p50'] * 1e3:.1f} / "
                         f"{met['tokens_per_s_per_user']:.1f}")
        print(f"{name:24}" + "".join(f"{c:>26}" for c in cells) + f"   ({kv:,.0f})")


def published() -> None:
    print("""
published figures beside these (none is the same deployment):
- LMSYS 2024-12-04 "SGLang v0.4": DP attention gives "up to 1.9x decoding throughput" for
  DeepSeek models (8 GPUs, high-QPS); compare the ratio of the two rows at high N above.
- LMSYS 2025-05-05 "PD disaggregation and large-scale EP on 96 H100": 22.3k output tok/s per
  decode node (2.8k per H100) at 2,000-token inputs, on 9 decode nodes with EP72, DeepEP
  low-latency dispatch, two-batch overlap and EPLB; and 52.3k input tok/s per prefill node.
  accelmap models one node's aggregated serving here: no PD split, no cross-node EP, no
  two-batch overlap, no DeepEP mode.
- vLLM blog 2025-12 "DeepSeek @ 2.2k tok/s/H200 with Wide-EP": multi-node disaggregated decode
  with DBO, on InfiniBand: the same caveats.""")


if __name__ == "__main__":
    batches()
    concurrency()
    published()
