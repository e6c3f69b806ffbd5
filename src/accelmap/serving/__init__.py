"""Serving as it is run: requests arrive (all at once offline, Poisson or a trace online), an
iteration-level scheduler batches them (continuous batching, chunked prefill, paged KV with
preemption, prefix caching), and every iteration is priced by the engine's roofline.

- ``requests``: the request streams of the scenarios (fixed or distributed lengths, Poisson
  arrivals, trace files);
- ``scheduler``: the schedulers' policies and the frameworks' documented defaults;
- ``iteration``: what one iteration costs, tabulated from the engine (no second cost model);
- ``simulator``: the discrete-event loop;
- ``metrics``: what serving benchmarks report (tokens/s, TTFT/TPOT/ITL percentiles, goodput);
- ``scenario``: offline / server / batch, the entry point;
- ``capacity``: the highest Poisson rate meeting latency percentiles (MLPerf Server).
- ``disagg``: disaggregated prefill and decode pools with the KV transfer between them
  (DistServe, Splitwise), the same simulator run once per pool;
- ``split``: the search of the prefill/decode split (and colocated layouts) for goodput per
  device at a rate and SLOs.
"""
