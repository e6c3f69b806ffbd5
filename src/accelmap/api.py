"""The public Python API: everything the CLI can do, as functions over typed values.

Names and text are resolved here, with one clear ``InputError`` for each mistake, so the CLI
(and the web app, and notebooks) only parse arguments, call these functions and render.

    from accelmap import api
    spec = api.load_model("llama-3.1-70b")
    system = api.load_system(cluster="64xH100")
    wl = api.training(batch=256, seq=8192, recompute="full", tokens="15T")
    est = api.estimate(spec, system, wl, api.mapping(system, wl, tp=8, pp=2, zero=1))
    print(est.step_time_s, est.mfu, est.memory.total)
"""

from __future__ import annotations

import math
from enum import Enum
from pathlib import Path
from typing import TypeVar

from accelmap.catalog import Catalog, load_catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.schedules import Schedule
from accelmap.engine import OverlapPolicy, ServeStep, System, TrainStep, default_mapping, estimate
from accelmap.engine.result import Estimate
from accelmap.errors import InputError
from accelmap.hardware.cluster import Cluster, parse_cluster
from accelmap.mapping.plan import Mapping, Offload, ZeroStage, default_schedule
from accelmap.models.schema import ModelSpec
from accelmap.units import DType, parse_dtype
from accelmap.workload import Inference, Optimizer, Recompute, Training

__all__ = [
    "Catalog", "Estimate", "Inference", "Mapping", "ModelSpec", "OverlapPolicy", "ServeStep",
    "System", "TrainStep", "Training", "count", "default_mapping", "dtype", "estimate",
    "inference", "load_catalog", "load_model", "load_system", "mapping", "serving_mapping",
    "training",
]

E = TypeVar("E", bound=Enum)


# -- text to values ---------------------------------------------------------------------------
def dtype(text: str | DType, what: str = "") -> DType:
    """A DType from its name or a library spelling ("bfloat16"); one line if unknown."""
    if isinstance(text, DType):
        return text
    dt = parse_dtype(text)
    if dt is None:
        raise InputError(f"unknown {what + ' ' if what else ''}dtype {text!r}; use one of "
                         f"{', '.join(d.value for d in DType)}")
    return dt


def choice(enum: type[E], text: str | E, what: str) -> E:
    if isinstance(text, enum):
        return text
    try:
        return enum(str(text).lower())
    except ValueError:
        raise InputError(f"unknown {what} {text!r}; use one of "
                         f"{', '.join(str(e.value) for e in enum)}") from None


def count(text: str | float) -> float:
    """A positive count such as '2T', '300B', '1.5e12' (k, M, B/G, T are powers of 1000)."""
    scale = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
    t = str(text).strip().lower()
    try:
        n = float(t[:-1]) * scale[t[-1]] if t and t[-1] in scale else float(t)
    except ValueError:
        n = math.nan
    if not (math.isfinite(n) and n > 0):
        raise InputError(f"cannot read {text!r} as a positive token count; write e.g. 2T or 2e12")
    return n


# -- what runs, where ---------------------------------------------------------------------------
def load_model(name_or_path: str, catalog: Catalog | None = None) -> ModelSpec:
    """A preset by (forgiving) name, a file (HF config.json or a ModelSpec YAML), or a Hub repo
    id such as meta-llama/Llama-3.1-8B (needs the ``hf`` extra)."""
    from accelmap.lookup import find, resolve

    cat = catalog or load_catalog()
    path = Path(name_or_path).expanduser()
    looks_like_path = path.suffix in (".json", ".yaml", ".yml") or "/" in name_or_path
    if path.exists() and (looks_like_path or not find(name_or_path, cat.models)):
        if path.suffix in (".yaml", ".yml"):
            from accelmap.catalog import read_yaml, validate_entry

            data = read_yaml(path)
            if isinstance(data, dict):
                data = {k: v for k, v in data.items() if k != "kind"}
            return validate_entry(ModelSpec, data, str(path))
        from accelmap.models.hf import load_hf_config

        return load_hf_config(str(path))
    if looks_like_path and not path.exists() and name_or_path.count("/") != 1:
        raise InputError(f"no such file: {name_or_path}")
    if name_or_path.count("/") == 1 and not path.exists() and not find(name_or_path, cat.models):
        from accelmap.models.hf import load_hf_config

        return load_hf_config(name_or_path)
    return resolve(name_or_path, cat.models, "model", "accelmap models list")


def load_system(hw: str | None = None, cluster: str | Cluster | None = None,
                catalog: Catalog | None = None,
                profile: CalibrationProfile | None = None) -> System:
    """One accelerator (``hw``: id or forgiving name) or a cluster (preset id, ``64xH100``,
    ``8x8xh100-sxm5-80gb``, ``4xdgx-h100`` or a system YAML file)."""
    from accelmap.lookup import resolve

    if (hw is None) == (cluster is None):
        raise InputError("give one accelerator (--hw NAME) or one cluster (--cluster SPEC)")
    cat = catalog or load_catalog()
    if cluster is not None:
        cl = cluster if isinstance(cluster, Cluster) else parse_cluster(cluster, cat)
        return System.of(cl, profile)
    acc = resolve(str(hw), cat.accelerators, "accelerator", "accelmap hw list")
    return System.single(acc, profile)


def training(batch: int, seq: int, dtype_: str | DType = "bf16", optimizer: str = "adamw",
             recompute: str | Recompute = "none", flash: bool = True,
             tokens: str | float | None = None) -> Training:
    """A training job: ``batch`` sequences of ``seq`` tokens per optimizer step."""
    return Training(batch=batch, seq_len=seq, dtype=dtype(dtype_, "training"),
                    optimizer=choice(Optimizer, optimizer, "optimizer"),
                    recompute=choice(Recompute, recompute, "recompute policy"),
                    flash_attention=flash, tokens_to_train=count(tokens) if tokens else 0.0)


def inference(batch: int, prompt: int, output: int, weights: str | DType = "bf16",
              kv: str | DType | None = None, group: int = 128, flash: bool = True) -> Inference:
    """A serving batch. Activations run in FP8 with FP8 weights (FP8 GEMMs take FP8 inputs:
    TensorRT-LLM and vLLM's fp8 W8A8), else in BF16; the KV cache follows the activations
    unless ``kv`` says otherwise."""
    w = dtype(weights, "weight")
    act = DType.FP8 if w is DType.FP8 else DType.BF16
    return Inference(batch=batch, prompt_len=prompt, output_len=output, weight_dtype=w,
                     act_dtype=act, kv_dtype=dtype(kv, "KV-cache") if kv else act,
                     quant_group=group, flash_attention=flash)


def mapping(system: System, workload: Training, *, tp: int = 1, pp: int = 1,
            dp: int | None = None, cp: int = 1, ep: int = 1, zero: int = 0,
            micro_batch: int | None = None, vpp: int = 1,
            schedule: str | Schedule | None = None, sequence_parallel: bool = True,
            tp_overlap: bool = False, force_tp: bool = False, shard_group: int | None = None,
            offload: str | Offload = "none", first_stage_layers: int | None = None,
            last_stage_layers: int | None = None, embedding_in_split: bool = False,
            loss_in_split: bool = False) -> Mapping:
    """A training mapping; ``dp`` left out fills the system; ``micro_batch`` left out is
    ``default_mapping``'s (the whole batch on one device, 1 on a cluster); ``schedule`` left
    out is Megatron-LM's (interleaved-1f1b with vpp > 1, else 1f1b). The pipeline split
    follows Megatron-LM's arguments (``Mapping.stage_layers``): the first/last stage's layers,
    or the embedding/loss counted as layers."""
    mb = micro_batch or default_mapping(system, workload).micro_batch
    off = choice(Offload, offload, "offload")
    if int(zero) not in (0, 1, 2, 3):
        raise InputError(f"zero={zero}: the ZeRO stage is 0, 1, 2 or 3")
    sched = default_schedule(vpp) if schedule is None else choice(Schedule, schedule,
                                                                   "schedule")
    return Mapping.for_world(
        system.devices, dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, zero=ZeroStage(int(zero)),
        micro_batch=mb, virtual_stages=vpp, schedule=sched,
        sequence_parallel=sequence_parallel, recompute=workload.recompute,
        tp_comm_overlap=tp_overlap, force_tp_across_nodes=force_tp, shard_group=shard_group,
        offload_optimizer=off, offload_params=off, first_stage_layers=first_stage_layers,
        last_stage_layers=last_stage_layers, embedding_in_split=embedding_in_split,
        loss_in_split=loss_in_split)


def serving_mapping(tp: int = 1, pp: int = 1, ep: int = 1, replicas: int = 1) -> Mapping:
    """``replicas`` copies of tp x pp devices (vLLM expert parallelism splits tp)."""
    return Mapping.serving(tp, pp, ep, replicas)
