"""Execution model per accelerator class: how a class runs the one operator graph (``ops.graph``)
on the one roofline (``cost.roofline``). A TPU, an SRAM machine, an FPGA or an edge NPU is not a
GPU (DESIGN, "Lessons from the first wave"); what differs is named here, once per class:

- **runtime memory**: the CUDA context (``CUDA_CONTEXT_BYTES``, below; ``memory.allocator`` says why
  it sits outside the fitted peaks) and the caching allocator's fragmentation exist only where a
  CUDA/ROCm-style runtime and PyTorch's caching allocator run (GPUs; Jetson, which runs CUDA). XLA
  assigns every buffer of a compiled program at compile time (XLA docs, "Buffer assignment":
  ``BufferAssignment`` maps each HLO value to a slice of a preallocated allocation), so a TPU
  carries neither; a statically scheduled SRAM machine holds only what its compiler placed (Abts et
  al., "Think Fast: A Tensor Streaming Processor", ISCA 2020, sec. 2-3: no caches, no runtime
  arbitration, all data movement scheduled by the compiler); an FPGA overlay's weights sit in
  buffers the host allocates once (Xilinx XRT ``xrt::bo``); llama.cpp's graph allocator sizes its
  compute buffers once per graph (ggml-alloc ``ggml_gallocr``), and on Apple silicon its Metal
  backend wraps the mapped model file in Metal buffers without a copy (ggml-metal-device.m
  ``ggml_metal_buffer_map``: ``newBufferWithBytesNoCopy`` on unified memory), so an Apple GPU
  carries no CUDA context either. Runtimes whose reserved memory is not published (Gaudi's
  SynapseAI, AWS Neuron, Tenstorrent) keep the GPU charges: the nearest measured evidence, said in
  the note.
- **software profile** (a ``FrameworkProfile``): the stack a class runs by default when no
  ``--framework`` is given: vLLM/Megatron on GPUs, XLA on TPUs, a compiled graph on GPU-like
  ASICs, a compiled dataflow schedule on SRAM machines, an overlay on FPGAs, llama.cpp on CPUs,
  edge NPUs and Apple silicon (Metal).
- **where the weights live**: ``RESIDENT`` in the device tier (HBM or on-chip SRAM) or, on an
  SRAM machine whose chips cannot hold the model, ``STREAMED`` from the external tier
  (Cerebras weight streaming from MemoryX: Cerebras, "Weight Streaming Execution" whitepaper
  2021 / Hall et al. 2023; SN40L's DDR tier: Prabhakar et al., "SambaNova SN40L", 2024, sec. 3).
- **layer pipelining**: an SRAM machine places contiguous blocks of layers on chips (or, on a
  wafer, on regions of it) and a token walks through them (``engine.dataflow``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from accelmap.cost.framework import Framework, class_calibration
from accelmap.hardware.schema import Accelerator, DeviceClass, LinkRole, MemoryRole

# The CUDA context outside PyTorch's caching allocator (memory/allocator.py says why it sits
# outside the fitted peaks).
CUDA_CONTEXT_BYTES = 287_047_680.0  # pytorch/pytorch#86509, lazy module loading


class WeightHome(StrEnum):
    RESIDENT = "resident"  # in the device tier (HBM, or on-chip SRAM on an SRAM machine)
    STREAMED = "streamed"  # from an external tier each pass (MemoryX, SN40L DDR)


@dataclass(frozen=True)
class ExecutionModel:
    device_class: DeviceClass
    name: str
    runtime_context_bytes: float  # reserved by the runtime outside the tensors, per device
    fragments: bool  # a caching allocator reserves beyond the live tensors (PyTorch CUDA/HIP)
    serving: Framework
    training: Framework
    layer_pipelined: bool  # a token walks through chips (regions) holding blocks of layers
    note: str

    @property
    def runtime_source(self) -> str:
        return self.note


_GPU_NOTE = ("CUDA/ROCm runtime: 287 MB context (pytorch/pytorch#86509) + caching-allocator "
             "fragmentation; per-kernel launch from the framework profile")

# Apple silicon (class gpu, vendor Apple) runs no CUDA: LLM inference there is llama.cpp (or MLX)
# over Metal. llama.cpp's Metal backend wraps the memory-mapped model file in Metal buffers
# without copying it (ggml/src/ggml-metal/ggml-metal-device.m, ``ggml_metal_buffer_map``:
# ``newBufferWithBytesNoCopy`` with shared storage on unified memory) and sizes its compute
# buffers once per graph (ggml-alloc); there is no caching allocator, and the Metal runtime's
# own reserve is not published.
_METAL_NOTE = ("Apple silicon: llama.cpp over Metal (ggml-metal): weights mapped into Metal "
               "buffers without a copy on unified memory, compute buffers sized once per graph "
               "(ggml-alloc); no CUDA context, no caching allocator; the Metal runtime's own "
               "reserve is not published (0)")

_MODELS: dict[DeviceClass, ExecutionModel] = {
    DeviceClass.GPU: ExecutionModel(DeviceClass.GPU, "gpu-kernels", CUDA_CONTEXT_BYTES, True,
                                    Framework.VLLM, Framework.MEGATRON, False, _GPU_NOTE),
    DeviceClass.TPU: ExecutionModel(
        DeviceClass.TPU, "xla", 0.0, False, Framework.XLA, Framework.XLA, False,
        "XLA-compiled program: buffers assigned at compile time (no CUDA context, no caching "
        "allocator); no per-kernel host launch; MXU padding to 128 (256 on v6e)"),
    DeviceClass.ASIC: ExecutionModel(
        DeviceClass.ASIC, "compiled-graph", CUDA_CONTEXT_BYTES, True, Framework.GRAPH,
        Framework.GRAPH, False,
        "compiled graph (Gaudi graph/lazy mode, AWS Neuron NEFF): no per-op host launch; the "
        "runtime's reserved memory is not published, so the CUDA context and allocator "
        "fragmentation are charged as the nearest measured evidence"),
    DeviceClass.SRAM_MACHINE: ExecutionModel(
        DeviceClass.SRAM_MACHINE, "sram-dataflow", 0.0, False, Framework.DATAFLOW,
        Framework.DATAFLOW, True,
        "compiler-scheduled dataflow: weights and KV resident in on-chip SRAM (or streamed "
        "from the external tier), layers pipelined across chips; no GPU context"),
    DeviceClass.FPGA: ExecutionModel(
        DeviceClass.FPGA, "fpga-overlay", 0.0, False, Framework.FPGA_OVERLAY,
        Framework.FPGA_OVERLAY, False,
        "layer-by-layer overlay (FlightLLM, Zeng et al. FPGA 2024; DFX, Hong et al. MICRO "
        "2022): weights streamed from HBM/DDR, operators fused on chip, no GPU context"),
    DeviceClass.EDGE_NPU: ExecutionModel(
        DeviceClass.EDGE_NPU, "edge-runtime", 0.0, False, Framework.LLAMA_CPP,
        Framework.EAGER, False,
        "quantized small models, memory-bound decode (llama.cpp-style runtime); no GPU "
        "context unless the part runs CUDA (Jetson)"),
    DeviceClass.CPU: ExecutionModel(
        DeviceClass.CPU, "cpu-runtime", 0.0, False, Framework.LLAMA_CPP, Framework.EAGER_CPU,
        False, "llama.cpp-style runtime: compute buffers sized once per graph (ggml-alloc), "
        "memory-bound decode; training in eager PyTorch on the CPU (host dispatch in series, "
        "cost/eager_cpu.py); no GPU context, no caching allocator (PyTorch's CPU allocator "
        "frees to the C library)"),
}


# GPU-like ASICs run their vendor's compiled stack (each with its own host time per step)
_ASIC_STACKS = (("intel", Framework.HABANA), ("habana", Framework.HABANA),
                ("aws", Framework.NEURON), ("tenstorrent", Framework.TT_METAL))


def execution_model(acc: Accelerator) -> ExecutionModel:
    """The execution model of ``acc``'s class. Jetson modules (class edge-npu) run CUDA and
    PyTorch, so they keep the CUDA context and allocator of the GPU model; Apple silicon (class
    gpu) runs llama.cpp over Metal, without them; GPU-like ASICs run their vendor's compiled
    stack."""
    model = _MODELS[acc.device_class]
    if acc.device_class is DeviceClass.GPU and acc.vendor.lower() == "apple":
        return ExecutionModel(model.device_class, "metal", 0.0, False, Framework.LLAMA_CPP,
                              Framework.EAGER, False, _METAL_NOTE)
    if acc.device_class is DeviceClass.ASIC:
        vendor = acc.vendor.lower()
        stack = next((fw for key, fw in _ASIC_STACKS if key in vendor), None)
        if stack is not None:
            from dataclasses import replace

            return replace(model, serving=stack, training=stack)
    if acc.device_class is DeviceClass.EDGE_NPU and acc.vendor.lower() == "nvidia":
        return ExecutionModel(model.device_class, "edge-cuda", CUDA_CONTEXT_BYTES, True,
                              model.serving, model.training, False,
                              "Jetson runs CUDA: " + _GPU_NOTE)
    return model


def external_tier(acc: Accelerator) -> tuple[float, float | None] | None:
    """(capacity, bandwidth or None) of the external weight store an SRAM machine streams from
    (Cerebras MemoryX, SN40L DDR): the first memory level with role 'host'."""
    for level in acc.memory:
        if level.role is MemoryRole.HOST:
            return level.capacity.value, level.bandwidth.value if level.bandwidth else None
    return None


def streams_training_weights(acc: Accelerator) -> bool:
    """A wafer-scale part with an external weight store trains by weight streaming: weights and
    optimizer state live in the external tier (MemoryX), each layer's weights stream onto the
    wafer for the forward and again for the backward of every micro-batch, gradients stream
    out, and the optimizer runs in the external tier; wafers never exchange gradients with each
    other (SwarmX broadcasts the weights and reduces the gradients on the way back). Cerebras,
    "Weight Streaming Execution" whitepaper (2021), and Hall et al., "Training Giant Neural
    Networks Using Weight Streaming on Cerebras Wafer-Scale Systems" (2023), sec. 2-3. In a
    mapping this is ``offload`` (ZeRO-Infinity's shape: Rajbhandari et al. 2021). Every
    Cerebras wafer trains this way (CS-2 in Hall et al.), whether or not the catalog lists its
    MemoryX capacity; where it does not, the external tier's capacity is not checked."""
    return acc.device_class is DeviceClass.SRAM_MACHINE and "wafer" in (
        acc.form_factor or "").lower()


def external_link_bandwidth(acc: Accelerator) -> tuple[float, str] | None:
    """(bytes/s per direction, where it comes from) of the path between a weight-streaming
    part and its external tier: the tier's own published bandwidth, else the part's host
    links, else its system I/O (the scale-out links, which on a CS-2/CS-3 are the 12 x 100 GbE
    to SwarmX and MemoryX). None for a part that does not stream its training weights."""
    if not streams_training_weights(acc):
        return None
    tier = external_tier(acc)
    if tier is not None and tier[1]:
        return tier[1], "the external tier's published bandwidth"
    host = acc.bandwidth_per_direction(LinkRole.HOST)
    if host:
        return host, "the part's host links"
    io = acc.bandwidth_per_direction(LinkRole.SCALE_OUT)
    return (io, "the system I/O to the external tier (scale-out links, per direction)") \
        if io else None


def runtime_items(items: dict[str, Any], model: ExecutionModel) -> dict[str, Any]:
    """A memory tree with the runtime items of ``model``'s class: its own context in place of
    the CUDA context, and no allocator fragmentation where no caching allocator runs. GPU
    trees are returned as they are."""
    if model.runtime_context_bytes == CUDA_CONTEXT_BYTES and model.fragments:
        return items
    out = dict(items)
    if "runtime/context" in out:
        out["runtime/context"] = model.runtime_context_bytes
    if not model.fragments and "runtime/fragmentation" in out:
        out["runtime/fragmentation"] = 0.0 * out["runtime/fragmentation"]
    return out


# -- dataflow layer floor ----------------------------------------------------------------------
# A token crossing one layer of a compiled dataflow pipeline takes longer than the roofline of
# that layer's arithmetic and SRAM traffic: the schedule synchronises the chips (or wafer
# regions) holding the layer, broadcasts the activation and reduces partial sums over the fabric,
# and none of those per-hop latencies is published (Abts et al. ISCA 2022 give only a "< 3 us"
# system bound; Cerebras publishes no fabric latency). One floor per machine, seconds per layer
# per forward pass, is fitted on the machine's first published per-user figure and scored on the
# others (fitters/fit_classes.py; cost/data/class_calibration.yaml).


@dataclass(frozen=True)
class LayerFloor:
    seconds: float
    source: str


def _dataflow_table() -> dict[str, dict[str, Any]]:
    """The ``dataflow`` section of cost/data/class_calibration.yaml."""
    return dict(class_calibration().get("dataflow") or {})


def layer_floor(acc: Accelerator) -> LayerFloor:
    """The fitted per-layer floor of ``acc``'s dataflow pipeline; else the floor of the same
    vendor's calibrated machine (the same fabric and compiler lineage, e.g. WSE-2 from WSE-3),
    said to be borrowed; else 0 with why."""
    table = _dataflow_table()
    row = table.get(acc.id)
    if row:
        return LayerFloor(float(row["layer_floor_s"]), str(row["source"]))
    vendor = acc.vendor.split()[0].lower()
    for other, r in sorted(table.items()):
        if str(r.get("vendor", "")).split(" ")[0].lower() == vendor:
            return LayerFloor(float(r["layer_floor_s"]),
                              f"uncalibrated: no published figure of {acc.id}; borrowed from "
                              f"{other}, the same vendor's machine ({r['source']})")
    return LayerFloor(0.0, f"no published figure of {acc.id} to fit its per-layer floor: "
                           "uncalibrated, so the latency is a lower bound")
