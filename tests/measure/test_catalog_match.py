"""Which catalog entry a measured device is: GPU names as the runtime reports them, CPU model
names (and a VM slice of one), --hw, and the record's device in match_accelerator."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accelmap.catalog import Catalog
from accelmap.errors import NotFoundError
from accelmap.hardware.local import local_cpu
from accelmap.measure.catalog_match import match_accelerator, match_cpu, match_gpu
from accelmap.measure.environment import Environment, host_cpu


@pytest.mark.parametrize(("name", "gib", "expected"), [
    ("NVIDIA H100 80GB HBM3", 79.19, "h100-sxm5-80gb"),
    ("NVIDIA H100 PCIe", 79.6, "h100-pcie-80gb"),
    ("NVIDIA H100 NVL", 93.1, "h100-nvl"), ("NVIDIA H200", 139.8, "h200-sxm"),
    ("NVIDIA A100-SXM4-40GB", 39.4, "a100-sxm4-40gb"), ("NVIDIA A10", 22.0, "a10"),
    ("NVIDIA B200", 178.0, "b200"), ("AMD Instinct MI300X", 191.5, "mi300x"),
    ("Quadro RTX 8000", 48.0, None)])
def test_gpu_names_map_to_catalog_ids(catalog: Catalog, name: str, gib: float,
                                      expected: str | None) -> None:
    acc = match_gpu(name, gib * 2**30, catalog)
    assert (acc.id if acc else None) == expected


XEON = "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz"


def test_cpu_model_names(catalog: Catalog) -> None:
    cores = catalog.accelerators["xeon-8480plus"].compute_units
    assert cores is not None
    whole = int(cores.count.value)
    assert (acc := match_cpu(XEON, whole, catalog)) is not None and acc.id == "xeon-8480plus"
    assert match_cpu(XEON, 4, catalog) is None  # a 4-core VM slice: the datasheet peak is wrong
    assert match_cpu("AMD EPYC", whole, catalog) is None  # no model number: no guess
    assert match_cpu("Mystery CPU 9000", whole, catalog) is None


def test_match_accelerator(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = Environment("torch", "cuda:0", "NVIDIA H100 80GB HBM3", memory_bytes=79.19 * 2**30)
    acc, how = match_accelerator(None, gpu, catalog)
    assert acc is not None and acc.id == "h100-sxm5-80gb" and "device name" in how
    acc, how = match_accelerator(None, replace(gpu, device_name="Quadro RTX 8000"), catalog)
    assert acc is None and "pass --hw" in how
    acc, how = match_accelerator("h200", gpu, catalog)
    assert acc is not None and acc.id == "h200-sxm" and how == "--hw"
    with pytest.raises(NotFoundError):
        match_accelerator("h10O-nope", gpu, catalog)
    cpu = Environment("numpy", "cpu", XEON)
    assert match_accelerator("local", cpu, catalog) == (local_cpu(), "--hw")
    acc, how = match_accelerator(None, replace(cpu, device_name="Mystery CPU"), catalog)
    assert acc == local_cpu() and "local CPU description" in how
    units = catalog.accelerators["xeon-8480plus"].compute_units
    assert units is not None
    whole = replace(host_cpu(), cores=int(units.count.value))  # this host, as a whole 8480+
    monkeypatch.setattr("accelmap.measure.environment.host_cpu", lambda: whole)
    acc, how = match_accelerator(None, cpu, catalog)
    assert acc is not None and acc.id == "xeon-8480plus" and "guessed" in how
