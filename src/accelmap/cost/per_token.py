"""The per-token money and energy figures every result row carries, each defined once, with the
bound it is (issue 25: $/M tokens had three key names and four copies of its formula; J/token
was the TDP bound in ``compare`` and ``plan`` but the modelled energy in ``estimate``).

One vocabulary, the same key in an estimate, a plan row, a compared accelerator and a report:

- ``usd_per_million_tokens``: rent. Every device of the system billed at the catalog's price per
  device-hour (or ``--price``), at the predicted throughput:
  ``devices x $/device-h / (tokens/s x 3600) x 1e6``. Idle devices are billed too.
- ``energy_j_per_token_tdp``: the **upper bound**: every device draws its TDP the whole time,
  ``devices x TDP / tokens/s``. Cheap (one division), so searches rank by it.
- ``energy_j_per_token_ops``: the **lower bound**: operator energy only (pJ/FLOP, pJ/byte,
  ``cost.power``), no static power; carried by estimates (``engine/result.py``).
- ``energy_j_per_token``: the **modelled** energy (``engine/energy.py``: operators, links and
  static power, capped at the TDP), between the two bounds; only ``estimate`` computes it.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from accelmap.hardware.schema import Accelerator

N = TypeVar("N", float, np.ndarray)


def usd_per_million_tokens(price_per_device_hour: float, devices: float, tokens_per_s: N) -> N:
    """Rent per million tokens: ``devices`` billed at ``price_per_device_hour`` ($) while they
    produce ``tokens_per_s``."""
    return devices * price_per_device_hour / (tokens_per_s * 3600) * 1e6


def tdp_j_per_token(tdp_w: float, devices: float, tokens_per_s: N) -> N:
    """The upper bound on energy per token: ``devices`` at their TDP (W) the whole time."""
    return devices * tdp_w / tokens_per_s


def price_per_device_hour(acc: Accelerator) -> float | None:
    """The catalog's rent quote for one device, $ per hour (None: not published)."""
    return acc.price.usd_per_hour.value if acc.price else None


def tdp_w(acc: Accelerator) -> float | None:
    """The part's published TDP, W (None: not published)."""
    return acc.tdp.value if acc.tdp else None


def per_token(acc: Accelerator, devices: float, tokens_per_s: float | None
              ) -> tuple[float | None, float | None]:
    """(``usd_per_million_tokens``, ``energy_j_per_token_tdp``) of ``devices`` of ``acc`` at
    ``tokens_per_s``; None where the part publishes no price or TDP, or nothing runs."""
    if not tokens_per_s or not tokens_per_s > 0:
        return None, None
    price, tdp = price_per_device_hour(acc), tdp_w(acc)
    return (None if price is None else usd_per_million_tokens(price, devices, tokens_per_s),
            None if tdp is None else tdp_j_per_token(tdp, devices, tokens_per_s))
