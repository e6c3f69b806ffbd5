"""Timing backends: PyTorch on any device it sees, NumPy on the CPU without PyTorch.

A backend allocates operands on its device and hands back closures that launch one kernel; the
timing itself (warm-up, synchronisation, repetitions) is :mod:`accelmap.measure.timing`'s. PyTorch
is imported lazily, inside :func:`get_backend`, so ``import accelmap`` never needs it (it is the
optional ``measure`` extra).

Bandwidth kernels move float32 buffers and count bytes the STREAM way: ``copy`` reads and writes
each byte once (2 x buffer), ``read`` reduces a buffer (1 x), ``write`` fills one (1 x; on CPUs
the hardware may also read the line for ownership, which is not counted).
"""

from __future__ import annotations

import gc
import os
import platform
import subprocess
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import numpy as np

from accelmap.errors import InputError
from accelmap.units import DType

Kernel = Callable[[], object]
STREAM_KINDS = ("copy", "read", "write")
MEASURE_EXTRA = "pip install 'accelmap[measure]'"


class Backend(Protocol):
    name: str  # "torch" or "numpy"
    device: str  # "cpu", "cuda:0", "mps" ...

    def describe(self) -> str: ...  # "cuda:0 NVIDIA H100 80GB HBM3"
    def environment(self) -> dict[str, str]: ...  # library, driver and host versions
    def free_memory(self) -> float | None: ...  # bytes the operands may come from
    def compute_units(self) -> int | None: ...  # SMs/CUs/threads as the runtime sees them
    def cache_bytes(self) -> float | None: ...  # last-level cache, when the runtime knows it
    def synchronize(self) -> None: ...
    def matmul(self, m: int, n: int, k: int, dtype: DType) -> Kernel: ...
    def streams(self, nbytes: int) -> dict[str, tuple[Kernel, float]]: ...  # kind: kernel, B
    def flusher(self, nbytes: int) -> Kernel: ...  # writes nbytes: evicts the caches
    def release(self) -> None: ...  # give memory of dropped kernels back to the device


def _host_env() -> dict[str, str]:
    return {"python": platform.python_version(), "numpy": np.__version__,
            "os": platform.platform(), "host": platform.node()}


def _cpu_label() -> str:
    from accelmap.hardware.local import read_cpu_facts

    return f"cpu {read_cpu_facts().model}"


class NumpyBackend:
    """NumPy on the CPU: BLAS GEMM for fp32/fp64; single-threaded copy/read/write."""

    name = "numpy"
    device = "cpu"
    DTYPES: ClassVar[dict[DType, Any]] = {DType.FP32: np.float32, DType.FP64: np.float64}

    def describe(self) -> str:
        return _cpu_label()

    def environment(self) -> dict[str, str]:
        return {"backend": "numpy", **_host_env()}

    def free_memory(self) -> float | None:
        from accelmap.hardware.local import read_cpu_facts

        return read_cpu_facts().available_bytes

    def compute_units(self) -> int | None:
        from accelmap.hardware.local import read_cpu_facts

        return read_cpu_facts().cores

    def cache_bytes(self) -> float | None:
        from accelmap.hardware.local import llc_bytes

        return llc_bytes()

    def synchronize(self) -> None:
        """NumPy calls return when the work is done."""

    def matmul(self, m: int, n: int, k: int, dtype: DType) -> Kernel:
        if dtype not in self.DTYPES:
            raise InputError(f"the NumPy backend measures {', '.join(d.value for d in self.DTYPES)}"
                             f" only; for {dtype.value} install PyTorch ({MEASURE_EXTRA}) and "
                             "use --backend torch")
        rng = np.random.default_rng(0)
        t = self.DTYPES[dtype]
        a = rng.random((m, k), dtype=t)
        b = rng.random((k, n), dtype=t)
        out = np.empty((m, n), dtype=t)
        return lambda: np.matmul(a, b, out=out)

    def streams(self, nbytes: int) -> dict[str, tuple[Kernel, float]]:
        src = np.ones(nbytes // 4, dtype=np.float32)
        dst = np.ones_like(src)
        size = float(src.nbytes)
        return {"copy": ((lambda: np.copyto(dst, src)), 2.0 * size),
                "read": ((lambda: np.add.reduce(src)), size),
                "write": ((lambda: dst.fill(2.0)), size)}

    def flusher(self, nbytes: int) -> Kernel:
        buf = np.ones(nbytes, dtype=np.uint8)
        return lambda: buf.fill(0)

    def release(self) -> None:
        gc.collect()


class TorchBackend:
    """PyTorch on ``torch.device(device)``: cpu, cuda (and ROCm), mps, xpu, any with a
    ``torch.<type>.synchronize``."""

    name = "torch"

    def __init__(self, torch: Any, device: str) -> None:
        self.torch = torch
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError) as e:
            raise InputError(f"torch cannot use device {device!r} ({e}); try cpu, cuda, "
                             "cuda:1, mps or xpu") from None
        mod = getattr(torch, dev.type, None)
        if dev.type != "cpu":
            avail = getattr(mod, "is_available", None)
            if dev.type == "mps":
                avail = torch.backends.mps.is_available
            if avail is not None and not avail():
                raise InputError(f"torch {torch.__version__} sees no {dev.type} device; check "
                                 "the driver and that this torch build supports it, or use "
                                 "--device cpu")
            if dev.index is None and mod is not None and hasattr(mod, "current_device") \
                    and dev.type != "mps":
                dev = torch.device(dev.type, mod.current_device())
        self.dev = dev
        self.mod = mod
        self.device = str(dev)
        self._tf32: bool | None = None

    # --- description ---------------------------------------------------------------------
    def _props(self) -> Any:
        get = getattr(self.mod, "get_device_properties", None)
        return get(self.dev) if get is not None and self.dev.type != "cpu" else None

    def describe(self) -> str:
        if self.dev.type == "cpu":
            return _cpu_label()
        get_name = getattr(self.mod, "get_device_name", None)
        name = get_name(self.dev) if get_name else self.dev.type
        return f"{self.device} {name}"

    def environment(self) -> dict[str, str]:
        t = self.torch
        env = {"backend": "torch", "torch": t.__version__, **_host_env(),
               "threads": str(t.get_num_threads())}
        if self.dev.type == "cuda":
            env["cuda"] = str(t.version.cuda or "")
            env["hip"] = str(getattr(t.version, "hip", "") or "")
            env["driver"] = _nvidia_driver()
        return {k: v for k, v in env.items() if v}

    def free_memory(self) -> float | None:
        if self.dev.type == "cpu":
            from accelmap.hardware.local import read_cpu_facts

            return read_cpu_facts().available_bytes
        info = getattr(self.mod, "mem_get_info", None)
        try:
            return float(info(self.dev)[0]) if info else None
        except RuntimeError:
            return None

    def compute_units(self) -> int | None:
        if self.dev.type == "cpu":
            return int(self.torch.get_num_threads())
        props = self._props()
        count = getattr(props, "multi_processor_count", None) or getattr(
            props, "gpu_subslice_count", None)
        return int(count) if count else None

    def cache_bytes(self) -> float | None:
        if self.dev.type == "cpu":
            from accelmap.hardware.local import llc_bytes

            return llc_bytes()
        l2 = getattr(self._props(), "L2_cache_size", None)
        return float(l2) if l2 else None

    # --- kernels ---------------------------------------------------------------------------
    def synchronize(self) -> None:
        if self.dev.type == "cpu":
            return
        sync = getattr(self.mod, "synchronize", None)
        if sync is None:
            raise InputError(f"torch has no synchronize() for {self.dev.type}: timings would "
                             "measure launches, not kernels")
        if self.dev.type == "mps":
            sync()
        else:
            sync(self.dev)

    def _uniform(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self.torch.empty(shape, dtype=dtype, device=self.dev).uniform_(-1.0, 1.0)

    def matmul(self, m: int, n: int, k: int, dtype: DType) -> Kernel:
        t = self.torch
        plain = {DType.FP64: t.float64, DType.FP32: t.float32, DType.TF32: t.float32,
                 DType.BF16: t.bfloat16, DType.FP16: t.float16}
        if dtype in plain:
            if dtype == DType.TF32 and self.dev.type != "cuda":
                raise InputError("tf32 is a CUDA tensor-core mode; use fp32 on this device")
            if self.dev.type == "cuda":  # fp32 measures true fp32, tf32 the tensor-core path
                self._tf32 = t.backends.cuda.matmul.allow_tf32
                t.backends.cuda.matmul.allow_tf32 = dtype == DType.TF32
            a = self._uniform((m, k), plain[dtype])
            b = self._uniform((k, n), plain[dtype])
            out = t.empty((m, n), dtype=plain[dtype], device=self.dev)
            fn: Kernel = lambda: t.matmul(a, b, out=out)  # noqa: E731
        elif dtype == DType.INT8:
            a8 = t.randint(-8, 8, (m, k), dtype=t.int8, device=self.dev)
            b8 = t.randint(-8, 8, (k, n), dtype=t.int8, device=self.dev)
            fn = lambda: t._int_mm(a8, b8)  # noqa: E731 - int8 x int8 -> int32 GEMM
        elif dtype == DType.FP8 and hasattr(t, "float8_e4m3fn"):
            f8 = t.float8_e4m3fn
            a = self._uniform((m, k), t.bfloat16).to(f8)
            b = self._uniform((n, k), t.bfloat16).to(f8).t()  # _scaled_mm wants B column-major
            one = t.ones((), dtype=t.float32, device=self.dev)
            fn = lambda: t._scaled_mm(a, b, scale_a=one, scale_b=one,  # noqa: E731
                                      out_dtype=t.bfloat16)
        else:
            raise InputError(f"the torch backend has no {dtype.value} GEMM; measure fp64, fp32, "
                             "tf32, bf16, fp16, fp8 or int8")
        try:
            fn()
            self.synchronize()
        except (RuntimeError, TypeError, NotImplementedError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise InputError(f"torch {t.__version__} cannot run a {dtype.value} GEMM on "
                             f"{self.device}: {first}") from None
        return fn

    def streams(self, nbytes: int) -> dict[str, tuple[Kernel, float]]:
        t = self.torch
        src = t.ones(nbytes // 4, dtype=t.float32, device=self.dev)
        dst = t.ones_like(src)
        size = float(src.numel() * 4)
        return {"copy": ((lambda: dst.copy_(src)), 2.0 * size),
                "read": ((lambda: t.sum(src)), size),
                "write": ((lambda: dst.fill_(2.0)), size)}

    def flusher(self, nbytes: int) -> Kernel:
        buf = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.dev)
        return buf.zero_

    def release(self) -> None:
        gc.collect()
        if self._tf32 is not None:
            self.torch.backends.cuda.matmul.allow_tf32 = self._tf32
            self._tf32 = None
        empty = getattr(self.mod, "empty_cache", None)
        if empty is not None and self.dev.type != "cpu":
            empty()


def _nvidia_driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def get_backend(device: str = "cpu", backend: str | None = None) -> Backend:
    """``backend`` "torch", "numpy" or None (torch when installed, else NumPy on the CPU)."""
    if backend not in (None, "torch", "numpy"):
        raise InputError(f"unknown backend {backend!r}: use torch or numpy")
    is_cpu = device.split(":")[0] == "cpu"
    if backend == "numpy":
        if not is_cpu:
            raise InputError(f"the NumPy backend runs on the CPU only; for {device!r} use "
                             f"--backend torch ({MEASURE_EXTRA})")
        return NumpyBackend()
    torch = None if os.environ.get("ACCELMAP_NO_TORCH") else _import_torch()
    if torch is None:
        if is_cpu and backend is None:
            return NumpyBackend()
        raise InputError(f"measuring on {device!r} with torch needs PyTorch: {MEASURE_EXTRA} "
                         "(or use --device cpu, which falls back to NumPy)")
    return TorchBackend(torch, device)
