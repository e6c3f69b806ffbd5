"""Fit AMD ATOM's serving profile on a fixed quarter of the InferenceX ATOM sweeps, report the
error on the rest, and write ATOM's entry of framework_calibration.yaml (only the ``atom:``
block; every other stack's lines are kept byte for byte).

Data: ``data/inferencex_published.yaml``, the records whose framework is ``atom`` (DeepSeek-R1
on MI355X, the ``atom20260511`` image; the MTP ones are skipped by the run format's rule, no
acceptance stated).

Split rule: SGLang's, fixed before that fit and reused unchanged (fitters/fit_sglang_profile.py:
a configuration is fitted on iff the first byte of sha256 of its key is divisible by 4). Of
ATOM's seven configurations one falls in the fit set (FP8, tp 8, 1k/1k: two concurrencies);
the other six (36 records) are only scored.

Parameters, as SGLang's (physical, none per row): ``step_overhead_s`` (host time per forward
pass of ATOM's scheduler loop: scheduling, sampling, HIP-graph launch) on the per-user rate
rows, then ``request_latency_s`` (the OpenAI server process that tokenizes, detokenizes and
streams, and its ZMQ hand-off to the engine core) on the median-TTFT rows. ATOM runs on AMD
GPUs only, so the figures are the entry's own (no platform block). The per-kernel gap is
borrowed from the torch-compile fit (graph replay of the decode batch), as SGLang's is.

Reads: data/inferencex_published.yaml and the bundled framework_calibration.yaml.
Writes: src/accelmap/cost/data/framework_calibration.yaml (ATOM's block only).

Run: python fitters/fit_atom_profile.py [--dry-run]   (PYTHONPATH=src from the root)
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
from accelmap.api.validation import Status
from accelmap.cost import framework as fwmod

STACK = "atom"
OUT = fs.OUT
PLATFORM = "atom-only"  # ATOM runs on AMD GPUs only: its figures sit at the entry's top level


def base_table() -> fs.Table:
    """The calibration with ATOM's entry as it is before this fit: torch-compile's per-kernel
    and per-step figures, no request latency."""
    cal = dict(fwmod._calibration())
    lender = cal.get("torch-compile") or {}
    return {**cal, STACK: {k: lender[k] for k in ("kernel_overhead_s", "step_overhead_s")
                           if k in lender}}


def entry_text(res: dict[str, Any], base_entry: dict[str, Any]) -> str:
    entry = {"kernel_overhead_s": base_entry.get("kernel_overhead_s", 0.0),
             "step_overhead_s": res["values"]["step_overhead_s"],
             "request_latency_s": res["values"]["request_latency_s"],
             "source": (f"fitted on {len(res['keys'])} ATOM configuration(s) ({res['records']} "
                        f"records) of data/inferencex_published.yaml on MI355X (split rule: "
                        f"{fs.RULE})"),
             "fitted_on": {"step_overhead_s": list(res["keys"]),
                           "request_latency_s": list(res["keys"])},
             "in_sample": res["in_sample"], "held_out": res["held_out"], "calibrated_on": [],
             "not_calibrated": {
                 "kernel_overhead_s": "borrowed from the torch-compile fit (HIP-graph decode "
                                      "loop): graph replay leaves no host gap",
                 "request_overhead_s": "0 s: ATOM's per-request host work runs in its API "
                                       "server process (request_latency_s), not in the "
                                       "engine-core loop",
                 "quantized_weight_efficiency": "no weight-only ATOM row: 1.0"}}
    return yaml.dump({STACK: entry}, Dumper=fs._NoAliases, sort_keys=False, width=100)


def run(write: bool) -> dict[str, Any]:
    base = base_table()
    recs = fs.sglang_records(stack=STACK)
    fit = [r for r in recs if fs.in_fit_set(r)]
    held = [r for r in recs if not fs.in_fit_set(r)]
    values = fs.fit_platform(fit, base, PLATFORM, STACK)
    table = fs.with_sglang(base, PLATFORM, values, STACK)
    before, after, fit_after = fs.predict(held, base), fs.predict(held, table), fs.predict(
        fit, table)
    by_id = {r["id"]: r for r in recs}
    scored = [by_id[p.row_id] for p in fit_after if p.status is Status.OK]
    res = {"values": values, "keys": fs._keys(scored), "records": len(scored),
           "in_sample": fs.summary(fit_after),
           "held_out": {"before": fs.summary(before), "after": fs.summary(after)}}
    print(f"atom: {values} from {len(res['keys'])} configuration(s) ({len(scored)} scored "
          f"records); in sample {res['in_sample']}")
    fs.report(before, after, by_id)
    if write:
        block = entry_text(res, base.get(STACK) or {})
        OUT.write_text(fs.replace_block(OUT.read_text(), block, STACK))
        print(f"wrote ATOM's block of {OUT}")
    return res


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="fit and report, write nothing")
    args = ap.parse_args(argv)
    run(write=not args.dry_run)


if __name__ == "__main__":
    main()
