"""MaxText: a training plan as config overrides (maxtext_overrides.yml) and the train command.

Pinned to MaxText 0.2.5 (the PyPI wheel ``maxtext-0.2.5``). Every key below is a key of that
release's ``maxtext/configs/base.yml`` (repository path ``src/maxtext/configs/base.yml``) except
``base_config``, the inheritance key of ``maxtext/configs/pyconfig.py`` (``_BASE_CONFIG_ATTR``).
The entry point is ``python3 -m maxtext.trainers.pre_train.train CONFIG key=value ...``
(``maxtext/configs/pyconfig.py``: the first ``.yml`` argument is the config, the rest are
overrides; ``src/maxtext/configs/base.yml`` also resolves in a pip install).

Mesh (base.yml: "product of the DCN axes should equal number of slices and product of the ICI
axes should equal number of devices per slice"; both default to one ``-1`` auto axis, so every
axis used here is written out). ICI spans one TPU slice, or one GPU node (MaxText's GPU recipes
put the 8 GPUs of a node on ICI and the nodes on DCN, e.g.
``configs/gpu/a3/llama_3.1_405b/128vm.sh``). The plan does not name its TPU slice, so the slice is
the largest catalog system on the same accelerator whose size divides the job (tpu-v5p-1024 =
512 chips: a 1024-chip job is two slices). Plan axes -> mesh axes:

- dp -> ``data`` (ZeRO 0, or 1 with ``shard_optimizer_over_data: true``, base.yml "Enable ZeRO-1
  optimizer sharding over data axis") or ``fsdp`` (ZeRO 3: params, grads and optimizer sharded).
  ZeRO 2 has no MaxText form and is exported as fsdp.
- ep -> ``expert``, carved out of dp as in the plan (the ``activation_batch`` rule of base.yml
  shards the batch over data, fsdp and expert). tp -> ``tensor``; pp -> ``pipeline``;
  cp -> ``context``.
- Slices (DCN) take the outer axes first, in the planner's order (dp, pp, ep, cp, tp), so for
  multi-slice the dp axis goes on DCN.

Batch: MaxText trains on ``int(devices x per_device_batch_size) x gradient_accumulation_steps``
sequences a step (``calculate_global_batch_sizes`` in ``configs/types.py``; a fractional
per_device_batch_size is allowed). Without pp, each of the plan's micro-batches is one
accumulation step; with pp, ``num_pipeline_microbatches`` = global / (micro_batch x dp) (it must be
a multiple of pp, types.py) and virtual stages are ``num_pipeline_repeats`` with
``num_layers_per_pipeline_stage`` = layers / (pp x vpp) (base.yml: layers = stages x repeats x
layers per stage). MaxText's pipeline runs a circular GPipe-style schedule, not 1F1B.

Recompute -> ``remat_policy`` (base.yml list; policies in ``maxtext/layers/nnx_decoders.py``):
full -> ``full``; selective (recompute the attention core) -> ``minimal`` (saves the q/k/v/out
and MLP matmul outputs, recomputes attention); none -> ``minimal_with_context`` (also saves the
attention output; only elementwise ops are recomputed: the nearest listed policy to none).
Offload -> ``optimizer_memory_host_offload`` and ``parameter_memory_host_offload``.

LoRA/QLoRA plans train with MaxText's SFT trainer (``python3 -m
maxtext.trainers.post_train.sft.train_sft``, config ``maxtext/configs/post_train/sft.yml``, which
inherits base.yml; the overrides file then names it as its base_config). Its ``lora`` block
(``LoRA`` in ``maxtext/configs/types.py``; applied by Qwix in ``maxtext/utils/lora_utils.py``):
``enable_lora``, ``lora_rank``, ``lora_alpha`` (Qwix 0.1.8 providers/lora.py scales the update
by alpha / rank: sft.yml's 0.0 would switch the adapters off, so PEFT's default 8 is written),
``lora_module_path`` (a regex over module paths; empty = MaxText's verified per-model path from
``configs/post_train/lora_module_path.yml``, every attention and MLP projection) and, for QLoRA,
``lora_weight_qtype: nf4`` with ``lora_tile_size: 64`` (QLoRA's block of 64; Qwix has no
double-quantization setting). Projection names (``checkpoint_conversion/utils/param_mapping.py``):
self_attention query/key/value/out, mlp wi_0 (gate), wi_1 (up), wo (down). The SFT trainer
refuses ``optimizer_memory_host_offload`` (train_sft.validate_config: Tunix's PeftTrainer has
no host offload of the optimizer state).
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

import yaml

from accelmap.export.base import (
    ACT_OFFLOAD_REASON,
    CP_COMM_REASON,
    FRAMEWORK_REASON,
    SPLIT_REASON,
    Exporter,
    ExportResult,
    PlanJob,
    PlanKind,
    ReadBack,
    public_recompute,
    register,
    training_mapping,
)
from accelmap.export.lora import (
    ALL,
    LORA_ALPHA,
    MLP,
    adapter_fields,
    alpha_note,
    has_adapters,
    targets,
    targets_field,
)
from accelmap.mapping.mesh import AXES, mesh_sizes, split_mesh
from accelmap.mapping.plan import ZeroStage
from accelmap.units import DType
from accelmap.workload import Finetune, LoraTarget, Recompute

VERSION = "0.2.5"
URL = "https://pypi.org/project/maxtext/0.2.5/"
TRAIN = "python3 -m maxtext.trainers.pre_train.train"
BASE_YML = "src/maxtext/configs/base.yml"
SFT = "python3 -m maxtext.trainers.post_train.sft.train_sft"
SFT_YML = "src/maxtext/configs/post_train/sft.yml"
OVERRIDES_FILE = "maxtext_overrides.yml"

# MaxText module names of the projections (checkpoint_conversion/utils/param_mapping.py)
LORA_MODULES = {LoraTarget.Q: "attention/query", LoraTarget.K: "attention/key",
                LoraTarget.V: "attention/value", LoraTarget.O: "attention/out",
                LoraTarget.GATE: "mlp/wi_0", LoraTarget.UP: "mlp/wi_1", LoraTarget.DOWN: "mlp/wo"}
# lora_utils._get_lora_module_path: the layer index is optional (scanned, layers_0, layers/0)
LORA_LAYERS = "decoder/layers(?:_[0-9]+|/[0-9]+)?/.*"
# model_name prefixes whose verified path (lora_module_path.yml) is decoder/layers/... with
# these names (llama3.1, qwen3, mistral, and the default that llama2 and qwen2.5 use)
STANDARD_LAYOUT = ("llama", "mistral-", "qwen")
QLORA_TILE = 64  # NF4 block size (Dettmers et al. 2023 sec. 3)

# Catalog model id -> MaxText model_name (maxtext/configs/models/<name>.yml in 0.2.5).
MODEL_NAMES: dict[str, str] = {
    "llama-2-7b": "llama2-7b", "llama-2-13b": "llama2-13b", "llama-2-70b": "llama2-70b",
    "llama-3.1-8b": "llama3.1-8b", "llama-3.1-70b": "llama3.1-70b",
    "llama-3.1-405b": "llama3.1-405b", "mistral-7b": "mistral-7b",
    "mixtral-8x7b": "mixtral-8x7b", "mixtral-8x22b": "mixtral-8x22b",
    "gemma-2-9b": "gemma2-9b", "gemma-2-27b": "gemma2-27b", "deepseek-v3": "deepseek3-671b",
    "qwen2.5-7b": "qwen2.5-7b", "qwen3-8b": "qwen3-8b", "qwen3-30b-a3b": "qwen3-30b-a3b",
    "gpt3-175b": "gpt3-175b",
}
REMAT = {Recompute.NONE: "minimal_with_context", Recompute.SELECTIVE: "minimal",
         Recompute.FULL: "full"}
REMAT_BACK = {v: k for k, v in REMAT.items()}
# torchtitan's per-op policy has no MaxText remat policy (those save named tensors): the
# nearest, "minimal", keeps every matmul output
REMAT[Recompute.PER_OP] = "minimal"
DTYPES = {DType.BF16: "bfloat16", DType.FP16: "float16", DType.FP32: "float32",
          DType.FP8: "bfloat16"}
def slice_size(job: PlanJob, unsupported: list[str]) -> tuple[str, int]:
    """(hardware, devices on ICI): a TPU slice from the catalog, or one GPU node."""
    from accelmap.catalog import load_catalog

    cat = load_catalog()
    acc = cat.accelerators.get(job.accelerator)
    vendor = acc.vendor if acc else ""
    if not job.accelerator.startswith("tpu") and "Google" not in vendor:
        if not any(v in vendor for v in ("NVIDIA", "AMD")):
            unsupported.append(f"accelerator: MaxText {VERSION} runs on TPUs and NVIDIA/AMD "
                               f"GPUs ('hardware' in base.yml), not on {job.accelerator}")
        return "gpu", job.devices_per_node
    sizes = [p.devices_per_node * p.nodes for p in cat.systems.values()
             if p.accelerator == job.accelerator]
    fits = [s for s in sizes if s <= job.devices and job.devices % s == 0]
    return "tpu", max(fits, default=job.devices)


def _batch(job: PlanJob, out: dict[str, Any], unsupported: list[str]) -> None:
    m = job.mapping
    mb, dp, pp = m.micro_batch, m.dp, m.pp
    steps = m.micro_batches(job.global_batch)
    micro = int(steps) if float(steps).is_integer() else 0
    if not micro:
        unsupported.append(f"micro_batch={mb}: global batch {job.global_batch} is not a whole "
                           f"number of micro-batches of {mb} x dp={dp}")
        micro = max(int(steps), 1)
    accum = 1 if pp > 1 else micro
    pdbs = job.global_batch / (job.devices * accum)
    out["per_device_batch_size"] = int(pdbs) if pdbs == int(pdbs) else pdbs
    out["gradient_accumulation_steps"] = accum
    if int(job.devices * pdbs) * accum != job.global_batch:
        unsupported.append(f"global_batch={job.global_batch}: not {job.devices} devices x a "
                           "per-device batch MaxText can hold exactly")
    if pp > 1:
        out["num_pipeline_microbatches"] = micro
        if micro % pp:
            unsupported.append(f"micro_batch={mb}: {micro} pipeline micro-batches are not a "
                               f"multiple of pp={pp}, which MaxText requires")


def _pipeline(spec: Any, pp: int, vpp: int, out: dict[str, Any],
              unsupported: list[str]) -> None:
    layers = int(spec.n_layers)
    if layers % (pp * vpp):
        unsupported.append(f"vpp={vpp}: {layers} layers do not split into pp={pp} x vpp={vpp} "
                           "equal stages (MaxText needs pipeline_parallel_layers for that)")
        vpp = 1 if layers % pp == 0 else vpp
    out["num_layers_per_pipeline_stage"] = max(layers // (pp * vpp), 1)
    out["num_pipeline_repeats"] = vpp
    out["scan_layers"] = False  # base.yml: "recommend setting this to false when using pipeline"


def overrides(job: PlanJob, spec: Any) -> tuple[dict[str, Any], list[str]]:
    """The MaxText keys of a training plan and the plan fields it cannot express."""
    unsupported: list[str] = []
    m = public_recompute(job.mapping, "MaxText", unsupported)
    dp, ep, zero = m.dp, m.ep, m.zero
    if m.world != job.devices:
        unsupported.append(f"dp x tp x pp x cp = {m.world} is not the job's "
                           f"{job.devices} devices")
    out: dict[str, Any] = {"base_config": "base.yml"}
    name = MODEL_NAMES.get(job.model)
    if name:
        out["model_name"] = name
    else:
        unsupported.append(f"model: MaxText {VERSION} has no model config for {job.model!r}; "
                           "set model_name or the base_* dimensions")
    hardware, ici_devices = slice_size(job, unsupported)
    out["hardware"] = hardware
    sizes = mesh_sizes(m)
    expert = sizes["expert"]
    if ep > 1 and expert == 1:
        unsupported.append(f"ep={ep}: MaxText's expert axis is carved out of dp={dp} here, "
                           "which ep does not divide; exported without expert parallelism")
    if zero is ZeroStage.GRADIENTS:
        unsupported.append("zero=2: MaxText shards optimizer states alone (ZeRO-1) or params, "
                           "grads and optimizer together (fsdp, ZeRO-3); exported as fsdp")
    elif zero and dp // expert == 1:
        unsupported.append(f"zero={int(zero)}: with dp={dp} there is no data axis to shard "
                           "over")
    if zero is ZeroStage.OPTIMIZER:
        out["shard_optimizer_over_data"] = True
    ici, dcn, left = split_mesh(sizes, max(job.devices // ici_devices, 1))
    if left != 1:
        unsupported.append(f"mesh: the plan's axes cannot be split over "
                           f"{job.devices // ici_devices} slices of {ici_devices} devices")
    for a, stem in AXES.items():
        out[f"ici_{stem}_parallelism"] = ici[a]
    for a, stem in AXES.items():
        out[f"dcn_{stem}_parallelism"] = dcn[a]
    out["max_target_length"] = job.seq_len
    out["dtype"] = DTYPES.get(job.dtype, "bfloat16")
    if job.dtype is DType.FP8:
        out["quantization"] = "fp8"  # base.yml: "'fp8' for 8-bit floating-point GeMMs on GPUs"
    _batch(job, out, unsupported)
    if m.pp > 1:
        _pipeline(spec, m.pp, m.virtual_stages, out, unsupported)
    elif m.interleaved:
        unsupported.append(f"vpp={m.virtual_stages}: virtual stages need pp > 1")
    out["remat_policy"] = REMAT[m.policy]
    if m.policy is Recompute.PER_OP:
        unsupported.append("recompute=per-op: torchtitan's per-op checkpointing is no MaxText "
                           "remat policy; exported as minimal (every matmul output kept)")
    out["optimizer_memory_host_offload"] = bool(m.offloads_optimizer)
    out["parameter_memory_host_offload"] = bool(m.offloads_params)
    if has_adapters(job):
        _lora(job, spec, out, unsupported)
    return out, unsupported


def module_path(chosen: frozenset[LoraTarget]) -> str:
    """lora_module_path for a subset of the projections (standard layout)."""
    attention = [LORA_MODULES[t].split("/")[1] for t in LoraTarget if t in chosen - MLP]
    mlp = [LORA_MODULES[t].split("/")[1] for t in LoraTarget if t in chosen & MLP]
    parts = ([f"attention/({'|'.join(attention)})"] if attention else []) + (
        [f"mlp/({'|'.join(mlp)})"] if mlp else [])
    return f"{LORA_LAYERS}({'|'.join(parts)})"


def _lora(job: PlanJob, spec: Any, out: dict[str, Any], unsupported: list[str]) -> None:
    """The SFT trainer and its lora block (MaxText's LoRA/QLoRA)."""
    out["base_config"] = "post_train/sft.yml"  # resolved in MaxText's configs folder
    if out["optimizer_memory_host_offload"]:
        unsupported.append("offload=True: MaxText's SFT trainer refuses "
                           "optimizer_memory_host_offload (Tunix's PeftTrainer cannot offload "
                           "the optimizer state); exported without it")
        out["optimizer_memory_host_offload"] = False
    chosen = targets(job)
    name = str(out.get("model_name", ""))
    path = ""  # MaxText's verified path for the model: every attention and MLP projection
    if chosen != ALL:
        if name.startswith(STANDARD_LAYOUT) and spec.moe is None:
            path = module_path(chosen)
        else:
            unsupported.append(f"{targets_field(chosen)}: MaxText names {job.model}'s modules "
                               "differently; exported with its default lora_module_path (every "
                               "attention and MLP projection): set lora.lora_module_path by hand")
    lora: dict[str, Any] = {"enable_lora": True, "lora_rank": job.lora_rank,
                            "lora_alpha": float(LORA_ALPHA), "lora_module_path": path}
    if job.finetune is Finetune.QLORA:
        lora |= {"lora_weight_qtype": "nf4", "lora_tile_size": QLORA_TILE}
    out["lora"] = lora
    if spec.moe is not None and chosen & MLP:
        unsupported.append(f"{adapter_fields(job)}: MaxText's default lora_module_path adapts "
                           "dense mlp blocks; for the MoE experts set lora.lora_module_path "
                           "by hand (types.py's example: .../(MoeBlock_0|shared_experts)/"
                           "(wi_0|wo))")


def read_lora(cfg: dict[str, Any]) -> tuple[Finetune | None, int | None,
                                            frozenset[LoraTarget] | None]:
    """(method, rank, adapted projections) of an overrides file's lora block."""
    lora = cfg.get("lora")
    if not isinstance(lora, dict) or not lora.get("enable_lora"):
        return None, None, None
    method = Finetune.QLORA if lora.get("lora_weight_qtype") else Finetune.LORA
    path = str(lora.get("lora_module_path") or "")
    chosen = ALL if not path else frozenset(
        t for t, mod in LORA_MODULES.items()
        if re.search(rf"{mod.split('/')[0]}/\([^)]*\b{mod.split('/')[1]}\b", path))
    return method, int(lora["lora_rank"]), chosen


def _cli(key: str, value: Any) -> list[str]:
    """``key=value`` overrides (pyconfig: OmegaConf.from_cli; nested keys dotted)."""
    if isinstance(value, dict):
        return [w for k, v in value.items() if v != "" for w in _cli(f"{key}.{k}", v)]
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return [f"{key}={text}"]


def export(job: PlanJob, spec: Any) -> ExportResult:
    keys, unsupported = overrides(job, spec)
    run = f"accelmap-{job.model}"
    adapters = has_adapters(job)
    entry, config = (SFT, SFT_YML) if adapters else (TRAIN, BASE_YML)
    head = [f"# MaxText {VERSION} overrides for {job.model} on {job.nodes} x "
            f"{job.devices_per_node} {job.accelerator}, written by accelmap.",
            f"# Keys from maxtext/configs/base.yml of maxtext {VERSION} ({URL})"
            + (" and the lora block of configs/post_train/sft.yml." if adapters else "."),
            f"# Run: {entry} {OVERRIDES_FILE} run_name={run}",
            f"# (base_config resolves {keys['base_config']} beside this file, else in MaxText's "
            "configs).",
            "# Set dataset_type / dataset_path, steps and base_output_directory for a real run."
            + (" LoRA/QLoRA start from load_parameters_path." if adapters else "")]
    words = [*entry.split(), config, f"run_name={run}",
             *(w for k, v in keys.items() if k != "base_config" for w in _cli(k, v))]
    notes = [alpha_note("lora.lora_alpha")] if adapters else []
    return ExportResult({OVERRIDES_FILE: "\n".join(head) + "\n"
                         + yaml.safe_dump(keys, sort_keys=False)},
                        " ".join(shlex.quote(w) for w in words), unsupported, notes)


def read_back(files: dict[str, str]) -> ReadBack:
    cfg = yaml.safe_load(files[OVERRIDES_FILE]) or {}

    def size(stem: str) -> int:
        return int(cfg.get(f"ici_{stem}_parallelism", 1)) * int(
            cfg.get(f"dcn_{stem}_parallelism", 1))

    data, fsdp, expert = size("data"), size("fsdp"), size("expert")
    dp, pp = data * fsdp * expert, size("pipeline")
    devices = math.prod(size(s) for s in AXES.values())
    step = int(devices * float(cfg.get("per_device_batch_size", 1)))
    micro = int(cfg.get("num_pipeline_microbatches", 1)) if pp > 1 else 1
    finetune, rank, chosen = read_lora(cfg)
    return ReadBack(training_mapping(
        dp=dp, tp=size("tensor"), pp=pp, cp=size("context"), ep=expert,
        zero=(ZeroStage.PARAMETERS if fsdp > 1 else
              ZeroStage.OPTIMIZER if cfg.get("shard_optimizer_over_data") else ZeroStage.NONE),
        micro_batch=step // (micro * dp) if micro * dp else 0,
        virtual_stages=int(cfg.get("num_pipeline_repeats", 1)) if pp > 1 else 1,
        recompute=REMAT_BACK.get(str(cfg.get("remat_policy", "full")), Recompute.FULL),
        offload_optimizer=bool(cfg.get("optimizer_memory_host_offload")),
        offload_params=bool(cfg.get("parameter_memory_host_offload"))),
        finetune=finetune, lora_rank=rank, lora_targets=chosen)


EXPORTER = register(Exporter(
    name="maxtext", framework="MaxText", version=VERSION, url=URL, kinds=(PlanKind.TRAIN,),
    not_exported={
        "cp_comm": CP_COMM_REASON, "offload_activations": ACT_OFFLOAD_REASON,
        "framework": FRAMEWORK_REASON,
        "schedule": "MaxText pipelines with its own circular schedule "
                    "(num_pipeline_repeats); there is no zero-bubble option",
        "first_stage_layers": SPLIT_REASON, "last_stage_layers": SPLIT_REASON,
        "embedding_in_split": SPLIT_REASON, "loss_in_split": SPLIT_REASON,
        "tp_comm_overlap": "XLA schedules collective-matmul overlap itself (compiler flags, "
                           "not a MaxText config key)"},
    export=export, read_back=read_back))
