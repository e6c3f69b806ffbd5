"""Hugging Face PEFT and bitsandbytes configs for a LoRA/QLoRA plan (the DeepSpeed path, which
launches an HF training script).

``adapter_config.json`` is the file PEFT itself saves and reads back (``PeftConfig`` /
``LoraConfig.from_pretrained(folder)``): ``peft_type``, ``task_type``, ``r``,
``target_modules``, ``lora_alpha``, ``lora_dropout``, ``bias`` are fields of ``LoraConfig`` and
its ``PeftConfig`` base (huggingface/peft src/peft/tuners/lora/config.py @
:data:`~accelmap.export.lora.PEFT_COMMIT`). ``target_modules`` lists the Llama-family module
names of the planned projections (``q_proj`` ... ``down_proj``).

``bnb_config.json`` holds the keyword arguments of transformers' ``BitsAndBytesConfig`` for
QLoRA's base (``BitsAndBytesConfig(**json.load(f))``; src/transformers/utils/
quantization_config.py @ ``TRANSFORMERS_COMMIT``): 4-bit NormalFloat with double quantization
and 16-bit compute, as Dettmers et al. 2023 (QLoRA, sec. 3) and the plan's memory model assume.
Under ZeRO-3 the 4-bit weights are packed in the compute dtype (``bnb_4bit_quant_storage``) so
that DeepSpeed can shard them: PEFT docs/source/accelerate/deepspeed.md @ ``PEFT_DOCS_COMMIT``,
"Use PEFT QLoRA and DeepSpeed with ZeRO3".
"""

from __future__ import annotations

import json
from typing import Any

from accelmap.export.base import PlanJob
from accelmap.export.lora import LORA_ALPHA, LORA_BIAS, LORA_DROPOUT, ordered, targets
from accelmap.units import DType
from accelmap.workload import Finetune, LoraTarget

TRANSFORMERS_COMMIT = "000e2231167497a632d7661a78f13e27b5d67a5d"
PEFT_DOCS_COMMIT = "09802c1b43fff9b087be42e149d70e5350ff407a"

ADAPTER_FILE = "adapter_config.json"  # PEFT's CONFIG_NAME
BNB_FILE = "bnb_config.json"

# PEFT target_modules names of the Llama-family projections (LlamaAttention, LlamaMLP)
MODULE = {t: f"{t.value}_proj" for t in LoraTarget}
TARGET = {name: t for t, name in MODULE.items()}

# BitsAndBytesConfig accepts torch dtype names as strings (getattr(torch, name))
TORCH_DTYPE = {DType.BF16: "bfloat16", DType.FP16: "float16", DType.FP32: "float32"}

# transformers training_args.py OptimizerNames.PAGED_ADAMW: bitsandbytes' paged 32-bit AdamW
PAGED_OPTIMIZER = "paged_adamw_32bit"


def lora_config(job: PlanJob) -> dict[str, Any]:
    """adapter_config.json: the planned rank and targets, PEFT's defaults for the rest."""
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": job.lora_rank,
        "target_modules": [MODULE[t] for t in ordered(targets(job))],
        "lora_alpha": LORA_ALPHA,
        "lora_dropout": LORA_DROPOUT,
        "bias": LORA_BIAS,
    }


def bnb_config(job: PlanJob, zero3: bool) -> dict[str, Any]:
    """bnb_config.json: QLoRA's NF4 base with double quantization and 16-bit compute."""
    compute = TORCH_DTYPE.get(job.dtype, "bfloat16")  # FP8 GEMMs: the base computes in bf16
    cfg: dict[str, Any] = {
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True,
        "bnb_4bit_compute_dtype": compute,
    }
    if zero3:  # deepspeed.md: the storage dtype equals the model's dtype so ZeRO-3 can shard
        cfg["bnb_4bit_quant_storage"] = compute
    return cfg


def files(job: PlanJob, zero3: bool) -> dict[str, str]:
    """The PEFT (and, for QLoRA, bitsandbytes) files of a fine-tune plan."""
    out = {ADAPTER_FILE: json.dumps(lora_config(job), indent=2) + "\n"}
    if job.finetune is Finetune.QLORA:
        out[BNB_FILE] = json.dumps(bnb_config(job, zero3), indent=2) + "\n"
    return out


def read_back(files: dict[str, str]) -> tuple[Finetune | None, int | None,
                                               frozenset[LoraTarget] | None]:
    """(method, rank, targets) that adapter_config.json and bnb_config.json set up."""
    if ADAPTER_FILE not in files:
        return None, None, None
    cfg = json.loads(files[ADAPTER_FILE])
    bnb = json.loads(files[BNB_FILE]) if BNB_FILE in files else {}
    method = Finetune.QLORA if bnb.get("load_in_4bit") else Finetune.LORA
    return method, int(cfg["r"]), frozenset(TARGET[m] for m in cfg["target_modules"])
