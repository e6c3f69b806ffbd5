"""Planner quality on the published training configurations (issue "Planner", item 7).

For every multi-device row of the shared training.csv that `accelmap validate` can model, the
planner searches the same model, cluster, sequence length, global batch and training stack,
and the published mapping is evaluated with the same engine. Reported per case: the planner's
best predicted tokens/s over the published mapping's (goal >= 1), and the published mapping's
rank among the feasible plans (goal: top 10 %). The published mapping is not always inside the
planner's default space (e.g. pp = 3, micro-batch 20): such cases are marked.

Also per (model, accelerator, device count, sequence length): the planner's top plan's
predicted throughput over the best *measured* throughput of the published runs of that group
(converted from each row's metric through its own mapping's estimate: at a fixed model and
sequence, MFU, TFLOP/s per device and tokens/s per device are proportional). Goal: within 10 %.

Run: python benchmarks/planner_quality.py [path/to/training.csv] [--limit N]
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

from accelmap.api import load_catalog
from accelmap.search.planner import plan_training
from accelmap.search.space import TrainingSpace
from accelmap.validate.cases import TrainingCase
from accelmap.validate.multi import plan_training as published_plan
from accelmap.validate.read import read_cases

DEFAULT = (Path(__file__).resolve().parents[1]
           / "data/reference/measurements/training.csv")


def main() -> None:
    argv = sys.argv[1:]
    limit = int(argv[argv.index("--limit") + 1]) if "--limit" in argv else None
    args = [a for i, a in enumerate(argv)  # the path: not an option, nor --limit's value
            if not a.startswith("--") and (i == 0 or argv[i - 1] != "--limit")]
    path = Path(args[0]) if args else DEFAULT
    cat = load_catalog()
    cases = [c for c in read_cases(path).cases
             if isinstance(c, TrainingCase) and (c.parallel.devices or 1) > 1]
    rows = []
    groups: dict[tuple[str, str, int, int], list[tuple[float, float]]] = {}
    for case in cases[:limit]:
        base, plan, _reasons, _ = published_plan(case, cat)
        if plan is None:
            continue
        est = plan.estimate()
        if "violated_rule" in est.metrics:
            continue
        m = plan.mapping
        space = TrainingSpace.default(plan.spec, plan.cluster, plan.workload.seq_len)
        if "foundry" in case.framework.lower() or "composer" in case.framework.lower():
            # llm-foundry's MPT trains with FSDP alone (no tensor, pipeline or context
            # parallelism in its model code): the planner searches what that stack can run
            space = replace(space, tp=(1,), pp=(1,), cp=(1,), ep=(1,), tp_overlap=(False,),
                            zero_bubble=(False,))
        in_space = (m.tp in space.tp and m.pp in space.pp and m.cp in space.cp
                    and m.ep in space.ep and m.micro_batch in space.micro_batch
                    and m.virtual_stages in space.vpp and m.shard_group is None)
        res = plan_training(plan.spec, plan.cluster, plan.workload.seq_len, plan.workload.batch,
                            framework=plan.framework, top=10**6, explain=False,
                            workload=plan.workload, space=space, include_tight=True)
        if not res.plans:
            rows.append((case.row_id, None, None, in_space, est.feasible))
            continue
        best = res.plans[0].metrics["tokens_per_s"]
        pub = est.metrics["tokens_per_s"]
        if base.measured:
            measured = base.measured / (float(est.metrics[plan.metric]) * plan.scale) * pub
            key = (plan.spec.id, plan.cluster.accelerator.id, plan.cluster.devices,
                   plan.workload.seq_len)
            groups.setdefault(key, []).append((measured, best))
        faster = sum(1 for p in res.plans if p.metrics["tokens_per_s"] > pub * 1.0001)
        rank = faster / len(res.plans)
        rows.append((case.row_id, best / pub, rank, in_space, est.feasible))
    print(f"{'row':6s} {'best/published':>14s} {'published rank':>14s}  in space  fits")
    for rid, ratio, rank, ins, fits in rows:
        r = f"{ratio:14.3f}" if ratio is not None else f"{'no plan':>14s}"
        k = f"{rank:14.1%}" if rank is not None else f"{'-':>14s}"
        print(f"{rid:6s} {r} {k}  {'yes' if ins else 'no ':8s}  {'yes' if fits else 'NO'}")
    scored = [r for r in rows if r[1] is not None and r[3] and r[4]]
    if scored:
        ok_speed = sum(1 for r in scored if r[1] >= 0.9999)
        ok_rank = sum(1 for r in scored if r[2] <= 0.10)
        print(f"\n{len(scored)} cases in the space that fit: best >= published in {ok_speed}; "
              f"published in the top 10 % in {ok_rank}; median rank "
              f"{statistics.median(r[2] for r in scored):.1%}; median best/published "
              f"{statistics.median(r[1] for r in scored):.3f}")
    outside = [r for r in rows if r[1] is not None and not r[3] and r[4]]
    if outside:
        print(f"{len(outside)} cases outside the default space that fit: best >= published in "
              f"{sum(1 for r in outside if r[1] >= 0.9999)}; median best/published "
              f"{statistics.median(r[1] for r in outside):.3f}")
    print(f"{len(rows)} cases evaluated, {sum(1 for r in rows if not r[3])} outside the "
          "default space")
    ratios = [max(b for _, b in v) / max(m for m, _ in v) for v in groups.values()]
    if ratios:
        within = sum(1 for r in ratios if abs(r - 1) <= 0.10)
        print(f"top plan / best published throughput per (model, accelerator, devices, seq): "
              f"{len(ratios)} groups, within 10 % in {within}, median "
              f"{statistics.median(ratios):.3f}, p10 {sorted(ratios)[len(ratios) // 10]:.3f}, "
              f"p90 {sorted(ratios)[(9 * len(ratios)) // 10]:.3f}")


if __name__ == "__main__":
    main()
