"""A mapping as a named device mesh, the way MaxText and GSPMD name it (MaxText base.yml:
``mesh_axes: ['data', 'stage', 'fsdp', 'fsdp_transpose', 'sequence', 'context', 'tensor',
'expert', ...]``, with ``ici_<axis>_parallelism`` inside a slice and ``dcn_<axis>_parallelism``
across slices over the data-centre network; Xu et al. 2021, "GSPMD", sec. 3 for named mesh
axes). Data parallelism is ``fsdp`` when parameters are sharded (ZeRO-3, MaxText's default
``ici_fsdp_parallelism: -1``) and ``data`` otherwise; expert parallelism is carved out of it.
"""

from __future__ import annotations

import math

from accelmap.mapping.plan import Mapping, ZeroStage

# Mesh axis -> MaxText key stem (ici_<stem>_parallelism / dcn_<stem>_parallelism), outermost
# first: DCN takes the outermost axes (data, then fsdp, ...), which only need gradient
# reductions or parameter gathers once per step.
AXES = {"data": "data", "fsdp": "fsdp", "stage": "pipeline", "expert": "expert",
        "context": "context", "tensor": "tensor"}


def mesh_sizes(m: Mapping) -> dict[str, int]:
    """The mapping's degrees on the named axes."""
    dp, ep = int(m.dp), int(m.ep)
    expert = ep if ep > 1 and dp % ep == 0 else 1
    axis = "fsdp" if m.zero >= ZeroStage.GRADIENTS else "data"
    return {axis: dp // expert, "stage": int(m.pp), "expert": expert, "context": int(m.cp),
            "tensor": int(m.tp)}


def split_mesh(sizes: dict[str, int], slices: int) -> tuple[dict[str, int], dict[str, int], int]:
    """(ici, dcn, left over): each axis gives the slices the largest share of itself that still
    divides them, outermost axis first."""
    left = slices
    dcn: dict[str, int] = {}
    for axis in AXES:
        dcn[axis] = math.gcd(left, sizes.get(axis, 1))
        left //= dcn[axis]
    ici = {a: sizes.get(a, 1) // dcn[a] for a in AXES}
    return ici, dcn, left


def describe_mesh(m: Mapping, slices: int) -> str:
    """'ici fsdp=64 tensor=4; dcn data=2' (axes of size 1 left out)."""
    ici, dcn, left = split_mesh(mesh_sizes(m), max(slices, 1))
    inner = " ".join(f"{a}={v}" for a, v in ici.items() if v > 1) or "none"
    outer = " ".join(f"{a}={v}" for a, v in dcn.items() if v > 1)
    text = f"ici {inner}" + (f"; dcn {outer}" if outer else "")
    if left != 1:
        text += f" (the axes do not split over {slices} slices: {left} left over)"
    return text
