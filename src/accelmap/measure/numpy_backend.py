"""NumPy on the CPU: the backend that needs no PyTorch (BLAS GEMMs in fp32/fp64, single-threaded
STREAM kernels).

Bandwidth kernels move float32 buffers and count bytes the STREAM way: ``copy`` reads and writes
each byte once (2 x buffer), ``read`` reduces a buffer (1 x), ``write`` fills one (1 x; on CPUs
the hardware may also read the line for ownership, which is not counted). The PyTorch backend
counts the same way.
"""

from __future__ import annotations

import gc
from typing import Any, ClassVar

import numpy as np

from accelmap.errors import InputError
from accelmap.measure.environment import Environment, collect, host_cpu
from accelmap.measure.kernel import MEASURE_EXTRA, Kernel
from accelmap.units import DType


class NumpyBackend:
    """NumPy on the CPU: BLAS GEMM for fp32/fp64; single-threaded copy/read/write."""

    name = "numpy"
    device = "cpu"
    DTYPES: ClassVar[dict[DType, Any]] = {DType.FP32: np.float32, DType.FP64: np.float64}

    def environment(self, accelerator_id: str | None = None) -> Environment:
        """The host CPU; the BLAS library picks its own thread count (``threads`` None, the
        OMP/MKL/OpenBLAS variables in ``settings`` when set)."""
        cpu = host_cpu()
        return collect(self.name, self.device, cpu.model, accelerator_id=accelerator_id,
                       memory_bytes=cpu.memory_bytes, compute_units=self.compute_units())

    def free_memory(self) -> float | None:
        from accelmap.hardware.local import read_cpu_facts

        return read_cpu_facts().available_bytes

    def compute_units(self) -> int | None:
        return host_cpu().cores

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
