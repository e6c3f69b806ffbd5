"""The environment record stored with every measurement: which device it ran on (and which
catalog entry it is compared with), which software, which host, and the settings that change
what a kernel achieves.

Both backends fill the same record (``numpy_backend.py``, ``torch_backend.py``) through
:func:`collect`, which adds what they share (Python and NumPy versions, host name, OS, CPU model,
thread and device-visibility variables). In the store the record is three columns: ``device``
(its :attr:`~Environment.label`), ``accelerator_id`` and ``environment`` (the rest, as JSON).
Rows written before the record existed hold a flat dict of versions there;
:func:`read_environment` reads both.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from accelmap.hardware.local import CpuFacts

# Environment variables that change what a measurement sees (BLAS/OpenMP thread pools, which
# devices the runtime shows); stored in ``settings`` when they are set.
SETTING_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
# Keys of the flat dicts stored before this record (by the old backends.py and torch_env.py)
# that name a library or driver version; the others were backend, host, os/platform, cpu, gpu
# and threads.
LEGACY_VERSION_KEYS = ("python", "numpy", "torch", "cuda", "hip", "nccl", "driver")
# torch.distributed backends: what the old collectives rows stored under "backend"
DISTRIBUTED_BACKENDS = ("nccl", "gloo", "mpi", "ucc", "xccl")


@dataclass(frozen=True)
class Environment:
    """Where and with what a measurement ran; the same fields for every kind and backend."""

    backend: str  # what ran the kernels: "torch" or "numpy"
    device: str  # the runtime's device: "cpu", "cuda:0", "mps", "xpu:0"
    device_name: str = ""  # "NVIDIA H100 80GB HBM3", "Intel(R) Xeon(R) Platinum 8480+"
    accelerator_id: str | None = None  # catalog entry the measurements are compared with
    memory_bytes: float | None = None  # device memory as the runtime reports it (total)
    compute_units: int | None = None  # SMs / CUs / CPU cores or threads the runtime reports
    threads: int | None = None  # host threads the backend computes with (None: its default)
    host: str = ""  # host name
    os: str = ""  # platform.platform()
    cpu: str = ""  # the host's CPU model
    versions: dict[str, str] = field(default_factory=dict)  # python, numpy, torch, cuda, driver
    settings: dict[str, str] = field(default_factory=dict)  # tf32, thread variables, distributed

    @property
    def label(self) -> str:
        """'cuda:0 NVIDIA H100 80GB HBM3', 'cpu Intel(R) Xeon(R) ...', 'mps': the store's
        ``device`` column and every result's ``device``."""
        if self.device_name and self.device_name != self.device:
            return f"{self.device} {self.device_name}"
        return self.device

    @property
    def device_type(self) -> str:
        """'cuda' of 'cuda:0'."""
        return self.device.split(":", 1)[0]

    def compared_with(self, accelerator_id: str | None) -> Environment:
        return replace(self, accelerator_id=accelerator_id)

    def with_settings(self, **extra: str) -> Environment:
        return replace(self, settings={**self.settings, **extra})

    def facts(self) -> dict[str, str]:
        """Software, host and settings as one flat name -> value dict of what is known (the
        device and catalog entry are left to the caller's headline)."""
        out = {"backend": self.backend, **self.versions,
               "threads": str(self.threads) if self.threads else "",
               "host": self.host, "os": self.os, "cpu": self.cpu, **self.settings}
        return {k: v for k, v in out.items() if v}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Environment:
        """The record from :meth:`to_dict` (unknown keys are ignored)."""
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        kw["versions"] = {str(k): str(v) for k, v in (data.get("versions") or {}).items()}
        kw["settings"] = {str(k): str(v) for k, v in (data.get("settings") or {}).items()}
        return cls(**kw)


@lru_cache(maxsize=1)
def host_cpu() -> CpuFacts:
    """The host CPU as the OS describes it, read once per process. Its model, cores and total
    memory do not change; ``available_bytes`` is a snapshot (``read_cpu_facts()`` reads anew)."""
    from accelmap.hardware.local import read_cpu_facts

    return read_cpu_facts()


def collect(backend: str, device: str, device_name: str, *, accelerator_id: str | None = None,
            memory_bytes: float | None = None, compute_units: int | None = None,
            threads: int | None = None, versions: Mapping[str, str] | None = None,
            settings: Mapping[str, str] | None = None) -> Environment:
    """The record of a backend's device on this host: what the backend knows, plus the Python
    and NumPy versions, host name, OS, CPU model and the ``SETTING_VARS`` that are set."""
    return Environment(
        backend=backend, device=device, device_name=device_name, accelerator_id=accelerator_id,
        memory_bytes=float(memory_bytes) if memory_bytes else None,
        compute_units=int(compute_units) if compute_units else None, threads=threads,
        host=platform.node(), os=platform.platform(), cpu=host_cpu().model,
        versions={"python": platform.python_version(), "numpy": np.__version__,
                  **{k: v for k, v in (versions or {}).items() if v}},
        settings={**{k: v for k in SETTING_VARS if (v := os.environ.get(k))},
                  **{k: v for k, v in (settings or {}).items() if v}})


def read_environment(data: Mapping[str, Any], label: str = "",
                     accelerator_id: str | None = None) -> Environment:
    """The record of one stored row: its ``environment`` JSON, ``device`` column (``label``) and
    ``accelerator_id`` column (the catalog entry the row is filed under, which wins).

    Rows written before the record hold a flat dict instead, e.g. ``{"backend": "numpy",
    "python": ..., "numpy": ..., "os": ..., "host": ...}``, ``{"torch": ..., "platform": ...,
    "backend": "gloo", "gpu": ..., "cpu": ...}``: versions go to ``versions``, a distributed
    backend to ``settings["distributed"]``, unknown keys to ``settings``; the device and its
    name come from the label."""
    if "versions" in data:
        return replace(Environment.from_dict(data), accelerator_id=accelerator_id)
    flat = {str(k): str(v) for k, v in data.items() if v is not None and v != ""}
    settings: dict[str, str] = {}
    backend = flat.pop("backend", "")
    if backend in DISTRIBUTED_BACKENDS:
        settings["distributed"], backend = backend, "torch"
    backend = backend or ("torch" if "torch" in flat else "numpy" if "numpy" in flat else "")
    device, _, name = label.partition(" ")
    gpu, threads = flat.pop("gpu", ""), flat.pop("threads", "")
    os_name = flat.pop("os", "") or flat.pop("platform", "")
    flat.pop("platform", None)
    host, cpu = flat.pop("host", ""), flat.pop("cpu", "")
    versions = {k: flat.pop(k) for k in LEGACY_VERSION_KEYS if k in flat}
    return Environment(
        backend=backend, device=device, device_name=name or gpu, accelerator_id=accelerator_id,
        threads=int(threads) if threads.isdigit() else None, host=host, os=os_name,
        cpu=cpu or (name if device == "cpu" else ""), versions=versions,
        settings={**settings, **flat})
