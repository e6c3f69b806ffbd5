"""Prediction error on SemiAnalysis InferenceX concurrency sweeps (data/inferencex_published.yaml).

The file (written by ``data/inferencex/convert.py`` from the InferenceX dashboard's API
snapshot) holds closed-loop concurrency points of DeepSeek-R1 on B200, B300, GB200, GB300,
H100, H200, MI300X, MI325X and MI355X in FP4 and FP8, in the run format. Nothing is fitted on
it but SGLang's and ATOM's host figures and TensorRT-LLM's served latency
(fitters/fit_sglang_profile.py, fit_atom_profile.py, fit_server_latency.py: one configuration in
four, by a hash fixed in advance, validate/fit_split.py). Prints median / p90 absolute % error
and the median signed % error (+ = accelmap optimistic) per accelerator, model, precision,
framework and metric, and apart for the records no profile was fitted on ("fit: not fitted
on"), then the skip reasons with their counts.

    PYTHONPATH=src python3 benchmarks/inferencex_error.py [--sample N] [--seed S] [--rows]
        [--no-pool-dpa]

``--sample N`` predicts a fixed random sample of N records (seeded) instead of all of them.
Since the disaggregated records with DP attention are predicted (closed loops of up to 16,384
clients over both pools, simulated until the pools settle), the whole file takes over an hour
on the project's 2-core machine; ``--sample 120`` about 20 minutes. A progress line goes to
stderr every 30 s.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from accelmap.api import load_catalog
from accelmap.api.validation import Prediction, Status
from accelmap.validate.fit_split import fitted_on
from accelmap.validate.predict import predict_cases
from accelmap.validate.read import read_cases

ROOT = Path(__file__).resolve().parents[1]
CHECK_SET = ROOT / "data" / "inferencex_published.yaml"


def records(path: Path) -> list[dict[str, Any]]:
    """The file's records with YAML merge keys resolved."""
    data = yaml.safe_load(path.read_text())
    return list(data["runs"] if isinstance(data, dict) else data)


def precision_word(rec: dict[str, Any]) -> str:
    moe = rec.get("moe_precision")
    return f"{rec.get('precision')}+{moe} experts" if moe else str(rec.get("precision"))


def framework_word(rec: dict[str, Any]) -> str:
    fw = str(rec.get("framework", "")).split(" ")[0]
    return f"{fw}/{rec['engine']}" if rec.get("engine") else fw


def reasons(preds: Sequence[Prediction]) -> Counter[str]:
    """Skip reasons, each clause of a reason counted apart, numbers written N."""
    out: Counter[str] = Counter()
    for p in preds:
        if p.status is not Status.OK:
            for clause in (p.skipped_reason or "no reason given").split("; "):
                out[re.sub(r"\d+", "N", clause.split(" (`")[0])] += 1
    return out


PROGRESS_S = 30.0  # seconds between progress lines on stderr


def pool_dpa(rec: dict[str, Any]) -> bool:
    """A disaggregated record with DP attention in either pool (the slow closed loops)."""
    return bool(rec.get("disaggregated") and (rec.get("prefill_dp_attention")
                                              or rec.get("decode_dp_attention")))


def predict_all(cases: Sequence[Any]) -> list[Prediction]:
    """Every record's prediction, with a progress line on stderr every ``PROGRESS_S`` seconds
    (a disaggregated closed loop of thousands of clients takes minutes; the records of one
    point share its simulation through the validator's cache)."""
    catalog, out = load_catalog(), []
    t0 = last = time.perf_counter()
    for i, case in enumerate(cases, 1):
        out += predict_cases([case], catalog, frozenset())
        now = time.perf_counter()
        if now - last >= PROGRESS_S or i == len(cases):
            print(f"  {i}/{len(cases)} records predicted in {now - t0:.0f} s", file=sys.stderr,
                  flush=True)
            last = now
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=Path, default=CHECK_SET)
    ap.add_argument("--sample", type=int, default=0, help="predict N records drawn at random")
    ap.add_argument("--seed", type=int, default=0, help="seed of --sample")
    ap.add_argument("--rows", action="store_true", help="print every scored row too")
    ap.add_argument("--no-pool-dpa", action="store_true",
                    help="leave out the disaggregated records with DP attention in a pool (the "
                         "records scorable before those were modelled: about 3 minutes)")
    args = ap.parse_args(argv)
    recs = records(args.cases)
    by_id = {r["id"]: r for r in recs}
    cases = list(read_cases(args.cases).cases)
    if args.no_pool_dpa:
        cases = [c for c in cases if not pool_dpa(by_id.get(c.id, {}))]
    if 0 < args.sample < len(cases):  # the sample is drawn in memory: nothing is written
        cases = random.Random(args.seed).sample(cases, args.sample)
    t0 = time.perf_counter()
    preds = predict_all(cases)
    took = time.perf_counter() - t0

    def field(fn: Any) -> Any:
        return lambda p: fn(by_id[p.row_id]) if p.row_id in by_id else None

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from serving_error import table  # the same per-group table as the serving check set

    table(f"{args.cases.name}: {len(preds)} records (abs % error; signed + = optimistic)", preds, {
        "accelerator": field(lambda r: r["accelerator"]),
        "model": field(lambda r: r["model"]),
        "precision": field(precision_word),
        "framework": field(framework_word),
        "metric": lambda p: p.metric or None,
        "accelerator x metric": field(lambda r: f"{r['accelerator']} {r['metric']}"),
        "fit": field(lambda r: "fitted on" if fitted_on(r) else "not fitted on"),
    }, skipped=False)
    ok = sum(p.status is Status.OK for p in preds)
    print(f"\nscored {ok} of {len(preds)}; {len(preds) - ok} skipped, with these reasons "
          "(a record may have several):")
    for why, n in reasons(preds).most_common():
        print(f"  {n:5d}  {why}")
    print(f"\npredicted in {took:.1f} s ({took / max(len(preds), 1):.2f} s per record)")
    if args.rows:
        for p in preds:
            if p.status is Status.OK and p.predicted is not None and p.measured is not None:
                print(f"  {p.row_id:<64} {p.metric:<32} measured {p.measured:>10.1f} "
                      f"predicted {p.predicted:>10.1f} {p.signed_pct_error:+7.1f} %")


if __name__ == "__main__":
    main()
