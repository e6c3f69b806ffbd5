"""System: where a job runs. A cluster (accelerator, devices per node, nodes, network tiers) and
the achievable figures of its device (catalog defaults or the user's measured profile).

One device is a one-device system: a cluster of one node holding one device and no network, so
a single accelerator and a cluster go through the same engine with the same Mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.roofline import Device
from accelmap.hardware.cluster import Cluster
from accelmap.hardware.schema import Accelerator


@dataclass(frozen=True)
class System:
    cluster: Cluster
    device: Device

    @classmethod
    def of(cls, cluster: Cluster, profile: CalibrationProfile | None = None) -> System:
        return cls(cluster, Device.of(cluster.accelerator, profile=profile))

    @classmethod
    def single(cls, acc: Accelerator, profile: CalibrationProfile | None = None,
               fraction: float = 1.0, exclude: str | None = None) -> System:
        """One device (or ``fraction`` of one: an MI250X GCD is 0.5) with no network."""
        return cls.on(Device.of(acc, fraction=fraction, exclude=exclude, profile=profile))

    @classmethod
    def on(cls, device: Device) -> System:
        """A one-device system around a Device as it is (validation's leave-one-out devices)."""
        return cls(Cluster(device.acc.id, device.acc, 1, 1, (), None, "one device"), device)

    @property
    def accelerator(self) -> Accelerator:
        return self.cluster.accelerator

    @property
    def devices(self) -> int:
        return self.cluster.devices

    @property
    def memory_bytes(self) -> float:
        """Memory of one device in use (its fraction of the catalog device)."""
        return self.accelerator.memory_bytes * self.device.fraction

    @property
    def tdp_w(self) -> float | None:
        tdp = self.accelerator.tdp
        return tdp.value * self.device.fraction if tdp else None

    @property
    def price_usd_per_hour(self) -> float | None:
        price = self.accelerator.price
        return price.usd_per_hour.value if price else None
