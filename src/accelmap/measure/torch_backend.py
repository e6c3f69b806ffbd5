"""PyTorch on ``torch.device(device)``: cpu, cuda (and ROCm, which PyTorch exposes as cuda), mps,
xpu, any with a ``torch.<type>.synchronize``.

Besides the sweep's kernels it is what the PyTorch-only measurements run on: ``torch``, ``dev``
and :meth:`TorchBackend.synchronize` serve per-op overhead, collectives, peak memory and the
local model runs, and :meth:`TorchBackend.environment` names the device, library, driver and
settings the same way for all of them.
"""

from __future__ import annotations

import gc
import subprocess
from functools import lru_cache
from typing import Any

from accelmap.errors import InputError
from accelmap.measure.environment import Environment, collect, host_cpu
from accelmap.measure.kernel import Kernel
from accelmap.units import DType

_DEVICE_ERRORS = (RuntimeError, AssertionError, ValueError)  # what torch raises for a bad device


class TorchBackend:
    name = "torch"

    def __init__(self, torch: Any, device: str) -> None:
        self.torch = torch
        try:
            dev = torch.device(device)
        except _DEVICE_ERRORS as e:
            raise InputError(f"torch cannot use device {device!r} ({_first(e)}); try cpu, "
                             "cuda, cuda:1, mps or xpu") from None
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
            try:
                torch.empty(1, device=dev)  # cuda:7 on a 1-GPU machine fails here, not later
            except _DEVICE_ERRORS as e:
                raise InputError(f"torch cannot use device {device!r} ({_first(e)})") from None
        self.dev = dev
        self.mod = mod
        self.device = str(dev)
        self._tf32: bool | None = None

    # --- description ---------------------------------------------------------------------
    def _props(self) -> Any:
        get = getattr(self.mod, "get_device_properties", None)
        return get(self.dev) if get is not None and self.dev.type != "cpu" else None

    def device_name(self) -> str:
        """The runtime's name of the device ('NVIDIA H100 80GB HBM3'); the CPU model on CPUs."""
        if self.dev.type == "cpu":
            return host_cpu().model
        get_name = getattr(self.mod, "get_device_name", None)
        return str(get_name(self.dev)) if get_name is not None else ""

    def environment(self, accelerator_id: str | None = None) -> Environment:
        t = self.torch
        cuda = self.dev.type == "cuda"
        hip = str(getattr(t.version, "hip", "") or "") if cuda else ""
        versions = {"torch": str(t.__version__)}
        settings = {"float32_matmul_precision": str(t.get_float32_matmul_precision())}
        if cuda:
            versions.update(cuda=str(t.version.cuda or ""), hip=hip, nccl=_nccl(t),
                            driver="" if hip else _nvidia_driver())
            settings.update(tf32_matmul=str(t.backends.cuda.matmul.allow_tf32).lower(),
                            tf32_cudnn=str(t.backends.cudnn.allow_tf32).lower())
        memory = (host_cpu().memory_bytes if self.dev.type == "cpu"
                  else getattr(self._props(), "total_memory", None))
        return collect(self.name, self.device, self.device_name(),
                       accelerator_id=accelerator_id, memory_bytes=memory,
                       compute_units=self.compute_units(), threads=int(t.get_num_threads()),
                       versions=versions, settings=settings)

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
            raise InputError(f"torch {t.__version__} cannot run a {dtype.value} GEMM on "
                             f"{self.device}: {_first(e)}") from None
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


def _first(e: BaseException) -> str:
    """The first line of an error, cut to 120 characters (torch lists every device type)."""
    line = str(e).splitlines()[0] if str(e) else type(e).__name__
    return line if len(line) <= 120 else line[:119] + "…"


def _nccl(torch: Any) -> str:
    try:
        v = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return ""
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


@lru_cache(maxsize=1)
def _nvidia_driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout else ""
    except (OSError, subprocess.SubprocessError):
        return ""
