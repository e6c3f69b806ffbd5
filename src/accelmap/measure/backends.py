"""The one measurement backend: PyTorch on any device it sees, NumPy on the CPU without PyTorch.

A backend allocates operands on its device and hands back closures that launch one kernel; the
timing itself (warm-up, synchronisation, repetitions) is :mod:`accelmap.measure.timing`'s. It
also describes its device as an :class:`~accelmap.measure.environment.Environment`, the record
stored with every measurement. Every kind goes through it: the matmul sweep and bandwidth on
either backend; per-op overhead, collectives (in each torchrun process), peak memory and the
local model runs on :class:`~accelmap.measure.torch_backend.TorchBackend`.

PyTorch is imported lazily, inside :func:`import_torch`, so ``import accelmap`` never needs it
(it is the optional ``measure`` extra); where it is missing, one line says how to install it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

from accelmap.errors import InputError
from accelmap.measure.kernel import MEASURE_EXTRA as MEASURE_EXTRA
from accelmap.measure.kernel import Kernel as Kernel
from accelmap.units import DType

if TYPE_CHECKING:
    from accelmap.measure.environment import Environment
    from accelmap.measure.torch_backend import TorchBackend

STREAM_KINDS = ("copy", "read", "write")
TORCH_HINT = f"install it with: {MEASURE_EXTRA} (any recent PyTorch build works)"
NO_TORCH = "ACCELMAP_NO_TORCH"  # set: behave as if PyTorch were not installed (tests, NumPy runs)


class Backend(Protocol):
    name: str  # "torch" or "numpy"
    device: str  # "cpu", "cuda:0", "mps" ...

    def environment(self, accelerator_id: str | None = None) -> Environment: ...
    def free_memory(self) -> float | None: ...  # bytes the operands may come from
    def compute_units(self) -> int | None: ...  # SMs/CUs/threads as the runtime sees them
    def cache_bytes(self) -> float | None: ...  # last-level cache, when the runtime knows it
    def synchronize(self) -> None: ...
    def matmul(self, m: int, n: int, k: int, dtype: DType) -> Kernel: ...
    def streams(self, nbytes: int) -> dict[str, tuple[Kernel, float]]: ...  # kind: kernel, B
    def flusher(self, nbytes: int) -> Kernel: ...  # writes nbytes: evicts the caches
    def release(self) -> None: ...  # give memory of dropped kernels back to the device


def torch_missing(what: str) -> InputError:
    return InputError(f"{what} needs PyTorch, which is not installed; {TORCH_HINT}")


def import_torch(what: str = "this measurement") -> Any:
    """The torch module, or a one-line InputError naming the ``measure`` extra."""
    if os.environ.get(NO_TORCH):
        raise torch_missing(what)
    try:
        import torch
    except ImportError:
        raise torch_missing(what) from None
    except OSError as e:  # installed, but a shared library it links is missing or broken
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"{what} needs PyTorch, which is installed but does not load "
                         f"({first}); reinstall it: {MEASURE_EXTRA}") from None
    return torch


def torch_backend(device: str, what: str = "this measurement") -> TorchBackend:
    """PyTorch on ``device``, for the measurements only PyTorch makes (per-op overhead,
    collectives, peak memory, local model runs)."""
    from accelmap.measure.torch_backend import TorchBackend

    return TorchBackend(import_torch(what), device)


def default_device(what: str = "this measurement") -> str:
    """'cuda' where PyTorch sees a GPU, else 'cpu'."""
    return "cuda" if import_torch(what).cuda.is_available() else "cpu"


def get_backend(device: str = "cpu", backend: str | None = None) -> Backend:
    """``backend`` "torch", "numpy" or None (torch when installed, else NumPy on the CPU)."""
    from accelmap.measure.numpy_backend import NumpyBackend

    if backend not in (None, "torch", "numpy"):
        raise InputError(f"unknown backend {backend!r}: use torch or numpy")
    is_cpu = device.split(":")[0] == "cpu"
    if backend == "numpy":
        if not is_cpu:
            raise InputError(f"the NumPy backend runs on the CPU only; for {device!r} use "
                             f"--backend torch ({MEASURE_EXTRA})")
        return NumpyBackend()
    from accelmap.measure.torch_backend import TorchBackend

    try:
        torch = import_torch(f"measuring on {device!r} with torch")
    except InputError as e:
        if backend is None and is_cpu:
            return NumpyBackend()
        raise InputError(str(e) + ("" if is_cpu else "; or use --device cpu, which falls back "
                                   "to NumPy")) from None
    return TorchBackend(torch, device)
