"""LoRA/QLoRA in exports: what the exporters share when a plan fine-tunes with adapters.

A plan file's job names the method (``finetune``: lora or qlora), the adapter rank and the
projections that carry adapters (``lora_targets``: q, k, v, o, gate, up, down; see
:class:`~accelmap.export.base.Job`). Everything else an adapter config asks for is not planned,
so the exporters write the same defaults, HF PEFT's ``LoraConfig`` ones (huggingface/peft
src/peft/tuners/lora/config.py @ ``PEFT_COMMIT``): ``lora_alpha = 8``, ``lora_dropout = 0.0``,
``bias = "none"``. ``lora_alpha = 2 r`` is a common choice, but it changes only the scale of the
update (alpha / r), not the time or memory the plan estimates, so it is left to the user and said
in a note.

A framework that cannot train adapters would write a config that trains every weight: a
different job with far more memory. Such an export is refused (:func:`refuse`) rather than
written with a warning, unless the exporter also writes a route that does train the adapters
(Megatron-LM: NeMo's PEFT overrides), in which case the unsupported list says which file is
which.
"""

from __future__ import annotations

from typing import NoReturn

from accelmap.errors import InputError
from accelmap.export.base import PlanJob
from accelmap.workload import Finetune, LoraTarget

PEFT_COMMIT = "00a4d0808579f9bcac82c6b329cb8894bcfbd7fd"
PEFT_CONFIG_URL = (f"https://github.com/huggingface/peft/blob/{PEFT_COMMIT}/"
                   "src/peft/tuners/lora/config.py")

# LoraConfig defaults at PEFT_COMMIT: lora_alpha = 8, lora_dropout = 0.0, bias = "none"
LORA_ALPHA = 8
LORA_DROPOUT = 0.0
LORA_BIAS = "none"

ATTENTION = frozenset({LoraTarget.Q, LoraTarget.K, LoraTarget.V, LoraTarget.O})
MLP = frozenset({LoraTarget.GATE, LoraTarget.UP, LoraTarget.DOWN})
ALL = ATTENTION | MLP


def has_adapters(job: PlanJob) -> bool:
    """True for a LoRA or QLoRA plan."""
    return job.finetune is not Finetune.FULL


def targets(job: PlanJob) -> frozenset[LoraTarget]:
    return frozenset(job.lora_targets)


def ordered(chosen: frozenset[LoraTarget] | set[LoraTarget]) -> list[LoraTarget]:
    """Targets in the enum's order (q, k, v, o, gate, up, down)."""
    return [t for t in LoraTarget if t in chosen]


def adapter_fields(job: PlanJob) -> str:
    """``finetune=..., lora_rank=..., lora_targets=...``: the head of an unsupported sentence."""
    names = ",".join(t.value for t in ordered(targets(job)))
    return f"finetune={job.finetune.value}, lora_rank={job.lora_rank}, lora_targets={names}"


def targets_field(chosen: frozenset[LoraTarget] | set[LoraTarget]) -> str:
    return "lora_targets=" + ",".join(t.value for t in ordered(chosen))


def alpha_note(key: str) -> str:
    """The note every adapter export carries: alpha and dropout are PEFT's defaults."""
    return (f"{key} = {LORA_ALPHA} and dropout 0.0 are HF PEFT's LoraConfig defaults (the plan "
            "does not set them); lora_alpha = 2 x rank is a common choice and changes only the "
            "update's scale (alpha / rank), not the estimated time or memory")


def refuse(job: PlanJob, framework: str, why: str, instead: str) -> NoReturn:
    """One InputError line for a fine-tune the framework's files would get wrong."""
    raise InputError(f"{framework} cannot train finetune={job.finetune.value}: {why}; "
                     f"export {instead} for this plan")
