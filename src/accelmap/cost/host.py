"""The host-bound regime: what the CPU thread that drives a GPU costs per forward or backward
pass, and when it, not the device, sets the time.

Physics (one pass = a prefill, a decode step, or a training forward/backward):

- **Eager stacks** (PyTorch eager, Hugging Face eager modules, the eager parts of Megatron and
  FSDP): the Python thread dispatches every aten op (Python, pybind11, autograd, the ATen
  dispatcher, the backend's algorithm choice, ``cudaLaunchKernel``: "~5-25 us of CPU-side work
  per op", jiahuanglin.xyz gpu_kernel_serving lesson 18) before its kernel can start. Host
  seconds of a pass = dispatched ops x seconds per dispatch. The op count per graph operator is
  the eager implementation's (``cost/eager_cpu.py``: ``Dispatches``, counted with a
  ``TorchDispatchMode``); the seconds per dispatch are the device's own (``accelmap measure
  overhead``: the profile's ``dispatch_s``, a micro transformer's decode step over its dispatch
  count, forward; its backward and optimizer step, backward) or, unmeasured, the public figure
  of the GPU's generation below.
- **Graph-captured stacks** (vLLM, SGLang, TensorRT-LLM, torch.compile "reduce-overhead",
  static caches): one ``cudaGraphLaunch`` per step, and the device walks the captured kernels
  with a per-node cost (``REPLAY_S_PER_KERNEL``); no Python per op.
- **Overlap**: kernels are queued (the launch queue is asynchronous: CUDA C++ Programming Guide,
  "Asynchronous concurrent execution"), so the host runs ahead of the device while the device
  is busy and the device idles while the host is behind. A pass takes max(host, device) plus its
  synchronisations (the local run synchronises once per timed step: ``SYNC_S``). It is
  **host-bound** when the host term is the larger; the estimate says so, and why (dispatches x
  seconds per dispatch against the device's roofline time).

On a CPU the host *is* the device: eager-cpu pays the dispatches in series (``cost/roofline.py``
``host_dispatch_s``), not overlapped; nothing here applies to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelmap.cost.framework import FrameworkProfile
    from accelmap.cost.roofline import Device, OpTime


class Launch(StrEnum):
    """How a stack's host puts kernels on the device."""

    EAGER = "eager"  # one dispatch (and launch) per aten op, from Python
    GRAPH = "graph-replay"  # one CUDA-graph launch per step; the device replays the nodes
    IN_SERIES = "in-series"  # eager on a CPU: the host's dispatch is the device's time


# Seconds per dispatched aten op in eager PyTorch on a GPU's host, used where no profile has
# `measure overhead`'s figure. Hopper hosts: 9.07 us per dispatched op in a decode step (forward)
# and 18.8 us per op of backward + fused AdamW, measured by `accelmap measure overhead` on one
# H200 SXM with PyTorch 2.11 (data/gpu/h200-sxm-2026-11/measure_log.txt); within the
# "~5-25 us of CPU-side work per op" of jiahuanglin.xyz (gpu_kernel_serving, lesson 18).
DEFAULT_DISPATCH_S = {"forward": 9.07e-6, "backward": 18.81e-6}
DISPATCH_SOURCE = ("eager dispatch 9.07 us forward / 18.8 us backward per aten op (measure "
                   "overhead on an H200 host, data/gpu; ~5-25 us per op, "
                   "jiahuanglin.xyz lesson 18)")
# Device-side cost per kernel node of a replayed CUDA graph: "~1-2 us" of launch latency per
# kernel is what graphs remove from the host and leave on the device; cloudai.pt measured a
# Llama-3.1-8B decode step on an H100 SXM at 8.4 ms eager and 5.1 ms as one CUDA graph
# (cloudai.pt/tag/cuda-graphs). Used only when a profile has no measured replay figure.
REPLAY_S_PER_KERNEL = 1.0e-6
REPLAY_SOURCE = "~1 us per replayed kernel node (public; no measurement in the profile)"
# One cudaStreamSynchronize / cudaDeviceSynchronize round trip at the end of a timed step:
# a few microseconds on current drivers (the same order as a launch, lesson 18 above).
SYNC_S = 10e-6


@dataclass(frozen=True)
class HostPass:
    """Host and device time of one pass and how they combine."""

    device_s: float  # the device's roofline time of the pass (kernels back to back)
    host_s: float  # what the host spends issuing it
    dispatches: float  # aten ops dispatched (eager) or kernel nodes replayed (graph)
    per_dispatch_s: float
    launch: Launch
    sync_s: float = 0.0

    @property
    def total_s(self) -> float:
        return max(self.device_s, self.host_s) + self.sync_s

    @property
    def host_bound(self) -> bool:
        return self.host_s > self.device_s

    def sentence(self, what: str) -> str:
        """'decode step host-bound: 1406 dispatched ops x 9.07 us = 12.8 ms > device 1.6 ms'."""
        verb = "dispatched ops" if self.launch is Launch.EAGER else "replayed kernels"
        state = "host-bound" if self.host_bound else "device-bound"
        rel = ">" if self.host_bound else "<="
        return (f"{what} {state}: {self.dispatches:,.0f} {verb} x "
                f"{self.per_dispatch_s * 1e6:.2f} us = {self.host_s * 1e3:.3g} ms {rel} "
                f"device {self.device_s * 1e3:.3g} ms")


def dispatch_seconds(dev: Device, backward: bool) -> tuple[float, str]:
    """Seconds per dispatched op of this pass: the profile's measured figure, else the default."""
    phase = "backward" if backward else "forward"
    measured = dev.profile.dispatch_s if dev.profile is not None else {}
    if measured.get(phase):
        return float(measured[phase]), f"measured (profile {dev.profile.name})"  # type: ignore[union-attr]
    return DEFAULT_DISPATCH_S[phase], DISPATCH_SOURCE


def replay_seconds(dev: Device) -> tuple[float, str]:
    """Seconds per replayed CUDA-graph kernel: measured by `measure overhead` on a GPU (the
    profile's ``dispatch_s['graph-replay']``), else the public figure above."""
    measured = dev.profile.dispatch_s if dev.profile is not None else {}
    if measured.get("graph-replay"):
        return float(measured["graph-replay"]), "measured (measure overhead, CUDA graph replay)"
    return REPLAY_S_PER_KERNEL, REPLAY_SOURCE


def dispatch_count(times: list[OpTime] | tuple[OpTime, ...], fw: FrameworkProfile,
                   backward: bool) -> float:
    """Aten ops the eager implementation dispatches for these graph ops (each op x its count)."""
    assert fw.dispatches is not None
    return float(sum(fw.dispatches.of(t.op.name, backward, serving=fw.serving)
                     * float(t.op.count) for t in times))


def host_pass(times: list[OpTime] | tuple[OpTime, ...], dev: Device, fw: FrameworkProfile,
              backward: bool = False, sync_s: float = 0.0) -> HostPass | None:
    """The pass's host/device balance under ``fw``; None where the stack has no host term of
    this kind (fused compiled programs, or a CPU, whose dispatch is already in series)."""
    if fw.launch is not Launch.EAGER or fw.dispatches is None:
        return None
    device = float(sum(t.total_s for t in times))  # as roofline.total_time (roofline imports host)
    n = dispatch_count(times, fw, backward)
    each, _ = dispatch_seconds(dev, backward)
    return HostPass(device, n * each, n, each, Launch.EAGER, sync_s)


def stretch(parts: dict[str, Any], hp: HostPass | None) -> dict[str, Any]:
    """Scale the parts of a pass so that they add up to the pass's max(host, device): where the
    host is behind, every part of the pass waits for it in proportion to its device time."""
    if hp is None or not hp.host_bound or hp.device_s <= 0:
        return parts
    k = hp.host_s / hp.device_s
    return {name: v * k for name, v in parts.items()}
