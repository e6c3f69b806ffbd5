"""Serving layouts that hold the model: the rules `compare` uses to size a part and
`estimate` uses when it is given several devices and no layout.

- **tensor-parallel degrees**: powers of two inside the scale-up domain (the cluster's, and no
  wider than the part's own catalog domain: an RTX 3090's NVLink bridge joins two cards) that
  the attention and KV heads allow (``mapping.constraints.check_serving``); tensor
  parallelism needs the fast links (Shoeybi et al. 2019 sec. 3; vLLM's and SGLang's
  ``--tensor-parallel-size`` stays inside a node).
- **fits**: one device's share of the replica -- the sharded weights, the batch's KV cache
  over prompt + output, the runtime -- within capacity and the memory band
  (``engine.serve.serving_memory``, ``memory.band``).
- **the default layout** on N devices: the smallest tp whose replica fits with one pipeline
  stage, replicas filling the rest (throughput scales with replicas while one fits: fewer
  collectives per token); where no tp fits, the widest tp with the fewest pipeline stages
  that fit (vLLM's ``--pipeline-parallel-size`` across nodes). Experts stay tensor-parallel
  (ep = 1, vLLM's default without ``--enable-expert-parallel``).
"""

from __future__ import annotations

from accelmap.cost.execution import execution_model
from accelmap.engine.serve import serving_memory
from accelmap.engine.system import System
from accelmap.hardware.cluster import Cluster
from accelmap.hardware.schema import Accelerator
from accelmap.mapping.constraints import check_serving
from accelmap.mapping.plan import Mapping, powers_of_two
from accelmap.models.schema import ModelSpec
from accelmap.workload import Inference

_HEAD_RULES = ("heads_divisible", "kv_heads")


def tp_options(spec: ModelSpec, cluster: Cluster, n: int) -> list[int]:
    """Tensor-parallel degrees for ``n`` devices of ``cluster`` (module doc), smallest first."""
    own = cluster.accelerator.scale_up_domain
    domain = min(cluster.scale_up_domain, int(own.value)) if own else cluster.scale_up_domain
    return [t for t in powers_of_two(min(n, domain))
            if not [v for v in check_serving(spec, cluster, Mapping.serving(tp=t))
                    if v.rule in _HEAD_RULES]]


def replica_fits(spec: ModelSpec, wl: Inference, m: Mapping, acc: Accelerator,
                 chunk: int | None = None) -> bool:
    """Whether one device's share of a replica under ``m`` fits (module doc)."""
    return bool(serving_memory(spec, wl, m, acc.memory_bytes, chunk,
                               runtime=execution_model(acc)).fits)


def fewest_stages(spec: ModelSpec, wl: Inference, tp: int, most: int, acc: Accelerator,
                  chunk: int | None = None) -> int | None:
    """The fewest pipeline stages (<= ``most``) that fit at this tp, by bisection (more stages
    never need more memory per device); None when even ``most`` do not."""
    hi = min(most, spec.n_layers)
    if hi < 1 or not replica_fits(spec, wl, Mapping.serving(tp=tp, pp=hi), acc, chunk):
        return None
    lo = 0  # lo never fits (0 stages), hi always does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if replica_fits(spec, wl, Mapping.serving(tp=tp, pp=mid), acc, chunk):
            hi = mid
        else:
            lo = mid
    return hi


def default_serving_layout(spec: ModelSpec, system: System, wl: Inference
                           ) -> tuple[Mapping, str | None]:
    """The layout on ``system`` when none is given, and the sentence that says why: one
    replica per device when one device holds it (or on one device, or on a layer-pipelined
    SRAM machine, whose compiler lays one model over all chips); else the module doc's
    rule. Nothing fits: one replica per device, and the estimate says it does not fit."""
    n, acc = system.devices, system.accelerator
    if execution_model(acc).layer_pipelined:
        return Mapping.serving(replicas=1), None
    per_device = Mapping.serving(replicas=n)
    if n == 1 or replica_fits(spec, wl, Mapping.serving(), acc):
        return per_device, None
    tps = tp_options(spec, system.cluster, n)
    for tp in tps:
        if replica_fits(spec, wl, Mapping.serving(tp=tp), acc):
            m = Mapping.serving(tp=tp, replicas=n // tp)
            return m, (f"layout chosen: tp={tp} x {n // tp} replica(s), the smallest "
                       f"tensor-parallel group whose replica holds the weights and this "
                       f"batch's KV cache on {acc.id} (give --tp/--pp/--replicas to set it)")
    if tps:
        tp = tps[-1]
        pp = fewest_stages(spec, wl, tp, n // tp, acc)
        if pp is not None:
            m = Mapping.serving(tp=tp, pp=pp, replicas=n // (tp * pp))
            return m, (f"layout chosen: tp={tp} x pp={pp} x {n // (tp * pp)} replica(s): no "
                       f"tensor-parallel group inside the scale-up domain holds the replica, "
                       f"so the fewest pipeline stages that do (give --tp/--pp/--replicas to "
                       "set it)")
    return per_device, None
