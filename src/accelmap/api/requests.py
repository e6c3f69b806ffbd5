"""Typed requests shared by the faces: the CLI's options and the web's forms are built into the
same frozen value, and one function turns it into the engine's inputs, so the same input gives
the same answer or the same error sentence in both (issue 25; ``tests/web/test_cli_web.py``).

    req = api.EstimateRequest(model="llama-3.1-70b", cluster="8xH100", tp=8, batch=32)
    spec, system, workload, mapping = api.estimate_inputs(req)
    est = api.estimate(spec, system, workload, mapping)

Field names are the CLI's flags (``--micro-batch`` is ``micro_batch``); defaults are the CLI's.
Names are resolved, defaults applied and the checks made once, here: the dtype in every mode
(a typo is never ignored), one device given several-device degrees, serving past the model's
context, a fine-tune asked of a serving job. A mapping left open (serving with none of tp,
pp, ep, replicas) is None: the engine then chooses a layout that holds the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelmap.api.estimates import (
    adapters,
    check_one_device,
    inference,
    load_system,
    mapping,
    serving_mapping,
    training,
)
from accelmap.api.models import context_warnings, load_model
from accelmap.api.parse import dtype
from accelmap.catalog import Catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.engine import System
from accelmap.errors import InputError
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.workload import Inference, Training

__all__ = ["EstimateRequest", "estimate_inputs"]


@dataclass(frozen=True)
class EstimateRequest:
    """One ``accelmap estimate`` / ``POST /api/estimate``: what runs, where, and how it is
    split (None: the default the engine or ``Mapping.training`` applies)."""

    model: str
    hw: str | None = None
    cluster: str | None = None
    devices: int | None = None
    train: bool = False
    batch: int = 1
    seq: int = 2048
    prompt: int = 512
    output: int = 128
    dtype: str = "bf16"
    weights: str = "bf16"
    moe_weights: str | None = None
    kv: str | None = None
    group: int = 128
    optimizer: str = "adamw"
    recompute: str = "none"
    flash: bool = True
    tokens: str | None = None
    finetune: str = "full"
    lora_rank: int | None = None
    lora_targets: str | None = None
    sparsity: str = "none"
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int = 1
    ep: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    vpp: int = 1
    schedule: str | None = None
    sequence_parallel: bool = True
    tp_overlap: bool = False
    force_tp: bool = False
    replicas: int | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    embedding_in_split: bool = False
    loss_in_split: bool = False

    @classmethod
    def of(cls, values: Any) -> EstimateRequest:
        """The request from any object with these attributes (the CLI's parsed options, the
        web's form); the CLI's ``--no-sp`` is ``sequence_parallel=False``."""
        from dataclasses import fields

        got = {f.name: getattr(values, f.name) for f in fields(cls) if hasattr(values, f.name)}
        if hasattr(values, "no_sp"):
            got["sequence_parallel"] = not values.no_sp
        return cls(**got)


def _one(v: int | None) -> int:
    """A degree left out is 1; a given 0 or -1 goes on to the Mapping's check, never to 1."""
    return 1 if v is None else v


def estimate_inputs(req: EstimateRequest, catalog: Catalog | None = None,
                    profile: CalibrationProfile | None = None
                    ) -> tuple[ModelSpec, System, Training | Inference, Mapping | None]:
    """The engine's inputs for ``req``: the model, the system, the workload and the mapping
    (None where serving leaves the layout to the engine)."""
    r = req
    train_dtype = dtype(r.dtype, "training")  # checked in every mode: a typo is never ignored
    spec = load_model(r.model, catalog)
    system = load_system(hw=r.hw, cluster=r.cluster, catalog=catalog, profile=profile,
                         devices=r.devices)
    check_one_device(system, r.hw, tp=r.tp, pp=r.pp, dp=r.dp, cp=r.cp, ep=r.ep,
                     replicas=r.replicas)
    ft = adapters(r.finetune, r.lora_rank, r.lora_targets)
    if r.train:
        wl = training(r.batch, r.seq, train_dtype, r.optimizer, r.recompute, r.flash, r.tokens,
                      finetune=ft, sparsity=r.sparsity)
        return spec, system, wl, mapping(
            system, wl, tp=_one(r.tp), pp=_one(r.pp), dp=r.dp, cp=r.cp, ep=_one(r.ep),
            zero=r.zero, micro_batch=r.micro_batch, vpp=r.vpp, schedule=r.schedule,
            sequence_parallel=r.sequence_parallel, tp_overlap=r.tp_overlap,
            force_tp=r.force_tp, first_stage_layers=r.first_stage_layers,
            last_stage_layers=r.last_stage_layers, embedding_in_split=r.embedding_in_split,
            loss_in_split=r.loss_in_split)
    if ft is not None:
        raise InputError("--finetune lora/qlora is a training workload: add --train")
    context_warnings(spec, prompt=r.prompt, output=r.output)  # serving past it: refused
    inf = inference(r.batch, r.prompt, r.output, r.weights, r.kv, r.group, r.flash,
                    sparsity=r.sparsity, moe_weights=r.moe_weights)
    return spec, system, inf, serving_mapping(r.tp, r.pp, r.ep, r.replicas)
