"""Request bodies of the JSON endpoints: the fields are the CLI's flags (``--global-batch-tokens``
is ``global_batch_tokens``), with the CLI's defaults and bounds. Unknown fields are refused, so
a typo is an error, not a silently ignored option."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Form(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class EstimateForm(_Form):
    """`accelmap estimate`: one model on one accelerator or cluster, a batch estimate."""

    model: str = Field(description="Model preset, e.g. llama-3.1-8b.")
    hw: str | None = Field(None, description="Accelerator id or name (or use cluster).")
    cluster: str | None = Field(None, description="Cluster: 8xH100, dgx-h100, 64xH100 ...")
    devices: int | None = Field(None, ge=1, description="With hw: this many devices.")
    train: bool = Field(False, description="Training step (true) or serving (false).")
    batch: int = Field(1, ge=1)
    seq: int = Field(2048, ge=1)
    prompt: int = Field(512, ge=1)
    output: int = Field(128, ge=0)
    dtype: str = "bf16"
    weights: str = "bf16"
    kv: str | None = None
    group: int = Field(128, ge=1)
    framework: str | None = None
    optimizer: str = "adamw"
    recompute: str = "none"
    flash: bool = True
    tokens: str | None = None
    finetune: str = "full"
    lora_rank: int | None = Field(None, ge=1)
    lora_targets: str | None = None
    moe_imbalance: float = Field(1.0, ge=1.0)
    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    dp: int | None = Field(None, ge=1)
    cp: int = Field(1, ge=1)
    ep: int = Field(1, ge=1)
    zero: int | None = Field(None, ge=0, le=3)
    micro_batch: int | None = Field(None, ge=1)
    vpp: int = Field(1, ge=1)
    schedule: str | None = None
    no_sp: bool = False
    tp_overlap: bool = False
    force_tp: bool = False
    replicas: int = Field(1, ge=1)


class PlanForm(_Form):
    """`accelmap plan`: search every mapping on a cluster (or on each accelerator of --hw)."""

    model: str = Field(description="Model preset, e.g. llama-3.1-8b.")
    cluster: str | None = Field(None, description="Cluster: 8xH100, dgx-h100, 64xH100 ...")
    hw: str | None = Field(None, description="Accelerator(s): a name, a comma list or any.")
    devices: int | None = Field(None, ge=1)
    train: bool = True
    seq: int = Field(4096, ge=1)
    global_batch_tokens: str = "4M"
    tokens: str | None = None
    prompt: int = Field(2048, ge=1)
    output: int = Field(256, ge=1)
    scenario: str | None = None
    rate: float | None = None
    requests: int | None = Field(None, ge=1, le=20000)
    max_seqs: int | None = Field(None, ge=1)
    ttft: str | None = None
    tpot: str | None = None
    objective: str | None = None
    top: int = Field(10, ge=1, le=100)
    framework: str | None = None
    offload: bool = False
    force_tp: bool = False
    include_tight: bool = False
    finetune: str = "full"
    lora_rank: int | None = Field(None, ge=1)
    lora_targets: str | None = None


class CompareForm(_Form):
    """`accelmap compare`: every accelerator on one model."""

    model: str
    train: bool = False
    hw: str = "all"
    device_class: str | None = Field(None, alias="class")
    batch: int = Field(1, ge=1)
    prompt: int = Field(2048, ge=1)
    output: int = Field(256, ge=1)
    seq: int = Field(4096, ge=1)
    global_batch_tokens: str = "4M"
    precision: str | None = None
    best_precision: bool = False
    devices: int | None = Field(None, ge=1)
    budget_usd_h: float | None = Field(None, gt=0)
    objective: str | None = None
    framework: str | None = None


class ExportForm(_Form):
    """`accelmap export`: a plan as launch files, all in one zip. ``plan`` is what
    `accelmap plan --json` (or POST /api/plan) returned; ``format`` one exporter, or every
    exporter that writes this kind of plan when left out."""

    plan: dict[str, Any]
    index: int = Field(0, ge=0)
    format: str | None = None
