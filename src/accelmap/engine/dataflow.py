"""Serving on an SRAM dataflow machine (Groq LPU, Cerebras WSE, Graphcore IPU): the compiler
places the model's layers in contiguous blocks on chips (on a wafer, on regions of it) and a
token walks through them; the one operator graph (``ops.graph``) is timed on the one roofline
(``cost.roofline``) at the chip's SRAM bandwidth.

- **chips needed** = ceil((weights + KV cache of the batch + temporaries) / SRAM per chip): all
  state is on chip (Groq: no DRAM, 220 MiB SRAM per TSP as global memory, Abts et al., "A
  Software-defined Tensor Streaming Multiprocessor", ISCA 2022 sec. 3; Cerebras: "the entire
  model is stored on wafer SRAM", Cerebras inference launch blog, Aug 2024). When the chips
  cannot hold the weights they stream from the external tier at its bandwidth each pass
  (Cerebras weight streaming from MemoryX: Hall et al./Cerebras "Weight Streaming" whitepaper,
  2021); where that bandwidth is not published the plan is infeasible, and says so.
- **placement**: with c chips and L layers, each chip holds L/c layers (c <= L), or each layer is
  split over c/L chips (c > L: Groq runs Llama 2 70B on 576 chips, 7.2 per layer), which adds
  two all-reduces per layer among them (Shoeybi et al. 2019 sec. 3).
- **a wafer** is one device whose regions are the pipeline stages: one layer per region of the
  wafer, each with 1/L of its SRAM bandwidth and compute (Cerebras at Hot Chips 2024: the model's
  layers are laid out across the wafer and tokens flow through them). The aggregate 21 PB/s is
  never seen by one token: it crosses one region at a time. The fabric's per-hop latency is not
  published, so traversal latency on the wafer is not charged: the wafer's latency is a lower
  bound, and the output says so.
- **batch-1 latency** = the chips' layer times in sequence + (stages - 1) hand-offs over the
  chip-to-chip link (latency + activation bytes / bandwidth). With B requests in flight the
  pipeline holds ceil(B / stages) per stage; every request advances one token per traversal, so
  throughput = B / traversal time (Narayanan et al. 2021 sec. 2.2 for pipeline occupancy).
- **hop latency**: the link's catalog latency, else Groq's published bound, "less than 3
  microseconds of end-to-end system latency" across a 10,440-TSP system (Abts et al. ISCA 2022,
  abstract): an upper bound for a neighbour hop, used for every chip of the class and said so.
"""

from __future__ import annotations

import math
from dataclasses import replace

from accelmap.cost.execution import execution_model, external_tier, layer_floor, runtime_items
from accelmap.cost.framework import FrameworkProfile
from accelmap.cost.roofline import Device, time_ops, total_time
from accelmap.engine.error_band import error_band
from accelmap.engine.result import ServeStep, fits
from accelmap.engine.shapes import (
    context_notes,
    device_notes,
    inference_precision,
    inference_shapes,
)
from accelmap.engine.system import System
from accelmap.hardware.schema import Accelerator, LinkRole
from accelmap.mapping.plan import Mapping
from accelmap.memory.budget import MemoryBudget, inference_memory
from accelmap.models.geometry import Geometry
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import forward_ops
from accelmap.workload import Inference

GROQ_SYSTEM_LATENCY_S = 3e-6  # Abts et al. ISCA 2022 abstract: "less than 3 microseconds"


def is_wafer(acc: Accelerator) -> bool:
    """A wafer-scale part (its catalog form factor says so): regions of it are the stages."""
    return "wafer" in (acc.form_factor or "").lower()


def hop(acc: Accelerator) -> tuple[float, float, str]:
    """(latency s, bandwidth B/s per direction, source) of one chip-to-chip hand-off."""
    links = acc.links_by_role(LinkRole.SCALE_UP)
    if not links:
        return 0.0, 0.0, "no chip-to-chip link in the catalog"
    link = links[0]
    if link.latency is not None:
        return link.latency.value, link.bandwidth_per_direction.value, f"{link.name} latency"
    return (GROQ_SYSTEM_LATENCY_S, link.bandwidth_per_direction.value,
            f"{link.name}: no published hop latency; Groq's < 3 us end-to-end system bound "
            "(Abts et al. ISCA 2022)")


def dataflow_serve(spec: ModelSpec, system: System, wl: Inference, m: Mapping,
                   fw: FrameworkProfile, imbalance: float = 1.0) -> ServeStep:
    """One replica over ``system.devices / replicas`` chips, layer-pipelined (module doc)."""
    acc, dev, cluster = system.accelerator, system.device, system.cluster
    replicas = max(int(m.replicas), 1)
    chips = max(system.devices // replicas, 1)
    L = spec.n_layers
    geo = Geometry.of(spec)
    ex = execution_model(acc)
    notes: list[str] = [f"execution model {ex.name}: {ex.note}"]
    held = _on_chip(spec, system, wl, m, chips, notes)
    if isinstance(held, ServeStep):
        return held
    items, stream_s, state, needed = held
    per_chip = system.memory_bytes
    wafer = is_wafer(acc)
    budget = MemoryBudget(items={k: v / chips for k, v in items.items()}, capacity=per_chip)
    feasible, reason = fits(budget)
    # stages: a wafer's regions (one layer each), else the chips (at most one per layer)
    stages = L if wafer else min(chips, L)
    split = 1.0 if wafer else max(chips / L, 1.0)  # chips sharing each layer
    # a wafer's layer region holds chips / L of a wafer
    stage_dev = Device.of(acc, fraction=min(chips / L, 1.0)) if wafer else dev
    p = inference_precision(wl)
    pre_shape, _ = inference_shapes(spec, wl)
    per_stage = max(math.ceil(wl.batch / stages), 1)  # requests per stage with B in flight
    mb = replace(wl, batch=per_stage)
    _, dec_mb = inference_shapes(spec, mb)
    pre = time_ops(forward_ops(geo, pre_shape, p, wl.flash_attention, imbalance), stage_dev, fw)
    dec = time_ops(forward_ops(geo, dec_mb, p, wl.flash_attention, imbalance), stage_dev, fw)
    lat, bw, hop_src = hop(acc)
    act = wl.act_dtype.bytes * spec.d_model

    def comm(tokens: float) -> dict[str, float]:
        return _handoffs(tokens, chips, stages, split, wafer, lat, bw, act, L)

    pre_comm = comm(float(pre_shape.tokens))
    dec_comm = comm(float(dec_mb.tokens))
    # every pass crosses the L layers one after the other, each at least the pipeline's
    # per-layer floor (cost/execution.py layer_floor: fitted, and said so)
    floor = layer_floor(acc)
    ttft = (float(total_time(pre)) / split + sum(pre_comm.values()) + stream_s
            + L * floor.seconds)
    tpot = (float(total_time(dec)) / split + sum(dec_comm.values()) + stream_s
            + L * floor.seconds)
    notes.append(f"per-layer floor {floor.seconds * 1e6:.3g} us x {L} layers per pass: "
                 f"{floor.source}")
    steps = max(wl.output_len - 1, 0)
    total = ttft + steps * tpot
    out_tokens = wl.batch * wl.output_len * replicas
    if wafer or chips > 1:
        notes.append(_layout_note(L, chips, wafer, split, lat, hop_src))
    notes.append(f"{needed} chip(s) needed to hold {state / 1e9:.3g} GB; {chips} in use")
    return ServeStep(
        spec.id, acc.id, cluster.name, m, feasible, reason, budget,
        time={"prefill/forward": float(total_time(pre)) / split,
              **{f"prefill/exposed_comm/{k}": v for k, v in pre_comm.items()},
              "decode/forward": float(total_time(dec)) / split,
              **({"prefill/layer_floor": L * floor.seconds,
                  "decode/layer_floor": L * floor.seconds} if floor.seconds else {}),
              **{f"decode/exposed_comm/{k}": v for k, v in dec_comm.items()},
              **({"decode/weight_streaming": stream_s} if stream_s else {})},
        ops={"prefill": tuple(pre), "decode": tuple(dec)},
        assumptions=(*context_notes(spec, wl.prompt_len + wl.output_len), *notes,
                     *device_notes(stage_dev, wl.compute_dtype, fw)),
        error_band=error_band("serve-throughput", fw.name.value, system.devices),
        latency_error_band=error_band("serve-latency", fw.name.value, system.devices),
        output_len=wl.output_len, ttft_s=ttft, tpot_s=tpot,
        total_time_s=total, tokens_per_s=out_tokens / total if wl.output_len else 0.0,
        tokens_per_s_per_device=(out_tokens / total / system.devices
                                 if wl.output_len else 0.0),
        prefill_tokens_per_s=wl.batch * wl.prompt_len * replicas / ttft,
        communication_s={"prefill": pre_comm, "decode_step": dec_comm} if pre_comm else {})


def _on_chip(spec: ModelSpec, system: System, wl: Inference, m: Mapping, chips: int,
             notes: list[str]) -> tuple[dict[str, float], float, float, int] | ServeStep:
    """What a replica's chips hold: the memory items (weights zeroed when they stream from the
    external tier), the seconds of weight streaming per pass, the whole state (bytes) and the
    chips needed to hold it; an infeasible step where neither the chips nor streaming can."""
    acc, per_chip = system.accelerator, system.memory_bytes
    whole = inference_memory(Geometry.of(spec), wl, float("inf"))
    items = runtime_items(whole.items, execution_model(acc))
    state = float(sum(items.values()))
    needed = math.ceil(state / per_chip)
    weights = float(items["weights"])
    stream_s = 0.0
    if needed > chips:
        tier = external_tier(acc)
        rest = state - weights  # KV and temporaries must stay on chip
        if tier is None or tier[1] is None or rest > chips * per_chip:
            what = ("its external tier publishes no bandwidth, so weight streaming cannot be "
                    "estimated" if tier is not None else "it has no external memory tier")
            why = (f"{spec.id} needs {state / 1e9:.1f} GB of on-chip state: {needed} "
                      f"{acc.id} chips of {per_chip / 1e9:.3g} GB, but the system has {chips} "
                      f"per replica and {what} (capacity rule)")
            budget = MemoryBudget(items={k: v / chips for k, v in items.items()},
                                  capacity=per_chip)
            return ServeStep(spec.id, acc.id, system.cluster.name, m, False, why, budget,
                             violated_rule="capacity", output_len=wl.output_len,
                             assumptions=tuple(notes))
        # weights stream from the external tier once per forward pass (weight streaming)
        stream_s = weights / (tier[1] * chips)
        items = {**items, "weights": 0.0 * weights, "weights_streamed": 0.0}
        notes.append(f"weights streamed from the external tier at {tier[1] / 1e9:.0f} GB/s "
                     f"per device: {stream_s * 1e3:.3g} ms per forward pass")
    return items, stream_s, state, needed


def _handoffs(tokens: float, chips: int, stages: int, split: float, wafer: bool, lat: float,
              bw: float, act: float, L: int) -> dict[str, float]:
    """Exposed communication of one pass of ``tokens``: the stage hand-offs ("pp"; between
    wafers only: inside a wafer the hand-off between regions is not charged) and two
    all-reduces per layer among the chips sharing it ("tp")."""
    if stages <= chips and chips == 1:
        return {}
    send = lat + (tokens * act / bw if bw else 0.0)
    out = {"pp": ((chips - 1) if wafer else (stages - 1)) * send}
    if split > 1:
        out["tp"] = 2 * L * (lat + (tokens * act * (split - 1) / split / bw if bw else 0.0))
    return out


def _layout_note(L: int, chips: int, wafer: bool, split: float, lat: float,
                 hop_src: str) -> str:
    """How the layers sit on the chips or the wafer's regions, and the hop it charges."""
    if wafer:
        return (f"wafer: one layer per region ({L} regions on {chips} wafer(s), each "
                f"{min(chips / L, 1.0):.3g} of a wafer's SRAM bandwidth and compute); "
                "on-wafer fabric latency not published, not charged: latency is a lower "
                f"bound; between wafers: {hop_src}")
    place = (f"{L / chips:.3g} layers per chip" if split == 1
             else f"{split:.3g} chips per layer")
    return f"{chips} chips: {place}; hop {lat * 1e6:.3g} us ({hop_src})"
