"""Which term of the predicted step is off, per source: evidence for the engine, not a fit.

For every multi-device training row the distributed engine can predict (no calibration is
applied or written), this prints

1. per source: count, median signed error (+ = optimistic), and the mean share of the predicted
   step per term: GEMMs, attention core, other (vector) kernels, pipeline bubble, exposed
   communication, optimizer;
2. per device and precision, on the BF16/FP16 rows: a least-squares split of the rate error
   into a slow-down of the attention core (``k_attn``) and of everything else (``k_rest``):
   predicted/measured = k_rest x (1 - a) + k_attn x a, with a the attention share of the
   predicted step. Seq-length sweeps (llm-foundry) separate the two; k = 1 means that term is
   right;
3. FP8 rows: the engine's FP8-over-BF16 speed-up for the same row (the row re-planned in BF16);
4. published configurations predicted not to fit: needed / capacity, the largest items, and how
   many would fit if the loss kept its logits once in bf16 (a fused cross-entropy) instead of
   the engine's 2 x fp32.

Run: python benchmarks/training_error_terms.py [path/to/training.csv]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from accelmap.api import DType, load_catalog
from accelmap.api.estimates import Estimate
from accelmap.validate.cases import TrainingCase
from accelmap.validate.multi import TrainingPlan, plan_training
from accelmap.validate.read import read_cases

DEFAULT_CSV = (Path(__file__).resolve().parents[1] / "data" / "reference"
               / "measurements" / "training.csv")
ATTENTION = ("attention/core", "attention/scores", "attention/softmax", "attention/context")


@dataclass(frozen=True)
class Row:
    case: TrainingCase
    plan: TrainingPlan
    est: Estimate
    ratio: float  # predicted / measured rate
    shares: dict[str, float]


def shares(est: Estimate) -> dict[str, float]:
    step = float(est.metrics["step_time_s"])
    tree = est.time
    phases = est.rollup()
    compute = sum(phases.get(k, 0.0) for k in ("forward", "recompute", "backward"))
    ops = est.times["forward"] + est.times["backward"]
    total = sum(float(t.total_s) for t in ops) or 1.0
    attn = sum(float(t.total_s) for t in ops if any(a in t.op.name for a in ATTENTION))
    gemm = sum(float(t.total_s) for t in ops if t.op.gemm is not None)
    comm = sum(v for k, v in tree.items() if k.startswith("exposed_comm/"))
    return {"gemm": compute * gemm / total / step, "attention": compute * attn / total / step,
            "other": compute * (total - gemm - attn) / total / step,
            "bubble": tree["bubble"] / step, "comm": comm / step,
            "optimizer": tree["optimizer"] / step}


def collect(path: Path) -> list[Row]:
    catalog = load_catalog()
    out = []
    for case in read_cases(path).cases:
        if not isinstance(case, TrainingCase) or (case.parallel.devices or 1) <= 1:
            continue
        base, plan, _, _ = plan_training(case, catalog)
        if plan is None or base.measured is None:
            continue
        est = plan.estimate()
        if "violated_rule" in est.metrics:
            continue
        ratio = float(est.metrics[plan.metric]) * plan.scale / base.measured
        out.append(Row(case, plan, est, ratio, shares(est)))
    return out


def _median_signed(rows: list[Row]) -> float:
    return statistics.median((r.ratio - 1) * 100 for r in rows)


def per_source(rows: list[Row]) -> None:
    print("1. per source: median signed error and mean share of the predicted step")
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        groups[r.case.source].append(r)
    for name, rs in sorted(groups.items()):
        mean = {k: float(np.mean([r.shares[k] for r in rs])) for k in rs[0].shares}
        terms = ", ".join(f"{k} {v:.0%}" for k, v in mean.items() if v >= 0.005)
        print(f"   {name:26s} n={len(rs):3d}  {_median_signed(rs):+6.1f} %   [{terms}]")


def attention_split(rows: list[Row]) -> None:
    print("2. rate error split into attention-core and other slow-downs (BF16/FP16 rows)")
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        if r.plan.workload.dtype is not DType.FP8:
            groups[f"{r.case.source} on {r.plan.cluster.accelerator.id}"].append(r)
    for name, rs in sorted(groups.items()):
        a = np.array([r.shares["attention"] for r in rs])
        y = np.array([r.ratio for r in rs])
        if len(rs) < 3 or np.ptp(a) < 0.1:
            print(f"   {name:42s} n={len(rs):3d}  attention share {a.min():.2f}-{a.max():.2f}: "
                  f"too narrow to split; overall x{np.median(y):.2f}")
            continue
        x = np.stack([1 - a, a], axis=1)
        (k_rest, k_attn), *_ = np.linalg.lstsq(x, y, rcond=None)
        resid = float(np.median(np.abs(x @ np.array([k_rest, k_attn]) / y - 1))) * 100
        print(f"   {name:42s} n={len(rs):3d}  attention share {a.min():.2f}-{a.max():.2f}: "
              f"k_rest x{k_rest:.2f}, k_attn x{k_attn:.2f} (median residual {resid:.1f} %)")


def fp8_speedup(rows: list[Row]) -> None:
    print("3. FP8 rows: measured vs predicted, and the engine's FP8 / BF16 speed-up")
    for r in rows:
        if r.plan.workload.dtype is not DType.FP8:
            continue
        bf16 = replace(r.plan, workload=replace(r.plan.workload, dtype=DType.BF16)).estimate()
        speedup = float(bf16.metrics["step_time_s"]) / float(r.est.metrics["step_time_s"])
        print(f"   {r.case.row_id} {r.case.source:18s} {r.case.model:34s} "
              f"{(r.ratio - 1) * 100:+6.1f} %   engine FP8/BF16 x{speedup:.2f}")


def not_fitting(rows: list[Row]) -> None:
    bad = [r for r in rows if not r.est.feasible]
    print(f"4. published configurations predicted NOT to fit: {len(bad)}")
    fused = 0
    for r in bad:
        mem = r.est.memory
        items = {k: float(v) for k, v in mem.items.items()}
        logits = items.get("activations/logits", 0.0)
        if float(mem.total) - 0.75 * logits <= mem.capacity:
            fused += 1
            continue
        top = sorted(items.items(), key=lambda kv: -kv[1])[:3]
        print(f"   {r.case.row_id} needs {float(mem.total) / 2**30:.1f} of "
              f"{mem.capacity / 2**30:.1f} GiB: "
              + ", ".join(f"{k} {v / 2**30:.1f}" for k, v in top))
    print(f"   {fused} of {len(bad)} would fit with the logits kept once in bf16 (fused loss)")


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_CSV
    rows = collect(path)
    per_source(rows)
    attention_split(rows)
    fp8_speedup(rows)
    not_fitting(rows)


if __name__ == "__main__":
    main()
