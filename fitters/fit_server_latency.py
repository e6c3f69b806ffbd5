"""Fit the served-only request latency of TensorRT-LLM >= 1.0 (``trtllm-serve``) on a fixed
quarter of the InferenceX TensorRT-LLM sweeps, report the error on the other three quarters,
and write data/server_latency.yaml.

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

Parameter (one, physical, none per row): ``request_latency_s``, fitted by robust least squares
(soft-L1 loss, 10 % scale) on log(predicted / measured) of the fit set's median-TTFT rows,
which are affine in it (``fit_sglang_profile.fit_additive``). The held-out records are
predicted before (no served latency) and after.

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
STACK = "tensorrt-llm"  # the run format's framework word of the records fitted on
PROFILE = "tensorrt-llm-1"  # the profile the latency belongs to (TensorRT-LLM >= 1.0)
BOUNDS = (0.0, 1.0)
HEADER = ("# Written by fitters/fit_server_latency.py: the served-only request latency per "
          "stack\n# (cost/framework.py server_request_latency_s; serving/scenario.py served).\n")


def predict(recs: Sequence[dict[str, Any]], latency: float) -> list[Prediction]:
    """The engine's predictions of ``recs`` with TensorRT-LLM's served latency ``latency``."""
    return fs.predict(recs, {PROFILE: {"request_latency_s": latency}}, "_server_latency")


def run(write: bool) -> dict[str, Any]:
    recs = fs.sglang_records(stack=STACK)
    fit = [r for r in recs if fs.in_fit_set(r)]
    held = [r for r in recs if not fs.in_fit_set(r)]
    late = fs.fit_additive(fs._pairs(predict(fit, 0.0), "ttft_p50_ms"), *BOUNDS)
    late = round(late, 5)
    fit_after = predict(fit, late)
    before, after = predict(held, 0.0), predict(held, late)
    by_id = {r["id"]: r for r in recs}
    scored = [by_id[p.row_id] for p in fit_after if p.status.value == "ok"]
    keys = sorted({fs.config_key(r) for r in scored})
    print(f"{PROFILE}: request_latency_s {late} from {len(keys)} configurations "
          f"({len(scored)} scored records)")
    fs.report(before, after, by_id)
    entry = {"request_latency_s": late,
             "source": (f"fitted on the median-TTFT records of {len(keys)} TensorRT-LLM "
                        f"configurations ({len(scored)} records) of "
                        f"data/inferencex_published.yaml served by trtllm-serve (split rule: "
                        f"{fs.RULE})"),
             "fitted_on": keys, "in_sample": fs.summary(fit_after),
             "held_out": {"before": fs.summary(before), "after": fs.summary(after)}}
    if write:
        OUT.write_text(HEADER + yaml.safe_dump({PROFILE: entry}, sort_keys=False, width=100))
        print(f"wrote {OUT}")
    return entry


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="fit and report, write nothing")
    run(write=not ap.parse_args(argv).dry_run)


if __name__ == "__main__":
    main()
