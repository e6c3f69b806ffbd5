"""Request bodies of the JSON endpoints: the fields are the CLI's flags (``--global-batch-tokens``
is ``global_batch_tokens``), with the CLI's defaults and bounds. Unknown fields are refused, so
a typo is an error, not a silently ignored option."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Bounds that keep every number inside what the engine can compute (no overflow, no value
# beyond any catalog part or model) and every name short: checked before any work.
NAME = 200  # characters in a name, a spec or a count such as '4M'
BIG = 1_000_000  # devices, parallel degrees, batch
TOKENS = 100_000_000  # a sequence, prompt or output (above every catalog model's context)


class _Form(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False,
                              str_max_length=NAME)


class EstimateForm(_Form):
    """`accelmap estimate`: one model on one accelerator or cluster, a batch estimate."""

    model: str = Field(description="Model preset, e.g. llama-3.1-8b.")
    hw: str | None = Field(None, description="Accelerator id or name (or use cluster).")
    cluster: str | None = Field(None, description="Cluster: 8xH100, dgx-h100, 64xH100 ...")
    scale_out: str | None = Field(None, max_length=200, description="Inter-node network in "
                                  "place of the preset's: '400 Gb/s per GPU', '4 x 100 Gb/s'.")
    devices: int | None = Field(None, ge=1, le=BIG, description="With hw: this many devices.")
    train: bool = Field(False, description="Training step (true) or serving (false).")
    batch: int = Field(1, ge=1, le=BIG)
    seq: int = Field(2048, ge=1, le=TOKENS)
    prompt: int = Field(512, ge=1, le=TOKENS)
    output: int = Field(128, ge=0, le=TOKENS)
    dtype: str = "bf16"
    fp8_scaling: str = Field("tensorwise", description="FP8 training: tensorwise or rowwise "
                             "(torchao's row-wise recipe; with train and dtype fp8).")
    grad_accumulation: str = Field("fused", description="Training: how the stack adds "
                                   "micro-batch gradients up: fused, autograd or fp32-copy "
                                   "(DeepSpeed's BF16_Optimizer).")
    pp_sends: str = Field("batched", description="Training: how pipeline stages send to each "
                          "other: batched (Megatron), blocking (DeepSpeed's pipeline engine) "
                          "or blocking-whole-grad (DeepSpeed before 0.5.4).")
    weights: str = "bf16"
    kv: str | None = None
    group: int = Field(128, ge=1, le=BIG)
    framework: str | None = None
    optimizer: str = "adamw"
    recompute: str = "none"
    flash: bool = True
    tokens: str | None = None
    finetune: str = "full"
    lora_rank: int | None = Field(None, ge=1, le=65536)
    lora_targets: str | None = None
    moe_imbalance: float = Field(1.0, ge=1.0, le=1000.0)
    tp: int | None = Field(None, ge=1, le=BIG)
    pp: int | None = Field(None, ge=1, le=BIG)
    dp: int | None = Field(None, ge=1, le=BIG)
    cp: int = Field(1, ge=1, le=BIG)
    ep: int | None = Field(None, ge=1, le=BIG)
    zero: int | None = Field(None, ge=0, le=3)
    micro_batch: int | None = Field(None, ge=1, le=BIG)
    vpp: int = Field(1, ge=1, le=BIG)
    schedule: str | None = None
    no_sp: bool = False
    tp_overlap: bool = False
    cp_comm: str = Field("p2p", max_length=20, description="Training with cp > 1: the K/V "
                         "exchange, p2p (ring attention) or all-gather (Llama 3's, exposed).")
    offload_activations: int = Field(0, ge=0, le=BIG, description="Training: layers per stage "
                                     "whose activations go to host memory (Megatron-Core "
                                     "--cpu-offloading-num-layers).")
    force_tp: bool = False
    replicas: int | None = Field(None, ge=1, le=BIG)
    dp_attention: bool = Field(False, description="Serving a MoE model: attention "
                               "data-parallel over the tp group (SGLang --enable-dp-attention).")


class PlanForm(_Form):
    """`accelmap plan`: search every mapping on a cluster (or on each accelerator of --hw)."""

    model: str = Field(description="Model preset, e.g. llama-3.1-8b.")
    cluster: str | None = Field(None, description="Cluster: 8xH100, dgx-h100, 64xH100 ...")
    hw: str | None = Field(None, description="Accelerator(s): a name, a comma list or any.")
    devices: int | None = Field(None, ge=1, le=BIG)
    train: bool = True
    seq: int = Field(4096, ge=1, le=TOKENS)
    global_batch_tokens: str = "4M"
    tokens: str | None = None
    deadline: str | None = Field(None, description="Smallest cluster that trains tokens "
                                 "within this time (e.g. 60d).")
    prompt: int = Field(2048, ge=1, le=TOKENS)
    output: int = Field(256, ge=1, le=TOKENS)
    scenario: str | None = None
    # no lower bound here: the API's check gives the CLI's sentence (a rate of 0 or less)
    rate: float | None = Field(None, le=1e9)
    concurrency: int | None = None  # checked by the API (serving.scenario.Load), as the CLI's
    requests: int | None = Field(None, ge=1, le=20000)
    max_seqs: int | None = Field(None, ge=1, le=BIG)
    ttft: str | None = None
    tpot: str | None = None
    objective: str | None = None
    top: int = Field(10, ge=1, le=100)
    framework: str | None = None
    offload: bool = False
    force_tp: bool = False
    include_tight: bool = False
    allow_quantization: bool = False
    finetune: str = "full"
    lora_rank: int | None = Field(None, ge=1, le=65536)
    lora_targets: str | None = None


class CompareForm(_Form):
    """`accelmap compare`: every accelerator on one model."""

    model: str
    train: bool = False
    hw: str = "all"
    device_class: str | None = Field(None, alias="class")
    batch: int = Field(1, ge=1, le=BIG)
    prompt: int = Field(2048, ge=1, le=TOKENS)
    output: int = Field(256, ge=1, le=TOKENS)
    seq: int = Field(4096, ge=1, le=TOKENS)
    global_batch_tokens: str = "4M"
    precision: str | None = None
    best_precision: bool = False
    devices: int | None = Field(None, ge=1, le=BIG)
    # no lower bound here: the API's check gives the CLI's sentence (a budget of 0 or less)
    budget_usd_h: float | None = Field(None, le=1e9)
    objective: str | None = None
    framework: str | None = None


class FrontierForm(_Form):
    """`accelmap frontier`: tokens/s per device against tokens/s per user, per accelerator."""

    model: str
    hw: str | None = None
    cluster: str | None = None
    devices: int | None = Field(None, ge=1, le=BIG)
    isl: int = Field(1024, ge=1, le=TOKENS)
    osl: int = Field(1024, ge=1, le=TOKENS)
    weights: str = "bf16"
    moe_weights: str | None = None
    kv: str | None = None
    # no bounds here: the API's check gives the CLI's sentence
    concurrency: str | None = None
    mtp: int | None = None
    draft: str | None = None
    accept: float | None = None
    draft_len: str = "auto"
    framework: str | None = None


class ExportForm(_Form):
    """`accelmap export`: a plan as launch files, all in one zip. ``plan`` is what
    `accelmap plan --json` (or POST /api/plan) returned; ``format`` one exporter, or every
    exporter that writes this kind of plan when left out."""

    plan: dict[str, Any]
    index: int = Field(0, ge=0, le=BIG)
    format: str | None = None
