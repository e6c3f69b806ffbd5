"""The layout of a simulated serving run when none is given (offline, server, concurrency).

The batch rule (``engine.layout.default_serving_layout``: the smallest tensor-parallel group
whose replica holds the weights and one batch's KV cache at full device memory) is not enough
here: the simulated stack sizes its KV pool by its own memory rule (vLLM and SGLang keep a
fraction of the device, ``serving.scheduler``), after the activations of a full
``max_batched_tokens`` pass, and a layout the batch rule accepts can leave that pool empty
(DeepSeek-R1 in FP4 at tp=2 on B200 did: every concurrency then "cannot run"). So a simulated
run takes, among the same candidates, the first whose pool under the framework's rule holds
the context of every request one replica keeps in flight: its closed-loop clients
(``concurrency``) or at least one request (offline, server).
"""

from __future__ import annotations

from accelmap.cost.execution import execution_model
from accelmap.cost.framework import FrameworkProfile
from accelmap.engine.formats import resolve_inference
from accelmap.engine.layout import default_serving_layout, tp_options
from accelmap.engine.system import System
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.serving.scenario import Load, kv_pool, scheduler_for
from accelmap.workload import Inference


def holds(spec: ModelSpec, system: System, wl: Inference, m: Mapping, fw: FrameworkProfile,
          load: Load) -> bool:
    """Whether ``m``'s KV pool under ``fw``'s memory rule holds the context of the requests
    one replica keeps in flight (module doc)."""
    sched = scheduler_for(system, fw, load)
    pool = kv_pool(spec, wl, m, system.memory_bytes, sched)
    in_flight = load.clients_per_replica(int(m.replicas)) or 1
    return pool.tokens >= in_flight * (wl.prompt_len + wl.output_len)


def scenario_layout(spec: ModelSpec, system: System, wl: Inference, fw: FrameworkProfile,
                    load: Load) -> tuple[Mapping, str | None]:
    """The layout of a simulated run (module doc) and the sentence that says why; where no
    candidate holds, the batch rule's layout (the run then says why it cannot run)."""
    batch, note = default_serving_layout(spec, system, wl)
    n, acc = system.devices, system.accelerator
    if n == 1 or execution_model(acc).layer_pipelined:
        return batch, note
    run_wl, _ = resolve_inference(acc, wl, spec.id, spec.is_moe)
    if holds(spec, system, run_wl, batch, fw, load):
        return batch, note
    tps = tp_options(spec, system.cluster, n)
    candidates = [Mapping.serving(replicas=n)] + [
        Mapping.serving(tp=tp, replicas=n // tp) for tp in tps]
    if tps:
        top = tps[-1]
        candidates += [Mapping.serving(tp=top, pp=pp, replicas=n // (top * pp))
                       for pp in (2, 4, 8, 16) if top * pp <= n and pp <= spec.n_layers]
    for m in candidates:
        if holds(spec, system, run_wl, m, fw, load):
            what = "its clients'" if load.concurrency is not None else "a request's"
            return m, (f"layout chosen: {m.describe_serving()} on {acc.id}, the smallest "
                       f"whose KV pool under {fw.name.value}'s memory rule holds {what} context "
                       "(give --tp/--pp/--replicas to set it)")
    return batch, note
