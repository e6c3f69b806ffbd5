"""Model-state memory per device under ZeRO (Rajbhandari et al. 2020, sec. 5, Table 1).

With Psi parameters, 16-bit weights and gradients and K bytes of optimizer state per parameter
(K = 12 for mixed-precision Adam: fp32 master, m, v), over N_d data-parallel ranks:
stage 0: (2 + 2 + K) Psi; stage 1 (P_os): 4 Psi + K Psi / N_d; stage 2 (P_os+g): 2 Psi +
(2 + K) Psi / N_d; stage 3 (P_os+g+p): (2 + 2 + K) Psi / N_d. Written array-friendly: ``stage``
and ``shards`` may be numpy arrays.
"""

from __future__ import annotations

import numpy as np

from accelmap.units import Num


def model_state_bytes(params: Num, stage: Num, shards: Num, weight_bytes: float = 2.0,
                      grad_bytes: float = 2.0, optimizer_bytes: float = 12.0) -> dict[str, Num]:
    """Weights, gradients and optimizer state per device (bytes) for a ZeRO stage."""
    stage = np.asarray(stage)
    shards = np.asarray(shards, dtype=float)
    one = np.ones_like(shards)
    return {
        "weights": params * weight_bytes / np.where(stage >= 3, shards, one),
        "gradients": params * grad_bytes / np.where(stage >= 2, shards, one),
        "optimizer": params * optimizer_bytes / np.where(stage >= 1, shards, one),
    }
