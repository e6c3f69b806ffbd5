"""Peak memory of one phase of a local run, above what was in use when the phase started.

- CUDA (and ROCm, which PyTorch exposes as cuda): ``torch.cuda.max_memory_allocated`` after
  ``reset_peak_memory_stats``: bytes of live tensors at the peak, without the CUDA context and
  without the caching allocator's reserve (what the estimate's tensor items count).
- CPU (Linux): the process's resident-set high-water mark, ``VmHWM`` in /proc/self/status, reset
  to the current RSS by writing 5 to /proc/self/clear_refs (proc(5)), minus the RSS at the start.
  PyTorch allocates CPU tensors with posix_memalign through the C library, which tracemalloc does
  not see, so RSS is the measure. To make RSS follow the live tensors, glibc's mmap threshold is
  pinned at 128 KiB while measuring (mallopt M_MMAP_THRESHOLD; by default it grows after large
  frees, freed tensors then stay in the heap and the high-water mark reads ~30 % above the live
  tensors of a tiny model), and freed heap is returned (malloc_trim) before each phase. Every
  large tensor then costs an mmap and fresh page faults, which doubles a CPU training step, so
  the local run measures memory in a separate, untimed pass before the timed one, and
  ``close()`` then sets the thresholds where glibc's dynamic rule ends up after large frees
  (mmap 32 MiB, trim 64 MiB; the dynamic rule itself stays off once pinned).
  Pages that were allocated but never touched do not count (PyTorch fills the tensors it makes).
- Elsewhere (macOS, Windows, other devices): no measurement (None), said in the row's notes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelmap.measure.torch_backend import TorchBackend

M_TRIM_THRESHOLD = -1  # glibc malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's initial default, pinned while measuring
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_libc: Any = None


def _glibc() -> Any:
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        try:
            _libc = ctypes.CDLL(name) if name else False
            if _libc and not hasattr(_libc, "mallopt"):
                _libc = False
        except OSError:
            _libc = False
    return _libc or None


def _status_kib(field: str) -> int | None:
    try:
        m = re.search(rf"^{field}:\s+(\d+)\s+kB", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(m.group(1)) if m else None


class PeakMemory:
    """``start()`` before a phase, ``peak()`` after it: bytes above the start, or None."""

    def __init__(self, be: TorchBackend) -> None:
        self.be = be
        self.cuda = be.dev.type == "cuda"
        self.base = 0
        self.pinned = False
        self.method = self._method()

    def _method(self) -> str | None:
        if self.cuda:
            return "torch.cuda.max_memory_allocated (live tensors; no context, no cache reserve)"
        if _status_kib("VmHWM") is not None and _CLEAR_REFS.exists():
            return "resident-set high-water mark (/proc/self/status VmHWM) above the phase start"
        return None

    def start(self) -> None:
        gc.collect()
        if self.cuda:
            cuda, dev = self.be.torch.cuda, self.be.dev
            self.be.synchronize()
            cuda.empty_cache()
            cuda.reset_peak_memory_stats(dev)
            self.base = int(cuda.memory_allocated(dev))
            return
        if self.method is None:
            return
        libc = _glibc()
        if libc is not None:
            libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
            self.pinned = True
            if hasattr(libc, "malloc_trim"):
                libc.malloc_trim(0)
        try:
            _CLEAR_REFS.write_text("5")
        except OSError:
            self.method = None
            return
        self.base = (_status_kib("VmRSS") or 0) * 1024

    def peak(self) -> int | None:
        if self.cuda:
            self.be.synchronize()
            return int(self.be.torch.cuda.max_memory_allocated(self.be.dev)) - self.base
        if self.method is None:
            return None
        hwm = _status_kib("VmHWM")
        return None if hwm is None else hwm * 1024 - self.base

    def close(self) -> None:
        """Let large allocations come from the heap again (fast reuse, no page faults)."""
        libc = _glibc()
        if self.pinned and libc is not None:
            libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)
            libc.mallopt(M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD_MAX)  # what the dynamic rule sets
        self.pinned = False
