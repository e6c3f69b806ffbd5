"""Every field of a plan reaches each exporter's files or its NOT_EXPORTED list (issue 27: the
README job's top plan had ``tp_comm_overlap=True``, worth 5 % of the step, and
``export megatron`` dropped it without a word).

The fields are enumerated from the plan file's schema (``export/schema.py``'s
``PlanJobSchema`` and the mapping keys ``search/result.py`` writes), not from a hand list, so a
field added later fails here until every exporter expresses or lists it. For each exporter and
each field of its plan kind, a valid plan that differs from a base plan in that field only
(``VARIANTS``) must either change the exporter's files or launch line (expressed), or name the
field in the result's ``unsupported`` lines with the exporter declaring it in ``not_exported``
(listed), or be refused with one InputError line (a plan the framework cannot run).
"""

from __future__ import annotations

from typing import Any

import pytest

from accelmap.catalog import load_catalog
from accelmap.errors import InputError
from accelmap.export.base import (
    NEUTRAL,
    OTHER_KIND_FIELDS,
    PlanJob,
    PlanKind,
    plan_fields,
)
from accelmap.export.registry import exporters
from accelmap.export.schema import PlanJobSchema
from accelmap.search.result import (
    OPTIONAL_SERVE_KEYS,
    OPTIONAL_TRAIN_KEYS,
    SERVE_MAPPING_KEYS,
    TRAIN_MAPPING_KEYS,
)

CAT = load_catalog()

BASE: dict[PlanKind, dict[str, Any]] = {
    PlanKind.TRAIN: {"kind": "train", "model": "llama-3.1-8b", "accelerator": "h100-sxm5-80gb",
                     "devices_per_node": 8, "nodes": 2, "seq_len": 4096, "global_batch": 64,
                     "dtype": "bf16", "prompt_len": 0, "output_len": 0,
                     "framework": "megatron",
                     "mapping": {"dp": 4, "tp": 2, "pp": 2, "cp": 1, "ep": 1, "zero": 1,
                                 "micro_batch": 1, "vpp": 1, "recompute": "none",
                                 "offload": False}},
    PlanKind.SERVE: {"kind": "serve", "model": "llama-3.1-8b", "accelerator": "h100-sxm5-80gb",
                     "devices_per_node": 8, "nodes": 1, "seq_len": 2304, "global_batch": 1,
                     "dtype": "bf16", "prompt_len": 2048, "output_len": 256,
                     "framework": "vllm",
                     "mapping": {"tp": 2, "pp": 1, "ep": 1, "replicas": 4, "batch": 32,
                                 "weight_dtype": "bf16", "kv_dtype": "bf16"}},
}

# field -> what to change in the base plan (job keys at the top, mapping keys under "mapping")
VARIANTS: dict[PlanKind, dict[str, dict[str, Any]]] = {
    PlanKind.TRAIN: {
        "kind": {},  # the exporter's own kind: nothing to vary
        "model": {"model": "qwen2.5-7b"},
        "accelerator": {"accelerator": "h200-sxm"},
        "devices_per_node": {"devices_per_node": 4, "nodes": 4},
        "nodes": {"devices_per_node": 4, "nodes": 4},
        "seq_len": {"seq_len": 8192},
        "global_batch": {"global_batch": 128},
        "dtype": {"dtype": "fp8"},
        "prompt_len": {"prompt_len": 100},
        "output_len": {"output_len": 100},
        "framework": {"framework": "fsdp"},
        "finetune": {"finetune": "lora", "lora_rank": 16, "lora_targets": ["q", "v"]},
        "lora_rank": {"finetune": "lora", "lora_rank": 16, "lora_targets": ["q", "v"]},
        "lora_targets": {"finetune": "lora", "lora_rank": 16, "lora_targets": ["q", "v"]},
        "dp": {"mapping": {"dp": 2, "cp": 2}},
        "tp": {"mapping": {"dp": 2, "tp": 4}},
        "pp": {"mapping": {"dp": 2, "pp": 4}},
        "cp": {"mapping": {"dp": 2, "cp": 2}},
        "ep": {"model": "mixtral-8x7b", "mapping": {"ep": 2}},
        "zero": {"mapping": {"zero": 2}},
        "micro_batch": {"mapping": {"micro_batch": 2}},
        "vpp": {"mapping": {"vpp": 2}},
        "recompute": {"mapping": {"recompute": "full"}},
        "offload": {"mapping": {"offload": True}},
        "schedule": {"mapping": {"schedule": "zb-h1"}},
        "first_stage_layers": {"mapping": {"first_stage_layers": 15}},
        "last_stage_layers": {"mapping": {"last_stage_layers": 15}},
        "embedding_in_split": {"mapping": {"embedding_in_split": True}},
        "loss_in_split": {"mapping": {"loss_in_split": True}},
        "shard_group": {"mapping": {"zero": 3, "shard_group": 2}},
        "tp_comm_overlap": {"mapping": {"tp_comm_overlap": True}},
        "cp_comm": {"mapping": {"dp": 2, "cp": 2, "cp_comm": "allgather"}},
        "offload_activations": {"mapping": {"dp": 2, "pp": 2, "offload_activations": 4}},
    },
    PlanKind.SERVE: {
        "kind": {},
        "model": {"model": "qwen2.5-7b"},
        "accelerator": {"accelerator": "h200-sxm"},
        "devices_per_node": {"devices_per_node": 4, "nodes": 2},
        "nodes": {"devices_per_node": 4, "nodes": 2},
        "seq_len": {"seq_len": 4096},
        "global_batch": {"global_batch": 8},
        "dtype": {"dtype": "fp16"},
        "prompt_len": {"prompt_len": 1024},
        "output_len": {"output_len": 512},
        "framework": {"framework": "sglang"},
        "finetune": {},  # training only: a serving plan file has none (checked below)
        "lora_rank": {},
        "lora_targets": {},
        "tp": {"mapping": {"tp": 4, "replicas": 2}},
        "pp": {"mapping": {"pp": 2, "replicas": 2}},
        "ep": {"model": "mixtral-8x7b", "mapping": {"ep": 2}},
        "replicas": {"mapping": {"tp": 4, "replicas": 2}},
        "batch": {"mapping": {"batch": 64}},
        "weight_dtype": {"mapping": {"weight_dtype": "fp8"}},
        "kv_dtype": {"mapping": {"kv_dtype": "fp8"}},
        "max_batched_tokens": {"mapping": {"max_batched_tokens": 8192}},
    },
}


def schema_fields(kind: PlanKind) -> set[str]:
    """Every key a plan of this kind writes: the job block's (the schema) and its mapping's."""
    job = set(PlanJobSchema.model_fields) - {"mapping"}
    if kind is PlanKind.TRAIN:
        return job | set(TRAIN_MAPPING_KEYS) | set(OPTIONAL_TRAIN_KEYS)
    return job | set(SERVE_MAPPING_KEYS) | set(OPTIONAL_SERVE_KEYS)


# an exporter for fine-tunes only (torchtune) starts from a LoRA plan, and varies the adapters
LORA = {"finetune": "lora", "lora_rank": 16, "lora_targets": ["q", "v"]}
LORA_VARIANTS = {"finetune": {"finetune": "qlora"}, "lora_rank": {"lora_rank": 32},
                 "lora_targets": {"lora_targets": ["q", "k", "v", "o"]}}
ADAPTERS_ONLY = ("torchtune",)


def _plan(kind: PlanKind, change: dict[str, Any], lora: bool = False) -> PlanJob:
    base = {**BASE[kind], **(LORA if lora else {})}
    data = {**base, **{k: v for k, v in change.items() if k != "mapping"},
            "mapping": {**base["mapping"], **change.get("mapping", {})}}
    return PlanJob.from_dict(data)


def _export(name: str, job: PlanJob) -> Any:
    ex = exporters()[name]
    return ex.run(job, CAT.models[job.model])


def _names(lines: list[str], field: str) -> bool:
    return any(line.startswith(f"{field}=") or f" {field}=" in line for line in lines)


CASES = [(name, kind) for name, ex in exporters().items() for kind in ex.kinds]


@pytest.mark.parametrize("kind", list(PlanKind))
def test_the_variant_table_covers_every_schema_field(kind: PlanKind) -> None:
    assert set(VARIANTS[kind]) == schema_fields(kind)
    # the other kind's keys (a training plan's prompt length ...) are the only ones left out
    assert set(plan_fields(kind)) == schema_fields(kind) - {"kind", *OTHER_KIND_FIELDS[kind]}


@pytest.mark.parametrize(("name", "kind"), CASES, ids=[f"{n}-{k.value}" for n, k in CASES])
def test_every_plan_field_is_expressed_or_listed(name: str, kind: PlanKind) -> None:
    ex = exporters()[name]
    lora = name in ADAPTERS_ONLY
    base = _export(name, _plan(kind, {}, lora))
    silent = []
    for field in plan_fields(kind):
        change = LORA_VARIANTS[field] if lora and field in LORA_VARIANTS else VARIANTS[kind][field]
        if not change:
            continue
        try:
            job = _plan(kind, change, lora)
        except InputError:
            continue  # not a plan anyone can write (the plan file's own check)
        try:
            res = _export(name, job)
        except InputError as e:
            assert "\n" not in str(e)
            continue  # refused, with one line: the framework cannot run this plan
        # expressed: the files change, or the base plan's value was the one said unexpressible
        expressed = (res.files, res.launch) != (base.files, base.launch) or _names(
            base.unsupported, field)
        # listed: declared, and said on this export where the field has a neutral value (a
        # field without one, such as the accelerator, is declared only)
        listed = field in ex.not_exported and (_names(res.unsupported, field)
                                               or field not in NEUTRAL)
        if not (expressed or listed):
            silent.append(field)
    assert not silent, f"{name} drops {silent}: neither in its files nor in its NOT_EXPORTED"


def test_the_readme_plan_keeps_tp_comm_overlap_in_megatron() -> None:
    """The README job's top plan (llama-3.1-70b on 64 H100, tp=8 with TP overlap)."""
    job = PlanJob.from_dict({**BASE[PlanKind.TRAIN], "model": "llama-3.1-70b", "nodes": 8,
                             "mapping": {"dp": 4, "tp": 8, "pp": 2, "cp": 1, "ep": 1,
                                         "zero": 1, "micro_batch": 1, "vpp": 1,
                                         "recompute": "none", "offload": False,
                                         "tp_comm_overlap": True}})
    res = _export("megatron", job)
    assert "--tp-comm-overlap" in res.files["megatron_args.sh"]
    back = exporters()["megatron"].read_back(res.files).mapping
    assert back is not None and back.tp_comm_overlap
