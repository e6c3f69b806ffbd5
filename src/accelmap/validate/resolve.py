"""From a measurement row's words to accelmap's inputs: device, model, framework, precision.

Names go through the catalog's own lookup first (``validate/names.py``: aliases, case,
punctuation; numbers must match whole), then the explicit tables of the transcription's
spellings; an unknown name gets the catalog's closest names. Each resolver returns what it
found plus notes saying what it assumed, or a reason why it could not; it never raises for a
row it does not understand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from accelmap.catalog import Catalog
from accelmap.cost.framework import Framework, FrameworkProfile, release_stack
from accelmap.cost.framework import profile as framework_profile
from accelmap.cost.roofline import Device
from accelmap.hardware.schema import Accelerator
from accelmap.lookup import suggestions
from accelmap.models.schema import ModelSpec
from accelmap.units import DType
from accelmap.validate.cases import Arch
from accelmap.validate.names import (
    MEASURED_NAMES,
    MEMORY_VARIANTS,
    MeasuredDevice,
    catalog_matches,
    same_size,
)
from accelmap.workload import Adapters, Finetune, LoraTarget, Recompute

# Model names as the shared measurement files spell them -> catalog preset ids.
MODEL_NAMES: dict[str, str] = {
    # inference.csv
    "GPT-J 6B": "gpt-j-6b",
    "Llama 2 7B": "llama-2-7b",
    "Llama 2 13B": "llama-2-13b",
    "Llama 2 70B": "llama-2-70b",
    "Llama-2-7B": "llama-2-7b",
    "Llama-2-70B": "llama-2-70b",
    "Llama-3.1-8B": "llama-3.1-8b",
    "Llama-3.1-70B": "llama-3.1-70b",
    "Llama-3.1-405B": "llama-3.1-405b",
    # Llama 3.3 70B has Llama 3.1 70B's geometry (Meta's model card: same architecture, new
    # post-training; config.json: 80 layers, hidden 8192, 64/8 heads, ffn 28672, vocab 128256)
    "Llama 3.3 70B": "llama-3.1-70b",
    "Falcon 180B": "falcon-180b",
    # training.csv
    "GPT (1.7B)": "megatron-1.7b",
    "GPT (3.6B)": "megatron-3.6b",
    "GPT (7.5B)": "megatron-7.5b",
    "GPT (18B)": "megatron-18.4b",
    "GPT (39B)": "megatron-39.1b",
    "GPT (76B)": "megatron-76.1b",
    "GPT (145B)": "megatron-145.6b",
    "GPT (530B)": "megatron-529.6b",
    "GPT (1T)": "megatron-1t",
    "GPT-3 (175B)": "gpt3-175b",
    "GPT3-175B": "gpt3-175b",
    "MPT-7b": "mpt-7b",
    "MPT-30b": "mpt-30b",
    "LLAMA2-7B": "llama-2-7b",
    "LLAMA2-13B": "llama-2-13b",
    "LLAMA2-70B": "llama-2-70b",
    "LLAMA2-7B SFT (SQuAD v1.1 packed)": "llama-2-7b",
    "LLAMA2-13B SFT (SQuAD v1.1 packed)": "llama-2-13b",
    "LLAMA2-70B SFT (SQuAD v1.1 packed)": "llama-2-70b",
    "LLAMA3-8B": "llama-3-8b",  # its own preset (the shapes of 3.1 8B with an 8K context)
    "LLAMA3-70B": "llama-3.1-70b",
    "Llama 3.1 8B": "llama-3.1-8b",
    "Llama 3.1 70B": "llama-3.1-70b",
    "Llama 3.1 405B": "llama-3.1-405b",
}

# Architecture of a model built from a row's columns, by family. GPT style: GPT-2/Megatron
# GPTModel (pre-LayerNorm with bias, biases on every linear, 4h GELU MLP, learned positions).
# MPT (MosaicML): ALiBi, no biases anywhere, LayerNorm without bias, tied embeddings.
_GPT_STYLE: dict[str, Any] = {
    "ffn_kind": "plain", "activation": "gelu", "position": "learned", "norm": "layernorm",
    "norm_bias": True, "qkv_bias": True, "attn_out_bias": True, "mlp_bias": True,
}
_MPT_STYLE: dict[str, Any] = {
    "ffn_kind": "plain", "activation": "gelu", "position": "alibi", "norm": "layernorm",
    "norm_bias": False, "tied_embeddings": True,
}
# Llama style: ModelSpec's own defaults (gated SiLU MLP, RoPE, RMSNorm, no biases, untied).
_LLAMA_STYLE: dict[str, Any] = {}
FAMILIES = ("gpt", "mpt", "llama")


@dataclass(frozen=True)
class Resolved:
    value: Any  # Device, ModelSpec, ... or None when unresolved
    notes: tuple[str, ...] = ()
    reason: str | None = None  # why it could not be resolved


def _matches(acc: Accelerator, fraction: float, stated_gb: float) -> bool:
    have = acc.memory_bytes * fraction
    return min(abs(have / 1e9 - stated_gb), abs(have / 2**30 - stated_gb)) <= 0.1 * stated_gb


def _unknown(what: str, name: str, entries: Any, matches: list[Any]) -> str:
    """The reason a name resolves to nothing (closest names) or to several (their ids)."""
    if matches:
        ids = ", ".join(sorted(m.id for m in matches))
        return f"{what} {name!r} matches {len(matches)} catalog entries ({ids}); write one id"
    near = suggestions(name, entries)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    return f"{what} {name!r} is not in the catalog{hint}"


def device_entry(name: str, catalog: Catalog) -> MeasuredDevice | str:
    """The catalog device a name means: the catalog lookup when it finds exactly one (with the
    table's note when the table agrees), else the explicit table, else the reason."""
    found = catalog_matches(name, catalog.accelerators)
    table = MEASURED_NAMES.get(name)
    if len(found) == 1:
        if table is not None and table.catalog_id == found[0].id:
            return table
        return MeasuredDevice(found[0].id)
    if table is not None:
        return table
    return _unknown("accelerator", name, catalog.accelerators, found)


def resolve_device(name: str, catalog: Catalog, exclude: str | None = None,
                   memory_gb: float | None = None) -> Resolved:
    """The catalog device for a row's accelerator name; ``memory_gb`` (the row's verified
    ``accel_mem_GB``) picks a :data:`MEMORY_VARIANTS` entry when it matches that one and not
    the name's default."""
    dev = device_entry(name, catalog)
    if isinstance(dev, str):
        return Resolved(None, reason=dev)
    if dev.catalog_id is None:
        return Resolved(None, reason=f"accelerator {name!r} has no catalog entry ({dev.note})")
    acc = catalog.accelerators.get(dev.catalog_id)
    if acc is None:
        return Resolved(None, reason=f"catalog has no accelerator {dev.catalog_id!r}")
    notes = [f"{name} -> {acc.id}" + (f" ({dev.note})" if dev.note else "")]
    if memory_gb is not None and not _matches(acc, dev.fraction, memory_gb):
        variants = [catalog.accelerators[v] for v in MEMORY_VARIANTS.get(acc.id, ())
                    if v in catalog.accelerators]
        fit = [v for v in variants if _matches(v, dev.fraction, memory_gb)]
        if fit:
            acc = fit[0]
            notes = [f"{name} with {memory_gb:g} GB (accel_mem_GB) -> {acc.id}"]
    return Resolved(Device.of(acc, fraction=dev.fraction, exclude=exclude), tuple(notes))


def memory_note(acc: Accelerator, fraction: float, stated_gb: float | None) -> str | None:
    """A note when the row's stated memory disagrees with the catalog device's by > 10 %."""
    if stated_gb is None or _matches(acc, fraction, stated_gb):
        return None
    return (f"row states {stated_gb:g} GB of device memory; {acc.id} has "
            f"{acc.memory_bytes * fraction / 1e9:.0f} GB: the catalog variant may be the wrong "
            "one")


def _dims_note(spec: ModelSpec, arch: Arch) -> str | None:
    pairs = (("layers", arch.layers, spec.n_layers), ("hidden", arch.hidden, spec.d_model),
             ("heads", arch.heads, spec.n_heads), ("kv_heads", arch.kv_heads, spec.kv_heads),
             ("ffn_hidden", arch.ffn_hidden, spec.ffn_dim), ("vocab", arch.vocab,
                                                             spec.vocab_size))
    diff = [f"{k} {row} vs {have}" for k, row, have in pairs if row is not None and row != have]
    return f"row and preset {spec.id} differ: {', '.join(diff)}" if diff else None


def model_preset(name: str, catalog: Catalog) -> tuple[str | None, str | None]:
    """(preset id, None): the catalog lookup when it finds exactly one, else
    :data:`MODEL_NAMES`; (None, reason) when the name matches several presets; (None, None)
    when the name is empty or matches nothing."""
    if not name.strip():
        return None, None
    found = catalog_matches(name, catalog.models)
    if len(found) == 1:
        return found[0].id, None
    if name in MODEL_NAMES:
        return MODEL_NAMES[name], None
    # a fine-tune names its base model first: 'LLAMA2-7B LoRA (SQuAD v1.1 packed)'
    base = re.sub(r"\s+q?lora\b.*$", "", name, flags=re.IGNORECASE)
    if base != name and base.strip() and not found:
        return model_preset(base, catalog)
    return None, _unknown("model", name, catalog.models, found) if found else None


def resolve_model(name: str, arch: Arch, catalog: Catalog, seq_len: int | None,
                  megatron: bool, family: str | None = None) -> Resolved:
    """A catalog preset (catalog lookup, then :data:`MODEL_NAMES`), else a ModelSpec built from
    the row's dimensions in the ``family``'s style (``gpt``, ``mpt``, ``llama``; unstated: MPT
    style for MPT names, else GPT style), else a reason."""
    pid, ambiguous = model_preset(name, catalog)
    if ambiguous:
        return Resolved(None, reason=ambiguous)
    if pid is not None:
        spec = catalog.models.get(pid)
        if spec is None:
            return Resolved(None, reason=f"model preset {pid!r} is not in the catalog")
        note = _dims_note(spec, arch)
        return Resolved(spec, (f"model preset {pid}",) + ((note,) if note else ()))
    need = {"layers": arch.layers, "hidden": arch.hidden, "heads": arch.heads,
            "vocab": arch.vocab}
    if family == "llama":
        need["ffn_hidden"] = arch.ffn_hidden
    missing = [k for k, v in need.items() if v is None]
    if missing:
        if not name.strip():
            return Resolved(None, reason=f"no model named and the row lacks {', '.join(missing)}")
        # with no dimensions at all the name is all there is: it may be a typo
        near = ([m for m in suggestions(name, catalog.models)
                 if same_size(name, catalog.models[m])] if len(missing) == len(need) else [])
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        return Resolved(None, reason=f"model {name!r}: no catalog preset{hint} and the row "
                                     f"lacks {', '.join(missing)}")
    assert arch.hidden and arch.heads and arch.layers and arch.vocab
    fam = family or ("mpt" if name.lower().startswith("mpt") else "gpt")
    style = dict({"mpt": _MPT_STYLE, "llama": _LLAMA_STYLE}.get(fam, _GPT_STYLE))
    notes = []
    if megatron and fam == "gpt":
        style["tied_embeddings"] = True
    ffn = arch.ffn_hidden or 4 * arch.hidden
    if arch.ffn_hidden is None:
        notes.append("ffn_hidden not stated: 4 x hidden assumed")
    # max_seq_len only sizes learned position tables (GPT style): the row's own sequence, or
    # GPT-3's 2048 context (Brown et al. 2020, sec. 2.1) when the row gives none
    max_seq = seq_len or 2048
    if not seq_len and fam == "gpt":
        notes.append("sequence length not stated: GPT-3's 2048 assumed for position tables")
    label = name or f"{fam}-{arch.layers}x{arch.hidden}"
    data = {"id": f"row-{re.sub(r'[^a-z0-9.]+', '-', label.lower()).strip('-')}",
            "name": label, "family": fam, "n_layers": arch.layers, "d_model": arch.hidden,
            "n_heads": arch.heads, "n_kv_heads": arch.kv_heads, "ffn_dim": ffn,
            "vocab_size": arch.vocab, "max_seq_len": max_seq, **style}
    try:
        spec = ModelSpec.model_validate(data)
    except ValidationError as e:
        msg = str(e.errors()[0]["msg"]).removeprefix("Value error, ")
        return Resolved(None, reason=f"model {label!r}: the row's dimensions are invalid ({msg})")
    kind = {"mpt": "MPT style (ALiBi, no biases, LayerNorm without bias, tied embeddings)",
            "llama": "Llama style (gated SiLU MLP, RoPE, RMSNorm, no biases, untied embeddings)"
            }.get(fam, "GPT style (plain GELU MLP, learned positions, LayerNorm and biases"
                  + (", tied embeddings as Megatron GPT)" if megatron else
                     ", untied embeddings)"))
    notes.insert(0, f"no preset for {label!r}: built from the row's dimensions, {kind}")
    return Resolved(spec, tuple(notes))


def inference_framework(text: str) -> Framework:
    t = text.lower()
    if "tensorrt" in t:
        return Framework.TENSORRT_LLM
    if "gpt-fast" in t:
        return Framework.TORCH_COMPILE
    if "vllm" in t:
        return Framework.VLLM
    return Framework.EAGER


# TensorRT-LLM releases before 0.7 stream an 8-bit KV group once per query head in decode
# (cost/framework.py ``decode_kv_per_query_head``; TensorRT-LLM PR #524 added the MMHA
# optimization for MQA/GQA in Dec 2023, after v0.6.1)
TRTLLM_GQA_DECODE_SHARED_FROM = (0, 7)
_VERSION = re.compile(r"v?(\d+)\.(\d+)")


def inference_profile(text: str) -> tuple[FrameworkProfile, list[str]]:
    """The row's framework as a profile with its release's named features, and notes."""
    after = re.search(r"tensorrt-llm[\s:/-]*(v?\d+\.\d+)", text.lower())
    fw = release_stack(inference_framework(text), after.group(1) if after else "")
    prof = framework_profile(fw)
    if fw is Framework.TENSORRT_LLM and (m := _VERSION.search(text.lower())):
        version = (int(m.group(1)), int(m.group(2)))
        if version < TRTLLM_GQA_DECODE_SHARED_FROM:
            return replace(prof, decode_kv_per_query_head=True), [
                f"TensorRT-LLM {version[0]}.{version[1]} (< 0.7): decode attention streams an "
                "8-bit KV group once per query head (no MQA/GQA-optimized MMHA yet)"]
    return prof, []


def training_framework(text: str) -> Framework:
    t = text.lower()
    return Framework.MEGATRON if ("megatron" in t or "nemo" in t) else Framework.EAGER


@dataclass(frozen=True)
class InferencePrecision:
    weight: DType
    act: DType
    kv: DType
    quant_group: int
    notes: tuple[str, ...]


# the run format's precision words (docs/validate-format.md, canonical.PRECISIONS) that a
# transcription's precision column writes: the 4-bit block formats as the source names them
# (NVIDIA MLPerf "fp4", AMD "MXFP4"); fp4 is the part's native 4-bit format (engine/formats.py)
_DTYPE_WORDS = {"fp8": DType.FP8, "fp16": DType.FP16, "bf16": DType.BF16, "fp32": DType.FP32,
                "nvfp4": DType.NVFP4, "mxfp4": DType.MXFP4, "fp4": DType.FP4}


def _dtype_word(text: str) -> DType | None:
    m = re.match(r"\s*(nvfp4|mxfp4|fp4|fp8|fp16|bf16|fp32)\b", text.lower())
    return _DTYPE_WORDS[m.group(1)] if m else None


def inference_precision(weights: str, kv_or_compute: str, hidden: int) -> InferencePrecision | str:
    """Precision columns -> dtypes, or a reason string when the words are not understood.

    gpt-fast int8 is per output channel (``WeightOnlyInt8QuantHandler``: one scale per row of
    ``in_features`` weights), so its group is taken as ``hidden``; int4 states its group
    ("g32")."""
    w = weights.strip().lower()
    kv = _dtype_word(kv_or_compute)
    notes: list[str] = []
    if "int8" in w and "weight-only" in w:
        notes.append(f"int8 weight-only, per-channel scales (group = hidden = {hidden})")
        return InferencePrecision(DType.INT8, DType.BF16, kv or DType.BF16, hidden, tuple(notes))
    if "int4" in w and "weight-only" in w:
        m = re.search(r"\bg(\d+)\b", w)
        # 128 weights per scale: the default of AWQ (Lin et al. 2024, sec. 5.1) and GPTQ's
        # common setting, and what int4 kernels such as gpt-fast's and TensorRT-LLM's use
        group = int(m.group(1)) if m else 128
        if not m:
            notes.append("int4 group size not stated: 128 assumed (AWQ/GPTQ default)")
        return InferencePrecision(DType.INT4, DType.BF16, kv or DType.BF16, group, tuple(notes))
    dtype = _dtype_word(w)
    if dtype is None:
        return f"precision {weights!r} is not understood"
    if "?" in kv_or_compute:
        notes.append(f"KV/compute precision {kv_or_compute!r} is unverified")
    return InferencePrecision(dtype, dtype, kv or dtype, 128, tuple(notes))  # group unused


def training_dtype(text: str) -> DType | None:
    t = text.lower()
    if "fp8" in t or "float8" in t:
        return DType.FP8
    if "bf16" in t or "bfloat16" in t:
        return DType.BF16
    if "fp16" in t:
        return DType.FP16
    return None


def parse_recompute(text: str) -> Recompute | None:
    """A row's recompute column, or None when it is empty or doubtful ('?')."""
    t = text.lower().strip()
    if "?" in t:
        return None
    if "per-op" in t or "per op" in t or t == "op":  # torchtitan's selective_ac_option "op"
        return Recompute.PER_OP
    if "norm-up" in t:  # DeepSeek-V3's norms and up-projections
        return Recompute.NORM_UP
    if "selective" in t:
        return Recompute.SELECTIVE
    if "full" in t:
        return Recompute.FULL
    if t in ("none", "no", "false"):
        return Recompute.NONE
    return None


def recompute_policy(text: str, megatron: bool) -> tuple[Recompute, str | None]:
    stated = parse_recompute(text)
    if stated is not None:
        return stated, None
    if megatron:
        return Recompute.FULL, ("recompute not stated: full assumed (Megatron's "
                                "--checkpoint-activations in its published GPT runs)")
    return Recompute.NONE, "recompute not stated: none assumed"


# NeMo 1.x PEFT defaults (examples/nlp/language_modeling/tuning/conf/
# megatron_gpt_finetuning_config.yaml, ``lora_tuning``: target_modules ['attention_qkv'],
# adapter_dim 32, adapter_dropout 0.0), which its performance summary's LoRA rows ran with
NEMO_LORA = Adapters(method=Finetune.LORA, rank=32,
                     targets=frozenset({LoraTarget.Q, LoraTarget.K, LoraTarget.V}))


def run_adapters(run: Any) -> tuple[Adapters | None, str | None]:
    """The LoRA/QLoRA adapters a run names ('... LoRA' in its model or notes), with its
    stack's defaults, and the note saying which; (None, None) for a full training run."""
    text = f"{run.model} {getattr(run, 'notes', '')}".lower()
    if "lora" not in text:
        return None, None
    stated = re.search(r"\b(?:lora[_ ]r|lora rank|rank|r)\s*[=:]?\s*(\d+)\b", text)
    rank = int(stated.group(1)) if stated and int(stated.group(1)) > 0 else None
    said = f"rank {rank} as the row states" if rank else None
    if "qlora" in text:
        # QLoRA's own runs: r = 64 on every linear layer (Dettmers et al. 2023, sec. 4)
        return (Adapters(method=Finetune.QLORA, rank=rank or 64, paged_optimizer=True),
                f"QLoRA as the paper runs it ({said or 'r = 64'}, all linear layers, NF4 + "
                "double quantization, paged AdamW)")
    stack = str(getattr(run, "framework", "") or "").lower()
    if stack.startswith("nemo"):
        return (replace(NEMO_LORA, rank=rank or NEMO_LORA.rank),
                f"LoRA as NeMo 1.x defaults it (megatron_gpt_finetuning_config.yaml: "
                f"{said or 'rank 32'} on the fused QKV projection, no adapter dropout)")
    return (Adapters(rank=rank or 8),
            f"LoRA with HF PEFT's defaults ({said or 'r = 8'} on all linear layers, no dropout)")


def resolve_run(run: Any, catalog: Catalog, megatron: bool
                ) -> tuple[Any, Any, list[str], list[str]]:
    """A run's device and model (each a resolution with its reason and notes), and the reasons
    and notes every training prediction path starts from: the metric's value and the
    sequence length must be there."""
    reasons: list[str] = []
    notes: list[str] = []
    dev = resolve_device(run.accelerator, catalog, memory_gb=run.accelerator_memory_gb)
    model = resolve_model(run.model, run.arch, catalog, run.seq_len, megatron,
                          run.family.value if run.family else None)
    for res in (dev, model):
        reasons += [res.reason] if res.reason else []
        notes += res.notes
    if run.value is None:
        reasons.append("no TFLOP/s, tokens/s or MFU per device to compare")
    if run.seq_len is None:
        reasons.append("seq_len not stated")
    return dev, model, reasons, notes
