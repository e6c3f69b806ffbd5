"""What the PyTorch-based measurements need to know about the machine: is torch there, which
device is this, which catalog accelerator it is, and the software versions to store.

torch is imported only inside the functions (it is the optional ``measure`` extra), so importing
this module costs nothing.
"""

from __future__ import annotations

import platform
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelmap.errors import InputError

if TYPE_CHECKING:
    from accelmap.catalog import Catalog
    from accelmap.hardware.schema import Accelerator

EXTRA_HINT = "install it with: pip install 'accelmap[measure]' (any recent PyTorch build works)"

# Words in a device name that never occur in catalog names (vendor, marketing, memory kind).
_NOISE = {"nvidia", "amd", "intel", "geforce", "tesla", "instinct", "hbm3", "hbm3e", "hbm2e",
          "hbm2", "gddr6", "gddr6x", "gddr7", "generation", "tm", "r", "graphics"}


def require_torch(what: str = "this measurement") -> Any:
    """The torch module, or an InputError naming the ``measure`` extra."""
    try:
        import torch
    except ImportError:
        raise InputError(f"{what} needs PyTorch, which is not installed; {EXTRA_HINT}") from None
    return torch


def default_device() -> str:
    torch = require_torch()
    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_model_name() -> str:
    """'Intel(R) Xeon(R) Processor' from /proc/cpuinfo, else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: str) -> str:
    """'cuda:0 NVIDIA H100 80GB HBM3' or 'cpu Intel(R) Xeon(R) ...' (the store's device field)."""
    torch = require_torch()
    dev = torch.device(device)
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return f"cuda:{index} {torch.cuda.get_device_name(index)}"
    if dev.type == "cpu":
        return f"cpu {cpu_model_name()}"
    return str(dev)


def _tokens(text: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9.]+", text.lower()) if w}


def match_gpu(name: str, memory_bytes: float, catalog: Catalog) -> Accelerator | None:
    """The catalog accelerator a device name means ('NVIDIA H100 80GB HBM3' as torch reports
    it), or None. Every model word of the name must be a whole word of the entry's id, name or
    aliases ('h200' is not 'gh200'); among several, a PCIe part only when the name says PCIe,
    then entries whose id has the words, then the closest memory size (H100 SXM5 80 GB vs H100
    NVL 94 GB)."""
    from accelmap.lookup import find

    words = [w for w in _tokens(name) - _NOISE if not re.fullmatch(r"\d+gb", w)]
    if not words:
        return None
    found = [a for a in catalog.accelerators.values()
             if set(words) <= set().union(*(_tokens(x) for x in (a.id, a.name, *a.aliases)))]
    found = found or find(" ".join(words), catalog.accelerators)
    if not found:
        return None
    pcie = "pcie" in name.lower()

    def rank(acc: Accelerator) -> tuple[bool, bool, float]:
        # the id itself names the part ('b200', not the alias 'b200-nvl72' of gb200)
        return (("pcie" in acc.id) != pcie, not set(words) <= _tokens(acc.id),
                abs(acc.memory_bytes - memory_bytes))

    return min(found, key=rank)


def gpu_catalog_id(device: str, catalog: Catalog) -> Accelerator | None:
    """:func:`match_gpu` for a CUDA/ROCm device that PyTorch sees."""
    torch = require_torch()
    dev = torch.device(device)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    return match_gpu(torch.cuda.get_device_name(index),
                     float(torch.cuda.get_device_properties(index).total_memory), catalog)


def environment(backend: str | None = None) -> dict[str, str]:
    """Versions and host, stored with every measurement."""
    torch = require_torch()
    env = {"torch": str(torch.__version__), "python": platform.python_version(),
           "host": socket.gethostname(), "platform": platform.platform()}
    if backend:
        env["backend"] = backend
    if torch.cuda.is_available():
        env["cuda"] = str(torch.version.cuda or torch.version.hip or "")
        try:
            nccl = torch.cuda.nccl.version()
            env["nccl"] = ".".join(str(v) for v in nccl) if isinstance(nccl, tuple) else str(nccl)
        except (AttributeError, RuntimeError):
            pass
        env["gpu"] = torch.cuda.get_device_name()
    env["cpu"] = cpu_model_name()
    return env
