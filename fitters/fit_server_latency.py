"""Fit the served-only request latency of TensorRT-LLM >= 1.0 (``trtllm-serve``) and Dynamo's
front end on a fixed quarter of their InferenceX sweeps, report the error on the other three
quarters, and write data/server_latency.yaml.

Why a parameter of its own: TensorRT-LLM's fitted profile (``tensorrt-llm-1``,
fitters/fit_trtllm1_profile.py) comes from ``trtllm-bench`` runs, which drive the executor in
the benchmark's own process. A served run (InferenceX starts ``trtllm-serve`` and drives it with
a benchmark client over HTTP) also waits for the server: the OpenAI front end, the LLM API's
tokenization, the hand-off to the executor worker processes over IPC and the postprocess
workers' detokenization (TensorRT-LLM ``tensorrt_llm/serve/openai_server.py``,
``tensorrt_llm/executor/proxy.py``). That latency sits on each request's path outside the
iteration loop, as SGLang's front end does (cost/framework.py ``request_latency_s``), so it
enters TTFT and end-to-end latency only. The engine adds it in the served scenarios
(concurrency, server), never offline (serving/scenario.py ``served``).

Data: ``data/inferencex_published.yaml``, the records whose framework is ``tensorrt-llm``
(aggregated trtllm-serve; Dynamo with a TensorRT-LLM engine runs its own front end and is only
scored) that the engine predicts.

Split rule (fixed before fitting, from the configuration only): SGLang's
(fitters/fit_sglang_profile.py ``in_fit_set``): one configuration in four by the hash of
``accelerator|precision|moe_precision|input_len|output_len|tp|ep|dp_attention|disaggregated|
mtp``; the rest is held out and only scored.

Dynamo (``dynamo``): Dynamo serves the engine's workers behind its own front end (HTTP server,
tokenizer and router in Rust) and, disaggregated, hands each request from the prefill to the
decode worker; the engine's own front end (SGLang's tokenizer/detokenizer processes,
trtllm-serve) is not in the path, so Dynamo's latency replaces the engine's
(cost/framework.py ``orchestrated``). Its records with DP attention in a disaggregated pool
are left out (an hour to predict).

Parameter (one per entry, physical, none per row): ``request_latency_s``, fitted by robust
least squares (soft-L1 loss, 10 % scale) on log(predicted / measured) of the fit set's
median-TTFT rows, which are affine in it (``fit_sglang_profile.fit_additive``). The held-out
records are predicted before (the entry absent: no served latency; under Dynamo the engine's
own front end) and after.

Reads: data/inferencex_published.yaml and the bundled framework_calibration.yaml.
Writes: src/accelmap/cost/data/server_latency.yaml.

Run: python fitters/fit_server_latency.py [--dry-run]   (PYTHONPATH=src from the root)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fit_sglang_profile as fs
from accelmap.api.validation import Prediction

OUT = fs.ROOT / "src" / "accelmap" / "cost" / "data" / "server_latency.yaml"
BOUNDS = (0.0, 1.0)
HEADER = ("# Written by fitters/fit_server_latency.py: the served-only request latency per "
          "stack\n# and Dynamo's front end (cost/framework.py server_request_latency_s, "
          "orchestrated;\n# serving/scenario.py served).\n")
Table = dict[str, dict[str, float]]


def _no_pool_dpa(rec: dict[str, Any]) -> bool:
    """Not a disaggregated record with DP attention in a pool: those closed loops of thousands
    of clients take an hour to predict (benchmarks/inferencex_error.py --no-pool-dpa)."""
    return not (rec.get("disaggregated") and (rec.get("prefill_dp_attention")
                                              or rec.get("decode_dp_attention")))


# entry of server_latency.yaml -> (framework word of its records, which records, what they are)
ENTRIES: dict[str, tuple[str, Any, str]] = {
    "tensorrt-llm-1": ("tensorrt-llm", lambda r: True,
                       "TensorRT-LLM configurations served by trtllm-serve"),
    "dynamo": ("dynamo", _no_pool_dpa,
               "Dynamo configurations (its front end in place of the engine's; disaggregated "
               "runs with DP attention in a pool left out: an hour to predict)"),
}


def predict(recs: Sequence[dict[str, Any]], table: Table) -> list[Prediction]:
    """The engine's predictions of ``recs`` with server_latency.yaml replaced by ``table``."""
    return fs.predict(recs, table, "_server_latency")


def fit_entry(name: str, fitted: Table) -> dict[str, Any]:
    """One entry's latency on its fit set's median-TTFT rows (the others as ``fitted``), and
    its held-out records before (the entry absent) and after."""
    stack, keep, what = ENTRIES[name]
    recs = [r for r in fs.sglang_records(stack=stack) if keep(r)]
    fit = [r for r in recs if fs.in_fit_set(r)]
    held = [r for r in recs if not fs.in_fit_set(r)]
    zero = {**fitted, name: {"request_latency_s": 0.0}}
    late = round(fs.fit_additive(fs._pairs(predict(fit, zero), "ttft_p50_ms"), *BOUNDS), 5)
    table = {**fitted, name: {"request_latency_s": late}}
    fit_after = predict(fit, table)
    before, after = predict(held, fitted), predict(held, table)
    by_id = {r["id"]: r for r in recs}
    scored = [by_id[p.row_id] for p in fit_after if p.status.value == "ok"]
    keys = sorted({fs.config_key(r) for r in scored})
    print(f"{name}: request_latency_s {late} from {len(keys)} configurations "
          f"({len(scored)} scored records)")
    fs.report(before, after, by_id)
    return {"request_latency_s": late,
            "source": (f"fitted on the median-TTFT records of {len(keys)} {what} "
                       f"({len(scored)} records) of data/inferencex_published.yaml (split "
                       f"rule: {fs.RULE})"),
            "fitted_on": keys, "in_sample": fs.summary(fit_after),
            "held_out": {"before": fs.summary(before), "after": fs.summary(after)}}


def run(write: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ENTRIES:
        out[name] = fit_entry(name, {k: {"request_latency_s": v["request_latency_s"]}
                                     for k, v in out.items()})
    if write:
        OUT.write_text(HEADER + yaml.safe_dump(out, sort_keys=False, width=100))
        print(f"wrote {OUT}")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="fit and report, write nothing")
    run(write=not ap.parse_args(argv).dry_run)


if __name__ == "__main__":
    main()
